"""The held-out guard and the starts of :class:`crossmetric.GSM`.

The split, the score and the choice are those of every iterative learner
(:mod:`crossmetric._solvers.early_stopping`): whole training identities held out, the start and
each epoch scored by rank-1 and AUC over all cross similarities of the held-out samples, the
best kept, the start included. The starts, all in the generalized measure's own parameters:

* ``"random"`` -- the paper's (independent Gaussian L);
* ``"identity"`` -- every L at ``α [I_r 0]``: S is the scaled untrained distance of the reduced
  coordinates (views of one width);
* ``"cca(reg=R)"`` -- the closed form: ``L_A = L_Cx = α A``, ``L_B = L_Cy = α B`` with ``(A,
  B)`` the ridge CCA of the positive pairs (:func:`crossmetric._solvers.starting.cca_start`),
  so that ``S = α² ‖A x − B y‖² + f`` (structures with those four matrices);

``α`` puts the mean training pair on the margin's centre ``S = 0``. The library adds the last
two; the paper starts at random.
"""

from __future__ import annotations

import numpy as np

from crossmetric._base import squared_euclidean_rows
from crossmetric._solvers.early_stopping import (
    EarlyStopping,
    check_early_stopping,
    choose_start,
    identity_validation,
    resolve_early_stopping,
    validation_split,
)
from crossmetric._solvers.starting import cca_start, ridge_of, start_candidates
from crossmetric.learners._gsm_measure import STRUCTURES
from crossmetric.learners._gsm_training import starting_params

__all__ = ["gsm_split", "gsm_start_names", "cca_params", "gsm_monitor", "chosen_start"]


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
    names = start_candidates(est.init, "random", cross=True, features=True,
                             equal_widths=p_x == p_y, held_out=held_out)
    if not {"LA", "LB", "LCx", "LCy"} <= set(STRUCTURES[est.structure]):
        if est.init == "cca":
            raise ValueError(f"init='cca' needs a structure with L_A, L_B, L_Cx and L_Cy "
                             f"(the closed form's two towers), got {est.structure!r}.")
        names = [n for n in names if not n.startswith("cca")]
    return names


def cca_params(est, params: dict, name: str, X, Y, ix, iy, y, r: int) -> dict:
    """``params`` (the structure's, as :func:`init_params` made them) moved to the closed
    form ``name``."""
    A, B = cca_start(X, Y, ix, iy, y, r, ridge_of(name))
    sq = float(np.mean(squared_euclidean_rows(X[ix] @ A.T, Y[iy] @ B.T)))
    f_abs = abs(float(est.f)) or 1.0
    alpha = np.sqrt(f_abs / sq) if sq > 0 else 1.0
    out = {k: np.zeros_like(v) for k, v in params.items()}
    out["LA"], out["LCx"] = alpha * A, alpha * A
    out["LB"], out["LCy"] = alpha * B, alpha * B
    if "f" in params:
        out["f"] = np.array(params["f"], copy=True)
    return out


def gsm_monitor(est, similarity, X, Y, rows_x, rows_y, ids_x, ids_y, y_train, rng):
    """:class:`EarlyStopping` on the held-out samples ``X[rows_x]``, ``Y[rows_y]`` (reduced),
    ``similarity(params, A, B)`` their S matrix; the threshold of S is 0."""
    _, _, patience = check_early_stopping(est)
    validation, kx, ky = identity_validation(ids_x[rows_x], ids_y[rows_y], rng)
    Xv, Yv = X[rows_x[kx]], Y[rows_y[ky]]
    return EarlyStopping(lambda prm: (similarity(prm, Xv, Yv), 0.0), validation, patience, 1.0,
                         float(np.mean(y_train == 1)))


def chosen_start(est, start, monitor, X, Y, ix, iy, y, r: int, rng) -> tuple[str, dict]:
    """``(name, params)`` training starts from: the fitted ``start_from`` case, or the best
    of the named starts of ``est.init`` on the held-out identities (:func:`choose_start`)."""
    if start is not None:
        return f"start_from={est.start_from}", starting_params(est, start, X, Y, ix, iy, r,
                                                               rng)[0]
    starts = {}
    for name in gsm_start_names(est, X.shape[1], Y.shape[1], monitor is not None):
        closed = name.startswith("cca")
        prm = starting_params(est, None, X, Y, ix, iy, r, rng,
                              "identity" if closed else name)[0]
        starts[name] = cca_params(est, prm, name, X, Y, ix, iy, y, r) if closed else prm
    return choose_start(monitor, starts)
