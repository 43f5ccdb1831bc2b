"""Baselines the papers compare against, behind the common pair-learner API.

``Euclidean`` is the untrained distance, the floor of every results table.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import PairData, SingleModalMixin

__all__ = ["Euclidean"]


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
