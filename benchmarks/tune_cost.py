"""What a ``--tune paper`` comparison costs on a re-id set: wall seconds, peak memory, rank-1.

Runs ``crossmetric benchmark --protocol identification --repeats 3 --tune paper
--tune-scoring rank1 --n-jobs 2`` with the eight methods of the comparison (the untrained
distance, CCA, MvDA, KCCA and the papers' CMML, CML_AUC, CML_pAUC, GSM) on VIPeR camera A ↔ B
with strip histograms: all 632 persons, and a seeded subset of 450 persons (the size of the set
the cost target was set on; the descriptors are computed once, written as ``.npy`` views and
read back with ``--x/--y/--labels``). Prints a JSON summary and writes it to
``results/tune_cost/summary.json``; each run's result folder stays under
``results/tune_cost/RUN/``. Target: each run ≤ 300 s on 2 cores with nothing else running.

Usage::

    python benchmarks/tune_cost.py [--runs viper_strips,viper_strips_450]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import REPO, emit, machine

from crossmetric._utils.atomic_io import atomic_open

DATA = REPO.parent / "shared" / "data" / "viper"
OUT = REPO / "benchmarks" / "results" / "tune_cost"
METHODS = "euclidean,cca,mvda,kcca,cmml,cmlauc,cmlpauc,gsm"
SUBSET, SUBSET_SEED = 450, 0


def _subset_views(folder: Path) -> list[str]:
    """VIPeR's strip descriptors of ``SUBSET`` persons drawn with ``SUBSET_SEED``, as the
    ``--x/--y/--labels`` arguments of files in ``folder``."""
    from crossmetric.cli._data import _named_dataset
    from crossmetric.cli.parser import build_parser

    args = build_parser().parse_args(["benchmark", "--dataset", "viper", "--data-home",
                                      str(DATA), "--descriptor", "strips"])
    data, _ = _named_dataset("viper", args)
    labels = np.asarray(data.labels)
    keep = np.isin(labels, np.random.RandomState(SUBSET_SEED).choice(
        np.unique(labels), SUBSET, replace=False))
    np.save(folder / "X.npy", data.X[keep])
    np.save(folder / "Y.npy", data.Y[keep])
    np.savetxt(folder / "labels.txt", labels[keep], fmt="%s")
    return ["--x", str(folder / "X.npy"), "--y", str(folder / "Y.npy"), "--labels",
            str(folder / "labels.txt")]


def run(name: str, data_args: list[str]) -> dict:
    """One benchmark run into ``results/tune_cost/NAME``: seconds, peak RSS, rank-1 %."""
    folder = OUT / name
    cmd = [sys.executable, "-m", "crossmetric", "benchmark", *data_args, "--methods", METHODS,
           "--protocol", "identification", "--repeats", "3", "--tune", "paper",
           "--tune-scoring", "rank1", "--n-jobs", "2", "--quiet", "--out", str(folder)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    res = json.loads((folder / "results.json").read_text())
    rank1 = {s["method"]: round(100 * s["mean"], 1) for s in res["summary"]
             if s["measure"] == "rank1"}
    return {"seconds": round(seconds, 1), "benchmark_seconds": round(res["info"]["seconds"], 1),
            # the largest process of the runs so far (the command and its joblib workers,
            # descendants this script has outlived)
            "peak_rss_mb_largest_process": round(
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "rank1": rank1, "command": cmd[2:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="viper_strips,viper_strips_450")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    summary = {"machine": machine(), "target_seconds": 300, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.runs.split(","):
            if name == "viper_strips":
                data_args = ["--dataset", "viper", "--data-home", str(DATA), "--descriptor",
                             "strips"]
            elif name == "viper_strips_450":
                data_args = _subset_views(Path(tmp))
            else:
                raise SystemExit(f"unknown run {name!r}; expected viper_strips or "
                                 "viper_strips_450")
            summary["runs"][name] = run(name, data_args)
    with atomic_open(OUT / "summary.json") as fh:
        fh.write(json.dumps(summary, indent=2) + "\n")
    emit(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
