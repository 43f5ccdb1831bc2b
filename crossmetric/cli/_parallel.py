"""joblib worker processes that end when the process that started them dies.

A ``crossmetric benchmark --n-jobs 2`` killed with SIGKILL left its loky workers (and, through
their inherited pipes, loky's and multiprocessing's resource trackers) running, re-parented to
init, 17 minutes later: nothing told them that their parent was gone. Here each worker runs
:func:`watch_parent` when it starts (loky's ``initializer``): a daemon thread that checks
every :data:`POLL_SECONDS` whether the worker's parent is still the process that started it,
and ends the worker at once (``os._exit``) when it is not. The resource trackers then see
their pipes close and end too.

A polling thread rather than Linux's ``prctl(PR_SET_PDEATHSIG)``: the death signal follows
the *thread* that forked the worker, and loky also starts workers from its manager thread, so
a worker would be killed whenever that thread ends while the pool lives on.

:func:`parent_watched_workers` makes every loky pool started inside it (joblib's default
backend, ``Parallel(n_jobs=...)`` with no backend named, and ``parallel_config("loky")``)
run :func:`watch_parent` in its workers; the command line runs each command inside it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

__all__ = ["POLL_SECONDS", "watch_parent", "parent_watched_workers"]

#: how often a worker checks that its parent is alive
POLL_SECONDS = 1.0

_watching = threading.Event()


def _parent_gone(parent_pid: int) -> bool:
    return os.getppid() != parent_pid


def _poll(parent_pid: int, interval: float) -> None:
    while not _parent_gone(parent_pid):
        time.sleep(interval)
    os._exit(1)  # the parent died: nobody will read this worker's results


def watch_parent(parent_pid: int, interval: float = POLL_SECONDS) -> None:
    """End this process (``os._exit(1)``) as soon as ``parent_pid`` is no longer its parent.

    The ``initializer`` of loky workers (:func:`parent_watched_workers`): called once in each
    worker as it starts, with the pid of the process that started the pool. Does nothing in
    that process itself, nor a second time in one worker.

    Parameters
    ----------
    parent_pid : int
        The pid of the process that started the worker.
    interval : float, default=POLL_SECONDS
        Seconds between two checks.
    """
    if os.getpid() == parent_pid or _watching.is_set():
        return
    _watching.set()
    if _parent_gone(parent_pid):  # died before this worker got here
        os._exit(1)
    threading.Thread(target=_poll, args=(parent_pid, float(interval)), daemon=True,
                     name="crossmetric-parent-watch").start()


def _watched_backend_class():
    """joblib's ``LokyBackend`` whose workers run :func:`watch_parent` (made on first use,
    so that importing this module does not import joblib)."""
    from joblib._parallel_backends import LokyBackend

    class ParentWatchedLokyBackend(LokyBackend):
        """``LokyBackend`` whose workers end when the process that started them dies."""

        def configure(self, n_jobs=1, parallel=None, prefer=None, require=None,
                      idle_worker_timeout=None, **memmapping_executor_kwargs):
            memmapping_executor_kwargs.setdefault("initializer", watch_parent)
            memmapping_executor_kwargs.setdefault("initargs", (os.getpid(),))
            return super().configure(n_jobs=n_jobs, parallel=parallel, prefer=prefer,
                                     require=require, idle_worker_timeout=idle_worker_timeout,
                                     **memmapping_executor_kwargs)

    return ParentWatchedLokyBackend


_BACKEND_CLASS = None


@contextlib.contextmanager
def parent_watched_workers() -> Iterator[None]:
    """Inside the block, loky worker processes end when this process dies.

    Registers a ``LokyBackend`` whose workers run :func:`watch_parent` under joblib's name
    ``"loky"`` -- the backend of every ``Parallel`` that names none, so the library's own
    ``Parallel`` calls (the protocols, the selection scans) need no change -- and puts the
    previous one back afterwards. An explicit other backend (``parallel_config("dask")``) and
    the ``prefer="threads"`` hint work as before.

    Yields
    ------
    None
    """
    global _BACKEND_CLASS
    from joblib import parallel as jp
    from joblib import register_parallel_backend

    if _BACKEND_CLASS is None:
        _BACKEND_CLASS = _watched_backend_class()
    previous = jp.BACKENDS.get("loky")
    if previous is None or previous is _BACKEND_CLASS:
        yield
        return
    register_parallel_backend("loky", _BACKEND_CLASS)
    try:
        yield
    finally:
        register_parallel_backend("loky", previous)
