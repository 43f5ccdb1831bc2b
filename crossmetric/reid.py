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

import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

from crossmetric import metrics as M
from crossmetric._checks import check_positive_int
from crossmetric.protocols import Split

__all__ = ["reid_splits", "evaluate_reid", "refine_distances", "CMC_RANKS"]

#: the ranks at which PCCA Table 2 reports the CMC
CMC_RANKS = (1, 5, 10, 20)


def reid_splits(ids, domains=None, n_test: int = 316, *, n_negatives: int = 1,
                n_splits: int = 10, random_state=None) -> list[Split]:
    """Random train / test splits of a re-identification dataset (PCCA §4).

    Parameters
    ----------
    ids : array-like of shape (n_images,)
        Person of every image. Every person needs at least two images.
    domains : array-like of shape (n_images,), optional
        Camera of every image: the positive training pair and the probe / gallery images of a
        test person are taken from two different cameras when the person has images in two.
    n_test : int, default=316
        ``p``, the number of test persons (PCCA: 316 or 532 of VIPeR's 632).
    n_negatives : int, default=1
        ``n⁻``, negative training pairs per training person: a random image of the person with
        a random image of a random other training person, no pair drawn twice.
    n_splits : int, default=10
    random_state : int, RandomState or None

    Returns
    -------
    list of Split
        ``protocol="identification"``; ``train_pairs`` (one positive per training person, then
        its negatives) index images, ``train_y`` ±1, ``probe_rows`` and ``gallery_rows`` one
        image per test person each, in the same person order.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"ids must be a non-empty 1-D array, got shape {ids.shape}.")
    dom = np.zeros(ids.size, dtype=np.int64) if domains is None else np.asarray(domains)
    if dom.shape != ids.shape:
        raise ValueError(f"domains must have one entry per image ({ids.size}), got shape "
                         f"{dom.shape}.")
    n_splits = check_positive_int(n_splits, "n_splits")
    n_negatives = check_positive_int(n_negatives, "n_negatives", minimum=0)
    persons, codes = np.unique(ids, return_inverse=True)
    images_of = [np.flatnonzero(codes == c) for c in range(persons.size)]
    if min(len(r) for r in images_of) < 2:
        bad = persons[[len(r) < 2 for r in images_of]][0]
        raise ValueError(f"every person needs at least two images; person {bad!r} has one.")
    if isinstance(n_test, bool) or not isinstance(n_test, int | np.integer) or not (
            1 <= n_test <= persons.size - 2):
        raise ValueError(f"n_test must be an int in [1, {persons.size - 2}] (test persons; at "
                         f"least 2 persons must train), got {n_test!r}.")
    rng = check_random_state(random_state)

    def two_views(rows):
        """Two images of one person, from different cameras when possible (random order)."""
        a = rows[rng.randint(rows.size)]
        other = rows[(rows != a) & (dom[rows] != dom[a])]
        if other.size == 0:
            other = rows[rows != a]
        return a, other[rng.randint(other.size)]

    out = []
    for k in range(n_splits):
        perm = rng.permutation(persons.size)
        test_p, train_p = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        pos = np.array([two_views(images_of[c]) for c in train_p])
        train_rows = np.concatenate([images_of[c] for c in train_p])
        neg, seen = [], set()
        for c in train_p:
            own = images_of[c]
            others = train_rows[codes[train_rows] != c]
            drawn, tries = 0, 0
            while drawn < n_negatives and tries < 100 * n_negatives:
                tries += 1
                a, b = own[rng.randint(own.size)], others[rng.randint(others.size)]
                key = (min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
                neg.append((a, b))
                drawn += 1
        pairs = np.vstack([pos, np.asarray(neg, dtype=np.int64).reshape(-1, 2)])
        y = np.r_[np.ones(len(pos), dtype=np.int64), -np.ones(len(neg), dtype=np.int64)]
        pg = np.array([two_views(images_of[c]) for c in test_p])
        out.append(Split("identification", k, pairs.astype(np.int64), y,
                         probe_rows=pg[:, 0].astype(np.int64),
                         gallery_rows=pg[:, 1].astype(np.int64),
                         seed=int(rng.randint(2**31 - 1))))
    return out


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
    from crossmetric.reranking import query_expansion as _qe
    from crossmetric.reranking import re_ranking

    params = _re_rank_params(re_rank)
    if query_expansion is not None:
        query_expansion = check_positive_int(query_expansion, "query_expansion")
    l2 = True
    if model is not None:
        from crossmetric._faiss_tools import uses_l2_score

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
        gallery image is from another camera by construction), ``fit_seconds``, ``warnings``
        (category names raised during ``fit``), ``model`` (the fitted clone or None).
    """
    ids = np.asarray(ids)
    t0 = time.perf_counter()
    caught = []
    if estimator is None:
        from sklearn.metrics.pairwise import euclidean_distances

        model = None
        D = euclidean_distances(X[split.probe_rows], X[split.gallery_rows], squared=True)
    else:
        model = clone(estimator)
        params = model.get_params(deep=False)
        if "random_state" in params and params["random_state"] is None:
            model.set_params(random_state=split.seed)
        model.set_params(preprocessor=X)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(split.train_pairs, split.train_y)
        D = model.cross_distance(X[split.probe_rows], X[split.gallery_rows])
    fit_seconds = time.perf_counter() - t0
    if re_rank or query_expansion is not None:
        D = refine_distances(model, X[split.probe_rows], X[split.gallery_rows],
                             re_rank=re_rank, query_expansion=query_expansion, distance=D)
    max_rank = min(int(max_rank), D.shape[1])
    pl, gl = ids[split.probe_rows], ids[split.gallery_rows]
    curve = M.cmc(D, pl, gl, max_rank=max_rank)
    rank = M.evaluate_rank(D, pl, gl, max_rank=max_rank)
    out = {"cmc": curve, "map": rank["map"], "minp": rank["minp"], "fit_seconds": fit_seconds,
           "model": model, "warnings": sorted({w.category.__name__ for w in caught})}
    for r in CMC_RANKS:
        out[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
    return out
