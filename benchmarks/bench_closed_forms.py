"""Closed forms at d ≫ n: each linear baseline fitted at 100 × 3,564 per view
in the span of the samples (the default) and in feature space (the solve before), in one run.

Run: ``python benchmarks/bench_closed_forms.py [--only CCA,MvDA] [--d 3564] [--full-timeout S]``
-- prints JSON: per task the seconds of both solves, their ratio, the 1-min load average, and
how far apart the two models are (largest relative difference of ``cross_distance`` on held-out
samples; for the PCA steps of the variance their components capture, for the CCA step of the
cross products of the projected held-out samples).
The feature-space solves are O(d³) and take minutes each on a busy machine: each runs in a
forked process stopped after ``--full-timeout`` seconds (the row then says ``"> S"``).

Data (synthetic, shaped like the HOG descriptors of the issue: 50 training persons, two
samples per person and view, 3,564 features): per person a random non-negative template per
view; each sample adds non-negative noise, then HOG's block normalisation (L2-Hys: per 36-bin
block, L2-normalise, clip at 0.2, L2-normalise again). Pairs: every positive pair of the
training persons and 5 negatives per positive.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit, machine  # noqa: E402
from crossmetric import CCA, CDFE, CSR, KISSME, PLS, MvDA, make_pairs
from crossmetric._solvers import linalg
from crossmetric._solvers.linalg import pca_basis  # noqa: E402
from crossmetric.protocols import CCAProjection  # noqa: E402
from crossmetric.protocols.views import _pca_fit_views  # noqa: E402


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
    """``(fn(), seconds)`` with the span reduction on (``flag``) or off."""
    linalg._REDUCE_TO_SPAN = flag
    try:
        t0 = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t0
    finally:
        linalg._REDUCE_TO_SPAN = True


def _child(conn, argv, name) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conn.send(_timed(False, _setup(_parse(argv))[name][0]))
    conn.close()


def _timed_full(argv, name: str, timeout: float):
    """:func:`_timed` of the feature-space solve of task ``name`` in a fresh (spawned) process,
    ended after ``timeout`` seconds (the O(d³) solves take minutes on a busy machine):
    ``(None, None)`` then. Spawned, not forked: a child forked after scikit-learn's OpenMP
    neighbour search (CDFE) hangs in GNU OpenMP."""
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, argv, name))
    proc.start()
    send.close()
    got = recv.poll(timeout)
    out = recv.recv() if got else (None, None)
    if not got:
        proc.terminate()
    proc.join()
    return out


def _cross_products(F) -> np.ndarray:
    """``F_x F_yᵀ``: free of the rotation that tied canonical correlations leave in each view."""
    return F[0] @ F[1].T


def _rel(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(b).max(), 1e-300))


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=3564, help="features per view (multiple of 36)")
    ap.add_argument("--persons", type=int, default=50)
    ap.add_argument("--only", default="", help="comma-separated subset of the tasks (first word)")
    ap.add_argument("--full-timeout", type=float, default=600.0,
                    help="seconds after which a feature-space solve is stopped (0: not run)")
    return ap.parse_args(argv)


def _setup(args) -> dict:
    """The data (seeded) and the tasks: name -> (function, what the two solves must agree on)."""
    rng = np.random.RandomState(0)
    X, lab = hog_like(args.persons, 2, args.d, rng)
    Y, _ = hog_like(args.persons, 2, args.d, rng)
    Xt, _ = hog_like(10, 1, args.d, rng)
    Yt, _ = hog_like(10, 1, args.d, rng)
    pairs, y = make_pairs(lab, lab, n_negatives=5, random_state=0)
    i, j = np.arange(X.shape[0]), np.arange(X.shape[0]) + X.shape[0]
    Z = np.vstack([X, Y])

    def learner(make):
        """Fit, then the held-out ``cross_distance`` (what the two solves must agree on)."""
        return lambda: make().set_params(preprocessor=(X, Y)).fit(pairs, y).cross_distance(Xt, Yt)

    # each task returns what the two solves must agree on: distances, the PCA objective or
    # the cross products of the CCA projections
    tasks = {name: (learner(make), (X, y)) for name, make in LEARNERS.items()}
    tasks.update({
        # DML-eig's and KISSME's PCA step, and the protocols' view step: the variance the
        # components capture (the objective; scikit-learn's randomized SVD, which the full
        # path ran at these shapes, approximates it, and its trailing components -- of nearly
        # tied variances -- differ from the exact ones)
        "pca_basis (64 components)": (
            lambda: np.sum(((Z - Z.mean(axis=0)) @ pca_basis(Z, i, j, 64)[1].T) ** 2), (X, y)),
        "_pca_fit_views (64 components)": (
            lambda: np.sum(_pca_fit_views(X, Y, np.c_[i, i], 64)[0] ** 2), (X, y)),
        # the "-C" views: cca_directions, the closed form of CCA
        "CCAProjection (32 components)": (lambda: _cross_products(
            CCAProjection(32).fit(X[pairs[y == 1, 0]], Y[pairs[y == 1, 1]]).transform(Xt, Yt)),
            (X, y)),
    })
    return tasks


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse(argv)
    tasks = _setup(args)
    X, y = next(iter(tasks.values()))[1]
    only = [s for s in args.only.split(",") if s]
    out = {"machine": machine(), "n_per_view": X.shape[0], "n_features": args.d,
           "n_pairs": int(y.size), "n_positive": int(np.sum(y == 1)),
           "full_timeout_s": args.full_timeout, "tasks": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (fn, _) in tasks.items():
            if only and name.split()[0] not in only:
                continue
            fast, t_fast = _timed(True, fn)
            row = {"span_s": round(t_fast, 3)}
            if args.full_timeout > 0:
                full, t_full = _timed_full(argv, name, args.full_timeout)
                if full is None:
                    row.update(full_s=f"> {args.full_timeout:g}",
                               speedup=f"> {args.full_timeout / t_fast:.0f}")
                else:
                    row.update(full_s=round(t_full, 3), speedup=round(t_full / t_fast, 1),
                               max_rel_diff=_rel(fast, full))
            row["load_avg_1min"] = round(os.getloadavg()[0], 2)
            out["tasks"][name] = row
            print(name, row, file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    emit(main())
