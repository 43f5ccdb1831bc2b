"""CUHK01 generalized GSM with the settings its selection chose on each split
(``generalized_split{k}.json``: stages 1-2 the same on all splits, ``start_mu`` per split),
fixed seeds, no selection: the generalized form's own seed-to-seed spread, to set beside
``affine_euclidean_seed{s}.json``.

Run from the repository root, one BLAS thread:
``python benchmarks/results/hold/cuhk01/run_generalized_seeds.py FEATURE_CACHE.npz 0 1 2 3 4``
(the cache: :func:`crossmetric.reproduce.cuhk01.cuhk01_features`)."""
import json
import sys
import time

from threadpoolctl import threadpool_limits

from crossmetric._utils.atomic_io import json_ready
from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01

HERE = "benchmarks/results/hold/cuhk01"
for s in map(int, sys.argv[2:]):
    t = time.perf_counter()
    per, chosen = {}, []
    for k in range(10):
        with open(f"{HERE}/generalized_split{k}.json") as f:
            params = dict(json.load(f)["extra"]["tuned"]["Generalized"][0]["params"])
        chosen.append(params)
        with threadpool_limits(1):
            res = reproduce_gsm_cuhk01("../shared/data", n_splits=1, first_split=k,
                                       structures=["Generalized"], baselines=[], verbose=False,
                                       tune=False, cache=sys.argv[1],
                                       gsm_params={**params, "random_state": s})
        for r, v in res.extra["per_split"]["Generalized"].items():
            per.setdefault(r, []).extend(v)
    out = {"row": "generalized", "random_state": s, "params_per_split": chosen,
           "per_split": per, "seconds": time.perf_counter() - t}
    with open(f"{HERE}/generalized_seed{s}.json", "w") as f:
        json.dump(json_ready(out), f, indent=1)
    print(s, out["seconds"], flush=True)
