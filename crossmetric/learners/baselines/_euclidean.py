"""The untrained distance, the floor of every results table.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import SingleModalMixin
from crossmetric.pairs._pair_data import PairData

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
