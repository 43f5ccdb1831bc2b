"""ITML: information-theoretic metric learning (Davis, Kulis, Jain, Sra & Dhillon, ICML 2007).

ITML learns a Mahalanobis matrix ``A`` (``d_A(x, y) = (x − y)ᵀ A (x − y)``) that stays close,
in the LogDet divergence, to a prior ``A₀`` while satisfying the pair constraints with slack
(the paper's eq. 5 with slack, §3.2):

    min_{A ⪰ 0, ξ}  D_ld(A, A₀) + γ · D_ld(diag ξ, diag ξ₀)
    s.t.            d_A(x_i, x_j) ≤ ξ_ij   for (i, j) ∈ S   (similar,    ξ₀_ij = u)
                    d_A(x_i, x_j) ≥ ξ_ij   for (i, j) ∈ D   (dissimilar, ξ₀_ij = l)

with ``D_ld(A, A₀) = tr(A A₀⁻¹) − log det(A A₀⁻¹) − d``. Algorithm 1 of the paper solves it by
cyclic Bregman projections onto one constraint at a time. For constraint ``(i, j)`` with
difference ``v = x_i − x_j``, ``δ = +1`` (S) / ``−1`` (D), dual variable ``λ_ij ≥ 0`` (start 0)
and current slack target ``ξ_ij`` (start ξ₀):

    p  ← vᵀ A v                                              (step 3.2)
    α  ← min(λ_ij, δ · γ/(γ+1) · (1/p − 1/ξ_ij))                (step 3.4, see below)
    β  ← δ α / (1 − δ α p)                                    (step 3.5)
    ξ_ij ← γ ξ_ij / (γ + δ α ξ_ij)                             (step 3.6)
    λ_ij ← λ_ij − α                                           (step 3.7)
    A  ← A + β A v vᵀ A                                       (step 3.8)

*Step 3.4.* The paper prints ``α ← min(λ_ij, (δ/2)(1/p − γ/ξ_ij))``, which is the exact
projection only for γ = 1. Solving the projection (``1/p' = 1/p − δα`` after step 3.8 by
Sherman-Morrison, ``1/ξ' = 1/ξ + δα/γ`` after step 3.6, and ``p' = ξ'``) gives
``α = δ γ/(γ+1) (1/p − 1/ξ)`` for every γ, the form of the authors' released code (itml.m,
``gamma_proj``) and of metric-learn; we use it. ``γ = inf`` (hard constraints) gives
``γ/(γ+1) = 1`` and a fixed ξ.

*Invariant and objective.* After every projection ``A⁻¹ = A₀⁻¹ + Σ δ_k λ_k v_k v_kᵀ`` and
``1/ξ_k = 1/ξ₀_k − δ_k λ_k / γ``: the iterate minimises the Lagrangian for the current ``λ``, and
Algorithm 1 is coordinate ascent on the (concave) dual

    g(λ) = log det(A₀ A⁻¹) + γ Σ_k log(ξ₀_k / ξ_k),   λ ≥ 0,

so ``g`` never decreases; ``loss_curve_`` records it after each pass.

*Order.* Each pass visits the constraints in a new random permutation (random reshuffling).
Algorithm 1 leaves the order open; a fixed cyclic order converges far more slowly here: on the
digits task of ``benchmarks/bench_itml.py`` (2,000 pairs, 64 dims, tol 1e-3) a fixed random
order took 579 passes and metric-learn's order (all similar, then all dissimilar pairs) 945, while
reshuffling took 15 passes and ended closer to the optimum (max relative error of ``A`` against
a tol 1e-8 solution: 1.2e-5 after 15 reshuffled passes, 2.2e-4 after 579 fixed-order passes).

*Speed.* Step 3.8 is a rank-one update. A block of ``b`` consecutive constraints is projected
without touching ``A``: with ``W = A V_bᵀ`` and ``G = V_b A V_bᵀ`` (two BLAS-3 products), each
projection needs only ``p = G_tt`` and updates ``G ← G + β g gᵀ`` (``g`` = row ``t`` of ``G``,
BLAS ``dsyr`` on the ``b × b`` block), so a projection costs O(b²) instead of O(d²). The block's
updates ``A ← A + Σ_t β_t w_t w_tᵀ`` with ``w_t = A_{t−1} v_t`` are applied at the end of the
block as one BLAS-3 product: ``w_t = W C[:, t]`` where ``C = (I − T)⁻¹`` and ``T`` is strictly
upper triangular with ``T_st = β_s g_s[t]`` (since ``w_t = A v_t + Σ_{s<t} β_s w_s (w_sᵀ v_t)``
and ``w_sᵀ v_t = g_s[t]``). The iterates are those of the plain loop, in the same order
(tested against it).
"""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
from scipy.linalg.blas import dsyr, dtrsm
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from crossmetric._base import LinearSingleModalMixin
from crossmetric._utils.checks import (
    as_float_array,
    check_positive_int,
    check_positive_scalar,
    user_stacklevel,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["ITML", "itml_bounds"]

#: at most this many samples enter the percentile rule for the default bounds
_BOUND_SAMPLES = 2000


def _check_prior(prior, d: int) -> np.ndarray:
    if isinstance(prior, str):
        if prior != "identity":
            raise ValueError(f"prior must be 'identity' or a (n_features, n_features) "
                             f"positive definite array, got {prior!r}.")
        return np.eye(d)
    A0 = as_float_array(prior, "prior", ndim=2).astype(np.float64, copy=True)
    if A0.shape != (d, d):
        raise ValueError(f"prior must have shape (n_features, n_features) = {(d, d)}, "
                         f"got {A0.shape}.")
    if not np.allclose(A0, A0.T, rtol=1e-10, atol=1e-12 * np.abs(A0).max()):
        raise ValueError("prior must be a symmetric matrix.")
    try:
        np.linalg.cholesky(A0)
    except np.linalg.LinAlgError:
        raise ValueError("prior must be positive definite (its Cholesky factorisation "
                         "failed).") from None
    return (A0 + A0.T) / 2


def itml_bounds(X, prior=None, *, percentiles=(5.0, 95.0), max_samples: int = _BOUND_SAMPLES,
                random_state=None) -> tuple[float, float]:
    """The usual ITML bounds ``(u, l)``: percentiles of squared distances under the prior.

    ``u`` (the bound of similar pairs) and ``l`` (dissimilar pairs) are the ``percentiles[0]``-th
    and ``percentiles[1]``-th percentiles of ``(x − y)ᵀ A₀ (x − y)`` over all pairs of distinct
    rows of ``X`` (Davis et al. §4: "5th and 95th percentiles of the distribution of distances";
    their code samples random pairs, we take all pairs of at most ``max_samples`` rows, drawn
    with ``random_state`` when ``X`` has more).
    """
    X = as_float_array(X, "X", ndim=2)
    lo, hi = percentiles
    if not 0.0 <= lo < hi <= 100.0:
        raise ValueError(f"percentiles must be (low, high) with 0 <= low < high <= 100, "
                         f"got {percentiles!r}.")
    X = np.unique(X, axis=0)
    if X.shape[0] < 2:
        raise ValueError("the default ITML bounds need at least two distinct samples.")
    if X.shape[0] > max_samples:
        rng = check_random_state(random_state)
        X = X[np.sort(rng.choice(X.shape[0], max_samples, replace=False))]
    if prior is not None:
        X = X @ np.linalg.cholesky(np.asarray(prior, dtype=float))  # ‖Rx‖² = xᵀ A₀ x
    u, l_ = np.percentile(pdist(X, "sqeuclidean"), [lo, hi])
    return float(u), float(l_)


def _dual_objective(A: np.ndarray, logdet_A0: float, xi: np.ndarray, xi0: np.ndarray,
                    gamma: float) -> float:
    """``g(λ) = log det(A₀ A⁻¹) + γ Σ log(ξ₀/ξ)`` (the slack term is 0 for γ = inf)."""
    sign, logdet_A = np.linalg.slogdet(A)
    val = logdet_A0 - logdet_A if sign > 0 else -np.inf
    if np.isfinite(gamma):
        val += gamma * float(np.sum(np.log(xi0 / xi)))
    return float(val)


def _project_pass(A, V, order, delta, lam, xi, gamma, block):
    """One pass of Algorithm 1 over ``order``, ``block`` constraints at a time (in place).

    ``lam``, ``xi`` and ``delta`` are Python lists (scalar access is the inner loop's cost).
    """
    gproj = 1.0 if np.isinf(gamma) else gamma / (gamma + 1.0)
    hard = np.isinf(gamma)
    c = len(order)
    for start in range(0, c, block):
        idx = order[start:start + block]
        b = len(idx)
        Vb = V[idx]
        W = A @ Vb.T                                     # (d, b): A v_t
        G = np.asfortranarray(Vb @ W)                    # (b, b): v_s A v_t
        zero = np.zeros(b)
        cols = [zero] * b                                # column t: g_t (entries s >= t)
        beta = [0.0] * b
        updated = False
        for t in range(b):
            k = idx[t]
            p = G.item(t, t)                             # step 3.2
            if p <= 0.0:                                 # v in the (numerical) null space
                continue
            dk = delta[k]
            lk = lam[k]
            xk = xi[k]
            a = dk * gproj * (1.0 / p - 1.0 / xk)        # step 3.4
            if lk < a:
                a = lk
            if a == 0.0:                                 # inactive: nothing changes
                continue
            lam[k] = lk - a                              # step 3.7
            da = dk * a
            bt = da / (1.0 - da * p)                     # step 3.5
            if not hard:
                xi[k] = gamma * xk / (gamma + da * xk)   # step 3.6
            # column t of G (its entries s >= t are current: v_s A_{t-1} v_t; the entries
            # s < t are stale and never read again, neither here nor by dtrsm below)
            g = G[:, t].copy()
            cols[t] = g
            beta[t] = bt
            G = dsyr(bt, g, a=G, lower=1, overwrite_a=1)  # G ← G + β g gᵀ (lower triangle)
            updated = True
        if updated:                                      # step 3.8 for the whole block
            beta = np.asarray(beta)
            # U = W (I − T)⁻¹, T strictly upper with T_st = β_s g_s[t]: a triangular solve
            # from the right whose unit diagonal means only the strictly upper triangle of
            # its argument is read
            U = dtrsm(1.0, np.stack(cols) * -beta[:, None], W, side=1, lower=0, diag=1)
            A += (U * beta) @ U.T
    return A


class ITML(LinearSingleModalMixin, BaseEstimator):
    """Information-theoretic metric learning (Davis et al., ICML 2007), Algorithm 1.

    Learns a full Mahalanobis matrix ``M`` by cyclic Bregman projections onto the pair
    constraints ``d_M(x, y) ≤ u`` (similar) and ``d_M(x, y) ≥ l`` (dissimilar), each with a
    slack weighted by ``gamma``, staying close to ``prior`` in LogDet divergence (module
    docstring: equations, the corrected step 3.4 and the blocked fast path).

    Parameters
    ----------
    gamma : float or inf, default=1.0
        Slack trade-off γ (``inf``: hard constraints). 1.0 as in the authors' code.
    prior : "identity" or ndarray of shape (n_features, n_features), default="identity"
        The prior ``A₀`` (positive definite).
    bounds : (u, l), optional
        Squared-distance bounds of similar (``u``) and dissimilar (``l``) pairs. Default: the
        ``percentiles`` of the squared prior distances between the training samples
        (:func:`itml_bounds`).
    percentiles : (float, float), default=(5.0, 95.0)
        Percentiles giving ``(u, l)`` when ``bounds`` is None (the paper's rule).
    max_iter : int, default=1000
        Maximum number of passes over the constraints.
    tol : float, default=1e-3
        Stop when ``‖λ − λ_prev‖₁ / (‖λ‖₂ + ‖λ_prev‖₂) < tol`` after a pass (the authors'
        criterion, also metric-learn's).
    block_size : int, default=16
        Constraints projected per block of the fast path (speed only; the result does not
        depend on it).
    verbose : int, default=0
        Print the dual objective and the change of λ after each pass.
    random_state : int, RandomState instance or None
        Seeds the order of the constraints (a new random permutation for every pass) and the
        sample subset of the default bounds.
    preprocessor : array-like, optional
        Samples that integer index pairs refer to.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        ``L`` with ``M = Lᵀ L`` (from the eigen-decomposition of ``M``, rows by decreasing
        eigenvalue).
    bounds_ : tuple (u, l)
    n_iter_ : int
        Passes run.
    dual_coef_ : ndarray of shape ``(n_constraints_,)``
        The dual variables λ (0 for constraints that are inactive at the solution).
    loss_curve_ : list of float
        The dual objective ``g(λ)`` after each pass (non-decreasing; module docstring).
    n_constraints_ : int
        Constraints used (pairs of two identical samples carry no direction and are dropped).
    threshold_ : float

    References
    ----------
    J. V. Davis, B. Kulis, P. Jain, S. Sra, I. S. Dhillon. Information-theoretic metric
    learning. ICML 2007.

    Examples
    --------
    >>> from crossmetric import ITML, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = ITML(preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 30)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, gamma: float = 1.0, *, prior="identity", bounds=None,
                 percentiles=(5.0, 95.0), max_iter: int = 1000, tol: float = 1e-3,
                 block_size: int = 16, verbose: int = 0, random_state=None,
                 preprocessor=None):
        self.gamma = gamma
        self.prior = prior
        self.bounds = bounds
        self.percentiles = percentiles
        self.max_iter = max_iter
        self.tol = tol
        self.block_size = block_size
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _check_params(self):
        g = self.gamma
        if not (isinstance(g, numbers.Real) and not isinstance(g, bool)) or np.isnan(g) or g <= 0:
            raise ValueError(f"gamma must be a real number > 0 (or inf), got {g!r}.")
        check_positive_int(self.max_iter, "max_iter")
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_int(self.block_size, "block_size")
        if self.bounds is not None:
            try:
                u, l_ = (float(v) for v in self.bounds)
            except (TypeError, ValueError):
                raise ValueError(f"bounds must be a pair (u, l) of positive numbers, got "
                                 f"{self.bounds!r}.") from None
            if not (np.isfinite(u) and np.isfinite(l_) and u > 0 and l_ > 0):
                raise ValueError(f"bounds must be a pair (u, l) of positive numbers, got "
                                 f"{self.bounds!r}.")

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        rng = check_random_state(self.random_state)
        Z, i, j = data.stacked()
        d = Z.shape[1]
        A0 = _check_prior(self.prior, d)
        if self.bounds is None:
            self.bounds_ = itml_bounds(Z[np.unique(np.r_[i, j])],
                                       None if isinstance(self.prior, str) else A0,
                                       percentiles=self.percentiles, random_state=rng)
            if self.bounds_[0] <= 0:
                raise ValueError("the default bound u is 0 (more than "
                                 f"{self.percentiles[0]}% of the sample distances are 0); "
                                 "give bounds=(u, l) explicitly.")
        else:
            self.bounds_ = tuple(float(v) for v in self.bounds)
        V = Z[i] - Z[j]
        keep = np.any(V != 0, axis=1)
        V, yk = np.ascontiguousarray(V[keep], dtype=np.float64), y[keep]
        self.n_constraints_ = int(V.shape[0])
        u, l_ = self.bounds_
        xi0 = np.where(yk == 1, u, l_).astype(float)
        A = self._solve(A0, V, yk, xi0, rng)
        A = (A + A.T) / 2
        w, U = np.linalg.eigh(A)
        w, U = np.clip(w[::-1], 0.0, None), U[:, ::-1]
        self.components_ = (U * np.sqrt(w)).T

    def _solve(self, A0, V, yk, xi0, rng):
        gamma = float(self.gamma)
        A = A0.copy()
        logdet_A0 = float(np.linalg.slogdet(A0)[1])
        delta = yk.astype(float).tolist()
        lam = [0.0] * V.shape[0]
        xi = xi0.tolist()
        lam_old = np.zeros(V.shape[0])
        self.loss_curve_ = []
        t0 = time.perf_counter()
        if self.verbose:
            print("[ITML]")
            print(f"{'pass':>6} {'dual objective':>15} {'change':>10} {'time(s)':>9}")
        converged = V.shape[0] == 0
        self.n_iter_ = 0
        while not converged and self.n_iter_ < self.max_iter:
            order = rng.permutation(V.shape[0]).tolist()
            A = _project_pass(A, V, order, delta, lam, xi, gamma, int(self.block_size))
            A = (A + A.T) / 2
            self.n_iter_ += 1
            lam_new = np.asarray(lam)
            self.loss_curve_.append(_dual_objective(A, logdet_A0, np.asarray(xi), xi0, gamma))
            norm = np.linalg.norm(lam_new) + np.linalg.norm(lam_old)
            change = 0.0 if norm == 0 else float(np.abs(lam_new - lam_old).sum() / norm)
            if self.verbose:
                print(f"{self.n_iter_:>6d} {self.loss_curve_[-1]:>15.6e} {change:>10.3g} "
                      f"{time.perf_counter() - t0:>9.3f}")
            converged = change < self.tol
            lam_old = lam_new
        if not converged:
            warnings.warn(f"ITML did not converge in max_iter={self.max_iter} passes "
                          f"(relative change of the dual variables {change:.3g} > tol="
                          f"{self.tol}); increase max_iter.", ConvergenceWarning,
                          stacklevel=user_stacklevel())
        self.dual_coef_ = np.asarray(lam)
        return A
