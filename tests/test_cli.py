"""The command line: benchmark writes its files; fit / evaluate / search; bad input exits 2."""

import importlib.util
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
    from crossmetric.persistence import load_model

    est = load_model(model)
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
    from crossmetric.registry import METHODS, available_methods, make_estimator, method_status

    if importlib.util.find_spec("torch") is None:  # a core install: DeepGSM cannot import
        deep = [n for n, s in METHODS.items()
                if crossmetric._LAZY[s.class_name].startswith("crossmetric.deep")]
        for name in deep:
            with pytest.raises(ModuleNotFoundError, match="torch"):
                method_status(name)
        status = {name: method_status(name) for name in METHODS if name not in deep}
    else:
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
    from crossmetric import registry

    def ghost(module):
        monkeypatch.setitem(registry.METHODS, "ghost", registry.MethodSpec(
            "ghost", "Ghost", "GhostLearner", module=module))

    ghost("crossmetric.ghost_module")
    assert "not part of this installation" in registry.method_status("ghost")
    with pytest.raises(ValueError, match="not available"):
        registry.make_estimator("ghost")
    # a module that exists but lacks the class
    ghost("crossmetric.learners.baselines")
    assert "not defined" in registry.method_status("ghost")
    # a module that exists but fails on a missing dependency: the error propagates
    (tmp_path / "cm_broken_learner.py").write_text("import nonexistent_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ghost("cm_broken_learner")
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
    from crossmetric.persistence import load_model

    est = load_model(model)
    hits = np.load(tmp_path / "hits.npz")
    D = est.cross_distance(d.X, d.Y)
    np.testing.assert_allclose(hits["distances"], np.sort(D, axis=1)[:, :3])
    np.testing.assert_allclose(np.take_along_axis(D, hits["ids"], axis=1), hits["distances"])


# ------------------------------------------------------------------- own data
@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """Own-data files in several formats: features .npy / whitespace text, labels text."""
    d = make_cross_modal(160, n_classes=16, n_features_x=8, n_features_y=6, random_state=2)
    tmp = tmp_path_factory.mktemp("own")
    np.save(tmp / "x.npy", d.X)
    np.savetxt(tmp / "y.txt", d.Y)  # whitespace, UCI layout
    np.savez(tmp / "xy.npz", photo=d.X, sketch=d.Y)
    (tmp / "labels.txt").write_text("label\n" + "\n".join(map(str, d.labels)) + "\n")
    (tmp / "inst.txt").write_text("\n".join(map(str, range(160))) + "\n")
    return tmp, d


def _files_in(path):
    return sorted(p.name for p in path.rglob("*")) if path.exists() else []


def test_benchmark_own_files_cross_and_single_modal(own, tmp_path, capsys):
    tmp, d = own
    out = tmp_path / "cross"
    rc = main(["benchmark", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"), "--labels",
               str(tmp / "labels.txt"), "--methods", "euclidean,cmml", "--folds", "2",
               "--repeats", "1", "--out", str(out), "--no-progress", "--n-jobs", "1"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    assert res["methods"] == ["Euclidean-C", "CMML"] and res["info"]["cross_modal"] is True
    assert (out / "results.md").read_text().startswith("| Method |")
    assert "\\toprule" in (out / "results.tex").read_text()
    capsys.readouterr()
    out = tmp_path / "single"
    rc = main(["benchmark", "--x", str(tmp / "xy.npz"), "--key", "photo", "--labels",
               str(tmp / "labels.txt"), "--methods", "euclidean,pcca", "--folds", "2",
               "--repeats", "1", "--out", str(out), "--no-progress", "--n-jobs", "1"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    assert res["methods"] == ["Euclidean", "PCCA"] and res["info"]["cross_modal"] is False
    assert "one modality" in capsys.readouterr().err


def test_benchmark_instance_level(own, tmp_path, capsys):
    tmp, _ = own
    rc = main(["benchmark", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"),
               "--instance", str(tmp / "inst.txt"), "--methods", "cmml", "--protocol",
               "identification", "--repeats", "1", "--out", str(tmp_path), "--no-progress",
               "--n-jobs", "1"])
    assert rc == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "results.json").read_text())["info"]["level"] == "instance"


def test_cli_defaults_agree_with_python(tmp_path, capsys):
    """`crossmetric benchmark` and run_protocols with the same data and defaults agree."""
    import inspect

    from crossmetric.config import resolve_config
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import make_estimator

    args = resolve_config().options  # the command line's defaults
    dflt = inspect.signature(run_protocols).parameters
    assert (args["folds"], args["repeats"], args["n_negatives"], args["max_train_positives"],
            args["seed"]) == tuple(dflt[k].default for k in (
                "n_folds", "n_repeats", "n_negatives", "max_train_positives", "random_state"))
    d = make_cross_modal(120, n_classes=12, n_features_x=5, n_features_y=5, random_state=4)
    np.save(tmp_path / "x.npy", d.X)
    np.save(tmp_path / "y.npy", d.Y)
    np.save(tmp_path / "l.npy", d.labels)
    assert main(["benchmark", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", str(tmp_path / "l.npy"), "--methods", "euclidean", "--folds", "3",
                 "--repeats", "2", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    capsys.readouterr()
    cli = json.loads((tmp_path / "o" / "results.json").read_text())
    py = run_protocols({"Euclidean": make_estimator("euclidean")},
                       {"X": d.X, "Y": d.Y, "labels": d.labels}, n_folds=3, n_repeats=2)
    got = {(r["method"], r["measure"]): r["mean"] for r in cli["summary"]}
    for r in py.summary:
        if r["measure"] != "fit_seconds":
            assert got[(r["method"], r["measure"])] == pytest.approx(r["mean"], abs=1e-12)


def test_benchmark_lfw_pairs(tmp_path, capsys):
    rng = np.random.default_rng(0)
    names = [f"P{k}" for k in range(12)]
    imgs = [(n, i) for n in names for i in (1, 2, 3)]
    feats = np.array([[names.index(n) * 3.0, 0.0] for n, _ in imgs]) + \
        0.3 * rng.standard_normal((len(imgs), 2))
    np.save(tmp_path / "f.npy", feats)
    (tmp_path / "list.txt").write_text("\n".join(f"{n}_{i:04d}.jpg" for n, i in imgs) + "\n")
    lines = ["2\t6"]
    for f in range(2):
        group = names[6 * f: 6 * f + 6]
        lines += [f"{n}\t1\t{2 + (k % 2)}" for k, n in enumerate(group)]
        lines += [f"{group[k]}\t1\t{group[(k + 1) % 6]}\t2" for k in range(6)]
    (tmp_path / "pairs.txt").write_text("\n".join(lines) + "\n")
    rc = main(["benchmark", "--lfw-pairs", str(tmp_path / "pairs.txt"), "--x",
               str(tmp_path / "f.npy"), "--image-list", str(tmp_path / "list.txt"),
               "--methods", "euclidean", "--out", str(tmp_path / "o"), "--no-progress",
               "--n-jobs", "1"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["info"]["n_folds"] == 2 and res["info"]["n_pairs"] == 24
    auc = [r for r in res["summary"] if r["measure"] == "auc"][0]
    assert auc["n"] == 2 and auc["mean"] > 0.9
    assert (tmp_path / "o" / "roc.png").exists() and not (tmp_path / "o" / "cmc.png").exists()


def test_evaluate_identification_and_scores(own, tmp_path, capsys):
    tmp, d = own
    model = tmp_path / "m.joblib"
    assert main(["fit", "cmml", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"),
                 "--labels", str(tmp / "labels.txt"), "--out", str(model), "--seed", "0",
                 "--param", "n_components=4", "--param", "max_iter=40"]) == 0
    capsys.readouterr()
    (tmp_path / "pl.txt").write_text("\n".join(map(str, d.labels)))
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"),
               "--probe-labels", str(tmp_path / "pl.txt"), "--gallery-labels",
               str(tmp / "labels.txt"), "--json", "--ranks", "1,5"])
    assert rc == 0, capsys.readouterr().err
    rep = json.loads(capsys.readouterr().out)["identification"]
    from crossmetric import metrics as M
    from crossmetric.persistence import load_model

    est = load_model(model)
    D = est.cross_distance(d.X, d.Y)
    assert rep["rank1"] == pytest.approx(M.rank_accuracy(D, d.labels, d.labels, 1))
    assert rep["rank5"] == pytest.approx(M.rank_accuracy(D, d.labels, d.labels, 5))
    assert rep["map"] == pytest.approx(M.mean_average_precision(D, d.labels, d.labels))
    # per-pair scores of verification pairs
    pairs, y = make_pairs(d.labels, d.labels, random_state=1)
    np.savetxt(tmp_path / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"),
               "--pairs", str(tmp_path / "p.csv"), "--scores", str(tmp_path / "s.csv")])
    assert rc == 0 and "ROC AUC" in capsys.readouterr().out
    s = np.loadtxt(tmp_path / "s.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(s[:, :3], np.c_[pairs, y])
    np.testing.assert_allclose(s[:, 3], D[pairs[:, 0], pairs[:, 1]], rtol=1e-6)
    # identification distances as .npy
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.txt"),
               "--probe-labels", str(tmp_path / "pl.txt"), "--gallery-labels",
               str(tmp / "labels.txt"), "--scores", str(tmp_path / "d.npy")])
    assert rc == 0
    np.testing.assert_allclose(np.load(tmp_path / "d.npy"), D)


def test_search_clamps_k_and_falls_back_without_faiss(files, tmp_path, capsys, monkeypatch):
    tmp, d = files
    model = tmp_path / "e.joblib"
    assert main(["fit", "cmml", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
                 "--pairs", str(tmp / "pairs.csv"), "--out", str(model), "--param",
                 "n_components=3", "--param", "max_iter=20", "--seed", "0"]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` raises ImportError
    rc = main(["search", str(model), "--database", str(tmp / "y.csv"), "--queries",
               str(tmp / "x.npy"), "-k", "99999999999", "--out", str(tmp_path / "h.npz")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "larger than the database (200 rows)" in err and "exhaustive" in err
    assert np.load(tmp_path / "h.npz")["ids"].shape == (200, 200)


def test_search_into_head_ends_quietly(files, tmp_path):
    tmp, _ = files
    model = tmp_path / "c.joblib"
    assert main(["fit", "cmml", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.csv"),
                 "--pairs", str(tmp / "pairs.csv"), "--out", str(model), "--param",
                 "n_components=3", "--param", "max_iter=5", "--seed", "0"]) == 0
    cmd = (f"{sys.executable} -m crossmetric search {model} --database {tmp / 'y.csv'} "
           f"--queries {tmp / 'x.npy'} -k 200 | head -n 3")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.stdout.splitlines()[0] == "query,rank,id,distance"
    assert len(proc.stdout.splitlines()) == 3
    assert "Traceback" not in proc.stderr and "Broken" not in proc.stderr, proc.stderr
    assert proc.returncode == 0


def test_list_does_not_import_torch_and_says_modality():
    code = ("import sys; from crossmetric.cli import main; main(['benchmark', '--list']); "
            "print('TORCH', 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert "TORCH False" in proc.stdout
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln[:1].isalpha()}
    assert "single-modal" in lines["pcca"] and "cross-modal" in lines["cmml"]
    assert "cross-modal (raw images)" in lines["deepgsm"]


def test_every_option_has_help_and_fit_help_lists_methods(capsys):
    from crossmetric.cli import build_parser
    from crossmetric.registry import METHODS

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, __import__("argparse")
                                                         ._SubParsersAction))
    for name, sp in subs.choices.items():
        for action in sp._actions:
            if action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    assert main(["fit", "--help"]) == 0
    out = capsys.readouterr().out
    for name in METHODS:
        assert name in out


# ------------------------------------------------------------- bad input table
@pytest.fixture(scope="module")
def bad_env(tmp_path_factory):
    """Inputs for the bad-input table: good files, broken files and a fitted model."""
    tmp = tmp_path_factory.mktemp("bad")
    d = make_cross_modal(60, n_classes=6, n_features_x=4, n_features_y=3, random_state=0)
    np.save(tmp / "x.npy", d.X)
    np.save(tmp / "y.npy", d.Y[:50])
    (tmp / "l.txt").write_text("\n".join(map(str, d.labels)))
    (tmp / "short.txt").write_text("1\n2\n")
    pairs, y = make_pairs(d.labels, random_state=0)
    np.savetxt(tmp / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    (tmp / "typo.csv").write_text("5,3,l\n0,1,1\n")
    (tmp / "empty.csv").write_text("")
    (tmp / "binary.csv").write_bytes(bytes(range(256)))
    np.save(tmp / "none.npy", np.zeros((0, 3)))
    (tmp / "imgs").mkdir()
    (tmp / "a_file").write_text("x")
    assert main(["fit", "euclidean", "--x", str(tmp / "x.npy"), "--pairs", str(tmp / "p.csv"),
                 "--out", str(tmp / "m.joblib")]) == 0
    return tmp


BAD_INPUTS = [
    # (argv with {t} = the fixture folder, expected fragment of the one-line message)
    ("benchmark --folds 1", "--folds must be >= 2, got 1"),
    ("benchmark --repeats 0", "--repeats must be >= 1, got 0"),
    ("benchmark --n-jobs 0", "--n-jobs must not be 0"),
    ("benchmark --seed -1", "--seed must be >= 0, got -1"),
    ("benchmark --n-negatives 0", "--n-negatives must be >= 1, got 0"),
    ("benchmark --max-train-positives 0", "--max-train-positives must be >= 1"),
    ("benchmark --out {t}/a_file", "exists and is not a folder"),
    ("benchmark --out {t}/a_file/sub", "is a file"),
    ("benchmark --methods pcca,nosuch", "unknown method(s) nosuch"),
    ("benchmark --x {t}/x.npy", "--x needs --labels FILE"),
    ("benchmark --x {t}/empty.csv --labels {t}/l.txt", "is empty"),
    ("benchmark --x {t}/binary.csv --labels {t}/l.txt", "binary file"),
    ("benchmark --x {t}/none.npy --labels {t}/l.txt", "non-empty"),
    ("benchmark --x {t}/x.npy --labels {t}/short.txt", "has 2 labels, but the features have 60"),
    ("benchmark --x {t}/x.npy --y {t}/y.npy --labels {t}/l.txt", "--y: 50 rows, but --x has 60"),
    ("benchmark --x {t}/x.npy --labels {t}/binary.csv", "binary file"),
    ("benchmark --dataset digits --x {t}/x.npy --labels {t}/l.txt", "one data source"),
    ("benchmark --labels {t}/l.txt", "--labels needs --x"),
    ("benchmark --images {t}/imgs", "--images needs --pattern"),
    ("benchmark --images {t}/imgs --pattern (", "not a regular expression"),
    ("benchmark --images {t}/imgs --pattern \\d+", "named group 'id'"),
    ("benchmark --pattern x", "--pattern needs --images"),
    ("benchmark --dataset viper --size 12", "--size expects WIDTHxHEIGHT"),
    ("benchmark --dataset viper", "--dataset viper needs --data-home"),
    ("benchmark --dataset imagenet", "unknown --dataset 'imagenet'"),
    ("benchmark --lfw-pairs {t}/p.csv", "--lfw-pairs needs --x FEATURES and --image-list"),
    ("benchmark --descriptor hog", "--descriptor applies to image data"),
    ("benchmark --level instance --x {t}/x.npy --labels {t}/l.txt", "needs --instance"),
    ("fit pcca --x {t}/x.npy --pairs {t}/typo.csv --out {t}/new.joblib",
     "line 1: 'l' is not a number"),
    ("fit pcca --x {t}/x.npy --pairs {t}/p.csv --out {t}/imgs", "is a folder"),
    ("fit pcca --x {t}/x.npy --pairs {t}/p.csv --out {t}/nodir/m.joblib", "does not exist"),
    ("fit pcca --x {t}/x.npy --pairs {t}/p.csv --labels {t}/l.txt --out {t}/n.joblib",
     "exactly one of --pairs"),
    ("fit pcca --x {t}/x.npy --labels {t}/l.txt --n-negatives 0 --out {t}/n.joblib",
     "--n-negatives must be >= 1"),
    ("fit pcca --x {t}/x.npy --pairs {t}/p.csv --out {t}/n.joblib --convergence {t}/c.jpg",
     "must end in .png"),
    ("fit pcca --x {t}/empty.csv --pairs {t}/p.csv --out {t}/n.joblib", "is empty"),
    ("evaluate {t}/m.joblib --x {t}/x.npy", "evaluate needs --pairs"),
    ("evaluate {t}/m.joblib --x {t}/x.npy --probe-labels {t}/l.txt", "needs both"),
    ("evaluate {t}/m.joblib --x {t}/x.npy --pairs {t}/p.csv --fpr 2", "--fpr must be in (0, 1)"),
    ("evaluate {t}/m.joblib --x {t}/x.npy --pairs {t}/p.csv --ranks 0,5", "--ranks expects"),
    ("evaluate {t}/m.joblib --x {t}/x.npy --pairs {t}/p.csv --scores {t}/s.txt",
     "must end in .csv or .npy"),
    ("evaluate {t}/m.joblib --x {t}/x.npy --probe-labels {t}/short.txt --gallery-labels "
     "{t}/l.txt --scores {t}/s.csv", "has 2 labels"),
    ("search {t}/m.joblib --database {t}/x.npy --queries {t}/x.npy -k 0", "-k must be >= 1"),
    ("search {t}/m.joblib --database {t}/x.npy --queries {t}/x.npy --out {t}/h.txt",
     "must end in .csv or .npz"),
    ("search {t}/m.joblib --database {t}/binary.csv --queries {t}/x.npy", "binary file"),
]


@pytest.mark.parametrize("argv, fragment", BAD_INPUTS, ids=[a for a, _ in BAD_INPUTS])
def test_bad_input_table(bad_env, argv, fragment, capsys, monkeypatch, tmp_path):
    """Every bad input: exit 2, one line naming the problem, nothing written anywhere."""
    monkeypatch.chdir(tmp_path)  # the default --out would land here
    before = _files_in(bad_env)
    rc = main([a.replace("{t}", str(bad_env)) for a in argv.split()])
    line = _err_line(capsys)
    assert rc == 2, line
    assert fragment in line, line
    assert line.startswith("crossmetric: error: ")
    assert _files_in(bad_env) == before
    assert _files_in(tmp_path) == []


def test_benchmark_image_folder_two_domains_and_one(tmp_path, capsys):
    pytest.importorskip("PIL")
    pytest.importorskip("skimage", reason="--descriptor hog needs scikit-image ([images])")
    from PIL import Image

    rng = np.random.default_rng(0)
    root = tmp_path / "imgs"
    root.mkdir()
    for ident in range(24):
        base = rng.integers(0, 255, (32, 16, 3))
        for dom in ("a", "b"):
            img = np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(root / f"{ident:03d}_{dom}.png")
    for descriptor in ("hog", "pixels"):
        out = tmp_path / f"out_{descriptor}"
        rc = main(["benchmark", "--images", str(root), "--pattern",
                   r"(?P<id>\d+)_(?P<domain>[ab])\.png", "--descriptor", descriptor,
                   "--methods", "euclidean", "--folds", "2", "--repeats", "1",
                   "--out", str(out), "--no-progress", "--n-jobs", "1"])
        assert rc == 0, capsys.readouterr().err
        err = capsys.readouterr().err
        assert "a vs b, 24 matched pairs" in err
        assert (out / "results.json").exists()
    # no domain group: one modality, two images per identity
    rc = main(["benchmark", "--images", str(root), "--pattern", r"(?P<id>\d+)_[ab]\.png",
               "--descriptor", "pixels", "--methods", "euclidean", "--folds", "2",
               "--repeats", "1", "--out", str(tmp_path / "one"), "--no-progress",
               "--n-jobs", "1"])
    assert rc == 0, capsys.readouterr().err
    assert "one modality" in capsys.readouterr().err
    res = json.loads((tmp_path / "one" / "results.json").read_text())
    assert res["info"]["cross_modal"] is False and res["info"]["n_samples"] == 48
