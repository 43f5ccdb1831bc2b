"""Generic files as the CLI reads them: feature matrices (``.npy`` / ``.npz`` / ``.csv``), pair
lists, label files and image lists.
"""

from __future__ import annotations

import os

import numpy as np

from crossmetric._utils.array_files import check_array_file
from crossmetric._utils.checks import check_pair_labels

__all__ = ["load_features", "load_pairs", "load_labels", "load_image_list"]


#: extensions read as text matrices: comma-separated (``.csv``) or sniffed (others)
TEXT_EXTENSIONS = (".csv", ".txt", ".tsv", ".dat", "")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _require_file(path: str, what: str) -> None:
    """One-line errors for a ``path`` that is a folder or does not exist."""
    if os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is a folder, expected a file.")
    if not os.path.isfile(path):
        raise ValueError(f"{what} {path!r} not found.")


def _read_text_lines(path: str, what: str) -> list[str]:
    """The lines of a UTF-8 text file (a BOM is dropped); one-line errors for binary or empty."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if not raw.strip():
        raise ValueError(f"{what} {path!r} is empty.")
    if b"\x00" in raw[:65536]:
        raise ValueError(f"{what} {path!r} is a binary file, not text (expected numbers "
                         "separated by commas or whitespace).")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path!r} is not UTF-8 text (byte {exc.start}); expected "
                         "numbers separated by commas or whitespace.") from None
    return text.splitlines()


def _read_csv_matrix(path: str, what: str, *, delimiter: str | None = ",") -> np.ndarray:
    """Numbers from a text file: comma-separated (``delimiter=","``) or whitespace-separated
    (``delimiter=None``, the UCI layout of ``mfeat-*``); ``"auto"`` sniffs commas.

    Blank lines and lines starting with ``#`` are skipped. A UTF-8 byte-order mark is dropped. The
    first line is a header only when *every* field of it is a name (not a number); a first line
    that mixes numbers and words (a typo such as ``5,3,l``) is an error naming the line, never
    silently dropped. Every error names the line and the field.
    """
    lines = _read_text_lines(path, what)
    rows = [(k + 1, ln) for k, ln in enumerate(lines)
            if ln.strip() and not ln.lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"{what} {path!r} has no data lines.")
    if delimiter == "auto":
        delimiter = "," if "," in rows[0][1] else None

    def fields(line: str) -> list[str]:
        parts = line.split(delimiter) if delimiter else line.split()
        return [f.strip() for f in parts]

    first = fields(rows[0][1])
    numeric = [_is_number(f) for f in first]
    if not any(numeric) and all(first):
        rows = rows[1:]  # a header of names
        if not rows:
            raise ValueError(f"{what} {path!r} has a header (line 1) but no data lines.")
    body = [ln for _, ln in rows]
    try:
        if delimiter:
            arr = np.loadtxt(body, delimiter=delimiter, dtype=np.float64, ndmin=2)
        else:
            arr = np.loadtxt(body, dtype=np.float64, ndmin=2)
    except ValueError:
        arr = None
    if arr is None:  # find the first bad line, for a one-line message
        width = len(fields(rows[0][1]))
        for lineno, ln in rows:
            fs = fields(ln)
            if len(fs) != width:
                raise ValueError(f"{what} {path!r}, line {lineno}: {len(fs)} fields, but line "
                                 f"{rows[0][0]} has {width}.") from None
            for f in fs:
                if not _is_number(f):
                    raise ValueError(f"{what} {path!r}, line {lineno}: {f!r} is not a number "
                                     "(a header line must contain only names).") from None
        raise ValueError(f"{what} {path!r} is not a numeric text file.")
    return arr


def load_features(path: str | os.PathLike, *, key: str | None = None,
                  allow_images: bool = False) -> np.ndarray:
    """A feature matrix ``(n_samples, n_features)`` from ``.npy``, ``.npz`` or ``.csv``.

    With ``allow_images=True`` a 3-D ``.npy`` / ``.npz`` array ``(n_samples, h, w)`` of images
    (for :class:`crossmetric.DeepGSM`) is accepted too.

    ``.npz``: the array named ``key``, else ``"X"``, else the only array in the file.
    ``.csv``: comma-separated numbers, one optional header line of names.
    ``.txt`` / ``.tsv`` / ``.dat`` / no extension: whitespace-separated numbers (the UCI layout
    of ``mfeat-fou`` ...), or comma-separated when the first line has commas.
    Text files may start with a UTF-8 byte-order mark; see :func:`_read_csv_matrix` for the
    header rule (a header is accepted only when it holds names, never numbers).

    Raises
    ------
    ValueError
        Missing file, unknown extension, unreadable content, not 2-D, empty, or NaN/inf.
    """
    path = os.fspath(path)
    _require_file(path, "feature file")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext in (".npy", ".npz"):  # declared sizes checked before np.load allocates them
            check_array_file(path, what=f"feature file {path!r}")
        if ext == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if key is not None:
                    if key not in names:
                        raise ValueError(f"feature file {path!r} has no array {key!r}; "
                                         f"it holds {names}.")
                    name = key
                elif "X" in names:
                    name = "X"
                elif len(names) == 1:
                    name = names[0]
                else:
                    raise ValueError(f"feature file {path!r} holds several arrays {names}; "
                                     "name one (key) or call it 'X'.")
                arr = z[name]
        elif ext == ".csv":
            arr = _read_csv_matrix(path, "feature file")
        elif ext in TEXT_EXTENSIONS:
            arr = _read_csv_matrix(path, "feature file", delimiter="auto")
        else:
            raise ValueError(f"feature file {path!r}: unknown extension {ext!r}; "
                             "expected .npy, .npz, .csv or whitespace-separated text "
                             "(.txt, .dat or no extension, e.g. UCI's mfeat-fou).")
    except ValueError as exc:
        if path in str(exc):
            raise
        raise ValueError(f"feature file {path!r} could not be read: "
                         f"{' '.join(str(exc).split())}") from None
    except Exception as exc:  # corrupt archives, pickled objects, ...
        raise ValueError(f"feature file {path!r} could not be read: "
                         f"{' '.join(str(exc).split())}") from None
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"feature file {path!r} must hold numbers, got dtype {arr.dtype}.")
    ok_ndim = (2, 3) if allow_images else (2,)
    if arr.ndim not in ok_ndim or 0 in arr.shape:
        want = "a 2-D matrix (n_samples, n_features)" + (
            " or a 3-D stack of images (n_samples, h, w)" if allow_images else "")
        raise ValueError(f"feature file {path!r} must hold {want}, non-empty; got shape "
                         f"{arr.shape}.")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"feature file {path!r} contains NaN or infinity.")
    return arr


def load_pairs(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs and labels from a ``.csv`` with rows ``i, j, label`` (label +1 / -1).

    ``i`` indexes the rows of the X feature file, ``j`` those of the Y file (or of X again for
    single-modal data). One optional header line of names (``i,j,label``); a first line with a
    number in it is data, and a bad field fails naming its line. ``.npy`` / ``.npz`` holding an
    ``(n, 3)`` integer array are accepted too.

    Returns
    -------
    pairs : ndarray (n_pairs, 2) int64
    y : ndarray (n_pairs,) int64 of +1 / -1

    Raises
    ------
    ValueError
        Missing or unreadable file, not three columns, non-integer or negative indices,
        labels other than +1 / -1.
    """
    path = os.fspath(path)
    _require_file(path, "pairs file")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".npy", ".npz"):
        arr = load_features(path)
    else:
        arr = _read_csv_matrix(path, "pairs file", delimiter="," if ext == ".csv" else "auto")
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] == 0:
        raise ValueError(f"pairs file {path!r} must have three columns i, j, label "
                         f"(+1 / -1), got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"pairs file {path!r} contains NaN or infinity.")
    idx = arr[:, :2]
    if np.any(idx != np.round(idx)) or np.any(idx < 0):
        raise ValueError(f"pairs file {path!r}: columns i, j must be non-negative integer "
                         "row indices.")
    y = check_pair_labels(arr[:, 2], name=f"labels (3rd column) of pairs file {path!r}",
                          require_both=False)
    return idx.astype(np.int64), y


_HEADER_WORDS = {"label", "labels", "id", "ids", "identity", "class", "target", "y",
                 "instance", "name", "image", "file", "filename", "path"}


def load_labels(path: str | os.PathLike, *, key: str | None = None,
                what: str = "labels file") -> np.ndarray:
    """One identity per sample, from ``.npy`` / ``.npz`` (a 1-D array) or a text file.

    A text file holds one label per line (numbers or names, names may contain spaces:
    ``José Díaz``; blank lines are skipped, a UTF-8 byte-order mark is dropped). The first line
    is taken as a header when it is one of the usual column names (``label``, ``id``,
    ``class``, ``name``, ...) or when it is the only non-numeric line of a file of numbers.
    Integers are read exactly, never through a float (``9007199254740992`` and
    ``9007199254740993`` stay two identities).

    Returns
    -------
    ndarray of shape (n_samples,)
        ``int64`` when every label is an integer that int64 holds; else ``str`` (integers
        beyond int64 as their decimal digits, other labels as written).

    Raises
    ------
    ValueError
        Missing, empty or binary file, a folder, several columns (commas, tabs, or several
        numbers on a line), or a multi-dimensional array.
    """
    path = os.fspath(path)
    _require_file(path, what)
    ext = os.path.splitext(path)[1].lower()
    if ext in (".npy", ".npz"):
        try:
            check_array_file(path, what=f"{what} {path!r}")
            if ext == ".npy":
                arr = np.load(path, allow_pickle=False)
            else:
                with np.load(path, allow_pickle=False) as z:
                    names = list(z.files)
                    name = key if key is not None else (names[0] if len(names) == 1 else None)
                    if name not in names:
                        raise ValueError(f"{what} {path!r}: name the array with key among "
                                         f"{names}.")
                    arr = z[name]
        except ValueError as exc:
            if path in str(exc):
                raise
            raise ValueError(f"{what} {path!r} could not be read: "
                             f"{' '.join(str(exc).split())}") from None
        except Exception as exc:
            raise ValueError(f"{what} {path!r} could not be read: "
                             f"{' '.join(str(exc).split())}") from None
        arr = np.asarray(arr)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{what} {path!r} must hold a non-empty 1-D array, got shape "
                             f"{arr.shape}.")
        if arr.dtype.kind == "f" and np.all(arr == np.round(arr)) and np.isfinite(arr).all():
            arr = arr.astype(np.int64)
        return arr
    lines = [(k + 1, ln.strip()) for k, ln in enumerate(_read_text_lines(path, what))
             if ln.strip()]
    for lineno, ln in lines:
        fields = ln.split()
        if "," in ln or "\t" in ln or (len(fields) > 1 and all(map(_is_number, fields))):
            raise ValueError(f"{what} {path!r}, line {lineno}: expected one label per line, "
                             f"got {ln!r}.")
    values = [ln for _, ln in lines]
    numeric = [_is_number(v) for v in values]
    if values and (values[0].lower() in _HEADER_WORDS
                   or (not numeric[0] and len(values) > 1 and all(numeric[1:]))):
        values, numeric = values[1:], numeric[1:]
    if not values:
        raise ValueError(f"{what} {path!r} has no labels.")
    return _label_array(values)


_INT64 = np.iinfo(np.int64)


def _as_integer(text: str) -> int | None:
    """The integer a label's text spells (``"7"``, ``"+7"``, ``"7.0"``, ``"7e3"``), read
    exactly (never through a float, which merges integers above 2**53), else None."""
    from decimal import Decimal, InvalidOperation

    if text.isascii() and text.lstrip("+-").isdigit():
        try:
            return int(text)
        except ValueError:  # "+-5", or longer than Python converts (sys.get_int_max_str_digits)
            return None
    try:
        d = Decimal(text)
    except InvalidOperation:
        return None
    # finite, no digit-group underscores, and small enough to expand (an int64 has 19 digits)
    if "_" in text or not d.is_finite() or d.adjusted() > 18 or d != d.to_integral_value():
        return None
    return int(d)


def _label_array(values: list[str]) -> np.ndarray:
    """Labels read from text: int64 when every label is an integer int64 holds; integers
    beyond int64 as their decimal text (``"18446744073709551615"``); anything else -- names,
    with spaces or not, and non-integer numbers -- as the text itself."""
    ints = [_as_integer(v) for v in values]
    if any(i is None for i in ints):
        return np.array(values, dtype=str)
    if all(_INT64.min <= i <= _INT64.max for i in ints):
        return np.array(ints, dtype=np.int64)
    return np.array([str(i) for i in ints], dtype=str)


def load_image_list(path: str | os.PathLike, what: str = "image list") -> list[str]:
    """One image name per line (e.g. ``Aaron_Peirsol_0001.jpg``), in the row order of a feature
    file; blank lines are skipped. For :func:`lfw_pair_indices`."""
    path = os.fspath(path)
    _require_file(path, what)
    names = [ln.strip() for ln in _read_text_lines(path, what) if ln.strip()]
    if not names:
        raise ValueError(f"{what} {path!r} has no names.")
    return names
