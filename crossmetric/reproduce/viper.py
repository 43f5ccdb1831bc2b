"""VIPeR: PCCA Table 2 (``pcca-viper``), Fig. 3 (``pcca-viper-convergence``) and Fig. 6
(``pcca-viper-negatives``); see :mod:`crossmetric.reproduce` for the choices the paper leaves
open."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

from crossmetric.protocols.model_selection import CMC_SCORE_RANK, mean_cmc, search_params
from crossmetric.protocols.reid import CMC_RANKS, evaluate_reid, reid_splits
from crossmetric.protocols.views import PCAThen
from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import GUARDED, ReproductionResult, _progress

__all__ = ["ITER_GRID", "PCCA_VARIANTS", "viper_features", "select_max_iter",
           "reproduce_pcca_viper", "reproduce_pcca_viper_negatives",
           "reproduce_pcca_viper_convergence"]

#: ``max_iter`` values tried on the validation persons (see the module docstring)
ITER_GRID = (5, 10, 20, 40, 80, 160, 320)


def viper_features(data_home) -> dict:
    """VIPeR images → StripHistograms with the whole vector normalised to unit L1."""
    from crossmetric.datasets import load_viper
    from crossmetric.features import StripHistograms

    b = load_viper(data_home)
    X = StripHistograms(normalize="vector").fit_transform(b.images)
    return {"X": X, "ids": b.ids, "domains": b.domains}


def _pcca(kernel: str, *, guarded: bool = False, **params):
    """Table 2's PCCA: the paper's own start and plain optimisation, or with ``guarded`` the
    library's start and held-out guard (PCCA's defaults of
    :data:`crossmetric.registry.GUARD_PARAMS`, as :func:`~crossmetric.registry.
    guarded_estimator` leaves them)."""
    from crossmetric import PCCA

    if kernel == "linear":
        params.setdefault("solver", "lbfgs")
    if not guarded:
        params.setdefault("init", "pca")
        params.setdefault("early_stopping", False)
    return PCCA(n_components=40, beta=3.0, kernel=kernel, **params)


#: Table 2's PCCA variants: method → (feature map, PCCA kernel, extra parameters)
PCCA_VARIANTS = {
    "PCCA-sqrt": ("sqrt", "linear", {}),
    "PCCA-chi2": ("identity", "chi2", {}),
    "PCCA-chi2RBF": ("identity", "chi2_rbf", {"gamma": 1.0}),
}


def _feature_map(X: np.ndarray, name: str) -> np.ndarray:
    return np.sqrt(X) if name == "sqrt" else X


def select_max_iter(estimator, X, ids, domains, split, *, n_negatives: int,
                    grid=ITER_GRID, validation_fraction: float = 0.25,
                    random_state=None) -> tuple[int, dict]:
    """Choose ``max_iter`` on the training persons of ``split`` only.

    A ``validation_fraction`` of the training persons (drawn by identity) is held out as
    probe / gallery, the model is fitted on the pairs of the other persons (drawn as in
    :func:`crossmetric.protocols.reid.reid_splits`) with each ``max_iter`` of ``grid``, and the
    value with the highest validation CMC averaged over ranks 1-20 wins (the smaller on ties). The
    scan stops once two consecutive values score below the best so far (overfitting sets in).
    The scan is :func:`crossmetric.protocols.model_selection.search_params` (``folds=`` that one
    hold-out, ``patience=2``) measuring each value with
    :func:`crossmetric.protocols.reid.evaluate_reid`.

    Returns
    -------
    (int, dict)
        The chosen ``max_iter`` and ``{max_iter: validation score}``.
    """
    ids = np.asarray(ids)
    rows = np.unique(split.train_pairs)
    persons = np.unique(ids[rows])
    n_val = max(2, int(round(validation_fraction * persons.size)))
    inner = reid_splits(ids[rows], np.asarray(domains)[rows], n_val, n_negatives=n_negatives,
                        n_splits=1, random_state=random_state)[0]
    # back to row numbers of X
    inner.train_pairs = rows[inner.train_pairs]
    inner.probe_rows, inner.gallery_rows = rows[inner.probe_rows], rows[inner.gallery_rows]

    def mean_cmc20(est, fold) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # capped runs warn by design
            res = evaluate_reid(est, X, ids, fold, max_rank=CMC_SCORE_RANK)
        return mean_cmc(res["cmc"])

    res = search_params(estimator, {"max_iter": [int(m) for m in grid]}, X, None, ids,
                        folds=[inner], cross_modal=False, patience=2, evaluate=mean_cmc20,
                        on_error="raise")
    scores = {int(c["params"]["max_iter"]): c["mean_score"] for c in res.candidates}
    return int(res.best_params["max_iter"]), scores


def _viper_split(estimator, X, ids, domains, split, n_negatives: int, select: bool,
                 seed: int) -> dict:
    """One split: choose ``max_iter`` (when ``select``), fit, measure (runs in a worker)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        t0, c0 = time.perf_counter(), time.process_time()
        est, chosen = estimator, None
        if est is not None and select:
            chosen, _ = select_max_iter(est, X, ids, domains, split, n_negatives=n_negatives,
                                        random_state=seed)
            est = clone(est).set_params(max_iter=chosen)
        res = evaluate_reid(est, X, ids, split)
        res.pop("model")
        res["max_iter"], res["seconds"] = chosen, time.perf_counter() - t0
        res["cpu_seconds"] = time.process_time() - c0
    return res


def _viper_run(name: str, estimator, X, ids, domains, splits, *, n_negatives: int,
               select: bool, seed: int, n_jobs: int = -1) -> dict:
    """Fit/evaluate ``estimator`` on every split (``None`` = Euclidean), splits in parallel."""
    from joblib import Parallel, delayed

    rng = check_random_state(seed)
    seeds = [int(rng.randint(2**31 - 1)) for _ in splits]
    results = Parallel(n_jobs=n_jobs if estimator is not None else 1)(
        delayed(_viper_split)(estimator, X, ids, domains, s, n_negatives, select, sd)
        for s, sd in zip(splits, seeds, strict=True))
    per = np.array([[100 * r[f"rank{k}"] for k in CMC_RANKS] for r in results])
    return {"per_split": per, "cmc": np.mean([r["cmc"] for r in results], axis=0),
            "max_iter": [r["max_iter"] for r in results if r["max_iter"] is not None],
            "seconds": float(sum(r["seconds"] for r in results)),
            "cpu_seconds": float(sum(r["cpu_seconds"] for r in results)),
            "warnings": sorted({w for r in results for w in r["warnings"]})}


def _itml_estimator():
    """``crossmetric.ITML`` when this installation has it (helper module ``itml``), else the
    reason it is missing."""
    try:
        from crossmetric.learners.itml import ITML
    except ImportError as exc:
        return None, f"ITML not available in this installation ({exc})"
    return ITML, None


def reproduce_pcca_viper(data_home, *, n_splits: int = 10, seed: int = 0, verbose=True,
                         ps=(316, 532), negatives=(1, 10), itml: bool = True,
                         variants=None, n_jobs: int = -1,
                         guarded: bool = True) -> ReproductionResult:
    """PCCA Table 2 (see the module docstring for the choices).

    ``guarded``: beside each PCCA variant's paper run (the PCA start, the iteration count
    chosen on held-out training persons, :func:`select_max_iter`), the row "VARIANT guarded
    n-=N": the same PCCA with the library's start and held-out guard (``init="auto"``,
    ``early_stopping="auto"``: the kept check replaces the iteration count) on the same splits.
    """
    pub = PUBLISHED["pcca-viper"]
    res = ReproductionResult("pcca-viper", pub["source"])
    data = viper_features(data_home)
    X, ids, dom = data["X"], data["ids"], data["domains"]
    variants = list(PCCA_VARIANTS) if variants is None else list(variants)
    res.extra.update({"max_iter": {}, "seconds": {}, "cmc": {}, "per_split": {},
                      "warnings": {}})
    for p in ps:
        setting = f"p={p}"
        for ref in ("PRDC", "MCC", "ITML"):
            for (pp, meth, nn), vals in pub["rows"].items():
                if pp == p and meth == ref:
                    for meas, v in zip(pub["measures"], vals, strict=True):
                        res.add(setting, f"{meth} n-={nn} (published)", meas, [], v,
                                note="quoted by the paper from PRDC [33]")
        splits_by_n = {n: reid_splits(ids, dom, p, n_negatives=n, n_splits=n_splits,
                                      random_state=seed) for n in negatives}
        runs = [("Euclidean", None, negatives[0], "identity")]
        for n in negatives:
            for v in variants:
                fmap, kernel, params = PCCA_VARIANTS[v]
                runs.append((v, _pcca(kernel, **params), n, fmap))
                if guarded:
                    runs.append((f"{v} {GUARDED}", _pcca(kernel, guarded=True, **params),
                                 n, fmap))
        if itml:
            cls, why = _itml_estimator()
            runs.append(("ITML", cls, max(negatives), "sqrt") if cls else ("ITML", why, None,
                                                                             None))
        for method, est, n, fmap in runs:
            key = f"{setting} {method} n-={n}"
            if isinstance(est, str):  # unavailable
                for meas in pub["measures"]:
                    res.add(setting, "ITML", meas, [], None, note=est)
                continue
            if method == "ITML":
                est = _itml_for_viper(est)
            _progress(verbose, f"[pcca-viper] {key} ...")
            run = _viper_run(method, est, _feature_map(X, fmap), ids, dom, splits_by_n[n],
                             n_negatives=n, select=(est is not None and method != "ITML"
                                                    and not method.endswith(GUARDED)),
                             seed=seed + p + n, n_jobs=n_jobs)
            paper = pub["rows"].get((p, method, n))
            label = method if method == "Euclidean" else f"{method} n-={n}"
            for k, meas in enumerate(pub["measures"]):
                res.add(setting, label, meas, run["per_split"][:, k],
                        None if paper is None else paper[k])
            res.extra["max_iter"][key] = run["max_iter"]
            res.extra["seconds"][key] = run["seconds"]
            res.extra.setdefault("cpu_seconds", {})[key] = run["cpu_seconds"]
            res.extra["cmc"][key] = run["cmc"]
            res.extra["per_split"][key] = run["per_split"]
            res.extra["warnings"][key] = run["warnings"]
            _progress(verbose, f"    rank-1 {run['per_split'][:, 0].mean():.2f}  rank-20 "
                               f"{run['per_split'][:, 3].mean():.2f}  max_iter {run['max_iter']} "
                               f"({run['seconds']:.1f} s in the workers, "
                               f"{run['cpu_seconds']:.1f} s CPU)")
    return res


def _itml_for_viper(cls):
    """ITML on PCA-reduced square-rooted histograms (ITML learns a full d × d matrix: the
    PCCA paper notes it must be preceded by a dimensionality reduction)."""
    return _PCAThen(cls(), n_components=64)


#: the view step's "PCA, then a learner" (:class:`crossmetric.protocols.PCAThen`, scikit-learn's
#: default PCA solver as before), under its former name
_PCAThen = PCAThen


def reproduce_pcca_viper_negatives(data_home, *, n_splits: int = 10, seed: int = 0,
                                   verbose=True, ps=(316, 532),
                                   negatives=(1, 2, 5, 10, 20),
                                   n_jobs: int = -1) -> ReproductionResult:
    """PCCA Fig. 6: CMC@20 of PCCA-χ²RBF against n⁻ (iterations chosen per split).

    Five values of n⁻ by default (the figure's 1-20 range; each point costs a full 10-split
    PCCA-χ²RBF run, so the default stays near twice the ``pcca-viper`` budget)."""
    pub = PUBLISHED["pcca-viper-negatives"]
    res = ReproductionResult("pcca-viper-negatives", pub["source"])
    data = viper_features(data_home)
    X, ids, dom = data["X"], data["ids"], data["domains"]
    fmap, kernel, params = PCCA_VARIANTS["PCCA-chi2RBF"]
    est = _pcca(kernel, **params)
    curves = {}
    for p in ps:
        means, sems = [], []
        for n in negatives:
            _progress(verbose, f"[pcca-viper-negatives] p={p} n-={n} ...")
            splits = reid_splits(ids, dom, p, n_negatives=n, n_splits=n_splits,
                                 random_state=seed)
            run = _viper_run("PCCA-chi2RBF", est, _feature_map(X, fmap), ids, dom, splits,
                             n_negatives=n, select=True, seed=seed + p + n, n_jobs=n_jobs)
            r20 = run["per_split"][:, 3]
            res.add(f"p={p}", f"PCCA-chi2RBF n-={n}", "r20", r20, pub["rows"].get((p, n)))
            means.append(r20.mean())
            sems.append(r20.std(ddof=1) / np.sqrt(r20.size) if r20.size > 1 else 0.0)
            _progress(verbose, f"    rank-20 {r20.mean():.2f} ({run['seconds']:.1f} s)")
        curves[p] = {"n_negatives": list(negatives), "r20": means, "sem": sems}
    res.extra["curves"] = curves
    return res


def reproduce_pcca_viper_convergence(data_home, *, n_splits: int = 1, seed: int = 0,
                                     verbose=True, max_iter: int = 500) -> ReproductionResult:
    """PCCA Fig. 3: kernel PCCA-χ²RBF objective per iteration, with and without the K⁻¹
    preconditioner (the paper's gradient descent, same start, p = 316, n⁻ = 10)."""
    pub = PUBLISHED["pcca-viper-convergence"]
    res = ReproductionResult("pcca-viper-convergence", pub["source"])
    data = viper_features(data_home)
    X, ids, dom = data["X"], data["ids"], data["domains"]
    splits = reid_splits(ids, dom, 316, n_negatives=10, n_splits=max(1, n_splits),
                         random_state=seed)
    curves, ratios = {}, []
    for s in splits:
        c = {}
        for pre in (True, False):
            est = _pcca("chi2_rbf", gamma=1.0, solver="gd", preconditioned=pre,
                        max_iter=max_iter, tol=0.0, random_state=s.seed, preprocessor=X)
            _progress(verbose, f"[pcca-viper-convergence] split {s.index} "
                               f"preconditioned={pre} ...")
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(s.train_pairs, s.train_y)
            c[pre] = (np.asarray(est.loss_curve_), time.perf_counter() - t0)
        pre_curve, plain_curve = c[True][0], c[False][0]
        target = plain_curve[-1]
        reach = int(np.argmax(pre_curve <= target)) + 1 if np.any(pre_curve <= target) \
            else pre_curve.size
        ratios.append(plain_curve.size / reach)
        curves[s.index] = {"preconditioned": pre_curve, "plain": plain_curve,
                           "seconds": {"preconditioned": c[True][1], "plain": c[False][1]},
                           "preconditioned_iterations_to_plain_final": reach}
        for name, curve in (("preconditioned", pre_curve), ("plain gradient", plain_curve)):
            for it in (10, 100, curve.size):
                if it <= curve.size:
                    res.add(f"split {s.index}", f"objective, {name}", f"it {it}"
                            if it != curve.size else f"it {it} (last)", [curve[it - 1]])
    res.add("all", "slowdown without preconditioning", "ratio", ratios, pub["slowdown"],
            note="iterations of the plain run / iterations the preconditioned run needs to "
                 "reach the plain run's final objective")
    res.extra["curves"] = curves
    return res
