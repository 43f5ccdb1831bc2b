"""Label-based cross-modal subspaces: MvDA, CSR and KCSR (baselines of the CML-AUC paper).

Both methods need identity labels. Pair learners receive only pairs, so the identities are
the connected components of the positive pairs (:func:`crossmetric.pairs.identities_from_pairs`):
two samples are of one identity when a chain of positive pairs joins them. With the papers'
pair generators (every positive pair of each identity) this recovers the identities exactly;
with sparse positive pairs one identity may split into several components, which only makes
the methods see more, smaller classes. Only the samples that the training pairs use take part.

* :class:`MvDA` -- multi-view discriminant analysis (Kan, Shan, Zhang, Lao & Chen, ECCV 2012):
  one projection per view into a common space that maximises the between-class scatter of all
  projected samples over their within-class scatter, both taken across the views (their
  eq. 4-8). Solved as the generalised eigenproblem ``D w = λ S w`` with the block matrices of
  their eq. 7-8, written with class-sum matrices (cost ``O(n d + c d²)``, no loop over classes).
* :class:`CSR` / :class:`KCSR` -- coupled spectral regression (Lei & Li, "Coupled spectral
  regression for matching heterogeneous faces", CVPR 2009). The paper itself is not among the
  specifications here; this follows its published outline, and the choices are ours: (1) the
  spectral step of spectral regression (Cai, He & Han 2007) with the supervised (LDA) graph,
  whose responses are the ``c − 1`` orthonormalised class indicators, gives every identity one
  response vector shared by its samples in *both* modalities; (2) the coupled regression fits
  one ridge map per modality to those shared responses, coupled by a term that pulls the two
  projections of each positive pair together:

      min_{A,B} ‖X A − R_x‖² + ‖Y B − R_y‖² + μ Σ_{(i,j)∈S} ‖Aᵀx_i − Bᵀy_j‖² + λ (‖A‖² + ‖B‖²)

  (one joint linear system in ``[A; B]``). :class:`KCSR` runs the same on exact kernel
  coordinates (:class:`~crossmetric.kernels.KernelCoordinates`), i.e. kernel ridge regression
  in each feature space.

With more features than samples, MvDA and CSR solve in the span of the samples
(:func:`crossmetric._solvers.linalg.span_basis`; the comments in ``_fit`` say why it is exact).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from crossmetric._solvers.linalg import _from_span, _in_span, span_basis
from crossmetric._utils.checks import check_choice, check_n_components, check_positive_scalar
from crossmetric.kernels import _KernelCoordinatesMixin
from crossmetric.learners._auto_grids import COMPONENT_CANDIDATES, CSR_ALPHA_GRID
from crossmetric.learners.baselines._common import LinearTowers
from crossmetric.learners.multiview import MultiViewMixin, mvda_scatter_matrices
from crossmetric.pairs import identities_from_pairs
from crossmetric.pairs._pair_data import PairData

__all__ = ["MvDA", "CSR", "KCSR", "identity_samples"]


def identity_samples(data: PairData, y: np.ndarray):
    """The samples the pairs use in each modality, with their identities.

    Returns
    -------
    Xu, Yu : ndarray
        Distinct used rows of ``X`` and ``Y``.
    cx, cy : ndarray of int
        Identity code of each row of ``Xu`` / ``Yu`` (``0 .. n_identities − 1``).
    ix, iy : ndarray of int
        The pairs re-indexed into ``Xu`` / ``Yu``.
    """
    ux, ix = np.unique(data.ix, return_inverse=True)
    uy, iy = np.unique(data.iy, return_inverse=True)
    ids_x, ids_y, _ = identities_from_pairs(ux.size, uy.size, ix.ravel(), iy.ravel(), y)
    _, codes = np.unique(np.r_[ids_x, ids_y], return_inverse=True)
    codes = codes.ravel()
    return (data.X[ux], data.Y[uy], codes[:ux.size], codes[ux.size:], ix.ravel(), iy.ravel())


class MvDA(MultiViewMixin, LinearTowers):
    """Multi-view discriminant analysis (Kan et al., ECCV 2012): two views through the pair
    API, any number through ``fit_views(views, labels)`` (:mod:`crossmetric.learners.multiview`).

    Finds ``w_x``, ``w_y`` maximising ``tr(Wᵀ D W) / tr(Wᵀ S W)`` (their eq. 6, solved as the
    generalised eigenproblem ``D w = λ (S + r I) w``; see :func:`mvda_scatter_matrices`).
    Identities are the connected components of the positive pairs (module docstring).
    The two views are centred on the mean of their used samples first: the paper's scatter is
    invariant to a common shift, and centring each view removes the view offset before the
    ridge applies.

    Parameters
    ----------
    n_components : int or "auto", default=10
        At most ``n_identities − 1`` directions carry between-class scatter. ``"auto"``:
        chosen among 10, 20, 32, 64 and 128 on held-out training identities, as
        :class:`~crossmetric.CCA`'s (10 without identities; pairs only, not ``fit_views``).
    reg : float > 0, default=1e-3
        Ridge on ``S``, relative to its mean diagonal.
    distance : {"euclidean", "cosine"}, default="cosine"
        Comparison in the common space.
    preprocessor : tuple (X, Y), optional

    Attributes
    ----------
    components_x_ : ndarray of shape (n_components, d_x)
    components_y_ : ndarray of shape (n_components, d_y)
    mean_x_, mean_y_ : ndarray
    eigenvalues_ : ndarray of shape (n_components,)
        Between/within ratio of each direction (descending).
    chosen_params_, untrained_, selection_scores_
        As in :class:`~crossmetric.CCA` (with ``untrained_`` both towers are the identity on
        the training samples' span and ``complement_*`` keep the rest of ``x − y``).
    n_identities_ : int

    Examples
    --------
    >>> from crossmetric import MvDA, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = MvDA(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _auto_grid = {"n_components": COMPONENT_CANDIDATES}
    _auto_fallback = {"n_components": 10}

    def __init__(self, n_components: int | str = 10, *, reg: float = 1e-3,
                 distance: str = "cosine", preprocessor=None):
        self.n_components = n_components
        self.reg = reg
        self.distance = distance
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        check_choice(self.distance, "distance", ("euclidean", "cosine"))
        reg = check_positive_scalar(self.reg, "reg")
        Xu, Yu, cx, cy, _, _ = identity_samples(data, y)
        self.n_identities_ = int(max(cx.max(), cy.max())) + 1
        dx, dy = Xu.shape[1], Yu.shape[1]
        k = check_n_components(self.n_components, dx + dy, what="d_x + d_y")
        self.mean_x_, self.mean_y_ = Xu.mean(axis=0), Yu.mean(axis=0)
        Xc, Yc = Xu - self.mean_x_, Yu - self.mean_y_
        # In the span of the samples (span_basis): S and D are Q (·) Qᵀ with Q = diag(Q_x, Q_y)
        # (mvda_scatter_matrices is linear in each view's rows), and the ridge ρ I adds
        # ρ (I − Q Qᵀ) on the complement, where D is 0. For w = Q u + w⊥, D w = λ (S + ρ I) w
        # iff D_r u = λ (S_r + ρ I) u and λ ρ w⊥ = 0: eigenvalues λ ≠ 0 have their vectors in
        # the span, the complement only adds λ = 0, and D ⪰ 0 puts it last. Directions of
        # eigenvalue 0 (beyond n_identities − 1) are any vectors of that eigenspace in either
        # solver; the full one is kept only when k exceeds the coordinates.
        Qx, Qy = span_basis(Xc), span_basis(Yc)
        if _in_span(Xc[:1], Qx).shape[1] + _in_span(Yc[:1], Qy).shape[1] < k:
            Qx = Qy = None
        Xr, Yr = _in_span(Xc, Qx), _in_span(Yc, Qy)
        S, D = mvda_scatter_matrices([Xr, Yr], [cx, cy])
        m, mx = S.shape[0], Xr.shape[1]
        S = S + reg * max(np.trace(S) / (dx + dy), np.finfo(float).tiny) * np.eye(m)
        w, W = scipy.linalg.eigh((D + D.T) / 2, (S + S.T) / 2, subset_by_index=[m - k, m - 1])
        order = np.argsort(w)[::-1]
        self.eigenvalues_ = w[order]
        self.components_x_ = _from_span(Qx, W[:mx, order]).T
        self.components_y_ = _from_span(Qy, W[mx:, order]).T

    def _fit_views(self, views, codes):
        """``fit_views``' solve: the scatter matrices of eq. 7-8 for ``v`` views."""
        from crossmetric.learners.multiview import mvda_directions

        check_choice(self.distance, "distance", ("euclidean", "cosine"))
        reg = check_positive_scalar(self.reg, "reg")
        self.n_identities_ = int(max(c.max() for c in codes)) + 1
        k = check_n_components(self.n_components, sum(V.shape[1] for V in views),
                               what="total features of the views")
        means, self.eigenvalues_, dirs = mvda_directions(views, codes, k, reg)
        return means, [W.T for W in dirs]


def spectral_responses(codes: np.ndarray) -> np.ndarray:
    """The ``c − 1`` responses of spectral regression with the supervised graph.

    The graph joins samples of one class with weight ``1/n_i``; its eigenvectors of
    eigenvalue 1 are the class indicators, orthonormalised against the all-ones vector
    (Cai, He & Han 2007, §3). Returns one row per sample, identical within a class.
    """
    n_classes = int(codes.max()) + 1
    E = np.zeros((codes.size, n_classes))
    E[np.arange(codes.size), codes] = 1.0
    E -= E.mean(axis=0)                       # orthogonal to the all-ones vector
    U, s, _ = np.linalg.svd(E, full_matrices=False)
    keep = s > s.max() * 1e-10
    return U[:, keep] * np.sqrt(codes.size)


class CSR(LinearTowers):
    """Coupled spectral regression (Lei & Li, CVPR 2009; our reading, see module docstring).

    Parameters
    ----------
    n_components : int, optional
        Number of responses kept (at most ``n_identities − 1``); all ``n_identities − 1``
        when ``None``. The responses span the same space whatever their order, so a smaller
        number keeps an arbitrary subset of it: keep them all unless the dimension matters.
    alpha : float > 0 or "auto", default=1e-2
        Ridge ``λ``, relative to the mean squared feature norm. ``"auto"``: chosen among
        1e-2, 0.1, 1, 10 and 100 on held-out training identities, as
        :class:`~crossmetric.CCA`'s ``n_components`` (1e-2 without identities; 1 for
        :class:`KCSR`). On CUFS photo → sketch (HOG, 3 splits) rank-1 is 88.0 % at 1e-2 and
        98.4 % at 10, the untrained distance 95.2 %.
    coupling : float >= 0, default=1.0
        ``μ``: weight of the positive-pair coupling term.
    distance : {"euclidean", "cosine"}, default="cosine"
    preprocessor : tuple (X, Y), optional

    Attributes
    ----------
    components_x_ : ndarray of shape (n_components, d_x)
    components_y_ : ndarray of shape (n_components, d_y)
    mean_x_, mean_y_ : ndarray
    n_identities_ : int
    chosen_params_, untrained_, selection_scores_
        As in :class:`~crossmetric.CCA` (with ``untrained_`` both towers are the identity on
        the training samples' span and ``complement_*`` keep the rest of ``x − y``).

    Examples
    --------
    >>> from crossmetric import CSR, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = CSR(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _auto_grid = {"alpha": CSR_ALPHA_GRID}
    _auto_fallback = {"alpha": 1e-2}

    def __init__(self, n_components: int | None = None, *, alpha: float | str = 1e-2,
                 coupling: float = 1.0, distance: str = "cosine", preprocessor=None):
        self.n_components = n_components
        self.alpha = alpha
        self.coupling = coupling
        self.distance = distance
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        check_choice(self.distance, "distance", ("euclidean", "cosine"))
        alpha = check_positive_scalar(self.alpha, "alpha")
        mu = check_positive_scalar(self.coupling, "coupling", allow_zero=True)
        Xu, Yu, cx, cy, ix, iy = identity_samples(data, y)
        self.n_identities_ = int(max(cx.max(), cy.max())) + 1
        if self.n_identities_ < 2:
            raise ValueError("CSR needs at least 2 identities (connected components of the "
                             "positive pairs).")
        k = (self.n_identities_ - 1 if self.n_components is None else
             check_n_components(self.n_components, self.n_identities_ - 1,
                                what="n_identities - 1"))
        R = spectral_responses(np.r_[cx, cy])[:, :k]
        Rx, Ry = R[:cx.size], R[cx.size:]
        self.mean_x_, self.mean_y_ = Xu.mean(axis=0), Yu.mean(axis=0)
        Xc, Yc = Xu - self.mean_x_, Yu - self.mean_y_
        pos = y == 1
        Xp, Yp = Xc[ix[pos]], Yc[iy[pos]]
        mu = mu * (Xc.shape[0] + Yc.shape[0]) / max(2 * Xp.shape[0], 1)   # per-sample weight
        scale = (np.sum(Xc**2) + np.sum(Yc**2)) / (Xc.shape[1] + Yc.shape[1])
        # In the span of the samples (span_basis): with Q = diag(Q_x, Q_y) the normal matrix
        # is G = Q G_r Qᵀ + λ (I − Q Qᵀ) (G_r holding λ I too) and the right-hand side is Q b_r
        # (Xp, Yp are rows of Xc, Yc), so G Q = Q G_r and the solution is Q G_r⁻¹ b_r exactly.
        Qx, Qy = span_basis(Xc), span_basis(Yc)
        Xc, Yc, Xp, Yp = _in_span(Xc, Qx), _in_span(Yc, Qy), _in_span(Xp, Qx), _in_span(Yp, Qy)
        dx = Xc.shape[1]
        # normal equations of the joint least squares in [A; B]
        G = scipy.linalg.block_diag(Xc.T @ Xc, Yc.T @ Yc)
        G[:dx, :dx] += mu * Xp.T @ Xp
        G[dx:, dx:] += mu * Yp.T @ Yp
        G[:dx, dx:] -= mu * Xp.T @ Yp
        G[dx:, :dx] -= mu * Yp.T @ Xp
        G += alpha * max(scale, np.finfo(float).tiny) * np.eye(G.shape[0])
        W = scipy.linalg.solve(G, np.vstack([Xc.T @ Rx, Yc.T @ Ry]), assume_a="pos")
        self.components_x_ = _from_span(Qx, W[:dx]).T
        self.components_y_ = _from_span(Qy, W[dx:]).T


class KCSR(_KernelCoordinatesMixin, CSR):
    """Kernel coupled spectral regression: :class:`CSR` in each modality's feature space.

    Runs on exact kernel coordinates (:class:`~crossmetric.kernels.KernelCoordinates`), so
    each regression is kernel ridge regression with weights in the span of the training
    samples.

    Parameters
    ----------
    n_components : int, optional
    kernel : str or (str, str), default="rbf"
    gamma : float or (float, float), optional
    alpha : float > 0, default=1.0
        Ridge, larger than :class:`CSR`'s: with as many coordinates as training samples a
        small ridge interpolates the responses (mfeat fou ↔ pix, 1,000 training objects:
        held-out AUC 0.59 at ``alpha=1e-2``, 0.97 at 0.1, 0.98 at 1).
    coupling, distance, preprocessor
        As in :class:`CSR`.

    Examples
    --------
    >>> from crossmetric import KCSR, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = KCSR(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _auto_fallback = {"alpha": 1.0}

    def __init__(self, n_components: int | None = None, *, kernel="rbf", gamma=None,
                 alpha: float = 1.0, coupling: float = 1.0, distance: str = "cosine",
                 preprocessor=None):
        super().__init__(n_components, alpha=alpha, coupling=coupling, distance=distance,
                         preprocessor=preprocessor)
        self.kernel = kernel
        self.gamma = gamma
