"""Searching an :class:`~crossmetric.retrieval.Index`: k nearest, k-reciprocal re-ranking of
an exact index, CLML's mixture lists, and range search."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import NotFittedError

from crossmetric._retrieval.embedding import batches, rows
from crossmetric._utils.checks import check_positive_int
from crossmetric.metrics._faiss_tools import (
    faiss_module,
    first_distinct,
    range_concat,
    set_search_breadth,
    stored_vectors,
)

__all__ = ["IndexSearching"]


#: the most bytes of padding (ids ``-1`` and sentinel distances beyond ``ntotal``) that
#: :meth:`IndexSearching.search` returns before it clamps ``k`` to ``ntotal``
PAD_LIMIT_BYTES = 1 << 28


def _padded_columns(k: int, queries, ntotal: int) -> int:
    """``k``, or ``ntotal`` (with a warning) when padding ``k - ntotal`` columns of every
    query would take more than :data:`PAD_LIMIT_BYTES`."""
    if ntotal <= 0 or k <= ntotal:
        return k
    n_queries = len(queries) if hasattr(queries, "__len__") else 1
    pad = n_queries * (k - ntotal) * 12  # float32 distance + int64 id
    if pad <= PAD_LIMIT_BYTES:
        return k
    warnings.warn(f"k={k} is more than the {ntotal} items of the index: returning {ntotal} "
                  f"columns per query (padding to k with id -1 would take "
                  f"{pad / 2**30:.1f} GiB).", UserWarning, stacklevel=3)
    return ntotal


class IndexSearching:
    """Queries against a built index."""

    def _prepare_search(self, Q, nprobe):
        if self._index is None or self.ntotal == 0:
            raise NotFittedError("the index is empty; call add() before searching.")
        nprobe = self.nprobe if nprobe is None else check_positive_int(nprobe, "nprobe")
        if self.kind == "gmm":
            nprobe = self.w if nprobe is None else nprobe
        elif self.is_trained:
            set_search_breadth(self._index, self.kind, nprobe)
        return rows(Q, "Q (queries)"), nprobe

    def search(self, queries, k: int, *, nprobe: int | None = None,
               re_rank=False, clamp: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest database rows of each query in the learned metric.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_features_x)
            Queries (embedded with ``model.transform_x``), searched in batches; zero queries
            give empty results.
        k : int
            Neighbours per query. As in faiss, the result has ``k`` columns whatever ``k`` is:
            where fewer than ``k`` neighbours exist (``k > ntotal``, or an IVF search that
            probes too few lists) the ids are ``-1`` and the distances faiss's sentinel
            (``FLT_MAX`` for ``metric="l2"``, ``-FLT_MAX`` for ``"ip"`` / ``"cosine"``).
        nprobe : int, optional
            Search breadth for this call (see the class parameter).
        re_rank : bool or dict, default=False
            k-reciprocal re-ranking (:func:`crossmetric.metrics.re_ranking`; a dict passes
            ``k1``, ``k2``, ``lambda_value``) of the whole database for this batch of queries,
            with the queries themselves as the probe set. Exact search only
            (``kind="flat"``, ``metric="l2"``): it needs every stored vector, and memory
            ``(n_queries + ntotal)²`` -- for databases up to some 10⁴ items. The returned
            distances are then the re-ranked ones (in [0, 1]).
        clamp : bool, default=False
            Return ``min(k, ntotal)`` columns instead of ``k``. Without it, a ``k`` whose
            padding beyond ``ntotal`` would take more than 256 MiB (``k=10**12``) is clamped
            to ``ntotal`` all the same, with a ``UserWarning`` saying so.

        Returns
        -------
        distances : ndarray of shape (n_queries, k), float32
            Squared Euclidean distances in the embedding (= the model's ``pair_distance``),
            ascending (similarities, descending, for ``metric="ip"`` / ``"cosine"``).
        ids : ndarray of shape (n_queries, k), int64
            Ids of the neighbours; ``-1`` where missing.
        """
        k = check_positive_int(k, "k")
        if clamp and self.ntotal > 0:
            k = min(k, self.ntotal)
        k = _padded_columns(k, queries, self.ntotal)
        if re_rank:
            return self._search_re_ranked(queries, k, re_rank)
        Q, nprobe = self._prepare_search(queries, nprobe)
        nq = Q.shape[0]
        D = np.empty((nq, k), dtype=np.float32)
        I = np.empty((nq, k), dtype=np.int64)
        for sl in batches(nq, self.batch_size):
            Zq = self._embed(Q[sl], "x")
            if self.kind == "gmm":
                D[sl], I[sl] = self._search_gmm(Q[sl], Zq, k, nprobe)
            else:
                D[sl], I[sl] = self._index.search(Zq, k)
        sentinel = np.finfo(np.float32).max
        D[I < 0] = sentinel if self.metric == "l2" else -sentinel
        return D, I

    def _search_re_ranked(self, Q, k: int, re_rank):
        """:meth:`search` with k-reciprocal re-ranking of every stored vector."""
        from crossmetric._retrieval.refine import _re_rank_params, _sq_dist
        from crossmetric.metrics.reranking import re_ranking

        params = _re_rank_params(re_rank)
        if self.kind != "flat" or self.metric != "l2":
            raise ValueError(f"re_rank needs an exact index (kind='flat', metric='l2'), got "
                             f"kind={self.kind!r}, metric={self.metric!r}.")
        Q, _ = self._prepare_search(Q, None)
        try:
            G = stored_vectors(self._index.index)
            ids = faiss_module().vector_to_array(self._index.id_map).astype(np.int64)
        except (AttributeError, RuntimeError) as exc:
            raise ValueError(f"re_rank needs the stored vectors of a CPU flat index ({exc})."
                             ) from None
        nq = Q.shape[0]
        D = np.full((nq, k), np.finfo(np.float32).max, dtype=np.float32)  # faiss's sentinel
        I = np.full((nq, k), -1, dtype=np.int64)
        if nq == 0:
            return D, I
        Zq = self._embed_all(Q, "x").astype(np.float64)
        G = G.astype(np.float64)
        R = re_ranking(_sq_dist(Zq, G), _sq_dist(Zq, Zq), _sq_dist(G, G), **params)
        kk = min(k, G.shape[0])
        order = np.argsort(R, axis=1, kind="stable")[:, :kk]
        D[:, :kk] = np.take_along_axis(R, order, axis=1)
        I[:, :kk] = ids[order]
        return D, I

    def _search_gmm(self, Qb, Zq: np.ndarray, k: int, nprobe: int):
        top = self._top_components(Qb, nprobe)
        self._index.nprobe = top.shape[1]
        # a database vector sits in up to w_add_ lists; ask for enough results to keep k
        # distinct ones after dropping repeats
        kk = k * max(1, min(self.w_add_, top.shape[1]))
        D, I = self._index.search_preassigned(Zq, kk, top, None)
        if kk == k:
            return D, I
        return first_distinct(D, I, k)

    def range_search(self, Q, radius: float | None = None, *, nprobe: int | None = None):
        """All database rows within ``radius`` of each query (faiss's ``range_search``).

        Parameters
        ----------
        Q : array-like of shape (n_queries, n_features_x)
        radius : float, optional
            ``metric="l2"``: squared distance, results have ``d < radius``; default: the
            model's calibrated ``threshold_`` (the distance below which it predicts "same"), so
            a query with no result is *not in the gallery* (open-set identification).
            ``"ip"`` / ``"cosine"``: similarity, results have ``s > radius``; required.
        nprobe : int, optional
            Search breadth for this call.

        Returns
        -------
        lims : ndarray of shape (n_queries + 1,), int64
            Results of query ``i`` are ``distances[lims[i]:lims[i + 1]]`` and the same slice
            of ``ids``, sorted by distance (best first).
        distances : ndarray, float32
        ids : ndarray, int64
        """
        if self.kind == "gmm":
            raise ValueError("range_search is not available for kind='gmm'; use kind='ivf'.")
        if radius is None:
            if self.metric != "l2" or not hasattr(self.model, "threshold_"):
                raise ValueError("radius is required unless metric='l2' and the model has a "
                                 "calibrated threshold_.")
            radius = float(self.model.threshold_)
        radius = float(radius)
        if not np.isfinite(radius):
            raise ValueError(f"radius must be finite, got {radius}.")
        Q, _ = self._prepare_search(Q, nprobe)
        parts = []
        for sl in batches(Q.shape[0], self.batch_size):
            try:
                parts.append(self._index.range_search(self._embed(Q[sl], "x"), radius))
            except RuntimeError:
                raise ValueError(f"faiss has no range_search for kind={self.kind!r}.") from None
        if not parts:
            return np.zeros(1, dtype=np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        return range_concat(parts, descending=self.metric != "l2")
