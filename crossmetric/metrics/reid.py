"""The re-id protocol of Market-1501 / torchreid: CMC, mAP and mINP with camera filtering.

:func:`evaluate_rank` drops, for each query, the gallery items of its own identity seen by its
own camera, and computes torchreid's measures (with the library's tie rules).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array, check_positive_int
from crossmetric.metrics._counts import _label_codes

__all__ = ["evaluate_rank"]


# ------------------------------------------------- re-id protocol (Market-1501 / torchreid)
def _tie_groups(ds: np.ndarray, rel: np.ndarray):
    """Per sorted position: start ``o``, size ``n``, relevant items ``r`` and relevant items
    before ``c`` of its group of equal distances (rows of ``ds`` sorted ascending)."""
    b, n_g = ds.shape
    pos = np.broadcast_to(np.arange(n_g), (b, n_g))
    new = np.ones((b, n_g), dtype=bool)
    new[:, 1:] = ds[:, 1:] != ds[:, :-1]
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last = np.ones((b, n_g), dtype=bool)
    last[:, :-1] = new[:, 1:]
    end = np.minimum.accumulate(np.where(last, pos, n_g)[:, ::-1], axis=1)[:, ::-1]
    cum = np.cumsum(rel, axis=1)
    before = np.take_along_axis(cum - rel, start, axis=1)
    r = np.take_along_axis(cum, end, axis=1) - before
    return start, end - start + 1, r, before


def _log_comb(a, b):
    """log C(a, b); entries outside 0 <= b <= a (masked by the callers) may be NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return gammaln(a + 1.0) - gammaln(b + 1.0) - gammaln(a - b + 1.0)


def _block_reid_measures(D: np.ndarray, rel: np.ndarray, valid: np.ndarray, max_rank: int,
                         ties: str):
    """CMC rows, AP and INP of a block of queries (rows with no valid match: NaN AP)."""
    D = np.where(valid, D, np.inf)
    rel = rel & valid
    if ties == "expected":
        order = np.argsort(D, axis=1, kind="stable")
    else:  # true matches after (pessimistic) or before (optimistic) equal distances
        key = rel if ties == "pessimistic" else ~rel
        order = np.lexsort((key, D), axis=1)
    ds = np.take_along_axis(D, order, axis=1)
    rs = np.take_along_axis(rel, order, axis=1)
    b, n_g = ds.shape
    R = rs.sum(axis=1)
    ok = R > 0
    rows = np.arange(b)
    first = np.argmax(rs, axis=1)
    lastp = n_g - 1 - np.argmax(rs[:, ::-1], axis=1)
    t = np.arange(n_g)[None, :]
    if ties != "expected" or not np.any((ds[:, 1:] == ds[:, :-1]) & np.isfinite(ds[:, 1:])):
        # one order (no ties among valid items, or ties broken by the sort): plain counts
        curve = (first[:, None] < np.arange(1, max_rank + 1)[None, :]).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ap = np.where(ok, np.sum(rs * np.cumsum(rs, axis=1) / (t + 1.0), axis=1)
                          / np.maximum(R, 1), np.nan)
        inp = np.where(ok, R / (lastp + 1.0), np.nan)
        return curve[ok], ap, inp
    o, n, r, c = _tie_groups(ds, rs)
    # CMC: P(first true match at rank <= k) = 1 - C(n - r, m) / C(n, m), m = k - o, within the
    # first group holding a true match (o items before it, n items, r of them true)
    fo, fn, fr = (a[rows, first][:, None].astype(float) for a in (o, n, r))
    m = np.arange(1, max_rank + 1)[None, :] - fo
    m_in = np.clip(m, 0, fn)
    miss = np.where(m_in <= fn - fr, np.exp(_log_comb(fn - fr, np.minimum(m_in, fn - fr))
                                            - _log_comb(fn, m_in)), 0.0)
    curve = np.where(m <= 0, 0.0, 1.0 - miss)
    # AP: E[sum over true matches of precision] / R; a true match at place p of its group has
    # 1 + (p - 1)(r - 1)/(n - 1) expected true matches at or before it within the group
    p = t - o + 1
    within = np.where(n > 1, (p - 1) * (r - 1) / np.maximum(n - 1, 1), 0.0)
    ap = np.sum((r / n) * (c + 1.0 + within) / (t + 1.0), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = np.where(ok, ap / np.maximum(R, 1), np.nan)
    # INP = R / (place of the last true match); within the last group holding true matches
    # that place is o + j with probability C(j - 1, r - 1) / C(n, r), j = r..n
    lo, ln, lr = (a[rows, lastp][:, None].astype(float) for a in (o, n, r))
    j = t - lo + 1.0
    in_last = (j >= lr) & (j <= ln) & (lr > 0)
    w = np.where(in_last, np.exp(_log_comb(np.maximum(j - 1, lr - 1), lr - 1)
                                 - _log_comb(ln, lr)), 0.0)
    inp = np.where(ok, R * np.sum(w / (t + 1.0), axis=1), np.nan)
    return curve[ok], ap, inp


def evaluate_rank(distance: ArrayLike, q_pids: ArrayLike, g_pids: ArrayLike,
                  q_camids: ArrayLike | None = None, g_camids: ArrayLike | None = None, *,
                  max_rank: int = 50, ties: str = "expected",
                  block_rows: int | None = None) -> dict:
    """CMC, mAP and mINP of a re-identification ranking, as Market-1501 / torchreid count them.

    For every query the gallery is ranked by ``distance``. With camera ids, gallery items of
    the query's own identity *and* camera are left out of its ranking (they are not a
    cross-camera re-identification), as in the Market-1501 protocol (Zheng et al. 2015) and
    torchreid's ``evaluate_rank``; a query left with no true match in the gallery is skipped
    (not counted as a failure, unlike :func:`cmc`). Single-shot (one gallery image per
    identity) and multi-shot galleries are both handled: the CMC counts the *first* true match,
    AP all of them, and INP the *last* one.

    * ``cmc[k - 1]``: fraction of the queries whose first true match is at rank ``<= k``;
    * ``map``: mean over queries of the average precision (mean of the precision at each true
      match);
    * ``minp``: mean inverse negative penalty (Ye et al., "Deep learning for person
      re-identification: a survey and outlook", TPAMI 2021): ``INP = R / (rank of the last
      true match)`` with ``R`` true matches, i.e. the share of the list one must read to find
      them all that is true.

    Parameters
    ----------
    distance : array-like of shape (n_query, n_gallery)
        Smaller = more alike; finite.
    q_pids : array-like of shape (n_query,)
    g_pids : array-like of shape (n_gallery,)
    q_camids, g_camids : array-like, optional
        Camera of each query / gallery item; give both or neither (without them nothing is
        left out, as for a single camera pair).
    max_rank : int, default=50
        Length of the CMC curve. Ranks beyond a query's gallery count as found (the curve
        reaches 1), so the curve always has ``max_rank`` entries.
    ties : {"expected", "pessimistic", "optimistic"}, default="expected"
        Order among gallery items at equal distance. ``"expected"``: every measure is its exact
        expectation over a uniformly random order of the tied items (hypergeometric
        probabilities; a constant distance gives chance, never a perfect score).
        ``"pessimistic"`` puts the true matches last among equals, ``"optimistic"`` first.
        torchreid takes whatever order ``np.argsort`` returns; on distances without ties the
        three choices agree with it exactly.
    block_rows : int, optional
        Queries per block (default: blocks of about 1 Mi values).

    Returns
    -------
    dict
        ``cmc`` (ndarray of shape (max_rank,)), ``map``, ``minp`` (floats), ``n_queries``
        (queries evaluated) and ``n_skipped`` (queries without a valid true match).

    Raises
    ------
    ValueError
        If no query has a valid true match.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import metrics as M
    >>> D = np.array([[0.2, 0.1, 0.9],    # query 0 (person 7, camera 0)
    ...               [0.8, 0.3, 0.4]])   # query 1 (person 8, camera 0)
    >>> out = M.evaluate_rank(D, [7, 8], [7, 7, 8], [0, 0], [1, 0, 1], max_rank=3)
    >>> out["cmc"].tolist(), out["map"], out["minp"]   # gallery item 1 (7, camera 0) left out
    ([0.5, 1.0, 1.0], 0.75, 0.75)
    """
    D = as_float_array(distance, "distance", ndim=2)
    if not np.isfinite(D).all():
        raise ValueError("distance contains NaN or infinity.")
    n_q, n_g = D.shape
    if n_q == 0 or n_g == 0:
        raise ValueError(f"distance must be a non-empty matrix, got shape {D.shape}.")
    max_rank = check_positive_int(max_rank, "max_rank")
    if ties not in ("expected", "pessimistic", "optimistic"):
        raise ValueError(f"ties must be 'expected', 'pessimistic' or 'optimistic', got "
                         f"{ties!r}.")
    qp, gp = _label_codes(q_pids, g_pids, n_q, n_g, ("q_pids", "g_pids"))
    if (q_camids is None) != (g_camids is None):
        raise ValueError("q_camids and g_camids must be given together (or neither).")
    cams = q_camids is not None
    if cams:
        qc, gc = _label_codes(q_camids, g_camids, n_q, n_g, ("q_camids", "g_camids"))
    rows_per = (check_positive_int(block_rows, "block_rows") if block_rows is not None
                else max(1, (1 << 20) // n_g))
    curves, ap, inp = [], np.empty(n_q), np.empty(n_q)
    for sl in gen_batches(n_q, rows_per):
        same = gp[None, :] == qp[sl, None]
        valid = ~(same & (gc[None, :] == qc[sl, None])) if cams else np.ones_like(same)
        cb, ap[sl], inp[sl] = _block_reid_measures(D[sl], same, valid, max_rank, ties)
        curves.append(cb)
    ok = ~np.isnan(ap)
    if not ok.any():
        raise ValueError("no query has a valid true match in the gallery (same id, and another "
                         "camera when camera ids are given); CMC and mAP are undefined.")
    return {"cmc": np.concatenate(curves).mean(axis=0), "map": float(ap[ok].mean()),
            "minp": float(inp[ok].mean()), "n_queries": int(ok.sum()),
            "n_skipped": int(n_q - ok.sum())}
