"""KISSME (Köstinger et al., CVPR 2012): ``M = Σ_S⁻¹ − Σ_D⁻¹`` projected onto the PSD cone.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator

from crossmetric._base import LinearSingleModalMixin
from crossmetric._solvers.linalg import _thin_qr, pca_basis, project, span_basis
from crossmetric._utils.checks import check_n_components, check_positive_scalar
from crossmetric.pairs._pair_data import PairData

__all__ = ["KISSME"]


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
        eigenpair, except with more features than samples, no PCA and ``n_components=None``:
        there ``M = Q M_r Qᵀ + c (I − Q Qᵀ)`` on the span ``Q`` of the training samples, and
        ``components_`` is ``M_r^{1/2} Qᵀ`` (one row per basis vector) with the rest, the
        eigenvalue ``c`` of the whole complement, kept as ``complement_scale_ = √c`` on
        ``complement_basis_ = Q`` -- no d × d matrix (26,112-dimensional dense SIFT: 11.7 GB
        before).
    complement_basis_, complement_scale_ :
        Set in that case only, when ``c > 0`` (:class:`crossmetric._base.
        LinearSingleModalMixin`).
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

    #: fitted in the span of the training samples (exact on wide views): the protocols'
    #: ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True

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
        diff = project(Z[i] - Z[j], P)
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
        L = (U[:, order] * np.sqrt(w[order])).T
        self.components_ = L if P is None else L @ P

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
            # all of M without a d × d matrix: L = A Qᵀ (A = M_r^{1/2}) on the span and the
            # complement's eigenvalue c as the kept scale √c of the part outside Q
            # (LinearSingleModalMixin): ‖A Qᵀ e‖² + c ‖(I − Q Qᵀ) e‖² = eᵀ M e
            self.eigenvalues_ = w[order]
            self.components_ = ((U * np.sqrt(w_r)) @ U.T) @ Q.T
            if c > 0:
                self.complement_basis_, self.complement_scale_ = Q, float(np.sqrt(c))
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
