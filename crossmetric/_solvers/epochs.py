"""The one epoch loop of the stochastic solvers (PCCA / CMML / LDML / CLML mini-batches, GSM).

:func:`run_epochs` calls ``epoch()`` (one pass over the batches, returning the epoch's
objective) until its rule -- :class:`~crossmetric._solvers.stopping.EpochPlateau` or
:class:`~crossmetric._solvers.stopping.WindowPlateau`, defined in :mod:`.stopping` and still
importable from here -- says the monitored quantity (the objective, or a validation loss) has
stopped improving, or ``max_iter`` epochs have run. With a validation loss the parameters of
its best epoch are kept.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from crossmetric._solvers.stopping import EpochPlateau, WindowPlateau

__all__ = ["EpochPlateau", "WindowPlateau", "EpochRun", "run_epochs"]


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
