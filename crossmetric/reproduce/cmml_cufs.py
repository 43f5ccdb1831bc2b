"""``cmml-cufs``: the CMML paper's Figs. 6-7 on CUFS (rank-1 and accuracy at EER against the
latent dimension and against n⁻, the negatives per positive).

CMML §4 (CUFSF): 500 random training persons, 360 test; the test sketches against the test
photos give the *nearest neighbour accuracy* (rank-1), and one positive and one negative pair
per test person, thresholded at their median distance, the *accuracy at equal error rate*;
10 random splits. Fig. 6 draws both against the latent dimension for CMML (n⁻ = 1), CCA, PLS
and CDFE; Fig. 7 for CMML with n⁻ = 1 … k negatives per positive. What stands in here:

* **Data**: CUFS (AR + XM2VTS, 418 persons; CUFSF's photos are not public), random splits of
  ``N_TEST = 238`` test persons and 180 training persons (the sizes of CUFS's literature
  split), the dense SIFT of :func:`crossmetric.reproduce.cufs.cufs_features` reduced by one
  PCA of both modalities fitted on the split's training images (``pca_components``, default
  200: above every latent dimension of the sweep). The paper used LTP descriptors and the
  χ²-RBF kernel versions of every method; here the linear learners on the PCA features, as
  in ``cml-auc-cufs``.
* **Measures**: rank-1 of the test sketches against the test photos, and ``1 − EER`` over
  every test sketch × test photo pair (the threshold where the false accept and false reject
  rates meet: what the paper's median threshold on balanced pairs estimates, without the
  draw of one negative per person).
* **Model selection**: the swept parameter (latent dimension, n⁻) is fixed per curve point;
  with ``tune=True`` the rest is chosen on the training persons (3 inner folds grouped by
  person, validation rank-1): CMML's iteration count (the registry's
  :data:`crossmetric.registry.ITERATION_STAGE`: the unregularised logistic objective
  overfits 180 persons at its plateau), and the regulariser of CCA and CDFE, which CMML §4
  cross-validates ("For CCA and CDFE the regularization parameters are cross-validated").
* **Speed**: the descriptors are first written in an orthonormal basis of their span
  (:func:`in_span_coordinates`, a rotation: every distance and every later PCA unchanged),
  so that the many per-fold PCAs work on 836 columns instead of 13,696.
* **Splits**: split ``k`` draws the same test persons for every n⁻ (each (n⁻, split) is one
  :func:`crossmetric.protocols.run_protocols` call seeded with split ``k``'s seed), so the
  n⁻ curves compare the same persons; the calls run in parallel (``n_jobs``) and are gathered
  per method by :func:`crossmetric.protocols.batch.run_many` /
  :func:`~crossmetric.protocols.batch.gather`.

The paper prints no values for these figures, and the figures are not in our copy of the
text: no published number is used; the result's ``extra["claims"]`` checks the trends the text
states (:data:`crossmetric.reproduce.published.PUBLISHED` ``["cmml-cufs"]``).
"""

from __future__ import annotations

import os

import numpy as np

from crossmetric._solvers.linalg import span_coordinates
from crossmetric.registry import CDFE_REG_GRID
from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import ReproductionResult, _progress

__all__ = ["CMML_CUFS_DIMS", "CMML_CUFS_NEGATIVES", "CMML_CUFS_METHODS", "reproduce_cmml_cufs",
           "cmml_cufs_figures", "in_span_coordinates"]

#: latent dimensions of the sweep (Figs. 6-7's x axis)
CMML_CUFS_DIMS = (10, 20, 30, 50, 70, 100, 150)
#: negatives per positive of Fig. 7
CMML_CUFS_NEGATIVES = (1, 2, 5, 10, 20)
#: Fig. 6's methods (registry names)
CMML_CUFS_METHODS = ("cmml", "cca", "pls", "cdfe")

#: what ``tune=True`` chooses on the training persons, per method (the swept dimension fixed)
_SELECTION = {"cca": ({"reg": [1e-3, 1e-2, 1e-1]},), "cdfe": ({"reg": list(CDFE_REG_GRID)},)}

#: our measure name -> column
_MEASURES = {"rank1": "rank-1", "one_minus_eer": "acc@EER"}


def _label(method: str, d: int, n: int) -> str:
    from crossmetric.registry import METHODS

    shown = METHODS[method].display
    return f"{shown} n-={n} d={d}" if method == "cmml" else f"{shown} d={d}"


def reproduce_cmml_cufs(data_home, *, n_splits: int = 10, seed: int = 0,
                        verbose: bool = True, n_jobs: int | None = None, methods=None,
                        dims=CMML_CUFS_DIMS, negatives=CMML_CUFS_NEGATIVES,
                        pca_components: int = 200, tune: bool = True,
                        n_persons=None) -> ReproductionResult:
    """CMML Figs. 6-7 on CUFS (see the module docstring for every choice).

    Parameters
    ----------
    data_home : path
        Folder holding ``cufs/``.
    n_splits : int, default=10
    seed : int, default=0
    verbose : bool, default=True
    n_jobs : int, optional
        Parallel :func:`~crossmetric.protocols.run_protocols` calls (one per n⁻ and split).
    methods : sequence of str, optional
        Fig. 6's methods, some of :data:`CMML_CUFS_METHODS` (CMML always runs: Fig. 7).
    dims : sequence of int, default=:data:`CMML_CUFS_DIMS`
    negatives : sequence of int, default=:data:`CMML_CUFS_NEGATIVES`
        n⁻ values of Fig. 7 (Fig. 6 uses n⁻ = 1 and runs when 1 is among them).
    pca_components : int, default=200
    tune : bool, default=True
        Choose CMML's iteration count and the CCA / CDFE regulariser on the training persons.
    n_persons : int, optional
        Use only this many random persons, 57 % of them test (smoke runs).

    Returns
    -------
    ReproductionResult
    """
    from crossmetric._utils.checks import check_positive_int
    from crossmetric.protocols.batch import Run, gather, run_many
    from crossmetric.registry import ITERATION_STAGE, METHODS, make_estimator
    from crossmetric.reproduce.cufs import N_TEST, cufs_features

    names = list(CMML_CUFS_METHODS if methods is None else
                 ([methods] if isinstance(methods, str) else methods))
    unknown = [m for m in names if m not in CMML_CUFS_METHODS]
    if unknown:
        raise ValueError(f"methods: {unknown[0]!r} is not a method of cmml-cufs; expected "
                         f"some of {', '.join(CMML_CUFS_METHODS)}.")
    if "cmml" not in names:
        names.insert(0, "cmml")
    dims = sorted({check_positive_int(d, "dims") for d in dims})
    negatives = sorted({check_positive_int(n, "negatives") for n in negatives})
    if not dims or not negatives:
        raise ValueError("dims and negatives must each name at least one value.")
    n_splits = check_positive_int(n_splits, "n_splits")
    rng = np.random.RandomState(seed)
    _progress(verbose, "cmml-cufs: dense SIFT of 836 CUFS faces")
    data = cufs_features(data_home)
    n_test = N_TEST
    if n_persons is not None:
        n_persons = check_positive_int(n_persons, "n_persons", minimum=8)
        keep = np.sort(rng.choice(data["labels"].size, min(n_persons, data["labels"].size),
                                  replace=False))
        data = {k: v[keep] for k, v in data.items()}
        n_test = int(round(keep.size * N_TEST / (N_TEST + 180)))
    X, Y = in_span_coordinates(data["X"], data["Y"])
    data = {"X": X, "Y": Y, "labels": data["labels"]}
    seeds = [int(s) for s in rng.randint(2**31 - 1, size=n_splits)]
    selection = {"cmml": (ITERATION_STAGE,), **_SELECTION}

    def task(n):
        chosen = names if n == 1 else ["cmml"]
        est = {_label(m, d, n): make_estimator(m, paper=True, n_components=d)
               for m in chosen for d in dims}
        if n == 1:   # the untrained floor on the same PCA features (no latent dimension)
            est["Euclidean"] = make_estimator("euclidean", paper=True)
        grids = ({_label(m, d, n): list(selection[m]) for m in chosen if m in selection
                  for d in dims} if tune else None)
        return est, grids

    specs = {n: task(n) for n in negatives}
    calls = [(n, k) for n in negatives for k in range(n_splits)]
    _progress(verbose, f"cmml-cufs: {len(calls)} runs (n- in {negatives} x {n_splits} splits), "
                       f"{len(dims)} dimensions, PCA-{pca_components}, {n_test} test persons"
                       + (", iterations / regularisers chosen on training persons"
                          if tune else ""))
    runs = [Run({"split": k}, specs[n][0], data, {
        "n_negatives": n, "random_state": seeds[k], "param_grids": specs[n][1]})
        for n, k in calls]
    got = gather(runs, run_many(runs, n_jobs=n_jobs, options={
        "protocols": ("identification",), "n_repeats": 1, "test_size": n_test,
        "max_train_positives": None, "pca_components": pca_components, "pca_joint": True,
        "pair_measures": True, "on_error": "record", "tune_scoring": "rank1", "max_rank": 20}))
    errors, tuned = got.errors, got.tuned
    values = {lab: {meas: [100 * v for v in vals[meas]] for meas in _MEASURES if meas in vals}
              for lab, vals in got.values.items()}   # label -> measure -> [% per split]
    out = ReproductionResult("cmml-cufs", PUBLISHED["cmml-cufs"]["source"])
    curves: dict = {"dims": dims, "fig6": {}, "fig7": {}}
    rows = [(m, 1) for m in names if 1 in negatives] + [("cmml", n) for n in negatives
                                                        if n != 1]
    for m, n in rows:
        shown = f"CMML n-={n}" if m == "cmml" else METHODS[m].display
        fig = "fig7" if m == "cmml" else "fig6"
        for d in dims:
            lab = _label(m, d, n)
            for meas, col in _MEASURES.items():
                vals = values.get(lab, {}).get(meas, [])
                out.add(f"d={d}", shown, col, vals,
                        note=f"failed: {errors[lab]}" if lab in errors else "")
                cur = curves[fig].setdefault(n if fig == "fig7" else shown, {})
                cur.setdefault(col, []).append(float(np.mean(vals)) if vals else np.nan)
                cur.setdefault(col + " sem", []).append(
                    float(np.std(vals) / np.sqrt(len(vals))) if vals else np.nan)
    if 1 in negatives:
        curves["fig6"] = {"CMML": curves["fig7"][1], **curves["fig6"]}
        curves["euclidean"] = {}
        for meas, col in _MEASURES.items():
            vals = values.get("Euclidean", {}).get(meas, [])
            out.add(f"PCA-{pca_components}", "Euclidean (reference)", col, vals)
            curves["euclidean"][col] = float(np.mean(vals)) if vals else np.nan
    out.extra.update({"curves": curves, "claims": _claims(curves), "tuned": tuned,
                      "errors": errors, "pca_components": pca_components, "n_test": n_test,
                      "load_avg": round(os.getloadavg()[0], 2)})
    for c in out.extra["claims"]:
        _progress(verbose, f"cmml-cufs: {c['claim']}: {c['ours']}")
    return out


def in_span_coordinates(X: np.ndarray, Y: np.ndarray):
    """``X`` and ``Y`` in an orthonormal basis of the span of all their rows.

    A rotation onto the span (:func:`crossmetric._solvers.linalg.span_coordinates` of the
    stacked rows): every distance, inner product and every PCA fitted later on any subset of
    the rows -- the per-split PCA of the training images -- gives the same coordinates up to
    sign, while each PCA costs O(n²·n) instead of O(n²·d) (836 rows against 13,696 dense SIFT
    features: 1 s instead of 9 s per PCA, and the sweep fits one per candidate and inner
    fold). No label and no choice is involved.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.reproduce.cmml_cufs import in_span_coordinates
    >>> rng = np.random.RandomState(0)
    >>> X, Y = rng.normal(size=(4, 50)), rng.normal(size=(4, 50))
    >>> Xq, Yq = in_span_coordinates(X, Y)
    >>> Xq.shape, bool(np.allclose(Xq @ Yq.T, X @ Y.T))
    ((4, 8), True)
    """
    V = np.vstack([X, Y])
    if V.shape[0] >= V.shape[1]:
        return X, Y
    Z = span_coordinates(V)  # the library's one span step (Z Zᵀ = V Vᵀ)
    return Z[:X.shape[0]], Z[X.shape[0]:]


def _claims(curves: dict) -> list[dict]:
    """The paper's stated trends (§4.2, 'Results on CUFSF'), measured on our curves."""
    out = []
    dims = curves["dims"]
    fig6, fig7 = curves["fig6"], curves["fig7"]
    if "CMML" in fig6 and len(fig6) > 1:
        r1 = {m: np.asarray(c["rank-1"]) for m, c in fig6.items()}
        others = [m for m in r1 if m != "CMML"]
        wins = int(np.sum(np.all([r1["CMML"] > r1[m] for m in others], axis=0)))
        out.append({"claim": "Fig. 6: CMML above " + ", ".join(others) + " at rank-1",
                    "ours": f"at {wins} of {len(dims)} dimensions"})
        best = np.nanmax(r1["CMML"])
        sat = next((d for d, v in zip(dims, r1["CMML"], strict=True) if v >= best - 1.0), None)
        out.append({"claim": "Fig. 6: CMML's rank-1 saturates around 70 dimensions",
                    "ours": f"within 1 point of its best ({best:.1f} %) from d = {sat}"})
        eer = np.asarray(fig6["CMML"]["acc@EER"])
        out.append({"claim": "Fig. 6: CMML's accuracy at EER roughly flat over dimensions",
                    "ours": f"{np.nanmin(eer):.1f} - {np.nanmax(eer):.1f} %"})
    if len(fig7) > 1 and 1 in fig7:
        r1 = np.array([fig7[n]["rank-1"] for n in sorted(fig7)])
        best_n = np.array(sorted(fig7))[np.nanargmax(r1, axis=0)]
        out.append({"claim": "Fig. 7: n- = 1 gives the best rank-1",
                    "ours": "best n- per dimension: " + ", ".join(
                        f"d={d}: {n}" for d, n in zip(dims, best_n, strict=True))})
    return out


def cmml_cufs_figures(result: ReproductionResult, out: str) -> list[str]:
    """Figs. 6 and 7 (rank-1 and accuracy at EER against the latent dimension) as PNGs."""
    from crossmetric import plotting

    curves = result.extra.get("curves")
    if not curves:
        return []
    files = []
    for fig_name, key, legend in (("fig6", "fig6", "{}"), ("fig7", "fig7", "CMML n- = {}")):
        for col, fname in (("rank-1", "rank1"), ("acc@EER", "eer")):
            if not curves[key]:
                continue
            fig, ax = plotting._figure()
            for name, c in curves[key].items():
                ax.errorbar(curves["dims"], c[col], yerr=c[col + " sem"], marker="o",
                            capsize=3, label=legend.format(name))
            ref = curves.get("euclidean", {}).get(col)
            if key == "fig6" and ref is not None and np.isfinite(ref):
                ax.axhline(ref, color="k", lw=1, ls=":", label="Euclidean (PCA features)")
            ax.set_xlabel("latent dimension")
            ax.set_ylabel("nearest neighbour accuracy (rank-1, %)" if col == "rank-1"
                          else "accuracy at EER (1 - EER, %)")
            what = ("CMML (n- = 1), CCA, PLS, CDFE" if key == "fig6"
                    else "CMML for n- negatives per positive")
            ax.set_title(f"CUFS: {what} (CMML {fig_name.replace('fig', 'Fig. ')})",
                         fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
            files.append(plotting.save_figure(fig, os.path.join(out, f"{fig_name}_{fname}.png")))
    return files
