"""Common Discriminant Feature Extraction (Lin & Tang, ECCV 2006) and its kernel version.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy import sparse
from sklearn.neighbors import NearestNeighbors

from crossmetric._solvers.linalg import _from_span, _in_span, span_basis
from crossmetric._utils.checks import check_n_components, check_positive_int, check_positive_scalar
from crossmetric.kernels import _KernelCoordinatesMixin
from crossmetric.learners._auto_grids import CDFE_COMPONENT_CANDIDATES, CDFE_REG_GRID
from crossmetric.learners.auc import weighted_pair_outer_sum
from crossmetric.learners.baselines._common import LinearTowers, _check_distance
from crossmetric.pairs._pair_data import PairData

__all__ = ["CDFE", "KCDFE"]


# ----------------------------------------------------------------------------- CDFE
class CDFE(LinearTowers):
    """Common Discriminant Feature Extraction (Lin & Tang, ECCV 2006), linear version.

    Two linear maps ``f_x(x) = Uᵀ(x − m_x)``, ``f_y(y) = Vᵀ(y − m_y)`` into a common space
    minimise (the paper's objective, in the matrix form of our ``W = [U; V]``)::

        J(W) = mean_S ‖f_x − f_y‖² − α mean_D ‖f_x − f_y‖²
               + β [ Σ w^x_ij ‖f_x(x_i) − f_x(x_j)‖² / Σ w^x + (same for y) ]
             = tr(Wᵀ (P_S − α P_D + β R) W)

    -- the empirical separability (close positive pairs, far negative pairs) plus the local
    consistency regulariser that keeps neighbours (a k-NN graph with heat-kernel weights on each
    modality) close -- subject to the scale constraint ``Wᵀ C W = I``, ``C`` the block-diagonal
    covariance of the two modalities (plus a ridge). The solution is the ``n_components``
    smallest generalised eigenvectors of ``(P_S − α P_D + β R, C)``. This is how the cmml paper
    (§2, §4) describes and uses it: positive and negative pair constraints in the latent space
    plus "regularization terms to enforce distance consistency between the input spaces and the
    latent space". Choices of ours where the paper leaves room: the normalisation of each term
    to a mean, the k-NN heat-kernel width (mean squared k-NN distance) and the ridge.

    Parameters
    ----------
    n_components : int or "auto", default=10
        ``"auto"``: chosen among 10, 20 and 32 on held-out training identities, as
        :class:`~crossmetric.CCA`'s (10 without identities; larger ones mostly leave the span
        of the samples, where a solve in feature space takes minutes on wide views). On CUFS
        photo → sketch (HOG, 3 splits) ``"auto"`` for both ``n_components`` and ``reg`` takes
        rank-1 from 2.7 % (the fixed defaults) to 58.7 %; the untrained distance has 95.2 %.
    alpha : float >= 0, default=1.0
        Weight of the negative-pair term.
    beta : float >= 0, default=1.0
        Weight of the local-consistency term.
    n_neighbors : int, default=5
        Neighbours per sample in each modality's graph.
    reg : float > 0 or "auto", default=1e-3
        ``"auto"``: chosen among 1e-3, 1e-2, 0.1, 1, 10 and 100 with ``n_components``
        (1e-3 without identities; 0.1 for :class:`KCDFE`). Ridge on ``C``, relative to its
        mean eigenvalue. Large values undo the whitening of the scale constraint (``reg`` →
        ∞ gives orthonormal ``W``). Its best value moves by four decades across data sets,
        so choose it on training identities (``"auto"``, or
        :func:`~crossmetric.protocols.model_selection.search_params`; the registry's paper grid
        tries 1e-3 … 100). With few identities per dimension the default can collapse: on CUFS
        (180 training persons, joint PCA-200, 238 test persons, one split) rank-1 is 0.8-3.4 %
        at 1e-3, 13-38 % at 1, 41-63 % at 100 (d = 10-100, one negative per positive); on the
        embedded digits it rises from 82.6 % (1e-3) to 86.6 % (10); but on mfeat fou ↔ pix it
        falls from 68.9 % (1e-3) to 10 % (≥ 1), and on VIPeR it is best at 1e-3 (11.2 % against
        7.8 % at 10). A user with 50-500 identities should select it, not keep the default.
    distance : {"euclidean", "cosine"}, default="euclidean"
        Comparison in the latent space (CDFE's objective is Euclidean).
    preprocessor : tuple (X, Y), optional

    Attributes
    ----------
    components_x_ : ndarray of shape (n_components, d_x)
    components_y_ : ndarray of shape (n_components, d_y)
    mean_x_, mean_y_ : ndarray
    eigenvalues_ : ndarray of shape (n_components,)
        The generalised eigenvalues (objective value per direction), ascending.
    chosen_params_, untrained_, selection_scores_
        As in :class:`~crossmetric.CCA` (with ``untrained_`` both towers are the identity on
        the training samples' span and ``complement_*`` keep the rest of ``x − y``).

    Examples
    --------
    >>> from crossmetric import CDFE, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = CDFE(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _auto_grid = {"n_components": CDFE_COMPONENT_CANDIDATES, "reg": CDFE_REG_GRID}
    _auto_fallback = {"n_components": 10, "reg": 1e-3}

    def __init__(self, n_components: int | str = 10, *, alpha: float = 1.0, beta: float = 1.0,
                 n_neighbors: int = 5, reg: float | str = 1e-3, distance: str = "euclidean",
                 preprocessor=None):
        self.n_components = n_components
        self.alpha = alpha
        self.beta = beta
        self.n_neighbors = n_neighbors
        self.reg = reg
        self.distance = distance
        self.preprocessor = preprocessor

    @staticmethod
    def _local_scatter(Xu: np.ndarray, k: int) -> np.ndarray:
        """``Σ_ij w_ij (x_i − x_j)(x_i − x_j)ᵀ / Σ_ij w_ij`` over a symmetric k-NN graph."""
        n = Xu.shape[0]
        k = min(k, n - 1)
        if k < 1:
            return np.zeros((Xu.shape[1], Xu.shape[1]))
        dist, idx = NearestNeighbors(n_neighbors=k + 1).fit(Xu).kneighbors(Xu)
        dist, idx = dist[:, 1:], idx[:, 1:]
        sigma2 = np.mean(dist**2)
        w = np.exp(-dist**2 / sigma2) if sigma2 > 0 else np.ones_like(dist)
        Wg = sparse.csr_matrix((w.ravel(), (np.repeat(np.arange(n), k), idx.ravel())),
                               shape=(n, n))
        Wg = Wg.maximum(Wg.T)
        deg = np.asarray(Wg.sum(axis=1)).ravel()
        # Σ_ij w_ij (x_i − x_j)(x_i − x_j)ᵀ = 2 Xᵀ (D − W) X
        S = 2.0 * (Xu.T @ (deg[:, None] * Xu) - Xu.T @ np.asarray(Wg @ Xu))
        return S / max(deg.sum(), np.finfo(float).tiny)

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        _check_distance(self.distance)
        alpha = check_positive_scalar(self.alpha, "alpha", allow_zero=True)
        beta = check_positive_scalar(self.beta, "beta", allow_zero=True)
        reg = check_positive_scalar(self.reg, "reg")
        n_neighbors = check_positive_int(self.n_neighbors, "n_neighbors")
        dx, dy = data.X.shape[1], data.Y.shape[1]
        k = check_n_components(self.n_components, dx + dy, what="d_x + d_y")
        ux, ix = np.unique(data.ix, return_inverse=True)
        uy, iy = np.unique(data.iy, return_inverse=True)
        Xu, Yu = data.X[ux], data.Y[uy]
        self.mean_x_, self.mean_y_ = Xu.mean(axis=0), Yu.mean(axis=0)
        Xu, Yu = Xu - self.mean_x_, Yu - self.mean_y_
        ix, iy = ix.ravel(), iy.ravel()
        # In the span of the samples (span_basis): A and the data part of C are Q (·) Qᵀ with
        # Q = diag(Q_x, Q_y); the ridge ρ I adds ρ (I − Q Qᵀ) on the complement, where A is 0.
        # A direction w = Q u + w⊥ solves A w = λ C w iff A_r u = λ C_r u and λ ρ w⊥ = 0, so
        # every eigenvalue λ ≠ 0 has its eigenvectors in the span, and the complement only adds
        # the eigenvalue 0. The k smallest are all in the span when the k-th smallest of the
        # reduced problem is negative; otherwise some are arbitrary directions off the data in
        # either solver, and the full one is kept (it was before).
        Qx, Qy = span_basis(Xu), span_basis(Yu)
        solved = None
        if Qx is not None or Qy is not None:
            solved = self._solve(_in_span(Xu, Qx), _in_span(Yu, Qy), ix, iy, y, k,
                                 (alpha, beta, reg, n_neighbors), dx + dy)
            if solved is not None and not solved[0][-1] < -1e-10 * np.abs(solved[0]).max():
                solved = None
        if solved is None:
            Qx = Qy = None
            solved = self._solve(Xu, Yu, ix, iy, y, k, (alpha, beta, reg, n_neighbors), dx + dy)
        w, W = solved
        mx = Xu.shape[1] if Qx is None else Qx.shape[1]
        self.eigenvalues_ = w
        self.components_x_ = _from_span(Qx, W[:mx]).T
        self.components_y_ = _from_span(Qy, W[mx:]).T       # z = [x; −y]: Wᵀz = Uᵀx − Vᵀy

    def _solve(self, Xu, Yu, ix, iy, y, k, params, d):
        """The ``k`` smallest generalised eigenpairs of ``(P_S − α P_D + β R, C)`` on the
        centred used samples (or their coordinates); ``None`` when there are fewer than ``k``
        coordinates. ``d`` is the number of features, for the ridge ``reg · tr(C) / d``."""
        alpha, beta, reg, n_neighbors = params
        m = Xu.shape[1] + Yu.shape[1]
        if k > m:
            return None
        pos, neg = y == 1, y == -1
        P_S = weighted_pair_outer_sum(Xu, Yu, ix[pos], iy[pos],
                                      np.full(pos.sum(), 1.0 / pos.sum()))
        P_D = weighted_pair_outer_sum(Xu, Yu, ix[neg], iy[neg],
                                      np.full(neg.sum(), 1.0 / neg.sum()))
        R = scipy.linalg.block_diag(self._local_scatter(Xu, n_neighbors),
                                    self._local_scatter(Yu, n_neighbors))
        A = P_S - alpha * P_D + beta * R
        C = scipy.linalg.block_diag(Xu.T @ Xu / Xu.shape[0], Yu.T @ Yu / Yu.shape[0])
        C += reg * max(np.trace(C) / d, np.finfo(float).tiny) * np.eye(m)
        return scipy.linalg.eigh((A + A.T) / 2, C, subset_by_index=[0, k - 1])


class KCDFE(_KernelCoordinatesMixin, CDFE):
    """Kernel CDFE: :class:`CDFE` in the feature space of a kernel per modality.

    The kernel version of Lin & Tang's CDFE that the cmml paper compares against (§4, χ²-RBF
    kernels). The generalised eigenproblem of :class:`CDFE` is solved on the exact kernel
    coordinates of each modality (:class:`~crossmetric.kernels.KernelCoordinates`); its k-NN
    graphs then use feature-space distances and its scale constraint the feature-space
    covariances.

    Parameters
    ----------
    n_components : int, default=10
    kernel : str or (str, str), default="rbf"
    gamma : float or (float, float), optional
    reg : float > 0, default=0.1
        Ridge on the covariance, relative to its mean eigenvalue. Larger than
        :class:`CDFE`'s: the coordinates have as many dimensions as training samples, and
        with a small ridge the positive pairs collapse on the training data only (mfeat
        fou ↔ pix, 1,000 training objects: held-out AUC 0.52 at ``reg=1e-3``, 0.94 at 0.1,
        0.95 at 1).
    alpha, beta, n_neighbors, distance, preprocessor
        As in :class:`CDFE`.

    Attributes
    ----------
    coordinates_x_, coordinates_y_ : crossmetric.kernels.KernelCoordinates
    components_x_, components_y_ : ndarray
        CDFE directions in coordinate space.

    Examples
    --------
    >>> from crossmetric import KCDFE, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = KCDFE(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _auto_fallback = {"n_components": 10, "reg": 0.1}

    def __init__(self, n_components: int = 10, *, kernel="rbf", gamma=None, alpha: float = 1.0,
                 beta: float = 1.0, n_neighbors: int = 5, reg: float = 0.1,
                 distance: str = "euclidean", preprocessor=None):
        super().__init__(n_components, alpha=alpha, beta=beta, n_neighbors=n_neighbors,
                         reg=reg, distance=distance, preprocessor=preprocessor)
        self.kernel = kernel
        self.gamma = gamma
