"""GSM's generalized similarity against its special cases (GSM Fig. 6) on a "which method when" set.

Run: ``python benchmarks/gsm_special_cases.py [--dataset viper] [--n-splits 3]
[--structures generalized,euclidean,linear,ladf,joint_bayesian,inner_product]
[--data-root /work/shared/data] [--out gsm_special_cases.json]``

Each structure is ``GSM(structure=...)`` with the registry's GSM paper grid
(:func:`crossmetric.registry.gsm_paper_grid`: dimension and start -- for the generalized form
also the start from its fitted affine Euclidean case --, then μ and what it pulls towards,
then for the generalized form ``start_mu``, the pull towards that start)
selected per split by 3-fold inner cross-validation on the split's training persons
(validation rank-1), exactly as
``benchmarks/which_method_when.py`` runs the ``gsm`` row: the same loader, protocol options and
seed, so the same splits, and the ``generalized`` row equals that script's GSM row. Every number
comes from one :func:`crossmetric.protocols.run_protocols` call per structure (no loop of its
own). Prints and writes (atomically) JSON: per structure the per-split rank-1, rank-20 and mAP
(%), their means, the settings chosen and the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from which_method_when import DEFAULT_ROOT, N_TEST, load_dataset, protocol_options  # noqa: E402

from crossmetric.learners.gsm import STRUCTURES  # noqa: E402


def run_structure(structure: str, data: dict, dataset: str, *, n_splits: int, seed: int) -> dict:
    """One structure on ``n_splits`` splits with its paper grid selected on training persons."""
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import gsm_paper_grid, make_estimator

    t0 = time.perf_counter()
    res = run_protocols({structure: make_estimator("gsm", structure=structure)}, data,
                        protocols=("identification",), n_repeats=n_splits, max_rank=20,
                        random_state=seed, n_jobs=1, on_error="raise",
                        param_grids={structure: gsm_paper_grid(structure)},
                        tune_scoring="rank1", **protocol_options(dataset, ["gsm"]))
    per = {m: [100 * r["value"] for r in res.records if r["measure"] == m]
           for m in ("rank1", "map", "rank20")}
    return {"per_split": per, "mean": {k: float(np.mean(v)) for k, v in per.items() if v},
            "chosen": [t["params"] for t in res.info["tuned"][structure]],
            "seconds": time.perf_counter() - t0}


def main(argv=None) -> dict:
    from crossmetric.persistence import atomic_open, json_ready

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="viper", choices=sorted(N_TEST))
    ap.add_argument("--n-splits", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--structures", default=",".join(STRUCTURES))
    ap.add_argument("--data-root", default=DEFAULT_ROOT)
    ap.add_argument("--out", default="gsm_special_cases.json")
    args = ap.parse_args(argv)
    structures = [s.strip() for s in args.structures.split(",") if s.strip()]
    unknown = sorted(set(structures) - set(STRUCTURES))
    if unknown:
        ap.error(f"--structures: unknown {', '.join(unknown)}; expected some of "
                 f"{', '.join(STRUCTURES)}")
    data, description = load_dataset(args.dataset, args.data_root, images=False)
    out = {"dataset": args.dataset, "description": description, "n_splits": args.n_splits,
           "seed": args.seed, "structures": {}}
    for s in structures:
        out["structures"][s] = run_structure(s, data, args.dataset, n_splits=args.n_splits,
                                             seed=args.seed)
        m = out["structures"][s]["mean"]
        print(f"{s:>15}: rank-1 {m['rank1']:.1f}  rank-20 {m.get('rank20', float('nan')):.1f}  "
              f"mAP {m['map']:.1f}  ({out['structures'][s]['seconds']:.0f} s)",
              file=sys.stderr, flush=True)
    with atomic_open(args.out, "w", encoding="utf-8") as fh:
        json.dump(json_ready(out), fh, indent=1)
    print(json.dumps(json_ready(out), indent=1))
    return out


if __name__ == "__main__":
    main()
