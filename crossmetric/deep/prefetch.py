"""Run an iterator one or two items ahead in a background thread of the same process.

DeepGSM's training loop on a CPU without ``DataLoader`` workers prepares each round's images
in the training process. When the images are decoded from files, :class:`Prefetch` moves that
work (drawing the round, decoding, augmenting) to a background thread, so that it overlaps
the training thread's forward and backward passes (PyTorch's operators and Pillow's decoders
release the GIL while they compute). Nothing else changes: the items are produced by the same
code in the same order, so training gives the same numbers with or without it -- provided
the iterable does not draw from torch's global generator (which the training thread's dropout
draws from): DeepGSM uses it only when every transform takes its own generator. The CPU time
of the thread is still the training process's: on a machine with no idle core it is not
saved, only moved (the decoded-image cache of :mod:`crossmetric.deep.data` is what saves it).
"""

from __future__ import annotations

import queue
import threading

__all__ = ["Prefetch"]

_END = object()


class Prefetch:
    """Iterate over ``iterable`` in a daemon thread, at most ``depth`` items ahead.

    An exception raised by the iterable is raised again, as it is, by the consuming
    ``next``. :meth:`close` stops the thread (call it when the consumer stops early).

    Examples
    --------
    >>> from crossmetric.deep.prefetch import Prefetch
    >>> it = Prefetch(i * i for i in range(5))
    >>> list(it)
    [0, 1, 4, 9, 16]
    >>> it.close()
    """

    def __init__(self, iterable, depth: int = 2):
        self._source = iter(iterable)
        self._queue: queue.Queue = queue.Queue(max(1, int(depth)))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put((True, item)):
                    return
            self._put((True, _END))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put((False, exc))

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._thread is None:  # started on first use, in the consumer's context
            self._thread = threading.Thread(target=self._run, name="crossmetric-prefetch",
                                            daemon=True)
            self._thread.start()
        while True:
            try:
                ok, item = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self._done = True
                    raise RuntimeError("the prefetching thread ended without handing over "
                                       "its next item or an error") from None
        if not ok:
            self._done = True
            raise item
        if item is _END:
            self._done = True
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the background thread and wait for it (idempotent)."""
        self._done = True
        self._stop.set()
        if self._thread is not None:
            while True:  # unblock a producer waiting on a full queue
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
            self._thread.join()
            self._thread = None
