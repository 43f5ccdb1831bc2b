"""When an iterative solver has converged: the plateau rules of the training objective.

Every rule has ``update(value) -> bool``: record the objective (or monitored value) of one
iteration or epoch, and say whether the run should stop. The run's loop (L-BFGS's callback,
gradient descent, :func:`~crossmetric._solvers.epochs.run_epochs`, CML-AUC's proximal steps)
owns the iterate; the rule only watches numbers.

==========================  ==================================================================
rule                        stops when
==========================  ==================================================================
:class:`BestPlateau`        the *best* value so far fell by less than a relative ``tol`` over
                            the last ``window`` updates (full-batch solvers: L-BFGS and
                            gradient descent of PCCA / CMML / LDML / CLML, ``tol`` per
                            update; CML-AUC / MahaAUC, ``tol`` over the window)
:class:`EpochPlateau`       ``patience`` epochs in a row brought no improvement of ``tol``
                            (relative or absolute), optionally decaying a rate first (the
                            mini-batch solvers; GSM's ``stopping="patience"``)
:class:`WindowPlateau`      the mean of the last ``window`` epochs is not ``tol`` (relative)
                            below the mean of the window before (GSM's ``stopping="window"``)
==========================  ==================================================================

Stopping on held-out pairs instead of the training objective (``early_stopping``) is
:mod:`crossmetric._solvers.early_stopping`. The former homes of these rules keep their names:
``crossmetric._solvers.descent._Plateau`` (:class:`BestPlateau`),
``crossmetric._solvers.epochs.EpochPlateau`` and ``.WindowPlateau``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BestPlateau", "EpochPlateau", "WindowPlateau"]


class BestPlateau:
    """A *real* plateau of the best value so far, not one small step.

    Keeps the best value seen, ``b[t] = min(v[t], b[t − 1])``, and stops once it has fallen by
    little over the last ``window`` updates:

    * ``per_update=True`` (the full-batch solvers): by less than ``tol`` per update relative
      to its value, ``b[t − window] − b[t] <= window · tol · max(|b[t]|, floor)``;
    * ``per_update=False`` (CML-AUC): by less than ``tol`` over the whole window,
      ``b[t − window] − b[t] <= tol · max(|b[t]|, floor)``.

    A single overshooting step that barely lowers the objective therefore never ends a run,
    and neither does a rise (only the best value counts). No stop before ``window + 1``
    updates. A caller that keeps its own best value (to return the best iterate) may pass it
    instead of the raw value: the best of a non-increasing sequence is the sequence.

    Parameters
    ----------
    tol : float
        Relative decrease, per update or over the window (``per_update``).
    window : int, default=10
        Updates compared.
    per_update : bool, default=True
        Whether ``tol`` is per update (multiplied by ``window``) or over the window.
    floor : float, default=1e-300
        Lower bound of ``|b[t]|`` in the tolerance (``0.0``: none).

    Examples
    --------
    >>> rule = BestPlateau(tol=1e-3, window=2)
    >>> [rule.update(v) for v in (4.0, 2.0, 1.0, 0.9999)]  # a small step after big ones
    [False, False, False, False]
    >>> rule.update(5.0)  # the best fell by 1e-4 over the last 2 updates, < 2 · 1e-3 · 0.9999
    True
    """

    def __init__(self, tol: float, window: int = 10, *, per_update: bool = True,
                 floor: float = 1e-300):
        self.tol = float(tol)
        self.window = int(window)
        self.per_update = bool(per_update)
        self.floor = float(floor)
        self.best: list[float] = []

    def update(self, loss: float) -> bool:
        """Record one value; True when the run should stop."""
        best = min(loss, self.best[-1]) if self.best else loss
        self.best.append(best)
        if len(self.best) <= self.window:
            return False
        old = self.best[-1 - self.window]
        if self.per_update:
            return old - best <= self.window * self.tol * max(abs(best), self.floor)
        return old - best <= self.tol * max(abs(best), self.floor)


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
