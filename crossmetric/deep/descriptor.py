"""DeepGSM's descriptor branch: a fixed image descriptor beside the network's features.

With ``DeepGSM(descriptor=...)`` every image is also described by a fixed transformer of
images (:class:`crossmetric.features.HOG`, ``LOMO``, ... or any object with ``fit`` and
``transform``), ``u(x)``, and the similarity gains the descriptor's squared Euclidean
distance, weighted by a learnt scale ``s``::

    S̃(x, y) = S̃_net(x, y) + s² ‖u(x) − u(y)‖².

This is the generalized similarity of eq. (1) on the concatenated features ``[f₁(x); u(x)]``
whose descriptor block has ``A = B = C = s² I`` and no cross terms with the network's block,
so the similarity components of eq. (10) carry it (:func:`attach`)::

    x̃ = [L_A f₁(x), s u(x), L_Cx f₁(x), s u(x), dᵀf₁(x)],

and everything that aggregates S̃ from components -- the training rounds' hinge, early
stopping's held-out rank-1, ``cross_distance``, a retrieval index -- is unchanged.

**The start** (ours, not the paper's: its §4 trains a random network). The similarity
components are drawn small (standard deviation 0.001, the paper's) so that S̃ at
initialisation is the descriptor's distance plus terms of order 10⁻⁴: the model starts at the
untrained distance of its descriptor, which is where early stopping's first check scores it
and what it keeps when no later check beats it on held-out identities. ``s²`` starts at
``2 / m``, ``m`` the median descriptor distance between the two domains' training images (a
seeded subset), so that a typical pair starts near S̃ = f + 2, between the margins of eq. (5).

The descriptor is fitted once, on the first domain's training images (the descriptors of
:mod:`crossmetric.features` learn nothing in ``fit``), and describes each image as given:
un-augmented and un-mirrored (augmentation and ``test_flip`` act on the network's branch).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import clone

__all__ = ["attach", "describe", "fit_descriptor", "initial_log_scale"]

#: images of each domain whose cross distances give the median of the initial scale
_SCALE_SAMPLE = 300


def fit_descriptor(descriptor, images: np.ndarray):
    """An unfitted copy of ``descriptor`` (checked by DeepGSM's parameter checks) fitted
    on ``images``."""
    try:
        est = clone(descriptor)
    except TypeError:  # not a scikit-learn estimator: used as given
        est = descriptor
    return est.fit(images)


def describe(descriptor, images: np.ndarray) -> np.ndarray:
    """The descriptor's rows of ``images``, float32 ``(n, D)`` (finite, one row per image)."""
    U = np.asarray(descriptor.transform(images), dtype=np.float32)
    if U.ndim != 2 or U.shape[0] != len(images):
        raise ValueError(f"descriptor must return one row per image ({len(images)}), got "
                         f"shape {U.shape}.")
    if not np.isfinite(U).all():
        raise ValueError("descriptor returned NaN or infinite values.")
    return U


def initial_log_scale(ux: np.ndarray, uy: np.ndarray, seed: int) -> float:
    """``log s`` with ``s² = 2 / median ‖u(x) − u(y)‖²`` over a seeded subset of the two
    domains' images (1 when every distance is 0)."""
    rs = np.random.RandomState(np.random.SeedSequence([seed, 11]).generate_state(1))
    a = ux[rs.permutation(len(ux))[:_SCALE_SAMPLE]].astype(np.float64)
    b = uy[rs.permutation(len(uy))[:_SCALE_SAMPLE]].astype(np.float64)
    d2 = ((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T).clip(min=0.0)
    m = float(np.median(d2))
    return 0.5 * float(np.log(2.0 / m)) if m > 0 else 0.0


def attach(T, u, scale):
    """Components ``T`` ``(n, 2r + 1)`` of the network with the descriptor rows ``u``
    ``(n, D)`` scaled by ``scale``: ``(n, 2(r + D) + 1)``. Torch tensors or NumPy arrays."""
    r = (T.shape[1] - 1) // 2
    su = u * scale
    parts = [T[:, :r], su, T[:, r:2 * r], su, T[:, 2 * r:]]
    if isinstance(T, torch.Tensor):
        return torch.cat(parts, dim=1)
    return np.concatenate(parts, axis=1)
