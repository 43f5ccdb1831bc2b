"""CMLAUC: fit time on mfeat fac ↔ pix (PCA 200 + 200) and convergence on fou ↔ pix (PCA 32).

Part 1 (``--part speed``), M is 400 × 400:

The cml-auc paper's MATLAB implementation took 101 s at dimension 200 per modality on CUFSF
(Table XI, 100 + 100 sampled pairs); target here: total fit <= 10 s with default settings.
Reports total fit time, time per iteration, the share of time spent in the per-iteration
eigendecomposition (the bottleneck the paper names) and the test AUC (sanity check).

Protocol: 1,000 random digits for training, 1,000 for testing; PCA (200 components) fitted on
each training view; training pairs from ``make_pairs`` on the digit classes (2,000 positives,
one negative per positive); test pairs likewise on the test digits (5,000 positives).

Part 2 (``--part convergence``): mfeat fou ↔ pix, 5 verification splits with
disjoint objects (``crossmetric.protocols.verification_splits``, 2,000 positive + 2,000 negative
training pairs, 1,000 + 1,000 test pairs), each view reduced by PCA to 32 dimensions on the
training rows; ``CMLAUC()`` with its defaults (CML_AUC) and ``fpr_range=(0, 0.1)`` (CML_pAUC).
Target: CML_AUC held-out AUC >= 0.92 within the default ``max_iter``, no ConvergenceWarning.

Run: ``python benchmarks/bench_cmlauc.py [--part speed|convergence|all]`` (prints JSON).
``CMLAUC`` itself runs its iterations with single-threaded BLAS at this size
(``crossmetric.learners.auc.SINGLE_THREAD_MAX_DIM``): on a shared, loaded machine multi-threaded
OpenBLAS spins and a 400 × 400 ``eigh`` took up to 50× longer. ``fit_cpu_s`` next to ``fit_s``
shows how much of the wall time was contention.
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
from crossmetric.datasets import load_mfeat  # noqa: E402
from crossmetric.learners.auc import CMLAUC  # noqa: E402
from crossmetric.metrics import roc_auc  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("speed", "convergence", "all"), default="all")
    args = parser.parse_args()
    out = {"machine": machine()}
    if args.part in ("convergence", "all"):
        out["convergence"] = run_convergence()
    if args.part in ("speed", "all"):
        out["speed"] = run()
    out["machine_after"] = machine()
    emit(out)


def run_convergence(n_splits: int = 5) -> dict:
    """CML_AUC / CML_pAUC with default settings on mfeat fou ↔ pix, PCA 32, disjoint objects."""
    from crossmetric.protocols import verification_splits
    from crossmetric.protocols.views import _pca_views

    data = load_mfeat(MFEAT_DIR, views=("fou", "pix"))
    splits = verification_splits(data.labels, n_splits, random_state=0)
    runs = {}
    for name, params in [("CML_AUC", {}), ("CML_pAUC", {"fpr_range": (0.0, 0.1)})]:
        rows = []
        for sp in splits:
            X, Y = _pca_views(data.X, data.Y, sp, 32)
            model = CMLAUC(random_state=sp.seed, preprocessor=(X, Y), **params)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                t0 = time.perf_counter()
                model.fit(sp.train_pairs, sp.train_y)
                wall = time.perf_counter() - t0
            rows.append({
                "test_auc": roc_auc(sp.test_y, -model.pair_distance(sp.test_pairs)),
                "n_iter": model.n_iter_, "fit_s": wall, "objective": model.objective_,
                "warned": any(issubclass(w.category, ConvergenceWarning) for w in caught)})
        auc = np.array([r["test_auc"] for r in rows])
        runs[name] = {"test_auc_mean": round(float(auc.mean()), 4),
                      "test_auc_std": round(float(auc.std(ddof=1)), 4),
                      "n_iter": [r["n_iter"] for r in rows],
                      "convergence_warnings": sum(r["warned"] for r in rows),
                      "fit_s_mean": round(float(np.mean([r["fit_s"] for r in rows])), 3),
                      "max_iter": model.max_iter}
    runs["target"] = "CML_AUC test_auc_mean >= 0.92 and convergence_warnings == 0"
    runs["target_met"] = bool(runs["CML_AUC"]["test_auc_mean"] >= 0.92
                              and runs["CML_AUC"]["convergence_warnings"] == 0)
    return runs


def run() -> dict:
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

    results = {"dims": [200, 200],
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
            "final_objective": round(model.objective_, 4),
            "test_auc": round(roc_auc(yt, model.pair_score(pt)), 4),
            "target_fit_s": 10.0,
        }
    return results


if __name__ == "__main__":
    main()
