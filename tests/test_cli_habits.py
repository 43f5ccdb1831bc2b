"""Small habits of the command line and its files: no option prefixes, a --param must name a
method that runs, no lock file left in an output folder, a clear word for a file that is not
a model, and a DeepGSM backbone file's GSM head loaded (or a one-line warning)."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

from crossmetric.cli import main


@pytest.fixture
def files(tmp_path):
    rng = np.random.RandomState(0)
    lab = np.repeat(np.arange(6), 5)
    np.save(tmp_path / "X.npy", rng.normal(size=(30, 4)) + lab[:, None])
    (tmp_path / "labels.txt").write_text("\n".join(map(str, lab)) + "\n")
    return tmp_path


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crossmetric: error: "), lines
    return lines[0]


@pytest.mark.parametrize("argv, option", [
    (["benchmark", "--fold", "3"], "--fold 3"),
    (["benchmark", "--method", "euclidean"], "--method euclidean"),
    (["fit", "euclidean", "--x", "X.npy", "--lab", "labels.txt", "--out", "m"],
     "--lab labels.txt"),
    (["evaluate", "m.model", "--x", "X.npy", "--probe", "labels.txt"], "--probe labels.txt"),
])
def test_option_prefixes_are_not_accepted(files, capsys, monkeypatch, argv, option):
    monkeypatch.chdir(files)
    assert main(argv) == 2
    assert _error(capsys).startswith(f"crossmetric: error: unrecognized arguments: {option}")
    assert sorted(os.listdir(files)) == ["X.npy", "labels.txt"]


def test_every_parser_of_the_package_refuses_prefixes(capsys):
    from crossmetric.cli.parser import build_parser
    from crossmetric.persistence import _main

    parser = build_parser()
    subs = parser._subparsers._group_actions[0].choices
    assert parser.allow_abbrev is False and subs and all(
        p.allow_abbrev is False for p in subs.values())
    with pytest.raises(SystemExit) as exc:       # not taken for --trust-pickle
        _main(["a", "b", "--trust"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --trust" in capsys.readouterr().err


def test_param_for_a_method_not_run_is_an_error(files, capsys):
    t = files
    argv = ["benchmark", "--x", str(t / "X.npy"), "--labels", str(t / "labels.txt"),
            "--methods", "euclidean,cca", "--param", "gsm.mu=1e-3", "--out", str(t / "res")]
    assert main(argv) == 2
    assert _error(capsys) == ("crossmetric: error: --param 'gsm.mu=1e-3': method 'gsm' is not "
                              "in --methods (euclidean,cca); add it there or leave this "
                              "--param out.")
    assert not (t / "res").exists()


def test_in_place_results_leave_no_lock_file(tmp_path, monkeypatch):
    """The fallback for a folder that cannot be swapped (a mount point) locks the folder
    itself: no empty .crossmetric.lock is left, and an old one is removed."""
    from crossmetric._utils import atomic_io as _atomic_io
    from crossmetric.persistence import atomic_folder

    out = tmp_path / "res"
    out.mkdir()
    (out / ".crossmetric.lock").write_bytes(b"")     # left by an earlier version
    (out / "results.csv").write_text("old")
    real = os.path.ismount
    monkeypatch.setattr(_atomic_io.os.path, "ismount",
                        lambda p: os.path.abspath(p) == str(out) or real(p))
    with atomic_folder(out, owned=("results.csv", "roc.png")) as stage:
        assert os.path.dirname(stage) == str(out)    # staged inside: the in-place path
        (open(os.path.join(stage, "results.csv"), "w")).write("new")
    assert sorted(os.listdir(out)) == ["results.csv"]
    assert (out / "results.csv").read_text() == "new"


@pytest.mark.parametrize("content, what", [
    (None, " (a NumPy .npy array)"), ('{"method": "pcca"}', " (JSON)"),
    ("[1, 2]", " (JSON)"), ("hello", "")])
def test_a_file_that_is_not_a_model_is_named_so(files, capsys, content, what):
    t = files
    path = t / "model.bin"
    if content is None:
        with open(path, "wb") as fh:
            np.save(fh, np.zeros(3))
    else:
        path.write_text(content)
    assert main(["evaluate", str(path), "--x", str(t / "X.npy"), "--probe-labels",
                 str(t / "labels.txt"), "--gallery-labels", str(t / "labels.txt")]) == 2
    line = _error(capsys)
    assert line == (f"crossmetric: error: MODEL: {path}: not a crossmetric model file{what}; "
                    "expected a file written by crossmetric fit --out or save_model.")
    assert "pickle" not in line
    from crossmetric.persistence import load_model

    with pytest.raises(ValueError, match="not a crossmetric model file"):
        load_model(path)


def test_a_pickle_still_gets_the_pickle_advice(tmp_path):
    import pickle

    from crossmetric.persistence import load_model

    (tmp_path / "old.pkl").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="a pickle/joblib file; .*--trust-pickle"):
        load_model(tmp_path / "old.pkl")


def test_deepgsm_backbone_file_with_its_head_starts_the_head_too(tmp_path):
    """A state-dict file of a whole GSM network: the head (similarity sub-network) is loaded
    when it fits; one of another structure is not, and a one-line warning says so."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from crossmetric.deep.build import load_backbone_file
    from crossmetric.deep.networks import GSMNet

    src = GSMNet((16, 16), hidden_units=12)
    src.initialize("default", torch.Generator().manual_seed(1))
    path = tmp_path / "net.pth"
    torch.save(src.state_dict(), path)
    dst = GSMNet((16, 16), hidden_units=12)
    dst.initialize("default", torch.Generator().manual_seed(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_backbone_file(SimpleNamespace(backbone=str(path)), dst) is True
    for k, v in src.state_dict().items():
        assert torch.equal(v, dst.state_dict()[k]), k
    other = GSMNet((16, 16), hidden_units=12, structure="ladf")
    other.initialize("default", torch.Generator().manual_seed(3))
    drawn = {k: v.clone() for k, v in other.state_dict().items() if k.startswith("head.")}
    with pytest.warns(UserWarning, match=r"also holds a GSM head \(head\.\*\) that does not "
                                         r"fit this network \(structure 'ladf', width 12\)"):
        assert load_backbone_file(SimpleNamespace(backbone=str(path)), other) is False
    assert all(torch.equal(v, other.state_dict()[k]) for k, v in drawn.items())
    assert torch.equal(other.state_dict()["shared.fc1.weight"], src.state_dict()[
        "shared.fc1.weight"])


@pytest.mark.slow
def test_deepgsm_warm_started_from_its_own_file_keeps_its_distances(tmp_path):
    """The fault as users met it: DeepGSM(backbone="net.pth") from a fitted model's network
    scored pairs like a fresh head (rank-1 0.597 -> 0.153); now it scores them as the model
    it came from (one step at a negligible learning rate)."""
    torch = pytest.importorskip("torch")
    from crossmetric.datasets import load_digits_views
    from crossmetric.deep.model import DeepGSM

    b = load_digits_views()
    X, Y = b.images_x[:40], b.images_y[:40]
    n = 40
    rng = np.random.RandomState(0)
    neg = (np.arange(n) + rng.randint(1, n, n)) % n
    pairs = np.r_[np.c_[np.arange(n), np.arange(n)], np.c_[np.arange(n), neg]]
    y = np.r_[np.ones(n, int), -np.ones(n, int)]
    small = dict(hidden_units=16, n_identities=8, max_iter=6, device="cpu", tol=None,
                 random_state=0, preprocessor=(X, Y))
    base = DeepGSM(**small).fit(pairs, y)
    path = tmp_path / "net.pth"
    torch.save(base.net_.state_dict(), path)
    warm = DeepGSM(**{**small, "max_iter": 1, "learning_rate": 1e-12, "random_state": 5},
                   backbone=str(path)).fit(pairs, y)
    np.testing.assert_allclose(warm.pair_distance(pairs), base.pair_distance(pairs),
                               rtol=1e-4, atol=1e-5)
    assert json.dumps(warm.get_params()["backbone"]) == json.dumps(str(path))
