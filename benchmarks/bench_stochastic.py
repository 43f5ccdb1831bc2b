"""Mini-batch PCCA / CMML on pairs and samples that stay on disk (``np.load(mmap_mode="r")``).

``prepare`` writes a synthetic problem to ``--dir``: ``X.npy`` and ``Y.npy`` (float32,
``--n-samples`` × ``--n-features``: two views of ``n_samples / 10`` identities, each view a
random linear image of a 32-d identity code plus anisotropic noise that dominates many
directions, so that metric learning matters), ``pairs.npy`` (int64, ``--n-pairs`` pairs:
half same-identity, half random), ``y.npy``, and held-out test views of 1,000 *other*
identities with 20,000 test pairs.

``fit`` loads the files memory-mapped and fits one model, printing JSON with the fit time,
the process's peak RSS (``ru_maxrss``; run it under ``/usr/bin/time -v`` as well) and the
held-out AUC. ``--subset N`` fits on the first N pairs only (for the full-batch comparison).

Run::

    python benchmarks/bench_stochastic.py prepare --dir /tmp/cm_scale
    /usr/bin/time -v python benchmarks/bench_stochastic.py fit --dir /tmp/cm_scale \\
        --model pcca --solver minibatch
    python benchmarks/bench_stochastic.py fit --dir /tmp/cm_scale --model pcca \\
        --solver lbfgs --subset 200000

Target: 1,000,000 pairs over 100,000 × 512 samples in ≤ 2 minutes and ≤ 2 GB on 2 cores,
with the held-out AUC of the full-batch fit on a subset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks._common import machine, peak_rss_mb  # noqa: E402
from crossmetric.learners.cmml import CMML  # noqa: E402
from crossmetric.learners.pcca import PCCA  # noqa: E402

CODE = 32


def views(n_ids, per_id, n_features, proj, noise_scale, rng, block=20_000):
    """Two float32 views of ``n_ids · per_id`` samples (row r belongs to identity r // per_id)."""
    codes = rng.randn(n_ids, CODE).astype(np.float32)
    n = n_ids * per_id
    out = [np.empty((n, n_features), dtype=np.float32) for _ in range(2)]
    for v in range(2):
        for s in range(0, n, block):
            e = min(n, s + block)
            lab = np.arange(s, e) // per_id
            noise = rng.randn(e - s, n_features).astype(np.float32) * noise_scale[v]
            out[v][s:e] = codes[lab] @ proj[v] + noise
    return out


def random_pairs(n_ids, per_id, n_pairs, rng):
    n_pos = n_pairs // 2
    ident = rng.randint(0, n_ids, n_pos)
    a = ident * per_id + rng.randint(0, per_id, n_pos)
    b = ident * per_id + (a % per_id + rng.randint(1, per_id, n_pos)) % per_id
    neg = np.c_[rng.randint(0, n_ids * per_id, n_pairs - n_pos),
                rng.randint(0, n_ids * per_id, n_pairs - n_pos)]
    pairs = np.r_[np.c_[a, b], neg].astype(np.int64)
    y = np.where(pairs[:, 0] // per_id == pairs[:, 1] // per_id, 1, -1)
    order = rng.permutation(n_pairs)
    return pairs[order], y[order]


def prepare(args) -> None:
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(args.seed)
    f = args.n_features
    proj = [rng.randn(CODE, f).astype(np.float32) / np.sqrt(CODE) for _ in range(2)]
    # anisotropic noise: a third of the directions far noisier than the signal
    noise_scale = [np.where(rng.rand(f) < 1 / 3, 12.0, 3.0).astype(np.float32)
                   for _ in range(2)]
    per_id = 10
    X, Y = views(args.n_samples // per_id, per_id, f, proj, noise_scale, rng)
    np.save(d / "X.npy", X)
    np.save(d / "Y.npy", Y)
    del X, Y
    pairs, y = random_pairs(args.n_samples // per_id, per_id, args.n_pairs, rng)
    np.save(d / "pairs.npy", pairs)
    np.save(d / "y.npy", y)
    Xt, Yt = views(1000, per_id, f, proj, noise_scale, rng)
    pt, yt = random_pairs(1000, per_id, 20_000, rng)
    np.savez(d / "test.npz", X=Xt, Y=Yt, pairs=pt, y=yt)
    print(json.dumps({"dir": str(d), "X": list(map(int, (args.n_samples, f))),
                      "n_pairs": int(args.n_pairs)}))


def fit(args) -> None:
    d = Path(args.dir)
    t0 = time.perf_counter()
    X = np.load(d / "X.npy", mmap_mode="r")
    pairs = np.load(d / "pairs.npy", mmap_mode="r")
    y = np.load(d / "y.npy")
    if args.subset:
        pairs, y = pairs[:args.subset], y[:args.subset]
    kw = dict(n_components=args.n_components, solver=args.solver, max_iter=args.max_iter,
              random_state=args.seed)
    if args.solver in ("minibatch", "sgd"):
        kw.update(batch_size=args.batch_size, learning_rate=args.learning_rate)
    if args.model == "pcca":
        model = PCCA(**kw, preprocessor=X)
    else:
        model = CMML(**kw, preprocessor=(X, np.load(d / "Y.npy", mmap_mode="r")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(pairs, y)
    fit_s = time.perf_counter() - t0
    test = np.load(d / "test.npz")
    model.set_params(preprocessor=test["X"] if args.model == "pcca"
                     else (test["X"], test["Y"]))
    auc = model.score(test["pairs"], test["y"])
    print(json.dumps({
        "model": args.model, "solver": args.solver, "n_pairs": int(len(y)),
        "n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "epochs_or_iters": int(model.n_iter_),
        "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "fit_s_including_load": round(fit_s, 1), "test_auc": round(auc, 4),
        "peak_rss_mb": round(peak_rss_mb(), 1), "machine": machine(),
        "threads": os.environ.get("OPENBLAS_NUM_THREADS")}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("prepare", "fit"))
    ap.add_argument("--dir", default="/tmp/crossmetric_scale")
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--n-features", type=int, default=512)
    ap.add_argument("--n-pairs", type=int, default=1_000_000)
    ap.add_argument("--model", choices=("pcca", "cmml"), default="pcca")
    ap.add_argument("--solver", default="minibatch")
    ap.add_argument("--n-components", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("--learning-rate", type=float, default=0.3)
    ap.add_argument("--max-iter", type=int, default=3)
    ap.add_argument("--subset", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    (prepare if args.command == "prepare" else fit)(args)


if __name__ == "__main__":
    main()
