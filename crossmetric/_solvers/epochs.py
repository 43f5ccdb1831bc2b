"""The one epoch loop of the stochastic solvers (PCCA / CMML / LDML / CLML mini-batches, GSM).

:func:`run_epochs` calls ``epoch()`` (one pass over the batches, returning the epoch's
objective) until :class:`EpochPlateau` says the monitored quantity -- the objective, or a
validation loss -- has stopped improving, or ``max_iter`` epochs have run. With a validation
loss the parameters of its best epoch are kept.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

__all__ = ["EpochPlateau", "WindowPlateau", "EpochRun", "run_epochs"]


class EpochPlateau:
    """Patience on a monitored value, optionally decaying a learning-rate multiplier.

    An epoch *improves* when its value is below the best so far by more than ``tol``:
    relative to the best (``v < best − tol · max(|best|, 1e-12)``, ``relative=True``) or
    absolute (``v <= best − tol``). After ``patience`` epochs in a row without improvement the
    run stops; with ``decay`` the multiplier ``rate`` (starting at 1) is divided by ``decay``
    instead and the count restarts, and the run stops once ``rate < min_rate`` (scikit-learn's
    ``"adaptive"`` schedule).
    """

    def __init__(self, tol: float, patience: int, *, relative: bool,
                 decay: float | None = None, min_rate: float = 1e-3):
        self.tol, self.patience, self.relative = tol, patience, relative
        self.decay, self.min_rate = decay, min_rate
        self.best = np.inf
        self.stall = 0
        self.rate = 1.0
        self.new_best = False

    def update(self, value: float) -> bool:
        """Record one epoch's value; True when the run should stop."""
        if self.relative:
            improved = (not np.isfinite(self.best)
                        or value < self.best - self.tol * max(abs(self.best), 1e-12))
        else:
            improved = not value > self.best - self.tol
        self.stall = 0 if improved else self.stall + 1
        self.new_best = value < self.best
        if self.new_best:
            self.best = value
        if self.stall < self.patience:
            return False
        if self.decay is None:
            return True
        self.rate /= self.decay
        self.stall = 0
        return self.rate < self.min_rate


class EpochRun(NamedTuple):
    """What :func:`run_epochs` returns."""

    curve: list          # the objective of each epoch
    val_curve: list      # the validation loss of each epoch (empty without one)
    n_epochs: int
    converged: bool      # stopped by the rule, not by max_iter
    best_params: object  # a copy of the best epoch's parameters (with a validation loss)


def run_epochs(epoch, rule: EpochPlateau, max_iter: int, *, val_loss=None, params=None,
               verbose: int = 0, name: str = "") -> EpochRun:
    """Epochs of ``epoch()`` until ``rule`` stops them or ``max_iter`` have run.

    ``rule`` watches the epoch's objective, or ``val_loss(params)`` when given; then a copy of
    ``params`` (a dict of arrays) is kept at every new best. ``verbose`` prints one table row
    per epoch (epoch, objective, validation loss, rate, seconds).
    """
    curve: list[float] = []
    val_curve: list[float] = []
    best_params, converged = None, False
    show_rate = rule.decay is not None
    if verbose:
        print(f"[{name}] {'epoch':>5} {'objective':>14} {'val loss':>10}"
              + (f" {'rate':>9}" if show_rate else "") + f" {'time(s)':>9}")
    t0 = time.perf_counter()
    for epoch_no in range(1, int(max_iter) + 1):
        rate = rule.rate
        loss = float(epoch())
        curve.append(loss)
        watch = loss
        if val_loss is not None:
            watch = float(val_loss(params))
            val_curve.append(watch)
        if verbose:
            v = f"{watch:>10.5f}" if val_loss is not None else f"{'-':>10}"
            print(f"[{name}] {epoch_no:>5d} {loss:>14.6e} {v}"
                  + (f" {rate:>9.3g}" if show_rate else "")
                  + f" {time.perf_counter() - t0:>9.3f}")
        stop = rule.update(watch)
        if rule.new_best and val_loss is not None:
            best_params = {k: np.array(v, copy=True) for k, v in params.items()}
        if stop:
            converged = True
            break
    return EpochRun(curve, val_curve, len(curve), converged, best_params)


class WindowPlateau:
    """A plateau of the *smoothed* objective: window means, relative tolerance.

    After every ``window`` epochs the mean objective of the last ``window`` epochs is compared
    with the mean of the ``window`` before; the run stops when it is not lower by more than
    ``tol`` relative to that previous mean (``prev − last <= tol · |prev|``). The mean over a
    window smooths the epoch-to-epoch noise of mini-batch objectives, so a slow but steady
    decrease (e.g. 0.5 % an epoch) keeps the run going where a patience rule on single epochs
    with an absolute ``tol`` can stop it early; a noisy flat curve stops after two windows.
    Same interface as :class:`EpochPlateau` (no rate decay, no validation best).
    """

    decay = None

    def __init__(self, tol: float, window: int):
        self.tol, self.window = float(tol), int(window)
        self.values: list[float] = []
        self.best = np.inf
        self.rate = 1.0
        self.new_best = False

    def update(self, value: float) -> bool:
        """Record one epoch's value; True when the run should stop."""
        self.values.append(float(value))
        self.new_best = value < self.best
        if self.new_best:
            self.best = float(value)
        w = self.window
        n = len(self.values)
        if n < 2 * w or n % w:
            return False
        last = float(np.mean(self.values[-w:]))
        prev = float(np.mean(self.values[-2 * w:-w]))
        return prev - last <= self.tol * max(abs(prev), 1e-12)
