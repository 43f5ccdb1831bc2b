"""MMC: Mahalanobis metric for clustering (Xing, Ng, Jordan & Russell, NIPS 2002).

MMC learns ``M ⪰ 0`` that keeps similar pairs ``S`` close while pushing dissimilar pairs ``D``
apart (the paper's eq. 3-4 as solved in its §2.2):

    max_M  g(M) = log Σ_{(i,j)∈D} ‖x_i − x_j‖_M        s.t.  f(M) = Σ_{(i,j)∈S} ‖x_i − x_j‖²_M ≤ t,
                                                            M ⪰ 0

with ``t`` = 1 % of ``f`` at the start (the rule of the authors' code and of metric-learn).

*Full M* (``diagonal=False``): projected gradient ascent. Each cycle first projects ``M``
alternately onto the half-space ``{f(M) ≤ t}`` (``f`` is linear in ``M``: ``f(M) = ⟨W, M⟩``
with ``W = Σ_S v vᵀ``) and onto the PSD cone (clip the eigenvalues), at most ``max_proj``
times until ``f`` is within 1 % of ``t``; then steps along ``∇g`` made orthogonal to ``W``
(unit length). A successful cycle that raised ``g`` grows the step by 5 %, a failed one
halves it and restarts from the last accepted ``M``. It stops when
``‖α ∇‖ / ‖M‖ < tol``. ``∇g = Σ_D v vᵀ / (2 (‖v‖_M + 10⁻⁶)) / (Σ_D ‖v‖_M + 10⁻⁶)`` is formed
as ``Vᵀ diag(c) V`` (one BLAS-3 product; metric-learn builds an ``n × d × d`` tensor).

*Diagonal M* (``diagonal=True``): Newton's method with a backtracking search on the weights
``w = diag(M) ≥ 0`` for the paper's diagonal objective ``Σ_S ‖v‖²_w − C log Σ_D ‖v‖_w``
(``C = diagonal_c``), its gradient and Hessian in closed form (tested against finite
differences).

*Differences from metric-learn 0.7.0.* (1) The first ascent direction, used only when the
very first projection fails, is ``∇g ⊥ W`` here (metric-learn starts with the similarity
gradient made orthogonal to ``∇g``, a descent direction of nothing it optimises); every other
step is the same, so the full ``M`` agrees to round-off where the first projection succeeds
(``benchmarks/bench_metric_learn_parity_a.py``). (2) The diagonal line search compares the
paper's objective ``Σ_S ‖v‖²_w − C log Σ_D ‖v‖_w``, the function whose gradient and Hessian the
Newton step uses; metric-learn adds the log term there (``+ C log``), so its search measures a
different function than the one it descends. Where both searches keep the full Newton step (iris
and digits in the benchmark) the weights agree to round-off.

*Cost.* Each projection of the full ``M`` is an eigendecomposition (``O(d³)``) and a cycle may
take up to ``max_proj`` of them: minutes at 64 features. ``diagonal=True`` is cheap.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from crossmetric._base import LinearSingleModalMixin
from crossmetric._utils.checks import check_positive_int, check_positive_scalar, user_stacklevel
from crossmetric.learners._mahalanobis_common import (
    components_from_metric,
    is_pair_input,
    metric_matrix,
    supervised_pairs,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["MMC", "MMC_Supervised"]

_EPS = 1e-6  # the 10⁻⁶ guards of the dissimilarity term (as the authors' code)


def dissimilarity_objective(Vd: np.ndarray, A: np.ndarray) -> float:
    """``g(A) = log(Σ_D ‖v‖_A + 10⁻⁶)``."""
    return float(np.log(np.sum(np.sqrt(np.maximum(np.sum((Vd @ A) * Vd, axis=1), 0.0)))
                        + _EPS))


def dissimilarity_gradient(Vd: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``∇g(A) = Σ_D v vᵀ / (2 (‖v‖_A + 10⁻⁶)) / (Σ_D ‖v‖_A + 10⁻⁶)`` as ``Vᵀ diag(c) V``."""
    dist = np.sqrt(np.maximum(np.sum((Vd @ A) * Vd, axis=1), 0.0))
    c = 0.5 / (dist + _EPS)
    return (Vd.T * c) @ Vd / (dist.sum() + _EPS)


def diagonal_terms(Dsq: np.ndarray, w: np.ndarray):
    """``h(w) = log Σ_D ‖v‖_w``, its gradient and Hessian in ``w`` (``Dsq`` = squared diffs).

    With ``s_k = √(Dsq_k · w)`` and ``S = Σ s_k``: ``∇h = Σ Dsq_k / (2 s_k) / S`` and
    ``∇²h = −Σ Dsq_k Dsq_kᵀ / (4 s_k³) / S − ∇h ∇hᵀ`` (``s_k`` floored at 10⁻⁶).
    """
    dist = np.sqrt(np.maximum(Dsq @ w, 0.0))
    S = dist.sum()
    d1 = Dsq.T @ (0.5 / np.maximum(dist, _EPS))
    d2 = (Dsq.T * (-0.25 / np.maximum(dist ** 3, _EPS))) @ Dsq
    g = d1 / S
    return float(np.log(S)), g, d2 / S - np.outer(g, g)


def _diagonal_objective(s_sum, Dsq, w, c):
    return float(s_sum @ w - c * np.log(np.sum(np.sqrt(Dsq @ w + _EPS))))


def _orthogonal_direction(grad, W):
    """``grad`` with its component along ``W`` removed, scaled to unit Frobenius norm."""
    Wn = W / np.linalg.norm(W)
    g = grad - np.sum(grad * Wn) * Wn
    n = np.linalg.norm(g)
    return g / n if n > 0 else g


class MMC(LinearSingleModalMixin, BaseEstimator):
    """Mahalanobis metric for clustering (Xing et al., NIPS 2002), full or diagonal.

    Maximises the summed (unsquared) distance of dissimilar pairs while the summed squared
    distance of similar pairs stays below a bound (module docstring: the projected gradient
    ascent for a full ``M``, Newton's method for a diagonal one). Constructor parameters as
    metric-learn 0.7.0's ``MMC``.

    Parameters
    ----------
    max_iter : int, default=100
        Maximum number of ascent cycles (full) or Newton steps (diagonal).
    max_proj : int, default=10000
        Maximum number of alternating projections per cycle (full ``M``).
    tol : float, default=1e-3
        Stop when the relative step ``‖α ∇‖ / ‖M‖`` (full) or the relative change of the
        objective (diagonal) falls below it.
    init : {"identity", "covariance", "random"} or ndarray, default="identity"
        Starting ``M`` (``"covariance"``: the inverse covariance of the training samples;
        ``"random"``: a random SPD matrix drawn with ``random_state``). With
        ``diagonal=True`` only its diagonal is used.
    diagonal : bool, default=False
        Learn a diagonal ``M`` (a per-feature scaling).
    diagonal_c : float, default=1.0
        Weight ``C`` of the dissimilarity term of the diagonal objective.
    verbose : bool, default=False
        Print the progress of each cycle.
    preprocessor : array-like, optional
        Samples that integer index pairs refer to.
    random_state : int, RandomState instance or None
        Seeds ``init="random"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        ``L`` with ``M = Lᵀ L``.
    n_iter_ : int
        Cycles (full) or Newton steps (diagonal) run.
    converged_ : bool
    threshold_ : float

    References
    ----------
    E. P. Xing, A. Y. Ng, M. I. Jordan, S. Russell. Distance metric learning, with application
    to clustering with side-information. NIPS 2002.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import MMC, make_pairs
    >>> X, labels = load_iris(return_X_y=True)
    >>> pairs, y = make_pairs(labels, max_positives=200, random_state=0)
    >>> model = MMC(preprocessor=X).fit(pairs, y)
    >>> model.get_mahalanobis_matrix().shape
    (4, 4)
    >>> bool(model.score(pairs, y) > 0.9)  # ROC AUC on the training pairs
    True
    >>> diag = MMC(diagonal=True, preprocessor=X).fit(pairs, y)
    >>> int((diag.get_mahalanobis_matrix() != 0).sum()) <= 4  # only the diagonal
    True
    """

    def __init__(self, max_iter: int = 100, max_proj: int = 10000, tol: float = 1e-3,
                 init="identity", diagonal: bool = False, diagonal_c: float = 1.0,
                 verbose: bool = False, preprocessor=None, random_state=None):
        self.max_iter = max_iter
        self.max_proj = max_proj
        self.tol = tol
        self.init = init
        self.diagonal = diagonal
        self.diagonal_c = diagonal_c
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        check_positive_int(self.max_iter, "max_iter")
        check_positive_int(self.max_proj, "max_proj")
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_scalar(self.diagonal_c, "diagonal_c")
        Z, i, j = data.stacked()
        A, _ = metric_matrix(self.init, Z, name="init", random_state=self.random_state)
        V = Z[i] - Z[j]
        Vs, Vd = V[y == 1], V[y == -1]
        if not np.any(Vs) or not np.any(Vd):
            raise ValueError("MMC needs similar and dissimilar pairs of distinct samples "
                             "(every pair of one kind joins identical samples).")
        if self.diagonal:
            M = self._fit_diagonal(np.diag(A).copy(), Vs, Vd)
        else:
            M = self._fit_full(A.copy(), Vs, Vd)
        if not self.converged_:
            warnings.warn(f"MMC did not converge in max_iter={self.max_iter} iterations; "
                          "increase max_iter.", ConvergenceWarning,
                          stacklevel=user_stacklevel())
        self.components_ = components_from_metric(M)

    def _fit_full(self, A, Vs, Vd):
        d = A.shape[0]
        W = Vs.T @ Vs                        # f(A) = ⟨W, A⟩
        w = W.ravel()
        t = float(w @ A.ravel()) / 100.0
        w_norm = np.linalg.norm(w)
        w1, t1 = w / w_norm, t / w_norm
        alpha = 0.1
        step = _orthogonal_direction(dissimilarity_gradient(Vd, A), W)
        A_old = A.copy()
        delta = np.inf
        cycle = 0
        for cycle in range(self.max_iter):
            satisfied = False
            n_proj = 0
            for n_proj in range(1, self.max_proj + 1):  # noqa: B007 - reported below
                x = A.ravel()
                if w @ x > t:                # onto the half-space ⟨W, A⟩ ≤ t
                    A = (x + (t1 - w1 @ x) * w1).reshape(d, d)
                lam, U = np.linalg.eigh((A + A.T) / 2)   # onto the PSD cone
                A = (U * np.maximum(lam, 0.0)) @ U.T
                if (w @ A.ravel() - t) / t < 0.01:
                    satisfied = True
                    break
            if satisfied and (cycle == 0 or dissimilarity_objective(Vd, A)
                              > dissimilarity_objective(Vd, A_old)):
                alpha *= 1.05
                A_old = A.copy()
                step = _orthogonal_direction(dissimilarity_gradient(Vd, A), W)
                A = A + alpha * step
            else:
                alpha /= 2.0
                A = A_old + alpha * step
            delta = float(np.linalg.norm(alpha * step) / np.linalg.norm(A_old))
            if self.verbose:
                print(f"[MMC] cycle {cycle}: relative step {delta:.3g}, projections {n_proj}")
            if delta < self.tol:
                break
        self.n_iter_ = cycle + 1
        self.converged_ = bool(delta <= self.tol)
        return A_old

    def _fit_diagonal(self, w, Vs, Vd):
        d = w.size
        c = float(self.diagonal_c)
        s_sum = np.sum(Vs ** 2, axis=0)
        Dsq = Vd ** 2
        error, it = np.inf, 0
        while error > self.tol and it < self.max_iter:
            h, g, H = diagonal_terms(Dsq, w)
            obj0 = float(s_sum @ w) - c * h
            step = np.linalg.solve(-c * H + 1e-6 * np.eye(d), s_sum - c * g)
            lam = 1.0
            w_new = np.maximum(w - step, 0.0)
            obj = _diagonal_objective(s_sum, Dsq, w_new, c)
            best, w_best = np.inf, w_new
            while obj < best:                # halve the step while it keeps improving
                best, w_best = obj, w_new
                lam /= 2.0
                w_new = np.maximum(w - lam * step, 0.0)
                obj = _diagonal_objective(s_sum, Dsq, w_new, c)
            w = w_best
            error = abs((best - obj0) / best) if best != 0 else 0.0
            it += 1
            if self.verbose:
                print(f"[MMC] Newton step {it}: relative change {error:.3g}")
        self.n_iter_ = it
        self.converged_ = bool(error <= self.tol)
        return np.diag(w)


class MMC_Supervised(MMC):  # noqa: N801 - metric-learn's name
    """MMC from samples and class labels (metric-learn 0.7.0's ``MMC_Supervised``).

    ``fit(X, y)`` draws ``n_constraints`` same-class and as many different-class pairs
    (:func:`crossmetric.learners.lsml.label_pairs`) and fits :class:`MMC` on them; pairs and
    +1 / -1 labels are also taken, as by :class:`MMC`. Parameters as :class:`MMC`, with
    metric-learn's ``tol=1e-6`` default and ``n_constraints`` (default ``20 * n_classes**2``);
    ``random_state`` also seeds the pairs.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import MMC_Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> mmc = MMC_Supervised(diagonal=True, n_constraints=200, random_state=0).fit(X, y)
    >>> mmc.transform(X).shape
    (150, 4)
    """

    def __init__(self, max_iter: int = 100, max_proj: int = 10000, tol: float = 1e-6,
                 n_constraints=None, init="identity", diagonal: bool = False,
                 diagonal_c: float = 1.0, verbose: bool = False, preprocessor=None,
                 random_state=None):
        super().__init__(max_iter=max_iter, max_proj=max_proj, tol=tol, init=init,
                         diagonal=diagonal, diagonal_c=diagonal_c, verbose=verbose,
                         preprocessor=preprocessor, random_state=random_state)
        self.n_constraints = n_constraints

    def fit(self, X, y):
        """Draw pairs from the class labels ``y`` and fit MMC (or fit on given pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,), or the pairs' +1 / -1 labels

        Returns
        -------
        self
        """
        if is_pair_input(X, self.preprocessor):
            return super().fit(X, y)
        return super().fit(*supervised_pairs(X, y, self.n_constraints, self.random_state))
