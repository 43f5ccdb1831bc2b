"""Evaluation measures of the papers: verification, identification and retrieval.

Conventions
-----------
* Verification measures take pair labels ``y`` in {+1 (same), -1 (different)} and a *score*
  (larger = more alike, e.g. ``model.pair_score``), except :func:`accuracy_at_median`, which
  takes a *distance* (smaller = more alike) as CMML does.
* Identification and retrieval measures take a ``(n_probe, n_gallery)`` *distance* matrix
  (smaller = more alike, e.g. ``model.cross_distance(X_probe, Y_gallery)``) and the identity
  label of every probe and gallery item. They work on row blocks (``block_rows``) so that the
  temporaries of a 10,000 × 10,000 evaluation stay small, and :func:`identification_report`
  computes the same measures from two embeddings without ever holding the full matrix. No row
  is sorted: the place of a true match is a count of the items closer to the probe (and of
  those at the same distance), O(n_gallery) per relevant item (:func:`_relevant_counts`).

Ties
----
* ROC-based measures count a tie between a positive and a negative as one half (the ROC polyline
  through tied scores is a straight segment), as Eq. (4) of the CML-AUC paper does.
* Rank measures (CMC, rank-r accuracy, 1-call@n, nearest-neighbour accuracy) and average
  precision take ``ties="expected"`` by default: items at equal distance are ordered at random
  and the measure is its expectation over that order, computed exactly (hypergeometric
  probabilities for ranks, harmonic sums for AP) -- so a collapsed model whose distances are
  all equal scores chance (rank-1 = 1/n_gallery), never 1. ``"pessimistic"`` (true matches
  last among equals) and ``"optimistic"`` (first: ties count as wins) are also offered.
  Without ties the three agree; average precision then equals scikit-learn's
  :func:`~sklearn.metrics.average_precision_score` of the negated distances.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.utils import gen_batches

from crossmetric._checks import as_float_array, check_pair_labels, check_positive_int

__all__ = [
    "roc_auc",
    "roc",
    "partial_auc",
    "eer",
    "one_minus_eer",
    "accuracy_at_median",
    "verification_rate",
    "verification_report",
    "cmc",
    "rank_accuracy",
    "nearest_neighbor_accuracy",
    "mean_average_precision",
    "average_precision_per_query",
    "one_call_at_n",
    "identification_report",
]

#: float64 elements of one row block of a distance matrix (16 Mi values = 128 MiB)
BLOCK_ELEMENTS = 1 << 24


# --------------------------------------------------------------------------- verification
def _check_y_score(y, score, score_name: str = "score") -> tuple[np.ndarray, np.ndarray]:
    s = as_float_array(score, score_name, ndim=1)
    y = check_pair_labels(y, s.shape[0])
    return y, s


def roc(y, score) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr, thresholds)``: one point per distinct score, from (0, 0) to (1, 1).

    A pair is predicted *same* when ``score >= threshold``. Unlike scikit-learn's default no
    point is dropped, so the polyline is exact (tied scores give a diagonal segment).

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> fpr, tpr, thresholds = M.roc(y, score)
    >>> fpr.round(3).tolist(), tpr.round(3).tolist()
    ([0.0, 0.0, 0.0, 0.333, 0.333, 0.667, 1.0], [0.0, 0.333, 0.667, 0.667, 1.0, 1.0, 1.0])
    """
    y, s = _check_y_score(y, score)
    fpr, tpr, thr = roc_curve(y, s, pos_label=1, drop_intermediate=False)
    return fpr, tpr, thr


def roc_auc(y, score) -> float:
    """Area under the ROC curve (ties count one half).

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        +1 (same) / -1 (different), both present.
    score : array-like of shape (n_pairs,)
        Larger = more alike.

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> round(M.roc_auc(y, score), 4)
    0.8889
    """
    y, s = _check_y_score(y, score)
    return float(roc_auc_score(y, s))


def _check_fpr_range(fpr_range) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in fpr_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"fpr_range must be a pair (alpha, beta) with 0 <= alpha < beta <= 1, "
            f"got {fpr_range!r}."
        ) from None
    if not (np.isfinite(a) and np.isfinite(b) and 0.0 <= a < b <= 1.0):
        raise ValueError(
            f"fpr_range must satisfy 0 <= alpha < beta <= 1, got ({a!r}, {b!r})."
        )
    return a, b


def _area_between(fpr: np.ndarray, tpr: np.ndarray, a: float, b: float) -> float:
    """∫_a^b TPR(FPR) dFPR on the ROC polyline (vertical segments have no width)."""
    # The polyline is monotone in fpr; vertical jumps make TPR(a) ambiguous, so clip the
    # segments to [a, b] one by one instead of interpolating a function of fpr.
    x0, x1 = fpr[:-1], fpr[1:]
    y0, y1 = tpr[:-1], tpr[1:]
    lo, hi = np.clip(x0, a, b), np.clip(x1, a, b)
    width = hi - lo
    keep = width > 0
    x0, x1, y0, y1, lo, hi, width = (v[keep] for v in (x0, x1, y0, y1, lo, hi, width))
    slope = (y1 - y0) / (x1 - x0)
    ylo = y0 + slope * (lo - x0)
    yhi = y0 + slope * (hi - x0)
    return float(np.sum(0.5 * (ylo + yhi) * width))


def partial_auc(y, score, fpr_range=(0.0, 0.1), *, normalize: str = "range") -> float:
    """Partial AUC over the false-positive-rate window ``[α, β]`` (CML-AUC Eq. 4).

    The area under the ROC polyline between FPR = α and FPR = β, normalised as chosen:

    * ``"range"`` (default, the paper's Eq. 4): divided by ``β − α``, so the value lies in
      [0, 1] and ``fpr_range=(0, 1)`` gives the AUC. It equals the fraction of (positive,
      negative) tetrads correctly ordered among the negatives ranked between ``α·n⁻`` and
      ``β·n⁻`` when those bounds are whole numbers; the paper's footnote ignores the partial
      strips otherwise, here they are integrated exactly.
    * ``"none"``: the raw area, in ``[0, β − α]``.
    * ``"mcclish"``: McClish's standardisation ``½ (1 + (A − A_min) / (A_max − A_min))`` with
      ``A_min = (β² − α²)/2`` (the chance diagonal) and ``A_max = β − α``: 0.5 is chance,
      1 perfect. For ``α = 0`` it equals scikit-learn's ``roc_auc_score(max_fpr=β)``.

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        +1 / -1, both present.
    score : array-like of shape (n_pairs,)
        Larger = more alike.
    fpr_range : (float, float), default=(0.0, 0.1)
        ``(α, β)`` with ``0 <= α < β <= 1``.
    normalize : {"range", "none", "mcclish"}, default="range"

    Returns
    -------
    float

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> round(M.partial_auc(y, score, (0.0, 0.5)), 4)
    0.7778
    """
    a, b = _check_fpr_range(fpr_range)
    if normalize not in ("range", "none", "mcclish"):
        raise ValueError(
            f"normalize must be 'range', 'none' or 'mcclish', got {normalize!r}."
        )
    fpr, tpr, _ = roc(y, score)
    area = _area_between(fpr, tpr, a, b)
    if normalize == "none":
        return area
    if normalize == "range":
        return area / (b - a)
    a_min, a_max = 0.5 * (b * b - a * a), b - a
    return 0.5 * (1.0 + (area - a_min) / (a_max - a_min))


def eer(y, score) -> float:
    """Equal error rate: where the false positive rate equals the false negative rate.

    Found on the ROC polyline with linear interpolation: the intersection of the curve with the
    line ``TPR = 1 − FPR`` (from (0, 1) to (1, 0)); the EER is the FPR there, and the TPR there
    is ``1 − EER`` (CML-AUC, §IV: "the true positive rate of the intersection point of this line
    with ROC curve equals to 1-EER").

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> round(M.eer(y, score), 4)
    0.3333
    """
    fpr, tpr, _ = roc(y, score)
    g = fpr - (1.0 - tpr)  # -1 at (0, 0), +1 at (1, 1), non-decreasing along the curve
    k = int(np.argmax(g >= 0))  # first point on or past the line
    if g[k] == 0 or k == 0:
        return float(fpr[k])
    g0, g1 = g[k - 1], g[k]
    t = g0 / (g0 - g1)
    return float(fpr[k - 1] + t * (fpr[k] - fpr[k - 1]))


def one_minus_eer(y, score) -> float:
    """``1 − EER`` (the measure of the CML-AUC paper's tables).

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> round(M.one_minus_eer(y, score), 4)
    0.6667
    """
    return 1.0 - eer(y, score)


def accuracy_at_median(y, distance) -> float:
    """CMML's "accuracy at equal error rate": accuracy with the median distance as threshold.

    A pair is predicted *same* when its distance is below the median of all distances of the
    evaluated pairs, *different* when above (CMML §4.1). A pair whose distance equals the
    median counts one half (the expected accuracy of a fair coin for that pair). With as many
    positives as negatives the threshold sits at the ROC's EER point, hence the name.

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        +1 / -1, both present.
    distance : array-like of shape (n_pairs,)
        Smaller = more alike.

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> import numpy as np
    >>> distance = -np.asarray(score)
    >>> round(M.accuracy_at_median(y, distance), 4)
    0.6667
    """
    y, d = _check_y_score(y, distance, "distance")
    med = np.median(d)
    correct = np.where(d < med, y == 1, y == -1).astype(float)
    correct[d == med] = 0.5
    return float(correct.mean())


def verification_rate(y, score, fpr: float = 1e-3) -> float:
    """Verification rate (true positive rate) at a false positive rate (VR@FPR, CML-AUC §IV).

    The largest TPR among the thresholds whose FPR is ``<= fpr`` (no interpolation between ROC
    points: a threshold is a real operating point). With fewer than ``1 / fpr`` negatives only
    the thresholds with no false positive qualify.

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
    score : array-like of shape (n_pairs,)
        Larger = more alike.
    fpr : float in [0, 1], default=1e-3
        VR@0.1% of the paper.

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> M.verification_rate(y, score, fpr=0.25)
    0.6666666666666666
    """
    if isinstance(fpr, bool) or not np.isscalar(fpr) or not 0.0 <= float(fpr) <= 1.0:
        raise ValueError(f"fpr must be a number in [0, 1], got {fpr!r}.")
    f, t, _ = roc(y, score)
    return float(np.max(t[f <= float(fpr) + 1e-15]))


def verification_report(y, score, *, fpr: float = 1e-3,
                        fpr_range=(0.0, 0.1)) -> dict[str, float]:
    """All verification measures of one set of scored pairs.

    Returns
    -------
    dict
        ``auc``, ``one_minus_eer``, ``vr`` (at ``fpr``), ``pauc`` (``fpr_range``, normalised
        by the window width), ``acc_median`` (accuracy at the median of ``-score``).

    Examples
    --------
    >>> from crossmetric import metrics as M
    >>> y = [1, 1, 1, -1, -1, -1]          # +1 same identity, -1 different
    >>> score = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1]  # larger = more alike
    >>> rep = M.verification_report(y, score, fpr=0.25)
    >>> sorted(rep)
    ['acc_median', 'auc', 'one_minus_eer', 'pauc', 'vr']
    >>> round(rep['auc'], 4)
    0.8889
    """
    y, s = _check_y_score(y, score)
    return {
        "auc": roc_auc(y, s),
        "one_minus_eer": one_minus_eer(y, s),
        "vr": verification_rate(y, s, fpr),
        "pauc": partial_auc(y, s, fpr_range),
        "acc_median": accuracy_at_median(y, -s),
    }


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


# ------------------------------------------------------------------------- identification
def cmc(distance, probe_labels, gallery_labels, max_rank: int | None = None, *,
        block_rows: int | None = None, ties: str = "expected") -> np.ndarray:
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
        ``"optimistic"`` first (ties count as wins: the convention before issue 10).

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


def rank_accuracy(distance, probe_labels, gallery_labels, rank: int = 1, *,
                  block_rows: int | None = None, ties: str = "expected") -> float:
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


def nearest_neighbor_accuracy(distance, probe_labels, gallery_labels, *,
                              block_rows: int | None = None, ties: str = "expected") -> float:
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
def average_precision_per_query(distance, query_labels, db_labels, *, same_set: bool = False,
                                block_rows: int | None = None,
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


def mean_average_precision(distance, query_labels, db_labels, *, same_set: bool = False,
                           block_rows: int | None = None, ties: str = "expected") -> float:
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


def one_call_at_n(distance, query_labels, db_labels, n: int, *, same_set: bool = False,
                  block_rows: int | None = None, ties: str = "expected") -> float:
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
def identification_report(FX, FY, probe_labels, gallery_labels, *, max_rank: int = 20,
                          ranks=(1, 5, 10, 20), metric: str = "sqeuclidean",
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
    curve = _cmc_from_stats(stats, max(max_rank, max(ranks)), ties)
    out: dict = {"cmc": curve[:max_rank]}
    for r in ranks:
        out[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
    if with_map:
        ok = ~np.isnan(ap)
        out["map"] = float(ap[ok].mean()) if ok.any() else float("nan")
    if not same_set:
        out["nn_accuracy"] = float(np.sum(_nn_hits(stats, ties))) / n_p
    return out


# ------------------------------------------------------- accuracy calculator over kNN results
def knn_accuracy(query, reference, query_labels, reference_labels, *, same_set: bool = False,
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


__all__ += ["knn_accuracy"]


KNN_INDEXES = ("flat", "ivf", "hnsw")


def knn_rank_report(query, database, query_labels, database_labels, *, k: int = 100,
                    index: str = "flat", nlist: int | None = None, nprobe: int | None = None,
                    ef_search: int | None = None, hnsw_m: int = 32,
                    train_size: int | None = None, same_set: bool = False,
                    ranks=None, ties: str = "expected", n_threads: int | None = None,
                    block_rows: int | None = None, random_state=0) -> dict:
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
    from crossmetric import _faiss_tools as ft
    from crossmetric._knn_report import report_from_lists

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


__all__ += ["knn_rank_report"]


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


def evaluate_rank(distance, q_pids, g_pids, q_camids=None, g_camids=None, *,
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


__all__ += ["evaluate_rank"]


# re-ranking lives in its own module; its public functions are part of this namespace (API.md)
from crossmetric.reranking import query_expansion, re_ranking  # noqa: E402

__all__ += ["re_ranking", "query_expansion"]
