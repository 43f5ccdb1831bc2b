"""Sparse compositional metric learning (Shi, Bellet & Sha, AAAI 2014).

SCML learns ``M = Σ_k w_k b_k b_kᵀ``, a sparse non-negative combination of ``K`` rank-one
bases, from triplets ``(a, b, c)`` (``a`` should be closer to ``b`` than to ``c``) by
minimising

    (1/T) Σ_t [1 + d_w(a_t, b_t) − d_w(a_t, c_t)]_+ + β ‖w‖₁,   w ≥ 0,

``d_w(x, x') = Σ_k w_k (b_kᵀ(x − x'))²``, with a stochastic composite method: regularised dual
averaging with AdaGrad step sizes on mini-batches of triplets (metric-learn 0.7.0's solver,
after the authors' Matlab code). Every ``output_iter`` iterations the full objective is
evaluated and the best ``w`` kept. Bases: "triplet_diffs" (eigenvectors of sums of outer
products of the triplets' positive minus negative differences) for :class:`SCML`; "lda"
(normalised LDA directions of k-nearest-neighbour regions around k-means centres, at two scales)
for :class:`SCML_Supervised`; or an array ``(n_basis, n_features)``.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._utils.checks import as_float_array, check_positive_int, check_positive_scalar
from crossmetric.learners._sample_forms import (
    _SampleFormMetric,
    knn_triplets,
)
from crossmetric.learners.ldml import input_scale

__all__ = ["SCML", "SCML_Supervised", "scml_weights", "triplet_distance_differences"]


def triplet_distance_differences(X: np.ndarray, triplets: np.ndarray,
                                 basis: np.ndarray) -> np.ndarray:
    """``Δ[t, k] = (b_kᵀ(x_a − x_b))² − (b_kᵀ(x_a − x_c))²`` for index triplets (T × K)."""
    XB = X @ basis.T
    return (XB[triplets[:, 0]] - XB[triplets[:, 1]]) ** 2 - \
        (XB[triplets[:, 0]] - XB[triplets[:, 2]]) ** 2


def scml_objective(w: np.ndarray, delta: np.ndarray, beta: float) -> float:
    """``(1/T) Σ_t [1 + Δ_t·w]_+ + β Σ_k w_k`` (``w ≥ 0``)."""
    return float(np.maximum(1.0 + delta @ w, 0.0).mean() + beta * w.sum())


def scml_weights(delta: np.ndarray, *, beta: float, gamma: float, max_iter: int,
                 output_iter: int, batch_size: int, random_state=None, verbose=False):
    """Regularised dual averaging with AdaGrad on SCML's objective; returns ``(w, n_iter)``.

    The objective is evaluated every ``output_iter`` iterations and at the last one; the best
    evaluated ``w`` is returned. Per iteration: a mini-batch of ``batch_size`` triplets (drawn
    with replacement), the hinge subgradient ``g`` averaged into ``ḡ``, ``H = sqrt(Σ g²)`` per
    coordinate, and the closed-form proximal step ``w = (t / (γ (δ + H))) · max(−ḡ − β, 0)``
    (δ = 1e-3).
    """
    n_triplets, K = delta.shape
    rng = check_random_state(random_state)
    draws = rng.randint(0, n_triplets, size=(max_iter, batch_size))
    w = np.zeros(K)
    avg = np.zeros(K)
    ada = np.zeros(K)
    best_w, best = w.copy(), np.inf
    for it in range(max_iter):
        batch = delta[draws[it]]
        active = 1.0 + batch @ w > 0
        g = batch[active].sum(0) / batch_size
        avg += (g - avg) / (it + 1)
        ada = np.sqrt(ada ** 2 + g ** 2)
        w = (it + 1) / (gamma * (1e-3 + ada)) * np.maximum(-avg - beta, 0.0)
        if (it + 1) % output_iter == 0 or it + 1 == max_iter:
            obj = scml_objective(w, delta, beta)
            if verbose:
                print(f"[SCML] iter {it + 1}\t obj {obj:.6f}")
            if obj < best:
                best, best_w = obj, w.copy()
    return best_w, max_iter


def _components_from_weights(basis: np.ndarray, w: np.ndarray) -> np.ndarray:
    act = w > 0
    B, wa = basis[act], w[act]
    d = basis.shape[1]
    if B.shape[0] < d:
        if B.shape[0] == 0:
            raise ValueError("SCML: every basis weight is zero (the triplets are already "
                             "satisfied with margin or beta is too large); lower beta.")
        warnings.warn(f"SCML: {B.shape[0]} bases have a nonzero weight, fewer than the "
                      f"{d} features: the learned transform has {B.shape[0]} rows.",
                      UserWarning, stacklevel=4)
        return np.sqrt(wa)[:, None] * B
    vals, vecs = np.linalg.eigh((B.T * wa) @ B)
    return (vecs * np.sqrt(np.maximum(vals, 0.0))).T[::-1]


def _triplet_diff_basis(X, triplets, n_basis, rng) -> np.ndarray:
    n_features, n_triplets = X.shape[1], triplets.shape[0]
    if n_features > n_triplets:
        raise ValueError(f"SCML: {n_features} features but only {n_triplets} triplets; the "
                         "'triplet_diffs' basis needs at least as many triplets as features.")
    dpos = X[triplets[:, 0]] - X[triplets[:, 1]]
    dneg = X[triplets[:, 0]] - X[triplets[:, 2]]
    rows = []
    total = 0
    for _ in range(100 * n_basis + 100):
        pick = rng.choice(n_triplets, size=n_features, replace=False)
        S = dpos[pick].T @ dpos[pick] - dneg[pick].T @ dneg[pick]
        vals, vecs = np.linalg.eigh(S.T @ S)
        # eigenvectors of positive eigenvalue, as rows (metric-learn takes rows of v)
        new = vecs.T[vals > 1e-12 * max(vals.max(), 1e-300)]
        rows.append(new)
        total += new.shape[0]
        if total >= n_basis:
            return np.vstack(rows)[:n_basis]
    raise ValueError("SCML: the triplets yield no basis (their differences vanish).")


def _lda_basis(X, y, n_basis, random_state) -> np.ndarray:
    from sklearn.cluster import KMeans
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.preprocessing import normalize

    classes, y = np.unique(y, return_inverse=True)
    counts = np.bincount(y)
    n, d = X.shape
    num_eig = min(len(classes) - 1, d)
    if num_eig < 1:
        raise ValueError("SCML_Supervised: basis='lda' needs at least two classes.")
    if n_basis < len(classes):
        warnings.warn("SCML_Supervised: fewer bases than classes may discriminate poorly.",
                      UserWarning, stacklevel=4)
    elif n_basis >= n * 2 * num_eig:
        raise ValueError(f"SCML_Supervised: not enough samples for {n_basis} LDA bases; "
                         f"n_basis must be < {n * 2 * num_eig}.")
    n_clusters = int(np.ceil(n_basis / (2 * num_eig)))
    centres = KMeans(n_clusters=n_clusters, n_init=10,
                     random_state=random_state).fit(X).cluster_centers_
    scales = (20, 50) if d > 50 else (10, 20)
    from crossmetric._base import squared_euclidean_matrix

    order = [np.flatnonzero(y == c)[np.argsort(squared_euclidean_matrix(centres, X[y == c]),
                                               axis=1, kind="stable")]
             for c in range(len(classes))]
    rows = []
    lda = LinearDiscriminantAnalysis()
    for s in scales:
        for ci in range(n_clusters):
            idx = np.concatenate([o[ci, :min(counts[c], s)] for c, o in enumerate(order)])
            lda.fit(X[idx], y[idx])
            rows.append(normalize(lda.scalings_.T[:num_eig]))
    return np.vstack(rows)[:n_basis]


class _BaseSCML(_SampleFormMetric):
    _authorized_basis = ("triplet_diffs",)

    def _check_solver(self):
        for name in ("max_iter", "output_iter", "batch_size"):
            check_positive_int(getattr(self, name), name)
        check_positive_scalar(self.beta, "beta", allow_zero=True)
        check_positive_scalar(self.gamma, "gamma")

    def _n_basis(self, default: int) -> int:
        if self.n_basis is None:
            return default
        if isinstance(self.n_basis, bool) or not isinstance(self.n_basis, numbers.Integral) \
                or self.n_basis < 1:
            raise ValueError(f"n_basis must be a positive integer or None, got "
                             f"{self.n_basis!r}.")
        return int(self.n_basis)

    def _array_basis(self, d: int):
        if isinstance(self.basis, str):
            if self.basis not in self._authorized_basis:
                raise ValueError(f"basis must be one of {self._authorized_basis} or an array "
                                 f"of shape (n_basis, n_features), got {self.basis!r}.")
            return None
        B = as_float_array(self.basis, "basis", ndim=2)
        if B.shape[1] != d:
            raise ValueError(f"basis has {B.shape[1]} columns but the data have {d} features.")
        return B

    def _learn(self, X, triplets, basis):
        delta = triplet_distance_differences(X, triplets, basis)
        w, self.n_iter_ = scml_weights(
            delta, beta=float(self.beta), gamma=float(self.gamma), max_iter=self.max_iter,
            output_iter=self.output_iter, batch_size=self.batch_size,
            random_state=self.random_state, verbose=self.verbose)
        self.basis_, self.weights_ = basis, w
        self.components_ = _components_from_weights(basis, w)

    def _fit_triplets(self, X, triplets, rng):
        B = self._array_basis(X.shape[1])
        # bases made from the data: learned on X / input_scale(X) and the scale folded back
        # into components_, so that the margin of 1 means the same for X and c · X (at
        # X × 1e-6 every triplet was already satisfied and every weight zero)
        scale = 1.0 if B is not None else input_scale(X)
        if B is None:
            B = _triplet_diff_basis(X / scale, triplets, self._n_basis(80 * X.shape[1]), rng)
        self._learn(X / scale, triplets, B)
        self.components_ = self.components_ / scale
        self.input_scale_ = scale


_PARAMS_DOC = """
    beta : float, default=1e-5
        L1 regularisation weight.
    basis : str or array-like of shape (n_basis, n_features), default={basis!r}
        How the rank-one bases are made (module docstring): {choices}, or given.
    n_basis : int or None, default=None
        Number of bases; None: {default}.
    gamma : float, default=5e-3
        Step-size parameter of the dual-averaging solver.
    max_iter : int, default=10000
        Solver iterations.
    output_iter : int, default=500
        Iterations between evaluations of the full objective (the best ``w`` is kept); the
        last iterate is evaluated too (metric-learn refuses ``output_iter > max_iter``).
    batch_size : int, default=10
        Triplets per iteration.
    verbose : bool, default=False
    preprocessor : array-like, optional
        Samples that index triplets (``(n, 3)`` integers) or pairs point into.
    random_state : int, RandomState instance or None
        Seeds the basis construction and the solver's mini-batches."""


class SCML(_BaseSCML):
    __doc__ = """Sparse compositional metric learning from triplets (metric-learn 0.7.0's ``SCML``).

    ``fit(triplets)``: float triplets ``(n, 3, n_features)`` or index triplets ``(n, 3)`` with a
    ``preprocessor``; ``d(t[0], t[1]) < d(t[0], t[2])`` is wanted. Given pairs and +1/-1
    labels instead, triplets are formed from the connected components of the positive pairs
    (3 same-class and 10 other-class nearest neighbours of each sample).

    Parameters
    ----------""" + _PARAMS_DOC.format(
        basis="triplet_diffs", choices='"triplet_diffs"', default="80 × n_features") + """

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        ``L`` with ``LᵀL = Σ_k w_k b_k b_kᵀ``.
    basis_ : ndarray of shape (n_basis, n_features)
    weights_ : ndarray of shape (n_basis,)
        The sparse non-negative weights.

    References
    ----------
    Y. Shi, A. Bellet and F. Sha, "Sparse compositional metric learning", AAAI 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import SCML
    >>> triplets = np.array([[[1.2, 7.5], [1.3, 1.5], [6.2, 9.7]],
    ...                      [[1.3, 4.5], [3.2, 4.6], [5.4, 5.4]],
    ...                      [[3.2, 7.5], [3.3, 1.5], [8.2, 9.7]],
    ...                      [[3.3, 4.5], [5.2, 4.6], [7.4, 5.4]]])
    >>> scml = SCML(n_basis=4, max_iter=1000, random_state=0).fit(triplets)
    >>> scml.get_mahalanobis_matrix().shape
    (2, 2)
    """

    _native_tuple = 3

    def __init__(self, beta=1e-5, basis="triplet_diffs", n_basis=None, gamma=5e-3,
                 max_iter=10000, output_iter=500, batch_size=10, verbose=False,
                 preprocessor=None, random_state=None):
        self.beta = beta
        self.basis = basis
        self.n_basis = n_basis
        self.gamma = gamma
        self.max_iter = max_iter
        self.output_iter = output_iter
        self.batch_size = batch_size
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, triplets, y=None):
        """Learn the metric from triplets (or from pairs and +1/-1 labels ``y``).

        Parameters
        ----------
        triplets : array-like of shape (n, 3, n_features), or (n, 3) indices, or pairs
        y : None, or pair labels with pairs

        Returns
        -------
        self
        """
        if self._is_pair_form(triplets):
            return super().fit(triplets, y)
        self._check_solver()
        X, idx = self._triplet_points(triplets)
        self._fit_triplets(X, idx, check_random_state(self.random_state))
        self._finish_native(X, None)
        return self

    def _triplet_points(self, triplets):
        arr = np.asarray(triplets)
        if arr.ndim == 2 and arr.shape[1] == 3 and arr.dtype.kind in "iu":
            if self.preprocessor is None:
                raise ValueError("SCML: index triplets (n, 3) need preprocessor=X.")
            X = as_float_array(self.preprocessor, "preprocessor", ndim=2)
            if arr.size and (arr.min() < 0 or arr.max() >= X.shape[0]):
                raise ValueError(f"triplets index out of range for {X.shape[0]} samples.")
            return X, arr.astype(np.int64)
        arr = as_float_array(triplets, "triplets")
        if arr.ndim != 3 or arr.shape[1] != 3 or arr.shape[0] == 0:
            raise ValueError(f"triplets must have shape (n_triplets, 3, n_features) (or "
                             f"(n, 3) indices with a preprocessor), got {arr.shape}.")
        X, inv = np.unique(arr.reshape(-1, arr.shape[2]), axis=0, return_inverse=True)
        return X, inv.reshape(-1, 3)

    def _fit_labels(self, X, labels):
        self._check_solver()
        triplets = knn_triplets(X, labels, 3, 10)
        if triplets.shape[0] == 0:
            raise ValueError("SCML needs classes with at least two samples: no positive pair "
                             "joins two distinct samples.")
        self._fit_triplets(X, triplets, check_random_state(self.random_state))


class SCML_Supervised(_BaseSCML):
    __doc__ = """SCML from class labels (metric-learn 0.7.0's ``SCML_Supervised``).

    Forms the triplets of each sample with its ``k_genuine`` nearest same-class and
    ``k_impostor`` nearest other-class samples (all combinations) and learns :class:`SCML` on
    them, with "lda" bases by default.

    Parameters
    ----------
    k_genuine : int, default=3
        Same-class neighbours per sample.
    k_impostor : int, default=10
        Other-class neighbours per sample.""" + _PARAMS_DOC.format(
        basis="lda", choices='"lda", "triplet_diffs"',
        default="min(20 × n_features, 2 n_samples (n_classes − 1) − 1)") + """

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    basis_ : ndarray of shape (n_basis, n_features)
    weights_ : ndarray of shape (n_basis,)

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import SCML_Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> scml = SCML_Supervised(n_basis=40, max_iter=2000, random_state=0).fit(X, y)
    >>> scml.transform(X).shape[0]
    150
    """

    _authorized_basis = ("triplet_diffs", "lda")

    def __init__(self, k_genuine=3, k_impostor=10, beta=1e-5, basis="lda", n_basis=None,
                 gamma=5e-3, max_iter=10000, output_iter=500, batch_size=10, verbose=False,
                 preprocessor=None, random_state=None):
        self.k_genuine = k_genuine
        self.k_impostor = k_impostor
        self.beta = beta
        self.basis = basis
        self.n_basis = n_basis
        self.gamma = gamma
        self.max_iter = max_iter
        self.output_iter = output_iter
        self.batch_size = batch_size
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Form kNN triplets from the class labels and learn SCML (or fit on pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        if self._is_pair_form(X):
            return super().fit(X, y)
        return self._fit_class_samples(X, y)

    def _fit_labels(self, X, labels):
        self._check_solver()
        kg = check_positive_int(self.k_genuine, "k_genuine")
        ki = check_positive_int(self.k_impostor, "k_impostor")
        triplets = knn_triplets(X, labels, kg, ki)
        if triplets.shape[0] == 0:
            raise ValueError("SCML_Supervised needs classes with at least two samples.")
        rng = check_random_state(self.random_state)
        B = self._array_basis(X.shape[1])
        if B is None and self.basis == "lda":
            n_cls = int(labels.max()) + 1
            num_eig = min(n_cls - 1, X.shape[1])
            default = min(20 * X.shape[1], X.shape[0] * 2 * max(num_eig, 1) - 1)
            B = _lda_basis(X, labels, self._n_basis(default), rng)
        elif B is None:
            B = _triplet_diff_basis(X, triplets, self._n_basis(80 * X.shape[1]), rng)
        self._learn(X, triplets, B)
