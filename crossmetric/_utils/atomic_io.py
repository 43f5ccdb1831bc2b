"""Atomic writes: a file or a folder of files appears complete or not at all.

:func:`atomic_path` and :func:`atomic_open` write to a temporary file in the destination's
folder and move it over the destination with ``os.replace`` only once it is complete: a run
stopped by Ctrl-C, SIGTERM or SIGKILL leaves the previous file intact (after SIGKILL a hidden
``.NAME.*.tmp`` file may stay behind; it is never read). :func:`atomic_folder` stages a
folder of files beside the destination and swaps it in as a whole under a lock: the folder
always holds one run's complete set, also after a kill at any step (the next run completes or
removes what was left, :func:`recover_folder`), and two runs writing the same folder at once
leave one run's complete set of files.

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

__all__ = ["atomic_path", "atomic_open", "atomic_folder", "recover_folder", "write_error",
           "json_ready", "write_csv_rows", "write_json_document"]


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


def write_csv_rows(path, rows, fieldnames) -> None:
    """The mappings ``rows`` as a CSV table under the header ``fieldnames``, written atomically;
    a missing or ``None`` value is an empty cell. The one table writer of the benchmark and
    reproduction results."""
    import csv

    names = list(fieldnames)
    with atomic_open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=names, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in names})


def write_json_document(path, header: dict, payload: dict) -> None:
    """``{**header, **payload}`` (``payload`` through :func:`json_ready`) as indented JSON,
    written atomically: the one JSON writer of the benchmark and reproduction results, whose
    ``header`` names the file's format, its version and crossmetric's."""
    import json

    with atomic_open(path, "w", encoding="utf-8") as fh:
        json.dump({**header, **json_ready(payload)}, fh, indent=1)


@contextlib.contextmanager
def atomic_folder(folder, owned=()) -> Iterator[str]:
    """Yield a private staging folder; at the end it replaces ``folder`` as a whole.

    ``folder`` always holds one run's complete set of files, even when the writer is killed
    (SIGKILL, power loss) at any point. The files are written into a staging folder beside
    it (``.NAME.staging-*``, NAME the folder's name); then, under an exclusive lock on the
    parent folder (POSIX ``flock``, so that two runs writing one folder at once leave the
    complete set of one of them), the swap: the staging folder is renamed ``.NAME.ready``,
    ``folder`` is renamed ``.NAME.old``, ``.NAME.ready`` is renamed ``folder`` and ``.NAME.old``
    is removed. Each step is one ``rename``; the next run (:func:`recover_folder`, under the
    same lock) completes a swap that was stopped half-way -- a ``.NAME.ready`` is complete,
    so it is moved in -- and removes a leftover ``.NAME.old`` and the staging folders of
    writers that are gone (each writer holds a lock on its own staging folder while alive).

    ``owned``: the names a run of this kind may write. The entries of the old ``folder`` that
    this run did not write and that are not ``owned`` (a user's notes) are carried into the
    new one (hard links, or copies across devices); owned names this run did not write are
    dropped, so that the folder never mixes two runs' files (an old ``roc.png`` beside a new
    run that has no ROC). On an error the staging folder is removed and ``folder`` is left
    as it was.

    Where ``folder`` cannot be renamed (a mount point) or its parent is not writable, the files
    are staged inside ``folder`` (``.staging-*``) and moved in one by one under an exclusive
    lock on ``folder`` itself (no lock file is left in it; the empty ``.crossmetric.lock`` of
    earlier versions is removed): each file is then whole, but a run killed during the moves
    may leave the folder mixed.

    Parameters
    ----------
    folder : str or path-like
        The destination folder (created, with its parents, when missing).
    owned : iterable of str, default=()
        File names that runs of this kind write.

    Yields
    ------
    str
        The staging folder to write the files into.
    """
    import shutil

    folder = os.fspath(folder)
    dest = os.path.abspath(folder)
    if os.path.islink(dest) and os.path.isdir(dest):
        dest = os.path.realpath(dest)  # swap the folder the link points to, keep the link
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise write_error(folder, NotADirectoryError(errno.ENOTDIR, "exists and is not a "
                                                                     "folder"))
    parent, name = os.path.split(dest)
    made = _missing_parents(dest)
    whole = not os.path.ismount(dest)  # a mount point cannot be renamed
    stage = None
    try:
        if whole:
            try:
                os.makedirs(parent, exist_ok=True)
                stage = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=parent)
            except OSError as exc:
                if not os.path.isdir(dest) or exc.errno not in (errno.EACCES, errno.EPERM,
                                                                errno.EROFS):
                    raise
                whole = False  # the parent is not ours to write: stage inside the folder
        if stage is None:
            os.makedirs(dest, exist_ok=True)
            stage = tempfile.mkdtemp(prefix=".staging-", dir=dest)
        stage_fd = _hold(stage)
    except OSError as exc:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        _remove_empty(made)
        raise write_error(folder, exc) from None
    done = False
    try:
        yield stage
        if whole:
            with _locked_folder(parent):
                recover_folder(dest)
                _carry_over(dest, stage, set(owned))
                _swap(dest, stage)
        else:
            _move_files(dest, stage, owned)
        done = True
    except OSError as exc:
        name_ = exc.filename if isinstance(getattr(exc, "filename", None), str) else folder
        err = write_error(name_, exc)
        if stage in str(err):  # name the destination, not the private staging folder
            new = OSError(str(err).replace(stage, folder))
            new.errno, new._crossmetric_write = err.errno, True
            err = new
        raise err from None
    finally:
        os.close(stage_fd)
        shutil.rmtree(stage, ignore_errors=True)
        if not done:  # folders this call made hold nothing: remove them
            _remove_empty(made)


def _ready(dest: str) -> str:
    parent, name = os.path.split(dest)
    return os.path.join(parent, f".{name}.ready")


def _old(dest: str) -> str:
    parent, name = os.path.split(dest)
    return os.path.join(parent, f".{name}.old")


def _swap(dest: str, stage: str) -> None:
    """Steps 1-4 of the swap (see :func:`atomic_folder`): three renames, then the removal."""
    import shutil

    ready, old = _ready(dest), _old(dest)
    try:   # a new folder gets mkdir's mode, an existing one keeps its own
        mode = os.stat(dest).st_mode & 0o7777
    except OSError:
        mode = 0o777 & ~_umask()
    os.chmod(stage, mode)
    _fsync_folder(stage)
    os.rename(stage, ready)
    if os.path.isdir(dest):
        os.rename(dest, old)
    os.rename(ready, dest)
    _fsync_folder(os.path.dirname(dest))
    shutil.rmtree(old, ignore_errors=True)


def recover_folder(folder) -> None:
    """Finish what a killed :func:`atomic_folder` left beside ``folder``.

    A ``.NAME.ready`` folder is a complete staged set: it replaces ``folder`` (the swap is
    completed). A ``.NAME.old`` folder is the set a finished swap replaced: it is removed.
    ``.NAME.staging-*`` folders whose writer is gone (no lock held on them) are removed; those
    of a live writer are left alone. Call it under the parent's lock
    (:func:`atomic_folder` does).

    Parameters
    ----------
    folder : str or path-like
    """
    import shutil

    dest = os.path.abspath(os.fspath(folder))
    parent, name = os.path.split(dest)
    ready, old = _ready(dest), _old(dest)
    if os.path.isdir(ready):
        if os.path.isdir(dest):
            if os.path.isdir(old):
                shutil.rmtree(old)
            os.rename(dest, old)
        os.rename(ready, dest)
        _fsync_folder(parent)
    if os.path.isdir(old):
        shutil.rmtree(old, ignore_errors=True)
    prefix = f".{name}.staging-"
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        if entry.startswith(prefix) and _abandoned(path):
            shutil.rmtree(path, ignore_errors=True)


def _carry_over(dest: str, stage: str, owned: set) -> None:
    """Entries of the old ``dest`` that the new set keeps: neither written by this run nor
    ``owned``; the lock and staging folders of the former in-place writer are dropped."""
    import shutil

    if not os.path.isdir(dest):
        return
    written = set(os.listdir(stage))
    for entry in os.listdir(dest):
        if entry in written or entry in owned or entry == ".crossmetric.lock" \
                or entry.startswith(".staging-"):
            continue
        src, dst = os.path.join(dest, entry), os.path.join(stage, entry)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(src, dst)


def _link_or_copy(src: str, dst: str) -> None:
    import shutil

    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _move_files(dest: str, stage: str, owned) -> None:
    """The in-place fallback (a mount point): each file staged in ``dest/.staging-*``
    replaces its namesake in ``dest`` under a lock on ``dest`` itself; owned names not
    written, the staging folders of writers that are gone and an empty ``.crossmetric.lock``
    (earlier versions' lock file) are removed."""
    import shutil

    with _locked_folder(dest):
        lock = os.path.join(dest, ".crossmetric.lock")
        with contextlib.suppress(OSError):
            if os.path.isfile(lock) and os.path.getsize(lock) == 0:
                os.remove(lock)
        written = sorted(os.listdir(stage))
        for entry in written:
            os.replace(os.path.join(stage, entry), os.path.join(dest, entry))
        for entry in set(owned) - set(written):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(dest, entry))
        for entry in os.listdir(dest):  # staging folders of writers that are gone
            path = os.path.join(dest, entry)
            if entry.startswith(".staging-") and path != stage and _abandoned(path):
                shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)


def _hold(path: str) -> int:
    """An open descriptor of ``path`` with an exclusive lock: the folder's writer is alive
    while it is held (released by the system when the writer dies)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return fd
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _abandoned(path: str) -> bool:
    """Nobody holds the lock of the staging folder ``path`` (its writer is gone)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: never remove another's folder
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked_folder(path: str):
    """An exclusive ``flock`` on the folder ``path`` itself (no lock file is left behind)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _fsync_folder(path: str) -> None:
    """Make the entries of the folder ``path`` (renames included) durable, where possible."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _missing_parents(path: str) -> list[str]:
    """The folders from ``path`` upwards that do not exist yet (deepest first)."""
    out = []
    while path and not os.path.exists(path):
        out.append(path)
        up = os.path.dirname(path)
        if up == path:
            break
        path = up
    return out


def _remove_empty(folders: list[str]) -> None:
    for path in folders:  # deepest first
        with contextlib.suppress(OSError):
            os.rmdir(path)


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
