"""Accuracies over k-nearest-neighbour lists, as pytorch-metric-learning's ``AccuracyCalculator``.

:func:`knn_accuracy` ranks every reference exactly (blockwise); :func:`knn_rank_report` takes
the top-``k`` lists of a faiss index (flat, IVF or HNSW) and reports CMC / mAP@R from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array, check_positive_int
from crossmetric.metrics._counts import (
    _check_ties,
    _earlier_ties,
    _groups_for,
    _label_codes,
    _relevant,
    _relevant_counts,
    _rows_per_block,
)

__all__ = ["knn_accuracy", "KNN_INDEXES", "knn_rank_report"]


# ------------------------------------------------------- accuracy calculator over kNN results
def knn_accuracy(query: ArrayLike, reference: ArrayLike, query_labels: ArrayLike,
                 reference_labels: ArrayLike, *, same_set: bool = False,
                 block_rows: int | None = None) -> dict:
    """Retrieval accuracies of embeddings, as pytorch-metric-learning's ``AccuracyCalculator``.

    For each query the references are ranked by squared Euclidean distance (ties in reference
    order, as a stable sort would), one block of queries at a time, so the full
    ``(n_query, n_reference)`` distance matrix is never held. Nothing is sorted: the place of
    a relevant reference is the count of references closer to the query (plus the tied ones in
    earlier columns), O(n_reference · R) per query (see :func:`_relevant_counts`). ``R`` is
    the number of references with the query's label (the query itself excluded when
    ``same_set``); queries with ``R = 0`` are left out of every mean.

    * ``precision_at_1`` -- the nearest reference has the query's label;
    * ``r_precision`` -- the fraction of the ``R`` nearest references that are relevant;
    * ``map_at_r`` -- MAP@R (Musgrave et al., "A metric learning reality check", 2020):
      ``(1/R) Σ_{i ≤ R} rel(i) · P@i``;
    * ``mean_average_precision`` -- the average precision over the whole ranking.

    Parameters
    ----------
    query : array-like of shape (n_query, dim)
    reference : array-like of shape (n_reference, dim)
    query_labels, reference_labels : array-like
    same_set : bool, default=False
        ``reference`` is ``query`` itself: query ``i`` does not retrieve itself.
    block_rows : int, optional
        Queries per block (default: blocks of about 16 Mi distances).

    Returns
    -------
    dict
        The four measures and ``n_queries`` (queries with ``R ≥ 1``).

    Examples
    --------
    >>> import numpy as np
    >>> emb = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> acc = knn_accuracy(emb, emb, [0, 0, 1, 1], [0, 0, 1, 1], same_set=True)
    >>> acc["precision_at_1"], acc["map_at_r"]
    (1.0, 1.0)
    """
    Q = as_float_array(query, "query", ndim=2)
    Rf = as_float_array(reference, "reference", ndim=2)
    if Q.shape[1] != Rf.shape[1]:
        raise ValueError(f"query and reference must have the same number of columns, got "
                         f"{Q.shape[1]} and {Rf.shape[1]}.")
    if same_set and Q.shape[0] != Rf.shape[0]:
        raise ValueError("same_set=True needs reference to be the query set itself (same "
                         f"number of rows), got {Q.shape[0]} and {Rf.shape[0]}.")
    n_q, n_r = Q.shape[0], Rf.shape[0]
    qc, rc = _label_codes(query_labels, reference_labels, n_q, n_r)
    groups = _groups_for(qc, rc)
    counts = groups[2]
    sq_r = np.einsum("ij,ij->i", Rf, Rf)
    p1 = rp = mapr = ap = 0.0
    n_ok = 0
    rows_per = _rows_per_block(n_r, block_rows)
    for sl in gen_batches(n_q, rows_per):
        D = (Q[sl] * -2.0) @ Rf.T  # exactly -2 (Q Rᵀ): a power of two scales every rounding
        D += np.einsum("ij,ij->i", Q[sl], Q[sl])[:, None]
        D += sq_r[None, :]
        self_cols = np.arange(sl.start, sl.stop) if same_set else None  # not a result
        R = counts[qc[sl]] - (1 if same_set else 0)
        ok = R > 0
        if not ok.any():
            continue
        k, rows, cols, vals = _relevant(D, qc[sl], groups, self_cols)
        lt, le = _relevant_counts(D, k, rows, vals, self_cols)
        pos = lt + _earlier_ties(D, rows, cols, vals, lt, le, self_cols)  # 0-based place
        hits = np.arange(vals.size) - (np.cumsum(k) - k)[rows] + 1  # relevant up to there
        prec = hits / (pos + 1.0)
        within = pos < R[rows]
        per_row = [np.bincount(rows, weights=w, minlength=R.size)[ok] / R[ok]
                   for w in (within, prec * within, prec)]
        p1 += float(np.count_nonzero(ok[rows] & (pos == 0)))
        rp += float(per_row[0].sum())
        mapr += float(per_row[1].sum())
        ap += float(per_row[2].sum())
        n_ok += int(np.count_nonzero(ok))
    if n_ok == 0:
        raise ValueError("no query has a relevant reference (a reference with its label).")
    return {"precision_at_1": p1 / n_ok, "r_precision": rp / n_ok, "map_at_r": mapr / n_ok,
            "mean_average_precision": ap / n_ok, "n_queries": n_ok}


KNN_INDEXES = ("flat", "ivf", "hnsw")


def knn_rank_report(query: ArrayLike, database: ArrayLike, query_labels: ArrayLike,
                    database_labels: ArrayLike, *, k: int = 100, index: str = "flat",
                    nlist: int | None = None, nprobe: int | None = None,
                    ef_search: int | None = None, hnsw_m: int = 32, train_size: int | None = None,
                    same_set: bool = False, ranks: Sequence[int] | None = None,
                    ties: str = "expected", n_threads: int | None = None,
                    block_rows: int | None = None,
                    random_state: int | np.random.RandomState | None = 0) -> dict:
    """Rank measures of embeddings from their ``k`` nearest neighbours, searched with faiss.

    For large retrievals (10⁵ queries × 10⁶ database items) where :func:`knn_accuracy` and
    :func:`identification_report`, which rank the whole database, take too long: the database
    goes into a faiss index (float32, squared Euclidean distance), the queries are searched in
    blocks with faiss's own threads, and every measure is computed from the lists of nearest
    items (relevant = same label). Needs faiss (``pip install 'crossmetric[retrieval]'``).
    For cosine similarity, L2-normalise the embeddings first (the ranking is the same).

    * ``index="flat"`` -- exhaustive search: the lists are exact for faiss's float32 distances
      ``‖q‖² + ‖x‖² − 2⟨q, x⟩`` (two items whose true distances differ by less than their
      float32 rounding may swap; integer-valued embeddings are exact). Ties are the items at
      equal float32 distance; faiss returns one order among them, so each list is extended
      until the group of tied items at the ``k``-th place is complete, and the measures take
      the order inside every group as ``ties`` says, as :func:`cmc` and
      :func:`mean_average_precision` do. ``cmc``, ``rank<r>`` and ``nn_accuracy`` then equal
      those of :func:`cmc` on the dense distance matrix (up to rank ``k``), and ``map_at_k``
      equals :func:`mean_average_precision` for the queries whose relevant items all lie in
      the first ``k`` places (it is a lower bound otherwise).
    * ``index="ivf"`` (``IndexIVFFlat``: ``nlist`` k-means lists trained on ``train_size``
      random database rows, ``nprobe`` of them searched) or ``"hnsw"`` (``IndexHNSWFlat``,
      ``hnsw_m`` links, ``efSearch = ef_search``), or a faiss factory string such as
      ``"IVF4096_HNSW32,Flat"`` -- approximate search, much faster; an item the index misses
      is treated as absent, so the measures are those of the approximate ranking. Tune
      ``nprobe`` / ``ef_search`` against the flat index on a subsample of the queries.

    Parameters
    ----------
    query : array-like of shape (n_queries, dim)
    database : array-like of shape (n_database, dim)
        Embeddings (converted to float32).
    query_labels, database_labels : array-like
    k : int, default=100
        Length of the ranked lists: the CMC curve goes to rank ``k``; MAP@R and R-precision
        are exact for the queries with ``R <= k`` relevant items (``k`` at least the largest
        class makes them exact everywhere; ``n_queries_r_above_k`` counts the others).
    index : {"flat", "ivf", "hnsw"} or str, default="flat"
    nlist, nprobe : int, optional
        Inverted lists (default ``round(4 √n_database)``) and lists searched (faiss's 1).
    ef_search, hnsw_m : int
        HNSW search breadth (faiss's default 16, raised to the list length) and links.
    train_size : int, optional
        Database rows the IVF k-means is trained on (default ``min(n, 40 · nlist)``).
    same_set : bool, default=False
        ``database`` is ``query`` itself: query ``i`` does not retrieve item ``i``.
    ranks : tuple of int, optional
        The ``rank<r>`` entries (each ``<= k``; default those of 1, 5, 10 that are).
    ties : {"expected", "pessimistic", "optimistic"}, default="expected"
        Order of tied items (see :func:`cmc`); for every measure.
    n_threads : int, optional
        faiss's OpenMP threads for this call (default: faiss's setting).
    block_rows : int, optional
        Queries per faiss search (default: blocks of about 4 Mi results).
    random_state : int, default=0
        Seed of the IVF training sample and k-means.

    Returns
    -------
    dict
        ``cmc`` (``k`` values over all queries), ``rank<r>``, ``nn_accuracy`` (over all
        queries, as :func:`identification_report`), and over the queries with at least one
        relevant item, as pytorch-metric-learning's ``AccuracyCalculator``:
        ``precision_at_1``; ``r_precision`` (relevant items among the first ``R``, over
        ``R``); ``map_at_r`` (MAP@R: ``(1/R) Σ_{p ≤ min(R, k)} rel(p) · P@p``); ``map_at_k``
        (``(1/R) Σ_{p ≤ k} rel(p) · P@p``, its ``mean_average_precision`` with ``k``
        neighbours). Also ``n_queries``, ``n_queries_with_relevant``, ``n_queries_r_above_k``
        and ``longest_list`` (the longest list needed to complete a tie group).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> emb = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> rep = M.knn_rank_report(emb, emb, [0, 0, 1, 1], [0, 0, 1, 1], k=2, same_set=True,
    ...                         ranks=(1,))
    >>> rep["rank1"], rep["map_at_r"], rep["cmc"].tolist()
    (1.0, 1.0, [1.0, 1.0])
    """
    from crossmetric.metrics import _faiss_tools as ft
    from crossmetric.metrics._knn_report import report_from_lists

    Q = as_float_array(query, "query", ndim=2)
    X = as_float_array(database, "database", ndim=2)
    if Q.shape[1] != X.shape[1] or Q.shape[0] == 0 or X.shape[0] == 0:
        raise ValueError(f"query and database must be non-empty with the same number of "
                         f"columns, got shapes {Q.shape} and {X.shape}.")
    if same_set and (Q.shape[0] != X.shape[0] or X.shape[0] < 2):
        raise ValueError("same_set=True needs database to be the query set itself (same rows, "
                         f"at least 2), got {Q.shape[0]} and {X.shape[0]} rows.")
    k = check_positive_int(k, "k")
    ranks = (tuple(r for r in (1, 5, 10) if r <= k) if ranks is None
             else tuple(check_positive_int(r, "ranks") for r in ranks))
    if any(r > k for r in ranks):
        raise ValueError(f"ranks must be at most k={k}, got {ranks}.")
    ties = _check_ties(ties)
    try:
        ok = index in KNN_INDEXES or (index not in ft.BUILTIN_KINDS and ft.check_kind(index))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"index must be one of {KNN_INDEXES} or a faiss factory string "
                         f"(e.g. 'IVF4096,Flat', 'HNSW32'), got {index!r}.")
    for value, name in ((nlist, "nlist"), (nprobe, "nprobe"), (ef_search, "ef_search"),
                        (train_size, "train_size"), (block_rows, "block_rows")):
        if value is not None:
            check_positive_int(value, name)
    if not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise ValueError(f"random_state must be a non-negative int, got {random_state!r}.")
    qc, dc = _label_codes(query_labels, database_labels, Q.shape[0], X.shape[0],
                          ("query_labels", "database_labels"))
    R = np.bincount(dc, minlength=int(max(qc.max(), dc.max())) + 1)[qc] - int(same_set)
    Q = np.ascontiguousarray(Q, dtype=np.float32)
    X = Q if same_set and database is query else np.ascontiguousarray(X, dtype=np.float32)
    previous = None if n_threads is None else ft.set_num_threads(
        check_positive_int(n_threads, "n_threads"))
    try:
        faiss_index = ft.build_knn_index(X, index, nlist=nlist, nprobe=nprobe,
                                         hnsw_m=check_positive_int(hnsw_m, "hnsw_m"),
                                         ef_search=ef_search, train_size=train_size,
                                         seed=int(random_state))
        lists = ft.tie_complete_knn(faiss_index, Q, k, same_set=same_set,
                                    block_rows=block_rows)
        return report_from_lists(lists, qc, dc, R, k, ranks, ties)
    finally:
        if previous is not None:
            ft.set_num_threads(previous)
