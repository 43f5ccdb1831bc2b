"""The fitted towers of :class:`~crossmetric.deep.model.DeepGSM`: embeddings and S̃.

:class:`EmbeddingMixin` embeds images -- arrays in blocks of ``eval_batch_size``, or lists of
image files read in a ``DataLoader`` -- into x̃ / ỹ (eq. 10) or the deep features, with
``test_flip`` (:mod:`crossmetric.deep.inference`), and aggregates S̃ (eq. 12) from them
(:mod:`crossmetric.learners._gsm_measure`).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from crossmetric.deep.data import is_file_list
from crossmetric.deep.descriptor import attach, describe
from crossmetric.deep.inference import embed_source, forward_blocks
from crossmetric.learners._gsm_measure import gsm_matrix, gsm_rowwise

__all__ = ["EmbeddingMixin"]


class EmbeddingMixin:
    """``transform_*``, ``features_*`` and the distances of a fitted DeepGSM.

    Comes before the pair-learner base in the bases: array input goes on to its
    ``transform_x`` / ``transform_y`` (validation, then ``_embed_x`` / ``_embed_y`` here).
    """

    # -------------------------------------------------------------------------- towers
    def _forward_blocks(self, images: np.ndarray, fn) -> np.ndarray:
        """``fn`` (a GSMNet ``embed_*`` / ``features_*``) in blocks, with ``test_flip``."""
        return forward_blocks(images, fn, batch_size=int(self.eval_batch_size),
                              flip=bool(self.test_flip), device=self.device_)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._with_descriptor(self._forward_blocks(X, self.net_.embed_x), X)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._with_descriptor(self._forward_blocks(Y, self.net_.embed_y), Y)

    def _with_descriptor(self, T: np.ndarray, images: np.ndarray) -> np.ndarray:
        """The components ``T`` of ``images`` joined by their descriptor rows (a descriptor
        branch, :mod:`crossmetric.deep.descriptor`); ``T`` itself without one."""
        if getattr(self, "descriptor_", None) is None:
            return T
        scale = float(self.net_.descriptor_scale().detach())
        return attach(T, describe(self.descriptor_, images).astype(np.float64), scale)

    def _embed_files(self, paths, side: str) -> np.ndarray:
        if getattr(self, "descriptor_", None) is not None:
            raise ValueError("a DeepGSM with a descriptor embeds image arrays, got a list of "
                             "files; load them first.")
        return embed_source(self.net_, paths, side, self.input_shape_, self.channels_,
                            self.device_, flip=bool(self.test_flip),
                            batch_size=int(self.eval_batch_size),
                            num_workers=int(self.num_workers)).double().cpu().numpy()

    def transform_x(self, X) -> np.ndarray:
        """x̃ (eq. 10) of first-domain images: an array, or a list of image files."""
        check_is_fitted(self)
        if is_file_list(X):
            return self._embed_files(X, "x")
        return super().transform_x(X)

    def transform_y(self, Y) -> np.ndarray:
        """ỹ (eq. 10) of second-domain images: an array, or a list of image files."""
        check_is_fitted(self)
        if is_file_list(Y):
            return self._embed_files(Y, "y")
        return super().transform_y(Y)

    def _rowwise_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_rowwise(FX, FY, self.f_)

    def _matrix_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_matrix(FX, FY, self.f_)

    def features_x(self, X) -> np.ndarray:
        """The learned deep features f₁(x) (L2-normalised, r wide; mirror-averaged with
        ``test_flip``)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(X, "X", side="x"),
                                    self.net_.features_x)

    def features_y(self, Y) -> np.ndarray:
        """The learned deep features f₂(y) (L2-normalised, r wide; mirror-averaged with
        ``test_flip``)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(Y, "Y", side="y"),
                                    self.net_.features_y)
