"""retrieval.exhaustive_search (no faiss needed): the blockwise top-k equals a full sort of
cross_distance, for any score."""

import numpy as np
import pytest

from crossmetric.retrieval import exhaustive_search


class _Bilinear:
    """A model whose distance is no l2 distance: -x^T W y (as a similarity-based learner)."""

    def __init__(self, W):
        self.W = W
        self.calls = []

    def cross_distance(self, Q, D):
        self.calls.append(len(Q))
        return -(np.asarray(Q) @ self.W @ np.asarray(D).T)


def _obvious(model, Q, D, k):
    full = model.cross_distance(Q, D)
    ids = np.argsort(full, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(full, ids, axis=1), ids


@pytest.mark.parametrize("block_size", [1, 50, 1 << 22])
def test_equals_a_full_sort_in_any_block_size(block_size):
    rng = np.random.default_rng(0)
    Q, D = rng.normal(size=(23, 4)), rng.normal(size=(17, 3))
    model = _Bilinear(rng.normal(size=(4, 3)))
    dist, ids = exhaustive_search(model, Q, D, 5, block_size=block_size)
    blocks = list(model.calls)
    want_d, want_i = _obvious(model, Q, D, 5)
    np.testing.assert_array_equal(ids, want_i)
    np.testing.assert_allclose(dist, want_d)
    assert ids.dtype == np.int64 and dist.shape == (23, 5)
    # blocks of block_size // n_database query rows (at least one)
    rows = min(23, max(1, block_size // 17))
    assert blocks[0] == rows and sum(blocks) == 23


def test_k_is_clamped_and_checked():
    rng = np.random.default_rng(1)
    model = _Bilinear(np.eye(2))
    Q, D = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    dist, ids = exhaustive_search(model, Q, D, 10)
    assert ids.shape == (3, 4) and sorted(ids[0].tolist()) == [0, 1, 2, 3]
    assert (np.diff(dist, axis=1) >= 0).all()
    with pytest.raises(ValueError, match="k"):
        exhaustive_search(model, Q, D, 0)
    with pytest.raises(ValueError, match="database is empty"):
        exhaustive_search(model, Q, D[:0], 1)
    assert exhaustive_search(model, Q[:0], D, 2)[1].shape == (0, 2)
