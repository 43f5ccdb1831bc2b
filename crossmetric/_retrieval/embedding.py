"""Embedding of an :class:`~crossmetric.retrieval.Index`'s rows and queries by its model."""

from __future__ import annotations

import numpy as np
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array
from crossmetric.metrics._faiss_tools import faiss_module

__all__ = ["IndexEmbedding", "batches", "rows"]


class IndexEmbedding:
    """Database rows through ``model.transform_y``, queries through ``model.transform_x``."""

    def _embed(self, A, side: str) -> np.ndarray:
        name = "X (database)" if side == "y" else "Q (queries)"
        if self.model is None:
            arr = as_float_array(A, name, ndim=2)
        else:
            f = getattr(self.model, "transform_y" if side == "y" else "transform_x", None)
            f = f if f is not None else self.model.transform
            arr = f(A)
        if self.d is not None and arr.shape[1] != self.d:
            raise ValueError(
                f"{name} has {arr.shape[1]} dimensions (after the model), but the index holds "
                f"{self.d}-dimensional vectors."
            )
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if self.metric == "cosine":
            faiss_module().normalize_L2(arr)
        return arr

    def _embed_all(self, X, side: str) -> np.ndarray:
        return np.concatenate([self._embed(X[sl], side)
                               for sl in batches(X.shape[0], self.batch_size)])

    def _top_components(self, A, n: int) -> np.ndarray:
        P = self.model.cluster_posteriors(A)
        n = min(n, P.shape[1])
        top = np.argsort(-P, axis=1, kind="stable")[:, :n]
        return np.ascontiguousarray(top, dtype=np.int64)


def batches(n: int, size: int):
    """``gen_batches`` that also accepts ``n = 0`` (no batches)."""
    return gen_batches(n, size) if n else iter(())


def rows(A, name: str) -> np.ndarray:
    """Array view of a batch of samples (validated later by the model or ``_embed``)."""
    try:
        arr = np.asarray(A)
    except Exception as exc:
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    if arr.ndim < 2:
        raise ValueError(f"{name} must have one row per sample (2-D or more), got shape "
                         f"{arr.shape}.")
    return arr
