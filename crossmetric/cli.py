r"""The ``crossmetric`` command line: benchmark, fit, evaluate, search and reproduce.

A thin front end: every step calls a library function (:mod:`crossmetric.protocols`,
:mod:`crossmetric.registry`, :mod:`crossmetric.datasets`, :mod:`crossmetric.metrics`,
:mod:`crossmetric.plotting`, :mod:`crossmetric.retrieval`). Bad input -- unreadable files,
wrong shapes, unknown method names, bad options -- ends with a one-line message on stderr and
exit code 2, never a traceback (set ``CROSSMETRIC_DEBUG=1`` to see one).

Examples
--------
::

    crossmetric benchmark                                  # every method, embedded digits
    crossmetric benchmark --methods euclidean,pcca --folds 5 --repeats 3 --out res/
    crossmetric benchmark --dataset mfeat:fou,pix --data-home ../shared/data/mfeat
    crossmetric benchmark --x photos.npy --y sketches.csv --labels ids.txt   # your own data
    crossmetric benchmark --x faces.npy --labels ids.txt                     # one modality
    crossmetric benchmark --images photos/ --pattern '(?P<id>\d+)_(?P<domain>[ab])\.png'
    crossmetric benchmark --dataset viper --data-home ../shared/data/viper
    crossmetric benchmark --lfw-pairs pairs.txt --x lfw_feats.npy --image-list names.txt
    crossmetric fit cmml --x photos.npy --y sketches.npy --pairs train.csv --out cmml.model
    crossmetric evaluate cmml.model --x photos.npy --y sketches.npy --pairs test.csv
    crossmetric evaluate cmml.model --x probes.npy --y gallery.npy \
        --probe-labels p.txt --gallery-labels g.txt --scores scores.csv
    crossmetric search cmml.model --database sketches.npy --queries photos.npy -k 10
    crossmetric reproduce --list
    crossmetric reproduce pcca-viper --data-home ../shared/data --out viper/
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings

import numpy as np

from crossmetric.persistence import atomic_open

__all__ = ["main", "build_parser"]


class CLIError(Exception):
    """A user-facing error: printed on one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``crossmetric: error: ...``) and exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        raise CLIError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------------------ helpers
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _load_array(path: str, what: str, *, allow_images: bool = False,
                key: str | None = None) -> np.ndarray:
    from crossmetric.datasets import load_features

    try:
        return load_features(path, allow_images=allow_images, key=key)
    except ValueError as exc:
        raise CLIError(f"{what}: {exc}") from None


def _load_label_file(path: str, what: str, n_rows: int | None = None) -> np.ndarray:
    from crossmetric.datasets import load_labels

    try:
        lab = load_labels(path, what="file")
    except ValueError as exc:
        raise CLIError(f"{what}: {exc}") from None
    if n_rows is not None and lab.shape[0] != n_rows:
        raise CLIError(f"{what}: {path!r} has {lab.shape[0]} labels, but the features have "
                       f"{n_rows} rows (one label per row expected).")
    return lab


def _check_int(args, name: str, minimum: int | None = None, maximum: int | None = None,
               *, nonzero: bool = False) -> None:
    value = getattr(args, name.lstrip("-").replace("-", "_"))
    if value is None:
        return
    if minimum is not None and value < minimum:
        raise CLIError(f"{name} must be >= {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise CLIError(f"{name} must be <= {maximum}, got {value}.")
    if nonzero and value == 0:
        raise CLIError(f"{name} must not be 0 (-1: all cores, 1: one process, N: N workers).")


def _check_output_file(path: str | None, what: str, exts: tuple[str, ...] | None = None) -> None:
    """An output file must go to an existing, writable folder and not be a folder itself."""
    if path is None:
        return
    if not path.strip():
        raise CLIError(f"{what}: empty path.")
    if exts is not None and os.path.splitext(path)[1].lower() not in exts:
        raise CLIError(f"{what}: {path!r} must end in {' or '.join(exts)}.")
    if os.path.isdir(path):
        raise CLIError(f"{what}: {path!r} is a folder, expected a file name.")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{what}: folder {folder!r} does not exist.")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"{what}: folder {folder!r} is not writable.")


def _check_output_dir(path: str, what: str = "--out") -> None:
    """An output folder may be new (created only once there are results) or empty / existing;
    its nearest existing ancestor must be a writable folder."""
    if not path.strip():
        raise CLIError(f"{what}: empty path.")
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise CLIError(f"{what}: {path!r} exists and is not a folder.")
    probe = full
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise CLIError(f"{what}: cannot create {path!r}: {probe!r} is a file.")
    if not os.access(probe, os.W_OK):
        raise CLIError(f"{what}: cannot create {path!r}: {probe!r} is not writable.")


def _load_pairs(path: str):
    from crossmetric.datasets import load_pairs

    try:
        return load_pairs(path)
    except ValueError as exc:
        raise CLIError(f"--pairs: {exc}") from None


def _check_pair_rows(pairs: np.ndarray, n_x: int, n_y: int) -> None:
    if pairs[:, 0].max() >= n_x:
        raise CLIError(f"--pairs: column i refers to row {int(pairs[:, 0].max())}, but --x has "
                       f"only {n_x} rows.")
    if pairs[:, 1].max() >= n_y:
        raise CLIError(f"--pairs: column j refers to row {int(pairs[:, 1].max())}, but the "
                       f"second modality has only {n_y} rows.")


def _preprocessor(est, X: np.ndarray, Y: np.ndarray | None):
    cross = bool(getattr(est, "_cross_modal", True))
    if Y is None:
        return (X, X) if cross else X
    return (X, Y)


def _save_model(path: str, est, method: str) -> None:
    """The model in crossmetric's safe file format (:mod:`crossmetric.persistence`), atomically."""
    from crossmetric.persistence import save_model

    est.set_params(preprocessor=None)  # never store the training samples in the model file
    _check_output_file(path, "--out")
    try:
        save_model(path, est, meta={"method": method})
    except (ValueError, OSError) as exc:
        raise CLIError(f"--out: {_one_line(exc)}") from None


def _load_model(path: str, trust_pickle: bool = False):
    """``(model, method)``; nothing in the file runs (unless ``--trust-pickle`` for a pickle)."""
    from crossmetric.persistence import load_model

    if not os.path.isfile(path):
        raise CLIError(f"MODEL: file {path!r} not found.")
    try:
        est, header = load_model(path, allow_pickle=trust_pickle, return_header=True)
    except ValueError as exc:
        raise CLIError(f"MODEL: {_one_line(exc)}") from None
    except Exception as exc:  # only reachable with --trust-pickle: the pickle's own errors
        raise CLIError(f"MODEL: {path!r} could not be unpickled ({type(exc).__name__}: "
                       f"{_one_line(exc)}).") from None
    method = (header or {}).get("meta", {}).get("method") or type(est).__name__
    return est, method


def _parse_params(method: str, items) -> dict:
    """``fit METHOD --param NAME=VALUE``: read and checked as ``benchmark``'s
    ``--param METHOD.NAME=VALUE`` (:func:`crossmetric.config.parse_param`: a TOML literal, a
    parameter the learner has)."""
    from crossmetric.config import parse_param

    out = {}
    for item in items or []:
        try:
            _, name, value = parse_param(f"{method}.{item}")
        except ValueError as exc:
            raise CLIError(_one_line(exc)) from None
        out[name] = value
    return out


# --------------------------------------------------------------------------- benchmark
_DESCRIPTORS = ("hog", "strips", "pixels")


def _parse_size(text: str | None):
    if text is None:
        return None
    w, sep, h = text.lower().partition("x")
    if not sep or not w.strip().isdigit() or not h.strip().isdigit() or int(w) < 1 or int(h) < 1:
        raise CLIError(f"--size expects WIDTHxHEIGHT in pixels (e.g. 48x128), got {text!r}.")
    return int(w), int(h)


def _describe_images(images, descriptor: str) -> np.ndarray:
    """Feature rows of an image stack ``(n, h, w[, 3])`` with the chosen descriptor."""
    images = np.asarray(images)
    if images.dtype == object or images.ndim not in (3, 4):
        raise CLIError("the images differ in size; give --size WIDTHxHEIGHT to resize them.")
    if descriptor == "pixels":
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        return grey.reshape(grey.shape[0], -1).astype(np.float64) / 255.0
    try:
        from crossmetric import features
    except ImportError as exc:
        raise CLIError(f"--descriptor {descriptor}: crossmetric.features is not available "
                       f"({_one_line(exc)}); use --descriptor pixels.") from None
    cls = {"hog": "HOG", "strips": "StripHistograms"}[descriptor]
    return np.asarray(getattr(features, cls)().fit_transform(images), dtype=np.float64)


def _images_to_dataset(bunch, descriptor: str, what: str):
    """A benchmark dataset from a loader's ``images``, ``ids``, ``domains``.

    No ``domain`` (or one value): one modality, ``X`` = descriptors, identity = ``ids``.
    Two domains (camera A / B, photo / sketch): the first domain in sorted order is ``X``, the
    second ``Y``; the ``k``-th image of an identity in one domain is row-aligned with its
    ``k``-th image in the other (images without a partner are left out).
    """
    from sklearn.utils import Bunch

    images = np.asarray(bunch.images) if not isinstance(bunch.images, np.ndarray) else \
        bunch.images
    ids = np.asarray(bunch.ids)
    if ids.size == 0:
        raise CLIError(f"{what}: no image matched.")
    domains = getattr(bunch, "domains", None)
    doms = None if domains is None else np.asarray(domains)
    if doms is not None and (doms.size == 0 or all(d is None for d in doms.tolist())):
        doms = None
    if doms is None or np.unique(doms.astype(str)).size == 1:
        F = _describe_images(images, descriptor)
        codes = np.unique(ids.astype(str), return_inverse=True)[1].astype(np.int64)
        return Bunch(X=F, Y=None, labels=codes), \
            f"{what}: {F.shape[0]} images, {np.unique(codes).size} identities, one modality"
    names = np.unique(doms.astype(str))
    if names.size != 2:
        raise CLIError(f"{what}: the pattern's 'domain' group must take exactly two values "
                       f"(the two modalities), got {names.size}: {', '.join(names[:5])}.")
    rows_a, rows_b = [], []
    sid, sdom = ids.astype(str), doms.astype(str)
    for ident in np.unique(sid):
        a = np.flatnonzero((sid == ident) & (sdom == names[0]))
        b = np.flatnonzero((sid == ident) & (sdom == names[1]))
        m = min(a.size, b.size)
        rows_a += a[:m].tolist()
        rows_b += b[:m].tolist()
    if len(rows_a) < 4:
        raise CLIError(f"{what}: only {len(rows_a)} identities have an image in both domains "
                       f"{names[0]!r} and {names[1]!r}.")
    ra, rb = np.asarray(rows_a), np.asarray(rows_b)
    F = _describe_images(images, descriptor)
    codes = np.unique(sid[ra], return_inverse=True)[1].astype(np.int64)
    data = Bunch(X=F[ra], Y=F[rb], labels=codes, instance=np.arange(ra.size))
    if images.ndim in (3, 4) and images.dtype != object:
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        grey = grey.astype(np.float64) / (255.0 if grey.max() > 1 else 1.0)
        data.images_x, data.images_y = grey[ra], grey[rb]
    return data, (f"{what}: {names[0]} vs {names[1]}, {ra.size} matched pairs of images, "
                  f"{np.unique(codes).size} identities, {descriptor} descriptors")


def _load_named_dataset(spec: str, args):
    from crossmetric.datasets import MFEAT_VIEWS, load_digits_views, load_mfeat

    data_home = args.data_home
    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name == "digits":
        if arg:
            raise CLIError(f"--dataset digits takes no views, got {spec!r}.")
        return load_digits_views(), "digits (photo pixels vs sketch HOG)"
    if name == "mfeat":
        views = tuple(v.strip() for v in (arg or "fou,pix").split(","))
        if len(views) != 2 or any(v not in MFEAT_VIEWS for v in views):
            raise CLIError(f"--dataset mfeat:V1,V2 needs two views among "
                           f"{','.join(MFEAT_VIEWS)}, got {spec!r}.")
        home = data_home or os.environ.get("CROSSMETRIC_DATA")
        if not home:
            raise CLIError("--dataset mfeat needs --data-home DIR (the folder with mfeat-fou, "
                           "mfeat-pix, ...).")
        try:
            return load_mfeat(home, views), f"mfeat {views[0]} vs {views[1]}"
        except ValueError as exc:
            raise CLIError(f"--data-home: {exc}") from None
    if name in ("viper", "pku-sketch", "pku_sketch"):
        if arg:
            raise CLIError(f"--dataset {name} takes no options, got {spec!r}.")
        if not data_home:
            raise CLIError(f"--dataset {name} needs --data-home DIR (e.g. "
                           f"../shared/data/{name.replace('-', '_')}).")
        if not os.path.isdir(data_home):
            raise CLIError(f"--data-home: {data_home!r} is not a folder.")
        from crossmetric import datasets

        loader = "load_viper" if name == "viper" else "load_pku_sketch"
        if not hasattr(datasets, loader):
            raise CLIError(f"--dataset {name}: crossmetric.datasets.{loader} is not part of "
                           "this installation.")
        kw = {}
        size = _parse_size(args.size)
        if size is not None:
            kw["size"] = size
        try:
            bunch = getattr(datasets, loader)(data_home, **kw)
        except (ValueError, OSError) as exc:
            raise CLIError(f"--data-home: {_one_line(exc)}") from None
        descriptor = args.descriptor or ("strips" if name == "viper" else "hog")
        return _images_to_dataset(bunch, descriptor, name)
    raise CLIError(f"unknown --dataset {spec!r}; expected 'digits', 'mfeat:V1,V2', 'viper' "
                   "or 'pku-sketch'.")


def _own_dataset(args):
    """The benchmark's data from --x/--y/--labels/--instance or --images/--pattern."""
    from sklearn.utils import Bunch

    if args.images is not None:
        if args.pattern is None:
            raise CLIError("--images needs --pattern REGEX with a named group 'id' (and "
                           "optionally 'domain'), e.g. '(?P<id>\\d+)_(?P<domain>[ab])\\.png'.")
        import re

        try:
            rx = re.compile(args.pattern)
        except re.error as exc:
            raise CLIError(f"--pattern: not a regular expression: {exc}.") from None
        if "id" not in rx.groupindex:
            raise CLIError("--pattern must have a named group 'id', e.g. (?P<id>\\d+).")
        if not os.path.isdir(args.images):
            raise CLIError(f"--images: {args.images!r} is not a folder.")
        from crossmetric import datasets

        if not hasattr(datasets, "load_image_folder"):
            raise CLIError("--images: crossmetric.datasets.load_image_folder is not part of "
                           "this installation.")
        kw = {}
        size = _parse_size(args.size)
        if size is not None:
            kw["size"] = size
        try:
            bunch = datasets.load_image_folder(args.images, args.pattern, **kw)
        except (ValueError, OSError) as exc:
            raise CLIError(f"--images: {_one_line(exc)}") from None
        return _images_to_dataset(bunch, args.descriptor or "hog", args.images)
    X = _load_array(args.x, "--x", key=args.key)
    Y = _load_array(args.y, "--y", key=args.key) if args.y else None
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise CLIError(f"--y: {Y.shape[0]} rows, but --x has {X.shape[0]}; row r of both "
                       "files must describe the same object.")
    if args.labels is None and args.instance is None:
        raise CLIError("--x needs --labels FILE (the identity of each row) or --instance FILE.")
    labels = _load_label_file(args.labels, "--labels", X.shape[0]) if args.labels else None
    inst = _load_label_file(args.instance, "--instance", X.shape[0]) if args.instance else None
    data = Bunch(X=X, Y=Y, labels=labels if labels is not None else inst)
    if inst is not None:
        data.instance = inst
    what = f"{os.path.basename(args.x)}" + (f" vs {os.path.basename(args.y)}" if args.y else
                                            " (one modality)")
    return data, what


def _method_list(text: str | None) -> list[str]:
    from crossmetric.registry import METHODS

    if text is None:
        return [name for name, spec in METHODS.items() if spec.in_default]
    if text.strip().lower() == "all":
        return list(METHODS)
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names:
        raise CLIError("--methods is empty.")
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise CLIError(f"unknown method(s) {', '.join(unknown)}; expected a comma-separated "
                       f"list among {', '.join(METHODS)}.")
    return list(dict.fromkeys(names))


def _method_kind(name: str) -> tuple[str, str | None]:
    """``(modality, reason unavailable)`` of a registry method, without importing PyTorch."""
    import importlib
    import importlib.util

    import crossmetric
    from crossmetric.registry import METHODS

    spec = METHODS[name]
    module = crossmetric._LAZY.get(spec.class_name, "")
    if module.startswith("crossmetric.deep"):
        # the deep learners are cross-modal image learners; importing them would load torch
        ok = importlib.util.find_spec("torch") is not None
        return "cross-modal (raw images)", None if ok else "PyTorch is not installed"
    try:
        cls = getattr(importlib.import_module(module), spec.class_name)
    except (ImportError, AttributeError) as exc:
        return "?", _one_line(exc)
    kind = "cross-modal" if getattr(cls, "_cross_modal", True) else "single-modal"
    if int(getattr(cls, "_sample_ndim", 1)) > 1:
        kind += " (raw images)"
    return kind, None


def _print_method_list() -> None:
    from crossmetric.registry import METHODS

    print("method     name        kind                      settings")
    for name, spec in METHODS.items():
        kind, reason = _method_kind(name)
        print(f"{name:10s} {spec.display:11s} {kind:25s} "
              f"{'' if reason is None else 'NOT AVAILABLE: ' + reason}")
        print(f"{'':10s} {spec.params}  -- {spec.note}")
        if spec.grid:
            print(f"{'':10s} --tune grid: {spec.grid}")
        if spec.paper_grid:
            print(f"{'':10s} --tune paper: {' then '.join(map(str, spec.paper_grid))}")
    print("\nsingle-modal learners on two views of different widths run on CCA-aligned views "
          "(shown as NAME-C)")


def _cap_components(estimators: dict, X: np.ndarray, Y: np.ndarray | None) -> None:
    """The registry's ``n_components`` (sized for the built-in data) capped at the narrowest
    view of the user's data, so that a method does not fail on a few-feature file."""
    cap = X.shape[1] if Y is None else min(X.shape[1], Y.shape[1])
    for name, est in estimators.items():
        k = est.get_params(deep=False).get("n_components")
        if isinstance(k, int) and k > cap:
            est.set_params(n_components=cap)
            print(f"crossmetric: {name}: n_components {k} -> {cap} (the data has {cap} "
                  "features)", file=sys.stderr)


def _validate_benchmark(args) -> None:
    """Every option checked before any data is read or any folder created."""
    _check_int(args, "--folds", 2)
    _check_int(args, "--repeats", 1)
    _check_int(args, "--n-negatives", 1)
    _check_int(args, "--max-train-positives", 1)
    _check_int(args, "--tune-folds", 2)
    if args.tune and args.lfw_pairs is not None:
        raise CLIError("--tune is not available with --lfw-pairs (fixed pairs carry no "
                       "identities to group inner folds by).")
    _check_int(args, "--seed", 0, 2**32 - 1)
    _check_int(args, "--n-jobs", -(os.cpu_count() or 1) - 1, nonzero=True)
    sources = [n for n, v in (("--dataset", args.dataset), ("--x", args.x),
                              ("--images", args.images), ("--lfw-pairs", args.lfw_pairs))
               if v is not None]
    if args.lfw_pairs is not None:
        if args.x is None or args.image_list is None:
            raise CLIError("--lfw-pairs needs --x FEATURES and --image-list NAMES (the image "
                           "name of each feature row, e.g. Aaron_Peirsol_0001.jpg).")
        if args.y is not None or args.labels is not None:
            raise CLIError("--lfw-pairs takes its pairs and labels from pairs.txt; leave out "
                           "--y and --labels.")
        if args.protocol == "identification":
            raise CLIError("--lfw-pairs is a verification protocol; --protocol "
                           "identification does not apply.")
        sources.remove("--x")  # --lfw-pairs reads its features from --x
    if len(sources) > 1:
        raise CLIError(f"give one data source, not {' and '.join(sources)}.")
    if args.x is None:
        for opt in ("y", "labels", "instance", "key", "image_list"):
            if getattr(args, opt) is not None:
                raise CLIError(f"--{opt.replace('_', '-')} needs --x.")
    if args.images is None and args.pattern is not None:
        raise CLIError("--pattern needs --images DIR.")
    if args.descriptor is not None and args.images is None and (
            args.dataset or "").lower() not in ("viper", "pku-sketch", "pku_sketch"):
        raise CLIError("--descriptor applies to image data (--images, --dataset viper or "
                       "pku-sketch).")
    _parse_size(args.size)
    if args.level == "instance" and args.x is not None and args.instance is None:
        raise CLIError("--level instance needs --instance FILE.")
    _method_list(args.methods)
    _check_output_dir(args.out)


def _resolve_benchmark_config(args):
    """Defaults < --config file < options given < --param; the merged options are written
    back into ``args`` (crossmetric.config does the work)."""
    from crossmetric.config import BENCHMARK_OPTIONS, resolve_config

    given = {k: getattr(args, k) for k in BENCHMARK_OPTIONS}
    try:
        cfg = resolve_config(given, args.config, args.param or ())
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    for key, value in cfg.options.items():
        setattr(args, key, value)
    return cfg


def cmd_benchmark(args) -> int:
    from crossmetric.protocols import run_pair_folds, run_protocols
    from crossmetric.registry import METHODS, method_status

    if args.list:
        _print_method_list()
        return 0
    cfg = _resolve_benchmark_config(args)
    _validate_benchmark(args)
    names = _method_list(args.methods)
    lfw = None
    if args.lfw_pairs is not None:
        from crossmetric.datasets import lfw_pair_indices, load_image_list, read_lfw_pairs

        X = _load_array(args.x, "--x", key=args.key)
        try:
            lfw = read_lfw_pairs(args.lfw_pairs)
        except ValueError as exc:
            raise CLIError(f"--lfw-pairs: {exc}") from None
        try:
            keys = load_image_list(args.image_list)
        except ValueError as exc:
            raise CLIError(f"--image-list: {exc}") from None
        if len(keys) != X.shape[0]:
            raise CLIError(f"--image-list: {len(keys)} names, but --x has {X.shape[0]} rows "
                           "(one name per feature row).")
        try:
            lfw_pairs = lfw_pair_indices(lfw, keys)
        except ValueError as exc:
            raise CLIError(f"--image-list: {exc}") from None
        dataset = {"X": X, "Y": None}
        description = f"LFW restricted pairs ({os.path.basename(args.lfw_pairs)})"
    elif args.x is not None or args.images is not None:
        dataset, description = _own_dataset(args)
    else:
        dataset, description = _load_named_dataset(args.dataset or "digits", args)
    estimators, pca, grids = {}, {}, {}
    for name in names:
        status = method_status(name)
        if status is not None:
            print(f"crossmetric: skipping {name}: not available ({status})", file=sys.stderr)
            continue
        estimators[METHODS[name].display] = cfg.make_estimator(name)
        if METHODS[name].pca_components is not None:
            pca[METHODS[name].display] = METHODS[name].pca_components
        which = "small" if args.tune is True else args.tune   # true in a config file
        grid = METHODS[name].search_grid(which) if which else None
        if grid:
            grids[METHODS[name].display] = grid
    if not estimators:
        raise CLIError("none of the requested methods is available.")
    _cap_components(estimators, dataset["X"], dataset.get("Y"))
    protocols = ("verification", "identification") if args.protocol == "both" else (
        args.protocol,)
    level = args.level or ("instance" if dataset.get("instance") is not None
                           and args.instance is not None else "labels")
    X = dataset["X"]
    Y = dataset.get("Y")
    dims = f"{X.shape[1]}" + ("" if Y is None else f" and {Y.shape[1]}")
    if lfw is not None:
        folds_text = (f"pairs.txt's {lfw.n_folds} folds" if lfw.n_folds > 1 else
                      f"{args.folds} random folds")
        print(f"crossmetric benchmark: {len(estimators)} method(s) on {description}, "
              f"{lfw.y.size} pairs over {X.shape[0]} images of {dims} features; {folds_text}",
              file=sys.stderr)
    else:
        print(f"crossmetric benchmark: {len(estimators)} method(s) on {description}, "
              f"{X.shape[0]} objects, {'views of ' if Y is not None else ''}{dims} features; "
              f"identity = {level}; {args.folds}-fold verification, {args.repeats} "
              "identification repeats", file=sys.stderr)
    t0 = time.perf_counter()
    dask = contextlib.ExitStack()
    if args.dask_scheduler is not None or args.dask_workers is not None:
        from crossmetric.cluster import dask_backend

        try:
            dask.enter_context(dask_backend(args.dask_scheduler, n_workers=(
                2 if args.dask_workers is None else args.dask_workers)))
        except (ValueError, OSError) as exc:
            raise CLIError(f"--dask-scheduler/--dask-workers: {_one_line(exc)}") from None
    try:
        if lfw is not None:
            protocols = ("verification",)
            result = run_pair_folds(
                estimators, X, pairs=lfw_pairs, y=lfw.y,
                folds=lfw.fold if lfw.n_folds > 1 else None, n_folds=args.folds,
                pca_components=pca, n_jobs=args.n_jobs, random_state=args.seed,
                progress=not args.quiet, on_error="record")
        else:
            result = run_protocols(
                estimators, dataset, protocols=protocols, n_folds=args.folds,
                n_repeats=args.repeats, n_negatives=args.n_negatives,
                max_train_positives=args.max_train_positives, level=level,
                pca_components=pca,
                n_jobs=args.n_jobs, random_state=args.seed, progress=not args.quiet,
                on_error="record", param_grids=grids or None, tune_folds=args.tune_folds,
                tune_scoring=args.tune_scoring)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    finally:
        dask.close()
    elapsed = time.perf_counter() - t0
    result.info.update(dataset=description, seconds=round(elapsed, 1), seed=args.seed)
    for meth, reason in result.skipped.items():
        print(f"crossmetric: skipped {meth}: {reason}", file=sys.stderr)
    for meth, msg in result.errors.items():
        print(f"crossmetric: {meth} failed: {_one_line(msg)}", file=sys.stderr)
    n_fits = result.info.get("n_folds", args.folds) * ("verification" in protocols) + \
        args.repeats * ("identification" in protocols)
    for meth, counts in result.warnings.items():
        what = ", ".join(f"{cat} in {k}/{n_fits} fits" for cat, k in counts.items())
        print(f"crossmetric: note: {meth}: {what}", file=sys.stderr)
    if not result.summary:
        print("crossmetric: error: no method produced results (see above); nothing written",
              file=sys.stderr)
        return 1
    # the table and its notes go to stdout, or to stderr when stdout carries the JSON
    text_out = sys.stderr if args.json else sys.stdout
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.table())
    if lfw is not None:
        print(f"\n{description}; mean ± std over {result.info['n_folds']} folds; "
              f"{elapsed:.1f} s", file=text_out)
    else:
        print(f"\n{description}; mean ± std over {args.folds} folds (verification) and "
              f"{args.repeats} repeats (identification); {elapsed:.1f} s", file=text_out)
    notes = [f"{m}: each view reduced by PCA to {k} dims" for m, k in
             result.info.get("pca", {}).items()]
    if any(m.endswith("-C") for m in result.methods):
        notes.append("-C: single-modal learner on CCA-processed views (CCA fitted on the "
                     "training pairs, 32 dims), as the CML-AUC paper's -C rows")
    for note in notes:
        print(f"  {note}", file=text_out)
    if result.info.get("tuned"):
        from crossmetric.model_selection import describe_choices

        print(f"\nhyper-parameters chosen by {args.tune_folds}-fold inner cross-validation on "
              f"each split's training objects (folds grouped by "
              f"{result.info['tuning']['group']}); most frequent value (splits):", file=text_out)
        for meth, runs in result.info["tuned"].items():
            print(f"  {meth}: {describe_choices([r['params'] for r in runs])}", file=text_out)
    out = args.out
    from crossmetric.persistence import atomic_folder

    rocs = {m: c["roc"] for m, c in result.curves.items() if "roc" in c}
    cmcs = {m: c["cmc"] for m, c in result.curves.items() if "cmc" in c}
    try:  # staged, then moved into --out under a lock: a killed run leaves the old files
        with atomic_folder(out, owned=_BENCHMARK_FILES) as stage:
            _write_benchmark_files(result, description, stage, rocs, cmcs)
            cfg.options["methods"] = names
            cfg.write(os.path.join(stage, "config.toml"),
                      methods=[n for n in names if METHODS[n].display in estimators])
    except OSError as exc:
        raise CLIError(f"--out: {_one_line(exc)}") from None
    print(f"wrote results.csv, results.json, results.md, results.tex"
          f"{', roc.png' if rocs else ''}{', cmc.png' if cmcs else ''}, config.toml to {out}",
          file=sys.stderr)
    return 0


#: every file a benchmark run writes into --out (one it does not write this time is removed)
_BENCHMARK_FILES = ("results.csv", "results.json", "results.md", "results.tex", "roc.png",
                    "cmc.png", "config.toml")


def _write_benchmark_files(result, description: str, out: str, rocs: dict, cmcs: dict) -> None:
    from crossmetric.plotting import plot_cmc, plot_roc

    result.to_csv(os.path.join(out, "results.csv"))
    result.to_json(os.path.join(out, "results.json"))
    with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(result.to_markdown() + "\n")
    with open(os.path.join(out, "results.tex"), "w", encoding="utf-8") as fh:
        fh.write(result.to_latex(caption=description) + "\n")
    auc = {m: result.value(m, "auc") for m in rocs}
    rank1 = {m: result.value(m, "rank1") for m in cmcs}
    if rocs:
        plot_roc(rocs, fpr_range=(0.0, 0.1), log_fpr=True, auc=auc,
                 title=f"ROC -- {description}", path=os.path.join(out, "roc.png"))
    if cmcs:
        plot_cmc(cmcs, rank1=rank1, title=f"CMC -- {description}",
                 path=os.path.join(out, "cmc.png"))


# ---------------------------------------------------------------------------------- fit
def _fit_pairs(args, est, X: np.ndarray, Y: np.ndarray | None):
    """Training pairs from --pairs, or drawn from --labels (make_pairs)."""
    if args.pairs is not None:
        pairs, y = _load_pairs(args.pairs)
        _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
        return pairs, y
    from crossmetric.pairs import make_pairs

    labels = _load_label_file(args.labels, "--labels", X.shape[0])
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise CLIError(f"--labels with --y needs row-aligned files: --x has {X.shape[0]} rows, "
                       f"--y {Y.shape[0]}.")
    cross = Y is not None or bool(getattr(est, "_cross_modal", True))
    try:
        return make_pairs(labels, labels if cross else None, n_negatives=args.n_negatives,
                          random_state=args.seed if args.seed is not None else 0)
    except ValueError as exc:
        raise CLIError(f"--labels: {_one_line(exc)}") from None


def cmd_fit(args) -> int:
    from crossmetric.registry import METHODS, _spec, make_estimator, method_status

    try:   # the registry's message, with its "did you mean"
        name = _spec(args.method).name
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    if (args.pairs is None) == (args.labels is None):
        raise CLIError("give exactly one of --pairs FILE (i,j,label rows) or --labels FILE "
                       "(one identity per row; pairs are drawn from it).")
    _check_int(args, "--n-negatives", 1)
    _check_int(args, "--seed", 0, 2**32 - 1)
    _check_output_file(args.out, "--out")
    _check_output_file(args.convergence, "--convergence", (".png",))
    status = method_status(name)
    if status is not None:
        raise CLIError(f"method {name!r} is not available: {status}.")
    params = _parse_params(name, args.param)
    if args.seed is not None:
        params.setdefault("random_state", args.seed)
    try:
        est = make_estimator(name, **params)
    except TypeError as exc:
        raise CLIError(f"--param: {_one_line(exc)}") from None
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images, key=args.key)
    Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
    pairs, y = _fit_pairs(args, est, X, Y)
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(pairs, y)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    elapsed = time.perf_counter() - t0
    for msg in dict.fromkeys(f"{w.category.__name__}: {_one_line(w.message)}" for w in caught):
        print(f"crossmetric: warning: {msg}", file=sys.stderr)
    train_auc = est.score(pairs, y)
    if args.convergence:
        curve = getattr(est, "loss_curve_", None)
        if curve is None or len(curve) == 0:
            print(f"crossmetric: {METHODS[name].display} is not iterative (no loss_curve_); "
                  "no convergence plot", file=sys.stderr)
        else:
            from crossmetric.plotting import plot_convergence

            plot_convergence({METHODS[name].display: curve}, path=args.convergence,
                             title=f"{METHODS[name].display} convergence")
    _save_model(args.out, est, name)
    print(f"fitted {METHODS[name].display} on {pairs.shape[0]} pairs in {elapsed:.2f} s "
          f"(training AUC {train_auc:.4f}); saved to {args.out}")
    return 0


# ----------------------------------------------------------------------------- evaluate
def _parse_ranks(text: str) -> tuple[int, ...]:
    try:
        ranks = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 1:
        raise CLIError(f"--ranks expects positive integers separated by commas (e.g. 1,5,10), "
                       f"got {text!r}.")
    return ranks


def _validate_evaluate(args) -> tuple[bool, bool]:
    ident = args.probe_labels is not None or args.gallery_labels is not None
    if ident and (args.probe_labels is None or args.gallery_labels is None):
        raise CLIError("identification needs both --probe-labels and --gallery-labels.")
    verif = args.pairs is not None
    if not verif and not ident:
        raise CLIError("evaluate needs --pairs FILE (verification) or --probe-labels and "
                       "--gallery-labels (identification: --x probes, --y gallery).")
    if args.scores is not None and verif and ident:
        raise CLIError("--scores writes the scores of one task: give it with --pairs or with "
                       "the identification labels, not both.")
    if not 0.0 < args.fpr < 1.0:
        raise CLIError(f"--fpr must be in (0, 1), got {args.fpr}.")
    _parse_ranks(args.ranks)
    _check_output_file(args.scores, "--scores", (".csv", ".npy"))
    if args.query_expansion is not None and args.query_expansion < 1:
        raise CLIError(f"--query-expansion must be >= 1, got {args.query_expansion}.")
    refine = args.re_rank or args.query_expansion is not None
    if not ident and (args.same_set or refine or args.show_ranks):
        raise CLIError("--same-set, --re-rank, --query-expansion and --show-ranks apply to "
                       "identification: give --probe-labels and --gallery-labels.")
    if args.show_ranks is not None:
        if args.show_ranks < 1:
            raise CLIError(f"--show-ranks must be >= 1, got {args.show_ranks}.")
        if args.top_k < 1:
            raise CLIError(f"--top-k must be >= 1, got {args.top_k}.")
        _check_output_file(args.ranks_out, "--ranks-out", (".html",))
    if args.scores is not None and verif and args.scores.lower().endswith(".npy"):
        raise CLIError("--scores: verification scores are written as .csv (i,j,label,"
                       "distance,score).")
    return verif, ident


def _identification(est, X: np.ndarray, G: np.ndarray, pl, gl, ranks, scores_path, *,
                    same_set: bool = False, re_rank: bool = False,
                    query_expansion: int | None = None):
    """CMC / rank-r / mAP of probes X against gallery G; blockwise when the model embeds
    in a squared-Euclidean space, else through the (chunked) cross_distance matrix.

    ``same_set``: the gallery is the probe set (row i = item i) and each probe's own item is
    left out of its ranking. ``re_rank`` / ``query_expansion``: the distances are refined
    first (:func:`crossmetric.reid.refine_distances`). Returns the report and the distance
    matrix (None on the blockwise path)."""
    from crossmetric import metrics as M

    max_rank = max(20, max(ranks))
    refine = re_rank or query_expansion is not None
    l2 = False
    try:
        from crossmetric._faiss_tools import uses_l2_score

        l2 = uses_l2_score(est) and scores_path is None and not refine
    except ImportError:
        pass
    D = None
    if l2:
        rep = M.identification_report(est.transform_x(X), est.transform_y(G), pl, gl,
                                      max_rank=max_rank, ranks=ranks, same_set=same_set)
    else:
        if refine:
            from crossmetric.reid import refine_distances

            D = refine_distances(est, X, G, re_rank=re_rank, query_expansion=query_expansion)
        else:
            D = est.cross_distance(X, G)
        if same_set:  # the probe's own item is left out (the metrics' same_set)
            curve = np.array([M.one_call_at_n(D, pl, gl, r, same_set=True)
                              for r in range(1, max_rank + 1)])
        else:
            curve = M.cmc(D, pl, gl, max_rank=max_rank)
        rep = {"cmc": curve}
        for r in ranks:
            rep[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
        rep["map"] = M.mean_average_precision(D, pl, gl, same_set=same_set)
        if not same_set:
            rep["nn_accuracy"] = M.nearest_neighbor_accuracy(D, pl, gl)
        if scores_path is not None:
            if scores_path.lower().endswith(".npy"):
                with atomic_open(scores_path, "wb") as fh:
                    np.save(fh, D)
            else:
                with atomic_open(scores_path, "w", encoding="utf-8") as fh:
                    fh.write("probe,gallery,same,distance\n")
                    for i in range(D.shape[0]):
                        same = (gl == pl[i]).astype(int)
                        fh.writelines(f"{i},{j},{same[j]},{D[i, j]:.8g}\n"
                                      for j in range(D.shape[1]))
    rep["cmc"] = np.asarray(rep["cmc"]).tolist()
    rep["n_probes"], rep["n_gallery"] = int(X.shape[0]), int(G.shape[0])
    rep["same_set"], rep["re_rank"] = bool(same_set), bool(re_rank)
    rep["query_expansion"] = query_expansion
    return rep, D


def _load_pictures(path: str, what: str) -> np.ndarray:
    """Pictures for --show-ranks: a .npy array (n, h, w) or (n, h, w, 1 | 3 | 4)."""
    if not path.lower().endswith(".npy") or not os.path.isfile(path):
        raise CLIError(f"{what}: expected an existing .npy file of images, got {path!r}.")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise CLIError(f"{what}: {path!r} could not be read as .npy ({_one_line(exc)}).") \
            from None
    if arr.dtype.kind not in "uif" or not (arr.ndim == 3 or (arr.ndim == 4 and
                                                             arr.shape[3] in (1, 3, 4))):
        raise CLIError(f"{what}: expected numeric images of shape (n, h, w) or (n, h, w, 3), "
                       f"got {arr.dtype} {arr.shape}.")
    return arr


def _show_ranks(args, est, X, G, pl, gl, D, images: bool) -> list[str]:
    """``--show-ranks N``: the rank lists of the first N probes as HTML (+ PNG beside)."""
    from crossmetric import plotting
    from crossmetric.ranklists import write_rank_html

    if images:
        q_img, g_img = X, G
    else:
        if args.probe_images is None:
            raise CLIError("--show-ranks: the model takes features, so give the pictures: "
                           "--probe-images FILE.npy (and --gallery-images unless the gallery "
                           "is the probe set).")
        q_img = _load_pictures(args.probe_images, "--probe-images")
        g_img = (_load_pictures(args.gallery_images, "--gallery-images")
                 if args.gallery_images else q_img)
    if len(q_img) != X.shape[0] or len(g_img) != G.shape[0]:
        raise CLIError(f"--show-ranks: {len(q_img)} probe and {len(g_img)} gallery images "
                       f"for {X.shape[0]} probes and {G.shape[0]} gallery rows.")
    n = min(args.show_ranks, X.shape[0])
    sel = np.arange(n)
    rows = np.array(D[:n], dtype=float) if D is not None else np.asarray(
        est.cross_distance(X[:n], G), dtype=float)
    k = args.top_k
    if args.same_set:  # own item after everything else, and never listed
        rows[sel, sel] = rows.max() + 1.0 + abs(rows.max())
        k = min(k, G.shape[0] - 1)
    html_path = args.ranks_out
    png_path = os.path.splitext(html_path)[0] + ".png"
    title = f"{os.path.basename(args.model)}: top {k} of the first {n} probes"
    write_rank_html(html_path, q_img[:n], g_img, rows, pl[:n], gl, k=k, n_queries=n,
                    title=title)
    plotting.plot_rank_lists(q_img[:n], g_img, rows, pl[:n], gl, k=k, n_queries=n,
                             title=title, path=png_path)
    return [html_path, png_path]


def cmd_evaluate(args) -> int:
    from crossmetric import metrics as M

    verif, ident = _validate_evaluate(args)
    ranks = _parse_ranks(args.ranks)
    est, method = _load_model(args.model, args.trust_pickle)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images, key=args.key)
    Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
    report: dict = {"method": method}
    if verif:
        pairs, y = _load_pairs(args.pairs)
        _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
        if not (y == 1).any() or not (y == -1).any():
            raise CLIError("--pairs: evaluation needs both +1 (same) and -1 (different) pairs.")
    if ident:
        G = Y if Y is not None else X
        if args.same_set and G.shape[0] != X.shape[0]:
            raise CLIError(f"--same-set: the gallery must be the probe set itself (row i = "
                           f"probe i), got {X.shape[0]} probes and {G.shape[0]} gallery rows.")
        pl = _load_label_file(args.probe_labels, "--probe-labels", X.shape[0])
        gl = _load_label_file(args.gallery_labels, "--gallery-labels", G.shape[0])
        if pl.dtype.kind != gl.dtype.kind:
            pl, gl = pl.astype(str), gl.astype(str)
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    try:
        if verif:
            d = est.pair_distance(pairs)
            rep = M.verification_report(y, -d, fpr=args.fpr)
            rep["accuracy_at_threshold"] = float(np.mean(np.where(d <= est.threshold_, 1, -1)
                                                         == y))
            rep["n_pairs"] = int(y.size)
            report.update(rep)
            if args.scores:
                with atomic_open(args.scores, "w", encoding="utf-8") as fh:
                    fh.write("i,j,label,distance,score\n")
                    fh.writelines(f"{int(a)},{int(b)},{int(lab)},{dist:.8g},{-dist:.8g}\n"
                                  for (a, b), lab, dist in zip(pairs, y, d, strict=True))
        if ident:
            report["identification"], D = _identification(
                est, X, G, pl, gl, ranks, args.scores, same_set=args.same_set,
                re_rank=args.re_rank, query_expansion=args.query_expansion)
            if args.show_ranks:
                report["rank_lists"] = _show_ranks(args, est, X, G, pl, gl, D, images)
    except ValueError as exc:  # --scores is written atomically: an older file stays intact
        raise CLIError(_one_line(exc)) from None
    if args.json:
        from crossmetric.persistence import json_ready

        print(json.dumps(json_ready(report), indent=1))
        return 0
    if verif:
        labels = {"auc": "ROC AUC", "one_minus_eer": "1 - EER",
                  "vr": f"VR@FPR={args.fpr:g}", "pauc": "pAUC [0, 0.1] (normalised)",
                  "acc_median": "accuracy at median distance",
                  "accuracy_at_threshold": "accuracy at the model's threshold",
                  "n_pairs": "pairs"}
        print(f"{method} on {args.pairs} (verification)")
        for key, label in labels.items():
            v = report[key]
            print(f"  {label:34s} {v if isinstance(v, int) else f'{v:.4f}'}")
    if ident:
        rep = report["identification"]
        print(f"{method}: {rep['n_probes']} probes against a gallery of {rep['n_gallery']} "
              "(identification)")
        for r in ranks:
            print(f"  {'rank-' + str(r):34s} {100 * rep[f'rank{r}']:.2f} %")
        print(f"  {'mAP':34s} {100 * rep['map']:.2f} %")
        if args.same_set or args.re_rank or args.query_expansion is not None:
            opts = [o for o, on in (("same set: own item left out", args.same_set),
                                    ("k-reciprocal re-ranking", args.re_rank),
                                    (f"query expansion k={args.query_expansion}",
                                     args.query_expansion is not None)) if on]
            print(f"  ({'; '.join(opts)})")
    if report.get("rank_lists"):
        print(f"wrote rank lists to {', '.join(report['rank_lists'])}", file=sys.stderr)
    if args.scores:
        print(f"wrote per-pair scores to {args.scores}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------- search
def _exhaustive_search(est, Q: np.ndarray, D: np.ndarray, k: int):
    from sklearn.utils import gen_batches

    k = min(k, D.shape[0])
    dist = np.empty((Q.shape[0], k))
    ids = np.empty((Q.shape[0], k), dtype=np.int64)
    rows = max(1, (1 << 22) // D.shape[0])
    for sl in gen_batches(Q.shape[0], rows):
        block = est.cross_distance(Q[sl], D)
        top = np.argpartition(block, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(block, top, axis=1), axis=1, kind="stable")
        ids[sl] = np.take_along_axis(top, order, axis=1)
        dist[sl] = np.take_along_axis(block, ids[sl], axis=1)
    return dist, ids


def cmd_search(args) -> int:
    if args.k < 1:
        raise CLIError(f"-k must be >= 1, got {args.k}.")
    _check_output_file(args.out, "--out", (".csv", ".npz"))
    est, method = _load_model(args.model, args.trust_pickle)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    D = _load_array(args.database, "--database", allow_images=images, key=args.key)
    Q = _load_array(args.queries, "--queries", allow_images=images, key=args.key)
    k = args.k
    if k > D.shape[0]:
        print(f"crossmetric: -k {k} is larger than the database ({D.shape[0]} rows); "
              f"returning all {D.shape[0]} rows per query", file=sys.stderr)
        k = D.shape[0]
    try:
        try:
            from crossmetric.retrieval import Index

            index = Index(est, kind=args.kind)
            index.add(D)
            dist, ids = index.search(Q, k)
        except ImportError as exc:
            print(f"crossmetric: no faiss ({_one_line(exc)}); exhaustive search with "
                  "cross_distance", file=sys.stderr)
            dist, ids = _exhaustive_search(est, Q, D, k)
        except ValueError as exc:
            if "cross_distance" not in str(exc):
                raise
            print(f"crossmetric: {method} has no l2 embedding; exhaustive search with "
                  "cross_distance", file=sys.stderr)
            dist, ids = _exhaustive_search(est, Q, D, k)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    if args.out:
        ext = os.path.splitext(args.out)[1].lower()
        if ext == ".npz":
            with atomic_open(args.out, "wb") as fh:
                np.savez(fh, ids=ids, distances=dist)
        else:
            _write_search_csv(args.out, ids, dist)
        print(f"wrote the {ids.shape[1]} nearest database rows of {ids.shape[0]} queries to "
              f"{args.out}", file=sys.stderr)
    elif args.json:
        print(json.dumps({"method": method, "k": int(ids.shape[1]), "results": [
            {"query": q, "ids": [int(i) for i in ids[q] if i >= 0],
             "distances": [float(d) for d, i in zip(dist[q], ids[q], strict=True) if i >= 0]}
            for q in range(ids.shape[0])]}, indent=1))
    else:
        _write_search_csv(None, ids, dist)
    return 0


def _write_search_csv(path: str | None, ids: np.ndarray, dist: np.ndarray) -> None:
    with (contextlib.nullcontext(sys.stdout) if path is None
          else atomic_open(path, "w", encoding="utf-8")) as fh:
        fh.write("query,rank,id,distance\n")
        for q in range(ids.shape[0]):
            fh.writelines(f"{q},{r + 1},{int(ids[q, r])},{float(dist[q, r]):.6g}\n"
                          for r in range(ids.shape[1]) if ids[q, r] >= 0)


# ------------------------------------------------------------------------------- parser
def _quiet_options(group, text: str) -> None:
    """``--quiet`` / ``-q``, the one spelling of every sub-command that shows progress (the
    older ``--no-progress`` is kept as a hidden alias)."""
    group.add_argument("--quiet", "-q", dest="quiet", action="store_true", default=None,
                       help=text)
    group.add_argument("--no-progress", dest="quiet", action="store_true", default=None,
                       help=argparse.SUPPRESS)


def _methods_epilog() -> str:
    from crossmetric.registry import METHODS

    lines = ["methods (settings: 'crossmetric benchmark --list'):"]
    for name, spec in METHODS.items():
        lines.append(f"  {name:10s} {spec.display:10s} {spec.note[:60]}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``crossmetric`` (sub-commands benchmark, fit, evaluate, search)."""
    p = _Parser(prog="crossmetric",
                description="Cross-modal and single-modal metric learning from pairs.")
    from crossmetric import __version__

    p.add_argument("--version", action="version", version=f"crossmetric {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    from crossmetric.config import BENCHMARK_OPTIONS as dflt

    raw = argparse.RawDescriptionHelpFormatter

    b = sub.add_parser("benchmark", help="compare methods under the papers' protocols",
                       formatter_class=raw,
                       description="Run methods under k-fold verification and repeated "
                                   "gallery/probe identification; print a table and write "
                                   "results.csv, results.json, results.md, results.tex, "
                                   "roc.png, cmc.png and config.toml (the resolved settings; "
                                   "give it back with --config to repeat the run).\n\nData "
                                   "(one source): --dataset NAME | "
                                   "--x FILE [--y FILE] --labels FILE [--instance FILE] | "
                                   "--images DIR --pattern REGEX | --lfw-pairs FILE --x FILE "
                                   "--image-list FILE.\n\nEvery option can also be set in a "
                                   "TOML file (--config): options in a [benchmark] table, "
                                   "learner parameters in [methods.NAME] tables; the command "
                                   "line wins over the file (crossmetric.config).",
                       epilog=_methods_epilog())
    # defaults are None here and filled by crossmetric.config.resolve_config, so that an
    # option given on the command line is told apart from the configuration file's
    d = b.add_argument_group("data")
    d.add_argument("--dataset", default=None,
                   help="'digits' (embedded, the default), 'mfeat:V1,V2' (e.g. mfeat:fou,pix), "
                        "'viper' or 'pku-sketch' (with --data-home)")
    d.add_argument("--data-home", default=None,
                   help="folder of the --dataset files (mfeat-*, VIPeR, PKU sketch)")
    d.add_argument("--x", default=None, metavar="FILE",
                   help="your features, one row per object: .npy, .npz (see --key), .csv or "
                        "whitespace-separated text (UCI layout)")
    d.add_argument("--y", default=None, metavar="FILE",
                   help="second modality, row r = the same object as row r of --x; leave out "
                        "for single-modal data")
    d.add_argument("--labels", default=None, metavar="FILE",
                   help="identity (class) of each row: one label per line, or .npy")
    d.add_argument("--instance", default=None, metavar="FILE",
                   help="object id of each row, for instance-level matching (implies "
                        "--level instance unless --level is given)")
    d.add_argument("--key", default=None, help="array name inside .npz feature files")
    d.add_argument("--images", default=None, metavar="DIR",
                   help="folder of images (loaded by crossmetric.datasets.load_image_folder)")
    d.add_argument("--pattern", default=None, metavar="REGEX",
                   help="regular expression on each image's path relative to --images, with "
                        "a named group 'id' and optionally 'domain' (two values = two "
                        "modalities)")
    d.add_argument("--descriptor", choices=_DESCRIPTORS, default=None,
                   help="image features: hog (default for --images, pku-sketch), strips "
                        "(colour + LBP strip histograms, default for viper) or pixels")
    d.add_argument("--size", default=None, metavar="WxH",
                   help="resize images to WIDTHxHEIGHT pixels (e.g. 48x128)")
    d.add_argument("--lfw-pairs", default=None, metavar="FILE",
                   help="LFW restricted protocol: pairs.txt (its folds are used), with --x "
                        "features and --image-list")
    d.add_argument("--image-list", default=None, metavar="FILE",
                   help="image name of each --x row (e.g. Aaron_Peirsol_0001.jpg), for "
                        "--lfw-pairs")
    r = b.add_argument_group("protocol")
    r.add_argument("--config", default=None, metavar="FILE",
                   help="TOML file of options ([benchmark]) and learner parameters "
                        "([methods.NAME]); e.g. a config.toml written by an earlier run")
    r.add_argument("--param", action="append", default=None, metavar="METHOD.NAME=VALUE",
                   help="a learner parameter, e.g. gsm.mu=1e-3 (repeatable; VALUE is a TOML "
                        "literal; wins over --config)")
    r.add_argument("--methods", default=None,
                   help="comma-separated method names, or 'all' (default: every method "
                        "except the papers' extra baselines itml, nca, lmnn, mcc, prdc; "
                        "see --list)")
    r.add_argument("--folds", type=int, default=None,
                   help=f"verification folds (default {dflt['folds'].default}, as LFW)")
    r.add_argument("--repeats", type=int, default=None,
                   help=f"identification repetitions (default {dflt['repeats'].default}, as "
                        "VIPeR / CUFSF)")
    r.add_argument("--protocol", choices=dflt["protocol"].choices, default=None,
                   help="which protocols to run (default both)")
    r.add_argument("--level", choices=dflt["level"].choices, default=None,
                   help="identity of a pair: the class label (default) or the object "
                        "(photo <-> sketch of the same image; needs instance ids)")
    r.add_argument("--n-negatives", type=int, default=None,
                   help="negative training pairs per positive (default "
                        f"{dflt['n_negatives'].default})")
    r.add_argument("--max-train-positives", type=int, default=None,
                   help="positive training pairs per split (default "
                        f"{dflt['max_train_positives'].default})")
    r.add_argument("--n-jobs", type=int, default=None,
                   help="parallel workers (default -1: all cores; Python's run_protocols "
                        "defaults to one process)")
    r.add_argument("--dask-scheduler", metavar="ADDRESS", default=None,
                   help="run the splits on an existing Dask cluster (tcp://host:8786)")
    r.add_argument("--dask-workers", type=int, default=None, metavar="N",
                   help="run the splits on a local Dask cluster of N worker processes")
    r.add_argument("--seed", type=int, default=None,
                   help=f"random seed of splits, pairs and learners (default "
                        f"{dflt['seed'].default})")
    o = b.add_argument_group("output")
    o.add_argument("--out", default=None,
                   help="output folder, created when there are results (default "
                        "./crossmetric-results)")
    _quiet_options(o, "hide the progress bar")
    o.add_argument("--json", action="store_true", default=None,
                   help="print the results as JSON (results.json's content) instead of the "
                        "table")
    o.add_argument("--list", action="store_true",
                   help="list the methods (single- or cross-modal) and their settings")
    r.add_argument("--tune", nargs="?", const="small", choices=("small", "paper"), default=None,
                   help="choose each method's hyper-parameters by inner cross-validation on "
                        "every split's training objects (folds grouped by identity): from its "
                        "small registry grid (--tune), or from the selection its paper "
                        "describes (--tune paper, searched stage by stage; recommended on real "
                        "data); costs (grid size x tune folds + 1) fits per split, so it is "
                        "off by default")
    r.add_argument("--tune-scoring", choices=("auc", "rank1", "map"), default=None,
                   help="validation measure of --tune: pair AUC (default), or rank-1 / mAP "
                        "of the validation identities (identification)")
    r.add_argument("--tune-folds", type=int, default=None,
                   help="inner cross-validation folds of --tune (default 3)")
    b.set_defaults(func=cmd_benchmark)

    f = sub.add_parser("fit", help="fit a method on labelled pairs and save the model",
                       formatter_class=raw, epilog=_methods_epilog(),
                       description="Fit METHOD on your data and save it. Training "
                                   "pairs come from --pairs (rows i,j,label) or are drawn "
                                   "from --labels.")
    f.add_argument("method", help="method name (listed below)")
    f.add_argument("--x", required=True,
                   help="first-modality samples (.npy/.npz/.csv/whitespace text)")
    f.add_argument("--y", default=None, help="second-modality samples (cross-modal)")
    f.add_argument("--key", default=None, help="array name inside .npz feature files")
    f.add_argument("--pairs", default=None, help=".csv with rows i,j,label (+1/-1)")
    f.add_argument("--labels", default=None,
                   help="instead of --pairs: identity of each row (pairs drawn as in the "
                        "papers: all positives, --n-negatives negatives each)")
    f.add_argument("--n-negatives", type=int, default=1,
                   help="negatives per positive with --labels (default 1)")
    f.add_argument("--out", required=True, help="model file to write (crossmetric's "
                   "safe .npz format: loading it runs no code)")
    f.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a constructor argument (repeatable)")
    f.add_argument("--seed", type=int, default=None, help="random_state of the learner")
    f.add_argument("--convergence", default=None, metavar="PNG",
                   help="also plot the objective per iteration (loss_curve_) to this file")
    f.set_defaults(func=cmd_fit)

    e = sub.add_parser("evaluate", help="verification / identification measures of a model",
                       description="Verification (--pairs: AUC, EER, VR, pAUC) and/or "
                                   "identification (--probe-labels/--gallery-labels: CMC, "
                                   "rank-r, mAP; --x = probes, --y = gallery) of a saved "
                                   "model.")
    e.add_argument("model", help="model file written by 'crossmetric fit'")
    e.add_argument("--trust-pickle", action="store_true",
                   help="also read a pickle/joblib model of an older crossmetric (UNSAFE: "
                        "it runs the file's code; only for files you trust)")
    e.add_argument("--x", required=True, help="first-modality samples (probes)")
    e.add_argument("--y", default=None, help="second-modality samples (gallery)")
    e.add_argument("--key", default=None, help="array name inside .npz feature files")
    e.add_argument("--pairs", default=None, help="verification pairs: .csv rows i,j,label")
    e.add_argument("--probe-labels", default=None,
                   help="identity of each --x row (identification)")
    e.add_argument("--gallery-labels", default=None,
                   help="identity of each --y row (identification)")
    e.add_argument("--ranks", default="1,5,10,20",
                   help="ranks r reported as rank-r rates (default 1,5,10,20)")
    e.add_argument("--fpr", type=float, default=1e-3, help="VR operating point (default 1e-3)")
    e.add_argument("--scores", default=None, metavar="FILE",
                   help="write per-pair scores: .csv (i,j,label,distance,score for --pairs; "
                        "probe,gallery,same,distance for identification) or .npy "
                        "(identification distance matrix)")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.add_argument("--same-set", action="store_true",
                   help="the gallery is the probe set (--y absent or the same rows): each "
                        "probe's own item is left out of its ranking")
    e.add_argument("--re-rank", action="store_true",
                   help="k-reciprocal re-ranking of the distances (Zhong et al. 2017; k1=20, "
                        "k2=6, lambda=0.3)")
    e.add_argument("--query-expansion", type=int, default=None, metavar="K",
                   help="average query expansion with the K nearest gallery items")
    e.add_argument("--show-ranks", type=int, default=None, metavar="N",
                   help="write the rank lists of the first N probes: HTML page (--ranks-out) "
                        "and a PNG beside it")
    e.add_argument("--top-k", type=int, default=10,
                   help="gallery items per rank list (default 10)")
    e.add_argument("--ranks-out", default="crossmetric-ranks.html", metavar="FILE.html",
                   help="rank-list page (default crossmetric-ranks.html)")
    e.add_argument("--probe-images", default=None, metavar="FILE.npy",
                   help="pictures of the probes for --show-ranks ((n, h, w[, 3]) array) when "
                        "the model takes features")
    e.add_argument("--gallery-images", default=None, metavar="FILE.npy",
                   help="pictures of the gallery for --show-ranks")
    e.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("search", help="k nearest database rows of each query",
                       description="The k nearest database rows of each query in the learned "
                                   "metric (faiss when installed, else exhaustive).")
    s.add_argument("model", help="model file written by 'crossmetric fit'")
    s.add_argument("--trust-pickle", action="store_true",
                   help="also read a pickle/joblib model of an older crossmetric (UNSAFE: "
                        "it runs the file's code; only for files you trust)")
    s.add_argument("--database", required=True, help="database rows (second modality)")
    s.add_argument("--queries", required=True, help="queries (first modality)")
    s.add_argument("--key", default=None, help="array name inside .npz feature files")
    s.add_argument("-k", type=int, default=10,
                   help="neighbours per query (default 10; at most the database size)")
    s.add_argument("--kind", choices=("flat", "ivf", "ivfpq", "gmm"), default="flat",
                   help="faiss index: flat (exact, default), ivf, ivfpq, gmm")
    s.add_argument("--out", default=None, help="write .csv or .npz instead of stdout")
    s.add_argument("--json", action="store_true",
                   help="print the results as JSON (one object per query) instead of CSV")
    s.set_defaults(func=cmd_search)

    r = sub.add_parser("reproduce", help="re-run a paper's experiment on its data and print "
                                         "the published numbers beside ours",
                       description="Named reproductions (see --list): our numbers, the "
                                   "paper's and the difference; writes results.csv, "
                                   "results.json and the figure into --out.")
    r.add_argument("name", nargs="?", help="reproduction name (see --list)")
    r.add_argument("--list", action="store_true", help="list the reproductions")
    r.add_argument("--data-home", default=None,
                   help="folder holding viper/ and pku_sketch/ (default: ../shared/data "
                        "relative to the current directory, if present)")
    r.add_argument("--splits", type=int, default=None,
                   help="random splits (default: the paper's, 10)")
    r.add_argument("--seed", type=int, default=0, help="random seed of the splits (default 0)")
    r.add_argument("--out", default=None,
                   help="output folder (default ./crossmetric-reproduce/NAME)")
    r.add_argument("--n-jobs", type=int, default=-1,
                   help="parallel workers over the splits (default: all cores)")
    _quiet_options(r, "no progress lines")
    r.add_argument("--json", action="store_true",
                   help="print the results as JSON (rows of ours / paper / diff) instead of "
                        "the table")
    r.add_argument("--methods", default=None,
                   help="comma list of the methods to run (pku-sketch only; "
                        "pku-sketch: some of euclidean,euclidean-desc,cca,kcca,pcca,cmml,"
                        "cmlauc,cmlpauc,gsm,clml,deepgsm, default all)")
    r.add_argument("--setting", default=None, choices=("paper", "legacy"),
                   help="pku-sketch: 'paper' (default) selects every method's paper grid on "
                        "the training persons; 'legacy' the reproduction before issue 20 "
                        "(HOG, registry defaults)")
    r.add_argument("--descriptor", default=None,
                   help="pku-sketch: hog, dense-sift, lbp, ltp, patch-color-sift or hog+ltp "
                        "(default: the setting's)")
    r.add_argument("--deepgsm-members", type=int, default=None,
                   help="pku-sketch: DeepGSM seeds averaged (default 2; 1: the single model "
                        "only, half the time)")
    r.add_argument("--show-ranks", type=int, default=None, metavar="N",
                   help="pku-sketch: write the first split's rank lists of N sketches "
                        "(ranks.html, ranks_<method>.png in --out)")
    r.set_defaults(func=cmd_reproduce)

    t = sub.add_parser("features", help="embed a folder of images with a backbone (weights "
                                        "from a file) for the shallow learners",
                       description="Pooled features of a torchvision (or timm) architecture, "
                                   "randomly initialised or loaded from a local state-dict "
                                   "file (never downloaded), written to an .npz file whose "
                                   "array X the other commands read (--x emb.npz), with ids, "
                                   "domains and filenames (crossmetric.deep.backbones).")
    t.add_argument("--backbone", required=True, metavar="NAME",
                   help="architecture name, e.g. resnet18, efficientnet_b0, vit_b_16")
    t.add_argument("--weights", default=None, metavar="FILE",
                   help="state dict of that architecture (torch.save(model.state_dict(), "
                        "FILE)); default: random initialisation from --seed")
    t.add_argument("--images", required=True, metavar="DIR", help="folder of images")
    t.add_argument("--pattern", default=None, metavar="REGEX",
                   help="regular expression on each image's path relative to --images, with "
                        "a named group 'id' and optionally 'domain' (default: every image "
                        "file, id = its path without the extension)")
    t.add_argument("--size", default=None, metavar="WxH",
                   help="resize images to WIDTHxHEIGHT pixels (needed when sizes differ)")
    t.add_argument("--normalize", choices=("imagenet", "none"), default="none",
                   help="standardise inputs with ImageNet's channel statistics, as "
                        "ImageNet-trained weights expect (default none)")
    t.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    t.add_argument("--device", default="cpu", help="torch device (default cpu)")
    t.add_argument("--seed", type=int, default=0, help="seed of a random initialisation")
    t.add_argument("--out", required=True, metavar="FILE.npz", help="embeddings file to write")
    t.set_defaults(func=cmd_features)
    return p


#: ``crossmetric features`` without --pattern: every image file, id = path without extension
_ANY_IMAGE = r"(?i)(?P<id>.+)\.(?:png|jpe?g|bmp|gif|tiff?|webp|ppm|pgm)"


def cmd_features(args) -> int:
    """``crossmetric features``: embeddings of an image folder, written to an .npz file."""
    from crossmetric import datasets

    _check_output_file(args.out, "--out", (".npz",))
    _check_int(args, "--batch-size", 1)
    size = _parse_size(args.size)
    try:
        from crossmetric.deep.backbones import build_backbone, extract_features, write_embeddings
    except ImportError as exc:
        raise CLIError(f"features needs PyTorch (pip install 'crossmetric[deep]'): "
                       f"{_one_line(exc)}") from None
    try:
        bunch = datasets.load_image_folder(args.images, args.pattern or _ANY_IMAGE, size=size)
    except (ValueError, OSError) as exc:
        raise CLIError(f"--images: {_one_line(exc)}") from None
    module = build_backbone(args.backbone, args.weights, random_state=args.seed,
                            normalize=None if args.normalize == "none" else args.normalize)
    X = extract_features(module, bunch.images, batch_size=args.batch_size, device=args.device)
    write_embeddings(args.out, X, ids=bunch.ids, domains=bunch.domains,
                     filenames=bunch.filenames)
    print(f"crossmetric features: {X.shape[0]} images -> {X.shape[1]} features "
          f"({args.backbone}{', ' + os.path.basename(args.weights) if args.weights else ''}); "
          f"wrote {args.out}", file=sys.stderr)
    return 0


def cmd_reproduce(args) -> int:
    """``crossmetric reproduce NAME``: run a named reproduction, print and write its table."""
    from crossmetric.reproduce import list_reproductions, run_reproduction

    if args.list:
        for name, desc in list_reproductions().items():
            print(f"{name:<24} {desc}")
        return 0
    if not args.name:
        raise CLIError("reproduce: give a reproduction NAME or --list")
    if args.name not in list_reproductions():
        raise CLIError(f"reproduce: unknown reproduction {args.name!r}; expected one of "
                       f"{', '.join(list_reproductions())}")
    if args.data_home is not None and not os.path.isdir(args.data_home):
        raise CLIError(f"--data-home: {args.data_home!r} is not a directory")
    if args.splits is not None and args.splits < 1:
        raise CLIError(f"--splits must be >= 1, got {args.splits}")
    methods = None
    if args.methods is not None:
        methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
        if not methods:
            raise CLIError("--methods must name at least one method")
        if args.name != "pku-sketch":
            raise CLIError(f"--methods: the reproduction {args.name!r} runs a fixed set of "
                           "methods; only pku-sketch takes --methods")
        from crossmetric.reproduce import PKU_METHODS

        unknown = sorted(set(methods) - set(PKU_METHODS))
        if unknown:
            raise CLIError(f"--methods: unknown {', '.join(unknown)}; expected some of "
                           f"{', '.join(PKU_METHODS)}")
    extra = {}
    if args.deepgsm_members is not None:
        if args.name != "pku-sketch":
            raise CLIError("--deepgsm-members: only pku-sketch trains DeepGSM")
        extra["deepgsm_members"] = args.deepgsm_members
    if args.show_ranks is not None:
        if args.name != "pku-sketch":
            raise CLIError("--show-ranks: only pku-sketch draws rank lists (it keeps the "
                           "images of its test persons)")
        if args.show_ranks < 1:
            raise CLIError(f"--show-ranks must be >= 1, got {args.show_ranks}")
        extra["show_ranks"] = args.show_ranks
    for opt in ("setting", "descriptor"):
        if getattr(args, opt) is not None:
            if args.name != "pku-sketch":
                raise CLIError(f"--{opt}: only pku-sketch takes it")
            extra[opt] = getattr(args, opt)
    if args.descriptor is not None:
        from crossmetric.reproduce import PKU_DESCRIPTORS

        if args.descriptor not in PKU_DESCRIPTORS:
            raise CLIError(f"--descriptor: unknown {args.descriptor!r}; expected one of "
                           f"{', '.join(PKU_DESCRIPTORS)}")
    out = args.out or os.path.join("crossmetric-reproduce", args.name)
    result = run_reproduction(args.name, args.data_home, n_splits=args.splits, out=out,
                              seed=args.seed, verbose=not args.quiet, n_jobs=args.n_jobs,
                              methods=methods, **extra)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.table())
    print(f"({result.seconds:.1f} s; wrote {', '.join(result.files)})",
          file=sys.stderr if args.json else sys.stdout)
    return 0


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``with`` block unwinds (temporary files are
    removed, a Dask cluster is closed) before the process ends."""


@contextlib.contextmanager
def _sigterm_unwinds():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 failure)."""
    parser = build_parser()
    debug = bool(os.environ.get("CROSSMETRIC_DEBUG"))
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        with _sigterm_unwinds():
            return int(args.func(args))
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except BrokenPipeError:
        # the reader went away (``crossmetric search ... | head``): end quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except CLIError as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_Terminated): nothing half-written
        term = isinstance(exc, _Terminated)
        print(f"crossmetric: {'terminated' if term else 'interrupted'}", file=sys.stderr)
        return 143 if term else 130
    except Exception as exc:  # a bug, not bad input: still one line unless debugging
        if debug:
            raise
        print(f"crossmetric: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(set CROSSMETRIC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
