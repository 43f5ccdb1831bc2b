"""Identification and retrieval measures from a distance matrix or two embeddings.

CMC, rank-r accuracy, nearest-neighbour accuracy, average precision / mAP, 1-call@n and
:func:`identification_report` (all of them from two embeddings, block by block). They work on
row blocks (``block_rows``) and rank by counting (:mod:`._counts`), never by sorting a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array, check_positive_int
from crossmetric.metrics._counts import (
    _ap_from_counts,
    _block_average_precision,
    _check_distance,
    _check_ties,
    _cmc_from_stats,
    _first_run_length,
    _groups_for,
    _hit_probability,
    _label_codes,
    _nn_hits,
    _rank_stats,
    _relevant,
    _relevant_counts,
    _rows_per_block,
    _self_columns,
    _stats_from_counts,
)

__all__ = ["cmc", "rank_accuracy", "nearest_neighbor_accuracy", "mean_average_precision",
           "average_precision_per_query", "one_call_at_n", "identification_report"]



# ------------------------------------------------------------------------- identification
def cmc(distance: ArrayLike, probe_labels: ArrayLike, gallery_labels: ArrayLike,
        max_rank: int | None = None, *, block_rows: int | None = None,
        ties: str = "expected") -> np.ndarray:
    """Cumulative match characteristic (PCCA §4.2, GSM §4).

    ``cmc[r - 1]`` is the fraction of probes whose rank is ``<= r``, where a probe's rank is the
    place of its first true match in the gallery sorted by distance. Gallery items tied with
    that match are ordered as ``ties`` says; with the default ``"expected"`` the value is the
    expectation over a random order of the tied items (so ``cmc`` may take fractional steps).
    A probe without any true match in the gallery never counts as recognised (it stays in the
    denominator).

    Parameters
    ----------
    distance : array-like of shape (n_probe, n_gallery)
        Smaller = more alike.
    probe_labels : array-like of shape (n_probe,)
    gallery_labels : array-like of shape (n_gallery,)
    max_rank : int, optional
        Length of the curve; default ``n_gallery``.
    block_rows : int, optional
        Probe rows per block (default: blocks of about 16 Mi values).
    ties : {"expected", "pessimistic", "optimistic"}, default="expected"
        How gallery items at the same distance as the closest true match are ordered:
        ``"expected"`` takes the expectation over a uniformly random order of the tied items
        (a model that maps everything to one point scores chance, e.g. rank-1 = 1/n_gallery
        with one true match per probe); ``"pessimistic"`` puts the true matches last,
        ``"optimistic"`` first (ties count as wins: an earlier convention of the library).

    Returns
    -------
    ndarray of shape (max_rank,)
        Non-decreasing, in [0, 1]; ``cmc[0]`` is the rank-1 recognition rate.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> M.cmc(D, [0, 1, 2], [0, 1, 2]).tolist()
    [0.6666666666666666, 1.0, 1.0]
    """
    ties = _check_ties(ties)
    D = _check_distance(distance)
    max_rank = D.shape[1] if max_rank is None else check_positive_int(max_rank, "max_rank")
    stats = _rank_stats(D, probe_labels, gallery_labels, block_rows=block_rows)
    return _cmc_from_stats(stats, max_rank, ties)


def rank_accuracy(distance: ArrayLike, probe_labels: ArrayLike, gallery_labels: ArrayLike,
                  rank: int = 1, *, block_rows: int | None = None, ties: str = "expected") -> float:
    """Rank-``r`` recognition rate: the fraction of probes of rank ``<= r`` (``cmc[r-1]``).

    ``ties`` as in :func:`cmc`.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> round(M.rank_accuracy(D, [0, 1, 2], [0, 1, 2], rank=1), 4)
    0.6667
    """
    rank = check_positive_int(rank, "rank")
    ties = _check_ties(ties)
    stats = _rank_stats(distance, probe_labels, gallery_labels, block_rows=block_rows)
    return float(np.mean(_hit_probability(stats, rank, ties)))


def nearest_neighbor_accuracy(distance: ArrayLike, probe_labels: ArrayLike,
                              gallery_labels: ArrayLike, *, block_rows: int | None = None,
                              ties: str = "expected") -> float:
    """Nearest-neighbour accuracy (CMML §4.1): the nearest gallery item has the probe's label.

    With several gallery items at the smallest distance, ``ties="expected"`` counts the
    fraction of them that share the probe's label (the chance that a random pick among them is
    right), ``"pessimistic"`` counts a hit only when all of them do, ``"optimistic"`` when any
    does.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> round(M.nearest_neighbor_accuracy(D, [0, 1, 2], [0, 1, 2]), 4)
    0.6667
    """
    ties = _check_ties(ties)
    stats = _rank_stats(distance, probe_labels, gallery_labels, block_rows=block_rows)
    return float(np.sum(_nn_hits(stats, ties))) / stats.shape[0]


# ------------------------------------------------------------------------------ retrieval
def average_precision_per_query(distance: ArrayLike, query_labels: ArrayLike, db_labels: ArrayLike,
                                *, same_set: bool = False, block_rows: int | None = None,
                                ties: str = "expected") -> np.ndarray:
    """Average precision of every query (NaN for a query without relevant database item).

    Relevant = same label. With ``same_set=True`` the database is the query set itself
    (square matrix, query ``i`` = item ``i``) and each query is left out of its own ranking.
    Database items at equal distance are ordered as ``ties`` says (see :func:`cmc`); without
    ties every choice equals scikit-learn's ``average_precision_score(relevant, -distance)``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> M.average_precision_per_query(D, [0, 1, 0], [0, 1, 0]).round(4).tolist()
    [1.0, 1.0, 1.0]
    """
    ties = _check_ties(ties)
    D = _check_distance(distance)
    n_q, n_d = D.shape
    qc, dc = _label_codes(query_labels, db_labels, n_q, n_d, ("query_labels", "db_labels"))
    groups = _groups_for(qc, dc)
    ap = np.empty(n_q)
    for sl in gen_batches(n_q, _rows_per_block(n_d, block_rows)):
        ap[sl] = _block_average_precision(D[sl], qc[sl], groups,
                                          _self_columns(same_set, n_q, n_d, sl), ties)
    return ap


def mean_average_precision(distance: ArrayLike, query_labels: ArrayLike, db_labels: ArrayLike, *,
                           same_set: bool = False, block_rows: int | None = None,
                           ties: str = "expected") -> float:
    """Mean average precision of a retrieval (CLML §4).

    The mean over queries of the average precision of the database ranked by distance
    (relevant = same label), computed blockwise. Without tied distances this is scikit-learn's
    ``average_precision_score(relevant, -distance_row)``; tied items are ordered as ``ties``
    says (default: the expectation over a random order, so a constant distance gives the
    chance level, not the precision of the whole database). Queries without any relevant
    database item are left out of the mean. ``same_set=True`` (square matrix, query ``i`` =
    database item ``i``) removes each query from its own database, as when LFW queries search
    LFW.

    Raises
    ------
    ValueError
        If no query has a relevant item.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> round(M.mean_average_precision(D, [0, 1, 0], [0, 1, 0]), 4)
    1.0
    """
    ap = average_precision_per_query(distance, query_labels, db_labels, same_set=same_set,
                                     block_rows=block_rows, ties=ties)
    ok = ~np.isnan(ap)
    if not ok.any():
        raise ValueError("no query has a relevant database item (same label); mAP is undefined.")
    return float(ap[ok].mean())


def one_call_at_n(distance: ArrayLike, query_labels: ArrayLike, db_labels: ArrayLike, n: int, *,
                  same_set: bool = False, block_rows: int | None = None,
                  ties: str = "expected") -> float:
    """1-call@n (CLML §4): the fraction of queries with at least one correct item in the top n.

    Items tied at the n-th place are ordered as ``ties`` says (see :func:`cmc`; by default the
    expected value over a random order). Queries without any relevant item count as failures.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.1, 0.9, 0.5],   # distance of each probe (row) to each gallery item
    ...               [0.7, 0.2, 0.4],
    ...               [0.3, 0.8, 0.6]])
    >>> round(M.one_call_at_n(D, [0, 1, 2], [0, 1, 2], n=2), 4)
    1.0
    """
    n = check_positive_int(n, "n")
    ties = _check_ties(ties)
    stats = _rank_stats(distance, query_labels, db_labels, same_set=same_set,
                        block_rows=block_rows)
    return float(np.mean(_hit_probability(stats, n, ties)))


# --------------------------------------------------------------- report from embeddings
def identification_report(FX: ArrayLike, FY: ArrayLike, probe_labels: ArrayLike,
                          gallery_labels: ArrayLike, *, max_rank: int = 20,
                          ranks: Sequence[int] = (1, 5, 10, 20), metric: str = "sqeuclidean",
                          same_set: bool = False, block_rows: int | None = None,
                          with_map: bool = True, ties: str = "expected") -> dict:
    """CMC, rank-r rates and mAP from two embeddings, never holding the full distance matrix.

    The distance ``‖FX[i] − FY[j]‖²`` (``metric="sqeuclidean"``, via the expanded form in the
    embeddings' dtype) or ``−⟨FX[i], FY[j]⟩`` (``"neg_dot"``) is computed one probe block at a
    time, and the block's ranks and average precisions are taken before the next one. ``ties``
    as in :func:`cmc` (for every measure).

    Returns
    -------
    dict
        ``cmc`` (``max_rank`` values), ``rank<r>`` for ``r`` in ``ranks``, ``map`` (when
        ``with_map``), ``nn_accuracy``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> FX = np.array([[0.0, 0.0], [1.0, 1.0]])   # embedded probes
    >>> FY = np.array([[0.1, 0.0], [0.9, 1.2]])   # embedded gallery
    >>> rep = M.identification_report(FX, FY, [0, 1], [0, 1], max_rank=2, ranks=(1,))
    >>> rep["rank1"], rep["map"]
    (1.0, 1.0)
    """
    FX = as_float_array(FX, "FX", ndim=2)
    FY = as_float_array(FY, "FY", ndim=2)
    if FX.shape[1] != FY.shape[1]:
        raise ValueError(f"FX and FY must have the same number of columns, got {FX.shape[1]} "
                         f"and {FY.shape[1]}.")
    if metric not in ("sqeuclidean", "neg_dot"):
        raise ValueError(f"metric must be 'sqeuclidean' or 'neg_dot', got {metric!r}.")
    max_rank = check_positive_int(max_rank, "max_rank")
    ties = _check_ties(ties)
    n_p, n_g = FX.shape[0], FY.shape[0]
    pc, gc = _label_codes(probe_labels, gallery_labels, n_p, n_g)
    groups = _groups_for(pc, gc)
    sq_g = np.einsum("ij,ij->i", FY, FY)
    stats = np.empty((n_p, 3), dtype=np.int64)
    ap = np.empty(n_p)
    for sl in gen_batches(n_p, _rows_per_block(n_g, block_rows)):
        if metric == "sqeuclidean":
            G = (FX[sl] * -2.0) @ FY.T  # exactly -2 (FX FYᵀ): a power of two scales roundings
            G += np.einsum("ij,ij->i", FX[sl], FX[sl])[:, None]
            G += sq_g[None, :]
            np.maximum(G, 0.0, out=G)
        else:
            G = FX[sl] @ FY.T
            np.negative(G, out=G)
        self_cols = _self_columns(same_set, n_p, n_g, sl)
        # one set of counts per block: the closest match's give the ranks, all give the APs
        k, rows, _, vals = _relevant(G, pc[sl], groups, self_cols)
        first = (np.cumsum(k) - k)[k > 0]
        if with_map:
            lt, le = _relevant_counts(G, k, rows, vals, self_cols)
            ap[sl] = _ap_from_counts(k, rows, vals, lt, le, ties)
            lt, le = lt[first], le[first]
        else:
            lt, le = _relevant_counts(G, (k > 0).astype(np.int64), rows[first], vals[first],
                                      self_cols)
        stats[sl] = _stats_from_counts(k, _first_run_length(k, rows, vals), lt, le)
    # a rank beyond the gallery is the rate at the gallery's size: the curve stops there
    curve = _cmc_from_stats(stats, max(max_rank, min(max(ranks), n_g)), ties)
    out: dict = {"cmc": curve[:max_rank]}
    for r in ranks:
        out[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
    if with_map:
        ok = ~np.isnan(ap)
        out["map"] = float(ap[ok].mean()) if ok.any() else float("nan")
    if not same_set:
        out["nn_accuracy"] = float(np.sum(_nn_hits(stats, ties))) / n_p
    return out
