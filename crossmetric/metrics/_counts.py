"""Counting the items closer than each true match: the shared core of the rank measures.

No row of a distance matrix is sorted: the place of a true match is a count of the items closer
to the probe (and of those at the same distance), O(n_gallery) per relevant item
(:func:`_relevant_counts`); the rank statistics ``(c, t, m)`` of each query then give CMC,
rank-r, 1-call@n and nearest-neighbour accuracy under each tie rule (:data:`TIES`), and the
counts give average precision. Used by :mod:`.ranking`, :mod:`.knn` and
:mod:`crossmetric.metrics._knn_report`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln
from sklearn.utils import gen_batches

from crossmetric._utils.checks import check_positive_int

__all__ = ["BLOCK_ELEMENTS", "TIES"]


#: float64 elements of one row block of a distance matrix (16 Mi values = 128 MiB)
BLOCK_ELEMENTS = 1 << 24


# ------------------------------------------------------------------- identification inputs
def _label_codes(probe_labels, gallery_labels, n_probe: int, n_gallery: int,
                 names=("probe_labels", "gallery_labels")) -> tuple[np.ndarray, np.ndarray]:
    """Both label arrays as integer codes of one common vocabulary."""
    p = np.asarray(probe_labels)
    g = np.asarray(gallery_labels)
    for arr, name, n in ((p, names[0], n_probe), (g, names[1], n_gallery)):
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(
                f"{name} must be a 1-D array with one label per row/column of distance "
                f"({n}), got shape {arr.shape}."
            )
    _, codes = np.unique(np.concatenate([p, g]), return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    return codes[:n_probe], codes[n_probe:]


def _check_distance(distance) -> np.ndarray:
    d = np.asarray(distance)
    if d.dtype.kind not in "fiub" or d.dtype == object:
        raise ValueError(f"distance must be a numeric matrix, got dtype {d.dtype}.")
    if d.ndim != 2 or d.shape[0] == 0 or d.shape[1] == 0:
        raise ValueError(
            f"distance must be a non-empty 2-D matrix (n_probe, n_gallery), got shape {d.shape}."
        )
    if d.dtype.kind != "f":
        d = d.astype(np.float64)
    return d


def _rows_per_block(n_cols: int, block_rows: int | None) -> int:
    if block_rows is not None:
        return check_positive_int(block_rows, "block_rows")
    return max(1, BLOCK_ELEMENTS // max(1, n_cols))


TIES = ("expected", "pessimistic", "optimistic")


def _check_ties(ties) -> str:
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}.")
    return ties


#: rows with at most this many relevant items are ranked by counting passes over the row (two
#: comparisons per item and element); rows with more by one sort of the row, which is cheaper
_COUNT_MAX_RELEVANT = 32
#: rows at least this long are counted on packed flag bytes (8 flags per word), shorter ones
#: with ``count_nonzero``
_LANE_MIN_COLS = 2040
#: bytes of one counting chunk (its rows of distances and their comparison flags): about the
#: size of a core's L2 cache, so that the repeated comparisons read from cache
_CHUNK_BYTES = 1 << 20


def _check_finite_block(D: np.ndarray) -> None:
    # one summation (no temporary); the exact test only when the sum is not finite (NaN and
    # ±inf propagate into it; finite values may overflow it)
    if not np.isfinite(np.add.reduce(D, axis=None)) and not np.isfinite(D).all():
        raise ValueError("distance contains NaN or infinity.")


def _gallery_groups(gc: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gallery columns grouped by label: ``(order, start, count)``; label ``c`` owns the
    columns ``order[start[c]:start[c] + count[c]]`` (increasing)."""
    order = np.argsort(gc, kind="stable")
    count = np.bincount(gc, minlength=n_codes)
    return order, np.cumsum(count) - count, count


def _groups_for(pc: np.ndarray, gc: np.ndarray):
    n_codes = int(max(pc.max(initial=0), gc.max(initial=0))) + 1
    return _gallery_groups(gc, n_codes)


def _relevant(D: np.ndarray, pc: np.ndarray, groups, self_cols: np.ndarray | None):
    """The relevant items (same label) of every row of a block, as flat arrays.

    Returns ``(k, rows, cols, vals)``: ``k[i]`` is the number of relevant items of row ``i``
    (its own column ``self_cols[i]`` left out); then one entry per relevant item, row after
    row and, inside a row, by increasing distance (equal distances in column order): its row,
    its column and its distance.
    """
    order, start, count = groups
    n_rows = D.shape[0]
    k = count[pc]
    rows = np.repeat(np.arange(n_rows), k)
    offset = np.arange(rows.size) - np.repeat(np.cumsum(k) - k, k)
    cols = order[np.repeat(start[pc], k) + offset]
    if self_cols is not None:
        keep = cols != self_cols[rows]
        rows, cols = rows[keep], cols[keep]
        k = np.bincount(rows, minlength=n_rows)
    vals = D[rows, cols]
    o = np.lexsort((vals, rows))
    return k, rows[o], cols[o], vals[o]


def _count_flags(flags: np.ndarray) -> np.ndarray:
    """Number of ``True`` along the last axis of a C-contiguous bool array ``(b, J, w)``, ``w``
    a multiple of 8: the flags are summed 8 at a time as the bytes of uint64 words, at most
    255 words per sum so that no byte overflows."""
    words = flags.view(np.uint64)
    full = words.shape[-1] - words.shape[-1] % 255
    lanes = words[..., :full].reshape(*words.shape[:-1], -1, 255).sum(axis=-1)
    rest = words[..., full:].sum(axis=-1, keepdims=True)
    return (lanes.view(np.uint8).sum(axis=-1, dtype=np.int64)
            + rest.view(np.uint8).sum(axis=-1, dtype=np.int64))


def _rows_less_counts(D: np.ndarray, rows: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``out[p, j] = #{l : D[rows[p], l] < T[p, j]}`` for thresholds ``T`` (len(rows), J).

    A cache-sized chunk of rows at a time: the rows (checked finite) are compared with their
    ``J`` thresholds into a buffer of flags, counted by :func:`_count_flags`.
    """
    n = D.shape[1]
    J = T.shape[1]
    step = min(rows.size, max(1, _CHUNK_BYTES // (n * (D.itemsize + J))))
    wide = n >= _LANE_MIN_COLS
    if wide:
        flags = np.zeros((step, J, -(-n // 8) * 8), dtype=bool)
    out = np.empty(T.shape, dtype=np.int64)
    for s in range(0, rows.size, step):
        r = rows[s:s + step]
        sub = D[r[0]:r[-1] + 1] if r[-1] - r[0] == r.size - 1 else D[r]
        _check_finite_block(sub)
        if wide:
            np.less(sub[:, None, :], T[s:s + step, :, None], out=flags[:r.size, :, :n])
            out[s:s + step] = _count_flags(flags[:r.size])
        else:
            out[s:s + step] = np.count_nonzero(sub[:, None, :] < T[s:s + step, :, None], axis=2)
    return out


def _relevant_counts(D: np.ndarray, k: np.ndarray, rows: np.ndarray, vals: np.ndarray,
                     self_cols: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """How many items of its row lie closer than each relevant item, and at most as far.

    ``(lt, le)`` with ``lt[p] = #{l : D[i, l] < vals[p]}`` and ``le[p] = #{l : D[i, l] <=
    vals[p]}`` over the items ``l`` of row ``i = rows[p]`` other than ``self_cols[i]``
    (``k``, ``rows``, ``vals`` as returned by :func:`_relevant`). No sort: a row with ``k``
    relevant items is compared with its ``2k`` thresholds ``vals`` and their next float up
    (``d < nextafter(v, inf)`` is ``d <= v``), rows of equal ``k`` together, O(n · k) per
    row; a row with more than ``_COUNT_MAX_RELEVANT`` relevant items is sorted once instead.
    """
    lt = np.empty(vals.size, dtype=np.int64)
    le = np.empty(vals.size, dtype=np.int64)
    first = np.cumsum(k) - k
    up = np.nextafter(vals, np.inf)
    counted = (k > 0) & (k <= _COUNT_MAX_RELEVANT)
    for kk in np.unique(k[counted]):
        r = np.flatnonzero(k == kk)
        idx = first[r][:, None] + np.arange(kk)
        cnt = _rows_less_counts(D, r, np.concatenate([vals[idx], up[idx]], axis=1))
        lt[idx], le[idx] = cnt[:, :kk], cnt[:, kk:]
    if not counted.all():
        _check_finite_block(D[k == 0])
    for i in np.flatnonzero(k > _COUNT_MAX_RELEVANT):
        srt = np.sort(D[i])
        if not (np.isfinite(srt[0]) and np.isfinite(srt[-1])):  # NaN sorts last
            raise ValueError("distance contains NaN or infinity.")
        sl = slice(first[i], first[i] + k[i])
        lt[sl] = np.searchsorted(srt, vals[sl], side="left")
        le[sl] = np.searchsorted(srt, vals[sl], side="right")
    if self_cols is not None:  # the excluded column was counted like any item: take it off
        s = D[rows, self_cols[rows]]
        lt -= s < vals
        le -= s <= vals
    return lt, le


def _first_run_length(k: np.ndarray, rows: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Per row: how many relevant items are at its smallest relevant distance."""
    first = np.cumsum(k) - k
    at_best = vals == vals[first[rows]] if vals.size else np.zeros(0, dtype=bool)
    return np.bincount(rows, weights=at_best, minlength=k.size).astype(np.int64)


def _stats_from_counts(k: np.ndarray, m: np.ndarray, lt_best: np.ndarray,
                       le_best: np.ndarray) -> np.ndarray:
    """``(c, t, m)`` rows (see :func:`_block_rank_stats`) from the counts at the best match of
    the rows that have one (``lt_best``, ``le_best``: one entry per row with ``k > 0``)."""
    stats = np.zeros((k.size, 3), dtype=np.int64)
    has = k > 0
    stats[has, 0] = lt_best
    stats[has, 1] = le_best - lt_best - m[has]
    stats[has, 2] = m[has]
    return stats


def _block_rank_stats(D: np.ndarray, pc: np.ndarray, groups,
                      self_cols: np.ndarray | None) -> np.ndarray:
    """Where the closest true match of each row of a block sits, as counts ``(c, t, m)``.

    ``c``: items strictly closer than the closest true match; ``t``: other (non-matching) items
    at exactly that distance; ``m``: true matches at that distance (0 when the row has no true
    match). The rank is ``c + 1`` with ties won, ``c + t + 1`` with ties lost, and under random
    tie-breaking the position of the first of ``m`` marked items among ``t + m`` shuffled ones.
    ``self_cols[i]`` (optional) is a column to ignore for row ``i`` (the query itself).
    ``groups``: :func:`_gallery_groups` of the gallery labels. Two counting passes over the
    block (items ``<`` and ``<=`` the closest match), no sort.
    """
    k, rows, _, vals = _relevant(D, pc, groups, self_cols)
    first = (np.cumsum(k) - k)[k > 0]
    lt, le = _relevant_counts(D, (k > 0).astype(np.int64), rows[first], vals[first], self_cols)
    return _stats_from_counts(k, _first_run_length(k, rows, vals), lt, le)


def _log_none_in_first(t: np.ndarray, m: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``log P(none of m marked items among the first j of t + m shuffled items)``.

    ``P = C(t, j) / C(t + m, j)`` for ``0 <= j <= t`` (the caller keeps ``j`` in that range).
    """
    return (gammaln(t + 1) - gammaln(t - j + 1)
            - gammaln(t + m + 1) + gammaln(t + m - j + 1))


def _hit_probability(stats: np.ndarray, n: int, ties: str) -> np.ndarray:
    """P(rank <= n) of each row of ``stats`` (``(c, t, m)``, see :func:`_block_rank_stats`)."""
    c, t, m = (stats[:, k].astype(np.float64) for k in range(3))
    if ties == "optimistic":
        return ((m > 0) & (c + 1 <= n)).astype(float)
    if ties == "pessimistic":
        return ((m > 0) & (c + t + 1 <= n)).astype(float)
    j = np.clip(n - c, 0, t)  # places of the tied group within the first n
    p = 1.0 - np.exp(_log_none_in_first(t, np.maximum(m, 1), j))
    p = np.where(n - c > t, 1.0, p)
    return np.where((m > 0) & (n > c), p, 0.0)


def _rank_histogram(stats: np.ndarray, max_rank: int, ties: str) -> np.ndarray:
    """Expected number of rows of each rank ``1..max_rank`` (index 0 unused)."""
    c, t, m = stats[:, 0], stats[:, 1], stats[:, 2]
    hist = np.zeros(max_rank + 1)
    ok = m > 0
    if ties != "expected":
        r = c + 1 if ties == "optimistic" else c + t + 1
        r = r[ok & (r <= max_rank)]
        return hist + np.bincount(r, minlength=max_rank + 1)[: max_rank + 1]
    exact = ok & (t == 0) & (c < max_rank)
    hist += np.bincount(c[exact] + 1, minlength=max_rank + 1)[: max_rank + 1]
    # rows with tied impostors: the first match is at place q = 1..t+1 of the tied group with
    # probability P(none in first q - 1) · m / (t + m − q + 1); only ranks c + q <= max_rank
    rows = np.flatnonzero(ok & (t > 0) & (c < max_rank))
    length = np.minimum(t[rows] + 1, max_rank - c[rows])
    bounds = np.r_[0, np.cumsum(length)]
    chunk = 1 << 22
    start = 0
    while start < rows.size:
        stop = int(np.searchsorted(bounds, bounds[start] + chunk, side="right")) - 1
        stop = max(stop, start + 1)
        rr, ln = rows[start:stop], length[start:stop]
        rep = np.repeat(np.arange(rr.size), ln)
        q = np.arange(rep.size) - np.repeat(np.cumsum(ln) - ln, ln) + 1
        tt, mm = t[rr][rep].astype(float), m[rr][rep].astype(float)
        pmf = np.exp(_log_none_in_first(tt, mm, q - 1.0)) * mm / (tt + mm - q + 1.0)
        hist += np.bincount(c[rr][rep] + q, weights=pmf, minlength=max_rank + 1)[: max_rank + 1]
        start = stop
    return hist


def _harmonic_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``Σ_{k=a+1}^{b} 1/k = H_b − H_a`` for integer arrays ``0 <= a <= b``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    out = digamma(b + 1.0) - digamma(a + 1.0)
    one = b - a == 1.0  # the common untied case, exactly
    return np.where(one, 1.0 / np.maximum(b, 1.0), out)


def _block_average_precision(D: np.ndarray, pc: np.ndarray, groups,
                             self_cols: np.ndarray | None, ties: str = "expected") -> np.ndarray:
    """Average precision of each row of a block (NaN where no item is relevant).

    For row ``i`` the items fall into groups of equal distance. A group holding ``r > 0`` of the
    ``M`` relevant items, with ``g`` items in all, ``N`` items and ``R`` relevant items strictly
    closer, adds to ``M · AP`` the sum of the precisions at its relevant items. Without ties
    (``g = r = 1``) that is ``(R + 1)/(N + 1)``, scikit-learn's value; with ties it depends on
    the order inside the group:

    * ``"optimistic"`` (relevant first): ``Σ_{a=1}^{r} (R + a)/(N + a)``;
    * ``"pessimistic"`` (relevant last): the same with ``N + g − r`` for ``N``;
    * ``"expected"`` (uniformly random order): ``(r/g) Σ_{k=1}^{g} (R + 1 + (k − 1)(r − 1)/(g − 1))
      / (N + k)``, the expectation of the precision at place ``k`` given a relevant item there.

    Each is a difference of harmonic numbers (digamma). ``N`` and ``N + g`` of every relevant
    item are counts of the items below / at most at its distance (:func:`_relevant_counts`):
    O(n · M) per row, no sort. ``groups``: :func:`_gallery_groups` of the gallery labels.
    """
    k, rows, _, vals = _relevant(D, pc, groups, self_cols)
    lt, le = _relevant_counts(D, k, rows, vals, self_cols)
    return _ap_from_counts(k, rows, vals, lt, le, ties)


def _ap_from_counts(k: np.ndarray, rows: np.ndarray, vals: np.ndarray, lt: np.ndarray,
                    le: np.ndarray, ties: str) -> np.ndarray:
    """Average precision per row from :func:`_relevant_counts` (see
    :func:`_block_average_precision`)."""
    out = np.full(k.size, np.nan)
    if vals.size == 0:
        return out
    q = np.arange(vals.size) - (np.cumsum(k) - k)[rows]  # place among the row's relevant
    start = np.flatnonzero((q == 0) | np.r_[True, vals[1:] != vals[:-1]])  # equal-value runs
    r = np.diff(np.r_[start, vals.size])
    R = q[start]
    N = lt[start]
    g = le[start] - N
    if ties == "optimistic":
        s = r + (R - N) * _harmonic_diff(N, N + r)
    elif ties == "pessimistic":
        B = N + g - r
        s = r + (R - B) * _harmonic_diff(B, B + r)
    else:
        H = _harmonic_diff(N, N + g)
        slope = np.where(g > 1, (r - 1) / np.maximum(g - 1, 1), 0.0)
        # Σ_k (R + 1 + (k − 1)·slope)/(N + k) = (R + 1)·H + slope·(g − (N + 1)·H)
        s = (r / g) * ((R + 1) * H + slope * (g - (N + 1) * H))
    has = k > 0
    out[has] = np.bincount(rows[start], weights=s, minlength=k.size)[has] / k[has]
    return out


def _earlier_ties(D: np.ndarray, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray,
                  lt: np.ndarray, le: np.ndarray, self_cols: np.ndarray | None) -> np.ndarray:
    """For each relevant item: the items of its row at the same distance in an earlier column
    (a stable sort puts them first). Only tied items (``le - lt > 1``) are looked at."""
    out = np.zeros(vals.size, dtype=np.int64)
    tied = np.flatnonzero(le - lt > 1)
    n = D.shape[1]
    step = max(1, (1 << 22) // n)
    for s in range(0, tied.size, step):
        p = tied[s:s + step]
        eq = D[rows[p]] == vals[p][:, None]
        eq &= np.arange(n)[None, :] < cols[p][:, None]
        out[p] = np.count_nonzero(eq, axis=1)
        if self_cols is not None:
            sc = self_cols[rows[p]]
            out[p] -= (sc < cols[p]) & (D[rows[p], sc] == vals[p])
    return out


def _self_columns(same_set: bool, n_probe: int, n_gallery: int, sl: slice) -> np.ndarray | None:
    if not same_set:
        return None
    if n_probe != n_gallery:
        raise ValueError(
            f"same_set=True needs a square distance matrix (query i = database item i), got "
            f"({n_probe}, {n_gallery})."
        )
    return np.arange(sl.start, sl.stop)


def _rank_stats(distance, probe_labels, gallery_labels, *, same_set: bool = False,
                block_rows: int | None = None) -> np.ndarray:
    """``(c, t, m)`` of every probe (see :func:`_block_rank_stats`), computed blockwise."""
    D = _check_distance(distance)
    n_p, n_g = D.shape
    pc, gc = _label_codes(probe_labels, gallery_labels, n_p, n_g)
    groups = _groups_for(pc, gc)
    stats = np.empty((n_p, 3), dtype=np.int64)
    for sl in gen_batches(n_p, _rows_per_block(n_g, block_rows)):
        stats[sl] = _block_rank_stats(D[sl], pc[sl], groups,
                                      _self_columns(same_set, n_p, n_g, sl))
    return stats


def _nn_hits(stats: np.ndarray, ties: str) -> np.ndarray:
    """Nearest-neighbour hit of each row from its ``(c, t, m)``: the nearest items are the
    closest true matches when nothing is closer (``c = 0``), ``m`` of ``t + m`` of them."""
    c, t, m = stats[:, 0], stats[:, 1], stats[:, 2]
    top = (m > 0) & (c == 0)
    if ties == "optimistic":
        return top.astype(float)
    if ties == "pessimistic":
        return (top & (t == 0)).astype(float)
    return np.where(top, m / np.maximum(t + m, 1), 0.0)


def _cmc_from_stats(stats: np.ndarray, max_rank: int, ties: str) -> np.ndarray:
    return np.cumsum(_rank_histogram(stats, max_rank, ties)[1:]) / stats.shape[0]
