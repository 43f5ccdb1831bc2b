"""metrics.knn_rank_report (faiss kNN lists) at 100k queries x 1M database, from embeddings.

Clustered float32 embeddings (``--classes`` identities in families of ``--per-family``:
family centres N(0, 1), identity centres ``tau`` around them, points ``sigma`` around those,
generated in blocks), relevant = same identity. Prints JSON:

* ``tune``: an IVF index (``--nlist`` lists) built once, and for each ``nprobe`` of ``--nprobes``
  the recall of the exact top-k (flat search) on ``--sample`` queries; the smallest ``nprobe``
  with recall >= ``--recall`` is used below, with the measures of both on that sample;
* ``ivf``: the whole ``knn_rank_report(index="ivf")`` call on all queries (index training and
  building, search, measures), wall-clock and CPU seconds;
* ``flat``: the exact path on ``--flat-queries`` queries (its time is linear in the queries),
  extrapolated to all of them.

faiss runs ``--threads`` OpenMP threads (the 2-core target). Run:
``python benchmarks/bench_knn_faiss.py`` (defaults: 100,000 x 1,000,000, d = 64);
``--queries 2000 --database 20000 --nlist 64`` for a quick check.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import emit, machine, peak_rss_mb  # noqa: E402

from crossmetric.metrics import _faiss_tools as ft  # noqa: E402
from crossmetric.metrics._counts import _label_codes  # noqa: E402
from crossmetric.metrics._knn_report import report_from_lists  # noqa: E402
from crossmetric.metrics.knn import knn_rank_report  # noqa: E402

MEASURES = ("rank1", "rank5", "rank10", "precision_at_1", "r_precision", "map_at_r", "map_at_k")


def clustered(n: int, centres: np.ndarray, sigma: float, rng, block: int = 1 << 17):
    """``n`` float32 points around random centres (labels uniform), made in blocks."""
    labels = rng.integers(0, centres.shape[0], n)
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    for s in range(0, n, block):
        lab = labels[s:s + block]
        out[s:s + lab.size] = rng.standard_normal((lab.size, centres.shape[1]),
                                                  dtype=np.float32)
        out[s:s + lab.size] *= sigma
        out[s:s + lab.size] += centres[lab]
    return out, labels


class Clock:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = round(time.perf_counter() - self.wall, 2)
        self.cpu = round(time.process_time() - self.cpu, 2)


def lists_report(index, Q, qc, dc, R, k):
    return report_from_lists(ft.tie_complete_knn(index, Q, k), qc, dc, R, k, (1, 5, 10),
                             "expected")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--database", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--classes", type=int, default=20_000)
    ap.add_argument("--per-family", type=int, default=10)
    ap.add_argument("--tau", type=float, default=0.35)
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--nlist", type=int, default=4096)
    ap.add_argument("--nprobes", default="2,4,8,16,32,64,128")
    ap.add_argument("--recall", type=float, default=0.99)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--flat-queries", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ivf-index", default="ivf",
                    help='"ivf" (IndexIVFFlat, --nlist lists) or a faiss factory string such as '
                         '"IVF4096_HNSW32,Flat" (HNSW quantizer: faster assignment)')
    ap.add_argument("--train-size", type=int, default=None,
                    help="IVF k-means training rows (default 40 per list)")
    ap.add_argument("--skip-ivf", action="store_true")
    ap.add_argument("--skip-flat", action="store_true")
    args = ap.parse_args()
    ft.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    # identities grouped in families (a family's centres around one random point), so that
    # the neighbours beyond a query's own identity are nearby, as in learned embeddings
    family = rng.standard_normal((max(1, args.classes // args.per_family), args.dim))
    centres = (family[np.arange(args.classes) % family.shape[0]]
               + args.tau * rng.standard_normal((args.classes, args.dim))).astype(np.float32)
    with Clock() as gen:
        X, dl = clustered(args.database, centres, args.sigma, rng)
        Q, ql = clustered(args.queries, centres, args.sigma, rng)
    qc, dc = _label_codes(ql, dl, Q.shape[0], X.shape[0])
    R = np.bincount(dc, minlength=int(max(qc.max(), dc.max())) + 1)[qc]
    sample = np.sort(rng.choice(args.queries, min(args.sample, args.queries), replace=False))
    out: dict = {"n_queries": args.queries, "n_database": args.database, "dim": args.dim,
                 "classes": args.classes, "per_family": args.per_family, "tau": args.tau,
                 "sigma": args.sigma, "k": args.k, "threads": args.threads,
                 "generate_s": gen.wall, **machine(),
                 "load_avg_start": [round(v, 2) for v in os.getloadavg()]}

    # exact top-k of the sample, and an IVF index to tune nprobe on
    flat = ft.build_knn_index(X, "flat")
    with Clock() as t_exact:
        _, I_exact = flat.search(Q[sample], args.k)
    exact = lists_report(flat, Q[sample], qc[sample], dc, R[sample], args.k)
    del flat
    tune: dict = {"sample": int(sample.size), "exact_search_s": t_exact.wall, "nprobe": {}}
    chosen = None
    if not args.skip_ivf:
        with Clock() as t_build:
            ivf = ft.build_knn_index(X, args.ivf_index, nlist=args.nlist,
                                     train_size=args.train_size)
        tune["ivf_build_s"], tune["ivf_build_cpu_s"] = t_build.wall, t_build.cpu
        for nprobe in (int(v) for v in args.nprobes.split(",")):
            ft.set_search_breadth(ivf, "ivf", nprobe)
            with Clock() as t:
                _, I = ivf.search(Q[sample], args.k)
            found = [np.intersect1d(a, b).size for a, b in zip(I, I_exact, strict=True)]
            recall = float(np.mean(found)) / args.k
            tune["nprobe"][nprobe] = {"recall": round(recall, 5), "search_s": t.wall}
            if chosen is None and recall >= args.recall:
                chosen = nprobe
                approx = lists_report(ivf, Q[sample], qc[sample], dc, R[sample], args.k)
                tune["measures_exact_vs_ivf"] = {
                    m: [round(exact[m], 5), round(approx[m], 5)] for m in MEASURES}
                tune["max_abs_difference"] = round(max(abs(exact[m] - approx[m])
                                                       for m in MEASURES), 5)
        del ivf
        tune["chosen_nprobe"] = chosen
    out["tune"] = tune

    if chosen is not None:
        with Clock() as t:
            rep = knn_rank_report(Q, X, ql, dl, k=args.k, index=args.ivf_index,
                                  nlist=args.nlist, nprobe=chosen, train_size=args.train_size,
                                  n_threads=args.threads)
        out["ivf"] = {"index": args.ivf_index, "nlist": args.nlist,
                      "train_size": args.train_size or 40 * args.nlist,
                      "nprobe": chosen, "seconds": t.wall,
                      "cpu_seconds": t.cpu, "meets_120s": t.wall <= 120,
                      **{m: round(rep[m], 5) for m in MEASURES},
                      "n_queries_r_above_k": rep["n_queries_r_above_k"]}

    nf = min(args.flat_queries, args.queries)
    if not args.skip_flat:
        with Clock() as t:
            rep = knn_rank_report(Q[:nf], X, ql[:nf], dl, k=args.k, index="flat",
                                  n_threads=args.threads)
        scale = args.queries / nf
        out["flat"] = {"queries_timed": nf, "seconds": t.wall, "cpu_seconds": t.cpu,
                       "extrapolated_seconds": round(t.wall * scale, 1),
                       "extrapolated_cpu_seconds": round(t.cpu * scale, 1),
                       "rank1_on_timed": round(rep["rank1"], 5)}
    out["peak_rss_mb"] = round(peak_rss_mb())
    out["load_avg_end"] = [round(v, 2) for v in os.getloadavg()]
    emit(out)


if __name__ == "__main__":
    main()
