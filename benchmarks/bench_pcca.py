"""PCCA benchmarks: digits pair task, kernel convergence, flop efficiency.

Run: ``python benchmarks/bench_pcca.py`` -- prints JSON.

* Digits pair task: 2,000 balanced training pairs and 2,000 held-out pairs over disjoint
  samples, features scaled to [0, 1]; fit time and held-out ROC AUC of linear PCCA (k = 32) and
  kernel PCCA (chi2_rbf), next to the Euclidean distance. Target: linear AUC >= 0.95 with
  fit <= 0.5 s.
* Kernel PCCA convergence with and without the K⁻¹ preconditioner from the same start:
  iterations the preconditioned run needs to reach the plain run's objective after 500
  iterations (target <= 100, i.e. <= 1/5).
* Flop efficiency of linear PCCA: multiply-adds per objective+gradient evaluation and the rate
  achieved, next to numpy's GEMM rate on the same shapes.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit, machine  # noqa: E402
from crossmetric import PCCA, Euclidean, make_pairs  # noqa: E402
from crossmetric._solvers.descent import blas_threads  # noqa: E402
from crossmetric._solvers.logistic import (  # noqa: E402
    PairLogisticObjective,
    Tower,
    TowerProblem,
)
from crossmetric.pairs._pair_data import used_rows  # noqa: E402


def digits_task(seed: int = 0):
    d = load_digits()
    X = d.data / 16.0
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(X))
    tr, te = perm[: len(X) // 2], perm[len(X) // 2:]
    ptr, ytr = make_pairs(d.target[tr], max_positives=1000, random_state=seed)
    pte, yte = make_pairs(d.target[te], max_positives=1000, random_state=seed + 1)
    return X, tr[ptr], ytr, te[pte], yte


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def pair_task() -> dict:
    X, ptr, ytr, pte, yte = digits_task()
    res = {"n_train_pairs": len(ytr), "n_test_pairs": len(yte),
           "euclidean_auc": round(Euclidean(preprocessor=X).fit(ptr, ytr).score(pte, yte), 4)}
    for name, kw in [("pcca_linear_k32", {}), ("pcca_linear_k32_gd", {"solver": "gd"}),
                     ("pcca_chi2_rbf_k32", {"kernel": "chi2_rbf"})]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t, m = best_of(lambda kw=kw: PCCA(n_components=32, random_state=0, preprocessor=X,
                                              **kw).fit(ptr, ytr))
        res[name] = {"fit_s": round(t, 3), "n_iter": m.n_iter_,
                     "test_auc": round(m.score(pte, yte), 4)}
    return res


def kernel_convergence() -> dict:
    X, ptr, ytr, _, _ = digits_task()
    curves = {}
    for pre in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t0 = time.perf_counter()
            m = PCCA(n_components=32, kernel="chi2_rbf", solver="gd", preconditioned=pre,
                     max_iter=500, tol=0.0, random_state=0, preprocessor=X).fit(ptr, ytr)
        curves[pre] = (np.array(m.loss_curve_), time.perf_counter() - t0)
    plain, t_plain = curves[False]
    pre, t_pre = curves[True]
    target = plain[-1]
    reached = np.flatnonzero(pre <= target)
    it = int(reached[0]) + 1 if reached.size else None
    return {"plain_final_objective_500": float(target), "plain_iterations": len(plain),
            "plain_time_s": round(t_plain, 2),
            "preconditioned_objective_500": float(pre[-1]),
            "preconditioned_time_s": round(t_pre, 2),
            "preconditioned_iterations_to_reach_plain_500": it,
            "ratio": None if it is None else round(it / len(plain), 4),
            "objective_at": {str(k): [float(plain[k - 1]), float(pre[min(k, len(pre)) - 1])]
                             for k in (1, 10, 50, 100, 200, 500)}}


def flop_efficiency() -> dict:
    """Objective + gradient of linear PCCA as ``fit`` runs it (on the samples used by the pairs,
    BLAS single-threaded below SMALL_PROBLEM_FLOPS), next to a single-threaded GEMM of the
    same shape."""
    X, ptr, ytr, _, _ = digits_task()
    Xu, i, j = used_rows(X, ptr[:, 0], ptr[:, 1])
    n, d, k, p = Xu.shape[0], Xu.shape[1], 32, len(ytr)
    rng = np.random.RandomState(0)
    L = rng.randn(k, d) * 0.1
    prob = TowerProblem([Tower(Xu)], PairLogisticObjective(i, j, ytr, 3.0, n, n))
    # embedding X Lᵀ and gradient Gᵀ X: 2 · (2·n·d·k) flops; per pair ~ 8·k (difference,
    # squared norm, scaling, scatter)
    flops = 2 * (2 * n * d * k) + 8 * p * k
    reps = 300
    A, B = rng.randn(n, d), rng.randn(d, k)
    with blas_threads(Xu.size * k):
        t, _ = best_of(lambda: [prob.loss_grad([L]) for _ in range(reps)])
        tg, _ = best_of(lambda: [A @ B for _ in range(reps)])
    per_eval = t / reps
    gemm = 2 * n * d * k / (tg / reps)
    return {"shape": {"n_samples_used": n, "n_features": d, "k": k, "n_pairs": p},
            "flops_per_evaluation": flops, "seconds_per_evaluation": per_eval,
            "achieved_gflops": round(flops / per_eval / 1e9, 3),
            "numpy_gemm_gflops_same_shape_1_thread": round(gemm / 1e9, 3),
            "big_gemm_gflops_1024_all_threads": round(_big_gemm(), 2)}


def _big_gemm() -> float:
    a = np.random.rand(1024, 1024)
    t, _ = best_of(lambda: a @ a)
    return 2 * 1024 ** 3 / t / 1e9


if __name__ == "__main__":
    emit({"machine": machine(), "digits_pair_task": pair_task(),
          "kernel_pcca_convergence": kernel_convergence(), "flop_efficiency": flop_efficiency()})
