"""re_ranking (k-reciprocal, Zhong et al. 2017) against a per-item loop written from the paper,
and average query expansion."""

import math

import numpy as np
import pytest
from sklearn.metrics.pairwise import euclidean_distances

from crossmetric import metrics as M
from crossmetric.reranking import re_ranking as re_ranking_module


def _slow_re_ranking(q_g, q_q, g_g, k1, k2, lam):
    """Eqs. 4-12 of the paper, one item at a time with Python sets."""
    n_q, n_g = q_g.shape
    D = np.block([[q_q, q_g], [q_g.T, g_g]])
    n = n_q + n_g
    mx = D.max(axis=1, keepdims=True)
    D = D / np.where(mx > 0, mx, 1.0)
    k1 = min(k1, n - 1)
    k2 = min(k2, n)
    kh = max(1, (k1 + 1) // 2)

    def nearest(i, k):   # the k + 1 nearest, i itself first, ties by index
        return sorted(range(n), key=lambda j: (-1.0 if j == i else D[i, j], j))[:k + 1]

    def reciprocal(i, k):
        return {j for j in nearest(i, k) if i in nearest(j, k)}

    V = np.zeros((n, n))
    for p in range(n):
        rp = reciprocal(p, k1)
        star = set(rp)
        for q in rp:
            rq = reciprocal(q, kh)
            if 3 * len(rp & rq) >= 2 * len(rq):
                star |= rq
        for g in star:
            V[p, g] = math.exp(-D[p, g])
        V[p] /= V[p].sum()
    V = np.array([V[nearest(p, k2 - 1)].mean(axis=0) for p in range(n)])
    out = np.empty((n_q, n_g))
    for i in range(n_q):
        for j in range(n_g):
            a, b = V[i], V[n_q + j]
            dj = 1.0 - np.minimum(a, b).sum() / np.maximum(a, b).sum()
            out[i, j] = (1 - lam) * dj + lam * D[i, n_q + j]
    return out


def _clusters(rng, n_q, n_g, n_ids=6, dim=3, sigma=0.6):
    centres = rng.randn(n_ids, dim) * 2
    qi, gi = rng.randint(n_ids, size=n_q), rng.randint(n_ids, size=n_g)
    Q = centres[qi] + sigma * rng.randn(n_q, dim)
    G = centres[gi] + sigma * rng.randn(n_g, dim)
    return Q, G, qi, gi


@pytest.mark.parametrize("k1, k2, lam", [(6, 3, 0.3), (4, 1, 0.0), (20, 6, 0.3), (3, 40, 1.0)])
def test_matches_the_per_item_loop(k1, k2, lam):
    rng = np.random.RandomState(k1 + k2)
    Q, G, _, _ = _clusters(rng, 9, 23)
    q_g, q_q, g_g = (euclidean_distances(A, B, squared=True)
                     for A, B in ((Q, G), (Q, Q), (G, G)))
    fast = M.re_ranking(q_g, q_q, g_g, k1=k1, k2=k2, lambda_value=lam)
    slow = _slow_re_ranking(q_g, q_q, g_g, k1, k2, lam)
    assert fast.shape == (9, 23)
    np.testing.assert_allclose(fast, slow, atol=2e-6)   # V is float32


def test_small_jaccard_blocks_give_the_same_result(monkeypatch):
    rng = np.random.RandomState(1)
    Q, G, _, _ = _clusters(rng, 12, 30)
    args = [euclidean_distances(A, B) for A, B in ((Q, G), (Q, Q), (G, G))]
    ref = M.re_ranking(*args, k1=5, k2=3)
    import crossmetric.reranking as rr

    monkeypatch.setattr(rr, "_TRIPLES", 50)
    monkeypatch.setattr(rr, "_BLOCK", 64)
    np.testing.assert_allclose(rr.re_ranking(*args, k1=5, k2=3), ref, atol=1e-12)


def test_lambda_one_keeps_the_original_order():
    rng = np.random.RandomState(2)
    Q, G, _, _ = _clusters(rng, 5, 15)
    q_g = euclidean_distances(Q, G)
    R = M.re_ranking(q_g, euclidean_distances(Q, Q), euclidean_distances(G, G),
                     lambda_value=1.0)
    np.testing.assert_array_equal(np.argsort(R, axis=1), np.argsort(q_g, axis=1))


def test_re_ranking_helps_on_clustered_data():
    rng = np.random.RandomState(0)
    Q, G, qi, gi = _clusters(rng, 60, 300, n_ids=20, dim=4, sigma=1.1)
    q_g, q_q, g_g = (euclidean_distances(A, B) for A, B in ((Q, G), (Q, Q), (G, G)))
    before = M.evaluate_rank(q_g, qi, gi)["map"]
    after = M.evaluate_rank(M.re_ranking(q_g, q_q, g_g), qi, gi)["map"]
    assert after > before + 0.02


def test_metrics_reexports_the_module_function():
    assert M.re_ranking is re_ranking_module


@pytest.mark.parametrize("kwargs, match", [
    ({"k1": 0}, "k1"), ({"k2": 0}, "k2"), ({"lambda_value": 1.5}, "lambda_value")])
def test_bad_parameters(kwargs, match):
    D = np.ones((2, 3))
    with pytest.raises(ValueError, match=match):
        M.re_ranking(D, np.ones((2, 2)), np.ones((3, 3)), **kwargs)


def test_bad_matrices():
    with pytest.raises(ValueError, match="q_q must have shape"):
        M.re_ranking(np.ones((2, 3)), np.ones((3, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="non-negative"):
        M.re_ranking(-np.ones((2, 3)), np.ones((2, 2)), np.ones((3, 3)))


def test_query_expansion_is_the_mean_with_the_top_k():
    rng = np.random.RandomState(0)
    Q, G = rng.rand(7, 3), rng.rand(20, 3)
    out = M.query_expansion(Q, G, k=4)
    D = euclidean_distances(Q, G)
    for i in range(7):
        top = np.argsort(D[i])[:4]
        np.testing.assert_allclose(out[i], (Q[i] + G[top].sum(axis=0)) / 5)
    # k larger than the gallery: every gallery item
    np.testing.assert_allclose(M.query_expansion(Q[:1], G[:3], k=10)[0],
                               (Q[0] + G[:3].sum(axis=0)) / 4)
    with pytest.raises(ValueError, match="same number of columns"):
        M.query_expansion(Q, G[:, :2])
