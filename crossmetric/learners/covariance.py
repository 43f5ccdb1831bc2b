"""The inverse-covariance (Mahalanobis) baseline: ``M = Σ⁻¹`` of the training samples."""

from __future__ import annotations

import numpy as np
from scipy.linalg import pinvh
from sklearn.base import BaseEstimator

from crossmetric.learners._mahalanobis_common import (
    SampleMahalanobisMixin,
    components_from_metric,
)

__all__ = ["Covariance"]


class Covariance(SampleMahalanobisMixin, BaseEstimator):
    """The classical Mahalanobis distance: ``M`` = the (pseudo-)inverse sample covariance.

    Unsupervised and deterministic (metric-learn 0.7.0's ``Covariance``): ``fit(X)`` sets
    ``M = pinv(cov(X))`` (``1 / var`` for one feature); the pair members (``pair_distance``,
    ``transform``, ``get_mahalanobis_matrix``, ``calibrate_threshold``) then work as for the
    pair learners. ``transform`` whitens the samples.

    Parameters
    ----------
    preprocessor : array-like, optional
        Samples that integer index pairs given to ``pair_distance`` refer to.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        ``L`` with ``M = Lᵀ L``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import Covariance
    >>> X = load_iris().data
    >>> cov = Covariance().fit(X)
    >>> Z = cov.transform(X)
    >>> bool(abs(Z.T @ (Z - Z.mean(0)) / (len(Z) - 1) - np.eye(4)).max() < 1e-8)  # whitened
    True
    """

    def __init__(self, preprocessor=None):
        self.preprocessor = preprocessor

    def fit(self, X, y=None):
        """Compute ``M = pinv(cov(X))``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
            The samples; or pairs in any input form of the pair learners (then ``y`` are
            their +1 / -1 labels, the covariance is that of the distinct samples of the
            pairs and ``threshold_`` is set from them).
        y : ignored, or the pair labels

        Returns
        -------
        self
        """
        if self._is_pairs(X):
            return self._fit_pairs(X, y)
        self._fit_samples(self._samples(X))
        return self

    def _fit(self, data, y) -> None:
        self._fit_samples(data.X)

    def _fit_samples(self, X: np.ndarray) -> None:
        if X.shape[0] < 2:
            raise ValueError(f"Covariance needs at least 2 distinct samples, got {X.shape[0]}.")
        C = np.atleast_2d(np.cov(X, rowvar=False))
        M = 1.0 / C if C.size == 1 else pinvh(C)
        self._set_fitted_shape(X.shape[1])
        self.components_ = components_from_metric(np.atleast_2d(M))
