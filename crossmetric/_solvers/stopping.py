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
:class:`WindowPlateau`      the mean of the last ``window`` epochs is not ``tol`` (relative or
                            absolute) below the mean of the window before (GSM's
                            ``stopping="window"``; DeepGSM's fixed learning-rate schedules,
                            absolute, over rounds)
:class:`RatePlateau`        a window mean of rounds at the smallest learning rate is not
                            ``tol`` below the best window mean; each window that is not lowers
                            the rate first (DeepGSM's ``lr_schedule="plateau"``)
==========================  ==================================================================

Stopping on held-out pairs instead of the training objective (``early_stopping``) is
:mod:`crossmetric._solvers.early_stopping`; DeepGSM's patience on its held-out rank-1 is an
:class:`EpochPlateau` of the negated score (``tol=0``, relative: any gain counts). The former
homes of these rules keep their names:
``crossmetric._solvers.descent._Plateau`` (:class:`BestPlateau`),
``crossmetric._solvers.epochs.EpochPlateau`` and ``.WindowPlateau``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BestPlateau", "EpochPlateau", "WindowPlateau", "RatePlateau"]


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
    """A plateau of the *smoothed* objective: window means, relative or absolute tolerance.

    After every ``window`` epochs the mean objective of the last ``window`` epochs is compared
    with the mean of the ``window`` before; the run stops when it is not lower by more than
    ``tol`` relative to that previous mean (``prev − last <= tol · |prev|``), or with
    ``relative=False`` by at least ``tol`` (``last > prev − tol``, :class:`EpochPlateau`'s
    absolute improvement: an objective that goes to 0, like a hinge loss on separable pairs,
    never levels off relative to itself). The mean over a
    window smooths the epoch-to-epoch noise of mini-batch objectives, so a slow but steady
    decrease (e.g. 0.5 % an epoch) keeps the run going where a patience rule on single epochs
    with an absolute ``tol`` can stop it early; a noisy flat curve stops after two windows.
    Same interface as :class:`EpochPlateau` (no rate decay, no validation best).

    Examples
    --------
    >>> rule = WindowPlateau(tol=0.01, window=2, relative=False)
    >>> [rule.update(v) for v in (1.0, 1.0, 0.98, 0.98)]  # 0.02 below the window before
    [False, False, False, False]
    >>> [rule.update(v) for v in (0.975, 0.975)]          # 0.005 below: a plateau
    [False, True]
    """

    decay = None

    def __init__(self, tol: float, window: int, *, relative: bool = True):
        self.tol, self.window, self.relative = float(tol), int(window), bool(relative)
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
        if not self.relative:
            return last > prev - self.tol
        return prev - last <= self.tol * max(abs(prev), 1e-12)


class RatePlateau:
    """Window means of the objective under a learning rate that drops on every window that
    does not improve; stops when one at the smallest rate still does not.

    After every ``window`` updates the mean of the last ``window`` values *improves* when it
    is below the best improving mean so far by more than ``tol`` (absolute; the first window
    always improves). A window that does not multiplies ``rate`` by ``factor``, down to
    ``min_rate`` (``rate = max(rate · factor, min_rate)``); the run stops when a window that
    began at ``min_rate`` still does not improve -- the objective has stopped decreasing even
    with steps ``min_rate / rate`` times smaller, a real plateau. With ``tol=None`` the rate
    still drops (a threshold of 0) and the run never stops. This is PyTorch's
    ``ReduceLROnPlateau`` (``mode="min"``, ``threshold_mode="abs"``, ``patience=0``) stepped
    once per window, with its convergence test; the caller applies :attr:`rate` to its
    optimiser after each update.

    Parameters
    ----------
    tol : float or None
        Absolute decrease of the window mean that counts as an improvement.
    window : int
        Updates per window.
    rate : float
        The starting rate (the optimiser's learning rate).
    factor : float, default=0.1
        Multiplier of the rate after a window without improvement.
    min_rate : float
        The smallest rate.

    Examples
    --------
    >>> rule = RatePlateau(tol=0.01, window=2, rate=1.0, min_rate=0.01)
    >>> [rule.update(v) for v in (1.0, 0.8, 0.6, 0.4)], rule.rate  # improving windows
    ([False, False, False, False], 1.0)
    >>> [rule.update(0.5) for _ in range(6)], round(rule.rate, 6)  # 1 -> 0.1 -> 0.01, stop
    ([False, False, False, False, False, True], 0.01)
    """

    decay = None

    def __init__(self, tol: float | None, window: int, *, rate: float, factor: float = 0.1,
                 min_rate: float):
        self.tol = None if tol is None else float(tol)
        self.window = int(window)
        self.rate, self.factor, self.min_rate = float(rate), float(factor), float(min_rate)
        self.values: list[float] = []
        self.best = np.inf

    def update(self, value: float) -> bool:
        """Record one update's value; True when the run should stop."""
        self.values.append(float(value))
        w = self.window
        if len(self.values) % w:
            return False
        last = float(np.mean(self.values[-w:]))
        at_floor = self.rate <= self.min_rate * (1 + 1e-9)
        if last < self.best - (0.0 if self.tol is None else self.tol):
            self.best = last
            return False
        lowered = max(self.rate * self.factor, self.min_rate)
        if self.rate - lowered > 0.0:
            self.rate = lowered
        return self.tol is not None and at_floor
