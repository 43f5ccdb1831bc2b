"""Local Fisher discriminant analysis (Sugiyama, JMLR 2007).

LFDA is Fisher discriminant analysis with the pairs of a class weighted by their affinity
``A_ij = exp(−‖x_i − x_j‖² / (σ_i σ_j))``, ``σ_i`` the distance from ``x_i`` to its ``k``-th
nearest neighbour in its class (local scaling): with

    S_lw = ½ Σ_ij W_lw,ij (x_i − x_j)(x_i − x_j)ᵀ,  W_lw,ij = A_ij / n_c     (same class c), 0
    S_lb = ½ Σ_ij W_lb,ij (x_i − x_j)(x_i − x_j)ᵀ,  W_lb,ij = A_ij (1/n − 1/n_c) (same), 1/n

(the paper's eq. 13-14) the transform is the top generalised eigenvectors of
``S_lb v = λ S_lw v``, scaled by ``√λ`` ("weighted"). Multimodal classes keep their clusters
apart instead of being collapsed to one mean.

metric-learn 0.7.0's ``LFDA`` differs from the paper (and from Sugiyama's reference code) in two
places that :func:`local_fisher_scatters` can reproduce (``reproduce_metric_learn=True``):
its ``σ`` are not the samples' k-th neighbour distances (it takes column ``k`` of the
column-partitioned distance matrix, ``np.partition(dist, k, axis=0)[:, k]``, where the k-th
smallest per sample is row ``k``), and its between-class matrix is ``S_lb + 2 S_lw``
(``tSb -= outer/n - tSw`` adds ``tSw`` that the reference code subtracts): the eigenvectors are
the same, the eigenvalues ``λ + 2``, so its "weighted" scaling is ``√(λ + 2)``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from crossmetric._base import squared_euclidean_matrix
from crossmetric._utils.checks import check_choice, check_n_components
from crossmetric.learners._sample_forms import _SampleFormMetric

__all__ = ["LFDA", "local_fisher_scatters", "lfda_components"]


def local_fisher_scatters(X: np.ndarray, labels: np.ndarray, k: int, *,
                          reproduce_metric_learn: bool = False):
    """The local between- and within-class scatter matrices ``(S_lb, S_lw)`` (d × d).

    ``k``: neighbour of the local scaling (capped per class at ``n_c − 1``).
    ``reproduce_metric_learn``: metric-learn 0.7.0's two deviations (module docstring).
    """
    n, d = X.shape
    Sw = np.zeros((d, d))
    Sb = np.zeros((d, d))
    for c in np.unique(labels):
        Xc = X[labels == c]
        nc = Xc.shape[0]
        dist = np.maximum(squared_euclidean_matrix(Xc, Xc), 0.0)
        np.fill_diagonal(dist, 0.0)
        kc = min(k, nc - 1)
        if reproduce_metric_learn:
            sigma = np.sqrt(np.partition(dist, kc, axis=0)[:, kc])
        else:
            sigma = np.sqrt(np.partition(dist, kc, axis=1)[:, kc])
        scale = np.outer(sigma, sigma)
        with np.errstate(divide="ignore", invalid="ignore"):
            A = np.exp(-dist / scale)
        A[scale == 0] = 0.0
        # G = ½ Σ_ij A_ij (x_i − x_j)(x_i − x_j)ᵀ = Xcᵀ (diag(A 1) − A) Xc
        G = Xc.T @ (A.sum(0)[:, None] * Xc) - Xc.T @ A @ Xc
        s = Xc.sum(0)
        Sb += G / n - (nc / n) * (Xc.T @ Xc) + np.outer(s, s) / n
        Sw += G / nc
    s = X.sum(0)
    # + ½ Σ_all (1/n) (x_i − x_j)(x_i − x_j)ᵀ, then the same-class weight A(1/n − 1/n_c)
    Sb += X.T @ X - np.outer(s, s) / n
    Sb += Sw if reproduce_metric_learn else -Sw
    return (Sb + Sb.T) / 2, (Sw + Sw.T) / 2


def lfda_components(Sb: np.ndarray, Sw: np.ndarray, n_components: int,
                    embedding_type: str = "weighted") -> np.ndarray:
    """The top ``n_components`` generalised eigenvectors of ``Sb v = λ Sw v`` as rows."""
    d = Sb.shape[0]
    try:
        vals, vecs = scipy.linalg.eigh(Sb, Sw, subset_by_index=[d - n_components, d - 1])
    except np.linalg.LinAlgError:
        raise ValueError("LFDA: the local within-class scatter is singular (constant or "
                         "linearly dependent features); reduce the features first, e.g. "
                         "with PCA.") from None
    order = np.argsort(-vals)
    vals, vecs = vals[order], vecs[:, order]
    if embedding_type == "weighted":
        vecs = vecs * np.sqrt(np.maximum(vals, 0.0))
    elif embedding_type == "orthonormalized":
        vecs, _ = np.linalg.qr(vecs)
    return vecs.T


class LFDA(_SampleFormMetric):
    """Local Fisher discriminant analysis (metric-learn 0.7.0's ``LFDA``, the paper's scatters).

    Supervised linear dimension reduction for multimodal classes (module docstring): a
    generalised eigenproblem, no iterations. ``fit(X, y)`` takes class labels; given pairs and
    +1/-1 labels instead, the classes are the connected components of the positive pairs.

    Parameters
    ----------
    n_components : int or None, default=None
        Dimension of the learned space; all features when None.
    k : int or None, default=None
        Neighbour of the local scaling ``σ_i``; ``min(7, n_features − 1)`` when None (as
        metric-learn), reduced to ``n_features − 1`` with a warning when larger.
    embedding_type : {"weighted", "orthonormalized", "plain"}, default="weighted"
        Eigenvectors scaled by ``√λ``, orthonormalised, or as they are.
    preprocessor : array-like, optional
        Samples that index pairs point into (pair form only).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)

    Raises
    ------
    ValueError
        If the local within-class scatter is singular (constant features: reduce them first).

    References
    ----------
    M. Sugiyama, "Dimensionality reduction of multimodal labeled data by local Fisher
    discriminant analysis", JMLR 8, 2007.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import LFDA
    >>> X, y = load_iris(return_X_y=True)
    >>> lfda = LFDA(k=2, n_components=2).fit(X, y)
    >>> lfda.transform(X).shape
    (150, 2)
    """

    def __init__(self, n_components=None, k=None, embedding_type="weighted",
                 preprocessor=None):
        self.n_components = n_components
        self.k = k
        self.embedding_type = embedding_type
        self.preprocessor = preprocessor

    def fit(self, X, y):
        """Learn the metric from samples and class labels (or from pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        if self._is_pair_form(X):
            return super().fit(X, y)
        return self._fit_class_samples(X, y)

    def _fit_labels(self, X, labels):
        check_choice(self.embedding_type, "embedding_type",
                     ("weighted", "orthonormalized", "plain"))
        d = X.shape[1]
        dim = d if self.n_components is None else check_n_components(self.n_components, d)
        self.components_ = lfda_components(
            *local_fisher_scatters(X, labels, self._neighbour(d)), dim, self.embedding_type)

    def _neighbour(self, d: int) -> int:
        if self.k is None:
            return max(min(7, d - 1), 1)
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise ValueError(f"k must be a positive integer or None, got {self.k!r}.")
        if self.k >= d:
            warnings.warn(f"LFDA: k={self.k} is too large, using {max(d - 1, 1)} instead.",
                          UserWarning, stacklevel=4)
            return max(d - 1, 1)
        return int(self.k)
