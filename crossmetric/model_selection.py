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
   CCA -- refitted on the inner training pairs) and scored on the validation side:
   ``scoring="auc"`` by the ROC AUC of its validation pairs (verification), ``"rank1"`` /
   ``"map"`` by the rank-1 rate / mean average precision of every validation object's first
   modality against all validation objects' second modality (identification: the measure the
   re-id and sketch papers report, and the one a pair AUC does not track when there are few
   identities);
4. the candidate with the best mean validation score wins (ties: the first in grid order).

:func:`search_stages` runs several such searches one after the other, each with the winners of
the stages before it fixed: the papers' sequential selections (CML-AUC §V-B: γ with μ = 1e-7,
then μ with that γ). :data:`crossmetric.registry.METHODS` holds each learner's paper grid
(``MethodSpec.paper_grid``), the one place where the papers' selections are written down.

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
from sklearn.model_selection import ParameterGrid
from sklearn.utils import check_random_state

from crossmetric.metrics import mean_average_precision, one_call_at_n, rank_accuracy, roc_auc
from crossmetric.protocols.splits import inner_pair_splits, object_folds

__all__ = ["SCORINGS", "SearchResult", "object_folds", "inner_pair_splits", "search_params",
           "search_stages"]

#: validation measures of :func:`search_params`
SCORINGS = ("auc", "rank1", "map")


@dataclass
class SearchResult:
    """Outcome of :func:`search_params`.

    Attributes
    ----------
    best_params : dict
        The chosen candidate.
    best_score : float
        Its mean validation score (``scoring``).
    candidates : list of dict
        ``{"params", "mean_score", "std_score", "n_failed"}`` for every candidate, in grid
        order (``"stage"`` too with :func:`search_stages`); ``mean_auc`` / ``std_auc`` repeat
        the score under its former names when ``scoring="auc"``.
    scoring : str
        The validation measure (one of :data:`SCORINGS`).
    """

    best_params: dict
    best_score: float
    candidates: list = field(default_factory=list)
    scoring: str = "auc"


def _identity(X, Y, pairs, y, estimator):
    return X, Y


def _validation_score(est, scoring: str, va_p: np.ndarray, va_y: np.ndarray, Xf, Yf,
                      labels: np.ndarray, cross_modal: bool) -> float:
    """One fitted candidate's score on its validation objects (see :func:`search_params`)."""
    if scoring == "auc":
        return roc_auc(va_y, -est.pair_distance(va_p))
    rows = np.unique(va_p)          # the validation objects (their pairs span them all)
    lab = labels[rows]
    D = est.cross_distance(Xf[rows], (Yf if cross_modal else Xf)[rows])
    # single-modal: each probe is also in the gallery and must not find itself (same_set)
    if scoring == "rank1":
        return (rank_accuracy(D, lab, lab, rank=1) if cross_modal
                else one_call_at_n(D, lab, lab, 1, same_set=True))
    return mean_average_precision(D, lab, lab, same_set=not cross_modal)


def search_params(estimator, param_grid, X, Y, labels, *, n_splits: int = 3,
                  group: str = "identity", cross_modal: bool = True, n_negatives: int = 1,
                  max_positives: int | None = 1000, scoring: str = "auc",
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
    scoring : {"auc", "rank1", "map"}, default="auc"
        Validation measure: ROC AUC of the validation pairs, or rank-1 / mAP of the validation
        objects' ``X`` rows (probes) against their ``Y`` rows (gallery; ``cross_modal=False``:
        against the other validation objects). Identification scores need every validation
        identity to have an object on both sides, as the outer identification protocols do.
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
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}.")
    labels = np.asarray(labels)
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
                    scores[c, f] = _validation_score(est, scoring, va_p, va_y, Xf, Yf,
                                                     labels, cross_modal)
            except (ValueError, np.linalg.LinAlgError) as exc:  # e.g. n_components too large
                errors.setdefault(c, f"{type(exc).__name__}: {exc}")
    candidates = []
    for c, params in enumerate(grid):
        ok = np.isfinite(scores[c])
        mean = float(scores[c].mean()) if ok.all() else float("nan")
        std = float(scores[c].std()) if ok.all() else float("nan")
        cand = {"params": params, "mean_score": mean, "std_score": std,
                "n_failed": int((~ok).sum())}
        if scoring == "auc":
            cand.update(mean_auc=mean, std_auc=std)
        candidates.append(cand)
    means = np.array([cd["mean_score"] for cd in candidates])
    if not np.isfinite(means).any():
        raise ValueError(f"every candidate of param_grid failed on some inner fold; first "
                         f"error: {next(iter(errors.values()), 'unknown')}")
    best = int(np.nanargmax(means))
    return SearchResult(dict(grid[best]), float(means[best]), candidates, scoring)


def search_stages(estimator, stages, X, Y, labels, *, random_state=None,
                  **search_kw) -> SearchResult:
    """:func:`search_params` over ``stages`` in turn, each stage's winner fixed for the next.

    A paper that selects its parameters one after the other (CML-AUC §V-B: γ from
    {0.1, …, 5} with μ = 1e-7, then μ from {1e-3, …, 1e-7} with that γ) is the list
    ``[{"gamma": [...], "mu": [1e-7]}, {"mu": [...]}]``. Every stage uses the same inner folds
    and pairs (one seed drawn from ``random_state``), so the stages compare like with like.

    Parameters
    ----------
    estimator : pair learner
    stages : dict or sequence of dict
        One grid (a plain :func:`search_params`) or one grid per stage.
    X, Y, labels :
        The training objects only, as in :func:`search_params`.
    random_state : int, RandomState or None
    **search_kw
        Passed to :func:`search_params` (``n_splits``, ``group``, ``scoring``, ...).

    Returns
    -------
    SearchResult
        ``best_params`` merges every stage's choice; ``best_score`` is the last stage's;
        ``candidates`` lists every stage's candidates with their ``"stage"`` index.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import CCA
    >>> from crossmetric.model_selection import search_stages
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(12), 3)
    >>> Z = rng.normal(size=(12, 4))[labels]
    >>> X, Y = Z + 0.3 * rng.normal(size=Z.shape), Z @ rng.normal(size=(4, 5))
    >>> res = search_stages(CCA(), [{"n_components": [1, 4]}, {"reg": [1e-3, 1e-1]}],
    ...                     X, Y, labels, scoring="rank1", random_state=0)
    >>> sorted(res.best_params), res.candidates[-1]["stage"]
    (['n_components', 'reg'], 1)
    """
    stage_list = [stages] if isinstance(stages, Mapping) else list(stages)
    if not stage_list:
        raise ValueError("stages is empty.")
    seed = int(check_random_state(random_state).randint(2**31 - 1))
    chosen: dict = {}
    candidates: list = []
    result = None
    for k, grid in enumerate(stage_list):
        est = clone(estimator).set_params(**chosen)
        result = search_params(est, grid, X, Y, labels, random_state=seed, **search_kw)
        candidates += [{**cd, "params": {**chosen, **cd["params"]}, "stage": k}
                       for cd in result.candidates]
        chosen.update(result.best_params)
    return SearchResult(chosen, result.best_score, candidates, result.scoring)


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
