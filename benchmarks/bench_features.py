"""Descriptors on all 1,264 VIPeR images: StripHistograms (target: a few seconds) and HOG.

Times (best of ``--repeat``) the loader, :class:`crossmetric.features.StripHistograms` with and
without LBP and :class:`crossmetric.features.HOG`, single-threaded, and records the machine
load (timings on a shared machine are upper bounds).

Usage: ``python benchmarks/bench_features.py [--repeat 3]`` -- prints JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import REPO, emit, machine, peak_rss_mb  # noqa: E402


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from crossmetric.datasets import load_viper
    from crossmetric.features import HOG, StripHistograms

    data = REPO.parent / "shared" / "data"
    if not (data / "viper").is_dir():
        emit({"skipped": f"no VIPeR data under {data}"})
        return
    out = {"machine_before": machine()}
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        b = load_viper(data)
        out["load_viper_s"] = round(time.perf_counter() - t0, 3)
        imgs = b.images
        out["n_images"] = int(imgs.shape[0])
        for name, est in [("strip_histograms", StripHistograms()),
                          ("strip_histograms_no_lbp", StripHistograms(lbp=False)),
                          ("hog_rgb", HOG())]:
            est.fit(imgs[:1])
            out[f"{name}_s"] = _best(lambda est=est: est.transform(imgs), args.repeat)
            out[f"{name}_features"] = int(est.n_features_out_)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    out["machine_after"] = machine()
    emit(out)


if __name__ == "__main__":
    main()
