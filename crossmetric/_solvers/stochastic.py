"""Stochastic (mini-batch) solvers for the pair learners, for pairs and samples out of memory.

A learner hands :func:`minimize_stochastic` a *block* callback ``fun(params, block) ->
(loss, grads)``: the mean loss over one block of pairs and its gradient with respect to each
parameter array. The pairs are visited in a new random order every epoch, ``batch_size`` at a
time; for each block only the samples its pairs touch are read (:meth:`PairBlocks.gather`), so
``X`` / ``Y`` may be memory-mapped (``np.load(path, mmap_mode="r")``) and are never copied
whole. The mean of block losses is an unbiased estimate of the full objective (the papers'
objectives are means over pairs here), so the stochastic and full-batch solvers share their
optimum.

Learning-rate rule
------------------
* ``solver="minibatch"`` (recommended): Adam (Kingma & Ba 2015; β₁ = 0.9, β₂ = 0.999,
  ε = 1e-8) with step ``α = learning_rate · rms(θ₀) · m`` for each parameter array θ, where
  ``rms(θ₀)`` is the root mean square of its starting value (1 if that is 0): the first steps
  move each weight by about ``learning_rate`` of its typical size.
* ``solver="sgd"``: plain gradient steps ``θ ← θ − η g`` with
  ``η = learning_rate · ‖θ₀‖ / ‖g₀‖ · m`` (``g₀``: the first block's gradient), i.e. the
  first step moves θ by ``learning_rate`` of its norm.

The multiplier ``m`` starts at 1 and follows scikit-learn's ``"adaptive"`` schedule: after each
epoch the mean block loss of that epoch is compared with the best so far; when it has not
improved by more than ``tol`` (relative) for 2 consecutive epochs, ``m`` is divided by 5. The
solver stops (converged) once ``m`` falls below 1e-3 -- i.e. after five such plateaus, the
last steps being 1/3125 of the first, so the iterates settle at the optimum -- and warns
``ConvergenceWarning`` when ``max_iter`` epochs run out first.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from crossmetric._solvers.epochs import run_epochs
from crossmetric._solvers.optim import Adam, ScaledSGD
from crossmetric._solvers.stopping import EpochPlateau
from crossmetric._utils.checks import user_stacklevel

__all__ = ["STOCHASTIC_SOLVERS", "PairBlocks", "minimize_stochastic", "sample_pairs",
           "fit_pair_towers", "fit_theta", "refuse_early_stopping", "stochastic_settings"]

STOCHASTIC_SOLVERS = ("sgd", "minibatch")
#: pairs gathered to compute the starting point (PCA axes and the unit-distance rescaling)
INIT_PAIRS = 20_000


class PairBlocks:
    """Pairs ``(ix, iy, y)`` over samples ``X``, ``Y`` (arrays or memmaps), read in blocks.

    Parameters
    ----------
    X, Y : array-like (may be ``np.memmap``)
        Samples; ``Y is X`` for single-modal index pairs.
    ix, iy : int arrays (n_pairs,)
    y : int array (n_pairs,) of +1 / -1
    tied : bool
        One tower for both sides (PCCA, LDML): a block's samples are returned as one matrix.
    """

    def __init__(self, X, Y, ix, iy, y, tied: bool):
        self.X, self.Y = X, Y
        self.ix, self.iy, self.y = ix, iy, y
        self.tied = tied

    @property
    def n_pairs(self) -> int:
        return self.ix.shape[0]

    @staticmethod
    def _rows(A, rows: np.ndarray) -> np.ndarray:
        return np.asarray(A[rows], dtype=np.float64)

    def gather(self, idx: np.ndarray):
        """``(samples, ix_local, iy_local, y_block)`` for the pairs at positions ``idx``.

        ``samples`` is ``[Z]`` (tied: rows for both sides, pair indices into ``Z``) or
        ``[X_block, Y_block]``; only the distinct rows the block's pairs use are read.
        """
        ix, iy, yb = self.ix[idx], self.iy[idx], self.y[idx]
        n = ix.shape[0]
        if self.tied and self.X is self.Y:
            rows, inv = np.unique(np.r_[ix, iy], return_inverse=True)
            inv = inv.reshape(-1)
            return [self._rows(self.X, rows)], inv[:n], inv[n:], yb
        rx, ixl = np.unique(ix, return_inverse=True)
        ry, iyl = np.unique(iy, return_inverse=True)
        ixl, iyl = ixl.reshape(-1), iyl.reshape(-1)
        Xb, Yb = self._rows(self.X, rx), self._rows(self.Y, ry)
        if self.tied:
            return [np.concatenate([Xb, Yb])], ixl, iyl + rx.shape[0], yb
        return [Xb, Yb], ixl, iyl, yb


def sample_pairs(n_pairs: int, rng: np.random.RandomState, size: int = INIT_PAIRS):
    """Sorted positions of at most ``size`` random pairs (for the starting point)."""
    if n_pairs <= size:
        return np.arange(n_pairs)
    return np.sort(rng.choice(n_pairs, size, replace=False))


def _rms(a: np.ndarray) -> float:
    r = float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0
    return r if np.isfinite(r) and r > 0 else 1.0


def minimize_stochastic(fun, params0, blocks: PairBlocks, *, solver: str, batch_size: int,
                        learning_rate: float, max_iter: int, tol: float,
                        rng: np.random.RandomState, n_iter_no_change: int = 2,
                        verbose: int = 0, name: str = "minibatch"):
    """Minimise the mean pair loss by mini-batch Adam or SGD (see the module docstring).

    Parameters
    ----------
    fun : callable ``fun(params, block) -> (loss, grads)``
        ``block`` is :meth:`PairBlocks.gather`'s tuple; ``loss`` the mean over its pairs.
    params0 : list of ndarray
    max_iter : int
        Epochs at most.

    Returns
    -------
    params, loss_curve (mean block loss per epoch), n_epochs
    """
    if solver not in STOCHASTIC_SOLVERS:
        raise ValueError(f"solver must be one of {STOCHASTIC_SOLVERS}, got {solver!r}.")
    params = [np.array(p, dtype=np.float64, copy=True) for p in params0]
    n = blocks.n_pairs
    batch_size = min(int(batch_size), n)
    if solver == "minibatch":
        opt = Adam([learning_rate * _rms(p) for p in params], eps_on="v")
    else:
        opt = ScaledSGD(learning_rate)
    rule = EpochPlateau(tol, n_iter_no_change, relative=True, decay=5.0)

    def epoch() -> float:
        perm = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = np.sort(perm[start:start + batch_size])  # sorted: sequential memmap reads
            loss, grads = fun(params, blocks.gather(idx))
            total += loss * idx.shape[0]
            opt.step(params, grads, rule.rate)
        loss = total / n
        if not np.isfinite(loss):
            raise FloatingPointError(f"{name}: the loss became {loss}; lower learning_rate.")
        return loss

    run = run_epochs(epoch, rule, max_iter, verbose=verbose, name=name)
    if not run.converged:
        warnings.warn(f"{name} did not converge in max_iter={max_iter} epochs (mean loss "
                      f"{run.curve[-1]:.6g}); increase max_iter.", ConvergenceWarning,
                      stacklevel=user_stacklevel())
    return params, run.curve, run.n_epochs


def fit_pair_towers(data, y, *, tied: bool, kernels, gammas, approximation, n_landmarks: int,
                    n_components, beta: float, init: str, solver: str, batch_size: int,
                    learning_rate: float, max_iter: int, tol: float,
                    rng: np.random.RandomState, verbose: int = 0, name: str = "PCCA"):
    """PCCA / CMML's objective (:mod:`crossmetric._solvers.logistic`) by mini-batches.

    Each tower is linear in its samples, or in their Nyström features
    (``approximation="nystroem"``, landmarks drawn from the samples of :data:`INIT_PAIRS`
    random pairs); an exact kernel tower needs the n × n kernel and is refused. The starting
    point is the full-batch solver's (PCA axes or random, rescaled to a mean ``D²`` of 1),
    computed on those random pairs.

    Returns ``(Ws, maps, loss_curve, n_epochs)``: one weight matrix and one feature map
    (``None`` for a linear tower) per tower.
    """
    from crossmetric._solvers.logistic import PairLogisticObjective, Tower, TowerProblem
    from crossmetric._solvers.starting import initial_weights, rescale_to_unit_distance
    from crossmetric._utils.checks import check_n_components
    from crossmetric.kernels import NystroemMap

    blocks = PairBlocks(data.X, data.Y, data.ix, data.iy, y, tied)
    init_block = blocks.gather(sample_pairs(blocks.n_pairs, rng))
    maps = []
    for S, kernel, gamma in zip(init_block[0], kernels, gammas, strict=False):
        if kernel == "linear":
            maps.append(None)
        elif approximation == "nystroem":
            maps.append(NystroemMap(kernel, gamma=gamma, n_landmarks=n_landmarks,
                                    random_state=rng, center=True).fit(S))
        else:
            raise ValueError(
                f"solver={solver!r} reads the pairs in blocks and cannot use an exact kernel "
                f"(kernel={kernel!r} needs the n x n kernel matrix); set "
                "kernel_approximation='nystroem' or use solver='auto'."
            )

    def problem_for(block):
        samples, ixl, iyl, yb = block
        feats = [S if m is None else m.transform(S) for S, m in zip(samples, maps, strict=True)]
        return TowerProblem([Tower(F) for F in feats],
                            PairLogisticObjective(ixl, iyl, yb, beta, feats[0].shape[0],
                                                  feats[-1].shape[0]))

    problem0 = problem_for(init_block)
    upper = sum(t.Phi.shape[1] for t in problem0.towers)
    k = check_n_components(n_components, upper if not tied else problem0.towers[0].Phi.shape[1],
                           what="features (or Nyström landmarks)")
    W0 = [initial_weights(t.Phi, k, init, rng, False) for t in problem0.towers]
    W0 = rescale_to_unit_distance(problem0, W0)
    Ws, curve, n_iter = minimize_stochastic(
        lambda Ws, block: problem_for(block).loss_grad(Ws), W0, blocks, solver=solver,
        batch_size=batch_size, learning_rate=learning_rate, max_iter=max_iter, tol=tol,
        rng=rng, verbose=verbose, name=name)
    return Ws, maps, curve, n_iter


def fit_theta(data, y, init_fn, loss_fn, *, solver: str, batch_size: int,
              learning_rate: float, max_iter: int, tol: float, rng: np.random.RandomState,
              verbose: int = 0, name: str = "LDML"):
    """Mini-batch fit of a flat parameter vector over tied (single-tower) pair blocks.

    ``init_fn(block) -> theta0`` gets :meth:`PairBlocks.gather` of :data:`INIT_PAIRS` random
    pairs; ``loss_fn(theta, block) -> (loss, grad)`` is the learner's full-batch objective on
    one block (LDML: its ``_loss_grad`` with a block objective). Returns
    ``(theta, loss_curve, n_epochs)``.
    """
    blocks = PairBlocks(data.X, data.Y, data.ix, data.iy, y, tied=True)
    theta0 = init_fn(blocks.gather(sample_pairs(blocks.n_pairs, rng)))

    def fun(params, block):
        loss, grad = loss_fn(params[0], block)
        return loss, [grad]

    (theta,), curve, n_iter = minimize_stochastic(
        fun, [theta0], blocks, solver=solver, batch_size=batch_size,
        learning_rate=learning_rate, max_iter=max_iter, tol=tol, rng=rng, verbose=verbose,
        name=name)
    return theta, curve, n_iter


def refuse_early_stopping(estimator, solver: str) -> None:
    """``early_stopping=True`` belongs to the full-batch solvers: the stochastic ones stop on
    their own plateau rule (``"auto"`` is off for them)."""
    if getattr(estimator, "early_stopping", False) is True:
        raise ValueError("early_stopping works with the full-batch solvers; the stochastic "
                         f"solver {solver!r} has its own plateau rule.")


def stochastic_settings(estimator) -> dict:
    """A learner's ``batch_size``, ``learning_rate``, ``max_iter`` and ``tol`` (checked), its
    random state and ``verbose``: the keyword arguments of :func:`fit_theta` and
    :func:`fit_pair_towers` that every stochastic learner passes alike."""
    from sklearn.utils import check_random_state

    from crossmetric._utils.checks import check_positive_int, check_positive_scalar

    return {"batch_size": check_positive_int(estimator.batch_size, "batch_size"),
            "learning_rate": check_positive_scalar(estimator.learning_rate, "learning_rate"),
            "max_iter": check_positive_int(estimator.max_iter, "max_iter"),
            "tol": check_positive_scalar(estimator.tol, "tol", allow_zero=True),
            "rng": check_random_state(estimator.random_state),
            "verbose": estimator.verbose}
