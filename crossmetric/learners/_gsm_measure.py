"""The generalized similarity measure of GSM (eq. 1-3, 10-12) and its objective (eq. 6-7, 14-18).

Functions only; :mod:`crossmetric.learners.gsm` (which re-exports them) has the learner and the
documentation of the measure.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from crossmetric._solvers.gsm_tying import tied_components
from crossmetric.losses import hinge, hinge_grad

#: Free parameters of each structure (``f`` is added when ``learn_f`` and the structure has f).
STRUCTURES: dict[str, tuple[str, ...]] = {
    # full model, eq. (1)-(3)
    "generalized": ("LA", "LB", "LCx", "LCy", "d", "e"),
    # separate linear transformations, no affine terms: d = e = 0, f = 0 (§5.5 "Linear")
    "linear": ("LA", "LB", "LCx", "LCy"),
    # LADF, eq. (8): B = A, e = d
    "ladf": ("LA", "LCx", "LCy", "d"),
    # Joint Bayesian, eq. (9): B = A, C = −G (G = L_Cxᵀ L_Cy), d = e = 0, f = 0
    "joint_bayesian": ("LA", "LCx", "LCy"),
    # Baseline-1, affine Euclidean distance ‖(U x + a) − (V y + b)‖² + f, with c = a − b
    "euclidean": ("U", "V", "c"),
    # Baseline-2, affine inner product −2 (U x + a)ᵀ(V y + b) + f
    "inner_product": ("U", "V", "a", "b"),
}
#: structures whose f is fixed to 0 by definition
_NO_F = ("linear", "joint_bayesian")
#: structures that share L_A (and d) between the modalities: both need the same dimension
_TIED = ("ladf", "joint_bayesian")


# --------------------------------------------------------------------------------------------
# the measure
# --------------------------------------------------------------------------------------------
def gsm_components(params: dict, structure: str, f0: float, r: int, p_x: int, p_y: int):
    """Map a structure's free parameters to ``(L_A, L_B, L_Cx, L_Cy, d, e, f)`` of eq. (2)-(3).

    Parameters
    ----------
    params : dict of ndarray
        The free parameters of ``structure`` (see :data:`STRUCTURES`); ``"f"`` if learnable.
    structure : str
    f0 : float
        The fixed ``f`` (used when ``params`` holds no ``"f"``).
    r, p_x, p_y : int
        Rows of the L matrices; dimensions of the two (reduced) modalities.

    Returns
    -------
    LA, LB, LCx, LCy : ndarray of shapes (r, p_x), (r, p_y), (r, p_x), (r, p_y)
    d, e : ndarray of shapes (p_x,), (p_y,)
    f : float
    """
    f = float(params["f"]) if "f" in params else (0.0 if structure in _NO_F else float(f0))
    shapes = {"x": (p_x,), "y": (p_y,), "Lx": (r, p_x), "Ly": (r, p_y)}
    return tied_components(params, structure, f, lambda kind: np.zeros(shapes[kind]), float)


def _components_backward(params: dict, structure: str, g: dict) -> dict:
    """Chain rule from gradients w.r.t. ``(LA, LB, LCx, LCy, d, e, f)`` to the free parameters."""
    out = {}
    if structure in ("generalized", "linear"):
        for k in ("LA", "LB", "LCx", "LCy"):
            out[k] = g[k]
        if structure == "generalized":
            out["d"], out["e"] = g["d"], g["e"]
    elif structure in _TIED:
        out["LA"] = g["LA"] + g["LB"]
        out["LCx"], out["LCy"] = g["LCx"], g["LCy"]
        if structure == "ladf":
            out["d"] = g["d"] + g["e"]
    elif structure == "euclidean":
        U, V, c = params["U"], params["V"], params["c"]
        out["U"] = g["LA"] + g["LCx"] + np.outer(c, g["d"])
        out["V"] = g["LB"] + g["LCy"] - np.outer(c, g["e"])
        out["c"] = U @ g["d"] - V @ g["e"] + 2.0 * g["f"] * c
    elif structure == "inner_product":
        U, V, a, b = params["U"], params["V"], params["a"], params["b"]
        out["U"] = g["LCx"] - np.outer(b, g["d"])
        out["V"] = g["LCy"] - np.outer(a, g["e"])
        out["a"] = -(V @ g["e"]) - 2.0 * g["f"] * b
        out["b"] = -(U @ g["d"]) - 2.0 * g["f"] * a
    if "f" in params:
        out["f"] = np.asarray(g["f"], dtype=float)
    return out


def embed(Z: np.ndarray, L_norm: np.ndarray, L_cross: np.ndarray, lin: np.ndarray) -> np.ndarray:
    """Similarity components of eq. (10): ``[L Z, L_C Z, linᵀ Z]`` row-wise, shape (n, 2r + 1)."""
    return np.hstack([Z @ L_norm.T, Z @ L_cross.T, (Z @ lin)[:, None]])


def gsm_rowwise(FX: np.ndarray, FY: np.ndarray, f: float) -> np.ndarray:
    """S of eq. (12) between embedded row ``p`` of ``FX`` and row ``p`` of ``FY``."""
    r = (FX.shape[1] - 1) // 2
    return (np.einsum("ij,ij->i", FX[:, :r], FX[:, :r])
            + np.einsum("ij,ij->i", FY[:, :r], FY[:, :r])
            - 2.0 * np.einsum("ij,ij->i", FX[:, r:2 * r], FY[:, r:2 * r])
            + 2.0 * FX[:, -1] + 2.0 * FY[:, -1] + f)


def gsm_matrix(FX: np.ndarray, FY: np.ndarray, f: float) -> np.ndarray:
    """S of eq. (12) for all pairs of embedded rows, shape (n_x, n_y)."""
    r = (FX.shape[1] - 1) // 2
    sx = np.einsum("ij,ij->i", FX[:, :r], FX[:, :r]) + 2.0 * FX[:, -1]
    sy = np.einsum("ij,ij->i", FY[:, :r], FY[:, :r]) + 2.0 * FY[:, -1]
    out = FX[:, r:2 * r] @ FY[:, r:2 * r].T
    out *= -2.0
    out += sx[:, None]
    out += sy[None, :]
    out += f
    return out


# --------------------------------------------------------------------------------------------
# the objective
# --------------------------------------------------------------------------------------------
#: the pairs of a batch are scored through the full ``n_x × n_y`` grid (one matrix product, then
#: indexed) once they number at least this share of it -- the sample-based batches (eq. 14-18)
#: pair every x-sample with every y-sample; sparse pair batches gather their rows instead
DENSE_GRID_SHARE = 0.125


def _dense_grid(ix: np.ndarray, n_x: int, n_y: int) -> bool:
    """Whether ``len(ix)`` pairs fill enough of the ``n_x × n_y`` grid to be scored through it."""
    return ix.size >= DENSE_GRID_SHARE * n_x * n_y


def _embed_margins(params, structure, f0, X, Y, ix, iy, ell, weight):
    """``(r, FX, FY, margin, hinge_loss)`` of :func:`gsm_loss_grad` (its first half)."""
    p_x, p_y = X.shape[1], Y.shape[1]
    r = next(v for k, v in params.items() if k in ("LA", "LCx", "U")).shape[0]
    LA, LB, LCx, LCy, d, e, f = gsm_components(params, structure, f0, r, p_x, p_y)
    FX = embed(X, LA, LCx, d)
    FY = embed(Y, LB, LCy, e)
    if _dense_grid(ix, X.shape[0], Y.shape[0]):
        S = gsm_matrix(FX, FY, f)[ix, iy]
    else:
        S = gsm_rowwise(FX[ix], FY[iy], f)
    margin = 1.0 - ell * S
    return r, FX, FY, margin, float(weight @ hinge(margin))


def gsm_loss(params: dict, structure: str, f0: float, X: np.ndarray, Y: np.ndarray,
             ix: np.ndarray, iy: np.ndarray, ell: np.ndarray, weight: np.ndarray,
             mu: float, anchor: dict | None = None) -> float:
    """The objective of :func:`gsm_loss_grad` alone (the same number, without the gradient).

    GSM's pair batches report the full objective after each epoch: with this it costs one
    embedding and one hinge, not a second backward pass over every training pair.
    """
    loss = _embed_margins(params, structure, f0, X, Y, ix, iy, ell, weight)[4]
    return loss + _penalty(params, mu, anchor, gradient=False)[0]


def _penalty(params: dict, mu: float, anchor: dict | None,
             gradient: bool = True) -> tuple[float, dict]:
    """``μ Σ_θ ‖θ − θ₀‖²`` over the parameters but ``f`` and (with ``gradient``) its gradient
    (θ₀ = 0, eq. 7's penalty, or the ``anchor`` values; without ``gradient`` the dict is empty)."""
    value, grad = 0.0, {}
    for k, v in params.items():
        if k != "f":
            d = v if anchor is None else v - anchor[k]
            value += mu * float(np.sum(d * d))
            if gradient:
                grad[k] = 2.0 * mu * d
    return value, grad


def gsm_loss_grad(params: dict, structure: str, f0: float, X: np.ndarray, Y: np.ndarray,
                  ix: np.ndarray, iy: np.ndarray, ell: np.ndarray, weight: np.ndarray,
                  mu: float, anchor: dict | None = None) -> tuple[float, dict]:
    """Objective of eq. (7) on fixed features and its gradient, in the sample-based form.

    ``J = Σ_p w_p (1 − ℓ_p S(x_{ix[p]}, y_{iy[p]}))₊ + μ Σ_θ ‖θ‖²`` where θ runs over the free
    parameters except ``f`` (with ``anchor``: ``μ Σ_θ ‖θ − θ₀‖²``, θ₀ its values). Each row
    of ``X`` and ``Y`` is embedded once (eq. 10); the gradient of each embedded sample is the
    sum over its pairs (eq. 17-18):
    ``∂J/∂x̃ = Σ_q g_q (2 P₁ᵀP₁ x̃ − 2 P₂ᵀP₂ ỹ_q + 2 p₃)`` with ``g_q = −w_q ℓ_q 1[1 − ℓ_q S_q > 0]``,
    then ``∂J/∂L_A = (∂J/∂(L_A X))ᵀ X`` and so on. Cost O((n_x + n_y) r p + n_pairs r).

    Parameters
    ----------
    params : dict of ndarray
    structure : str
    f0 : float
        Fixed f when ``params`` has no ``"f"``.
    X, Y : ndarray of shape (n_x, p_x), (n_y, p_y)
        (Reduced) samples of the batch.
    ix, iy : ndarray of shape (n_pairs,)
        Rows of X and Y joined by each pair.
    ell : ndarray of shape (n_pairs,)
        The paper's labels (eq. 4): −1 same, +1 different.
    weight : ndarray of shape (n_pairs,)
        Non-negative weight of each pair's hinge term.
    mu : float
        μ of eq. (7).
    anchor : dict of ndarray, optional
        Values the penalty pulls the parameters towards (default: zero, as eq. 7).

    Returns
    -------
    loss : float
    grad : dict of ndarray, same keys and shapes as ``params``
    """
    r, FX, FY, margin, loss = _embed_margins(params, structure, f0, X, Y, ix, iy, ell, weight)
    g = -weight * ell * hinge_grad(margin)  # dJ/dS_p
    # G[a, b] = Σ of g over the pairs joining sample a of X and sample b of Y (eq. 18 partners)
    n_x, n_y = X.shape[0], Y.shape[0]
    if _dense_grid(ix, n_x, n_y):
        G = np.bincount(np.ravel_multi_index((ix, iy), (n_x, n_y)), weights=g,
                        minlength=n_x * n_y).reshape(n_x, n_y)
    else:
        G = sparse.csr_matrix((g, (ix, iy)), shape=(n_x, n_y))
    gx = np.asarray(G.sum(axis=1)).ravel()
    gy = np.asarray(G.sum(axis=0)).ravel()
    dFX = np.hstack([2.0 * gx[:, None] * FX[:, :r], -2.0 * (G @ FY[:, r:2 * r]),
                     2.0 * gx[:, None]])
    dFY = np.hstack([2.0 * gy[:, None] * FY[:, :r], -2.0 * (G.T @ FX[:, r:2 * r]),
                     2.0 * gy[:, None]])
    gc = {
        "LA": dFX[:, :r].T @ X, "LCx": dFX[:, r:2 * r].T @ X, "d": X.T @ dFX[:, -1],
        "LB": dFY[:, :r].T @ Y, "LCy": dFY[:, r:2 * r].T @ Y, "e": Y.T @ dFY[:, -1],
        "f": float(g.sum()),
    }
    grad = _components_backward(params, structure, gc)
    value, pgrad = _penalty(params, mu, anchor)
    for k, g in pgrad.items():
        grad[k] = grad[k] + g
    return loss + value, grad
