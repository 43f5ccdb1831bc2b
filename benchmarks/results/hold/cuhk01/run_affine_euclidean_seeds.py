"""CUHK01 affine Euclidean GSM with its chosen settings (identical on all 10 splits), fixed
seeds: the seed-to-seed spread of one model on the gsm-cuhk01 splits.

Run from the repository root, one BLAS thread:
``python benchmarks/results/hold/cuhk01/run_affine_euclidean_seeds.py FEATURE_CACHE.npz 0 1 2 3 4``
(the cache: :func:`crossmetric.reproduce.cuhk01.cuhk01_features`)."""
import json
import sys
import time

from threadpoolctl import threadpool_limits

from crossmetric._utils.atomic_io import json_ready
from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01

CHOSEN = {"init": "identity", "mu": 1e-3, "penalty": "start"}
for s in map(int, sys.argv[2:]):
    t = time.perf_counter()
    with threadpool_limits(1):
        res = reproduce_gsm_cuhk01("../shared/data", n_splits=10, structures=["Affine Euclidean"],
                                   baselines=[], verbose=False, tune=False,
                                   cache=sys.argv[1],
                                   gsm_params={**CHOSEN, "random_state": s})
    out = {"row": "affine_euclidean", "random_state": s, "params": CHOSEN, "extra": res.extra,
           "rows": res.rows, "seconds": time.perf_counter() - t}
    with open(f"benchmarks/results/hold/cuhk01/affine_euclidean_seed{s}.json", "w") as f:
        json.dump(json_ready(out), f, indent=1)
    print(s, out["seconds"], flush=True)
