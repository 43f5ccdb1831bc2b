"""How fit cost grows with pairs, samples and features: one axis at a time, three sizes each.

Each fit runs in a fresh subprocess that reports its wall time, its CPU time (user + system,
``getrusage``: less sensitive than wall time to other processes sharing the machine) and its
peak RSS (``ru_maxrss``, including the data). The iteration budget is fixed (``--iters``
L-BFGS iterations / epochs, ``tol=0``), so the numbers are the cost of the same amount of
optimisation at each size, not of convergence. Data: Gaussian identities (10 samples each)
in ``n_features`` dimensions, pairs half positive.

Learners: ``pcca-lbfgs`` (full batch, linear), ``pcca-minibatch`` (Adam, batch 4096),
``pcca-nystroem`` (rbf kernel, 500 landmarks, L-BFGS on the features), and
``cmml-lbfgs``.

Run: ``python benchmarks/bench_scaling.py [--learners pcca-lbfgs,pcca-minibatch]``; prints a
Markdown table and (``--json``) the raw rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, time, warnings
import numpy as np
sys.path.insert(0, {repo!r})
from crossmetric.learners.pcca import PCCA
from crossmetric.learners.cmml import CMML
n_pairs, n_samples, n_features, learner, iters = {args!r}
rng = np.random.RandomState(0)
n_ids = max(2, n_samples // 10)
codes = rng.randn(n_ids, 16)
proj = rng.randn(16, n_features) / 4
lab = np.arange(n_samples) // 10 % n_ids
X = codes[lab] @ proj + rng.randn(n_samples, n_features)
half = n_pairs // 2
a = rng.randint(0, n_samples, half)
b = (a // 10) * 10 + rng.randint(0, 10, half)
b = np.minimum(b, n_samples - 1)
pairs = np.r_[np.c_[a, b], rng.randint(0, n_samples, (n_pairs - half, 2))]
y = np.where(lab[pairs[:, 0]] == lab[pairs[:, 1]], 1, -1)
if learner == "pcca-lbfgs":
    est = PCCA(16, solver="lbfgs", max_iter=iters, tol=0, preprocessor=X)
elif learner == "pcca-minibatch":
    est = PCCA(16, solver="minibatch", max_iter=iters, tol=0, preprocessor=X)
elif learner == "pcca-nystroem":
    est = PCCA(16, kernel="rbf", kernel_approximation="nystroem", n_landmarks=500,
               solver="lbfgs", max_iter=iters, tol=0, preprocessor=X)
else:
    est = CMML(16, solver="lbfgs", max_iter=iters, tol=0, preprocessor=(X, X[:, ::-1] ** 2))
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est.fit(pairs, y)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"wall_s": round(wall, 2),
    "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 2),
    "peak_rss_mb": round(r1.ru_maxrss / 1024, 1)}}))
"""

BASE = (100_000, 10_000, 128)
AXES = {"pairs": [25_000, 100_000, 400_000], "samples": [2_500, 10_000, 40_000],
        "features": [32, 128, 512]}


def run(n_pairs, n_samples, n_features, learner, iters):
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    code = CHILD.format(repo=repo, args=(n_pairs, n_samples, n_features, learner, iters))
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", default="pcca-lbfgs,pcca-minibatch,pcca-nystroem,cmml-lbfgs")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    print("| learner | axis | pairs | samples | features | wall (s) | CPU (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for learner in args.learners.split(","):
        iters = 2 if learner == "pcca-minibatch" else args.iters
        for axis, sizes in AXES.items():
            for size in sizes:
                p, s, f = BASE
                p, s, f = {"pairs": (size, s, f), "samples": (p, size, f),
                           "features": (p, s, size)}[axis]
                r = run(p, s, f, learner, iters)
                rows.append({"learner": learner, "axis": axis, "n_pairs": p, "n_samples": s,
                             "n_features": f, "iters": iters, **r})
                print(f"| {learner} | {axis} | {p} | {s} | {f} | {r['wall_s']} | {r['cpu_s']} "
                      f"| {r['peak_rss_mb']} |", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
