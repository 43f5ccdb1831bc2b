"""Linear-algebra helpers of the closed-form learners: the span reduction, PCA, closed-form CCA.

Shared by the baselines (:mod:`crossmetric.learners.baselines`), the discriminant methods
(:mod:`crossmetric.learners.discriminant`), DML-eig and the PCA / CCA view steps of
:mod:`crossmetric.protocols`. No learner classes here.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA

from crossmetric._utils.checks import check_n_components
from crossmetric._utils.threads import blas_limit

__all__ = ["span_basis", "span_coordinates", "fit_pca", "pca_basis", "project", "cca_directions"]

#: The closed forms below (CCA, PLS, MvDA, CDFE, CSR, KISSME, the PCA steps) are solved in the
#: span of the samples when there are fewer samples than features (:func:`span_basis`): the
#: same model, at O(n² d) instead of O(d³). ``False`` forces the feature-space solve (the
#: tests compare the two).
_REDUCE_TO_SPAN = True


def span_basis(*rows: np.ndarray) -> np.ndarray | None:
    """Orthonormal basis ``Q`` (d × m) of a space that holds the given rows, or ``None``.

    The closed forms of the linear baselines see the data only through a few samples ``V``
    (n × d): every data matrix of their problems is ``Vᵀ(·)V``. With ``Q`` from the thin QR of
    ``Vᵀ`` (so ``V = (V Q) Qᵀ``) such a matrix is ``Q [(V Q)ᵀ(·)(V Q)] Qᵀ``, the problem can
    be solved on the coordinates ``V Q`` (n × n instead of d × d) and its directions mapped
    back by ``Q``. A ridge ``ρ I`` on the d features splits into ``ρ I`` on the coordinates and
    ``ρ (I − Q Qᵀ)`` on the complement, which carries no data; each caller says in a comment
    why its solution lies in the span, or keeps the complement term where it does not.

    Parameters
    ----------
    *rows : ndarray of shape (n_i, d)
        Blocks of rows, stacked in this order (repeated rows of a block dropped); the basis
        holds all of them (m is the number of distinct rows, more than their rank when they
        are linearly dependent).

    Returns
    -------
    Q : ndarray of shape (d, m) or None
        ``None`` when the rows are at least as many as the features (no gain) or the
        reduction is switched off (module flag ``_REDUCE_TO_SPAN``).

    Examples
    --------
    >>> import numpy as np
    >>> V = np.random.RandomState(0).randn(5, 40)
    >>> Q = span_basis(V)
    >>> Q.shape, bool(np.allclose(V @ Q @ Q.T, V))
    ((40, 5), True)
    >>> span_basis(V.T) is None      # 40 rows of 5 features: nothing to reduce
    True
    """
    if not _REDUCE_TO_SPAN:
        return None
    # repeated rows (a sample in several pairs) add nothing to the span
    V = np.vstack([np.unique(r, axis=0) if r.shape[0] > 1 else r for r in rows])
    if V.shape[0] >= V.shape[1]:
        return None
    return _thin_qr(V.T)


def span_coordinates(F: np.ndarray, *, block: int = 8192) -> np.ndarray:
    """Coordinates of the rows of ``F`` in an orthonormal basis of their span.

    ``Z = U √s`` with ``F Fᵀ = U diag(s) Uᵀ``, so ``Z Zᵀ = F Fᵀ``: every inner product and
    distance between rows is kept, and a PCA fitted on any subset of rows (centred on that
    subset) yields the same projections as on ``F`` (up to the sign of each component).
    The Gram matrix is accumulated in float64 over column blocks of ``F`` (which may be
    float32), so no float64 copy of ``F`` is made. The reproductions' descriptors pass through it
    before their per-split PCAs (``gsm-cuhk01``: 129,024 features of 3,884 images;
    ``cmml-cufs``): each PCA then costs O(n³) instead of O(n² d).

    Examples
    --------
    >>> import numpy as np
    >>> F = np.random.RandomState(0).rand(5, 40)
    >>> Z = span_coordinates(F)
    >>> Z.shape[1] <= 5, np.allclose(Z @ Z.T, F @ F.T)
    (True, True)
    """
    F = np.asarray(F)
    if F.ndim != 2 or F.shape[0] == 0:
        raise ValueError(f"F must be a non-empty 2-D array, got shape {F.shape}.")
    n = F.shape[0]
    G = np.zeros((n, n))
    for start in range(0, F.shape[1], int(block)):
        Fc = np.asarray(F[:, start:start + int(block)], dtype=np.float64)
        G += Fc @ Fc.T
    s, U = np.linalg.eigh(G)
    keep = s > max(s[-1], 0.0) * 1e-12
    return U[:, keep] * np.sqrt(s[keep])


def _thin_qr(A: np.ndarray) -> np.ndarray:
    """``Q`` of the thin QR of a tall ``A``, with single-threaded BLAS: OpenBLAS' threaded
    Householder QR of a 3,564 × 100 matrix took 1.8 s on two busy cores, one thread 0.03 s."""
    with blas_limit(1):
        return np.linalg.qr(A)[0]


def project(V: np.ndarray, P: np.ndarray | None) -> np.ndarray:
    """Rows ``V`` on the components ``P`` (``(k, d)``) of :func:`pca_basis`: ``V Pᵀ``, or
    ``V`` itself without a PCA."""
    return V if P is None else V @ P.T


def _in_span(V: np.ndarray, Q: np.ndarray | None) -> np.ndarray:
    """Coordinates ``V Q`` of rows in the basis of :func:`span_basis` (``V`` if none)."""
    return V if Q is None else V @ Q


def _from_span(Q: np.ndarray | None, W: np.ndarray) -> np.ndarray:
    """Directions ``Q W`` in feature space from their coordinates (``W`` if no basis)."""
    return W if Q is None else Q @ W


def fit_pca(V: np.ndarray, n_components: int, random_state=None) -> PCA:
    """scikit-learn's PCA of the rows of ``V``; exact and O(n² d) when rows < features.

    With fewer rows than features (and ``_REDUCE_TO_SPAN``) the solver is the thin SVD of the
    centred rows (``svd_solver="full"``, which works in their span) instead of the randomized
    SVD that scikit-learn's ``"auto"`` picks for such shapes (an approximation of the same
    components, several times slower at 100 × 3,564); otherwise ``"auto"``, as before.
    """
    solver = "full" if _REDUCE_TO_SPAN and V.shape[0] < V.shape[1] else "auto"
    return PCA(n_components=n_components, svd_solver=solver, random_state=random_state).fit(V)


def pca_basis(Z: np.ndarray, i: np.ndarray, j: np.ndarray, n_components: int | None):
    """PCA of the samples the pairs ``(i, j)`` use: ``(pca, P)`` with ``P`` its
    ``(k, d)`` components, or ``(None, None)`` when ``n_components`` is ``None`` (the features
    as they are: no d × d identity, 5.5 GB at 26,112 features)."""
    d = Z.shape[1]
    if n_components is None:
        return None, None
    used = Z[np.unique(np.r_[i, j])]
    k = check_n_components(n_components, min(d, used.shape[0]), name="pca_components",
                           what="min(n_features, distinct samples)")
    pca = fit_pca(used, k)
    return pca, pca.components_


def cca_directions(Xc: np.ndarray, Yc: np.ndarray, n_components: int, reg: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closed-form regularised CCA of centred, row-aligned views.

    With ``C_xx + r_x I``, ``C_yy + r_y I`` (``r = reg · trace(C)/d``) and the cross-covariance
    ``C_xy``, the directions are ``A = C_xx^{-1/2} U_k``, ``B = C_yy^{-1/2} V_k`` from the SVD
    ``C_xx^{-1/2} C_xy C_yy^{-1/2} = U S Vᵀ`` (Hotelling 1936; the ridge is the usual
    regularised CCA, e.g. Vinod 1976). ``S`` holds the regularised canonical correlations.
    The one CCA of the library: :class:`crossmetric.CCA` and the protocols' "-C" step both call
    it.

    With fewer pairs than features a view is solved in the span of its samples
    (:func:`span_basis`), exactly: with ``X_c = X_r Qᵀ``, ``C_xx + r_x I = Q (C_r + r_x I) Qᵀ
    + r_x (I − Q Qᵀ)``, so ``C_xx^{-1/2}`` is ``Q (C_r + r_x I)^{-1/2} Qᵀ`` plus
    ``r_x^{-1/2} (I − Q Qᵀ)``; the complement term meets ``C_xy = Q C_r,xy Q_yᵀ`` only through
    ``(I − Q Qᵀ) Q = 0``, so the whitened cross-covariance, its SVD and ``A = Q (C_r + r_x
    I)^{-1/2} U_r`` all live in the span (``r_x`` keeps the trace over all ``d_x`` features).

    Returns
    -------
    A : ndarray of shape (d_x, k)
    B : ndarray of shape (d_y, k)
    correlations : ndarray of shape (k,)
    """
    n = Xc.shape[0]

    def inv_sqrt(C, d):
        C = C + reg * max(np.trace(C) / d, 1e-12) * np.eye(C.shape[0])
        w, V = np.linalg.eigh(C)
        return (V / np.sqrt(np.maximum(w, 1e-12))) @ V.T

    Qx, Qy = span_basis(Xc), span_basis(Yc)
    Xr, Yr = _in_span(Xc, Qx), _in_span(Yc, Qy)
    Wx = inv_sqrt(Xr.T @ Xr / (n - 1), Xc.shape[1])
    Wy = inv_sqrt(Yr.T @ Yr / (n - 1), Yc.shape[1])
    U, sv, Vt = np.linalg.svd(Wx @ (Xr.T @ Yr / (n - 1)) @ Wy, full_matrices=False)
    return (_from_span(Qx, Wx @ U[:, :n_components]), _from_span(Qy, Wy @ Vt[:n_components].T),
            sv[:n_components])
