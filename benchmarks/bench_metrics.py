"""CMC + mAP on 10,000 probes × 10,000 gallery items with 32-d embeddings.

Target (issue 3): <= 3 s and peak RSS <= 1.5 GB. Each case runs in a fresh subprocess so that
its peak RSS (``ru_maxrss``) is its own. Cases:

* ``embeddings_float32`` -- :func:`crossmetric.metrics.identification_report` on float32
  embeddings: the distance matrix is computed block by block and never held whole.
* ``embeddings_float64`` -- the same on float64 embeddings.
* ``matrix_float32`` -- the full float32 distance matrix (400 MB) is given to ``cmc`` and
  ``mean_average_precision`` (time excludes building it).

Labels: 1,000 identities, 10 probes and 10 gallery items each; the embedding of an item is its
identity's centre plus noise (so the measures are neither 0 nor 1).

Usage: ``python benchmarks/bench_metrics.py [--n 10000] [--dim 32]`` -- prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _data(n: int, dim: int, dtype):
    import numpy as np

    rng = np.random.default_rng(0)
    n_ids = max(1, n // 10)
    centres = rng.standard_normal((n_ids, dim))
    pl = rng.integers(0, n_ids, n)
    gl = rng.integers(0, n_ids, n)
    FX = (centres[pl] + 0.9 * rng.standard_normal((n, dim))).astype(dtype)
    FY = (centres[gl] + 0.9 * rng.standard_normal((n, dim))).astype(dtype)
    return FX, FY, pl, gl


def run_case(case: str, n: int, dim: int) -> dict:
    import numpy as np

    from crossmetric import metrics as M

    dtype = np.float64 if case.endswith("float64") else np.float32
    FX, FY, pl, gl = _data(n, dim, dtype)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if case.startswith("embeddings"):
        t0 = time.perf_counter()
        rep = M.identification_report(FX, FY, pl, gl, max_rank=20)
        elapsed = time.perf_counter() - t0
        out = {"rank1": rep["rank1"], "rank10": rep["rank10"], "map": rep["map"]}
    else:
        D = (np.einsum("ij,ij->i", FX, FX)[:, None] + np.einsum("ij,ij->i", FY, FY)[None]
             - 2 * FX @ FY.T).astype(np.float32)
        t0 = time.perf_counter()
        curve = M.cmc(D, pl, gl, max_rank=20)
        m = M.mean_average_precision(D, pl, gl)
        elapsed = time.perf_counter() - t0
        out = {"rank1": float(curve[0]), "rank10": float(curve[9]), "map": m}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.update(case=case, n_probe=n, n_gallery=n, dim=dim, seconds=round(elapsed, 3),
               peak_rss_mb=round(peak, 1), rss_before_mb=round(base_rss, 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.dim)))
        return
    results = []
    for case in ("embeddings_float32", "embeddings_float64", "matrix_float32"):
        proc = subprocess.run([sys.executable, __file__, "--case", case, "--n", str(args.n),
                               "--dim", str(args.dim)], capture_output=True, text=True,
                              check=True)
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        res["meets_target"] = res["seconds"] <= 3.0 and res["peak_rss_mb"] <= 1536
        results.append(res)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
