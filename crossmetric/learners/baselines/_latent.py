"""CCA and PLS on the positive pairs (scikit-learn's cross decomposition or the closed form
of :func:`~crossmetric._solvers.linalg.cca_directions`), and kernel PLS.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.cross_decomposition import CCA as _SklearnCCA
from sklearn.cross_decomposition import PLSCanonical as _SklearnPLSCanonical

from crossmetric._base import CrossModalMixin, with_complement
from crossmetric._solvers.linalg import _from_span, _in_span, cca_directions, span_basis
from crossmetric._utils.checks import check_choice, check_n_components, check_positive_scalar
from crossmetric.kernels import _KernelCoordinatesMixin
from crossmetric.learners._auto_grids import CCA_REG_GRID, COMPONENT_CANDIDATES
from crossmetric.learners._held_out_choice import HeldOutChoice
from crossmetric.learners.baselines._common import (
    _check_distance,
    _positive_samples,
    finish_embedding,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["CCA", "PLS", "KPLS"]


# ----------------------------------------------------------------------------- CCA / PLS
class _SklearnLatent(HeldOutChoice, CrossModalMixin, BaseEstimator):
    """Shared code of the scikit-learn cross-decomposition adapters."""

    _auto_grid = {"n_components": COMPONENT_CANDIDATES}
    _auto_fallback = {"n_components": 10}

    #: fitted in the span of the training samples (exact on wide views): the protocols'
    #: ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True

    _estimator_class: type = _SklearnCCA
    #: further keyword arguments of ``_estimator_class``
    _estimator_options: dict = {}

    def __init__(self, n_components: int = 10, *, distance: str = "cosine", scale: bool = True,
                 max_iter: int = 500, tol: float = 1e-6, preprocessor=None):
        self.n_components = n_components
        self.distance = distance
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        _check_distance(self.distance)
        Xp, Yp = _positive_samples(data, y)
        for name, V in (("X", Xp), ("Y", Yp)):
            if np.ptp(V, axis=0).max(initial=0.0) == 0.0:
                raise ValueError(f"every feature of {name} is constant over the positive "
                                 f"pairs' samples: {type(self).__name__} needs varying "
                                 "features.")
        k = check_n_components(
            self.n_components, min(Xp.shape[0], Xp.shape[1], Yp.shape[1]),
            what="min(positive pairs, d_x, d_y)")
        # the centring / scaling scikit-learn applies (mean, std with ddof=1, 0 -> 1)
        self._set_standardisation(Xp, Yp)
        Xs, Ys = (Xp - self.x_mean_) / self.x_std_, (Yp - self.y_mean_) / self.y_std_
        Qx, Qy = span_basis(Xs), span_basis(*self._first_column(Ys), Ys)
        est = self._estimator_class(n_components=k, max_iter=self.max_iter, tol=self.tol,
                                    scale=self.scale if Qx is None and Qy is None else False,
                                    **self._estimator_options)
        if Qx is None and Qy is None:
            est.fit(Xp, Yp)
        else:
            est.fit(_in_span(Xs, Qx), _in_span(Ys, Qy))
        self.estimator_ = est
        self.x_rotations_ = _from_span(Qx, est.x_rotations_)
        self.y_rotations_ = _from_span(Qy, est.y_rotations_)
        self.n_iter_ = int(max(getattr(est, "n_iter_", [0]) or [0]))

    @staticmethod
    def _first_column(Ys: np.ndarray) -> list[np.ndarray]:
        """The unit row ``e_c`` of the first column of ``Ys`` that is not zero, as a list.

        In the span of the samples (:func:`span_basis`, used when there are fewer positive
        pairs than features) NIPALS is the same iteration: every weight, score, loading and
        deflation is equivariant under ``X ↦ X Q`` and the convergence test compares weight
        norms. The one exception is its start, ``Y``'s first non-zero column; with ``e_c``
        first in the basis, column 0 of ``Y Q`` is ``± Y e_c``, the same start (its sign
        cancels). scikit-learn's sign convention then may flip a component of both views.
        """
        nz = np.flatnonzero(np.any(np.abs(Ys) > np.finfo(float).eps, axis=0))
        return [np.eye(1, Ys.shape[1], int(nz[0]))] if nz.size else []

    def _set_standardisation(self, Xp: np.ndarray, Yp: np.ndarray) -> None:
        """Means and (with ``scale``) standard deviations of the positive pairs' samples."""
        self.x_mean_, self.y_mean_ = Xp.mean(axis=0), Yp.mean(axis=0)
        if self.scale:
            sx, sy = Xp.std(axis=0, ddof=1), Yp.std(axis=0, ddof=1)
            self.x_std_ = np.where(sx == 0, 1.0, sx)
            self.y_std_ = np.where(sy == 0, 1.0, sy)
        else:
            self.x_std_, self.y_std_ = np.ones(Xp.shape[1]), np.ones(Yp.shape[1])

    _holds_untrained = True

    def _set_untrained(self, components: np.ndarray) -> None:
        d = components.shape[1]
        self.x_mean_ = self.y_mean_ = np.zeros(d)
        self.x_std_ = self.y_std_ = np.ones(d)
        self.x_rotations_ = self.y_rotations_ = components.T
        self.n_iter_ = 0

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return finish_embedding(self, with_complement(
            self, ((X - self.x_mean_) / self.x_std_) @ self.x_rotations_, X))

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return finish_embedding(self, with_complement(
            self, ((Y - self.y_mean_) / self.y_std_) @ self.y_rotations_, Y))




class CCA(_SklearnLatent):
    """Canonical correlation analysis on the positive pairs.

    Hotelling (1936); the baseline of the cmml (§2, §4) and cml-auc (Tables II, V, VIII)
    papers. CCA can only use positive pairs: it finds ``n_components`` directions of each
    modality whose projections are maximally correlated over the positive pairs. Negative
    pairs are ignored (apart from the calibration of ``threshold_``).

    The default solver is the closed form :func:`cca_directions` with a ridge ``reg`` on each
    view's covariance -- the regularisation the cmml paper cross-validates for its CCA
    baseline (§4: "for CCA and CDFE the regularization parameters are cross-validated") and
    the one CCA of the library (the protocols' "-C" step uses it too). ``solver="nipals"``
    runs scikit-learn's unregularised iterative :class:`~sklearn.cross_decomposition.CCA`
    instead (40-130 s per fit on the digits benchmark, against milliseconds).

    With few identities, choose ``reg`` (and ``n_components``) on the training identities
    (``--tune paper --tune-scoring rank1``): on CUFS (180 training persons) ``reg=0.1`` with 64
    components took rank-1 from 87.4 % (``reg=1e-3``) to 96.2 %.

    Few identities: the default ridge is 0.1 of each covariance's mean eigenvalue (it was
    1e-3; it scales with the data, so it means the same on any feature scale). Measured
    before / after (rank-1 / mAP %, same splits): PKU-Sketch (150 training persons, 3 splits)
    HOG PCA-64 7.6 / 13.6 → 12.5 / 17.4, LTP centred PCA-128 4.9 / 10.6 → 7.6 / 15.3; the
    inner cross-validation on training persons chose 0.1 in 4 of 5 PKU splits and on CUFS;
    VIPeR camera A ↔ B (316, PCA-64, 3 splits) 13.5 / 26.4 → 12.3 / 25.7 (within a probe or
    two per split); the default digits benchmark (1,797 objects, 10 identities) AUC 0.918 →
    0.938, rank-1 86.6 → 88.0, mAP 69.1 → 74.6. Set ``reg`` near 1e-3 only when the pairs are
    many and clean (the canonical correlations then stay near 1).

    Parameters
    ----------
    n_components : int or "auto", default=10
        Dimension of the latent space. ``"auto"``: chosen among 10, 20, 32, 64 and 128 on
        held-out training identities (:mod:`crossmetric.learners._held_out_choice`; 10 where
        the pairs do not describe identities) -- what ``crossmetric benchmark`` runs. Ten
        directions keep too little of a face descriptor: on CUFS photo → sketch (HOG, 3
        splits) rank-1 is 85.1 % at 10, 97.1 % at 64, the untrained distance 95.2 %.
    reg : float >= 0 or "auto", default=0.1
        Ridge of the closed form, relative to each covariance's mean eigenvalue. ``"auto"``:
        chosen among 0.1, 1e-3, 1e-2 and 1 as ``n_components`` (0.1 without identities).
    solver : {"closed_form", "nipals"}, default="closed_form"
    distance : {"cosine", "euclidean"}, default="cosine"
        Comparison of the canonical variates (see the module docstring): ``"cosine"``
        L2-normalises them so ``pair_distance = 2 (1 − cos)``.
    scale : bool, default=True
        Standardise each feature first (as scikit-learn's ``scale``).
    max_iter, tol
        Of scikit-learn's NIPALS iterations (``solver="nipals"``).
    preprocessor : tuple (X, Y), optional

    Attributes
    ----------
    x_rotations_, y_rotations_ : ndarray of shape (d_x, k), (d_y, k)
    x_mean_, x_std_, y_mean_, y_std_ : ndarray
        Standardisation (with ``ddof=1``, as scikit-learn).
    correlations_ : ndarray of shape (k,)
        Regularised canonical correlations (closed form only).
    chosen_params_, selection_scores_
        The values used for the ``"auto"`` parameters and each candidate's mean held-out
        rank-1 (:class:`~crossmetric.learners._held_out_choice.HeldOutChoice`).
    untrained_ : bool
        Whether the held-out choice kept the untrained distance ``‖x − y‖²`` (views of one
        width; ``chosen_params_ == {"untrained": True}``): no setting beat it on held-out
        identities. The rotations are then the identity on the training samples' span
        (no centring, no scaling, no cosine) and ``complement_scale_`` / ``complement_basis_``
        keep the rest of ``x − y``.
    estimator_ : sklearn.cross_decomposition.CCA
        ``solver="nipals"`` only. With more features than positive pairs it was fitted on
        the coordinates of the standardised samples in their span (:func:`span_basis`);
        ``x_rotations_`` / ``y_rotations_`` are mapped back to the features.
    n_iter_ : int
        Largest number of NIPALS iterations over the components (0 for the closed form).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import CCA, make_pairs
    >>> rng = np.random.RandomState(0)
    >>> Z = rng.randn(60, 3)
    >>> X, Y = Z @ rng.randn(3, 8), Z @ rng.randn(3, 5)
    >>> pairs, y = make_pairs(np.arange(60), np.arange(60), random_state=0)
    >>> cca = CCA(3, reg=1e-3, preprocessor=(X, Y)).fit(pairs, y)
    >>> bool(cca.correlations_.min() > 0.99)
    True
    """

    _estimator_class = _SklearnCCA
    _auto_grid = {"n_components": COMPONENT_CANDIDATES, "reg": CCA_REG_GRID}
    _auto_fallback = {"n_components": 10, "reg": 0.1}

    def __init__(self, n_components: int | str = 10, *, reg: float | str = 0.1,
                 solver: str = "closed_form", distance: str = "cosine", scale: bool = True,
                 max_iter: int = 500, tol: float = 1e-6, preprocessor=None):
        super().__init__(n_components, distance=distance, scale=scale, max_iter=max_iter,
                         tol=tol, preprocessor=preprocessor)
        self.reg = reg
        self.solver = solver

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        solver = check_choice(self.solver, "solver", ("closed_form", "nipals"))
        if solver == "nipals":
            super()._fit(data, y)
            return
        _check_distance(self.distance)
        reg = check_positive_scalar(self.reg, "reg", allow_zero=True)
        Xp, Yp = _positive_samples(data, y)
        if Xp.shape[0] < 2:
            raise ValueError(f"CCA needs at least 2 positive pairs, got {Xp.shape[0]}.")
        k = check_n_components(
            self.n_components, min(Xp.shape[0] - 1, Xp.shape[1], Yp.shape[1]),
            what="min(positive pairs - 1, d_x, d_y)")
        self._set_standardisation(Xp, Yp)
        self.x_rotations_, self.y_rotations_, self.correlations_ = cca_directions(
            (Xp - self.x_mean_) / self.x_std_, (Yp - self.y_mean_) / self.y_std_, k, reg)
        self.n_iter_ = 0


class PLS(_SklearnLatent):
    """Partial least squares, canonical mode, on the positive pairs (``PLSCanonical``).

    The PLS baseline of cmml (§4; used for cross-modal faces by Sharma & Jacobs, CVPR 2011):
    maximises the covariance of the projections over the positive pairs.

    Each pair of directions is the first pair of singular vectors of the cross-covariance of
    the (deflated) views, computed by an SVD (scikit-learn's ``algorithm="svd"``), not by
    NIPALS iterations, which converge to the same vectors but slowly where two singular values
    are close: on CUFS photo ↔ sketch HOG (209 training persons, 64-128 directions) NIPALS
    stopped at ``max_iter`` in every fit.

    Parameters
    ----------
    n_components, distance, scale, preprocessor
        As in :class:`CCA` (``n_components="auto"`` too).
    max_iter, tol
        Unused (the SVD needs no iterations); kept for the shared signature of the
        cross-decomposition adapters.

    Attributes
    ----------
    estimator_ : sklearn.cross_decomposition.PLSCanonical
        As in :class:`CCA` (fitted in the span of the samples when features outnumber them).
    x_rotations_, y_rotations_, x_mean_, x_std_, y_mean_, y_std_
        As in :class:`CCA`.
    n_iter_ : int
        0 (no iterations).
    chosen_params_, untrained_, selection_scores_
        As in :class:`CCA`.

    Examples
    --------
    >>> from crossmetric import PLS, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = PLS(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    _estimator_class = _SklearnPLSCanonical
    _estimator_options = {"algorithm": "svd"}


class KPLS(_KernelCoordinatesMixin, PLS):
    """Kernel PLS (canonical mode) on the positive pairs: :class:`PLS` in each feature space.

    Kernel PLS (Rosipal & Trejo, JMLR 2001) with a kernel per modality, as the cmml paper runs
    its PLS baseline (§4, χ²-RBF kernels). scikit-learn's ``PLSCanonical`` (by SVD, as
    :class:`PLS`) runs on the exact kernel coordinates of each modality
    (:class:`~crossmetric.kernels.KernelCoordinates`), which is PLS in feature space with the
    weight vectors in the span of the training samples. Features are not standardised
    (``scale=False``): coordinates in feature space are already on the kernel's own scale.

    Parameters
    ----------
    n_components : int, default=10
    kernel : str or (str, str), default="rbf"
        A kernel of :mod:`crossmetric.kernels` for both modalities or a pair; the paper's is
        ``"chi2_rbf"`` (histogram features).
    gamma : float or (float, float), optional
        Bandwidths (``None``: ``1 / mean d²`` of each modality).
    distance, max_iter, tol, preprocessor
        As in :class:`PLS`.

    Attributes
    ----------
    coordinates_x_, coordinates_y_ : crossmetric.kernels.KernelCoordinates
    x_rotations_, y_rotations_ : ndarray
        PLS rotations of the coordinates.

    Examples
    --------
    >>> from crossmetric import KPLS, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = KPLS(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int = 10, *, kernel="rbf", gamma=None,
                 distance: str = "cosine", max_iter: int = 500, tol: float = 1e-6,
                 preprocessor=None):
        super().__init__(n_components, distance=distance, scale=False, max_iter=max_iter,
                         tol=tol, preprocessor=preprocessor)
        self.kernel = kernel
        self.gamma = gamma
