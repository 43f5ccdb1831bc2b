"""knn_accuracy (precision@1, R-precision, MAP@R, mAP) on 10,000 x 10,000 embeddings, blockwise.

Prints JSON: seconds, peak RSS (MB) and the size a dense float64 distance matrix would take.
Run: python benchmarks/bench_knn_accuracy.py
"""

import json
import os
import resource
import time

import numpy as np

from crossmetric.metrics.knn import knn_accuracy


def main(n: int = 10_000, dim: int = 32) -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 500, n)
    centers = rng.standard_normal((500, dim))
    Q = centers[labels] + rng.standard_normal((n, dim))
    t0 = time.perf_counter()
    acc = knn_accuracy(Q, Q, labels, labels, same_set=True)
    sec = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"n": n, "dim": dim, "seconds": round(sec, 2), "peak_rss_mb": round(peak),
                      "dense_matrix_mb": round(n * n * 8 / 2**20),
                      "load": os.getloadavg()[0], **acc}, indent=1))


if __name__ == "__main__":
    main()
