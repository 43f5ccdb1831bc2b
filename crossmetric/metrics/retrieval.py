"""Class-level retrieval measures: mAP@k and the precision-recall curve of ranked lists.

The protocol of the cross-modal retrieval literature (Rasiwasia et al., "A new approach to
cross-modal multimedia retrieval", ACM MM 2010, Wikipedia image/text; Pascal Sentences,
NUS-WIDE): every query of one modality ranks the whole test set of the other modality, an item
is relevant when it has the query's category, and the measures are the mean average precision
(:func:`crossmetric.metrics.mean_average_precision`), mAP over the first ``k`` items and the
precision-recall curve averaged over the queries. :func:`retrieval_report` gives all three.

Unlike :mod:`crossmetric.metrics.ranking`, which counts and never sorts, these two measures
need the order of the first places: each block of query rows is sorted (stable, so items at
equal distance keep their database order).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import gen_batches

from crossmetric._utils.checks import check_positive_int
from crossmetric.metrics._counts import _check_distance, _label_codes, _rows_per_block

__all__ = ["mean_average_precision_at_k", "precision_recall_curve_mean", "retrieval_report",
           "RECALL_LEVELS"]

#: the recall levels of the 11-point precision-recall curve
RECALL_LEVELS = np.linspace(0.0, 1.0, 11)


def _relevance_in_order(D: np.ndarray, qc: np.ndarray, dc: np.ndarray, sl: slice,
                        k: int | None) -> np.ndarray:
    """Relevance (bool) of each block row's database items in ranked order (the first
    ``k`` places, all when ``None``)."""
    order = np.argsort(D[sl], axis=1, kind="stable")
    if k is not None:
        order = order[:, :k]
    return dc[order] == qc[sl, None]


def mean_average_precision_at_k(distance, query_labels, db_labels, k: int, *,
                                block_rows: int | None = None) -> float:
    """mAP@k: the mean over queries of the average precision of the first ``k`` items.

    ``AP@k = (1 / R_k) Σ_{p ≤ k} rel(p) · P@p`` with ``R_k`` the relevant items among the
    first ``k`` (the definition of the cross-modal hashing codes, e.g. DCMH's
    ``calc_map_k``); a query with no relevant item in its first ``k`` counts 0. With ``k`` at
    least the database size it equals :func:`~crossmetric.metrics.mean_average_precision`
    over queries that have a relevant item (when no two distances tie). Items at equal
    distance keep their database order.

    Parameters
    ----------
    distance : array-like of shape (n_queries, n_database)
    query_labels, db_labels : array-like
        Category of each query and database item; relevant = same category.
    k : int
        Length of the ranked list (capped at the database size).
    block_rows : int, optional
        Queries sorted at once (default: blocks of bounded memory).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.metrics.retrieval import mean_average_precision_at_k
    >>> D = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    >>> float(mean_average_precision_at_k(D, [0, 1], [0, 1, 0], k=2))
    0.75
    """
    k = check_positive_int(k, "k")
    D = _check_distance(distance)
    n_q, n_d = D.shape
    qc, dc = _label_codes(query_labels, db_labels, n_q, n_d, ("query_labels", "db_labels"))
    k = min(k, n_d)
    total = 0.0
    for sl in gen_batches(n_q, _rows_per_block(n_d, block_rows)):
        rel = _relevance_in_order(D, qc, dc, sl, k)
        hits = np.cumsum(rel, axis=1)
        prec = hits / np.arange(1, k + 1)
        r_k = hits[:, -1]
        s = (prec * rel).sum(axis=1)
        total += float(np.sum(np.divide(s, r_k, out=np.zeros_like(s), where=r_k > 0)))
    return total / n_q


def precision_recall_curve_mean(distance, query_labels, db_labels, *,
                                recall=RECALL_LEVELS,
                                block_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Interpolated precision at fixed recall levels, averaged over the queries.

    For each query the database is ranked by distance; its interpolated precision at recall
    ``r`` is the largest precision reached at any recall ``≥ r`` (the 11-point curve of
    information retrieval and of Rasiwasia et al. 2010's figures with the default levels).
    Queries without a relevant item are left out.

    Returns
    -------
    recall : ndarray of shape (n_levels,)
    precision : ndarray of shape (n_levels,)

    Raises
    ------
    ValueError
        If no query has a relevant item, or a recall level lies outside [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.metrics.retrieval import precision_recall_curve_mean
    >>> D = np.array([[0.1, 0.2, 0.3]])
    >>> r, p = precision_recall_curve_mean(D, [0], [0, 1, 0], recall=[0.0, 0.5, 1.0])
    >>> p.round(3).tolist()
    [1.0, 1.0, 0.667]
    """
    levels = np.asarray(recall, dtype=float).ravel()
    if levels.size == 0 or levels.min() < 0 or levels.max() > 1:
        raise ValueError(f"recall must be levels in [0, 1], got {recall!r}.")
    D = _check_distance(distance)
    n_q, n_d = D.shape
    qc, dc = _label_codes(query_labels, db_labels, n_q, n_d, ("query_labels", "db_labels"))
    acc, n_ok = np.zeros(levels.size), 0
    for sl in gen_batches(n_q, _rows_per_block(n_d, block_rows)):
        rel = _relevance_in_order(D, qc, dc, sl, None)
        n_rel = rel.sum(axis=1)
        ok = n_rel > 0
        rel, n_rel = rel[ok], n_rel[ok]
        if rel.shape[0] == 0:
            continue
        hits = np.cumsum(rel, axis=1)
        prec = hits / np.arange(1, n_d + 1)
        rec = hits / n_rel[:, None]
        # best precision at or after each place: interpolated precision along the list
        best_after = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
        for j, r in enumerate(levels):
            first = np.argmax(rec >= r - 1e-12, axis=1)   # recall reaches 1 at the end
            acc[j] += best_after[np.arange(rel.shape[0]), first].sum()
        n_ok += rel.shape[0]
    if n_ok == 0:
        raise ValueError("no query has a relevant database item (same label); the "
                         "precision-recall curve is undefined.")
    return levels, acc / n_ok


def retrieval_report(distance, query_labels, db_labels, *, k: int = 50,
                     recall=RECALL_LEVELS) -> dict:
    """mAP over the whole database, mAP@k and the mean precision-recall curve of one
    retrieval direction.

    Returns
    -------
    dict
        ``map`` (:func:`~crossmetric.metrics.mean_average_precision`), ``map_at_k``
        (:func:`mean_average_precision_at_k`), ``k``, ``recall`` and ``precision``
        (:func:`precision_recall_curve_mean`), ``n_queries``, ``n_database``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.metrics.retrieval import retrieval_report
    >>> D = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    >>> rep = retrieval_report(D, [0, 1], [0, 1, 0], k=2)
    >>> round(rep["map"], 4), rep["map_at_k"]
    (0.6667, 0.75)
    """
    from crossmetric.metrics.ranking import mean_average_precision

    D = _check_distance(distance)
    levels, prec = precision_recall_curve_mean(D, query_labels, db_labels, recall=recall)
    return {"map": mean_average_precision(D, query_labels, db_labels),
            "map_at_k": mean_average_precision_at_k(D, query_labels, db_labels, k),
            "k": int(min(k, D.shape[1])), "recall": levels, "precision": prec,
            "n_queries": int(D.shape[0]), "n_database": int(D.shape[1])}
