"""Verification measures: ROC, AUC, partial AUC, EER, verification rate, accuracy at the median.

They take pair labels ``y`` in {+1 (same), -1 (different)} and a *score* (larger = more alike,
e.g. ``model.pair_score``), except :func:`accuracy_at_median`, which takes a *distance*
(smaller = more alike) as CMML does. A tie between a positive and a negative counts as one
half (the ROC polyline through tied scores is a straight segment), as Eq. (4) of the CML-AUC
paper does.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata
from sklearn.metrics import roc_curve

from crossmetric._utils.checks import as_float_array, check_pair_labels

__all__ = ["roc_auc", "roc", "partial_auc", "eer", "one_minus_eer", "accuracy_at_median",
           "verification_rate", "verification_report"]


# --------------------------------------------------------------------------- verification
def _check_y_score(y, score, score_name: str = "score") -> tuple[np.ndarray, np.ndarray]:
    s = as_float_array(score, score_name, ndim=1)
    y = check_pair_labels(y, s.shape[0])
    return y, s


def roc(y: ArrayLike, score: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def roc_auc(y: ArrayLike, score: ArrayLike) -> float:
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

    Notes
    -----
    Computed as the Mann-Whitney statistic of the scores' mid-ranks, ``(Σ ranks of the
    positives − n₊(n₊ + 1)/2) / (n₊ n₋)``: the area under the exact ROC polyline, scikit-learn's
    ``roc_auc_score``, in one sort and without its input checks (the held-out checks of the
    iterative learners score it at every iteration).
    """
    y, s = _check_y_score(y, score)
    pos = y == 1
    n_pos = int(np.count_nonzero(pos))
    n_neg = y.size - n_pos
    u = float(rankdata(s)[pos].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


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


def partial_auc(y: ArrayLike, score: ArrayLike, fpr_range: Sequence[float] = (0.0, 0.1), *,
                normalize: str = "range") -> float:
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


def eer(y: ArrayLike, score: ArrayLike) -> float:
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


def one_minus_eer(y: ArrayLike, score: ArrayLike) -> float:
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


def accuracy_at_median(y: ArrayLike, distance: ArrayLike) -> float:
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


def verification_rate(y: ArrayLike, score: ArrayLike, fpr: float = 1e-3) -> float:
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
    if isinstance(fpr, bool) or not isinstance(fpr, numbers.Real) or not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must be a number in [0, 1], got {fpr!r}.")
    f, t, _ = roc(y, score)
    return float(np.max(t[f <= float(fpr) + 1e-15]))


def verification_report(y: ArrayLike, score: ArrayLike, *, fpr: float = 1e-3,
                        fpr_range: Sequence[float] = (0.0, 0.1)) -> dict[str, float]:
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
