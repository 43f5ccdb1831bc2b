"""DeepGSM's optimiser, learning-rate schedule and convergence rule.

The training objective is only seen one mini-batch at a time, so convergence is judged on the
mean batch objective over *windows* of ``n_iter_no_change`` iterations (a window mean averages
the batch-to-batch noise away). ``tol`` is an absolute decrease of that mean, as scikit-learn's
``MLPClassifier`` takes it: the hinge loss goes to 0 when the training pairs become separable,
where a relative decrease would never level off.

* ``"constant"``, ``"step"``, ``"cosine"`` -- fixed schedules. Training has converged when the
  mean of the last window is not ``tol`` below the mean of the window before. A
  fixed schedule that ends at ``max_iter`` before that happened ends unconverged (DeepGSM then
  warns). A cosine or step schedule keeps lowering the objective until its last iteration, so
  it rarely converges before ``max_iter``: it is a training *budget*, not a stopping rule.
* ``"plateau"`` -- the schedule follows the objective (PyTorch's ``ReduceLROnPlateau``): the
  rate is divided by 10 whenever a window mean is not ``tol`` below the best window mean so
  far, until it reaches ``learning_rate / 100``; training has converged when a window
  at that smallest rate still brings no improvement -- the objective has stopped decreasing
  even with a hundred times smaller steps, a real plateau. This is the rule to use when
  training should run to convergence without choosing the number of iterations.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SCHEDULES", "OPTIMIZERS", "PLATEAU_FACTOR", "PLATEAU_MIN_SCALE", "make_optimizer",
           "WindowedConvergence"]

SCHEDULES = ("constant", "step", "cosine", "plateau")
OPTIMIZERS = ("sgd", "adam")
#: ``"plateau"``: factor applied to the rate when a window brings no improvement
PLATEAU_FACTOR = 0.1
#: ``"plateau"``: the smallest rate, as a fraction of ``learning_rate`` (two reductions)
PLATEAU_MIN_SCALE = 1e-2


def make_optimizer(params, *, optimizer: str, learning_rate: float, momentum: float,
                   schedule: str, max_iter: int, tol: float | None):
    """``(optimiser, scheduler)``; a ``"plateau"`` scheduler is stepped once per window."""
    lr = float(learning_rate)
    # PyTorch's own choice of update (multi-tensor on CUDA): forcing foreach=True on a CPU
    # made a digits fit 1.3-1.9x slower (measured)
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=float(momentum))
    else:
        opt = torch.optim.Adam(params, lr=lr)
    if schedule == "constant":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0)
    elif schedule == "step":
        sched = torch.optim.lr_scheduler.MultiStepLR(
            opt, milestones=[max(1, max_iter // 2), max(2, (3 * max_iter) // 4)], gamma=0.1)
    elif schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_iter)
    else:
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="min", factor=PLATEAU_FACTOR, patience=0,
            threshold=0.0 if tol is None else float(tol), threshold_mode="abs",
            min_lr=lr * PLATEAU_MIN_SCALE, eps=0.0)
    return opt, sched


class WindowedConvergence:
    """The convergence rule of the module docstring, applied after every iteration.

    Parameters
    ----------
    optimizer, scheduler : from :func:`make_optimizer`
    schedule : str
    window : int
        ``n_iter_no_change``.
    tol : float or None
        Decrease of the window mean that counts as progress; ``None``: never converged (the plateau
        schedule then still lowers its rate, with no threshold).
    """

    def __init__(self, optimizer, scheduler, schedule: str, window: int, tol: float | None):
        self.optimizer, self.scheduler, self.schedule = optimizer, scheduler, schedule
        self.window, self.tol = int(window), tol

    @property
    def plateau(self) -> bool:
        return self.schedule == "plateau"

    def step_schedule(self) -> None:
        """Per-iteration scheduler step (fixed schedules only)."""
        if not self.plateau:
            self.scheduler.step()

    def update(self, curve: list, done: int) -> bool:
        """Window bookkeeping after iteration ``done``; True when training has converged."""
        w = self.window
        if done % w or len(curve) < w:
            return False
        last = float(np.mean(curve[-w:]))
        if self.plateau:
            lr_before = self.optimizer.param_groups[0]["lr"]
            at_floor = lr_before <= self.scheduler.min_lrs[0] * (1 + 1e-9)
            best_before = self.scheduler.best
            self.scheduler.step(last)
            improved = self.scheduler.best != best_before
            return self.tol is not None and at_floor and not improved
        if self.tol is None or len(curve) < 2 * w:
            return False
        prev = float(np.mean(curve[-2 * w:-w]))
        return last > prev - float(self.tol)
