"""LSML: learning from relative comparisons by least squared residual (Liu et al., ICDM 2012).

A constraint is a quadruplet ``(a, b, c, d)`` saying that ``a`` and ``b`` are closer than ``c``
and ``d``. With ``v = x_a − x_b``, ``u = x_c − x_d`` and ``d_M(v) = vᵀ M v``, LSML minimises the
squared residual of the violated comparisons plus the LogDet divergence from a prior ``M₀``
(the paper's eq. 2-4, up to constants):

    L(M) = Σ_k w_k H(√d_M(v_k) − √d_M(u_k))² + tr(M M₀⁻¹) − log det M

with ``H(z) = z`` for ``z > 0`` else 0 and the weights ``w`` scaled to sum to 1. Its gradient
(:func:`lsml_gradient`, tested against finite differences) is

    ∇L = M₀⁻¹ − M⁻¹ + Σ_{k violated} w_k [(1 − √(d_u/d_v)) v vᵀ + (1 − √(d_v/d_u)) u uᵀ].

Each iteration tries ten step lengths ``10⁻¹⁰ … 1`` (divided by ``‖∇L‖``) along ``−∇L``, each
followed by a projection onto ``{M ⪰ 10⁻⁸ I}`` (clip the eigenvalues), and keeps the one with the
lowest loss; it stops when no step lowers the loss, when ``‖∇L‖ < tol`` or after ``max_iter``.

*Difference from metric-learn 0.7.0.* metric-learn's gradient leaves out the weights ``w_k``
in the comparison term (``n`` times too large for uniform weights) while its loss includes
them; here the gradient is that of the loss. Both walk downhill on the same loss, from slightly
different directions, so the results agree in quality (held-out kNN accuracy in
``benchmarks/bench_metric_learn_parity_a.py``) but not to round-off.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import as_float_array, check_positive_int, check_positive_scalar
from crossmetric.learners._mahalanobis_common import (
    SampleMahalanobisMixin,
    components_from_metric,
    label_pairs,
    metric_matrix,
)

__all__ = ["LSML", "LSML_Supervised", "lsml_loss", "lsml_gradient", "label_pairs"]

_STEPS = np.logspace(-10, 0, 10)


def _comparison_terms(M, Vab, Vcd):
    dab = np.sum((Vab @ M) * Vab, axis=1)
    dcd = np.sum((Vcd @ M) * Vcd, axis=1)
    return dab, dcd, dab > dcd


def lsml_loss(M, Vab, Vcd, w, prior_inv) -> float:
    """``L(M)`` of the module docstring (``+inf`` when ``M`` is not positive definite)."""
    dab, dcd, viol = _comparison_terms(M, Vab, Vcd)
    sign, logdet = np.linalg.slogdet(M)
    if sign <= 0:
        return np.inf
    comp = float(w[viol] @ (np.sqrt(dab[viol]) - np.sqrt(np.maximum(dcd[viol], 0.0))) ** 2)
    return comp + float(np.sum(M * prior_inv)) - float(logdet)


def lsml_gradient(M, Vab, Vcd, w, prior_inv) -> np.ndarray:
    """``∇L(M)`` (module docstring), the comparison term as two BLAS-3 products."""
    dab, dcd, viol = _comparison_terms(M, Vab, Vcd)
    G = prior_inv - np.linalg.inv(M)
    if viol.any():
        a, c, wv = dab[viol], dcd[viol], w[viol]
        ca = wv * (1.0 - np.sqrt(c / a))
        cc = wv * (1.0 - np.sqrt(a / np.maximum(c, 1e-300)))
        Va, Vc = Vab[viol], Vcd[viol]
        G = G + (Va.T * ca) @ Va + (Vc.T * cc) @ Vc
    return G


class _LSMLBase(SampleMahalanobisMixin, BaseEstimator):
    def _fit(self, data, y) -> None:
        """Pair form: each similar pair against a dissimilar one (drawn with random_state)."""
        rng = check_random_state(self.random_state)
        pos = np.flatnonzero(y == 1)
        neg = np.flatnonzero(y == -1)
        q = max(pos.size, neg.size)
        pos = rng.permutation(np.resize(pos, q))
        neg = rng.permutation(np.resize(neg, q))
        Z = data.X
        Q = np.stack([Z[data.ix[pos]], Z[data.iy[pos]], Z[data.ix[neg]], Z[data.iy[neg]]],
                     axis=1)
        self._fit_quadruplets(Q, None)

    def _check_params(self):
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_int(self.max_iter, "max_iter")

    def _fit_quadruplets(self, Q: np.ndarray, weights) -> None:
        self._check_params()
        Vab, Vcd = Q[:, 0] - Q[:, 1], Q[:, 2] - Q[:, 3]
        if weights is None:
            w = np.ones(Q.shape[0])
        else:
            w = as_float_array(weights, "weights", ndim=1).astype(float, copy=True)
            if w.shape[0] != Q.shape[0] or (w < 0).any() or w.sum() <= 0:
                raise ValueError(f"weights must be {Q.shape[0]} non-negative numbers (one per "
                                 "constraint) with a positive sum.")
        w = w / w.sum()
        X = np.unique(Q.reshape(-1, Q.shape[2]), axis=0)
        M, prior_inv = metric_matrix(self.prior, X, name="prior",
                                     random_state=self.random_state, strict_pd=True)
        M = M.copy()
        best = lsml_loss(M, Vab, Vcd, w, prior_inv)
        self.loss_curve_ = [best]
        it = 0
        for it in range(1, self.max_iter + 1):
            G = lsml_gradient(M, Vab, Vcd, w, prior_inv)
            gnorm = float(np.linalg.norm(G))
            if gnorm < self.tol:
                break
            M_best = None
            for s in _STEPS / gnorm:
                lam, U = np.linalg.eigh(M - s * G)
                cand = (U * np.maximum(lam, 1e-8)) @ U.T
                loss = lsml_loss(cand, Vab, Vcd, w, prior_inv)
                if loss < best:
                    best, M_best = loss, cand
            if self.verbose:
                print(f"[LSML] iteration {it}: loss {best:.6g}, gradient norm {gnorm:.3g}")
            if M_best is None:
                break
            M = M_best
            self.loss_curve_.append(best)
        self.n_iter_ = it
        self._set_fitted_shape(Q.shape[2])
        self.components_ = components_from_metric(M)


class LSML(_LSMLBase):
    """Least-squared-residual metric learning from relative comparisons (Liu et al., ICDM 2012).

    Learns a Mahalanobis matrix from quadruplets ``(a, b, c, d)`` meaning
    ``d(a, b) < d(c, d)`` (module docstring: loss, gradient and step search). Constructor
    parameters and input form as metric-learn 0.7.0's ``LSML``: ``fit(quadruplets, weights)``,
    and ``predict`` / ``decision_function`` / ``score`` on quadruplets. The pair members
    (``pair_distance``, ``transform``, ``get_mahalanobis_matrix``, ``calibrate_threshold``)
    work as for the pair learners.

    Parameters
    ----------
    tol : float, default=1e-3
        Stop when the gradient norm falls below it.
    max_iter : int, default=1000
    prior : {"identity", "covariance", "random"} or ndarray, default="identity"
        ``M₀`` and the starting point (strictly positive definite).
    verbose : bool, default=False
    preprocessor : array-like, optional
        Samples that integer quadruplets ``(n, 4)`` refer to.
    random_state : int, RandomState instance or None
        Seeds ``prior="random"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
    n_iter_ : int
    loss_curve_ : list of float
        The loss at the start and after each accepted step (decreasing).

    References
    ----------
    E. Y. Liu, Z. Guo, X. Zhang, V. Jojic, W. Wang. Metric learning from relative comparisons
    by minimizing squared residual. ICDM 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import LSML
    >>> quadruplets = [[[1.2, 7.5], [1.3, 1.5], [6.4, 2.6], [6.2, 9.7]],
    ...                [[1.3, 4.5], [3.2, 4.6], [6.2, 5.5], [5.4, 5.4]],
    ...                [[3.2, 7.5], [3.3, 1.5], [8.4, 2.6], [8.2, 9.7]],
    ...                [[3.3, 4.5], [5.2, 4.6], [8.2, 5.5], [7.4, 5.4]]]
    >>> lsml = LSML().fit(quadruplets)
    >>> lsml.get_mahalanobis_matrix().shape
    (2, 2)
    >>> lsml.predict(quadruplets).shape  # +1 where d(q0, q1) < d(q2, q3) in the metric
    (4,)
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric.learners.lsml import label_pairs
    >>> X, labels = load_iris(return_X_y=True)
    >>> quads = np.stack(label_pairs(labels, 100, random_state=0), axis=1)  # (a, b, c, d)
    >>> bool(LSML(preprocessor=X).fit(quads).score(quads) > 0.9)  # share ordered right
    True
    """

    def __init__(self, tol: float = 1e-3, max_iter: int = 1000, prior="identity",
                 verbose: bool = False, preprocessor=None, random_state=None):
        self.tol = tol
        self.max_iter = max_iter
        self.prior = prior
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, quadruplets, weights=None):
        """Learn the metric from quadruplets.

        Parameters
        ----------
        quadruplets : array-like of shape (n_constraints, 4, n_features) or (n_constraints, 4)
            Float quadruplets, or integer indices into ``preprocessor``; each says
            ``d(q[0], q[1]) < d(q[2], q[3])``. Pairs in any input form of the pair learners
            are also taken (then ``weights`` are their +1 / -1 labels, each similar pair is
            compared with a dissimilar one, and ``threshold_`` is set from the pairs).
        weights : array-like of shape (n_constraints,), optional
            Weight of each constraint (uniform when None).

        Returns
        -------
        self
        """
        if self._is_pairs(quadruplets):
            return self._fit_pairs(quadruplets, weights)
        self._fit_quadruplets(self._tuples(quadruplets, 4, "quadruplets"), weights)
        return self

    def decision_function(self, quadruplets) -> np.ndarray:
        """``d(q[2], q[3]) − d(q[0], q[1])`` (squared learned distances): > 0 when satisfied.

        Given pairs instead, ``-pair_distance`` (as the pair learners).
        """
        check_is_fitted(self)
        if self._is_pairs(quadruplets):
            return super().decision_function(quadruplets)
        Q = self._tuples(quadruplets, 4, "quadruplets")
        F = Q @ self.components_.T
        return (np.sum((F[:, 2] - F[:, 3]) ** 2, axis=1)
                - np.sum((F[:, 0] - F[:, 1]) ** 2, axis=1))

    def predict(self, quadruplets) -> np.ndarray:
        """+1 where the learned metric orders the quadruplet as given, else -1.

        Given pairs instead, +1 where ``pair_distance <= threshold_`` (as the pair learners).
        """
        if self._is_pairs(quadruplets):
            return super().predict(quadruplets)
        return np.where(self.decision_function(quadruplets) > 0, 1, -1)

    def score(self, quadruplets, y=None) -> float:
        """Share of quadruplets ordered as given (``y`` all +1 when None).

        Given pairs and their +1 / -1 labels instead, the ROC AUC (as the pair learners).
        """
        if self._is_pairs(quadruplets):
            return super().score(quadruplets, y)
        pred = self.predict(quadruplets)
        y = np.ones(pred.shape[0]) if y is None else np.asarray(y)
        return float(np.mean(pred == y))


class LSML_Supervised(_LSMLBase):  # noqa: N801 - metric-learn's name
    """LSML from samples and class labels (metric-learn 0.7.0's ``LSML_Supervised``).

    ``fit(X, y)`` draws ``n_constraints`` same-class pairs ``(a, b)`` and as many
    different-class pairs ``(c, d)`` (:func:`label_pairs`) and fits :class:`LSML` on the
    quadruplets ``(a, b, c, d)``. ``transform(X)`` embeds samples in the learned metric (a
    ``Pipeline`` step before a ``KNeighborsClassifier``).

    Parameters
    ----------
    tol : float, default=1e-3
    max_iter : int, default=1000
    prior : {"identity", "covariance", "random"} or ndarray, default="identity"
    n_constraints : int, optional
        Pairs of each kind; ``20 * n_classes**2`` when None.
    weights : array-like, optional
        Weight of each constraint (uniform when None).
    verbose : bool, default=False
    preprocessor : array-like, optional
        Kept for metric-learn's signature (``fit`` takes the samples themselves).
    random_state : int, RandomState instance or None
        Seeds the pairs drawn from the labels and ``prior="random"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
    n_iter_ : int
    loss_curve_ : list of float

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from crossmetric import LSML_Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> model = make_pipeline(LSML_Supervised(n_constraints=200, random_state=0),
    ...                       KNeighborsClassifier(3))
    >>> bool(model.fit(X, y).score(X, y) > 0.9)
    True
    """

    def __init__(self, tol: float = 1e-3, max_iter: int = 1000, prior="identity",
                 n_constraints=None, weights=None, verbose: bool = False,
                 preprocessor=None, random_state=None):
        self.tol = tol
        self.max_iter = max_iter
        self.prior = prior
        self.n_constraints = n_constraints
        self.weights = weights
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Draw quadruplets from the class labels ``y`` and learn the metric.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
            The samples; or pairs in any input form of the pair learners (then ``y`` are
            their +1 / -1 labels and each similar pair is compared with a dissimilar one).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        if self._is_pairs(X):
            return self._fit_pairs(X, y)
        X = self._samples(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be one label per sample ({X.shape[0]}), got shape "
                             f"{y.shape}.")
        n = self.n_constraints
        if n is None:
            n = 20 * np.unique(y).size ** 2
        n = check_positive_int(n, "n_constraints")
        a, b, c, d = label_pairs(y, n, random_state=self.random_state)
        self._fit_quadruplets(np.stack([X[a], X[b], X[c], X[d]], axis=1), self.weights)
        return self
