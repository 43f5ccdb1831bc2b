"""Building an :class:`~crossmetric.retrieval.Index`: the faiss structure, training, adding
and removing vectors (an exact store until a trainable kind has enough vectors)."""

from __future__ import annotations

from typing import Self

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._retrieval.embedding import batches, rows
from crossmetric.metrics._faiss_tools import (
    BUILTIN_KINDS,
    check_ids,
    default_nlist,
    factory_nlist,
    faiss_module,
    make_index,
    stored_vectors,
    to_device,
)

__all__ = ["IndexBuilding"]


class IndexBuilding:
    """Index construction; uses the embedding methods of
    :class:`~crossmetric._retrieval.embedding.IndexEmbedding`."""

    #: the embedding dimension (``None`` until the first vectors)
    d: int | None

    def _seed(self) -> int:
        return int(check_random_state(self.random_state).randint(0, 2**31 - 1))

    def _start(self, d: int) -> None:
        """First vectors seen: build the index, or an exact store if it must train first."""
        self.d = d
        if self.kind == "ivfpq" and d % self.m:
            raise ValueError(f"m={self.m} sub-quantisers must divide the embedding dimension {d}.")
        if self.kind == "gmm":
            faiss = faiss_module()
            k = int(self.model.gmm_.n_components)
            quantizer = faiss.IndexFlatL2(d)
            # placeholder centroids: lists are assigned from the mixture, never by the quantizer
            quantizer.add(np.zeros((k, d), dtype=np.float32))
            index = faiss.IndexIVFFlat(quantizer, d, k, faiss.METRIC_L2)
            index.own_fields = True
            quantizer.this.disown()
            self.nlist_ = k
            self._index, self.is_trained, self._trainable = index, True, False
            return
        if self.kind in ("flat", "hnsw") or (self.kind not in BUILTIN_KINDS and make_index(
                self.kind, d, self.metric).is_trained):
            self._index = to_device(make_index(self.kind, d, self.metric, hnsw_m=self.hnsw_m),
                                    self.device)
            self.is_trained, self._trainable = True, False
            return
        self._index = make_index("flat", d, self.metric)  # exact until trained
        self.is_trained, self._trainable = False, True

    def _train_threshold(self) -> int:
        if self.min_train_size is not None:
            return self.min_train_size
        nlist = self.nlist or (None if self.kind in BUILTIN_KINDS else factory_nlist(
            make_index(self.kind, self.d, self.metric)))
        base = 39 * nlist if nlist else 10_000
        return max(base, 39 * 2 ** self.nbits) if self.kind == "ivfpq" else base

    def train(self, X) -> Self:
        """Train the approximate index on ``X`` (embedded with ``transform_y``) now.

        Vectors already held (exactly, while untrained) are moved into the trained index.
        Refused once trained: :meth:`reset` first (or build a new index) to retrain.
        """
        X = rows(X, "X (training rows)")
        if self.is_trained and self.ntotal:
            raise ValueError("the index is already trained and holds vectors; call reset() "
                             "before train() to retrain (or build a new Index).")
        if X.shape[0] == 0:
            raise ValueError("X (training rows) has no rows.")
        Z = self._embed_all(X, "y")
        if self._index is None:
            self._start(Z.shape[1])
        if self._trainable:
            self._train_on(Z)
        return self

    def _train_on(self, Z: np.ndarray) -> None:
        n = Z.shape[0]
        seed = self._seed()
        if self.kind in ("ivf", "ivfpq"):
            nlist = self.nlist if self.nlist is not None else default_nlist(n)
            if nlist > n:
                raise ValueError(f"nlist={nlist} exceeds the {n} training vectors.")
            if self.kind == "ivfpq" and n < 2 ** self.nbits:
                raise ValueError(f"nbits={self.nbits} needs at least {2 ** self.nbits} training "
                                 f"vectors, got {n}; lower nbits.")
            index = make_index(self.kind, self.d, self.metric, nlist=nlist, m=self.m,
                               nbits=self.nbits, seed=seed)
        else:
            index = make_index(self.kind, self.d, self.metric)
            nlist = factory_nlist(index)
        n_train = min(n, 256 * nlist) if nlist else n
        rng = np.random.RandomState(seed)
        sample = Z if n_train == n else Z[np.sort(rng.choice(n, n_train, replace=False))]
        try:
            index.train(sample)
        except RuntimeError as exc:
            raise ValueError(f"faiss could not train kind={self.kind!r} on {n} vectors: "
                             f"{str(exc).splitlines()[-1]}") from None
        store = self._index
        if store is not None and store.ntotal and not self.is_trained:
            ids = faiss_module().vector_to_array(store.id_map).astype(np.int64)
            index.add_with_ids(stored_vectors(store.index), ids)
        self.nlist_ = nlist
        self._index, self.is_trained = to_device(index, self.device), True

    def add(self, X, ids=None) -> Self:
        """Embed ``X`` with ``model.transform_y`` and add it to the index.

        Parameters
        ----------
        X : array-like of shape (n, n_features_y)
            Database rows (already-embedded vectors when ``model`` is None); at least one.
        ids : array-like of int, shape (n,), optional
            Unique ids in ``[0, 2**63 − 2]`` not already in the index, returned by
            :meth:`search`; default: consecutive integers after the largest id so far.

        Returns
        -------
        self
        """
        X = rows(X, "X (database)")
        n = X.shape[0]
        if n == 0:
            raise ValueError("X (database) has no rows; add at least one vector.")
        ids = (np.arange(self._next_id, self._next_id + n, dtype=np.int64) if ids is None
               else check_ids(ids, n, self._ids))
        Z = self._embed_all(X, "y")
        if self._index is None:
            self._start(Z.shape[1])
        if not self.is_trained and not self.ntotal and n >= self._train_threshold():
            self._train_on(Z)  # enough vectors at once: train on them, skip the exact store
        if self.kind == "gmm":
            from faiss.contrib.ivf_tools import add_preassigned

            for sl in batches(n, self.batch_size):
                top = self._top_components(X[sl], self.w)
                wi = top.shape[1]
                # keep named references: faiss.contrib's add_preassigned rebinds its ``ids``
                # argument to a raw pointer, which frees a temporary array before use
                xb = np.ascontiguousarray(np.repeat(Z[sl], wi, axis=0))
                lists = np.ascontiguousarray(top.ravel())
                xids = np.ascontiguousarray(np.repeat(ids[sl], wi))
                add_preassigned(self._index, xb, lists, xids)
            self.w_add_ = min(self.w, self.nlist_)
        else:
            self._index.add_with_ids(Z, ids)
        self.ntotal += n
        self._ids = np.union1d(self._ids, ids)
        self._next_id = max(self._next_id, int(ids.max()) + 1)
        if not self.is_trained and self.ntotal >= self._train_threshold():
            store = self._index
            self._train_on(stored_vectors(store.index))
        return self

    def remove_ids(self, ids) -> int:
        """Remove the vectors with these ids; returns how many were removed."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"ids must be a 1-D integer array, got shape {ids.shape} and dtype "
                             f"{ids.dtype}.")
        if self._index is None:
            return 0
        ids = np.intersect1d(ids.astype(np.int64), self._ids)
        try:
            self._index.remove_ids(ids)
        except RuntimeError:
            raise ValueError(f"kind={self.kind!r} does not support remove_ids (faiss's HNSW "
                             "cannot delete); rebuild the index without them.") from None
        self._ids = np.setdiff1d(self._ids, ids, assume_unique=True)
        self.ntotal = int(self._ids.size)
        return int(ids.size)

    def reset(self) -> Self:
        """Remove every vector, keep the training (an untrained index forgets its store)."""
        if self._index is not None:
            self._index.reset()
        self.ntotal = 0
        self._ids = np.empty(0, dtype=np.int64)
        return self
