"""Two views vs six: MCCA and MvDA on mfeat, retrieval rank-1 across views (JSON).

Half of the 2,000 digits (100 per class, seeded) train ``fit_views`` on either the two views
fou, pix or all six; the other half are probes of one view against a gallery of another.
Rank-1 at two levels: the same digit image (instance) and the same digit class. Reported for
the fou → pix pair (the one both models know) and, for the six-view model, averaged over all
30 ordered view pairs.

    python benchmarks/bench_multiview.py [--data-home DIR] [--components K]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from _common import MFEAT_DIR, emit, machine

from crossmetric.datasets import load_mfeat
from crossmetric.learners.discriminant import MvDA
from crossmetric.learners.multiview import MCCA
from crossmetric.metrics import rank_accuracy

SIX = ("fou", "pix", "fac", "kar", "zer", "mor")


def rank1(model, views, test, labels, a: int, b: int) -> dict:
    D = model.view_distance(views[a][test], a, views[b][test], b)
    return {"instance": round(100 * rank_accuracy(D, test, test), 2),
            "class": round(100 * rank_accuracy(D, labels[test], labels[test]), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-home", default=str(MFEAT_DIR))
    ap.add_argument("--components", type=int, default=20)
    args = ap.parse_args()
    data = load_mfeat(args.data_home, views=SIX)
    rng = np.random.RandomState(0)
    train = np.sort(np.concatenate([rng.permutation(np.flatnonzero(data.labels == c))[:100]
                                    for c in range(10)]))
    test = np.setdiff1d(np.arange(data.labels.size), train)
    out = {"machine": machine(), "n_train": int(train.size), "n_test": int(test.size),
           "components": {"MCCA": args.components, "MvDA": 9}, "results": {}}
    for name in ("MCCA", "MvDA"):
        for n_views in (2, 6):
            views = data.views[:n_views]
            t0 = time.perf_counter()
            if name == "MCCA":
                model = MCCA(n_components=args.components).fit_views([V[train] for V in views])
            else:
                model = MvDA(n_components=9).fit_views([V[train] for V in views],
                                                       data.labels[train])
            fit_s = time.perf_counter() - t0
            row = {"fit_seconds": round(fit_s, 2), "fou->pix": rank1(model, views, test,
                                                                     data.labels, 0, 1)}
            if n_views > 2:
                pairs = [rank1(model, views, test, data.labels, a, b)
                         for a, b in itertools.permutations(range(n_views), 2)]
                row["mean over 30 view pairs"] = {
                    k: round(float(np.mean([p[k] for p in pairs])), 2)
                    for k in ("instance", "class")}
            out["results"][f"{name}, {n_views} views"] = row
    emit(out)


if __name__ == "__main__":
    main()
