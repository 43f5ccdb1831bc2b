"""The starts and the held-out guard of the AUC metric learners (:class:`~crossmetric.CMLAUC`,
:class:`~crossmetric.MahaAUC`), in the metric ``M`` of their preconditioned inputs.

A start is a PSD matrix ``M₀`` on the standardised inputs ``x̃ = (x − x̄) P_x`` (``P`` the
``standardize`` map), so that ``D(x, y) = z̃ᵀ M₀ z̃`` with ``z̃ = [x̃; −ỹ]`` (or ``x̃ − ỹ`` for
one modality):

* ``"pca"`` -- Algorithm 1's own start (the paper's): the principal axes of each modality;
* ``"identity"`` -- the untrained distance ``‖(x − x̄) − (y − ȳ)‖²`` of the inputs, each
  modality centred (``M₀ = S Sᵀ``, ``S = [P_x⁻¹; P_y⁻¹]``; ``‖x − y‖²`` itself for one
  modality); views of one width only;
* ``"cca(reg=R)"`` -- the closed form, ridge CCA of the positive pairs, its size chosen on
  identity folds
  (:func:`crossmetric._solvers.starting.cca_start`): ``S = [Aᵀ; Bᵀ]``;
* ``"fitted"`` -- a fitted estimator given as ``init`` (its linear towers ``A``, ``B``:
  :func:`crossmetric._solvers.starting.fitted_towers`), ``S = [P_x⁻¹ Aᵀ; P_y⁻¹ Bᵀ]``.

The library adds the last two (the paper starts from PCA); ``init="auto"`` scores each on the
held-out identities (:mod:`crossmetric._solvers.early_stopping`) and trains from the best.
"""

from __future__ import annotations

import numpy as np

from crossmetric._base import squared_euclidean_matrix
from crossmetric._solvers.early_stopping import (
    EarlyStopping,
    Validation,
    check_early_stopping,
    fold_start_hits,
)
from crossmetric._solvers.span import (
    complement_distances,
    principal_basis,
    sample_basis,
    tower_bases,
)
from crossmetric._solvers.starting import (
    FITTED,
    KISSME_START,
    cca_start,
    fitted_towers,
    kissme_start,
    ridge_of,
)
from crossmetric._utils.checks import check_positive_int

__all__ = ["metric_start", "metric_start_folds", "metric_monitor", "quadratic_cross",
           "span_views", "from_span"]


def span_views(data, reduce_to=None):
    """``(data, (Q_x, Q_y))``: two views on the coordinates of an orthonormal basis ``Q`` of
    their training samples -- their span (exact for them) when ``reduce_to`` is ``None``, their
    top ``reduce_to`` principal axes otherwise -- one basis when they have one width, so that
    the untrained distance stays a start and the part of a pair outside the basis can be kept
    (:mod:`crossmetric._solvers.span`). ``Q`` is ``None`` where the span holds every feature.
    ``M`` is then ``2k × 2k`` instead of ``(d_x + d_y)²``. Single-modal data (MahaAUC, both
    sides rows of one matrix) on one basis of its samples."""
    k = None if reduce_to is None else check_positive_int(reduce_to, "reduce_to")
    if data.X is data.Y:
        Q = sample_basis(data.X, k)
        if Q is None:
            return data, (None, None)
        Xq = data.X @ Q
        return data._replace(X=Xq, Y=Xq), (Q, Q)
    joint = data.X.shape[1] == data.Y.shape[1]
    if k is None:
        Qx, Qy = tower_bases([data.X, data.Y], joint=joint)
    else:
        sides = [np.vstack([data.X, data.Y])] if joint else [data.X, data.Y]
        bases = [principal_basis(S, k) for S in sides]
        Qx, Qy = (bases[0], bases[0]) if joint else bases
    return data._replace(X=data.X if Qx is None else data.X @ Qx,
                         Y=data.Y if Qy is None else data.Y @ Qy), (Qx, Qy)


def from_span(A: np.ndarray, Q) -> np.ndarray:
    """Rows given on span coordinates (``A``, … × m) as rows over the features (``A Qᵀ``)."""
    return A if Q is None else A @ Q.T


def metric_start(est, name: str, Xs: np.ndarray, Ys: np.ndarray, data, y) -> np.ndarray:
    """``M₀`` of the named start (unscaled; the learner scales it to a mean distance of 1)."""
    cross = est._cross
    if name == "pca":
        return est._init_metric(Xs, Ys, data)
    if name == "identity":
        if not cross:
            inv = np.linalg.inv(est.whitening_)
            return inv @ inv.T
        if Xs.shape[1] != Ys.shape[1]:
            raise ValueError(f"init='identity' needs views of one width (the untrained "
                             f"distance), got {Xs.shape[1]} and {Ys.shape[1]} features.")
        S = np.vstack([np.linalg.inv(est.whitening_x_), np.linalg.inv(est.whitening_y_)])
        return S @ S.T
    if name in (FITTED, KISSME_START):
        # its towers on the span coordinates, through the preconditioners
        if name == KISSME_START:
            L = kissme_start(data, y, data.X.shape[1])
            if L is None:
                return None
            towers, spans = [L, L] if cross else [L], (None, None)
        else:
            towers = fitted_towers(est.init, cross)
            spans = getattr(est, "_spans", (None, None))
        maps = ((est.whitening_x_, est.whitening_y_) if cross else (est.whitening_,))
        S = []
        for W, Q, P in zip(towers, spans, maps, strict=False):
            W = W if Q is None else W @ Q
            if W.shape[1] != P.shape[0]:
                raise ValueError(f"init: the fitted {type(est.init).__name__} has "
                                 f"{W.shape[1]} features per tower, the data {P.shape[0]}.")
            S.append(np.linalg.solve(P, W.T))  # x̃ P⁻¹ Wᵀ = (x − x̄) Wᵀ
        S = np.vstack(S) if cross else S[0]
        return S @ S.T
    k = min(Xs.shape[1], Ys.shape[1])
    A, B = cca_start(Xs, Ys, data.ix, data.iy, y, k, ridge_of(name),
                     random_state=est.random_state)
    S = np.vstack([A.T, B.T])
    return S @ S.T


def metric_start_folds(est, monitor, starts, Xs: np.ndarray, Ys: np.ndarray, data, y,
                       raw) -> dict:
    """The closed-form starts' scores on identity folds of the training pairs (``{}`` without
    a ``monitor``): each ``M₀`` of :func:`metric_start` built from a fold's training side of
    the preconditioned samples ``Xs`` / ``Ys`` and scored on its held-out identities
    (:func:`~crossmetric._solvers.early_stopping.fold_start_hits`) -- the untrained distance
    of the samples ``raw`` (before the span or reduction) where the model keeps its part
    outside the basis; the paper's start (a PCA of the samples, not a distance of its own) and
    the others are scored on the hold-out alone. Not on ``reduce_to`` principal axes (``{}``):
    fitted on every training sample, they hold a fold's held-out samples better than unseen
    ones, which flatters the closed forms there (CUFS dense SIFT, 32 axes: CCA's start ahead of
    the untrained distance by 3.7 points on the folds, 9.6 behind it on the test persons)."""
    if monitor is None or est.reduce_to is not None:
        return {}
    cross = est._cross
    kept = est._spans[0] is not None and est._spans[0] is est._spans[-1]

    def distances(name, fold, rows):
        train, y_train, validation = fold
        if name == "identity" and kept:
            return squared_euclidean_matrix(raw.X[rows[0]], raw.Y[rows[1]])
        if name != "identity" and not name.startswith("cca"):
            return None
        M = metric_start(est, name, train.X, train.Y, train, y_train)
        V = validation.data
        return None if M is None else quadratic_cross(M, V.X, V.Y, cross)

    return fold_start_hits(data._replace(X=Xs, Y=Ys), y, starts, distances, tied=Xs is Ys,
                           random_state=est.random_state)


def quadratic_cross(M: np.ndarray, X: np.ndarray, Y: np.ndarray, cross: bool) -> np.ndarray:
    """``D[a, b] = z_abᵀ M z_ab`` for all rows ``a`` of ``X`` and ``b`` of ``Y`` (``z = [x;
    −y]``, or ``x − y`` if not ``cross``): ``xᵀAx − 2 xᵀBy + yᵀCy`` with ``M = [[A, B],
    [Bᵀ, C]]``."""
    if cross:
        dx = X.shape[1]
        A, B, C = M[:dx, :dx], M[:dx, dx:], M[dx:, dx:]
    else:
        A = B = C = M
    qx = np.einsum("ij,ij->i", X @ A, X)
    qy = np.einsum("ij,ij->i", Y @ C, Y)
    D = qx[:, None] + qy[None, :] - 2.0 * ((X @ B) @ Y.T)
    np.maximum(D, 0.0, out=D)
    return D


def metric_monitor(est, validation: Validation | None, y_train: np.ndarray, spans, state):
    """:class:`EarlyStopping` over ``(M, w, U)`` on the held-out samples, on the span
    coordinates ``spans`` (:func:`span_views`) and standardised by the learner's fitted maps,
    plus ``state["scale"]²`` times their untrained distance outside the span; ``None`` without
    a hold-out. The loss's threshold is 1, the margin of the hinge (eq. 5) at the scale the
    learner starts from."""
    if validation is None:
        return None
    _, _, patience = check_early_stopping(est)
    v = validation.data
    Dc = None
    if est._cross:
        Qx, Qy = spans
        Xv = (from_span(v.X, None if Qx is None else Qx.T) - est.mean_x_) @ est.whitening_x_
        Yv = (from_span(v.Y, None if Qy is None else Qy.T) - est.mean_y_) @ est.whitening_y_
        if Qx is not None and Qx is Qy:
            Dc = complement_distances(v.X, v.Y, Qx)
    else:
        Q = spans[0]
        Xv = from_span(v.X, None if Q is None else Q.T) @ est.whitening_
        Yv = Xv if validation.tied else from_span(v.Y, None if Q is None else Q.T) @ est.whitening_
        if Q is not None:
            Dc = complement_distances(v.X, v.X if validation.tied else v.Y, Q)

    def cross(params):
        D = quadratic_cross(params[0], Xv, Yv, est._cross)
        return (D if Dc is None else D + state["scale"] ** 2 * Dc), 1.0

    return EarlyStopping(cross, validation, patience, 1.0, float(np.mean(y_train == 1)))
