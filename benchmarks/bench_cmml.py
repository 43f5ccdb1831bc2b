"""CMML on UCI Multiple Features, ``fou`` (76-d Fourier) ↔ ``pix`` (240-d pixels).

Run: ``python benchmarks/bench_cmml.py [MFEAT_DIR]`` -- prints JSON.

Split: 1,000 objects for training, the other 1,000 for testing (disjoint, stratified by digit),
2,000 balanced training pairs and 2,000 balanced test pairs from ``make_pairs`` (class = identity,
one negative per positive), 3 seeds. Both views min-max scaled on the training objects.
Reports fit time and held-out ROC AUC of linear and kernel (rbf) CMML next to scikit-learn's CCA
fitted on the positive training pairs (latent dimension 30 for all, squared Euclidean distance
in the latent space).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cross_decomposition import CCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import MFEAT_DIR, emit, machine  # noqa: E402
from crossmetric import CMML, make_pairs  # noqa: E402


def load(view: str, root: Path) -> np.ndarray:
    return np.loadtxt(root / f"mfeat-{view}")


def run(seed: int, X: np.ndarray, Y: np.ndarray, labels: np.ndarray) -> dict:
    tr, te = train_test_split(np.arange(len(labels)), test_size=0.5, stratify=labels,
                              random_state=seed)
    X = np.clip(MinMaxScaler().fit(X[tr]).transform(X), 0, None)
    Y = np.clip(MinMaxScaler().fit(Y[tr]).transform(Y), 0, None)
    ptr, ytr = make_pairs(labels[tr], labels[tr], max_positives=1000, random_state=seed)
    pte, yte = make_pairs(labels[te], labels[te], max_positives=1000, random_state=seed + 100)
    ptr = np.c_[tr[ptr[:, 0]], tr[ptr[:, 1]]]
    pte = np.c_[te[pte[:, 0]], te[pte[:, 1]]]
    out = {}
    for name, kw in [("cmml_linear", {}), ("cmml_rbf", {"kernel": "rbf", "max_iter": 300})]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t0 = time.perf_counter()
            m = CMML(n_components=30, random_state=seed, preprocessor=(X, Y), **kw).fit(ptr, ytr)
            out[name] = (time.perf_counter() - t0, m.score(pte, yte))
    pos = ptr[ytr == 1]
    t0 = time.perf_counter()
    cca = CCA(n_components=30, max_iter=2000).fit(X[pos[:, 0]], Y[pos[:, 1]])
    fit = time.perf_counter() - t0
    a, b = cca.transform(X[pte[:, 0]], Y[pte[:, 1]])
    out["cca_sklearn"] = (fit, roc_auc_score(yte, -((a - b) ** 2).sum(1)))
    return out


def main(root: Path) -> dict:
    X, Y = load("fou", root), load("pix", root)
    labels = np.repeat(np.arange(10), 200)
    runs = [run(seed, X, Y, labels) for seed in range(3)]
    summary = {}
    for name in runs[0]:
        t = np.array([r[name][0] for r in runs])
        a = np.array([r[name][1] for r in runs])
        summary[name] = {"fit_s_mean": round(t.mean(), 3),
                         "test_auc_mean": round(a.mean(), 4), "test_auc_std": round(a.std(), 4)}
    return {"machine": machine(), "views": "fou (76-d) -> pix (240-d)", "seeds": 3,
            "train_pairs": 2000, "test_pairs": 2000, "results": summary}


if __name__ == "__main__":
    emit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else MFEAT_DIR))
