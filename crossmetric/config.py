"""Run configuration of ``crossmetric benchmark``: a TOML file, ``--param`` overrides, defaults.

A configuration file holds the options of ``crossmetric benchmark`` in a ``[benchmark]`` table
(the command-line names, with ``_`` or ``-``) and constructor parameters of the learners in one
``[methods.NAME]`` table per registry method (:data:`crossmetric.registry.METHODS`)::

    [benchmark]
    methods = ["euclidean", "gsm"]    # or "euclidean,gsm", or "all"
    folds = 5
    repeats = 3
    quiet = true

    [methods.gsm]
    mu = 1e-3
    n_components = 16

With image data (``images``, ``dataset = "viper"`` or ``"pku-sketch"``), a ``[descriptor]``
table holds constructor parameters of the ``descriptor``'s class
(:func:`crossmetric.features._image_views.make_descriptor`)::

    [benchmark]
    images = "cufs"
    pattern = '(train|test)/(?P<domain>photo|sketch)/(?P<id>(ar|xm2vts)-\\d+)\\.jpg'
    descriptor = "ltp"

    [descriptor]
    radii = [1.0, 2.0]

Precedence, lowest first: the defaults (:data:`BENCHMARK_OPTIONS`), the file, the options given
on the command line; per-method parameters: the registry's settings, the file's
``[methods.NAME]``, then each ``--param METHOD.NAME=VALUE`` (the value is read as a TOML literal:
``1e-3``, ``true``, ``"text"``, ``[0.0, 0.1]``; a bare word such as ``adam`` is read as a string);
descriptor parameters: the file's ``[descriptor]`` (dropped when the command line names another
descriptor than the file's), then each ``--descriptor-param NAME=VALUE`` (read the same way).
Without a descriptor, image data gets its default (``strips`` for VIPeR, ``hog`` otherwise),
recorded in the options.
The learners are built by :func:`crossmetric.registry.make_estimator` with these parameters as
overrides -- the one way the benchmark builds learners. Paths in the file are relative to the
current directory, as on the command line.

``crossmetric benchmark`` writes the resolved configuration (every option, the descriptor
parameters given, and the full parameters of every method it ran) to ``config.toml`` beside its
results; given back with ``--config`` it reproduces the run's settings.

Defaults of the command line and of :func:`crossmetric.protocols.run_protocols`: the folds,
repeats, negatives per positive, training-positive cap and seed are the same (read from
``run_protocols``' signature). Two differ on purpose: the command line uses every core
(``n_jobs = -1``; Python: ``n_jobs=None``, one process) and shows a progress bar
(``quiet = false``; Python: ``progress=False``), since a script calling the library chooses its
own parallelism and output.
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crossmetric.features._image_views import DESCRIPTORS

__all__ = ["BENCHMARK_OPTIONS", "RunConfig", "load_config", "parse_param",
           "parse_descriptor_param", "resolve_config", "method_parameter_names", "to_toml"]


@dataclass(frozen=True)
class _Option:
    kind: type | tuple
    default: object = None
    choices: tuple | None = None


def _protocol_default(name: str):
    from crossmetric.protocols import run_protocols

    return inspect.signature(run_protocols).parameters[name].default


#: option name -> (type, default, allowed values) of ``crossmetric benchmark``
BENCHMARK_OPTIONS: dict[str, _Option] = {
    # data
    "dataset": _Option(str), "data_home": _Option(str), "x": _Option(str), "y": _Option(str),
    "labels": _Option(str), "instance": _Option(str), "key": _Option(str),
    "images": _Option(str), "pattern": _Option(str),
    "descriptor": _Option(str, None, DESCRIPTORS),
    # the descriptor's parameters: given as NAME=VALUE items (--descriptor-param), resolved to a
    # dict; a file holds them in its [descriptor] table
    "descriptor_params": _Option(dict),
    "size": _Option(str), "lfw_pairs": _Option(str), "image_list": _Option(str),
    # protocol
    "methods": _Option((str, list)),
    "folds": _Option(int, _protocol_default("n_folds")),
    "repeats": _Option(int, _protocol_default("n_repeats")),
    "protocol": _Option(str, "both", ("both", "verification", "identification", "retrieval")),
    # the split: share (float) or count (int) of test identities, the probe side, a fixed split
    "test_size": _Option((int, float), _protocol_default("test_size")),
    "probe_domain": _Option(str), "split_file": _Option(str), "train_index": _Option(str),
    "level": _Option(str, None, ("labels", "instance")),
    "n_negatives": _Option(int, _protocol_default("n_negatives")),
    "max_train_positives": _Option(int, _protocol_default("max_train_positives")),
    "n_jobs": _Option(int, -1),
    "dask_scheduler": _Option(str), "dask_workers": _Option(int),
    "seed": _Option(int, _protocol_default("random_state")),
    # tune: "small" (the registry grid; true in a config file) or "paper" (the paper's grid)
    "tune": _Option((bool, str), False, (False, True, "small", "paper")),
    "tune_folds": _Option(int, 3),
    "tune_scoring": _Option(str, "auc", ("auc", "rank1", "map", "cmc20")),
    # output
    "out": _Option(str, "crossmetric-results"),
    "quiet": _Option(bool, False), "json": _Option(bool, False),
}


#: options that a configuration file holds in a table of their own
_TABLE_ONLY = {"descriptor_params": "descriptor"}
#: the tables of a configuration file
_TABLES = ("benchmark", "methods", "descriptor")


def _expected(names) -> str:
    return ", ".join(names)


def _suggest(name: str, names) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_option(name: str, value, where: str):
    key = name.replace("-", "_")
    if key in _TABLE_ONLY:
        raise ValueError(f"{where}: option {name!r} goes in a [{_TABLE_ONLY[key]}] table of "
                         "NAME = VALUE entries.")
    if key not in BENCHMARK_OPTIONS:
        raise ValueError(f"{where}: unknown option {name!r}{_suggest(key, BENCHMARK_OPTIONS)}; "
                         f"expected one of {_expected(BENCHMARK_OPTIONS)}.")
    opt = BENCHMARK_OPTIONS[key]
    kinds = opt.kind if isinstance(opt.kind, tuple) else (opt.kind,)
    ok = any(isinstance(value, k) and not (k is int and isinstance(value, bool)) for k in kinds)
    if key == "methods" and isinstance(value, list):
        ok = all(isinstance(v, str) for v in value)
    if not ok:
        names = " or ".join("list of str" if k is list else k.__name__ for k in kinds)
        raise ValueError(f"{where}: option {name!r} must be {names}, got {value!r}.")
    if opt.choices is not None and value not in opt.choices:
        raise ValueError(f"{where}: option {name!r} must be one of {_expected(opt.choices)}, "
                         f"got {value!r}.")
    if key == "methods" and isinstance(value, list):
        value = ",".join(value)
    return key, value


def method_parameter_names(method: str) -> list[str]:
    """Constructor parameters of a registry method's learner class.

    Raises
    ------
    ValueError
        Unknown method, or a method not available in this installation.
    """
    from crossmetric.registry import available_class

    return sorted(available_class(method)._get_param_names())


def _check_method_params(method: str, params: Mapping, where: str) -> tuple[str, dict]:
    from crossmetric.registry import METHODS

    key = str(method).strip().lower()
    if key not in METHODS:
        raise ValueError(f"{where}: unknown method {method!r}{_suggest(key, METHODS)}; "
                         f"expected one of {_expected(METHODS)}.")
    if not isinstance(params, Mapping):
        raise ValueError(f"{where}: [methods.{key}] must be a table of parameters, got "
                         f"{params!r}.")
    names = method_parameter_names(key)
    for name in params:
        if name not in names:
            raise ValueError(f"{where}: method {key!r} ({METHODS[key].class_name}) has no "
                             f"parameter {name!r}{_suggest(name, names)}; expected one of "
                             f"{_expected(names)}.")
    # "None" (as --param writes it; TOML has no null) is None
    return key, {k: None if v == "None" else _plain_value(v) for k, v in params.items()}


def _plain_value(v):
    """TOML arrays become tuples (as the registry writes sequences), recursively."""
    if isinstance(v, list | tuple):
        return tuple(_plain_value(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain_value(x) for k, x in v.items()}
    return v


@dataclass
class RunConfig:
    """Resolved settings of one benchmark run.

    Attributes
    ----------
    options : dict
        Every option of :data:`BENCHMARK_OPTIONS` (``None``: not set); ``descriptor_params``
        is ``None`` or a dict ``{parameter: value}`` of the descriptor's class.
    method_params : dict
        ``{method: {parameter: value}}`` given by the file or ``--param`` (overrides of the
        registry's settings).
    """

    options: dict = field(default_factory=dict)
    method_params: dict = field(default_factory=dict)

    def estimator_params(self, method: str) -> dict:
        """Every constructor parameter of ``method``'s learner as :meth:`make_estimator`
        builds it (the class defaults, the registry's settings, then :attr:`method_params`),
        but ``preprocessor``; sequences as tuples. For a method not available here (its
        optional dependency missing): the registry's settings updated by
        :attr:`method_params`."""
        from crossmetric.registry import _spec, method_status

        spec = _spec(method)
        if method_status(spec.name) is not None:
            params = {k: _plain_value(v) for k, v in spec.params.items()}
            params.update(self.method_params.get(spec.name, {}))
            return params
        est = self.make_estimator(method)
        return {k: _plain_value(v) for k, v in est.get_params(deep=False).items()
                if k != "preprocessor"}

    def make_estimator(self, method: str) -> Any:
        """The learner for ``method``: :func:`crossmetric.registry.make_estimator` with
        :attr:`method_params` as overrides."""
        from crossmetric.registry import _spec, make_estimator

        return make_estimator(method, **self.method_params.get(_spec(method).name, {}))

    def to_dict(self, methods: Sequence[str] | None = None) -> dict:
        """``{"benchmark": options that are set, "methods": {name: full parameters},
        "descriptor": descriptor parameters}`` for the given methods (default: those with
        parameters given); ``descriptor`` only when parameters were given."""
        names = list(self.method_params) if methods is None else list(methods)
        out = {"benchmark": {k: v for k, v in self.options.items()
                             if v is not None and k not in _TABLE_ONLY}}
        if names:
            out["methods"] = {m: self._written_params(m) for m in names}
        if self.options.get("descriptor_params"):
            out["descriptor"] = dict(self.options["descriptor_params"])
        return out

    def _written_params(self, method: str) -> dict:
        """:meth:`estimator_params` for the file: a ``None`` set by :attr:`method_params` is
        written ``"None"`` (read back as ``None``; TOML has no null), the other ``None``
        values -- the defaults -- are left out."""
        from crossmetric.registry import _spec

        params = self.estimator_params(method)
        for k, v in self.method_params.get(_spec(method).name, {}).items():
            if v is None:
                params[k] = "None"
        return params

    def to_toml(self, methods: Sequence[str] | None = None) -> str:
        """The configuration as a TOML document that :func:`load_config` reads back."""
        from crossmetric import __version__

        return f"# resolved by crossmetric {__version__}\n" + to_toml(self.to_dict(methods))

    def write(self, path: str | os.PathLike[str], methods: Sequence[str] | None = None) -> None:
        """Write :meth:`to_toml` to ``path`` atomically."""
        from crossmetric.persistence import atomic_open

        with atomic_open(path, "w", encoding="utf-8") as fh:
            fh.write(self.to_toml(methods))


def load_config(path: str | os.PathLike[str]) -> dict:
    """Read and check a configuration file (TOML; ``.json`` files are read as JSON).

    Returns
    -------
    dict
        ``{"benchmark": {option: value}, "methods": {method: {parameter: value}},
        "descriptor": {parameter: value}}`` with the option names in their ``_`` spelling,
        lists of methods joined by commas, arrays as tuples.

    Raises
    ------
    ValueError
        Unreadable file, bad TOML, unknown table, option, method or parameter, or a value of
        the wrong type (one line naming it).
    """
    path = os.fspath(path)
    where = f"config {path!r}"
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it ({exc.strerror}).") from None
    try:
        data = (json.loads(raw) if path.lower().endswith(".json")
                else tomllib.loads(raw.decode("utf-8")))
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        kind = "JSON" if path.lower().endswith(".json") else "TOML"
        raise ValueError(f"{where}: not valid {kind} ({' '.join(str(exc).split())}).") from None
    return _check_config(data, where)


def _check_config(data, where: str) -> dict:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a table of [benchmark], [methods.NAME] and "
                         "[descriptor].")
    unknown = [k for k in data if k not in _TABLES]
    if unknown:
        hint = (" (benchmark options go in a [benchmark] table)"
                if unknown[0].replace("-", "_") in BENCHMARK_OPTIONS else "")
        raise ValueError(f"{where}: unknown table {unknown[0]!r}{hint}; expected "
                         f"{_expected(_TABLES)}.")
    tables = {name: data.get(name, {}) for name in _TABLES}
    for name, value in tables.items():
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: {name!r} must be a table, got {value!r}.")
    out = {"benchmark": dict(_check_option(k, v, where) for k, v in tables["benchmark"].items()),
           "methods": {},
           "descriptor": {str(k): _plain_value(v) for k, v in tables["descriptor"].items()}}
    for method, params in tables["methods"].items():
        key, checked = _check_method_params(method, params, where)
        out["methods"][key] = checked
    return out


_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")


def parse_param(text: str) -> tuple[str, str, object]:
    """``"METHOD.NAME=VALUE"`` → ``(method, name, value)``, checked against the registry.

    The value is a TOML literal (``1e-3``, ``true``, ``"adam"``, ``[0.0, 0.1]``); a bare word
    that is not one (``adam``, ``cuda:0``) is taken as a string, except ``None`` (Python's
    spelling; TOML has no null), which is ``None``.

    Examples
    --------
    >>> parse_param("gsm.mu=1e-3")
    ('gsm', 'mu', 0.001)
    >>> parse_param("pcca.n_components=None")
    ('pcca', 'n_components', None)
    >>> parse_param("cmlauc.fpr_range=[0.0, 0.1]")
    ('cmlauc', 'fpr_range', (0.0, 0.1))
    """
    where = f"--param {text!r}"
    target, sep, value = str(text).partition("=")
    method, dot, name = target.strip().partition(".")
    if not sep or not dot or not method or not name.strip():
        raise ValueError(f"--param expects METHOD.NAME=VALUE (e.g. gsm.mu=1e-3), got {text!r}.")
    parsed = _literal(value, name.strip(), where)
    key, checked = _check_method_params(method.strip(), {name.strip(): parsed}, where)
    return key, name.strip(), checked[name.strip()]


def _literal(value: str, name: str, where: str):
    """A TOML literal (arrays as tuples), ``None``, or a bare word taken as a string."""
    value = value.strip()
    if value == "None":
        return None
    try:
        return _plain_value(tomllib.loads(f"v = {value}")["v"])
    except tomllib.TOMLDecodeError:
        if not _BARE_WORD.fullmatch(value):
            raise ValueError(f"{where}: the value {value!r} is not a TOML literal (quote text: "
                             f"{name}='\"...\"').") from None
        return value


def parse_descriptor_param(text: str) -> tuple[str, object]:
    """``"NAME=VALUE"`` of ``--descriptor-param`` → ``(name, value)``.

    The value is read as in :func:`parse_param` (a TOML literal, arrays as tuples; a bare word
    is a string). The name is checked against the descriptor's class by
    :func:`resolve_config`, once the descriptor is known.

    Examples
    --------
    >>> parse_descriptor_param("radii=[1, 2]")
    ('radii', (1, 2))
    >>> parse_descriptor_param("threshold = 3.5")
    ('threshold', 3.5)
    """
    name, sep, value = str(text).partition("=")
    name = name.strip()
    if not sep or not _BARE_KEY.fullmatch(name) or not value.strip():
        raise ValueError(f"--descriptor-param expects NAME=VALUE (e.g. threshold=5), got "
                         f"{text!r}.")
    return name, _literal(value, name, f"--descriptor-param {text!r}")


def _default_descriptor(options: Mapping) -> str | None:
    """The descriptor an image source gets without ``descriptor``: ``strips`` for VIPeR and
    the re-id layouts (Market-1501, ...), ``hog`` for an image folder or PKU-Sketch; ``None``
    for data without images."""
    if options.get("images") is not None:
        return "hog"
    from crossmetric.datasets.reid_layouts import _LAYOUT_NAMES

    dataset = str(options.get("dataset") or "").split(":")[0].strip().lower()
    if dataset in _LAYOUT_NAMES:   # Market-1501, DukeMTMC-reID, MSMT17, CUHK03
        return "strips"
    return {"viper": "strips", "pku-sketch": "hog", "pku_sketch": "hog"}.get(dataset)


def _check_descriptor_params(descriptor: str | None, params: Mapping, where: str) -> None:
    """Every name is a parameter of the descriptor's class (values are checked when it runs)."""
    from crossmetric.features._image_views import make_descriptor

    if not params:
        return
    if descriptor is None:
        raise ValueError(f"{where}: descriptor parameters apply to image data (images, or "
                         "dataset viper or pku-sketch).")
    try:
        make_descriptor(descriptor, params)
    except ValueError as exc:
        raise ValueError(f"{where}: {str(exc).removeprefix('params: ')}") from None


def resolve_config(given: Mapping | None = None,
                   config: str | os.PathLike[str] | Mapping[str, Any] | None=None,
                   params: Sequence[str] = ()) -> RunConfig:
    """Merge defaults < configuration file < options given < ``--param`` overrides.

    Parameters
    ----------
    given : mapping, optional
        Options set on the command line (``None`` values: not given); its
        ``descriptor_params`` holds ``NAME=VALUE`` items (:func:`parse_descriptor_param`;
        ``--descriptor-param``) or a mapping ``{name: value}``.
    config : path, mapping or None
        A file for :func:`load_config`, or its already-read dictionary.
    params : sequence of str
        ``METHOD.NAME=VALUE`` items (:func:`parse_param`).

    Raises
    ------
    ValueError
        Bad option, file, method parameter or descriptor parameter name (one line naming it).

    Examples
    --------
    >>> cfg = resolve_config({"folds": 3}, {"benchmark": {"folds": 5, "repeats": 2}},
    ...                      params=["gsm.mu=1e-3"])
    >>> cfg.options["folds"], cfg.options["repeats"], cfg.method_params
    (3, 2, {'gsm': {'mu': 0.001}})
    """
    loaded: dict
    if config is None:
        loaded = {"benchmark": {}, "methods": {}, "descriptor": {}}
    elif isinstance(config, Mapping):
        loaded = _check_config(config, "config")
    else:
        loaded = load_config(config)
    options = {k: opt.default for k, opt in BENCHMARK_OPTIONS.items()}
    options.update(loaded["benchmark"])
    given = dict(given or {})
    given_items = given.pop("descriptor_params", None)
    given_descriptor = given.get("descriptor")
    for name, value in given.items():
        if value is not None:
            key, value = _check_option(name, value, "option")
            options[key] = value
    method_params = {m: dict(p) for m, p in loaded["methods"].items()}
    for item in params or ():
        method, name, value = parse_param(item)
        method_params.setdefault(method, {})[name] = value
    _resolve_descriptor(options, loaded, given_descriptor, given_items, config)
    return RunConfig(options, method_params)


def _resolve_descriptor(options: dict, loaded: Mapping, given_descriptor, given_items,
                        config) -> None:
    """``options["descriptor"]`` (the data's default when not set) and
    ``options["descriptor_params"]``: the file's ``[descriptor]`` table, unless the command
    line names another descriptor, updated by the ``NAME=VALUE`` items given."""
    file_params = dict(loaded.get("descriptor", {}))
    file_options = {**{k: opt.default for k, opt in BENCHMARK_OPTIONS.items()},
                    **loaded["benchmark"]}
    file_descriptor = file_options["descriptor"] or _default_descriptor(file_options)
    if options["descriptor"] is None:
        options["descriptor"] = _default_descriptor(options)
    if None not in (given_descriptor, file_descriptor) and given_descriptor != file_descriptor:
        file_params = {}          # the file's parameters belong to the file's descriptor
    where = ("config" if config is None or isinstance(config, Mapping)
             else f"config {os.fspath(config)!r}")
    _check_descriptor_params(options["descriptor"], file_params, f"{where}: [descriptor]")
    if isinstance(given_items, Mapping):
        pairs = [(str(k), _plain_value(v), f"descriptor_params {k!r}")
                 for k, v in given_items.items()]
    else:
        items = [given_items] if isinstance(given_items, str) else list(given_items or ())
        pairs = [(*parse_descriptor_param(item), f"--descriptor-param {item!r}")
                 for item in items]
    resolved = dict(file_params)
    for name, value, where in pairs:
        _check_descriptor_params(options["descriptor"], {name: value}, where)
        resolved[name] = value
    options["descriptor_params"] = resolved or None


# ------------------------------------------------------------------------- TOML writing
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key) -> str:
    key = str(key)
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(v) -> str:
    import numpy as np

    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else
                                                 ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()
                               if x is not None) + "}"
    raise ValueError(f"value {v!r} ({type(v).__name__}) cannot be written as TOML.")


def to_toml(data: Mapping) -> str:
    """A two-level mapping (tables of values, tables of tables) as a TOML document.

    ``None`` values are left out (TOML has no null); those of a sub-table are named in a
    comment line at its end.

    Examples
    --------
    >>> print(to_toml({"benchmark": {"folds": 5}, "methods": {"gsm": {"mu": 0.001}}}))
    [benchmark]
    folds = 5
    <BLANKLINE>
    [methods.gsm]
    mu = 0.001
    <BLANKLINE>
    """
    lines: list[str] = []
    for table, content in data.items():
        scalars = {k: v for k, v in content.items() if not isinstance(v, Mapping)}
        subtables = {k: v for k, v in content.items() if isinstance(v, Mapping)}
        if scalars or not subtables:
            lines.append(f"[{_toml_key(table)}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items()
                         if v is not None)
            lines.append("")
        for sub, values in subtables.items():
            lines.append(f"[{_toml_key(table)}.{_toml_key(sub)}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items()
                         if v is not None)
            unset = [str(k) for k, v in values.items() if v is None]
            if unset:
                lines.append(f"# None (TOML has no null; left out): {', '.join(unset)}")
            lines.append("")
    return "\n".join(lines)
