"""DeepGSM on real cross-domain images: PKU-Sketch (sketch ↔ photo) and VIPeR (camera A ↔ B).

Protocols
---------
* PKU-Sketch: exactly ``crossmetric reproduce pku-sketch`` (:func:`crossmetric.reproduce.
  reproduce_pku_sketch`): per split 150 persons train and 50 test; the 50 test sketches are probes
  against the 100 test photos; CMC and mAP. DeepGSM trains on the RGB images (64 × 160, w × h)
  with :data:`crossmetric.reproduce.PKU_DEEPGSM`; GSM and CMML (registry settings) on the
  reproduction's descriptor, :func:`crossmetric.reproduce.pku_features` (HOG of the grey image,
  PCA-64 fitted on the training images of the split). The numbers are the reproduction's own
  rows (one protocol, one descriptor baseline), with the seconds of every split.
* VIPeR: 632 persons, one image per camera; per split 316 train, 316 test; the camera-B images
  are probes against the camera-A gallery (the domains are the cameras). DeepGSM runs the
  PKU-Sketch recipe with one image per domain and identity (not tuned for VIPeR); Euclidean, GSM
  and CMML run on the reproduction's VIPeR descriptor
  (:class:`crossmetric.features.StripHistograms`, whole vector normalised to unit L1) as
  ``reproduce pku-sketch`` runs its descriptor methods: square root, one PCA-64 fitted on the
  training images, the registry's settings, every positive pair with one negative.

Speed: images/s and seconds per epoch of the identity sampler for in-memory arrays against
streaming from the JPEG/PNG files with ``num_workers`` DataLoader workers, and for 1 against 2
DDP processes (gloo), each a fixed number of iterations of the PKU-Sketch recipe.

Usage::

    python benchmarks/bench_deep_gsm.py                      # both datasets, 3 splits
    python benchmarks/bench_deep_gsm.py --dataset pku --splits 10 --no-speed
    python benchmarks/bench_deep_gsm.py --quick              # a smoke run (~2 min)

Prints one JSON document (with the machine's load average: timings on a shared machine are
upper bounds).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's crossmetric
from _common import emit, machine  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# ------------------------------------------------------------------------------ data
def pku_files():
    root = DATA / "pku_sketch"
    photos = sorted((root / "photo").glob("*.jpg"))
    sketches = sorted((root / "sketch").glob("*.jpg"))
    pid = np.array([int(p.name.split("_")[0]) for p in photos])
    sid = np.array([int(p.stem) for p in sketches])
    return [str(p) for p in photos], pid, [str(p) for p in sketches], sid


def viper_files():
    files = sorted((DATA / "viper" / "images").glob("*.png"))
    person = np.array([int(p.stem[:4]) for p in files])
    cam = np.array([int(p.stem[4:]) for p in files])
    a, b = cam == 1, cam == 2
    fa = [str(p) for p, k in zip(files, a, strict=True) if k]
    fb = [str(p) for p, k in zip(files, b, strict=True) if k]
    return fa, person[a], fb, person[b]


def load_images(paths, size):
    from crossmetric.deep.data import read_image

    return np.stack([read_image(p, "RGB", size) for p in paths])


def descriptors(images: np.ndarray) -> np.ndarray:
    """The reproduction's VIPeR descriptor (strip colour + LBP histograms, unit-L1 vector)."""
    from crossmetric.features import StripHistograms

    return StripHistograms(normalize="vector").fit_transform(images)


def rank_k(D: np.ndarray, probe_ids, gallery_ids) -> dict:
    from crossmetric.metrics import cmc

    curve = cmc(D, probe_ids, gallery_ids, max_rank=20)
    return {f"rank{r}": round(float(curve[r - 1]) * 100, 2) for r in (1, 5, 10, 20)}


def splits(persons, n_train, n_splits, seed=0):
    rng = np.random.RandomState(seed)
    for _ in range(n_splits):
        perm = rng.permutation(persons)
        yield np.sort(perm[:n_train]), np.sort(perm[n_train:])


# ---------------------------------------------------------------------------- methods
def deep_params(args, **kw):
    """:data:`crossmetric.reproduce.PKU_DEEPGSM` (``--max-iter`` and ``kw`` replace entries)."""
    from crossmetric.reproduce.pku import PKU_DEEPGSM

    p = {**PKU_DEEPGSM, "input_shape": args.size, "random_state": 0}
    if args.max_iter is not None:
        p["max_iter"] = args.max_iter
    p.update(kw)
    return p


def run_deep(args, Xtr, ix, Ytr, iy, Xg, ig, Yp, ip):
    from crossmetric.deep import DeepGSM

    m = DeepGSM(**deep_params(args, n_images_x=1, n_images_y=1)).fit_identities(
        Xtr, ix, Ytr, iy)
    D = m.cross_distance(Xg, Yp).T  # probes x gallery
    return {**rank_k(D, ip, ig), "train_s": round(m.train_time_, 1), "iters": m.n_iter_,
            "stop": m.stop_reason_}


def run_descriptor_methods(Ftr_x, ix, Ftr_y, iy, Fg, ig, Fp, ip, seed, skip):
    """Euclidean, GSM and CMML on the descriptor, as ``reproduce pku-sketch`` runs them.

    The square root of the histograms (Hellinger), one PCA-64 fitted on the training images
    of both cameras, the registry's GSM and CMML, and ``make_pairs`` (every positive, one
    negative each); Euclidean is the square-rooted descriptor itself.
    """
    import warnings

    from sklearn.decomposition import PCA
    from sklearn.metrics.pairwise import euclidean_distances

    from crossmetric.pairs import make_pairs
    from crossmetric.registry import make_estimator

    R = [np.sqrt(A) for A in (Ftr_x, Ftr_y, Fg, Fp)]
    pca = PCA(64, random_state=0).fit(np.r_[R[0], R[1]])
    Xtr, Ytr, Xg, Yp = (pca.transform(A) for A in R)
    pairs, y = make_pairs(ix, iy, n_negatives=1, random_state=seed)
    out = {}
    if "euclidean" not in skip:
        out["Euclidean"] = rank_k(euclidean_distances(R[3], R[2], squared=True), ip, ig)
    for name in ("GSM", "CMML"):
        if name.lower() in skip:
            continue
        est = make_estimator(name.lower()).set_params(random_state=seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est.set_params(preprocessor=(Xtr, Ytr)).fit(pairs, y)
        D = est.cross_distance(Xg, Yp).T
        out[name] = {**rank_k(D, ip, ig), "train_s": round(time.perf_counter() - t0, 1),
                     "warnings": sorted({type(x.message).__name__ for x in w})}
    return out


def pku_accuracy(args) -> dict:
    """PKU-Sketch: the rows of ``crossmetric reproduce pku-sketch`` (same splits, descriptor)."""
    from crossmetric.reproduce.pku import reproduce_pku_sketch

    methods = ["euclidean", "kcca", "gsm", "cmml", "deepgsm"]
    methods = [m for m in methods if m not in args.skip and not (m == "deepgsm"
                                                                 and "deep" in args.skip)]
    overrides = {} if args.max_iter is None else {"max_iter": args.max_iter}
    with contextlib.redirect_stdout(sys.stderr):  # progress lines: stdout is the JSON
        res = reproduce_pku_sketch(str(DATA), n_splits=args.splits, methods=methods,
                                   deepgsm_params=overrides, first_split=args.first_split,
                                   setting="legacy")
    mean = {}
    for r in res.rows:
        mean.setdefault(r["method"], {})[r["measure"]] = round(r["ours"], 2)
        if r.get("note"):
            mean[r["method"]]["note"] = r["note"]
    return {"mean": mean, "splits": res.extra["splits"],
            "per_split": res.extra.get("per_split", {}),
            "load_avg": [res.extra.get("load_avg_start"), res.extra.get("load_avg_end")],
            "torch_threads": res.extra.get("torch_threads"),
            "gallery_probe": "100 test photos / 50 test sketches (reproduce pku-sketch)"}


def viper_accuracy(args, fx, idx, fy, idy, n_train=316):
    """VIPeR: mean rank-k over splits of DeepGSM, GSM and CMML."""
    name = "viper"
    persons = np.intersect1d(idx, idy)
    size = args.size
    Xall, Yall = load_images(fx, size), load_images(fy, size)
    Fx = descriptors(Xall) if args.skip != {"gsm", "cmml"} else None
    Fy = descriptors(Yall) if Fx is not None else None
    rows = []
    for s, (tr, te) in enumerate(splits(persons, n_train, args.splits)):
        mx, my = np.isin(idx, tr), np.isin(idy, tr)
        gx, py = np.isin(idx, te), np.isin(idy, te)
        row = {"split": s}
        if "deep" not in args.skip:
            row["DeepGSM"] = run_deep(args, Xall[mx], idx[mx], Yall[my], idy[my], Xall[gx],
                                      idx[gx], Yall[py], idy[py])
        if Fx is not None:
            row.update(run_descriptor_methods(Fx[mx], idx[mx], Fy[my], idy[my], Fx[gx],
                                              idx[gx], Fy[py], idy[py], s, args.skip))
        print(f"# {name} split {s}: " + ", ".join(
            f"{k} r1={v['rank1']}" for k, v in row.items() if isinstance(v, dict)),
            file=sys.stderr, flush=True)
        rows.append(row)
    summary = {}
    for meth in ("DeepGSM", "GSM", "CMML", "Euclidean"):
        vals = [r[meth] for r in rows if meth in r]
        if vals:
            summary[meth] = {k: round(float(np.mean([v[k] for v in vals])), 2)
                             for k in ("rank1", "rank5", "rank10", "rank20", "train_s")
                             if k in vals[0]}
            summary[meth]["rank1_per_split"] = [v["rank1"] for v in vals]
    return {"splits": rows, "mean": summary,
            "gallery_probe": "gallery 316 camera-A, probes 316 camera-B"}


def speed(args, fx, idx, fy, idy):
    """Images/s: in memory vs streaming (num_workers), and 1 vs 2 DDP processes."""
    from crossmetric.deep import DeepGSM

    n_iter = args.speed_iters
    X, Y = load_images(fx, args.size), load_images(fy, args.size)
    out = {}
    p0 = deep_params(args)
    per_round = p0["n_identities"] * (p0["n_images_x"] + p0["n_images_y"])

    def timed(label, Xs, Ys, **kw):
        p = deep_params(args, max_iter=n_iter, **kw)
        m = DeepGSM(**p).fit_identities(Xs, idx, Ys, idy)
        n_ids = m.n_identities_
        epoch_rounds = -(-n_ids // min(p0["n_identities"], n_ids))
        ips = n_iter * per_round / m.train_time_
        out[label] = {"train_s": round(m.train_time_, 2), "images_per_s": round(ips, 1),
                      "s_per_epoch": round(m.train_time_ / n_iter * epoch_rounds, 2)}
        print(f"# speed {label}: {out[label]}", file=sys.stderr, flush=True)

    timed("in_memory", X, Y)
    timed(f"streaming_{args.workers}_workers", fx, fy, num_workers=args.workers)
    if not args.no_ddp:
        timed("ddp_1_process", X, Y)
        timed("ddp_2_processes", X, Y, n_processes=2)
    mem = out["in_memory"]["images_per_s"]
    out["streaming_slowdown"] = round(mem / out[f"streaming_{args.workers}_workers"]
                                      ["images_per_s"], 2)
    if not args.no_ddp:
        out["ddp_speedup"] = round(out["ddp_2_processes"]["images_per_s"]
                                   / out["ddp_1_process"]["images_per_s"], 2)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="both", choices=["pku", "viper", "both"])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--first-split", type=int, default=0,
                    help="PKU-Sketch: skip the reproduction's first splits (run a later part "
                         "of the same split sequence)")
    ap.add_argument("--max-iter", type=int, default=None,
                    help="DeepGSM rounds (default: PKU_DEEPGSM's; for smoke runs only)")
    ap.add_argument("--size", type=lambda s: tuple(int(v) for v in s.split("x")),
                    default=(160, 64), help="h x w")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per process (1: the machine is shared)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--speed-iters", type=int, default=40)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-ddp", action="store_true")
    ap.add_argument("--skip", default="", help="comma list of deep,gsm,cmml,kcca,euclidean")
    ap.add_argument("--quick", action="store_true", help="1 split, 50 rounds, small speed runs")
    args = ap.parse_args(argv)
    args.skip = {s for s in args.skip.split(",") if s}
    if args.quick:
        args.splits, args.speed_iters = 1, 10
        args.max_iter = args.max_iter or 50
    import torch

    torch.set_num_threads(args.threads)
    result = {"machine": machine(), "args": {k: (sorted(v) if isinstance(v, set) else v)
                                             for k, v in vars(args).items()}}
    t0 = time.perf_counter()
    if args.dataset in ("pku", "both"):
        result["pku_sketch"] = pku_accuracy(args)
        if not args.no_speed:
            sx, isx, px, ipx = pku_files()
            # the reproduction's domains: sketches first (x), photos second (y)
            result["pku_sketch"]["speed"] = speed(args, *_train_only(px, ipx, sx, isx, 150,
                                                                     swap=True))
    if args.dataset in ("viper", "both"):
        fx, idx, fy, idy = viper_files()
        result["viper"] = viper_accuracy(args, fx, idx, fy, idy, 316)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["load_avg_end"] = round(os.getloadavg()[0], 2)
    emit(result)


def _train_only(fx, idx, fy, idy, n_train, swap=False):
    """The training persons' files of one split (``swap``: return the second domain first)."""
    tr, _ = next(splits(np.unique(idx), n_train, 1))
    mx, my = np.isin(idx, tr), np.isin(idy, tr)
    a = ([p for p, k in zip(fx, mx, strict=True) if k], idx[mx])
    b = ([p for p, k in zip(fy, my, strict=True) if k], idy[my])
    return (*b, *a) if swap else (*a, *b)


if __name__ == "__main__":
    main()
