"""Retrieval at scale: 1,000,000 synthetic 32-d database vectors, 1,000 queries, k = 10.

For each index kind: build time (training + adding, including the model's embedding when a
model is given), queries per second, recall@10 against exact search, vectors scanned per query
(faiss's ``indexIVF_stats.ndis``; flat scans all), the scan reduction against flat, and the
process's peak resident memory so far (``ru_maxrss``). Two settings:

1. raw vectors (``Index(model=None)``): ``flat`` (exact), ``ivf``, ``ivfpq``;
2. through a fitted ``CLML`` (32-d input, ``n_components=32``, ``n_clusters=32``, trained on
   20,000 labelled synthetic samples): exact ``flat`` and the multiple-assignment ``gmm`` index
   over the model's own mixture components, and ``ivf`` on the CLML embedding -- the
   recommended path; the target is recall@10 >= 0.95 with >= 50x fewer vectors scanned.

Each index is built once (build time = training + adding, for the model-based ones including the
embedding of the 1M rows) and searched with several ``nprobe``; ``peak_rss_mb`` is the peak so
far, so the last row's is the benchmark's peak.

Data: a mixture of 256 Gaussian clusters in 32 dimensions (identities = clusters), float32,
generated in blocks so that the benchmark stays far below 8 GB of RAM.

Run: ``python benchmarks/bench_retrieval.py [--n-database 1000000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import warnings

import faiss
import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from crossmetric.learners.clml import CLML  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402
from crossmetric.retrieval import Index  # noqa: E402

D_IN = 32


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Synthetic:
    """Gaussian clusters with random anisotropic covariances in 32 dimensions."""

    def __init__(self, n_clusters: int = 256, seed: int = 0):
        rng = np.random.RandomState(seed)
        self.centers = (rng.randn(n_clusters, D_IN) * 3.0).astype(np.float32)
        self.scales = rng.uniform(0.3, 1.5, size=(n_clusters, D_IN)).astype(np.float32)
        self.n_clusters = n_clusters

    def sample(self, n: int, rng: np.random.RandomState, block: int = 200_000):
        X = np.empty((n, D_IN), dtype=np.float32)
        lab = rng.randint(0, self.n_clusters, size=n)
        for s in range(0, n, block):
            e = min(n, s + block)
            X[s:e] = self.centers[lab[s:e]] + self.scales[lab[s:e]] * rng.randn(
                e - s, D_IN).astype(np.float32)
        return X, lab


def recall_at(ids, exact, k):
    return float(np.mean([len(set(a[:k]) & set(b[:k])) / k
                          for a, b in zip(ids, exact, strict=True)]))


def measure(label, make_index, DB, Q, k, exact_ids=None, probes=(None,)):
    """Build once, then search once per ``nprobe`` in ``probes``; one result row per search."""
    t = time.perf_counter()
    index = make_index().add(DB)
    build = time.perf_counter() - t
    rows, ids = [], None
    for nprobe in probes:
        faiss.cvar.indexIVF_stats.reset()
        t = time.perf_counter()
        _, ids = index.search(Q, k, nprobe=nprobe)
        search = time.perf_counter() - t
        ndis = faiss.cvar.indexIVF_stats.ndis
        scanned = ndis / Q.shape[0] if ndis else float(index.ntotal)
        row = {"index": label + ("" if nprobe is None else f" nprobe={nprobe}"),
               "build_s": round(build, 2), "qps": round(Q.shape[0] / search, 1),
               "recall@10": (1.0 if exact_ids is None
                             else round(recall_at(ids, exact_ids, k), 4)),
               "scanned_per_query": round(scanned), "fewer_scans_x": round(
                   index.ntotal / scanned, 1),
               "peak_rss_mb": round(peak_rss_mb(), 1)}
        print("  " + " ".join(f"{a}={b}" for a, b in row.items()), flush=True)
        rows.append(row)
    del index
    return rows, ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-database", type=int, default=1_000_000)
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--nlist", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-raw", action="store_true", help="only the CLML part")
    ap.add_argument("--skip-gmm", action="store_true", help="no gmm rows in the CLML part")
    args = ap.parse_args()
    rng = np.random.RandomState(args.seed)
    gen = Synthetic(seed=args.seed)
    DB, _ = gen.sample(args.n_database, rng)
    Q, _ = gen.sample(args.n_queries, rng)
    k, nlist = args.k, args.nlist
    out = {"n_database": args.n_database, "n_queries": args.n_queries, "k": k, "dim": D_IN,
           "raw": [], "clml": []}
    print(f"== raw vectors: {args.n_database} x {D_IN} float32 database, "
          f"{args.n_queries} queries, k={k}", flush=True)
    if not args.skip_raw:
        rows, exact = measure("flat (exact)", lambda: Index(), DB, Q, k)
        out["raw"] += rows
        rows, _ = measure(f"ivf nlist={nlist}",
                          lambda: Index(kind="ivf", nlist=nlist, random_state=0), DB, Q, k,
                          exact, probes=(1, 4, 16, 64))
        out["raw"] += rows
        rows, _ = measure(f"ivfpq nlist={nlist} m=16 nbits=8",
                          lambda: Index(kind="ivfpq", nlist=nlist, m=16, nbits=8,
                                        random_state=0), DB, Q, k, exact, probes=(4, 16, 64))
        out["raw"] += rows

    # ------------------------------------------------------------- through a CLML model
    Xtr, ltr = gen.sample(20_000, rng)
    pairs, y = make_pairs(ltr, max_positives=20_000, random_state=args.seed)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CLML(32, n_components=32, preprocessor=Xtr.astype(np.float64), max_iter=200,
                     random_state=args.seed).fit(pairs, y)
    out["clml_fit_s"] = round(time.perf_counter() - t, 2)
    print(f"== through CLML (k=32, d=32; fit {out['clml_fit_s']} s on {len(y)} pairs)",
          flush=True)
    rows, exact = measure("clml flat (exact)", lambda: Index(model), DB, Q, k)
    out["clml"] += rows
    for w in () if args.skip_gmm else (1, 2):
        rows, _ = measure(f"clml gmm w={w}", lambda w=w: Index(model, "gmm", w=w), DB, Q, k,
                          exact, probes=(1, 2, 4))
        out["clml"] += rows
    rows, _ = measure(f"clml ivf nlist={nlist}",
                      lambda: Index(model, "ivf", nlist=nlist, random_state=0), DB, Q, k,
                      exact, probes=(1, 2, 4, 8, 16))
    out["clml"] += rows
    ok = [r for r in rows if r["recall@10"] >= 0.95 and r["fewer_scans_x"] >= 50]
    out["target"] = (max(ok, key=lambda r: r["fewer_scans_x"]) if ok else None)
    print(f"target (recall@10 >= 0.95, >= 50x fewer scans): {out['target']}", flush=True)
    out["load_avg"] = os.getloadavg()
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(f"peak RSS {out['peak_rss_mb']} MB", flush=True)
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
