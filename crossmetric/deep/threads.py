"""PyTorch's intra-op threads for small networks on the CPU.

A round of a small network (the 16 × 16 digits network of the default benchmark: ~0.1 GFLOP
for forward and backward of 80 images) is made of many tiny operators. With several OpenMP
threads each operator starts and joins them; on a shared machine, where the threads wait for
cores, they spin. Measured on a loaded 2-core machine (load 7): 299 ms of CPU per
round with 2 threads against 7.4 ms with 1 -- and each joblib worker of the default
benchmark already runs with 1 (``OMP_NUM_THREADS=1``). :func:`small_net_threads` therefore
runs a CPU fit single-threaded when a round costs less than :data:`SMALL_ROUND_FLOPS`
(forward + backward, estimated from one forward pass), and restores the setting after.
Large networks keep the threads they were given.
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["SMALL_ROUND_FLOPS", "round_flops", "small_net_threads"]

#: below this many floating-point operations per training round (forward + backward) a CPU
#: fit runs with one intra-op thread: ~15 ms of one core at the ~20 GFLOP/s these small
#: operators reach (the digits network: 0.1 GFLOP; the paper's network on 160 × 64 RGB
#: images with 80 images a round: 0.7 GFLOP, which keeps its threads)
SMALL_ROUND_FLOPS = 3e8


def round_flops(net: torch.nn.Module, probe, n_images: int) -> float:
    """Estimated FLOPs of one round: 3 × the forward FLOPs per image × ``n_images``.

    ``probe = (images_x, images_y)``: a few images of each domain, sent through ``net`` once
    under :class:`torch.utils.flop_counter.FlopCounterMode` (backward ≈ 2 × forward).
    """
    from torch.utils.flop_counter import FlopCounterMode

    px, py = probe[0][:1], probe[1][:1]
    was = net.training
    net.eval()  # no batch statistics updated, no dropout drawn: the fit is unchanged
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            net(px, py)
    finally:
        net.train(was)
    return 3.0 * counter.get_total_flops() / 2.0 * float(n_images)


@contextlib.contextmanager
def small_net_threads(net: torch.nn.Module, device: torch.device, probe, n_images: int):
    """One intra-op thread for the duration of a CPU fit whose rounds are small."""
    threads = torch.get_num_threads()
    small = device.type == "cpu" and threads > 1
    if small:
        try:
            small = round_flops(net, probe, n_images) < SMALL_ROUND_FLOPS
        except Exception:  # noqa: BLE001 - a backbone the counter cannot trace: keep threads
            small = False
    if not small:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
