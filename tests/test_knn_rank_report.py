"""metrics.knn_rank_report (faiss kNN lists) against the dense rank measures of metrics.py."""

import subprocess
import sys

import numpy as np
import pytest

from crossmetric import metrics as M

pytest.importorskip("faiss")

TIES = ("expected", "pessimistic", "optimistic")


def _sqdist(A, B):
    A, B = np.asarray(A, float), np.asarray(B, float)
    return ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)


def _pml_map_at_r(D, ql, dl, same_set=False):
    """MAP@R of pytorch-metric-learning, from the dense matrix (stable order among ties)."""
    vals = []
    for i in range(D.shape[0]):
        order = np.argsort(D[i], kind="stable")
        if same_set:
            order = order[order != i]
        rel = dl[order] == ql[i]
        R = int(rel.sum())
        if R == 0:
            continue
        rel = rel[:R]
        vals.append(np.sum(np.cumsum(rel) / np.arange(1, R + 1) * rel) / R)
    return float(np.mean(vals))


def _random_data(seed=0, n_q=60, n_d=300, dim=8, n_classes=12):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n_q, dim))
    X = rng.standard_normal((n_d, dim))
    return Q, X, rng.integers(0, n_classes, n_q), rng.integers(0, n_classes, n_d)


def _grid_data(seed=1, n_q=50, n_d=200, dim=3, n_classes=5):
    """Integer coordinates in {0, 1, 2}: many duplicates and equal distances, all exact."""
    rng = np.random.default_rng(seed)
    Q = rng.integers(0, 3, (n_q, dim)).astype(float)
    X = rng.integers(0, 3, (n_d, dim)).astype(float)
    return Q, X, rng.integers(0, n_classes, n_q), rng.integers(0, n_classes, n_d)


def test_flat_equals_dense_without_ties():
    Q, X, ql, dl = _random_data()
    D = _sqdist(Q, X)
    k = 15
    rep = M.knn_rank_report(Q, X, ql, dl, k=k, ranks=(1, 5, 15))
    np.testing.assert_allclose(rep["cmc"], M.cmc(D, ql, dl, max_rank=k), atol=1e-12)
    assert rep["rank5"] == pytest.approx(M.rank_accuracy(D, ql, dl, rank=5))
    assert rep["nn_accuracy"] == pytest.approx(M.nearest_neighbor_accuracy(D, ql, dl))
    # all relevant items within k = n_database: mAP@k is the full mAP; PML's MAP@R
    full = M.knn_rank_report(Q, X, ql, dl, k=X.shape[0])
    assert full["map_at_k"] == pytest.approx(M.mean_average_precision(D, ql, dl), abs=1e-12)
    assert full["map_at_r"] == pytest.approx(_pml_map_at_r(D, ql, dl), abs=1e-12)
    acc = M.knn_accuracy(Q, X, ql, dl)
    max_r = int(np.bincount(dl).max())
    at_r = M.knn_rank_report(Q, X, ql, dl, k=max_r)  # k >= every R: MAP@R exact
    for key in ("precision_at_1", "r_precision", "map_at_r"):
        assert full[key] == pytest.approx(acc[key], abs=1e-12)
        assert at_r[key] == pytest.approx(acc[key], abs=1e-12)
    assert at_r["n_queries_r_above_k"] == 0 and rep["n_queries_r_above_k"] > 0
    assert rep["longest_list"] == k + 1


def test_map_at_k_is_the_truncated_sum():
    Q, X, ql, dl = _random_data(seed=3)
    D = _sqdist(Q, X)
    k = 7
    rep = M.knn_rank_report(Q, X, ql, dl, k=k)
    vals = []
    for i in range(D.shape[0]):
        rel = dl[np.argsort(D[i])] == ql[i]
        if rel.any():
            top = rel[:k]
            vals.append(np.sum(np.cumsum(top) / np.arange(1, k + 1) * top) / rel.sum())
    assert rep["map_at_k"] == pytest.approx(np.mean(vals), abs=1e-12)
    assert rep["map_at_k"] < M.mean_average_precision(D, ql, dl)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("k", [1, 4, 200])
def test_flat_equals_dense_with_ties(ties, k):
    Q, X, ql, dl = _grid_data()
    D = _sqdist(Q, X)
    rep = M.knn_rank_report(Q, X, ql, dl, k=k, ties=ties, ranks=(1,))
    np.testing.assert_allclose(rep["cmc"], M.cmc(D, ql, dl, max_rank=k, ties=ties), atol=1e-12)
    assert rep["nn_accuracy"] == pytest.approx(
        M.nearest_neighbor_accuracy(D, ql, dl, ties=ties), abs=1e-12)
    # tie groups cut by the k-th place were completed (k = 200 lists the whole database)
    assert rep["longest_list"] == 200 if k == 200 else rep["longest_list"] > k + 1
    if k == 200:
        assert rep["map_at_k"] == pytest.approx(
            M.mean_average_precision(D, ql, dl, ties=ties), abs=1e-12)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_map_at_r_with_deterministic_tie_orders(ties):
    Q, X, ql, dl = _grid_data(seed=4)
    D = _sqdist(Q, X)
    rel_key = (dl[None, :] == ql[:, None]).astype(float)
    # relevant items last among equals = sort on (distance, relevant); first: (distance, -rel)
    shift = rel_key if ties == "pessimistic" else -rel_key
    ranked = D + 0.25 * shift  # distances are integers: a quarter only reorders ties
    rep = M.knn_rank_report(Q, X, ql, dl, k=200, ties=ties)
    assert rep["map_at_r"] == pytest.approx(_pml_map_at_r(ranked, ql, dl), abs=1e-12)


def test_expected_map_at_r_matches_random_tie_breaking():
    rng = np.random.default_rng(5)
    Q, X, ql, dl = _grid_data(seed=6, n_q=8, n_d=40, dim=2, n_classes=3)
    D = _sqdist(Q, X)
    draws = [_pml_map_at_r(D + 0.5 * rng.random(D.shape), ql, dl) for _ in range(600)]
    rep = M.knn_rank_report(Q, X, ql, dl, k=40)
    se = np.std(draws) / np.sqrt(len(draws))
    assert abs(rep["map_at_r"] - np.mean(draws)) < 5 * se + 1e-9


def test_same_set_with_duplicates():
    Q, _, ql, _ = _grid_data(seed=7, n_q=120)
    D = _sqdist(Q, Q)
    k = 6
    for ties in TIES:
        rep = M.knn_rank_report(Q, Q, ql, ql, k=k, same_set=True, ties=ties, ranks=(1, 6))
        expect = [M.one_call_at_n(D, ql, ql, n=r, same_set=True, ties=ties)
                  for r in range(1, k + 1)]
        np.testing.assert_allclose(rep["cmc"], expect, atol=1e-12)
        full = M.knn_rank_report(Q, Q, ql, ql, k=Q.shape[0] - 1, same_set=True, ties=ties)
        assert full["map_at_k"] == pytest.approx(
            M.mean_average_precision(D, ql, ql, same_set=True, ties=ties), abs=1e-12)


def test_collapsed_embedding_scores_chance():
    ql = np.repeat([0, 1, 2, 3], 5)
    Z = np.zeros((20, 4))
    rep = M.knn_rank_report(Z, Z, ql, ql, k=3, same_set=True)
    # 4 relevant among 19 equally distant items: P(rank <= r) = 1 - C(15, r) / C(19, r)
    from math import comb
    np.testing.assert_allclose(rep["cmc"], [1 - comb(15, r) / comb(19, r) for r in (1, 2, 3)])
    assert rep["longest_list"] == 19


def test_approximate_indexes_close_to_exact_on_clustered_data():
    rng = np.random.default_rng(8)
    centers = rng.standard_normal((30, 16)) * 4
    lab_d = rng.integers(0, 30, 3000)
    lab_q = rng.integers(0, 30, 200)
    X = centers[lab_d] + rng.standard_normal((3000, 16))
    Q = centers[lab_q] + rng.standard_normal((200, 16))
    exact = M.knn_rank_report(Q, X, lab_q, lab_d, k=20)
    ivf_all = M.knn_rank_report(Q, X, lab_q, lab_d, k=20, index="ivf", nlist=16, nprobe=16)
    factory = M.knn_rank_report(Q, X, lab_q, lab_d, k=20, index="IVF8,Flat", nprobe=8,
                                train_size=400)
    for key in ("rank1", "map_at_r", "map_at_k", "precision_at_1"):  # every list probed
        assert ivf_all[key] == pytest.approx(exact[key], abs=1e-9)
        assert factory[key] == pytest.approx(exact[key], abs=1e-9)
    for approx in (M.knn_rank_report(Q, X, lab_q, lab_d, k=20, index="ivf", nlist=32,
                                     nprobe=4),
                   M.knn_rank_report(Q, X, lab_q, lab_d, k=20, index="hnsw", ef_search=64)):
        for key in ("rank1", "rank10", "map_at_r", "map_at_k"):
            assert approx[key] == pytest.approx(exact[key], abs=0.02)


def test_threads_and_blocks_do_not_change_the_result():
    Q, X, ql, dl = _grid_data(seed=9)
    a = M.knn_rank_report(Q, X, ql, dl, k=5)
    b = M.knn_rank_report(Q, X, ql, dl, k=5, block_rows=7, n_threads=1)
    np.testing.assert_allclose(a["cmc"], b["cmc"])
    assert a["map_at_k"] == b["map_at_k"]


@pytest.mark.parametrize("kwargs, match", [
    ({"k": 0}, "k must"),
    ({"ranks": (1, 50), "k": 10}, "ranks must be at most"),
    ({"index": "bogus"}, "index must"),
    ({"index": "ivfpq"}, "index must"),
    ({"ties": "random"}, "ties must"),
    ({"nprobe": 0}, "nprobe"),
    ({"same_set": True}, "same_set"),
])
def test_bad_input(kwargs, match):
    Q, X, ql, dl = _random_data(n_q=5, n_d=20)
    with pytest.raises(ValueError, match=match):
        M.knn_rank_report(Q, X, ql, dl, **kwargs)


def test_bad_shapes():
    Q, X, ql, dl = _random_data(n_q=5, n_d=20)
    with pytest.raises(ValueError, match="same number of columns"):
        M.knn_rank_report(Q, X[:, :3], ql, dl)
    with pytest.raises(ValueError, match="database_labels"):
        M.knn_rank_report(Q, X, ql, dl[:3])
    with pytest.raises(ValueError, match="finite|NaN"):
        M.knn_rank_report(np.full_like(Q, np.nan), X, ql, dl)


def test_metrics_importable_without_faiss():
    code = ("import sys; sys.modules['faiss'] = None\n"
            "from crossmetric import metrics as M\n"
            "try:\n    M.knn_rank_report([[0.0]], [[1.0]], [0], [0])\n"
            "except ImportError as e:\n    print('ImportError', 'faiss-cpu' in str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "ImportError True"
