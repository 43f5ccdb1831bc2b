"""What the baselines share: the latent-space distance choice, the positive pairs' samples,
and :class:`LinearTowers` (also the base of MvDA, CSR and MCCA).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import CrossModalMixin
from crossmetric.learners._held_out_choice import HeldOutChoice
from crossmetric.pairs._pair_data import PairData

__all__ = ["LinearTowers"]


_DISTANCES = ("cosine", "euclidean")


def _check_distance(distance) -> str:
    if distance not in _DISTANCES:
        raise ValueError(f"distance must be one of {_DISTANCES}, got {distance!r}.")
    return distance


def _l2_normalize(F: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(F, axis=1, keepdims=True)
    return F / np.where(norms > 0, norms, 1.0)


def _positive_samples(data: PairData, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-aligned samples of the positive pairs (the only pairs CCA-like methods use)."""
    pos = y == 1
    return data.X[data.ix[pos]], data.Y[data.iy[pos]]


class LinearTowers(HeldOutChoice, CrossModalMixin, BaseEstimator):
    """Embedding ``x ↦ components_x_ (x − mean_x_)``, ``y ↦ components_y_ (y − mean_y_)``,
    L2-normalised when ``distance="cosine"`` (the linear two-tower baselines); a subclass's
    ``_auto_grid`` parameters may be ``"auto"`` (:class:`HeldOutChoice`)."""

    #: fitted in the span of the training samples (exact on wide views): the protocols'
    #: ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True

    def _finish(self, F: np.ndarray) -> np.ndarray:
        return _l2_normalize(F) if self.distance == "cosine" else F

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._finish((X - self.mean_x_) @ self.components_x_.T)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._finish((Y - self.mean_y_) @ self.components_y_.T)
