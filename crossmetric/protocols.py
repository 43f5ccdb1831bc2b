"""Evaluation protocols of the papers and a runner that turns them into a results table.

* **Verification** (LFW / CMML / CML-AUC): k folds; a model is trained on the pairs of k − 1
  folds and scored on the pairs of the held-out fold; measures are reported as mean ± standard
  deviation (and standard error ``σ/√k``) over the folds. :func:`kfold_pairs` splits a fixed
  set of pairs (LFW's ``pairs.txt``); :func:`verification_splits` first splits the *samples* of
  a labelled dataset into folds and then draws pairs inside each part with
  :func:`crossmetric.pairs.make_pairs`. The headline ``accuracy`` uses the threshold chosen on
  the training folds (the learner's ``threshold_``, LFW's rule), never the test distances;
  VR@FPR is taken over every cross pair of a fold's held-out samples (see
  :func:`_verification_extras`).
* **Identification** (VIPeR in PCCA, CUFSF in CML-AUC, GSM): repeated random splits; the test
  objects' first modality is the probe set, their second modality the gallery
  (:func:`identification_splits`); measures are CMC / rank-r / mAP.
* :func:`run_protocols` fits named estimators (cloned for every split) under both protocols,
  in parallel through joblib (and so on a Dask cluster with ``joblib.parallel_config("dask")``),
  and returns a :class:`BenchmarkResult` -- a tidy table (method × measure, mean ± std).

Every random choice (splits, pairs, the seeds handed to estimators whose ``random_state`` is
``None``) is drawn in the calling process from ``random_state`` before any work is dispatched,
so results do not depend on the joblib backend or the number of workers.
"""

from __future__ import annotations

import csv
import inspect
import json
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import check_random_state

from crossmetric import metrics as M
from crossmetric._checks import (
    as_float_array,
    check_pair_labels,
    check_positive_int,
    user_stacklevel,
)
from crossmetric.pairs import make_pairs

__all__ = [
    "Split",
    "kfold_pairs",
    "verification_splits",
    "identification_splits",
    "CCAProjection",
    "run_protocols",
    "run_pair_folds",
    "BenchmarkResult",
    "MEASURES",
]

#: measure key -> (column title, scale for display, protocol)
MEASURES = {
    "auc": ("AUC", 1.0, "verification"),
    "one_minus_eer": ("1-EER(%)", 100.0, "verification"),
    "vr": ("VR@0.1%(%)", 100.0, "verification"),
    "pauc": ("pAUC[0,.1]", 1.0, "verification"),
    "accuracy": ("Acc(%)", 100.0, "verification"),
    "acc_median": ("Acc@med(%)", 100.0, "verification"),
    "rank1": ("Rank-1(%)", 100.0, "identification"),
    "rank5": ("Rank-5(%)", 100.0, "identification"),
    "rank10": ("Rank-10(%)", 100.0, "identification"),
    "map": ("mAP(%)", 100.0, "identification"),
    "nn_accuracy": ("NN(%)", 100.0, "identification"),
    "fit_seconds": ("fit(s)", 1.0, "both"),
}

#: ``results.json`` written by :meth:`BenchmarkResult.to_json` (version 1: no format keys)
RESULT_FORMAT = "crossmetric-benchmark-result"
RESULT_VERSION = 2
#: columns of :meth:`BenchmarkResult.table` by default. ``acc_median`` is left out: it sets its
#: threshold on the test distances themselves (on the balanced test pairs of
#: :func:`verification_splits` it equals ``1 − EER`` exactly); it stays in the records. The
#: headline accuracy is ``accuracy`` (LFW's rule: threshold chosen on the training folds).
TABLE_MEASURES = ("auc", "one_minus_eer", "vr", "pauc", "accuracy", "rank1", "rank5", "rank10",
                  "map", "fit_seconds")

#: FPR grid on which ROC curves of different folds are averaged (vertical averaging)
ROC_GRID = np.unique(np.r_[0.0, np.logspace(-4, 0, 81), np.linspace(0, 1, 101)])


# ------------------------------------------------------------------------------- splits
@dataclass
class Split:
    """One train/test unit of a protocol.

    ``train_pairs`` index rows of ``(X, Y)`` (column 0: ``X``, column 1: ``Y``). Verification
    splits carry ``test_pairs`` / ``test_y`` and, in ``probe_rows``, the fold's held-out rows;
    identification splits ``probe_rows`` (rows of ``X``) and ``gallery_rows`` (rows of ``Y``).
    ``seed`` is handed to an estimator whose ``random_state`` is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import Split
    >>> sp = Split("verification", 0, np.array([[0, 1]]), np.array([1]))
    >>> sp.protocol, sp.train_pairs.shape
    ('verification', (1, 2))
    """

    protocol: str
    index: int
    train_pairs: np.ndarray
    train_y: np.ndarray
    test_pairs: np.ndarray | None = None
    test_y: np.ndarray | None = None
    probe_rows: np.ndarray | None = None
    gallery_rows: np.ndarray | None = None
    seed: int = 0


def kfold_pairs(y, n_folds: int = 10, *, folds=None, random_state=None
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """k-fold split of a fixed set of labelled pairs (LFW View 2 style).

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        +1 / -1 labels; folds are stratified so that each has both.
    n_folds : int, default=10
    folds : array-like of shape (n_pairs,), optional
        Predefined fold of every pair (e.g. ``read_lfw_pairs(...).fold``); overrides
        ``n_folds`` and ``random_state``.
    random_state : int, RandomState or None
        Shuffles the pairs before the stratified split.

    Returns
    -------
    list of (train_index, test_index)
        Test folds are disjoint and together cover every pair.

    Examples
    --------
    >>> from crossmetric.protocols import kfold_pairs
    >>> folds = kfold_pairs([1, 1, 1, -1, -1, -1], n_folds=3, random_state=0)
    >>> [test.size for _, test in folds]
    [2, 2, 2]
    """
    y = check_pair_labels(y)
    if folds is not None:
        folds = np.asarray(folds)
        if folds.shape != y.shape:
            raise ValueError(f"folds must have one entry per pair ({y.shape[0]}), got shape "
                             f"{folds.shape}.")
        ids = np.unique(folds)
        if ids.size < 2:
            raise ValueError("folds must name at least two different folds.")
        return [(np.flatnonzero(folds != f), np.flatnonzero(folds == f)) for f in ids]
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True,
                          random_state=check_random_state(random_state).randint(2**31 - 1))
    return [(tr, te) for tr, te in skf.split(np.zeros(y.size), y)]


def _pairs_among(rows: np.ndarray, labels: np.ndarray, *, cross_modal: bool, n_negatives: int,
                 max_positives: int | None, rng) -> tuple[np.ndarray, np.ndarray]:
    """``make_pairs`` on a subset of rows, returned as indices into the full arrays."""
    lab = labels[rows]
    pairs, y = make_pairs(lab, lab if cross_modal else None, n_negatives=n_negatives,
                          max_positives=max_positives, random_state=rng)
    return rows[pairs], y


def _sample_folds(labels: np.ndarray, n_folds: int, split: str, rng) -> list[np.ndarray]:
    """Test rows of each fold: identity-disjoint or stratified by identity."""
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= max(20, 2 * n_folds) else "sample"
    if split == "identity":
        if ids.size < 2 * n_folds:
            raise ValueError(
                f"split='identity' needs at least 2 identities per fold: {ids.size} "
                f"identities for n_folds={n_folds}."
            )
        fold_of_id = rng.permutation(ids.size) % n_folds
        fold = fold_of_id[codes]
        return [np.flatnonzero(fold == f) for f in range(n_folds)]
    if split != "sample":
        raise ValueError(f"split must be 'auto', 'identity' or 'sample', got {split!r}.")
    min_count = np.bincount(codes).min()
    if min_count < n_folds:
        warnings.warn(f"an identity has only {min_count} samples, fewer than n_folds="
                      f"{n_folds}; some folds lack it.", UserWarning, stacklevel=user_stacklevel())
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=rng.randint(2**31 - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return [te for _, te in skf.split(np.zeros(labels.size), codes)]


def verification_splits(labels, n_folds: int = 10, *, cross_modal: bool = True,
                        n_negatives: int = 1, n_test_negatives: int = 1,
                        max_train_positives: int | None = 2000,
                        max_test_positives: int | None = 1000, split: str = "auto",
                        random_state=None) -> list[Split]:
    """k-fold verification on a labelled dataset whose row ``r`` of ``X`` and ``Y`` is one object.

    The rows are split into ``n_folds`` parts. ``split="identity"`` puts every identity in one
    part only (LFW: "people cannot be represented in more than one set"); ``"sample"``
    stratifies the rows by identity (each part holds every identity -- the only choice when
    there are few identities, such as the 10 digit classes); ``"auto"`` takes ``identity`` when
    there are at least 20 identities and two per fold, else ``sample``.

    Fold ``k`` trains on pairs drawn among the other parts (``n_negatives`` negatives per
    positive, at most ``max_train_positives`` positives) and is tested on pairs drawn among its
    own rows (``n_test_negatives`` per positive, at most ``max_test_positives``; the default 1
    makes the test set balanced as in LFW and CMML, so that the median-threshold accuracy sits
    at the EER).

    Returns
    -------
    list of Split
        ``protocol="verification"``. The test rows of the folds are disjoint and cover every row.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import verification_splits
    >>> labels = np.repeat(np.arange(6), 5)
    >>> splits = verification_splits(labels, n_folds=3, random_state=0)
    >>> len(splits), splits[0].protocol, sorted(set(splits[0].test_y.tolist()))
    (3, 'verification', [-1, 1])
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError(f"labels must be a 1-D array of at least 4 identities, got shape "
                         f"{labels.shape}.")
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    rng = check_random_state(random_state)
    parts = _sample_folds(labels, n_folds, split, rng)
    out = []
    for k, test_rows in enumerate(parts):
        train_rows = np.sort(np.concatenate([p for j, p in enumerate(parts) if j != k]))
        test_rows = np.sort(test_rows)
        tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_train_positives,
                                  rng=rng)
        te_p, te_y = _pairs_among(test_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_test_negatives,
                                  max_positives=max_test_positives, rng=rng)
        out.append(Split("verification", k, tr_p, tr_y, test_pairs=te_p, test_y=te_y,
                         probe_rows=test_rows, seed=int(rng.randint(2**31 - 1))))
    return out


def identification_splits(labels, n_repeats: int = 10, *, test_size: float | int = 0.3,
                          cross_modal: bool = True, n_negatives: int = 1,
                          max_train_positives: int | None = 2000, split: str = "auto",
                          random_state=None) -> list[Split]:
    """Repeated random gallery / probe splits (VIPeR in PCCA §4.2, CUFSF in CML-AUC §IV).

    Each repetition puts ``p`` identities (``split="identity"``; ``test_size`` is ``p`` when an
    integer, a fraction of the identities when a float) or a stratified fraction of the rows
    (``split="sample"``, for datasets with few identities) in the test set and trains on pairs
    drawn among the others. The test objects' first modality (rows of ``X``) is the probe set
    and their second modality (rows of ``Y``) the gallery -- as photo probes against a sketch
    gallery in CUFSF. ``"auto"`` takes ``identity`` when there are at least 20 identities.
    With ``cross_modal=False`` (one modality) the gallery is one random sample per test
    identity and the identity's other test samples are the probes ("single-shot" gallery).

    Returns
    -------
    list of Split
        ``protocol="identification"`` with ``probe_rows`` and ``gallery_rows``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import identification_splits
    >>> labels = np.repeat(np.arange(30), 2)
    >>> sp = identification_splits(labels, n_repeats=2, test_size=10, random_state=0)[0]
    >>> sp.probe_rows.size, np.unique(labels[sp.gallery_rows]).size
    (20, 10)
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError(f"labels must be a 1-D array of at least 4 identities, got shape "
                         f"{labels.shape}.")
    n_repeats = check_positive_int(n_repeats, "n_repeats")
    rng = check_random_state(random_state)
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= 20 else "sample"
    if split not in ("identity", "sample"):
        raise ValueError(f"split must be 'auto', 'identity' or 'sample', got {split!r}.")
    units = ids.size if split == "identity" else labels.size
    if isinstance(test_size, bool) or not isinstance(test_size, int | float | np.number):
        raise ValueError(f"test_size must be a fraction in (0, 1) or a count, got {test_size!r}.")
    n_test = int(round(test_size * units)) if isinstance(test_size, float) else int(test_size)
    if not 2 <= n_test <= units - 2:
        raise ValueError(f"test_size={test_size!r} gives {n_test} test "
                         f"{'identities' if split == 'identity' else 'rows'} out of {units}; "
                         "at least 2 must be in each of the test and training sets.")
    out = []
    for k in range(n_repeats):
        if split == "identity":
            test_ids = rng.choice(ids.size, n_test, replace=False)
            is_test = np.isin(codes, test_ids)
        else:
            order = rng.permutation(labels.size)
            # stratified: the same fraction of every identity
            is_test = np.zeros(labels.size, bool)
            frac = n_test / labels.size
            for c in range(ids.size):
                rows = order[codes[order] == c]
                is_test[rows[: max(1, int(round(frac * rows.size)))]] = True
        test_rows, train_rows = np.flatnonzero(is_test), np.flatnonzero(~is_test)
        tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_train_positives,
                                  rng=rng)
        if cross_modal:
            probe_rows, gallery_rows = test_rows, test_rows.copy()
        else:
            probe_rows, gallery_rows = _single_shot_gallery(test_rows, labels, rng)
        out.append(Split("identification", k, tr_p, tr_y, probe_rows=probe_rows,
                         gallery_rows=gallery_rows, seed=int(rng.randint(2**31 - 1))))
    return out


def _single_shot_gallery(test_rows: np.ndarray, labels: np.ndarray, rng
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Single-modal identification: one random sample of each test identity forms the
    gallery, the identity's other samples are probes (identities with one test sample are
    gallery distractors)."""
    order = test_rows[rng.permutation(test_rows.size)]
    _, first = np.unique(labels[order], return_index=True)
    is_gallery = np.zeros(order.size, bool)
    is_gallery[first] = True
    probes, gallery = np.sort(order[~is_gallery]), np.sort(order[is_gallery])
    if probes.size == 0:
        raise ValueError("single-modal identification needs test identities with at least two "
                         "samples (one for the gallery, one probe).")
    return probes, gallery


# ---------------------------------------------------------------- shared preprocessing
class CCAProjection:
    """Regularised linear CCA used to bring two views to one common dimension ("-C" variants).

    The CML-AUC paper (§IV-B) runs single-modal learners on CCA-processed features of the two
    modalities (PCA-C, LMNN-C, LDML-C, ...). The directions come from the library's one closed
    form, :func:`crossmetric.baselines.cca_directions` (also behind :class:`crossmetric.CCA`);
    scikit-learn's NIPALS ``CCA`` needs about a minute for 32 components on the 1,800 digits.
    ``transform`` returns ``((X − x̄) A, (Y − ȳ) B)``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import CCAProjection
    >>> rng = np.random.RandomState(0)
    >>> Z = rng.randn(50, 2)
    >>> X, Y = Z @ rng.randn(2, 6), Z @ rng.randn(2, 4) + 0.01 * rng.randn(50, 4)
    >>> proj = CCAProjection(n_components=2).fit(X, Y)
    >>> bool(proj.correlations_.min() > 0.99)
    True
    """

    def __init__(self, n_components: int = 32, reg: float = 1e-3):
        self.n_components = n_components
        self.reg = reg

    def fit(self, X: np.ndarray, Y: np.ndarray) -> CCAProjection:
        """Fit on row-aligned views (row ``r`` of ``X`` and ``Y`` = one matching pair)."""
        from crossmetric.baselines import cca_directions

        X = as_float_array(X, "X", ndim=2)
        Y = as_float_array(Y, "Y", ndim=2)
        n = X.shape[0]
        if Y.shape[0] != n or n < 2:
            raise ValueError(f"CCA needs >= 2 row-aligned pairs, got {n} and {Y.shape[0]} rows.")
        k = min(int(self.n_components), X.shape[1], Y.shape[1], n - 1)
        self.mean_x_, self.mean_y_ = X.mean(0), Y.mean(0)
        self.x_weights_, self.y_weights_, self.correlations_ = cca_directions(
            X - self.mean_x_, Y - self.mean_y_, k, self.reg)
        return self

    def transform(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (X - self.mean_x_) @ self.x_weights_, (Y - self.mean_y_) @ self.y_weights_


def _pca_views(X: np.ndarray, Y: np.ndarray, split: Split, k: int):
    """Each view reduced by PCA to ``k`` dims, fitted on the rows the training pairs use."""
    return _pca_fit_views(X, Y, split.train_pairs, k)


def _pca_fit_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray, k: int,
                   joint: bool = False):
    """Each view's PCA fitted on its training rows -- exact, in the span of the rows when they
    are fewer than the features (:func:`crossmetric.baselines.fit_pca`); ``joint``: one PCA
    fitted on both views' training rows (views in one feature space, e.g. one descriptor of a
    sketch and of a photo), so that coordinates stay comparable."""
    from crossmetric.baselines import fit_pca

    rx, ry = np.unique(train_pairs[:, 0]), np.unique(train_pairs[:, 1])
    if joint:
        kk = min(int(k), X.shape[1], rx.size + ry.size)
        pca = fit_pca(np.vstack([X[rx], Y[ry]]), kk, random_state=0)
        return pca.transform(X), pca.transform(Y)
    out = []
    for V, rows in ((X, rx), (Y, ry)):
        kk = min(int(k), V.shape[1], rows.size)
        out.append(fit_pca(V[rows], kk, random_state=0).transform(V))
    return out[0], out[1]


def _is_cross_modal(est) -> bool:
    return bool(getattr(est, "_cross_modal", True))


def _uses_images(est) -> bool:
    return int(getattr(est, "_sample_ndim", 1)) > 1


# ------------------------------------------------------------------------ one work unit
def _identity_groups(est, options: dict) -> dict:
    """``groups=(labels, labels)`` for a learner whose ``fit`` takes identity labels.

    DeepGSM builds its batches from identities (GSM §4.2); from sampled class-level pairs it
    could only infer fragments of the classes (connected components), and would treat two
    images of one class as a negative. Only the labels of the rows that the training pairs
    use are read by such a learner.
    """
    labels = options.get("labels")
    if labels is None or "groups" not in inspect.signature(est.fit).parameters:
        return {}
    return {"groups": (labels, labels)}


def _run_split(name: str, estimator, X: np.ndarray, Y: np.ndarray, split: Split,
               options: dict) -> dict:
    """Fit a clone of ``estimator`` on one split and measure it (runs in a worker)."""
    est = clone(estimator)
    params = est.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=split.seed)
    tuned = None
    t0 = time.perf_counter()
    if options.get("tune"):
        tuned = _tune_split(est, X, Y, split, options)
        est.set_params(**tuned.best_params)
    tune_seconds = time.perf_counter() - t0
    Xs, Ys = _prepare_views(X, Y, split.train_pairs, split.train_y, est, options)
    est.set_params(preprocessor=(Xs, Ys))
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # recorded, not shown: e.g. the ConvergenceWarnings of short benchmark schedules
        warnings.simplefilter("always")
        est.fit(split.train_pairs, split.train_y, **_identity_groups(est, options))
    fit_seconds = time.perf_counter() - t0
    out: dict = {"method": name, "protocol": split.protocol, "split": split.index,
                 "measures": {"fit_seconds": fit_seconds},
                 "warnings": sorted({w.category.__name__ for w in caught})}
    if tuned is not None:
        out["tuned"] = {"protocol": split.protocol, "split": split.index,
                        "params": tuned.best_params, "scoring": tuned.scoring,
                        "cv_score": tuned.best_score, "seconds": tune_seconds}
        if tuned.scoring == "auc":
            out["tuned"]["cv_auc"] = tuned.best_score
    if split.protocol == "verification":
        score = -est.pair_distance(split.test_pairs)
        out["measures"].update(M.verification_report(split.test_y, score, fpr=options["fpr"],
                                                     fpr_range=options["fpr_range"]))
        out["measures"].update(_verification_extras(est, Xs, Ys, split, options))
        fpr, tpr, _ = M.roc(split.test_y, score)
        out["roc"] = np.interp(ROC_GRID, fpr, tpr)
    else:
        D = est.cross_distance(Xs[split.probe_rows], Ys[split.gallery_rows])
        if options.get("re_rank") or options.get("query_expansion") is not None:
            from crossmetric.reid import refine_distances

            D = refine_distances(est, Xs[split.probe_rows], Ys[split.gallery_rows],
                                 re_rank=options.get("re_rank"),
                                 query_expansion=options.get("query_expansion"), distance=D)
        lab = options["labels"]
        pl, gl = lab[split.probe_rows], lab[split.gallery_rows]
        curve = M.cmc(D, pl, gl, max_rank=min(options["max_rank"], D.shape[1]))
        curve = np.r_[curve, np.full(options["max_rank"] - curve.size, curve[-1])]
        out["cmc"] = curve
        out["measures"].update({
            "rank1": float(curve[0]), "rank5": float(curve[min(5, curve.size) - 1]),
            "rank10": float(curve[min(10, curve.size) - 1]),
            "map": M.mean_average_precision(D, pl, gl),
            "nn_accuracy": M.nearest_neighbor_accuracy(D, pl, gl),
        })
        if options.get("pair_measures"):
            # every probe x gallery pair of the test identities, scored as verification pairs
            same = np.where(pl[:, None] == gl[None, :], 1, -1).ravel()
            out["measures"].update(M.verification_report(
                same, -D.ravel(), fpr=options["fpr"], fpr_range=options["fpr_range"]))
    return out


def _with_progress(outputs, names: list[str]):
    """Yield ``outputs`` under a tqdm bar that names the method being fitted next."""
    from tqdm.auto import tqdm

    with tqdm(total=len(names), desc="benchmark", unit="fit") as bar:
        if names:
            bar.set_postfix_str(names[0], refresh=False)
        for i, out in enumerate(outputs):
            if i + 1 < len(names):
                bar.set_postfix_str(names[i + 1], refresh=False)
            bar.update(1)
            yield out


def _prepare_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray,
                   train_y: np.ndarray, est, options: dict):
    """The per-split preprocessing (PCA, then CCA for single-modal learners), fitted on the
    training pairs only."""
    Xs, Ys = X, Y
    if options.get("pca"):
        Xs, Ys = _pca_fit_views(X, Y, train_pairs, options["pca"],
                                joint=options.get("pca_joint", False))
    if options.get("cca") and not _is_cross_modal(est):
        pos = train_pairs[train_y == 1]
        proj = CCAProjection(options["cca_components"]).fit(Xs[pos[:, 0]], Ys[pos[:, 1]])
        Xs, Ys = proj.transform(Xs, Ys)
    return Xs, Ys


def _tune_split(est, X: np.ndarray, Y: np.ndarray, split: Split, options: dict):
    """Inner cross-validation on the split's training objects only (issue 10 item 8).

    The outer training pairs of :func:`run_protocols` join row ``r`` of ``X`` and ``Y`` for
    objects of the training part; only those objects are handed to
    :func:`crossmetric.model_selection.search_params`, which redoes the preprocessing of
    :func:`_prepare_views` on each inner training side.
    """
    from crossmetric.model_selection import search_stages

    tune = options["tune"]
    rows = np.unique(split.train_pairs)
    return search_stages(
        est, tune["grid"], X[rows], Y[rows], options["labels"][rows],
        n_splits=tune["n_splits"], group=tune["group"], n_negatives=tune["n_negatives"],
        max_positives=tune["max_positives"], scoring=tune["scoring"],
        prepare=lambda Xa, Ya, p, y, e: _prepare_views(Xa, Ya, p, y, e, options),
        random_state=split.seed)


def _verification_extras(est, Xs: np.ndarray, Ys: np.ndarray, split: Split,
                         options: dict) -> dict:
    """The LFW-style accuracy and, for a fold of samples, VR@FPR over all its cross pairs.

    * ``accuracy``: the fraction of test pairs that ``est.predict`` gets right, i.e. with the
      threshold ``threshold_`` chosen (for accuracy) on the *training* folds' pairs when the
      learner was fitted -- LFW's protocol ("the threshold is chosen on the nine training
      folds"). ``acc_median`` instead takes the median of the test distances, which looks at
      the test set; it is kept in the records for CMML's table.
    * ``vr``: when the fold is a set of held-out samples (:func:`verification_splits`), the
      verification rate is taken over *every* cross pair of the fold's rows (row ``a`` of
      ``X`` against row ``b`` of ``Y``, same label = positive), not over the few sampled test
      pairs: with 1,000 sampled negatives VR@0.1% is the TPR at one false positive, decided by
      a single pair. The other measures stay on the sampled, balanced test pairs.
    """
    pred = np.asarray(est.predict(split.test_pairs))
    extras = {"accuracy": float(np.mean(pred == split.test_y))}
    lab = options.get("labels")
    if split.probe_rows is not None and lab is not None:
        rows = split.probe_rows
        D = est.cross_distance(Xs[rows], Ys[rows])
        same = np.where(lab[rows][:, None] == lab[rows][None, :], 1, -1)
        if (same == 1).any() and (same == -1).any():
            extras["vr"] = M.verification_rate(same.ravel(), -np.asarray(D).ravel(),
                                               options["fpr"])
    return extras


def _run_safely(name, estimator, X, Y, split, options):
    try:
        return _run_split(name, estimator, X, Y, split, options)
    except Exception as exc:  # recorded, reported by the caller
        return {"method": name, "protocol": split.protocol, "split": split.index,
                "error": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------------------ results
@dataclass
class BenchmarkResult:
    """Output of :func:`run_protocols`.

    Attributes
    ----------
    records : list of dict
        Tidy raw results: one row per (method, protocol, split, measure) with its value.
    summary : list of dict
        One row per (method, measure): ``mean``, ``std`` (ddof=1; 0 for one run), ``sem``
        (``std/√n``, LFW's standard error), ``n``.
    curves : dict
        ``{method: {"roc": (fpr_grid, mean_tpr), "cmc": mean_cmc}}``.
    skipped : dict
        ``{method: reason}`` for methods not run (e.g. image learners on a feature dataset).
    errors : dict
        ``{method: message}`` for methods that failed (with ``on_error="record"``).
    warnings : dict
        ``{method: {warning class name: number of fits that raised it}}`` (e.g.
        ``ConvergenceWarning`` when a short schedule stops at ``max_iter``).
    methods : list of str
        Display names in the order given.

    Examples
    --------
    >>> from crossmetric.protocols import BenchmarkResult
    >>> res = BenchmarkResult(methods=["PCCA"], summary=[
    ...     {"method": "PCCA", "measure": "auc", "mean": 0.93, "std": 0.01, "sem": 0.003,
    ...      "n": 10}])
    >>> print(res.table())
    Method            AUC
    ------  -------------
    PCCA    0.930 ± 0.010
    >>> res.value("PCCA", "auc")
    0.93
    """

    records: list = field(default_factory=list)
    summary: list = field(default_factory=list)
    curves: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    warnings: dict = field(default_factory=dict)
    methods: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def value(self, method: str, measure: str, stat: str = "mean") -> float:
        for row in self.summary:
            if row["method"] == method and row["measure"] == measure:
                return row[stat]
        raise KeyError(f"no result for method {method!r}, measure {measure!r}.")

    def _grid(self, measures, pm: str = " ± ") -> tuple[list[str], list[str], list[list]]:
        """Measure keys, column titles and rows ``[method, (text, mean) ...]`` of a table."""
        have = {row["measure"] for row in self.summary}
        measures = [m for m in (measures or TABLE_MEASURES) if m in have]
        by = {(r["method"], r["measure"]): r for r in self.summary}
        head = [MEASURES[m][0] if m in MEASURES else m for m in measures]
        rows = []
        for meth in self.methods:
            if not any((meth, m) in by for m in measures):
                continue
            cells: list = [meth]
            for m in measures:
                r = by.get((meth, m))
                if r is None:
                    cells.append(("-", None))
                    continue
                scale = MEASURES.get(m, (m, 1.0))[1]
                digits = 3 if scale == 1.0 and m != "fit_seconds" else 1
                if m == "fit_seconds":
                    cells.append((f"{r['mean']:.2f}", r["mean"]))
                else:
                    cells.append((f"{r['mean'] * scale:.{digits}f}{pm}"
                                  f"{r['std'] * scale:.{digits}f}", r["mean"]))
            rows.append(cells)
        return measures, head, rows

    def table(self, measures: Sequence[str] | None = None) -> str:
        """A paper-style table: one row per method, ``mean ± std`` per measure."""
        _, head, grid = self._grid(measures)
        head = ["Method"] + head
        rows = [[r[0]] + [c[0] for c in r[1:]] for r in grid]
        widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
        lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                           for i, (h, w) in enumerate(zip(head, widths, strict=True)))]
        lines.append("  ".join("-" * w for w in widths))
        for cells in rows:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths, strict=True))))
        return "\n".join(lines)

    @staticmethod
    def _best(measures, grid) -> list[float | None]:
        """Best mean of each column (smallest fit time, largest otherwise)."""
        best = []
        for k, m in enumerate(measures):
            vals = [r[k + 1][1] for r in grid if r[k + 1][1] is not None]
            best.append(None if not vals else (min(vals) if m == "fit_seconds" else max(vals)))
        return best

    def to_markdown(self, measures: Sequence[str] | None = None, *, bold_best: bool = True
                    ) -> str:
        """The table as GitHub Markdown (``mean ± std``; the best of each column in bold).

        Examples
        --------
        >>> res = BenchmarkResult(methods=["A"], summary=[
        ...     {"method": "A", "measure": "auc", "mean": 0.9, "std": 0.01, "sem": 0.003,
        ...      "n": 10}])
        >>> print(res.to_markdown())
        | Method | AUC |
        |---|---:|
        | A | **0.900 ± 0.010** |
        """
        measures, head, grid = self._grid(measures)
        best = self._best(measures, grid) if bold_best else [None] * len(measures)
        lines = ["| Method | " + " | ".join(head) + " |",
                 "|---|" + "---:|" * len(head)]
        for r in grid:
            cells = [f"**{t}**" if b is not None and v == b else t
                     for (t, v), b in zip(r[1:], best, strict=True)]
            lines.append(f"| {r[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_latex(self, measures: Sequence[str] | None = None, *, caption: str | None = None,
                 label: str | None = None, bold_best: bool = True) -> str:
        """The table as a LaTeX ``table`` with ``booktabs`` rules (``\\usepackage{booktabs}``).

        Cells are ``mean $\\pm$ std``; the best of each column is in ``\\textbf``; ``%``, ``_``
        and ``&`` in names are escaped.
        """
        def esc(t: str) -> str:
            for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"),
                         ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
                t = t.replace(a, b)
            return t

        measures, head, grid = self._grid(measures, pm=" $\\pm$ ")
        best = self._best(measures, grid) if bold_best else [None] * len(measures)
        lines = [r"\begin{table}[t]", r"\centering"]
        if caption:
            lines.append(rf"\caption{{{esc(caption)}}}")
        if label:
            lines.append(rf"\label{{{label}}}")
        lines += [r"\begin{tabular}{l" + "r" * len(head) + "}", r"\toprule",
                  "Method & " + " & ".join(esc(h) for h in head) + r" \\", r"\midrule"]
        for r in grid:
            cells = [rf"\textbf{{{t}}}" if b is not None and v == b else t
                     for (t, v), b in zip(r[1:], best, strict=True)]
            lines.append(esc(r[0]) + " & " + " & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines)

    def to_csv(self, path) -> None:
        """The summary (method, measure, mean, std, sem, n) as CSV (written atomically)."""
        from crossmetric.persistence import atomic_open

        with atomic_open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=["method", "measure", "mean", "std", "sem", "n"])
            w.writeheader()
            for row in self.summary:
                w.writerow(row)

    def to_dict(self) -> dict:
        from crossmetric.persistence import json_ready

        return json_ready({"summary": self.summary, "records": self.records,
                      "curves": self.curves, "skipped": self.skipped,
                      "errors": self.errors, "warnings": self.warnings,
                      "methods": self.methods, "info": self.info})

    def to_json(self, path) -> None:
        """Save everything (summary, records, curves, ...) as JSON; :meth:`load` reads it.

        The file also records ``format``, ``format_version`` and ``crossmetric_version``; it is
        written atomically (a temporary file moved over ``path`` once complete).
        """
        import crossmetric
        from crossmetric.persistence import atomic_open

        data = {"format": RESULT_FORMAT, "format_version": RESULT_VERSION,
                "crossmetric_version": crossmetric.__version__, **self.to_dict()}
        with atomic_open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)

    save = to_json

    @classmethod
    def from_dict(cls, data: Mapping) -> BenchmarkResult:
        """The inverse of :meth:`to_dict` (curves become arrays again)."""
        if not isinstance(data, Mapping) or "summary" not in data or "methods" not in data:
            raise ValueError("data is not a BenchmarkResult dictionary (needs 'summary' and "
                             "'methods').")

        def nan(v):
            return float("nan") if v is None else v

        curves = {}
        for meth, c in (data.get("curves") or {}).items():
            cc: dict = {}
            if "roc" in c:
                cc["roc"] = tuple(np.asarray([nan(v) for v in a], dtype=float)
                                  for a in c["roc"])
            if "cmc" in c:
                cc["cmc"] = np.asarray([nan(v) for v in c["cmc"]], dtype=float)
            curves[meth] = cc
        fix = [{k: nan(v) if k in ("mean", "std", "sem", "value") else v for k, v in r.items()}
               for r in data.get("summary", [])]
        recs = [{k: nan(v) if k == "value" else v for k, v in r.items()}
                for r in data.get("records", [])]
        return cls(records=recs, summary=fix, curves=curves,
                   skipped=dict(data.get("skipped") or {}), errors=dict(data.get("errors") or {}),
                   warnings=dict(data.get("warnings") or {}), methods=list(data["methods"]),
                   info=dict(data.get("info") or {}))

    @classmethod
    def load(cls, path) -> BenchmarkResult:
        """Read a result written by :meth:`save` / :meth:`to_json` (``results.json``)."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: "
                             f"{' '.join(str(exc).split())}") from None
        version = data.get("format_version", 1) if isinstance(data, dict) else None
        if isinstance(data, dict) and (data.get("format", RESULT_FORMAT) != RESULT_FORMAT
                                       or not isinstance(version, int)
                                       or version > RESULT_VERSION):
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: format "
                             f"{data.get('format')!r} version {version!r} (crossmetric "
                             f"{data.get('crossmetric_version')}); this version reads "
                             f"{RESULT_FORMAT!r} up to version {RESULT_VERSION}.")
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: {exc}") \
                from None


def _summarise(records: list[dict], methods: list[str]) -> list[dict]:
    values: dict[tuple[str, str], list[float]] = {}
    for r in records:
        values.setdefault((r["method"], r["measure"]), []).append(r["value"])
    order = {m: i for i, m in enumerate(methods)}
    mkeys = list(MEASURES)
    out = []
    for (meth, meas), vals in sorted(
            values.items(), key=lambda kv: (order.get(kv[0][0], 1e9),
                                            mkeys.index(kv[0][1]) if kv[0][1] in mkeys else 99)):
        v = np.asarray(vals, dtype=float)
        std = float(v.std(ddof=1)) if v.size > 1 else 0.0
        out.append({"method": meth, "measure": meas, "mean": float(v.mean()), "std": std,
                    "sem": std / math.sqrt(v.size), "n": int(v.size)})
    return out


# ------------------------------------------------------------------------------- runner
def run_protocols(estimators: Mapping, dataset: Mapping, *,
                  protocols: Sequence[str] = ("verification", "identification"),
                  n_folds: int = 10, n_repeats: int = 10, n_negatives: int = 1,
                  max_train_positives: int | None = 1000,
                  max_test_positives: int | None = 1000, test_size: float | int = 0.3,
                  level: str = "labels", split: str = "auto", unequal_dims: str = "cca",
                  cca_components: int = 32, pca_components=None, max_rank: int = 20,
                  fpr: float = 1e-3,
                  fpr_range=(0.0, 0.1), n_jobs: int | None = None, random_state=0,
                  progress: bool = False, on_error: str = "raise",
                  param_grids: Mapping | None = None, tune_folds: int = 3,
                  tune_scoring: str = "auc", re_rank=False,
                  query_expansion: int | None = None,
                  pair_measures: bool = False, pca_joint: bool = False) -> BenchmarkResult:
    """Run named estimators under the verification and identification protocols.

    Parameters
    ----------
    estimators : mapping name -> unfitted pair learner
        Each is cloned for every split; its ``preprocessor`` is set to the split's ``(X, Y)``
        and it is fitted on index pairs. An estimator whose ``random_state`` is ``None`` gets
        a seed drawn from ``random_state`` for each split.
    dataset : Bunch / mapping
        ``X``, ``Y`` (row-aligned views), ``labels``; optionally ``instance`` and ``images_x``,
        ``images_y`` (used by image learners such as ``DeepGSM``; a dataset without images
        records them in ``skipped``). Without ``Y`` (missing or ``None``) the data has one
        modality: verification pairs are drawn within ``X`` and identification uses a
        single-shot gallery (:func:`identification_splits` with ``cross_modal=False``).
    protocols : sequence of {"verification", "identification"}
    n_folds : int, default=10
        Verification folds (:func:`verification_splits`).
    n_repeats : int, default=10
        Identification repetitions (:func:`identification_splits`).
    n_negatives : int, default=1
        Negative training pairs per positive (the papers' n⁻).
    max_train_positives, max_test_positives : int or None
        Caps on the positives drawn per split (class-level labels make quadratically many);
        1000 each by default, as `crossmetric benchmark` (the CLI takes its defaults from here).
    test_size : float or int, default=0.3
        Identification test set (fraction or count of identities / rows).
    level : {"labels", "instance"}, default="labels"
        Identity used to form pairs and matches: ``labels`` (e.g. digit class) or ``instance``
        (object id: photo ↔ sketch of the same image).
    split : {"auto", "identity", "sample"}
        Passed to both split functions.
    unequal_dims : {"cca", "skip"}, default="cca"
        What to do with a single-modal learner when ``X`` and ``Y`` have different widths:
        ``"cca"`` fits :class:`CCAProjection` (``cca_components``) on each split's positive
        training pairs and runs the learner on the projected views, reported as ``name-C``
        (the CML-AUC paper's "-C" setting); ``"skip"`` records it in ``skipped``.
    pca_components : int, mapping name -> int, or None
        Reduce each view by PCA to this many dimensions before fitting (fitted per split on the
        rows the training pairs use): for every feature learner (int) or for the named ones
        (mapping). The CML-AUC paper reduces its features by PCA before metric learning
        (§IV-A). Applied before the ``"cca"`` step. Image learners are unaffected.
    max_rank : int, default=20
        Length of the CMC curves.
    fpr, fpr_range :
        VR@FPR operating point and pAUC window.
    n_jobs : int or None
        joblib workers; the active joblib backend is used (``joblib.parallel_config``), so
        ``with parallel_config(backend="dask"):`` runs the splits on a Dask cluster.
    random_state : int, RandomState or None, default=0
    progress : bool, default=False
        tqdm progress bar over the (method, split) units.
    on_error : {"raise", "record"}, default="raise"
        ``"record"``: a failing method is reported in ``errors`` and left out of the table.
    param_grids : mapping name -> grid or list of grids, optional
        Hyper-parameter search (:func:`crossmetric.model_selection.search_stages`): for every
        split, the named estimators' parameters are chosen from their grid by ``tune_folds``-
        fold inner cross-validation on the split's training objects only -- folds grouped by
        identity when the outer split is by identity, else disjoint stratified sets of objects
        (as ``split`` decides) -- and the winner is fitted on all training pairs. A list of
        grids is searched stage after stage, each stage's winner fixed for the next (the
        papers' sequential selections, ``MethodSpec.paper_grid``). The choices are in
        ``result.info["tuned"]`` (``{method: [{protocol, split, params, scoring, cv_score,
        seconds}]}``, plus ``cv_auc`` when ``tune_scoring="auc"``).
    tune_folds : int, default=3
    tune_scoring : {"auc", "rank1", "map"}, default="auc"
        Validation measure of the search (:func:`crossmetric.model_selection.search_params`):
        pair AUC, or identification rank-1 / mAP on the validation identities.
    re_rank : bool or dict, default=False
        Identification: re-rank each split's probe-to-gallery distances by k-reciprocal
        encoding (:func:`crossmetric.metrics.re_ranking`; a dict passes ``k1``, ``k2``,
        ``lambda_value``) before measuring. See :func:`crossmetric.reid.refine_distances`
        for the models it applies to.
    query_expansion : int, optional
        Identification: average query expansion with this many gallery neighbours first.
    pair_measures : bool, default=False
        Identification also reports the verification measures (``auc``, ``one_minus_eer``,
        ``vr``, ``pauc``, ``acc_median``) over every probe × gallery pair of the split's test
        identities, so that one split gives all of CML-AUC §IV-A's measures (AUC, 1−EER,
        VR@0.1 %, rank-1) on the same test persons. Not with the verification protocol,
        whose measures have the same names.
    pca_joint : bool, default=False
        With ``pca_components``: one PCA fitted on the training rows of both views together
        instead of one per view -- for two views in one feature space (one descriptor of a
        sketch and of a photo, of camera A and camera B), where per-view PCAs would give
        coordinates that do not correspond. Needs views of equal width.

    Returns
    -------
    BenchmarkResult

    Examples
    --------
    >>> from crossmetric import Euclidean, PCCA
    >>> from crossmetric.datasets import make_cross_modal
    >>> from crossmetric.protocols import run_protocols
    >>> data = make_cross_modal(150, n_classes=15, n_features_x=6, n_features_y=6,
    ...                         random_state=0)
    >>> res = run_protocols({"Euclidean": Euclidean(), "PCCA": PCCA(n_components=4)}, data,
    ...                     n_folds=2, n_repeats=1)
    >>> res.methods
    ['Euclidean', 'PCCA']
    >>> bool(res.value("PCCA", "auc") > res.value("Euclidean", "auc"))
    True
    """

    for p in protocols:
        if p not in ("verification", "identification"):
            raise ValueError(f"protocols must name 'verification' and/or 'identification', "
                             f"got {p!r}.")
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    if unequal_dims not in ("cca", "skip"):
        raise ValueError(f"unequal_dims must be 'cca' or 'skip', got {unequal_dims!r}.")
    if level not in ("labels", "instance"):
        raise ValueError(f"level must be 'labels' or 'instance', got {level!r}.")
    if not estimators:
        raise ValueError("estimators is empty; give at least one name -> estimator.")
    for key in ("X", "labels"):
        if key not in dataset:
            raise ValueError(f"dataset must provide {key!r}.")
    X = as_float_array(dataset["X"], "dataset X", ndim=2)
    # no Y: one modality -- pairs and matches are drawn within X (documented above)
    cross_modal = dataset.get("Y") is not None
    Y = as_float_array(dataset["Y"], "dataset Y", ndim=2) if cross_modal else X
    if level == "instance" and "instance" not in dataset:
        raise ValueError("level='instance' needs dataset['instance'].")
    labels = np.asarray(dataset["labels"] if level == "labels" else dataset["instance"])
    if not (X.shape[0] == Y.shape[0] == labels.shape[0]):
        raise ValueError(f"dataset X, Y and labels must have the same number of rows, got "
                         f"{X.shape[0]}, {Y.shape[0]}, {labels.shape[0]}.")
    images = None
    if "images_x" in dataset and "images_y" in dataset:
        images = (as_float_array(dataset["images_x"], "dataset images_x"),
                  as_float_array(dataset["images_y"], "dataset images_y"))
    rng = check_random_state(random_state)
    result = BenchmarkResult()
    result.info = {"n_samples": int(X.shape[0]), "dims": [int(X.shape[1]), int(Y.shape[1])],
                   "cross_modal": cross_modal,
                   "level": level, "n_folds": n_folds, "n_repeats": n_repeats,
                   "protocols": list(protocols)}

    splits: list[Split] = []
    if "verification" in protocols:
        splits += verification_splits(labels, n_folds, cross_modal=cross_modal,
                                      n_negatives=n_negatives,
                                      max_train_positives=max_train_positives,
                                      max_test_positives=max_test_positives, split=split,
                                      random_state=rng)
    if "identification" in protocols:
        splits += identification_splits(labels, n_repeats, test_size=test_size,
                                         cross_modal=cross_modal,
                                         n_negatives=n_negatives,
                                         max_train_positives=max_train_positives,
                                         split=split, random_state=rng)
    if query_expansion is not None:
        query_expansion = check_positive_int(query_expansion, "query_expansion")
    from crossmetric.reid import _re_rank_params

    _re_rank_params(re_rank)  # a bad value fails here, not in every worker
    if pair_measures and "verification" in protocols:
        raise ValueError("pair_measures gives identification the verification measures' "
                         "names; run it with protocols=('identification',).")
    if pca_joint and X.shape[1] != Y.shape[1]:
        raise ValueError(f"pca_joint needs views of equal width, got {X.shape[1]} and "
                         f"{Y.shape[1]} features.")
    base_options = {"fpr": fpr, "fpr_range": fpr_range, "max_rank": max_rank,
                    "labels": labels, "cca_components": cca_components,
                    "re_rank": re_rank, "query_expansion": query_expansion,
                    "pair_measures": bool(pair_measures), "pca_joint": bool(pca_joint)}
    grids = {}
    if param_grids:
        n_ids = np.unique(labels).size
        group = split if split != "auto" else ("identity" if n_ids >= max(20, 2 * n_folds)
                                               else "sample")
        tune_folds = check_positive_int(tune_folds, "tune_folds", minimum=2)
        from crossmetric.model_selection import SCORINGS

        if tune_scoring not in SCORINGS:
            raise ValueError(f"tune_scoring must be one of {', '.join(SCORINGS)}, got "
                             f"{tune_scoring!r}.")
        for name, grid in param_grids.items():
            if name not in estimators:
                raise ValueError(f"param_grids names {name!r}, which is not in estimators.")
            if grid:
                grids[name] = {"grid": grid, "n_splits": tune_folds, "group": group,
                               "n_negatives": n_negatives, "scoring": tune_scoring,
                               "max_positives": max_train_positives}
        result.info["tuning"] = {"folds": tune_folds, "group": group, "scoring": tune_scoring,
                                 "grids": {k: v["grid"] for k, v in grids.items()}}
    return _execute(result, estimators, X, Y, images, splits, base_options,
                    pca_components=pca_components, unequal_dims=unequal_dims, n_jobs=n_jobs,
                    progress=progress, on_error=on_error, grids=grids)


def _execute(result: BenchmarkResult, estimators: Mapping, X: np.ndarray, Y: np.ndarray,
             images, splits: list[Split], base_options: dict, *, pca_components,
             unequal_dims: str, n_jobs, progress: bool, on_error: str,
             grids: Mapping | None = None) -> BenchmarkResult:
    """Fit every estimator on every split (joblib) and gather the results."""
    from joblib import Parallel, delayed

    tasks = []
    for name, est in estimators.items():
        shown, opts, data = name, dict(base_options), (X, Y)
        if grids and name in grids:
            opts["tune"] = grids[name]
        if _uses_images(est):
            if images is None:
                result.skipped[name] = "needs images (dataset has no images_x / images_y)"
                continue
            data = images
        else:
            k = (pca_components.get(name) if isinstance(pca_components, Mapping)
                 else pca_components)
            if k is not None:
                opts["pca"] = check_positive_int(k, f"pca_components[{name!r}]")
                result.info.setdefault("pca", {})[name] = opts["pca"]
        # single-modal learners compare the two views coordinate by coordinate: views of
        # different origin and width go through the CCA step (PCA alone would not align them)
        if not _uses_images(est) and not _is_cross_modal(est) and X.shape[1] != Y.shape[1]:
            if unequal_dims == "skip":
                result.skipped[name] = (f"single-modal learner, views have {X.shape[1]} and "
                                        f"{Y.shape[1]} features")
                continue
            shown, opts["cca"] = f"{name}-C", True
        result.methods.append(shown)
        for sp in splits:
            tasks.append((shown, est, data, sp, opts))

    runner = _run_safely if on_error == "record" else _run_split
    jobs = (delayed(runner)(shown, est, data[0], data[1], sp, opts)
            for shown, est, data, sp, opts in tasks)
    parallel = Parallel(n_jobs=n_jobs, return_as="generator")
    with warnings.catch_warnings():
        # loky restarts a worker whose memory grew (e.g. after importing torch) and says so;
        # the jobs are resubmitted, results are unaffected
        warnings.filterwarnings("ignore", message="A worker stopped while some jobs")
        outputs = parallel(jobs)
        if progress:
            outputs = _with_progress(outputs, [t[0] for t in tasks])
        outputs = list(outputs)

    rocs: dict[str, list] = {}
    cmcs: dict[str, list] = {}
    for out in outputs:
        meth = out["method"]
        if "error" in out:
            result.errors.setdefault(meth, out["error"])
            continue
        if "tuned" in out:
            result.info.setdefault("tuned", {}).setdefault(meth, []).append(out["tuned"])
        for cat in out.get("warnings", ()):
            counts = result.warnings.setdefault(meth, {})
            counts[cat] = counts.get(cat, 0) + 1
        for meas, val in out["measures"].items():
            result.records.append({"method": meth, "protocol": out["protocol"],
                                   "split": out["split"], "measure": meas,
                                   "value": float(val)})
        if "roc" in out:
            rocs.setdefault(meth, []).append(out["roc"])
        if "cmc" in out:
            cmcs.setdefault(meth, []).append(out["cmc"])
    for meth in result.errors:
        result.records = [r for r in result.records if r["method"] != meth]
    for meth in result.methods:
        if meth in result.errors:
            continue
        c: dict = {}
        if meth in rocs:
            c["roc"] = (ROC_GRID.copy(), np.mean(rocs[meth], axis=0))
        if meth in cmcs:
            c["cmc"] = np.mean(cmcs[meth], axis=0)
        result.curves[meth] = c
    result.summary = _summarise(result.records, result.methods)
    return result


def run_pair_folds(estimators: Mapping, X, Y=None, *, pairs, y, folds=None,
                   n_folds: int = 10, unequal_dims: str = "cca", cca_components: int = 32,
                   pca_components=None, fpr: float = 1e-3, fpr_range=(0.0, 0.1),
                   n_jobs: int | None = None, random_state=0, progress: bool = False,
                   on_error: str = "raise") -> BenchmarkResult:
    """k-fold verification on a fixed set of labelled pairs (LFW's restricted setting).

    Every estimator (cloned per fold) is trained on the pairs of k − 1 folds and scored on the
    held-out fold; measures are mean ± std (and standard error) over the folds.

    Parameters
    ----------
    estimators : mapping name -> unfitted pair learner
    X : array-like (n_x, d_x)
        Samples that column 0 of ``pairs`` indexes.
    Y : array-like (n_y, d_y), optional
        Samples that column 1 indexes; ``None``: ``X`` (single-modal data such as LFW).
    pairs : int array (n_pairs, 2)
    y : array (n_pairs,) of +1 / -1
    folds : array (n_pairs,), optional
        Predefined fold of every pair (``read_lfw_pairs(...).fold``); else ``n_folds``
        stratified random folds (:func:`kfold_pairs`).
    unequal_dims, cca_components, pca_components, fpr, fpr_range, n_jobs, random_state, \
progress, on_error :
        As in :func:`run_protocols`.

    Returns
    -------
    BenchmarkResult

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean, make_pairs
    >>> from crossmetric.protocols import run_pair_folds
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(10), 4)
    >>> X = labels[:, None] + 0.3 * rng.randn(40, 2)
    >>> pairs, y = make_pairs(labels, random_state=0)
    >>> res = run_pair_folds({"Euclidean": Euclidean()}, X, pairs=pairs, y=y, n_folds=3)
    >>> bool(res.value("Euclidean", "auc") > 0.9), res.info["n_folds"]
    (True, 3)
    """
    if not estimators:
        raise ValueError("estimators is empty; give at least one name -> estimator.")
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    X = as_float_array(X, "X", ndim=2)
    Y = X if Y is None else as_float_array(Y, "Y", ndim=2)
    P = np.asarray(pairs)
    if P.ndim != 2 or P.shape[1] != 2 or P.dtype.kind not in "iu":
        raise ValueError(f"pairs must be an integer array (n_pairs, 2), got shape {P.shape} "
                         f"and dtype {P.dtype}.")
    y = check_pair_labels(y, P.shape[0])
    for col, n, name in ((0, X.shape[0], "X"), (1, Y.shape[0], "Y")):
        if P[:, col].min() < 0 or P[:, col].max() >= n:
            raise ValueError(f"pairs[:, {col}] must index rows of {name} (0..{n - 1}).")
    rng = check_random_state(random_state)
    splits = []
    for k, (tr, te) in enumerate(kfold_pairs(y, n_folds, folds=folds, random_state=rng)):
        splits.append(Split("verification", k, P[tr], y[tr], test_pairs=P[te], test_y=y[te],
                            seed=int(rng.randint(2**31 - 1))))
    result = BenchmarkResult()
    result.info = {"n_pairs": int(P.shape[0]), "dims": [int(X.shape[1]), int(Y.shape[1])],
                   "n_folds": len(splits), "protocols": ["verification"]}
    options = {"fpr": fpr, "fpr_range": fpr_range, "max_rank": 1, "labels": None,
               "cca_components": cca_components}
    return _execute(result, estimators, X, Y, None, splits, options,
                    pca_components=pca_components, unequal_dims=unequal_dims, n_jobs=n_jobs,
                    progress=progress, on_error=on_error)
