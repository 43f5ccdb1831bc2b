"""Coordinated local metrics (Saxena & Verbeek, 2015): the model behind :class:`~crossmetric.CLML`.

Soft assignments of the samples to the components of a Gaussian mixture
(:func:`sparsify_assignments`), the local embedding of eq. (3) and its gradient
(:func:`_local_embed`, :func:`_local_backprop`), and :class:`_LocalMetricsModel`, the part of
the estimator that fits the clustering, embeds samples and evaluates the objective. The
estimator itself (parameters, starting point, solver choice) is :mod:`crossmetric.learners.clml`.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA
from sklearn.mixture import GaussianMixture
from sklearn.utils.validation import check_is_fitted

from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric.learners._basis_guard import basis_starts, fit_in_basis, store_in_basis

__all__ = ["sparsify_assignments"]


def sparsify_assignments(P: np.ndarray, min_assignment: float = 0.01,
                         max_assignments: int | None = 3) -> np.ndarray:
    """Sparse soft assignments ``q`` from mixture posteriors ``P`` (n × k).

    The rule: keep, in each row, the ``max_assignments`` largest posteriors (all when ``None``),
    drop those below ``min_assignment``, but always keep the largest one; renormalise the kept
    values to sum to 1. Ties at the ``max_assignments`` boundary go to the lower cluster index.

    Parameters
    ----------
    P : ndarray of shape (n_samples, n_clusters)
        Posterior probabilities (rows sum to 1).
    min_assignment : float in [0, 1)
    max_assignments : int >= 1 or None

    Returns
    -------
    ndarray of shape (n_samples, n_clusters)
        Non-negative rows summing to 1 with at most ``max_assignments`` non-zeros.
    """
    n, k = P.shape
    keep = P >= min_assignment
    rows = np.arange(n)
    keep[rows, np.argmax(P, axis=1)] = True
    if max_assignments is not None and max_assignments < k:
        # stable sort of −P: largest first, lower index first among ties
        order = np.argsort(-P, axis=1, kind="stable")
        top = np.zeros_like(keep)
        top[rows[:, None], order[:, :max_assignments]] = True
        keep &= top
    q = np.where(keep, P, 0.0)
    q /= q.sum(axis=1, keepdims=True)
    return q


def _local_embed(X: np.ndarray, q: np.ndarray, Ls: np.ndarray, bs: np.ndarray) -> np.ndarray:
    """``z_i = Σ_s q_is (L_s x_i + b_s)`` (eq. 3), one cluster at a time over its members."""
    n = X.shape[0]
    Z = np.zeros((n, Ls.shape[1]))
    for s in range(Ls.shape[0]):
        rows = np.flatnonzero(q[:, s])
        if rows.size == 0:
            continue
        if rows.size == n:
            Z += q[:, s, None] * (X @ Ls[s].T + bs[s])
        else:
            Z[rows] += q[rows, s, None] * (X[rows] @ Ls[s].T + bs[s])
    return Z


def _local_backprop(X: np.ndarray, q: np.ndarray, dZ: np.ndarray, k: int):
    """Gradients ``∂ℓ/∂L_s = Σ_i q_is (∂ℓ/∂z_i) x_iᵀ`` and ``∂ℓ/∂b_s = Σ_i q_is ∂ℓ/∂z_i``."""
    p, d = dZ.shape[1], X.shape[1]
    gL = np.zeros((k, p, d))
    gb = np.zeros((k, p))
    n = X.shape[0]
    for s in range(k):
        rows = np.flatnonzero(q[:, s])
        if rows.size == 0:
            continue
        if rows.size == n:
            W = q[:, s, None] * dZ
            gL[s] = W.T @ X
        else:
            W = q[rows, s, None] * dZ[rows]
            gL[s] = W.T @ X[rows]
        gb[s] = W.sum(axis=0)
    return gL, gb


class _LocalMetricsModel:
    """The model of :class:`~crossmetric.learners.clml.CLML` without its fit: the fixed clustering
    (an optional PCA, then a Gaussian mixture whose sparsified posteriors are the assignments
    ``q``), the embedding ``z = Σ_s q_s (L_s x + b_s)`` and the objective ``J`` with its
    gradient. The estimator lists it first among its bases."""

    #: wide samples are fitted on a basis of theirs, with the untrained distance of the rest
    #: (:mod:`crossmetric.learners._basis_guard`): the protocols' ``pca_components="auto"``
    #: leaves them as they are
    _reduces_to_span = True

    def _fit_mixture(self, Xu: np.ndarray, scale: float = 1.0) -> None:
        """Steps (1)-(2): the optional PCA and the fixed clustering.

        ``scale``: the global scale of the samples (``CLML``'s ``input_scale_``); the
        mixture's ``reg_covar`` is multiplied by its square, so that the clustering of
        ``c · X`` is that of ``X``.
        """
        k = self.n_clusters
        n, d = Xu.shape
        # (1)-(2) the fixed clustering
        n_pca = self._gmm_dims(n, d)
        if n_pca is not None:
            self.pca_ = PCA(n_components=n_pca, random_state=self.random_state).fit(Xu)
            G = self.pca_.transform(Xu)
        else:
            self.pca_ = None
            G = Xu
        self.gmm_ = GaussianMixture(n_components=k, covariance_type=self.covariance_type,
                                    reg_covar=self.reg_covar * scale ** 2,
                                    random_state=self.random_state).fit(G)

    def _gmm_dims(self, n_samples: int, d: int) -> int | None:
        """PCA dimension before the mixture (``None``: the mixture sees the raw features)."""
        g = self.gmm_pca_components
        if isinstance(g, str):
            if g != "auto":
                raise ValueError(f"gmm_pca_components must be an int, 'auto' or None, "
                                 f"got {g!r}.")
            return min(32, n_samples) if d > 32 else None
        return g

    def _fit_in_basis(self, Xs, q, i, j, y, val, k: int, p: int, scale: float) -> None:
        """Step (3) on a basis of the training samples ``Xs`` (divided by ``scale``), with the
        untrained distance of the rest kept by the identity start
        (:mod:`crossmetric.learners._basis_guard`); ``q``: their assignments."""
        form, starts, folds = basis_starts(self, Xs, i, j, y, p, val is not None)
        r, qv = form.coords.shape[1], {}

        def embed(t, Vb, side):  # the held-out assignments are fixed: once a side
            Ls, bs, _ = self._unpack(t, k, p, r)
            if side not in qv:
                qv[side] = self._posteriors(val.data.X if side == "x" else val.data.Y, True)
            return _local_embed(Vb, qv[side], Ls, bs)

        theta, c = fit_in_basis(
            self, form, starts, folds, i, j, y, val, scale,
            pack=lambda L0, b0: np.r_[np.tile(L0.ravel(), k), np.zeros(k * p), b0],
            loss_grad=lambda t, obj: self._loss_grad(t, form.coords, q, obj, k, p),
            embed=embed)
        Ls, self.local_offsets_, self.bias_ = self._unpack(theta, k, p, r)
        self.local_components_ = store_in_basis(self, Ls, form, c, scale)

    @staticmethod
    def _unpack(theta: np.ndarray, k: int, p: int, d: int):
        nL = k * p * d
        return (theta[:nL].reshape(k, p, d), theta[nL:nL + k * p].reshape(k, p),
                float(theta[-1]))

    def _loss_grad(self, theta: np.ndarray, Xu: np.ndarray, q: np.ndarray,
                   objective: PairLogisticObjective, k: int,
                   p: int) -> tuple[float, np.ndarray]:
        """Objective ``J`` and its gradient at ``theta = [vec(L_1..L_k), vec(b_1..b_k), b]``."""
        Ls, bs, b = self._unpack(theta, k, p, Xu.shape[1])
        loss, dZ, db = objective.loss_grad_tied(_local_embed(Xu, q, Ls, bs), threshold=b)
        c = self.alpha / k
        loss += 0.5 * c * (float(np.sum(Ls * Ls)) + float(np.sum(bs * bs)))
        gL, gb = _local_backprop(Xu, q, dZ, k)
        gL += c * Ls
        gb += c * bs
        return loss, np.r_[gL.ravel(), gb.ravel(), db]

    # ------------------------------------------------------------------- embedding
    def cluster_posteriors(self, X, *, sparse: bool = False) -> np.ndarray:
        """Mixture posteriors of each sample (``sparse=True``: the sparsified ``q`` used in z).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        sparse : bool, default=False

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
        """
        check_is_fitted(self)
        return self._posteriors(self._check_samples(X, "X", side="x"), sparse)

    def _posteriors(self, X: np.ndarray, sparse: bool) -> np.ndarray:
        G = X if self.pca_ is None else self.pca_.transform(X)
        P = self.gmm_.predict_proba(G)
        if sparse:
            P = sparsify_assignments(P, self.min_assignment, self.max_assignments)
        return P

    def expand(self, X) -> np.ndarray:
        """The expanded representation ``x̃`` of eq. (4), shape (n, k · (n_features + 1)).

        k times larger than ``X``: for inspection and checks on small data only; ``transform``
        never builds it.
        """
        check_is_fitted(self)
        X = self._check_samples(X, "X", side="x")
        q = self._posteriors(X, sparse=True)
        Xa = np.hstack([X, np.ones((X.shape[0], 1))])
        return (q[:, :, None] * Xa[:, None, :]).reshape(X.shape[0], -1)

    def get_expanded_projection(self) -> np.ndarray:
        """``L̃ = (L_1, b_1, …, L_k, b_k)`` of eq. (4), shape (n_components, k · (n_features + 1)),
        so that ``transform(X) == expand(X) @ L̃.T``."""
        check_is_fitted(self)
        blocks = [np.hstack([L, b[:, None]])
                  for L, b in zip(self.local_components_, self.local_offsets_, strict=True)]
        return np.hstack(blocks)
