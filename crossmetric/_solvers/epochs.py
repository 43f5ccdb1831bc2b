"""The one epoch loop of the stochastic solvers (PCCA / CMML / LDML / CLML mini-batches, GSM).

:func:`run_epochs` calls ``epoch()`` (one pass over the batches, returning the epoch's
objective) until its rule -- :class:`~crossmetric._solvers.stopping.EpochPlateau` or
:class:`~crossmetric._solvers.stopping.WindowPlateau` -- says the objective has stopped
improving, or ``max_iter`` epochs have run. With a held-out ``monitor``
(:class:`~crossmetric._solvers.early_stopping.EarlyStopping`) the monitor decides instead,
and the parameters of its best check (the start included) are kept.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from crossmetric._solvers.stopping import EpochPlateau

__all__ = ["EpochRun", "run_epochs"]


class EpochRun(NamedTuple):
    """What :func:`run_epochs` returns."""

    curve: list          # the objective of each epoch
    val_curve: list      # the validation loss of each epoch (empty without a monitor)
    n_epochs: int
    converged: bool      # stopped by the rule, not by max_iter
    best_params: object  # a copy of the best check's parameters (with a monitor)


def run_epochs(epoch, rule: EpochPlateau, max_iter: int, *, monitor=None, params=None,
               verbose: int = 0, name: str = "") -> EpochRun:
    """Epochs of ``epoch()`` until ``rule`` stops them or ``max_iter`` have run.

    ``rule`` watches the epoch's objective; with a ``monitor`` (scored on ``params``, a dict of
    arrays, after every epoch; it has seen the start as check 0) the monitor's rule stops the
    epochs instead and its best parameters come back. ``verbose`` prints one table row per
    epoch (epoch, objective, validation loss, rate, seconds).
    """
    curve: list[float] = []
    val_curve: list[float] = []
    converged = False
    show_rate = rule.decay is not None
    if verbose:
        print(f"[{name}] {'epoch':>5} {'objective':>14} {'val loss':>10}"
              + (f" {'rate':>9}" if show_rate else "") + f" {'time(s)':>9}")
    t0 = time.perf_counter()
    for epoch_no in range(1, int(max_iter) + 1):
        rate = rule.rate
        loss = float(epoch())
        curve.append(loss)
        if monitor is not None:
            stop = monitor.update(epoch_no, params)
            val_curve.append(monitor.losses[-1])
        else:
            stop = rule.update(loss)
        if verbose:
            v = f"{val_curve[-1]:>10.5f}" if monitor is not None else f"{'-':>10}"
            print(f"[{name}] {epoch_no:>5d} {loss:>14.6e} {v}"
                  + (f" {rate:>9.3g}" if show_rate else "")
                  + f" {time.perf_counter() - t0:>9.3f}")
        if stop:
            converged = True
            break
    best = monitor.best_params if monitor is not None else None
    return EpochRun(curve, val_curve, len(curve), converged, best)
