"""ITML against metric-learn's ITML on the same pairs, bounds, γ and tolerance.

Run: ``python benchmarks/bench_itml.py [--ml-python PATH]`` -- prints JSON.

metric-learn is *not* a dependency of crossmetric: it runs in its own virtual environment
(scikit-learn 1.7), found at ``$CROSSMETRIC_ML_VENV`` or ``/work/ml-venv``
(``python -m venv /work/ml-venv && /work/ml-venv/bin/pip install "scikit-learn==1.7.*"
metric-learn==0.7.0 numpy scipy``), and is called through a subprocess on the same arrays.
Without it, only crossmetric's numbers are printed.

Tasks (single-modal, balanced pairs, train and test pairs over disjoint samples):

* ``digits``: scikit-learn's digits, 64 pixels scaled to [0, 1];
* ``mfeat-pix-pca60``: UCI mfeat pixel view reduced by PCA (fitted on the training samples) to
  60 dims, standardised by the first component's scale;
* ``mfeat-fou``: the 76 Fourier coefficients.

Both learners get ``bounds`` = crossmetric's percentile rule on the training samples (5th/95th
percentiles of squared distances; metric-learn's own default takes percentiles of *unsquared*
distances, so the bounds are passed explicitly), ``gamma=1``, ``tol=1e-3``, ``max_iter=1000``.
Reported: fit wall time and CPU time of the fitting process (median of ``--repeats``; the CPU
time is the fairer measure on a shared machine), passes, and held-out pair ROC AUC. The target
of the issue is a speed-up >= 5 at equal AUC.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import MFEAT_DIR, emit, machine  # noqa: E402
from crossmetric import make_pairs  # noqa: E402
from crossmetric.learners.itml import ITML, itml_bounds  # noqa: E402
from crossmetric.metrics import roc_auc  # noqa: E402

_CHILD = r"""
import sys, time, json, warnings
import numpy as np
from metric_learn import ITML
warnings.simplefilter("ignore")
z = np.load(sys.argv[1])
out = {"times": [], "cpu": []}
for _ in range(int(sys.argv[2])):
    m = ITML(gamma=1.0, max_iter=1000, tol=1e-3)
    t0, c0 = time.perf_counter(), time.process_time()
    m.fit(z["pairs"], z["y"], bounds=z["bounds"])
    out["times"].append(time.perf_counter() - t0)
    out["cpu"].append(time.process_time() - c0)
out["n_iter"] = int(m.n_iter_) + 1
np.save(sys.argv[3], m.get_mahalanobis_matrix())
print(json.dumps(out))
"""


def _tasks():
    d = load_digits()
    yield "digits", d.data / 16.0, d.target
    if (MFEAT_DIR / "mfeat-pix").exists():
        from crossmetric.datasets import load_mfeat

        b = load_mfeat(MFEAT_DIR, views=("pix", "fou"))
        yield "mfeat-pix-pca60", b.X, b.labels
        yield "mfeat-fou", b.Y, b.labels


def _split(name, X, labels, n_pos, seed):
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(X))
    tr, te = perm[: len(X) // 2], perm[len(X) // 2:]
    if name.endswith("pca60"):
        pca = PCA(60, random_state=seed).fit(X[tr])
        X = pca.transform(X) / np.sqrt(pca.explained_variance_[0])
    ptr, ytr = make_pairs(labels[tr], max_positives=n_pos, random_state=seed)
    pte, yte = make_pairs(labels[te], max_positives=n_pos, random_state=seed + 1)
    return X, tr[ptr], ytr, te[pte], yte


def _auc(M, X, pairs, y):
    D = X[pairs[:, 0]] - X[pairs[:, 1]]
    return roc_auc(y, -np.einsum("ij,jk,ik->i", D, M, D))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ml-python", default=None,
                    help="python of a venv with metric-learn (default: $CROSSMETRIC_ML_VENV "
                         "or /work/ml-venv)")
    ap.add_argument("--n-pos", type=int, default=1000, help="positive pairs per split")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    venv = Path(os.environ.get("CROSSMETRIC_ML_VENV", "/work/ml-venv"))
    ml_python = Path(args.ml_python) if args.ml_python else venv / "bin" / "python"
    have_ml = ml_python.exists()
    result = {"machine": machine(), "metric_learn": str(ml_python) if have_ml else None,
              "settings": {"gamma": 1.0, "tol": 1e-3, "max_iter": 1000,
                           "n_pos": args.n_pos, "repeats": args.repeats}, "tasks": {}}
    for name, X0, labels in _tasks():
        X, ptr, ytr, pte, yte = _split(name, X0, labels, args.n_pos, args.seed)
        bounds = itml_bounds(X[np.unique(ptr)], random_state=args.seed)
        row = {"n_features": X.shape[1], "n_train_pairs": len(ytr), "bounds": bounds}
        times, cpu = [], []
        for _ in range(args.repeats):
            m = ITML(bounds=bounds, gamma=1.0, tol=1e-3, max_iter=1000,
                     random_state=args.seed, preprocessor=X)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0, c0 = time.perf_counter(), time.process_time()
                m.fit(ptr, ytr)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        row["crossmetric"] = {"fit_s": round(float(np.median(times)), 4),
                              "cpu_s": round(float(np.median(cpu)), 4), "passes": m.n_iter_,
                              "auc": round(_auc(m.get_mahalanobis_matrix(), X, pte, yte), 4)}
        row["euclidean_auc"] = round(_auc(np.eye(X.shape[1]), X, pte, yte), 4)
        if have_ml:
            with tempfile.TemporaryDirectory() as tmp:
                npz, mout = os.path.join(tmp, "in.npz"), os.path.join(tmp, "M.npy")
                np.savez(npz, pairs=np.stack([X[ptr[:, 0]], X[ptr[:, 1]]], axis=1), y=ytr,
                         bounds=np.asarray(bounds))
                env = dict(os.environ)
                env.pop("PYTHONPATH", None)
                proc = subprocess.run([str(ml_python), "-c", _CHILD, npz,
                                       str(args.repeats), mout], capture_output=True,
                                      text=True, env=env, check=True)
                info = json.loads(proc.stdout.strip().splitlines()[-1])
                M_ml = np.load(mout)
            row["metric_learn"] = {"fit_s": round(float(np.median(info["times"])), 4),
                                   "cpu_s": round(float(np.median(info["cpu"])), 4),
                                   "passes": info["n_iter"],
                                   "auc": round(_auc(M_ml, X, pte, yte), 4)}
            row["speedup"] = round(row["metric_learn"]["fit_s"] / row["crossmetric"]["fit_s"],
                                   2)
            row["speedup_cpu"] = round(row["metric_learn"]["cpu_s"]
                                       / row["crossmetric"]["cpu_s"], 2)
            row["auc_difference"] = round(row["crossmetric"]["auc"]
                                          - row["metric_learn"]["auc"], 4)
        result["tasks"][name] = row
        print(json.dumps({name: row}, default=float), file=sys.stderr, flush=True)
    result["machine"]["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    emit(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
