"""Training overhead of DeepGSM, and how close CML-AUC's proximal step is to its floor.

1. **DeepGSM round vs a bare PyTorch loop.** The bare loop runs the same network (built and
   initialised as DeepGSM builds it), one fixed batch of the same size (K̂ identities × Ô₁ + Ô₂
   images), the same loss (the sample-based GSM hinge with balanced weights, plus the weight
   penalties of eq. 7) and the same optimiser: forward, backward, optimiser step, nothing else.
   DeepGSM runs ``max_iter`` rounds of its real loop (batch generator, image loading and
   augmentation, hinge weights, schedule, convergence bookkeeping) from arrays in memory and
   from PNG files on disk. ``ratio = DeepGSM seconds per round / bare seconds per round``
   (target ≤ 1.15). Both are timed in CPU seconds of this process (``time.process_time``),
   CPU seconds of the calling (training) thread (``time.thread_time``) and wall seconds.
   Files (``num_workers=0``): each file is decoded once per fit into DeepGSM's decoded-image
   cache (``image_cache_mb``, default 1024 MiB; :mod:`crossmetric.deep.decoded`), by a
   background thread of the training process that prepares the rounds ahead
   (:mod:`crossmetric.deep.prefetch`). Process CPU counts that thread, hence the decoding of
   every file once (``decode_ms_per_round``: Pillow's CPU time for all files, divided by the
   rounds); training-thread CPU does not. In memory, the rounds are prepared in the training
   thread, several at a time (:func:`crossmetric.deep.data.round_batches`). The bare loop's
   process and thread CPU are the same.
2. **CML-AUC proximal step vs ``numpy.linalg.eigh``.** One step of Algorithm 1
   (:func:`crossmetric._solvers.proximal.ppa_step`: ``φ⁺_{ημ}(M − ηG)``, the proximal map of
   the log-det term) against one ``numpy.linalg.eigh`` of the same matrix ``M − ηG`` -- its
   floor: the step is that eigendecomposition plus an elementwise map and one ``W Wᵀ``.

Run: ``python benchmarks/bench_deepgsm_overhead.py [--rounds 150] [--threads 1] [--repeats 2]
[--baseline DIR]`` (prints JSON; the bare loop and DeepGSM alternate ``--repeats`` times, the
fastest of each counts). ``--threads`` sets ``torch.set_num_threads`` (1: as every joblib
worker of the default benchmark runs). ``--baseline DIR`` first runs this script on the
crossmetric of another checkout (``--code-root DIR``, in a subprocess) and reports its ratios
beside these as ``before``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if "--code-root" in sys.argv:  # import crossmetric from another checkout (before / after)
    _ROOT = Path(sys.argv[sys.argv.index("--code-root") + 1]).resolve()
sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks._common import emit, machine  # noqa: E402
from crossmetric.datasets import load_digits_views  # noqa: E402
from crossmetric.registry import make_estimator  # noqa: E402


def _clock():
    return time.process_time(), time.perf_counter(), time.thread_time()


def _since(c):
    return time.process_time() - c[0], time.perf_counter() - c[1], time.thread_time() - c[2]


def bare_loop(est, xb: torch.Tensor, yb: torch.Tensor, gx, gy, rounds: int) -> tuple:
    """Forward, backward and Adam step of DeepGSM's network on one fixed batch."""
    from crossmetric.deep.losses import similarity_matrix
    from crossmetric.deep.sampler import balanced_weights

    net = est._build_net(xb.shape[-2:], (xb.shape[1], yb.shape[1]), seed=0)
    net.initialize("default", torch.Generator().manual_seed(0))
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=float(est.learning_rate))
    same = gx[:, None] == gy[None, :]
    w = torch.as_tensor(balanced_weights(same), dtype=torch.float32)
    ell = torch.as_tensor(np.where(same, -1.0, 1.0), dtype=torch.float32)
    decayed = [p for n, p in net.named_parameters()
               if not n.startswith("head.") and not n.endswith("bias")]
    phi = list(net.head.params.values())
    lam, mu = float(est.weight_decay), float(est.mu)

    def step():
        TX, TY, f = net(xb, yb)
        S = similarity_matrix(TX, TY, f)
        loss = (w * torch.clamp(1.0 - ell * S, min=0.0)).sum()
        loss = loss + lam * sum((p * p).sum() for p in decayed) + mu * sum(
            (p * p).sum() for p in phi)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(10):  # warm-up (allocator, first-call dispatch)
        step()
    c = _clock()
    for _ in range(rounds):
        step()
    cpu, wall, _ = _since(c)
    return cpu / rounds, wall / rounds


def deepgsm_rounds(est, x, ids_x, y, ids_y, rounds: int) -> tuple:
    """Seconds per round of DeepGSM's own loop (``max_iter=rounds``, no stopping test):
    ``(process CPU, wall, train_time, training-thread CPU)``."""
    est.set_params(max_iter=rounds + 10, tol=None)
    est.fit_identities(x[:40], ids_x[:40], y[:40], ids_y[:40])  # warm-up: imports, dispatch
    est.set_params(max_iter=rounds)
    c = _clock()
    est.fit_identities(x, ids_x, y, ids_y)
    cpu, wall, thread = _since(c)
    return cpu / rounds, wall / rounds, est.train_time_ / rounds, thread / rounds


def decode_seconds(paths) -> float:
    """CPU seconds to decode every file once, as the training data reads them."""
    from crossmetric.deep.data import read_image

    c = time.process_time()
    for p in paths:
        read_image(p, "L", (16, 16))
    return time.process_time() - c


def _per_round(runs: list, bare_cpu: float, bare_wall: float) -> dict:
    cpu, wall, train, thread = (min(o[i] for o in runs) for i in range(4))
    return {"cpu": round(1e3 * cpu, 3), "thread_cpu": round(1e3 * thread, 3),
            "wall": round(1e3 * wall, 3), "train_time": round(1e3 * train, 3),
            "ratio_cpu": round(cpu / bare_cpu, 3), "ratio_thread_cpu": round(thread / bare_cpu, 3),
            "ratio_wall": round(wall / bare_wall, 3)}


def write_pngs(images: np.ndarray, folder: Path, tag: str) -> list:
    from PIL import Image

    paths = []
    for i, im in enumerate(images):
        p = folder / f"{tag}{i:05d}.png"
        Image.fromarray(np.round(im * 255).astype(np.uint8)).save(p)
        paths.append(str(p))
    return paths


def proximal_vs_eigh(sizes=(64, 128, 256), reps: int = 50) -> dict:
    """One :func:`~crossmetric._solvers.proximal.ppa_step` against ``eigh`` of its matrix,
    and a whole CML-AUC iteration (the registry's ``cmlauc`` on the default benchmark's data)
    against the ``eigh`` of its ``2d × 2d`` matrix.

    CML-AUC's default runs on PCA-32 views, so its matrix is 64 × 64 (``z = [x; −y]``). BLAS
    and LAPACK run single-threaded (as in the default run's workers); the two timings
    alternate, ``reps`` times each, and the medians are compared.
    """
    from threadpoolctl import threadpool_limits

    from crossmetric._solvers.proximal import ppa_step

    out = {}
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        for n in sizes:
            A = rng.standard_normal((n, 2 * n))
            M = A @ A.T / (2 * n)
            B = rng.standard_normal((n, n))
            G = (B + B.T) / 2
            eta, mu = 0.1, 1e-5
            T = M - eta * G
            tp, te = [], []
            for _ in range(reps):
                c = time.process_time()
                ppa_step(M, G, eta, mu)
                tp.append(time.process_time() - c)
                c = time.process_time()
                np.linalg.eigh(T)
                te.append(time.process_time() - c)
            p, e = float(np.median(tp)), float(np.median(te))
            out[f"ppa_step_{n}"] = {"ppa_step_ms": round(1e3 * p, 3),
                                    "eigh_ms": round(1e3 * e, 3),
                                    "ratio": round(p / e, 3)}
        out["cmlauc_fit"] = _cmlauc_iteration_vs_eigh(rng)
    return out


def _cmlauc_iteration_vs_eigh(rng) -> dict:
    from sklearn.decomposition import PCA

    from crossmetric.pairs import make_pairs
    from crossmetric.registry import make_estimator as make

    d = load_digits_views()
    X = PCA(32, random_state=0).fit_transform(d.X[:1000])
    Y = PCA(32, random_state=0).fit_transform(d.Y[:1000])
    pairs, y = make_pairs(d.labels[:1000], d.labels[:1000], max_positives=1000,
                          random_state=0)
    est = make("cmlauc").set_params(random_state=0, preprocessor=(X, Y))
    c = time.process_time()
    est.fit(pairs, y)
    cpu = time.process_time() - c
    dim = X.shape[1] + Y.shape[1]
    A = rng.standard_normal((dim, 2 * dim))
    T = A @ A.T
    te = []
    for _ in range(50):
        c = time.process_time()
        np.linalg.eigh(T)
        te.append(time.process_time() - c)
    e = float(np.median(te))
    it = cpu / max(est.n_iter_, 1)
    return {"n_iter": int(est.n_iter_), "matrix": [dim, dim],
            "fit_cpu_s": round(cpu, 3), "fit_ms_per_iteration": round(1e3 * it, 3),
            "proximal_ms_per_iteration_wall": round(1e3 * est.eig_time_ / max(est.n_iter_, 1), 3),
            "eigh_ms": round(1e3 * e, 3), "fit_per_iteration_over_eigh": round(it / e, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-files", action="store_true")
    parser.add_argument("--skip-proximal", action="store_true")
    parser.add_argument("--code-root", default=None,
                        help="checkout whose crossmetric is timed (default: this one)")
    parser.add_argument("--baseline", default=None,
                        help="checkout to time first, in a subprocess, as 'before'")
    args = parser.parse_args()
    before = None
    if args.baseline:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--code-root", args.baseline,
               "--rounds", str(args.rounds), "--threads", str(args.threads),
               "--repeats", str(args.repeats), "--skip-proximal"]
        if args.skip_files:
            cmd.append("--skip-files")
        before = json.loads(subprocess.run(cmd, cwd=args.baseline, check=True,
                                           capture_output=True, text=True).stdout)
    if args.threads:
        torch.set_num_threads(args.threads)
    d = load_digits_views()
    rows = np.arange(1200)
    # the identities of the default benchmark's DeepGSM fits: the 10 digit classes (the
    # connected components of its positive pairs), so every round is a new epoch
    ids = d.labels[rows].astype(np.int64)
    x, y = d.images_x[rows], d.images_y[rows]
    est = make_estimator("deepgsm")
    est.set_params(random_state=0)
    import crossmetric

    out = {"machine": machine(), "torch_threads": torch.get_num_threads(),
           "rounds": args.rounds, "crossmetric": str(Path(crossmetric.__file__).parent)}
    k, ox, oy = int(est.n_identities), int(est.n_images_x), int(est.n_images_y)
    sel_x = np.concatenate([np.flatnonzero(ids == i)[:ox] for i in np.unique(ids)[:k]])
    sel_y = np.concatenate([np.flatnonzero(ids == i)[:oy] for i in np.unique(ids)[:k]])
    xb = torch.as_tensor(x[sel_x], dtype=torch.float32)[:, None]
    yb = torch.as_tensor(y[sel_y], dtype=torch.float32)[:, None]
    # bare and DeepGSM alternate, --repeats times each; the fastest of each is compared (on a
    # shared machine the minimum is the least disturbed measurement)
    bare, ours = [], []
    for _ in range(args.repeats):
        bare.append(bare_loop(est, xb, yb, ids[sel_x], ids[sel_y], args.rounds))
        ours.append(deepgsm_rounds(est, x, ids, y, ids, args.rounds))
    bare_cpu, bare_wall = min(b[0] for b in bare), min(b[1] for b in bare)
    out["batch"] = {"images_x": int(xb.shape[0]), "images_y": int(yb.shape[0]),
                    "shape": list(xb.shape[1:])}
    out["bare_ms_per_round"] = {"cpu": round(1e3 * bare_cpu, 3), "wall": round(1e3 * bare_wall, 3)}
    out["memory_ms_per_round"] = _per_round(ours, bare_cpu, bare_wall)
    if not args.skip_files:
        with tempfile.TemporaryDirectory() as tmp:
            fx = write_pngs(x, Path(tmp), "x")
            fy = write_pngs(y, Path(tmp), "y")
            files = [deepgsm_rounds(est, fx, ids, fy, ids, args.rounds)
                     for _ in range(args.repeats)]
            decode = min(decode_seconds(fx + fy) for _ in range(2))
        out["files_ms_per_round"] = _per_round(files, bare_cpu, bare_wall)
        out["files_ms_per_round"]["decode_ms_per_round"] = round(1e3 * decode / args.rounds, 3)
        out["files_ms_per_round"]["n_files"] = len(fx) + len(fy)
    if before is not None:
        out["before"] = {k: before[k] for k in ("crossmetric", "bare_ms_per_round",
                                                "memory_ms_per_round", "files_ms_per_round")
                         if k in before}
    if not args.skip_proximal:
        out["cmlauc_proximal_vs_eigh"] = proximal_vs_eigh()
    out["machine_after"] = machine()
    emit(out)


if __name__ == "__main__":
    main()
