"""Per-method cost and convergence of the default ``crossmetric benchmark``.

Target: the whole default run (every registry method, embedded digits, 10 verification folds +
10 identification repeats) in under 5 minutes on 2 cores, with no ConvergenceWarning.

Runs each registry method alone, in this process and one split after another
(``n_jobs=1``), with the command line's defaults (``--max-train-positives 1000``, seed 0), and
reports per method the CPU seconds (``time.process_time``: on a shared, loaded machine CPU time
stays close to what the method costs on an idle core, while wall time does not), the wall
seconds, the fits that raised a ConvergenceWarning and the mean AUC. ``projected_2core_wall_s``
is the sum of the CPU seconds over 2 cores (the default run spreads the (method, split) units
over 2 joblib workers), plus the fixed start-up cost measured as the Euclidean row.

Threads: the default run's joblib (loky) workers each run with ``OMP_NUM_THREADS=1`` (2 cores,
2 workers), so this script limits BLAS (threadpoolctl) and PyTorch (``torch.set_num_threads``)
to ``--threads`` (default 1) to measure what a worker spends. With 2 threads on a loaded 2-core
machine a small network's OpenMP threads spin: DeepGSM's CPU seconds per round were ~40x higher
(measured), which says nothing about the default run.

Run: ``python benchmarks/bench_default_run.py [--methods a,b] [--folds 10] [--repeats 10]
[--threads 1]`` (prints JSON).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, machine  # noqa: E402
from crossmetric.datasets import load_digits_views  # noqa: E402
from crossmetric.protocols import run_protocols  # noqa: E402
from crossmetric.registry import METHODS, make_estimator, method_status  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=None, help="comma-separated (default: all)")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS / torch threads (0: leave as they are)")
    args = parser.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
        if "torch" in sys.modules or args.methods is None or "deepgsm" in args.methods:
            import torch

            torch.set_num_threads(args.threads)
    names = args.methods.split(",") if args.methods else list(METHODS)
    data = load_digits_views()
    out = {"machine": machine(), "folds": args.folds, "repeats": args.repeats,
           "threads": args.threads, "methods": {}}
    total_cpu = 0.0
    for name in names:
        if method_status(name) is not None:
            out["methods"][name] = {"skipped": method_status(name)}
            continue
        spec = METHODS[name]
        pca = {spec.display: spec.pca_components} if spec.pca_components else None
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_protocols({spec.display: make_estimator(name)}, data, n_folds=args.folds,
                            n_repeats=args.repeats, max_train_positives=1000,
                            pca_components=pca, n_jobs=1, random_state=0, on_error="record")
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        total_cpu += cpu
        shown = res.methods[0] if res.methods else spec.display
        row = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
               "convergence_warnings": res.warnings.get(shown, {}).get("ConvergenceWarning", 0),
               "errors": res.errors.get(shown)}
        try:
            row["auc"] = round(res.value(shown, "auc"), 4)
        except KeyError:
            pass
        out["methods"][name] = row
    out["total_cpu_s"] = round(total_cpu, 1)
    out["projected_2core_wall_s"] = round(total_cpu / 2, 1)
    out["target_s"] = 300
    out["machine_after"] = machine()
    emit(out)


if __name__ == "__main__":
    main()
