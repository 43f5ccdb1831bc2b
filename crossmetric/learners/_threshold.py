"""Choosing the decision threshold on a learned distance (``calibrate_threshold``).

A pair is predicted *same* (+1) when its distance is ``<= threshold``. All candidate thresholds
are scored at once: sort the distances, take cumulative counts of positives and negatives, and
evaluate the strategy at every cut between two distinct values -- O(n log n) for n pairs.
"""

from __future__ import annotations

import numpy as np

from crossmetric._utils.checks import check_positive_scalar

STRATEGIES = ("accuracy", "f_beta", "max_tpr", "max_tnr")


def _cut_points(distance: np.ndarray, y: np.ndarray):
    """Candidate thresholds and the confusion counts of each.

    Returns ``(thresholds, tp, fp, n_pos, n_neg)``. Candidate 0 predicts no pair as *same*;
    candidate ``k >= 1`` predicts *same* for the pairs with the ``k`` smallest distinct values.
    A candidate between two distinct distances sits at their midpoint, the last one at the
    largest distance.
    """
    order = np.argsort(distance, kind="mergesort")
    d = distance[order]
    pos = (y[order] == 1).astype(np.int64)
    # last index of each run of equal distances
    last = np.flatnonzero(np.r_[d[1:] != d[:-1], True])
    tp = np.r_[0, np.cumsum(pos)[last]]
    fp = np.r_[0, (last + 1) - tp[1:]]
    values = d[last]
    below = np.nextafter(values[0], -np.inf)
    mids = values[:-1] + (values[1:] - values[:-1]) / 2.0
    thresholds = np.r_[below, mids, values[-1]]
    n_pos = int(pos.sum())
    return thresholds, tp, fp, n_pos, d.size - n_pos


def best_threshold(distance: np.ndarray, y: np.ndarray, strategy: str = "accuracy",
                   min_rate: float | None = None, beta: float = 1.0) -> float:
    """The threshold on ``distance`` that is best for ``strategy``.

    Parameters
    ----------
    distance : ndarray of shape (n_pairs,)
        Learned dissimilarities (smaller = more alike).
    y : ndarray of shape (n_pairs,)
        +1 / -1 labels, both present.
    strategy : {"accuracy", "f_beta", "max_tpr", "max_tnr"}
        ``accuracy`` maximises the accuracy; ``f_beta`` the F-beta score of the *same* class;
        ``max_tpr`` the true-positive rate subject to a true-negative rate ``>= min_rate``;
        ``max_tnr`` the true-negative rate subject to a true-positive rate ``>= min_rate``.
    min_rate : float in [0, 1], optional
        Required by ``max_tpr`` and ``max_tnr``.
    beta : float > 0
        Weight of recall in ``f_beta``.

    Returns
    -------
    float
        The chosen threshold. Ties are broken towards the smallest threshold.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    if strategy in ("max_tpr", "max_tnr"):
        if min_rate is None:
            raise ValueError(f"strategy={strategy!r} needs min_rate (a rate in [0, 1]).")
        min_rate = check_positive_scalar(min_rate, "min_rate", allow_zero=True)
        if min_rate > 1:
            raise ValueError(f"min_rate must be in [0, 1], got {min_rate!r}.")
    thresholds, tp, fp, n_pos, n_neg = _cut_points(distance, y)
    tn = n_neg - fp
    if strategy == "accuracy":
        gain = (tp + tn).astype(float)
    elif strategy == "f_beta":
        b2 = check_positive_scalar(beta, "beta") ** 2
        fn = n_pos - tp
        denom = (1 + b2) * tp + b2 * fn + fp
        gain = np.where(denom > 0, (1 + b2) * tp / np.maximum(denom, 1), 0.0)
    else:
        tpr, tnr = tp / n_pos, tn / n_neg
        value, constraint = (tpr, tnr) if strategy == "max_tpr" else (tnr, tpr)
        feasible = constraint >= min_rate - 1e-12
        if not feasible.any():  # pragma: no cover - candidate 0 / last always satisfy one side
            raise ValueError(f"no threshold reaches min_rate={min_rate}.")
        # best value; among equals, the one with the best constraint side
        gain = np.where(feasible, value + 1e-9 * constraint, -np.inf)
    return float(thresholds[int(np.argmax(gain))])
