"""CML-AUC Fig. 4 on CUFS: rank-1 and VR@0.1 % against the joint PCA dimension.

The CML-AUC paper (§V-C1, Fig. 4) reports every measure growing with the PCA dimension up to
800 on CUFSF (700 training persons, 1,400 images) and reports its tables at 800. This runs the
``cml-auc-cufs`` protocol (dense SIFT, one PCA fitted on the training sketches and photos,
238 test persons, n⁻ = 10, :func:`crossmetric.protocols.run_protocols`) at each dimension of
``--dims`` with *fixed* settings: by default the ones the paper-grid selection chose at PCA-100
on the first split of ``crossmetric reproduce cml-auc-cufs`` (CML_AUC γ = 0.1, μ = 1e-3,
CML_pAUC γ = 0.1, μ = 1e-5, both on unwhitened views; CCA 64 components, ridge 0.1), so only
the dimension changes. All dimensions share the splits (one seed).

Usage: ``python benchmarks/cml_auc_pca_dimension.py [--dims 100,200,300,359] [--splits 1]
[--out FILE]`` -- prints JSON (rank-1 and VR@0.1 % per method and dimension, mean of the
splits) and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import REPO, machine  # noqa: E402

#: registry name -> fixed settings (the PCA-100 selection of split 0; see the docstring)
SETTINGS = {
    "euclidean": {},
    "cmlauc": {"gamma": 0.1, "mu": 1e-3, "standardize": "scale", "max_iter": 1000},
    "cmlpauc": {"gamma": 0.1, "mu": 1e-5, "standardize": "scale", "max_iter": 1000},
    "cca": {"n_components": 64, "reg": 0.1},
}


def run(data: dict, dims, *, n_splits: int, seed: int, methods=tuple(SETTINGS)) -> dict:
    """``{method display name: {dimension: {"rank1": %, "vr": %}}}`` (means over splits)."""
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import METHODS, make_estimator
    from crossmetric.reproduce.cufs import N_TEST

    out: dict = {}
    for k in dims:
        est = {METHODS[m].display: make_estimator(m, **SETTINGS[m]) for m in methods}
        res = run_protocols(est, data, protocols=("identification",), n_repeats=n_splits,
                            test_size=N_TEST, n_negatives=10, max_train_positives=None,
                            pca_components=int(k), pca_joint=True, fpr=1e-3, max_rank=20,
                            pair_measures=True, random_state=seed, n_jobs=1)
        for r in res.summary:
            if r["measure"] in ("rank1", "vr"):
                out.setdefault(r["method"], {}).setdefault(int(k), {})[r["measure"]] = (
                    round(100 * r["mean"], 2))
    return out


def main(argv=None) -> dict:
    from crossmetric.persistence import atomic_open

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="100,200,300,359")
    ap.add_argument("--splits", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    from crossmetric.reproduce.cufs import cufs_features

    dims = [int(d) for d in args.dims.split(",") if d.strip()]
    t0 = time.perf_counter()
    data = cufs_features(args.data_root)
    result = {"dims": dims, "splits": args.splits, "seed": args.seed, "settings": SETTINGS,
              "results": run(data, dims, n_splits=args.splits, seed=args.seed),
              "seconds": round(time.perf_counter() - t0, 1), "machine": machine()}
    text = json.dumps(result, indent=1)
    if args.out:
        with atomic_open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
