"""Awkward inputs to every registered learner: each gives a clear one-line
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
from crossmetric.pairs import make_pairs, pair_conflicts
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
    # contradictory labels (one pair both +1 and -1): refused naming the pair,
    # fitted as label noise where asked to keep them
    bad_pairs, bad_y = np.r_[pairs, pairs[:1]], np.r_[y, -y[:1]]
    with pytest.raises(ValueError, match=rf"pairs\[0\] and pairs\[{len(y)}\] join the same "):
        _fit(name, X, Y, bad_pairs, bad_y)
    with pair_conflicts("keep"):
        _fit(name, X, Y, bad_pairs, bad_y)
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
    from crossmetric.learners.baselines import Euclidean

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


# ------------------------------------------------------- what still got through
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, cwd, **kw):
    """The real command line in a fresh process: ``python -m crossmetric ARGS``."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "CROSSMETRIC_DEBUG"}
    return subprocess.run([sys.executable, "-m", "crossmetric", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, **kw)


def _one_error(stderr: str) -> str:
    """The single line a refused command prints."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crossmetric: error: "), lines
    return lines[0]


@pytest.fixture
def small_files(tmp_path):
    """Six identities x 5 rows: X.npy (4 features), Y.npy (3), labels.txt."""
    rng = np.random.RandomState(0)
    lab = np.repeat(np.arange(6), 5)
    np.save(tmp_path / "X.npy", rng.normal(size=(30, 4)) + lab[:, None])
    np.save(tmp_path / "Y.npy", rng.normal(size=(30, 3)) + lab[:, None])
    (tmp_path / "labels.txt").write_text("\n".join(map(str, lab)) + "\n")
    return tmp_path


def test_an_output_that_is_an_input_is_refused(small_files, capsys):
    """Row 1: `fit --out X.npy`, `evaluate --scores X.npy` (and links to an input) refused
    with one line naming the option; the input stays as it was."""
    from crossmetric.cli import main

    t = small_files
    before = {p.name: p.read_bytes() for p in t.iterdir()}
    r = _cli("fit", "euclidean", "--x", "X.npy", "--labels", "labels.txt", "--out", "X.npy",
             cwd=t)
    assert r.returncode == 2 and r.stdout == ""
    assert _one_error(r.stderr) == ("crossmetric: error: --out: 'X.npy' is the --x input; "
                                    "expected a new file name (an output never overwrites an "
                                    "input).")
    assert main(["fit", "euclidean", "--x", str(t / "X.npy"), "--labels",
                 str(t / "labels.txt"), "--out", str(t / "m.model")]) == 0
    capsys.readouterr()
    r = _cli("evaluate", "m.model", "--x", "X.npy", "--probe-labels", "labels.txt",
             "--gallery-labels", "labels.txt", "--scores", "X.npy", cwd=t)
    assert r.returncode == 2 and "--scores: 'X.npy' is the --x input" in _one_error(r.stderr)
    os.link(t / "labels.txt", t / "alias.txt")   # the same file under another name
    os.symlink(t / "X.npy", t / "link.csv")
    for argv, words in (
            (["fit", "euclidean", "--x", str(t / "X.npy"), "--labels", str(t / "labels.txt"),
              "--out", str(t / "alias.txt")], "--out: "),
            (["fit", "euclidean", "--x", str(t / "X.npy"), "--labels", str(t / "labels.txt"),
              "--out", str(t / "sub" / ".." / "labels.txt")], "is the --labels input"),
            (["search", str(t / "m.model"), "--database", str(t / "X.npy"), "--queries",
              str(t / "X.npy"), "--out", str(t / "link.csv")], "is the --database input")):
        assert main(argv) == 2, argv
        assert words in _one_error(capsys.readouterr().err)
    after = {p.name: p.read_bytes() for p in t.iterdir() if p.name in before}
    assert after == before


def test_labels_are_read_exactly_and_may_contain_spaces(small_files, capsys):
    """Row 2: integer labels never pass through a float (2**53 and 2**53 + 1 are two
    identities; beyond int64 they are kept as text), names with spaces are labels."""
    from crossmetric.cli import main
    from crossmetric.datasets import load_labels

    t = small_files
    big = [1, 2, 3, 2**53, 2**53 + 1]
    (t / "big.txt").write_text("\n".join(str(v) for v in np.repeat(big, 6)) + "\n")
    (t / "u64.txt").write_text(f"{2**64 - 1}\n{2**64 - 2}\n7\n")
    (t / "names.txt").write_text("name\nJosé Díaz\nAnna Li\nJosé Díaz\n")
    (t / "matrix.txt").write_text("1 2\n3 4\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lab = load_labels(t / "big.txt")
        assert lab.dtype == np.int64 and np.unique(lab).tolist() == big
        assert load_labels(t / "u64.txt").tolist() == [str(2**64 - 1), str(2**64 - 2), "7"]
    assert load_labels(t / "names.txt").tolist() == ["José Díaz", "Anna Li", "José Díaz"]
    with pytest.raises(ValueError, match="one label per line"):
        load_labels(t / "matrix.txt")
    # the command line draws the pairs of five identities, as with labels 1..5
    (t / "small.txt").write_text("\n".join(str(v) for v in np.repeat([1, 2, 3, 4, 5], 6)))
    counts = []
    for name in ("big.txt", "small.txt"):
        assert main(["fit", "euclidean", "--x", str(t / "X.npy"), "--labels", str(t / name),
                     "--out", str(t / f"{name}.model")]) == 0
        counts.append(capsys.readouterr().out.split(" on ")[1].split()[0])
    assert counts[0] == counts[1]


def test_benchmark_with_a_closed_stdout_still_writes_its_results(small_files):
    """Row 4: `crossmetric benchmark ... | head -n 0`: the reader closes the pipe before the
    table is printed; the run ends quietly (exit 0) and --out holds every result file."""
    import subprocess

    t = small_files
    env = {k: v for k, v in os.environ.items() if k != "CROSSMETRIC_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "crossmetric", "benchmark", "--x", "X.npy", "--labels",
         "labels.txt", "--methods", "euclidean", "--folds", "2", "--repeats", "1", "--out",
         "res", "--quiet", "--n-jobs", "1"], cwd=t, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    proc.stdout.close()   # the reader has gone before the command writes
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "error" not in err and "Traceback" not in err
    assert {"results.csv", "results.json", "config.toml"} <= set(os.listdir(t / "res"))
    assert err.strip().splitlines()[-1].startswith("wrote results.csv")


def _png_header(path, width: int, height: int) -> None:
    """A PNG that declares ``width`` x ``height`` 1-bit pixels and holds none: any attempt to
    decode it fails, so a refusal naming the size comes from the header alone."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    body = struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    end = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body + end)


def test_huge_images_and_sizes_are_refused_naming_the_limit(tmp_path):
    """Row 6: a 30000 x 30000 PNG (a 109 KB decompression bomb) gives one line naming the
    file and the pixel limit; 12000 x 12000 and 8000 x 7000 are refused from the header
    without a warning; --size has sides of at most MAX_IMAGE_SIDE."""
    from crossmetric.cli._common import CLIError, _parse_size
    from crossmetric.datasets import MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE, load_image_folder

    folder = tmp_path / "imgs"
    folder.mkdir()
    _png_header(folder / "1_a.png", 30000, 30000)
    r = _cli("benchmark", "--images", folder, "--pattern", r"(?P<id>\d)_a\.png", "--out",
             tmp_path / "res", cwd=tmp_path)
    assert r.returncode == 2
    line = _one_error(r.stderr)
    assert "--images: image file '1_a.png'" in line and "900,000,000 pixels" in line
    assert f"{MAX_IMAGE_PIXELS:,} pixels" in line and not (tmp_path / "res").exists()
    for w, h in ((12000, 12000), (8000, 7000)):
        _png_header(folder / "1_a.png", w, h)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=rf"image file '1_a.png' under .* refused: "
                                                 rf"{w * h:,} pixels|{w}x{h} = {w * h:,}"):
                load_image_folder(folder, r"(?P<id>\d)_a\.png")
    assert _parse_size(f"{MAX_IMAGE_SIDE}x8") == (MAX_IMAGE_SIDE, 8)
    with pytest.raises(CLIError, match=rf"--size: 100000x100000 is too large; expected each "
                                       rf"side at most {MAX_IMAGE_SIDE} pixels"):
        _parse_size("100000x100000")
    with pytest.raises(ValueError, match=f"each side must be at most {MAX_IMAGE_SIDE}"):
        load_image_folder(folder, r"(?P<id>\d)_a\.png", size=(100000, 100000))


def test_float_and_32bit_tiffs_keep_their_range(tmp_path):
    """Row 9: a float32 TIFF in [0, 1] keeps its values (x 255, not 99.6 % black); a 32-bit
    integer TIFF is stretched from its own range (not saturated) with a warning naming the
    file; a float TIFF outside [0, 1] is refused with the reason."""
    from PIL import Image

    from crossmetric.datasets import load_image_folder

    ramp = np.linspace(0.0, 1.0, 12 * 16).reshape(12, 16)
    Image.fromarray(ramp.astype(np.float32), "F").save(tmp_path / "1_f.tif")
    wide = np.rint(ramp * 3_000_000 + 70_000).astype(np.int32)   # beyond 16 bits
    Image.fromarray(wide).save(tmp_path / "2_i.tif")
    with pytest.warns(UserWarning, match=r"image file '2_i.tif': 32-bit integer image "
                                         r"stretched from its own range \[70000, 3070000\]"):
        b = load_image_folder(tmp_path, r"(?P<id>\d)_[fi]\.tif", color="gray")
    want = np.rint(ramp * 255).astype(np.uint8)
    np.testing.assert_array_equal(b.images[0], want)
    assert np.abs(b.images[1].astype(int) - want).max() <= 1
    Image.fromarray((ramp * 4 - 1).astype(np.float32), "F").save(tmp_path / "3_f.tif")
    with pytest.raises(ValueError, match=r"image file '3_f.tif' under .* refused: "
                                         r"floating-point image with values in \[-1, 3\]; "
                                         r"expected \[0, 1\]"):
        load_image_folder(tmp_path, r"(?P<id>\d)_[fi]\.tif", color="gray")


def test_bad_identities_folds_and_paths_name_the_true_cause(small_files, capsys):
    """Row 11: one identity, a gallery without the probes' identities, duplicate --instance
    ids with --y, --folds beyond the data, a folder as --x: one line each, the real cause."""
    from crossmetric.cli import main

    t = small_files
    (t / "one.txt").write_text("7\n" * 30)
    (t / "other.txt").write_text("\n".join(str(100 + i // 5) for i in range(30)))
    (t / "dup.txt").write_text("\n".join(str(i % 15) for i in range(30)))
    (t / "folder").mkdir()
    x, lab = str(t / "X.npy"), str(t / "labels.txt")
    assert main(["fit", "euclidean", "--x", x, "--labels", lab, "--out",
                 str(t / "m.model")]) == 0
    capsys.readouterr()
    out = str(t / "res")
    cases = [
        (["fit", "euclidean", "--x", x, "--labels", str(t / "one.txt"), "--out",
          str(t / "o.model")], "--labels: only one identity (7); need at least 2"),
        (["benchmark", "--x", x, "--labels", str(t / "one.txt"), "--out", out],
         "--labels: only one identity (7); need at least 2"),
        (["evaluate", str(t / "m.model"), "--x", x, "--probe-labels", lab,
          "--gallery-labels", str(t / "other.txt")],
         "--gallery-labels: no probe identity is in the gallery"),
        (["benchmark", "--x", x, "--y", str(t / "Y.npy"), "--labels", lab, "--instance",
          str(t / "dup.txt"), "--methods", "euclidean", "--out", out],
         "--instance: duplicate ids (0 on rows 1 and 16; 15 ids repeated)"),
        (["benchmark", "--x", str(t / "folder"), "--labels", lab, "--out", out],
         f"--x: feature file {str(t / 'folder')!r} is a folder, expected a file."),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in _one_error(capsys.readouterr().err), argv
    assert not os.path.exists(out)
    # the real process: no raw warning or source line before the one line
    r = _cli("benchmark", "--x", "X.npy", "--labels", "labels.txt", "--methods", "euclidean",
             "--folds", "1000", "--repeats", "1", "--quiet", "--out", "res", cwd=t)
    assert r.returncode == 2 and not (t / "res").exists()
    assert _one_error(r.stderr).startswith("crossmetric: error: --folds 1000 exceeds the 30 "
                                           "objects / 6 identities of --labels; expected at "
                                           "most 5")


def test_config_out_is_announced_and_a_foreign_folder_refused(small_files):
    """Row 13: `out` from a --config file is printed, resolved, before the run writes; an
    existing folder of other files (no crossmetric results) is refused and left untouched."""
    t = small_files
    foreign = t / "cron.d"
    foreign.mkdir()
    (foreign / "job").write_text("keep")
    run = ('[benchmark]\nx = "X.npy"\nlabels = "labels.txt"\nmethods = "euclidean"\n'
           'folds = 2\nrepeats = 1\nn_jobs = 1\nquiet = true\nout = "{}"\n')
    (t / "new.toml").write_text(run.format("cron.d/x"))
    r = _cli("benchmark", "--config", "new.toml", cwd=t)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    where = f"crossmetric benchmark: results go to {foreign / 'x'}"
    assert where in lines and lines.index(where) < len(lines) - 1
    assert lines[-1].startswith("wrote results.csv") and (foreign / "x" / "results.json").exists()
    (t / "foreign.toml").write_text(run.format("cron.d"))
    r = _cli("benchmark", "--config", "foreign.toml", cwd=t)
    assert r.returncode == 2 and r.stdout == ""
    assert _one_error(r.stderr) == (
        f"crossmetric: error: --out: {str(foreign)!r} is a folder of other files, not a "
        "crossmetric output folder; expected a new or empty folder, or one an earlier run "
        "wrote (results.*, config.toml).")
    assert sorted(os.listdir(foreign)) == ["job", "x"] and (foreign / "job").read_text() == "keep"


def test_seed_of_a_deterministic_learner_is_ignored_with_a_note(small_files):
    """Row 16: `fit cca --seed 0` without --param: a note, the model written, no message
    naming an option that was not given."""
    t = small_files
    rng = np.random.RandomState(1)
    for name in ("Xw.npy", "Yw.npy"):   # wider than CCA's 10 components
        np.save(t / name, rng.normal(size=(30, 12)))
    r = _cli("fit", "cca", "--x", "Xw.npy", "--y", "Yw.npy", "--labels", "labels.txt",
             "--seed", "0", "--out", "cca.model", cwd=t)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == ("crossmetric: note: CCA is deterministic (no random_state); "
                                "--seed 0 is ignored")
    assert "--param" not in r.stderr and (t / "cca.model").exists()


def test_benchmark_footer_and_start_line_describe_only_what_ran(small_files, capsys):
    """Row 17: --protocol identification is announced and summed up as identification only;
    --protocol verification as verification only."""
    from crossmetric.cli import main

    t = small_files
    base = ["benchmark", "--x", str(t / "X.npy"), "--labels", str(t / "labels.txt"),
            "--methods", "euclidean", "--folds", "3", "--repeats", "2", "--quiet",
            "--n-jobs", "1"]
    assert main([*base, "--protocol", "identification", "--out", str(t / "a")]) == 0
    cap = capsys.readouterr()
    assert "identity = labels; 2 identification repeats" in cap.err
    assert "verification" not in cap.err and "verification" not in cap.out
    assert "; mean ± std over 2 repeats (identification); " in cap.out
    assert main([*base, "--protocol", "verification", "--out", str(t / "b")]) == 0
    cap = capsys.readouterr()
    assert "identity = labels; 3-fold verification\n" in cap.err
    assert "; mean ± std over 3 folds (verification); " in cap.out
    assert "identification" not in cap.out


def _cpu_seconds(pid: int) -> float:
    """CPU seconds a running process has used (Linux /proc; elsewhere: 8 after 10 s)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        time.sleep(10)
        return 8.0


@pytest.mark.parametrize("sig, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_inside_one_long_computation_ends_the_command_within_seconds(tmp_path, sig,
                                                                              code):
    """Python runs no signal handler inside one long call into C (here MahaAUC's first
    eigendecomposition of a 4,500 × 4,500 metric, tens of seconds on one thread): the command
    still ends within the grace period, with the interrupt's exit code, and writes nothing."""
    import signal as _signal
    import subprocess

    from crossmetric.cli._entry import GRACE_SECONDS

    rng = np.random.RandomState(0)
    np.save(tmp_path / "x.npy", rng.rand(12, 4500))
    np.savetxt(tmp_path / "labels.txt", np.arange(12) % 4, fmt="%d")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "crossmetric", "fit", "mahaauc", "--x", "x.npy", "--labels",
         "labels.txt", "--param", "init=pca", "--param", "reduce_to=None",
         "--param", "n_components=None", "--out", "model.cmm"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # started (imports and data take ~3 s of CPU) and inside the first eigendecomposition
    t_start = time.time()
    while _cpu_seconds(proc.pid) < 8.0 and proc.poll() is None and time.time() - t_start < 120:
        time.sleep(0.2)
    t0 = time.time()
    proc.send_signal(getattr(_signal, sig))
    _, err = proc.communicate(timeout=120)
    assert time.time() - t0 < GRACE_SECONDS + 3, err
    assert proc.returncode == code and not (tmp_path / "model.cmm").exists()
