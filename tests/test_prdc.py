"""PRDC: triplets from pairs, the column objective vs a slow loop and finite differences."""

import numpy as np
import pytest

from crossmetric import Euclidean
from crossmetric.learners.prdc import PRDC, prdc_objective, triplets_from_pairs
from crossmetric.pairs import make_pairs


def test_triplets_are_positive_and_negative_pairs_sharing_a_sample():
    i = np.array([0, 2, 0, 1, 4, 3])
    j = np.array([1, 0, 3, 4, 2, 5])
    y = np.array([1, 1, -1, -1, -1, 1])
    T = triplets_from_pairs(i, j, y)
    slow = set()
    trip = list(zip(i, j, y, strict=True))
    for a in range(6):
        P = {b if a == c else c for c, b, s in trip if s == 1 and a in (c, b)}
        N = {b if a == c else c for c, b, s in trip if s == -1 and a in (c, b)}
        slow |= {(a, p, n) for p in P for n in N}
    assert {tuple(t) for t in T} == slow and len(T) == len(slow)


def test_column_objective_matches_loop_and_gradient():
    rng = np.random.RandomState(0)
    dp, dn = np.abs(rng.randn(30, 5)), np.abs(rng.randn(30, 5))
    off = 0.3 * rng.randn(30)
    w = rng.randn(5) * 0.5
    loss, grad = prdc_objective(w, dp, dn, off, 0.01)
    slow = np.mean([np.log1p(np.exp(off[t] + (dp[t] @ w) ** 2 - (dn[t] @ w) ** 2))
                    for t in range(30)]) + 0.005 * w @ w
    assert loss == pytest.approx(slow, rel=1e-12)
    eps = 1e-6
    fd = [(prdc_objective(w + eps * e, dp, dn, off, 0.01)[0]
           - prdc_objective(w - eps * e, dp, dn, off, 0.01)[0]) / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    lab = np.r_[np.repeat(np.arange(6), 6), np.repeat(np.arange(6), 5)]
    X = rng.rand(6, 5)[lab] * 3 + 0.3 * rng.rand(66, 5)
    X[:, 4] = 4 * rng.rand(66)
    pairs, y = make_pairs(lab[:36], n_negatives=2, random_state=0)
    pte, yte = make_pairs(lab[36:], random_state=1)
    return X, pairs, y, pte + 36, yte


def test_learns_orthogonal_columns_and_beats_euclidean(data):
    X, pairs, y, pte, yte = data
    m = PRDC(random_state=0, preprocessor=X).fit(pairs, y)
    W = m.projection_
    G = W.T @ W
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-8 * np.abs(G).max())
    assert np.all(np.diff(m.loss_curve_) < 0)
    base = Euclidean(preprocessor=X).fit(pairs, y).score(pte, yte)
    assert m.score(pte, yte) > base + 0.02
    # the distance is on absolute differences: symmetric in its two arguments
    np.testing.assert_allclose(m.pair_distance(pte), m.pair_distance(pte[:, ::-1]))
    d = m.pair_distance(pte[:3])
    slow = [np.sum((np.abs(X[a] - X[b]) @ W) ** 2) for a, b in pte[:3]]
    np.testing.assert_allclose(d, slow, rtol=1e-12)


def test_needs_shared_samples(data):
    X, _, _, _, _ = data
    with pytest.raises(ValueError, match="share a sample"):
        PRDC(preprocessor=X).fit(np.array([[0, 1], [2, 7]]), np.array([1, -1]))
