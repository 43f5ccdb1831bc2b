"""MMC, SDML, LSML, LSML_Supervised and Covariance against metric-learn 0.7.0.

Run: ``python benchmarks/bench_metric_learn_parity_a.py [--ml-python PATH] [--out FILE]``
-- prints a table and JSON (written to ``benchmarks/results/metric_learn_parity_a.json`` by
default).

metric-learn is *not* a dependency of crossmetric (it breaks on scikit-learn >= 1.8): it runs
in its own virtual environment with scikit-learn 1.7, found at ``--ml-python``,
``$CROSSMETRIC_ML_PYTHON``, ``/tmp/mlenv/bin/python`` or ``/work/ml-venv/bin/python``
(``python -m venv /tmp/mlenv && /tmp/mlenv/bin/pip install metric-learn==0.7.0
"scikit-learn==1.7.*" numpy scipy``), called through a subprocess on the same arrays. Without
it, the metric-learn side is skipped with a message and only crossmetric's numbers are given.

Both sides get the same inputs: the same pairs (crossmetric's :func:`make_pairs` on the
training samples), the same quadruplets (drawn once here for LSML), the same samples. Data:
scikit-learn's iris and digits (metric-learn's own test data), samples split 2/3 train, 1/3
test (stratified, seed 0). Reported per algorithm:

* ``rel_diff_M``: ``‖M_ours − M_theirs‖_F / ‖M_theirs‖_F`` of the learned Mahalanobis matrices
  (the target is < 1e-6 where the two compute the same deterministic iterates: MMC full,
  SDML, Covariance);
* ``knn_ours`` / ``knn_theirs``: held-out 3-NN accuracy of the test samples against the
  training samples in the learned metric (the target is within 1 point where the algorithms
  differ on purpose: MMC diagonal and LSML, see their module docstrings);
* ``time_ratio``: crossmetric's fit time / metric-learn's (median of 3 fits each).

metric-learn 0.7.0's SDML passes ``cov_init`` to scikit-learn's ``graphical_lasso``, which
scikit-learn 1.5 removed, so on scikit-learn 1.7 it always raises; the child process swaps in a
``graphical_lasso`` without that argument (the same solver, started from its default) and the
row says ``patched``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, load_iris
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from crossmetric import LSML, MMC, SDML, Covariance, make_pairs  # noqa: E402
from crossmetric.learners.lsml import label_pairs  # noqa: E402

REPEATS = 3
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "metric_learn_parity_a.json"

_CHILD = r"""
import importlib.metadata, json, sys, time, warnings
import numpy as np
import sklearn.covariance
import metric_learn, metric_learn.sdml
from metric_learn import LSML, MMC, SDML, Covariance

def _glasso(emp_cov, alpha, verbose=False, cov_init=None):  # sklearn >= 1.5 has no cov_init
    return sklearn.covariance.graphical_lasso(emp_cov, alpha=alpha, verbose=verbose)

metric_learn.sdml.graphical_lasso = _glasso
warnings.simplefilter("ignore")
z = np.load(sys.argv[1])
spec = json.loads(sys.argv[2])
out = {}
for name, s in spec.items():
    X = z[s["data"] + "_Xtr"]
    kw = s.get("params", {})
    times = []
    for _ in range(int(sys.argv[3])):
        if s["kind"] == "pairs":
            cls = {"MMC": MMC, "SDML": SDML}[s["cls"]]
            m = cls(preprocessor=X, **kw)
            t0 = time.perf_counter(); m.fit(z[name + "_pairs"], z[name + "_y"])
        elif s["kind"] == "quad":
            m = LSML(preprocessor=X, **kw)
            t0 = time.perf_counter(); m.fit(z[name + "_quad"])
        else:
            m = Covariance(**kw)
            t0 = time.perf_counter(); m.fit(X)
        times.append(time.perf_counter() - t0)
    out[name] = {"M": m.get_mahalanobis_matrix().tolist(), "time": float(np.median(times)),
                 "n_iter": getattr(m, "n_iter_", None)}
print(json.dumps({"version": metric_learn.__version__,
                  "sklearn": importlib.metadata.version("scikit-learn"), "results": out}))
"""


def _ml_python(arg):
    for cand in (arg, os.environ.get("CROSSMETRIC_ML_PYTHON"), "/tmp/mlenv/bin/python",
                 "/work/ml-venv/bin/python"):
        if cand and Path(cand).exists():
            return cand
    return None


def _data():
    out = {}
    for name, loader in (("iris", load_iris), ("digits", load_digits)):
        X, y = loader(return_X_y=True)
        if name == "digits":
            X = X / 16.0
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=1 / 3, stratify=y,
                                              random_state=0)
        out[name] = (Xtr, Xte, ytr, yte)
    return out


#: name -> what is compared: learner, data, input kind, parameters (metric-learn's names)
CASES = {
    "MMC full (iris)": dict(cls="MMC", data="iris", kind="pairs", params={}),
    "MMC diagonal (iris)": dict(cls="MMC", data="iris", kind="pairs",
                                params={"diagonal": True}),
    "MMC diagonal (digits)": dict(cls="MMC", data="digits", kind="pairs",
                                  params={"diagonal": True}),
    "SDML (iris)": dict(cls="SDML", data="iris", kind="pairs",
                        params={"prior": "covariance", "balance_param": 1e-5}),
    "SDML (digits)": dict(cls="SDML", data="digits", kind="pairs",
                          params={"prior": "identity", "balance_param": 1e-3,
                                  "sparsity_param": 0.05}),
    "LSML (iris)": dict(cls="LSML", data="iris", kind="quad", params={}),
    "LSML (digits)": dict(cls="LSML", data="digits", kind="quad", params={"max_iter": 200}),
    "Covariance (iris)": dict(cls="Covariance", data="iris", kind="samples", params={}),
    "Covariance (digits)": dict(cls="Covariance", data="digits", kind="samples", params={}),
}


def _knn(M, Xtr, ytr, Xte, yte):
    w, U = np.linalg.eigh((M + M.T) / 2)
    L = (U * np.sqrt(np.maximum(w, 0))).T
    clf = KNeighborsClassifier(3).fit(Xtr @ L.T, ytr)
    return float(clf.score(Xte @ L.T, yte))


def _ours(name, case, arrays, X):
    cls = {"MMC": MMC, "SDML": SDML, "LSML": LSML, "Covariance": Covariance}[case["cls"]]
    times = []
    for _ in range(REPEATS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case["kind"] == "pairs":
                m = cls(preprocessor=X, **case["params"])
                t0 = time.perf_counter()
                m.fit(arrays[name + "_pairs"], arrays[name + "_y"])
            elif case["kind"] == "quad":
                m = cls(preprocessor=X, **case["params"])
                t0 = time.perf_counter()
                m.fit(arrays[name + "_quad"])
            else:
                m = cls(**case["params"])
                t0 = time.perf_counter()
                m.fit(X)
        times.append(time.perf_counter() - t0)
    return m.get_mahalanobis_matrix(), float(np.median(times)), getattr(m, "n_iter_", None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ml-python", default=None)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args(argv)
    data = _data()
    arrays = {}
    for d, (Xtr, *_rest) in data.items():
        arrays[d + "_Xtr"] = Xtr
    for name, case in CASES.items():
        Xtr, _, ytr, _ = data[case["data"]]
        if case["kind"] == "pairs":
            pairs, y = make_pairs(ytr, max_positives=400, random_state=0)
            arrays[name + "_pairs"], arrays[name + "_y"] = pairs, y
        elif case["kind"] == "quad":
            n_classes = np.unique(ytr).size
            a, b, c, dd = label_pairs(ytr, 20 * n_classes ** 2, random_state=0)
            arrays[name + "_quad"] = np.stack([a, b, c, dd], axis=1)

    theirs, info = {}, {}
    py = _ml_python(args.ml_python)
    if py is None:
        print("metric-learn side skipped: no virtual environment with metric-learn 0.7.0 "
              "(see the module docstring)", file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "arrays.npz")
            np.savez(path, **arrays)
            spec = {k: {kk: v for kk, v in c.items()} for k, c in CASES.items()}
            res = subprocess.run([py, "-c", _CHILD, path, json.dumps(spec), str(REPEATS)],
                                 capture_output=True, text=True, check=False)
        if res.returncode != 0:
            print(f"metric-learn side failed:\n{res.stderr[-2000:]}", file=sys.stderr)
        else:
            payload = json.loads(res.stdout.strip().splitlines()[-1])
            theirs = payload["results"]
            info = {"metric_learn": payload["version"], "sklearn_ml": payload["sklearn"]}

    rows = []
    for name, case in CASES.items():
        Xtr, Xte, ytr, yte = data[case["data"]]
        M, t, n_iter = _ours(name, case, arrays, Xtr)
        row = {"algorithm": name, "knn_ours": _knn(M, Xtr, ytr, Xte, yte), "time_ours_s": t}
        if n_iter is not None:
            row["n_iter_ours"] = int(n_iter)
        if name in theirs:
            Mt = np.asarray(theirs[name]["M"])
            row.update(knn_theirs=_knn(Mt, Xtr, ytr, Xte, yte),
                       time_theirs_s=theirs[name]["time"],
                       n_iter_theirs=theirs[name]["n_iter"],
                       time_ratio=t / theirs[name]["time"],
                       rel_diff_M=float(np.linalg.norm(M - Mt) / np.linalg.norm(Mt)))
            if case["cls"] == "SDML":
                row["note"] = "metric-learn patched (graphical_lasso without cov_init)"
        rows.append(row)

    result = {"benchmark": "metric_learn_parity_a",
              "sklearn_ours": importlib.metadata.version("scikit-learn"),
              **info, "repeats": REPEATS, "rows": rows}
    hdr = f"{'algorithm':<24}{'kNN ours':>9}{'kNN theirs':>11}{'rel diff M':>12}{'t ours':>9}" \
          f"{'t ratio':>9}"
    print(hdr)
    for r in rows:
        print(f"{r['algorithm']:<24}{r['knn_ours']:>9.4f}{r.get('knn_theirs', float('nan')):>11.4f}"
              f"{r.get('rel_diff_M', float('nan')):>12.2e}{r['time_ours_s']:>9.3f}"
              f"{r.get('time_ratio', float('nan')):>9.2f}")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
