"""Choose DeepGSM's PKU-Sketch recipe on held-out *training* persons (never on test persons).

For each of the reproduction's splits (``crossmetric.reproduce.pku_splits``, the same draws
as ``crossmetric reproduce pku-sketch``), the split's test persons are set aside untouched;
``--held-out`` of its training persons (whole persons, drawn from the split's own seed) are
held out, every candidate trains on the remaining training persons, and the held-out sketches
rank the held-out photos (CMC rank 1 / 5 / 20 and mAP, %). GSM on the reproduction's
descriptor (HOG → PCA-64 fitted on the same reduced training set) is the reference.

Candidates are :data:`crossmetric.reproduce.PKU_DEEPGSM` with the overrides of
:data:`CANDIDATES`. Each fitted DeepGSM is scored twice: without and with ``test_flip`` (features
averaged over the image and its mirror; the training is the same).

    python benchmarks/select_pku_deepgsm.py --splits 5 --candidates recipe,gray --json out.json

``--members k`` trains every candidate from k seeds (:class:`crossmetric.SeedEnsemble`, member 0
seeded as the single model) and scores member 0 alone (``name``) and the ensemble
(``name``x``k``), each with and without flipping.

Prints a table (means over splits, and each candidate's paired rank-1 difference to the
first candidate) and writes per-split values to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks._common import identification_percent  # noqa: E402
from crossmetric.protocols import fit_view_pca, hold_out_identities  # noqa: E402
from crossmetric.reproduce.pku import PKU_SIZE, pku_deepgsm, pku_features, pku_splits  # noqa: E402


def _candidates():
    from crossmetric.deep.augment import reid_augmentation

    h, w = PKU_SIZE[1], PKU_SIZE[0]
    return {
        "recipe": {},
        "gray": {"augment": reid_augmentation((h, w), grayscale=0.5)},
        # twice the persons per round: more negatives per step (same rounds, or same epochs)
        "ids60": {"n_identities": 60},
        "ids60-750": {"n_identities": 60, "max_iter": 750},
        # stochastic weight averaging over the last 3/4 or 1/2 of the cosine schedule
        "swa25": {"average_from": 0.25},
        "swa50": {"average_from": 0.5},
        # 20 rounds: checks that the script runs (not a candidate)
        "smoke": {"max_iter": 20},
    }


#: name -> overrides of PKU_DEEPGSM
CANDIDATES = _candidates()


def run(data_home, splits, held_out, names, seed=0, verbose=True, members=1) -> dict:
    from crossmetric.learners.ensemble import SeedEnsemble
    from crossmetric.pairs import make_pairs
    from crossmetric.registry import make_estimator

    data = pku_features(data_home)
    H, ids, dom, images = data["H"], data["ids"], data["domains"], data["images"]
    sk, ph = np.flatnonzero(dom == "sketch"), np.flatnonzero(dom == "photo")
    persons = np.unique(ids)
    out = {"held_out": held_out, "splits": splits, "members": members, "per_split": []}
    for k, (test, pairs_seed, split_seed) in enumerate(pku_splits(persons, 50, seed, splits)):
        train = np.setdiff1d(persons, test)
        val, _ = hold_out_identities(train, held_out, np.random.RandomState(split_seed))
        fit_p = np.setdiff1d(train, val)
        f_sk, f_ph = sk[np.isin(ids[sk], fit_p)], ph[np.isin(ids[ph], fit_p)]
        v_sk, v_ph = sk[np.isin(ids[sk], val)], ph[np.isin(ids[ph], val)]
        pairs, y = make_pairs(ids[f_sk], ids[f_ph], n_negatives=1, random_state=pairs_seed)
        row = {"split": k}
        Z = fit_view_pca(H[np.r_[f_sk, f_ph]], 64, svd_solver="auto").transform(H)
        gsm = make_estimator("gsm").set_params(random_state=split_seed,
                                               preprocessor=(Z[f_sk], Z[f_ph]))
        gsm.fit(pairs, y)
        v_ids = (ids[v_sk], ids[v_ph])
        row["gsm"] = identification_percent(gsm.cross_distance(Z[v_sk], Z[v_ph]), *v_ids)
        Xv, Yv = images[v_sk], images[v_ph]
        for name in names:
            t0 = time.perf_counter()
            model = pku_deepgsm(**CANDIDATES[name]).set_params(
                preprocessor=(images[f_sk], images[f_ph]))
            # member 0 is the single model seeded with split_seed (members=1: only it)
            ens = SeedEnsemble(model, n_members=members, random_state=split_seed)
            ens.fit(pairs, y, groups=(ids[f_sk], ids[f_ph]))
            secs = time.perf_counter() - t0
            for flip in (False, True):
                for m in ens.estimators_:
                    m.set_params(test_flip=flip)
                tag = "+flip" if flip else ""
                row[name + tag] = identification_percent(
                    ens.estimators_[0].cross_distance(Xv, Yv), *v_ids)
                if members > 1:
                    row[f"{name}x{members}{tag}"] = identification_percent(
                        ens.cross_distance(Xv, Yv), *v_ids)
            row[name]["seconds"] = secs / members
        out["per_split"].append(row)
        if verbose:
            print(json.dumps({k2: (v if not isinstance(v, dict) else
                                   {m: round(x, 1) for m, x in v.items()})
                              for k2, v in row.items()}), flush=True)
    return out


def table(out) -> str:
    rows = out["per_split"]
    keys = [k for k in rows[0] if k != "split"]
    ref = next(k for k in keys if k != "gsm")
    lines = [f"held out {out['held_out']} training persons, {len(rows)} splits "
             f"(means, %; Δr1 = paired rank-1 difference to {ref})",
             f"{'candidate':<18}{'r1':>7}{'r5':>7}{'r20':>7}{'mAP':>7}{'Δr1':>8}{'s/fit':>7}"]
    for k in keys:
        v = {m: np.mean([r[k][m] for r in rows]) for m in ("r1", "r5", "r20", "mAP")}
        d = np.mean([r[k]["r1"] - r[ref]["r1"] for r in rows])
        s = np.mean([r[k].get("seconds", np.nan) for r in rows])
        lines.append(f"{k:<18}{v['r1']:7.1f}{v['r5']:7.1f}{v['r20']:7.1f}{v['mAP']:7.1f}"
                     f"{d:+8.1f}{s:7.0f}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-home", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                        "shared", "data", "pku_sketch"))
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--held-out", type=int, default=40)
    ap.add_argument("--candidates", default="recipe,gray")
    ap.add_argument("--members", type=int, default=1,
                    help="train each candidate from this many seeds (crossmetric.SeedEnsemble) "
                         "and score member 0 alone and the ensemble")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = args.candidates.split(",")
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        ap.error(f"unknown candidates {unknown}; expected some of {sorted(CANDIDATES)}")
    out = run(args.data_home, args.splits, args.held_out, names, members=args.members)
    out["load_avg_end"] = os.getloadavg()[0]
    print(table(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
