"""The NumPy first-order optimisers: Adam and the first-step-scaled SGD.

Both update a list or a dict of float arrays *in place* from gradients of the same layout, and
take a ``scale`` multiplier per step (the learning-rate schedule of the caller, e.g. the
stochastic solvers' divide-by-5 on a plateau, :class:`~crossmetric._solvers.epochs.EpochPlateau`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Adam", "ScaledSGD"]


def _items(arrays):
    return arrays.items() if isinstance(arrays, dict) else enumerate(arrays)


class Adam:
    """Adam (Kingma & Ba, ICLR 2015) on a list or dict of arrays.

    Parameters
    ----------
    lr : float, or list / dict of float
        Step size α, one for all arrays or one per array (same keys as the parameters).
    beta1, beta2, eps : float
        The paper's defaults.
    eps_on : {"v_hat", "v"}, default="v_hat"
        Where ε is added. ``"v_hat"``: Algorithm 1 of the paper,
        ``θ ← θ − α m̂ / (√v̂ + ε)`` with the bias-corrected moments ``m̂ = m / (1 − β₁ᵗ)``,
        ``v̂ = v / (1 − β₂ᵗ)`` (GSM). ``"v"``: the paper's §2 reformulation, the corrections
        folded into the step, ``α_t = α √(1 − β₂ᵗ) / (1 − β₁ᵗ)``, ``θ ← θ − α_t m / (√v + ε)``
        (the stochastic pair solvers). The two differ only in the scale of ε.
    """

    def __init__(self, lr, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, *,
                 eps_on: str = "v_hat"):
        if eps_on not in ("v_hat", "v"):
            raise ValueError(f"eps_on must be 'v_hat' or 'v', got {eps_on!r}.")
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.eps_on = eps_on
        self.m: dict = {}
        self.v: dict = {}
        self.t = 0
        # two work arrays per parameter array, kept between steps: a fresh array of a few
        # hundred kB per step is a fresh mapping of zeroed pages (a third of the step's time)
        self._work: dict = {}

    def step(self, params, grads, scale: float = 1.0) -> None:
        """One update of ``params`` (in place) from ``grads``; ``scale`` multiplies ``lr``."""
        self.t += 1
        c1 = 1.0 - self.b1 ** self.t
        c2 = 1.0 - self.b2 ** self.t
        per_array = isinstance(self.lr, list | tuple | dict)
        for k, g in _items(grads):
            if k not in self.m:
                self.m[k], self.v[k] = np.zeros_like(g), np.zeros_like(g)
                self._work[k] = (np.empty_like(g), np.empty_like(g))
            m, v = self.m[k], self.v[k]
            tmp, denom = self._work[k]
            # in place; the same operations in the same order as the formulas
            np.multiply(1.0 - self.b1, g, out=tmp)
            m *= self.b1
            m += tmp
            np.multiply(1.0 - self.b2, g, out=tmp)
            tmp *= g
            v *= self.b2
            v += tmp
            lr = (self.lr[k] if per_array else self.lr) * scale
            if self.eps_on == "v_hat":
                np.divide(v, c2, out=denom)
                np.sqrt(denom, out=denom)
                np.divide(m, c1, out=tmp)
                tmp *= lr
            else:
                np.sqrt(v, out=denom)
                np.multiply(lr * np.sqrt(c2) / c1, m, out=tmp)
            denom += self.eps
            tmp /= denom
            params[k] -= tmp


class ScaledSGD:
    """Plain gradient steps ``θ ← θ − η g`` whose size is set by the first gradient.

    ``η = lr · ‖θ₀‖ / ‖g₀‖`` per array (``lr`` when ``θ₀ = 0``), so that the first step moves
    each array by ``lr`` of its norm.
    """

    def __init__(self, lr: float):
        self.lr = lr
        self.base = None

    def step(self, params, grads, scale: float = 1.0) -> None:
        if self.base is None:
            self.base = {k: self.lr * np.linalg.norm(params[k]) / max(np.linalg.norm(g), 1e-300)
                         if np.linalg.norm(params[k]) > 0 else self.lr
                         for k, g in _items(grads)}
        for k, g in _items(grads):
            params[k] -= (self.base[k] * scale) * g
