"""Fast retrieval in a learned metric: a faiss index over any fitted model's embedding.

Every learner whose score is the squared Euclidean distance between embeddings
(``pair_distance(x, y) = ‖f(x) − g(y)‖²``: PCCA, CMML, CML_AUC, LDML, CLML, KISSME, CCA, …) turns
search in the learned metric into ℓ2 search, which faiss does exactly (``flat``) or
approximately (``ivf``, ``ivfpq``, and ``gmm`` -- the multiple-assignment retrieval the clml
paper uses, with CLML's own mixture components as the inverted lists).

Database vectors go through ``model.transform_y``, queries through ``model.transform_x``, so a
cross-modal model is searched with queries of one modality against a database of the other.
Only this module imports faiss (extra ``crossmetric[retrieval]``).
"""

from __future__ import annotations

import os

import joblib
import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted

from crossmetric._checks import as_float_array, check_positive_int

__all__ = ["Index"]

KINDS = ("flat", "ivf", "ivfpq", "gmm")
_FORMAT = 1


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "crossmetric.retrieval needs faiss: pip install 'crossmetric[retrieval]' "
            "(faiss-cpu)."
        ) from exc
    return faiss


def _uses_l2_score(model) -> bool:
    """Whether the model's distance is ‖f(x) − g(y)‖² (the pair-learner base default)."""
    from crossmetric._base import PairLearnerMixin

    if not isinstance(model, PairLearnerMixin):
        return True  # a plain transformer: ℓ2 in its output space
    cls = type(model)
    return (cls._rowwise_distance is PairLearnerMixin._rowwise_distance
            and cls._matrix_distance is PairLearnerMixin._matrix_distance)


class Index:
    """A faiss index whose distances are a fitted model's learned distance.

    Parameters
    ----------
    model : fitted pair learner or transformer, optional
        Database rows are embedded with ``model.transform_y`` and queries with
        ``model.transform_x`` (``model.transform`` for an object without them). ``None``:
        vectors are indexed as given. The model's distance must be the squared Euclidean distance
        between embeddings; a model with another score (e.g. ``GSM``, whose similarity is a
        general quadratic form, not a metric) is refused with ``ValueError``.
    kind : {"flat", "ivf", "ivfpq", "gmm"}, default="flat"
        ``flat``: exact search (``faiss.IndexFlatL2``). ``ivf``: k-means inverted lists
        (``faiss.IndexIVFFlat``; ``nlist`` lists, ``nprobe`` probed per query; exact distances
        on the probed vectors). ``ivfpq``: the same with product-quantised vectors
        (``faiss.IndexIVFPQ``; ``m`` sub-quantisers of ``nbits`` bits; approximate distances).
        ``gmm``: for :class:`~crossmetric.clml.CLML` models only -- the model's mixture
        components are the inverted lists; every database vector is stored in the ``w``
        components with the largest posterior, and each query probes its own top ``nprobe``
        components (default ``w``): the multiple-assignment retrieval of the clml paper (Jégou
        et al. 2011), with exact distances on the probed vectors.
    nlist : int, optional
        Inverted lists of ``ivf`` / ``ivfpq``. ``None``: ``round(4 √n)`` for the ``n`` vectors
        of the first :meth:`add`, at most ``n // 39`` (faiss's points-per-centroid minimum) and
        at least 1.
    nprobe : int, optional
        Lists probed per query (``ivf``, ``ivfpq``, ``gmm``). ``None``: 1 for ``ivf`` /
        ``ivfpq``, ``w`` for ``gmm``. May be changed between searches.
    m : int, default=8
        Sub-quantisers of ``ivfpq``; must divide the embedding dimension.
    nbits : int, default=8
        Bits per sub-quantiser code of ``ivfpq``.
    w : int, default=1
        ``gmm``: components each database vector is stored in (fixed at :meth:`add`).
    batch_size : int, default=4096
        Rows embedded and searched at a time (memory stays bounded for any number of queries).
    random_state : int, RandomState instance or None
        Seeds the training subsample and faiss's k-means.

    Attributes
    ----------
    ntotal : int
        Vectors in the index.
    d : int or None
        Embedding dimension (after the first :meth:`add`).

    Notes
    -----
    Distances are squared Euclidean distances in the embedding, computed by faiss in float32:
    for an exact ``flat`` index they equal the model's ``cross_distance`` up to float32 rounding.
    ``ivf`` and ``ivfpq`` train on the first :meth:`add` (at most ``256 · nlist`` random
    rows); later calls only add. Missing results (fewer than ``k`` vectors in the probed lists)
    have id ``-1`` and distance ``inf``.

    Examples
    --------
    >>> index = Index(model, kind="ivf", nprobe=8).add(database)   # doctest: +SKIP
    >>> distances, ids = index.search(queries, k=10)                # doctest: +SKIP
    """

    def __init__(self, model=None, kind: str = "flat", *, nlist: int | None = None,
                 nprobe: int | None = None, m: int = 8, nbits: int = 8, w: int = 1,
                 batch_size: int = 4096, random_state=None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}.")
        if model is not None:
            if not (hasattr(model, "transform_x") or hasattr(model, "transform")):
                raise ValueError(
                    f"model must be a fitted pair learner (with transform_x / transform_y) or "
                    f"a transformer, got {type(model).__name__}."
                )
            check_is_fitted(model)
            if not _uses_l2_score(model):
                raise ValueError(
                    f"{type(model).__name__} scores pairs with its own function, not the squared "
                    "Euclidean distance between embeddings, so an ℓ2 index cannot search it; "
                    "use model.cross_distance for exhaustive search."
                )
        if kind == "gmm" and not hasattr(model, "cluster_posteriors"):
            raise ValueError(
                "kind='gmm' uses the mixture components of a fitted CLML model as inverted "
                f"lists; got model={type(model).__name__ if model is not None else None}."
            )
        if nlist is not None:
            check_positive_int(nlist, "nlist")
        if nprobe is not None:
            check_positive_int(nprobe, "nprobe")
        check_positive_int(m, "m")
        check_positive_int(nbits, "nbits")
        check_positive_int(w, "w")
        check_positive_int(batch_size, "batch_size")
        self.model = model
        self.kind = kind
        self.nlist = nlist
        self.nprobe = nprobe
        self.m = m
        self.nbits = nbits
        self.w = w
        self.batch_size = batch_size
        self.random_state = random_state
        self._index = None
        self.d: int | None = None
        self.ntotal = 0
        self._next_id = 0

    def __len__(self) -> int:
        return self.ntotal

    # ------------------------------------------------------------------ embedding
    def _embed(self, A, side: str) -> np.ndarray:
        name = "X (database)" if side == "y" else "Q (queries)"
        if self.model is None:
            arr = as_float_array(A, name, ndim=2)
        else:
            f = getattr(self.model, "transform_y" if side == "y" else "transform_x", None)
            f = f if f is not None else self.model.transform
            arr = f(A)
        if arr.shape[0] == 0:
            raise ValueError(f"{name} has no rows.")
        if self.d is not None and arr.shape[1] != self.d:
            raise ValueError(
                f"{name} has {arr.shape[1]} dimensions (after the model), but the index holds "
                f"{self.d}-dimensional vectors."
            )
        return np.ascontiguousarray(arr, dtype=np.float32)

    def _top_components(self, A, n: int) -> np.ndarray:
        P = self.model.cluster_posteriors(A)
        n = min(n, P.shape[1])
        top = np.argsort(-P, axis=1, kind="stable")[:, :n]
        return np.ascontiguousarray(top, dtype=np.int64)

    def _effective_nprobe(self) -> int:
        if self.nprobe is not None:
            return check_positive_int(self.nprobe, "nprobe")
        return self.w if self.kind == "gmm" else 1

    # ---------------------------------------------------------------------- build
    def _build(self, Z: np.ndarray) -> None:
        faiss = _faiss()
        n, d = Z.shape
        self.d = d
        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        if self.kind == "flat":
            self._index = faiss.IndexIDMap2(faiss.IndexFlatL2(d))
            return
        if self.kind == "gmm":
            k = int(self.model.gmm_.n_components)
            quantizer = faiss.IndexFlatL2(d)
            # placeholder centroids: lists are assigned from the mixture, never by the quantizer
            quantizer.add(np.zeros((k, d), dtype=np.float32))
            index = faiss.IndexIVFFlat(quantizer, d, k, faiss.METRIC_L2)
            index.own_fields = True
            quantizer.this.disown()
            self.nlist_ = k
            self._index = index
            return
        nlist = self.nlist
        if nlist is None:
            nlist = int(np.clip(round(4 * np.sqrt(n)), 1, max(1, n // 39)))
        if nlist > n:
            raise ValueError(f"nlist={nlist} exceeds the {n} vectors of the first add().")
        quantizer = faiss.IndexFlatL2(d)
        if self.kind == "ivf":
            index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_L2)
        else:
            if d % self.m:
                raise ValueError(
                    f"m={self.m} sub-quantisers must divide the embedding dimension {d}."
                )
            if n < 2 ** self.nbits:
                raise ValueError(
                    f"nbits={self.nbits} needs at least {2 ** self.nbits} training vectors in the "
                    f"first add(), got {n}; lower nbits."
                )
            index = faiss.IndexIVFPQ(quantizer, d, nlist, self.m, self.nbits)
            index.pq.cp.seed = seed
        index.own_fields = True
        quantizer.this.disown()
        index.cp.seed = seed
        n_train = min(n, 256 * nlist)
        rng = np.random.RandomState(seed)
        sample = Z if n_train == n else Z[np.sort(rng.choice(n, n_train, replace=False))]
        index.train(sample)
        self.nlist_ = nlist
        self._index = index

    def add(self, X, ids=None) -> Index:
        """Embed ``X`` with ``model.transform_y`` and add it to the index.

        Parameters
        ----------
        X : array-like of shape (n, n_features_y)
            Database rows (already-embedded vectors when ``model`` is None).
        ids : array-like of int >= 0, shape (n,), optional
            Ids returned by :meth:`search`; default: consecutive integers continuing from the
            previous ``add``.

        Returns
        -------
        self
        """
        X = _rows(X, "X (database)")
        n = X.shape[0]
        Z = np.concatenate([self._embed(X[sl], "y") for sl in gen_batches(n, self.batch_size)])
        if ids is None:
            ids = np.arange(self._next_id, self._next_id + n, dtype=np.int64)
        else:
            ids = np.asarray(ids)
            if ids.shape != (n,) or ids.dtype.kind not in "iu":
                raise ValueError(
                    f"ids must be an integer array of shape ({n},), got shape {ids.shape} and "
                    f"dtype {ids.dtype}."
                )
            if ids.size and ids.min() < 0:
                raise ValueError("ids must be >= 0 (-1 marks a missing result).")
            ids = ids.astype(np.int64)
        if self._index is None:
            self._build(Z)
        if self.kind == "gmm":
            from faiss.contrib.ivf_tools import add_preassigned

            for sl in gen_batches(n, self.batch_size):
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
        self._next_id = max(self._next_id, int(ids.max()) + 1)
        return self

    # --------------------------------------------------------------------- search
    def search(self, Q, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest database rows of each query in the learned metric.

        Parameters
        ----------
        Q : array-like of shape (n_queries, n_features_x)
            Queries (embedded with ``model.transform_x``), searched in batches of
            ``batch_size``.
        k : int
            Neighbours per query.

        Returns
        -------
        distances : ndarray of shape (n_queries, k), float32
            Squared Euclidean distances in the embedding (= the model's ``pair_distance``),
            ascending; ``inf`` where fewer than ``k`` results were found.
        ids : ndarray of shape (n_queries, k), int64
            Ids of the neighbours; ``-1`` where missing.
        """
        if self._index is None or self.ntotal == 0:
            raise NotFittedError("the index is empty; call add() before search().")
        k = check_positive_int(k, "k")
        nprobe = self._effective_nprobe()
        if self.kind in ("ivf", "ivfpq"):
            self._index.nprobe = min(nprobe, self.nlist_)
        Q = _rows(Q, "Q (queries)")
        nq = Q.shape[0]
        D = np.empty((nq, k), dtype=np.float32)
        I = np.empty((nq, k), dtype=np.int64)
        for sl in gen_batches(nq, self.batch_size):
            Zq = self._embed(Q[sl], "x")
            if self.kind == "gmm":
                D[sl], I[sl] = self._search_gmm(Q[sl], Zq, k, nprobe)
            else:
                D[sl], I[sl] = self._index.search(Zq, k)
        D[I < 0] = np.inf
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
        return _first_distinct(D, I, k)

    # ------------------------------------------------------------------ save/load
    def save(self, path: str | os.PathLike) -> None:
        """Write the index, its parameters and the model to one file (joblib + faiss bytes)."""
        faiss = _faiss()
        state = {k: v for k, v in self.__dict__.items() if k != "_index"}
        blob = None if self._index is None else faiss.serialize_index(self._index)
        joblib.dump({"format": _FORMAT, "state": state, "faiss": blob}, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Index:
        """Read an index written by :meth:`save`."""
        faiss = _faiss()
        payload = joblib.load(path)
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise ValueError(f"{path} is not a crossmetric.retrieval.Index file.")
        index = cls.__new__(cls)
        index.__dict__.update(payload["state"])
        blob = payload["faiss"]
        index._index = None if blob is None else faiss.deserialize_index(blob)
        return index

    def __repr__(self) -> str:
        model = None if self.model is None else type(self.model).__name__
        return f"Index(model={model}, kind={self.kind!r}, ntotal={self.ntotal}, d={self.d})"


def _rows(A, name: str) -> np.ndarray:
    """Array view of a batch of samples (validated later by the model or ``_embed``)."""
    try:
        arr = np.asarray(A)
    except Exception as exc:
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    if arr.ndim < 2:
        raise ValueError(f"{name} must have one row per sample (2-D or more), got shape "
                         f"{arr.shape}.")
    return arr


def _first_distinct(D: np.ndarray, I: np.ndarray, k: int):
    """Per row, the first ``k`` entries whose id has not appeared earlier in the row."""
    n, kk = I.shape
    order = np.argsort(I, axis=1, kind="stable")  # equal ids stay in distance order
    Is = np.take_along_axis(I, order, axis=1)
    dup_sorted = np.zeros_like(Is, dtype=bool)
    dup_sorted[:, 1:] = (Is[:, 1:] == Is[:, :-1]) & (Is[:, 1:] >= 0)
    dup = np.zeros_like(dup_sorted)
    np.put_along_axis(dup, order, dup_sorted, axis=1)
    # keep the order by distance, repeats moved to the end
    key = np.where(dup, kk, 0) + np.arange(kk)[None, :]
    pick = np.argsort(key, axis=1, kind="stable")[:, :k]
    Dk = np.take_along_axis(D, pick, axis=1)
    Ik = np.take_along_axis(I, pick, axis=1)
    taken_dup = np.take_along_axis(dup, pick, axis=1)
    Ik[taken_dup] = -1
    Dk[taken_dup] = np.inf
    return Dk, Ik
