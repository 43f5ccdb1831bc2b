"""The finished (method, split) records of a benchmark run, kept as they complete.

``crossmetric benchmark --out D`` hands every (method, split) output of the protocol runner
(:func:`crossmetric.protocols.run_protocols`, ``on_output``) to :class:`RunRecords` as it
arrives in the parent process; each is written at once, atomically
(:func:`crossmetric.persistence.atomic_open`), into the run's staging area beside ``D``: the
hidden folder ``.D.staging-resume`` (``D/.staging-resume`` where ``D``'s parent is not
writable), beside the run's settings (``run.json``: a digest of the data, every method's
parameters, the seed and the protocol). A run stopped by Ctrl-C, SIGTERM, SIGKILL or a crash
leaves that folder; ``--resume`` reads it back (after checking that the settings are the same)
and the runner skips the records already there (``completed``). Once the result files have
been swapped into ``D`` the folder is removed.

While a run is alive it holds a lock on its staging folder, as :func:`atomic_folder`'s writers
do: a later run that finishes into ``D`` removes the folder of a run that is gone (an abandoned
``.D.staging-*``), never that of a live one. The records are JSON (arrays and tuples tagged);
reading them runs no code.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
from urllib.parse import quote

import numpy as np

__all__ = ["RunRecords", "data_digest", "method_settings", "record_key"]

#: the name of the staging area of records (``.D`` + this, or inside ``D`` without the dot)
STAGE = ".staging-resume"
SETTINGS = "run.json"
_FORMAT = "crossmetric-run-records"


class ResumeError(ValueError):
    """``--resume`` cannot continue: no stopped run, a live one, or other settings."""


def record_key(out) -> tuple[str, str, int]:
    """``(method, protocol, split)`` of one output of the protocol runner."""
    return str(out["method"]), str(out["protocol"]), int(out["split"])


def data_digest(*arrays) -> str:
    """SHA-256 of arrays (dtype, shape and bytes; text arrays by their values); ``None``
    entries count as absent."""
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none;")
            continue
        arr = np.asarray(a)
        if arr.dtype.kind in "OUS":
            h.update(f"text{arr.shape};".encode())
            h.update(json.dumps([str(v) for v in arr.ravel()]).encode())
            continue
        arr = np.ascontiguousarray(arr)
        h.update(f"{arr.dtype.str}{arr.shape};".encode())
        h.update(arr.data)
    return h.hexdigest()


def method_settings(est) -> dict:
    """Every constructor parameter of ``est`` (but ``preprocessor``) as ``{name: repr}``."""
    params = est.get_params(deep=False)
    return {k: repr(params[k]) for k in sorted(params) if k != "preprocessor"}


# --------------------------------------------------------------------- record encoding
def _encode(v):
    if isinstance(v, np.ndarray):
        return {"__array__": _encode(v.tolist()), "dtype": v.dtype.str}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {"__dict__": [[_encode(k), _encode(x)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {"__tuple__": [_encode(x) for x in v]}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return v
    raise TypeError(f"{type(v).__name__} cannot be recorded")


def _decode(v):
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if isinstance(v, dict):
        if "__array__" in v:
            return np.asarray(_decode(v["__array__"]), dtype=np.dtype(v["dtype"]))
        if "__tuple__" in v:
            return tuple(_decode(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {_decode(k): _decode(x) for k, x in v["__dict__"]}
        raise ValueError("unknown record entry")
    return v


def _file_name(key: tuple[str, str, int]) -> str:
    method, protocol, split = key
    return f"{protocol}-{split:05d}-{quote(method, safe='')}.json"


class RunRecords:
    """The staging area of one benchmark run's records (module docstring).

    Use :meth:`open`; :meth:`add` as each output arrives, :attr:`completed` for the runner on
    a resume, :meth:`finish` once the result files are in place, :meth:`release` otherwise.

    Attributes
    ----------
    path : str
        The staging folder.
    completed : dict
        ``{(method, protocol, split): output}`` of the records read back on a resume (the
        failed ones left out: a resume runs them again).
    resumable : bool
        Whether ``--resume`` can find this folder (a second run writing the same ``--out``
        at once records into a private folder instead).
    discarded : int
        Records of a stopped run that a new run (not a resume) removed.
    """

    def __init__(self, path: str, fd: int, resumable: bool, completed=None):
        self.path = path
        self._fd = fd
        self.resumable = resumable
        self.completed = dict(completed or {})
        self.written = 0
        self.discarded = 0

    # -------------------------------------------------------------------------- opening
    @staticmethod
    def _places(out: str) -> list[str]:
        dest = os.path.abspath(out)
        parent, name = os.path.split(dest)
        return [os.path.join(parent, f".{name}{STAGE}"), os.path.join(dest, STAGE)]

    @classmethod
    def stopped_run(cls, out) -> str:
        """The staging area of a stopped run into ``out``; :class:`ResumeError` if none."""
        out = os.fspath(out)
        places = cls._places(out)
        found = [p for p in places if os.path.isdir(p)]
        if not found:
            raise ResumeError(f"--resume: no stopped run of {out!r} to continue (its records "
                              f"would be in {places[0]!r}); run without --resume.")
        return found[0]

    @classmethod
    def open(cls, out, settings: dict, *, resume: bool = False) -> RunRecords:
        """The staging area of a run into ``out`` with ``settings`` (a flat mapping of
        JSON values: what must be equal for a resume).

        ``resume=False``: a new, empty area (the records of a stopped run into ``out`` are
        discarded). ``resume=True``: the stopped run's area, after checking that its
        settings equal ``settings``.

        Raises
        ------
        ResumeError
            ``resume=True`` and no stopped run, a run still alive, or settings that differ
            (one line naming the first difference).
        OSError
            The folder cannot be made.
        """
        from crossmetric._utils.atomic_io import _abandoned, _hold

        out = os.fspath(out)
        places = cls._places(out)
        if resume:
            path = cls.stopped_run(out)
            if not _abandoned(path):
                raise ResumeError(f"--resume: the run writing {out!r} is still running.")
            stored = _read_settings(path)
            _compare(stored, settings)
            fd = _hold(path)
            return cls(path, fd, True, _read_records(path))
        discarded = 0
        for place in places:
            if os.path.isdir(place) and _abandoned(place):   # a stopped run's: start over
                discarded += len(_read_records(place, failed=True))
                shutil.rmtree(place, ignore_errors=True)
        path, fd, resumable = _make(places, out)
        try:
            from crossmetric.persistence import atomic_open

            with atomic_open(os.path.join(path, SETTINGS), "w", encoding="utf-8") as fh:
                json.dump({"format": _FORMAT, "settings": settings}, fh, indent=1,
                          sort_keys=True)
        except BaseException:
            os.close(fd)
            shutil.rmtree(path, ignore_errors=True)
            raise
        records = cls(path, fd, resumable)
        records.discarded = discarded
        return records

    # -------------------------------------------------------------------------- records
    def add(self, out) -> None:
        """Write one output of the runner as a record (atomically); an output that JSON
        cannot hold is left out (a resume runs it again)."""
        from crossmetric.persistence import atomic_open

        try:
            text = json.dumps(_encode(out))
        except (TypeError, ValueError):
            return
        with atomic_open(os.path.join(self.path, _file_name(record_key(out))), "w",
                         encoding="utf-8") as fh:
            fh.write(text)
        self.written += 1

    def stopped(self) -> int:
        """The run stopped before its result files were written: let go of the folder and
        return the number of records kept for ``--resume`` (none: the folder is removed)."""
        n = self.n_records if self.resumable else 0
        if n:
            self.release()
        else:
            self.finish()
        return n

    def finish(self) -> None:
        """The result files are in place: remove the staging area."""
        self.release()
        shutil.rmtree(self.path, ignore_errors=True)
        parent = os.path.dirname(self.path)
        if os.path.basename(self.path) == STAGE:   # inside --out: leave no trace there
            with contextlib.suppress(OSError):
                os.rmdir(parent) if not os.listdir(parent) else None

    def release(self) -> None:
        """Let go of the lock (the records stay for ``--resume``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def n_records(self) -> int:
        """Records on disk (read back and written by this run)."""
        try:
            return sum(n.endswith(".json") and n != SETTINGS for n in os.listdir(self.path))
        except OSError:
            return 0


def _make(places: list[str], out: str) -> tuple[str, int, bool]:
    """Create the staging folder beside ``out`` (or inside it where its parent is not
    writable); a private one where another live run holds the usual name."""
    import tempfile

    from crossmetric._utils.atomic_io import _hold

    beside, inside = places
    parent = os.path.dirname(beside)
    os.makedirs(parent, exist_ok=True)
    for place in (beside, inside):
        try:
            if place == inside:
                os.makedirs(os.path.dirname(inside), exist_ok=True)
            os.mkdir(place)
        except FileExistsError:   # a live run's: record privately (not resumable)
            prefix = os.path.basename(place).removesuffix("resume")
            path = tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(place))
            return path, _hold(path), False
        except OSError as exc:
            if place == beside and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                continue
            raise
        return place, _hold(place), True
    raise OSError(errno.EACCES, f"cannot create {beside!r}")  # pragma: no cover


def _read_settings(path: str) -> dict:
    try:
        with open(os.path.join(path, SETTINGS), encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("format") != _FORMAT or not isinstance(data.get("settings"), dict):
            raise ValueError
    except (OSError, ValueError, AttributeError):
        raise ResumeError(f"--resume: {path!r} holds no readable settings of a stopped run; "
                          "run without --resume to start over.") from None
    return data["settings"]


def _read_records(path: str, failed: bool = False) -> dict:
    """The records of a stopped run, the failed ones (unless ``failed``) and unreadable ones
    left out."""
    done = {}
    for name in sorted(os.listdir(path)):
        if not name.endswith(".json") or name == SETTINGS or name.startswith("."):
            continue
        try:
            with open(os.path.join(path, name), encoding="utf-8") as fh:
                out = _decode(json.load(fh))
            key = record_key(out)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if failed or "error" not in out:
            done[key] = out
    return done


def _short(v) -> str:
    text = v if isinstance(v, str) else json.dumps(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _compare(stored: dict, now: dict) -> None:
    """Refuse (one line) at the first setting that differs."""
    for key in list(stored) + [k for k in now if k not in stored]:
        old, new = stored.get(key), now.get(key)
        if old == new:
            continue
        tail = "; run without --resume to start over."
        if key.startswith("data "):
            raise ResumeError(f"--resume: the data differ from the stopped run's "
                              f"({key[5:]} is not the same){tail}")
        if key.startswith("method "):
            name = key[7:]
            if old is None or new is None:
                what = "was not" if old is None else "is not"
                raise ResumeError(f"--resume: method {name} {what} in the stopped run's "
                                  f"methods{tail}")
            raise ResumeError(f"--resume: the parameters of {name} differ from the stopped "
                              f"run's ({_first_difference(old, new)}){tail}")
        raise ResumeError(f"--resume: {key} is {_short(new)}, the stopped run's was "
                          f"{_short(old)}{tail}")


def _first_difference(old: dict, new: dict) -> str:
    for k in [*old, *(k for k in new if k not in old)]:
        if old.get(k) != new.get(k):
            return f"{k}={_short(str(new.get(k)))} now, {_short(str(old.get(k)))} then"
    return "other parameters"  # pragma: no cover - the dicts differ somewhere
