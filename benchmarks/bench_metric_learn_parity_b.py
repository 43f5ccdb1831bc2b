"""RCA, LFDA, MLKR and SCML against metric-learn 0.7.0 on the data of its tests.

Run: ``python benchmarks/bench_metric_learn_parity_b.py [--ml-python PATH] [--out FILE]`` --
prints a table and JSON and writes ``benchmarks/results/metric_learn_parity_b.json``.

metric-learn is *not* a dependency of crossmetric (it breaks on scikit-learn >= 1.8): it runs
in its own virtual environment with scikit-learn 1.7, found at ``--ml-python``,
``$CROSSMETRIC_ML_PYTHON_B`` or ``/tmp/mlenvb/bin/python``
(``python -m venv /tmp/mlenvb && /tmp/mlenvb/bin/pip install metric-learn==0.7.0
"scikit-learn==1.7.*" numpy scipy``), called through a subprocess on the same arrays. Without
it the script prints crossmetric's numbers and says that the comparison was skipped.

Data: scikit-learn's iris and digits (as metric-learn's tests); digits scaled to [0, 1] and
reduced by PCA to 30 dims fitted on the training half (raw digits have constant pixels, which
make RCA's and LFDA's within-class matrices singular). Each set is split in half, stratified.

* Deterministic (RCA, LFDA): the learned Mahalanobis matrices ``M = LᵀL`` are compared
  (``rel_diff = max|M_ours − M_theirs| / max|M_theirs|``), target <= 1e-6. RCA and
  RCA_Supervised get the same chunks (drawn by crossmetric). LFDA: crossmetric's scatters with
  ``reproduce_metric_learn=True`` must equal metric-learn's; crossmetric's default LFDA follows
  the paper instead (see ``crossmetric.learners.lfda``), so only its quality is compared.
* Stochastic / iterative (MLKR, SCML): held-out 3-NN accuracy of both, target within 1 point.

``time_ratio`` = crossmetric's fit time / metric-learn's (median of ``--repeats``, default 1).
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
from sklearn.datasets import load_digits, load_iris
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

from crossmetric import LFDA, MLKR, RCA, SCML, SCML_Supervised
from crossmetric.learners._sample_forms import knn_triplets
from crossmetric.learners.lfda import lfda_components, local_fisher_scatters
from crossmetric.learners.rca import chunks_from_labels

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "metric_learn_parity_b.json"

# the metric-learn side: fits each job on the arrays of an .npz, returns components and times
ML_SIDE = r'''
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
import metric_learn as ml
d = np.load(sys.argv[1])
jobs = json.loads(str(d["jobs"]))
out, times = {}, {}
for job in jobs:
    name, data, cls, kw, form = job["key"], job["data"], job["cls"], job["kw"], job["form"]
    X, y = d[data + "_Xtr"], d[data + "_ytr"]
    best = []
    for _ in range(job["repeats"]):
        est = getattr(ml, cls)(**kw)
        t0 = time.perf_counter()
        if form == "chunks":
            est.fit(X, d[name + "_chunks"])
        elif form == "triplets":
            est.fit(X[d[name + "_triplets"]])
        else:
            est.fit(X, y)
        best.append(time.perf_counter() - t0)
    out[name] = est.components_
    times[name] = float(np.median(best))
np.savez(sys.argv[2], **out)
print(json.dumps({"times": times, "version": ml.__version__,
                  "sklearn": __import__("sklearn").__version__}))
'''


def _data():
    sets = {}
    X, y = load_iris(return_X_y=True)
    sets["iris"] = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.5, stratify=y,
                                          random_state=0)
    pca = PCA(30, random_state=0).fit(Xtr)
    sets["digits30"] = (pca.transform(Xtr), pca.transform(Xte), ytr, yte)
    return sets


def _jobs(sets, repeats):
    """(key, data set, metric-learn class, its kwargs, input form, our estimator maker)."""
    jobs = []
    for data in sets:
        n_chunks = 30 if data == "iris" else 200
        # SCML's default 80 × d bases on 27,000 digit triplets would hold a 0.5 GB matrix
        n_basis = 80 * sets[data][0].shape[1] if data == "iris" else 600
        jobs += [
            dict(key=f"RCA/{data}", data=data, cls="RCA", kw={}, form="chunks",
                 kind="exact", ours=lambda: RCA(), n_chunks=n_chunks),
            dict(key=f"RCA-d2/{data}", data=data, cls="RCA", kw={"n_components": 2},
                 form="chunks", kind="exact", ours=lambda: RCA(n_components=2),
                 n_chunks=n_chunks),
            dict(key=f"LFDA/{data}", data=data, cls="LFDA",
                 kw={"k": 2, "n_components": 2}, form="labels", kind="exact",
                 ours=lambda: LFDA(k=2, n_components=2)),
            dict(key=f"MLKR/{data}", data=data, cls="MLKR", kw={"random_state": 0},
                 form="labels", kind="quality", ours=lambda: MLKR(random_state=0)),
            dict(key=f"SCML/{data}", data=data, cls="SCML",
                 kw={"random_state": 0, "n_basis": n_basis}, form="triplets",
                 kind="quality", ours=lambda b=n_basis: SCML(random_state=0, n_basis=b)),
            dict(key=f"SCML_Supervised/{data}", data=data, cls="SCML_Supervised",
                 kw={"random_state": 0}, form="labels", kind="quality",
                 ours=lambda: SCML_Supervised(random_state=0)),
        ]
    for j in jobs:
        j["repeats"] = repeats
    return jobs


def _knn_accuracy(L, data):
    Xtr, Xte, ytr, yte = data
    knn = KNeighborsClassifier(3).fit(Xtr @ L.T, ytr)
    return float(knn.score(Xte @ L.T, yte))


def _rel(Ma, Mb):
    return float(np.abs(Ma - Mb).max() / np.abs(Mb).max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ml-python", default=os.environ.get("CROSSMETRIC_ML_PYTHON_B",
                                                          "/tmp/mlenvb/bin/python"))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    sets = _data()
    jobs = _jobs(sets, args.repeats)
    arrays = {}
    for name, split in sets.items():
        arrays[f"{name}_Xtr"], arrays[f"{name}_ytr"] = split[0], split[2]
    ours = {}
    for j in jobs:
        Xtr, _, ytr, _ = sets[j["data"]]
        if j["form"] == "chunks":
            arrays[j["key"] + "_chunks"] = chunks_from_labels(ytr, j["n_chunks"], 2, 0)
            fit_args = (Xtr, arrays[j["key"] + "_chunks"])
        elif j["form"] == "triplets":
            arrays[j["key"] + "_triplets"] = knn_triplets(Xtr, ytr, 3, 10)
            fit_args = (Xtr[arrays[j["key"] + "_triplets"]],)
        else:
            fit_args = (Xtr, ytr)
        times = []
        for _ in range(args.repeats):
            est = j["ours"]()
            t0 = time.perf_counter()
            est.fit(*fit_args)
            times.append(time.perf_counter() - t0)
        ours[j["key"]] = (est.components_, float(np.median(times)))
        if j["cls"] == "LFDA":  # metric-learn's two deviations reproduced
            Sb, Sw = local_fisher_scatters(Xtr, ytr, 2, reproduce_metric_learn=True)
            ours[j["key"] + "#compat"] = (lfda_components(Sb, Sw, 2, "weighted"), None)

    theirs, info, skipped = {}, {}, None
    if not os.path.exists(args.ml_python):
        skipped = f"metric-learn's python not found at {args.ml_python}: comparison skipped"
        print(skipped, file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            inp, outp, side = (Path(tmp) / "in.npz", Path(tmp) / "out.npz",
                               Path(tmp) / "side.py")
            side.write_text(ML_SIDE)
            arrays["jobs"] = np.array(json.dumps(
                [{k: j[k] for k in ("key", "data", "cls", "kw", "form", "repeats")}
                 for j in jobs]))
            np.savez(inp, **arrays)
            run = subprocess.run([args.ml_python, str(side), str(inp), str(outp)],
                                 capture_output=True, text=True, timeout=3600)
            if run.returncode != 0:
                skipped = f"metric-learn side failed: {run.stderr.strip()[-500:]}"
                print(skipped, file=sys.stderr)
            else:
                info = json.loads(run.stdout.strip().splitlines()[-1])
                with np.load(outp) as z:
                    theirs = {k: z[k] for k in z.files}

    rows = []
    for j in jobs:
        key = j["key"]
        L, t = ours[key]
        row = {"algorithm": key, "kind": j["kind"], "params": j["kw"],
               "knn_ours": _knn_accuracy(L, sets[j["data"]]), "time_ours_s": round(t, 4)}
        if key in theirs:
            Lt = theirs[key]
            row["knn_theirs"] = _knn_accuracy(Lt, sets[j["data"]])
            row["time_theirs_s"] = round(info["times"][key], 4)
            row["time_ratio"] = round(t / max(info["times"][key], 1e-9), 3)
            row["knn_diff_points"] = round(100 * (row["knn_ours"] - row["knn_theirs"]), 2)
            if j["kind"] == "exact":
                Lc = ours.get(key + "#compat", (L,))[0]
                row["rel_diff_M"] = _rel(Lc.T @ Lc, Lt.T @ Lt)
                if key + "#compat" in ours:
                    row["rel_diff_M_note"] = ("crossmetric's scatters with "
                                              "reproduce_metric_learn=True")
                    row["rel_diff_M_default"] = _rel(L.T @ L, Lt.T @ Lt)
                row["parity"] = bool(row["rel_diff_M"] <= 1e-6)
            else:
                row["parity"] = bool(abs(row["knn_diff_points"]) <= 1.0
                                     or row["knn_ours"] >= row["knn_theirs"])
        rows.append(row)
    result = {"benchmark": "metric_learn_parity_b", "skipped": skipped,
              "metric_learn": info.get("version"), "their_sklearn": info.get("sklearn"),
              "rows": rows}
    print(f"{'algorithm':<26}{'kNN ours':>9}{'theirs':>8}{'rel diff M':>12}{'time ratio':>11}")
    nan = float("nan")
    for r in rows:
        print(f"{r['algorithm']:<26}{r['knn_ours']:>9.3f}{r.get('knn_theirs', nan):>8.3f}"
              f"{r.get('rel_diff_M', nan):>12.2e}{r.get('time_ratio', nan):>11.3f}")
    print(json.dumps(result, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
