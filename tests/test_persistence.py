"""Safe, atomic, versioned files: every learner round-trips exactly; crafted,
truncated, empty and newer files are refused with one line and run nothing; an interrupted
or failing write leaves the previous file intact and no temporary file behind."""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import crossmetric
from crossmetric.pairs import make_pairs
from crossmetric.persistence import (
    ALLOWED_CLASSES,
    FORMAT_VERSION,
    atomic_folder,
    atomic_open,
    atomic_path,
    load_model,
    save_model,
)
from crossmetric.registry import METHODS, make_estimator

ROOT = Path(__file__).resolve().parents[1]


class _Marker:
    """A pickle payload that would create ``path`` when unpickled (it must never run)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _fitted(name, data):
    X, Y, pairs, y = data
    if name == "deepgsm":
        pytest.importorskip("torch")
        from crossmetric.datasets import load_digits_views

        b = load_digits_views()
        est = make_estimator(name, hidden_units=8, n_identities=4, max_iter=3, tol=None,
                             random_state=0)
        prep = (b.images_x[:48], b.images_y[:48])
    else:
        est = make_estimator(name)
        prep = X if not getattr(est, "_cross_modal", True) else (X, Y)
        small = {"n_components": 3, "n_clusters": 2, "max_iter": 5}
        est.set_params(**{k: v for k, v in small.items() if k in est.get_params()})
    est.set_params(preprocessor=prep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)  # DeepGSM: identities from sampled pairs
        return est.fit(pairs, y), prep


def _assert_same(a, b, prep, pairs):
    a.set_params(preprocessor=prep)
    b.set_params(preprocessor=prep)
    np.testing.assert_array_equal(a.pair_distance(pairs), b.pair_distance(pairs))


# ------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("name", list(METHODS))
def test_every_registered_learner_round_trips_exactly(name, data, tmp_path):
    est, prep = _fitted(name, data)
    path = tmp_path / f"{name}.model"
    save_model(path, est, meta={"method": name})
    assert est.preprocessor is prep  # saving does not touch the fitted model
    again, header = load_model(path, return_header=True)
    assert type(again) is type(est) and again.preprocessor is None
    assert header["format_version"] == FORMAT_VERSION
    assert header["crossmetric_version"] == crossmetric.__version__
    cls = type(est)
    # the class by its public import path (a class of a private submodule, such as
    # crossmetric.learners.baselines._latent.CCA, is saved as crossmetric.learners.baselines.CCA)
    public = ".".join(p for p in cls.__module__.split(".") if not p.startswith("_"))
    assert header["class"] == f"{public}.{cls.__qualname__}"
    assert header["class"] in ALLOWED_CLASSES
    assert set(header["params"]) == set(est.get_params(deep=False))
    assert "threshold_" in header["attributes"] and header["meta"] == {"method": name}
    _assert_same(est, again, prep, data[2])


@pytest.mark.parametrize("cls", ["PCCA", "CMML", "KCCA"])
def test_kernel_and_nystroem_models_round_trip(cls, data, tmp_path):
    X, Y, pairs, y = data
    single = cls == "PCCA"
    prep = X if single else (X, Y)
    kw = {"max_iter": 5} if cls != "KCCA" else {}
    for approx in (None, "nystroem"):
        est = getattr(crossmetric, cls)(n_components=2, kernel="chi2_rbf", preprocessor=prep,
                                        kernel_approximation=approx, n_landmarks=20, **kw)
        if "random_state" in est.get_params():
            est.set_params(random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(pairs, y)
        save_model(tmp_path / "k.model", est)
        _assert_same(est, load_model(tmp_path / "k.model"), prep, pairs)


def test_seed_ensemble_and_supervised_round_trip(data, tmp_path):
    X, Y, pairs, y = data
    ens = crossmetric.SeedEnsemble(crossmetric.PCCA(n_components=2, max_iter=5, preprocessor=X),
                                   n_members=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ens.fit(pairs, y)
        sup = crossmetric.Supervised(crossmetric.PCCA(n_components=2, max_iter=5),
                                     random_state=0).fit(X, np.repeat(np.arange(6), 8))
    save_model(tmp_path / "e.model", ens)
    again = load_model(tmp_path / "e.model")
    assert len(again.estimators_) == 2
    for a, b in zip(ens.estimators_, again.estimators_, strict=True):
        _assert_same(a, b, X, pairs)
    save_model(tmp_path / "s.model", sup)
    np.testing.assert_array_equal(load_model(tmp_path / "s.model").transform(X),
                                  sup.transform(X))


def test_unsupported_values_are_refused_when_saving(data, tmp_path):
    est = crossmetric.Euclidean()
    est.weird_ = lambda: None
    with pytest.raises(ValueError, match=r"Euclidean\['weird_'\]: objects of type "
                                         r".*function cannot be saved"):
        save_model(tmp_path / "w.model", est)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary file


# ---------------------------------------------------------------------- crafted files
def _npz_with_header(path, header, **arrays):
    blob = json.dumps(header).encode()
    with open(path, "wb") as fh:  # (np.savez would add ".npz" to the name)
        np.savez(fh, __header__=np.frombuffer(blob, np.uint8), **arrays)


def _header(tree, **kw):
    return {"format": "crossmetric-model", "format_version": FORMAT_VERSION,
            "crossmetric_version": "0.1.0", "kind": "model", "tree": tree, **kw}


def test_crafted_files_are_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "MARKER"
    bad = tmp_path / "bad"
    cases = []
    # 1. a plain pickle / joblib file whose __reduce__ runs a shell command
    (bad / "p").mkdir(parents=True)
    pickle.dump(_Marker(marker), open(bad / "p" / "m.pkl", "wb"))
    cases.append((bad / "p" / "m.pkl", "a pickle/joblib file; loading pickles can run code, "
                                       "so it is refused"))
    import joblib

    joblib.dump({"format": "crossmetric-model", "model": _Marker(marker)}, bad / "m.joblib")
    cases.append((bad / "m.joblib", "a pickle/joblib file"))
    # 2. an npz whose header names a function instead of a crossmetric class
    _npz_with_header(bad / "cls.npz", _header({"$object": "posix.system",
                                               "state": {"$dict": {}}}))
    cases.append((bad / "cls.npz", "class 'posix.system' is not one crossmetric loads"))
    # 3. an npz holding a pickled object array
    np.savez(bad / "obj.npz", __header__=np.frombuffer(json.dumps(_header(
        {"$array": "a0"})).encode(), np.uint8), a0=np.array([_Marker(marker)], dtype=object))
    cases.append((bad / "obj.npz", "array 'a0' holds Python objects"))
    # 4. unknown tags, missing arrays, a header that is not JSON
    _npz_with_header(bad / "tag.npz", _header({"$eval": "__import__('os')"}))
    cases.append((bad / "tag.npz", "unexpected entry '$eval'"))
    _npz_with_header(bad / "miss.npz", _header({"$array": "a7"}))
    cases.append((bad / "miss.npz", "unknown array 'a7'"))
    np.savez(bad / "nojson.npz", __header__=np.frombuffer(b"\xff{", np.uint8))
    cases.append((bad / "nojson.npz", "unreadable crossmetric header"))
    np.savez(bad / "plain.npz", x=np.arange(3))
    cases.append((bad / "plain.npz", "an .npz archive without a crossmetric header"))
    for path, fragment in cases:
        with pytest.raises(ValueError) as info:
            load_model(path)
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(str(path)) and fragment in msg, msg
    assert not marker.exists()


def test_truncated_empty_and_newer_files(data, tmp_path):
    est, _ = _fitted("pcca", data)
    good = tmp_path / "good.model"
    save_model(good, est)
    raw = good.read_bytes()
    (tmp_path / "half.model").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "empty.model").write_bytes(b"")
    with pytest.raises(ValueError, match=r"half.model: truncated or corrupt crossmetric model "
                                         r"file \(BadZipFile\)\.$"):
        load_model(tmp_path / "half.model")
    with pytest.raises(ValueError, match=r"empty.model: empty file \(0 bytes\), not a "
                                         r"crossmetric model file\.$"):
        load_model(tmp_path / "empty.model")
    with pytest.raises(ValueError, match=r"nothere.model: file not found\."):
        load_model(tmp_path / "nothere.model")
    # a member cut short inside a well-formed zip (CRC / length mismatch)
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(tmp_path / "cut.model", "w") as z:
        for n, b in members.items():
            z.writestr(n, b if n == "__header__.npy" else b[: len(b) - 8])
    with pytest.raises(ValueError, match=r"cut.model: not a valid crossmetric file \(array "
                                         r"'a\d+' is unreadable"):
        load_model(tmp_path / "cut.model")
    # a file from a newer format version is refused, naming the versions
    header = json.loads(bytes(np.load(good)["__header__"]).decode())
    arrays = {k: v for k, v in np.load(good).items() if k != "__header__"}
    _npz_with_header(tmp_path / "new.model", {**header, "format_version": 99}, **arrays)
    this = re.escape(crossmetric.__version__)
    with pytest.raises(ValueError, match=r"new.model: format version 99 \(written by "
                                         rf"crossmetric {this}\) is not one this crossmetric "
                                         rf"{this} reads \(versions 2 to {FORMAT_VERSION}\); "
                                         r"upgrade crossmetric\."):
        load_model(tmp_path / "new.model")


def test_old_joblib_model_needs_explicit_trust(data, tmp_path, capsys):
    import joblib

    est, prep = _fitted("cmml", data)
    est.set_params(preprocessor=None)
    old = tmp_path / "old.joblib"
    joblib.dump({"format": "crossmetric-model", "version": 1, "method": "cmml", "model": est},
                old)
    with pytest.raises(ValueError, match="--trust-pickle"):
        load_model(old)
    _assert_same(est, load_model(old, allow_pickle=True), prep, data[2])
    from crossmetric.persistence import _main  # python -m crossmetric.persistence OLD NEW

    argv = [str(old), str(tmp_path / "n.model")]
    assert _main(argv) == 2 and "without --trust-pickle" in capsys.readouterr().err
    assert _main(argv + ["--trust-pickle"]) == 0, capsys.readouterr().err
    _assert_same(est, load_model(tmp_path / "n.model"), prep, data[2])


def test_cli_refuses_crafted_model_before_anything_runs(data, tmp_path, capsys):
    from crossmetric.cli import main

    X, Y, pairs, y = data
    np.save(tmp_path / "x.npy", X)
    np.savetxt(tmp_path / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.joblib"
    pickle.dump(_Marker(marker), open(evil, "wb"))
    for argv in (["evaluate", str(evil), "--x", str(tmp_path / "x.npy"), "--pairs",
                  str(tmp_path / "p.csv")],
                 ["search", str(evil), "--database", str(tmp_path / "x.npy"), "--queries",
                  str(tmp_path / "x.npy")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"MODEL: {evil}: a pickle/joblib file" in err, err
        assert not marker.exists()
    # an old model file the user trusts: --trust-pickle reads it
    import joblib

    est, _ = _fitted("euclidean", data)
    est.set_params(preprocessor=None)
    joblib.dump({"format": "crossmetric-model", "method": "euclidean", "model": est},
                tmp_path / "old.joblib")
    assert main(["evaluate", str(tmp_path / "old.joblib"), "--x", str(tmp_path / "x.npy"),
                 "--pairs", str(tmp_path / "p.csv"), "--trust-pickle"]) == 0


def test_crafted_and_truncated_index_files(data, tmp_path):
    pytest.importorskip("faiss")
    from crossmetric.retrieval import Index

    X = data[0]
    est, _ = _fitted("pcca", data)
    path = tmp_path / "i.idx"
    index = Index(est).add(X)
    index.save(path)
    np.testing.assert_array_equal(Index.load(path).search(X, 3)[1], index.search(X, 3)[1])
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.idx"
    import joblib

    joblib.dump({"format": 2, "state": _Marker(marker), "has_index": False}, evil)
    with pytest.raises(ValueError, match=r"evil.idx: a pickle/joblib file"):
        Index.load(evil)
    assert not marker.exists()
    raw = path.read_bytes()
    (tmp_path / "half.idx").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"half.idx: truncated or corrupt crossmetric index"):
        Index.load(tmp_path / "half.idx")
    # a corrupt faiss part inside a well-formed file
    with np.load(path) as z:
        arrays = dict(z.items())
    header = json.loads(bytes(arrays.pop("__header__")).decode())
    key = header["tree"]["state"]["$dict"]["_faiss_bytes_"]["$array"]
    arrays[key] = arrays[key][:40]
    _npz_with_header(tmp_path / "bad.idx", header, **arrays)
    with pytest.raises(ValueError, match="the faiss part of the index is corrupt"):
        Index.load(tmp_path / "bad.idx")


def test_results_json_versions(tmp_path):
    from crossmetric.protocols import BenchmarkResult

    res = BenchmarkResult(methods=["A"], summary=[{"method": "A", "measure": "auc",
                                                   "mean": 0.9, "std": 0.0, "sem": 0.0,
                                                   "n": 1}])
    res.to_json(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["format_version"] == 2 and data["crossmetric_version"] == crossmetric.__version__
    assert BenchmarkResult.load(tmp_path / "r.json").summary == res.summary
    (tmp_path / "n.json").write_text(json.dumps({**data, "format_version": 7}))
    this = re.escape(crossmetric.__version__)
    with pytest.raises(ValueError, match=r"n.json'?: format 'crossmetric-benchmark-result' "
                                         rf"version 7 \(crossmetric {this}\); this version "
                                         r"reads 'crossmetric-benchmark-result' up to version"):
        BenchmarkResult.load(tmp_path / "n.json")
    raw = (tmp_path / "r.json").read_text()
    (tmp_path / "t.json").write_text(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"cannot read a BenchmarkResult from .*t.json'"):
        BenchmarkResult.load(tmp_path / "t.json")
    marker = tmp_path / "MARKER"
    pickle.dump(_Marker(marker), open(tmp_path / "p.json", "wb"))
    with pytest.raises(ValueError, match=r"cannot read a BenchmarkResult from .*p.json'"):
        BenchmarkResult.load(tmp_path / "p.json")
    assert not marker.exists()


def test_crafted_truncated_and_newer_checkpoints(tmp_path):
    torch = pytest.importorskip("torch")
    from crossmetric.deep.checkpoint import read_checkpoint as _read_checkpoint

    marker = tmp_path / "MARKER"
    torch.save({"settings": {}, "payload": _Marker(marker)}, tmp_path / "evil.pt")
    with pytest.raises(ValueError, match=r"evil.pt' is not a crossmetric training checkpoint "
                                         r"\(refused by torch.load\(weights_only=True\): "
                                         r"Trying to load unsupported GLOBAL posix.system"):
        _read_checkpoint(tmp_path / "evil.pt", "cpu")
    assert not marker.exists()
    torch.save({"format": "crossmetric-deepgsm-checkpoint", "format_version": 9,
                "crossmetric_version": "9.0"}, tmp_path / "new.pt")
    with pytest.raises(ValueError, match=r"new.pt' has format 'crossmetric-deepgsm-checkpoint' "
                                         r"version 9 \(crossmetric 9.0\)"):
        _read_checkpoint(tmp_path / "new.pt", "cpu")
    raw = (tmp_path / "new.pt").read_bytes()
    for name, blob in (("half.pt", raw[: len(raw) // 2]), ("empty.pt", b"")):
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(ValueError, match=rf"{name}' is not a crossmetric training "
                                             "checkpoint"):
            _read_checkpoint(tmp_path / name, "cpu")


def test_deepgsm_refuses_crafted_checkpoint_on_resume(tmp_path):
    torch = pytest.importorskip("torch")
    from crossmetric.datasets import load_digits_views
    from crossmetric.deep import DeepGSM

    b = load_digits_views()
    marker = tmp_path / "MARKER"
    ckpt = tmp_path / "c.pt"
    torch.save({"settings": {}, "x": _Marker(marker)}, ckpt)
    before = ckpt.read_bytes()
    pairs, y = make_pairs(np.arange(20) % 5, np.arange(20) % 5, random_state=0)
    model = DeepGSM(hidden_units=8, n_identities=4, max_iter=2, tol=None, random_state=0,
                    checkpoint_path=str(ckpt), resume=True,
                    preprocessor=(b.images_x[:20], b.images_y[:20]))
    with pytest.raises(ValueError, match="is not a crossmetric training checkpoint"):
        model.fit(pairs, y)
    assert not marker.exists() and ckpt.read_bytes() == before


# ------------------------------------------------------------------- atomic writes
def _listing(folder):
    return sorted(p.name for p in Path(folder).iterdir())


def test_interrupted_or_failing_write_keeps_the_old_file(data, tmp_path, monkeypatch):
    est, _ = _fitted("pcca", data)
    path = tmp_path / "m.model"
    save_model(path, est)
    before = path.read_bytes()
    real = np.savez

    def dies_half_way(fh, **arrays):
        fh.write(b"PK\x03\x04 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_model(path, est)
    assert path.read_bytes() == before and _listing(tmp_path) == ["m.model"]

    def disk_full(fh, **arrays):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(OSError, match=r"^cannot write '.*m.model': No space left on "
                                      r"device$") as info:
        save_model(path, est)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == before and _listing(tmp_path) == ["m.model"]
    monkeypatch.setattr(np, "savez", real)
    with pytest.raises(ValueError):
        with atomic_open(tmp_path / "r.csv") as fh:
            fh.write("half")
            raise ValueError("boom")
    assert _listing(tmp_path) == ["m.model"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root can write into a read-only folder")
def test_read_only_folder_gives_one_line(data, tmp_path):
    est, _ = _fitted("euclidean", data)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(OSError, match=r"cannot write '.*ro/m.model': Permission denied$"):
            save_model(ro / "m.model", est)
        assert _listing(ro) == []
    finally:
        ro.chmod(0o700)


_WRITER = """
import signal, sys, numpy as np
from crossmetric.persistence import atomic_path
# Ctrl-C as in a terminal, also when this test runs in a background job (which starts its
# children with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
path, n = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
for i in range(10**6):
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, np.full(n, i, dtype=np.int64))
"""


def test_ctrl_c_just_after_the_temporary_file_appears_leaves_nothing(tmp_path, monkeypatch):
    """The race a Ctrl-C could hit: the temporary file exists but its name is not yet known
    to the guard that removes it (with ``tempfile.mkstemp`` the name came back only once the
    call returned). Also: an existing file of that name is never taken over or removed."""
    path = tmp_path / "a.npy"
    path.write_text("old")
    real_open = os.open

    def open_then_interrupt(file, flags, *args, **kwargs):
        fd = real_open(file, flags, *args, **kwargs)
        if str(file).endswith(".tmp"):
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt), atomic_path(path):
        pass
    monkeypatch.setattr(os, "open", real_open)
    assert _listing(tmp_path) == ["a.npy"] and path.read_text() == "old"

    names = iter([str(tmp_path / ".a.npy.taken.tmp"), str(tmp_path / ".a.npy.free.tmp")])
    (tmp_path / ".a.npy.taken.tmp").write_text("someone else's")
    monkeypatch.setattr("crossmetric._utils.atomic_io._temp_name", lambda folder, name: next(names))
    with atomic_path(path) as tmp:
        assert tmp.endswith(".a.npy.free.tmp")
        Path(tmp).write_text("new")
    assert path.read_text() == "new"
    assert (tmp_path / ".a.npy.taken.tmp").read_text() == "someone else's"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killed_writer_leaves_a_whole_file(tmp_path, sig):
    path = tmp_path / "a.npy"
    np.save(path, np.full(200_000, -1, dtype=np.int64))
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "200000"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.4)
        proc.send_signal(sig)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    arr = np.load(path)  # a whole file: the last complete write (or the first one)
    assert arr.shape == (200_000,) and (arr == arr[0]).all()
    left = [n for n in _listing(tmp_path) if n != "a.npy"]
    if sig == signal.SIGINT:  # Ctrl-C unwinds the with-block: no temporary file
        assert left == []
    else:  # SIGKILL / SIGTERM: at most one hidden temporary file, never the target
        assert all(n.startswith(".a.npy.") and n.endswith(".tmp") for n in left)
        assert len(left) <= 1


def test_two_writers_of_one_folder_leave_one_complete_set(tmp_path, monkeypatch):
    out = tmp_path / "out"
    real_replace = os.replace

    def slow_replace(a, b):
        real_replace(a, b)
        time.sleep(0.02)

    monkeypatch.setattr(os, "replace", slow_replace)

    def run(tag):
        with atomic_folder(out) as stage:
            for name in ("results.csv", "results.json", "roc.png"):
                Path(stage, name).write_text(tag)

    for _ in range(3):
        ts = [threading.Thread(target=run, args=(t,)) for t in "AB"]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        texts = {Path(out, n).read_text() for n in ("results.csv", "results.json", "roc.png")}
        assert len(texts) == 1  # never A's csv with B's json
        assert [n for n in _listing(out) if n.startswith(".staging")] == []


@pytest.mark.slow
def test_benchmark_out_is_complete_after_a_failure(tmp_path, monkeypatch, capsys):
    """A failure while writing the result files leaves --out as it was."""
    from crossmetric import cli

    out = tmp_path / "res"
    out.mkdir()
    (out / "results.csv").write_text("old")

    def boom(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    from crossmetric.cli import benchmark

    monkeypatch.setattr(benchmark, "_write_benchmark_files", boom)
    rc = cli.main(["benchmark", "--methods", "euclidean", "--folds", "2", "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("No space left on device") and "--out" in err
    assert _listing(out) == [".crossmetric.lock", "results.csv"] or _listing(out) == [
        "results.csv"]
    assert (out / "results.csv").read_text() == "old"


@pytest.mark.slow
def test_two_benchmark_runs_into_one_out_folder(tmp_path):
    out = tmp_path / "res"
    runs = [subprocess.Popen([sys.executable, "-m", "crossmetric", "benchmark", "--methods", m,
                              "--folds", "2", "--repeats", "1", "--no-progress", "--out",
                              str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
            for m in ("euclidean", "cca")]
    for p in runs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    from crossmetric.protocols import BenchmarkResult

    res = BenchmarkResult.load(out / "results.json")
    csv_methods = {line.split(",")[0] for line in
                   (out / "results.csv").read_text().splitlines()[1:]}
    assert csv_methods == set(res.methods) and len(res.methods) == 1  # one run's whole set
    assert res.methods[0] in (out / "results.md").read_text()
    assert [n for n in _listing(out) if n.startswith(".staging") or n.endswith(".tmp")] == []


def test_failed_evaluate_keeps_an_older_scores_file(data, tmp_path, capsys):
    from crossmetric.cli import main

    X, Y, pairs, y = data
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "narrow.npy", X[:, :3])
    np.savetxt(tmp_path / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    model = tmp_path / "m.model"
    assert main(["fit", "euclidean", "--x", str(tmp_path / "x.npy"), "--pairs",
                 str(tmp_path / "p.csv"), "--out", str(model)]) == 0
    scores = tmp_path / "s.csv"
    assert main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--pairs",
                 str(tmp_path / "p.csv"), "--scores", str(scores)]) == 0
    before = scores.read_bytes()
    assert main(["evaluate", str(model), "--x", str(tmp_path / "narrow.npy"), "--pairs",
                 str(tmp_path / "p.csv"), "--scores", str(scores)]) == 2
    assert "features" in capsys.readouterr().err
    assert scores.read_bytes() == before and _listing(tmp_path) == [
        "m.model", "narrow.npy", "p.csv", "s.csv", "x.npy"]


def test_atomic_folder_failure_leaves_nothing(tmp_path):
    new = tmp_path / "new"
    with pytest.raises(OSError, match=r"^cannot write '.*new/results.json': No space left"):
        with atomic_folder(new) as stage:
            Path(stage, "results.csv").write_text("a")
            raise OSError(errno.ENOSPC, "No space left on device",
                          str(Path(stage, "results.json")))
    assert not new.exists()  # the folder it made is gone again
    old = tmp_path / "old"
    old.mkdir()
    (old / "results.csv").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_folder(old) as stage:
            Path(stage, "results.csv").write_text("new")
            raise KeyboardInterrupt
    assert _listing(old) == ["results.csv"] and (old / "results.csv").read_text() == "old"


def test_data_an_allowed_class_rejects_is_refused(tmp_path):
    # a well-formed file whose state makes the allowed class fail while being rebuilt
    tree = {"$object": "crossmetric.retrieval.Index",
            "state": {"$dict": {"_faiss_bytes_": "not bytes"}}}
    _npz_with_header(tmp_path / "s.idx", _header(tree, kind="index"))
    pytest.importorskip("faiss")
    from crossmetric.retrieval import Index

    with pytest.raises(ValueError, match=r"s.idx: not a valid crossmetric file \(ValueError: "
                                         r"the faiss part of the index is not a byte array"):
        Index.load(tmp_path / "s.idx")
    # JSON nested deeper than Python's recursion limit
    blob = ('{"format": "crossmetric-model", "format_version": 2, "kind": "model", "tree": '
            + "[" * 100000 + "]" * 100000 + "}").encode()
    with open(tmp_path / "deep.model", "wb") as fh:
        np.savez(fh, __header__=np.frombuffer(blob, np.uint8))
    with pytest.raises(ValueError, match=r"deep.model: (unreadable crossmetric header|not a "
                                         r"valid crossmetric file)"):
        load_model(tmp_path / "deep.model")


def test_atomic_folder_removes_owned_files_the_new_run_did_not_write(tmp_path):
    """A run that writes no roc.png leaves no older roc.png beside its results; files the
    kind of run does not own (a user's notes) stay."""
    out = tmp_path / "res"
    out.mkdir()
    for name in ("roc.png", "results.json", "notes.txt"):
        (out / name).write_text("old")
    with atomic_folder(out, owned=("roc.png", "results.json", "cmc.png")) as stage:
        with open(os.path.join(stage, "results.json"), "w") as fh:
            fh.write("new")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "notes.txt", "results.json"]
    assert (out / "results.json").read_text() == "new"


def test_atomic_path_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "private.model"
    path.write_text("old")
    os.chmod(path, 0o600)
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        fh.write("new")
    assert path.read_text() == "new" and (os.stat(path).st_mode & 0o777) == 0o600


def test_json_ready_turns_every_non_finite_number_into_null():
    """Bare NaN / Infinity is not JSON: inside arrays, NumPy scalars and tuples too."""
    import json

    from crossmetric.persistence import json_ready

    obj = {"a": np.array([1.0, np.nan, np.inf]), "b": (np.float32("nan"), 2), 3: -np.inf}
    text = json.dumps(json_ready(obj), allow_nan=False)
    assert json.loads(text) == {"a": [1.0, None, None], "b": [None, 2], "3": None}


def test_every_saved_class_path_still_names_its_class():
    """Files name classes by ``module.QualName`` (crossmetric.persistence): each allowed path
    imports, and a class saved today is written under the same path (so that files saved
    before the modules were split load, and files saved now load in older versions)."""
    import importlib.util

    from crossmetric.persistence import ALLOWED_CLASSES, _public_name

    for qual in sorted(ALLOWED_CLASSES):
        module, _, name = qual.rpartition(".")
        if module.startswith("crossmetric.deep") and importlib.util.find_spec("torch") is None:
            continue
        cls = getattr(importlib.import_module(module), name)
        assert isinstance(cls, type) and _public_name(cls) == qual, qual
