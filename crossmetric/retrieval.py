"""Fast retrieval in a learned metric: a faiss index over any fitted model's embedding.

Every learner whose score is the squared Euclidean distance between embeddings
(``pair_distance(x, y) = ‖f(x) − g(y)‖²``: PCCA, CMML, CML_AUC, LDML, CLML, KISSME, CCA, …) turns
search in the learned metric into ℓ2 search, which faiss does exactly (``flat``) or
approximately (``ivf``, ``ivfpq``, ``hnsw``, any faiss factory string).

**Recommended path at scale: ``kind="ivf"`` on the learned embedding**, with ``nprobe`` chosen
for the recall you need. The multiple-assignment retrieval the clml paper cites (Jégou et al.
2011) *is* a coarse quantiser on the learned vectors -- an inverted file probed with
``nprobe`` lists -- so ``ivf`` is that method. ``gmm`` (CLML's own mixture components as
inverted lists) is kept as a curiosity: in the review's 1M-vector runs it never got within one
mAP point of exact search, while ``ivf`` did with 57-79× fewer vectors scanned.

Database vectors go through ``model.transform_y``, queries through ``model.transform_x``, so a
cross-modal model is searched with queries of one modality against a database of the other.
Only this module and :mod:`crossmetric._faiss_tools` import faiss (extra
``crossmetric[retrieval]``). ``faiss``'s own threads: :func:`set_num_threads`.
"""

from __future__ import annotations

import copy
import os

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted

from crossmetric._checks import as_float_array, check_positive_int
from crossmetric._faiss_tools import (
    BUILTIN_KINDS,
    METRICS,
    check_ids,
    check_kind,
    default_nlist,
    factory_nlist,
    faiss_module,
    first_distinct,
    make_index,
    range_concat,
    set_num_threads,
    set_search_breadth,
    stored_vectors,
    strip_model,
    to_cpu,
    to_device,
    uses_l2_score,
)

__all__ = ["Index", "exhaustive_search", "set_num_threads"]

KINDS = BUILTIN_KINDS
_first_distinct = first_distinct  # kept importable under its old name
_faiss = faiss_module


#: the former private name (kept importable)
_uses_l2_score = uses_l2_score


class Index:
    """A faiss index whose distances are a fitted model's learned distance.

    Parameters
    ----------
    model : fitted pair learner or transformer, optional
        Database rows are embedded with ``model.transform_y`` and queries with
        ``model.transform_x`` (``model.transform`` for an object without them). ``None``:
        vectors are indexed as given. The model's distance must be the squared Euclidean distance
        between embeddings; a model with another score (e.g. ``GSM``) is refused.
    kind : str, default="flat"
        ``"flat"``: exact search. ``"ivf"`` (**recommended at scale**): k-means inverted lists,
        ``nprobe`` of the ``nlist`` lists scanned per query, exact distances on them.
        ``"ivfpq"``: the same with product-quantised vectors (``m`` sub-quantisers of ``nbits``
        bits; approximate distances). ``"hnsw"``: a graph index (``faiss.IndexHNSWFlat``,
        ``hnsw_m`` links; ``nprobe`` sets ``efSearch``; no :meth:`remove_ids`). ``"gmm"``:
        :class:`~crossmetric.clml.CLML` models only -- its mixture components are the inverted
        lists, each database vector stored in its ``w`` most likely components (see the module
        docstring: ``ivf`` is the better path). Any other string is passed to
        ``faiss.index_factory`` (e.g. ``"IVF4096,Flat"``, ``"OPQ16,IVF1024,PQ16"``,
        ``"HNSW32"``).
    metric : {"l2", "ip", "cosine"}, default="l2"
        ``"l2"`` is the model's distance. ``"ip"`` / ``"cosine"`` search by inner product /
        cosine of the embeddings (vectors L2-normalised for cosine) -- *not* the model's
        distance; results then come back as similarities, largest first.
    nlist : int, optional
        Inverted lists of ``ivf`` / ``ivfpq``. ``None``: ``round(4 √n)`` for the ``n`` vectors
        the index is trained on, at most ``n // 39`` and at least 1.
    nprobe : int, optional
        Default search breadth: lists probed (``ivf``, ``ivfpq``, ``gmm``, IVF factory
        strings) or ``efSearch`` (HNSW). ``None``: faiss's default (1 list; ``w`` for
        ``gmm``). :meth:`search` and :meth:`range_search` take a per-call ``nprobe``.
    m, nbits : int, default=8, 8
        Sub-quantisers (must divide the dimension) and bits per code of ``ivfpq``.
    w : int, default=1
        ``gmm``: components each database vector is stored in (fixed at :meth:`add`).
    hnsw_m : int, default=32
        Links per node of ``hnsw``.
    min_train_size : int, optional
        For kinds that need training (``ivf``, ``ivfpq``, trainable factory strings): the index
        stays exact (a flat store) until it holds this many vectors, then trains on all of them
        (a random ``256 · nlist`` subsample at most) and moves them into the trained index.
        ``None``: ``39 · nlist`` when ``nlist`` is given, else 10,000 (``ivfpq``: at least
        ``39 · 2**nbits``). After that the quantiser is kept; to retrain, call :meth:`reset`
        and :meth:`train` (or build a new index). :meth:`train` trains at once.
    device : {"cpu", "gpu"}, default="cpu"
        ``"gpu"`` moves the index to all GPUs with ``faiss.index_cpu_to_all_gpus``; needs a
        faiss built with GPU support (``faiss.get_num_gpus() > 0``). Untested here (CI has no
        GPU and ships faiss-cpu).
    batch_size : int, default=4096
        Rows embedded and searched at a time (memory stays bounded for any number of queries).
    random_state : int, RandomState instance or None
        Seeds the training subsample and faiss's k-means.

    Attributes
    ----------
    ntotal : int
        Vectors in the index.
    d : int or None
        Embedding dimension (after the first :meth:`add` or :meth:`train`).
    is_trained : bool
        Whether the approximate structure is built (always true for ``flat``, ``hnsw``,
        ``gmm``).

    Notes
    -----
    Distances are computed by faiss in float32: for an exact ``flat`` index they equal the
    model's ``cross_distance`` up to float32 rounding. Missing results (fewer than ``k`` vectors
    in the probed lists) have id ``-1`` and faiss's sentinel distance ``FLT_MAX`` (``-FLT_MAX``
    for similarities).
    :meth:`save` writes one file in crossmetric's safe format: the faiss index serialized, and
    the model *without* its ``preprocessor`` (the training samples); a kernel model still
    carries the samples (or Nyström landmarks) its kernel rows are computed against.

    Examples
    --------
    >>> index = Index(model, kind="ivf", nprobe=16).add(database)   # doctest: +SKIP
    >>> distances, ids = index.search(queries, k=10)                 # doctest: +SKIP
    >>> lims, d, ids = index.range_search(queries)  # model.threshold_: "same" or not in gallery
    ... # doctest: +SKIP
    """

    def __init__(self, model=None, kind: str = "flat", *, metric: str = "l2",
                 nlist: int | None = None, nprobe: int | None = None, m: int = 8,
                 nbits: int = 8, w: int = 1, hnsw_m: int = 32,
                 min_train_size: int | None = None, device: str = "cpu",
                 batch_size: int = 4096, random_state=None):
        kind = check_kind(kind)
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}.")
        if device not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}.")
        if model is not None:
            if not (hasattr(model, "transform_x") or hasattr(model, "transform")):
                raise ValueError(
                    f"model must be a fitted pair learner (with transform_x / transform_y) or "
                    f"a transformer, got {type(model).__name__}."
                )
            check_is_fitted(model)
            if not uses_l2_score(model):
                raise ValueError(
                    f"{type(model).__name__} scores pairs with its own function, not the squared "
                    "Euclidean distance between embeddings, so an ℓ2 index cannot search it; "
                    "use model.cross_distance for exhaustive search."
                )
        if kind == "gmm" and (not hasattr(model, "cluster_posteriors") or metric != "l2"):
            raise ValueError(
                "kind='gmm' uses the mixture components of a fitted CLML model as inverted "
                f"lists (metric='l2'); got model={type(model).__name__}, metric={metric!r}."
            )
        for name in ("nlist", "nprobe", "min_train_size"):
            if locals()[name] is not None:
                check_positive_int(locals()[name], name)
        for name in ("m", "nbits", "w", "hnsw_m", "batch_size"):
            check_positive_int(locals()[name], name)
        self.model = model
        self.kind = kind
        self.metric = metric
        self.nlist = nlist
        self.nprobe = nprobe
        self.m = m
        self.nbits = nbits
        self.w = w
        self.hnsw_m = hnsw_m
        self.min_train_size = min_train_size
        self.device = device
        self.batch_size = batch_size
        self.random_state = random_state
        self._index = None
        self.is_trained = False
        self.d: int | None = None
        self.ntotal = 0
        self._next_id = 0
        self._ids = np.empty(0, dtype=np.int64)  # sorted ids held

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
        if self.d is not None and arr.shape[1] != self.d:
            raise ValueError(
                f"{name} has {arr.shape[1]} dimensions (after the model), but the index holds "
                f"{self.d}-dimensional vectors."
            )
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if self.metric == "cosine":
            _faiss().normalize_L2(arr)
        return arr

    def _embed_all(self, X, side: str) -> np.ndarray:
        return np.concatenate([self._embed(X[sl], side)
                               for sl in _batches(X.shape[0], self.batch_size)])

    def _top_components(self, A, n: int) -> np.ndarray:
        P = self.model.cluster_posteriors(A)
        n = min(n, P.shape[1])
        top = np.argsort(-P, axis=1, kind="stable")[:, :n]
        return np.ascontiguousarray(top, dtype=np.int64)

    # ---------------------------------------------------------------------- build
    def _seed(self) -> int:
        return int(check_random_state(self.random_state).randint(0, 2**31 - 1))

    def _start(self, d: int) -> None:
        """First vectors seen: build the index, or an exact store if it must train first."""
        self.d = d
        if self.kind == "ivfpq" and d % self.m:
            raise ValueError(f"m={self.m} sub-quantisers must divide the embedding dimension {d}.")
        if self.kind == "gmm":
            faiss = _faiss()
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

    def train(self, X) -> Index:
        """Train the approximate index on ``X`` (embedded with ``transform_y``) now.

        Vectors already held (exactly, while untrained) are moved into the trained index.
        Refused once trained: :meth:`reset` first (or build a new index) to retrain.
        """
        X = _rows(X, "X (training rows)")
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
            ids = _faiss().vector_to_array(store.id_map).astype(np.int64)
            index.add_with_ids(stored_vectors(store.index), ids)
        self.nlist_ = nlist
        self._index, self.is_trained = to_device(index, self.device), True

    def add(self, X, ids=None) -> Index:
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
        X = _rows(X, "X (database)")
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

            for sl in _batches(n, self.batch_size):
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

    def reset(self) -> Index:
        """Remove every vector, keep the training (an untrained index forgets its store)."""
        if self._index is not None:
            self._index.reset()
        self.ntotal = 0
        self._ids = np.empty(0, dtype=np.int64)
        return self

    # --------------------------------------------------------------------- search
    def _prepare_search(self, Q, nprobe):
        if self._index is None or self.ntotal == 0:
            raise NotFittedError("the index is empty; call add() before searching.")
        nprobe = self.nprobe if nprobe is None else check_positive_int(nprobe, "nprobe")
        if self.kind == "gmm":
            nprobe = self.w if nprobe is None else nprobe
        elif self.is_trained:
            set_search_breadth(self._index, self.kind, nprobe)
        return _rows(Q, "Q (queries)"), nprobe

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
            Return ``min(k, ntotal)`` columns instead of ``k``.

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
        if re_rank:
            return self._search_re_ranked(queries, k, re_rank)
        Q, nprobe = self._prepare_search(queries, nprobe)
        nq = Q.shape[0]
        D = np.empty((nq, k), dtype=np.float32)
        I = np.empty((nq, k), dtype=np.int64)
        for sl in _batches(nq, self.batch_size):
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
        from crossmetric.reid import _re_rank_params, _sq_dist
        from crossmetric.reranking import re_ranking

        params = _re_rank_params(re_rank)
        if self.kind != "flat" or self.metric != "l2":
            raise ValueError(f"re_rank needs an exact index (kind='flat', metric='l2'), got "
                             f"kind={self.kind!r}, metric={self.metric!r}.")
        Q, _ = self._prepare_search(Q, None)
        try:
            G = stored_vectors(self._index.index)
            ids = _faiss().vector_to_array(self._index.id_map).astype(np.int64)
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
        for sl in _batches(Q.shape[0], self.batch_size):
            try:
                parts.append(self._index.range_search(self._embed(Q[sl], "x"), radius))
            except RuntimeError:
                raise ValueError(f"faiss has no range_search for kind={self.kind!r}.") from None
        if not parts:
            return np.zeros(1, dtype=np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        return range_concat(parts, descending=self.metric != "l2")

    # ------------------------------------------------------------------ save/load
    def save(self, path: str | os.PathLike) -> None:
        """Write the index -- parameters, model and vectors -- to the single file ``path``.

        The file is crossmetric's safe format (:mod:`crossmetric.persistence`: an ``.npz``
        archive and a JSON header; loading it runs no code), written atomically: the faiss
        vectors (``faiss.serialize_index``) and the metadata are one file, so an interrupted
        save leaves the previous file whole. The model is saved without its ``preprocessor``
        (its training samples).
        """
        from crossmetric.persistence import save_object

        out = copy.copy(self)
        out.model = strip_model(self.model)
        save_object(path, out, kind="index")

    @classmethod
    def load(cls, path: str | os.PathLike, *, allow_pickle: bool = False) -> Index:
        """Read an index written by :meth:`save`; nothing from the file runs.

        ``allow_pickle=True`` also reads the joblib index files (and their ``.faiss`` part) of
        older crossmetric versions -- UNSAFE, a pickle runs the code it names; only for files
        you trust (then :meth:`save` it again).
        """
        from crossmetric.persistence import load_object

        path = os.fspath(path)
        index, header = load_object(path, kind="index", allow_pickle=allow_pickle)
        if header is None:  # an old joblib index, read with allow_pickle=True
            return cls._from_old_payload(path, index)
        if not isinstance(index, cls):
            raise ValueError(f"{path}: holds a {type(index).__name__}, not an Index.")
        return index

    @classmethod
    def _from_old_payload(cls, path: str, payload) -> Index:
        if not isinstance(payload, dict) or "state" not in payload:
            raise ValueError(f"{path} is not a crossmetric.retrieval.Index file.")
        index = cls.__new__(cls)
        index.__dict__.update(payload["state"])
        index._index = None
        if payload.get("has_index"):
            if not os.path.exists(path + ".faiss"):
                raise ValueError(f"{path}.faiss (the faiss index written by save) is missing.")
            index._index = to_device(_faiss().read_index(path + ".faiss"), index.device)
        return index

    def __getstate__(self):
        """Plain data: the faiss index as ``faiss.serialize_index`` bytes (uint8 array)."""
        state = self.__dict__.copy()
        native = state.pop("_index", None)
        state["_faiss_bytes_"] = (None if native is None
                                  else np.asarray(_faiss().serialize_index(to_cpu(native))))
        return state

    def __setstate__(self, state):
        state = dict(state)
        blob = state.pop("_faiss_bytes_", None)
        self.__dict__.update(state)
        self._index = None
        if blob is not None:
            blob = np.asarray(blob)
            if blob.dtype != np.uint8 or blob.ndim != 1:
                raise ValueError("the faiss part of the index is not a byte array.")
            try:
                native = _faiss().deserialize_index(np.ascontiguousarray(blob))
            except RuntimeError as exc:
                raise ValueError(f"the faiss part of the index is corrupt: "
                                 f"{str(exc).splitlines()[0]}") from None
            self._index = to_device(native, self.device)

    def __repr__(self) -> str:
        model = None if self.model is None else type(self.model).__name__
        return f"Index(model={model}, kind={self.kind!r}, ntotal={self.ntotal}, d={self.d})"


def exhaustive_search(model, queries, database, k: int, *, block_size: int = 1 << 22):
    """The ``k`` nearest database rows of each query by ``model.cross_distance``, exactly.

    The search for any fitted model, whatever its score (``GSM``'s quadratic form, a kernel
    model): no faiss, no embedding; the distances are computed in blocks of about
    ``block_size`` entries (one block of queries against the whole database at a time).
    :class:`Index` is the fast path for models whose distance is an ℓ2 distance between
    embeddings.

    Parameters
    ----------
    model : fitted pair learner
        Anything with ``cross_distance(queries, database)`` (smaller = more alike).
    queries : array-like of shape (n_queries, ...)
        First-modality samples (rows as ``cross_distance`` takes them).
    database : array-like of shape (n_database, ...)
        Second-modality samples.
    k : int
        Neighbours per query, at most the database size (larger ``k`` returns every row).
    block_size : int, default=2**22
        Distances computed at once (memory ``8 * block_size`` bytes).

    Returns
    -------
    distances : ndarray of shape (n_queries, min(k, n_database)), float64
        ``model.cross_distance`` of each neighbour, ascending.
    ids : ndarray of shape (n_queries, min(k, n_database)), int64
        Database rows of the neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean
    >>> model = Euclidean().fit([[[0.0], [0.0]], [[0.0], [1.0]]], [1, -1])
    >>> dist, ids = exhaustive_search(model, [[0.0], [2.9]], [[3.0], [1.0], [0.1]], 2)
    >>> ids.tolist()
    [[2, 1], [0, 1]]
    """
    k = check_positive_int(k, "k")
    block_size = check_positive_int(block_size, "block_size")
    Q, D = _rows(queries, "queries"), _rows(database, "database")
    if D.shape[0] == 0:
        raise ValueError("database is empty: expected at least one row.")
    k = min(k, D.shape[0])
    dist = np.empty((Q.shape[0], k))
    ids = np.empty((Q.shape[0], k), dtype=np.int64)
    rows = max(1, block_size // D.shape[0])
    for sl in _batches(Q.shape[0], rows):
        block = np.asarray(model.cross_distance(Q[sl], D))
        top = np.argpartition(block, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(block, top, axis=1), axis=1, kind="stable")
        ids[sl] = np.take_along_axis(top, order, axis=1)
        dist[sl] = np.take_along_axis(block, ids[sl], axis=1)
    return dist, ids


def _batches(n: int, size: int):
    """``gen_batches`` that also accepts ``n = 0`` (no batches)."""
    return gen_batches(n, size) if n else iter(())


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
