"""Atomic writes: a file or a folder of files appears complete or not at all.

:func:`atomic_path` and :func:`atomic_open` write to a temporary file in the destination's
folder and move it over the destination with ``os.replace`` only once it is complete: a run
stopped by Ctrl-C, SIGTERM or SIGKILL leaves the previous file intact (after SIGKILL a hidden
``.NAME.*.tmp`` file may stay behind; it is never read). :func:`atomic_folder` stages several
files and moves them into a folder under a lock, so that two runs writing the same folder at
once leave one run's complete set of files.

Every writer of the package uses these helpers (the CLI, :mod:`crossmetric.retrieval`, the
result writers of :mod:`crossmetric.protocols` and :mod:`crossmetric.reproduce`, DeepGSM
checkpoints, the model files of :mod:`crossmetric.persistence`); their public import path is
:mod:`crossmetric.persistence` (``from crossmetric.persistence import atomic_open``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import tempfile
from collections.abc import Iterator

import numpy as np

__all__ = ["atomic_path", "atomic_open", "atomic_folder", "write_error", "json_ready"]


def _umask() -> int:
    """The process's umask, read without changing it where the system tells it (Linux's
    /proc), else by the set-and-restore that is the only portable way."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def json_ready(obj):
    """``obj`` as plain JSON values: arrays and tuples as lists, NumPy scalars as Python ones,
    NaN and ±inf (also inside arrays) as ``None`` -- ``json.dump`` would write them as bare
    ``NaN`` / ``Infinity``, which is not JSON."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_ready(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


# ---------------------------------------------------------------------------- atomic writes
def write_error(path, exc: OSError) -> OSError:
    """A one-line ``OSError`` saying that ``path`` could not be written, and why."""
    why = exc.strerror or str(exc) or type(exc).__name__
    if getattr(exc, "_crossmetric_write", False):  # already says which file
        return exc
    err = OSError(f"cannot write {os.fspath(path)!r}: {why}")
    err.errno = exc.errno
    err._crossmetric_write = True
    return err


@contextlib.contextmanager
def atomic_path(path) -> Iterator[str]:
    """Yield a temporary file name beside ``path``; move it onto ``path`` once the block ends.

    The temporary file is removed if the block raises (Ctrl-C included) and ``path`` keeps its
    previous content. An ``OSError`` (read-only folder, full disk) is re-raised as one line that
    names ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from crossmetric.persistence import atomic_path
    >>> folder = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(folder, "a.txt")) as tmp:
    ...     with open(tmp, "w") as fh:
    ...         _ = fh.write("done")
    >>> os.listdir(folder)
    ['a.txt']
    """
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    # The name is chosen before the file is made and the guard below covers the making, so a
    # Ctrl-C at any point (even just after the file appears) leaves no temporary file behind;
    # with ``tempfile.mkstemp`` the name was known only once the call returned.
    tmp = _temp_name(folder, name)
    try:
        for _ in range(100):
            try:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                break
            except FileExistsError:  # another writer's file: not ours to remove, so the
                tmp = _temp_name(folder, name)  # guard only ever holds an untried name
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary file name")
        yield tmp
        try:   # an existing file keeps its mode; a new one gets open()'s default
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as fh:  # on disk before it takes the destination's name
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise write_error(path, exc) from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """``open(path, mode)`` written atomically (see :func:`atomic_path`); ``mode`` "w"/"wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}.")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


@contextlib.contextmanager
def atomic_folder(folder, owned=()) -> Iterator[str]:
    """Yield a private staging folder inside ``folder``; its files replace ``folder``'s at the end.

    The move happens under an exclusive lock on ``folder/.crossmetric.lock`` (POSIX), so two
    runs that write the same folder at once leave the complete file set of one of them. On an
    error the staging folder is removed and ``folder`` is left as it was. ``owned``: the names
    a run of this kind may write; those this run did not write are removed from ``folder`` in
    the same locked step, so that the folder never mixes two runs' files (an old ``roc.png``
    beside a new run that has no ROC).
    """
    import shutil

    folder = os.fspath(folder)
    created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=".staging-", dir=folder)
    except OSError as exc:
        raise write_error(folder, exc) from None
    done = False
    try:
        yield stage
        with _locked(os.path.join(folder, ".crossmetric.lock")):
            written = sorted(os.listdir(stage))
            for name in written:
                os.replace(os.path.join(stage, name), os.path.join(folder, name))
            for name in set(owned) - set(written):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, name))
        done = True
    except OSError as exc:
        name = exc.filename if isinstance(getattr(exc, "filename", None), str) else folder
        err = write_error(name, exc)
        if stage in str(err):  # name the destination, not the private staging folder
            new = OSError(str(err).replace(stage, folder))
            new.errno, new._crossmetric_write = err.errno, True
            err = new
        raise err from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if created and not done:  # a folder this call made holds nothing: remove it
            with contextlib.suppress(OSError):
                os.rmdir(folder)


@contextlib.contextmanager
def _locked(lock_path: str):
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)  # open() applies the umask
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: os.replace of each file still atomic
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _temp_name(folder: str, name: str) -> str:
    """A hidden, random name beside ``name`` (``.NAME.<random>.tmp``) for one write."""
    return os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
