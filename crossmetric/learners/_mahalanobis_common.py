"""Shared parts of the metric-learn-style Mahalanobis learners (MMC, SDML, LSML, Covariance).

* :func:`metric_matrix` -- the ``init`` / ``prior`` options of metric-learn 0.7.0
  (``"identity"``, ``"covariance"``, ``"random"`` or an array) as a matrix and its inverse;
* :func:`components_from_metric` -- ``L`` with ``Lᵀ L = M`` (the Cholesky factor when ``M`` is
  positive definite, else from the eigen-decomposition; the square root for a diagonal ``M``);
* :class:`SampleMahalanobisMixin` -- the fitted members (``transform``, ``pair_distance``,
  ``get_mahalanobis_matrix``, ...) for learners whose ``fit`` takes samples or quadruplets
  rather than labelled pairs.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_spd_matrix
from sklearn.utils import check_random_state

from crossmetric._base import LinearSingleModalMixin
from crossmetric._utils.checks import as_float_array

__all__ = ["metric_matrix", "components_from_metric", "SampleMahalanobisMixin",
           "is_pair_input", "supervised_pairs"]

_OPTIONS = ("identity", "covariance", "random")


def metric_matrix(spec, X: np.ndarray, *, name: str, random_state=None,
                  strict_pd: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(M, M⁻¹)`` for an ``init`` / ``prior`` option (pseudo-inverse when ``M`` is singular).

    ``"covariance"`` is the inverse covariance of the rows of ``X`` (the distinct samples);
    ``"random"`` a random SPD matrix (:func:`sklearn.datasets.make_spd_matrix`). With
    ``strict_pd`` a singular matrix is refused (a one-line ``ValueError``).
    """
    d = X.shape[1]
    if isinstance(spec, str):
        if spec not in _OPTIONS:
            raise ValueError(f"{name} must be 'identity', 'covariance', 'random' or a "
                             f"(n_features, n_features) array, got {spec!r}.")
        if spec == "identity":
            return np.eye(d), np.eye(d)
        if spec == "random":
            M = make_spd_matrix(d, random_state=check_random_state(random_state))
        else:
            C = np.atleast_2d(np.cov(X, rowvar=False))
            w, V = np.linalg.eigh(C)
            if strict_pd and w.min() <= _rank_tol(w):
                raise ValueError(f"{name}='covariance': the covariance of the samples is "
                                 "singular, so it has no inverse; use another "
                                 f"{name}.")
            return _pinv_from_eig(w, V), C
    else:
        M = as_float_array(spec, name, ndim=2).astype(np.float64, copy=True)
        if M.shape != (d, d):
            raise ValueError(f"{name} must have shape (n_features, n_features) = {(d, d)}, "
                             f"got {M.shape}.")
        if not np.allclose(M, M.T):
            raise ValueError(f"{name} must be a symmetric matrix.")
    w, V = np.linalg.eigh((M + M.T) / 2)
    if w.min() < -_rank_tol(w):
        raise ValueError(f"{name} must be positive semi-definite (smallest eigenvalue "
                         f"{w.min():.3g}).")
    if strict_pd and w.min() <= _rank_tol(w):
        raise ValueError(f"{name} must be strictly positive definite (it is singular).")
    return M, _pinv_from_eig(w, V)


def _rank_tol(w: np.ndarray) -> float:
    return float(np.abs(w).max()) * w.size * np.finfo(float).eps


def _pinv_from_eig(w: np.ndarray, V: np.ndarray) -> np.ndarray:
    keep = w > _rank_tol(w)
    return (V[:, keep] / w[keep]) @ V[:, keep].T


def components_from_metric(M: np.ndarray) -> np.ndarray:
    """``L`` (n_features × n_features) with ``Lᵀ L = M`` for a PSD matrix ``M``."""
    M = (M + M.T) / 2
    if np.array_equal(M, np.diag(np.diag(M))):
        return np.diag(np.sqrt(np.maximum(np.diag(M), 0.0)))
    try:
        return np.linalg.cholesky(M).T
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(M)
        return V.T * np.sqrt(np.maximum(w, 0.0))[:, None]


def is_pair_input(X, preprocessor) -> bool:
    """Whether ``X`` is pairs: a tuple ``(Xp, Yp)``, a float array ``(n, 2, d)``, or integer
    index pairs ``(n, 2)`` with a ``preprocessor`` (else: samples, or a ragged input whose
    checks the samples' path gives). The one test of the metric-learn-style learners, which
    take both their own input form and pairs."""
    if isinstance(X, tuple):
        return len(X) == 2
    try:
        arr = np.asarray(X)
    except ValueError:  # ragged: let the native checks say so
        return False
    if arr.ndim == 3:
        return arr.shape[1] == 2
    return (preprocessor is not None and arr.ndim == 2 and arr.shape[1] == 2
            and arr.dtype.kind in "iu")


def label_pairs(labels, n_constraints: int, random_state=None):
    """``n_constraints`` distinct same-label pairs and as many different-label pairs.

    Each pair is drawn as a uniform anchor and a uniform partner of the same (or another)
    class; repeats are redrawn (up to 10 rounds). Returns ``(a, b, c, d)``, ``(a, b)`` similar
    and ``(c, d)`` dissimilar, cut to a common length when fewer of one kind exist.
    """
    rng = check_random_state(random_state)
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    _, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    pos_in_sorted = np.empty_like(order)
    pos_in_sorted[order] = np.arange(order.size)
    n = labels.size

    def draw(same: bool):
        found: dict[tuple[int, int], None] = {}
        for _ in range(10):
            k = n_constraints - len(found)
            if k <= 0:
                break
            a = rng.randint(n, size=k)
            g, s = counts[inv[a]], starts[inv[a]]
            if same:
                ok = g > 1
                r = (rng.random_sample(k) * np.maximum(g - 1, 1)).astype(int)
                idx = s + r
                idx = idx + (idx >= pos_in_sorted[a])       # skip the anchor itself
            else:
                ok = g < n
                r = (rng.random_sample(k) * np.maximum(n - g, 1)).astype(int)
                idx = np.where(r < s, r, r + g)              # skip the anchor's class
            for x, y_, keep in zip(a.tolist(), order[np.minimum(idx, n - 1)].tolist(),
                                   ok.tolist(), strict=True):
                if keep:
                    found.setdefault((min(x, y_), max(x, y_)), None)
        pairs = np.array(list(found)[:n_constraints], dtype=int).reshape(-1, 2)
        return pairs[:, 0], pairs[:, 1]

    a, b = draw(True)
    c, d = draw(False)
    m = min(a.size, c.size)
    if m == 0:
        raise ValueError("labels must give at least one same-class and one different-class "
                         "pair (two classes, one with two samples or more).")
    return a[:m], b[:m], c[:m], d[:m]


def supervised_pairs(X, y, n_constraints, random_state):
    """Float pairs ``(n, 2, d)`` and +1 / -1 labels drawn from class labels (metric-learn's
    ``*_Supervised``): ``n_constraints`` (default ``20 * n_classes**2``) same-class and as many
    different-class pairs (:func:`label_pairs`)."""
    from crossmetric._utils.checks import check_positive_int

    X = as_float_array(X, "X", ndim=2).astype(np.float64, copy=False)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be one label per sample ({X.shape[0]}), got shape {y.shape}.")
    n = 20 * np.unique(y).size ** 2 if n_constraints is None else n_constraints
    n = check_positive_int(n, "n_constraints")
    a, b, c, d = label_pairs(y, n, random_state=random_state)
    pairs = np.stack([np.stack([X[a], X[b]], 1), np.stack([X[c], X[d]], 1)])
    return pairs.reshape(-1, 2, X.shape[1]), np.r_[np.ones(a.size, int), -np.ones(c.size, int)]


class SampleMahalanobisMixin(LinearSingleModalMixin):
    """Pair-API members for a Mahalanobis learner fitted from samples or tuples.

    ``fit`` of the subclass calls :meth:`_set_fitted_shape` with the sample width; after it,
    ``transform``, ``pair_distance`` (every pair input form), ``get_mahalanobis_matrix``,
    ``get_metric``, ``cross_distance`` and ``calibrate_threshold`` work as for pair learners.
    """

    def _set_fitted_shape(self, d: int) -> None:
        self._sample_shape_x_ = self._sample_shape_y_ = (d,)
        self.n_features_in_ = self.n_features_in_x_ = self.n_features_in_y_ = d
        self.classes_ = np.array([-1, 1])

    def _is_pairs(self, X) -> bool:
        """Whether ``fit``'s first argument is pairs (any input form of the pair learners)."""
        return is_pair_input(X, self.preprocessor)

    def _fit_pairs(self, pairs, y):
        """The pair learners' ``fit`` (validation, canonical pairs, ``threshold_``)."""
        return LinearSingleModalMixin.fit(self, pairs, y)

    def _samples(self, X, name: str = "X") -> np.ndarray:
        X = as_float_array(X, name, ndim=2).astype(np.float64, copy=False)
        if X.shape[0] < 2:
            raise ValueError(f"{name} needs at least 2 samples, got {X.shape[0]}.")
        return X

    def _tuples(self, tuples, size: int, name: str) -> np.ndarray:
        """Float tuples ``(n, size, d)``: given so, or as integer indices into ``preprocessor``."""
        arr = np.asarray(tuples)
        if arr.ndim == 2 and arr.shape[1] == size and arr.size and \
                np.issubdtype(arr.dtype, np.integer):
            if self.preprocessor is None:
                raise ValueError(f"{name} are indices of shape (n, {size}) but preprocessor "
                                 "is None; give the samples as preprocessor.")
            P = as_float_array(self.preprocessor, "preprocessor", ndim=2)
            if arr.min() < 0 or arr.max() >= P.shape[0]:
                raise ValueError(f"{name}: indices must lie in [0, {P.shape[0]}), got "
                                 f"[{arr.min()}, {arr.max()}].")
            arr = P[arr]
        arr = as_float_array(arr, name, ndim=3)
        if arr.shape[1] != size or arr.shape[0] == 0:
            raise ValueError(f"{name} must have shape (n, {size}, n_features) with n >= 1 "
                             f"(or (n, {size}) indices with a preprocessor), got {arr.shape}.")
        return arr.astype(np.float64, copy=False)
