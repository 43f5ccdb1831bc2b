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
Only this module and :mod:`crossmetric.metrics._faiss_tools` import faiss (extra
``crossmetric[retrieval]``). ``faiss``'s own threads: :func:`set_num_threads`.

:class:`Index` is assembled from the parts in :mod:`crossmetric._retrieval` (embedding,
building, searching, storage); this module holds its parameters and documentation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from crossmetric._base import uses_l2_score
from crossmetric._retrieval.building import IndexBuilding
from crossmetric._retrieval.embedding import IndexEmbedding
from crossmetric._retrieval.embedding import batches as _batches
from crossmetric._retrieval.embedding import rows as _rows
from crossmetric._retrieval.searching import IndexSearching
from crossmetric._retrieval.storage import IndexStorage
from crossmetric._utils.checks import check_positive_int
from crossmetric.metrics._faiss_tools import BUILTIN_KINDS, METRICS, check_kind, set_num_threads

__all__ = ["Index", "exhaustive_search", "set_num_threads"]

KINDS = BUILTIN_KINDS


class Index(IndexEmbedding, IndexBuilding, IndexSearching, IndexStorage):
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
        :class:`~crossmetric.learners.clml.CLML` models only -- its mixture components are the
        inverted lists, each database vector stored in its ``w`` most likely components (see the
        module docstring: ``ivf`` is the better path). Any other string is passed to
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

    def __init__(self, model: Any = None, kind: str = "flat", *, metric: str = "l2",
                 nlist: int | None = None, nprobe: int | None = None, m: int = 8,
                 nbits: int = 8, w: int = 1, hnsw_m: int = 32,
                 min_train_size: int | None = None, device: str = "cpu",
                 batch_size: int = 4096, random_state: int | np.random.RandomState | None = None):
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

    def __repr__(self) -> str:
        model = None if self.model is None else type(self.model).__name__
        return f"Index(model={model}, kind={self.kind!r}, ntotal={self.ntotal}, d={self.d})"


def exhaustive_search(model: Any, queries: ArrayLike, database: ArrayLike, k: int, *,
                      block_size: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
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

