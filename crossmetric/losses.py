"""Losses over pair scores, written to be numerically stable for any input.

``generalized_logistic`` is PCCA's / CMML's ℓ_β (pcca eq. 2, cmml eq. 2) and, with β = 1,
LDML's log-loss. Each function returns per-element terms; reducers (sum / mean) are left to the
caller, as in pytorch-metric-learning.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["generalized_logistic", "generalized_logistic_grad", "hinge", "hinge_grad"]


def generalized_logistic(x, beta: float = 1.0) -> np.ndarray:
    """ℓ_β(x) = log(1 + e^{βx}) / β, computed as ``logaddexp(0, βx) / β`` (no overflow).

    A smooth upper bound of the hinge ``max(0, x)`` that tends to it as β → ∞.
    """
    x = np.asarray(x, dtype=float)
    return np.logaddexp(0.0, beta * x) / beta


def generalized_logistic_grad(x, beta: float = 1.0) -> np.ndarray:
    """dℓ_β/dx = σ(βx) = 1 / (1 + e^{−βx}) (``scipy.special.expit``, no overflow)."""
    return expit(beta * np.asarray(x, dtype=float))


def hinge(x) -> np.ndarray:
    """h(x) = max(0, x)."""
    return np.maximum(np.asarray(x, dtype=float), 0.0)


def hinge_grad(x) -> np.ndarray:
    """A subgradient of the hinge: 1 where x > 0, else 0."""
    return (np.asarray(x, dtype=float) > 0).astype(float)
