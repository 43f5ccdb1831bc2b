"""Choose DeepGSM's CUHK01 recipe on held-out *training* persons (never on test persons).

For each of the first ``--splits`` splits of ``crossmetric reproduce gsm-cuhk01-deep`` (the
same seed, single-shot views and test persons: the reproduction's own
``crossmetric.reproduce.cuhk01._split_plan`` and the identity split that
``run_protocols`` draws from the split's seed), the split's 100 test persons are set aside
untouched; ``--held-out`` of its 871 training persons (whole persons, drawn from the split's
seed) are held out, every candidate trains on the remaining training persons, and the
held-out persons' camera-A images rank their camera-B images (CMC rank 1 / 5 / 20 and mAP,
%). The views are the reproduction's: one image per camera and person (single shot); the
``both-shots`` candidate trains on both images of each camera of the same training persons
(the held-out persons are still ranked on the single-shot views). The Euclidean distance of
the raw pixels of the same held-out images is the reference (``euclid``).

Candidates are :data:`crossmetric.reproduce.cuhk01.CUHK01_DEEPGSM` on
:data:`crossmetric.reproduce.pku.PKU_DEEPGSM` (``pku_deepgsm``, as the reproduction builds it)
with the overrides of :data:`CANDIDATES`; every fitted model is scored with the recipe's
``test_flip=True`` and without it (``+noflip``).

    python benchmarks/select_cuhk01_deepgsm.py --splits 1 --threads 1 \\
        --candidates recipe,lr3e-4 --json out.json

``--json`` is rewritten (atomically) after every fit; a rerun with the same file skips the
(split, candidate) fits already in it, so an interrupted search resumes. Prints a table
(means over the splits, per-split rank-1, and each candidate's paired rank-1 difference to
the first candidate).
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
from crossmetric.protocols import (  # noqa: E402
    hold_out_identities,
    identification_splits,
    measure_identification,
)
from crossmetric.reproduce.cuhk01 import CUHK01_DEEPGSM, N_TEST, _split_plan  # noqa: E402

#: candidates whose training set is both images of each camera (not the single-shot views)
BOTH_SHOTS = ("both-shots",)


def _candidates():
    return {
        "recipe": {},
        # twice the rounds (cosine schedule stretched over 6000)
        "long6000": {"max_iter": 6000},
        "lr3e-4": {"learning_rate": 3e-4},
        "lr3e-3": {"learning_rate": 3e-3},
        # the paper's crop size (its images: 250 x 100 resized, 230 x 80 crops): the images
        # are resized to 80 x 230 (w x h, see _image_size) for training and testing
        "size230": {"input_shape": (230, 80)},
        # the paper's r = 400 units
        "hidden400": {"hidden_units": 400},
        "wd5e-3": {"weight_decay": 5e-3},
        # the paper's initialisation: N(0, 0.01) convolutions, N(0, 0.001) fully connected
        "init-paper": {"init": "paper"},
        # a 4-pixel shift only (the paper's "small random perturbation"), no flips / erasing
        "shift4": {"augment": 4},
        # both images of each camera of every training person, 2 + 2 a person a round
        "both-shots": {"n_images_x": 2, "n_images_y": 2},
        # 20 rounds: checks that the script runs (not a candidate)
        "smoke": {"max_iter": 20},
    }


#: name -> overrides of the reproduction's DeepGSM (CUHK01_DEEPGSM on PKU_DEEPGSM)
CANDIDATES = _candidates()


def cuhk01_images(data_home, persons=None, size=None) -> dict:
    """The CUHK01 images (uint8) with ``ids`` and ``domains``, as the reproduction loads them
    (``persons``: only the first ones, as its ``persons=``; ``size``: (width, height) to
    resize to, as ``load_cuhk01``)."""
    from crossmetric.datasets import load_cuhk01

    b = load_cuhk01(data_home, size=size)
    rows = np.arange(b.ids.size)
    if persons is not None:
        rows = np.flatnonzero(np.isin(b.ids, np.unique(b.ids)[:int(persons)]))
    # ``Z`` is what _split_plan indexes: the images themselves, as in the reproduction
    return {"ids": b.ids[rows], "domains": b.domains[rows], "Z": b.images[rows]}


def split_draws(data: dict, seed: int, n_splits: int, n_test: int = N_TEST,
                n_negatives: int = 10):
    """``(k, views, split seed, test persons)`` of the reproduction's first ``n_splits``.

    The views and seeds come from the reproduction's ``_split_plan``; the test persons are
    those :func:`crossmetric.protocols.run_protocols` draws with the split's seed
    (``identification_splits(..., split="identity", random_state=seed)``, which draws the
    test persons first: ``n_negatives``, the reproduction's, only sizes the pairs it draws
    after them, which are not used here)."""
    for k, views, sd in _split_plan(data, seed, 0, n_splits):
        labels = views["labels"]
        sp = identification_splits(labels, 1, test_size=int(n_test), cross_modal=True,
                                   n_negatives=n_negatives, max_train_positives=None,
                                   split="identity", random_state=sd)[0]
        yield k, views, sd, np.unique(labels[sp.probe_rows])


def _image_size(params: dict):
    """``(width, height)`` to load the images at for ``params``: ``None`` (as stored, 60 x
    160) unless its ``input_shape`` (h x w) differs from that."""
    h, w = params.get("input_shape", CUHK01_DEEPGSM["input_shape"])
    return None if (h, w) == (160, 60) else (int(w), int(h))


def _training_rows(data, views, fit_p, both_shots):
    """Camera-A and camera-B rows (into ``data``) of the persons ``fit_p``."""
    if not both_shots:
        keep = np.isin(views["labels"], fit_p)
        return views["rows_x"][keep], views["rows_y"][keep]
    ids, dom = data["ids"], data["domains"]
    inp = np.isin(ids, fit_p)
    return np.flatnonzero(inp & (dom == 1)), np.flatnonzero(inp & (dom == 2))


def _fit_one(params, data, rx, ry, sd, pairs_seed, device):
    from crossmetric.pairs import make_pairs
    from crossmetric.reproduce.pku import pku_deepgsm

    ids, images = data["ids"], data["Z"]
    pairs, y = make_pairs(ids[rx], ids[ry], n_negatives=1, random_state=pairs_seed)
    model = pku_deepgsm(**{**CUHK01_DEEPGSM, "device": device, "random_state": sd,
                           **params})
    model.set_params(preprocessor=(images[rx], images[ry]))
    t0 = time.perf_counter()
    model.fit(pairs, y, groups=(ids[rx], ids[ry]))
    return model, time.perf_counter() - t0


def _write_json(path, out):
    from crossmetric.persistence import atomic_open

    with atomic_open(path, "w") as fh:
        json.dump(out, fh, indent=1)


def run(data_home, splits, held_out, names, *, seed=0, n_test=N_TEST, persons=None,
        device="cpu", json_path=None, verbose=True, overrides=None,
        n_negatives=10) -> dict:
    """The search (see the module docstring); ``overrides`` replace entries of every
    candidate (tests: a tiny network). Returns ``{"per_split": [row, ...], ...}``."""
    params = {n: {**CANDIDATES[n], **(overrides or {})} for n in names}
    data = cuhk01_images(data_home, persons)
    out = {"held_out": held_out, "splits": splits, "seed": seed, "n_test": n_test,
           "recipe": {k: list(v) if isinstance(v, tuple) else v
                      for k, v in CUHK01_DEEPGSM.items()},
           "candidates": {n: {k: list(v) if isinstance(v, tuple) else v
                              for k, v in params[n].items()} for n in names},
           "per_split": []}
    if json_path and os.path.exists(json_path):
        with open(json_path) as fh:
            old = json.load(fh)
        if (old.get("held_out"), old.get("seed"), old.get("n_test")) == (held_out, seed, n_test):
            out["per_split"] = old["per_split"]  # resume: fits already done are kept
    images = data["Z"]
    resized = {}  # (width, height) -> the images at that size (the same rows)
    for k, views, sd, test in split_draws(data, seed, splits, n_test, n_negatives):
        train = np.setdiff1d(views["labels"], test)
        val, fit_p = hold_out_identities(train, held_out, np.random.RandomState(sd))
        val = np.sort(val)
        if k < len(out["per_split"]):
            row = out["per_split"][k]
        else:
            row = {"split": k, "n_fit": int(fit_p.size), "n_held_out": int(val.size)}
            out["per_split"].append(row)
        keep = np.isin(views["labels"], val)
        vx, vy, vl = views["rows_x"][keep], views["rows_y"][keep], views["labels"][keep]
        if "euclid" not in row:
            px, py = (images[r].reshape(r.size, -1) / 255.0 for r in (vx, vy))
            rep, _ = measure_identification(None, px, py, vl, vl, blockwise=False)
            row["euclid"] = {"r1": 100 * rep["rank1"], "r5": 100 * rep["rank5"],
                             "r20": 100 * rep["rank20"], "mAP": 100 * rep["map"]}
        for name in names:
            if name in row:
                continue
            rx, ry = _training_rows(data, views, fit_p, name in BOTH_SHOTS)
            trained = set(data["ids"][rx]) | set(data["ids"][ry])
            if trained & (set(test) | set(val)):  # never a test or held-out person
                raise RuntimeError(f"split {k}: {name} would train on a test or held-out "
                                   "person")
            size = _image_size(params[name])
            fit_data = data
            if size is not None:
                if size not in resized:
                    resized[size] = cuhk01_images(data_home, persons, size)["Z"]
                fit_data = {**data, "Z": resized[size]}
            model, secs = _fit_one(params[name], fit_data, rx, ry, sd, sd + 1, device)
            for flip, tag in ((True, ""), (False, "+noflip")):
                model.set_params(test_flip=flip)
                im = fit_data["Z"]
                row[name + tag] = identification_percent(
                    model.cross_distance(im[vx], im[vy]), vl, vl)
            row[name]["seconds"] = secs
            row[name]["rounds"] = int(model.get_params()["max_iter"])
            if json_path:
                _write_json(json_path, out)
            if verbose:
                print(f"split {k} {name}: " + ", ".join(
                    f"{m} {v:.1f}" for m, v in row[name].items()) + f" (noflip r1 "
                    f"{row[name + '+noflip']['r1']:.1f}; load {os.getloadavg()[0]:.2f})",
                    flush=True)
    out["load_avg_end"] = os.getloadavg()[0]
    if json_path:
        _write_json(json_path, out)
    return out


def table(out, names=None) -> str:
    rows = out["per_split"]
    keys = []
    for r in rows:
        keys += [k for k in r if isinstance(r[k], dict) and k not in keys]
    if names is not None:
        keys = [k for k in keys if k == "euclid" or k.split("+")[0] in names]
    ref = next((k for k in keys if k != "euclid"), None)
    lines = [f"held out {out['held_out']} training persons per split (means over the splits "
             f"that ran the candidate, %; Δr1 = paired rank-1 difference to {ref})",
             f"{'candidate':<20}{'n':>3}{'r1':>7}{'r5':>7}{'r20':>7}{'mAP':>7}{'Δr1':>8}"
             f"{'s/fit':>7}  r1 per split"]
    for k in keys:
        have = [r for r in rows if k in r]
        v = {m: np.mean([r[k][m] for r in have]) for m in ("r1", "r5", "r20", "mAP")}
        paired = [r[k]["r1"] - r[ref]["r1"] for r in have if ref in r]
        d = np.mean(paired) if paired else np.nan
        s = np.mean([r[k].get("seconds", np.nan) for r in have])
        per = " ".join(f"{r[k]['r1']:.0f}" for r in have)
        lines.append(f"{k:<20}{len(have):>3}{v['r1']:7.1f}{v['r5']:7.1f}{v['r20']:7.1f}"
                     f"{v['mAP']:7.1f}{d:+8.1f}{s:7.0f}  {per}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-home", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                        "shared", "data"))
    ap.add_argument("--splits", type=int, default=1)
    ap.add_argument("--held-out", type=int, default=100)
    ap.add_argument("--candidates", default="recipe")
    ap.add_argument("--seed", type=int, default=0, help="the reproduction's seed")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--persons", type=int, default=None,
                    help="only the first persons (tests); the splits then differ")
    ap.add_argument("--n-test", type=int, default=N_TEST)
    ap.add_argument("--n-negatives", type=int, default=10,
                    help="the reproduction's n_negatives (small sets: fewer)")
    ap.add_argument("--json", default=None,
                    help="per-split values, rewritten after every fit; resumed from")
    args = ap.parse_args(argv)
    names = args.candidates.split(",")
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        ap.error(f"unknown candidates {unknown}; expected some of {sorted(CANDIDATES)}")
    if args.held_out < 2:
        ap.error(f"--held-out must be >= 2, got {args.held_out}")
    import torch

    torch.set_num_threads(args.threads)
    out = run(args.data_home, args.splits, args.held_out, names, seed=args.seed,
              n_test=args.n_test, persons=args.persons, device=args.device,
              json_path=args.json, n_negatives=args.n_negatives)
    print(table(out, names))
    return out


if __name__ == "__main__":
    main()
