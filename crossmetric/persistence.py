"""Files crossmetric writes and reads: a format that cannot run code, and atomic writes.

This module holds the file format of fitted models and retrieval indexes, and is the public
import path of the atomic-write helpers that every writer of the package uses (the CLI,
:mod:`crossmetric.retrieval`, the result writers of :mod:`crossmetric.protocols` and
:mod:`crossmetric.reproduce`, DeepGSM checkpoints), which live in
:mod:`crossmetric._utils.atomic_io`.

The model format
----------------
A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) read with
``np.load(..., allow_pickle=False)``. Its array ``__header__`` holds UTF-8 JSON::

    {"format": "crossmetric-model", "format_version": 3, "crossmetric_version": "...",
     "kind": "model", "class": "crossmetric.learners.pcca.PCCA", "params": {...},
     "attributes": {"components_": "ndarray", ...}, "meta": {...}, "tree": {...}}

``tree`` describes the object: JSON scalars as themselves, and tagged objects for the rest
(``{"$tuple": [...]}``, ``{"$dict": {...}}``, ``{"$array": "a3"}`` naming an array of the
archive, ``{"$tensor": ...}`` for PyTorch tensors, ``{"$object":
"crossmetric.learners.pcca.PCCA", "state": {...}}`` for an estimator). An object is rebuilt
only when its class is in :data:`ALLOWED_CLASSES` -- the crossmetric learners and the few
scikit-learn estimators they hold (PCA, PLSCanonical, GaussianMixture, ...) -- by
``cls.__new__`` and its ``__setstate__`` with the decoded state, which is made only of
numbers, strings, arrays and other allowed objects. Nothing in the file names a function to
call, so nothing from it runs: a class or tag outside the list, an array of Python objects
(refused by ``allow_pickle=False``) or a file that is not such an archive is refused with a
one-line ``ValueError`` naming the file.

Why not pickle / joblib: unpickling calls whatever the file names (``os.system`` included).
Why not skops.io: it is not a dependency of crossmetric, its trusted-type lists would have to
cover PyTorch tensors and RandomState objects anyway, and a format of ~200 lines that the test
suite checks against every learner is easier to audit than a general one. DeepGSM networks are
stored as their state dict (tensors as arrays); the network is rebuilt from the estimator's
parameters, as ``DeepGSM.__setstate__`` does for pickles.

Class paths and versions: a file names each class by the path it is defined under, with its
private parts dropped (``crossmetric.learners.baselines._latent.CCA`` is written as
``crossmetric.learners.baselines.CCA``). Format 3 differs from format 2 only in these paths:
format 2 files, written before the learners moved into ``crossmetric/learners/``, name the old
paths (``crossmetric.pcca.PCCA``, ``crossmetric.baselines.CCA``); they are still read, each old
path translated to the new one by :data:`FORMAT2_MODULES` before it is checked against
:data:`ALLOWED_CLASSES`. The version was raised so that a crossmetric from before the
move, given a new file, says "upgrade crossmetric" rather than refusing an unknown class.

Pickle and joblib files written by crossmetric before this format are refused, with a message
that says how to convert a file you trust: ``load_model(path, allow_pickle=True)`` (UNSAFE: it
runs the file's code) or ``python -m crossmetric.persistence OLD NEW --trust-pickle``. Such
pickles name the module paths from before ``crossmetric/learners/`` (``crossmetric.pcca``,
``crossmetric.baselines._latent``): while such a file is read, and only then, these paths are
answered by the modules of :data:`FORMAT2_MODULES`.

Atomic writes
-------------
:func:`atomic_path`, :func:`atomic_open` and :func:`atomic_folder` (defined in
:mod:`crossmetric._utils.atomic_io`, imported from here) write to a temporary file or folder beside
the destination and move it into place only once it is complete: a stopped run leaves the
previous files intact.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
import zipfile
from typing import Any

import numpy as np

from crossmetric._utils.array_files import ArrayFileError, check_array_file
from crossmetric._utils.atomic_io import (
    atomic_folder,
    atomic_open,
    atomic_path,
    json_ready,
    write_error,
)

__all__ = ["FORMAT", "FORMAT_VERSION", "ALLOWED_CLASSES", "save_model", "load_model",
           "check_model_state", "save_object", "load_object", "atomic_path", "atomic_open",
           "atomic_folder", "write_error", "json_ready"]

FORMAT = "crossmetric-model"
#: version 1 was the joblib pickle of crossmetric <= 0.x; 2 is the ``.npz`` + JSON format; 3 is
#: format 2 naming the learners by their paths under ``crossmetric.learners`` (2 is still read)
FORMAT_VERSION = 3
_OLDEST_READ = 2

#: module paths of format 2 files and of older pickles -> the paths of those modules since
#: format 3 (a submodule follows its package: crossmetric.baselines._latent -> ...)
FORMAT2_MODULES = {
    "crossmetric.pcca": "crossmetric.learners.pcca",
    "crossmetric.cmml": "crossmetric.learners.cmml",
    "crossmetric.ldml": "crossmetric.learners.ldml",
    "crossmetric.auc": "crossmetric.learners.auc",
    "crossmetric.clml": "crossmetric.learners.clml",
    "crossmetric._local_metrics": "crossmetric.learners._local_metrics",
    "crossmetric.gsm": "crossmetric.learners.gsm",
    "crossmetric._gsm_training": "crossmetric.learners._gsm_training",
    "crossmetric._gsm_measure": "crossmetric.learners._gsm_measure",
    "crossmetric.baselines": "crossmetric.learners.baselines",
    "crossmetric.discriminant": "crossmetric.learners.discriminant",
    "crossmetric.dml_eig": "crossmetric.learners.dml_eig",
    "crossmetric.itml": "crossmetric.learners.itml",
    "crossmetric.neighbours": "crossmetric.learners.neighbours",
    "crossmetric.prdc": "crossmetric.learners.prdc",
    "crossmetric.multiview": "crossmetric.learners.multiview",
    "crossmetric.supervised": "crossmetric.learners.supervised",
    "crossmetric.ensemble": "crossmetric.learners.ensemble",
    "crossmetric._dense_sift": "crossmetric.features._dense_sift",
    "crossmetric._local_patterns": "crossmetric.features._local_patterns",
    "crossmetric._patch_color_sift": "crossmetric.features._patch_color_sift",
    "crossmetric._stochastic": "crossmetric._solvers.stochastic",
    "crossmetric._early_stopping": "crossmetric._solvers.early_stopping",
}


def current_path(name: str) -> str:
    """The path of ``name`` (a module, or ``module.QualName``) since format 3.

    Examples
    --------
    >>> current_path("crossmetric.baselines._latent.CCA")
    'crossmetric.learners.baselines._latent.CCA'
    >>> current_path("crossmetric.pairs")
    'crossmetric.pairs'
    """
    head = name
    while head:
        new = FORMAT2_MODULES.get(head)
        if new is not None:
            return new + name[len(head):]
        head = head.rpartition(".")[0]
    return name

#: the classes a model or index file may rebuild beside the public estimators: their nested
#: crossmetric parts, and the scikit-learn estimators fitted learners hold (by their public
#: import paths)
_PART_CLASSES = frozenset({
    "crossmetric.kernels.KernelMap", "crossmetric.kernels.HellingerMap",
    "crossmetric.kernels.KernelCoordinates", "crossmetric.kernels.NystroemMap",
    "crossmetric.retrieval.Index",
    # a learner with its view step and input statistics (crossmetric fit)
    "crossmetric.protocols.pipeline.ViewPipeline", "crossmetric.protocols.views.ViewReduction",
    "crossmetric.protocols.views.CCAProjection",
    # scikit-learn estimators held by fitted learners, by their public import paths
    "sklearn.decomposition.PCA", "sklearn.preprocessing.StandardScaler",
    "sklearn.cross_decomposition.PLSCanonical", "sklearn.cross_decomposition.CCA",
    "sklearn.mixture.GaussianMixture", "sklearn.neighbors.NeighborhoodComponentsAnalysis",
    "sklearn.kernel_approximation.Nystroem",
})


def _allowed_classes() -> frozenset:
    """Every class a model or index file may rebuild ("module.QualName"); nothing else is
    imported: the public estimators of :func:`crossmetric.registry.public_classes` (files of
    format 2 name them by the paths from before crossmetric/learners/, read through
    :func:`current_path`), :data:`_PART_CLASSES` and the image descriptors."""
    from crossmetric.registry import public_classes

    return (_PART_CLASSES | _descriptor_classes()
            | {f"{module}.{name}" for name, module in public_classes().items()})


def _descriptor_classes() -> set:
    """The image descriptors of :data:`crossmetric.datasets.DESCRIPTORS` (a DeepGSM's
    ``descriptor``), by the paths a file names them."""
    from crossmetric.features._image_views import DESCRIPTORS, _descriptor_class

    return {_public_name(_descriptor_class(name)) for name in DESCRIPTORS}


#: the value of :func:`_allowed_classes`, derived from the registry whenever it is read
ALLOWED_CLASSES: frozenset


def __getattr__(name: str):
    if name == "ALLOWED_CLASSES":  # derived from the registry on first use
        return _allowed_classes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _public_name(cls: type) -> str:
    """``module.QualName`` of a class by its public import path.

    scikit-learn defines its estimators in private modules and exports them from the public
    package (PCA from ``sklearn.decomposition``): the public path is the only one a file names,
    and the only one :func:`load_model` imports."""
    public = ".".join(p for p in cls.__module__.split(".") if not p.startswith("_"))
    if public != cls.__module__:
        module = sys.modules.get(public) or importlib.import_module(public)
        if getattr(module, cls.__qualname__, None) is cls:
            return f"{public}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"

_HEADER = "__header__"
_ZIP_MAGIC = b"PK\x03\x04"


# ----------------------------------------------------------------------------- encoding
class _Encoder:
    """Python value -> JSON tree + named arrays; refuses anything it cannot rebuild."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def _array(self, arr: np.ndarray, where: str) -> str:
        if arr.dtype.hasobject or arr.dtype.kind not in "biufcUSM" or arr.dtype.names:
            raise ValueError(f"{where}: arrays of dtype {arr.dtype} cannot be saved.")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return key

    def encode(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and type(v) is int:
            return v
        if type(v) is float:
            return v if np.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.ndarray):
            return {"$array": self._array(v, where)}
        if isinstance(v, np.generic):
            return {"$scalar": self._array(np.asarray(v), where)}
        if isinstance(v, tuple) and type(v) is tuple:
            return {"$tuple": [self.encode(e, f"{where}[{i}]") for i, e in enumerate(v)]}
        if type(v) is list:
            return [self.encode(e, f"{where}[{i}]") for i, e in enumerate(v)]
        if isinstance(v, dict) and type(v).__name__ in ("dict", "OrderedDict"):
            if all(type(k) is str for k in v):
                return {"$dict": {k: self.encode(e, f"{where}[{k!r}]") for k, e in v.items()}}
            return {"$items": [[self.encode(k, f"{where} key"), self.encode(e, f"{where}[{k!r}]")]
                               for k, e in v.items()]}
        if isinstance(v, np.random.RandomState):
            return {"$randomstate": self.encode(v.get_state(), where)}
        if isinstance(v, np.dtype):
            return {"$dtype": v.str}
        if isinstance(v, type) and issubclass(v, np.generic) and v is not np.object_:
            return {"$scalartype": np.dtype(v).str}   # a dtype given as its type (np.float64)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(v, torch.Tensor):
            t = v.detach().cpu()
            if t.dtype == torch.bfloat16:
                raise ValueError(f"{where}: bfloat16 tensors cannot be saved.")
            return {"$tensor": self._array(t.numpy().copy(), where)}
        if torch is not None and isinstance(v, torch.device):
            return {"$device": str(v)}
        cls = type(v)
        qual = _public_name(cls)
        if qual not in _allowed_classes():
            raise ValueError(f"{where}: objects of type {qual} cannot be saved (not a "
                             "crossmetric estimator or a known nested type).")
        state = v.__getstate__() if hasattr(v, "__getstate__") else vars(v)
        if not isinstance(state, dict):
            raise ValueError(f"{where}: the state of {qual} is not a dictionary.")
        return {"$object": qual, "state": self.encode(state, where)}


class _Decoder:
    def __init__(self, path: str, arrays):
        self.path, self.arrays = path, arrays

    def _fail(self, what: str):
        raise ValueError(f"{self.path}: not a valid crossmetric file ({what}); nothing from it "
                         "was run.")

    def _array(self, key, header: bool = False):
        if not isinstance(key, str) or (key == _HEADER) != header \
                or key not in self.arrays.files:
            self._fail(f"unknown array {key!r}")
        try:
            return self.arrays[key]
        except Exception as exc:  # an object array (allow_pickle=False), truncated, CRC error
            if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
                self._fail(f"array {key!r} holds Python objects")
            self._fail(f"array {key!r} is unreadable: {type(exc).__name__}: "
                       f"{' '.join(str(exc).split())[:120]}")

    def decode(self, v):
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if isinstance(v, list):
            return [self.decode(e) for e in v]
        if not isinstance(v, dict) or len(v) not in (1, 2):
            self._fail(f"unexpected JSON value of type {type(v).__name__}")
        tag = next(iter(v))
        body = v[tag]
        if tag == "$tuple" and isinstance(body, list):
            return tuple(self.decode(e) for e in body)
        if tag == "$dict" and isinstance(body, dict):
            return {k: self.decode(e) for k, e in body.items()}
        if tag == "$items" and isinstance(body, list):
            return {self._hashable(self.decode(k)): self.decode(e) for k, e in body}
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "$array":
            return self._array(body)
        if tag == "$scalar":
            arr = self._array(body)
            if arr.ndim != 0:
                self._fail(f"scalar {body!r} has shape {arr.shape}")
            return arr[()]
        if tag in ("$dtype", "$scalartype") and isinstance(body, str):
            try:
                dt = np.dtype(body)
            except TypeError:
                self._fail(f"unknown dtype {body!r}")
            if dt.hasobject:
                self._fail(f"object dtype {body!r}")
            return dt if tag == "$dtype" else dt.type
        if tag == "$randomstate":
            rs = np.random.RandomState()
            try:
                rs.set_state(self.decode(body))
            except (TypeError, ValueError) as exc:
                self._fail(f"bad RandomState: {exc}")
            return rs
        if tag == "$tensor":
            import torch

            return torch.from_numpy(np.array(self._array(body)))
        if tag == "$device" and isinstance(body, str):
            import torch

            return torch.device(body)
        if tag == "$object" and len(v) == 2 and isinstance(v.get("state"), dict):
            return self._object(body, v["state"])
        self._fail(f"unexpected entry {tag!r}")

    @staticmethod
    def _hashable(k):
        return k if not isinstance(k, list) else tuple(k)

    def _object(self, qual, state):
        if isinstance(qual, str):
            qual = current_path(qual)  # crossmetric.pcca.PCCA -> crossmetric.learners.pcca.PCCA
        if not isinstance(qual, str) or qual not in _allowed_classes():
            self._fail(f"class {qual!r} is not one crossmetric loads")
        module, _, name = qual.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        state = self.decode(state)
        if not isinstance(state, dict):
            self._fail(f"state of {qual} is not a dictionary")
        obj = cls.__new__(cls)
        if hasattr(obj, "__setstate__"):
            obj.__setstate__(state)
        else:  # pragma: no cover - every allowed class has __setstate__ (object's default)
            obj.__dict__.update(state)
        return obj


# ---------------------------------------------------------------------------- save / load
def _type_name(v) -> str:
    return type(v).__name__


def save_object(path: str | os.PathLike[str], obj: Any, *, kind: str = "model",
                meta: dict | None = None) -> None:
    """Write ``obj`` (an allowed estimator or index) to ``path`` atomically in the safe format.

    Raises ``ValueError`` naming the attribute when ``obj`` holds something the format cannot
    describe (e.g. a lambda, or a PyTorch module given as a parameter).
    """
    from crossmetric import __version__

    path = os.fspath(path)
    enc = _Encoder()
    tree = enc.encode(obj, type(obj).__name__)
    params = {}
    if hasattr(obj, "get_params"):
        params = {k: json.loads(json.dumps(_Encoder().encode(v, k), default=str))
                  for k, v in obj.get_params(deep=False).items()}
    state = obj.__getstate__() if hasattr(obj, "__getstate__") else vars(obj)
    header = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "crossmetric_version": __version__, "kind": kind,
        "class": _public_name(type(obj)), "params": params,
        "attributes": {k: _type_name(v) for k, v in state.items()
                       if k.endswith("_") and not k.startswith("__")},
        "meta": dict(meta or {}), "tree": tree,
    }
    try:
        blob = json.dumps(header, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot save {path!r}: {exc}") from None
    arrays: dict[str, Any] = {_HEADER: np.frombuffer(blob, dtype=np.uint8), **enc.arrays}
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def _refuse_pickle(path: str, head: bytes, kind: str = "model") -> None:
    looks_pickle = head[:1] == b"\x80" or head[:2] in (b"x\x9c", b"x\x01", b"x\xda") \
        or head[:3] == b"ZF\x00" or head[:2] == b"\x1f\x8b"
    if not looks_pickle:   # a .npy array, JSON, text, an image...: no advice about pickles
        what = ("a NumPy .npy array" if head[:4] == b"\x93NUM" else
                "JSON" if head.lstrip()[:1] in (b"{", b"[") else None)
        by = {"model": "crossmetric fit --out or save_model", "index": "Index.save"}
        raise ValueError(f"{path}: not a crossmetric {kind} file"
                         f"{f' ({what})' if what else ''}; expected a file written by "
                         f"{by.get(kind, 'crossmetric')}.")
    what = "a pickle/joblib file"
    raise ValueError(
        f"{path}: {what}; loading pickles can run code, so it is refused. If you trust where "
        "it came from, convert it once: python -m crossmetric.persistence OLD NEW "
        "--trust-pickle (or load_model(path, allow_pickle=True)); both run the file's code.")


def load_object(path: str | os.PathLike[str], *, kind: str = "model",
                allow_pickle: bool = False) -> tuple[Any, dict | None]:
    """Read a file written by :func:`save_object`; returns ``(obj, header)``.

    ``allow_pickle=True`` also reads the pickle/joblib files of older crossmetric versions.
    UNSAFE: a pickle runs whatever code it names; use it only for files you trust.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: file not found.")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}.") from None
    if not head:
        raise ValueError(f"{path}: empty file (0 bytes), not a crossmetric {kind} file.")
    if head != _ZIP_MAGIC:
        if allow_pickle:
            return _load_pickle(path, kind), None
        _refuse_pickle(path, head, kind)
    # every array's declared size against the bytes that hold it, before np.load allocates
    try:
        check_array_file(path, stored_only=True)
    except ArrayFileError as exc:
        what = "a .npy header" if exc.member is None else f"array {exc.member!r}"
        raise ValueError(f"{path}: not a valid crossmetric file ({what} is unreadable: "
                         f"{exc.reason}); nothing from it was run.") from None
    try:
        arrays = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: truncated or corrupt crossmetric {kind} file "
                         f"({type(exc).__name__}).") from None
    with arrays:
        dec = _Decoder(path, arrays)
        if _HEADER not in arrays.files:
            raise ValueError(f"{path}: not a crossmetric {kind} file (an .npz archive without "
                             "a crossmetric header).")
        raw = dec._array(_HEADER, header=True)
        try:
            header = json.loads(bytes(np.asarray(raw, dtype=np.uint8)).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(f"{path}: unreadable crossmetric header "
                             f"({type(exc).__name__}).") from None
        _check_header(path, header, kind)
        try:
            obj = dec.decode(header["tree"])
        except Exception as exc:  # e.g. a state an allowed class's __setstate__ rejects
            if isinstance(exc, ValueError) and str(exc).startswith(path):
                raise
            raise ValueError(f"{path}: not a valid crossmetric file ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:160]}); nothing from it was "
                             "run.") from None
    return obj, header


def _check_header(path: str, header, kind: str) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT or "tree" not in header:
        raise ValueError(f"{path}: not a crossmetric {kind} file (no crossmetric header).")
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION \
            or version < _OLDEST_READ:
        from crossmetric import __version__

        raise ValueError(
            f"{path}: format version {version!r} (written by crossmetric "
            f"{header.get('crossmetric_version')}) is not one this crossmetric "
            f"{__version__} reads (versions {_OLDEST_READ} to {FORMAT_VERSION}); "
            "upgrade crossmetric.")
    if header.get("kind") != kind:
        got = header.get("kind")
        raise ValueError(f"{path}: a crossmetric {got} file, expected {_a(kind)} {kind} file.")


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _load_pickle(path: str, kind: str):
    import joblib

    # a pickle names the classes' modules by the paths of its time: answer the old paths with
    # the modules of today's while it is read, and only then
    old: dict[str, types.ModuleType] = {}
    for name, new in FORMAT2_MODULES.items():
        try:
            importlib.import_module(new)
        except ImportError:  # an optional dependency
            continue
        for loaded in [m for m in sys.modules if m == new or m.startswith(new + ".")]:
            old.setdefault(name + loaded[len(new):], sys.modules[loaded])
    old = {name: module for name, module in old.items() if name not in sys.modules}
    sys.modules.update(old)
    try:
        payload = joblib.load(path)
    finally:
        for name in old:
            sys.modules.pop(name, None)
    if isinstance(payload, dict) and "model" in payload:
        payload = payload["model"]
    return payload


def save_model(path: str | os.PathLike[str], model: Any, *, meta: dict | None = None) -> None:
    """Save a fitted (or unfitted) crossmetric estimator to ``path`` (safe format, atomic).

    The ``preprocessor`` (the training samples) is not stored.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from crossmetric import PCCA
    >>> from crossmetric.persistence import load_model, save_model
    >>> rng = np.random.RandomState(0)
    >>> X = rng.rand(20, 4)
    >>> pairs = np.array([[0, 1], [2, 3], [0, 5], [4, 9]])
    >>> model = PCCA(n_components=2, random_state=0, preprocessor=X).fit(
    ...     pairs, [1, 1, -1, -1])
    >>> path = os.path.join(tempfile.mkdtemp(), "pcca.npz")
    >>> save_model(path, model)
    >>> again = load_model(path).set_params(preprocessor=X)
    >>> bool(np.array_equal(again.pair_distance(pairs), model.pair_distance(pairs)))
    True
    """
    from crossmetric.metrics._faiss_tools import strip_model

    save_object(path, strip_model(model), kind="model", meta=meta)


def load_model(path: str | os.PathLike[str], *, allow_pickle: bool = False,
               return_header: bool = False) -> Any:
    """Load a model written by :func:`save_model` (without running anything from the file).

    Parameters
    ----------
    path : str or path-like
    allow_pickle : bool, default=False
        Also read the joblib files of older crossmetric versions. UNSAFE: unpickling runs
        whatever code the file names; only for files you trust.
    return_header : bool, default=False
        Return ``(model, header)``: the JSON header (``None`` for a pickle).

    Raises
    ------
    ValueError
        One line naming the file: missing, empty, truncated, a pickle, an unknown class or
        entry, a newer format version, or a file of another kind.
    """
    obj, header = load_object(path, kind="model", allow_pickle=allow_pickle)
    if not hasattr(obj, "get_params"):
        raise ValueError(f"{os.fspath(path)}: holds a {type(obj).__name__}, not an estimator.")
    check_model_state(path, obj)
    return (obj, header) if return_header else obj


#: the most values one sample of a model may have for :func:`check_model_state` to try it
#: (16 Mi: a 4096 × 4096 image)
_PROBE_LIMIT = 1 << 24


def _probe_target(model):
    """``(object to probe, (shape_x, shape_y))``: the model, or its member (an ensemble's
    first, a wrapper's ``learner_``) where the model itself has no ``pair_distance`` or no
    sample shapes; ``None`` when no part says the shape of its samples."""
    members = (getattr(model, "learner_", None),
               *(getattr(model, "estimators_", None) or ())[:1])
    for obj in (model, *members):
        sx = getattr(obj, "_sample_shape_x_", None)
        sy = getattr(obj, "_sample_shape_y_", None)
        if obj is not None and sx is not None and sy is not None:
            return (model if hasattr(model, "pair_distance") else obj), (sx, sy)
    return None


def _sample_shape(shape, name: str) -> tuple[int, ...]:
    if not isinstance(shape, tuple | list) or not shape or not all(
            isinstance(n, int | np.integer) and not isinstance(n, bool) and n > 0
            for n in shape):
        raise ValueError(f"{name} is {shape!r}, expected a tuple of positive integers")
    size = 1
    for n in shape:
        size *= int(n)
    if size > _PROBE_LIMIT:
        raise ValueError(f"{name} is {tuple(shape)!r}: {size} values per sample, more than "
                         f"any crossmetric model takes ({_PROBE_LIMIT})")
    return tuple(int(n) for n in shape)


def check_model_state(path: str | os.PathLike[str], model: Any, *,
                      what: str = "model file") -> None:
    """Refuse a loaded model whose fitted state does not make a working model.

    A file can be well-formed (safe classes, arrays, JSON) and still hold nonsense state: a
    missing ``components_``, an array of the wrong shape, a string for a number. Such a model
    failed only later, with an ``AttributeError`` from deep inside ``evaluate``. Here a
    fitted model (:func:`sklearn.utils.validation.check_is_fitted`) must say the shape of
    its samples (``_sample_shape_x_`` / ``_sample_shape_y_``, tuples of positive integers),
    have a finite ``threshold_`` where it has one, and give one finite distance for one pair
    of constant samples of those shapes -- which runs every part of the model once. An
    unfitted model is accepted as it is.

    Parameters
    ----------
    path : str or path-like
        The file, for the message.
    model : estimator
        The loaded model.
    what : str, default="model file"
        What the file is, for the message (an index names its model).

    Raises
    ------
    ValueError
        ``"PATH: not a valid crossmetric model file: ..."``, one line naming what failed.
    """
    import warnings

    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(model)
    except (NotFittedError, TypeError):
        return
    from crossmetric._base import PairLearnerMixin

    try:
        found = _probe_target(model)
        if found is None:
            if not isinstance(model, PairLearnerMixin):
                return  # a wrapper of no pair learner (a kernel map): nothing to try
            raise ValueError("the fitted state has no _sample_shape_x_ / _sample_shape_y_")
        target, shapes = found
        sx = _sample_shape(shapes[0], "_sample_shape_x_")
        sy = _sample_shape(shapes[1], "_sample_shape_y_")
        if hasattr(model, "threshold_"):
            t = model.threshold_
            if isinstance(t, bool) or not isinstance(t, int | float | np.number) \
                    or not np.isfinite(t):
                raise ValueError(f"threshold_ is {t!r}, expected a finite number")
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            d = np.asarray(target.pair_distance((np.full((1, *sx), 0.5),
                                                 np.full((1, *sy), 0.5))), dtype=float)
        if d.shape != (1,) or not np.isfinite(d).all():
            raise ValueError(f"the distance of a test pair is {d.tolist()!r}, expected one "
                             "finite number")
    except Exception as exc:  # anything the state makes fail: the file is not a model
        msg = " ".join(str(exc).split())[:200]
        raise ValueError(f"{os.fspath(path)}: not a valid crossmetric {what}: "
                         f"{type(exc).__name__}: {msg}") from None


def _main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m crossmetric.persistence", allow_abbrev=False,
        description="Convert a pickle/joblib model file of an older crossmetric to the safe "
                    "format. UNSAFE for files you do not trust: reading a pickle runs its code.")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--trust-pickle", action="store_true",
                   help="required: confirm that you trust OLD (its code runs)")
    args = p.parse_args(argv)
    if not args.trust_pickle:
        print("crossmetric: refusing to read a pickle without --trust-pickle (it runs code).",
              file=sys.stderr)
        return 2
    try:
        model = load_model(args.old, allow_pickle=True)
        save_model(args.new, model, meta={"converted_from": os.path.basename(args.old)})
    except (ValueError, OSError) as exc:
        print(f"crossmetric: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    print(f"converted {args.old} -> {args.new}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
