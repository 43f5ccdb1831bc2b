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

Both rules are the library's (:mod:`crossmetric._solvers.stopping`: an absolute
:class:`~crossmetric._solvers.stopping.WindowPlateau` and a
:class:`~crossmetric._solvers.stopping.RatePlateau`), fed the objective of every round.
"""

from __future__ import annotations

import torch

from crossmetric._solvers.stopping import RatePlateau, WindowPlateau

__all__ = ["SCHEDULES", "OPTIMIZERS", "PLATEAU_FACTOR", "PLATEAU_MIN_SCALE", "make_optimizer",
           "convergence_rule"]

SCHEDULES = ("constant", "step", "cosine", "plateau")
OPTIMIZERS = ("sgd", "adam")
#: ``"plateau"``: factor applied to the rate when a window brings no improvement
PLATEAU_FACTOR = 0.1
#: ``"plateau"``: the smallest rate, as a fraction of ``learning_rate`` (two reductions)
PLATEAU_MIN_SCALE = 1e-2


def make_optimizer(params, *, optimizer: str, learning_rate: float, momentum: float,
                   schedule: str, max_iter: int):
    """``(optimiser, scheduler)``, the scheduler stepped after every round; ``None`` for
    ``"plateau"``, whose rate :func:`convergence_rule` sets."""
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
        sched = None
    return opt, sched


def convergence_rule(schedule: str, window: int, tol: float | None, learning_rate: float):
    """The rule of the module docstring, from the library's stopping rules
    (:mod:`crossmetric._solvers.stopping`), fed every round's objective: a
    :class:`~crossmetric._solvers.stopping.RatePlateau` for ``"plateau"`` (its ``rate`` is the
    learning rate to apply after each round), an absolute
    :class:`~crossmetric._solvers.stopping.WindowPlateau` for a fixed schedule, ``None`` for a
    fixed schedule without ``tol``."""
    if schedule == "plateau":
        lr = float(learning_rate)
        return RatePlateau(tol, int(window), rate=lr, factor=PLATEAU_FACTOR,
                           min_rate=lr * PLATEAU_MIN_SCALE)
    return None if tol is None else WindowPlateau(float(tol), int(window), relative=False)
