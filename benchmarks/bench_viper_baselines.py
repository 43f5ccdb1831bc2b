"""Every single-modal baseline of the registry on the VIPeR protocol of PCCA §4.

Run: ``python benchmarks/bench_viper_baselines.py [--splits 3] [--methods kissme,itml,...]
[--n-negatives 10] [--p 316]`` -- prints a table (CMC at r = 1, 5, 10, 20, mean over splits)
and then JSON.

Protocol: :func:`crossmetric.protocols.reid.reid_splits` (p test persons, one positive and ``n⁻``
negative training pairs per training person, one probe and one gallery image per test person)
and :func:`crossmetric.protocols.reid.evaluate_reid`. Features: the ``pcca-viper`` reproduction's
descriptor, :class:`crossmetric.features.StripHistograms` with ``normalize="vector"``, square
rooted (the "-sqrt" features of PCCA Table 2, 924 dimensions) -- the same for every method.

Settings: the registry's (:data:`crossmetric.registry.METHODS`) for every method, with these
additions, all on the training images only:

* **PCA-64 first** for the methods that learn a full ``d × d`` matrix from second moments:
  ``kissme`` and ``dmleig`` (their own ``pca_components=64``; KISSME's covariance of 316
  positive differences is singular in 924 dimensions and its paper uses 34-100 PCA
  dimensions) and ``itml`` (the reproduction's PCA-64 wrapper, as in ``pcca-viper``);
* ``pcca``: the PCCA paper's d' = 40, β = 3 on top of the registry's cap (300 L-BFGS
  iterations, no per-split choice of ``max_iter`` unlike ``crossmetric reproduce``).

``ldml``, ``nca``, ``lmnn``, ``mcc`` (32 dims each) and ``prdc`` run on the 924 raw features.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's crossmetric
from _common import machine  # noqa: E402

from crossmetric.protocols.reid import CMC_RANKS, evaluate_reid, reid_splits  # noqa: E402
from crossmetric.registry import make_estimator  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
METHODS = ("euclidean", "kissme", "ldml", "itml", "nca", "lmnn", "mcc", "prdc", "dmleig",
           "pcca")
#: the additions to the registry settings (module docstring)
PCA_FIRST = {"kissme": 64, "dmleig": 64, "itml": 64}


def build(name: str):
    """The learner of ``name`` for VIPeR (``None`` = untrained Euclidean distance)."""
    if name == "euclidean":
        return None
    if name in ("kissme", "dmleig"):
        return make_estimator(name, pca_components=PCA_FIRST[name])
    if name == "itml":
        from crossmetric.protocols.views import PCAThen as _PCAThen

        return _PCAThen(make_estimator("itml"), n_components=PCA_FIRST["itml"])
    if name == "pcca":
        return make_estimator("pcca", n_components=40, beta=3.0)
    return make_estimator(name)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--p", type=int, default=316, help="test persons")
    ap.add_argument("--n-negatives", type=int, default=10)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-home", default=str(DATA))
    args = ap.parse_args(argv)

    from crossmetric.reproduce.viper import _feature_map, viper_features

    data = viper_features(args.data_home)
    X = _feature_map(data["X"], "sqrt")
    ids, dom = data["ids"], data["domains"]
    splits = reid_splits(ids, dom, args.p, n_negatives=args.n_negatives,
                         n_splits=args.splits, random_state=args.seed)
    import crossmetric

    out = {"machine": machine(), "crossmetric": crossmetric.__file__, "p": args.p,
           "n_negatives": args.n_negatives,
           "splits": args.splits, "features": f"StripHistograms(normalize='vector'), sqrt, "
           f"{X.shape[1]} dims", "pca_first": PCA_FIRST, "results": {}}
    for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
        try:
            est = build(name)
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            out["results"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        per, secs, warns = [], [], set()
        t0 = time.perf_counter()
        try:
            for s in splits:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = evaluate_reid(est, X, ids, s)
                per.append([100 * r[f"rank{k}"] for k in CMC_RANKS])
                secs.append(r["fit_seconds"])
                warns.update(r["warnings"])
        except Exception as exc:  # noqa: BLE001
            out["results"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        per = np.asarray(per)
        out["results"][name] = {
            **{f"r{k}": float(per[:, j].mean()) for j, k in enumerate(CMC_RANKS)},
            "r1_std": float(per[:, 0].std()), "seconds_per_split": float(np.mean(secs)),
            "wall_seconds": time.perf_counter() - t0, "warnings": sorted(warns)}
        row = out["results"][name]
        print(f"{name:<10} " + " ".join(f"r{k}={row[f'r{k}']:6.2f}" for k in CMC_RANKS)
              + f"  {row['seconds_per_split']:.1f} s/split {','.join(row['warnings'])}",
              file=sys.stderr, flush=True)
    out["machine_after"] = machine()
    print(f"\nVIPeR p={args.p} n-={args.n_negatives}, {args.splits} splits (CMC %)")
    print(f"{'method':<10} {'r1':>6} {'r5':>6} {'r10':>6} {'r20':>6} {'s/split':>8}")
    for name, row in out["results"].items():
        if "error" in row:
            print(f"{name:<10} error: {row['error']}")
            continue
        print(f"{name:<10} " + " ".join(f"{row[f'r{k}']:6.2f}" for k in CMC_RANKS)
              + f" {row['seconds_per_split']:8.1f}")
    print(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
