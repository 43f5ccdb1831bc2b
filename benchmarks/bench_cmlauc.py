"""CMLAUC fit time on mfeat fac ↔ pix, PCA-reduced to 200 + 200 dimensions (M is 400 × 400).

The cml-auc paper's MATLAB implementation took 101 s at dimension 200 per modality on CUFSF
(Table XI, 100 + 100 sampled pairs); target here: total fit <= 10 s with default settings.
Reports total fit time, time per iteration, the share of time spent in the per-iteration
eigendecomposition (the bottleneck the paper names) and the test AUC (sanity check).

Protocol: 1,000 random digits for training, 1,000 for testing; PCA (200 components) fitted on
each training view; training pairs from ``make_pairs`` on the digit classes (2,000 positives,
one negative per positive); test pairs likewise on the test digits (5,000 positives).

Run: ``python benchmarks/bench_cmlauc.py`` (prints JSON). ``CMLAUC`` itself runs its
iterations with single-threaded BLAS at this size (``crossmetric.auc.SINGLE_THREAD_MAX_DIM``):
on a shared, loaded machine multi-threaded OpenBLAS spins and a 400 × 400 ``eigh`` took up to
50× longer. ``fit_cpu_s`` next to ``fit_s`` shows how much of the wall time was contention.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import MFEAT_DIR, emit, machine  # noqa: E402
from crossmetric.auc import CMLAUC  # noqa: E402
from crossmetric.datasets import load_mfeat  # noqa: E402
from crossmetric.metrics import roc_auc  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    run()


def run() -> None:
    data = load_mfeat(MFEAT_DIR, views=("fac", "pix"))
    rng = np.random.RandomState(0)
    perm = rng.permutation(data.X.shape[0])
    tr, te = perm[:1000], perm[1000:]
    px = PCA(200, random_state=0).fit(data.X[tr])
    py = PCA(200, random_state=0).fit(data.Y[tr])
    X, Y = px.transform(data.X), py.transform(data.Y)
    lab = data.labels
    pairs, y = make_pairs(lab[tr], lab[tr], n_negatives=1, max_positives=2000, random_state=0)
    pt, yt = make_pairs(lab[te], lab[te], n_negatives=1, max_positives=5000, random_state=1)

    # one plain 400 x 400 eigendecomposition, for scale
    A = rng.randn(400, 400)
    A = (A + A.T) / 2
    with threadpool_limits(limits=1, user_api="blas"):
        np.linalg.eigh(A)
        t0 = time.perf_counter()
        for _ in range(10):
            np.linalg.eigh(A)
        eig_ms = (time.perf_counter() - t0) / 10 * 1e3

    results = {"machine": machine(), "dims": [200, 200],
               "n_train_pairs": int(y.size), "single_eigh_400_ms": round(eig_ms, 2), "runs": {}}
    for name, params in [("CML_AUC", {}), ("CML_pAUC", {"fpr_range": (0.0, 0.1)})]:
        model = CMLAUC(random_state=0, preprocessor=(X[tr], Y[tr]), **params)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            t0, c0 = time.perf_counter(), time.process_time()
            model.fit(pairs, y)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        model.set_params(preprocessor=(X[te], Y[te]))
        results["runs"][name] = {
            "fit_s": round(wall, 3),
            "fit_cpu_s": round(cpu, 3),
            "n_iter": model.n_iter_,
            "ms_per_iter": round(wall / model.n_iter_ * 1e3, 2),
            "eig_s": round(model.eig_time_, 3),
            "eig_share": round(model.eig_time_ / wall, 3),
            "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
            "final_objective": round(model.loss_curve_[-1], 4),
            "test_auc": round(roc_auc(yt, model.pair_score(pt)), 4),
            "target_fit_s": 10.0,
        }
    results["machine_after"] = machine()
    emit(results)


if __name__ == "__main__":
    main()
