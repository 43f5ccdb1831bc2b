"""More than two views: ``fit_views([X1, ..., Xv], ...)`` and ``transform_view(X, view)``.

The pair API (``fit(pairs, y)``, ``transform_x`` / ``transform_y``) stays the two-view case;
learners whose model is multi-view also take a list of views:

* :class:`crossmetric.MvDA` (Kan et al., ECCV 2012, is multi-view in the paper):
  ``fit_views(views, labels)``, one identity label per row of each view (the views may have
  different numbers of rows); the scatter matrices of their eq. 7-8 for ``v`` views
  (:func:`mvda_scatter_matrices`), solved by
  :func:`mvda_directions`.
* :class:`MCCA` -- multi-set CCA in Kettenring's (1971) **MAXVAR** form (Carroll's generalised
  CCA, 1968): the ``k`` directions ``w_j`` of each view whose projections are best explained by
  one shared variate, i.e. the top generalised eigenvectors of ``C w = λ D w`` with ``C`` the
  covariance of the concatenated views and ``D`` its block diagonal (each view's covariance
  with the ridge of :func:`crossmetric._solvers.linalg.cca_directions`, in ``C`` and ``D``).
  ``λ`` is the largest eigenvalue of the views' correlation matrix along that direction
  (between 1 and ``v``; for two views
  ``λ = 1 + ρ``, ρ the canonical correlation). MAXVAR rather than SUMCOR because it is one
  eigenproblem with a unique solution, while SUMCOR needs an iterative solver with local optima.
  ``fit_views(views)`` takes row-aligned views (row ``r`` = the same object in every view);
  ``fit(pairs, y)`` uses the positive pairs' samples, as :class:`crossmetric.CCA`. Each view's
  directions are scaled to unit (regularised) variance, so that with two views MCCA gives
  :class:`crossmetric.CCA`'s canonical variates (up to a sign shared by both views).

After ``fit_views``, ``transform_x`` / ``transform_y`` / ``cross_distance`` are those of views
0 and 1 and :meth:`MultiViewMixin.view_distance` compares any two views; after ``fit``,
``transform_view`` takes views 0 and 1.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg
from sklearn.utils.validation import check_is_fitted

from crossmetric._base import with_complement
from crossmetric._utils.checks import (
    as_float_array,
    check_choice,
    check_n_components,
    check_positive_scalar,
)
from crossmetric.learners.baselines._common import (
    LinearTowers,
    _positive_samples,
    finish_embedding,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["MultiViewMixin", "MCCA", "mcca_directions", "mvda_directions",
           "mvda_scatter_matrices"]


def _class_sums(V: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """``Σ_i`` = sum of the rows of ``V`` of class ``i`` (shape ``(n_classes, d)``)."""
    out = np.zeros((n_classes, V.shape[1]))
    np.add.at(out, codes, V)
    return out


def mvda_scatter_matrices(views, codes) -> tuple[np.ndarray, np.ndarray]:
    """MvDA's within-class ``S`` and between-class ``D`` block matrices (Kan et al., eq. 7-8).

    For projections ``W = [w_1; …; w_v]`` (one block per view), ``Wᵀ S W`` is the within-class
    scatter and ``Wᵀ D W`` the between-class scatter of all projected samples
    ``w_jᵀ x_jk``, classes pooled across the views:

        S_jr = δ_jr X_jᵀ X_j − Σ_jᵀ diag(1/n_i) Σ_r
        D_jr = Σ_jᵀ diag(1/n_i) Σ_r − (1/n) s_j s_rᵀ

    with ``Σ_j`` the class sums of view ``j`` (``n_ij μ_ij`` in the paper), ``n_i`` the size
    of class ``i`` over all views and ``s_j`` the sum of view ``j``'s samples.
    """
    n_classes = int(max(c.max() for c in codes)) + 1
    counts = sum(np.bincount(c, minlength=n_classes) for c in codes).astype(float)
    inv = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)
    sums = [_class_sums(V, c, n_classes) for V, c in zip(views, codes, strict=True)]
    totals = [V.sum(axis=0) for V in views]
    n = float(counts.sum())
    dims = np.cumsum([0] + [V.shape[1] for V in views])
    S = np.zeros((dims[-1], dims[-1]))
    D = np.zeros_like(S)
    for j, Vj in enumerate(views):
        for r in range(j, len(views)):
            between = sums[j].T @ (inv[:, None] * sums[r])
            bj, br = slice(dims[j], dims[j + 1]), slice(dims[r], dims[r + 1])
            S[bj, br] = (Vj.T @ Vj if j == r else 0.0) - between
            D[bj, br] = between - np.outer(totals[j], totals[r]) / n
            if r != j:
                S[br, bj], D[br, bj] = S[bj, br].T, D[bj, br].T
    return S, D


def _ridge(C: np.ndarray, reg: float) -> np.ndarray:
    """``C + reg · trace(C)/d · I``, the ridge of
    :func:`~crossmetric._solvers.linalg.cca_directions`."""
    d = C.shape[0]
    return C + reg * max(np.trace(C) / d, 1e-12) * np.eye(d)


def _top_eigh(A: np.ndarray, B: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest generalised eigenpairs of symmetric ``(A, B)``, descending."""
    w, W = scipy.linalg.eigh((A + A.T) / 2, (B + B.T) / 2,
                             subset_by_index=[A.shape[0] - k, A.shape[0] - 1])
    order = np.argsort(w)[::-1]
    return w[order], W[:, order]


def _block_slices(dims) -> list[slice]:
    edges = np.cumsum([0, *dims])
    return [slice(edges[j], edges[j + 1]) for j in range(len(dims))]


def _split(W: np.ndarray, dims) -> list[np.ndarray]:
    """The row blocks of ``W``, one per view."""
    return [W[sl] for sl in _block_slices(dims)]


def mcca_directions(views, n_components: int, reg: float = 1e-3):
    """MAXVAR multi-set CCA of centred, row-aligned views (module docstring).

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        Descending; ``1 + ρ`` for two views.
    directions : list of ndarray of shape (d_j, k)
        Scaled so that ``w_jᵀ (C_jj + r_j I) w_j = 1`` for each column.
    """
    n = views[0].shape[0]
    dims = [V.shape[1] for V in views]
    Z = np.hstack(views)
    C = Z.T @ Z / (n - 1)
    blocks = []
    for sl in _block_slices(dims):
        C[sl, sl] = _ridge(C[sl, sl], reg)   # the ridged covariance in C and in D
        blocks.append(C[sl, sl].copy())
    D = scipy.linalg.block_diag(*blocks)
    w, W = _top_eigh(C, D, n_components)
    out = []
    for Wj, Dj in zip(_split(W, dims), blocks, strict=True):
        scale = np.sqrt(np.maximum(np.einsum("ik,ij,jk->k", Wj, Dj, Wj), 1e-300))
        out.append(Wj / scale)
    return w, out


def mvda_directions(views, codes, n_components: int, reg: float = 1e-3):
    """MvDA (Kan et al.) for ``v`` views: ``D w = λ (S + r I) w`` on views centred on their
    own means (as :class:`crossmetric.MvDA` does for two).

    Returns
    -------
    means : list of ndarray
    eigenvalues : ndarray of shape (k,)
    directions : list of ndarray of shape (d_j, k)
    """
    means = [V.mean(axis=0) for V in views]
    S, D = mvda_scatter_matrices([V - m for V, m in zip(views, means, strict=True)], codes)
    S = S + reg * max(np.trace(S) / S.shape[0], np.finfo(float).tiny) * np.eye(S.shape[0])
    w, W = _top_eigh(D, S, n_components)
    return means, w, _split(W, [V.shape[1] for V in views])


class MultiViewMixin:
    """``fit_views`` / ``transform_view`` / ``view_distance`` for linear multi-view towers.

    A subclass implements ``_fit_views(views, codes) -> (means, components)`` (one mean and
    one ``(k, d_j)`` component matrix per view); ``_views_need_labels`` says whether
    ``fit_views`` requires labels (discriminant methods) or row-aligned views (MCCA).
    """

    _views_need_labels = True

    def fit(self, pairs, y):
        # a later two-view fit replaces the views of an earlier fit_views
        for name in ("view_means_", "view_components_", "n_views_"):
            self.__dict__.pop(name, None)
        return super().fit(pairs, y)

    def fit_views(self, views, labels=None):
        """Fit on ``v >= 2`` views.

        Parameters
        ----------
        views : sequence of array-like, each of shape (n_j, d_j)
        labels : array-like of shape (n,), or sequence of v arrays of shape (n_j,)
            Identity of each row (one array when the views are row-aligned). Required by
            discriminant learners (MvDA); MCCA takes row-aligned views and no labels.

        Returns
        -------
        self
        """
        from crossmetric.pairs import make_pairs

        if isinstance(views, np.ndarray) or len(views) < 2:
            raise ValueError("views must be a sequence of at least two 2-d arrays (one per "
                             "view).")
        views = [as_float_array(V, f"views[{j}]", ndim=2) for j, V in enumerate(views)]
        for j, V in enumerate(views):
            if V.shape[0] < 2:
                raise ValueError(f"views[{j}] needs at least 2 rows, got {V.shape[0]}.")
        codes = self._view_codes(views, labels)
        means, comps = self._fit_views(views, codes)
        self.view_means_, self.view_components_ = means, comps
        self.n_views_ = len(views)
        self.mean_x_, self.mean_y_ = means[0], means[1]
        self.components_x_, self.components_y_ = comps[0], comps[1]
        self._sample_shape_x_, self._sample_shape_y_ = views[0].shape[1:], views[1].shape[1:]
        self.n_features_in_x_, self.n_features_in_y_ = views[0].shape[1], views[1].shape[1]
        self.classes_ = np.array([-1, 1])
        # threshold_: as fit(), on identity pairs between views 0 and 1
        pairs, y = make_pairs(codes[0], codes[1], max_positives=1000, random_state=0)
        self.threshold_ = float(self._fit_threshold(
            PairData(views[0], views[1], pairs[:, 0], pairs[:, 1]), y))
        return self

    def _view_codes(self, views, labels) -> list[np.ndarray]:
        name = type(self).__name__
        if not self._views_need_labels:
            if labels is not None:
                raise ValueError(f"{name}.fit_views takes row-aligned views and no labels "
                                 "(row r is the same object in every view).")
            n = views[0].shape[0]
            if any(V.shape[0] != n for V in views):
                raise ValueError(f"{name}.fit_views needs row-aligned views of equal length, "
                                 f"got {[V.shape[0] for V in views]} rows.")
            return [np.arange(n)] * len(views)
        if labels is None:
            raise ValueError(f"{name}.fit_views needs labels (the identity of each row).")
        if isinstance(labels, np.ndarray) or not isinstance(labels, list | tuple) or (
                len(labels) and np.ndim(labels[0]) == 0):
            labels = [labels] * len(views)
        if len(labels) != len(views):
            raise ValueError(f"labels must be one array for row-aligned views or one per view "
                             f"({len(views)}), got {len(labels)}.")
        arrays = [np.asarray(lab).ravel() for lab in labels]
        for j, (lab, V) in enumerate(zip(arrays, views, strict=True)):
            if lab.shape[0] != V.shape[0]:
                raise ValueError(f"labels of view {j}: {lab.shape[0]} labels for "
                                 f"{V.shape[0]} rows.")
        _, codes = np.unique(np.concatenate(arrays), return_inverse=True)
        return np.split(codes.ravel(), np.cumsum([a.size for a in arrays])[:-1])

    def _view_parameters(self):
        check_is_fitted(self)
        if hasattr(self, "view_components_"):
            return self.view_means_, self.view_components_
        return [self.mean_x_, self.mean_y_], [self.components_x_, self.components_y_]

    def transform_view(self, X, view: int) -> np.ndarray:
        """Embed samples of view ``view`` (0-based, in ``fit_views``' order) into the common
        space.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        means, comps = self._view_parameters()
        if isinstance(view, bool) or not isinstance(view, numbers.Integral) or not (
                0 <= view < len(comps)):
            raise ValueError(f"view must be an integer in [0, {len(comps) - 1}], got {view!r}.")
        X = as_float_array(X, "X", ndim=2)
        if X.shape[1] != comps[view].shape[1]:
            raise ValueError(f"X has {X.shape[1]} features, but view {view} was fitted with "
                             f"{comps[view].shape[1]}.")
        return finish_embedding(self, with_complement(self, (X - means[view]) @ comps[view].T, X))

    def view_distance(self, A, view_a: int, B, view_b: int) -> np.ndarray:
        """``(n_a, n_b)`` distances between samples of two views in the common space."""
        return self._matrix_distance(self.transform_view(A, view_a),
                                     self.transform_view(B, view_b))


class MCCA(MultiViewMixin, LinearTowers):
    """Multi-set CCA (MAXVAR) for two or more views; see the module docstring.

    Parameters
    ----------
    n_components : int, default=10
    reg : float >= 0, default=1e-3
        Ridge of each view's covariance, relative to its mean eigenvalue.
    scale : bool, default=True
        Standardise each feature first (as :class:`crossmetric.CCA`).
    distance : {"cosine", "euclidean"}, default="cosine"
    preprocessor : tuple (X, Y), optional

    Attributes
    ----------
    components_x_, components_y_ : ndarray of shape (n_components, d_x), (n_components, d_y)
        Views 0 and 1 (standardisation folded in).
    mean_x_, mean_y_ : ndarray
    view_components_, view_means_ : list of ndarray
        Every view's (after ``fit_views``).
    eigenvalues_ : ndarray of shape (n_components,)
        MAXVAR eigenvalues, descending (``1 + ρ`` with two views).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.learners.multiview import MCCA
    >>> rng = np.random.RandomState(0)
    >>> Z = rng.randn(80, 2)
    >>> views = [Z @ rng.randn(2, d) + 0.1 * rng.randn(80, d) for d in (5, 4, 6)]
    >>> m = MCCA(n_components=2).fit_views(views)
    >>> bool(m.eigenvalues_.min() > 2.9)  # three views, nearly one signal: λ close to 3
    True
    >>> m.view_distance(views[2][:3], 2, views[0][:4], 0).shape
    (3, 4)
    """

    _views_need_labels = False

    def __init__(self, n_components: int = 10, *, reg: float = 1e-3, scale: bool = True,
                 distance: str = "cosine", preprocessor=None):
        self.n_components = n_components
        self.reg = reg
        self.scale = scale
        self.distance = distance
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        Xp, Yp = _positive_samples(data, y)
        (self.mean_x_, self.mean_y_), (self.components_x_, self.components_y_) = \
            self._fit_views([Xp, Yp], None)

    def _fit_views(self, views, codes):
        check_choice(self.distance, "distance", ("euclidean", "cosine"))
        reg = check_positive_scalar(self.reg, "reg", allow_zero=True)
        n = views[0].shape[0]
        if n < 2:
            raise ValueError(f"MCCA needs at least 2 aligned rows (positive pairs), got {n}.")
        k = check_n_components(self.n_components, min(n - 1, sum(V.shape[1] for V in views)),
                               what="min(rows - 1, total features)")
        means = [V.mean(axis=0) for V in views]
        stds = []
        for V in views:
            s = V.std(axis=0, ddof=1) if self.scale else np.ones(V.shape[1])
            stds.append(np.where(s == 0, 1.0, s))
        self.eigenvalues_, dirs = mcca_directions(
            [(V - m) / s for V, m, s in zip(views, means, stds, strict=True)], k, reg)
        return means, [(W / s[:, None]).T for W, s in zip(dirs, stds, strict=True)]
