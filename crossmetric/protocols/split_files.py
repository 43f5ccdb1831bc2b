"""Fixed train / test splits read from a file (``crossmetric benchmark --split-file``).

A split file is UTF-8 text, one entry per line, fields separated by a comma, a tab or spaces;
blank lines and lines starting with ``#`` are skipped. Its first line is a header naming the
columns, which says what the entries name:

``row,split``
    One line per data row: the row's 0-based index (row ``r`` of ``--x`` / ``--y``, or the
    ``r``-th matched pair of an image folder in the loader's order), then ``train`` or
    ``test``. Every row must be named once.
``id,split``
    One line per identity or category: its label (as written in the labels file or the
    folder's ``id`` group; numbers match whatever their spelling, ``007`` = ``7``), then
    ``train`` or ``test``; all rows of the identity go to that side. Every identity of the
    data must be named once.
``split``
    One value per data row, in row order (a train/test column, as in the list files of the
    Wikipedia image/text data set).

:func:`read_split_file` returns the training rows as a boolean mask, which
:func:`crossmetric.protocols.run_protocols` takes as ``train_rows``; ``--train-index FILE``
(:func:`read_train_index`) gives the 0-based indices of the training rows instead.
"""

from __future__ import annotations

import os
import re

import numpy as np

__all__ = ["read_split_file", "read_train_index", "write_split_file", "SPLIT_HEADERS"]

#: the accepted headers of a split file
SPLIT_HEADERS = ("row,split", "id,split", "split")
_SIDES = {"train": True, "test": False}


def _lines(path):
    """``(line number, fields)`` of the non-blank, non-comment lines of ``path``."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise ValueError(f"split file {name!r} is not UTF-8 text.") from None
    except OSError as exc:
        raise ValueError(f"split file {name!r} cannot be read: {exc.strerror or exc}.") \
            from None
    for no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield no, [f.strip() for f in re.split(r"[,\t ]+", line) if f.strip()]


def _side(value: str, name: str, no: int) -> bool:
    side = _SIDES.get(value.lower())
    if side is None:
        raise ValueError(f"split file {name!r} line {no}: expected 'train' or 'test', got "
                         f"{value!r}.")
    return side


def read_split_file(path, n_rows: int, labels=None) -> np.ndarray:
    """The training rows named by a split file (format in this module's description).

    Parameters
    ----------
    path : str or path-like
    n_rows : int
        Rows of the data the file splits.
    labels : array-like of shape (n_rows,), optional
        Identity / category of each row; needed by an ``id,split`` file.

    Returns
    -------
    ndarray of bool, shape (n_rows,)
        ``True`` for a training row.

    Raises
    ------
    ValueError
        One line naming the file, the line and what was expected: an unknown header, a side
        other than ``train`` / ``test``, a row or identity that is not in the data, named
        twice or not named, or a side left empty.

    Examples
    --------
    >>> import os, tempfile
    >>> from crossmetric.protocols.split_files import read_split_file
    >>> path = os.path.join(tempfile.mkdtemp(), "split.csv")
    >>> _ = open(path, "w").write("id,split\\n0,train\\n1,test\\n")
    >>> read_split_file(path, 4, labels=[0, 0, 1, 1]).tolist()
    [True, True, False, False]
    """
    name = os.fspath(path)
    lines = list(_lines(path))
    if not lines:
        raise ValueError(f"split file {name!r} is empty; expected a header "
                         f"({' | '.join(SPLIT_HEADERS)}) and one line per row or identity.")
    no, head = lines[0]
    header = ",".join(h.lower() for h in head)
    if header not in SPLIT_HEADERS:
        raise ValueError(f"split file {name!r} line {no}: expected a header "
                         f"{' | '.join(SPLIT_HEADERS)}, got {','.join(head)!r}.")
    body = lines[1:]
    width = len(head)
    for no, fields in body:
        if len(fields) != width:
            raise ValueError(f"split file {name!r} line {no}: expected {width} field(s) "
                             f"({header}), got {len(fields)}.")
    if header == "split":
        if len(body) != n_rows:
            raise ValueError(f"split file {name!r}: {len(body)} entries, but the data has "
                             f"{n_rows} rows (one train/test value per row, in row order).")
        mask = np.array([_side(f[0], name, no) for no, f in body], dtype=bool)
    elif header == "row,split":
        mask = _by_row(body, name, n_rows)
    else:
        mask = _by_id(body, name, n_rows, labels)
    for side, what in ((mask, "training"), (~mask, "test")):
        if side.sum() < 2:
            raise ValueError(f"split file {name!r} puts {int(side.sum())} rows on the {what} "
                             f"side; expected at least 2.")
    return mask


def _row(text: str, seen: np.ndarray, where: str, expected: str) -> int:
    """The 0-based row index ``text``, checked: in the data, and named once (marked in
    ``seen``); errors start with ``where``."""
    try:
        r = int(text)
    except ValueError:
        raise ValueError(f"{where}: expected {expected}, got {text!r}.") from None
    if not 0 <= r < seen.size:
        raise ValueError(f"{where}: row {r} is not in the data (rows 0..{seen.size - 1}).")
    if seen[r]:
        raise ValueError(f"{where}: row {r} is named twice.")
    seen[r] = True
    return r


def _by_row(body, name: str, n_rows: int) -> np.ndarray:
    mask = np.zeros(n_rows, bool)
    seen = np.zeros(n_rows, bool)
    for no, (row, side) in body:
        r = _row(row, seen, f"split file {name!r} line {no}", "a 0-based row index")
        mask[r] = _side(side, name, no)
    if not seen.all():
        missing = np.flatnonzero(~seen)
        raise ValueError(f"split file {name!r}: {missing.size} rows are not named (first: row "
                         f"{missing[0]}); expected every row 0..{n_rows - 1} once.")
    return mask


def _by_id(body, name: str, n_rows: int, labels) -> np.ndarray:
    if labels is None:
        raise ValueError(f"split file {name!r}: an 'id,split' file needs the identity labels "
                         "of the data.")
    text = [_id_key(v) for v in np.asarray(labels).tolist()]
    if len(text) != n_rows:
        raise ValueError(f"labels must have one entry per row ({n_rows}), got {len(text)}.")
    known = set(text)
    side_of: dict[str, bool] = {}
    for no, (ident, side) in body:
        key = _id_key(ident)
        if key not in known:
            raise ValueError(f"split file {name!r} line {no}: identity {ident!r} is not in "
                             "the data's labels.")
        if key in side_of:
            raise ValueError(f"split file {name!r} line {no}: identity {ident!r} is named "
                             "twice.")
        side_of[key] = _side(side, name, no)
    missing = sorted(known - set(side_of))
    if missing:
        raise ValueError(f"split file {name!r}: {len(missing)} identities are not named "
                         f"(first: {missing[0]!r}); expected every identity once.")
    return np.array([side_of[t] for t in text], dtype=bool)


def _id_key(value) -> str:
    """An identity as text, numbers in one spelling (``007``, ``7`` and ``7.0`` are one id:
    a folder's ``id`` group or a labels file may have been read as numbers)."""
    t = str(value).strip()
    try:
        return str(int(t))
    except ValueError:
        pass
    try:
        f = float(t)
    except ValueError:
        return t
    return str(int(f)) if f.is_integer() else repr(f)


def read_train_index(path, n_rows: int) -> np.ndarray:
    """The training rows of a file of 0-based row indices (one or more per line, separated
    by commas, tabs or spaces; ``#`` comments): a boolean mask of ``n_rows``.

    Examples
    --------
    >>> import os, tempfile
    >>> from crossmetric.protocols.split_files import read_train_index
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> _ = open(path, "w").write("0\\n2 3\\n")
    >>> read_train_index(path, 5).tolist()
    [True, False, True, True, False]
    """
    name = os.fspath(path)
    mask = np.zeros(n_rows, bool)
    for no, fields in _lines(path):
        for f in fields:
            _row(f, mask, f"train index file {name!r} line {no}", "0-based row indices")
    if mask.sum() < 2 or (~mask).sum() < 2:
        raise ValueError(f"train index file {name!r} names {int(mask.sum())} of {n_rows} rows; "
                         "expected at least 2 training and 2 test rows.")
    return mask


def write_split_file(path, train) -> None:
    """Write a ``row,split`` file (atomically) for the boolean training mask ``train``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from crossmetric.protocols.split_files import read_split_file, write_split_file
    >>> path = os.path.join(tempfile.mkdtemp(), "split.csv")
    >>> write_split_file(path, np.array([True, True, False, False]))
    >>> read_split_file(path, 4).tolist()
    [True, True, False, False]
    """
    from crossmetric.persistence import atomic_open

    train = np.asarray(train, dtype=bool)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("row,split\n")
        fh.writelines(f"{r},{'train' if t else 'test'}\n" for r, t in enumerate(train))
