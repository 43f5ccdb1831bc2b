"""CMC + mAP on 10,000 probes × 10,000 gallery items with 32-d embeddings.

Target: <= 3 s and peak RSS <= 1.5 GB. Each case runs in a fresh subprocess so that
its peak RSS (``ru_maxrss``) is its own. Cases:

* ``embeddings_float32`` -- :func:`crossmetric.metrics.identification_report` on float32
  embeddings: the distance matrix is computed block by block and never held whole.
* ``embeddings_float64`` -- the same on float64 embeddings.
* ``matrix_float32`` -- the full float32 distance matrix (400 MB) is given to ``cmc`` and
  ``mean_average_precision`` (time excludes building it).

Labels: 1,000 identities, 10 probes and 10 gallery items each; the embedding of an item is its
identity's centre plus noise (so the measures are neither 0 nor 1).

Usage: ``python benchmarks/bench_metrics.py [--n 10000] [--dim 32]`` -- prints JSON.

``--compare`` instead times, in one run and on the same data, the anchors of the
evaluation: a full ``np.sort`` of the distance rows, crossmetric's ``cmc`` +
``mean_average_precision`` (counts, no sort), the same functions of an earlier commit
(``--before REV``, loaded from git, for before/after numbers), torchreid's ``evaluate_rank``
(its Cython ``evaluate_cy`` when ``--torchreid-cy DIR`` holds a built ``rank_cy``; else its
Python path) and pytorch-metric-learning's ``AccuracyCalculator`` (faiss kNN, from the
embeddings) next to crossmetric's ``knn_accuracy`` (exhaustive, blockwise, no dense matrix):

* 10,000 × 10,000 float64 distances, 2,000 identities (the anchor of the speed work);
* 50,000 × 50,000 (10,000 identities): the 20 GB matrix is never built; query rows are made
  ``--chunk`` at a time from the embeddings and every method runs on the same chunks. Only
  ``--rows50k`` query rows are timed (all 50,000 gallery columns) and the times are scaled
  linearly to 50,000 rows (every method is linear in the number of query rows), labelled
  ``extrapolated``;
* ``knn_accuracy`` / ``AccuracyCalculator`` at ``--knn-q`` queries × ``--knn-db`` database
  items, extrapolated (quadratic cost: queries × database) to 100,000 × 1,000,000.

Peers are optional: ``/tmp/venv-metrics/bin/python benchmarks/bench_metrics.py --compare``
in a venv with torchreid and pytorch-metric-learning; missing ones print as not available.
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


# ----------------------------------------------------------------- --compare
def _embeddings(n_q: int, n_g: int, dim: int, n_ids: int, seed: int = 0):
    """Identity centres plus noise; every label drawn uniformly (about n_g / n_ids per id)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_ids, dim))
    pl, gl = rng.integers(0, n_ids, n_q), rng.integers(0, n_ids, n_g)
    FX = centres[pl] + 0.9 * rng.standard_normal((n_q, dim))
    FY = centres[gl] + 0.9 * rng.standard_normal((n_g, dim))
    return FX, FY, pl, gl


def _distances(FX, FY):
    import numpy as np

    D = FX @ FY.T
    D *= -2.0
    D += np.einsum("ij,ij->i", FX, FX)[:, None]
    D += np.einsum("ij,ij->i", FY, FY)[None, :]
    return D


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _load_file(name: str, path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _before_metrics(rev: str | None):
    """crossmetric.metrics as it was at git revision ``rev`` (None: not timed)."""
    if not rev:
        return None
    import tempfile

    src = subprocess.run(["git", "-C", os.path.dirname(HERE), "show",
                          f"{rev}:crossmetric/metrics.py"], capture_output=True, text=True,
                         check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(src)
    try:
        return _load_file("crossmetric_metrics_before", fh.name)
    finally:
        os.unlink(fh.name)


def _torchreid(cy_dir: str | None):
    """``(kind, evaluate)``: torchreid's evaluate_rank, Cython if built, else its Python path."""
    import importlib.util

    if cy_dir:
        sys.path.insert(0, cy_dir)
        from rank_cy import evaluate_cy  # built from torchreid's rank_cy.pyx (not on PyPI)

        return "cython evaluate_cy", lambda *a: evaluate_cy(*a, False)
    spec = importlib.util.find_spec("torchreid")
    if spec is None or not spec.submodule_search_locations:
        return "not available (pip install torchreid)", None
    # torchreid/__init__ imports torchvision models; load only its rank.py, whose Cython
    # import fails (PyPI's torchreid 0.2.5 ships no rank_cy) and falls back to Python
    sys.modules["torchreid.reid.metrics.rank_cylib.rank_cy"] = None
    rank = _load_file("torchreid_rank", os.path.join(spec.submodule_search_locations[0],
                                                     "reid", "metrics", "rank.py"))
    return "python evaluate_rank (no Cython on PyPI)", (
        lambda *a: rank.evaluate_rank(*a, use_cython=False))


def _pml():
    try:
        import torch
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    except ImportError:
        return None
    calc = AccuracyCalculator(include=("precision_at_1", "r_precision",
                                       "mean_average_precision_at_r"),
                              k="max_bin_count", device=torch.device("cpu"))

    def run(FX, pl, FY, gl):
        t = torch.from_numpy
        return calc.get_accuracy(t(FX), t(pl), t(FY), t(gl), ref_includes_query=False)

    return run


def _peer_rank_args(pl, gl, max_rank=50):
    import numpy as np

    # query camera 0, gallery camera 1: torchreid's market1501 protocol discards nothing
    return (pl, gl, np.zeros(pl.size, dtype=np.int64), np.ones(gl.size, dtype=np.int64),
            max_rank)


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else round(a / b, 4)


def _rank_methods(args, before, tr_eval):
    """The distance-matrix methods, each ``D, pl, gl -> seconds, (rank1, mAP)``."""
    from crossmetric import metrics as M

    def ours(D, pl, gl):
        t1, curve = _timed(lambda: M.cmc(D, pl, gl, max_rank=50))
        t2, m = _timed(lambda: M.mean_average_precision(D, pl, gl))
        return t1, t2, float(curve[0]), m

    out = {"ours": ours}
    if before is not None:
        def old(D, pl, gl):
            t1, curve = _timed(lambda: before.cmc(D, pl, gl, max_rank=50))
            t2, m = _timed(lambda: before.mean_average_precision(D, pl, gl))
            return t1, t2, float(curve[0]), m
        out["before"] = old
    if tr_eval is not None:
        def peer(D, pl, gl):
            t, (curve, m) = _timed(lambda: tr_eval(D, *_peer_rank_args(pl, gl)))
            return t, 0.0, float(curve[0]), float(m)
        out["torchreid"] = peer
    return out


def _run_rank_block(methods, D, pl, gl, acc):
    import numpy as np

    t, _ = _timed(lambda: np.sort(D, axis=1))
    acc["sort"] = acc.get("sort", 0.0) + t
    for name, fn in methods.items():
        t1, t2, r1, m = fn(D, pl, gl)
        rec = acc.setdefault(name, {"cmc_s": 0.0, "map_s": 0.0, "rank1": [], "map": []})
        rec["cmc_s"] += t1
        rec["map_s"] += t2
        rec["rank1"].append(r1)
        rec["map"].append(m)


def _summarise(acc, scale: float, n_valid_frac: float) -> dict:
    import numpy as np

    out = {"sort_s": round(acc["sort"] * scale, 3)}
    for name, rec in acc.items():
        if name == "sort":
            continue
        total = (rec["cmc_s"] + rec["map_s"]) * scale
        r = {"cmc_plus_map_s": round(total, 3),
             "rank1": round(float(np.mean(rec["rank1"])), 5),
             "map": round(float(np.mean(rec["map"])), 5)}
        if name != "torchreid":
            r.update(cmc_s=round(rec["cmc_s"] * scale, 3), map_s=round(rec["map_s"] * scale, 3))
            # torchreid averages over probes with a true match; ours keeps the others (rank1
            # 0) in the denominator: on that footing ours is rank1 / n_valid_frac
            r["rank1_over_matched_probes"] = round(r["rank1"] / n_valid_frac, 5)
        out[name] = r
    ours = out["ours"]["cmc_plus_map_s"]
    out["ratios"] = {"ours_over_sort": _ratio(ours, out["sort_s"])}
    for peer in ("torchreid", "before"):
        if peer in out:
            out["ratios"][f"ours_over_{peer}"] = _ratio(ours, out[peer]["cmc_plus_map_s"])
    return out


def _peak_extra_mb(FX, FY, pl, gl) -> float:
    """Peak of the memory allocated by ``cmc`` + ``mean_average_precision`` beyond the given
    distance rows (tracemalloc sees numpy's allocations). The functions work one block of
    ``BLOCK_ELEMENTS // n_gallery`` rows at a time, so with a block or more of rows this is
    their peak on a matrix of any height with that many columns, up to the O(n_probe)
    outputs (a few bytes per probe)."""
    import tracemalloc

    from crossmetric import metrics as M

    D = _distances(FX, FY)
    tracemalloc.start()
    M.cmc(D, pl, gl, max_rank=50)
    M.mean_average_precision(D, pl, gl)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round(peak / 2**20, 1)


def _knn_pair(FX, pl, FY, gl, pml) -> dict:
    """knn_accuracy and AccuracyCalculator on the same float32 embeddings (faiss's dtype)."""
    import numpy as np

    from crossmetric import metrics as M

    FX, FY = np.ascontiguousarray(FX, np.float32), np.ascontiguousarray(FY, np.float32)

    t_ours, acc = _timed(lambda: M.knn_accuracy(FX, FY, pl, gl))
    out = {"ours_knn_accuracy_s": round(t_ours, 3),
           "ours": {k: round(v, 5) for k, v in acc.items() if k != "n_queries"}}
    if pml is not None:
        t_pml, acc_p = _timed(lambda: pml(FX, pl, FY, gl))
        out["pml_accuracy_calculator_s"] = round(t_pml, 3)
        out["pml"] = {k: round(float(v), 5) for k, v in acc_p.items()}
        out["ours_over_pml"] = _ratio(t_ours, t_pml)
    else:
        out["pml"] = "not available (pip install pytorch-metric-learning)"
    return out


def compare(args) -> dict:
    import numpy as np

    from crossmetric import metrics as M

    before = _before_metrics(args.before)
    tr_kind, tr_eval = _torchreid(args.torchreid_cy)
    pml = _pml()
    res = {"machine": {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
           "torchreid": tr_kind, "before_rev": args.before}
    methods = _rank_methods(args, before, tr_eval)

    # 10k x 10k: the dense float64 matrix
    n = args.n
    FX, FY, pl, gl = _embeddings(n, n, args.dim, n // 5, seed=1)
    D = _distances(FX, FY)
    acc: dict = {}
    _run_rank_block(methods, D, pl, gl, acc)
    valid = float(np.isin(pl, gl).mean())
    r10 = _summarise(acc, 1.0, valid)
    t_rep, _ = _timed(lambda: M.identification_report(FX, FY, pl, gl, max_rank=50))
    r10["ours_identification_report_from_embeddings_s"] = round(t_rep, 3)
    r10["knn"] = _knn_pair(FX, pl, FY, gl, pml)
    r10["load_avg_end"] = os.getloadavg()
    res[f"dense_{n}x{n}_float64"] = r10
    del D

    # 50k x 50k: query chunks made from the embeddings, --rows50k rows timed, scaled
    n5 = args.n50k
    FX, FY, pl, gl = _embeddings(n5, n5, args.dim, n5 // 5, seed=2)
    rows = min(args.rows50k, n5)
    acc = {}
    for s in range(0, rows, args.chunk):
        sl = slice(s, min(s + args.chunk, rows))
        Dc = _distances(FX[sl], FY)
        _run_rank_block(methods, Dc, pl[sl], gl, acc)
        del Dc
    scale = n5 / rows
    r50 = _summarise(acc, scale, float(np.isin(pl[:rows], gl).mean()))
    r50["ours"]["peak_extra_mb"] = _peak_extra_mb(FX[:args.chunk], FY, pl[:args.chunk], gl)
    t_rep, _ = _timed(lambda: M.identification_report(FX[:rows], FY, pl[:rows], gl,
                                                      max_rank=50))
    r50["ours_identification_report_from_embeddings_s"] = round(t_rep * scale, 3)
    knn = _knn_pair(FX[:rows], pl[:rows], FY, gl, pml)
    for key in ("ours_knn_accuracy_s", "pml_accuracy_calculator_s"):
        if key in knn:
            knn[key] = round(knn[key] * scale, 3)
    r50["knn"] = knn
    r50["extrapolated"] = (f"timed on {rows} query rows x {n5} gallery columns "
                           f"(chunks of {args.chunk}), times x {scale:g}")
    r50["load_avg_end"] = os.getloadavg()
    res[f"chunked_{n5}x{n5}_float64"] = r50

    # embeddings only: exhaustive knn_accuracy vs faiss AccuracyCalculator, extrapolated
    q, db = args.knn_q, args.knn_db
    FX, FY, pl, gl = _embeddings(q, db, args.dim, db // 5, seed=3)
    knn = _knn_pair(FX, pl, FY, gl, pml)
    big = 100_000 * 1_000_000 / (q * db)
    knn["extrapolated_100k_x_1M"] = {
        "ours_knn_accuracy_s": round(knn["ours_knn_accuracy_s"] * big, 1),
        "pml_accuracy_calculator_s": (round(knn["pml_accuracy_calculator_s"] * big, 1)
                                      if "pml_accuracy_calculator_s" in knn else None),
        "how": f"times at {q} x {db} times {big:g} (cost proportional to queries x database, "
               "both exhaustive); target 120 s",
    }
    knn["load_avg_end"] = os.getloadavg()
    res[f"embeddings_{q}x{db}"] = knn
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--compare", action="store_true",
                    help="time sort / ours / before / torchreid / pytorch-metric-learning")
    ap.add_argument("--before", default=None, help="git revision of the 'before' metrics.py")
    ap.add_argument("--torchreid-cy", default=None,
                    help="directory holding a built rank_cy module (torchreid's Cython code)")
    ap.add_argument("--n50k", type=int, default=50_000)
    ap.add_argument("--rows50k", type=int, default=2_000)
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--knn-q", type=int, default=1_000)
    ap.add_argument("--knn-db", type=int, default=100_000)
    args = ap.parse_args()
    if args.compare:
        print(json.dumps(compare(args), indent=2, default=float))
        return
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
