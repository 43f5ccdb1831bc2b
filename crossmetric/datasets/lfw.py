"""LFW's ``pairs.txt`` and its join with a user's feature file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np
from sklearn.utils import Bunch

from crossmetric.datasets.files import _require_file

__all__ = ["read_lfw_pairs", "lfw_pair_indices"]


def read_lfw_pairs(path: str | os.PathLike) -> Bunch:
    """Read LFW's ``pairs.txt`` (View 2: 10 folds of 300 positive + 300 negative pairs).

    Format: a header ``n_folds<TAB>n_per_class`` (``10  300``); then, per fold,
    ``n_per_class`` positive lines ``name  n1  n2`` followed by ``n_per_class`` negative lines
    ``name1  n1  name2  n2``. Image numbers are 1-based (``Aaron_Peirsol_0001.jpg`` is number 1).
    Fields may be separated by tabs or spaces. ``pairsDevTrain.txt`` / ``pairsDevTest.txt``
    (header ``n_per_class`` only, one fold) are read as one fold.

    Returns
    -------
    Bunch
        ``name1``, ``name2`` (object arrays of str), ``num1``, ``num2`` (int, 1-based),
        ``y`` (+1 same / -1 different), ``fold`` (0-based fold of each pair), ``n_folds``.

    Raises
    ------
    ValueError
        Missing file, bad header, a line with a wrong number of fields or non-integer image
        numbers, a positive block line with 4 fields or vice versa, or a wrong line count.
    """
    path = os.fspath(path)
    _require_file(path, "LFW pairs file")
    with open(path, encoding="utf-8") as fh:
        lines = [ln.split() for ln in fh if ln.strip()]
    if not lines:
        raise ValueError(f"LFW pairs file {path!r} is empty.")
    head = lines[0]
    try:
        if len(head) == 2:
            n_folds, n_per = int(head[0]), int(head[1])
        elif len(head) == 1:
            n_folds, n_per = 1, int(head[0])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"LFW pairs file {path!r}: the first line must be 'n_folds n_per_class' "
            f"(e.g. '10\\t300'), got {' '.join(head)!r}."
        ) from None
    body = lines[1:]
    if n_folds < 1 or n_per < 1 or len(body) != 2 * n_folds * n_per:
        raise ValueError(
            f"LFW pairs file {path!r}: header announces {n_folds} folds x 2 x {n_per} pairs "
            f"= {2 * n_folds * n_per} lines, found {len(body)}."
        )
    name1, name2, num1, num2, y, fold = [], [], [], [], [], []
    for k, fields in enumerate(body):
        f, within = divmod(k, 2 * n_per)
        positive = within < n_per
        lineno = k + 2
        try:
            if positive and len(fields) == 3:
                a, b, na, nb = fields[0], fields[0], int(fields[1]), int(fields[2])
            elif not positive and len(fields) == 4:
                a, na, b, nb = fields[0], int(fields[1]), fields[2], int(fields[3])
            else:
                what = "'name n1 n2' (3 fields)" if positive else "'name1 n1 name2 n2' (4 fields)"
                raise ValueError(
                    f"LFW pairs file {path!r}, line {lineno}: expected {what} in the "
                    f"{'positive' if positive else 'negative'} block of fold {f + 1}, "
                    f"got {len(fields)} fields."
                )
        except ValueError as exc:
            if "LFW pairs file" in str(exc):
                raise
            raise ValueError(
                f"LFW pairs file {path!r}, line {lineno}: image numbers must be integers, "
                f"got {' '.join(fields)!r}."
            ) from None
        if na < 1 or nb < 1:
            raise ValueError(
                f"LFW pairs file {path!r}, line {lineno}: image numbers are 1-based, got "
                f"{na} and {nb}."
            )
        name1.append(a)
        name2.append(b)
        num1.append(na)
        num2.append(nb)
        y.append(1 if positive else -1)
        fold.append(f)
    return Bunch(name1=np.array(name1, dtype=object), name2=np.array(name2, dtype=object),
                 num1=np.array(num1, dtype=np.int64), num2=np.array(num2, dtype=np.int64),
                 y=np.array(y, dtype=np.int64), fold=np.array(fold, dtype=np.int64),
                 n_folds=n_folds)


_LFW_FILE = re.compile(r"^(?P<name>.+)_(?P<num>\d+)(\.[A-Za-z0-9]+)?$")


def _parse_image_key(key) -> tuple[str, int]:
    """``("Name", 3)``, ``"Name_0003"``, ``"Name_0003.jpg"``, ``"a/b/Name_0003.jpg"``, ``"Name 3"``
    or ``"Name,3"`` → ``("Name", 3)``."""
    if isinstance(key, tuple | list) and len(key) == 2:
        return str(key[0]), int(key[1])
    text = str(key).strip()
    for sep in (",", "\t", " "):
        if sep in text:
            a, _, b = text.rpartition(sep)
            if b.strip().isdigit():
                return a.strip(), int(b)
    m = _LFW_FILE.match(os.path.basename(text))
    if m is None:
        raise ValueError(
            f"image key {key!r} is not of the form 'Name_0001[.jpg]', 'Name,1' or (name, 1)."
        )
    return m.group("name"), int(m.group("num"))


def lfw_pair_indices(lfw: Bunch, image_keys: Sequence) -> np.ndarray:
    """Join LFW pairs with a feature file: the feature row of each side of each pair.

    Parameters
    ----------
    lfw : Bunch
        From :func:`read_lfw_pairs`.
    image_keys : sequence
        Key of each row of the user's feature matrix: ``(name, number)`` tuples, or strings
        ``"Name_0001"``, ``"Name_0001.jpg"`` (any folder prefix), ``"Name,1"`` or ``"Name 1"``.
        Numbers are 1-based as in LFW.

    Returns
    -------
    ndarray of shape (n_pairs, 2), int64
        Index pairs into the feature matrix (use with ``preprocessor=features``).

    Raises
    ------
    ValueError
        If a pair refers to an image that has no row, or a key appears twice.
    """
    row_of: dict[tuple[str, int], int] = {}
    for r, key in enumerate(image_keys):
        k = _parse_image_key(key)
        if k in row_of:
            raise ValueError(f"image_keys: image {k[0]}_{k[1]:04d} appears twice "
                             f"(rows {row_of[k]} and {r}).")
        row_of[k] = r
    out = np.empty((lfw.y.shape[0], 2), dtype=np.int64)
    for p, (a, na, b, nb) in enumerate(zip(lfw.name1, lfw.num1, lfw.name2, lfw.num2,
                                           strict=True)):
        for col, k in ((0, (a, int(na))), (1, (b, int(nb)))):
            r = row_of.get(k)
            if r is None:
                raise ValueError(
                    f"pair {p} refers to image {k[0]}_{k[1]:04d}, which has no row in the "
                    "feature file (image_keys)."
                )
            out[p, col] = r
    return out
