"""Weight averaging for DeepGSM (stochastic weight averaging, Izmailov et al., UAI 2018).

From round ``start`` on, the running mean of the network's weights over every round is kept
(:class:`torch.optim.swa_utils.AveragedModel`, buffers averaged too, so a backbone's batch-norm
statistics are those of the mean as well); at the end of training the mean is the model. The
mean of the weights visited late in a schedule sits in a flatter part of the loss than any one
of them and generalises better; it costs one copy of the weights and no extra forward pass.
No training step changes: the optimiser follows the same trajectory with or without it.
"""

from __future__ import annotations

import math

import torch
from torch.optim.swa_utils import AveragedModel

__all__ = ["WeightAverage", "averaging_start"]


def averaging_start(average_from: float | None, max_iter: int) -> int | None:
    """The first round whose weights enter the mean (``None``: no averaging).

    Round ``t`` (0-based) enters when ``t >= floor(average_from · max_iter)``: ``0`` averages
    every round, ``0.5`` the second half of the schedule.
    """
    if average_from is None:
        return None
    return min(int(math.floor(float(average_from) * int(max_iter))), int(max_iter) - 1)


class WeightAverage:
    """The running mean of a network's weights from round ``start`` on.

    Parameters
    ----------
    net : torch.nn.Module
        The network being trained (the mean is a copy of it; ``net`` is not modified).
    start : int
        First round (0-based) whose weights are averaged.
    """

    def __init__(self, net: torch.nn.Module, start: int):
        self.start = int(start)
        self.model = AveragedModel(net, use_buffers=True)

    @property
    def n_averaged(self) -> int:
        """Rounds in the mean so far."""
        return int(self.model.n_averaged)

    def update(self, net: torch.nn.Module, t: int) -> None:
        """Add the weights after round ``t`` (0-based) when ``t >= start``."""
        if t >= self.start:
            self.model.update_parameters(net)

    def current(self, net: torch.nn.Module) -> torch.nn.Module:
        """The network training would return now: the mean once it has begun, else ``net``."""
        return self.model.module if self.n_averaged else net

    def state_dict(self) -> dict:
        return self.model.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state)
