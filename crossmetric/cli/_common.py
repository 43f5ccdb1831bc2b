"""What every command shares: the one-line error, loading arrays / labels / pairs / models,
checks of options and output paths."""

from __future__ import annotations

import os
import sys

import numpy as np


class CLIError(Exception):
    """A user-facing error: printed on one line, exit code 2."""


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


def _check_identities(labels, what: str) -> None:
    """Learning from pairs needs two identities at least: one identity gives no "different"
    pair (``what``: the option the identities come from)."""
    ids = np.unique(np.asarray(labels))
    if ids.size < 2:
        one = f" ({ids[0]})" if ids.size else ""
        raise CLIError(f"{what}: only one identity{one}; need at least 2 (pairs of different "
                       "identities to learn from).")


def _same_file(a: str, b: str) -> bool:
    """``a`` and ``b`` name one file: :func:`os.path.samefile` when both exist (hard links,
    symbolic links), else the same path once links and ``..`` are resolved."""
    if os.path.exists(a) and os.path.exists(b):
        try:
            return os.path.samefile(a, b)
        except OSError:
            pass
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _check_outputs_not_inputs(outputs: dict, inputs: dict) -> None:
    """Refuse an output path that is one of the command's inputs, before anything is read or
    written.

    Parameters
    ----------
    outputs, inputs : dict of str to str or None
        Option name (``"--out"``, ``"MODEL"``) to the path given; None where not given.

    Raises
    ------
    CLIError
        Naming the output option and the input it would overwrite.
    """
    for out_opt, out in outputs.items():
        if not out:
            continue
        for in_opt, src in inputs.items():
            if src and _same_file(out, src):
                raise CLIError(f"{out_opt}: {out!r} is the {in_opt} input; expected a new file "
                               "name (an output never overwrites an input).")


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


def _is_output_folder(full: str, what: str = "--out") -> bool:
    """``full`` is empty or holds files a crossmetric run writes: its result files,
    ``config.toml``, the lock file, or the ``.staging-*`` folder of a run that was stopped."""
    from crossmetric.protocols.result_files import RESULT_FILES

    try:
        names = os.listdir(full)
    except OSError as exc:
        raise CLIError(f"{what}: cannot read folder {full!r}: {_one_line(exc)}") from None
    ours = {*RESULT_FILES, "config.toml", ".crossmetric.lock"}
    return not names or any(n in ours or n.startswith(".staging-") for n in names)


def _check_output_dir(path: str, what: str = "--out") -> None:
    """An output folder may be new (created only once there are results), empty, or one an
    earlier run wrote; a folder holding other files is refused (its files would sit beside the
    results, and a mistyped path could write into any folder). Its nearest existing ancestor
    must be a writable folder."""
    if not path.strip():
        raise CLIError(f"{what}: empty path.")
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise CLIError(f"{what}: {path!r} exists and is not a folder.")
    if os.path.isdir(full) and not _is_output_folder(full, what):
        raise CLIError(f"{what}: {full!r} is a folder of other files, not a crossmetric "
                       "output folder; expected a new or empty folder, or one an earlier run "
                       "wrote (results.*, config.toml).")
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

    if os.path.isdir(path):
        raise CLIError(f"MODEL: {path!r} is a folder, expected a model file.")
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


def _parse_size(text: str | None):
    """``--size WxH`` as ``(width, height)``, each side at most
    :data:`crossmetric.datasets.MAX_IMAGE_SIDE` pixels."""
    from crossmetric.datasets._image_folder import MAX_IMAGE_SIDE

    if text is None:
        return None
    w, sep, h = (t.strip().lstrip("0") for t in text.lower().partition("x"))
    if not (sep and w.isascii() and h.isascii() and w.isdigit() and h.isdigit()):
        raise CLIError(f"--size expects WIDTHxHEIGHT in pixels (e.g. 48x128), got {text!r}.")
    if max(len(w), len(h)) > 9 or max(int(w), int(h)) > MAX_IMAGE_SIDE:
        raise CLIError(f"--size: {text.strip()} is too large; expected each side at most "
                       f"{MAX_IMAGE_SIDE} pixels (at most {MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE}).")
    return int(w), int(h)


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at ``os.devnull`` once its reader has gone (a closed
    pipe): later writes, and the flush at exit, then go nowhere instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _write_stdout(text: str) -> bool:
    """Write ``text`` to stdout and flush it; False when the reader has gone (``| head -n 0``,
    ``| true``), stdout then silenced (:func:`_stdout_to_devnull`) so that the command can
    finish its work -- such as saving its result files -- instead of dying on the pipe."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return False
    return True
