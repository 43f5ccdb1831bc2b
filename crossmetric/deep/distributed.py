"""Multi-process data-parallel training for DeepGSM (``torch.distributed``, DDP).

Every process embeds its share of each round's images (its identities, see
:class:`crossmetric.deep.data.CrossDomainIdentitySampler`); the similarity components are then
gathered so that every process forms the loss over **all** n_x · n_y pairs of the global round,
as one process would. Each process back-propagates only through its own rows (the gathered rows
of the others are constants), so the sum over processes of the gradients is the gradient of the
one-process loss; DDP *averages* gradients, hence the hinge is multiplied by the number of
processes before ``backward`` (the penalty of eq. 7 is the same on every process and is left as
it is). Terms of the loss that do not belong to a row -- the constant f when it is learnt --
keep their gradient on process 0 only.

Launch: ``DeepGSM(n_processes=P)`` spawns P local processes (``gloo`` on CPUs, ``nccl`` on
GPUs, one GPU per process); or start the script with ``torchrun --nproc-per-node P`` and call
``torch.distributed.init_process_group`` before ``fit`` -- ``fit`` then trains with the existing
process group and every process ends with the same model. Spawned processes re-import the
calling script, as any spawned multiprocessing does: it must be a file whose top level is
guarded by ``if __name__ == "__main__":`` (code piped to ``python -`` cannot be re-imported).
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

__all__ = ["gather_rows", "once", "free_port", "active_group"]


def active_group() -> tuple[int, int]:
    """``(rank, world_size)`` of an initialised process group, else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_rows(local: torch.Tensor, counts, rank: int) -> torch.Tensor:
    """Concatenate every process's rows (``counts[r]`` rows on process r) in rank order.

    The result carries gradient only through this process's own rows.
    """
    counts = [int(c) for c in counts]
    width = local.shape[1]
    pad = max(counts)
    buf = torch.zeros(pad, width, dtype=local.dtype, device=local.device)
    buf[:local.shape[0]] = local.detach()
    parts = [torch.empty_like(buf) for _ in counts]
    dist.all_gather(parts, buf)
    pieces = [local if r == rank else parts[r][:c] for r, c in enumerate(counts)]
    return torch.cat(pieces)


def once(value: torch.Tensor, rank: int) -> torch.Tensor:
    """``value`` whose gradient is kept on process 0 only (zero elsewhere, still in the graph)."""
    if not torch.is_tensor(value) or not value.requires_grad:
        return value
    return value.detach() + (value - value.detach()) * (1.0 if rank == 0 else 0.0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_worker(rank: int, world: int, port: int, backend: str, threads: int, run,
                 result_path: str) -> None:
    """Body of one spawned process: join the group, ``run(rank, world)``, process 0 writes
    its result (``torch.save``) to ``result_path``.

    ``run`` is a picklable callable (DeepGSM passes
    :func:`crossmetric.deep.training.spawn_training`'s partial of its training function), so
    this module depends on no training code.
    """
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(max(1, int(threads)))
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        result = run(rank, world)
        if rank == 0:
            torch.save(result, result_path)
        dist.barrier()
    finally:
        dist.destroy_process_group()
