"""Baselines the papers compare against, behind the common pair-learner API.

Sources (each class documents its choices):

* ``Euclidean`` -- the untrained distance, the floor of every results table.
* ``CCA`` -- canonical correlation analysis (Hotelling 1936) via scikit-learn's
  :class:`~sklearn.cross_decomposition.CCA`, fitted on the positive pairs (cmml §2, cml-auc
  Tables II, V, VIII).
* ``PLS`` -- partial least squares via scikit-learn's
  :class:`~sklearn.cross_decomposition.PLSCanonical`, fitted on the positive pairs (cmml §4).
* ``KCCA`` -- regularised kernel CCA (Hardoon, Szedmak & Shawe-Taylor, Neural Computation 16,
  2004), with the library's kernels (:mod:`crossmetric.kernels`).
* ``CDFE`` -- Common Discriminant Feature Extraction (Lin & Tang, "Inter-modality face
  recognition", ECCV 2006), the baseline of cmml §4 and cml-auc Table II.
* ``KISSME`` -- "keep it simple and straightforward" metric (Köstinger, Hirzer, Wohlhart, Roth
  & Bischof, CVPR 2012): ``M = Σ_S⁻¹ − Σ_D⁻¹`` projected onto the PSD cone.

Latent-space distance of CCA / PLS / KCCA: ``distance="cosine"`` (default) L2-normalises the
canonical variates, so the squared Euclidean distance between embeddings is
``2 (1 − cos)``; ``"euclidean"`` compares the raw variates. Cosine is the usual choice for
canonical variates (their scale carries no matching information) and was the better of the two
on mfeat fac ↔ pix (``benchmarks/bench_auc_comparison.py``).

High-dimensional features: when a view has more features than the samples that the pairs use
(HOG descriptors of a few hundred images), CCA, PLS, CDFE and KISSME -- and MvDA, CSR and the
PCA / CCA steps of :mod:`crossmetric.protocols` -- solve their closed form in the span of the
samples (:func:`span_basis`): the same model, O(n² d) instead of O(d³)
(``benchmarks/bench_closed_forms.py``: 100 × 3,564 per view).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.cross_decomposition import CCA as _SklearnCCA
from sklearn.cross_decomposition import PLSCanonical as _SklearnPLSCanonical
from sklearn.decomposition import PCA
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state
from threadpoolctl import threadpool_limits

from crossmetric._base import (
    CrossModalMixin,
    LinearSingleModalMixin,
    PairData,
    SingleModalMixin,
)
from crossmetric._checks import (
    check_choice,
    check_n_components,
    check_positive_int,
    check_positive_scalar,
)
from crossmetric.auc import weighted_pair_outer_sum
from crossmetric.kernels import (
    KernelCoordinates,
    KernelMap,
    NystroemMap,
    check_kernel_approximation,
)

__all__ = ["Euclidean", "CCA", "PLS", "KPLS", "KCCA", "CDFE", "KCDFE", "KISSME", "cca_directions",
           "span_basis"]

_DISTANCES = ("cosine", "euclidean")


def _check_distance(distance) -> str:
    if distance not in _DISTANCES:
        raise ValueError(f"distance must be one of {_DISTANCES}, got {distance!r}.")
    return distance


def _l2_normalize(F: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(F, axis=1, keepdims=True)
    return F / np.where(norms > 0, norms, 1.0)


def _pair_param(value, name: str):
    """A parameter given once for both modalities or as a pair ``(for_x, for_y)``."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(f"{name} must be one value or a pair (for_x, for_y), got {value!r}.")
        return value[0], value[1]
    return value, value


#: The closed forms below (CCA, PLS, MvDA, CDFE, CSR, KISSME, the PCA steps) are solved in the
#: span of the samples when there are fewer samples than features (:func:`span_basis`): the
#: same model, at O(n² d) instead of O(d³). ``False`` forces the feature-space solve (the
#: tests compare the two).
_REDUCE_TO_SPAN = True


def span_basis(*rows: np.ndarray) -> np.ndarray | None:
    """Orthonormal basis ``Q`` (d × m) of a space that holds the given rows, or ``None``.

    The closed forms of the linear baselines see the data only through a few samples ``V``
    (n × d): every data matrix of their problems is ``Vᵀ(·)V``. With ``Q`` from the thin QR of
    ``Vᵀ`` (so ``V = (V Q) Qᵀ``) such a matrix is ``Q [(V Q)ᵀ(·)(V Q)] Qᵀ``, the problem can
    be solved on the coordinates ``V Q`` (n × n instead of d × d) and its directions mapped
    back by ``Q``. A ridge ``ρ I`` on the d features splits into ``ρ I`` on the coordinates and
    ``ρ (I − Q Qᵀ)`` on the complement, which carries no data; each caller says in a comment
    why its solution lies in the span, or keeps the complement term where it does not.

    Parameters
    ----------
    *rows : ndarray of shape (n_i, d)
        Blocks of rows, stacked in this order (repeated rows of a block dropped); the basis
        holds all of them (m is the number of distinct rows, more than their rank when they
        are linearly dependent).

    Returns
    -------
    Q : ndarray of shape (d, m) or None
        ``None`` when the rows are at least as many as the features (no gain) or the
        reduction is switched off (module flag ``_REDUCE_TO_SPAN``).

    Examples
    --------
    >>> import numpy as np
    >>> V = np.random.RandomState(0).randn(5, 40)
    >>> Q = span_basis(V)
    >>> Q.shape, bool(np.allclose(V @ Q @ Q.T, V))
    ((40, 5), True)
    >>> span_basis(V.T) is None      # 40 rows of 5 features: nothing to reduce
    True
    """
    if not _REDUCE_TO_SPAN:
        return None
    # repeated rows (a sample in several pairs) add nothing to the span
    V = np.vstack([np.unique(r, axis=0) if r.shape[0] > 1 else r for r in rows])
    if V.shape[0] >= V.shape[1]:
        return None
    return _thin_qr(V.T)


def _thin_qr(A: np.ndarray) -> np.ndarray:
    """``Q`` of the thin QR of a tall ``A``, with single-threaded BLAS: OpenBLAS' threaded
    Householder QR of a 3,564 × 100 matrix took 1.8 s on two busy cores, one thread 0.03 s."""
    with threadpool_limits(limits=1, user_api="blas"):
        return np.linalg.qr(A)[0]


def _in_span(V: np.ndarray, Q: np.ndarray | None) -> np.ndarray:
    """Coordinates ``V Q`` of rows in the basis of :func:`span_basis` (``V`` if none)."""
    return V if Q is None else V @ Q


def _from_span(Q: np.ndarray | None, W: np.ndarray) -> np.ndarray:
    """Directions ``Q W`` in feature space from their coordinates (``W`` if no basis)."""
    return W if Q is None else Q @ W


def fit_pca(V: np.ndarray, n_components: int, random_state=None) -> PCA:
    """scikit-learn's PCA of the rows of ``V``; exact and O(n² d) when rows < features.

    With fewer rows than features (and ``_REDUCE_TO_SPAN``) the solver is the thin SVD of the
    centred rows (``svd_solver="full"``, which works in their span) instead of the randomized
    SVD that scikit-learn's ``"auto"`` picks for such shapes (an approximation of the same
    components, several times slower at 100 × 3,564); otherwise ``"auto"``, as before.
    """
    solver = "full" if _REDUCE_TO_SPAN and V.shape[0] < V.shape[1] else "auto"
    return PCA(n_components=n_components, svd_solver=solver, random_state=random_state).fit(V)


def pca_basis(Z: np.ndarray, i: np.ndarray, j: np.ndarray, n_components: int | None):
    """PCA of the samples the pairs ``(i, j)`` use: ``(pca, P)`` with ``P`` its
    ``(k, d)`` components, or ``(None, I)`` when ``n_components`` is ``None``."""
    d = Z.shape[1]
    if n_components is None:
        return None, np.eye(d)
    used = Z[np.unique(np.r_[i, j])]
    k = check_n_components(n_components, min(d, used.shape[0]), name="pca_components",
                           what="min(n_features, distinct samples)")
    pca = fit_pca(used, k)
    return pca, pca.components_


def _positive_samples(data: PairData, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-aligned samples of the positive pairs (the only pairs CCA-like methods use)."""
    pos = y == 1
    return data.X[data.ix[pos]], data.Y[data.iy[pos]]


class Euclidean(SingleModalMixin, BaseEstimator):
    """Squared Euclidean distance, optionally after per-feature standardisation.

    Nothing is learned but the optional feature means and scales (from the samples seen in the
    training pairs) and the decision threshold.

    Parameters
    ----------
    standardize : bool, default=False
        Centre each feature and divide by its standard deviation before comparing.
    preprocessor : array-like or tuple (X, Y), optional
        Samples that integer index pairs refer to.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (n_features,)
        Standardisation (zeros / ones when ``standardize=False``).
    threshold_ : float
        Distance threshold calibrated for accuracy on the training pairs.

    Examples
    --------
    >>> from crossmetric import Euclidean, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = Euclidean(preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 30)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, standardize: bool = False, *, preprocessor=None):
        self.standardize = standardize
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        Z, i, j = data.stacked()
        d = Z.shape[1]
        if self.standardize:
            used = Z[np.unique(np.r_[i, j])]
            self.mean_ = used.mean(axis=0)
            scale = used.std(axis=0)
            self.scale_ = np.where(scale > 0, scale, 1.0)
        else:
            self.mean_, self.scale_ = np.zeros(d), np.ones(d)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_


# ----------------------------------------------------------------------------- CCA / PLS
class _SklearnLatent(CrossModalMixin, BaseEstimator):
    """Shared code of the scikit-learn cross-decomposition adapters."""

    _estimator_class: type = _SklearnCCA

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
                                    scale=self.scale if Qx is None and Qy is None else False)
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

    def _finish(self, F: np.ndarray) -> np.ndarray:
        return _l2_normalize(F) if self.distance == "cosine" else F

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._finish(((X - self.x_mean_) / self.x_std_) @ self.x_rotations_)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._finish(((Y - self.y_mean_) / self.y_std_) @ self.y_rotations_)


def cca_directions(Xc: np.ndarray, Yc: np.ndarray, n_components: int, reg: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closed-form regularised CCA of centred, row-aligned views.

    With ``C_xx + r_x I``, ``C_yy + r_y I`` (``r = reg · trace(C)/d``) and the cross-covariance
    ``C_xy``, the directions are ``A = C_xx^{-1/2} U_k``, ``B = C_yy^{-1/2} V_k`` from the SVD
    ``C_xx^{-1/2} C_xy C_yy^{-1/2} = U S Vᵀ`` (Hotelling 1936; the ridge is the usual
    regularised CCA, e.g. Vinod 1976). ``S`` holds the regularised canonical correlations.
    The one CCA of the library: :class:`CCA` and the protocols' "-C" step both call it.

    With fewer pairs than features a view is solved in the span of its samples
    (:func:`span_basis`), exactly: with ``X_c = X_r Qᵀ``, ``C_xx + r_x I = Q (C_r + r_x I) Qᵀ
    + r_x (I − Q Qᵀ)``, so ``C_xx^{-1/2}`` is ``Q (C_r + r_x I)^{-1/2} Qᵀ`` plus
    ``r_x^{-1/2} (I − Q Qᵀ)``; the complement term meets ``C_xy = Q C_r,xy Q_yᵀ`` only through
    ``(I − Q Qᵀ) Q = 0``, so the whitened cross-covariance, its SVD and ``A = Q (C_r + r_x
    I)^{-1/2} U_r`` all live in the span (``r_x`` keeps the trace over all ``d_x`` features).

    Returns
    -------
    A : ndarray of shape (d_x, k)
    B : ndarray of shape (d_y, k)
    correlations : ndarray of shape (k,)
    """
    n = Xc.shape[0]

    def inv_sqrt(C, d):
        C = C + reg * max(np.trace(C) / d, 1e-12) * np.eye(C.shape[0])
        w, V = np.linalg.eigh(C)
        return (V / np.sqrt(np.maximum(w, 1e-12))) @ V.T

    Qx, Qy = span_basis(Xc), span_basis(Yc)
    Xr, Yr = _in_span(Xc, Qx), _in_span(Yc, Qy)
    Wx = inv_sqrt(Xr.T @ Xr / (n - 1), Xc.shape[1])
    Wy = inv_sqrt(Yr.T @ Yr / (n - 1), Yc.shape[1])
    U, sv, Vt = np.linalg.svd(Wx @ (Xr.T @ Yr / (n - 1)) @ Wy, full_matrices=False)
    return (_from_span(Qx, Wx @ U[:, :n_components]), _from_span(Qy, Wy @ Vt[:n_components].T),
            sv[:n_components])


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
    n_components : int, default=10
        Dimension of the latent space.
    reg : float >= 0, default=0.1
        Ridge of the closed form, relative to each covariance's mean eigenvalue.
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

    def __init__(self, n_components: int = 10, *, reg: float = 0.1,
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

    Parameters
    ----------
    n_components, distance, scale, max_iter, tol, preprocessor
        As in :class:`CCA`.

    Attributes
    ----------
    estimator_ : sklearn.cross_decomposition.PLSCanonical
        As in :class:`CCA` (fitted in the span of the samples when features outnumber them).
    x_rotations_, y_rotations_, x_mean_, x_std_, y_mean_, y_std_, n_iter_
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


# ----------------------------------------------------------------------------- KISSME
def _differing(D: np.ndarray, kind: str) -> np.ndarray:
    """KISSME's pair differences of one kind, refused when all are zero (identical samples)."""
    if not np.any(D):
        raise ValueError(f"every {kind} pair joins identical samples (zero differences): "
                         "KISSME needs pairs of differing samples.")
    return D


class KISSME(LinearSingleModalMixin, BaseEstimator):
    """KISSME: ``M = Σ_S⁻¹ − Σ_D⁻¹`` projected onto the PSD cone (Köstinger et al., CVPR 2012).

    ``Σ_S`` and ``Σ_D`` are the covariances of the pair differences ``x − y`` over the
    similar and the dissimilar pairs (their eq. 12). The difference of inverses is projected
    onto the PSD cone by clipping negative eigenvalues to 0 (their §3, "re-project onto the
    cone of positive semi-definite matrices"). Optionally PCA first, as Köstinger et al. do
    (their experiments use 34-100 PCA dimensions). Single-modal; cross-modal pairs whose two
    sides have the same dimension are accepted (shared tower).

    Parameters
    ----------
    n_components : int, optional
        Keep the top ``n_components`` eigenpairs of ``M`` (low-rank ``components_``); all when
        ``None``.
    pca_components : int, optional
        Project on this many principal components (of the samples used in the pairs) first.
    reg : float >= 0, default=1e-6
        Ridge added to ``Σ_S`` and ``Σ_D`` before inversion, relative to their mean
        eigenvalue (``Σ + reg · tr(Σ)/d · I``) -- keeps the inverses finite when there are
        fewer pairs than dimensions.
    preprocessor : array-like or tuple (X, Y), optional

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        ``L`` with ``M = Lᵀ L`` on the raw features (PCA included): one row per kept
        eigenpair, except with more features than samples, no PCA and ``n_components=None``,
        where it is the symmetric square root of ``M`` (the same rows up to a rotation; an
        eigenbasis of the data's complement would cost a d × d QR).
    pca_ : sklearn.decomposition.PCA or None
    eigenvalues_ : ndarray
        Kept eigenvalues of the projected ``M`` (descending, >= 0).

    Examples
    --------
    >>> from crossmetric import KISSME, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = KISSME(n_components=4, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, pca_components: int | None = None,
                 reg: float = 1e-6, preprocessor=None):
        self.n_components = n_components
        self.pca_components = pca_components
        self.reg = reg
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        reg = check_positive_scalar(self.reg, "reg", allow_zero=True)
        Z, i, j = data.stacked()
        self.pca_, P = pca_basis(Z, i, j, self.pca_components)
        if self.pca_ is None:
            used = Z[np.unique(np.r_[i, j])]
            Q = span_basis(used - used.mean(axis=0))    # holds every difference z_i − z_j
            if Q is not None:
                self._fit_in_span((Z[i] - Z[j]) @ Q, y, Q, reg)
                return
        diff = (Z[i] - Z[j]) @ P.T
        inv = []
        for mask, kind in ((y == 1, "similar"), (y == -1, "dissimilar")):
            D = _differing(diff[mask], kind)
            S = D.T @ D / D.shape[0]
            S = S + reg * max(np.trace(S) / S.shape[0], np.finfo(float).tiny) * np.eye(S.shape[0])
            inv.append(scipy.linalg.pinvh(S))
        M = inv[0] - inv[1]
        w, U = np.linalg.eigh((M + M.T) / 2)
        w = np.clip(w, 0.0, None)                               # projection onto the PSD cone
        order = np.argsort(w)[::-1]
        if self.n_components is not None:
            order = order[:check_n_components(self.n_components, w.size)]
        self.eigenvalues_ = w[order]
        self.components_ = (U[:, order] * np.sqrt(w[order])).T @ P

    def _fit_in_span(self, diff: np.ndarray, y: np.ndarray, Q: np.ndarray, reg: float) -> None:
        """The same ``M`` from the coordinates ``diff`` of the differences in the basis ``Q``.

        Each ``Σ + ρ I = Q (Σ_r + ρ I) Qᵀ + ρ (I − Q Qᵀ)`` (:func:`span_basis`): its spectrum is
        that of ``Σ_r + ρ I`` and ``ρ`` ``d − m`` times, and its pseudo-inverse (``pinvh``'s
        cutoff on that whole spectrum) is ``Q (Σ_r + ρ I)⁺ Qᵀ + ρ⁺ (I − Q Qᵀ)``. The complement
        term does *not* cancel in ``M = Q M_r Qᵀ + (ρ_S⁺ − ρ_D⁺)(I − Q Qᵀ)`` (the two ridges
        differ), so it is kept: an eigenvalue ``c = ρ_S⁺ − ρ_D⁺`` of multiplicity ``d − m``
        whose eigenvectors are any orthonormal basis of the complement, as in the full solve.
        """
        d, m = Q.shape
        tiny, parts = np.finfo(float).tiny, []
        for mask, kind in ((y == 1, "similar"), (y == -1, "dissimilar")):
            D = _differing(diff[mask], kind)
            S = D.T @ D / D.shape[0]
            rho = reg * max(np.trace(S) / d, tiny)
            s, U = np.linalg.eigh(S + rho * np.eye(m))
            cut = max(np.abs(s).max(initial=0.0), rho) * d * np.finfo(float).eps
            inv_s = np.where(np.abs(s) > cut, 1.0 / np.where(s == 0, 1.0, s), 0.0)
            parts.append(((U * inv_s) @ U.T, 1.0 / rho if rho > cut else 0.0))
        M = parts[0][0] - parts[1][0]
        w_r, U = np.linalg.eigh((M + M.T) / 2)
        w_r, c = np.clip(w_r, 0.0, None), max(parts[0][1] - parts[1][1], 0.0)
        w = np.r_[w_r, np.full(d - m, c)]
        order = np.argsort(w)[::-1]
        if self.n_components is None:
            # all of M: its symmetric square root Q (A − √c I) Qᵀ + √c I (A = M_r^{1/2}), a
            # rotation of the eigenvector rows, which is all the freedom the problem has
            # (an orthonormal basis of the complement costs a d × d QR)
            self.eigenvalues_ = w[order]
            A = (U * np.sqrt(w_r)) @ U.T - np.sqrt(c) * np.eye(m)
            self.components_ = (Q @ A) @ Q.T
            self.components_[np.diag_indices(d)] += np.sqrt(c)
            return
        order = order[:check_n_components(self.n_components, w.size)]
        self.eigenvalues_ = w[order]
        rows = np.empty((order.size, d))
        inside = order < m
        rows[inside] = (U[:, order[inside]] * np.sqrt(w[order[inside]])).T @ Q.T
        n_out = int(np.sum(~inside))
        if n_out:        # orthonormal directions of the complement (any, as in the full solve)
            G = np.random.RandomState(0).randn(d, n_out)
            rows[~inside] = np.sqrt(c) * _thin_qr(np.c_[Q, G])[:, m:].T
        self.components_ = rows


# ----------------------------------------------------------------------------- CDFE
class LinearTowers(CrossModalMixin, BaseEstimator):
    """Embedding ``x ↦ components_x_ (x − mean_x_)``, ``y ↦ components_y_ (y − mean_y_)``,
    L2-normalised when ``distance="cosine"`` (the linear two-tower baselines)."""

    def _finish(self, F: np.ndarray) -> np.ndarray:
        return _l2_normalize(F) if self.distance == "cosine" else F

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._finish((X - self.mean_x_) @ self.components_x_.T)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._finish((Y - self.mean_y_) @ self.components_y_.T)


class CDFE(LinearTowers):
    """Common Discriminant Feature Extraction (Lin & Tang, ECCV 2006), linear version.

    Two linear maps ``f_x(x) = Uᵀ(x − m_x)``, ``f_y(y) = Vᵀ(y − m_y)`` into a common space
    minimise (the paper's objective, in the matrix form of our ``W = [U; V]``)

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
    n_components : int, default=10
    alpha : float >= 0, default=1.0
        Weight of the negative-pair term.
    beta : float >= 0, default=1.0
        Weight of the local-consistency term.
    n_neighbors : int, default=5
        Neighbours per sample in each modality's graph.
    reg : float > 0, default=1e-3
        Ridge on ``C``, relative to its mean eigenvalue.
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

    def __init__(self, n_components: int = 10, *, alpha: float = 1.0, beta: float = 1.0,
                 n_neighbors: int = 5, reg: float = 1e-3, distance: str = "euclidean",
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


# ----------------------------------------------------------------------------- kernel versions
class _KernelCoordinatesMixin:
    """Run a linear cross-modal baseline on exact kernel coordinates of each modality.

    Each modality's samples (the distinct rows the training pairs use) fix a
    :class:`~crossmetric.kernels.KernelCoordinates` map; the linear method then runs on the
    coordinates, which is its kernel version (weights in the span of the training samples).
    The subclass lists the linear class first among its bases after this mixin.
    """

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        kx, ky = _pair_param(self.kernel, "kernel")
        gx, gy = _pair_param(self.gamma, "gamma")
        self.coordinates_x_ = KernelCoordinates(kx, gamma=gx).fit(data.X[np.unique(data.ix)])
        self.coordinates_y_ = KernelCoordinates(ky, gamma=gy).fit(data.Y[np.unique(data.iy)])
        super()._fit(PairData(self.coordinates_x_.transform(data.X),
                              self.coordinates_y_.transform(data.Y), data.ix, data.iy), y)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return super()._embed_x(self.coordinates_x_.transform(X))

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return super()._embed_y(self.coordinates_y_.transform(Y))


class KPLS(_KernelCoordinatesMixin, PLS):
    """Kernel PLS (canonical mode) on the positive pairs: :class:`PLS` in each feature space.

    Kernel PLS (Rosipal & Trejo, JMLR 2001) with a kernel per modality, as the cmml paper runs
    its PLS baseline (§4, χ²-RBF kernels). The NIPALS iterations of scikit-learn's
    ``PLSCanonical`` run on the exact kernel coordinates of each modality
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

    def __init__(self, n_components: int = 10, *, kernel="rbf", gamma=None, alpha: float = 1.0,
                 beta: float = 1.0, n_neighbors: int = 5, reg: float = 0.1,
                 distance: str = "euclidean", preprocessor=None):
        super().__init__(n_components, alpha=alpha, beta=beta, n_neighbors=n_neighbors,
                         reg=reg, distance=distance, preprocessor=preprocessor)
        self.kernel = kernel
        self.gamma = gamma


# ----------------------------------------------------------------------------- KCCA
class KCCA(CrossModalMixin, BaseEstimator):
    """Regularised kernel CCA (Hardoon, Szedmak & Shawe-Taylor, Neural Computation 2004).

    Fitted on the positive pairs ``(x_p, y_p)``, ``p = 1..n``. With centred kernel matrices
    ``K_x = U_x S_x U_xᵀ``, ``K_y = U_y S_y U_yᵀ`` the regularised problem of Hardoon et al.
    (§3.2: ``max αᵀK_xK_yβ / √((αᵀK_x²α + κ_x αᵀK_xα)(βᵀK_y²β + κ_y βᵀK_yβ))``) is solved
    exactly through the SVD of

        T = (S_x + κ_x)^{-1/2} S_x^{1/2} U_xᵀ U_y S_y^{1/2} (S_y + κ_y)^{-1/2} = P Σ Qᵀ,

    whose singular values are the regularised canonical correlations; a new sample is mapped
    to ``P_kᵀ (S_x + κ_x)^{-1/2} S_x^{-1/2} U_xᵀ k_c(x)`` with ``k_c(x)`` its centred kernel row
    (likewise for ``y``). Cost ``O(n³)`` for ``n`` positive pairs (two eigendecompositions);
    Hardoon et al.'s partial Gram-Schmidt approximation is not needed at the sizes of the
    papers' experiments.

    Parameters
    ----------
    n_components : int, default=10
    kernel : str or (str, str), default="rbf"
        A kernel of :mod:`crossmetric.kernels` for both modalities or a pair.
    gamma : float or (float, float), optional
        Kernel bandwidths; ``None`` uses the scale-free default of :mod:`crossmetric.kernels`.
    reg : float > 0, default=0.1
        ``κ`` relative to the mean eigenvalue of each centred kernel matrix
        (``κ_x = reg · tr(K_x) / n``); Hardoon et al. tune ``κ`` directly.
    distance : {"cosine", "euclidean"}, default="cosine"
        Comparison of the canonical variates (see the module docstring).
    preprocessor : tuple (X, Y), optional
    kernel_approximation : {None, "nystroem"}, default=None
        ``"nystroem"``: solve the same problem on the Nyström kernel ``K̃ = Φ Φᵀ`` of
        ``n_landmarks`` random positive-pair samples per modality
        (:class:`~crossmetric.kernels.NystroemMap`), through the thin SVD of the centred
        features ``Φ_c = U S Vᵀ`` (``K̃_c = U S² Uᵀ``): O(n·m²) time and O(n·m) memory instead
        of O(n³) and O(n²). The embedding is then linear in ``φ(x)``: a linear CCA tower on the
        Nyström features. With all samples as landmarks it equals the exact fit.
    n_landmarks : int, default=1000

    Attributes
    ----------
    correlations_ : ndarray of shape (n_components,)
        Regularised canonical correlations (descending).
    kernel_map_x_, kernel_map_y_ : crossmetric.kernels.KernelMap
    dual_coef_x_, dual_coef_y_ : ndarray of shape (n, n_components)
        Projection of centred kernel rows (exact kernels).
    feature_map_x_, feature_map_y_ : NystroemMap
        Nyström only, with ``feature_mean_x_`` / ``_y_`` and the projections
        ``feature_coef_x_`` / ``_y_`` of shape (m, n_components).

    Examples
    --------
    >>> from crossmetric import KCCA, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = KCCA(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int = 10, *, kernel="rbf", gamma=None, reg: float = 0.1,
                 distance: str = "cosine", preprocessor=None, kernel_approximation=None,
                 n_landmarks: int = 1000, random_state=None):
        self.kernel_approximation = kernel_approximation
        self.n_landmarks = n_landmarks
        self.random_state = random_state
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.reg = reg
        self.distance = distance
        self.preprocessor = preprocessor

    @staticmethod
    def _centered_eig(K: np.ndarray):
        col = K.mean(axis=0)
        total = col.mean()
        Kc = K - col[None, :] - col[:, None] + total
        s, U = np.linalg.eigh((Kc + Kc.T) / 2)
        keep = s > max(s.max(), 0.0) * 1e-10
        return s[keep], U[:, keep], col, total, np.trace(Kc)

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        _check_distance(self.distance)
        reg = check_positive_scalar(self.reg, "reg")
        kx, ky = _pair_param(self.kernel, "kernel")
        gx, gy = _pair_param(self.gamma, "gamma")
        Xp, Yp = _positive_samples(data, y)
        n = Xp.shape[0]
        for attr in ("kernel_map", "feature_map", "feature_mean", "feature_coef", "dual_coef"):
            for side in "xy":
                self.__dict__.pop(f"{attr}_{side}_", None)
        if check_kernel_approximation(self.kernel_approximation) == "nystroem":
            self._fit_nystroem(Xp, Yp, (kx, ky), (gx, gy), reg)
            return
        self.kernel_map_x_ = KernelMap(kx, gamma=gx).fit(Xp)
        self.kernel_map_y_ = KernelMap(ky, gamma=gy).fit(Yp)
        sx, Ux, self.kernel_col_mean_x_, self.kernel_mean_x_, trx = self._centered_eig(
            self.kernel_map_x_.train_kernel())
        sy, Uy, self.kernel_col_mean_y_, self.kernel_mean_y_, try_ = self._centered_eig(
            self.kernel_map_y_.train_kernel())
        k = check_n_components(self.n_components, min(sx.size, sy.size),
                               what="the rank of the centred kernel matrices")
        kap_x, kap_y = reg * trx / n, reg * try_ / n
        ax = np.sqrt(sx / (sx + kap_x))
        ay = np.sqrt(sy / (sy + kap_y))
        T = (ax[:, None] * (Ux.T @ Uy)) * ay[None, :]
        P, sig, Qt = np.linalg.svd(T, full_matrices=False)
        self.correlations_ = sig[:k]
        self.dual_coef_x_ = Ux @ (P[:, :k] / np.sqrt(sx * (sx + kap_x))[:, None])
        self.dual_coef_y_ = Uy @ (Qt[:k].T / np.sqrt(sy * (sy + kap_y))[:, None])

    def _fit_nystroem(self, Xp, Yp, kernels, gammas, reg) -> None:
        """The exact solution below on ``K̃_c = Φ_c Φ_cᵀ``, from the thin SVD of ``Φ_c``."""
        n = Xp.shape[0]
        rng = check_random_state(self.random_state)
        parts = []
        for side, S, kernel, gamma in zip("xy", (Xp, Yp), kernels, gammas, strict=True):
            fm = NystroemMap(kernel, gamma=gamma, n_landmarks=self.n_landmarks,
                             random_state=rng).fit(S)
            Phi = fm.transform(S)
            mean = Phi.mean(axis=0)
            U, sv, Vt = np.linalg.svd(Phi - mean, full_matrices=False)
            s = sv ** 2
            keep = s > max(s.max(initial=0.0), 0.0) * 1e-10
            setattr(self, f"feature_map_{side}_", fm)
            setattr(self, f"feature_mean_{side}_", mean)
            parts.append((s[keep], U[:, keep], Vt[keep].T * sv[keep], s.sum()))
        (sx, Ux, Vx, trx), (sy, Uy, Vy, try_) = parts
        k = check_n_components(self.n_components, min(sx.size, sy.size),
                               what="the rank of the centred Nyström features")
        kap_x, kap_y = reg * trx / n, reg * try_ / n
        T = (np.sqrt(sx / (sx + kap_x))[:, None] * (Ux.T @ Uy)) * np.sqrt(sy / (sy + kap_y))
        P, sig, Qt = np.linalg.svd(T, full_matrices=False)
        self.correlations_ = sig[:k]
        # centred kernel row of x is φ_c(x) Φ_cᵀ = φ_c(x) V S Uᵀ, so Uᵀ k_c(x) = φ_c(x) V S
        self.feature_coef_x_ = Vx @ (P[:, :k] / np.sqrt(sx * (sx + kap_x))[:, None])
        self.feature_coef_y_ = Vy @ (Qt[:k].T / np.sqrt(sy * (sy + kap_y))[:, None])

    def _finish(self, F: np.ndarray) -> np.ndarray:
        return _l2_normalize(F) if self.distance == "cosine" else F

    @staticmethod
    def _centre_rows(Kr: np.ndarray, col: np.ndarray, total: float) -> np.ndarray:
        return Kr - col[None, :] - Kr.mean(axis=1, keepdims=True) + total

    def _embed_nystroem(self, S: np.ndarray, side: str) -> np.ndarray:
        Phi = getattr(self, f"feature_map_{side}_").transform(S)
        Phi -= getattr(self, f"feature_mean_{side}_")
        return self._finish(Phi @ getattr(self, f"feature_coef_{side}_"))

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        if hasattr(self, "feature_map_x_"):
            return self._embed_nystroem(X, "x")
        Kr = self.kernel_map_x_.transform(X)
        Kc = self._centre_rows(Kr, self.kernel_col_mean_x_, self.kernel_mean_x_)
        return self._finish(Kc @ self.dual_coef_x_)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        if hasattr(self, "feature_map_y_"):
            return self._embed_nystroem(Y, "y")
        Kr = self.kernel_map_y_.transform(Y)
        Kc = self._centre_rows(Kr, self.kernel_col_mean_y_, self.kernel_mean_y_)
        return self._finish(Kc @ self.dual_coef_y_)
