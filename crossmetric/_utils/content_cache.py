"""A small cache of deterministic results keyed by the content of their inputs.

A parameter selection fits many candidates on the same folds; the parts of a fit that do not
depend on what the candidates vary (a closed-form start's fold distances, a fixed PCA of the
inputs) come out the same each time. :class:`ContentCache` keeps the last few such results in
the process, keyed by a digest of the arrays and plain values they were computed from, so a
repeated computation returns the kept result. Only for functions of those inputs alone (no
unseeded randomness); a kept result is shared, so its arrays are made read-only.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

__all__ = ["ContentCache", "content_key", "plain_params"]


def content_key(*parts) -> bytes:
    """A digest of ``parts``: arrays by their dtype, shape and bytes, anything else by its
    ``repr`` (plain values: numbers, strings, ``None``, tuples of them).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric._utils.content_cache import content_key
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> content_key(a, 1) == content_key(a.copy(), 1), content_key(a, 1) == content_key(a.T, 1)
    (True, False)
    """
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        if isinstance(part, np.ndarray):
            a = np.ascontiguousarray(part)
            digest.update(repr(("array", a.dtype.str, a.shape)).encode())
            digest.update(a.data)
        else:
            digest.update(repr(("value", part)).encode())
    return digest.digest()


def _plain(value) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    return isinstance(value, tuple | list) and all(_plain(v) for v in value)


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, tuple | list) else value


def plain_params(estimator, exclude: tuple = ()) -> tuple | None:
    """``(class name, sorted parameters)`` of an estimator, hashable, without the parameters
    named in ``exclude``; ``None`` where a parameter is not a plain value (an array, an
    estimator), which no key stands for.

    Examples
    --------
    >>> from crossmetric import CCA
    >>> from crossmetric._utils.content_cache import plain_params
    >>> plain_params(CCA(n_components=2)) == plain_params(CCA(n_components=2))
    True
    """
    params = {k: v for k, v in estimator.get_params(deep=False).items() if k not in exclude}
    if not all(_plain(v) for v in params.values()):
        return None
    return (type(estimator).__qualname__,
            tuple(sorted((k, _hashable(v)) for k, v in params.items())))


class ContentCache:
    """The last ``size`` results of a computation, by :func:`content_key` of its inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric._utils.content_cache import ContentCache
    >>> cache, calls = ContentCache(2), []
    >>> def norm(a):
    ...     calls.append(1)
    ...     return np.linalg.norm(a)
    >>> a = np.ones(3)
    >>> [cache.get((a,), lambda: norm(a)) for _ in range(3)] == [np.sqrt(3)] * 3, len(calls)
    (True, 1)
    """

    def __init__(self, size: int):
        self.size = int(size)
        self._kept: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, parts: tuple | None, compute: Callable):
        """The kept result for the inputs ``parts``, else ``compute()`` (kept; its arrays made
        read-only). ``parts=None``: computed and not kept."""
        if parts is None:
            return compute()
        key = content_key(*parts)
        with self._lock:  # threads may share the cache (joblib's threading backend)
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = compute()
        _freeze(value)
        with self._lock:
            self._kept[key] = value
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


def _freeze(value) -> None:
    """Make the arrays of ``value`` (an array, or a tuple / list of them) read-only."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, tuple | list):
        for v in value:
            _freeze(v)
