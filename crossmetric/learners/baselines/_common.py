"""What the baselines share: the latent-space distance choice, the positive pairs' samples,
and :class:`LinearTowers` (also the base of MvDA, CSR and MCCA).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import CrossModalMixin, with_complement
from crossmetric.learners._held_out_choice import HeldOutChoice
from crossmetric.pairs._pair_data import PairData

__all__ = ["LinearTowers", "finish_embedding"]


_DISTANCES = ("cosine", "euclidean")


def _check_distance(distance) -> str:
    if distance not in _DISTANCES:
        raise ValueError(f"distance must be one of {_DISTANCES}, got {distance!r}.")
    return distance


def _l2_normalize(F: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(F, axis=1, keepdims=True)
    return F / np.where(norms > 0, norms, 1.0)


def finish_embedding(model, F: np.ndarray) -> np.ndarray:
    """A tower's last step: L2-normalised when the model compares by cosine, except when it
    holds the untrained distance (``untrained_``: compared as it is,
    :class:`~crossmetric.learners._held_out_choice.HeldOutChoice`)."""
    if model.distance == "cosine" and not getattr(model, "untrained_", False):
        return _l2_normalize(F)
    return F


def _positive_samples(data: PairData, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-aligned samples of the positive pairs (the only pairs CCA-like methods use)."""
    pos = y == 1
    return data.X[data.ix[pos]], data.Y[data.iy[pos]]


class LinearTowers(HeldOutChoice, CrossModalMixin, BaseEstimator):
    """Embedding ``x ↦ components_x_ (x − mean_x_)``, ``y ↦ components_y_ (y − mean_y_)``,
    L2-normalised when ``distance="cosine"`` (the linear two-tower baselines); a subclass's
    ``_auto_grid`` parameters may be ``"auto"`` (:class:`HeldOutChoice`), and the choice may
    keep the untrained distance (both towers the identity on the span of the training samples,
    the rest kept: :mod:`crossmetric._solvers.span`)."""

    #: fitted in the span of the training samples (exact on wide views): the protocols'
    #: ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True

    _holds_untrained = True

    def _set_untrained(self, components: np.ndarray) -> None:
        self.mean_x_ = self.mean_y_ = np.zeros(components.shape[1])
        self.components_x_ = self.components_y_ = components

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return finish_embedding(
            self, with_complement(self, (X - self.mean_x_) @ self.components_x_.T, X))

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return finish_embedding(
            self, with_complement(self, (Y - self.mean_y_) @ self.components_y_.T, Y))
