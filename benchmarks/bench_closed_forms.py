"""Closed forms at d ≫ n (issue 24 item 2): each linear baseline fitted at 100 × 3,564 per view
in the span of the samples (the default) and in feature space (the solve before), in one run.

Run: ``python benchmarks/bench_closed_forms.py [--only CCA,MvDA] [--d 3564] [--no-full]``
-- prints JSON: per learner the seconds of both solves, their ratio, and how far apart the two
models are (largest relative difference of ``cross_distance`` on held-out samples; of the
basis for the PCA steps). The full solves take minutes in all (O(d³) each).

Data (synthetic, shaped like the HOG descriptors of the issue: 50 training persons, two
samples per person and view, 3,564 features): per person a random non-negative template per
view; each sample adds non-negative noise, then HOG's block normalisation (L2-Hys: per 36-bin
block, L2-normalise, clip at 0.2, L2-normalise again). Pairs: every positive pair of the
training persons and 5 negatives per positive.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit, machine  # noqa: E402
from crossmetric import (  # noqa: E402
    CCA,
    CDFE,
    CSR,
    KISSME,
    PLS,
    MvDA,
    baselines,
    make_pairs,
)
from crossmetric.baselines import pca_basis  # noqa: E402
from crossmetric.protocols import CCAProjection, _pca_fit_views  # noqa: E402


def hog_like(n_persons: int, per: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``(n_persons · per) × d`` block-normalised non-negative descriptors and their labels."""
    labels = np.repeat(np.arange(n_persons), per)
    V = rng.gamma(0.5, size=(n_persons, d))[labels] + rng.gamma(0.5, size=(labels.size, d))
    B = V.reshape(labels.size, -1, 36)
    for _ in range(2):                                   # L2-Hys
        B = B / np.linalg.norm(B, axis=2, keepdims=True)
        B = np.minimum(B, 0.2)
    B = B / np.linalg.norm(B, axis=2, keepdims=True)
    return B.reshape(labels.size, d), labels


LEARNERS = {
    "CCA": lambda: CCA(10),
    # scikit-learn's NIPALS; with both views wider than the pairs every canonical correlation
    # is 1, so only the first component is determined (the others follow round-off)
    "CCA-nipals (1 component)": lambda: CCA(1, solver="nipals"),
    "PLS": lambda: PLS(10),
    "MvDA": lambda: MvDA(10),
    "CDFE": lambda: CDFE(10),
    "CSR": lambda: CSR(),
    "KISSME": lambda: KISSME(),
}


def _timed(flag: bool, fn):
    baselines._REDUCE_TO_SPAN = flag
    try:
        t0 = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t0
    finally:
        baselines._REDUCE_TO_SPAN = True


def _rel(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(b).max(), 1e-300))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=3564, help="features per view (multiple of 36)")
    ap.add_argument("--persons", type=int, default=50)
    ap.add_argument("--only", default="", help="comma-separated subset of the learners")
    ap.add_argument("--no-full", action="store_true", help="time the span solves only")
    args = ap.parse_args(argv)
    rng = np.random.RandomState(0)
    X, lab = hog_like(args.persons, 2, args.d, rng)
    Y, _ = hog_like(args.persons, 2, args.d, rng)
    Xt, _ = hog_like(10, 1, args.d, rng)
    Yt, _ = hog_like(10, 1, args.d, rng)
    pairs, y = make_pairs(lab, lab, n_negatives=5, random_state=0)
    only = [s for s in args.only.split(",") if s]
    tasks = {name: make for name, make in LEARNERS.items() if not only or name in only}
    out = {"machine": machine(), "n_per_view": X.shape[0], "n_features": args.d,
           "n_pairs": int(y.size), "n_positive": int(np.sum(y == 1)), "learners": {}}

    def record(name, fast, full, t_fast, t_full, diff):
        row = {"span_s": round(t_fast, 3)}
        if full is not None:
            row.update(full_s=round(t_full, 3), speedup=round(t_full / max(t_fast, 1e-9), 1),
                       max_rel_diff=diff(fast, full))
        out["learners"][name] = row
        print(name, row, file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in tasks.items():
            fit = lambda make=make: make().set_params(preprocessor=(X, Y)).fit(pairs, y)  # noqa: E731
            fast, t_fast = _timed(True, fit)
            full, t_full = (None, 0.0) if args.no_full else _timed(False, fit)
            dist = lambda m: m.cross_distance(Xt, Yt)  # noqa: E731
            record(name, fast, full, t_fast, t_full, lambda a, b, f=dist: _rel(f(a), f(b)))
        # the PCA steps: DML-eig's / KISSME's (pca_basis) and the protocols' view step; the
        # "-C" view step is CCAProjection, i.e. cca_directions (the closed form of CCA)
        Z = np.vstack([X, Y])
        i, j = np.arange(X.shape[0]), np.arange(X.shape[0]) + X.shape[0]
        steps = {
            "pca_basis (DML-eig, KISSME; 64 components)":
                (lambda: pca_basis(Z, i, j, 64)[1],
                 lambda a, b: _rel(np.abs(a @ b.T), np.eye(a.shape[0]))),
            "_pca_fit_views (protocols' view step; 64 components)":
                (lambda: _pca_fit_views(X, Y, np.c_[i, i], 64)[0],
                 lambda a, b: _rel(np.abs(a), np.abs(b))),
            "CCAProjection (-C views; 32 components)":
                (lambda: CCAProjection(32).fit(X[pairs[y == 1, 0]], Y[pairs[y == 1, 1]])
                 .transform(Xt, Yt)[0], lambda a, b: _rel(np.abs(a), np.abs(b))),
        }
        for name, (fn, diff) in steps.items():
            if only and name.split()[0] not in only:
                continue
            fast, t_fast = _timed(True, fn)
            full, t_full = (None, 0.0) if args.no_full else _timed(False, fn)
            record(name, fast, full, t_fast, t_full, diff)
    out["machine_after"] = machine()
    return out


if __name__ == "__main__":
    emit(main())
