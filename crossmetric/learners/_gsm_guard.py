"""The held-out guard and the starts of :class:`crossmetric.GSM`.

The split, the score and the choice are those of every iterative learner
(:mod:`crossmetric._solvers.early_stopping`): whole training identities held out, the start and
each epoch scored by rank-1 and AUC over all cross similarities of the held-out samples, the
best kept, the start included. The starts, all in the generalized measure's own parameters:

* ``"random"`` -- the paper's (independent Gaussian L);
* ``"identity"`` -- every L at ``α [I_r 0]``: S is the scaled untrained distance of the reduced
  coordinates (views of one width);
* ``"cca(reg=R)"`` -- the closed form: ``L_A = L_Cx = α A``, ``L_B = L_Cy = α B`` with
  ``(A, B)`` the ridge CCA of the positive pairs, its size chosen on identity folds
  (:func:`crossmetric._solvers.starting.cca_start`),
  so that ``S = α² ‖A x − B y‖² + f`` (structures with those four matrices);
* ``"kissme"`` -- the closed form of one metric: ``L_A = L_B = L_Cx = L_Cy = α L`` with ``Lᵀ L``
  KISSME's metric of the training pairs on the reduced coordinates (views of one width;
  :func:`crossmetric._solvers.starting.kissme_start`), so that ``S = α² ‖L (x − y)‖² + f``;
* ``"fitted"`` -- a fitted estimator given as ``init``: its linear towers
  (:func:`crossmetric._solvers.starting.fitted_towers`) through the reduction, as above;

``α`` puts the mean training pair on the margin's centre ``S = 0``. The library adds all but
the first; the paper starts at random.
"""

from __future__ import annotations

import numpy as np

from crossmetric._base import (
    complement_coordinates,
    squared_euclidean_matrix,
    squared_euclidean_rows,
)
from crossmetric._solvers.early_stopping import (
    EarlyStopping,
    check_early_stopping,
    choose_start,
    fold_start_hits,
    identity_validation,
    resolve_early_stopping,
    validation_split,
)
from crossmetric._solvers.span import complement_distances, set_complement
from crossmetric._solvers.starting import (
    FITTED,
    KISSME_START,
    build_starts,
    cca_start,
    check_init,
    closed_start_distances,
    fitted_towers,
    kissme_start,
    ridge_of,
    start_candidates,
)
from crossmetric.learners._gsm_measure import STRUCTURES
from crossmetric.learners._gsm_training import GSM_INITS, start_case, starting_params
from crossmetric.pairs._pair_data import PairData

__all__ = ["gsm_split", "gsm_start_names", "cca_params", "gsm_monitor", "chosen_start",
           "complement_basis", "gsm_with_complement", "guarded_start"]


def gsm_split(est, data, ix, iy, y, rng):
    """``(train, validation)`` masks over the pairs, or ``None`` without a hold-out."""
    if not resolve_early_stopping(est, data, y, tied=False):
        return None
    try:
        return validation_split(ix, iy, y, data.X.shape[0], data.Y.shape[0], tied=False,
                                fraction=float(est.validation_fraction), random_state=rng)
    except ValueError:
        if est.early_stopping == "auto":  # too few pairs to hold any out: the plain run
            return None
        raise


def gsm_start_names(est, p_x: int, p_y: int, held_out: bool) -> list[str]:
    """The named starts ``est.init`` stands for (see the module docstring)."""
    init = check_init(est.init, GSM_INITS)
    names = start_candidates(init, "random", cross=True, features=True,
                             equal_widths=p_x == p_y, held_out=held_out)
    if not {"LA", "LB", "LCx", "LCy"} <= set(STRUCTURES[est.structure]):
        if init in ("cca", KISSME_START, FITTED):
            raise ValueError(f"init={init!r} needs a structure with L_A, L_B, L_Cx and L_Cy "
                             f"(two linear towers), got {est.structure!r}.")
        names = [n for n in names if not _is_tower_start(n)]
    return names


def _is_tower_start(name: str) -> bool:
    """Whether a named start is a pair of linear towers (set through :func:`tower_params`)."""
    return name.startswith("cca") or name in (FITTED, KISSME_START)


def cca_params(est, params: dict, name: str, X, Y, ix, iy, y, r: int) -> dict:
    """``params`` (the structure's, as :func:`init_params` made them) moved to the closed
    form ``name``."""
    A, B = cca_start(X, Y, ix, iy, y, r, ridge_of(name), random_state=est.random_state)
    return tower_params(est, params, A, B, X, Y, ix, iy, r)


def fitted_params(est, params: dict, X, Y, ix, iy, r: int) -> dict:
    """``params`` moved to the fitted estimator ``est.init``: its towers on the reduced
    coordinates (``reduce(z) = (z − μ) Pᵀ / c``, so that ``A (z − μ) = c A Pᵀ reduce(z)`` on
    the reduction's span)."""
    towers = []
    for W, red in zip(fitted_towers(est.init, True), (est.reducer_x_, est.reducer_y_),
                      strict=True):
        kind, obj, scale = red
        P = obj.components_ if kind == "pca" else None
        width = P.shape[1] if P is not None else np.size(obj)
        if W.shape[1] != width:
            raise ValueError(f"init: the fitted {type(est.init).__name__} has {W.shape[1]} "
                             f"features per tower, the data {width}.")
        towers.append(scale * (W @ P.T) if P is not None else W * scale)
    return tower_params(est, params, *towers, X, Y, ix, iy, r)


def tower_params(est, params: dict, A, B, X, Y, ix, iy, r: int) -> dict:
    """``params`` with ``L_A = L_Cx = α A`` and ``L_B = L_Cy = α B`` (``r`` rows, the rest
    of ``A``, ``B`` dropped or zero rows added), so that ``S = α² ‖A x − B y‖² + f``; ``α``
    puts the mean training pair ``(ix, iy)`` on ``S = 0``; the other parameters zero."""
    def rows(W):
        out = np.zeros((r, W.shape[1]))
        out[:min(r, W.shape[0])] = W[:r]
        return out

    A, B = rows(A), rows(B)
    sq = float(np.mean(squared_euclidean_rows(X[ix] @ A.T, Y[iy] @ B.T)))
    f_abs = abs(float(est.f)) or 1.0
    alpha = np.sqrt(f_abs / sq) if sq > 0 else 1.0
    out = {k: np.zeros_like(v) for k, v in params.items()}
    out["LA"], out["LCx"] = alpha * A, alpha * A
    out["LB"], out["LCy"] = alpha * B, alpha * B
    if "f" in params:
        out["f"] = np.array(params["f"], copy=True)
    return out


def complement_basis(est) -> tuple:
    """``(Q, c)``: the basis (d × k) of a joint, unwhitened PCA reducer and its scale, whose
    complement keeps the untrained distance of an identity start
    (:mod:`crossmetric._solvers.span`); ``(None, 1.0)`` for any other reduction, or a
    structure whose S is not a distance (``"inner_product"``)."""
    red = est.reducer_x_
    if (red is not est.reducer_y_ or red[0] != "pca" or est.whiten
            or est.structure == "inner_product"):
        return None, 1.0
    return red[1].components_.T, float(red[2])


def gsm_monitor(est, similarity, X, Y, rows_x, rows_y, ids_x, ids_y, y_train, rng, *,
                raw=None, basis=None, state=None):
    """:class:`EarlyStopping` on the held-out samples ``X[rows_x]``, ``Y[rows_y]`` (reduced),
    ``similarity(params, A, B)`` their S matrix; the threshold of S is 0. With ``basis`` (a
    reducer's :func:`complement_basis`), ``state["scale"]²`` times the untrained distance of
    the raw samples ``raw`` outside it is added."""
    _, _, patience = check_early_stopping(est)
    validation, kx, ky = identity_validation(ids_x[rows_x], ids_y[rows_y], rng)
    Xv, Yv = X[rows_x[kx]], Y[rows_y[ky]]
    Dc = None if basis is None else complement_distances(raw[0][rows_x[kx]],
                                                         raw[1][rows_y[ky]], basis)

    def cross(prm):
        S = similarity(prm, Xv, Yv)
        return (S if Dc is None else S + state["scale"] ** 2 * Dc), 0.0

    return EarlyStopping(cross, validation, patience, 1.0, float(np.mean(y_train == 1)))


def chosen_start(est, start, monitor, X, Y, ix, iy, y, r: int, rng, *, basis=None,
                 state=None, raw=None) -> tuple[str, dict]:
    """``(name, params)`` training starts from: the fitted ``start_from`` case, or the best
    of the named starts of ``est.init`` on the held-out identities (:func:`choose_start`).
    With a complement ``basis = (Q, c)`` the identity start over every reduced coordinate
    keeps the untrained distance outside it at its own scale ``α / c`` (``state["scale"]``):
    on the identity folds of the training pairs that start is the untrained distance of the
    samples ``raw = (X_raw, Y_raw)`` before the reduction."""
    state = {} if state is None else state
    state["scale"] = 0.0
    if start is not None:  # the fitted special case, with the part of it outside the reduction
        state["scale"] = getattr(start, "complement_scale_", 0.0)
        return f"start_from={start_case(est)}", starting_params(est, start, X, Y, ix, iy, r,
                                                               rng)[0]
    full = basis is not None and basis[0] is not None and r == X.shape[1] == Y.shape[1]

    def make(name):
        prm = starting_params(est, None, X, Y, ix, iy, r, rng,
                              "identity" if _is_tower_start(name) else name)[0]
        if name == FITTED:
            return fitted_params(est, prm, X, Y, ix, iy, r)
        if name == KISSME_START:
            L = kissme_start(PairData(X, Y, ix, iy), y, r)
            return None if L is None else tower_params(est, prm, L, L, X, Y, ix, iy, r)
        if name.startswith("cca"):
            return cca_params(est, prm, name, X, Y, ix, iy, y, r)
        return prm

    starts = build_starts(gsm_start_names(est, X.shape[1], Y.shape[1], monitor is not None),
                          make)
    scales = {name: (_identity_alpha(prm) / basis[1] if name == "identity" and full else 0.0)
              for name, prm in starts.items()}

    def fold_distances(name, fold, rows):
        if name == "identity" and full and raw is not None:
            return squared_euclidean_matrix(raw[0][rows[0]], raw[1][rows[1]])
        return closed_start_distances(name, fold, r, est.random_state)

    # on a reduction to fewer axes than the span (or whitened) the folds' held-out samples
    # took part in fitting the coordinates: the hold-out alone (see metric_start_folds)
    exact = est.n_components is None and not est.whiten
    folds = {} if monitor is None or not exact else fold_start_hits(
        PairData(X, Y, ix, iy), y, starts, fold_distances, tied=False,
        random_state=est.random_state)
    name, params = choose_start(monitor, starts, lambda n: state.update(scale=scales[n]),
                                folds)
    state["scale"] = scales[name]
    return name, params


def _identity_alpha(params: dict) -> float:
    """α of an identity start (every L at ``α [I_r 0]``)."""
    return next(abs(float(v[0, 0])) for v in params.values() if np.ndim(v) == 2)


def gsm_with_complement(est, F: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Embeddings ``F = [L_A x, L_Cx x, dᵀx]`` of raw samples ``Z`` with ``s R z`` inserted
    after both L blocks when the model keeps the untrained distance outside its reduction
    (``complement_scale_`` s): S then gains ``s² ‖R (x − y)‖²`` (``‖L_A x‖²`` and ``‖L_B
    y‖²`` gain ``s² ‖R x‖²``, ``s² ‖R y‖²``, the cross term ``s² (R x)ᵀ(R y)``)."""
    scale = getattr(est, "complement_scale_", 0.0)
    if scale <= 0:
        return F
    C = scale * complement_coordinates(Z, est.complement_basis_)
    r = (F.shape[1] - 1) // 2
    return np.hstack([F[:, :r], C, F[:, r:2 * r], C, F[:, -1:]])


def guarded_start(est, start, held_rows, data, X, Y, ids, train, r: int, f0: float, rng):
    """``(monitor, params)`` of a GSM fit: the held-out monitor (``None`` without
    ``held_rows``, the held-out rows of each modality) and the start chosen on it
    (:func:`chosen_start`, sets ``est.init_``), with the untrained distance outside the
    reduction kept in the model when that start is the identity (``complement_scale_``).
    ``X``, ``Y`` are the reduced samples of ``data``, ``ids`` the identities of its rows and
    ``train`` the training pairs ``(ix, iy, y)``."""
    ix, iy, y = train
    basis, state = complement_basis(est), {"scale": 0.0}
    monitor = None if held_rows is None else gsm_monitor(
        est, lambda prm, A, B: est._similarity(prm, A, B, f0, r), X, Y, *held_rows, *ids, y,
        rng, raw=(data.X, data.Y), basis=basis[0], state=state)
    est.init_, params = chosen_start(est, start, monitor, X, Y, ix, iy, y, r, rng,
                                     basis=basis, state=state, raw=(data.X, data.Y))
    set_complement(est, state["scale"], basis[0])
    return monitor, params
