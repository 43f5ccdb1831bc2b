"""The view step before a learner: PCA of each view (or one joint PCA) and the CCA of the
"-C" variants, fitted on a split's training pairs only."""

from __future__ import annotations

import numpy as np

from crossmetric._checks import as_float_array
from crossmetric.protocols.splits import Split

__all__ = ["CCAProjection"]


class CCAProjection:
    """Regularised linear CCA used to bring two views to one common dimension ("-C" variants).

    The CML-AUC paper (§IV-B) runs single-modal learners on CCA-processed features of the two
    modalities (PCA-C, LMNN-C, LDML-C, ...). The directions come from the library's one closed
    form, :func:`crossmetric.baselines.cca_directions` (also behind :class:`crossmetric.CCA`);
    scikit-learn's NIPALS ``CCA`` needs about a minute for 32 components on the 1,800 digits.
    ``transform`` returns ``((X − x̄) A, (Y − ȳ) B)``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import CCAProjection
    >>> rng = np.random.RandomState(0)
    >>> Z = rng.randn(50, 2)
    >>> X, Y = Z @ rng.randn(2, 6), Z @ rng.randn(2, 4) + 0.01 * rng.randn(50, 4)
    >>> proj = CCAProjection(n_components=2).fit(X, Y)
    >>> bool(proj.correlations_.min() > 0.99)
    True
    """

    def __init__(self, n_components: int = 32, reg: float = 1e-3):
        self.n_components = n_components
        self.reg = reg

    def fit(self, X: np.ndarray, Y: np.ndarray) -> CCAProjection:
        """Fit on row-aligned views (row ``r`` of ``X`` and ``Y`` = one matching pair)."""
        from crossmetric.baselines import cca_directions

        X = as_float_array(X, "X", ndim=2)
        Y = as_float_array(Y, "Y", ndim=2)
        n = X.shape[0]
        if Y.shape[0] != n or n < 2:
            raise ValueError(f"CCA needs >= 2 row-aligned pairs, got {n} and {Y.shape[0]} rows.")
        k = min(int(self.n_components), X.shape[1], Y.shape[1], n - 1)
        self.mean_x_, self.mean_y_ = X.mean(0), Y.mean(0)
        self.x_weights_, self.y_weights_, self.correlations_ = cca_directions(
            X - self.mean_x_, Y - self.mean_y_, k, self.reg)
        return self

    def transform(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (X - self.mean_x_) @ self.x_weights_, (Y - self.mean_y_) @ self.y_weights_


def _pca_views(X: np.ndarray, Y: np.ndarray, split: Split, k: int):
    """Each view reduced by PCA to ``k`` dims, fitted on the rows the training pairs use."""
    return _pca_fit_views(X, Y, split.train_pairs, k)


def _pca_fit_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray, k: int,
                   joint: bool = False):
    """Each view's PCA fitted on its training rows -- exact, in the span of the rows when they
    are fewer than the features (:func:`crossmetric.baselines.fit_pca`); ``joint``: one PCA
    fitted on both views' training rows (views in one feature space, e.g. one descriptor of a
    sketch and of a photo), so that coordinates stay comparable."""
    from crossmetric.baselines import fit_pca

    rx, ry = np.unique(train_pairs[:, 0]), np.unique(train_pairs[:, 1])
    if joint:
        kk = min(int(k), X.shape[1], rx.size + ry.size)
        pca = fit_pca(np.vstack([X[rx], Y[ry]]), kk, random_state=0)
        return pca.transform(X), pca.transform(Y)
    out = []
    for V, rows in ((X, rx), (Y, ry)):
        kk = min(int(k), V.shape[1], rows.size)
        out.append(fit_pca(V[rows], kk, random_state=0).transform(V))
    return out[0], out[1]


def _is_cross_modal(est) -> bool:
    return bool(getattr(est, "_cross_modal", True))


def _uses_images(est) -> bool:
    return int(getattr(est, "_sample_ndim", 1)) > 1


def _prepare_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray,
                   train_y: np.ndarray, est, options: dict):
    """The per-split preprocessing (PCA, then CCA for single-modal learners), fitted on the
    training pairs only."""
    Xs, Ys = X, Y
    if options.get("pca"):
        Xs, Ys = _pca_fit_views(X, Y, train_pairs, options["pca"],
                                joint=options.get("pca_joint", False))
    if options.get("cca") and not _is_cross_modal(est):
        pos = train_pairs[train_y == 1]
        proj = CCAProjection(options["cca_components"]).fit(Xs[pos[:, 0]], Ys[pos[:, 1]])
        Xs, Ys = proj.transform(Xs, Ys)
    return Xs, Ys
