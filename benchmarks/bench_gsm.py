"""Photo ↔ sketch matching on the embedded digits (the CUFS protocol of GSM §5.3).

Each image of ``load_digits_views()`` is an identity with one "photo" (the digit) and one
"sketch" (an edge map of a deformed copy). Training uses the (photo, sketch) pairs of
``--n-train`` instances; the gallery is the photos of ``--n-test`` held-out instances and the
probes are their sketches. Reported: rank-1 and the CMC up to rank 10, training time.

Methods: DeepGSM on the raw 16 × 16 images (sample-based batches); GSM on fixed features
(photo pixels ``X`` and sketch HOG ``Y``) with each of the six structures (sample-based identity
batches, the default here), and for "generalized" and "euclidean" also with the former
pair-slice batches, the hardest negatives and early stopping; CMML; CCA; and the
untrained Euclidean distance between photo and sketch pixels. Then the §5.5 comparison of
sample-based and pair-based batches at equal wall-clock time: pairs per second and rank-1.

    python benchmarks/bench_gsm.py                 # everything (a few minutes on 2 cores)
    python benchmarks/bench_gsm.py --quick         # smaller budget, for a smoke run
    python benchmarks/bench_gsm.py --json out.json

Prints a table; ``--json`` also writes every number.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from crossmetric.datasets import load_digits_views  # noqa: E402
from crossmetric.learners.gsm import GSM, STRUCTURES  # noqa: E402
from crossmetric.metrics import cmc  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402


def split(n: int, n_train: int, n_test: int, seed: int):
    perm = np.random.RandomState(seed).permutation(n)
    return perm[:n_train], perm[n_train:n_train + n_test]


def evaluate(model, gallery, probes) -> dict:
    """CMC of probes (sketches, rows of Y) against the gallery (photos, rows of X)."""
    D = model.cross_distance(gallery, probes).T  # (n_probe, n_gallery)
    ids = np.arange(D.shape[0])
    curve = cmc(D, ids, ids, max_rank=10)
    return {"rank1": float(curve[0]), "cmc10": [round(float(c), 4) for c in curve]}


def run(name: str, make, pairs, y, gallery, probes, rows: list) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = make().fit(pairs, y)
    fit_s = time.perf_counter() - t0
    res = {"method": name, "fit_s": round(fit_s, 2), **evaluate(model, gallery, probes)}
    if hasattr(model, "n_iter_"):
        res["n_iter"] = int(model.n_iter_)
    rows.append(res)
    c = res["cmc10"]
    print(f"{name:<28} rank1 {100 * c[0]:6.1f}%  rank5 {100 * c[4]:6.1f}%  "
          f"rank10 {100 * c[9]:6.1f}%  fit {fit_s:7.1f}s", flush=True)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-test", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deep-iter", type=int, default=20000)
    ap.add_argument("--deep-max-seconds", type=float, default=540.0,
                    help="DeepGSM stops after this much training (the 10-minute budget)")
    ap.add_argument("--hidden", type=int, default=400)
    ap.add_argument("--identities", type=int, default=64)
    ap.add_argument("--race-seconds", type=float, default=60.0,
                    help="wall-clock budget of each side of the sample- vs pair-based race")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--structures", default="",
                    help="comma list of GSM structures (default: all six)")
    ap.add_argument("--hard", type=int, default=5,
                    help="hard_negatives of the hardest-negative GSM rows")
    ap.add_argument("--skip", default="", help="comma list: deep,gsm,cmml,cca,euclidean,race")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.deep_iter, args.race_seconds, args.hidden = 300, 12.0, 64
    skip = set(filter(None, args.skip.split(",")))

    data = load_digits_views()
    n = data.images_x.shape[0]
    tr, te = split(n, args.n_train, args.n_test, args.seed)
    inst = data.instance
    # training pairs: each instance's (photo, sketch) and 10 random other-instance negatives
    pairs, y = make_pairs(inst[tr], inst[tr], n_negatives=10, random_state=args.seed)
    rows: list = []
    out: dict = {"n_train": args.n_train, "n_test": args.n_test, "chance_rank1":
                 1.0 / args.n_test, "results": rows}
    print(f"photo -> sketch, {args.n_train} training instances, gallery of {args.n_test} "
          f"photos, {args.n_test} sketch probes (chance rank-1 {100 / args.n_test:.1f}%)")

    if "euclidean" not in skip:
        from crossmetric.learners.baselines import Euclidean

        px = data.images_x.reshape(n, -1)
        py = data.images_y.reshape(n, -1)
        run("Euclidean (pixels)", lambda: Euclidean(preprocessor=(px[tr], py[tr])), pairs, y,
            px[te], py[te], rows)
    X, Y = data.X, data.Y
    if "cca" not in skip:
        from crossmetric.learners.baselines import CCA

        for k in (10, 30):
            run(f"CCA (k={k}, features)", lambda k=k: CCA(k, preprocessor=(X[tr], Y[tr])),
                pairs, y, X[te], Y[te], rows)
    if "cmml" not in skip:
        try:
            from crossmetric.learners.cmml import CMML
        except ImportError:  # pragma: no cover
            print("CMML not available")
        else:
            run("CMML (k=30, features)",
                lambda: CMML(30, random_state=0, preprocessor=(X[tr], Y[tr])),
                pairs, y, X[te], Y[te], rows)
    if "gsm" not in skip:
        for structure in (args.structures.split(",") if args.structures else STRUCTURES):
            # all features (standardised); the structures that tie L_A between the modalities
            # need one dimension: PCA of both to d_y
            k = Y.shape[1] if structure in ("ladf", "joint_bayesian") else None
            run(f"GSM {structure} (features)",
                lambda s=structure, k=k: GSM(k, structure=s, random_state=0,
                                             preprocessor=(X[tr], Y[tr])),
                pairs, y, X[te], Y[te], rows)
        # batches: the default above is "auto" = the paper's sample-based
        # identity batches on this instance task; the former pair slices, hardest negatives,
        # and early stopping on held-out identities (item 3)
        for structure in ("generalized", "euclidean"):
            for label, kw in (("pair batches", {"batch_mode": "pair"}),
                              (f"hard negatives {args.hard}", {"hard_negatives": args.hard}),
                              ("early stopping", {"early_stopping": True})):
                run(f"GSM {structure} ({label})",
                    lambda s=structure, kw=kw: GSM(structure=s, random_state=0,
                                                   preprocessor=(X[tr], Y[tr]), **kw),
                    pairs, y, X[te], Y[te], rows)
        # the former default: whitened features (per-feature standardisation / PCA whitening)
        for structure in ("generalized", "euclidean"):
            run(f"GSM {structure} (whiten=True)",
                lambda s=structure: GSM(structure=s, whiten=True, random_state=0,
                                        preprocessor=(X[tr], Y[tr])),
                pairs, y, X[te], Y[te], rows)

    if "deep" in skip and "race" in skip:
        return out
    import torch

    from crossmetric.deep import DeepGSM

    torch.set_num_threads(args.threads)
    ix, iy = data.images_x, data.images_y
    deep_kw = dict(hidden_units=args.hidden, n_identities=args.identities, device="cpu",
                   random_state=0, tol=None, preprocessor=(ix[tr], iy[tr]))
    if "deep" not in skip:
        res = run(f"DeepGSM (images, {args.deep_iter} it)",
                  lambda: DeepGSM(max_iter=args.deep_iter, max_time=args.deep_max_seconds,
                                  **deep_kw), pairs, y,
                  ix[te], iy[te], rows)
        out["deep_train_s"] = res["fit_s"]

    if "race" not in skip:
        # §5.5: the same number of images per iteration (2K̂) and the same wall-clock budget.
        # The two runs are interleaved in slices (checkpoint + resume) so that load from other
        # processes on the machine hits both alike.
        import os
        import tempfile

        k = args.identities
        n_slices = 6
        tmp = tempfile.mkdtemp()
        models = {}
        train_s = {"sample": 0.0, "pair": 0.0}
        for _ in range(n_slices):
            for mode in ("sample", "pair"):
                models[mode] = DeepGSM(
                    batch_mode=mode, max_iter=10**6, max_time=args.race_seconds / n_slices,
                    lr_schedule="constant", checkpoint_path=os.path.join(tmp, f"{mode}.pt"),
                    resume=True, **deep_kw).fit(pairs, y)
                train_s[mode] += models[mode].train_time_
        race = []
        for mode in ("sample", "pair"):
            model = models[mode]
            it = model.n_iter_
            per_it = k * k if mode == "sample" else k  # n_x·n_y pairs vs n_pairs = K̂(1+1)/2
            r = {"mode": mode, "iterations": it, "train_s": round(train_s[mode], 2),
                 "images_per_iter": 2 * k, "pairs_per_iter": per_it,
                 "pairs_per_s": round(it * per_it / train_s[mode], 1),
                 "images_per_s": round(it * 2 * k / train_s[mode], 1),
                 **evaluate(model, ix[te], iy[te])}
            race.append(r)
            print(f"race {mode:<6}: {it:6d} it in {r['train_s']:6.1f}s, "
                  f"{r['pairs_per_s']:10.1f} pairs/s ({r['images_per_s']:.0f} images/s), "
                  f"rank1 {100 * r['rank1']:5.1f}%", flush=True)
        out["race"] = race
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
