"""Objective and solvers shared by PCCA and CMML.

Both learn linear towers ``F = Φ Wᵀ`` of fixed features ``Φ`` (the samples for the linear
methods, the kernel matrix ``K`` for the kernel ones) and minimise the mean over pairs of

    ℓ_β(y_n (‖f(x_{i_n}) − g(y_{j_n})‖² − 1))                     (pcca eq. 2, cmml eq. 4)

with ``ℓ_β(x) = log(1 + e^{βx}) / β``. PCCA is the tied case (one tower, ``f = g``).

The gradient is taken with respect to the embeddings first: a pair touches two rows of
``∂E/∂F``, so it is gathered with a sparse sample × pair incidence matrix in
O(n_pairs · k); the chain rule to the weights, ``∂E/∂W = Gᵀ Φ``, is one dense product
(pcca eq. 3, cmml eq. 5-6). For a kernel tower the K⁻¹-preconditioned gradient of pcca eq. 9-10
and cmml eq. 12 is ``(Gᵀ K) K⁻¹ = Gᵀ``: each pair changes only the columns of its two samples,
and no product with ``K`` is needed at all.

Note on pcca eq. (3): the derivative of ℓ_β(y (D² − 1)) with respect to D² is
``y σ(β y (D² − 1))``; the printed ``σ_β(y_n(1 − D²))`` has the sign of the argument flipped.
The code follows the derivative (checked against finite differences in the tests).

The mean over pairs is used instead of the papers' sum: same minimiser, step sizes that do not
depend on the number of pairs.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
import scipy.sparse.linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import randomized_svd
from threadpoolctl import threadpool_limits

from crossmetric.losses import generalized_logistic, generalized_logistic_grad

__all__ = ["Tower", "PairLogisticObjective", "TowerProblem", "lbfgs", "minimize_lbfgs",
           "minimize_gd"]


class Tower:
    """A linear map of fixed features: ``F = Φ Wᵀ``, ``W`` of shape (k, n_features).

    With ``preconditioned=True`` ``Φ`` must be a symmetric kernel matrix ``K`` and the descent
    direction is the gradient right-multiplied by ``K⁻¹``: ``(Gᵀ K) K⁻¹ = Gᵀ`` (pcca eq. 9).
    """

    def __init__(self, Phi: np.ndarray, preconditioned: bool = False):
        self.Phi = Phi
        self.preconditioned = preconditioned

    def embed(self, W: np.ndarray) -> np.ndarray:
        return self.Phi @ W.T

    def grad(self, G: np.ndarray) -> np.ndarray:
        """∂E/∂W from ∂E/∂F."""
        return G.T @ self.Phi

    def direction(self, G: np.ndarray) -> np.ndarray:
        """Descent direction (the negative is taken by the solver)."""
        return G.T.copy() if self.preconditioned else self.grad(G)


class PairLogisticObjective:
    """Mean generalized-logistic pair loss on embeddings, with its gradient on embeddings.

    Parameters
    ----------
    ix, iy : int arrays (n_pairs,)
        Rows of ``FX`` and ``FY`` joined by each pair.
    y : int array (n_pairs,)
        +1 / -1.
    beta : float
        Sharpness of ℓ_β.
    n_x, n_y : int
        Number of rows of ``FX`` / ``FY``.
    """

    def __init__(self, ix, iy, y, beta: float, n_x: int, n_y: int):
        self.ix, self.iy = ix, iy
        self.y = y.astype(float)
        self.beta = float(beta)
        n = ix.shape[0]
        ones = np.ones(n)
        cols = np.arange(n)
        self._Sx = sp.csr_matrix((ones, (ix, cols)), shape=(n_x, n))
        self._Sy = sp.csr_matrix((ones, (iy, cols)), shape=(n_y, n))
        self._S = None  # Sx − Sy, built on first tied use

    def distances(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        E = FX[self.ix] - FY[self.iy]
        return np.einsum("ij,ij->i", E, E)

    def _pair_terms(self, FX: np.ndarray, FY: np.ndarray, threshold: float = 1.0):
        """Loss, ``W[p] = ∂E/∂FX[ix[p]]`` (= −∂E/∂FY[iy[p]]) and ``c[p] = ∂E/∂D²_p``."""
        E = FX[self.ix] - FY[self.iy]
        D = np.einsum("ij,ij->i", E, E)
        m = self.y * (D - threshold)
        loss = float(np.mean(generalized_logistic(m, self.beta)))
        c = self.y * generalized_logistic_grad(m, self.beta) / D.shape[0]
        return loss, E * (2.0 * c)[:, None], c

    def loss(self, FX: np.ndarray, FY: np.ndarray, threshold: float = 1.0) -> float:
        m = self.y * (self.distances(FX, FY) - threshold)
        return float(np.mean(generalized_logistic(m, self.beta)))

    def loss_grad(self, FX: np.ndarray, FY: np.ndarray):
        """``(E, ∂E/∂FX, ∂E/∂FY)`` at the papers' threshold 1."""
        loss, W, _ = self._pair_terms(FX, FY)
        return loss, np.asarray(self._Sx @ W), -np.asarray(self._Sy @ W)

    def loss_grad_tied(self, F: np.ndarray, threshold: float = 1.0):
        """``(E, ∂E/∂F, ∂E/∂threshold)`` when both sides are rows of one embedding ``F``.

        With ``beta=1`` and a learned ``threshold`` b this is LDML's log-loss
        ``ln(1 + exp(y (D − b)))`` (clml eq. 5), used by :mod:`crossmetric.ldml` and CLML.
        """
        if self._S is None:
            self._S = (self._Sx - self._Sy).tocsr()
        loss, W, c = self._pair_terms(F, F, threshold)
        return loss, np.asarray(self._S @ W), float(-c.sum())


class TowerProblem:
    """One tied tower (PCCA) or two towers (CMML) plus the pair objective."""

    def __init__(self, towers: list[Tower], objective: PairLogisticObjective):
        if len(towers) not in (1, 2):
            raise ValueError("a TowerProblem has one (tied) or two towers")
        self.towers = towers
        self.objective = objective
        self.tied = len(towers) == 1

    def embed(self, Ws):
        Fs = [t.embed(W) for t, W in zip(self.towers, Ws, strict=True)]
        return (Fs[0], Fs[0]) if self.tied else (Fs[0], Fs[1])

    def loss_grad_embeddings(self, Fs):
        """Loss and ∂E/∂F per tower (tied: the two sides' gradients are summed)."""
        if self.tied:
            loss, G, _ = self.objective.loss_grad_tied(Fs[0])
            return loss, [G]
        loss, GX, GY = self.objective.loss_grad(Fs[0], Fs[1])
        return loss, [GX, GY]

    def embeddings_list(self, FX, FY):
        return [FX] if self.tied else [FX, FY]

    def loss_grad(self, Ws):
        """``(E, [∂E/∂W per tower])`` -- the plain gradient."""
        Fs = self.embeddings_list(*self.embed(Ws))
        loss, Gs = self.loss_grad_embeddings(Fs)
        return loss, [t.grad(G) for t, G in zip(self.towers, Gs, strict=True)]


def _print_header(verbose: int, name: str) -> None:
    if verbose:
        print(f"[{name}]")
        print(f"{'iter':>6} {'objective':>14} {'step':>10} {'time(s)':>9}")


def _print_row(verbose: int, it: int, loss: float, step: float, t0: float) -> None:
    if verbose:
        print(f"{it:>6d} {loss:>14.6e} {step:>10.3g} {time.perf_counter() - t0:>9.3f}")


class _Plateau:
    """The stopping rule shared by the solvers: a *real* plateau, not one small step.

    Stops once the best objective seen has decreased, over the last ``window`` iterations, by
    less than ``tol`` per iteration relative to its value:
    ``f_best[t − window] − f_best[t] <= window · tol · |f_best[t]|``. A single overshooting
    step that barely lowers the objective therefore never ends a run.
    """

    def __init__(self, tol: float, window: int = 10):
        self.tol = float(tol)
        self.window = int(window)
        self.best: list[float] = []

    def update(self, loss: float) -> bool:
        best = min(loss, self.best[-1]) if self.best else loss
        self.best.append(best)
        if len(self.best) <= self.window:
            return False
        old = self.best[-1 - self.window]
        return old - best <= self.window * self.tol * max(abs(best), 1e-300)


def _warn_not_converged(name: str, max_iter: int, loss: float) -> None:
    warnings.warn(f"{name} did not converge in max_iter={max_iter} iterations "
                  f"(objective {loss:.6g}); increase max_iter.", ConvergenceWarning,
                  stacklevel=4)


def lbfgs(fun, theta0: np.ndarray, *, max_iter: int, tol: float, verbose: int = 0,
          name: str = "L-BFGS", monitor=None):
    """Minimise ``fun(theta) -> (loss, grad)`` with scipy's L-BFGS-B, as scikit-learn's NCA.

    Stops when the objective has decreased by less than ``tol`` *relative to its value* per
    iteration over the last 10 iterations (:class:`_Plateau`, checked in the callback; scipy's
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
    plateau = _Plateau(tol)
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

    The run stops on a plateau of the best objective (:class:`_Plateau`: less than ``tol``
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
    plateau = _Plateau(tol)
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


def initial_weights(Phi: np.ndarray, k: int, init: str, rng: np.random.RandomState,
                    is_kernel: bool) -> np.ndarray:
    """Starting weights ``W₀`` (k × n_features of ``Φ``); the papers leave this open.

    ``"pca"``: for a linear tower the top-k principal axes of the samples (randomized SVD, so
    no d × d matrix is formed); for a kernel tower the top-k eigenvectors of ``K``, i.e. the
    embeddings start as uncentred kernel-PCA coordinates. Components beyond the rank of the
    data are filled with small random rows. ``"random"``: Gaussian entries. Either is rescaled
    afterwards by :func:`rescale_to_unit_distance`.
    """
    n, p = Phi.shape
    if init == "random":
        return rng.standard_normal((k, p)) / np.sqrt(p)
    if is_kernel:
        W = np.zeros((k, p))
        r = min(k, n - 1) if n > 1 else 0
        if r > 0:
            if n > 600 and r < n // 4:
                v0 = rng.uniform(-1, 1, n)
                vals, vecs = scipy.sparse.linalg.eigsh(Phi, k=r, which="LA", v0=v0)
            else:
                vals, vecs = scipy.linalg.eigh(Phi, subset_by_index=[n - r, n - 1])
            W[:r] = vecs[:, ::-1].T
        W[r:] = rng.standard_normal((k - r, p)) * (1e-3 / np.sqrt(p))
        return W
    W = np.zeros((k, p))
    r = min(k, n - 1, p)
    if r > 0:
        centered = Phi - Phi.mean(axis=0)
        if min(n, p) <= max(256, 4 * k):  # exact thin SVD is cheap here
            Vt = np.linalg.svd(centered, full_matrices=False)[2][:r]
        else:  # randomized SVD: O(n·p·k) time, O((n + p)·k) extra memory, no p × p matrix
            Vt = randomized_svd(centered, r, random_state=rng)[2]
        W[:r] = Vt
    W[r:] = rng.standard_normal((k - r, p)) * (1e-3 / np.sqrt(p))
    return W


def rescale_to_unit_distance(problem: TowerProblem, Ws):
    """Scale the starting weights so that the mean training ``D²`` is 1 (the threshold).

    With two towers each is first scaled so that its centred embeddings have unit mean squared
    norm: modalities of very different scales (mfeat's Fourier coefficients ~0.1, its pixel
    averages ~3) then start on an equal footing instead of one tower dominating ``D²``.
    """
    if not problem.tied:
        balanced = []
        for tower, W in zip(problem.towers, Ws, strict=True):
            F = tower.embed(W)
            spread = float(np.mean(np.sum((F - F.mean(axis=0)) ** 2, axis=1)))
            balanced.append(W / np.sqrt(spread) if np.isfinite(spread) and spread > 0 else W)
        Ws = balanced
    FX, FY = problem.embed(Ws)
    mean = float(np.mean(problem.objective.distances(FX, FY)))
    if not np.isfinite(mean) or mean <= 0:
        return Ws
    return [W / np.sqrt(mean) for W in Ws]


SOLVERS = ("auto", "lbfgs", "gd")
INITS = ("pca", "random")


#: below this many multiply-adds per embedding pass, BLAS runs single-threaded: for small
#: products OpenBLAS's thread start-up and spinning cost more than they save (measured 10×
#: slower on a busy 2-core machine for a 900 × 64 × 32 product).
SMALL_PROBLEM_FLOPS = 5e7


def blas_threads(towers_flops: float):
    """Context that runs BLAS single-threaded for small problems (see SMALL_PROBLEM_FLOPS)."""
    return threadpool_limits(limits=1 if towers_flops < SMALL_PROBLEM_FLOPS else None,
                             user_api="blas")


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
