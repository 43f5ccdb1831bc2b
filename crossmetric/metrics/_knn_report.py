"""Rank measures from k-nearest-neighbour lists (the engine of :func:`metrics.knn_rank_report`).

The lists come from :func:`crossmetric.metrics._faiss_tools.tie_complete_knn`: ascending distances,
at least ``k + 1`` items, and the group of items at the distance of the ``k``-th place complete.
Every item of the first ``k`` places then belongs to a *complete* tie group (all database items
at that distance are in the list), and each measure is computed over the order of the items
inside their groups as ``ties`` says -- the same conventions as :func:`metrics.cmc` and
:func:`metrics.mean_average_precision`:

* ``"expected"``: a uniformly random order inside each group. A group of ``g`` items holding
  ``r`` relevant ones, after ``N`` items of which ``R_b`` are relevant, puts a relevant item at
  its ``j``-th place with probability ``r / g``, and then the expected number of relevant items
  up to that place is ``R_b + 1 + (j − 1)(r − 1)/(g − 1)``: so the expected ``rel(p) · P@p`` of
  place ``p = N + j`` is ``(r/g)(R_b + 1 + (j − 1)(r − 1)/(g − 1)) / p``; summed over places,
  this is the harmonic-sum formula of the dense average precision;
* ``"optimistic"`` / ``"pessimistic"``: the relevant items first / last inside each group.

Pure NumPy; no faiss here.
"""

from __future__ import annotations

import numpy as np

from crossmetric.metrics._counts import _cmc_from_stats, _nn_hits


def _groups(D: np.ndarray):
    """Per place: the first and last place of its group of equal distances ``(start, end)``."""
    n, L = D.shape
    pos = np.arange(L)
    new = np.ones((n, L), dtype=bool)
    new[:, 1:] = D[:, 1:] != D[:, :-1]
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last = np.ones((n, L), dtype=bool)
    last[:, :-1] = new[:, 1:]
    end = np.minimum.accumulate(np.where(last, pos, L - 1)[:, ::-1], axis=1)[:, ::-1]
    return start, end


def list_measures(D: np.ndarray, rel: np.ndarray, R: np.ndarray, k: int, ties: str) -> dict:
    """Per-query rank statistics of tie-complete lists ``D`` (distances) / ``rel`` (relevant).

    Returns ``stats`` (the ``(c, t, m)`` rows of :func:`metrics._counts._block_rank_stats`,
    ``m = 0`` when no relevant item is within the first ``k`` places), and per query: ``p1``
    (expected relevance of the first place), ``ap_k`` (``Σ_{p ≤ k} rel(p) P@p``), ``ap_r``
    (the same for ``p ≤ min(R, k)``) and ``hits_r`` (``Σ_{p ≤ min(R, k)} rel(p)``), not yet
    divided by ``R``.
    """
    n = D.shape[0]
    kk = min(k, D.shape[1])
    start, end = _groups(D)
    crel = np.zeros((n, D.shape[1] + 1), dtype=np.int64)
    np.cumsum(rel, axis=1, out=crel[:, 1:])
    before = np.take_along_axis(crel, start, axis=1)[:, :kk]  # relevant items before the group
    r = (np.take_along_axis(crel, end + 1, axis=1)[:, :kk] - before).astype(float)
    g = (end - start + 1)[:, :kk].astype(float)
    j = np.arange(kk)[None, :] - start[:, :kk] + 1.0  # place inside the group, from 1
    place = np.arange(1, kk + 1, dtype=float)[None, :]
    if ties == "expected":
        e_rel = r / g
        slope = np.where(g > 1, (r - 1) / np.maximum(g - 1, 1), 0.0)
        prec = e_rel * (before + 1 + (j - 1) * slope) / place
    else:
        lost = 0.0 if ties == "optimistic" else g - r  # non-relevant places before them
        e_rel = ((j > lost) & (j <= lost + r)).astype(float)
        prec = e_rel * (before + j - lost) / place
    within_r = np.arange(kk)[None, :] < np.minimum(R, kk)[:, None]
    has = r > 0
    first = np.argmax(has, axis=1)
    rows = np.arange(n)
    hit = has[rows, first]
    stats = np.zeros((n, 3), dtype=np.int64)
    stats[hit, 0] = start[rows, first][hit]
    stats[hit, 1] = (g - r)[rows, first][hit]
    stats[hit, 2] = r[rows, first][hit]
    return {"stats": stats, "p1": e_rel[:, 0] if kk else np.zeros(n),
            "ap_k": prec.sum(axis=1), "ap_r": (prec * within_r).sum(axis=1),
            "hits_r": (e_rel * within_r).sum(axis=1)}


def report_from_lists(chunks, query_codes: np.ndarray, db_codes: np.ndarray, R: np.ndarray,
                      k: int, ranks, ties: str) -> dict:
    """Accumulate :func:`list_measures` over ``(rows, D, I)`` chunks into the report dict."""
    n = query_codes.size
    stats = np.zeros((n, 3), dtype=np.int64)
    acc = {key: np.zeros(n) for key in ("p1", "ap_k", "ap_r", "hits_r")}
    longest = 0
    for rows, D, I in chunks:
        if rows.size == 0:
            continue
        longest = max(longest, D.shape[1])
        rel = (I >= 0) & (db_codes[np.maximum(I, 0)] == query_codes[rows][:, None])
        out = list_measures(D, rel, R[rows], k, ties)
        stats[rows] = out.pop("stats")
        for key, val in out.items():
            acc[key][rows] = val
    ok = R > 0
    n_ok = int(np.count_nonzero(ok))
    curve = _cmc_from_stats(stats, k, ties)
    report: dict = {"cmc": curve}
    for rank in ranks:
        report[f"rank{rank}"] = float(curve[rank - 1])
    if n_ok:
        Rok = R[ok].astype(float)
        report.update({
            "precision_at_1": float(acc["p1"][ok].mean()),
            "r_precision": float((acc["hits_r"][ok] / Rok).mean()),
            "map_at_r": float((acc["ap_r"][ok] / Rok).mean()),
            "map_at_k": float((acc["ap_k"][ok] / Rok).mean()),
        })
    else:
        report.update(dict.fromkeys(("precision_at_1", "r_precision", "map_at_r", "map_at_k"),
                                    float("nan")))
    report.update({"nn_accuracy": float(np.sum(_nn_hits(stats, ties))) / n,
                   "n_queries": n, "n_queries_with_relevant": n_ok,
                   "n_queries_r_above_k": int(np.count_nonzero(R > k)),
                   "longest_list": longest})
    return report
