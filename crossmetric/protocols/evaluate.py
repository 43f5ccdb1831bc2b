"""Fit on these pairs, measure on that probe / gallery or pair set: the one evaluation unit.

* :func:`fit_on_pairs` clones a pair learner, seeds it (when its ``random_state`` is
  ``None``), hands it its views as ``preprocessor`` and fits it on index pairs, recording the
  warnings and the time the fit took.
* :func:`measure_identification` ranks a gallery for every probe: CMC, ``rank{r}`` for
  :data:`RANKS`, mAP and nearest-neighbour accuracy (blockwise, without the distance matrix,
  for a model whose distance is the squared Euclidean distance between its embeddings).
* :func:`measure_retrieval` ranks the whole test set of each modality for every item of the
  other (class-level cross-modal retrieval): mAP x→y and y→x, mAP@k, precision-recall curves.
* :func:`measure_verification` scores labelled pairs: AUC, 1 − EER, VR@FPR, pAUC, the accuracy
  at the median distance and at the model's own threshold (``accuracy_at_threshold``).

The benchmark (:func:`crossmetric.protocols.run_protocols`), the re-id protocol
(:func:`crossmetric.protocols.reid.evaluate_reid`) and the reproductions all measure through these
functions, so a measure has one definition and one name everywhere.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from crossmetric import metrics as M
from crossmetric._utils.checks import check_positive_int
from crossmetric.protocols.splits import Split

__all__ = ["RANKS", "fit_on_pairs", "measure_identification", "measure_verification",
           "measure_retrieval"]

#: the ranks at which CMC curves are reported everywhere (PCCA Table 2: 1, 5, 10, 20)
RANKS = (1, 5, 10, 20)

#: FPR grid on which ROC curves of different folds are averaged (vertical averaging)
ROC_GRID = np.unique(np.r_[0.0, np.logspace(-4, 0, 81), np.linspace(0, 1, 101)])


class Fitted(NamedTuple):
    """What :func:`fit_on_pairs` returns."""

    model: object
    fit_seconds: float
    warnings: list


def seeded_clone(estimator, seed: int | None, *, force: bool = False):
    """A clone of ``estimator`` whose ``random_state`` is ``seed`` when it was ``None``
    (``force``: whenever the estimator has a ``random_state``)."""
    est = clone(estimator)
    if seed is not None:
        params = est.get_params(deep=False)
        if "random_state" in params and (force or params["random_state"] is None):
            est.set_params(random_state=seed)
    return est


def fit_on_pairs(estimator, pairs, y, *, preprocessor, seed: int | None = None,
                 groups=None, clone_estimator: bool = True) -> Fitted:
    """Fit a (seeded) clone of a pair learner on index pairs of ``preprocessor``.

    Parameters
    ----------
    estimator : pair learner, or None
        ``None``: no learning (the squared Euclidean distance of the views); returns
        ``Fitted(None, 0.0, [])``.
    pairs : int array (n_pairs, 2)
        Rows of the views (column 0 of the first, column 1 of the second).
    y : array (n_pairs,) of +1 / -1
    preprocessor : array, (array, array) or None
        The views, set as the learner's ``preprocessor``; ``None``: the estimator keeps its own
        (a meta-estimator such as :class:`crossmetric.SeedEnsemble`, whose member holds the
        views, with ``clone_estimator=False``).
    seed : int, optional
        Handed to the clone when its ``random_state`` is ``None``.
    groups : (array, array), optional
        Identity labels of the views' rows, for learners whose ``fit`` takes ``groups``.
    clone_estimator : bool, default=True
        ``False``: fit ``estimator`` itself (already a clone, e.g. after tuning).

    Returns
    -------
    Fitted
        ``model`` (the fitted learner), ``fit_seconds``, ``warnings`` (the sorted names of
        the warning categories raised during ``fit``; recorded, not shown).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import PCCA, make_pairs
    >>> from crossmetric.protocols import fit_on_pairs
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(5), 4)
    >>> X = labels[:, None] + 0.1 * rng.randn(20, 3)
    >>> pairs, y = make_pairs(labels, labels, random_state=0)
    >>> fitted = fit_on_pairs(PCCA(n_components=2), pairs, y, preprocessor=(X, X), seed=0)
    >>> fitted.model.random_state, fitted.fit_seconds >= 0
    (0, True)
    """
    if estimator is None:
        return Fitted(None, 0.0, [])
    est = seeded_clone(estimator, seed) if clone_estimator else estimator
    if preprocessor is not None:
        est.set_params(preprocessor=preprocessor)
    kw = {} if groups is None else {"groups": groups}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # recorded, not shown: e.g. the ConvergenceWarnings of short benchmark schedules
        warnings.simplefilter("always")
        est.fit(pairs, y, **kw)
    return Fitted(est, time.perf_counter() - t0, sorted({w.category.__name__ for w in caught}))


def _write_scores(path: str, D: np.ndarray, pl, gl) -> None:
    """The probe × gallery distances as ``.npy`` or as CSV rows (written atomically)."""
    from crossmetric.persistence import atomic_open

    if path.lower().endswith(".npy"):
        with atomic_open(path, "wb") as fh:
            np.save(fh, D)
        return
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("probe,gallery,same,distance\n")
        for i in range(D.shape[0]):
            same = (gl == pl[i]).astype(int)
            fh.writelines(f"{i},{j},{same[j]},{D[i, j]:.8g}\n" for j in range(D.shape[1]))


def _distances(est, X, G, *, re_rank, query_expansion, distance):
    """Probe-to-gallery distances of ``est`` (``None``: squared Euclidean), refined by query
    expansion / re-ranking when asked."""
    if re_rank or query_expansion is not None:
        from crossmetric._retrieval.refine import refine_distances

        return refine_distances(est, X, G, re_rank=re_rank, query_expansion=query_expansion,
                                distance=distance)
    if distance is not None:
        return np.asarray(distance)
    if est is None:
        from sklearn.metrics.pairwise import euclidean_distances

        return euclidean_distances(X, G, squared=True)
    return est.cross_distance(X, G)


def _uses_l2(est) -> bool:
    from crossmetric._base import uses_l2_score

    return est is not None and uses_l2_score(est)


def measure_identification(est, X, G, probe_ids, gallery_ids, *, ranks=RANKS,
                           same_set: bool = False, re_rank=False,
                           query_expansion: int | None = None, scores_path: str | None = None,
                           max_rank: int | None = None, distance=None,
                           blockwise: bool = True, minp: bool = False,
                           probe_cams=None, gallery_cams=None):
    """CMC / rank-r / mAP of probes ``X`` against gallery ``G`` under a fitted model.

    Parameters
    ----------
    est : fitted pair learner, or None
        ``None``: the squared Euclidean distance of ``X`` and ``G``.
    X, G : array-like
        The model's inputs for the probes and the gallery (as for ``cross_distance``); not
        read (may be ``None``) when ``distance`` is given and nothing is refined.
    probe_ids, gallery_ids : array-like
        Identity of every probe and gallery item.
    ranks : sequence of int, default=(1, 5, 10, 20)
        ``rank{r}`` entries of the report.
    same_set : bool, default=False
        The gallery is the probe set (row ``i`` = item ``i``); each probe's own item is left
        out of its ranking.
    re_rank, query_expansion :
        Refine the distances first (:func:`crossmetric.protocols.reid.refine_distances`).
    scores_path : str, optional
        Also write the distance matrix (``.npy``, else CSV rows), atomically.
    max_rank : int, optional
        Length of the CMC curve (default ``max(20, min(max(ranks), n_gallery))``); ranks
        beyond the gallery repeat its last value (``rank{r}`` for such a rank is the rate at
        the gallery's size).
    distance : array-like (n_probes, n_gallery), optional
        ``est.cross_distance(X, G)`` when already computed.
    blockwise : bool, default=True
        When the model's distance is the squared Euclidean distance between its embeddings
        (and nothing needs the matrix), measure block by block from the embeddings
        (:func:`crossmetric.metrics.identification_report`); ``False`` always goes through the
        distance matrix.
    minp : bool, default=False
        ``map`` and ``minp`` as the re-id codes compute them
        (:func:`crossmetric.metrics.evaluate_rank`) instead of
        :func:`crossmetric.metrics.mean_average_precision`.
    probe_cams, gallery_cams : array-like, optional
        Camera of every probe and gallery item (give both or neither): the Market-1501 /
        torchreid rule -- gallery items of the probe's identity *and* camera are left out of
        its ranking, and a probe left with no true match is skipped
        (:func:`crossmetric.metrics.evaluate_rank` gives the CMC, ``map`` and ``minp``;
        ``nn_accuracy`` is then the rank-1 rate, ``n_skipped`` counts the skipped probes).
        With ``same_set`` each probe's own item has its identity and camera, so the rule
        leaves it out.

    Returns
    -------
    (dict, ndarray or None)
        The report -- ``cmc`` (list of ``max_rank`` values), ``rank{r}``, ``map``,
        ``nn_accuracy`` (not with ``same_set``), ``minp`` (with ``minp``), ``n_skipped`` (with
        camera ids), ``n_probes``,
        ``n_gallery``, ``same_set``, ``re_rank``, ``query_expansion`` -- and the distance
        matrix (``None`` on the blockwise path).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import measure_identification
    >>> X, G = np.array([[0.0], [1.0]]), np.array([[0.1], [0.9], [5.0]])
    >>> rep, D = measure_identification(None, X, G, [0, 1], [0, 1, 2], ranks=(1,))
    >>> rep["rank1"], rep["map"], D.shape
    (1.0, 1.0, (2, 3))
    """
    ranks = tuple(int(r) for r in ranks)
    pl, gl = np.asarray(probe_ids), np.asarray(gallery_ids)
    # ranks beyond the gallery repeat the CMC's last value: the default curve stops there
    # (rank 10¹¹ asked for a 745 GiB curve)
    n_gallery = int(np.shape(distance)[1]) if distance is not None else len(gl)
    max_rank = max(20, min(max(ranks), n_gallery)) if max_rank is None else \
        check_positive_int(max_rank, "max_rank")
    refine = bool(re_rank) or query_expansion is not None
    if (probe_cams is None) != (gallery_cams is None):
        raise ValueError("probe_cams and gallery_cams must be given together (or neither).")
    cams = probe_cams is not None
    D = None
    if cams:
        pc, gc = np.asarray(probe_cams), np.asarray(gallery_cams)
        if same_set and (pc.shape != gc.shape or np.any(pc != gc)):
            raise ValueError("same_set: gallery_cams must be probe_cams (the gallery is the "
                             "probe set).")
        D = _distances(est, X, G, re_rank=re_rank, query_expansion=query_expansion,
                       distance=distance)
        rk = M.evaluate_rank(D, pl, gl, pc, gc, max_rank=min(max_rank, D.shape[1]))
        curve = np.r_[rk["cmc"], np.full(max_rank - rk["cmc"].size, rk["cmc"][-1])]
        rep = {"cmc": curve, "map": rk["map"], "n_skipped": rk["n_skipped"]}
        if not same_set:
            rep["nn_accuracy"] = float(curve[0])
        for r in ranks:
            rep[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
        if minp:
            rep["minp"] = rk["minp"]
        if scores_path is not None:
            _write_scores(scores_path, D, pl, gl)
    elif (blockwise and not refine and scores_path is None and distance is None and not minp
            and _uses_l2(est)):
        rep = M.identification_report(est.transform_x(X), est.transform_y(G), pl, gl,
                                      max_rank=max_rank, ranks=ranks, same_set=same_set)
    else:
        D = _distances(est, X, G, re_rank=re_rank, query_expansion=query_expansion,
                       distance=distance)
        if same_set:  # the probe's own item is left out (the metrics' same_set)
            curve = np.array([M.one_call_at_n(D, pl, gl, r, same_set=True)
                              for r in range(1, max_rank + 1)])
        else:
            curve = M.cmc(D, pl, gl, max_rank=min(max_rank, D.shape[1]))
            curve = np.r_[curve, np.full(max_rank - curve.size, curve[-1])]
        rep = {"cmc": curve}
        for r in ranks:
            rep[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
        if minp:
            rk = M.evaluate_rank(D, pl, gl, max_rank=min(max_rank, D.shape[1]))
            rep["map"], rep["minp"] = rk["map"], rk["minp"]
        else:
            rep["map"] = M.mean_average_precision(D, pl, gl, same_set=same_set)
        if not same_set:
            rep["nn_accuracy"] = M.nearest_neighbor_accuracy(D, pl, gl)
        if scores_path is not None:
            _write_scores(scores_path, D, pl, gl)
    rep["cmc"] = np.asarray(rep["cmc"]).tolist()
    n_p, n_g = (len(X), len(G)) if D is None else np.shape(D)
    rep["n_probes"], rep["n_gallery"] = int(n_p), int(n_g)
    rep["same_set"], rep["re_rank"] = bool(same_set), bool(re_rank)
    rep["query_expansion"] = query_expansion
    return rep, D


def measure_retrieval(est, X, Y, labels_x, labels_y, *, k: int = 50, distance=None):
    """Class-level cross-modal retrieval of a fitted model in both directions.

    Every item of ``X`` queries all of ``Y`` (x→y) and every item of ``Y`` queries all of
    ``X`` (y→x), ranked by the model's distance; an item is relevant when it has the query's
    category (:func:`crossmetric.metrics.retrieval_report`). This is the protocol of
    Rasiwasia et al. (ACM MM 2010) on Wikipedia image/text: mAP over the whole test set.

    Parameters
    ----------
    est : fitted pair learner, or None
        ``None``: the squared Euclidean distance of ``X`` and ``Y``.
    X, Y : array-like
        The model's inputs of the two modalities (not read when ``distance`` is given).
    labels_x, labels_y : array-like
        Category of every row of ``X`` and ``Y``.
    k : int, default=50
        Length of the lists of ``map_at_k``.
    distance : array-like (n_x, n_y), optional
        ``est.cross_distance(X, Y)`` when already computed.

    Returns
    -------
    (dict, dict, ndarray)
        The measures -- ``map_x2y``, ``map_y2x``, their mean ``map_mean``, ``map_at_k_x2y``,
        ``map_at_k_y2x`` --, the curves ``{"pr_x2y": (recall, precision), "pr_y2x": ...}``
        and the ``(n_x, n_y)`` distance matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import measure_retrieval
    >>> X, Y = np.array([[0.0], [1.0], [5.0]]), np.array([[0.2], [5.1], [4.9]])
    >>> rep, curves, D = measure_retrieval(None, X, Y, [0, 0, 1], [0, 1, 1], k=2)
    >>> rep["map_x2y"], rep["map_y2x"], D.shape
    (1.0, 1.0, (3, 3))
    """
    D = _distances(est, X, Y, re_rank=False, query_expansion=None, distance=distance)
    D = np.asarray(D)
    rep, curves = {}, {}
    for tag, dist, q, db in (("x2y", D, labels_x, labels_y), ("y2x", D.T, labels_y, labels_x)):
        r = M.retrieval_report(dist, q, db, k=k)
        rep[f"map_{tag}"], rep[f"map_at_k_{tag}"] = r["map"], r["map_at_k"]
        curves[f"pr_{tag}"] = (r["recall"], r["precision"])
    rep["map_mean"] = (rep["map_x2y"] + rep["map_y2x"]) / 2
    return rep, curves, D


def measure_verification(est, pairs, y, *, fpr: float = 1e-3, fpr_range=(0.0, 0.1),
                         distance=None) -> dict:
    """Verification measures of a fitted model on labelled pairs.

    Parameters
    ----------
    est : fitted pair learner
    pairs : int array (n_pairs, 2)
    y : array (n_pairs,) of +1 / -1
    fpr, fpr_range :
        As in :func:`crossmetric.metrics.verification_report`.
    distance : array (n_pairs,), optional
        ``est.pair_distance(pairs)`` when already computed.

    Returns
    -------
    dict
        ``auc``, ``one_minus_eer``, ``vr``, ``pauc``, ``acc_median`` and, for a model with a
        ``threshold_``, ``accuracy_at_threshold`` (the threshold was chosen on the training
        pairs: LFW's rule).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean
    >>> from crossmetric.protocols import measure_verification
    >>> X = np.array([[0.0], [0.1], [3.0], [3.2]])
    >>> pairs, y = np.array([[0, 1], [2, 3], [0, 2], [1, 3]]), np.array([1, 1, -1, -1])
    >>> est = Euclidean(preprocessor=X).fit(pairs, y)
    >>> rep = measure_verification(est, pairs, y)
    >>> rep["auc"], rep["accuracy_at_threshold"]
    (1.0, 1.0)
    """
    y = np.asarray(y)
    d = np.asarray(est.pair_distance(pairs) if distance is None else distance)
    rep = M.verification_report(y, -d, fpr=fpr, fpr_range=fpr_range)
    if getattr(est, "threshold_", None) is not None:
        rep["accuracy_at_threshold"] = float(np.mean(np.asarray(est.predict(pairs)) == y))
    return rep


def _verification_extras(est, Xs: np.ndarray, Ys: np.ndarray, split: Split,
                         options) -> dict:
    """VR@FPR over every cross pair of a verification fold of held-out samples.

    When the fold is a set of held-out samples (:func:`verification_splits`), the
    verification rate is taken over *every* cross pair of the fold's rows (row ``a`` of ``X``
    against row ``b`` of ``Y``, same label = positive), not over the few sampled test pairs:
    with 1,000 sampled negatives VR@0.1% is the TPR at one false positive, decided by a single
    pair. The other measures stay on the sampled, balanced test pairs
    (:func:`measure_verification`; its ``accuracy_at_threshold`` -- ``accuracy`` in results
    files before -- uses the threshold chosen on the training folds, LFW's rule, while
    ``acc_median`` takes the median of the test distances, which looks at the test set).
    """
    from crossmetric.protocols.options import RunOptions

    opts = RunOptions.of(options)
    extras = {}
    lab = opts.labels
    if split.probe_rows is not None and lab is not None:
        rows = split.probe_rows
        D = est.cross_distance(Xs[rows], Ys[rows])
        same = np.where(lab[rows][:, None] == lab[rows][None, :], 1, -1)
        if (same == 1).any() and (same == -1).any():
            extras["vr"] = M.verification_rate(same.ravel(), -np.asarray(D).ravel(), opts.fpr)
    return extras
