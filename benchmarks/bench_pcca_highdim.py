"""PCCA in high dimension: n = 2,000 samples, d = 10,000 features, 10,000 pairs,
k = 40. Target: peak RSS < 1.5 GB, never a d × d matrix.

Run: ``python benchmarks/bench_pcca_highdim.py`` -- prints JSON (fit time, iterations,
peak RSS of the whole process as reported by the kernel, ru_maxrss).

The data are synthetic: 100 identities whose samples share a random 50-d latent code, embedded
in 10,000 dimensions with isotropic noise (a stand-in for high-dimensional descriptors).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit, machine, peak_rss_mb  # noqa: E402
from crossmetric import PCCA, make_pairs  # noqa: E402


def main() -> dict:
    n, d, k, n_id = 2000, 10_000, 40, 100
    rng = np.random.RandomState(0)
    labels = rng.randint(0, n_id, n)
    codes = rng.randn(n_id, 50)
    basis = rng.randn(50, d) / np.sqrt(50)
    X = codes[labels] @ basis + 1.5 * rng.randn(n, d)
    pairs, y = make_pairs(labels, max_positives=5000, random_state=0)
    rss_data = peak_rss_mb()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        model = PCCA(n_components=k, max_iter=300, random_state=0, preprocessor=X).fit(pairs, y)
        fit_s = time.perf_counter() - t0
    return {"machine": machine(), "n_samples": n, "n_features": d, "n_pairs": len(y),
            "n_components": k, "fit_s": round(fit_s, 2), "n_iter": model.n_iter_,
            "train_auc": round(model.score(pairs, y), 4),
            "data_bytes_mb": round(X.nbytes / 2 ** 20, 1),
            "peak_rss_after_data_mb": round(rss_data, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "d_by_d_matrix_mb_avoided": round(d * d * 8 / 2 ** 20, 1)}


if __name__ == "__main__":
    emit(main())
