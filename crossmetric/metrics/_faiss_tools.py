"""Helpers of :mod:`crossmetric.retrieval` that do not need the ``Index`` object.

Only this module and :mod:`crossmetric.retrieval` import faiss (lazily, extra
``crossmetric[retrieval]``).
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["faiss_module", "check_ids", "check_kind", "make_index", "set_search_breadth",
           "first_distinct", "range_concat", "strip_model", "set_num_threads",
           "to_device", "to_cpu", "METRICS", "BUILTIN_KINDS", "build_knn_index",
           "tie_complete_knn"]

BUILTIN_KINDS = ("flat", "ivf", "ivfpq", "hnsw", "gmm")
METRICS = ("l2", "ip", "cosine")
#: faiss refuses id −1 (its "missing" marker) and int64 has no room above 2**63 − 1.
MAX_ID = 2**63 - 2
#: first tokens a faiss factory string may start with (validated by faiss itself at build time)
_FACTORY_PREFIXES = ("IVF", "IMI", "HNSW", "NSG", "Flat", "PQ", "OPQ", "PCA", "SQ", "LSH",
                     "IDMap", "RR", "L2norm", "Residual", "RQ", "LSQ", "NNDescent", "ITQ")


def faiss_module():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "crossmetric.retrieval needs faiss: pip install 'crossmetric[retrieval]' "
            "(faiss-cpu)."
        ) from exc
    return faiss


def check_kind(kind) -> str:
    """A built-in kind or a faiss factory string (``"IVF4096,Flat"``, ``"HNSW32"``, …)."""
    if isinstance(kind, str) and (kind in BUILTIN_KINDS
                                  or kind.split(",")[0].startswith(_FACTORY_PREFIXES)):
        return kind
    raise ValueError(f"kind must be one of {BUILTIN_KINDS} or a faiss index_factory string "
                     f"(e.g. 'IVF1024,Flat', 'HNSW32', 'IVF1024,PQ16'), got {kind!r}.")


def check_ids(ids, n: int, held: np.ndarray) -> np.ndarray:
    """Validate user ids: integers in [0, 2**63 − 2], unique, not already in the index.

    Checked on the original dtype, so that uint64 ids above 2**63 − 1 are refused instead of
    wrapping to negative int64 values (−1 is faiss's "missing result").
    """
    ids = np.asarray(ids)
    if ids.shape != (n,) or ids.dtype.kind not in "iu":
        raise ValueError(f"ids must be an integer array of shape ({n},), got shape {ids.shape} "
                         f"and dtype {ids.dtype}.")
    if ids.size:
        if ids.dtype.kind == "i" and ids.min() < 0:
            raise ValueError("ids must be >= 0 (-1 marks a missing result); got "
                             f"{int(ids.min())}.")
        if int(ids.max()) > MAX_ID:
            raise ValueError(f"ids must be at most 2**63 - 2 = {MAX_ID} (faiss stores int64 "
                             f"ids); got {int(ids.max())}.")
    ids = ids.astype(np.int64)
    uniq = np.unique(ids)
    if uniq.size != n:
        raise ValueError(f"ids must be unique; {n - uniq.size} repeated id(s) in this call.")
    clash = np.intersect1d(uniq, held, assume_unique=True)
    if clash.size:
        raise ValueError(f"ids already in the index: {clash[:5].tolist()}"
                         f"{' …' if clash.size > 5 else ''}; remove_ids() them first.")
    return ids


def metric_code(metric: str):
    faiss = faiss_module()
    return faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT


def default_nlist(n: int) -> int:
    """``round(4 √n)``, at most ``n // 39`` (faiss's points-per-centroid minimum), at least 1."""
    return int(np.clip(round(4 * np.sqrt(n)), 1, max(1, n // 39)))


def make_index(kind: str, d: int, metric: str, *, nlist: int | None = None, m: int = 8,
               nbits: int = 8, hnsw_m: int = 32, seed: int = 0):
    """A new (untrained where applicable) faiss index that accepts ``add_with_ids``."""
    faiss = faiss_module()
    code = metric_code(metric)
    if kind == "flat":
        return faiss.IndexIDMap2(faiss.IndexFlat(d, code))
    if kind == "hnsw":
        return faiss.IndexIDMap2(faiss.IndexHNSWFlat(d, hnsw_m, code))
    if kind in ("ivf", "ivfpq"):
        quantizer = faiss.IndexFlat(d, code)
        if kind == "ivf":
            index = faiss.IndexIVFFlat(quantizer, d, nlist, code)
        else:
            if d % m:
                raise ValueError(f"m={m} sub-quantisers must divide the embedding dimension {d}.")
            index = faiss.IndexIVFPQ(quantizer, d, nlist, m, nbits, code)
            index.pq.cp.seed = seed
        index.own_fields = True
        quantizer.this.disown()
        index.cp.seed = seed
        return index
    try:
        index = faiss.index_factory(d, kind, code)
    except RuntimeError as exc:
        raise ValueError(f"faiss could not build kind={kind!r} for {d}-dimensional vectors: "
                         f"{str(exc).splitlines()[-1]}") from None
    if faiss.try_extract_index_ivf(index) is None and not isinstance(index, faiss.IndexIDMap):
        index = faiss.IndexIDMap2(index)
    return index


def factory_nlist(index) -> int | None:
    ivf = faiss_module().try_extract_index_ivf(index)
    return None if ivf is None else int(ivf.nlist)


def set_search_breadth(index, kind: str, value: int | None) -> None:
    """``nprobe`` of inverted-file indexes, ``efSearch`` of HNSW (no-op for flat)."""
    if value is None:
        return
    faiss = faiss_module()
    ps = faiss.ParameterSpace()
    if faiss.try_extract_index_ivf(index) is not None:
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = int(min(value, ivf.nlist))
    elif kind == "hnsw" or "HNSW" in kind:
        ps.set_index_parameter(index, "efSearch", int(value))


def stored_vectors(index) -> np.ndarray:
    """All vectors of a flat faiss index as a float32 NumPy array.

    The output buffer is passed explicitly, so the result stays a NumPy array even after
    ``faiss.contrib.torch_utils`` was imported in the process (pytorch-metric-learning does
    so), which makes ``reconstruct_n()`` without it return a torch tensor.
    """
    out = np.empty((index.ntotal, index.d), dtype=np.float32)
    if index.ntotal:
        index.reconstruct_n(0, index.ntotal, out)
    return out


def first_distinct(D: np.ndarray, I: np.ndarray, k: int):
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


def range_concat(parts, descending: bool):
    """Join per-batch faiss ``(lims, D, I)`` results, each query's hits sorted by distance."""
    lims, Ds, Is, offset = [np.zeros(1, dtype=np.int64)], [], [], 0
    for lim, D, I in parts:
        lim = lim.astype(np.int64)
        nq = lim.shape[0] - 1
        q = np.repeat(np.arange(nq), np.diff(lim))
        o = np.lexsort((-D if descending else D, q))
        Ds.append(D[o])
        Is.append(I[o])
        lims.append(lim[1:] + offset)
        offset += int(lim[-1])
    return (np.concatenate(lims), np.concatenate(Ds).astype(np.float32),
            np.concatenate(Is).astype(np.int64))


def strip_model(model):
    """A shallow copy of ``model`` without its ``preprocessor`` (the training samples).

    Fitted attributes are shared, not copied. A kernel model still holds the samples its
    kernel rows are computed against (``kernel_map_.X_fit_``, or the landmarks of a Nyström
    model): they are part of the function it computes.
    """
    if model is None or getattr(model, "preprocessor", None) is None:
        return model
    out = copy.copy(model)
    out.preprocessor = None
    return out


def set_num_threads(n: int) -> int:
    """Set faiss's OpenMP threads (``faiss.omp_set_num_threads``); returns the previous value."""
    faiss = faiss_module()
    previous = int(faiss.omp_get_max_threads())
    faiss.omp_set_num_threads(int(n))
    return previous


def to_device(index, device: str):
    """Move a CPU index to all GPUs (``device="gpu"``; needs a faiss built with GPU support)."""
    if device == "cpu":
        return index
    faiss = faiss_module()
    n_gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if n_gpus < 1:
        raise ValueError("device='gpu' needs faiss with GPU support and a visible GPU "
                         f"(faiss.get_num_gpus() = {n_gpus}).")
    return faiss.index_cpu_to_all_gpus(index)  # pragma: no cover - no GPU in CI


def to_cpu(index):
    faiss = faiss_module()
    if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in type(index).__name__:  # pragma: no cover
        return faiss.index_gpu_to_cpu(index)
    return index


# ------------------------------------------------ k-nearest-neighbour lists for rank measures
#: entries (queries × list length) of one faiss result block of :func:`tie_complete_knn`
_KNN_BLOCK_ENTRIES = 1 << 22


def build_knn_index(database: np.ndarray, kind: str, *, nlist: int | None = None,
                    nprobe: int | None = None, hnsw_m: int = 32, ef_search: int | None = None,
                    train_size: int | None = None, seed: int = 0):
    """A faiss index over the float32 rows of ``database`` (ids = row numbers), squared L2.

    ``kind="flat"`` is exhaustive (``IndexFlatL2``); ``"ivf"`` an ``IndexIVFFlat`` with
    ``nlist`` lists (default :func:`default_nlist`) trained by k-means on ``train_size``
    random rows (default ``min(n, 40 · nlist)``; faiss asks for at least 39 per list),
    searched with ``nprobe`` lists; ``"hnsw"`` an ``IndexHNSWFlat`` searched with
    ``efSearch = ef_search``; any other kind is a faiss factory string (:func:`make_index`).
    """
    faiss = faiss_module()
    n, d = database.shape
    if kind == "flat":
        index = faiss.IndexFlatL2(d)
    else:
        if kind in ("ivf", "ivfpq", "gmm"):
            nlist = default_nlist(n) if nlist is None else int(min(nlist, n))
        index = make_index(kind, d, "l2", nlist=nlist, hnsw_m=hnsw_m, seed=seed)
        nlist = factory_nlist(index)
    if not index.is_trained:
        size = min(n, train_size if train_size is not None
                   else 40 * nlist if nlist is not None else n)
        rows = np.random.default_rng(seed).choice(n, size, replace=False) if size < n else None
        index.train(database if rows is None else database[np.sort(rows)])
    if isinstance(index, faiss.IndexIDMap):
        index.add_with_ids(database, np.arange(n, dtype=np.int64))
    else:
        index.add(database)
    set_search_breadth(index, kind, nprobe if faiss.try_extract_index_ivf(index) is not None
                       else ef_search)
    return index


def _drop_self(D: np.ndarray, I: np.ndarray, rows: np.ndarray):
    """Remove from each row its own id (query ``i`` is database item ``i``) or, where the
    query is not among the results, the last entry: the top ``L - 1`` other items stay."""
    is_self = I == rows[:, None]
    drop = np.where(is_self.any(axis=1), np.argmax(is_self, axis=1), I.shape[1] - 1)
    keep = np.ones(I.shape, dtype=bool)
    keep[np.arange(I.shape[0]), drop] = False
    shape = (I.shape[0], I.shape[1] - 1)
    return D[keep].reshape(shape), I[keep].reshape(shape)


def tie_complete_knn(index, X: np.ndarray, k: int, *, same_set: bool = False,
                     block_rows: int | None = None):
    """Yield ``(rows, D, I)``: the nearest database items of the queries ``X[rows]``, ascending.

    Every list holds at least ``k + 1`` items, and more where needed so that the group of
    items at the distance of the ``k``-th place (equal float32 distances, as faiss computes
    them) is complete: a row whose ``k``-th and last distances are equal is searched again
    with a list four times as long, until the last distance is larger or the list holds the
    whole database. Missing results (id ``-1``) get distance ``+inf``. With ``same_set``,
    query ``i`` is database item ``i`` and is left out of its own list. For an approximate
    index "complete" means as far as the index finds the items.
    """
    n = X.shape[0]
    n_avail = int(index.ntotal) - (1 if same_set else 0)
    first = min(k + 1, n_avail)
    step = block_rows or max(1, _KNN_BLOCK_ENTRIES // (first + 1))
    pending = [(np.arange(s, min(n, s + step)), first) for s in range(0, n, step)]
    while pending:
        rows, L = pending.pop()
        D, I = index.search(X[rows], L + (1 if same_set else 0))
        if same_set:
            D, I = _drop_self(D, I, rows)
        D = np.where(I < 0, np.inf, D)
        open_ = (D[:, min(k, L) - 1] == D[:, -1]) & (I[:, -1] >= 0) & (L < n_avail)
        yield rows[~open_], D[~open_], I[~open_]
        if open_.any():
            L2 = min(4 * L, n_avail)
            more = rows[open_]
            sub = max(1, _KNN_BLOCK_ENTRIES // (L2 + 1))
            pending.extend((more[s:s + sub], L2) for s in range(0, more.size, sub))
