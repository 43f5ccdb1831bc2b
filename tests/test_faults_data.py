"""The data faults: nothing lost, nothing silently wrong.

Row 3: contradictory pairs refused (``on_conflict``); row 7: array headers checked against the
file before anything is allocated; row 8: the results folder swapped as a whole, a kill at any
step recovered by the next run; row 10: nonsense model state refused on load, huge ranks and
``k`` clamped; row 12: joblib workers end with their killed parent; row 14: LDML / CLML fit
the same at any scale of the features. Where a row is about the command line or about
processes and signals, the real CLI runs in a subprocess.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from crossmetric import CLML, LDML, PCCA, Euclidean
from crossmetric.metrics import roc_auc
from crossmetric.pairs import make_pairs
from crossmetric.persistence import atomic_folder, load_model, save_model

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, cwd, timeout=300):
    """``crossmetric ARGS`` in a subprocess: ``(exit code, stdout, stderr lines)``."""
    p = subprocess.run([sys.executable, "-m", "crossmetric", *map(str, args)], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, [ln for ln in p.stderr.splitlines() if ln.strip()]


def _python(code: str, *args, cwd, timeout=120):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                       cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def small(tmp_path):
    """20 samples × 4 features on disk (x.npy), and their identities (3 rows each)."""
    rng = np.random.RandomState(0)
    ids = np.repeat(np.arange(5), 4)
    X = rng.rand(5, 4)[ids] + 0.05 * rng.rand(20, 4)
    np.save(tmp_path / "x.npy", X)
    return X, ids


# --------------------------------------------------------------- row 3: contradictory pairs
def test_fit_refuses_a_pair_labelled_both_ways_in_every_input_form(small):
    from crossmetric.pairs import PairConflictError, pair_conflicts

    X, ids = small
    pairs, y = make_pairs(ids, max_positives=30, random_state=0)
    bad_pairs = np.r_[pairs, pairs[2:3][:, ::-1]]  # the same two samples, other order
    bad_y = np.r_[y, -y[2:3]]
    n = len(y)
    for form in (bad_pairs, X[bad_pairs]):  # index pairs and (n, 2, d) arrays
        with pytest.raises(PairConflictError) as info:
            PCCA(n_components=2, max_iter=5, preprocessor=X).fit(form, bad_y)
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(f"pairs[2] and pairs[{n}] join the same two "
                                                  "samples")
        assert isinstance(info.value, ValueError) and (info.value.first, info.value.second) == (
            2, n)
    # drop: both contradictory pairs are left out -- the fit is that of the other pairs
    keep = np.ones(n + 1, bool)
    keep[[2, n]] = False
    ref = PCCA(n_components=2, max_iter=5, random_state=0, preprocessor=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref.fit(bad_pairs[keep], bad_y[keep])
        with pair_conflicts("drop"), pytest.warns(UserWarning, match="left out 2 pairs"):
            dropped = PCCA(n_components=2, max_iter=5, random_state=0,
                           preprocessor=X).fit(bad_pairs, bad_y)
        with pair_conflicts("keep"):
            kept = PCCA(n_components=2, max_iter=5, random_state=0,
                        preprocessor=X).fit(bad_pairs, bad_y)
    np.testing.assert_allclose(dropped.components_, ref.components_)
    assert not np.allclose(kept.components_, ref.components_)  # fitted as given
    with pytest.raises(ValueError, match=r"on_conflict must be one of \('error', 'drop', "
                                         r"'keep'\), got 'ignore'"):
        with pair_conflicts("ignore"):
            pass


def test_cli_fit_refuses_contradictory_pairs_naming_the_rows(small, tmp_path):
    (tmp_path / "p.csv").write_text("i,j,label\n0,1,1\n2,9,-1\n0,1,-1\n4,5,1\n")
    rc, out, err = _cli("fit", "pcca", "--x", "x.npy", "--pairs", "p.csv", "--out", "m.model",
                        "--param", "n_components=2", cwd=tmp_path)
    assert rc == 2 and len(err) == 1, err
    assert err[0] == ("crossmetric: error: --pairs: data rows 1 (0,1,1) and 3 (0,1,-1) join "
                      "the same two samples with opposite labels; remove one, or give "
                      "--on-conflict drop (leave such pairs out) or --on-conflict keep (fit "
                      "them as given).")
    assert not (tmp_path / "m.model").exists()
    for choice in ("drop", "keep"):
        rc, out, err = _cli("fit", "pcca", "--x", "x.npy", "--pairs", "p.csv", "--out",
                            f"{choice}.model", "--param", "n_components=2", "--on-conflict",
                            choice, cwd=tmp_path)
        assert rc == 0 and (tmp_path / f"{choice}.model").exists(), err
    rc, _, err = _cli("fit", "pcca", "--x", "x.npy", "--pairs", "p.csv", "--out", "z.model",
                      "--on-conflict", "maybe", cwd=tmp_path)
    assert rc == 2 and "--on-conflict" in err[-1] and "'maybe'" in err[-1]


# --------------------------------------------------------- row 7: headers against the file
def _npy_bytes_declaring(shape, body: bytes) -> bytes:
    """A .npy file of uint8 whose header declares ``shape`` but that holds ``body``."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue() + body


_PEAK = """
import sys, tracemalloc
from crossmetric.datasets import load_features
from crossmetric.persistence import load_model
tracemalloc.start()
try:
    (load_model if sys.argv[1].endswith(".model") else load_features)(sys.argv[1])
except ValueError as exc:
    print("ERROR", exc)
print("PEAK", tracemalloc.get_traced_memory()[1])
"""


def test_array_header_larger_than_the_file_is_refused_before_allocating(small, tmp_path):
    X, ids = small
    pairs, y = make_pairs(ids, max_positives=30, random_state=0)
    save_model(tmp_path / "good.model", Euclidean(preprocessor=X).fit(pairs, y))
    body = bytes(970_000)  # 0.97 MB of data under a header that declares 1 GB
    with zipfile.ZipFile(tmp_path / "good.model") as z:
        members = {n: z.read(n) for n in z.namelist()}
    victim = sorted(n for n in members if n != "__header__.npy")[0]
    with zipfile.ZipFile(tmp_path / "big.model", "w") as z:
        for n, b in members.items():
            z.writestr(n, _npy_bytes_declaring((10**9,), body) if n == victim else b)
    (tmp_path / "big.npy").write_bytes(_npy_bytes_declaring((10**9,), body))
    with zipfile.ZipFile(tmp_path / "big.npz", "w") as z:
        z.writestr("X.npy", _npy_bytes_declaring((1000, 10**6), body))
    for name in ("big.model", "big.npy", "big.npz"):
        rc, out, err = _python(_PEAK, name, cwd=tmp_path)
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("ERROR ") and "\n" not in lines[0], out
        assert "header declares shape (" in lines[0] and "1.0 GB" in lines[0], lines[0]
        assert "refused before allocating it" in lines[0]
        peak = int(lines[-1].split()[1])
        assert peak < 50 * 2**20, (name, peak)  # nothing near the declared 1 GB
    np.savetxt(tmp_path / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "ids.txt", ids, fmt="%d")
    for args in (("evaluate", "big.model", "--x", "x.npy", "--pairs", "p.csv"),
                 ("fit", "euclidean", "--x", "big.npy", "--labels", "ids.txt", "--out",
                  "e.model")):
        rc, _, err = _cli(*args, cwd=tmp_path)
        assert rc == 2 and len(err) == 1 and "1.0 GB" in err[0], err
        assert args[1 if args[0] == "evaluate" else 3] in err[0]


# ------------------------------------------------------------ row 8: the results folder swap
_OLD = {"results.csv": "old", "roc.png": "old", "config.toml": "old"}
_NEW = {"results.csv": "new", "config.toml": "new"}  # a run without a ROC
_OWNED = ("results.csv", "roc.png", "config.toml")

# writes _NEW into D, killed (os._exit, no clean-up) at the N-th move of a folder or of a
# file into D (os.rename / os.replace), at the removal of a folder (shutil.rmtree), or while
# writing the staged files
_KILLED_WRITER = """
import os, shutil, sys
from crossmetric.persistence import atomic_folder
out, when = os.path.abspath(sys.argv[1]), sys.argv[2]
calls = []
def killing(real):
    def move(src, dst, *a, **k):
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        if out in (src, dst) or os.path.dirname(dst) == out or os.path.isdir(src):
            calls.append(1)
            if when == f"move{len(calls)}":
                os._exit(9)
        return real(src, dst, *a, **k)
    return move
os.rename, os.replace = killing(os.rename), killing(os.replace)
real_rmtree = shutil.rmtree
def rmtree(path, *a, **k):
    if when == "rmtree" and os.path.exists(path):
        os._exit(9)
    return real_rmtree(path, *a, **k)
shutil.rmtree = rmtree
with atomic_folder(out, owned=("results.csv", "roc.png", "config.toml")) as stage:
    for i, (name, text) in enumerate({"results.csv": "new", "config.toml": "new"}.items()):
        if when == "writing" and i == 1:
            os._exit(9)
        with open(os.path.join(stage, name), "w") as fh:
            fh.write(text)
"""


def _contents(folder: Path) -> dict:
    return {p.name: p.read_bytes().decode("latin-1") for p in folder.iterdir()}


def _write_set(out: Path, files: dict) -> None:
    with atomic_folder(out, owned=_OWNED) as stage:
        for name, text in files.items():
            Path(stage, name).write_text(text)


@pytest.mark.parametrize("when", ["writing", "move1", "move2", "move3", "rmtree"])
def test_results_folder_is_one_runs_set_after_a_kill_at_any_step(tmp_path, when):
    out = tmp_path / "D"
    _write_set(out, _OLD)
    (out / "notes.txt").write_text("mine")  # a user's file: kept by every run
    old_set, new_set = {**_OLD, "notes.txt": "mine"}, {**_NEW, "notes.txt": "mine"}
    rc, _, err = _python(_KILLED_WRITER, out, when, cwd=tmp_path)
    assert rc in (0, 9), err
    beside = sorted(p.name for p in tmp_path.iterdir() if p.name != "D")
    if out.exists():
        assert _contents(out) in (old_set, new_set), (when, _contents(out))
    else:  # killed between the two renames: the complete new set waits beside it
        assert _contents(tmp_path / ".D.ready") == new_set, (when, beside)
    # the next run completes or removes what the killed one left, and writes its own set
    _write_set(out, {"results.csv": "third", "config.toml": "third"})
    assert _contents(out) == {"results.csv": "third", "config.toml": "third",
                              "notes.txt": "mine"}, when
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"], when  # nothing left beside


_SLOW_MOVE = """
import os, sys, time
from crossmetric import cli
out = os.path.abspath(sys.argv[1])
calls = []
def slowed(real):
    def move(src, dst, *a, **k):
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        if out in (src, dst) or os.path.dirname(dst) == out:
            calls.append(1)
            if len(calls) == 2:  # half-way through the move: the parent kills us here
                open(sys.argv[2], "w").close()
                time.sleep(60)
        return real(src, dst, *a, **k)
    return move
os.rename, os.replace = slowed(os.rename), slowed(os.replace)
sys.exit(cli.main(["benchmark", "--methods", "euclidean", "--folds", "2", "--repeats", "1",
                   "--no-progress", "--quiet", "--out", out]))
"""


@pytest.mark.slow
def test_benchmark_killed_during_the_results_move_leaves_one_runs_set(tmp_path):
    out, marker = tmp_path / "D", tmp_path / "moving"
    rc, _, err = _cli("benchmark", "--methods", "euclidean,cca", "--folds", "2", "--repeats",
                      "1", "--no-progress", "--out", out, cwd=tmp_path)
    assert rc == 0, err
    first = _contents(out)
    p = subprocess.Popen([sys.executable, "-c", _SLOW_MOVE, str(out), str(marker)],
                         cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        t0 = time.time()
        while not marker.exists() and p.poll() is None and time.time() - t0 < 120:
            time.sleep(0.05)
        assert marker.exists(), p.stderr.read() if p.poll() is not None else "no move"
    finally:
        p.kill()  # SIGKILL
        p.wait()
    if out.exists():
        assert _contents(out) == first  # never a mix of the two runs
    else:
        ready = _contents(tmp_path / ".D.ready")
        assert "Euclidean" in ready["results.csv"] and "CCA" not in ready["results.csv"]
    rc, _, err = _cli("benchmark", "--methods", "cca", "--folds", "2", "--repeats", "1",
                      "--no-progress", "--out", out, cwd=tmp_path)
    assert rc == 0, err
    third = _contents(out)
    assert "CCA" in third["results.csv"] and "Euclidean" not in third["results.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "moving"]
    assert not [n for n in third if n.startswith(".")]


# ------------------------------------------- row 10: nonsense model state, huge ranks and k
def test_well_formed_model_with_nonsense_state_is_refused_on_load(small, tmp_path):
    X, ids = small
    pairs, y = make_pairs(ids, max_positives=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = PCCA(n_components=2, max_iter=5, random_state=0, preprocessor=X).fit(pairs, y)
    save_model(tmp_path / "good.model", model)
    np.savetxt(tmp_path / "p.csv", np.c_[pairs, y], fmt="%d", delimiter=",")
    with np.load(tmp_path / "good.model") as z:
        arrays = dict(z.items())
    header = json.loads(bytes(arrays.pop("__header__")).decode())
    state = header["tree"]["state"]["$dict"]
    assert "components_" in state
    cases = {"missing.model": lambda st: st.pop("components_"),
             "string.model": lambda st: st.update(components_="nonsense"),
             "shape.model": lambda st: st.update(_sample_shape_x_={"$tuple": [-3]})}
    for name, spoil in cases.items():
        bad = json.loads(json.dumps(header))
        spoil(bad["tree"]["state"]["$dict"])
        with open(tmp_path / name, "wb") as fh:
            np.savez(fh, __header__=np.frombuffer(json.dumps(bad).encode(), np.uint8),
                     **arrays)
        with pytest.raises(ValueError, match=rf"{name}: not a valid crossmetric model file: "):
            load_model(tmp_path / name)
    rc, _, err = _cli("evaluate", "missing.model", "--x", "x.npy", "--pairs", "p.csv",
                      cwd=tmp_path)
    assert rc == 2 and len(err) == 1, err
    assert "not a valid crossmetric model file: AttributeError" in err[0]
    assert "internal error" not in err[0]
    rc, out, err = _cli("evaluate", "good.model", "--x", "x.npy", "--pairs", "p.csv",
                        cwd=tmp_path)
    assert rc == 0, err  # a sound model still loads


def test_ranks_and_k_beyond_the_gallery_are_clamped_with_a_note(small, tmp_path):
    X, ids = small
    pairs, y = make_pairs(ids, max_positives=30, random_state=0)
    save_model(tmp_path / "e.model", Euclidean().fit(X[pairs], y))
    np.savetxt(tmp_path / "ids.txt", ids, fmt="%d")
    rc, out, err = _cli("evaluate", "e.model", "--x", "x.npy", "--y", "x.npy",
                        "--probe-labels", "ids.txt", "--gallery-labels", "ids.txt", "--ranks",
                        "1,100000000000", "--same-set", cwd=tmp_path)
    assert rc == 0, err
    assert err == ["crossmetric: note: --ranks 100000000000: beyond the gallery's 20 items; "
                   "reported as rank 20"]
    assert "rank-100000000000" in out and "100.00 %" in out
    from crossmetric.protocols import measure_identification

    rep, _ = measure_identification(None, X, X, ids, ids, ranks=(1, 10**11))
    assert len(rep["cmc"]) == 20 and rep["rank100000000000"] == rep["cmc"][-1] == 1.0
    pytest.importorskip("faiss")
    from crossmetric.retrieval import Index

    index = Index(Euclidean().fit(X[pairs], y)).add(X)
    with pytest.warns(UserWarning, match=r"k=1000000000000 is more than the 20 items of the "
                                         r"index: returning 20 columns"):
        D, ids_ = index.search(X[:3], 10**12)
    assert D.shape == ids_.shape == (3, 20) and (ids_ >= 0).all()
    D, ids_ = index.search(X[:3], 25)  # a k that fits: faiss's convention, ids -1 beyond
    assert ids_.shape == (3, 25) and (ids_[:, 20:] == -1).all() and (ids_[:, :20] >= 0).all()


# ---------------------------------------------------------- row 12: workers of a killed run
def _descendants(pid: int) -> list[int]:
    psutil = pytest.importorskip("psutil")
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(pids) -> list[int]:
    psutil = pytest.importorskip("psutil")
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_sigkilled_parallel_benchmark_leaves_no_worker_behind(tmp_path):
    psutil = pytest.importorskip("psutil")
    p = subprocess.Popen([sys.executable, "-m", "crossmetric", "benchmark", "--methods",
                          "ldml,cca", "--folds", "4", "--n-jobs", "2", "--no-progress", "--out",
                          str(tmp_path / "D")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    kids: set[int] = set()
    workers: list[int] = []
    try:
        t0 = time.time()
        while time.time() - t0 < 120 and p.poll() is None:
            kids.update(_descendants(p.pid))
            workers = [k for k in _alive(kids)
                       if "popen_loky_posix" in " ".join(psutil.Process(k).cmdline())]
            if len(workers) >= 2:
                break
            time.sleep(0.1)
        assert p.poll() is None and len(workers) >= 2, "no two workers started"
        time.sleep(0.5)
        kids.update(_descendants(p.pid))
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.time() + 30
        while _alive(kids) and time.time() < deadline:
            time.sleep(0.25)
        left = _alive(kids)
        assert not left, [" ".join(psutil.Process(k).cmdline())[:80] for k in left]
    finally:
        for pid in _alive(kids):  # only the processes this test started
            os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()


# ----------------------------------------------------------- row 14: scale-free LDML / CLML
@pytest.mark.parametrize("make", [
    lambda: LDML(n_components=4, max_iter=200, random_state=0),
    lambda: CLML(n_clusters=2, n_components=4, max_iter=200, random_state=0)],
    ids=["ldml", "clml"])
def test_ldml_and_clml_fit_alike_at_any_scale_of_the_features(make):
    from crossmetric.datasets import make_cross_modal

    d = make_cross_modal(240, n_classes=12, random_state=0)
    X, labels = d.X, d.labels
    train = labels < 8
    tr, te = np.flatnonzero(train), np.flatnonzero(~train)
    ptr, ytr = make_pairs(labels[tr], max_positives=400, random_state=0)
    pte, yte = make_pairs(labels[te], max_positives=400, random_state=1)
    aucs, dists = {}, {}
    for s in (1.0, 1e-3, 1e3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = make().set_params(preprocessor=X[tr] * s).fit(ptr, ytr)
        est.set_params(preprocessor=X[te] * s)
        dists[s] = est.pair_distance(pte)
        aucs[s] = roc_auc(yte, -dists[s])
    assert abs(aucs[1e-3] - aucs[1.0]) < 0.01 and abs(aucs[1e3] - aucs[1.0]) < 0.01, aucs
    for s in (1e-3, 1e3):  # the same learned distances: transform() of raw inputs is exact
        np.testing.assert_allclose(dists[s], dists[1.0], rtol=1e-3, atol=1e-6 * dists[1.0].max())
