"""``crossmetric reproduce``: published numbers, result tables and files, iteration selection,
the command line."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from crossmetric.cli import main
from crossmetric.protocols.model_selection import search_params
from crossmetric.protocols.reid import reid_splits
from crossmetric.reproduce import (
    PUBLISHED,
    REPRODUCTIONS,
    ReproductionResult,
    run_reproduction,
    select_max_iter,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def test_published_numbers_are_consistent():
    table = PUBLISHED["pcca-viper"]["rows"]
    assert len(table) == 18  # Table 2: 9 rows x 2 values of p
    for (p, method, n), vals in table.items():
        assert p in (316, 532) and len(vals) == 4
        assert list(vals) == sorted(vals), (p, method, n)  # CMC is non-decreasing
    # Fig. 6's printed points are Table 2's PCCA-chi2RBF rank-20 values
    for (p, n), v in PUBLISHED["pcca-viper-negatives"]["rows"].items():
        assert table[(p, "PCCA-chi2RBF", n)][3] == v
    for name in REPRODUCTIONS:
        assert name in PUBLISHED and PUBLISHED[name]["source"]


def test_result_table_and_files(tmp_path):
    r = ReproductionResult("demo", "Table 9 of nowhere")
    r.add("p=316", "M n-=1", "r1", [10.0, 12.0], 13.0)
    r.add("p=316", "M n-=1", "r20", [70.0, 74.0], 70.0)
    r.add("p=316", "Ref (published)", "r1", [], 15.5, note="quoted")
    assert r.rows[0]["ours"] == 11.0 and r.rows[0]["diff"] == -2.0
    assert r.rows[2]["diff"] is None
    text = r.table()
    assert "Table 9 of nowhere" in text and "-2.00" in text and "+2.00" in text
    assert "n/a" in text and "quoted" in text
    files = r.write(str(tmp_path))
    with open(files[0]) as fh:
        rows = list(csv.DictReader(fh))
    assert rows[1]["measure"] == "r20" and float(rows[1]["paper"]) == 70.0
    assert json.loads(Path(files[1]).read_text())["rows"][0]["std"] == 1.0


def test_select_max_iter_uses_training_persons_only(monkeypatch):
    from crossmetric import PCCA
    from crossmetric.reproduce import viper as R  # the module whose lookups select_max_iter makes

    rng = np.random.RandomState(0)
    n = 40
    ids = np.repeat(np.arange(n), 2)
    cams = np.tile([1, 2], n)
    X = rng.rand(n, 8)[ids] + 0.1 * rng.rand(2 * n, 8)
    split = reid_splits(ids, cams, 10, n_negatives=2, n_splits=1, random_state=0)[0]
    seen = []
    real = R.evaluate_reid

    def spy(est, X, ids, inner, **kw):
        seen.append(np.r_[inner.train_pairs.ravel(), inner.probe_rows, inner.gallery_rows])
        return real(est, X, ids, inner, **kw)

    monkeypatch.setattr(R, "evaluate_reid", spy)
    m, scores = select_max_iter(PCCA(n_components=4), X, ids, cams, split, n_negatives=2,
                                grid=(2, 4, 8), random_state=0)
    assert m in (2, 4, 8) and set(scores) <= {2, 4, 8} and scores[m] == max(scores.values())
    assert all(0.0 <= s <= 1.0 for s in scores.values())
    test_rows = np.r_[split.probe_rows, split.gallery_rows]
    assert len(seen) == len(scores)
    for rows in seen:  # every fit and validation image is a training image of the split
        assert np.intersect1d(rows, test_rows).size == 0
        assert np.isin(rows, split.train_pairs).all()


def test_select_max_iter_and_cmc20_scoring_share_mean_cmc(monkeypatch):
    """One definition of "CMC averaged over ranks 1-20": select_max_iter and
    search_params(scoring="cmc20") both score through model_selection.mean_cmc."""
    from crossmetric import PCCA
    from crossmetric.protocols import model_selection as MS
    from crossmetric.reproduce import viper as R

    assert MS.mean_cmc(np.arange(30) / 30) == np.mean((np.arange(30) / 30)[:20])
    assert MS.mean_cmc([0.2, 0.4]) == pytest.approx(0.3)     # shorter curve: every rank
    rng = np.random.RandomState(0)
    ids = np.repeat(np.arange(40), 2)
    cams = np.tile([1, 2], 40)
    X = rng.rand(40, 8)[ids] + 0.1 * rng.rand(80, 8)
    split = reid_splits(ids, cams, 10, n_negatives=2, n_splits=1, random_state=0)[0]
    calls = []

    def spy(cmc):
        calls.append(len(cmc))
        return -1.0 if len(calls) == 1 else 0.5          # the first value never wins

    monkeypatch.setattr(R, "mean_cmc", spy)
    monkeypatch.setattr(MS, "mean_cmc", spy)
    m, scores = select_max_iter(PCCA(n_components=4), X, ids, cams, split, n_negatives=2,
                                grid=(2, 4), random_state=0)
    assert len(calls) == 2 and scores == {2: -1.0, 4: 0.5} and m == 4
    calls.clear()
    inner = [(split.train_pairs, split.train_y, split.train_pairs[:30], split.train_y[:30])]
    res = search_params(PCCA(n_components=4, max_iter=3), {"beta": [1.0, 3.0]}, X, None, ids,
                        folds=inner, cross_modal=False, scoring="cmc20")
    assert len(calls) == 2 and res.best_params == {"beta": 3.0}


def test_run_reproduction_errors():
    with pytest.raises(ValueError, match="unknown reproduction"):
        run_reproduction("nope", ".")


def test_cli_reproduce_list_and_errors(capsys, tmp_path):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("pcca-viper", "pcca-viper-convergence", "pcca-viper-negatives", "pku-sketch"):
        assert name in out
    assert main(["reproduce", "nope"]) == 2
    assert "unknown reproduction" in capsys.readouterr().err
    assert main(["reproduce"]) == 2
    assert main(["reproduce", "pcca-viper", "--data-home", str(tmp_path / "none")]) == 2
    assert "--data-home" in capsys.readouterr().err
    assert main(["reproduce", "pcca-viper", "--splits", "0"]) == 2


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "pku_sketch").is_dir(), reason="PKU-Sketch absent")
def test_pku_sketch_one_split(tmp_path):
    res = run_reproduction("pku-sketch", DATA, n_splits=1, out=str(tmp_path), verbose=False,
                           methods=("euclidean", "cca", "deepgsm"), deepgsm_members=1,
                           setting="legacy")
    r1 = {r["method"]: r["ours"] for r in res.rows if r["measure"] == "r1"}
    assert 0.0 <= r1["Euclidean (HOG)"] <= 100.0 and 0.0 <= r1["CCA"] <= 100.0
    # DeepGSM takes the (n, h, w, 3) RGB images and runs: a number, no "not run" note
    deep = [r for r in res.rows if r["method"] == "DeepGSM (RGB images)"]
    assert deep and all(not r.get("note") for r in deep), deep[0].get("note")
    assert 0.0 <= r1["DeepGSM (RGB images)"] <= 100.0
    assert (tmp_path / "results.csv").is_file()


@pytest.mark.skipif(not (DATA / "pku_sketch").is_dir(), reason="PKU-Sketch absent")
def test_pku_deepgsm_models_are_also_scored_with_test_flip_switched():
    from crossmetric.reproduce.pku import PKU_DEEPGSM, reproduce_pku_sketch

    small = {"max_iter": 3, "hidden_units": 8}
    res = reproduce_pku_sketch(str(DATA), n_splits=1, methods=("deepgsm",), verbose=False,
                               deepgsm_params=small, deepgsm_members=2)
    alt = f"DeepGSM, same models, test_flip={not PKU_DEEPGSM['test_flip']}"
    per = res.extra["per_split"]
    assert set(per) == {"DeepGSM (RGB images)", alt, "DeepGSM, ensemble of 2 seeds"}
    assert per[alt]["r1"] and 0.0 <= per[alt]["mAP"][0] <= 100.0
    # a short training still ranks differently with and without the mirror
    assert per[alt]["mAP"] != per["DeepGSM (RGB images)"]["mAP"]
    # the single-model row is the ensemble's member 0: the same as without the ensemble
    one = reproduce_pku_sketch(str(DATA), n_splits=1, methods=("deepgsm",), verbose=False,
                               deepgsm_params=small, deepgsm_members=1)
    assert set(one.extra["per_split"]) == {"DeepGSM (RGB images)", alt}
    for m in ("r1", "r5", "r20", "mAP"):
        assert one.extra["per_split"]["DeepGSM (RGB images)"][m] == \
            per["DeepGSM (RGB images)"][m]
    with pytest.raises(ValueError, match="deepgsm_members"):
        reproduce_pku_sketch(str(DATA), n_splits=1, methods=("deepgsm",), deepgsm_members=0)


def test_pku_methods_option_errors(capsys, tmp_path):
    pytest.importorskip("torch", reason="DeepGSM needs torch (the [deep] extra)")
    from crossmetric.reproduce.pku import PKU_DEEPGSM, PKU_METHODS, reproduce_pku_sketch

    assert "deepgsm" in PKU_METHODS and "gsm" in PKU_METHODS
    # the recipe is explicit (no reliance on DeepGSM's defaults), tol included
    for key in ("hidden_units", "n_identities", "max_iter", "learning_rate", "optimizer",
                "tol", "input_shape", "augment"):
        assert key in PKU_DEEPGSM
    # the reproduction's DeepGSM is this recipe, not the registry's digits setting
    from crossmetric.reproduce.pku import _pku_methods

    deep = _pku_methods(PKU_METHODS, {"max_iter": 7})["deepgsm"].get_params()
    assert deep["max_iter"] == 7
    assert all(deep[k] == v for k, v in PKU_DEEPGSM.items() if k != "max_iter")
    # the guarded runs: beside each iterative learner only, its paper settings kept
    both = _pku_methods(PKU_METHODS, guarded=True)
    assert [k for k in both if k.endswith("-guarded")] == [
        f"{m}-guarded" for m in ("pcca", "cmml", "cmlauc", "cmlpauc", "gsm", "clml")]
    paper, twin = both["cmml"].get_params(), both["cmml-guarded"].get_params()
    assert (paper["init"], paper["early_stopping"]) == ("random", False)
    assert (twin["init"], twin["early_stopping"]) == ("auto", "auto")
    assert {k: v for k, v in twin.items() if k not in ("init", "early_stopping")} == \
        {k: v for k, v in paper.items() if k not in ("init", "early_stopping")}
    with pytest.raises(ValueError, match="methods: unknown"):
        reproduce_pku_sketch(str(tmp_path), methods=("gsm", "nope"))
    with pytest.raises(ValueError, match="first_split must be >= 0"):
        reproduce_pku_sketch(str(tmp_path), first_split=-1)
    with pytest.raises(ValueError, match="only pku-sketch"):
        run_reproduction("pcca-viper", str(tmp_path), methods=("gsm",))
    assert main(["reproduce", "pku-sketch", "--methods", "gsm,nope"]) == 2
    assert main(["reproduce", "pcca-viper", "--deepgsm-members", "2"]) == 2
    assert main(["reproduce", "pku-sketch", "--deepgsm-members", "0"]) == 2
    assert "--methods: unknown nope" in capsys.readouterr().err
    assert main(["reproduce", "pcca-viper", "--methods", "gsm"]) == 2
    assert "only pku-sketch" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "pku_sketch").is_dir(), reason="PKU-Sketch absent")
def test_pku_first_split_runs_the_same_split():
    from crossmetric.reproduce.pku import reproduce_pku_sketch

    both = reproduce_pku_sketch(str(DATA), n_splits=2, methods=("euclidean",), verbose=False,
                                setting="legacy")
    second = reproduce_pku_sketch(str(DATA), n_splits=1, first_split=1,
                                  methods=("euclidean",), verbose=False, setting="legacy")
    a, b = both.extra["per_split"]["Euclidean (HOG)"], second.extra["per_split"]["Euclidean (HOG)"]
    assert len(a["r1"]) == 2 and len(b["r1"]) == 1
    assert b["r1"][0] == a["r1"][1] and b["mAP"][0] == a["mAP"][1]
    assert second.extra["splits"] == [1, 1]
    assert {"load_avg_start", "load_avg_end", "torch_threads"} <= set(second.extra)


def test_pku_splits_are_one_seeded_sequence():
    from crossmetric.reproduce.pku import pku_splits

    persons = np.arange(1, 201)
    three = list(pku_splits(persons, 50, 0, 3))
    again = list(pku_splits(persons, 50, 0, 2))
    for (t1, p1, s1), (t2, p2, s2) in zip(three, again, strict=False):  # a prefix
        np.testing.assert_array_equal(t1, t2)
        assert (p1, s1) == (p2, s2)
    assert all(np.unique(t).size == 50 and np.isin(t, persons).all() for t, _, _ in three)
    assert not np.array_equal(np.sort(three[0][0]), np.sort(three[1][0]))
    other = next(pku_splits(persons, 50, 1, 1))[0]
    assert not np.array_equal(np.sort(other), np.sort(three[0][0]))


def test_pcca_viper_prints_the_guarded_run_beside_each_variant(monkeypatch):
    from crossmetric.reproduce import viper as V

    rng = np.random.RandomState(0)
    n = 60
    Z = rng.rand(n, 48)  # wider than PCCA's 40 components
    X = np.r_[Z + 0.05 * rng.rand(n, 48), Z + 0.05 * rng.rand(n, 48)]
    data = {"X": X / X.sum(1, keepdims=True), "ids": np.r_[np.arange(n), np.arange(n)],
            "domains": np.repeat([1, 2], n)}
    monkeypatch.setattr(V, "viper_features", lambda home: data)
    calls = []
    real = V._viper_run

    def spy(method, est, X, ids, dom, splits, **kw):
        params = None if est is None else est.get_params()
        calls.append((method, None if params is None else
                      (params["init"], params["early_stopping"]), kw["select"], kw["seed"]))
        return real(method, est, X, ids, dom, splits, **kw)

    monkeypatch.setattr(V, "_viper_run", spy)
    res = V.reproduce_pcca_viper("unused", n_splits=1, ps=(20,), negatives=(1,), itml=False,
                                 variants=("PCCA-sqrt",), verbose=False, n_jobs=1)
    assert [c[:3] for c in calls] == [("Euclidean", None, False),
                                      ("PCCA-sqrt", ("pca", False), True),
                                      ("PCCA-sqrt guarded", ("auto", "auto"), False)]
    assert calls[1][3] == calls[2][3]  # the same splits and seeds
    rows = {r["method"]: r for r in res.rows if r["measure"] == "r1"}
    assert set(rows) == {"Euclidean", "PCCA-sqrt n-=1", "PCCA-sqrt guarded n-=1"}
    assert rows["PCCA-sqrt guarded n-=1"]["paper"] is None
    assert 0 <= rows["PCCA-sqrt guarded n-=1"]["ours"] <= 100
    calls.clear()
    V.reproduce_pcca_viper("unused", n_splits=1, ps=(20,), negatives=(1,), itml=False,
                           variants=("PCCA-sqrt",), verbose=False, n_jobs=1, guarded=False)
    assert [c[0] for c in calls] == ["Euclidean", "PCCA-sqrt"]
