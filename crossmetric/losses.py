"""Losses over pair scores, written to be numerically stable for any input.

``generalized_logistic`` is PCCA's / CMML's ℓ_β (pcca eq. 2, cmml eq. 2) and, with β = 1,
LDML's log-loss. :func:`pauc_window` selects the cannot-link pairs of CML-AUC's partial-AUC
hinge (Huo et al. TNNLS 2018, eq. 4), for the NumPy learners (:mod:`crossmetric.learners.auc`) and
the torch losses (:mod:`crossmetric.deep.pml_losses`) alike. Each loss returns per-element terms;
reducers (sum / mean) are left to the caller, as in pytorch-metric-learning.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

__all__ = ["generalized_logistic", "generalized_logistic_grad", "hinge", "hinge_grad",
           "check_fpr_range", "pauc_window_bounds", "pauc_window"]


def generalized_logistic(x: ArrayLike, beta: float = 1.0) -> np.ndarray:
    """ℓ_β(x) = log(1 + e^{βx}) / β, computed as ``logaddexp(0, βx) / β`` (no overflow).

    A smooth upper bound of the hinge ``max(0, x)`` that tends to it as β → ∞.
    """
    x = np.asarray(x, dtype=float)
    return np.logaddexp(0.0, beta * x) / beta


def generalized_logistic_grad(x: ArrayLike, beta: float = 1.0) -> np.ndarray:
    """dℓ_β/dx = σ(βx) = 1 / (1 + e^{−βx}) (``scipy.special.expit``, no overflow)."""
    return expit(beta * np.asarray(x, dtype=float))


def hinge(x: ArrayLike) -> np.ndarray:
    """h(x) = max(0, x)."""
    return np.maximum(np.asarray(x, dtype=float), 0.0)


def hinge_grad(x: ArrayLike) -> np.ndarray:
    """A subgradient of the hinge: 1 where x > 0, else 0."""
    return (np.asarray(x, dtype=float) > 0).astype(float)


def check_fpr_range(fpr_range: Any) -> tuple[float, float]:
    """``fpr_range`` must be a pair ``(α, β)`` with ``0 <= α < β <= 1``."""
    try:
        alpha, beta = fpr_range
    except (TypeError, ValueError):
        raise ValueError(
            f"fpr_range must be a pair (alpha, beta) with 0 <= alpha < beta <= 1, "
            f"got {fpr_range!r}."
        ) from None
    for v in (alpha, beta):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
            raise ValueError(f"fpr_range must hold two finite numbers, got {fpr_range!r}.")
    if not 0.0 <= alpha < beta <= 1.0:
        raise ValueError(
            f"fpr_range must satisfy 0 <= alpha < beta <= 1, got {fpr_range!r}."
        )
    return float(alpha), float(beta)


def pauc_window_bounds(n_negatives: int, fpr_range: Sequence[float]) -> tuple[int, int]:
    """The 1-based ranks ``(j_α, j_β)`` of eq. (4): ``j_α = ⌈|D| α⌉ + 1``, ``j_β = ⌊|D| β⌋``.

    ``|D| α`` and ``|D| β`` are rounded to 9 decimals before ``ceil`` / ``floor`` so that a
    product such as ``1000 × 0.1`` (``100.00000000000001`` in floating point) counts as 100.

    Raises
    ------
    ValueError
        If ``|D| (β − α) < 1`` (the paper's assumption ``|D| >= 1 / (β − α)``) or the window is
        empty (``j_α > j_β``).
    """
    alpha, beta = check_fpr_range(fpr_range)
    n = int(n_negatives)
    if n * (beta - alpha) < 1.0 - 1e-9:
        raise ValueError(
            f"the pAUC window of fpr_range=({alpha}, {beta}) is empty for {n} cannot-link "
            f"pairs: |D|·(beta − alpha) = {n * (beta - alpha):.3g} < 1 (eq. 4 needs "
            f"|D| >= 1/(beta − alpha) = {1.0 / (beta - alpha):.3g}); sample more cannot-link "
            "pairs (batch_size_neg) or widen fpr_range."
        )
    j_alpha = math.ceil(round(n * alpha, 9)) + 1
    j_beta = math.floor(round(n * beta, 9))
    if j_alpha > j_beta:
        raise ValueError(
            f"the pAUC window of fpr_range=({alpha}, {beta}) is empty for {n} cannot-link "
            f"pairs (j_alpha={j_alpha} > j_beta={j_beta}); sample more cannot-link pairs "
            "(batch_size_neg) or widen fpr_range."
        )
    return j_alpha, j_beta


def pauc_window(neg_distances: np.ndarray, fpr_range: Sequence[float]) -> np.ndarray:
    """Indices of the cannot-link pairs ranked ``j_α … j_β`` by ascending distance (eq. 4).

    Parameters
    ----------
    neg_distances : ndarray of shape (n_negatives,)
        Distances of the (sampled) cannot-link pairs.
    fpr_range : (float, float)
        ``(α, β)``; ``(0, 1)`` selects every pair (full AUC).

    Returns
    -------
    ndarray of int
        Positions into ``neg_distances``, in ascending order of distance (ties keep their
        input order).
    """
    d = np.asarray(neg_distances, dtype=float).ravel()
    j_alpha, j_beta = pauc_window_bounds(d.size, fpr_range)
    if j_alpha == 1 and j_beta == d.size:
        return np.argsort(d, kind="stable")
    return np.argsort(d, kind="stable")[j_alpha - 1: j_beta]
