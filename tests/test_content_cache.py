"""The content-keyed cache of repeated deterministic computations (a selection's candidates
on one fold) and its users: the same results as computing afresh."""

import numpy as np

from crossmetric._utils.content_cache import ContentCache, content_key


def test_content_key_tells_arrays_by_dtype_shape_and_bytes_and_values_by_repr():
    a = np.arange(6.0).reshape(2, 3)
    assert content_key(a, 2, None) == content_key(a.copy(), 2, None)
    assert content_key(a, 2) != content_key(a.reshape(3, 2), 2)
    assert content_key(a, 2) != content_key(a.astype(np.float32), 2)
    assert content_key(a, 2) != content_key(a, 2.5)
    assert content_key(np.arange(3)) != content_key((0, 1, 2))


def test_content_cache_keeps_the_last_results_read_only_and_computes_the_rest():
    cache, calls = ContentCache(2), []

    def compute(v):
        calls.append(v)
        return np.full(3, float(v)), v

    first = cache.get((1,), lambda: compute(1))
    assert cache.get((1,), lambda: compute(1)) is first and calls == [1]
    assert not first[0].flags.writeable
    cache.get((2,), lambda: compute(2))
    cache.get((3,), lambda: compute(3))  # the oldest (1) is let go
    assert len(cache) == 2
    cache.get((1,), lambda: compute(1))
    assert calls == [1, 2, 3, 1]
    assert cache.get(None, lambda: compute(4)) is not cache.get(None, lambda: compute(4))
    cache.clear()
    assert len(cache) == 0


def test_gsm_pca_reducer_kept_equals_a_fresh_fit():
    from crossmetric.learners import _gsm_reduction as red

    rng = np.random.RandomState(0)
    Z = rng.randn(20, 30)
    red._PCA_REDUCERS.clear()
    kept = red.fit_reducer(Z, "X", n_components=5, whiten=False, feature_norm=2.0,
                           rng=np.random.RandomState(3))
    again = red.fit_reducer(Z.copy(), "X", n_components=5, whiten=False, feature_norm=2.0,
                            rng=np.random.RandomState(3))
    assert again is kept
    red._PCA_REDUCERS.clear()
    fresh = red.fit_reducer(Z, "X", n_components=5, whiten=False, feature_norm=2.0,
                            rng=np.random.RandomState(3))
    assert fresh is not kept and fresh[2] == kept[2]
    np.testing.assert_array_equal(fresh[1].components_, kept[1].components_)
    other = red.fit_reducer(Z, "X", n_components=4, whiten=False, feature_norm=2.0,
                            rng=np.random.RandomState(3))
    assert other[1].n_components_ == 4
