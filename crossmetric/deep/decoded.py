"""Decoded training images kept in memory within a byte budget (DeepGSM on image files).

DeepGSM trained on lists of image files (:class:`crossmetric.deep.data.CrossDomainImages`)
decodes each drawn file with Pillow, which costs far more CPU than a small network's round
spends on it (80 PNG files of 16 × 16 pixels: about 10 ms of CPU against a 7 ms round). A
:class:`DecodedCache` keeps each decoded image -- ``uint8``, already converted and resized to
the model's input, one byte per pixel and channel -- the first time it is read, until the
budget (``DeepGSM(image_cache_mb=...)``) is used up; images read after that are decoded each
time they are drawn. Under a uniform random draw, keeping the first images is as good as any
eviction rule, and costs nothing per read. The images are the ones the files give, so the
cache changes no number of a fit. The cache is per process: each ``DataLoader`` worker keeps
its own.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["DecodedCache"]


class DecodedCache:
    """Decoded images by key, kept while their bytes fit in ``budget_bytes``.

    Parameters
    ----------
    budget_bytes : int
        Most bytes of image data held; 0 keeps nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.deep.decoded import DecodedCache
    >>> cache = DecodedCache(budget_bytes=300)
    >>> cache.put(("x", 0), np.zeros((16, 16), np.uint8))
    True
    >>> cache.put(("x", 1), np.zeros((16, 16), np.uint8))  # over the budget: not kept
    False
    >>> cache.get(("x", 0)).shape, cache.get(("x", 1)), cache.nbytes
    ((16, 16), None, 256)
    """

    def __init__(self, budget_bytes: int):
        self.budget_bytes = max(0, int(budget_bytes))
        self.nbytes = 0
        self._items: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key):
        """The image kept under ``key``, or ``None``."""
        return self._items.get(key)

    def put(self, key, image: np.ndarray) -> bool:
        """Keep ``image`` (read-only) under ``key`` if it fits; True when it is kept."""
        with self._lock:
            if key in self._items:
                return True
            if self.nbytes + image.nbytes > self.budget_bytes:
                return False
            image = np.array(image, copy=True)
            image.setflags(write=False)
            self._items[key] = image
            self.nbytes += image.nbytes
            return True

    def __getstate__(self) -> dict:
        # sent to a spawned worker empty (and without the lock): it fills its own
        return {"budget_bytes": self.budget_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["budget_bytes"])
