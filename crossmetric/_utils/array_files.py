"""Array files (``.npy``, ``.npz``) checked against their size before anything is allocated.

``np.load`` trusts the header of a ``.npy`` array: it allocates the shape the header declares
and only then finds out that the file holds less (a 0.97 MB model file whose array declared
1 GB allocated 1 GB before it was refused). :func:`check_array_file` reads the headers only --
of the file, or of every member of an ``.npz`` archive -- and refuses, with one line naming the
file and the array, any array whose declared size exceeds the bytes that hold it. Every reader
of array files in the package calls it before ``np.load``: model and index files
(:func:`crossmetric.persistence.load_object`), feature, label and pair files
(:mod:`crossmetric.datasets.files`) and the pictures of ``crossmetric evaluate --show-ranks``.

An archive member stored uncompressed must hold exactly its array; a compressed one (as
``np.savez_compressed`` writes) may expand to at most :data:`MAX_DEFLATE_RATIO` times its
compressed size, the most DEFLATE can reach. Model and index files are written uncompressed
(:func:`crossmetric.persistence.save_object`), so ``stored_only=True`` refuses compressed
members there: their memory is then bounded by the file's size.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

__all__ = ["check_array_file", "ArrayFileError", "MAX_DEFLATE_RATIO"]

#: the largest expansion of DEFLATE (a run of equal bytes), with a margin
MAX_DEFLATE_RATIO = 1100
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"


class ArrayFileError(ValueError):
    """An array file refused by :func:`check_array_file`.

    Parameters
    ----------
    name : str
        How the file is named (its path, or the caller's words).
    member : str or None
        The archive member (without ``.npy``); ``None`` for a ``.npy`` file.
    reason : str
        What is wrong, without the names.
    """

    def __init__(self, name: str, member: str | None, reason: str):
        where = name if member is None else f"{name}: array {member!r}"
        super().__init__(f"{where}: {reason}.")
        self.name, self.member, self.reason = name, member, reason


def _size(n: int) -> str:
    """``n`` bytes in words: ``1.0 GB``, ``970.0 kB``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _declared(fh) -> tuple[int, tuple, np.dtype]:
    """``(bytes of data, shape, dtype)`` that the ``.npy`` header at ``fh``'s position
    declares; ``fh`` is left at the first byte of the data. Reads the header only.

    Raises
    ------
    ValueError
        The reason, when the header cannot be read.
    """
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        raise ValueError(f"unreadable .npy header ({' '.join(str(exc).split())[:120]})"
                         ) from None
    count = 1
    for n in shape:
        count *= int(n)
    itemsize = 0 if dtype.hasobject else dtype.itemsize  # object arrays: refused by np.load
    return count * itemsize, tuple(shape), dtype


def _too_large(shape, dtype, need: int, have: int) -> str:
    return (f"its header declares shape {shape} of {dtype} ({_size(need)}) but the file "
            f"holds only {_size(have)} for it: truncated or corrupt, refused before "
            "allocating it")


def check_array_file(path, *, stored_only: bool = False, what: str | None = None) -> None:
    """Refuse an array file whose headers declare more data than the file holds.

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` file or an ``.npz`` (zip) archive; any other file (text, a pickle) is left
        to its reader.
    stored_only : bool, default=False
        Refuse compressed archive members (model and index files are never compressed).
    what : str, optional
        How the message names the file (default: its path).

    Raises
    ------
    ArrayFileError
        A ``ValueError``, one line naming the file (and the archive member): a declared
        array larger than its data, an archive member larger than the archive, a
        compressed member where ``stored_only``, or an unreadable header. A file that is no
        readable archive is left to its reader.
    """
    path = os.fspath(path)
    name = what or path
    try:
        total = os.path.getsize(path)
        with open(path, "rb") as fh:
            magic = fh.read(6)
            if magic == _NPY_MAGIC:
                fh.seek(0)
                try:
                    need, shape, dtype = _declared(fh)
                except ValueError as exc:
                    raise ArrayFileError(name, None, str(exc)) from None
                have = total - fh.tell()
                if need > have:
                    raise ArrayFileError(name, None, _too_large(shape, dtype, need, have))
                return
    except OSError:
        return  # unreadable: the reader says so in its own words
    if magic[:4] != _ZIP_MAGIC:
        return
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError,
            OSError, RuntimeError, ValueError):
        return  # not a readable archive: the reader says so in its own words
    with zf:
        for info in zf.infolist():
            member = info.filename.removesuffix(".npy")
            try:
                reason = _check_member(zf, info, total, stored_only)
            except (ValueError, zipfile.BadZipFile, NotImplementedError, EOFError, OSError,
                    RuntimeError) as exc:
                reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
                if type(exc) is ValueError:
                    reason = str(exc)
            if reason is not None:
                raise ArrayFileError(name, member, reason)


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, total: int,
                  stored_only: bool) -> str | None:
    """What is wrong with one archive member (``None``: nothing)."""
    stored = info.compress_type == zipfile.ZIP_STORED
    if stored_only and not stored:
        return ("it is compressed, and crossmetric writes these files uncompressed "
                "(not one of its files)")
    if info.header_offset + info.compress_size > total:
        return (f"the archive declares {_size(info.compress_size)} for it but the file has "
                f"only {_size(total)}: truncated or corrupt")
    limit = info.compress_size if stored else info.compress_size * MAX_DEFLATE_RATIO + 1024
    if info.file_size > limit:
        return (f"the archive declares {_size(info.file_size)} for "
                f"{_size(info.compress_size)} of data: corrupt")
    if not info.filename.endswith(".npy"):
        return None
    with zf.open(info) as member:
        need, shape, dtype = _declared(member)
        have = info.file_size - member.tell()
    return _too_large(shape, dtype, need, have) if need > have else None
