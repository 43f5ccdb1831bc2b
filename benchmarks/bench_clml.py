"""CLML vs global LDML vs PCCA vs Euclidean: retrieval mAP and 1-call@{1,5,10}, and the speed-up
of the faiss indexes (CLML mixture = multiple-assignment ``gmm``, k-means ``ivf``) over exact
search.

Protocol (the clml paper's retrieval evaluation, on small data sets): a stratified half of the
samples trains (index pairs from ``make_pairs``: every positive up to ``--max-positives`` and
as many random negatives); the other half is split into queries (``--queries-per-class`` per class)
and a database (the rest). mAP and 1-call@n of the queries against the database; the number of
local metrics ``k`` is chosen by ``CLMLCV`` (3 folds of the training *samples*, held-out pair
ROC AUC). ``--gmm-pca`` / ``--reg-covar`` override CLML's mixture defaults.
All learners project to 32 dimensions (the paper's d = 32).

Data sets: scikit-learn ``digits`` (64 pixel features / 16) and UCI ``mfeat`` with the views
``fou`` and ``pix`` concatenated (76 + 240 = 316 features), standardised on the training half.

Speed-up: for the CLML model, ``Index(kind="gmm")`` over the database (each vector stored in its
top-``w`` mixture components, queries probe their top-``nprobe``) and ``Index(kind="ivf")`` with
as many k-means lists; speed-up = database size / vectors scanned per query (distance
computations; wall-clock is meaningless at this size), mAP computed on the returned lists
(items not returned count as not retrieved).

Run: ``python benchmarks/bench_clml.py [--data-home ../shared/data/mfeat] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from crossmetric.learners.clml import CLML, CLMLCV  # noqa: E402
from crossmetric.learners.ldml import LDML  # noqa: E402
from crossmetric.learners.pcca import PCCA  # noqa: E402
from crossmetric.metrics import mean_average_precision, one_call_at_n  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402
from crossmetric.retrieval import Index  # noqa: E402

P = 32  # projection dimension of every learner (the paper's d = 32)


def load(name: str, data_home: str):
    if name == "digits":
        X, lab = load_digits(return_X_y=True)
        return X / 16.0, lab, "digits: 1797 x 64 pixels / 16"
    from crossmetric.datasets import load_mfeat

    b = load_mfeat(data_home, views=("fou", "pix"))
    return np.hstack([b.X, b.Y]), b.labels, "mfeat: fou + pix concatenated, 2000 x 316"


def split(X, lab, queries_per_class: int, seed: int):
    tr, te = train_test_split(np.arange(len(lab)), test_size=0.5, stratify=lab,
                              random_state=seed)
    rng = np.random.RandomState(seed)
    q = np.concatenate([rng.choice(te[lab[te] == c], queries_per_class, replace=False)
                        for c in np.unique(lab)])
    db = np.setdiff1d(te, q)
    return tr, q, db


def retrieval_scores(dist, lq, ldb):
    out = {"mAP": 100 * mean_average_precision(dist, lq, ldb)}
    for n in (1, 5, 10):
        out[f"1-call@{n}"] = 100 * one_call_at_n(dist, lq, ldb, n)
    return out


def truncated_map(ids, lq, ldb):
    """mAP of ranked id lists (-1 = nothing); relevant items not returned add 0 precision."""
    aps = []
    for r in range(ids.shape[0]):
        got = ids[r][ids[r] >= 0]
        rel = ldb[got] == lq[r]
        n_rel = np.count_nonzero(ldb == lq[r])
        if n_rel == 0:
            continue
        hits = np.cumsum(rel)
        aps.append(np.sum((hits / np.arange(1, got.size + 1))[rel]) / n_rel)
    return 100 * float(np.mean(aps))


def scanned_per_query(index: Index, Q) -> float:
    """Mean number of database entries whose distance is computed per query."""
    from faiss.contrib.inspect_tools import get_invlist_sizes

    sizes = get_invlist_sizes(index._index.invlists)
    if index.kind == "gmm":
        nprobe = index.nprobe or index.w
        lists = index._top_components(Q, nprobe)
    else:
        nprobe = min(index.nprobe or 1, index.nlist_)
        Z = index._embed(Q, "x")
        _, lists = index._index.quantizer.search(Z, nprobe)
    return float(sizes[lists].sum(axis=1).mean())


def run_dataset(name: str, data_home: str, args) -> dict:
    X, lab, desc = load(name, data_home)
    tr, iq, idb = split(X, lab, args.queries_per_class, args.seed)
    if name == "mfeat":
        sc = StandardScaler().fit(X[tr])
        X = sc.transform(X)
    Xtr = X[tr]
    pairs, y = make_pairs(lab[tr], max_positives=args.max_positives, random_state=args.seed)
    res = {"data": desc, "n_train": len(tr), "n_queries": len(iq), "n_database": len(idb),
           "n_pairs": len(y), "methods": {}}
    common = dict(alpha=args.alpha, random_state=args.seed)

    def evaluate(label, model, fit_time):
        dist = (((X[iq][:, None] - X[idb][None]) ** 2).sum(-1) if model is None
                else model.cross_distance(X[iq], X[idb]))
        row = retrieval_scores(dist, lab[iq], lab[idb])
        row["fit_s"] = round(fit_time, 2)
        res["methods"][label] = {k: round(v, 2) for k, v in row.items()}
        print(f"  {label:<28} " + " ".join(f"{k}={v:6.2f}" for k, v in row.items()),
              flush=True)

    print(f"== {desc}; {len(y)} training pairs", flush=True)
    evaluate("Euclidean", None, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = time.perf_counter()
        pcca = PCCA(P, random_state=args.seed, preprocessor=Xtr).fit(pairs, y)
        evaluate("PCCA (d=32)", pcca, time.perf_counter() - t)
        t = time.perf_counter()
        ldml = LDML(P, preprocessor=Xtr, **common).fit(pairs, y)
        evaluate("LDML global (d=32)", ldml, time.perf_counter() - t)
        clml_kw = dict(init=args.init, preprocessor=Xtr, **common)
        if args.gmm_pca != "default":  # else the estimator's own default
            clml_kw["gmm_pca_components"] = None if args.gmm_pca == "none" else int(args.gmm_pca)
        if args.reg_covar is not None:
            clml_kw["reg_covar"] = args.reg_covar
        for k in args.fixed_k:
            t = time.perf_counter()
            m = CLML(k, n_components=P, **clml_kw).fit(pairs, y)
            evaluate(f"CLML k={k}", m, time.perf_counter() - t)
        t = time.perf_counter()
        cv = CLMLCV(tuple(args.grid), n_components=P, cv=3, **clml_kw).fit(pairs, y)
        res["cv_k"] = cv.best_n_clusters_
        res["cv_scores"] = {int(k): round(float(s), 5) for k, s in zip(
            cv.cv_results_["param_n_clusters"], cv.cv_results_["mean_test_score"],
            strict=True)}
        evaluate(f"CLML cross-validated k={cv.best_n_clusters_}", cv, time.perf_counter() - t)
    if not args.no_index:
        res["index"] = index_speedup(cv.best_estimator_, X[iq], X[idb], lab[iq], lab[idb])
    return res


def index_speedup(model, Q, DB, lq, ldb) -> dict:
    n = DB.shape[0]
    exact = Index(model).add(DB)
    t = time.perf_counter()
    _, ids = exact.search(Q, n)
    t_exact = time.perf_counter() - t
    base = truncated_map(ids, lq, ldb)
    out = {"exact_mAP": round(base, 2), "exact_search_s": round(t_exact, 4), "settings": []}
    k = int(model.gmm_.n_components)
    configs = [("gmm", dict(w=w, nprobe=p)) for w in (1, 2, 3) for p in (1, 2, 3, 4)
               if w <= k and p <= k]
    nlist = max(2, k)
    probes = sorted(p for p in {1, 2, 3, 4, 6, nlist // 4, nlist // 2} if 1 <= p <= nlist)
    configs += [("ivf", dict(nlist=nlist, nprobe=p)) for p in probes]
    print(f"  index on CLML k={k} (exact mAP {base:.2f}, database {n}):")
    for kind, kw in configs:
        index = Index(model, kind, random_state=0, **kw).add(DB)
        t = time.perf_counter()
        _, ids = index.search(Q, n)
        dt = time.perf_counter() - t
        m = truncated_map(ids, lq, ldb)
        scanned = scanned_per_query(index, Q)
        row = {"kind": kind, **kw, "mAP": round(m, 2), "mAP_loss": round(base - m, 2),
               "scanned_per_query": round(scanned, 1), "speedup": round(n / scanned, 2),
               "search_s": round(dt, 4)}
        out["settings"].append(row)
        print("    " + " ".join(f"{a}={b}" for a, b in row.items()), flush=True)
    ok = [r for r in out["settings"] if r["mAP_loss"] <= 1.0]
    out["best_within_1_point"] = max(ok, key=lambda r: r["speedup"]) if ok else None
    print(f"  best speed-up within 1 mAP point: {out['best_within_1_point']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=os.path.join(os.path.dirname(__file__),
                                                         "..", "..", "shared", "data", "mfeat"))
    ap.add_argument("--datasets", nargs="+", default=["digits", "mfeat"])
    ap.add_argument("--max-positives", type=int, default=5000)
    ap.add_argument("--queries-per-class", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=1e-4)
    ap.add_argument("--init", default="auto")
    ap.add_argument("--grid", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--fixed-k", type=int, nargs="*", default=[4, 16])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gmm-pca", default="default",
                    help="mixture on PCA-n of the features: an int, 'none', or 'default' (the "
                         "estimator's default)")
    ap.add_argument("--reg-covar", type=float, default=None,
                    help="GaussianMixture reg_covar (default: the estimator's default)")
    ap.add_argument("--no-index", action="store_true", help="skip the faiss index speed-up")
    ap.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    args = ap.parse_args()
    results = {}
    for name in args.datasets:
        if name == "mfeat" and not os.path.isdir(args.data_home):
            print(f"skipping mfeat: {args.data_home} not found", flush=True)
            continue
        results[name] = run_dataset(name, args.data_home, args)
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
