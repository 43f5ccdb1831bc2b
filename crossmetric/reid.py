"""The person re-identification protocol of VIPeR (Gray et al. 2007; PCCA §4.2).

``p`` persons are drawn at random for the test set, the others train. Training uses one positive
pair per training person (two of its images, from two different cameras when it has them) and
``n⁻`` negative pairs per training person, each "one image of the person and one image of
another person" drawn at random (pcca §4). For each test person one image, chosen at random,
goes to the probe set and another to the gallery (so the probe camera varies per person). The
CMC of the probes against the gallery is averaged over 10 random splits.

:func:`reid_splits` draws the splits (every random choice up front from ``random_state``);
:func:`evaluate_reid` fits a clone of a pair learner on one split and returns its CMC curve.
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

__all__ = ["reid_splits", "evaluate_reid", "CMC_RANKS"]

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


def evaluate_reid(estimator, X, ids, split: Split, *, max_rank: int = 100) -> dict:
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

    Returns
    -------
    dict
        ``cmc`` (max_rank,), ``rank1`` ... (``rank{r}`` for :data:`CMC_RANKS`), ``fit_seconds``,
        ``warnings`` (category names raised during ``fit``), ``model`` (the fitted clone or
        None).
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
    max_rank = min(int(max_rank), D.shape[1])
    curve = M.cmc(D, ids[split.probe_rows], ids[split.gallery_rows], max_rank=max_rank)
    out = {"cmc": curve, "fit_seconds": fit_seconds, "model": model,
           "warnings": sorted({w.category.__name__ for w in caught})}
    for r in CMC_RANKS:
        out[f"rank{r}"] = float(curve[min(r, curve.size) - 1])
    return out
