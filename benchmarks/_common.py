"""Small helpers shared by the benchmark scripts (timing, memory, machine load)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MFEAT_DIR = REPO.parent / "shared" / "data" / "mfeat"


@contextmanager
def timer(out: dict, key: str):
    t0 = time.perf_counter()
    yield
    out[key] = round(time.perf_counter() - t0, 4)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> dict:
    return {"cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2),
            "python": sys.version.split()[0]}


def identification_percent(D, probe_ids, gallery_ids) -> dict:
    """Rank-1 / 5 / 20 and mAP (%) of the probe × gallery distances ``D``
    (:func:`crossmetric.protocols.measure_identification` on a given distance matrix)."""
    from crossmetric.protocols import measure_identification

    rep, _ = measure_identification(None, None, None, probe_ids, gallery_ids, distance=D,
                                    blockwise=False)
    return {"r1": 100 * rep["rank1"], "r5": 100 * rep["rank5"], "r20": 100 * rep["rank20"],
            "mAP": 100 * rep["map"]}


def emit(result: dict) -> None:
    print(json.dumps(result, indent=2, default=float))
