"""The UCI *Multiple Features* (mfeat) handwritten numerals: two of its six views.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_mfeat", "MFEAT_VIEWS"]


#: feature count of each UCI Multiple Features view
MFEAT_VIEWS = {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6}
_MFEAT_ROWS = 2000


def _read_mfeat_view(data_home: str, view: str) -> np.ndarray:
    path = os.path.join(data_home, f"mfeat-{view}")
    if not os.path.isfile(path):
        raise ValueError(
            f"mfeat view {view!r}: file {path!r} not found; data_home must be the folder "
            "holding the UCI files mfeat-fou, mfeat-pix, ..."
        )
    try:
        arr = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"mfeat view {view!r}: {path!r} is malformed: {exc}") from None
    want = (_MFEAT_ROWS, MFEAT_VIEWS[view])
    if arr.shape != want:
        raise ValueError(
            f"mfeat view {view!r}: {path!r} has shape {arr.shape}, expected {want} "
            "(2,000 rows of whitespace-separated numbers)."
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"mfeat view {view!r}: {path!r} contains NaN or infinity.")
    return arr


def load_mfeat(data_home: str | os.PathLike, views: Sequence[str] = ("fou", "pix")) -> Bunch:
    """Two (or more) views of the UCI *Multiple Features* handwritten digits.

    Parameters
    ----------
    data_home : path
        Folder with the UCI files ``mfeat-fou``, ``mfeat-fac``, ``mfeat-kar``, ``mfeat-pix``,
        ``mfeat-zer``, ``mfeat-mor`` (2,000 rows each, whitespace-separated, no header; rows
        come in blocks of 200 per digit).
    views : sequence of str, default=("fou", "pix")
        The view for ``X``, the view for ``Y`` and optionally more (for the multi-view
        learners' ``fit_views``), distinct names among :data:`MFEAT_VIEWS`.

    Returns
    -------
    Bunch
        ``X``, ``Y`` (the first two views; row ``r`` = the same digit image), ``views`` (every
        view, in order), ``labels`` (``r // 200``), ``instance`` (``r``), ``view_names``.

    Raises
    ------
    ValueError
        Unknown view, missing file, or a file without the expected 2,000 × d numbers.
    """
    views = tuple(views)
    if len(views) < 2 or len(set(views)) != len(views):
        raise ValueError(f"views must name at least two distinct mfeat views (X, Y, ...), got "
                         f"{views!r}.")
    for v in views:
        if v not in MFEAT_VIEWS:
            raise ValueError(f"unknown mfeat view {v!r}; expected one of {sorted(MFEAT_VIEWS)}.")
    data_home = os.fspath(data_home)
    if not os.path.isdir(data_home):
        raise ValueError(f"data_home {data_home!r} is not a directory.")
    arrays = [_read_mfeat_view(data_home, v) for v in views]
    labels = np.repeat(np.arange(10, dtype=np.int64), _MFEAT_ROWS // 10)
    more = "".join(f", mfeat-{v}" for v in views[2:])
    return Bunch(X=arrays[0], Y=arrays[1], views=arrays, labels=labels,
                 instance=np.arange(_MFEAT_ROWS, dtype=np.int64), view_names=views,
                 DESCR=f"UCI Multiple Features: X = mfeat-{views[0]}, Y = mfeat-{views[1]}"
                       f"{more}.")
