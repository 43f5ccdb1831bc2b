"""What k-reciprocal re-ranking and average query expansion add on VIPeR and PKU-Sketch.

One split of each (seed 0), every model fitted once; its probe-to-gallery distances are then
measured as they are, after query expansion, after re-ranking (the paper's k1=20, k2=6, λ=0.3
and a smaller k1=6, k2=3 for these single-/two-shot galleries) and after both
(:func:`crossmetric.protocols.reid.refine_distances`). Measures: CMC at 1, 5, 10, 20, mAP and mINP
(:func:`crossmetric.metrics.evaluate_rank`; no camera ids -- probe and gallery come from
different cameras / modalities by construction), in %.

* VIPeR: 316 test persons, one probe and one gallery image each (PCCA §4.2), training with
  n⁻ = 10 negatives per person; Euclidean on the strip histograms and PCCA-sqrt (linear PCCA
  on square-rooted histograms, ``max_iter`` left at its default: no inner selection).
* PKU-Sketch: 50 test persons, sketch probes against their two photos each; HOG + PCA-64,
  Euclidean on the HOG, CCA, CMML, GSM (GSM scores pairs with its own function: query
  expansion and re-ranking do not apply, reported as n/a).

Run: ``python benchmarks/bench_rerank_reid.py [DATA_HOME]`` (prints JSON and a table; about
a minute on an idle core).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's crossmetric

import numpy as np  # noqa: E402
from _common import REPO, emit, machine  # noqa: E402

from crossmetric import metrics as M  # noqa: E402
from crossmetric.protocols.reid import evaluate_reid, refine_distances, reid_splits  # noqa: E402

VARIANTS = {
    "plain": {},
    "QE k=2": {"query_expansion": 2},
    "RR k1=20,k2=6": {"re_rank": True},
    "RR k1=6,k2=3": {"re_rank": {"k1": 6, "k2": 3}},
    "QE k=2 + RR k1=6,k2=3": {"query_expansion": 2, "re_rank": {"k1": 6, "k2": 3}},
}


def _measures(D, pl, gl) -> dict:
    r = M.evaluate_rank(D, pl, gl, max_rank=20)
    out = {f"r{k}": 100 * float(r["cmc"][k - 1]) for k in (1, 5, 10, 20)}
    out.update(mAP=100 * r["map"], mINP=100 * r["minp"])
    return out


def _variants(model, Q, G, pl, gl, D0) -> dict:
    rows = {}
    for name, kw in VARIANTS.items():
        t0 = time.perf_counter()
        try:
            D = refine_distances(model, Q, G, distance=D0, **kw)
        except ValueError as exc:
            rows[name] = {"n/a": str(exc)[:80]}
            continue
        rows[name] = _measures(D, pl, gl) | {"seconds": round(time.perf_counter() - t0, 3)}
    return rows


def viper(data_home) -> dict:
    from crossmetric.reproduce.viper import _pcca, viper_features

    data = viper_features(data_home)
    X, ids, dom = data["X"], data["ids"], data["domains"]
    split = reid_splits(ids, dom, 316, n_negatives=10, n_splits=1, random_state=0)[0]
    out = {}
    for name, est, Xm in (("Euclidean", None, X), ("PCCA-sqrt", _pcca("linear"), np.sqrt(X))):
        t0 = time.perf_counter()
        res = evaluate_reid(est, Xm, ids, split, max_rank=20)
        fit = time.perf_counter() - t0
        model = res["model"]
        if model is not None:
            model.set_params(preprocessor=None)
        Q, G = Xm[split.probe_rows], Xm[split.gallery_rows]
        D0 = None if model is None else model.cross_distance(Q, G)
        out[name] = {"fit_seconds": round(fit, 2),
                     **_variants(model, Q, G, ids[split.probe_rows], ids[split.gallery_rows],
                                 D0)}
    return out


def pku(data_home) -> dict:
    from sklearn.base import clone
    from sklearn.decomposition import PCA

    from crossmetric.pairs import make_pairs
    from crossmetric.registry import make_estimator
    from crossmetric.reproduce.pku import pku_features, pku_splits

    data = pku_features(data_home)
    H, ids, dom = data["H"], data["ids"], data["domains"]
    sk, ph = np.flatnonzero(dom == "sketch"), np.flatnonzero(dom == "photo")
    test, pairs_seed, split_seed = next(pku_splits(np.unique(ids), 50, 0, 1))
    tr_sk, tr_ph = sk[~np.isin(ids[sk], test)], ph[~np.isin(ids[ph], test)]
    te_sk, te_ph = sk[np.isin(ids[sk], test)], ph[np.isin(ids[ph], test)]
    pairs, y = make_pairs(ids[tr_sk], ids[tr_ph], n_negatives=1, random_state=pairs_seed)
    Z = PCA(64, random_state=0).fit(H[np.r_[tr_sk, tr_ph]]).transform(H)
    pl, gl = ids[te_sk], ids[te_ph]
    out = {"Euclidean (HOG)": _variants(None, H[te_sk], H[te_ph], pl, gl, None)}
    for name in ("cca", "cmml", "gsm"):
        t0 = time.perf_counter()
        model = clone(make_estimator(name))
        if "random_state" in model.get_params():
            model.set_params(random_state=split_seed)
        model.set_params(preprocessor=(Z[tr_sk], Z[tr_ph]))
        model.fit(pairs, y)
        model.set_params(preprocessor=None)
        fit = time.perf_counter() - t0
        D0 = model.cross_distance(Z[te_sk], Z[te_ph])
        out[name.upper()] = {"fit_seconds": round(fit, 2),
                             **_variants(model, Z[te_sk], Z[te_ph], pl, gl, D0)}
    return out


def _table(title: str, res: dict) -> str:
    cols = ("r1", "r5", "r10", "r20", "mAP", "mINP")
    lines = [f"### {title}", "", "| method | variant | " + " | ".join(cols) + " |",
             "|---|---|" + "---:|" * len(cols)]
    for method, rows in res.items():
        for variant, row in rows.items():
            if variant == "fit_seconds":
                continue
            cells = (["n/a"] * len(cols) if "n/a" in row
                     else [f"{row[c]:.1f}" for c in cols])
            lines.append(f"| {method} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    data_home = sys.argv[1] if len(sys.argv) > 1 else str(REPO.parent / "shared" / "data")
    start = machine()
    t0 = time.perf_counter()
    res = {"viper": viper(data_home), "pku_sketch": pku(data_home)}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["machine_start"], res["machine_end"] = start, machine()
    emit(res)
    print(_table("VIPeR, p=316, n-=10, split 0", res["viper"]))
    print()
    print(_table("PKU-Sketch, 50 test persons, split 0", res["pku_sketch"]))


if __name__ == "__main__":
    main()
