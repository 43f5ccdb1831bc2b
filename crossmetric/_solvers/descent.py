"""Full-batch solvers of the pair learners: L-BFGS and gradient descent with a line search.

:func:`lbfgs` minimises any ``fun(theta) -> (loss, grad)`` on a flat vector (LDML, CLML, LMNN,
MCC, PRDC); :func:`minimize_lbfgs` and :func:`minimize_gd` work on the tower weights of a
:class:`~crossmetric._solvers.logistic.TowerProblem` (PCCA, CMML), the latter with the
K⁻¹-preconditioned direction of kernel towers (pcca eq. 9-10, cmml eq. 12). :func:`solve`
picks one. All stop on a plateau of the best objective (the
:class:`~crossmetric._solvers.stopping.BestPlateau` rule) or when an
:class:`~crossmetric._solvers.early_stopping.EarlyStopping` monitor says so.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from crossmetric._solvers.early_stopping import clear
from crossmetric._solvers.stopping import BestPlateau
from crossmetric._utils.checks import user_stacklevel
from crossmetric._utils.threads import blas_limit

if TYPE_CHECKING:  # pragma: no cover
    from crossmetric._solvers.logistic import TowerProblem

__all__ = ["SOLVERS", "lbfgs", "minimize_lbfgs", "minimize_gd", "solve", "blas_threads",
           "fit_lbfgs"]

SOLVERS = ("auto", "lbfgs", "gd")


def _print_header(verbose: int, name: str) -> None:
    if verbose:
        print(f"[{name}]")
        print(f"{'iter':>6} {'objective':>14} {'step':>10} {'time(s)':>9}")



def _print_row(verbose: int, it: int, loss: float, step: float, t0: float) -> None:
    if verbose:
        print(f"{it:>6d} {loss:>14.6e} {step:>10.3g} {time.perf_counter() - t0:>9.3f}")


def _warn_not_converged(name: str, max_iter: int, loss: float) -> None:
    warnings.warn(f"{name} did not converge in max_iter={max_iter} iterations "
                  f"(objective {loss:.6g}); increase max_iter.", ConvergenceWarning,
                  stacklevel=user_stacklevel())


def lbfgs(fun, theta0: np.ndarray, *, max_iter: int, tol: float, verbose: int = 0,
          name: str = "L-BFGS", monitor=None):
    """Minimise ``fun(theta) -> (loss, grad)`` with scipy's L-BFGS-B, as scikit-learn's NCA.

    Stops when the objective has decreased by less than ``tol`` *relative to its value* per
    iteration over the last 10 iterations (:class:`BestPlateau`, checked in the callback; scipy's
    own ``ftol`` divides by ``max(|f|, 1)``, which for mean losses ≪ 1 is an absolute
    tolerance, so it is switched off), or when scipy finds no further decrease (its line search
    fails or the projected gradient vanishes). ``monitor`` (an :class:`EarlyStopping`) is told
    every iterate and may stop the run; its best iterate is then returned.

    Returns ``(theta, loss_curve, n_iter)``; warns ``ConvergenceWarning`` if ``max_iter`` is
    hit without a plateau (and without an early stop).
    """
    curve: list[float] = []
    t0 = time.perf_counter()
    _print_header(verbose, name)
    plateau = BestPlateau(tol)
    state = {"stopped": False}

    def callback(intermediate_result):
        curve.append(float(intermediate_result.fun))
        _print_row(verbose, len(curve), curve[-1], float("nan"), t0)
        if monitor is not None and monitor.update(len(curve), intermediate_result.x):
            state["stopped"] = True
            raise StopIteration
        if plateau.update(curve[-1]):
            state["stopped"] = True
            raise StopIteration

    res = scipy.optimize.minimize(
        fun, theta0, jac=True, method="L-BFGS-B", callback=callback,
        options={"maxiter": max_iter, "ftol": 0.0, "gtol": 1e-10},
    )
    if not curve:
        curve.append(float(res.fun))
    if not state["stopped"] and (len(curve) >= max_iter or res.status == 1):
        _warn_not_converged(name, max_iter, float(res.fun))
    theta = res.x
    if monitor is not None and monitor.best_params is not None:
        theta = monitor.best_params
    return theta, curve, len(curve)


def minimize_lbfgs(problem: TowerProblem, W0s, *, max_iter: int, tol: float,
                   verbose: int = 0, name: str = "L-BFGS", monitor=None):
    """:func:`lbfgs` on the flattened tower weights. Returns ``(Ws, loss_curve, n_iter)``."""
    shapes = [W.shape for W in W0s]
    splits = np.cumsum([W.size for W in W0s])[:-1]

    def unpack(theta):
        return [part.reshape(s) for part, s in zip(np.split(theta, splits), shapes,
                                                       strict=True)]

    def fun(theta):
        loss, grads = problem.loss_grad(unpack(theta))
        return loss, np.concatenate([g.ravel() for g in grads])

    if monitor is not None:
        monitor.unpack = unpack
    theta, curve, n_iter = lbfgs(fun, np.concatenate([W.ravel() for W in W0s]),
                                 max_iter=max_iter, tol=tol, verbose=verbose, name=name,
                                 monitor=monitor)
    if isinstance(theta, list):  # early stopping kept the starting point
        return theta, curve, n_iter
    return unpack(theta), curve, n_iter


def minimize_gd(problem: TowerProblem, W0s, *, max_iter: int, tol: float, verbose: int = 0,
                name: str = "GD", step0: float = 1.0, armijo: float = 1e-4,
                memory: int = 1, monitor=None):
    """Gradient descent with a line search -- the papers' solver, with adaptive steps.

    The direction ``d`` is each tower's :meth:`Tower.direction` (the K⁻¹-preconditioned gradient
    for preconditioned kernel towers, pcca eq. 9-10 / cmml eq. 12). The step:

    * the trial step is the Barzilai-Borwein step of the (preconditioned) gradient,
      ``η = ⟨s, r⟩ / ⟨r, Δd⟩`` with ``s`` the change of the weights and ``r`` the change of the
      gradient, which grows and shrinks with the local curvature (for a preconditioned tower
      it is the BB step in the K^{1/2}-whitened coordinates where the preconditioned gradient
      is the plain one). Every quantity is an inner product of embeddings,
      ``⟨s, r⟩ = ⟨ΔF, ΔG⟩`` and ``⟨r, Δd⟩ = ⟨ΔG, Φ Δdᵀ⟩``, so it costs O(n · k);
    * it is halved until it passes the Armijo test against the current objective, so the
      objective decreases at every iteration as in the papers (``memory > 1`` tests against
      the largest of the last ``memory`` objectives instead: the non-monotone spectral
      gradient method of Raydan, SIAM J. Optim. 1997; measured no faster here). Trial points
      are evaluated on the embeddings, ``F − η Φ dᵀ``, O(n_pairs · k) each. If the curvature
      along the last step is not positive the last accepted step is doubled instead.

    The run stops on a plateau of the best objective (:class:`BestPlateau`: less than ``tol``
    relative decrease per iteration over the last 10 iterations), when no step lowers the
    objective at all, or when ``monitor`` (an :class:`EarlyStopping`) says so. The best iterate
    seen is returned (the monitor's best on the validation pairs when there is a monitor).
    Warns ``ConvergenceWarning`` when ``max_iter`` is hit first.

    Returns ``(Ws, loss_curve, n_iter)``.
    """
    Ws = [W.copy() for W in W0s]
    Fs = problem.embeddings_list(*problem.embed(Ws))
    loss, Gs = problem.loss_grad_embeddings(Fs)
    curve: list[float] = []
    recent = [loss]
    best_loss, best_Ws = loss, Ws
    plateau = BestPlateau(tol)
    step = float(step0)
    t0 = time.perf_counter()
    _print_header(verbose, name)
    converged = False
    prev = None  # (Fs, Gs, dFs) of the previous iterate, for the BB step
    for it in range(1, max_iter + 1):
        dirs = [t.direction(G) for t, G in zip(problem.towers, Gs, strict=True)]
        dFs = [t.embed(d) for t, d in zip(problem.towers, dirs, strict=True)]
        # <∂E/∂W, d> = Σ G ⊙ (Φ dᵀ): the slope along -d, free from the trial embeddings
        slope = float(sum(np.vdot(G, dF) for G, dF in zip(Gs, dFs, strict=True)))
        if slope <= 0 or not np.isfinite(slope):
            converged = True
            break
        if prev is not None:
            sr = sum(np.vdot(F - pF, G - pG)
                     for F, pF, G, pG in zip(Fs, prev[0], Gs, prev[1], strict=True))
            rd = sum(np.vdot(G - pG, dF - pdF)
                     for G, pG, dF, pdF in zip(Gs, prev[1], dFs, prev[2], strict=True))
            if sr > 0 and rd > 0 and np.isfinite(sr / rd):
                step = float(sr / rd)
            # non-positive curvature: keep the last accepted step, doubled
        reference = max(recent)
        eta = step
        while True:
            trial = [F - eta * dF for F, dF in zip(Fs, dFs, strict=True)]
            new_loss = problem.objective.loss(trial[0], trial[-1])
            if np.isfinite(new_loss) and new_loss <= reference - armijo * eta * slope:
                break
            eta *= 0.5
            if eta * slope <= 1e-16 * max(abs(loss), 1e-300):
                break
        if not (np.isfinite(new_loss) and new_loss <= reference - armijo * eta * slope):
            converged = True  # no step lowers the objective: a stationary point
            break
        prev = (Fs, Gs, dFs)
        Ws = [W - eta * d for W, d in zip(Ws, dirs, strict=True)]
        Fs = trial
        loss, Gs = problem.loss_grad_embeddings(Fs)
        curve.append(loss)
        recent = (recent + [loss])[-memory:]
        if loss < best_loss:
            best_loss, best_Ws = loss, Ws
        _print_row(verbose, it, loss, eta, t0)
        step = 2.0 * eta
        if monitor is not None and monitor.update(it, Ws):
            converged = True
            break
        if plateau.update(loss):
            converged = True
            break
    if not converged:
        _warn_not_converged(name, max_iter, best_loss)
    if not curve:
        curve.append(loss)
    if monitor is not None and monitor.best_params is not None:
        best_Ws = monitor.best_params
    return [W.copy() for W in best_Ws], curve, len(curve)


#: below this many multiply-adds per embedding pass, BLAS runs single-threaded: for small
#: products OpenBLAS's thread start-up and spinning cost more than they save (measured 10×
#: slower on a busy 2-core machine for a 900 × 64 × 32 product).
SMALL_PROBLEM_FLOPS = 5e7


def blas_threads(towers_flops: float):
    """Context that runs BLAS single-threaded for small problems (see SMALL_PROBLEM_FLOPS)."""
    return blas_limit(1 if towers_flops < SMALL_PROBLEM_FLOPS else None)


def solve(problem: TowerProblem, W0s, *, solver: str, is_kernel: bool, max_iter: int,
          tol: float, verbose: int, name: str, monitor=None):
    """Run the chosen solver. ``"auto"``: L-BFGS for linear towers, preconditioned GD for
    kernel towers (the papers' algorithm, whose point is the K⁻¹ preconditioner)."""
    if solver == "auto":
        solver = "gd" if is_kernel else "lbfgs"
    if solver == "lbfgs":
        return minimize_lbfgs(problem, W0s, max_iter=max_iter, tol=tol, verbose=verbose,
                              name=name, monitor=monitor)
    return minimize_gd(problem, W0s, max_iter=max_iter, tol=tol, verbose=verbose, name=name,
                       monitor=monitor)


def fit_lbfgs(estimator, fun, theta0: np.ndarray, monitor=None) -> np.ndarray:
    """:func:`lbfgs` on ``fun`` with the estimator's ``max_iter``, ``tol`` and ``verbose``.

    Sets ``n_iter_``, ``loss_curve_``, ``validation_scores_`` and ``best_iteration_`` on the
    estimator (the last two ``None`` without ``monitor``). Used by LDML and CLML.
    """
    if monitor is not None:
        monitor.update(0, theta0)
    theta, estimator.loss_curve_, estimator.n_iter_ = lbfgs(
        fun, theta0, max_iter=estimator.max_iter, tol=estimator.tol,
        verbose=estimator.verbose, name=type(estimator).__name__, monitor=monitor)
    if monitor is None:
        clear(estimator)
    else:
        monitor.record(estimator)
    return theta
