"""Awkward inputs to every registered learner (issue 23): each gives a clear one-line
``ValueError`` or works (finite distances that still rank the pairs)."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from crossmetric.metrics import roc_auc
from crossmetric.pairs import make_pairs
from crossmetric.registry import METHODS, make_estimator

NAMES = [n for n in METHODS if n != "deepgsm"]  # DeepGSM takes images: tests in test_deep_gsm


def _data(seed=0, d_x=6, d_y=5):
    rng = np.random.RandomState(seed)
    labels = np.repeat(np.arange(6), 8)
    Z = rng.rand(6, 4)[labels]
    X = np.abs(Z @ rng.rand(4, d_x) + 0.1 * rng.rand(48, d_x))
    Y = np.abs(Z @ rng.rand(4, d_y) + 0.1 * rng.rand(48, d_y))
    pairs, y = make_pairs(labels, labels, max_positives=120, random_state=0)
    return X, Y, pairs, y


def _fit(name, X, Y, pairs, y):
    est = make_estimator(name)
    prep = X if not getattr(est, "_cross_modal", True) else (X, Y)
    small = {"n_components": 3, "n_clusters": 2, "max_iter": 20, "random_state": 0}
    est.set_params(**{k: v for k, v in small.items() if k in est.get_params()},
                   preprocessor=prep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(pairs, y)
    d = est.pair_distance(pairs)
    assert np.isfinite(d).all()
    return roc_auc(y, -d)


def _one_line_value_error(fn):
    try:
        fn()
    except ValueError as exc:
        assert "\n" not in str(exc).strip(), str(exc)
        return str(exc)
    return None


@pytest.mark.parametrize("name", NAMES)
def test_awkward_inputs(name):
    X, Y, pairs, y = _data()
    base = _fit(name, X, Y, pairs, y)
    # NaN / inf in the samples the model sees: refused, naming the argument
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"contains NaN or infinity \(1 non-finite values\)"):
        _fit(name, Xn, Y, pairs, y)
    Xi = X.copy()
    Xi[5, 1] = -np.inf
    with pytest.raises(ValueError, match="contains NaN or infinity"):
        _fit(name, Xi, Y, pairs, y)
    # features scaled by 1e6 and 1e-6: same job, still ranks the pairs
    for s in (1e6, 1e-6):
        auc = _fit(name, X * s, Y * s, pairs, y)
        assert auc > min(0.6, base - 0.1), (s, auc, base)
    # contradictory labels (one pair both +1 and -1): label noise, fitted as such
    _fit(name, X, Y, np.r_[pairs, pairs[:1]], np.r_[y, -y[:1]])
    # a single identity: no negative pairs to learn from
    one = np.c_[np.arange(9), np.arange(1, 10)]  # rows 0..9 all of one identity
    with pytest.raises(ValueError, match=r"y must contain both \+1 \(same\) and -1"):
        _fit(name, X, Y, one, np.ones(9, int))
    # every feature constant: a one-line ValueError or a (meaningless) finite answer
    _one_line_value_error(lambda: _fit(name, np.ones_like(X), np.ones_like(Y), pairs, y))


@pytest.mark.parametrize("name", ["pcca", "cmml", "kissme", "cca", "kcca", "itml", "prdc"])
def test_many_more_features_than_samples(name):
    X, Y, pairs, y = _data(d_x=400, d_y=300)
    assert _fit(name, X, Y, pairs, y) > 0.6


# ------------------------------------------------------------------- image folders
def test_image_folder_mixed_modes_links_and_names(tmp_path):
    from PIL import Image

    from crossmetric.datasets import load_image_folder

    rng = np.random.RandomState(0)
    rgb = rng.randint(0, 256, (8, 6, 3), dtype=np.uint8)
    grey = rng.randint(0, 256, (8, 6), dtype=np.uint8)
    deep = rng.randint(0, 65536, (8, 6)).astype(np.uint16)
    (tmp_path / "a").mkdir()
    Image.fromarray(rgb).save(tmp_path / "a" / "1_rgb.png")
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "a" / "2_cmyk.tif")
    Image.fromarray(grey).save(tmp_path / "a" / "3_grey.png")
    Image.fromarray(deep).save(tmp_path / "a" / "4_16bit.png")
    raw_name = os.fsencode(tmp_path / "a") + b"/5_\xff.png"  # not UTF-8
    with open(raw_name, "wb") as fh:
        fh.write((tmp_path / "a" / "1_rgb.png").read_bytes())
    os.symlink("..", tmp_path / "a" / "loop")  # a symlink loop is not followed
    b = load_image_folder(tmp_path, r"a/(?P<id>\d)_.*\.(png|tif)")
    assert b.images.shape == (5, 8, 6, 3) and b.images.dtype == np.uint8
    np.testing.assert_array_equal(b.images[0], rgb)
    np.testing.assert_array_equal(b.images[1], rgb)  # CMYK -> RGB
    np.testing.assert_array_equal(b.images[2], np.repeat(grey[..., None], 3, axis=2))
    np.testing.assert_array_equal(b.images[3][..., 0], np.rint(deep / 257.0))  # not clipped
    np.testing.assert_array_equal(b.images[4], rgb)
    assert os.fsencode(tmp_path / b.filenames[4]) == raw_name  # the name still opens the file


def test_image_folder_corrupt_and_truncated_files(tmp_path):
    from PIL import Image

    from crossmetric.datasets import load_image_folder

    Image.fromarray(np.zeros((8, 6, 3), np.uint8)).save(tmp_path / "1_a.png")
    good = (tmp_path / "1_a.png").read_bytes()
    (tmp_path / "2_a.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match=r"cannot decode image file '2_a.png' under "):
        load_image_folder(tmp_path, r"(?P<id>\d)_a\.png")
    (tmp_path / "2_a.png").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"cannot decode image file '2_a.png'"):
        load_image_folder(tmp_path, r"(?P<id>\d)_a\.png")
    (tmp_path / "2_a.png").write_bytes(b"")
    with pytest.raises(ValueError, match=r"cannot decode image file '2_a.png'"):
        load_image_folder(tmp_path, r"(?P<id>\d)_a\.png")


# ------------------------------------------------------------------------------ Dask
class _KillsItsWorkerOnce:
    """Mixin: the first fit (marker file absent) SIGKILLs the Dask worker process running it."""

    def _fit(self, data, y):
        import signal as _signal

        if not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(str(os.getpid()))
            os.kill(os.getpid(), _signal.SIGKILL)
        return super()._fit(data, y)


def _killer_class():
    from crossmetric.baselines import Euclidean

    class KillerEuclidean(_KillsItsWorkerOnce, Euclidean):
        def __init__(self, standardize=False, *, marker="", preprocessor=None):
            super().__init__(standardize, preprocessor=preprocessor)
            self.marker = marker

    return KillerEuclidean


@pytest.mark.slow
def test_dask_worker_killed_mid_run_recovers_and_leaves_no_processes(tmp_path):
    """A worker SIGKILLed inside a fit: Dask's nanny restarts it, the split is re-run, and
    the result equals the serial run; after the run no worker process is left."""
    pytest.importorskip("distributed")
    import psutil

    from crossmetric.cluster import dask_backend
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import run_protocols

    data = make_cross_modal(120, n_classes=12, n_latent=4, n_features_x=6, n_features_y=6,
                            random_state=0)
    cls = _killer_class()
    marker = tmp_path / "killed"
    kw = dict(n_folds=2, n_repeats=1, random_state=0)
    (tmp_path / "never").write_text("x")  # present: this estimator never kills
    serial = run_protocols({"e": cls(marker=str(tmp_path / "never"))}, data, **kw)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with dask_backend(n_workers=2) as client:
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            remote = run_protocols({"e": cls(marker=str(marker))}, data, **kw)
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        workers = client.run(os.getpid)
    killed = int(marker.read_text())
    assert killed not in workers.values()  # that worker died and was replaced
    assert [(r["method"], r["measure"], r["mean"]) for r in remote.summary
            if r["measure"] != "fit_seconds"] == [
        (r["method"], r["measure"], r["mean"]) for r in serial.summary
        if r["measure"] != "fit_seconds"]
    time.sleep(0.5)
    assert _workers_alive(psutil.Process(), before) == []


def _workers_alive(proc, before=frozenset()):
    """Descendant processes still running, but multiprocessing's resource tracker (one per
    interpreter, not a worker; it ends with the interpreter)."""
    import psutil

    out = []
    for p in proc.children(recursive=True):
        try:
            if p.pid in before or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if "resource_tracker" not in " ".join(p.cmdline()):
                out.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [("SIGINT", 130, "interrupted"),
                                             ("SIGTERM", 143, "terminated")])
def test_dask_benchmark_stopped_leaves_no_workers_and_no_output(tmp_path, sig, code, word):
    pytest.importorskip("distributed")
    import signal as _signal
    import subprocess

    import psutil

    out = tmp_path / "res"
    proc = subprocess.Popen(
        [sys.executable, "-m", "crossmetric", "benchmark", "--methods", "cmml,gsm", "--folds", "10",
         "--repeats", "5", "--out", str(out), "--no-progress", "--dask-workers", "2"],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parent = psutil.Process(proc.pid)
    t0 = time.time()
    while time.time() - t0 < 120:  # both worker processes started
        if sum("spawn_main" in " ".join(k.cmdline()) for k in parent.children(True)) >= 2:
            break
        time.sleep(0.3)
    time.sleep(2)  # splits running (the whole run takes ~20 s on 2 cores; CMML alone ~9 s)
    workers = parent.children(recursive=True)
    assert workers
    proc.send_signal(getattr(_signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert err.strip().splitlines()[-1] == f"crossmetric: {word}"
    time.sleep(3)
    alive = [w.pid for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert alive == [] and not out.exists()
