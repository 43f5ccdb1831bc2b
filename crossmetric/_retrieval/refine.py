"""Query-to-gallery distances of a fitted model, refined by average query expansion and / or
k-reciprocal re-ranking (:func:`refine_distances`): the ``re_rank`` / ``query_expansion``
options of :func:`crossmetric.protocols.evaluate.measure_identification`,
:func:`crossmetric.protocols.reid.evaluate_reid`, ``crossmetric evaluate`` and
:meth:`crossmetric.retrieval.Index.search`.
"""

from __future__ import annotations

import numpy as np

from crossmetric._utils.checks import check_positive_int

__all__ = ["refine_distances"]


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
        from crossmetric._base import uses_l2_score

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
