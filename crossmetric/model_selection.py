"""Hyper-parameter search for pair learners on training data only, folds grouped by identity.

The papers choose each method's few parameters (γ and μ of CML-AUC, §IV-B; the number of
components; kernel bandwidths and regularisers) on training data. :func:`search_params` does so
by inner cross-validation on the *objects* of one outer training split:

1. the objects are split into ``n_splits`` folds -- ``group="identity"``: every identity in one
   fold only (:class:`sklearn.model_selection.GroupKFold` over the identity labels, shuffled),
   as the outer identity-disjoint protocols; ``group="sample"``: stratified folds of the
   objects (:class:`~sklearn.model_selection.StratifiedKFold`), as the outer protocols on
   datasets with few identities (the 10 digit classes). Either way no object is shared between
   the inner training and validation pairs;
2. pairs are drawn among each side's objects with :func:`crossmetric.pairs.make_pairs`, as the
   outer protocols draw them;
3. every candidate of ``param_grid`` (:class:`~sklearn.model_selection.ParameterGrid`) is fitted
   on the inner training pairs (after ``prepare``, the runner's per-split preprocessing -- PCA,
   CCA -- refitted on the inner training pairs) and scored by the AUC of its validation pairs;
4. the candidate with the best mean validation AUC wins (ties: the first in grid order).

The function only ever receives the outer training objects, so the outer test objects cannot
leak into the choice. :func:`crossmetric.protocols.run_protocols` calls it for every split when
given ``param_grids`` (``crossmetric benchmark --tune``); the grids of the command-line methods
are declared in :mod:`crossmetric.registry`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, ParameterGrid, StratifiedKFold
from sklearn.utils import check_random_state

from crossmetric._checks import check_positive_int
from crossmetric.metrics import roc_auc
from crossmetric.pairs import make_pairs

__all__ = ["SearchResult", "object_folds", "inner_pair_splits", "search_params"]


@dataclass
class SearchResult:
    """Outcome of :func:`search_params`.

    Attributes
    ----------
    best_params : dict
        The chosen candidate.
    best_score : float
        Its mean validation AUC.
    candidates : list of dict
        ``{"params", "mean_auc", "std_auc", "n_failed"}`` for every candidate, in grid order.
    """

    best_params: dict
    best_score: float
    candidates: list = field(default_factory=list)


def object_folds(labels, n_splits: int = 3, *, group: str = "identity",
                 random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_splits`` (train, validation) splits of objects, grouped by identity or by object.

    Parameters
    ----------
    labels : array-like of shape (n_objects,)
        Identity of every object.
    n_splits : int, default=3
    group : {"identity", "sample"}, default="identity"
        ``"identity"``: an identity's objects are all in one validation fold (shuffled
        :class:`~sklearn.model_selection.GroupKFold`); ``"sample"``: folds of objects stratified
        by identity.
    random_state : int, RandomState or None

    Returns
    -------
    list of (train_index, validation_index)
    """
    labels = np.asarray(labels)
    n_splits = check_positive_int(n_splits, "n_splits", minimum=2)
    rng = check_random_state(random_state)
    _, codes = np.unique(labels, return_inverse=True)
    seed = rng.randint(2**31 - 1)
    if group == "identity":
        if codes.max() + 1 < n_splits:
            raise ValueError(f"group='identity' needs at least n_splits={n_splits} identities, "
                             f"got {codes.max() + 1}.")
        cv = GroupKFold(n_splits, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(labels.size), groups=codes))
    if group == "sample":
        cv = StratifiedKFold(n_splits, shuffle=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # an identity rarer than n_splits
            return list(cv.split(np.zeros(labels.size), codes))
    raise ValueError(f"group must be 'identity' or 'sample', got {group!r}.")


def inner_pair_splits(labels, n_splits: int = 3, *, group: str = "identity",
                      cross_modal: bool = True, n_negatives: int = 1,
                      max_positives: int | None = 1000, random_state=None) -> list[tuple]:
    """Pairs among each side of :func:`object_folds`: ``(tr_pairs, tr_y, va_pairs, va_y)``.

    Pair indices refer to the objects (rows) given, as in the outer protocols: column 0 a row
    of ``X``, column 1 a row of ``Y`` (the same object list). Validation pairs get at most
    ``max_positives`` positives too, and ``n_negatives`` negatives per positive.
    """
    labels = np.asarray(labels)
    rng = check_random_state(random_state)
    out = []
    for tr, va in object_folds(labels, n_splits, group=group, random_state=rng):
        part = []
        for rows in (np.sort(tr), np.sort(va)):
            lab = labels[rows]
            pairs, y = make_pairs(lab, lab if cross_modal else None, n_negatives=n_negatives,
                                  max_positives=max_positives, random_state=rng)
            part += [rows[pairs], y]
        if np.unique(part[1]).size < 2 or np.unique(part[3]).size < 2:
            raise ValueError("an inner fold has pairs of one class only; use fewer n_splits "
                             "or more objects per identity.")
        out.append(tuple(part))
    return out


def _identity(X, Y, pairs, y, estimator):
    return X, Y


def search_params(estimator, param_grid, X, Y, labels, *, n_splits: int = 3,
                  group: str = "identity", cross_modal: bool = True, n_negatives: int = 1,
                  max_positives: int | None = 1000,
                  prepare: Callable | None = None, random_state=None) -> SearchResult:
    """Choose ``estimator``'s parameters from ``param_grid`` by inner cross-validation.

    Parameters
    ----------
    estimator : pair learner
        Unfitted; cloned for every fit, its ``preprocessor`` set to the (prepared) objects.
    param_grid : dict or list of dict
        As :class:`sklearn.model_selection.ParameterGrid` (small grids: every candidate costs
        ``n_splits`` fits).
    X, Y : ndarray of shape (n_objects, d_x), (n_objects, d_y)
        The *training* objects only (row ``r`` of both is object ``r``).
    labels : array-like of shape (n_objects,)
        Identity of every object (forms the pairs and, with ``group="identity"``, the folds).
    n_splits : int, default=3
    group : {"identity", "sample"}, default="identity"
        See :func:`object_folds`.
    cross_modal : bool, default=True
        Pairs join a row of ``X`` and a row of ``Y``; ``False``: single-modal pairs of ``X``.
    n_negatives, max_positives :
        Passed to :func:`crossmetric.pairs.make_pairs` on every side of every fold.
    prepare : callable, optional
        ``prepare(X, Y, train_pairs, train_y, estimator) -> (X', Y')``: preprocessing fitted on
        the inner training pairs (the runner's PCA / CCA steps), applied to all objects.
    random_state : int, RandomState or None
        Folds and pairs; an estimator whose ``random_state`` is ``None`` gets a drawn seed.

    Returns
    -------
    SearchResult

    Raises
    ------
    ValueError
        Empty grid; every candidate failed on some fold.
    """
    grid = list(ParameterGrid(param_grid))
    if not grid:
        raise ValueError("param_grid is empty.")
    rng = check_random_state(random_state)
    prepare = prepare or _identity
    folds = inner_pair_splits(labels, n_splits, group=group, cross_modal=cross_modal,
                              n_negatives=n_negatives, max_positives=max_positives,
                              random_state=rng)
    seed = int(rng.randint(2**31 - 1))
    scores = np.full((len(grid), len(folds)), np.nan)
    errors: dict[int, str] = {}
    for f, (tr_p, tr_y, va_p, va_y) in enumerate(folds):
        Xf, Yf = prepare(X, Y, tr_p, tr_y, estimator)
        for c, params in enumerate(grid):
            est = clone(estimator).set_params(**params)
            if "random_state" in est.get_params(deep=False) and est.random_state is None:
                est.set_params(random_state=seed)
            est.set_params(preprocessor=(Xf, Yf) if cross_modal else Xf)
            try:
                with warnings.catch_warnings():
                    # the outer fit reports its own warnings; inner fits stay quiet
                    warnings.simplefilter("ignore")
                    est.fit(tr_p, tr_y)
                    scores[c, f] = roc_auc(va_y, -est.pair_distance(va_p))
            except (ValueError, np.linalg.LinAlgError) as exc:  # e.g. n_components too large
                errors.setdefault(c, f"{type(exc).__name__}: {exc}")
    candidates = []
    for c, params in enumerate(grid):
        ok = np.isfinite(scores[c])
        candidates.append({"params": params,
                           "mean_auc": float(scores[c].mean()) if ok.all() else float("nan"),
                           "std_auc": float(scores[c].std()) if ok.all() else float("nan"),
                           "n_failed": int((~ok).sum())})
    means = np.array([cd["mean_auc"] for cd in candidates])
    if not np.isfinite(means).any():
        raise ValueError(f"every candidate of param_grid failed on some inner fold; first "
                         f"error: {next(iter(errors.values()), 'unknown')}")
    best = int(np.nanargmax(means))
    return SearchResult(dict(grid[best]), float(means[best]), candidates)


def describe_choices(choices: list[Mapping]) -> str:
    """``name=value (k/n)`` of the most frequent value of every parameter over splits."""
    if not choices:
        return ""
    names = sorted({k for c in choices for k in c})
    parts = []
    for name in names:
        vals = [repr(c.get(name)) for c in choices]
        top = max(set(vals), key=vals.count)
        parts.append(f"{name}={top} ({vals.count(top)}/{len(vals)})")
    return ", ".join(parts)
