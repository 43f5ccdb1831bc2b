"""The content-keyed cache of repeated deterministic computations (a selection's candidates
on one fold) and its users: the same results as computing afresh."""

import numpy as np
import pytest

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


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 epochs
def test_gsm_special_case_fitted_once_for_every_start_mu_and_as_a_fresh_fit():
    """GSM trained from its Euclidean case: the case is one fit for every ``start_mu`` (it
    acts only on the form trained from it); the models equal those fitted with nothing
    kept."""
    from crossmetric import GSM
    from crossmetric.learners import _gsm_reduction, _gsm_training
    from crossmetric.pairs import make_pairs
    from crossmetric.pairs._pair_data import PairData

    rng = np.random.RandomState(0)
    n = 40
    Z = rng.randn(n, 4)
    X, Y = Z @ rng.randn(4, 6) + 0.3 * rng.randn(n, 6), Z @ rng.randn(4, 6)
    pairs, y = make_pairs(np.arange(n), np.arange(n), n_negatives=3, random_state=0)
    data = PairData(X, Y, pairs[:, 0], pairs[:, 1])

    def fit(start_mu):
        est = GSM(n_components=4, start_from="euclidean", start_mu=start_mu, max_iter=5,
                  early_stopping=False, random_state=0)
        est._fit(data, y)
        return est

    def starts(est):
        return _gsm_training.fit_start(est, data, y, np.random.RandomState(1))[0]

    _gsm_training._FITTED_STARTS.clear()
    # as a selection fits them: the samples also given as the preprocessor
    a, b = (GSM(n_components=4, start_from="euclidean", start_mu=m, max_iter=5,
                early_stopping=False, preprocessor=(X, Y)) for m in (0.1, "hold"))
    assert starts(a) is starts(b)
    kept = [fit(m) for m in (None, 0.1, 1.0)]
    for model, m in zip(kept, (None, 0.1, 1.0), strict=True):
        _gsm_training._FITTED_STARTS.clear()
        _gsm_reduction._PCA_REDUCERS.clear()
        fresh = fit(m)
        for k in model.params_:
            np.testing.assert_array_equal(model.params_[k], fresh.params_[k])
