"""DeepGSM's training loop: Algorithm 2 of Lin et al. on one process of ``world``.

:func:`train` runs rounds of the §4.2 batch generator (:mod:`crossmetric.deep.inputs`), the
objective of :mod:`crossmetric.deep.objective`, the optimiser and schedule of
:mod:`crossmetric.deep.schedule` (with mixed precision on CUDA), weight averaging, early
stopping on held-out rank-1, convergence and time limits, and checkpoints
(:mod:`crossmetric.deep.checkpoint`). It takes DeepGSM's parameters as a dict
(``get_params(deep=False)``), not the estimator, so that a spawned process
(:func:`spawn_training`, :mod:`crossmetric.deep.distributed`) needs only the parameters.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import time

import numpy as np
import torch
from tqdm.auto import tqdm

from crossmetric._solvers.early_stopping import EarlyStopping, Validation
from crossmetric._solvers.stopping import RatePlateau
from crossmetric.deep.averaging import WeightAverage, averaging_start
from crossmetric.deep.build import build_net, load_backbone_file
from crossmetric.deep.checkpoint import check_resume, read_checkpoint, write_checkpoint
from crossmetric.deep.data import (
    IterationBatches,
    collate_domains,
    fingerprint,
    round_batches,
)
from crossmetric.deep.descriptor import initial_log_scale
from crossmetric.deep.distributed import free_port, gather_rows, once, spawn_worker
from crossmetric.deep.inference import held_out_similarity
from crossmetric.deep.inputs import round_data
from crossmetric.deep.objective import penalised, penalty, round_hinge
from crossmetric.deep.params import (
    check_params,
    named_backbone,
    namespace,
    resolve_device,
    settings,
    use_amp,
)
from crossmetric.deep.prefetch import Prefetch
from crossmetric.deep.schedule import convergence_rule, make_optimizer
from crossmetric.deep.threads import small_net_threads

__all__ = ["deterministic", "spawn_training", "train"]

_STOPS = ("tol", "early_stopping", "max_time")


@contextlib.contextmanager
def deterministic(enabled: bool):
    """``torch.use_deterministic_algorithms(True)`` for the duration of a fit (restored after)."""
    if not enabled:
        yield
        return
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def make_run_optimizer(p, net, max_iter: int):
    """``(optimizer, scheduler)`` of parameters ``p`` for ``net``."""
    return make_optimizer(net.parameters(), optimizer=p.optimizer,
                          learning_rate=p.learning_rate, momentum=p.momentum,
                          schedule=p.lr_schedule, max_iter=max_iter)


def _start_net(p, ds, shape, channels, seed: int, device, descriptors=None):
    """The initialised network (on ``device``) and the probe batch it was initialised on;
    ``descriptors``: the training images' descriptor rows ``(u_x, u_y)`` (a descriptor
    branch, whose scale starts from them) or None."""
    width = 0 if descriptors is None else int(descriptors[0].shape[1])
    net = build_net(p, shape, channels, seed=seed, load=True, descriptor_width=width)
    n_probe = [min(32, ds.n_x), min(32, len(ds) - ds.n_x)]
    probe = (torch.stack([ds.load(i)[0] for i in range(n_probe[0])]),
             torch.stack([ds.load(ds.n_x + i)[0] for i in range(n_probe[1])]))
    net.initialize(p.init, torch.Generator().manual_seed(seed), probe=probe)
    if descriptors is not None:
        with torch.no_grad():
            net.descriptor_log_scale.fill_(initial_log_scale(*descriptors, seed))
    if isinstance(p.backbone, (str, os.PathLike)) and not named_backbone(p):
        load_backbone_file(p, net)
    net.to(device)
    return net, probe


class _Run:
    """The state of one training run (what a checkpoint holds) and its steps."""

    def __init__(self, p, net, model, *, amp: bool, rank: int, world: int, device,
                 checkpoint: dict, descriptors=None, validation: Validation | None = None):
        self.p, self.net, self.model = p, net, model
        # the training images' descriptor rows (u_x, u_y) on the device, or None
        self.u = None if descriptors is None else tuple(
            torch.as_tensor(a, device=device) for a in descriptors)
        self.amp, self.rank, self.world, self.device = amp, rank, world, device
        self.max_iter = int(p.max_iter)
        self.opt, self.sched = make_run_optimizer(p, net, self.max_iter)
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)
        self.rule = convergence_rule(p.lr_schedule, int(p.n_iter_no_change), p.tol,
                                     p.learning_rate)
        # early_stopping: the library's guard on held-out identities, scoring S̃ between
        # them (whose margin of eq. 5 is 0); patience counted in checks
        self.monitor = None if validation is None else EarlyStopping(
            _similarities, validation, int(p.patience))
        a0 = averaging_start(p.average_from, self.max_iter)
        self.avg = None if a0 is None else WeightAverage(net, a0)
        self.start, self.curve, self.val_scores, self.best = 0, [], [], None
        self.checkpoint = checkpoint  # path, settings, fingerprint, seed

    def restore(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.start, self.curve = int(state["iteration"]), list(state["loss_curve"])
        if self.sched is not None:
            self.sched.load_state_dict(state["scheduler"])
        elif isinstance(self.rule, RatePlateau):  # its best window mean; the rate is the lr
            self.rule.best = float(state["scheduler"]["best"])
            self.rule.rate = float(self.opt.param_groups[0]["lr"])
        if self.rule is not None:
            self.rule.values = list(self.curve)
        self.val_scores, self.best = list(state["validation_scores"]), state["best"]
        if self.monitor is not None and self.val_scores:
            if state.get("monitor") is None:
                raise ValueError(
                    f"checkpoint {self.checkpoint['path']!r} was written before the held-out "
                    "guard's record was kept (checkpoint format 2): its early stopping cannot "
                    "continue. Delete it or set resume=False.")
            self.monitor.load_state_dict(state["monitor"])
        if self.avg is not None:
            self.avg.load_state_dict(state["average"])

    def save(self, done: int) -> None:
        c = self.checkpoint
        if c["path"] is None or self.rank != 0:
            return
        write_checkpoint(c["path"], {
            "settings": c["settings"], "fingerprint": c["fingerprint"], "seed": c["seed"],
            "net": self.net.state_dict(), "optimizer": self.opt.state_dict(),
            "scheduler": (self.sched.state_dict() if self.sched is not None
                          else {"best": getattr(self.rule, "best", None)}),
            "scaler": self.scaler.state_dict(),
            "iteration": int(done), "loss_curve": list(self.curve),
            "validation_scores": list(self.val_scores), "best": self.best,
            "monitor": None if self.monitor is None else self.monitor.state_dict(),
            "average": None if self.avg is None else self.avg.state_dict()})

    def step(self, xb, yb, gx, gy, gathered, weights_cache, tensors, ub=None):
        """One gradient step on a round's images (``gathered``: DDP's row counts or None;
        ``ub``: their descriptor rows or None); returns the round's hinge and penalty."""
        p, net, model = self.p, self.net, self.model
        xb = xb.to(self.device, non_blocking=True)
        yb = yb.to(self.device, non_blocking=True)
        if self.amp:
            with torch.autocast(device_type=self.device.type, dtype=torch.float16):
                TX, TY, fv = model(xb, yb)
            TX, TY = TX.float(), TY.float()
            fv = fv.float() if torch.is_tensor(fv) else fv
        else:
            TX, TY, fv = model(xb, yb)
        if ub is not None:
            TX, TY = net.with_descriptor(TX, ub[0]), net.with_descriptor(TY, ub[1])
        if gathered is not None:
            cx, cy = gathered
            TX, TY = gather_rows(TX, cx, self.rank), gather_rows(TY, cy, self.rank)
            fv = once(fv, self.rank)
        hinge = round_hinge(TX, TY, fv, gx, gy, batch_mode=p.batch_mode,
                            hard_negatives=p.hard_negatives, cache=weights_cache)
        pen = penalty(net, p.weight_decay, p.mu, tensors)
        self.opt.zero_grad(set_to_none=True)
        loss = (hinge if self.world == 1 else hinge * self.world) + pen  # (× 1 is exact)
        if self.amp:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        if self.sched is not None:
            self.sched.step()
        return hinge, pen

    def validate(self, done: int, score) -> str | None:
        """Score the weights training would return (the monitor's check ``check``: the start,
        then every ``validation_every`` rounds); keep them when the monitor keeps the check;
        ``"early_stopping"`` after ``patience`` checks without progress."""
        net, avg, monitor = self.net, self.avg, self.monitor
        now = net if avg is None else avg.current(net)
        check = len(self.val_scores)
        stop = monitor.update(check, score(now))
        monitor.best_params = None  # the kept check's weights are held below
        self.val_scores.append((done, monitor.scores[-1]))
        if monitor.best_iteration == check:
            self.best = (done, monitor.scores[-1],
                         {k: v.detach().cpu().clone() for k, v in now.state_dict().items()},
                         0 if now is net else avg.n_averaged)
        return "early_stopping" if stop else None

    def loop(self, rounds, sampler, ids_x, ids_y, score, every_val: int):
        """Rounds ``start .. max_iter - 1`` (``rounds`` yields each round's global rows and
        this process's images, ``(ix, iy, xb, yb)``); returns ``(stop_reason, converged,
        done, t0)``."""
        import torch.distributed as dist

        p, net, world = self.p, self.net, self.world
        window = int(p.n_iter_no_change)
        converged, stop_reason, done = False, "max_iter", self.start
        t0 = time.perf_counter()
        verbose = p.verbose and self.rank == 0
        if verbose:
            print(f"{'iter':>7} {'objective':>11} {'lr':>9} {'time (s)':>9}")
        if score is not None and not self.val_scores:
            self.validate(done, score)  # the start: a check training must beat to replace it
        bar = tqdm(total=self.max_iter, initial=self.start,
                   disable=not p.progress or self.rank != 0, desc="DeepGSM", leave=False)
        tensors, weights_cache = penalised(net), {}
        every = int(p.checkpoint_every)
        net.train()
        for t, (ix, iy, xb, yb) in zip(range(self.start, self.max_iter), rounds,
                                       strict=False):
            gathered = None
            if world > 1:
                ix, iy, cx, cy = sampler.gathered_order(ix, iy)
                gathered = (cx, cy)
            ub = None if self.u is None else (self.u[0][torch.as_tensor(ix)],
                                              self.u[1][torch.as_tensor(iy)])
            hinge, pen = self.step(xb, yb, ids_x[ix], ids_y[iy], gathered, weights_cache,
                                   tensors, ub)
            if self.avg is not None:
                self.avg.update(net, t)
            self.curve.append(float(hinge.detach()) + float(pen.detach()))
            bar.update(1)
            done = t + 1
            if done % every == 0 or done == self.max_iter:
                self.save(done)
            if verbose and (done % every == 0 or done == self.start + 1):
                print(f"{done:>7} {np.mean(self.curve[-window:]):>11.5f} "
                      f"{self.opt.param_groups[0]['lr']:>9.2e} {time.perf_counter() - t0:>9.1f}")
            stop = None
            if score is not None and (done % every_val == 0 or done == self.max_iter):
                stop = self.validate(done, score)
            if self.rule is not None:
                converged_now = self.rule.update(self.curve[-1])
                if isinstance(self.rule, RatePlateau):  # the plateau schedule's rate
                    for group in self.opt.param_groups:
                        group["lr"] = self.rule.rate
                if converged_now and stop is None:
                    stop = "tol"
            if stop is None and p.max_time is not None \
                    and time.perf_counter() - t0 >= p.max_time:
                stop = "max_time"
            if world > 1:  # every process stops at the same round
                code = torch.tensor([_STOPS.index(stop) + 1 if stop else 0])
                dist.all_reduce(code, op=dist.ReduceOp.MAX)
                c = int(code)
                stop = _STOPS[c - 1] if c else None
            if stop is not None:
                stop_reason, converged = stop, stop == "tol"
                break
        bar.close()
        return stop_reason, converged, done, t0

    def final_state(self):
        """``(state_dict, n_averaged)`` of the model training returns."""
        net, avg = self.net, self.avg
        final = net if avg is None else avg.current(net)
        state_out = {k: v.detach().cpu() for k, v in final.state_dict().items()}
        n_averaged = 0 if final is net else avg.n_averaged
        if self.best is not None:
            # (a checkpoint written before weight averaging existed keeps 3 entries)
            best = self.best
            state_out, n_averaged = best[2], (best[3] if len(best) > 3 else 0)
        return state_out, n_averaged


def own_generators(ds) -> bool:
    """True when every transform of ``ds`` is ``None`` or takes its own generator: preparing
    rounds then never touches torch's global generator (safe in a background thread)."""
    return all(tf is None or getattr(tf, "takes_rng", False) for tf in ds.transforms)


def _rounds(p, ds, batches, device):
    """``(ix, iy, images_x, images_y)`` of every round: its global rows and this process's
    images. On a CPU without workers the dataset's batch path, several rounds at a time
    (:func:`~crossmetric.deep.data.round_batches`: the DataLoader's fetch without its
    machinery, the same batches), run ahead by a background thread
    (:class:`~crossmetric.deep.prefetch.Prefetch`) when images are decoded from files and every
    transform is ``None`` or draws from its own generator (``takes_rng``); else a
    ``DataLoader``.

    A transform without ``takes_rng`` (a torchvision pipeline) draws from torch's process-wide
    generator, seeded per image under ``torch.random.fork_rng``; in a background thread that
    would reseed and restore the generator while the training thread draws from it (dropout),
    so such rounds are prepared in the training thread."""
    if int(p.num_workers) == 0 and device.type == "cpu":
        local = round_batches(ds, batches)
        return Prefetch(local) if ds.reads_files and own_generators(ds) else local
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=batches, num_workers=int(p.num_workers),
        collate_fn=collate_domains, pin_memory=device.type == "cuda")
    return ((*batches.global_round(t), xb, yb)
            for t, (xb, yb) in zip(range(batches.start, batches.stop), loader, strict=False))


def train(params: dict, x, ids_x, y, ids_y, shape, channels, seed, *, rank=0,
          world=1, descriptors=None) -> dict:
    """Algorithm 2 on one process (of ``world``); returns the trained state and curve.

    ``params`` are DeepGSM's (``get_params(deep=False)``); ``x``, ``y`` the training images
    (arrays or file lists) with identity codes ``ids_x``, ``ids_y``; ``shape``, ``channels``
    their layout; ``seed`` the run's seed (a resumed checkpoint's seed wins);
    ``descriptors`` the descriptor rows ``(u_x, u_y)`` of ``x`` and ``y`` (a descriptor
    branch, :mod:`crossmetric.deep.descriptor`; one process only) or None.
    """
    p = namespace(params)
    check_params(p)
    device = resolve_device(p, rank)
    amp = use_amp(p, device)
    path = p.checkpoint_path
    # the training set's digest (every array byte, or a stat of every file) only matters to
    # checkpoints
    conf, fp = settings(params), None if path is None else fingerprint(x, ids_x, y, ids_y)
    state = None
    if p.resume and path is not None and os.path.exists(path):
        state = read_checkpoint(path, device)
        check_resume(path, state, conf, fp)
        seed = int(state["seed"])
    if descriptors is not None and world > 1:
        raise ValueError("a descriptor branch trains on one process; leave n_processes at 1 "
                         "and run outside torchrun.")
    ds, sampler, ids_x, ids_y, val, k, n_pairs, desc = round_data(
        p, x, ids_x, y, ids_y, shape, channels, seed, rank, world, descriptors=descriptors)
    net, probe = _start_net(p, ds, shape, channels, seed, device,
                            None if desc is None else desc[0])
    model = net
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None)
    run = _Run(p, net, model, amp=amp, rank=rank, world=world, device=device,
               checkpoint={"path": path, "settings": conf, "fingerprint": fp, "seed": seed},
               descriptors=None if desc is None else desc[0],
               validation=None if val is None else Validation(None, None, val[1], val[3],
                                                              False))
    if state is not None:
        run.restore(state)
    every_val = int(p.validation_every or len(sampler))
    batches = IterationBatches(sampler, run.start, run.max_iter)
    score = None
    if val is not None:
        # held-out files decoded once (in the training data's cache) when read in-process
        score = functools.partial(_score, val=val, shape=shape, channels=channels,
                                  device=device, p=p,
                                  descriptors=None if desc is None else desc[1],
                                  cache=ds.cache if int(p.num_workers) == 0 else None)
    n_images = 2 * int(n_pairs) if p.batch_mode == "pair" else k * (
        int(p.n_images_x) + int(p.n_images_y))
    with deterministic(device.type == "cpu"), small_net_threads(net, device, probe, n_images):
        rounds = _rounds(p, ds, batches, device)
        try:
            stop_reason, converged, done, t0 = run.loop(rounds, sampler, ids_x, ids_y, score,
                                                        every_val)
        finally:
            if hasattr(rounds, "close"):  # a prefetching thread stops, a generator ends
                rounds.close()
    if stop_reason != "max_iter":
        run.save(done)
    state_out, n_averaged = run.final_state()
    best = run.best
    return {"state": state_out, "curve": run.curve, "start": run.start,
            "stop_reason": stop_reason, "converged": converged,
            "train_time": time.perf_counter() - t0,
            "n_identities": int(np.intersect1d(ids_x, ids_y).size),
            "validation_scores": [(int(a), float(b)) for a, b in run.val_scores],
            "best_iteration": None if best is None else int(best[0]),
            "n_averaged": n_averaged}


def _similarities(S: np.ndarray) -> tuple[np.ndarray, float]:
    """The monitor's ``cross``: a check's held-out S̃ (its "parameters" here) and the
    threshold of its loss, 0 (the midpoint of eq. 5's margins)."""
    return S, 0.0


def _score(net, *, val, shape, channels, device, p, descriptors=None,
           cache=None) -> np.ndarray:
    return held_out_similarity(net, val, shape, channels, device, descriptors=descriptors,
                          flip=bool(p.test_flip),
                          batch_size=int(p.eval_batch_size), num_workers=int(p.num_workers),
                          cache=cache)


def _train_process(params: dict, train_args: tuple, rank: int, world: int) -> dict:
    return train({**params, "n_processes": 1}, *train_args, rank=rank, world=world)


def spawn_training(params: dict, train_args: tuple, n: int, device) -> dict:
    """:func:`train` on ``n`` spawned local processes (DDP); the result of process 0."""
    if device.type == "cuda" and torch.cuda.device_count() < n:
        raise ValueError(f"n_processes={n} needs {n} GPUs with nccl; "
                         f"{torch.cuda.device_count()} found.")
    backend = "nccl" if device.type == "cuda" else "gloo"
    threads = max(1, torch.get_num_threads() // n)
    params = {**params, "preprocessor": None}
    run = functools.partial(_train_process, params, train_args)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "result.pt")
        torch.multiprocessing.spawn(
            spawn_worker, args=(n, free_port(), backend, threads, run, path),
            nprocs=n, join=True)
        return torch.load(path, map_location="cpu", weights_only=True)
