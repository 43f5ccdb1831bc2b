"""Class-label metric learners behind the pair API: NCA, LMNN and MCC.

These baselines (of the CML-AUC and PCCA papers) learn from *class labels*, not pairs. Given
pairs, they take as classes the connected components of the positive pairs
(:func:`crossmetric.pairs.labels_from_pairs`: two samples share a class when a chain of *same*
pairs joins them; negative pairs are not used) and fit on the distinct samples of the pairs.
With pairs generated from class labels (:func:`crossmetric.pairs.make_pairs`) the components
are the classes, or pieces of them when the positives do not connect a class.

All three learn ``D(x, x') = ‖L x − L x'‖²``:

* :class:`NCA` wraps scikit-learn's :class:`~sklearn.neighbors.NeighborhoodComponentsAnalysis`
  (Goldberger et al., NIPS 2004);
* :class:`LMNN` is large-margin nearest neighbours (Weinberger & Saul, JMLR 2009, eq. 11-13);
* :class:`MCC` is metric learning by collapsing classes (Globerson & Roweis, NIPS 2005, eq. 3-5).

LMNN and MCC minimise their objective over ``L`` with L-BFGS; both objectives are sums over
sample pairs with weights ``W_ab``, whose gradient is ``2 L Xᵀ (diag(S 1) − S) X`` with
``S = W + Wᵀ`` (:func:`_weighted_scatter_grad`). They hold ``n × n`` matrices of the distinct
training samples (memory O(n²): 2,000 samples take ~32 MB per matrix).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator

from crossmetric._base import LinearSingleModalMixin, squared_euclidean_matrix
from crossmetric._solvers.descent import lbfgs
from crossmetric._solvers.starting import initial_projection
from crossmetric._utils.checks import check_n_components, check_positive_int, check_positive_scalar
from crossmetric.pairs import labels_from_pairs
from crossmetric.pairs._pair_data import PairData

__all__ = ["NCA", "LMNN", "MCC", "samples_and_labels"]


def samples_and_labels(data: PairData, y: np.ndarray):
    """Distinct samples of the pairs (canonical order), their pair indices and class labels
    (connected components of the positive pairs).

    ``data`` are the base's canonical pairs (:func:`crossmetric._base.canonical_pairs`): one
    sample set, every sample used.
    """
    return data.X, data.ix, data.iy, labels_from_pairs(data.ix, data.iy, y, data.X.shape[0])


def _weighted_scatter_grad(L: np.ndarray, X: np.ndarray, Z: np.ndarray,
                           W: np.ndarray) -> np.ndarray:
    """``∂/∂L Σ_ab W_ab ‖L x_a − L x_b‖² = 2 L Xᵀ (diag(S 1) − S) X``, ``S = W + Wᵀ``."""
    S = W + W.T
    lap_Z = Z * S.sum(1)[:, None] - S @ Z          # (diag(S1) − S) X Lᵀ
    return 2.0 * lap_Z.T @ X


class _LabelMetric(LinearSingleModalMixin, BaseEstimator):
    """Shared parameters and the L-BFGS fit of LMNN and MCC."""

    def _common_fit(self, data, y):
        check_positive_int(self.max_iter, "max_iter")
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        Xu, i, j, labels = samples_and_labels(data, y)
        d = Xu.shape[1]
        p = d if self.n_components is None else check_n_components(self.n_components, d)
        L0, _ = initial_projection(self.init, p, Xu, i, j, self.random_state)
        return Xu, labels, L0

    def _minimise(self, fun, L0):
        shape = L0.shape
        theta, self.loss_curve_, self.n_iter_ = lbfgs(
            lambda t: (lambda f, g: (f, g.ravel()))(*fun(t.reshape(shape))), L0.ravel(),
            max_iter=self.max_iter, tol=self.tol, verbose=self.verbose,
            name=type(self).__name__)
        self.components_ = theta.reshape(shape)


# ------------------------------------------------------------------------------------ NCA
class NCA(LinearSingleModalMixin, BaseEstimator):
    """Neighbourhood components analysis from pairs (scikit-learn's implementation).

    Fits :class:`sklearn.neighbors.NeighborhoodComponentsAnalysis` (Goldberger, Roweis, Hinton
    & Salakhutdinov, NIPS 2004: maximise ``Σ_i Σ_{j ∈ C_i} p_ij``, ``p_ij ∝ exp(−‖Lx_i − Lx_j‖²)``,
    their eq. 1-3) on the distinct samples of the pairs, with the connected components of the
    positive pairs as classes (module docstring).

    Parameters
    ----------
    n_components : int, optional
        Rows of ``L``; all features when None.
    init : str or ndarray, default="auto"
        scikit-learn's ``init`` ("auto", "pca", "lda", "identity", "random" or an array).
    max_iter : int, default=50
    tol : float, default=1e-5
    verbose : int, default=0
    random_state : int, RandomState instance or None
    preprocessor : array-like, optional

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    n_iter_ : int
    nca_ : NeighborhoodComponentsAnalysis
        The fitted scikit-learn estimator.
    labels_ : ndarray
        Classes used (component of each distinct training sample).

    Examples
    --------
    >>> from crossmetric import NCA, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = NCA(n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, init="auto", max_iter: int = 50,
                 tol: float = 1e-5, verbose: int = 0, random_state=None, preprocessor=None):
        self.n_components = n_components
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        from sklearn.neighbors import NeighborhoodComponentsAnalysis

        Xu, _, _, labels = samples_and_labels(data, y)
        self.nca_ = NeighborhoodComponentsAnalysis(
            n_components=self.n_components, init=self.init, max_iter=self.max_iter,
            tol=self.tol, verbose=self.verbose, random_state=self.random_state)
        self.nca_.fit(Xu, labels)
        self.components_ = self.nca_.components_
        self.n_iter_ = int(self.nca_.n_iter_)
        self.labels_ = labels


# ----------------------------------------------------------------------------------- LMNN
def target_neighbours(X: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nearest same-class samples of each sample in the Euclidean metric
    (Weinberger & Saul §3.1); ``-1`` where a class has fewer than ``k + 1`` members."""
    D = squared_euclidean_matrix(X, X)
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    D[~same] = np.inf
    kk = min(k, X.shape[0] - 1)
    idx = np.argsort(D, axis=1, kind="stable")[:, :kk]
    idx = np.where(np.isfinite(np.take_along_axis(D, idx, 1)), idx, -1)
    if kk < k:
        idx = np.hstack([idx, -np.ones((X.shape[0], k - kk), np.int64)])
    return idx


def lmnn_loss_grad(L: np.ndarray, X: np.ndarray, labels: np.ndarray, targets: np.ndarray,
                   mu: float):
    """LMNN's objective (Weinberger & Saul 2009, eq. 13, margin 1) and its gradient in ``L``:

        ε(L) = (1 − μ) Σ_{i, j⇝i} D_ij + μ Σ_{i, j⇝i} Σ_{l: y_l ≠ y_i} [1 + D_ij − D_il]_+

    with ``D_ab = ‖L x_a − L x_b‖²`` and ``j⇝i`` the target neighbours. The hinge is
    differentiated as 1 where its argument is positive (a subgradient at 0).
    """
    Z = X @ L.T
    D = squared_euclidean_matrix(Z, Z)
    n = X.shape[0]
    diff = labels[:, None] != labels[None, :]
    W = np.zeros((n, n))
    loss = 0.0
    for s in range(targets.shape[1]):
        rows = np.flatnonzero(targets[:, s] >= 0)
        t = targets[rows, s]
        dij = D[rows, t]
        loss += (1.0 - mu) * float(dij.sum())
        H = 1.0 + dij[:, None] - D[rows]
        act = (H > 0) & diff[rows]
        loss += mu * float(H[act].sum())
        np.add.at(W, (rows, t), (1.0 - mu) + mu * act.sum(1))
        W[rows] -= mu * act
    return loss, _weighted_scatter_grad(L, X, Z, W)


class LMNN(_LabelMetric):
    """Large-margin nearest neighbours (Weinberger & Saul, JMLR 2009) from pairs.

    Minimises the paper's loss (eq. 13, :func:`lmnn_loss_grad`): pull each sample's ``k`` target
    neighbours (nearest same-class samples in the Euclidean metric, fixed) and push every
    differently labelled sample ("impostor") out of the unit margin, weighted ``1 − μ`` and
    ``μ``; over ``L`` with L-BFGS (the paper minimises over ``L`` or over ``M`` by projected
    sub-gradient steps; both parameterisations have the same minimisers for a square ``L``).
    Classes are the connected components of the positive pairs (module docstring); samples
    alone in their class have no target neighbours but can be impostors.

    Parameters
    ----------
    n_components : int, optional
        Rows of ``L``; all features when None.
    n_neighbors : int, default=3
        Target neighbours per sample (the paper's k = 3).
    mu : float in [0, 1], default=0.5
        Weight of the push term (the paper's μ = 0.5).
    init : {"auto", "pca", "identity", "random"} or ndarray, default="auto"
        Initial ``L`` (as :class:`crossmetric.LDML`: rescaled so that the median training-pair
        distance is 1, which sets the scale against the unit margin).
    max_iter : int, default=1000
    tol : float, default=1e-4
        L-BFGS relative-decrease tolerance (the hinge makes L-BFGS creep: on 300 digits,
        1e-5 needs ~800 iterations for an objective 4 % lower than 1e-4 reaches in ~180).
    verbose : int, default=0
    random_state : int, RandomState instance or None
    preprocessor : array-like, optional

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    n_iter_ : int
    loss_curve_ : list of float

    Examples
    --------
    >>> from crossmetric import LMNN, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = LMNN(n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, n_neighbors: int = 3,
                 mu: float = 0.5, init="auto", max_iter: int = 1000, tol: float = 1e-4,
                 verbose: int = 0, random_state=None, preprocessor=None):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.mu = mu
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        k = check_positive_int(self.n_neighbors, "n_neighbors")
        mu = check_positive_scalar(self.mu, "mu", allow_zero=True)
        if mu > 1:
            raise ValueError(f"mu must be in [0, 1], got {self.mu!r}.")
        Xu, labels, L0 = self._common_fit(data, y)
        targets = target_neighbours(Xu, labels, k)
        if not (targets >= 0).any():
            raise ValueError("LMNN needs classes with at least two samples: no positive pair "
                             "joins two distinct samples.")
        self._minimise(lambda L: lmnn_loss_grad(L, Xu, labels, targets, mu), L0)


# ------------------------------------------------------------------------------------ MCC
def mcc_loss_grad(L: np.ndarray, X: np.ndarray, labels: np.ndarray):
    """MCC's objective (Globerson & Roweis 2005, eq. 4-5) and its gradient in ``L``:

        f(L) = (1/|I|) Σ_{i ∈ I} KL[p₀(·|i) ‖ p(·|i)]
             = (1/|I|) Σ_{i ∈ I} [ Σ_j p₀(j|i) D_ij + log Σ_{k≠i} exp(−D_ik) − log n_i ],

    ``p(j|i) = exp(−D_ij) / Σ_{k≠i} exp(−D_ik)``, the target ``p₀(j|i)`` uniform over the other
    members of ``i``'s class (``n_i`` of them), ``I`` the samples that have one.
    ``∂f/∂D_ij = (p₀(j|i) − p(j|i)) / |I|``.
    """
    Z = X @ L.T
    D = squared_euclidean_matrix(Z, Z)
    np.fill_diagonal(D, np.inf)
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    cnt = same.sum(1)
    rows = np.flatnonzero(cnt > 0)
    P0 = same[rows] / cnt[rows, None]
    lse = logsumexp(-D[rows], axis=1)
    Drows = np.where(same[rows], D[rows], 0.0)
    # Σ_j p₀ log p₀ = −log |C_i − 1| per sample: the KL divergence itself, not up to a constant
    loss = float(np.sum(P0 * Drows) + lse.sum() - np.log(cnt[rows]).sum()) / rows.size
    P = np.exp(-D[rows] - lse[:, None])
    W = np.zeros((X.shape[0], X.shape[0]))
    W[rows] = (P0 - P) / rows.size
    return loss, _weighted_scatter_grad(L, X, Z, W)


class MCC(_LabelMetric):
    """Metric learning by collapsing classes (Globerson & Roweis, NIPS 2005) from pairs.

    Finds the metric under which the stochastic-neighbour distribution of each sample,
    ``p(j|i) ∝ exp(−D_ij)``, is closest in KL divergence to the "collapsed" one that is uniform
    on its class and zero elsewhere (the paper's eq. 4-5, :func:`mcc_loss_grad`). The paper
    minimises the convex problem over ``M ⪰ 0`` by projected gradient; we minimise over
    ``M = LᵀL`` with L-BFGS on ``L`` (square ``L`` for ``n_components=None``: every local
    minimum is then global, as for :class:`crossmetric.LDML`; ``n_components=r`` is the
    paper's low-rank variant by factorisation instead of eigenvalue truncation). Classes are
    the connected components of the positive pairs (module docstring).

    Parameters
    ----------
    n_components : int, optional
        Rows of ``L``; all features when None.
    init : {"auto", "pca", "identity", "random"} or ndarray, default="auto"
        Initial ``L`` (as :class:`crossmetric.LDML`).
    max_iter : int, default=200
    tol : float, default=1e-5
    verbose : int, default=0
    random_state : int, RandomState instance or None
    preprocessor : array-like, optional

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    n_iter_ : int
    loss_curve_ : list of float

    Examples
    --------
    >>> from crossmetric import MCC, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = MCC(n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, init="auto", max_iter: int = 200,
                 tol: float = 1e-5, verbose: int = 0, random_state=None, preprocessor=None):
        self.n_components = n_components
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        Xu, labels, L0 = self._common_fit(data, y)
        if np.bincount(labels).max() < 2:
            raise ValueError("MCC needs classes with at least two samples: no positive pair "
                             "joins two distinct samples.")
        self._minimise(lambda L: mcc_loss_grad(L, Xu, labels), L0)
