"""CUHK01 generalized GSM: the start_mu stage with "hold", stages 1-2 fixed at their recorded
choices (identical on all 10 splits), one split per call. Same seed -> same inner folds.

Run from the repository root, one BLAS thread:
``python benchmarks/results/hold/cuhk01/run_start_mu_stage.py FEATURE_CACHE.npz 0 1 2 ...``
(the cache: :func:`crossmetric.reproduce.cuhk01.cuhk01_features`)."""
import json
import sys
import time

from threadpoolctl import threadpool_limits

import crossmetric.protocols.model_selection as ms
from crossmetric._utils.atomic_io import json_ready
from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01

LOG = []
_orig = ms.search_stages


def logged(*a, **kw):
    res = _orig(*a, **kw)
    LOG.append([{"params": c["params"], "mean": c["mean_score"], "std": c["std_score"]}
                for c in res.candidates])
    return res


ms.search_stages = logged

GRID = [{"init": ["identity"], "n_components": [None], "start_from": ["euclidean"],
         "mu": [1e-3], "penalty": ["start"], "start_mu": [None, 0.1, 1.0, "hold"]}]
for k in map(int, sys.argv[2:]):
    t = time.perf_counter()
    with threadpool_limits(1):
        res = reproduce_gsm_cuhk01("../shared/data", n_splits=1, first_split=k,
                                   structures=["Generalized"], baselines=[], verbose=False,
                                   cache=sys.argv[1], grid=GRID)
    out = {"row": "generalized", "first_split": k, "grid": GRID, "extra": res.extra,
           "rows": res.rows, "candidates": LOG[-1], "seconds": time.perf_counter() - t}
    with open(f"benchmarks/results/hold/cuhk01/generalized_split{k}.json", "w") as f:
        json.dump(json_ready(out), f, indent=1)
    print(k, out["seconds"], flush=True)
