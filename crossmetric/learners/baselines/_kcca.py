"""Regularised kernel CCA (Hardoon, Szedmak & Shawe-Taylor, Neural Computation 2004).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from crossmetric._base import CrossModalMixin, with_complement
from crossmetric._utils.checks import check_n_components, check_positive_scalar
from crossmetric._utils.checks import per_modality as _pair_param
from crossmetric.kernels import (
    _NEEDS_GAMMA,
    KernelMap,
    NystroemMap,
    check_kernel_approximation,
    estimate_gamma,
)
from crossmetric.learners._auto_grids import (
    COMPONENT_CANDIDATES,
    KCCA_GAMMA_SCALES,
    KCCA_REG_GRID,
)
from crossmetric.learners._held_out_choice import HeldOutChoice
from crossmetric.learners.baselines._common import (
    _check_distance,
    _l2_normalize,
    _positive_samples,
    finish_embedding,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["KCCA"]


class KCCA(HeldOutChoice, CrossModalMixin, BaseEstimator):
    """Regularised kernel CCA (Hardoon, Szedmak & Shawe-Taylor, Neural Computation 2004).

    Fitted on the positive pairs ``(x_p, y_p)``, ``p = 1..n``. With centred kernel matrices
    ``K_x = U_x S_x U_xᵀ``, ``K_y = U_y S_y U_yᵀ`` the regularised problem of Hardoon et al.
    (§3.2: ``max αᵀK_xK_yβ / √((αᵀK_x²α + κ_x αᵀK_xα)(βᵀK_y²β + κ_y βᵀK_yβ))``) is solved
    exactly through the SVD of

        T = (S_x + κ_x)^{-1/2} S_x^{1/2} U_xᵀ U_y S_y^{1/2} (S_y + κ_y)^{-1/2} = P Σ Qᵀ,

    whose singular values are the regularised canonical correlations; a new sample is mapped
    to ``P_kᵀ (S_x + κ_x)^{-1/2} S_x^{-1/2} U_xᵀ k_c(x)`` with ``k_c(x)`` its centred kernel row
    (likewise for ``y``). Cost ``O(n³)`` for ``n`` positive pairs (two eigendecompositions);
    Hardoon et al.'s partial Gram-Schmidt approximation is not needed at the sizes of the
    papers' experiments.

    Parameters
    ----------
    n_components : int or "auto", default=10
        ``"auto"``: chosen among 10, 20, 32, 64 and 128 on held-out training identities, as
        :class:`~crossmetric.CCA`'s (10 without identities).
    kernel : str or (str, str), default="rbf"
        A kernel of :mod:`crossmetric.kernels` for both modalities or a pair.
    gamma : float or (float, float) or "auto", optional
        Kernel bandwidths; ``None`` uses the scale-free default of :mod:`crossmetric.kernels`.
        ``"auto"``: chosen as ``n_components`` among 1 and 0.1 times that default (a
        ``(γ_x, γ_y)`` pair in ``chosen_params_``; the default without identities).
    reg : float > 0 or "auto", default=0.1
        ``κ`` relative to the mean eigenvalue of each centred kernel matrix
        (``κ_x = reg · tr(K_x) / n``); Hardoon et al. tune ``κ`` directly. ``"auto"``: chosen
        among 0.1, 0.01 and 1 as ``n_components`` (0.1 without identities).
    distance : {"cosine", "euclidean"}, default="cosine"
        Comparison of the canonical variates (see the module docstring).
    preprocessor : tuple (X, Y), optional
    kernel_approximation : {"auto", None, "nystroem"}, default="auto"
        ``"auto"``: exact kernels up to
        :data:`~crossmetric.kernels.EXACT_KERNEL_MAX_SAMPLES` positive pairs, Nyström above
        (with a note). ``"nystroem"``: solve the same problem on the Nyström kernel ``K̃ = Φ Φᵀ`` of
        ``n_landmarks`` random positive-pair samples per modality
        (:class:`~crossmetric.kernels.NystroemMap`), through the thin SVD of the centred
        features ``Φ_c = U S Vᵀ`` (``K̃_c = U S² Uᵀ``): O(n·m²) time and O(n·m) memory instead
        of O(n³) and O(n²). The embedding is then linear in ``φ(x)``: a linear CCA tower on the
        Nyström features. With all samples as landmarks it equals the exact fit.
    n_landmarks : int, default=1000

    Attributes
    ----------
    correlations_ : ndarray of shape (n_components,)
        Regularised canonical correlations (descending).
    kernel_map_x_, kernel_map_y_ : crossmetric.kernels.KernelMap
    dual_coef_x_, dual_coef_y_ : ndarray of shape (n, n_components)
        Projection of centred kernel rows (exact kernels).
    feature_map_x_, feature_map_y_ : NystroemMap
        Nyström only: centred maps (``center=True``), with the projections
        ``feature_coef_x_`` / ``_y_`` of shape (m, n_components).
    chosen_params_, untrained_, selection_scores_
        As in :class:`~crossmetric.CCA`: with an ``"auto"`` parameter on views of one width the
        held-out choice may keep the untrained distance (``untrained_components_``: both
        towers the identity on the span of the training samples, the rest kept), where no
        kernel setting beats it on the held-out identities.

    Examples
    --------
    >>> from crossmetric import KCCA, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = KCCA(n_components=4, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    #: kernel on the samples (n × n whatever the width): the protocols'
    #: ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True
    _auto_grid = {"n_components": COMPONENT_CANDIDATES, "reg": KCCA_REG_GRID,
                  "gamma": KCCA_GAMMA_SCALES}
    _auto_fallback = {"n_components": 10, "reg": 0.1, "gamma": None}
    #: the held-out choice offers the untrained distance too: the towers then skip the kernel
    _holds_untrained = True

    def __init__(self, n_components: int | str = 10, *, kernel="rbf", gamma=None,
                 reg: float | str = 0.1,
                 distance: str = "cosine", preprocessor=None, kernel_approximation="auto",
                 n_landmarks: int = 1000, random_state=None):
        self.kernel_approximation = kernel_approximation
        self.n_landmarks = n_landmarks
        self.random_state = random_state
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.reg = reg
        self.distance = distance
        self.preprocessor = preprocessor

    def _auto_values(self, name: str, data: PairData, y: np.ndarray) -> tuple:
        """``gamma="auto"``: each scale of :data:`KCCA_GAMMA_SCALES` times each view's
        scale-free bandwidth on the positive pairs' samples (what ``gamma=None`` uses), as a
        ``(γ_x, γ_y)`` pair; a view whose kernel has no bandwidth keeps ``None``."""
        if name != "gamma":
            return super()._auto_values(name, data, y)
        kernels = _pair_param(self.kernel, "kernel")
        base = [estimate_gamma(V, k) if k in _NEEDS_GAMMA else None
                for V, k in zip(_positive_samples(data, y), kernels, strict=True)]
        return tuple(tuple(None if g is None else scale * g for g in base)
                     for scale in KCCA_GAMMA_SCALES)

    @staticmethod
    def _centered_eig(K: np.ndarray):
        col = K.mean(axis=0)
        total = col.mean()
        Kc = K - col[None, :] - col[:, None] + total
        s, U = np.linalg.eigh((Kc + Kc.T) / 2)
        keep = s > max(s.max(), 0.0) * 1e-10
        return s[keep], U[:, keep], col, total, np.trace(Kc)

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        _check_distance(self.distance)
        reg = check_positive_scalar(self.reg, "reg")
        kx, ky = _pair_param(self.kernel, "kernel")
        gx, gy = _pair_param(self.gamma, "gamma")
        Xp, Yp = _positive_samples(data, y)
        n = Xp.shape[0]
        for attr in ("kernel_map", "feature_map", "feature_mean", "feature_coef", "dual_coef"):
            for side in "xy":
                self.__dict__.pop(f"{attr}_{side}_", None)
        self.__dict__.pop("untrained_components_", None)
        if check_kernel_approximation(self.kernel_approximation, n_samples=n,
                                      learner="KCCA") == "nystroem":
            self._fit_nystroem(Xp, Yp, (kx, ky), (gx, gy), reg)
            return
        self.kernel_map_x_ = KernelMap(kx, gamma=gx).fit(Xp)
        self.kernel_map_y_ = KernelMap(ky, gamma=gy).fit(Yp)
        sx, Ux, self.kernel_col_mean_x_, self.kernel_mean_x_, trx = self._centered_eig(
            self.kernel_map_x_.train_kernel())
        sy, Uy, self.kernel_col_mean_y_, self.kernel_mean_y_, try_ = self._centered_eig(
            self.kernel_map_y_.train_kernel())
        k = check_n_components(self.n_components, min(sx.size, sy.size),
                               what="the rank of the centred kernel matrices")
        kap_x, kap_y = reg * trx / n, reg * try_ / n
        ax = np.sqrt(sx / (sx + kap_x))
        ay = np.sqrt(sy / (sy + kap_y))
        T = (ax[:, None] * (Ux.T @ Uy)) * ay[None, :]
        P, sig, Qt = np.linalg.svd(T, full_matrices=False)
        self.correlations_ = sig[:k]
        self.dual_coef_x_ = Ux @ (P[:, :k] / np.sqrt(sx * (sx + kap_x))[:, None])
        self.dual_coef_y_ = Uy @ (Qt[:k].T / np.sqrt(sy * (sy + kap_y))[:, None])

    def _fit_nystroem(self, Xp, Yp, kernels, gammas, reg) -> None:
        """The exact solution below on ``K̃_c = Φ_c Φ_cᵀ``, from the thin SVD of ``Φ_c``."""
        n = Xp.shape[0]
        rng = check_random_state(self.random_state)
        parts = []
        for side, S, kernel, gamma in zip("xy", (Xp, Yp), kernels, gammas, strict=True):
            # the centred kernel's features (the map subtracts their training mean)
            fm = NystroemMap(kernel, gamma=gamma, n_landmarks=self.n_landmarks,
                             random_state=rng, center=True).fit(S)
            U, sv, Vt = np.linalg.svd(fm.transform(S), full_matrices=False)
            s = sv ** 2
            keep = s > max(s.max(initial=0.0), 0.0) * 1e-10
            setattr(self, f"feature_map_{side}_", fm)
            parts.append((s[keep], U[:, keep], Vt[keep].T * sv[keep], s.sum()))
        (sx, Ux, Vx, trx), (sy, Uy, Vy, try_) = parts
        k = check_n_components(self.n_components, min(sx.size, sy.size),
                               what="the rank of the centred Nyström features")
        kap_x, kap_y = reg * trx / n, reg * try_ / n
        T = (np.sqrt(sx / (sx + kap_x))[:, None] * (Ux.T @ Uy)) * np.sqrt(sy / (sy + kap_y))
        P, sig, Qt = np.linalg.svd(T, full_matrices=False)
        self.correlations_ = sig[:k]
        # centred kernel row of x is φ_c(x) Φ_cᵀ = φ_c(x) V S Uᵀ, so Uᵀ k_c(x) = φ_c(x) V S
        self.feature_coef_x_ = Vx @ (P[:, :k] / np.sqrt(sx * (sx + kap_x))[:, None])
        self.feature_coef_y_ = Vy @ (Qt[:k].T / np.sqrt(sy * (sy + kap_y))[:, None])

    def _finish(self, F: np.ndarray) -> np.ndarray:
        return _l2_normalize(F) if self.distance == "cosine" else F

    @staticmethod
    def _centre_rows(Kr: np.ndarray, col: np.ndarray, total: float) -> np.ndarray:
        return Kr - col[None, :] - Kr.mean(axis=1, keepdims=True) + total

    def _embed_nystroem(self, S: np.ndarray, side: str) -> np.ndarray:
        Phi = getattr(self, f"feature_map_{side}_").transform(S)   # centred
        return self._finish(Phi @ getattr(self, f"feature_coef_{side}_"))

    def __setstate__(self, state):
        # fitted before its Nyström maps centred themselves: the mean moves into the map
        for side in "xy":
            mean = state.pop(f"feature_mean_{side}_", None)
            if mean is not None:
                fm = state[f"feature_map_{side}_"]
                fm.center, fm.feature_mean_ = True, mean
        super().__setstate__(state)

    def _set_untrained(self, components: np.ndarray) -> None:
        self.untrained_components_ = components

    def _embed_untrained(self, S: np.ndarray) -> np.ndarray:
        return finish_embedding(self, with_complement(self, S @ self.untrained_components_.T, S))

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        if hasattr(self, "untrained_components_"):
            return self._embed_untrained(X)
        if hasattr(self, "feature_map_x_"):
            return self._embed_nystroem(X, "x")
        Kr = self.kernel_map_x_.transform(X)
        Kc = self._centre_rows(Kr, self.kernel_col_mean_x_, self.kernel_mean_x_)
        return self._finish(Kc @ self.dual_coef_x_)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        if hasattr(self, "untrained_components_"):
            return self._embed_untrained(Y)
        if hasattr(self, "feature_map_y_"):
            return self._embed_nystroem(Y, "y")
        Kr = self.kernel_map_y_.transform(Y)
        Kc = self._centre_rows(Kr, self.kernel_col_mean_y_, self.kernel_mean_y_)
        return self._finish(Kc @ self.dual_coef_y_)
