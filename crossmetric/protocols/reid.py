"""The person re-identification protocol of VIPeR (Gray et al. 2007; PCCA §4.2).

``p`` persons are drawn at random for the test set, the others train. Training uses one positive
pair per training person (two of its images, from two different cameras when it has them) and
``n⁻`` negative pairs per training person, each "one image of the person and one image of
another person" drawn at random (pcca §4). For each test person one image, chosen at random,
goes to the probe set and another to the gallery (so the probe camera varies per person). The
CMC of the probes against the gallery is averaged over 10 random splits.

:func:`reid_splits` draws the splits (every random choice up front from ``random_state``);
:func:`evaluate_reid` fits a clone of a pair learner on one split and returns its CMC curve;
:func:`refine_distances` applies average query expansion and k-reciprocal re-ranking to a
model's query-to-gallery distances (the ``re_rank`` / ``query_expansion`` options of
:func:`evaluate_reid`, :func:`crossmetric.protocols.run_protocols`, ``crossmetric evaluate``
and :meth:`crossmetric.retrieval.Index.search`).
"""

from __future__ import annotations

import numpy as np

from crossmetric._utils.checks import check_positive_int
from crossmetric.protocols import RANKS, Split
from crossmetric.protocols.splits import reid_splits

__all__ = ["reid_splits", "evaluate_reid", "refine_distances", "CMC_RANKS"]

#: the ranks at which PCCA Table 2 reports the CMC (the evaluation unit's ranks)
CMC_RANKS = RANKS


def _sq_dist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    from sklearn.metrics.pairwise import euclidean_distances

    return euclidean_distances(A, B, squared=True)


def _re_rank_params(re_rank) -> dict | None:
    """``re_rank`` (bool or mapping of :func:`~crossmetric.metrics.re_ranking` keywords)."""
    if re_rank is None or re_rank is False:
        return None
    if re_rank is True:
        return {}
    if isinstance(re_rank, dict):
        unknown = set(re_rank) - {"k1", "k2", "lambda_value"}
        if unknown:
            raise ValueError(f"re_rank: unknown keys {sorted(unknown)}; expected some of k1, "
                             "k2, lambda_value.")
        return dict(re_rank)
    raise ValueError(f"re_rank must be a bool or a dict of re_ranking keywords (k1, k2, "
                     f"lambda_value), got {re_rank!r}.")


def refine_distances(model, X_query, X_gallery, *, re_rank=False, query_expansion=None,
                     distance=None) -> np.ndarray:
    """Query-to-gallery distances of a model, refined by query expansion and / or re-ranking.

    Parameters
    ----------
    model : fitted pair learner, or None
        ``None``: ``X_query`` and ``X_gallery`` are vectors compared by squared Euclidean
        distance. A model whose distance is the squared Euclidean distance between its
        embeddings (``transform_x`` of the queries, ``transform_y`` of the gallery) works with
        both options; a model with its own score (e.g. GSM) only with ``re_rank``, and only
        when it is single-modal (queries and gallery then share ``cross_distance``).
    X_query, X_gallery : array-like
        The model's inputs (as for ``cross_distance``).
    re_rank : bool or dict, default=False
        k-reciprocal re-ranking (:func:`crossmetric.metrics.re_ranking`); a dict passes
        ``k1``, ``k2``, ``lambda_value``. The query-query and gallery-gallery distances are
        taken in the same metric.
    query_expansion : int, optional
        Average query expansion with this many gallery neighbours
        (:func:`crossmetric.metrics.query_expansion`), applied before re-ranking.
    distance : array-like of shape (n_query, n_gallery), optional
        ``model.cross_distance(X_query, X_gallery)`` when already computed (used only where
        the model's own score is needed).

    Returns
    -------
    ndarray of shape (n_query, n_gallery)
        Smaller = more alike.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.RandomState(0)
    >>> Q, G = rng.rand(4, 3), rng.rand(10, 3)
    >>> refine_distances(None, Q, G, re_rank={"k1": 5, "k2": 2}, query_expansion=2).shape
    (4, 10)
    """
    from crossmetric.metrics.reranking import query_expansion as _qe
    from crossmetric.metrics.reranking import re_ranking

    params = _re_rank_params(re_rank)
    if query_expansion is not None:
        query_expansion = check_positive_int(query_expansion, "query_expansion")
    l2 = True
    if model is not None:
        from crossmetric.metrics._faiss_tools import uses_l2_score

        l2 = uses_l2_score(model)
    if l2:
        if model is None:
            FQ = np.asarray(X_query, dtype=float)
            FG = np.asarray(X_gallery, dtype=float)
        else:
            FQ, FG = model.transform_x(X_query), model.transform_y(X_gallery)
        if query_expansion is not None:
            FQ = _qe(FQ, FG, query_expansion)
        if params is None and query_expansion is None and distance is not None:
            return np.asarray(distance)
        D = _sq_dist(FQ, FG)
        if params is not None:
            D = re_ranking(D, _sq_dist(FQ, FQ), _sq_dist(FG, FG), **params)
        return D
    name = type(model).__name__
    if query_expansion is not None:
        raise ValueError(f"query_expansion needs a model whose distance is the squared "
                         f"Euclidean distance between embeddings; {name} scores pairs with its "
                         "own function.")
    D = np.asarray(model.cross_distance(X_query, X_gallery) if distance is None else distance)
    if params is None:
        return D
    if getattr(model, "_cross_modal", True):
        raise ValueError(f"re_rank needs query-query and gallery-gallery distances; {name} "
                         "scores cross-modal pairs with its own function, which does not "
                         "compare two queries.")
    return re_ranking(D, model.cross_distance(X_query, X_query),
                      model.cross_distance(X_gallery, X_gallery), **params)


def evaluate_reid(estimator, X, ids, split: Split, *, max_rank: int = 100, re_rank=False,
                  query_expansion: int | None = None) -> dict:
    """Fit a clone of ``estimator`` on ``split``'s training pairs and measure its CMC.

    The fit and the measures are the evaluation unit's
    (:func:`crossmetric.protocols.fit_on_pairs`,
    :func:`crossmetric.protocols.measure_identification` with the re-id codes' mAP).

    Parameters
    ----------
    estimator : pair learner, or None
        ``None`` ranks the gallery by squared Euclidean distance on ``X`` (no learning).
    X : ndarray of shape (n_images, n_features)
        Features; the learner gets them as ``preprocessor``.
    ids : array-like of shape (n_images,)
    split : Split
        From :func:`reid_splits`.
    max_rank : int, default=100
    re_rank, query_expansion :
        Refine the probe-to-gallery distances before measuring (:func:`refine_distances`).

    Returns
    -------
    dict
        ``cmc`` (max_rank,), ``rank1`` ... (``rank{r}`` for :data:`CMC_RANKS`), ``map`` and
        ``minp`` (:func:`crossmetric.metrics.evaluate_rank`, no camera ids: every probe's
        gallery image is from another camera by construction), ``nn_accuracy``,
        ``fit_seconds`` (the fit alone), ``warnings``
        (category names raised during ``fit``), ``model`` (the fitted clone or None).
    """
    from crossmetric.protocols.evaluate import fit_on_pairs, measure_identification

    ids = np.asarray(ids)
    fitted = fit_on_pairs(estimator, split.train_pairs, split.train_y, preprocessor=X,
                          seed=split.seed)
    rep, _ = measure_identification(
        fitted.model, X[split.probe_rows], X[split.gallery_rows], ids[split.probe_rows],
        ids[split.gallery_rows], ranks=CMC_RANKS, re_rank=re_rank,
        query_expansion=query_expansion,
        max_rank=min(int(max_rank), len(split.gallery_rows)), blockwise=False, minp=True)
    out = {"cmc": np.asarray(rep["cmc"]), "map": rep["map"], "minp": rep["minp"],
           "nn_accuracy": rep["nn_accuracy"], "fit_seconds": fitted.fit_seconds,
           "model": fitted.model, "warnings": fitted.warnings}
    for r in CMC_RANKS:
        out[f"rank{r}"] = rep[f"rank{r}"]
    return out
