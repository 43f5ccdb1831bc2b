"""Input checks shared by every module: finite arrays, shapes, pair labels, parameters.

Every check raises :class:`ValueError` whose message names the offending argument and says
what was expected, so that a user sees *which* input is wrong, never a wrong answer.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_array_2d",
    "check_finite",
    "check_pair_labels",
    "check_n_components",
    "check_nonnegative",
    "check_indices",
    "check_choice",
    "check_positive_scalar",
    "check_positive_int",
    "as_float_array",
    "per_modality",
]


def check_finite(a: np.ndarray, name: str) -> np.ndarray:
    """Raise ``ValueError`` if ``a`` holds NaN or infinity."""
    if a.dtype.kind in "fc" and not np.isfinite(a).all():
        n_bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise ValueError(
            f"{name} contains NaN or infinity ({n_bad} non-finite values); "
            "every value must be finite."
        )
    return a


def as_float_array(a, name: str, *, ndim: int | None = None) -> np.ndarray:
    """Convert ``a`` to a finite float64 array (float32 kept), checking its number of dims."""
    try:
        arr = np.asarray(a)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be converted to a numeric array: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got an array of dtype {arr.dtype}.")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}.")
    return check_finite(arr, name)


def check_array_2d(a, name: str, *, min_samples: int = 1) -> np.ndarray:
    """A finite 2-D float array ``(n_samples, n_features)`` with at least ``min_samples`` rows."""
    arr = as_float_array(a, name, ndim=2)
    if arr.shape[0] < min_samples:
        raise ValueError(f"{name} must have at least {min_samples} row(s), got {arr.shape[0]}.")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one feature (column), got shape {arr.shape}.")
    return arr


def check_nonnegative(a: np.ndarray, name: str, why: str) -> np.ndarray:
    """Raise ``ValueError`` if ``a`` has a negative entry; ``why`` says who needs it."""
    if a.size and np.min(a) < 0:
        raise ValueError(
            f"{name} contains negative values (min {np.min(a):.4g}); {why} needs "
            "non-negative features such as histograms."
        )
    return a


def check_pair_labels(y, n_pairs: int | None = None, *, name: str = "y",
                      require_both: bool = True) -> np.ndarray:
    """Pair labels: a 1-D array of +1 (same) / -1 (different), both present unless told."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of pair labels, got shape {arr.shape}.")
    if n_pairs is not None and arr.shape[0] != n_pairs:
        raise ValueError(
            f"{name} has {arr.shape[0]} labels but pairs has {n_pairs} pairs; "
            "they must have the same length."
        )
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold the numbers +1 and -1, got dtype {arr.dtype}.")
    if arr.dtype.kind == "f":
        check_finite(arr, name)
    bad = ~np.isin(arr, (-1, 1))
    if bad.any():
        found = np.unique(arr[bad])[:5]
        raise ValueError(
            f"{name} must contain only +1 (same) and -1 (different); found {found.tolist()}."
        )
    arr = arr.astype(np.int64)
    if require_both and (not (arr == 1).any() or not (arr == -1).any()):
        if arr.size == 0:
            raise ValueError(f"{name} is empty; labelled pairs are needed.")
        raise ValueError(
            f"{name} must contain both +1 (same) and -1 (different) pairs; "
            f"got only {int(arr[0]):+d} labels."
        )
    return arr


def check_n_components(n_components, upper: int, *, name: str = "n_components",
                       what: str = "the number of features") -> int:
    """``n_components`` must be an integer in ``[1, upper]``."""
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {n_components!r}.")
    if not 1 <= n_components <= upper:
        raise ValueError(
            f"{name}={n_components} is out of range: it must be in [1, {upper}] ({what})."
        )
    return int(n_components)


def check_indices(idx: np.ndarray, size: int, name: str) -> np.ndarray:
    """Integer indices into an array of length ``size``: no negatives, none ``>= size``."""
    if idx.size == 0:
        return idx
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0:
        raise ValueError(f"{name} contains negative index {lo}; indices must be in [0, {size}).")
    if hi >= size:
        raise ValueError(
            f"{name} contains index {hi}, out of range for {size} samples; "
            f"indices must be in [0, {size})."
        )
    return idx


def check_positive_scalar(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite real number > 0 (or >= 0 when ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}.")
    return float(value)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def check_choice(value, name: str, choices) -> str:
    """``value`` must be one of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}.")
    return value


def _library_dirs() -> tuple[str, ...]:
    import os

    import joblib
    import sklearn

    # the crossmetric package folder: this file is crossmetric/_utils/checks.py
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return (package, *(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                       for m in (sklearn, joblib)))


def user_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` call that points at the user's line.

    Counts the frames from the function that calls ``warnings.warn`` out to the first one
    outside crossmetric, scikit-learn and joblib (so a warning raised in ``fit`` under
    ``cross_val_score`` names the user's ``cross_val_score(...)`` line, not library code).
    """
    import sys

    prefixes = _library_dirs()
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(prefixes):
        frame = frame.f_back
        level += 1
    return level


def per_modality(value, name: str) -> tuple:
    """A setting given once for both modalities, or as a pair ``(for_x, for_y)``."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(f"{name} must be one value or a pair (for_x, for_y), got {value!r}.")
        return tuple(value)
    return (value, value)


#: the largest side, in pixels, of a ``size`` to resize images to (so at most 4096 x 4096 =
#: 16.8 million pixels an image)
MAX_IMAGE_SIDE = 4096


def _check_size(size, name: str = "size") -> tuple[int, int] | None:
    """None or a pair of positive integers (width, height), each at most
    :data:`MAX_IMAGE_SIDE`."""
    if size is None:
        return None
    try:
        if isinstance(size, str | bytes):
            raise TypeError
        w, h = (int(s) for s in size)
        ok = len(tuple(size)) == 2 and w >= 1 and h >= 1 and all(
            float(s) == int(s) for s in size)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be None or a pair of positive integers (width, height), "
                         f"got {size!r}.")
    if max(w, h) > MAX_IMAGE_SIDE:
        raise ValueError(f"{name} {w}x{h} (width x height) is too large: each side must be at "
                         f"most {MAX_IMAGE_SIDE} pixels.")
    return w, h
