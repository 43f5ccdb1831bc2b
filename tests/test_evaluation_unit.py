"""The one evaluation unit of crossmetric.protocols: fit_on_pairs,
measure_identification / measure_verification, the view step and the run options."""

import json

import numpy as np
import pytest

from crossmetric import GSM, PCCA, Euclidean, make_pairs
from crossmetric.protocols import (
    BenchmarkResult,
    RunOptions,
    fit_on_pairs,
    measure_identification,
    measure_verification,
)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(12), 4)
    Z = rng.randn(12, 5)[labels]
    X = Z + 0.4 * rng.randn(48, 5)
    Y = Z @ rng.randn(5, 5) + 0.4 * rng.randn(48, 5)
    pairs, y = make_pairs(labels, labels, random_state=0)
    pcca = fit_on_pairs(PCCA(n_components=3, max_iter=30), pairs, y, preprocessor=(X, Y),
                        seed=0).model
    gsm = fit_on_pairs(GSM(n_components=2, max_iter=20), pairs, y,
                       preprocessor=(X, X), seed=0).model
    return {"X": X, "Y": Y, "labels": labels, "pcca": pcca, "gsm": gsm, "pairs": pairs,
            "y": y}


def _same(a, b):
    assert set(a) == set(b)
    for k in a:
        if isinstance(a[k], float) and np.isnan(a[k]):
            assert np.isnan(b[k])
        else:
            assert a[k] == b[k], k


def _reference_identification(est, X, G, pl, gl, ranks, scores_path, *, same_set=False,
                              re_rank=False, query_expansion=None):
    """The former ``cli._identification``, kept here as the slow obvious version: every
    measure from the full distance matrix (``metrics`` one at a time), the score file
    written row by row."""
    from crossmetric import metrics as M
    from crossmetric._base import uses_l2_score

    # the curve stops at the gallery's size (rank 10¹¹ asked for 745 GiB)
    max_rank = max(20, min(max(ranks), len(gl)))
    refine = re_rank or query_expansion is not None
    D = None
    if uses_l2_score(est) and scores_path is None and not refine:
        rep = M.identification_report(est.transform_x(X), est.transform_y(G), pl, gl,
                                      max_rank=max_rank, ranks=ranks, same_set=same_set)
    else:
        if refine:
            from crossmetric.protocols.reid import refine_distances

            D = refine_distances(est, X, G, re_rank=re_rank, query_expansion=query_expansion)
        else:
            D = est.cross_distance(X, G)
        if same_set:
            curve = np.array([M.one_call_at_n(D, pl, gl, r, same_set=True)
                              for r in range(1, max_rank + 1)])
        else:
            curve = M.cmc(D, pl, gl, max_rank=max_rank)
        rep = {"cmc": curve}
        for r in ranks:
            rep[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
        rep["map"] = M.mean_average_precision(D, pl, gl, same_set=same_set)
        if not same_set:
            rep["nn_accuracy"] = M.nearest_neighbor_accuracy(D, pl, gl)
        if scores_path is not None:
            with open(scores_path, "w", encoding="utf-8") as fh:
                fh.write("probe,gallery,same,distance\n")
                for i in range(D.shape[0]):
                    same = (gl == pl[i]).astype(int)
                    fh.writelines(f"{i},{j},{same[j]},{D[i, j]:.8g}\n"
                                  for j in range(D.shape[1]))
    rep["cmc"] = np.asarray(rep["cmc"]).tolist()
    rep["n_probes"], rep["n_gallery"] = int(X.shape[0]), int(G.shape[0])
    rep["same_set"], rep["re_rank"] = bool(same_set), bool(re_rank)
    rep["query_expansion"] = query_expansion
    return rep, D


@pytest.mark.parametrize("case", ["l2", "l2_scores", "own_score", "same_set", "re_rank",
                                  "qe", "ranks"])
@pytest.mark.parametrize("entry", ["library", "cli"])
def test_measure_identification_equals_the_former_cli_code(fitted, case, entry, tmp_path):
    """Same report, distances and score file as the former cli._identification (kept above);
    the CLI's ``evaluate`` now calls the library's one measure."""
    from crossmetric.cli.evaluate import _identification

    def measure(est, X, G, lab, gl, ranks, path, **kw):
        if entry == "cli":
            return _identification(est, X, G, lab, gl, ranks, path, **kw)
        return measure_identification(est, X, G, lab, gl, ranks=ranks, scores_path=path, **kw)

    X, Y, lab = fitted["X"], fitted["Y"], fitted["labels"]
    est = fitted["gsm"] if case == "own_score" else fitted["pcca"]
    G, gl = Y[::2], lab[::2]
    kw, ranks, path = {}, (1, 5, 10, 20), None
    if case == "l2_scores":
        path = str(tmp_path / "a.csv")
    if case == "same_set":
        G, gl, kw = Y, lab, {"same_set": True}
    if case == "re_rank":
        kw = {"re_rank": {"k1": 5, "k2": 2}}
    if case == "qe":
        kw = {"query_expansion": 2}
    if case == "ranks":
        ranks = (1, 3, 30)
    old, D_old = _reference_identification(est, X, G, lab, gl, ranks, path, **kw)
    new_path = None if path is None else str(tmp_path / "b.csv")
    new, D_new = measure(est, X, G, lab, gl, ranks, new_path, **kw)
    _same(old, new)
    assert (D_old is None) == (D_new is None)
    if D_old is not None:
        np.testing.assert_array_equal(D_old, D_new)
    if path is not None:
        assert open(path).read() == open(new_path).read()


def test_blockwise_and_matrix_paths_agree(fitted):
    X, Y, lab = fitted["X"], fitted["Y"], fitted["labels"]
    a, D = measure_identification(fitted["pcca"], X, Y, lab, lab)
    b, D2 = measure_identification(fitted["pcca"], X, Y, lab, lab, blockwise=False)
    assert D is None and D2.shape == (48, 48)
    for k in ("rank1", "rank5", "rank10", "rank20", "map", "nn_accuracy"):
        assert a[k] == pytest.approx(b[k], abs=1e-12)


def test_measure_identification_without_a_model_and_minp(fitted):
    from sklearn.metrics.pairwise import euclidean_distances

    from crossmetric import metrics as M

    X, lab = fitted["X"], fitted["labels"]
    rep, D = measure_identification(None, X[::2], X[1::2], lab[::2], lab[1::2], minp=True,
                                    max_rank=7)
    np.testing.assert_array_equal(D, euclidean_distances(X[::2], X[1::2], squared=True))
    rk = M.evaluate_rank(D, lab[::2], lab[1::2], max_rank=7)
    assert rep["map"] == rk["map"] and rep["minp"] == rk["minp"] and len(rep["cmc"]) == 7
    # a CMC longer than the gallery repeats its last value
    rep, _ = measure_identification(None, X[0:8:2], X[1:8:2], lab[0:8:2], lab[1:8:2],
                                    max_rank=10)
    assert len(rep["cmc"]) == 10 and rep["cmc"][-1] == rep["cmc"][3]


def test_measure_verification_names_the_threshold_accuracy(fitted):
    from crossmetric import metrics as M

    est, pairs, y = fitted["pcca"], fitted["pairs"], fitted["y"]
    rep = measure_verification(est, pairs, y, fpr=1e-2)
    d = est.pair_distance(pairs)
    assert rep["accuracy_at_threshold"] == np.mean(np.where(d <= est.threshold_, 1, -1) == y)
    ref = M.verification_report(y, -d, fpr=1e-2)
    assert {k: rep[k] for k in ref} == ref


def test_fit_on_pairs_seeds_only_unseeded_learners(fitted):
    X, Y, pairs, y = fitted["X"], fitted["Y"], fitted["pairs"], fitted["y"]
    m = fit_on_pairs(PCCA(n_components=2, max_iter=5, random_state=3), pairs, y,
                     preprocessor=(X, Y), seed=7)
    assert m.model.random_state == 3 and isinstance(m.warnings, list)
    assert fit_on_pairs(None, pairs, y, preprocessor=X) == (None, 0.0, [])


def test_run_options_from_a_mapping():
    opts = RunOptions.of({"fpr": 0.01, "tune": {"grid": {"a": [1]}, "scoring": "rank1"}})
    assert opts.fpr == 0.01 and opts.tune.scoring == "rank1" and opts.max_rank == 20
    assert RunOptions.of(opts) is opts
    with pytest.raises(ValueError, match="unknown keys"):
        RunOptions.of({"fpr": 0.01, "typo": 1})
    with pytest.raises(AttributeError):
        opts.fpr = 0.5  # frozen


def test_results_files_with_the_former_accuracy_name_still_read(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({
        "methods": ["A"], "summary": [{"method": "A", "measure": "accuracy", "mean": 0.8,
                                        "std": 0.1, "sem": 0.03, "n": 10}],
        "records": [{"method": "A", "protocol": "verification", "split": 0,
                     "measure": "accuracy", "value": 0.8}]}))
    res = BenchmarkResult.load(path)
    assert res.value("A", "accuracy") == 0.8 == res.value("A", "accuracy_at_threshold")
    assert res.records[0]["measure"] == "accuracy_at_threshold"
    assert "Acc(%)" in res.table() and "Acc(%)" in res.table(["accuracy"])


def test_benchmark_reports_rank20():
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import run_protocols

    d = make_cross_modal(120, n_classes=24, n_features_x=6, n_features_y=6, random_state=0)
    res = run_protocols({"E": Euclidean()}, d, protocols=("identification",), n_repeats=1,
                        n_jobs=1)
    assert res.value("E", "rank20") >= res.value("E", "rank10") >= res.value("E", "rank1")
    assert res.value("E", "rank20") == pytest.approx(res.curves["E"]["cmc"][19])


def test_pca_then_matches_a_scikit_learn_pca_first(fitted):
    from sklearn.decomposition import PCA

    from crossmetric.protocols import PCAThen

    X, lab = fitted["X"], fitted["labels"]
    pairs, y = make_pairs(lab, random_state=0)
    m = PCAThen(Euclidean(), n_components=3, preprocessor=X).fit(pairs, y)
    pca = PCA(3, random_state=0).fit(X[np.unique(pairs)])
    np.testing.assert_array_equal(m.pca_.components_, pca.components_)
    ref = Euclidean(preprocessor=pca.transform(X)).fit(pairs, y)
    np.testing.assert_array_equal(m.cross_distance(X[:3], X[:5]),
                                  ref.cross_distance(pca.transform(X[:3]),
                                                     pca.transform(X[:5])))
