"""Generalized similarity measure (GSM) on fixed feature vectors of two modalities.

Lin, Wang, Zuo, Feng & Zhang, *Cross-Domain Visual Matching via Generalized Similarity Measure
and Feature Learning*. The measure (eq. 1) is the quadratic form

    S(x, y) = [xᵀ yᵀ 1] [[A, C, d], [Cᵀ, B, e], [dᵀ, eᵀ, f]] [x; y; 1]

with ``A = L_Aᵀ L_A``, ``B = L_Bᵀ L_B``, ``C = −L_Cxᵀ L_Cy`` (eq. 2), i.e. (eq. 3)

    S(x, y) = ‖L_A x‖² + ‖L_B y‖² − 2 (L_Cx x)ᵀ(L_Cy y) + 2 dᵀx + 2 eᵀy + f.

Every term of x is computed independently of y, so each modality has an embedding
(eq. 10, the "similarity components")

    x̃ = [L_A x, L_Cx x, dᵀx],   ỹ = [L_B y, L_Cy y, eᵀy],

and S is the fixed aggregation (eq. 12) ``‖P₁x̃‖² + ‖P₁ỹ‖² − 2 (P₂x̃)ᵀ(P₂ỹ) + 2p₃ᵀx̃ + 2p₃ᵀỹ + f``.
``transform_x`` / ``transform_y`` return x̃ / ỹ, so a gallery is embedded once (the paper's
"efficient matching" remark) and ``cross_distance`` aggregates in row blocks.

Training minimises the hinge loss of eq. (6), ``Σ (1 − ℓ S)₊`` with the paper's labels ℓ = −1
for the same identity and +1 otherwise (eq. 4; the public API's ``y = +1 / −1`` for same /
different is converted with ``ℓ = −y``), plus ``μ‖Φ‖²`` (eq. 7) -- by mini-batch gradient descent
in the sample-based form (eq. 14-18): each distinct sample of a batch is embedded once and its
gradient is the sum over the pairs it takes part in (eq. 18).

This is the paper's "hand.fea + gen.sim" ablation (§5.5 (i)): an optional linear reduction of each
modality (here a fixed PCA, or centring, with one scale per modality -- no whitening by default,
see ``GSM``'s ``whiten`` -- where the paper has a learned fully connected layer), then the
similarity layers. ``structure`` selects the special cases of §3.2 and the baselines of §5.5.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted

from crossmetric._base import CrossModalMixin, PairData
from crossmetric._checks import (
    check_n_components,
    check_positive_int,
    check_positive_scalar,
    user_stacklevel,
)
from crossmetric.losses import hinge, hinge_grad

__all__ = ["GSM", "STRUCTURES", "gsm_components", "gsm_rowwise", "gsm_matrix"]

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
    if structure in ("generalized", "linear"):
        LA, LB, LCx, LCy = params["LA"], params["LB"], params["LCx"], params["LCy"]
        if structure == "generalized":
            d, e = params["d"], params["e"]
        else:
            d, e = np.zeros(p_x), np.zeros(p_y)
    elif structure in _TIED:
        LA, LCx, LCy = params["LA"], params["LCx"], params["LCy"]
        LB = LA
        d = params["d"] if structure == "ladf" else np.zeros(p_x)
        e = d
    elif structure == "euclidean":
        U, V, c = params["U"], params["V"], params["c"]
        # ‖Ux − Vy + c‖² = ‖Ux‖² + ‖Vy‖² − 2(Ux)ᵀ(Vy) + 2 (Uᵀc)ᵀx − 2 (Vᵀc)ᵀy + ‖c‖²
        LA, LB, LCx, LCy = U, V, U, V
        d, e = U.T @ c, -(V.T @ c)
        f = f + float(c @ c)
    elif structure == "inner_product":
        U, V, a, b = params["U"], params["V"], params["a"], params["b"]
        # −2 (Ux + a)ᵀ(Vy + b) = −2(Ux)ᵀ(Vy) − 2 (Uᵀb)ᵀx − 2 (Vᵀa)ᵀy − 2 aᵀb
        LA, LB = np.zeros((r, p_x)), np.zeros((r, p_y))
        LCx, LCy = U, V
        d, e = -(U.T @ b), -(V.T @ a)
        f = f - 2.0 * float(a @ b)
    else:  # pragma: no cover - validated by the caller
        raise ValueError(f"unknown structure {structure!r}")
    return LA, LB, LCx, LCy, d, e, f


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
def gsm_loss_grad(params: dict, structure: str, f0: float, X: np.ndarray, Y: np.ndarray,
                  ix: np.ndarray, iy: np.ndarray, ell: np.ndarray, weight: np.ndarray,
                  mu: float) -> tuple[float, dict]:
    """Objective of eq. (7) on fixed features and its gradient, in the sample-based form.

    ``J = Σ_p w_p (1 − ℓ_p S(x_{ix[p]}, y_{iy[p]}))₊ + μ Σ_θ ‖θ‖²`` where θ runs over the free
    parameters except ``f``. Each row of ``X`` and ``Y`` is embedded once (eq. 10); the gradient
    of each embedded sample is the sum over its pairs (eq. 17-18):
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

    Returns
    -------
    loss : float
    grad : dict of ndarray, same keys and shapes as ``params``
    """
    p_x, p_y = X.shape[1], Y.shape[1]
    r = next(v for k, v in params.items() if k in ("LA", "LCx", "U")).shape[0]
    LA, LB, LCx, LCy, d, e, f = gsm_components(params, structure, f0, r, p_x, p_y)
    FX = embed(X, LA, LCx, d)
    FY = embed(Y, LB, LCy, e)
    S = gsm_rowwise(FX[ix], FY[iy], f)
    margin = 1.0 - ell * S
    loss = float(weight @ hinge(margin))
    g = -weight * ell * hinge_grad(margin)  # dJ/dS_p
    # G[a, b] = Σ of g over the pairs joining sample a of X and sample b of Y (eq. 18 partners)
    G = sparse.csr_matrix((g, (ix, iy)), shape=(X.shape[0], Y.shape[0]))
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
    for k, v in params.items():
        if k != "f":
            loss += mu * float(np.sum(v * v))
            grad[k] = grad[k] + 2.0 * mu * v
    return loss, grad


# --------------------------------------------------------------------------------------------
# the learner
# --------------------------------------------------------------------------------------------
class _Adam:
    """Adam on a dict of arrays (Kingma & Ba defaults)."""

    def __init__(self, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.m: dict = {}
        self.v: dict = {}
        self.t = 0

    def step(self, params: dict, grad: dict) -> None:
        self.t += 1
        c1 = 1.0 - self.b1 ** self.t
        c2 = 1.0 - self.b2 ** self.t
        for k, gk in grad.items():
            m = self.m.setdefault(k, np.zeros_like(gk))
            v = self.v.setdefault(k, np.zeros_like(gk))
            m *= self.b1
            m += (1.0 - self.b1) * gk
            v *= self.b2
            v += (1.0 - self.b2) * gk * gk
            params[k] = params[k] - self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


class GSM(CrossModalMixin, BaseEstimator):
    """Generalized similarity measure learned on fixed features of two modalities.

    ``pair_distance`` returns S of eq. (3) with the paper's sign: the model is trained so that
    ``S < −1`` for pairs of the same identity and ``S ≥ 1`` otherwise (eq. 5), so *smaller means
    more alike*, as for every learner of the package.

    Parameters
    ----------
    n_components : int or None, default=None
        Each modality is first reduced to ``n_components`` dimensions by PCA (fitted on the
        distinct training samples of that modality; the paper's reduction layer of §5.5 (i),
        here unsupervised), or only centred when ``None``; then scaled as set by ``whiten`` and
        ``feature_norm``. The L matrices have ``r = n_components`` rows (square, as in the
        paper), or ``r = min(n_features_x, n_features_y)`` when ``None``.
    structure : {"generalized", "linear", "ladf", "joint_bayesian", "euclidean", \
"inner_product"}, default="generalized"
        ``"generalized"``: eq. (1)-(3) with all of L_A, L_B, L_Cx, L_Cy, d, e free.
        ``"linear"``: d = e = 0 and f = 0 (§5.5, separate linear transformations).
        ``"ladf"``: B = A and e = d (LADF, eq. 8).
        ``"joint_bayesian"``: B = A, C = −G, d = e = 0, f = 0 (eq. 9), with G = L_Cxᵀ L_Cy.
        ``"euclidean"``: affine Euclidean distance ``‖(Ux + a) − (Vy + b)‖² + f`` (Baseline-1).
        ``"inner_product"``: affine inner product ``−2 (Ux + a)ᵀ(Vy + b) + f`` (Baseline-2;
        the sign makes it a dissimilarity like S).
        The tied structures (``ladf``, ``joint_bayesian``) need both modalities to have the same
        dimension after reduction.
    f : float, default=-1.9
        The constant f of eq. (1); the paper fixes ``f = −1.9`` (§4.1). Unused (f = 0) by
        ``"linear"`` and ``"joint_bayesian"``.
    learn_f : bool, default=False
        Learn f by gradient descent instead of fixing it (initialised at ``f``).
    mu : float, default=1e-4
        Weight μ of the penalty ``μ‖Φ‖²`` of eq. (7) on the similarity parameters (f excluded).
        Measured rank-1 on the task of ``whiten``: 44% at μ = 0 and 1e-4, 43% at 1e-5, 31% at
        1e-3 (the penalty then keeps S from reaching the margin); training and held-out
        rank-1 are equal, so the model underfits the ranking rather than overfits it.
    batch_size : int, default=512
        Pairs per mini-batch.
    learning_rate : float, default=1e-3
        Step size of Adam (the paper uses plain gradient steps, eq. 16; Adam is our choice: it
        is insensitive to the scale of the features). Larger steps overfit the hinge quickly
        on identity-level pairs (rank-1 22% at 1e-2); 3e-4 gives the same rank-1 as 1e-3
        (44%) in twice the epochs.
    max_iter : int, default=100
        Maximum number of epochs (passes over the training pairs). Training for up to 200
        epochs with ``n_iter_no_change=10`` gave the same rank-1 (44%) as the defaults. Far
        fewer epochs undertrain the unwhitened model: on 2000 class-level pairs (PCA-32)
        held-out AUC is 0.76 after 15 epochs and 0.93 with the default early stopping (whitened:
        0.81 and 0.87).
    tol : float, default=1e-4
        Training stops when the objective has not decreased by more than ``tol`` for
        ``n_iter_no_change`` consecutive epochs.
    n_iter_no_change : int, default=5
    init_scale : float, default=1.0
        Entries of the L matrices start i.i.d. N(0, init_scale² / (r·p)) (so that ‖L x‖² is of
        order ‖x‖²/p: 1 for whitened x, ``feature_norm²/p`` otherwise); d, e and the affine
        offsets start at 0.
    random_state : int, RandomState instance or None
        Seeds the initialisation and the order of the mini-batches.
    verbose : int, default=0
        Print one line per epoch (epoch, objective, seconds).
    preprocessor : tuple (X, Y), optional
        Samples that integer index pairs refer to.
    whiten : bool, default=False
        ``True``: per-direction unit variance (PCA whitening, or per-feature standardisation
        when ``n_components=None``) -- the former default. ``False``: the centred (PCA)
        features keep their relative variances and are divided by one scalar per modality
        (see ``feature_norm``). Whitening gives the low-variance directions (image borders,
        small PCA components: mostly noise) the same weight as the informative ones, and the
        model fits that noise. Measured on the photo↔sketch instance task of
        ``benchmarks/bench_gsm.py`` (2 splits): rank-1 33% → 44% ("generalized") and
        43% → 55% ("euclidean"); class-level pairs of the same data, held-out AUC 0.950 → 0.958.
    feature_norm : float, default=2.0
        With ``whiten=False`` each modality is scaled so that the mean squared norm of its
        centred training samples is ``feature_norm²``, so that an L of norm of order 1 moves S
        on the scale on which the fixed ``f = −1.9`` and the hinge margin 1 of eq. (5) act
        (standardised 256-d pixels have ‖x‖² ≈ 256, and S then swings far past the margin).
        Measured rank-1 (task above, 3 splits): 37% at 1, 42% at 2, 41% at 4, 36% at 8; 27% at
        0.1 (the margin is then out of reach under the ``μ`` penalty). Class-level pairs of the
        same data (1000 positives, PCA-32): held-out AUC 0.931 at 2, 0.924 at 4, 0.920 at 8.
    class_weight : {"balanced", None}, default="balanced"
        ``"balanced"``: positives and negatives weigh equally in the hinge (see Notes);
        ``None``: every pair weighs the same. Measured rank-1 44% balanced vs 43% unweighted.
    init : {"random", "euclidean"}, default="random"
        ``"euclidean"`` starts the structures with a cross term at the affine Euclidean special
        case (``L_Cx = L_A``, ``L_Cy = L_B``, so ``S`` starts as a distance); ``"random"`` draws
        every L independently. Measured rank-1 43% ("euclidean") vs 44% ("random"): no gain,
        so the paper's independent random start stays the default.

    Attributes
    ----------
    params_ : dict of ndarray
        The free parameters of ``structure`` (and ``"f"`` when learnt).
    components_x_, components_y_ : ndarray of shape (2r + 1, p_x), (2r + 1, p_y)
        Rows ``[L_A; L_Cx; dᵀ]`` and ``[L_B; L_Cy; eᵀ]``: ``transform_x(X) =
        reduce_x(X) @ components_x_.T``.
    f_ : float
        The constant of S actually used (including the offsets of the affine baselines).
    reducer_x_, reducer_y_ : tuple
        ``("pca", fitted PCA, scale)`` or ``("scale", mean, scale)``: the fixed reduction
        ``reduce(Z) = PCA(Z) / scale`` or ``(Z − mean) / scale``.
    loss_curve_ : list of float
        Objective (mean balanced hinge + penalty, over all training pairs) after each epoch.
    n_iter_ : int
        Epochs run.
    threshold_ : float
        Decision threshold on S calibrated on the training pairs.

    Notes
    -----
    Each pair's hinge term is weighted so that positives and negatives count equally,
    ``J = ½ mean_pos (1 + S)₊ + ½ mean_neg (1 − S)₊ + μ‖Φ‖²`` -- the balance that the paper's
    batch generator obtains by sampling (§4.2).

    Examples
    --------
    >>> from crossmetric import GSM, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = GSM(n_components=4, random_state=0, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, structure: str = "generalized",
                 f: float = -1.9, learn_f: bool = False, mu: float = 1e-4,
                 batch_size: int = 512, learning_rate: float = 1e-3, max_iter: int = 100,
                 tol: float = 1e-4, n_iter_no_change: int = 5, init_scale: float = 1.0,
                 random_state=None, verbose: int = 0, preprocessor=None,
                 whiten: bool = False, feature_norm: float = 2.0,
                 class_weight: str | None = "balanced", init: str = "random"):
        self.n_components = n_components
        self.structure = structure
        self.f = f
        self.learn_f = learn_f
        self.mu = mu
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.init_scale = init_scale
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.whiten = whiten
        self.feature_norm = feature_norm
        self.class_weight = class_weight
        self.init = init

    # ------------------------------------------------------------------------- checks
    def _check_params(self) -> None:
        if self.structure not in STRUCTURES:
            raise ValueError(
                f"structure must be one of {sorted(STRUCTURES)}, got {self.structure!r}."
            )
        if isinstance(self.f, bool) or not isinstance(self.f, (int, float, np.floating)) \
                or not np.isfinite(self.f):
            raise ValueError(f"f must be a finite real number, got {self.f!r}.")
        check_positive_scalar(self.mu, "mu", allow_zero=True)
        check_positive_scalar(self.learning_rate, "learning_rate")
        check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_scalar(self.init_scale, "init_scale")
        check_positive_scalar(self.feature_norm, "feature_norm")
        if self.init not in ("euclidean", "random"):
            raise ValueError(f"init must be 'euclidean' or 'random', got {self.init!r}.")
        if self.class_weight not in ("balanced", None):
            raise ValueError(
                f"class_weight must be 'balanced' or None, got {self.class_weight!r}."
            )
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.max_iter, "max_iter")
        check_positive_int(self.n_iter_no_change, "n_iter_no_change")

    # ----------------------------------------------------------------------- reduction
    def _fit_reducer(self, Z: np.ndarray, name: str, rng):
        """Fit the fixed reduction of one modality: ``(kind, mean_or_pca, scale)``."""
        if self.n_components is None:
            mean = Z.mean(axis=0)
            if self.whiten:  # per-feature standardisation
                scale = Z.std(axis=0)
                return ("scale", mean, np.where(scale > 0, scale, 1.0))
            Zc = Z - mean
            return ("scale", mean, self._global_scale(Zc))
        k = check_n_components(self.n_components, min(Z.shape),
                               what=f"the number of distinct samples and features of {name}")
        pca = PCA(n_components=k, whiten=bool(self.whiten),
                  random_state=rng.randint(2**31 - 1))
        Zr = pca.fit_transform(Z)
        return ("pca", pca, 1.0 if self.whiten else self._global_scale(Zr))

    def _global_scale(self, Zc: np.ndarray) -> float:
        """One scalar that sets the mean squared norm of the centred rows to ``feature_norm²``."""
        rms = float(np.sqrt(np.mean(np.einsum("ij,ij->i", Zc, Zc))))
        return rms / float(self.feature_norm) if rms > 0 else 1.0

    @staticmethod
    def _reduce(reducer, Z: np.ndarray) -> np.ndarray:
        kind, obj, scale = reducer
        if kind == "pca":
            return obj.transform(Z) / scale
        return (Z - obj) / scale

    def _init_params(self, r: int, p_x: int, p_y: int, rng) -> dict:
        sx = self.init_scale / np.sqrt(r * p_x)
        sy = self.init_scale / np.sqrt(r * p_y)
        shapes = {"LA": (r, p_x), "LB": (r, p_y), "LCx": (r, p_x), "LCy": (r, p_y),
                  "U": (r, p_x), "V": (r, p_y), "d": (p_x,), "e": (p_y,),
                  "c": (r,), "a": (r,), "b": (r,)}
        params = {}
        for k in STRUCTURES[self.structure]:
            shape = shapes[k]
            if len(shape) == 2:
                scale = sx if k in ("LA", "LCx", "U") else sy
                params[k] = rng.normal(0.0, scale, size=shape)
            else:
                params[k] = np.zeros(shape)
        if self.init == "euclidean" and "LCx" in params:
            # start at the affine Euclidean special case: C = −L_Aᵀ L_B
            params["LCx"] = params["LA"].copy()
            params["LCy"] = (params["LB"] if "LB" in params else params["LA"]).copy()
        if self.learn_f and self.structure not in _NO_F:
            params["f"] = np.asarray(float(self.f))
        return params

    # ----------------------------------------------------------------------------- fit
    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        rng = check_random_state(self.random_state)
        # distinct samples of each modality (each embedded once per batch, eq. 14)
        ux, ix = np.unique(data.ix, return_inverse=True)
        uy, iy = np.unique(data.iy, return_inverse=True)
        self.reducer_x_ = self._fit_reducer(data.X[ux], "X", rng)
        self.reducer_y_ = self._fit_reducer(data.Y[uy], "Y", rng)
        X = self._reduce(self.reducer_x_, data.X[ux])
        Y = self._reduce(self.reducer_y_, data.Y[uy])
        p_x, p_y = X.shape[1], Y.shape[1]
        if self.structure in _TIED and p_x != p_y:
            raise ValueError(
                f"structure={self.structure!r} shares L_A (B = A) between the modalities and "
                f"needs both to have the same dimension, got {p_x} and {p_y}; set n_components."
            )
        r = min(p_x, p_y)
        params = self._init_params(r, p_x, p_y, rng)
        ell = -y.astype(float)  # eq. (4): −1 same, +1 different
        n_pos, n_neg = int(np.sum(y == 1)), int(np.sum(y == -1))
        if self.class_weight == "balanced":
            weight = np.where(y == 1, 0.5 / n_pos, 0.5 / n_neg)
        else:
            weight = np.full(y.shape[0], 1.0 / (n_pos + n_neg))
        n = y.shape[0]
        mu = float(self.mu)
        f0 = float(self.f)
        opt = _Adam(float(self.learning_rate))
        self.loss_curve_ = []
        best, stall = np.inf, 0
        converged = False
        if self.verbose:
            print(f"{'epoch':>6} {'objective':>12} {'time (s)':>9}")
        t0 = time.perf_counter()
        for epoch in range(int(self.max_iter)):
            perm = rng.permutation(n)
            for sl in gen_batches(n, int(self.batch_size)):
                b = perm[sl]
                bx, bix = np.unique(ix[b], return_inverse=True)
                by, biy = np.unique(iy[b], return_inverse=True)
                # unbiased estimate of the full objective's gradient
                _, grad = gsm_loss_grad(params, self.structure, f0, X[bx], Y[by], bix, biy,
                                        ell[b], weight[b] * (n / b.size), mu)
                opt.step(params, grad)
            loss, _ = gsm_loss_grad(params, self.structure, f0, X, Y, ix, iy, ell, weight, mu)
            self.loss_curve_.append(loss)
            if self.verbose:
                print(f"{epoch + 1:>6} {loss:>12.6f} {time.perf_counter() - t0:>9.2f}")
            if loss > best - self.tol:
                stall += 1
            else:
                stall = 0
            best = min(best, loss)
            if stall >= self.n_iter_no_change:
                converged = True
                break
        self.n_iter_ = epoch + 1
        if not converged:
            warnings.warn(
                f"GSM: max_iter={self.max_iter} epochs reached before the objective stopped "
                f"decreasing (tol={self.tol}); increase max_iter.",
                ConvergenceWarning, stacklevel=user_stacklevel(),
            )
        self.params_ = params
        LA, LB, LCx, LCy, d, e, f = gsm_components(params, self.structure, f0, r, p_x, p_y)
        self.components_x_ = np.vstack([LA, LCx, d[None, :]])
        self.components_y_ = np.vstack([LB, LCy, e[None, :]])
        self.f_ = float(f)
        self.n_components_ = r

    # -------------------------------------------------------------------------- towers
    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._reduce(self.reducer_x_, X) @ self.components_x_.T

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._reduce(self.reducer_y_, Y) @ self.components_y_.T

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
        return self._reduce(self.reducer_x_, self._check_samples(X, "X", side="x"))

    def reduce_y(self, Y) -> np.ndarray:
        """The fixed linear reduction of the second modality (PCA or standardisation)."""
        check_is_fitted(self)
        return self._reduce(self.reducer_y_, self._check_samples(Y, "Y", side="y"))
