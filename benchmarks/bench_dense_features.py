"""The papers' descriptors at the papers' sizes: time per image, dimensions, and a sanity check.

* Time per image (best of ``--repeat``, one thread, one process) and output size of
  :class:`~crossmetric.features.DenseSIFT` (CML-AUC: 160 × 160 faces, 3 scales),
  :class:`~crossmetric.features.LBPGrid` (CMML: uniform LTP, 10 × 8 cells = 9,440 features; and
  plain LBP), :class:`~crossmetric.features.PatchColorSIFT` (GSM / Zhao et al.: 128 × 48
  pedestrians), :class:`~crossmetric.features.LOMO` (Liao et al., same pedestrians, with and
  without Retinex) and, for reference, ``HOG`` and ``StripHistograms``, on real CUFS and CUHK01
  images.
* Sanity check on CUFS (the literature's split: PCA fitted on the 180 training persons' photos
  and sketches, tested on the 238 others): rank-1 of sketch → photo matching by Euclidean
  distance, for each face descriptor raw and after PCA. No metric learning: only says whether
  the descriptors carry identity across the modality gap. LBP / LTP histograms are compared
  by the Euclidean distance of their square roots (Hellinger).

Faces: the 250 × 200 CUFS images cropped to rows 60-219, columns 20-179 (160 × 160, forehead to
chin; the images are aligned), grey.

Usage: ``python benchmarks/bench_dense_features.py [--repeat 3] [--pca 100,300]`` -- prints JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import REPO, emit, machine, peak_rss_mb  # noqa: E402

FACE_CROP = (slice(60, 220), slice(20, 180))


def _best_per_image(est, images, repeat: int) -> float:
    est.fit(images[:1])
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        est.transform(images)
        best = min(best, time.perf_counter() - t0)
    return round(1000 * best / len(images), 3)  # ms per image


def _rank1(est, pcas, train, test, sqrt=False) -> dict:
    from sklearn.decomposition import PCA
    from sklearn.metrics import euclidean_distances

    from crossmetric.metrics import rank_accuracy

    est.fit(train.images[:1])
    Xtr, Xte = est.transform(train.images), est.transform(test.images)
    if sqrt:  # histograms: Euclidean on square roots = Hellinger distance
        Xtr, Xte = np.sqrt(Xtr), np.sqrt(Xte)
    sk, ph = test.domains == "sketch", test.domains == "photo"
    out = {"features": int(Xte.shape[1])}
    views = [("raw", Xte[sk], Xte[ph])]
    for k in pcas:
        pca = PCA(k, random_state=0).fit(Xtr)
        views.append((f"pca{k}", pca.transform(Xte[sk]), pca.transform(Xte[ph])))
    for name, A, B in views:
        D = euclidean_distances(A, B)
        out[f"rank1_{name}"] = round(100 * rank_accuracy(D, test.ids[sk], test.ids[ph]), 2)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pca", default="100,300", help="PCA sizes, comma-separated")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from crossmetric.datasets import load_cufs, load_cuhk01
    from crossmetric.features import HOG, StripHistograms
    from crossmetric.features._dense_sift import DenseSIFT
    from crossmetric.features._local_patterns import LBPGrid
    from crossmetric.features._lomo import LOMO
    from crossmetric.features._patch_color_sift import PatchColorSIFT

    data = REPO.parent / "shared" / "data"
    if not (data / "cufs").is_dir() or not (data / "cuhk01").is_dir():
        emit({"skipped": f"no CUFS / CUHK01 data under {data}"})
        return
    import cv2

    cv2.setNumThreads(1)
    out = {"machine_before": machine()}
    t0 = time.perf_counter()
    train, test = (load_cufs(data, s, color="gray") for s in ("train", "test"))
    for b in (train, test):
        b.images = np.ascontiguousarray(b.images[:, FACE_CROP[0], FACE_CROP[1]])
    people = load_cuhk01(data, size=(48, 128)).images[:400]
    out["load_s"] = round(time.perf_counter() - t0, 2)
    faces = test.images[:100]
    face_descriptors = {
        "dense_sift": DenseSIFT(),
        "ltp_10x8": LBPGrid(grid=(10, 8), threshold=5),
        "lbp_10x8_r123": LBPGrid(grid=(10, 8), radii=(1, 2, 3)),
        "hog_16px": HOG(pixels_per_cell=(16, 16)),
    }
    timing = {}
    with threadpool_limits(limits=1):
        for name, est in face_descriptors.items():
            ms = _best_per_image(est, faces, args.repeat)
            timing[name] = {"image": "160x160 grey", "ms_per_image": ms,
                            "features": int(est.n_features_out_)}
        for name, est in [("patch_color_sift", PatchColorSIFT()),
                          ("patch_color_only", PatchColorSIFT(sift=False)),
                          ("lomo", LOMO()), ("lomo_retinex", LOMO(retinex=True)),
                          ("strip_histograms", StripHistograms())]:
            ms = _best_per_image(est, people[:100], args.repeat)
            timing[name] = {"image": "128x48 RGB", "ms_per_image": ms,
                            "features": int(est.n_features_out_)}
        out["timing"] = timing
        t0 = time.perf_counter()
        pcas = [int(k) for k in args.pca.split(",") if k]
        out["cufs_sketch_to_photo"] = {
            name: _rank1(est, pcas, train, test, sqrt=name.startswith(("ltp", "lbp")))
            for name, est in face_descriptors.items()}
        out["cufs_sanity_s"] = round(time.perf_counter() - t0, 1)
    out["cufs_test_persons"] = int(np.unique(test.ids).size)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    out["machine_after"] = machine()
    emit(out)


if __name__ == "__main__":
    main()
