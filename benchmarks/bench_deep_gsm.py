"""DeepGSM on real cross-domain images: PKU-Sketch (sketch ↔ photo) and VIPeR (camera A ↔ B).

Protocols
---------
* PKU-Sketch: 200 persons, 2 RGB photos and (for 197) one sketch each; per split 150 persons
  train, 50 test; the test sketches are probes against the 100 test photos (Pang et al.).
* VIPeR: 632 persons, one image per camera; per split 316 train, 316 test; camera-A images are
  probes against the camera-B gallery (the domains are the cameras).

Methods: DeepGSM on the images (RGB, resized to ``--size``, default 160 × 64 = h × w, "reid"
augmentation, a time budget per split), and on fixed descriptors GSM and CMML. The descriptor
(this script only, until the library's descriptor module lands) is HSV colour histograms of 6
horizontal stripes (8 bins per channel) plus HOG of the grey image, square-rooted and
standardised on the training images.

Speed: images/s and seconds per epoch of the identity sampler for in-memory arrays against
streaming from the JPEG/PNG files with ``num_workers`` DataLoader workers, and for 1 against 2
DDP processes (gloo), each a fixed number of iterations.

Usage::

    python benchmarks/bench_deep_gsm.py                      # both datasets, 3 splits
    python benchmarks/bench_deep_gsm.py --dataset pku --splits 10 --minutes 10
    python benchmarks/bench_deep_gsm.py --quick              # a smoke run (~2 min)

Prints one JSON document (with the machine's load average: timings on a shared machine are
upper bounds).
"""

from __future__ import annotations

import argparse
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
    """HSV histograms of 6 stripes (8 bins / channel) + HOG of the grey image, square-rooted."""
    from skimage.color import rgb2gray, rgb2hsv
    from skimage.feature import hog

    out = []
    for im in images:
        hsv = rgb2hsv(im)
        hist = []
        for stripe in np.array_split(hsv, 6, axis=0):
            for c in range(3):
                h, _ = np.histogram(stripe[..., c], bins=8, range=(0, 1))
                hist.append(h / max(1, stripe[..., c].size))
        g = hog(rgb2gray(im), orientations=9, pixels_per_cell=(16, 16), cells_per_block=(2, 2))
        out.append(np.r_[np.concatenate(hist), g])
    return np.sqrt(np.asarray(out))


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
    p = dict(input_shape=args.size, hidden_units=args.hidden, n_identities=args.k,
             n_images_x=args.ox, n_images_y=1, max_iter=args.max_iter,
             max_time=args.minutes * 60, augment="reid", learning_rate=args.lr,
             optimizer=args.optimizer,
             lr_schedule="cosine", device="cpu", tol=None, random_state=0)
    p.update(kw)
    return p


def run_deep(args, Xtr, ix, Ytr, iy, Xg, ig, Yp, ip):
    from crossmetric.deep import DeepGSM

    m = DeepGSM(**deep_params(args)).fit_identities(Xtr, ix, Ytr, iy)
    D = m.cross_distance(Xg, Yp).T  # probes x gallery
    return {**rank_k(D, ip, ig), "train_s": round(m.train_time_, 1), "iters": m.n_iter_,
            "stop": m.stop_reason_}


def _pairs(ix, iy, n_neg, rng):
    pos = np.argwhere(ix[:, None] == iy[None, :])
    a = np.repeat(pos[:, 0], n_neg)
    b = rng.randint(0, iy.size, a.size)
    keep = ix[a] != iy[b]
    neg = np.c_[a[keep], b[keep]]
    pairs = np.r_[pos, neg]
    return pairs, np.r_[np.ones(len(pos), int), -np.ones(len(neg), int)]


def run_descriptor_methods(Ftr_x, ix, Ftr_y, iy, Fg, ig, Fp, ip, seed, skip):
    import warnings

    from sklearn.preprocessing import StandardScaler

    from crossmetric import CMML, GSM

    sx, sy = StandardScaler().fit(Ftr_x), StandardScaler().fit(Ftr_y)
    Xtr, Ytr, Xg, Yp = sx.transform(Ftr_x), sy.transform(Ftr_y), sx.transform(Fg), \
        sy.transform(Fp)
    pairs, y = _pairs(ix, iy, 10, np.random.RandomState(seed))
    out = {}
    for name, est in (("GSM", GSM(n_components=32, random_state=seed)),
                      ("CMML", CMML(n_components=32, random_state=seed))):
        if name.lower() in skip:
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est.set_params(preprocessor=(Xtr, Ytr)).fit(pairs, y)
        D = est.cross_distance(Xg, Yp).T
        out[name] = {**rank_k(D, ip, ig), "train_s": round(time.perf_counter() - t0, 1),
                     "warnings": sorted({type(x.message).__name__ for x in w})}
    return out


def accuracy(args, name, fx, idx, fy, idy, n_train):
    """Mean rank-k over splits of DeepGSM, GSM and CMML."""
    persons = np.intersect1d(idx, idy) if name == "viper" else np.unique(idx)
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
    for meth in ("DeepGSM", "GSM", "CMML"):
        vals = [r[meth] for r in rows if meth in r]
        if vals:
            summary[meth] = {k: round(float(np.mean([v[k] for v in vals])), 2)
                             for k in ("rank1", "rank5", "rank10", "rank20", "train_s")}
            summary[meth]["rank1_per_split"] = [v["rank1"] for v in vals]
    return {"splits": rows, "mean": summary,
            "gallery_probe": ("100 test photos / 50 test sketches" if name == "pku"
                              else "316 camera-B / 316 camera-A")}


def speed(args, fx, idx, fy, idy):
    """Images/s: in memory vs streaming (num_workers), and 1 vs 2 DDP processes."""
    from crossmetric.deep import DeepGSM

    n_iter = args.speed_iters
    X, Y = load_images(fx, args.size), load_images(fy, args.size)
    out = {}
    per_round = args.k * (args.ox + 1)

    def timed(label, Xs, Ys, **kw):
        p = deep_params(args, max_iter=n_iter, max_time=None, **kw)
        m = DeepGSM(**p).fit_identities(Xs, idx, Ys, idy)
        n_ids = m.n_identities_
        epoch_rounds = -(-n_ids // min(args.k, n_ids))
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
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="DeepGSM training budget per split (max_time)")
    ap.add_argument("--max-iter", type=int, default=3000,
                    help="rounds (the cosine schedule spans them; --minutes caps the time)")
    ap.add_argument("--size", type=lambda s: tuple(int(v) for v in s.split("x")),
                    default=(160, 64), help="h x w")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--k", type=int, default=30, help="identities per round")
    ap.add_argument("--ox", type=int, default=2, help="first-domain images per identity")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", default="adam",
                    help="adam (1e-3) learnt PKU far faster than sgd (0.05) in a 400-round probe")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per process (1: the machine is shared)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--speed-iters", type=int, default=40)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-ddp", action="store_true")
    ap.add_argument("--skip", default="", help="comma list of deep,gsm,cmml")
    ap.add_argument("--quick", action="store_true", help="1 split, 1 minute, small speed runs")
    args = ap.parse_args(argv)
    args.skip = {s for s in args.skip.split(",") if s}
    if args.quick:
        args.splits, args.minutes, args.speed_iters = 1, 1.0, 10
    import torch

    torch.set_num_threads(args.threads)
    result = {"machine": machine(), "args": {k: (sorted(v) if isinstance(v, set) else v)
                                             for k, v in vars(args).items()}}
    t0 = time.perf_counter()
    if args.dataset in ("pku", "both"):
        fx, idx, fy, idy = pku_files()
        result["pku_sketch"] = accuracy(args, "pku", fx, idx, fy, idy, 150)
        if not args.no_speed:
            result["pku_sketch"]["speed"] = speed(args, *_train_only(fx, idx, fy, idy, 150))
    if args.dataset in ("viper", "both"):
        fx, idx, fy, idy = viper_files()
        result["viper"] = accuracy(args, "viper", fx, idx, fy, idy, 316)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["load_avg_end"] = round(os.getloadavg()[0], 2)
    emit(result)


def _train_only(fx, idx, fy, idy, n_train):
    tr, _ = next(splits(np.unique(idx), n_train, 1))
    mx, my = np.isin(idx, tr), np.isin(idy, tr)
    return ([p for p, k in zip(fx, mx, strict=True) if k], idx[mx],
            [p for p, k in zip(fy, my, strict=True) if k], idy[my])


if __name__ == "__main__":
    main()
