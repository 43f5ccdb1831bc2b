"""The objective of PCCA and CMML (and, with a learned threshold, LDML and CLML).

Both learn linear towers ``F = Φ Wᵀ`` of fixed features ``Φ`` (the samples for the linear
methods, the kernel matrix ``K`` for the kernel ones) and minimise the mean over pairs of

    ℓ_β(y_n (‖f(x_{i_n}) − g(y_{j_n})‖² − 1))                     (pcca eq. 2, cmml eq. 4)

with ``ℓ_β(x) = log(1 + e^{βx}) / β``. PCCA is the tied case (one tower, ``f = g``).

The gradient is taken with respect to the embeddings first: a pair touches two rows of
``∂E/∂F``, so it is gathered with a sparse sample × pair incidence matrix in
O(n_pairs · k); the chain rule to the weights, ``∂E/∂W = Gᵀ Φ``, is one dense product
(pcca eq. 3, cmml eq. 5-6). For a kernel tower the K⁻¹-preconditioned gradient of pcca eq. 9-10
and cmml eq. 12 is ``(Gᵀ K) K⁻¹ = Gᵀ``: each pair changes only the columns of its two samples,
and no product with ``K`` is needed at all.

Note on pcca eq. (3): the derivative of ℓ_β(y (D² − 1)) with respect to D² is
``y σ(β y (D² − 1))``; the printed ``σ_β(y_n(1 − D²))`` has the sign of the argument flipped.
The code follows the derivative (checked against finite differences in the tests).

The mean over pairs is used instead of the papers' sum: same minimiser, step sizes that do not
depend on the number of pairs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from crossmetric.losses import generalized_logistic, generalized_logistic_grad

__all__ = ["Tower", "PairLogisticObjective", "TowerProblem"]


class Tower:
    """A linear map of fixed features: ``F = Φ Wᵀ``, ``W`` of shape (k, n_features).

    With ``preconditioned=True`` ``Φ`` must be a symmetric kernel matrix ``K`` and the descent
    direction is the gradient right-multiplied by ``K⁻¹``: ``(Gᵀ K) K⁻¹ = Gᵀ`` (pcca eq. 9).
    """

    def __init__(self, Phi: np.ndarray, preconditioned: bool = False):
        self.Phi = Phi
        self.preconditioned = preconditioned

    def embed(self, W: np.ndarray) -> np.ndarray:
        return self.Phi @ W.T

    def grad(self, G: np.ndarray) -> np.ndarray:
        """∂E/∂W from ∂E/∂F."""
        return G.T @ self.Phi

    def direction(self, G: np.ndarray) -> np.ndarray:
        """Descent direction (the negative is taken by the solver)."""
        return G.T.copy() if self.preconditioned else self.grad(G)


class PairLogisticObjective:
    """Mean generalized-logistic pair loss on embeddings, with its gradient on embeddings.

    Parameters
    ----------
    ix, iy : int arrays (n_pairs,)
        Rows of ``FX`` and ``FY`` joined by each pair.
    y : int array (n_pairs,)
        +1 / -1.
    beta : float
        Sharpness of ℓ_β.
    n_x, n_y : int
        Number of rows of ``FX`` / ``FY``.
    offset : array (n_pairs,), optional
        A fixed part of each pair's distance, added to ``‖FX[ix] − FY[iy]‖²`` (the untrained
        distance outside a learner's basis: :func:`crossmetric._solvers.span.basis_form`).
    """

    def __init__(self, ix, iy, y, beta: float, n_x: int, n_y: int, offset=None):
        self.ix, self.iy = ix, iy
        self.offset = None if offset is None else np.asarray(offset, dtype=float)
        self.y = y.astype(float)
        self.beta = float(beta)
        n = ix.shape[0]
        ones = np.ones(n)
        cols = np.arange(n)
        self._Sx = sp.csr_matrix((ones, (ix, cols)), shape=(n_x, n))
        self._Sy = sp.csr_matrix((ones, (iy, cols)), shape=(n_y, n))
        self._S = None  # Sx − Sy, built on first tied use

    def distances(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        E = FX[self.ix] - FY[self.iy]
        D = np.einsum("ij,ij->i", E, E)
        return D if self.offset is None else D + self.offset

    def _pair_terms(self, FX: np.ndarray, FY: np.ndarray, threshold: float = 1.0):
        """Loss, ``W[p] = ∂E/∂FX[ix[p]]`` (= −∂E/∂FY[iy[p]]) and ``c[p] = ∂E/∂D²_p``."""
        E = FX[self.ix] - FY[self.iy]
        D = np.einsum("ij,ij->i", E, E)
        if self.offset is not None:
            D = D + self.offset
        m = self.y * (D - threshold)
        loss = float(np.mean(generalized_logistic(m, self.beta)))
        c = self.y * generalized_logistic_grad(m, self.beta) / D.shape[0]
        return loss, E * (2.0 * c)[:, None], c

    def loss(self, FX: np.ndarray, FY: np.ndarray, threshold: float = 1.0) -> float:
        m = self.y * (self.distances(FX, FY) - threshold)
        return float(np.mean(generalized_logistic(m, self.beta)))

    def loss_grad(self, FX: np.ndarray, FY: np.ndarray):
        """``(E, ∂E/∂FX, ∂E/∂FY)`` at the papers' threshold 1."""
        loss, W, _ = self._pair_terms(FX, FY)
        return loss, np.asarray(self._Sx @ W), -np.asarray(self._Sy @ W)

    def loss_grad_tied(self, F: np.ndarray, threshold: float = 1.0):
        """``(E, ∂E/∂F, ∂E/∂threshold)`` when both sides are rows of one embedding ``F``.

        With ``beta=1`` and a learned ``threshold`` b this is LDML's log-loss
        ``ln(1 + exp(y (D − b)))`` (clml eq. 5), used by :mod:`crossmetric.learners.ldml` and CLML.
        """
        if self._S is None:
            self._S = (self._Sx - self._Sy).tocsr()
        loss, W, c = self._pair_terms(F, F, threshold)
        return loss, np.asarray(self._S @ W), float(-c.sum())


class TowerProblem:
    """One tied tower (PCCA) or two towers (CMML) plus the pair objective."""

    def __init__(self, towers: list[Tower], objective: PairLogisticObjective):
        if len(towers) not in (1, 2):
            raise ValueError("a TowerProblem has one (tied) or two towers")
        self.towers = towers
        self.objective = objective
        self.tied = len(towers) == 1

    def embed(self, Ws):
        Fs = [t.embed(W) for t, W in zip(self.towers, Ws, strict=True)]
        return (Fs[0], Fs[0]) if self.tied else (Fs[0], Fs[1])

    def loss_grad_embeddings(self, Fs):
        """Loss and ∂E/∂F per tower (tied: the two sides' gradients are summed)."""
        if self.tied:
            loss, G, _ = self.objective.loss_grad_tied(Fs[0])
            return loss, [G]
        loss, GX, GY = self.objective.loss_grad(Fs[0], Fs[1])
        return loss, [GX, GY]

    def embeddings_list(self, FX, FY):
        return [FX] if self.tied else [FX, FY]

    def loss_grad(self, Ws):
        """``(E, [∂E/∂W per tower])`` -- the plain gradient."""
        Fs = self.embeddings_list(*self.embed(Ws))
        loss, Gs = self.loss_grad_embeddings(Fs)
        return loss, [t.grad(G) for t, G in zip(self.towers, Gs, strict=True)]
