"""``reproduce gsm-cuhk01``: the span rotation, the single-shot views, a tiny run that writes
its files, and model selection that never sees a test person."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from crossmetric.features._patch_color_sift import PatchColorSIFT
from crossmetric.protocols import run_protocols
from crossmetric.reproduce import PUBLISHED, REPRODUCTIONS, run_reproduction
from crossmetric.reproduce.cuhk01 import cuhk01_views, span_coordinates

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_cuhk01 = pytest.mark.skipif(not (DATA / "cuhk01").is_dir(), reason="CUHK01 absent")


def tiny_descriptor():
    """Colour histograms of a few large patches: a fast stand-in for the 129k-d feature."""
    return PatchColorSIFT(patch_size=32, step=16, n_bins=4, sift=False)


def test_span_coordinates_keep_every_pca_of_a_subset():
    rng = np.random.RandomState(0)
    F = rng.rand(30, 200).astype(np.float32)
    Z = span_coordinates(F, block=37)  # blocks that do not divide the width
    assert Z.shape == (30, 30)
    np.testing.assert_allclose(Z @ Z.T, F.astype(float) @ F.T.astype(float), rtol=1e-6,
                               atol=1e-6)
    train = rng.permutation(30)[:20]  # a PCA fitted on some rows only, applied to all
    a = PCA(5, svd_solver="full").fit(F[train].astype(float)).transform(F.astype(float))
    b = PCA(5, svd_solver="full").fit(Z[train]).transform(Z)
    np.testing.assert_allclose(np.abs(a), np.abs(b), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="F must be"):
        span_coordinates(np.zeros(3))


def test_views_draw_one_image_per_camera_and_person():
    ids = np.repeat([1, 2, 3], 4)
    dom = np.tile([1, 1, 2, 2], 3)
    data = {"Z": np.arange(12.0)[:, None], "ids": ids, "domains": dom}
    v = cuhk01_views(data, np.random.RandomState(0))
    assert list(v["labels"]) == [1, 2, 3]
    assert (dom[v["rows_x"]] == 1).all() and (dom[v["rows_y"]] == 2).all()
    assert (ids[v["rows_x"]] == v["labels"]).all() and (ids[v["rows_y"]] == v["labels"]).all()
    np.testing.assert_array_equal(v["X"][:, 0], v["rows_x"])
    bad = {"Z": data["Z"], "ids": ids, "domains": np.ones(12, int)}
    with pytest.raises(ValueError, match="camera 2"):
        cuhk01_views(bad, np.random.RandomState(0))


def test_published_numbers_of_the_gsm_paper():
    assert PUBLISHED["gsm-cuhk01"]["rows"]["Generalized"]["r1"] == 39.5
    assert PUBLISHED["gsm-cuhk01-deep"]["rows"]["DeepGSM"]["r1"] == 66.5
    assert "gsm-cuhk01" in REPRODUCTIONS and "gsm-cuhk01-deep" in REPRODUCTIONS


@needs_cuhk01
@pytest.mark.slow
def test_tiny_gsm_cuhk01_runs_and_writes_its_files(tmp_path):
    res = run_reproduction(
        "gsm-cuhk01", str(DATA), n_splits=1, out=str(tmp_path), verbose=False,
        persons=16, n_test=6, n_negatives=2, pca_components=8, descriptor=tiny_descriptor(),
        structures=["Generalized", "LADF"], baselines=["euclidean"],
        gsm_params={"max_iter": 30, "n_identities": 5}, grid=[{"mu": [1e-4, 1e-3]}],
        cache=str(tmp_path / "f.npz"))
    names = {Path(f).name for f in res.files}
    assert {"results.csv", "results.json", "cmc.png"} <= names
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    r1 = {r["method"]: r for r in rows if r["measure"] == "r1"}
    assert set(r1) == {"Generalized", "Generalized guarded", "LADF", "Euclidean"}
    assert r1["Generalized"]["paper"] == 39.5 and r1["Generalized guarded"]["paper"] is None
    assert all(0 <= r["ours"] <= 100 for r in r1.values())
    # the paper grid was searched for every GSM structure, and for the guarded run
    assert set(res.extra["tuned"]) == {"Generalized", "Generalized guarded", "LADF"}
    assert (tmp_path / "f.npz").is_file()  # the feature cache


@needs_cuhk01
def test_gsm_cuhk01_selection_never_sees_a_test_person(monkeypatch):
    """Leak test: the paper-grid search of every split is handed the split's training
    persons, all of them and no test person."""
    import crossmetric.protocols.model_selection as ms

    protocols = sys.modules[run_protocols.__module__]
    tests, searched = [], []
    original_splits, original_search = protocols.identification_splits, ms.search_stages

    def splits(labels, *a, **kw):
        out = original_splits(labels, *a, **kw)
        tests.append(set(np.asarray(labels)[out[0].probe_rows].tolist()))
        return out

    def search(est, stages, X, Y, labels, **kw):
        searched.append((len(tests), set(np.asarray(labels).tolist())))
        return original_search(est, stages, X, Y, labels, **kw)

    monkeypatch.setattr(protocols, "identification_splits", splits)
    monkeypatch.setattr(ms, "search_stages", search)
    from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01

    res = reproduce_gsm_cuhk01(str(DATA), n_splits=2, verbose=False, persons=14, n_test=4,
                               n_negatives=2, pca_components=6, descriptor=tiny_descriptor(),
                               structures=["Generalized"], baselines=[],
                               gsm_params={"max_iter": 5, "n_identities": 4},
                               grid=[{"n_components": [2, 3]}], guarded=False)
    assert len(tests) == 2 and len(searched) == 2
    # each split's choice is tagged with that split (protocols.batch.gather)
    assert [t["split"] for t in res.extra["tuned"]["Generalized"]] == [0, 1]
    for k, persons in searched:
        assert persons and not persons & tests[k - 1]
        assert len(persons) == 10  # all training persons, no test person


@needs_cuhk01
@pytest.mark.slow
def test_tiny_gsm_cuhk01_deep_runs_on_the_given_device(tmp_path):
    pytest.importorskip("torch")
    res = run_reproduction(
        "gsm-cuhk01-deep", str(DATA), n_splits=1, out=str(tmp_path), verbose=False,
        persons=12, n_test=4, n_negatives=2, with_gsm=False, device="cpu",
        deepgsm_params={"max_iter": 3, "n_identities": 4, "hidden_units": 8})
    rows = {r["method"]: r for r in res.rows if r["measure"] == "r1"}
    assert set(rows) == {"DeepGSM"} and rows["DeepGSM"]["paper"] == 66.5
    assert 0 <= rows["DeepGSM"]["ours"] <= 100 and res.extra["device"] == "cpu"
    assert (tmp_path / "results.csv").is_file()


def test_cli_device_and_feature_cache_belong_to_the_cuhk01_reproductions(capsys):
    from crossmetric.cli import main

    assert main(["reproduce", "pcca-viper", "--device", "cuda"]) == 2
    assert "only gsm-cufs and gsm-cuhk01-deep take it" in capsys.readouterr().err
    assert main(["reproduce", "pku-sketch", "--feature-cache", "x.npz"]) == 2
    assert "only gsm-cuhk01 and gsm-cuhk01-deep" in capsys.readouterr().err
    assert main(["reproduce", "--list"]) == 0
    assert "gsm-cuhk01-deep" in capsys.readouterr().out


def test_gsm_cuhk01_guarded_run_is_the_generalized_paper_run_with_the_guard():
    from crossmetric.reproduce.cuhk01 import CUHK01_GSM, _methods

    est, grids = _methods(["Generalized", "LADF"], ["euclidean"], dict(CUHK01_GSM),
                          guarded=True)
    assert list(est) == ["Generalized", "Generalized guarded", "LADF", "Euclidean"]
    paper, twin = est["Generalized"].get_params(), est["Generalized guarded"].get_params()
    assert (paper["init"], paper["early_stopping"]) == ("random", False)
    assert (twin["init"], twin["early_stopping"]) == ("auto", "auto")
    assert {k: v for k, v in twin.items() if k not in ("init", "early_stopping")} == \
        {k: v for k, v in paper.items() if k not in ("init", "early_stopping")}
    assert grids["Generalized guarded"] == grids["Generalized"]
    assert list(_methods(["Generalized"], [], dict(CUHK01_GSM))[0]) == ["Generalized"]
