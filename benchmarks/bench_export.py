"""Exported towers against the library: onnxruntime vs ``transform_x`` on the same rows.

For a linear tower (LDML, 64 → 32), kernel towers (PCCA with an exact rbf / chi2_rbf kernel
on 400 support samples, and rbf Nyström with 100 landmarks) and CLML (4 local maps), fitted on
digits: the graph's size on disk, the largest absolute difference from ``transform_x`` and the
seconds per call of each (median of 5) on ``--n-rows`` float32 rows, with one onnxruntime
thread and one BLAS thread.

Run: ``python benchmarks/bench_export.py [--n-rows 5000]``; prints a JSON list.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import crossmetric  # noqa: E402
from crossmetric.export import to_onnx  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402


def _median_time(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=5000)
    args = parser.parse_args(argv)
    d = load_digits()
    X = d.data[:400] / 16.0
    pairs, y = make_pairs(d.target[:400], max_positives=1500, random_state=0)
    rng = np.random.RandomState(0)
    Q = (d.data[rng.randint(0, len(d.data), args.n_rows)] / 16.0).astype(np.float32)
    models = {
        "LDML linear": crossmetric.LDML(n_components=32),
        "PCCA rbf (exact, 400 support)": crossmetric.PCCA(n_components=16, kernel="rbf",
                                                          max_iter=50),
        "PCCA chi2_rbf (exact, 400 support)": crossmetric.PCCA(n_components=16,
                                                               kernel="chi2_rbf", max_iter=50),
        "PCCA rbf Nystroem (100 landmarks)": crossmetric.PCCA(
            n_components=16, kernel="rbf", kernel_approximation="nystroem", n_landmarks=100,
            max_iter=50, random_state=0),
        "CLML (4 local maps)": crossmetric.CLML(n_clusters=4, n_components=16, max_iter=50,
                                                random_state=0),
    }
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, est in models.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = est.set_params(preprocessor=X).fit(pairs, y)
            path = to_onnx(model, os.path.join(tmp, "m.onnx"))
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            got = sess.run(None, {"X": Q})[0]
            want = model.transform_x(Q)
            rows.append({
                "model": name, "onnx_kib": round(os.path.getsize(path) / 1024, 1),
                "max_abs_diff": float(np.max(np.abs(got - want))),
                "onnxruntime_s": round(_median_time(lambda s=sess: s.run(None, {"X": Q})), 4),
                "transform_x_s": round(_median_time(lambda m=model: m.transform_x(Q)), 4),
            })
    print(json.dumps({"n_rows": args.n_rows, "load": os.getloadavg(), "results": rows},
                     indent=1))


if __name__ == "__main__":
    main()
