"""``reproduce gsm-cufs`` and ``reproduce cmml-cufs``: the fixed split, selection on training
persons only, the paired n⁻ sweep, tiny runs end to end."""

from pathlib import Path

import numpy as np
import pytest

from crossmetric.cli import main
from crossmetric.registry import gsm_paper_grid
from crossmetric.reproduce import PUBLISHED, REPRODUCTIONS, run_reproduction
from crossmetric.reproduce import cmml_cufs as CM
from crossmetric.reproduce import cufs as C
from crossmetric.reproduce.gsm_cufs import (
    GSM_CUFS_DEEPGSM,
    cufs_fixed_split,
    gsm_cufs_deepgsm,
    reproduce_gsm_cufs,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def fake_cufs(n=40, n_test=16, d=40, seed=0):
    """CUFS-shaped features: one sketch and one photo per person, the last column each row's
    person number (to recognise which rows a learner was given)."""
    rng = np.random.RandomState(seed)
    Z = rng.normal(size=(n, d))
    X = np.c_[Z + 0.3 * rng.normal(size=Z.shape), np.arange(n)]
    Y = np.c_[Z + 0.3 * rng.normal(size=Z.shape), np.arange(n)]
    labels = np.array([f"p{i:03d}" for i in range(n)])
    split = np.where(np.arange(n) < n - n_test, "train", "test")
    return {"X": X, "Y": Y, "labels": labels, "split": split}


def test_new_reproductions_are_registered_with_their_sources():
    for name in ("gsm-cufs", "cmml-cufs"):
        assert name in REPRODUCTIONS and PUBLISHED[name]["source"]
    assert PUBLISHED["gsm-cufs"]["rows"]["GSM (deep)"] == 100.0
    assert PUBLISHED["cmml-cufs"]["rows"] == {}  # nothing read off figures we do not have


def test_fixed_split_trains_on_train_persons_and_tests_the_others():
    labels = np.array(["a", "b", "c", "d", "e", "f"])
    is_test = np.array([False, False, False, True, True, False])
    sp = cufs_fixed_split(labels, is_test, n_negatives=2, random_state=0)
    n = labels.size
    assert np.array_equal(sp.probe_rows, [3, 4]) and np.array_equal(sp.gallery_rows, [9, 10])
    assert (sp.train_pairs[:, 0] < n).all() and (sp.train_pairs[:, 1] >= n).all()
    persons = np.r_[sp.train_pairs[:, 0], sp.train_pairs[:, 1] - n]
    assert not is_test[persons].any()
    pos = sp.train_pairs[sp.train_y == 1]
    assert np.array_equal(np.sort(pos[:, 0]), [0, 1, 2, 5]) and (pos[:, 1] - n == pos[:, 0]).all()
    assert (sp.train_y == -1).sum() == 2 * 4


def test_gsm_cufs_selection_and_fit_never_see_a_test_person(monkeypatch):
    import crossmetric.protocols.model_selection as ms
    import crossmetric.protocols.reid as reid

    data = fake_cufs()
    monkeypatch.setattr(C, "cufs_features", lambda home: data)
    test_persons = set(np.flatnonzero(data["split"] == "test"))
    searched, fitted, starts = [], [], []
    real_search, real_eval = ms.search_stages, reid.evaluate_reid

    def spy_search(est, grid, X, Y, labels, **kw):
        # the grid of the estimator's own structure (the special case: no start from one)
        assert grid == gsm_paper_grid(est.structure)
        starts.append((est.init, est.early_stopping))
        searched.append((set(X[:, -1].astype(int)) | set(Y[:, -1].astype(int)), set(labels)))
        return real_search(est, grid, X, Y, labels, **kw)

    def spy_eval(est, V, ids, split, **kw):
        n = ids.size // 2
        fitted.append(set(split.train_pairs[:, 0]) | set(split.train_pairs[:, 1] - n))
        assert set(split.probe_rows) == test_persons
        return real_eval(est, V, ids, split, **kw)

    monkeypatch.setattr(ms, "search_stages", spy_search)
    monkeypatch.setattr(reid, "evaluate_reid", spy_eval)
    res = reproduce_gsm_cufs("unused", methods=("euclidean", "gsm", "gsm-guarded",
                                                 "gsm-euclidean"), pca_components=20,
                             n_negatives=2, gsm_params={"max_iter": 3}, verbose=False)
    assert len(searched) == 3 and len(fitted) == 4
    # the paper's start and plain run, and beside it the library's start and guard
    assert starts == [("random", False), ("auto", "auto"), ("random", False)]
    for rows, labels in searched:
        assert rows and not rows & test_persons
        assert not labels & set(data["labels"][sorted(test_persons)])
    assert all(f and not f & test_persons for f in fitted)
    r1 = {r["method"]: r["ours"] for r in res.rows if r["measure"] == "rank-1"}
    assert 0.0 <= r1["GSM (dense SIFT, PCA)"] <= 100.0
    assert 0.0 <= r1["GSM affine Euclidean case (dense SIFT, PCA)"] <= 100.0
    assert 0.0 <= r1["GSM guarded (dense SIFT, PCA)"] <= 100.0
    assert [t["method"] for t in res.extra["tuned"]] == ["gsm", "gsm-guarded", "gsm-euclidean"]
    assert r1["Euclidean (dense SIFT, PCA)"] > 50.0   # the fake persons are easy
    # 32 and 64 > PCA-20 fail; 16 and the identity start (no reduction of its own) remain
    assert res.extra["tuned"][0]["params"]["n_components"] in (16, None)
    assert res.extra["n_train"] == 24 and res.extra["n_test"] == 16


def test_gsm_cufs_recipe_and_errors():
    pytest.importorskip("torch", reason="DeepGSM needs torch (the [deep] extra)")
    model = gsm_cufs_deepgsm(epochs=3, n_train=180, device="cpu")
    params = model.get_params()
    assert params["max_iter"] == 3 * 6 and params["device"] == "cpu"  # 180 / 30 a round
    assert all(params[k] == v for k, v in GSM_CUFS_DEEPGSM.items())
    assert gsm_cufs_deepgsm(epochs=1, hidden_units=8).get_params()["hidden_units"] == 8
    with pytest.raises(ValueError, match="epochs"):
        gsm_cufs_deepgsm(epochs=0)
    with pytest.raises(ValueError, match="methods"):
        reproduce_gsm_cufs("unused", methods=("nope",))


def test_cmml_cufs_sweeps_with_the_same_test_persons_for_every_negative_count(monkeypatch):
    import crossmetric.protocols.runner as P  # run_many looks run_protocols up there

    data = fake_cufs(n=60, n_test=0)
    monkeypatch.setattr(C, "cufs_features", lambda home: data)
    calls = []
    real = P.run_protocols

    def spy(estimators, dataset, **kw):
        calls.append((kw["n_negatives"], kw["random_state"], sorted(estimators)))
        return real(estimators, dataset, **kw)

    monkeypatch.setattr(P, "run_protocols", spy)
    res = CM.reproduce_cmml_cufs("unused", n_splits=2, dims=(2, 4), negatives=(1, 3),
                                 methods=("cca",), pca_components=8, tune=False,
                                 n_persons=60, verbose=False)
    assert len(calls) == 4
    seeds = {n: [s for m, s, _ in calls if m == n] for n in (1, 3)}
    assert seeds[1] == seeds[3] and len(set(seeds[1])) == 2   # paired splits
    assert calls[0][2] == ["CCA d=2", "CCA d=4", "CMML n-=1 d=2", "CMML n-=1 d=4",
                           "Euclidean"]
    assert calls[-1][2] == ["CMML n-=3 d=2", "CMML n-=3 d=4"]
    cur = res.extra["curves"]
    assert cur["dims"] == [2, 4] and set(cur["fig7"]) == {1, 3}
    assert set(cur["fig6"]) == {"CMML", "CCA"}
    assert all(0 <= v <= 100 for v in cur["fig7"][3]["rank-1"])
    claims = [c["claim"] for c in res.extra["claims"]]
    assert any("n- = 1" in c for c in claims) and any("CMML above CCA" in c for c in claims)
    assert {r["measure"] for r in res.rows} == {"rank-1", "acc@EER"}
    with pytest.raises(ValueError, match="methods"):
        CM.reproduce_cmml_cufs("unused", methods=("nope",))


def test_cmml_cufs_tuning_is_the_iteration_stage(monkeypatch):
    import crossmetric.protocols.runner as P  # run_many looks run_protocols up there

    data = fake_cufs(n=60, n_test=0)
    monkeypatch.setattr(C, "cufs_features", lambda home: data)
    grids = []
    real = P.run_protocols

    def spy(estimators, dataset, **kw):
        grids.append(kw["param_grids"])
        return real(estimators, dataset, **kw)

    monkeypatch.setattr(P, "run_protocols", spy)
    res = CM.reproduce_cmml_cufs("unused", n_splits=1, dims=(3,), negatives=(1,),
                                 methods=("cmml",), pca_components=8, n_persons=60,
                                 verbose=False)
    from crossmetric.registry import ITERATION_STAGE

    assert grids == [{"CMML n-=1 d=3": [ITERATION_STAGE]}]
    assert res.extra["tuned"]["CMML n-=1 d=3"][0]["params"]["max_iter"] in \
        ITERATION_STAGE["max_iter"]


def test_in_span_coordinates_change_no_distance_and_no_later_pca():
    from crossmetric._solvers.linalg import fit_pca

    rng = np.random.RandomState(1)
    X, Y = rng.normal(size=(12, 300)), rng.normal(size=(12, 300))
    Xq, Yq = CM.in_span_coordinates(X, Y)
    assert Xq.shape == (12, 24)
    d = ((X[:, None] - Y[None]) ** 2).sum(-1)
    assert np.allclose(d, ((Xq[:, None] - Yq[None]) ** 2).sum(-1))
    rows = [0, 3, 5, 7]                       # a PCA fitted on a subset, as each split does
    a = fit_pca(np.vstack([X[rows], Y[rows]]), 5).transform(X)
    b = fit_pca(np.vstack([Xq[rows], Yq[rows]]), 5).transform(Xq)
    assert np.allclose(np.abs(a), np.abs(b))  # the same coordinates up to sign
    few = rng.normal(size=(3, 2))
    assert CM.in_span_coordinates(few, few)[0] is few   # nothing to gain: unchanged


def test_cli_reproduce_device_and_epochs_only_for_gsm_cufs(capsys):
    assert main(["reproduce", "pcca-viper", "--device", "cpu"]) == 2
    assert "only gsm-cufs" in capsys.readouterr().err
    assert main(["reproduce", "gsm-cufs", "--epochs", "0"]) == 2
    assert main(["reproduce", "gsm-cufs", "--methods", "gsm,nope"]) == 2
    assert ("expected some of euclidean, gsm, gsm-guarded, gsm-euclidean, deepgsm"
            in capsys.readouterr().err)


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cufs").is_dir(), reason="CUFS absent")
def test_gsm_cufs_tiny_run_on_the_real_data(tmp_path):
    res = run_reproduction("gsm-cufs", DATA, out=str(tmp_path), verbose=False,
                           n_persons=(36, 12), device="cpu", epochs=1, image_size=(40, 50),
                           deepgsm_params={"hidden_units": 8}, pca_components=20,
                           n_negatives=3, gsm_params={"max_iter": 20})
    r1 = {r["method"]: r["ours"] for r in res.rows if r["measure"] == "rank-1"}
    for m in ("Euclidean (dense SIFT, PCA)", "GSM (dense SIFT, PCA)", "DeepGSM (images)"):
        assert 0.0 <= r1[m] <= 100.0
    assert res.extra["n_test"] == 12
    assert (tmp_path / "results.csv").is_file() and (tmp_path / "cmc.png").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cufs").is_dir(), reason="CUFS absent")
def test_cmml_cufs_tiny_run_on_the_real_data(tmp_path):
    res = run_reproduction("cmml-cufs", DATA, n_splits=1, out=str(tmp_path), verbose=False,
                           dims=(4, 8), negatives=(1, 2), n_persons=40, pca_components=16,
                           tune=False)
    assert res.extra["n_test"] == 23
    for name in ("fig6_rank1.png", "fig6_eer.png", "fig7_rank1.png", "fig7_eer.png",
                 "results.json"):
        assert (tmp_path / name).is_file()


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cufs").is_dir(), reason="CUFS absent")
def test_gsm_cufs_deepgsm_alone_needs_no_descriptor(monkeypatch):
    def no_sift(home):
        raise AssertionError("DeepGSM alone must not compute the dense SIFT")

    monkeypatch.setattr(C, "cufs_features", no_sift)
    res = reproduce_gsm_cufs(DATA, methods=("deepgsm",), n_persons=(20, 8), device="cpu",
                             epochs=1, image_size=(20, 25), deepgsm_params={"hidden_units": 4},
                             verbose=False)
    assert res.extra["n_train"] == 20 and res.extra["n_test"] == 8
    assert 0.0 <= res.rows[0]["ours"] <= 100.0


def test_cml_auc_cufs_prints_the_guarded_run_beside_the_paper_run(monkeypatch):
    import crossmetric.protocols as PR  # reproduce_cml_auc_cufs imports run_protocols there

    monkeypatch.setattr(C, "N_TEST", 20)
    monkeypatch.setattr(C, "cufs_features", lambda home: fake_cufs(n=60, n_test=0, d=12))
    seen = {}
    real = PR.run_protocols

    def spy(estimators, dataset, **kw):
        seen.update({name: est.get_params() for name, est in estimators.items()})
        return real(estimators, dataset, **kw)

    monkeypatch.setattr(PR, "run_protocols", spy)
    res = C.reproduce_cml_auc_cufs("unused", n_splits=1, methods=("euclidean", "cmml"),
                                   tune=False, pca_components=8, verbose=False)
    assert list(seen) == ["Euclidean", "CMML", "CMML guarded"]  # no guard for Euclidean
    assert (seen["CMML"]["init"], seen["CMML"]["early_stopping"]) == ("random", False)
    assert (seen["CMML guarded"]["init"], seen["CMML guarded"]["early_stopping"]) == \
        ("auto", "auto")
    assert seen["CMML guarded"]["n_components"] == seen["CMML"]["n_components"] == 30
    rows = {(r["method"], r["measure"]): r for r in res.rows}
    assert [m for m, meas in rows if meas == "rank-1"] == ["Euclidean", "CMML", "CMML guarded"]
    assert rows["CMML", "rank-1"]["paper"] is not None
    assert rows["CMML guarded", "rank-1"]["paper"] is None
    assert 0 <= rows["CMML guarded", "rank-1"]["ours"] <= 100
    seen.clear()
    C.reproduce_cml_auc_cufs("unused", n_splits=1, methods=("cmml",), tune=False,
                             pca_components=8, verbose=False, guarded=False)
    assert list(seen) == ["CMML"]
