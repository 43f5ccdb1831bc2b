"""The command line: benchmark writes its files; fit / evaluate / search; bad input exits 2."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from crossmetric.cli import main
from crossmetric.datasets import make_cross_modal
from crossmetric.pairs import make_pairs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = make_cross_modal(200, n_classes=20, n_features_x=10, n_features_y=7, random_state=0)
    tmp = tmp_path_factory.mktemp("cli")
    np.save(tmp / "x.npy", d.X)
    np.savetxt(tmp / "y.csv", d.Y, delimiter=",", header="a,b,c,d,e,f,g", comments="")
    pairs, y = make_pairs(d.labels, d.labels, random_state=0)
    np.savetxt(tmp / "pairs.csv", np.c_[pairs, y], fmt="%d", delimiter=",",
               header="i,j,label", comments="")
    return tmp, d


def _err_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_benchmark_writes_all_files(tmp_path, capsys):
    out = tmp_path / "res"
    rc = main(["benchmark", "--methods", "euclidean,pcca", "--repeats", "1",
               "--out", str(out), "--no-progress", "--n-jobs", "1"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "PCCA-C" in captured.out and "Rank-1" in captured.out and "±" in captured.out
    for name in ("results.csv", "results.json", "roc.png", "cmc.png"):
        assert (out / name).stat().st_size > 0, name
    res = json.loads((out / "results.json").read_text())
    assert res["methods"] == ["Euclidean-C", "PCCA-C"]
    header = (out / "results.csv").read_text().splitlines()[0]
    assert header == "method,measure,mean,std,sem,n"


def test_benchmark_mfeat(tmp_path, capsys):
    home = os.path.join(ROOT, "..", "shared", "data", "mfeat")
    if not os.path.isdir(home):
        pytest.skip("../shared/data/mfeat is not present")
    rc = main(["benchmark", "--dataset", "mfeat:fou,kar", "--data-home", home, "--methods",
               "cmml", "--folds", "2", "--repeats", "1", "--protocol", "identification",
               "--out", str(tmp_path), "--no-progress", "--n-jobs", "1"])
    assert rc == 0
    assert "CMML" in capsys.readouterr().out
    assert not (tmp_path / "roc.png").exists() and (tmp_path / "cmc.png").exists()


def test_benchmark_list(capsys):
    assert main(["benchmark", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("euclidean", "pcca", "cmml", "deepgsm", "kissme"):
        assert name in out


@pytest.mark.parametrize("argv, fragment", [
    (["benchmark", "--methods", "euclidean,nosuch"], "nosuch"),
    (["benchmark", "--dataset", "imagenet"], "dataset"),
    (["benchmark", "--dataset", "mfeat:fou,xyz", "--data-home", "."], "mfeat"),
    (["benchmark", "--dataset", "mfeat:fou,pix", "--data-home", "/nonexistent"], "data_home"),
    (["benchmark", "--folds", "1"], "--folds"),
    (["benchmark", "--folds", "three"], "invalid int"),
    (["fit", "nosuch", "--x", "a.npy", "--pairs", "p.csv", "--out", "m"], "unknown method"),
    (["fit", "pcca", "--x", "missing.npy", "--pairs", "p.csv", "--out", "m"], "not found"),
    (["fit"], "required"),
    (["evaluate", "missing.joblib", "--x", "a.npy", "--pairs", "p.csv"], "not found"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(argv, fragment, capsys):
    assert main(argv) == 2
    assert fragment in _err_line(capsys)


def test_fit_evaluate_search_roundtrip(files, tmp_path, capsys):
    tmp, d = files
    model = tmp_path / "cmml.joblib"
    rc = main(["fit", "cmml", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
               "--pairs", str(tmp / "pairs.csv"), "--out", str(model),
               "--param", "n_components=4", "--param", "max_iter=50", "--seed", "0",
               "--convergence", str(tmp_path / "conv.png")])
    assert rc == 0, capsys.readouterr().err
    assert "saved" in capsys.readouterr().out
    assert (tmp_path / "conv.png").read_bytes()[:4] == b"\x89PNG"
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
               "--pairs", str(tmp / "pairs.csv"), "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["method"] == "cmml" and 0.5 < rep["auc"] <= 1.0
    assert rep["n_pairs"] == np.loadtxt(tmp / "pairs.csv", delimiter=",", skiprows=1).shape[0]
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
               "--pairs", str(tmp / "pairs.csv")])
    assert rc == 0 and "ROC AUC" in capsys.readouterr().out

    pytest.importorskip("crossmetric.retrieval")
    pytest.importorskip("faiss")
    rc = main(["search", str(model), "--database", str(tmp / "y.csv"), "--queries",
               str(tmp / "x.npy"), "-k", "5", "--out", str(tmp_path / "hits.csv")])
    assert rc == 0, capsys.readouterr().err
    hits = np.loadtxt(tmp_path / "hits.csv", delimiter=",", skiprows=1)
    assert hits.shape == (200 * 5, 4)
    # the ids are the 5 smallest learned distances of each query
    import joblib

    est = joblib.load(model)["model"]
    D = est.cross_distance(d.X, d.Y)
    ids = hits[:, 2].reshape(200, 5).astype(int)
    ref = np.sort(D, axis=1)[:, :5]
    np.testing.assert_allclose(np.take_along_axis(D, ids, axis=1), ref, rtol=1e-4, atol=1e-4)


def test_fit_and_evaluate_bad_files(files, tmp_path, capsys):
    tmp, d = files
    model = tmp_path / "m.joblib"
    bad_pairs = tmp_path / "bad.csv"
    bad_pairs.write_text("0,1,1\n0,2,5\n")
    assert main(["fit", "pcca", "--x", str(tmp / "x.npy"), "--pairs", str(bad_pairs),
                 "--out", str(model)]) == 2
    assert "label" in _err_line(capsys)
    far = tmp_path / "far.csv"
    far.write_text("0,1,1\n0,999,-1\n")
    assert main(["fit", "pcca", "--x", str(tmp / "x.npy"), "--pairs", str(far),
                 "--out", str(model)]) == 2
    assert "999" in _err_line(capsys)
    # wrong feature count at evaluation time
    assert main(["fit", "euclidean", "--x", str(tmp / "x.npy"), "--pairs",
                 str(tmp / "pairs.csv"), "--out", str(model)]) == 0
    capsys.readouterr()
    np.save(tmp_path / "narrow.npy", d.X[:, :3])
    assert main(["evaluate", str(model), "--x", str(tmp_path / "narrow.npy"), "--pairs",
                 str(tmp / "pairs.csv")]) == 2
    assert "features" in _err_line(capsys)
    # a file that is not a model
    junk = tmp_path / "junk.joblib"
    junk.write_bytes(b"not a model at all")
    assert main(["evaluate", str(junk), "--x", str(tmp / "x.npy"), "--pairs",
                 str(tmp / "pairs.csv")]) == 2
    assert "not a crossmetric model" in _err_line(capsys)
    # a corrupt feature file
    broken = tmp_path / "broken.npy"
    broken.write_bytes(b"\x93NUMPY garbage")
    assert main(["fit", "pcca", "--x", str(broken), "--pairs", str(tmp / "pairs.csv"),
                 "--out", str(model)]) == 2
    assert "--x" in _err_line(capsys)


def test_python_dash_m_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "crossmetric", "fit", "nosuch", "--x", "a",
                           "--pairs", "b", "--out", "c"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown method" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------ registry
def test_registry_builds_every_method():
    import crossmetric
    from crossmetric.registry import METHODS, available_methods, make_estimator

    status = available_methods()
    assert list(status) == list(METHODS)
    for name, reason in status.items():
        assert reason is None, f"{name}: {reason}"
    est = make_estimator("cmlpauc", random_state=3)
    assert isinstance(est, crossmetric.CMLAUC)
    assert est.fpr_range == (0.0, 0.1) and est.random_state == 3
    assert isinstance(make_estimator("PCCA"), crossmetric.PCCA)
    with pytest.raises(ValueError, match="unknown method"):
        make_estimator("no-such-method")


def test_registry_reports_missing_modules_but_not_broken_imports(monkeypatch, tmp_path):
    import crossmetric
    from crossmetric import registry

    monkeypatch.setitem(registry.METHODS, "ghost",
                        registry.MethodSpec("ghost", "Ghost", "GhostLearner"))
    monkeypatch.setitem(crossmetric._LAZY, "GhostLearner", "crossmetric.ghost_module")
    assert "not part of this installation" in registry.method_status("ghost")
    with pytest.raises(ValueError, match="not available"):
        registry.make_estimator("ghost")
    # a module that exists but lacks the class
    monkeypatch.setitem(crossmetric._LAZY, "GhostLearner", "crossmetric.baselines")
    assert "not defined" in registry.method_status("ghost")
    # a module that exists but fails on a missing dependency: the error propagates
    (tmp_path / "cm_broken_learner.py").write_text("import nonexistent_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(crossmetric._LAZY, "GhostLearner", "cm_broken_learner")
    with pytest.raises(ModuleNotFoundError, match="nonexistent_dependency_xyz"):
        registry.method_status("ghost")


def test_search_falls_back_to_exhaustive_for_non_l2_scores(files, tmp_path, capsys):
    pytest.importorskip("crossmetric.retrieval")
    tmp, d = files
    model = tmp_path / "gsm.joblib"
    assert main(["fit", "gsm", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
                 "--pairs", str(tmp / "pairs.csv"), "--out", str(model), "--seed", "0",
                 "--param", "n_components=4", "--param", "max_iter=3"]) == 0
    capsys.readouterr()
    assert main(["search", str(model), "--database", str(tmp / "y.csv"), "--queries",
                 str(tmp / "x.npy"), "-k", "3", "--out", str(tmp_path / "hits.npz")]) == 0
    assert "exhaustive" in capsys.readouterr().err
    import joblib

    est = joblib.load(model)["model"]
    hits = np.load(tmp_path / "hits.npz")
    D = est.cross_distance(d.X, d.Y)
    np.testing.assert_allclose(hits["distances"], np.sort(D, axis=1)[:, :3])
    np.testing.assert_allclose(np.take_along_axis(D, hits["ids"], axis=1), hits["distances"])
