"""The fitted :class:`crossmetric.learners.gsm.GSM`'s towers and inspection: the components from
the free parameters, S of reduced features under given parameters, the embeddings x̃, ỹ of eq. (10),
the aggregation of eq. (12), the blocks of eq. (1) and the fixed reductions."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from crossmetric.learners._gsm_measure import embed, gsm_components, gsm_matrix, gsm_rowwise
from crossmetric.learners._gsm_reduction import apply_reducer

__all__ = ["GSMTowersMixin"]


class GSMTowersMixin:
    """The measure of GSM's free parameters (``structure``): the fitted components, S during
    training, aggregation and inspection of a fitted GSM (``reducer_x_``, ``components_x_``,
    ``f_``); the towers ``_embed_x`` / ``_embed_y`` stay on the class (:mod:`crossmetric.export`
    finds a learner's graph form by the class that defines them)."""

    #: the fixed reduction (a PCA fitted on the training samples) is GSM's own, and with the
    #: identity start the untrained distance outside it is kept: the protocols'
    #: ``pca_components="auto"`` leaves the views as they are
    _reduces_to_span = True

    def _set_components(self, params: dict, f0: float, r: int, p_x: int, p_y: int) -> None:
        """The fitted attributes of the free parameters ``params``: ``params_``,
        ``components_x_`` = ``[L_A; L_Cx; dᵀ]``, ``components_y_`` = ``[L_B; L_Cy; eᵀ]``,
        ``f_`` and ``n_components_`` (``r``)."""
        LA, LB, LCx, LCy, d, e, f = gsm_components(params, self.structure, f0, r, p_x, p_y)
        self.params_ = params
        self.components_x_ = np.vstack([LA, LCx, d[None, :]])
        self.components_y_ = np.vstack([LB, LCy, e[None, :]])
        self.f_ = float(f)
        self.n_components_ = r

    def _similarity(self, params: dict, A: np.ndarray, B: np.ndarray, f0: float,
                    r: int) -> np.ndarray:
        """S of every pair of rows of ``A`` and ``B`` (reduced features) under ``params``."""
        LA, LB, LCx, LCy, d, e, f = gsm_components(params, self.structure, f0, r,
                                                   A.shape[1], B.shape[1])
        return gsm_matrix(embed(A, LA, LCx, d), embed(B, LB, LCy, e), f)

    def _rowwise_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_rowwise(FX, FY, self.f_)

    def _matrix_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_matrix(FX, FY, self.f_)

    def get_similarity_matrices(self) -> dict:
        """The blocks of eq. (1) on the reduced features: ``A, B, C, d, e, f``.

        ``A = L_Aᵀ L_A``, ``B = L_Bᵀ L_B``, ``C = −L_Cxᵀ L_Cy`` (eq. 2). Formed on request
        only (p × p matrices); S of a pair equals ``[x̄ᵀ ȳᵀ 1] M [x̄; ȳ; 1]`` with
        ``x̄ = reduce_x(x)``, ``ȳ = reduce_y(y)``.
        """
        check_is_fitted(self)
        r = self.n_components_
        Px, Py = self.components_x_, self.components_y_
        LA, LCx, d = Px[:r], Px[r:2 * r], Px[-1]
        LB, LCy, e = Py[:r], Py[r:2 * r], Py[-1]
        return {"A": LA.T @ LA, "B": LB.T @ LB, "C": -(LCx.T @ LCy), "d": d.copy(),
                "e": e.copy(), "f": self.f_}

    def reduce_x(self, X) -> np.ndarray:
        """The fixed linear reduction of the first modality (PCA or standardisation)."""
        check_is_fitted(self)
        return apply_reducer(self.reducer_x_, self._check_samples(X, "X", side="x"))

    def reduce_y(self, Y) -> np.ndarray:
        """The fixed linear reduction of the second modality (PCA or standardisation)."""
        check_is_fitted(self)
        return apply_reducer(self.reducer_y_, self._check_samples(Y, "Y", side="y"))
