"""The PSD proximal step of the log-det regulariser (CML-AUC, Huo et al. TNNLS 2018).

``φ⁺_λ`` (Lemma 1) applied to the eigenvalues of a symmetric matrix is the proximal map of
``−λ log det`` (Lemma 2, eq. 15): it returns a positive definite matrix. One step of
Algorithm 1, ``M ← φ⁺_{ημ}(M − η G)`` (Lemma 3, eq. 14 / 18), is :func:`ppa_step`.
"""

from __future__ import annotations

import numpy as np

from crossmetric._utils.checks import check_positive_scalar

__all__ = ["phi_plus", "prox_logdet", "ppa_step"]


def phi_plus(v, lam: float):
    """``φ⁺_λ(v) = (√(v² + 4λ) + v) / 2`` (Lemma 1), elementwise and without cancellation.

    For ``v < 0`` the equal form ``2λ / (√(v² + 4λ) − v)`` is used; ``√(v² + 4λ)`` is computed
    as ``hypot(v, 2√λ)`` so large ``v`` cannot overflow.
    """
    v = np.asarray(v, dtype=float)
    r = np.hypot(v, 2.0 * np.sqrt(lam))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v >= 0, (r + v) / 2.0, 2.0 * lam / (r - v))


def _sym_eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigendecomposition of the symmetric part of ``A`` (LAPACK ``syevd`` via NumPy)."""
    return np.linalg.eigh((A + A.T) / 2.0)


def prox_logdet(X: np.ndarray, lam: float, *, return_eig: bool = False):
    """``φ⁺_λ(X) = U diag(φ⁺_λ(v)) Uᵀ`` for ``X = U diag(v) Uᵀ`` (eq. 15).

    By Lemma 2 it is the minimiser of ``‖Y − X‖²_F / 2 − λ log det Y`` over ``Y ≻ 0``; it is
    positive definite and satisfies ``Y − λ Y⁻¹ = X`` (eq. 17).

    Parameters
    ----------
    X : ndarray of shape (n, n)
        Symmetric matrix (its symmetric part is used).
    lam : float > 0
    return_eig : bool, default=False
        Also return ``(φ⁺_λ(v), U)``.
    """
    lam = check_positive_scalar(lam, "lam")
    v, U = _sym_eigh(np.asarray(X, dtype=float))
    w = phi_plus(v, lam)
    Y = (U * w) @ U.T
    if return_eig:
        return Y, w, U
    return Y


def ppa_step(M: np.ndarray, G: np.ndarray, eta: float, mu: float):
    """One proximal step of Lemma 3: ``φ⁺_{ημ}(M − η G)`` with ``G = P_A + γ P_S + μ I``.

    Returns ``(M_next, w, U)`` with ``M_next = U diag(w) Uᵀ``.
    """
    v, U = _sym_eigh(M - eta * G)
    w = phi_plus(v, eta * mu)
    W = U * np.sqrt(w)
    return W @ W.T, w, U                       # BLAS syrk: A Aᵀ at half the cost
