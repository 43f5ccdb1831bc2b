"""re_ranking (k-reciprocal, Zhong et al. 2017) against a per-item loop written from the paper,
and average query expansion."""

import math

import numpy as np
import pytest
from sklearn.metrics.pairwise import euclidean_distances

from crossmetric import metrics as M
from crossmetric.metrics.reranking import re_ranking as re_ranking_module


def _slow_re_ranking(q_g, q_q, g_g, k1, k2, lam):
    """Eqs. 4-12 of the paper, one item at a time with Python sets."""
    n_q, n_g = q_g.shape
    D = np.block([[q_q, q_g], [q_g.T, g_g]]) ** 2   # squared, as the authors' release
    n = n_q + n_g
    mx = D.max(axis=1, keepdims=True)
    D = D / np.where(mx > 0, mx, 1.0)
    k1 = min(k1, n - 1)
    k2 = min(k2, n)
    kh = max(1, int(np.around(k1 / 2.0)))

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
            if 3 * len(rp & rq) > 2 * len(rq):
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
    import crossmetric.metrics.reranking as rr

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


# ------------------------------------------------------- as options of the re-id protocols
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

def _fitted_pcca():
    from crossmetric import PCCA
    from crossmetric.datasets import make_cross_modal
    from crossmetric.pairs import make_pairs

    d = make_cross_modal(120, n_classes=12, n_features_x=6, n_features_y=6, random_state=0)
    pairs, y = make_pairs(d.labels, None, random_state=0)
    est = PCCA(n_components=3, max_iter=30, preprocessor=d.X, random_state=0).fit(pairs, y)
    est.set_params(preprocessor=None)
    return est, d


def test_refine_distances_on_a_model_equals_the_plain_functions():
    from crossmetric.protocols.reid import refine_distances

    est, d = _fitted_pcca()
    Q, G = d.X[:30], d.X[30:]
    FQ, FG = est.transform_x(Q), est.transform_y(G)
    sq = lambda A, B: euclidean_distances(A, B, squared=True)  # noqa: E731
    np.testing.assert_allclose(refine_distances(est, Q, G, re_rank={"k1": 8}),
                               M.re_ranking(sq(FQ, FG), sq(FQ, FQ), sq(FG, FG), k1=8))
    FQe = M.query_expansion(FQ, FG, 3)
    np.testing.assert_allclose(refine_distances(est, Q, G, query_expansion=3), sq(FQe, FG))
    np.testing.assert_allclose(refine_distances(est, Q, G), est.cross_distance(Q, G),
                               atol=1e-8)
    with pytest.raises(ValueError, match="re_rank"):
        refine_distances(est, Q, G, re_rank={"k3": 1})


def test_refine_distances_refuses_a_cross_modal_score():
    from crossmetric import GSM
    from crossmetric.pairs import make_pairs
    from crossmetric.protocols.reid import refine_distances

    rng = np.random.RandomState(0)
    X, Y, lab = rng.rand(40, 5), rng.rand(40, 4), np.arange(40) % 8
    pairs, y = make_pairs(lab, lab, random_state=0)
    gsm = GSM(n_components=2, preprocessor=(X, Y), random_state=0).fit(pairs, y)
    with pytest.raises(ValueError, match="query_expansion needs"):
        refine_distances(gsm, X, Y, query_expansion=2)
    with pytest.raises(ValueError, match="re_rank needs"):
        refine_distances(gsm, X, Y, re_rank=True)


def test_evaluate_reid_and_run_protocols_options():
    from crossmetric import PCCA
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import run_protocols
    from crossmetric.protocols.reid import evaluate_reid, refine_distances, reid_splits

    d = make_cross_modal(160, n_classes=20, n_features_x=6, n_features_y=6, random_state=0)
    split = reid_splits(d.labels, n_test=10, n_splits=1, random_state=0)[0]
    plain = evaluate_reid(None, d.X, d.labels, split, max_rank=20)
    rr = evaluate_reid(None, d.X, d.labels, split, max_rank=20, re_rank={"k1": 6, "k2": 2})
    D = refine_distances(None, d.X[split.probe_rows], d.X[split.gallery_rows],
                         re_rank={"k1": 6, "k2": 2})
    pl, gl = d.labels[split.probe_rows], d.labels[split.gallery_rows]
    np.testing.assert_allclose(rr["cmc"], M.cmc(D, pl, gl, max_rank=10))
    assert rr["map"] == pytest.approx(M.evaluate_rank(D, pl, gl)["map"])
    assert rr["map"] != pytest.approx(plain["map"])
    kw = dict(protocols=("identification",), n_repeats=1, random_state=0)
    a = run_protocols({"PCCA": PCCA(n_components=3, max_iter=20)}, d, **kw)
    b = run_protocols({"PCCA": PCCA(n_components=3, max_iter=20)}, d, re_rank=True,
                      query_expansion=2, **kw)
    assert not a.errors and not b.errors
    assert a.value("PCCA", "map") != b.value("PCCA", "map")
    with pytest.raises(ValueError, match="query_expansion"):
        run_protocols({"PCCA": PCCA()}, d, query_expansion=0, **kw)


def test_index_search_re_rank():
    pytest.importorskip("faiss")
    from crossmetric.protocols.reid import refine_distances
    from crossmetric.retrieval import Index

    rng = np.random.RandomState(0)
    G, Q = rng.rand(40, 4).astype(np.float32), rng.rand(6, 4).astype(np.float32)
    index = Index().add(G, ids=np.arange(100, 140))
    D, ids = index.search(Q, 5, re_rank={"k1": 6})
    R = refine_distances(None, Q, G, re_rank={"k1": 6})
    np.testing.assert_array_equal(ids, np.argsort(R, axis=1, kind="stable")[:, :5] + 100)
    np.testing.assert_allclose(D, np.sort(R, axis=1)[:, :5], atol=1e-5)
    D, ids = index.search(Q, 45, re_rank=True)
    assert D.shape == (6, 45) and (ids[:, 40:] == -1).all()
    assert (D[:, 40:] == np.finfo(np.float32).max).all()   # faiss's sentinel, as search pads
    with pytest.raises(ValueError, match="kind='flat'"):
        Index(kind="ivf", nlist=2).add(G).search(Q, 3, re_rank=True)
