"""AUC- and partial-AUC-optimised metric learning (Huo, Gao, Shi & Yin, TNNLS 2018).

``CMLAUC`` learns the cross-modal metric of eq. (2),

    D_M(x, y) = zᵀ M z,   z = [x; −y],   M ⪰ 0 of size (d_x + d_y),

and ``MahaAUC`` the Mahalanobis metric ``(x − y)ᵀ M (x − y)`` the paper compares against
(Maha_AUC / Maha_pAUC, §IV-C). Both minimise eq. (6),

    F(M) = Σ_{S} Σ_{D_{jα..jβ}} [1 + D(pos) − D(neg)]₊ / (|S| |D_{jα..jβ}|)
           + γ Σ_S D(pos) / |S|  +  μ [tr(M) − log det M],

where for ``fpr_range=(α, β)`` only the cannot-link pairs ranked ``jα … jβ`` by ascending
distance enter (eq. 4, :func:`pauc_window`); ``(0, 1)`` is the full AUC. The solver is the
paper's Algorithm 1, a mini-batch proximal point algorithm: per iteration it samples must-link
and cannot-link pairs, selects the pAUC window, builds ``P_A`` with the index-matrix technique
of eq. (20)-(22) (:func:`weighted_pair_outer_sum`) and takes the step of Lemma 3,

    M ← φ⁺_λ(M − η (P_A + γ P_S + μ I)),   λ = η μ                  (eq. 14 / 18)

(:func:`~crossmetric._solvers.proximal.prox_logdet`,
:func:`~crossmetric._solvers.proximal.ppa_step`, re-exported here), with ``η ← min(η ρ, τ)``.

Three things around Algorithm 1 are ours (the paper leaves "converged" open):

* **Stopping on the full objective.** eq. (6) is evaluated on *all* training pairs (every
  iteration with full batches, where it costs nothing extra because the step needs those
  distances anyway; every ``eval_every`` iterations with mini-batches). The fit stops when its
  best value has improved by less than a relative ``tol`` over the last ``n_iter_no_change``
  evaluations (:class:`~crossmetric._solvers.stopping.BestPlateau`, the full-batch solvers'
  rule with ``tol`` over the window), and returns the **best** evaluated iterate, not the last
  one.
* **A safeguarded step.** The paper's growing step ``η ← min(η ρ, τ)`` makes the (non-smooth)
  objective non-monotone and, with the pAUC window, lets it drift away (Maha_pAUC-C on digits:
  0.93 at iteration 50, 2.21 at 600, test AUC 0.929 → 0.887). Whenever the full objective
  rises, ``η`` is halved; it grows again by ``ρ`` per iteration, up to ``τ``.
* **Preconditioning.** ``standardize="whiten"`` (default) whitens each modality (ZCA on the
  distinct training samples). The step ``η P_A`` moves a direction of variance ``λ`` by
  ``∝ λ`` while the metric there must change by ``∝ 1/λ``; with the earlier ``√λ_max`` scaling
  (``standardize="scale"``) CML_AUC on mfeat fou ↔ pix (PCA 32) needed 400-550 iterations;
  whitened (with a ridge, ``whiten_reg``) and started at unit mean distance it converges in
  about 55 (held-out AUC 0.925 either way, 5 splits, ``benchmarks/bench_cmlauc.py``).

Cost per iteration (d = d_x + d_y, n_u = samples touched by the batch):
``O(n_u d²)`` for the distances (:func:`pair_quadratic_forms`) and ``P_A``,
``O(|S_b| log |S_b| + |D_b| log |D_b|)`` for the hinge coefficients (sorting instead of the
paper's ``|S| × |D|`` comparisons) and one symmetric eigendecomposition ``O(d³)``, the
bottleneck the paper names (Table XI). On mfeat fac ↔ pix with 200 + 200 dimensions and 4,000
pairs: ~27 ms per iteration on one core, 43 % of it in the eigendecomposition
(``benchmarks/bench_cmlauc.py``; the paper's MATLAB code: 101 s for its run, Table XI).
"""

from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.extmath import svd_flip

from crossmetric._base import CrossModalMixin, LinearSingleModalMixin, with_complement
from crossmetric._solvers.early_stopping import (
    check_early_stopping,
    choose_start,
    clear,
    split_pairs,
)
from crossmetric._solvers.proximal import phi_plus, ppa_step, prox_logdet
from crossmetric._solvers.span import set_complement
from crossmetric._solvers.starting import FITTED, build_starts, check_init, start_candidates
from crossmetric._solvers.stopping import BestPlateau
from crossmetric._utils.checks import (
    check_n_components,
    check_positive_int,
    check_positive_scalar,
    user_stacklevel,
)
from crossmetric._utils.threads import blas_limit
from crossmetric.learners._auc_guard import (
    from_span,
    metric_monitor,
    metric_start,
    metric_start_folds,
    span_views,
)
from crossmetric.losses import check_fpr_range, pauc_window, pauc_window_bounds
from crossmetric.pairs._pair_data import PairData

__all__ = [
    "CMLAUC",
    "MahaAUC",
    "pauc_window",
    "pauc_window_bounds",
    "hinge_coefficients",
    "weighted_pair_outer_sum",
    "pair_quadratic_forms",
    "phi_plus",
    "prox_logdet",
    "ppa_step",
]

#: the named starts of the AUC learners (``init``)
AUC_INITS = ("auto", "pca", "identity", "kissme", "cca")


#: up to this size of ``M`` the iterations run with single-threaded BLAS: a 400 × 400 ``eigh``
#: takes ~15 ms on one core but was measured at 100-800 ms with two OpenBLAS threads on a busy
#: 2-core machine (threads spin while competing), and gains little from threads when idle.
SINGLE_THREAD_MAX_DIM = 1024

# ----------------------------------------------------------------------------- building blocks
def hinge_coefficients(d_pos: np.ndarray, d_neg: np.ndarray):
    """Per-pair coefficients of the index matrix ``J`` of eq. (8) and the hinge loss of eq. (5).

    ``J[p, q] = 1`` when ``1 + d_pos[p] > d_neg[q]``. Instead of forming ``J`` (|S| × |D|) the
    row and column sums are counted by sorting: ``O((|S| + |D|) log(|S| + |D|))``.

    Returns
    -------
    row_counts : ndarray of shape (n_pos,)
        ``Σ_q J[p, q]`` (cannot-link pairs that violate the margin with must-link pair ``p``).
    col_counts : ndarray of shape (n_neg,)
        ``Σ_p J[p, q]``.
    loss : float
        ``Σ_p Σ_q [1 + d_pos[p] − d_neg[q]]₊ / (|S| |D|)`` (first term of eq. 6).
    """
    d_pos = np.asarray(d_pos, dtype=float)
    d_neg = np.asarray(d_neg, dtype=float)
    shifted = 1.0 + d_pos
    neg_sorted = np.sort(d_neg)
    row_counts = np.searchsorted(neg_sorted, shifted, side="left")
    shifted_sorted = np.sort(shifted)
    col_counts = d_pos.size - np.searchsorted(shifted_sorted, d_neg, side="right")
    csum = np.r_[0.0, np.cumsum(neg_sorted)]
    total = float(np.sum(row_counts * shifted - csum[row_counts]))
    return row_counts, col_counts, total / (d_pos.size * d_neg.size)


def weighted_pair_outer_sum(X: np.ndarray, Y: np.ndarray, ix: np.ndarray, iy: np.ndarray,
                            w: np.ndarray, *, cross: bool = True) -> np.ndarray:
    """``Σ_p w_p z_p z_pᵀ`` by the index-matrix technique of eq. (20)-(22).

    With ``cross=True``, ``z_p = [x_{ix[p]}; −y_{iy[p]}]`` and the result is the block matrix of
    eq. (21), ``[[Xᵀ A X, Xᵀ B Y], [Yᵀ Bᵀ X, Yᵀ C Y]]`` (rows of ``X`` are samples), where the
    per-sample coefficient matrices of eq. (22), summed over all pairs, are ``A = diag(a)``,
    ``a_i = Σ_{p: ix[p]=i} w_p``, ``C = diag(c)``, ``c_j = Σ_{p: iy[p]=j} w_p`` and the sparse
    ``B_ij = −Σ_{p: (ix[p], iy[p])=(i, j)} w_p``. With ``cross=False``, ``z_p = x_{ix[p]} −
    y_{iy[p]}`` (Mahalanobis) and the four blocks are summed. Only the rows the pairs touch
    are used: cost ``O(n_u d²)`` for ``n_u`` touched samples, a few matrix products, never one
    outer product per pair or tetrad.
    """
    w = np.asarray(w, dtype=float)
    ux, inv_x = np.unique(ix, return_inverse=True)
    uy, inv_y = np.unique(iy, return_inverse=True)
    Xu, Yu = X[ux], Y[uy]
    a = np.bincount(inv_x, weights=w, minlength=ux.size)
    c = np.bincount(inv_y, weights=w, minlength=uy.size)
    B = sparse.csr_matrix((w, (inv_x, inv_y)), shape=(ux.size, uy.size))
    XAX = Xu.T @ (a[:, None] * Xu)
    YCY = Yu.T @ (c[:, None] * Yu)
    XBY = -(Xu.T @ np.asarray(B @ Yu))
    if cross:
        return np.block([[XAX, XBY], [XBY.T, YCY]])
    return XAX + YCY + XBY + XBY.T


def _spectral_scale(Xc: np.ndarray) -> float:
    """``√λ_max`` of the (biased) covariance of the centred rows ``Xc`` (0 for constant data)."""
    return float(np.linalg.norm(Xc, 2) / np.sqrt(Xc.shape[0]))


def pair_quadratic_forms(M: np.ndarray, X: np.ndarray, Y: np.ndarray, ix: np.ndarray,
                         iy: np.ndarray, *, cross: bool = True) -> np.ndarray:
    """``z_pᵀ M z_p`` for every pair ``p`` (``z = [x; −y]``, or ``x − y`` if not ``cross``).

    With ``M = [[A, B], [Bᵀ, C]]`` (cross) the form is ``xᵀAx − 2 xᵀBy + yᵀCy``; ``(x − y)ᵀ M
    (x − y) = xᵀMx − 2 xᵀMy + yᵀMy`` otherwise. The quadratic terms are computed once per
    distinct sample and only the ``d_x``-wide products ``(XB)[i] · y[j]`` per pair, which
    halves the memory traffic of embedding with a factor of ``M`` and subtracting.
    """
    ux, inv_x = np.unique(ix, return_inverse=True)
    uy, inv_y = np.unique(iy, return_inverse=True)
    Xu, Yu = X[ux], Y[uy]
    if cross:
        dx = X.shape[1]
        A, B, C = M[:dx, :dx], M[:dx, dx:], M[dx:, dx:]
        qx = np.einsum("ij,ij->i", Xu @ A, Xu)
        XB = Xu @ B
    else:
        C = M
        XB = Xu @ M
        qx = np.einsum("ij,ij->i", XB, Xu)
    qy = np.einsum("ij,ij->i", Yu @ C, Yu)
    cross_term = np.einsum("ij,ij->i", XB[inv_x], Yu[inv_y])
    return qx[inv_x] + qy[inv_y] - 2.0 * cross_term


def _preconditioner(Zc: np.ndarray, mode: str, reg: float = 0.1) -> np.ndarray:
    """The linear map ``P`` of ``standardize`` for centred distinct samples ``Zc`` (rows).

    ``"whiten"``: ``P = V (Λ + r I)^{-1/2} Vᵀ`` (ZCA) for the covariance ``V Λ Vᵀ`` of ``Zc``
    and ``r = reg · mean(Λ)``; ``"scale"``: ``I / √λ_max``; ``"none"``: ``I``.
    """
    d = Zc.shape[1]
    if mode == "none":
        return np.eye(d)
    if mode == "scale":
        s = _spectral_scale(Zc)
        return np.eye(d) / (s if s > 0 else 1.0)
    lam, V = np.linalg.eigh(Zc.T @ Zc / max(Zc.shape[0], 1))
    lam = np.maximum(lam, 0.0)
    mean = float(lam.mean())
    if mean <= 0:
        return np.eye(d)
    return (V / np.sqrt(lam + reg * mean)) @ V.T


def _eval_period(value, n_total: int, n_batch: int) -> int:
    """``eval_every``, or by default 1 for full batches and ``⌈n_total / (4 n_batch)⌉`` else
    (the full objective then costs at most about a quarter of the iterations' distances)."""
    if value is not None:
        return check_positive_int(value, "eval_every")
    return max(1, math.ceil(n_total / (4 * n_batch)))


def _batch_size(value, n_total: int, name: str) -> int:
    """A batch size given as a count (int >= 1) or a ratio (float in (0, 1])."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{name} must be an int >= 1 (a count) or a float in (0, 1] (a ratio), "
            f"got {value!r}."
        )
    if isinstance(value, numbers.Integral):
        if value < 1:
            raise ValueError(f"{name} must be >= 1 when given as a count, got {value!r}.")
        return min(int(value), n_total)
    if not (0.0 < value <= 1.0) or not np.isfinite(value):
        raise ValueError(f"{name} must be in (0, 1] when given as a ratio, got {value!r}.")
    return max(1, int(round(value * n_total)))


# ----------------------------------------------------------------------------- the learners

#: above this size of ``M`` (its side) a fit warns up front: every iteration decomposes it
LARGE_METRIC_SIDE = 4000


def _warn_large_metric(est, data) -> None:
    """One ``UserWarning`` before a fit whose ``M`` is large (``d_x + d_y`` above
    :data:`LARGE_METRIC_SIDE`: the paper's start on wide views, which keeps the feature space):
    its memory and the time of one eigendecomposition, and the fix."""
    side = data.X.shape[1] + (data.Y.shape[1] if est._cross else 0)
    if side > LARGE_METRIC_SIDE:
        warnings.warn(
            f"{type(est).__name__}: M is {side} x {side} ({side ** 2 * 8 * 3 / 2 ** 30:.1f} GiB "
            f"with its eigenvectors and step) and every iteration decomposes it; give "
            f"reduce_to (e.g. 32), or init='auto' (views wider than their samples on their "
            f"span), or reduce the views by PCA first.", UserWarning,
            stacklevel=user_stacklevel())


def _principal_axes(A: np.ndarray, k: int) -> np.ndarray:
    """Top-``k`` principal axes (rows) of ``A`` with a deterministic sign (the largest entry of
    each axis positive, scikit-learn's ``svd_flip``): the cross block of ``M₀`` depends on
    the signs, which the SVD otherwise leaves to the order of the rows."""
    U, _, Vt = np.linalg.svd(A - A.mean(axis=0), full_matrices=False)
    U, Vt = svd_flip(U, Vt, u_based_decision=False)
    return Vt[:k]


class _AUCMetricLearner:
    """Shared parameters and Algorithm 1 of CMLAUC / MahaAUC (no public API of its own)."""

    _cross: bool = True

    def __init__(self, n_components=None, *, fpr_range=(0.0, 1.0), gamma: float = 1.0,
                 mu: float = 1e-3, batch_size_pos=1.0, batch_size_neg=1.0,
                 eta0: float = 0.05, rho: float = 1.01, tau: float = 0.5,
                 max_iter: int = 300, tol: float = 1e-3, n_iter_no_change: int = 10,
                 init: str = "auto", standardize="whiten", whiten_reg: float = 0.1,
                 eval_every=None, early_stopping="auto", validation_fraction: float = 0.2,
                 reduce_to=None, random_state=None, verbose: int = 0, preprocessor=None):
        self.n_components = n_components
        self.fpr_range = fpr_range
        self.gamma = gamma
        self.mu = mu
        self.batch_size_pos = batch_size_pos
        self.batch_size_neg = batch_size_neg
        self.eta0 = eta0
        self.rho = rho
        self.tau = tau
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.init = init
        self.standardize = standardize
        self.whiten_reg = whiten_reg
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.reduce_to = reduce_to
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_fpr_range(self.fpr_range)
        check_positive_scalar(self.gamma, "gamma", allow_zero=True)
        check_positive_scalar(self.mu, "mu")
        check_positive_scalar(self.eta0, "eta0")
        rho = check_positive_scalar(self.rho, "rho")
        if rho < 1.0:
            raise ValueError(f"rho must be >= 1 (eta grows as min(eta*rho, tau)), got {rho!r}.")
        check_positive_scalar(self.tau, "tau")
        check_positive_int(self.max_iter, "max_iter")
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_int(self.n_iter_no_change, "n_iter_no_change")
        check_positive_scalar(self.whiten_reg, "whiten_reg", allow_zero=True)
        if self.eval_every is not None:
            check_positive_int(self.eval_every, "eval_every")
        self._standardize_mode()
        check_init(self.init, AUC_INITS)
        check_early_stopping(self)

    # ------------------------------------------------------------------ data
    def _standardize_mode(self) -> str:
        mode = self.standardize
        if mode is True:
            return "scale"
        if mode is False or mode is None:
            return "none"
        if mode not in ("whiten", "scale", "none"):
            raise ValueError(f"standardize must be 'whiten', 'scale', 'none' or a bool, "
                             f"got {mode!r}.")
        return mode

    def _standardize_fit(self, data: PairData):
        """Precondition each modality on the distinct samples the pairs use (``standardize``).

        Sets ``mean_x_`` / ``mean_y_`` and the linear maps ``whitening_x_`` / ``whitening_y_``
        (``x̃ = (x − mean_x_) @ whitening_x_``); single-modal: ``whitening_`` on ``x`` alone
        (differences ignore shifts). Returns the preconditioned ``(X̃, Ỹ)``.
        """
        mode = self._standardize_mode()
        X, Y = data.X, data.Y  # the base's canonical pairs: distinct samples, every one used
        if self._cross:
            Xu, Yu = X, Y
            if mode == "none":
                self.mean_x_, self.mean_y_ = np.zeros(X.shape[1]), np.zeros(Y.shape[1])
            else:
                self.mean_x_, self.mean_y_ = Xu.mean(axis=0), Yu.mean(axis=0)
            reg = float(self.whiten_reg)
            self.whitening_x_ = _preconditioner(Xu - self.mean_x_, mode, reg)
            self.whitening_y_ = _preconditioner(Yu - self.mean_y_, mode, reg)
            if mode != "none" and X.shape[1] == Y.shape[1] and check_init(
                    self.init, AUC_INITS) in ("auto", "identity", "kissme", FITTED):
                # views of one width (one descriptor): one shift for both, so that x − y is
                # kept and the untrained distance ‖x − y‖² (init="identity") and KISSME's
                # (init="kissme") are points of the model; each view keeps its own
                # preconditioner
                joint = np.vstack([Xu, Yu]).mean(axis=0)
                self.mean_x_, self.mean_y_ = joint, joint.copy()
            return ((X - self.mean_x_) @ self.whitening_x_,
                    (Y - self.mean_y_) @ self.whitening_y_)
        Zu = data.stacked()[0]
        self.whitening_ = _preconditioner(Zu - Zu.mean(axis=0), mode, float(self.whiten_reg))
        if X is Y:
            Xs = X @ self.whitening_
            return Xs, Xs
        return X @ self.whitening_, Y @ self.whitening_

    def _init_metric(self, Xs, Ys, data: PairData) -> np.ndarray:
        """``M₀``: PCA initialisation of Algorithm 1 (cross-modal) or the identity."""
        if not self._cross:
            return np.eye(Xs.shape[1])
        dx, dy = Xs.shape[1], Ys.shape[1]
        if self.init == "identity":
            return np.eye(dx + dy)
        Xu, Yu = Xs, Ys  # every sample is used (canonical pairs)
        k = min(dx, dy, Xu.shape[0], Yu.shape[0])
        Vx = _principal_axes(Xu, k)
        Vy = _principal_axes(Yu, k)
        W0 = np.concatenate([Vx.T, Vy.T])   # (dx + dy, k): [W_x0; W_y0]
        return W0 @ W0.T

    # ------------------------------------------------------------------ Algorithm 1
    def _run_ppa(self, data: PairData, y: np.ndarray) -> None:
        d = data.X.shape[1] + (data.Y.shape[1] if self._cross else 0)
        limit = 1 if d <= SINGLE_THREAD_MAX_DIM else None
        with blas_limit(limit):
            self._run_ppa_body(data, y)

    def _run_ppa_body(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        rng = check_random_state(self.random_state)
        gamma, mu, tol = float(self.gamma), float(self.mu), float(self.tol)
        cross = self._cross
        data, y, val = split_pairs(self, data, y)
        raw = data
        # views wider than the training samples: M on the coordinates of their span, the
        # untrained distance of the rest kept by the identity start (crossmetric._solvers.span)
        # (the paper's start with no reduce_to keeps the feature space, as the paper fits it)
        data, self._spans = (span_views(data, self.reduce_to)
                             if self.reduce_to is not None or self.init != "pca"
                             else (data, (None, None)))
        _warn_large_metric(self, data)
        Xs, Ys = self._standardize_fit(data)
        state = {"scale": 0.0}
        monitor = metric_monitor(self, val, y, self._spans, state)
        d = Xs.shape[1] + Ys.shape[1] if cross else Xs.shape[1]
        if self.n_components is not None:
            check_n_components(self.n_components, d,
                               what="the size of M: d_x + d_y" if cross else "n_features")
        pos = np.flatnonzero(y == 1)
        neg = np.flatnonzero(y == -1)
        n_s = _batch_size(self.batch_size_pos, pos.size, "batch_size_pos")
        n_d = _batch_size(self.batch_size_neg, neg.size, "batch_size_neg")
        pauc_window_bounds(n_d, self.fpr_range)  # fail early with a clear message
        full_batch = n_s == pos.size and n_d == neg.size
        eval_every = _eval_period(self.eval_every, pos.size + neg.size, n_s + n_d)

        ix_all, iy_all = data.ix, data.iy
        # P_S of eq. (11): fixed, pre-computed
        P_S = weighted_pair_outer_sum(Xs, Ys, ix_all[pos], iy_all[pos],
                                      np.full(pos.size, 1.0 / pos.size), cross=cross)
        G_fixed = gamma * P_S + mu * np.eye(d)

        def full_objective(M, w):
            """eq. (6) on all training pairs; also returns the pair distances."""
            dist = pair_quadratic_forms(M, Xs, Ys, ix_all, iy_all, cross=cross)
            d_pos, d_neg = dist[pos], dist[neg]
            hinge = hinge_coefficients(d_pos, d_neg[pauc_window(d_neg, self.fpr_range)])[2]
            reg = float(np.sum(w) - np.sum(np.log(w)))
            return hinge + gamma * float(d_pos.mean()) + mu * reg, dist

        eta = float(self.eta0)

        scales = {}

        def start(name):
            # M₀ scaled so that the mean training distance is 1, the margin of the hinge
            # (eq. 5); PSD, scored as it is (its eigenpairs clipped at 0)
            M0 = metric_start(self, name, Xs, Ys, data, y)
            if M0 is None:
                return None
            d0 = float(pair_quadratic_forms(M0, Xs, Ys, ix_all, iy_all, cross=cross).mean())
            joint = self._spans[0] is not None and self._spans[0] is self._spans[-1]
            scales[name] = 1.0 / np.sqrt(d0) if name == "identity" and joint and d0 > 0 \
                else 0.0
            M0 = M0 / d0 if d0 > 0 else M0
            v, U0 = np.linalg.eigh((M0 + M0.T) / 2)
            w0 = np.maximum(v, 0.0)
            return (U0 * w0) @ U0.T, w0, U0

        names = start_candidates(
            check_init(self.init, AUC_INITS), "pca",
            cross=cross, features=True, equal_widths=Xs.shape[1] == Ys.shape[1],
            held_out=monitor is not None, kissme=False)
        starts = build_starts(names, start)
        self.init_, start_M = choose_start(monitor, starts,
                                           lambda name: state.update(scale=scales[name]),
                                           metric_start_folds(self, monitor, starts, Xs, Ys,
                                                              data, y, raw))
        state["scale"] = scales[self.init_]
        if monitor is not None:
            monitor.update(0, start_M)
        # Algorithm 1 starts from M₀ made positive definite by the proximal map of the
        # log-det term (a rank-deficient start -- the untrained distance, the closed form -- is
        # kept as it is when no iterate beats it on the held-out identities)
        M, w, U = prox_logdet(start_M[0], eta * mu, return_eig=True)
        obj, dist = full_objective(M, w)
        self.loss_curve_ = [obj]
        best_obj, best = obj, (M, w, U)
        last_obj, n_halved = obj, 0
        # stopping rule: over the last n_iter_no_change evaluations the best full objective
        # improved by less than a relative tol (the rule sees the best value, kept here too)
        plateau = BestPlateau(tol, int(self.n_iter_no_change), per_update=False, floor=0.0)
        plateau.update(best_obj)
        converged = False
        t_eig = 0.0
        t_start = time.perf_counter()
        name = type(self).__name__
        if self.verbose:
            print(f"[{name}] {'iter':>5} {'objective':>12} {'best':>12} {'eta':>8} "
                  f"{'time(s)':>8}")
        it = 0
        for it in range(1, int(self.max_iter) + 1):
            # step 3: sample Ŝᵗ, D̂ᵗ and the pAUC window on D̂ᵗ
            if full_batch:
                bp, bn = pos, neg
                d_pos, d_neg_all = dist[pos], dist[neg]
            else:
                bp = pos if n_s == pos.size else rng.choice(pos, n_s, replace=False)
                bn = neg if n_d == neg.size else rng.choice(neg, n_d, replace=False)
                d_both = pair_quadratic_forms(M, Xs, Ys, np.r_[ix_all[bp], ix_all[bn]],
                                              np.r_[iy_all[bp], iy_all[bn]], cross=cross)
                d_pos, d_neg_all = d_both[:bp.size], d_both[bp.size:]
            win = pauc_window(d_neg_all, self.fpr_range)
            bn, d_neg = bn[win], d_neg_all[win]
            # step 4: P_A of eq. (20)-(22) from the row / column sums of J (eq. 8)
            rows, cols, _ = hinge_coefficients(d_pos, d_neg)
            scale = 1.0 / (d_pos.size * d_neg.size)
            P_A = weighted_pair_outer_sum(
                Xs, Ys, np.r_[ix_all[bp], ix_all[bn]], np.r_[iy_all[bp], iy_all[bn]],
                np.r_[rows * scale, -cols * scale], cross=cross)
            # step 5: proximal step of Lemma 3 (eq. 18)
            t0 = time.perf_counter()
            M, w, U = ppa_step(M, P_A + G_fixed, eta, mu)
            t_eig += time.perf_counter() - t0
            # step 6: the paper's growing step, η ← min(η ρ, τ) ...
            eta = min(eta * float(self.rho), float(self.tau))
            if not (full_batch or it % eval_every == 0 or it == int(self.max_iter)):
                continue
            obj, dist = full_objective(M, w)
            self.loss_curve_.append(obj)
            if self.verbose:
                print(f"[{name}] {it:>5} {obj:>12.6g} {min(obj, best_obj):>12.6g} "
                      f"{eta:>8.4g} {time.perf_counter() - t_start:>8.2f}")
            # ... safeguarded: a rise of the full objective halves η
            if obj > last_obj:
                eta *= 0.5
                n_halved += 1
            last_obj = obj
            if obj < best_obj:
                best_obj, best = obj, (M, w, U)
            if monitor is not None and monitor.update(it, (M, w, U)):
                converged = True  # no better held-out score for n_iter_no_change checks
                break
            if plateau.update(best_obj):
                converged = True
                break
        self.n_iter_ = it
        self.eig_time_ = t_eig
        self.n_step_halvings_ = n_halved
        if not converged:
            warnings.warn(
                f"{name} did not converge in max_iter={self.max_iter} iterations (the "
                f"full objective still improved by more than tol={self.tol} within the last "
                f"{self.n_iter_no_change} evaluations); increase max_iter or tol.",
                ConvergenceWarning, stacklevel=user_stacklevel())
        if monitor is None:
            M, w, U = best
            clear(self)
        else:
            M, w, U = monitor.best_params
            # the start itself (best_iteration_ 0) reports its positive-definite version's
            best_obj = full_objective(M, w)[0] if np.all(w > 0) else self.loss_curve_[0]
            monitor.record(self)
        self.objective_ = best_obj
        self.M_ = M
        self._set_factors(w, U)
        set_complement(self, state["scale"], self._spans[0])
        del self._spans

    def _set_factors(self, w: np.ndarray, U: np.ndarray) -> None:
        """Factor ``M = U diag(w) Uᵀ`` into the towers (top ``n_components`` eigenpairs)."""
        order = np.argsort(w)[::-1]
        k = w.size if self.n_components is None else int(self.n_components)
        keep = order[:k]
        L = (U[:, keep] * np.sqrt(w[keep])).T          # (k, d): M ≈ Lᵀ L
        self.eigenvalues_ = w[keep]
        self._store_components(L)


class CMLAUC(CrossModalMixin, _AUCMetricLearner, BaseEstimator):
    """Cross-modal metric learning for AUC / partial AUC (CML_AUC, CML_pAUC).

    Huo, Gao, Shi & Yin, "Cross-Modal Metric Learning for AUC Optimization", IEEE TNNLS 29(10),
    2018. Learns ``M ⪰ 0`` of size ``(d_x + d_y)`` and scores a pair by ``D_M(x, y) = zᵀ M z``,
    ``z = [x; −y]`` (eq. 2), by minimising eq. (6) with the mini-batch proximal point
    Algorithm 1 (see the module docstring). After fitting ``M`` is factored as ``Lᵀ L``;
    ``transform_x(x) = L_x x̃`` and ``transform_y(y) = L_y ỹ`` (``x̃``, ``ỹ`` standardised
    inputs) satisfy ``‖L_x x̃ − L_y ỹ‖² = z̃ᵀ M z̃`` exactly when ``n_components=None``.

    With few identities the paper's selection of γ then μ (``--tune paper``) is noisy: on CUFS
    (180 training persons, 3 inner folds of 60) it chose γ = 3, which scored 76.5 % rank-1 on
    the test persons against 91.2 % at the defaults; compare the tuned and default settings by
    their inner cross-validation scores before trusting the choice. With a few hundred
    identities and one descriptor reduced by PCA, try ``standardize="scale"`` with
    ``max_iter=1000``: whitening weighs the PCA's noisy low-variance directions like its
    leading ones (CUFS's training persons, inner rank-1 at the best γ: 0.967 whitened, 0.994
    scaled); the registry's paper grid (``--tune paper``) has it as a candidate.

    Parameters
    ----------
    n_components : int, optional
        Number of eigenpairs of ``M`` (largest first) kept in the towers after fitting; all
        ``d_x + d_y`` when ``None`` (exact). Does not constrain the optimisation.
    fpr_range : (float, float), default=(0.0, 1.0)
        FPR range ``(α, β)`` of the partial AUC (eq. 4). ``(0, 1)`` is CML_AUC; the paper's
        CML_pAUC uses ``(0, 0.1)``.
    gamma : float >= 0, default=1.0
        ``γ``, weight of the mean must-link distance (eq. 6). The paper tunes it in
        [0.1, 5].
    mu : float > 0, default=1e-3
        ``μ``, weight of the LogDet regulariser ``tr(M) − log det M`` (eq. 6). The paper tunes
        it in [1e-7, 1e-3]; of {1e-2, 1e-3, 1e-4}, 1e-3 was best on mfeat fac ↔ pix
        (``benchmarks/bench_cmlauc.py``).
    batch_size_pos, batch_size_neg : int or float, default=1.0
        Must-link / cannot-link pairs sampled per iteration: an ``int`` is a count, a
        ``float`` in (0, 1] the sampling ratio ``s₁`` / ``s₂`` of Algorithm 1 (the paper uses
        1.0, or 0.1 / 0.01 on CASIA). The pAUC window is taken on the sampled cannot-links.
    eta0, rho, tau : float, default=0.05, 1.01, 0.5
        Step size schedule ``η₀``, ``η ← min(η ρ, τ)`` (the paper's values, §IV-B).
    max_iter : int, default=300
        Maximum number of iterations.
    tol : float, default=1e-3
        Stop when the best value of the full objective (eq. 6 on all training pairs) has
        improved by less than a relative ``tol`` over the last ``n_iter_no_change``
        evaluations; the best evaluated iterate is kept. ``ConvergenceWarning`` when
        ``max_iter`` comes first.
    n_iter_no_change : int, default=10
    init : {"auto", "identity", "cca", "kissme", "pca"}, default="auto"
        ``M₀``: ``"pca"`` is the paper's initialisation ``[W_x0; W_y0][W_x0; W_y0]ᵀ`` with
        ``W_x0``, ``W_y0`` the top ``min(d_x, d_y)`` principal directions of each modality;
        ``"identity"`` the untrained distance ``‖x − y‖²`` (views of one width); ``"cca"`` the
        closed form, ridge CCA of the positive pairs (``[A; B][A; B]ᵀ``, its ridge chosen on
        the held-out identities); ``"kissme"`` the closed form of one metric on ``x − y``
        (views of one width), KISSME's ``Σ_S⁻¹ − Σ_D⁻¹`` of the training pairs on the
        coordinates ``M`` acts on (``reduce_to``). ``"auto"``: each of these but KISSME's,
        scored on the held-out identities of ``early_stopping``; the best is trained from and
        kept when no iterate beats it (``init_``; without a hold-out, ``"pca"``). KISSME's
        start is left out of ``"auto"``: on the ``reduce_to`` principal axes it is KISSME after
        a PCA, and Algorithm 1 went further from the other starts -- CUFS dense SIFT, CML_AUC
        99.2 % rank-1 against 96.8 % where ``"auto"`` offered KISSME's start; VIPeR LOMO,
        Maha_AUC 26.0 against 22.8. The identity, CCA and KISSME starts are the library's
        (:mod:`crossmetric.learners._auc_guard`).
    early_stopping : {"auto", True, False}, default="auto"
        Hold out ``validation_fraction`` of the training identities and score the start and
        every evaluated iterate on them (rank-1, then ROC AUC, over all cross distances of the
        held-out samples; :mod:`crossmetric._solvers.early_stopping`); the best check -- the
        start included -- is kept, and Algorithm 1 stops once neither that score nor the
        held-out loss has improved for ``n_iter_no_change`` checks. ``"auto"``: on with 30 to
        999 identity-complete training identities; ``False``: the paper's plain run.
    validation_fraction : float in (0, 1), default=0.2
    reduce_to : int, optional
        Learn ``M`` on the top ``reduce_to`` principal axes of the training samples (one PCA
        for views of one width; the paper reduces its features by PCA first, §IV-A) instead of
        their whole span; from the identity start the untrained distance of the rest is kept
        (``complement_scale_``). A small ``M`` trains where a large one does not: every
        proximal step (eq. 18) lifts the null directions of ``M`` to ``√(η μ)``, which on
        hundreds of whitened coordinates outweighs the margin.
    standardize : {"whiten", "scale", "none"} or bool, default="whiten"
        Preconditioning of each modality, fitted on the distinct training samples the pairs
        use: ``"whiten"`` centres it and whitens it (ZCA with a ridge, see ``whiten_reg``), so
        that the step converges in well under ``max_iter`` iterations; ``"scale"`` (``True``)
        centres it and divides by ``√λ_max`` of its covariance (the largest variance is 1;
        slower, see the module docstring); ``"none"`` (``False``) uses the raw inputs. The
        hinge margin of eq. (5) is 1 and the step ``η P_A`` scales with the data, so the
        method is scale dependent; this makes ``η₀, τ, μ`` mean the same whatever the input
        units, and the LogDet regulariser pulls ``M`` towards the identity in preconditioned
        coordinates. Views of one width are centred by one mean (of both), so that ``x − y``
        is kept, when the start may be the untrained distance (``init`` ``"auto"``,
        ``"identity"`` or a fitted estimator). (Our choice: the paper feeds PCA-reduced SIFT
        features and leaves scaling open.)
    whiten_reg : float >= 0, default=0.1
        Ridge of the whitening, as a fraction of the mean eigenvalue ``λ̄`` of the covariance:
        ``P = V (Λ + whiten_reg λ̄ I)^{-1/2} Vᵀ``. 0 whitens exactly; it amplifies directions
        of little variance, and on mfeat fac ↔ pix (PCA 200 + 200, 1,000 training objects)
        CML_pAUC then fitted the training pairs perfectly (AUC 1.0) and dropped to 0.909
        held-out; 1e-3: the same; 0.1: 0.962 (``√λ_max`` scaling: 0.950). Large values
        approach an isotropic scaling.
    eval_every : int, optional
        Evaluate the full objective every ``eval_every`` iterations; default: every
        iteration with full batches, else ``⌈(|S| + |D|) / (4 (n_s + n_d))⌉``.
    random_state : int, RandomState instance or None
        Seeds the mini-batch sampling.
    verbose : int, default=0
        Print one table row per iteration.
    preprocessor : tuple (X, Y), optional
        Samples that integer index pairs refer to.

    Attributes
    ----------
    M_ : ndarray of shape (d_x + d_y, d_x + d_y)
        The learned metric, acting on preconditioned inputs ``z̃ = [x̃; −ỹ]`` -- on the span
        coordinates of views wider than their training samples (``2m × 2m``), where the model
        adds the untrained distance outside the span, scaled, when it started from
        ``"identity"`` (``complement_scale_``, ``complement_basis_``;
        :mod:`crossmetric._solvers.span`).
    init_ : str
        The start trained from.
    validation_scores_, validation_aucs_, validation_loss_curve_ : list of float or None
        Held-out rank-1, ROC AUC and loss at the start (entry 0) and every evaluated iterate.
    best_iteration_ : int or None
        The iteration kept (0: the start).
    components_x_ : ndarray of shape (n_components, d_x)
    components_y_ : ndarray of shape (n_components, d_y)
        ``L_x P_xᵀ``, ``L_y P_yᵀ`` with ``M ≈ [L_x, L_y]ᵀ [L_x, L_y]`` (the paper's ``W_xᵀ``,
        ``W_yᵀ``) and the preconditioners folded in: ``transform_x(x) = components_x_ (x −
        mean_x_)``.
    eigenvalues_ : ndarray of shape (n_components,)
        The kept eigenvalues of ``M``, descending.
    mean_x_, mean_y_ : ndarray
    whitening_x_, whitening_y_ : ndarray of shape (d_x, d_x), (d_y, d_y)
        Preconditioning: ``x̃ = (x − mean_x_) @ whitening_x_`` (see ``standardize``).
    loss_curve_ : list of float
        The full objective of eq. (6) at ``M₀`` and at every evaluated iterate.
    objective_ : float
        Its best value, that of ``M_``.
    n_iter_ : int
    n_step_halvings_ : int
        How often a rise of the full objective halved ``η``.
    eig_time_ : float
        Seconds spent in the eigendecompositions (the bottleneck of Table XI).
    threshold_ : float

    Notes
    -----
    * ``M₀`` is the PCA initialisation scaled so that the mean distance of the training pairs
      is 1 (the margin of eq. 5; our choice -- unscaled, whitened inputs start with distances
      near ``2 min(d_x, d_y)`` and the first ~100 iterations only shrink them), then passed once
      through ``φ⁺_{η₀μ}`` (the proximal map of the log-det term), so that it is positive
      definite and the objective is finite.
    * Per iteration ``P_A`` is assembled from per-pair coefficients (row and column sums of
      ``J``, eq. 8) aggregated into the per-sample matrices of eq. (22); see
      :func:`weighted_pair_outer_sum`.
    * The eigendecomposition is LAPACK's ``syevd`` (via NumPy), the fastest of the exact
      drivers measured here (``syevr`` and float32 were slower single-threaded). For
      ``d_x + d_y <= SINGLE_THREAD_MAX_DIM`` the fit runs with single-threaded BLAS.

    Examples
    --------
    >>> from crossmetric import CMLAUC, make_pairs
    >>> from crossmetric.datasets import load_digits_views
    >>> data = load_digits_views()
    >>> pairs, y = make_pairs(data.labels, data.labels, max_positives=1000, random_state=0)
    >>> model = CMLAUC(n_components=32, fpr_range=(0.0, 0.1), max_iter=20, random_state=0,
    ...                preprocessor=(data.X, data.Y))
    >>> model.fit(pairs, y).transform_y(data.Y[:5]).shape  # doctest: +SKIP
    (5, 32)
    """

    #: two views wider than their training samples are fitted on their span (exact), with
    #: the untrained distance of the rest: the protocols' ``pca_components="auto"`` leaves
    #: the views as they are
    _reduces_to_span = True
    _cross = True

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._run_ppa(data, y)

    def _store_components(self, L: np.ndarray) -> None:
        dx = self.whitening_x_.shape[0]
        # z̃ = [x̃; −ỹ]: L z̃ = L_x x̃ − L_y ỹ, and x̃ = (x − mean_x_) @ whitening_x_ (on the
        # span coordinates x Q of wide views, mapped back to the features here)
        Qx, Qy = self._spans
        self.components_x_ = from_span(L[:, :dx] @ self.whitening_x_.T, Qx)
        self.components_y_ = from_span(L[:, dx:] @ self.whitening_y_.T, Qy)
        self.mean_x_ = from_span(self.mean_x_, Qx)
        self.mean_y_ = from_span(self.mean_y_, Qy)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return with_complement(self, (X - self.mean_x_) @ self.components_x_.T, X)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return with_complement(self, (Y - self.mean_y_) @ self.components_y_.T, Y)


class MahaAUC(LinearSingleModalMixin, _AUCMetricLearner, BaseEstimator):
    """Mahalanobis metric learning for AUC / partial AUC (Maha_AUC, Maha_pAUC).

    The single-modal variant of :class:`CMLAUC` that Huo et al. (TNNLS 2018, §IV-C) compare
    against: ``D_M(x, y) = (x − y)ᵀ M (x − y)``, ``M ⪰ 0`` of size ``n_features``, learned
    with the same objective (eq. 6) and the same Algorithm 1; ``M₀ = I``. Works on
    single-modal pairs and on cross-modal pairs whose two sides have the same dimension
    (the paper's setting, also after CCA: the "-C" variants).

    Parameters
    ----------
    n_components, fpr_range, gamma, mu, batch_size_pos, batch_size_neg, eta0, rho, tau, \
max_iter, tol, n_iter_no_change, eval_every, random_state, verbose
        As in :class:`CMLAUC`.
    reduce_to : int, optional
        As in :class:`CMLAUC`, with one basis of the training samples: ``M`` on their top
        ``reduce_to`` principal axes (by default on their span when they are fewer than the
        features), the untrained distance of the rest kept by the identity start.
    init : {"auto", "pca", "identity", "kissme"}, default="auto"
        ``"pca"`` gives ``M₀ = I`` here (PCA with all directions kept is a rotation);
        ``"identity"`` the untrained distance ``‖x − y‖²`` (``I`` on the raw inputs);
        ``"kissme"`` KISSME's ``Σ_S⁻¹ − Σ_D⁻¹`` of the training pairs (the library's start);
        ``"auto"`` the better of ``"pca"`` and ``"identity"`` on the held-out identities of
        ``early_stopping`` (KISSME's start only when asked for, as in :class:`CMLAUC`).
    early_stopping, validation_fraction
        As in :class:`CMLAUC`.
    standardize : {"whiten", "scale", "none"} or bool, default="whiten"
        As in :class:`CMLAUC`, with one map ``whitening_`` fitted on the pooled distinct
        training samples of both sides; shifts do not change ``x − y``.
    preprocessor : array-like or tuple (X, Y), optional

    Attributes
    ----------
    M_ : ndarray of shape (n_features, n_features)
        The learned metric on preconditioned inputs ``x̃ = x @ whitening_``;
        :meth:`get_mahalanobis_matrix` gives the one on raw inputs (``P M_ Pᵀ`` with
        ``P = whitening_`` when ``n_components=None``).
    components_ : ndarray of shape (n_components, n_features)
        ``L Pᵀ`` (top ``n_components`` eigenpairs of ``M_ = Lᵀ L``).
    whitening_ : ndarray of shape (n_features, n_features)
    eigenvalues_, loss_curve_, objective_, n_iter_, n_step_halvings_, eig_time_, threshold_
        As in :class:`CMLAUC`.

    Examples
    --------
    >>> from crossmetric import MahaAUC, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = MahaAUC(n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    #: samples wider than their training samples are fitted on one basis of theirs, with the
    #: untrained distance of the rest: the protocols' ``pca_components="auto"`` leaves them
    _reduces_to_span = True
    _cross = False

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._run_ppa(data, y)

    def _store_components(self, L: np.ndarray) -> None:
        # on the span coordinates x Q of wide samples, mapped back to the features here
        self.components_ = from_span(L @ self.whitening_.T, self._spans[0])
