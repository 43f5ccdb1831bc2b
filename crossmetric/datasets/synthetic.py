"""Synthetic two-view data with a known shared latent space.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from crossmetric._utils.checks import check_positive_int, check_positive_scalar

__all__ = ["make_cross_modal"]


def make_cross_modal(n_samples: int = 600, *, n_classes: int = 20, n_latent: int = 5,
                     n_features_x: int = 30, n_features_y: int = 20,
                     class_sep: float = 2.0, noise: float = 0.5, nonnegative: bool = False,
                     random_state=None) -> Bunch:
    """Synthetic two-view data with a known shared latent space.

    Each class ``c`` has a latent centre ``μ_c ~ N(0, class_sep² I)`` in ``R^n_latent``; sample
    ``r`` has latent ``z_r = μ_{label_r} + ε_r`` (``ε ~ N(0, I)``), and its two views are
    ``x_r = A z_r + noise·N(0, I)``, ``y_r = B z_r + noise·N(0, I)`` with random
    ``A (n_features_x × n_latent)``, ``B (n_features_y × n_latent)`` of i.i.d. N(0, 1/n_latent)
    entries. With ``nonnegative=True`` each view goes through ``log1p(exp(·))`` (softplus), so
    that ``chi2`` kernels apply; the latent structure stays recoverable.

    Returns
    -------
    Bunch
        ``X``, ``Y``, ``labels``, ``instance``, ``latent`` (``z``), ``A``, ``B``,
        ``centers``.
    """
    rng = check_random_state(random_state)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    n_classes = check_positive_int(n_classes, "n_classes")
    n_latent = check_positive_int(n_latent, "n_latent")
    n_features_x = check_positive_int(n_features_x, "n_features_x")
    n_features_y = check_positive_int(n_features_y, "n_features_y")
    class_sep = check_positive_scalar(class_sep, "class_sep", allow_zero=True)
    noise = check_positive_scalar(noise, "noise", allow_zero=True)
    if n_classes > n_samples:
        raise ValueError(f"n_classes={n_classes} must be <= n_samples={n_samples}.")
    labels = np.r_[np.arange(n_classes), rng.randint(0, n_classes, n_samples - n_classes)]
    labels = labels[rng.permutation(n_samples)].astype(np.int64)
    centers = class_sep * rng.standard_normal((n_classes, n_latent))
    Z = centers[labels] + rng.standard_normal((n_samples, n_latent))
    A = rng.standard_normal((n_features_x, n_latent)) / np.sqrt(n_latent)
    B = rng.standard_normal((n_features_y, n_latent)) / np.sqrt(n_latent)
    X = Z @ A.T + noise * rng.standard_normal((n_samples, n_features_x))
    Y = Z @ B.T + noise * rng.standard_normal((n_samples, n_features_y))
    if nonnegative:
        X, Y = np.logaddexp(0.0, X), np.logaddexp(0.0, Y)
    return Bunch(X=X, Y=Y, labels=labels, instance=np.arange(n_samples, dtype=np.int64),
                 latent=Z, A=A, B=B, centers=centers)
