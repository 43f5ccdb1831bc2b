"""Metric learning for kernel regression (Weinberger & Tesauro, AISTATS 2007).

MLKR learns ``L`` so that Nadaraya-Watson kernel regression with the Gaussian kernel
``k(x_i, x_j) = exp(−‖L x_i − L x_j‖²)`` predicts each training target well from the others
(leave-one-out): it minimises

    ℓ(L) = Σ_i ‖ŷ_i − y_i‖²,   ŷ_i = Σ_{j≠i} p_ij y_j,   p_ij = exp(−D_ij) / Σ_{k≠i} exp(−D_ik),

``D_ij = ‖L x_i − L x_j‖²``, with L-BFGS (:func:`mlkr_loss_grad` gives the gradient). Targets may
be vectors (``y`` of shape ``(n, n_outputs)``, the squared error summed over outputs);
metric-learn 0.7.0 takes 1-D targets only. It holds ``n × n`` matrices (memory O(n²)).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from crossmetric._base import squared_euclidean_matrix
from crossmetric._utils.checks import check_n_components, check_positive_int
from crossmetric.learners._sample_forms import _SampleFormMetric, check_samples_and_targets
from crossmetric.learners.neighbours import _weighted_scatter_grad

__all__ = ["MLKR", "mlkr_loss_grad"]


def mlkr_loss_grad(L: np.ndarray, X: np.ndarray, Y: np.ndarray):
    """MLKR's leave-one-out loss ``Σ_i ‖ŷ_i − y_i‖²`` and its gradient in ``L``.

    With ``e_i = ŷ_i − y_i``: ``∂ℓ/∂D_ik = 2 p_ik e_i·(ŷ_i − y_k)``, and
    ``∂/∂L Σ W_ik D_ik = 2 L Xᵀ (diag(S 1) − S) X``, ``S = W + Wᵀ``.
    ``Y`` is ``(n, n_outputs)``.
    """
    Z = X @ L.T
    D = squared_euclidean_matrix(Z, Z)
    np.fill_diagonal(D, np.inf)
    P = np.exp(-D - logsumexp(-D, axis=1)[:, None])
    Yhat = P @ Y
    E = Yhat - Y
    loss = float(np.sum(E ** 2))
    # W_ik = 2 p_ik (e_i·ŷ_i − e_i·y_k)
    W = 2.0 * P * (np.sum(E * Yhat, axis=1)[:, None] - E @ Y.T)
    return loss, _weighted_scatter_grad(L, X, Z, W)


def _initial_components(init, m: int, X: np.ndarray, random_state) -> np.ndarray:
    n, d = X.shape
    if isinstance(init, np.ndarray):
        A = np.array(init, dtype=np.float64)
        if A.ndim != 2 or A.shape != (m, d):
            raise ValueError(f"init must be an array of shape (n_components, n_features) = "
                             f"({m}, {d}), got shape {A.shape}.")
        return A
    if init not in ("auto", "pca", "identity", "random"):
        raise ValueError(f"init must be 'auto', 'pca', 'identity', 'random' or an array, got "
                         f"{init!r}.")
    rng = check_random_state(random_state)
    if init == "auto":
        init = "pca" if m < min(d, n) else "identity"
    if init == "identity":
        return np.eye(m, d)
    if init == "random":
        return rng.randn(m, d)
    return PCA(n_components=m, random_state=rng).fit(X).components_


class MLKR(_SampleFormMetric):
    """Metric learning for kernel regression (metric-learn 0.7.0's ``MLKR``).

    Minimises the leave-one-out kernel-regression error (module docstring,
    :func:`mlkr_loss_grad`) over ``L`` with scipy's L-BFGS-B. ``fit(X, y)`` takes numeric
    targets (1-D, or 2-D for several outputs); given pairs and +1/-1 labels instead, the
    targets are the one-hot classes of the connected components of the positive pairs.

    Parameters
    ----------
    n_components : int or None, default=None
        Rows of ``L``; all features when None.
    init : {"auto", "pca", "identity", "random"} or ndarray, default="auto"
        Initial ``L``: "auto" is "pca" when ``n_components < min(n_features, n_samples)``,
        else "identity"; "random" draws standard normal entries.
    tol : float or None, default=None
        scipy's ``tol`` of L-BFGS-B (None: scipy's defaults).
    max_iter : int, default=1000
        Cap on L-BFGS iterations.
    verbose : bool, default=False
        Print the objective per evaluation and warn if L-BFGS did not converge.
    preprocessor : array-like, optional
        Samples that index pairs point into (pair form only).
    random_state : int, RandomState instance or None
        Seeds the "random" and "pca" starts.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    n_iter_ : int
        Objective evaluations (as metric-learn counts).
    loss_ : float
        The final objective.

    References
    ----------
    K. Q. Weinberger and G. Tesauro, "Metric learning for kernel regression", AISTATS 2007.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import MLKR
    >>> X, y = load_iris(return_X_y=True)
    >>> mlkr = MLKR(n_components=2, random_state=0).fit(X, y)
    >>> mlkr.transform(X).shape
    (150, 2)
    """

    def __init__(self, n_components=None, init="auto", tol=None, max_iter=1000,
                 verbose=False, preprocessor=None, random_state=None):
        self.n_components = n_components
        self.init = init
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Learn the metric from samples and numeric targets (or from pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        if self._is_pair_form(X):
            return super().fit(X, y)
        X, y = check_samples_and_targets(X, y, type(self).__name__, numeric=True)
        self._learn(X, y.reshape(X.shape[0], -1))
        self._finish_native(X, None)
        return self

    def _fit_labels(self, X, labels):
        self._learn(X, np.eye(labels.max() + 1)[labels])

    def _learn(self, X, Y):
        max_iter = check_positive_int(self.max_iter, "max_iter")
        d = X.shape[1]
        m = d if self.n_components is None else check_n_components(self.n_components, d)
        A0 = _initial_components(self.init, m, X, self.random_state)
        self.n_iter_ = 0

        def fun(theta):
            loss, grad = mlkr_loss_grad(theta.reshape(A0.shape), X, Y)
            if self.verbose:
                print(f"[MLKR] {self.n_iter_:>6d} {loss:>20.6e}")
            self.n_iter_ += 1
            return loss, grad.ravel()

        res = minimize(fun, A0.ravel(), method="L-BFGS-B", jac=True, tol=self.tol,
                       options={"maxiter": max_iter})
        if self.verbose and not res.success:
            warnings.warn(f"[MLKR] L-BFGS did not converge: {res.message}", ConvergenceWarning,
                          stacklevel=3)
        self.components_ = res.x.reshape(A0.shape)
        self.loss_ = float(res.fun)
