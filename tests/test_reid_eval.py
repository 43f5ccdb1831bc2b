"""evaluate_rank (Market-1501 / torchreid protocol) against torchreid's Python logic."""

import importlib.util
import itertools
import os
import sys
import warnings

import numpy as np
import pytest

from crossmetric import metrics as M


def _torchreid_rank_module(monkeypatch):
    """torchreid's ``reid/metrics/rank.py`` (loaded as a file, without importing torchreid and
    its torchvision models) if torchreid is installed, else None. Its optional Cython module
    is made to fail to import, so its Python evaluation runs."""
    import types

    for name in ("torchreid", "torchreid.reid", "torchreid.reid.metrics",
                 "torchreid.reid.metrics.rank_cylib"):
        stub = types.ModuleType(name)
        stub.__path__ = []
        monkeypatch.setitem(sys.modules, name, stub)
    dirs = list(sys.path) + [os.path.join(sys.prefix, "lib", f"python{sys.version_info.major}."
                                          f"{sys.version_info.minor}", "site-packages")]
    for d in dirs:
        path = os.path.join(d, "torchreid", "reid", "metrics", "rank.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_torchreid_rank", path)
            mod = importlib.util.module_from_spec(spec)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Cython evaluation is unavailable"
                spec.loader.exec_module(mod)
            return mod
    return None


def _reference(distmat, q_pids, g_pids, q_camids, g_camids, max_rank):
    """torchreid's eval_market1501 loop, with Ye et al.'s mINP (one query at a time)."""
    indices = np.argsort(distmat, axis=1, kind="stable")
    matches = (g_pids[indices] == q_pids[:, None]).astype(np.int32)
    all_cmc, all_ap, all_inp = [], [], []
    for q in range(distmat.shape[0]):
        order = indices[q]
        keep = ~((g_pids[order] == q_pids[q]) & (g_camids[order] == q_camids[q]))
        raw = matches[q][keep]
        if not raw.any():
            continue
        cum = raw.cumsum()
        last = np.flatnonzero(raw == 1).max()
        all_inp.append(cum[last] / (last + 1.0))
        hit = np.minimum(cum, 1)
        hit = np.r_[hit, np.ones(max(0, max_rank - hit.size), dtype=hit.dtype)]
        all_cmc.append(hit[:max_rank])
        prec = cum / np.arange(1, raw.size + 1)
        all_ap.append((prec * raw).sum() / raw.sum())
    return np.mean(all_cmc, axis=0), np.mean(all_ap), np.mean(all_inp)


def _market_like(rng, n_ids=30, n_cams=3, n_q=40, n_g=150):
    q_pids = rng.randint(n_ids, size=n_q)
    g_pids = rng.randint(n_ids, size=n_g)
    return (rng.rand(n_q, n_g), q_pids, g_pids, rng.randint(n_cams, size=n_q),
            rng.randint(n_cams, size=n_g))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_loop_multi_shot(seed):
    D, qp, gp, qc, gc = _market_like(np.random.RandomState(seed))
    out = M.evaluate_rank(D, qp, gp, qc, gc, max_rank=50)
    cmc, ap, inp = _reference(D, qp, gp, qc, gc, 50)
    assert out["cmc"].shape == (50,)
    np.testing.assert_allclose(out["cmc"], cmc, atol=1e-12)
    assert out["map"] == pytest.approx(ap, abs=1e-12)
    assert out["minp"] == pytest.approx(inp, abs=1e-12)
    assert out["n_queries"] + out["n_skipped"] == D.shape[0]


def test_matches_torchreid_when_installed(monkeypatch):
    mod = _torchreid_rank_module(monkeypatch)
    if mod is None:
        pytest.skip("torchreid not installed (the reference loop above re-implements it)")
    rng = np.random.RandomState(7)
    for _ in range(3):
        D, qp, gp, qc, gc = _market_like(rng, n_q=60, n_g=200)
        cmc, ap = mod.evaluate_rank(D, qp, gp, qc, gc, max_rank=50, use_cython=False)
        out = M.evaluate_rank(D, qp, gp, qc, gc, max_rank=50)
        np.testing.assert_allclose(out["cmc"], cmc, atol=1e-6)  # torchreid sums float32
        assert out["map"] == pytest.approx(ap, abs=1e-12)


def test_single_shot_and_no_cameras():
    rng = np.random.RandomState(3)
    n = 25
    D = rng.rand(n, n)
    ids = rng.permutation(n)
    out = M.evaluate_rank(D, ids, ids, max_rank=n)
    # one true match per query and nothing left out: CMC and mAP of the plain measures
    np.testing.assert_allclose(out["cmc"], M.cmc(D, ids, ids, max_rank=n))
    assert out["map"] == pytest.approx(M.mean_average_precision(D, ids, ids))
    assert out["minp"] == pytest.approx(out["map"])  # one match: INP = AP = 1 / rank


def test_same_camera_true_matches_are_left_out():
    D = np.array([[0.0, 0.5, 0.9, 0.7]])
    # the nearest item is the query's person from its own camera: left out, so the true
    # match from camera 1 is at rank 2 behind the stranger at 0.5
    out = M.evaluate_rank(D, [1], [1, 2, 1, 3], [0], [0, 0, 1, 1], max_rank=4)
    assert out["cmc"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert out["map"] == pytest.approx(1 / 3)
    # without cameras it counts
    assert M.evaluate_rank(D, [1], [1, 2, 1, 3], max_rank=4)["cmc"][0] == 1.0


def test_queries_without_valid_match_are_skipped():
    D = np.array([[0.1, 0.2], [0.3, 0.4]])
    out = M.evaluate_rank(D, [1, 9], [1, 2], [0, 0], [1, 1], max_rank=2)
    assert out["n_queries"] == 1 and out["n_skipped"] == 1
    assert out["cmc"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="no query has a valid true match"):
        M.evaluate_rank(D, [1, 1], [1, 2], [0, 0], [0, 1])


def _brute_expected(D, qp, gp, max_rank):
    """Average of the stable-order measures over every order of the gallery."""
    n_g = D.shape[1]
    acc = [np.zeros(max_rank), 0.0, 0.0]
    perms = list(itertools.permutations(range(n_g)))
    cams_q, cams_g = np.zeros(len(qp)), np.ones(n_g)
    for p in perms:
        p = np.asarray(p)
        cmc, ap, inp = _reference(D[:, p], qp, gp[p], cams_q, cams_g, max_rank)
        acc[0] += cmc
        acc[1] += ap
        acc[2] += inp
    return [a / len(perms) for a in acc]


def test_ties_expected_is_the_mean_over_orders():
    rng = np.random.RandomState(0)
    D = rng.randint(0, 3, size=(5, 6)).astype(float)   # many ties
    qp = np.array([0, 1, 2, 0, 1])
    gp = np.array([0, 0, 1, 2, 1, 0])
    out = M.evaluate_rank(D, qp, gp, max_rank=6)
    cmc, ap, inp = _brute_expected(D, qp, gp, 6)
    np.testing.assert_allclose(out["cmc"], cmc, atol=1e-12)
    assert out["map"] == pytest.approx(ap, abs=1e-12)
    assert out["minp"] == pytest.approx(inp, abs=1e-12)


def test_ties_pessimistic_optimistic_bracket_expected():
    D = np.zeros((3, 5))          # a collapsed model
    ids = np.array([0, 1, 2])
    g = np.array([0, 1, 2, 3, 4])
    exp = M.evaluate_rank(D, ids, g, max_rank=5)
    pes = M.evaluate_rank(D, ids, g, max_rank=5, ties="pessimistic")
    opt = M.evaluate_rank(D, ids, g, max_rank=5, ties="optimistic")
    assert exp["cmc"][0] == pytest.approx(1 / 5)       # chance, not 1
    assert pes["cmc"][0] == 0.0 and opt["cmc"][0] == 1.0
    assert pes["map"] == pytest.approx(1 / 5) and opt["map"] == 1.0
    assert pes["map"] <= exp["map"] <= opt["map"]


def test_blocks_do_not_change_the_result():
    D, qp, gp, qc, gc = _market_like(np.random.RandomState(5))
    a = M.evaluate_rank(D, qp, gp, qc, gc)
    b = M.evaluate_rank(D, qp, gp, qc, gc, block_rows=7)
    np.testing.assert_allclose(a["cmc"], b["cmc"])
    assert a["map"] == pytest.approx(b["map"]) and a["minp"] == pytest.approx(b["minp"])


@pytest.mark.parametrize("kwargs, match", [
    ({"q_camids": [0, 0]}, "given together"),
    ({"max_rank": 0}, "max_rank"),
    ({"ties": "random"}, "ties"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        M.evaluate_rank(np.ones((2, 3)), [0, 1], [0, 1, 2], **kwargs)


def test_bad_shapes_and_values():
    with pytest.raises(ValueError, match="g_pids"):
        M.evaluate_rank(np.ones((2, 3)), [0, 1], [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        M.evaluate_rank(np.array([[np.nan, 1.0]]), [0], [0, 1])


def test_ids_of_different_dtypes_match_by_value():
    """Integer query ids and float gallery ids name the same persons (as in cmc and mAP)."""
    import numpy as np

    from crossmetric.metrics.reid import evaluate_rank

    D = np.array([[0.1, 0.9], [0.8, 0.2]])
    res = evaluate_rank(D, [1, 2], [1.0, 2.0], max_rank=2)
    assert res["cmc"][0] == 1.0 and res["map"] == 1.0
