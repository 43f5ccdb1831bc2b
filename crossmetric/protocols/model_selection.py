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

The same routine serves selections that bring their own folds or measures:

* ``folds=`` takes precomputed folds instead of drawing them: ``(train_pairs, train_y,
  validation_pairs, validation_y)`` tuples (e.g. scikit-learn-style folds of a fixed pair
  set) or :class:`~crossmetric.protocols.Split` objects -- a verification split validates on
  its ``test_pairs``, an identification split (one hold-out of persons,
  :func:`~crossmetric.protocols.reid_splits`) on its probe / gallery rows;
* ``scoring="cmc20"`` is the validation CMC averaged over ranks 1-20 (the re-id selection
  criterion); a callable ``scoring(estimator, pairs, y)`` -- any scikit-learn scorer -- scores
  the validation pairs;
* ``patience=N`` scans the candidates in grid order and stops once ``N`` in a row have not
  beaten the best so far (an ordered grid of iteration counts, where overfitting sets in);
* ``evaluate=`` replaces the built-in fit and measure by a protocol's own (the re-id
  protocol's :func:`~crossmetric.protocols.reid.evaluate_reid`).

:func:`crossmetric.reproduce.select_max_iter` (``max_iter`` of the PCCA reproductions) is a
thin caller of :func:`search_params`. The scan itself -- candidates × folds, ``patience``, the
tie and failure rules, the aggregation and ``cv_results()`` -- is
:func:`crossmetric._solvers.selection_scan.scan_candidates`, which imports nothing from the
protocols, so the learner :class:`crossmetric.learners.clml.CLMLCV` (``n_clusters``) calls it
directly with its own fit and scorer.

:func:`search_stages` runs several such searches one after the other, each with the winners of
the stages before it fixed: the papers' sequential selections (CML-AUC §V-B: γ with μ = 1e-7,
then μ with that γ). A stage written as :class:`StageIf` runs only when the parameter it
needs was set before it (GSM's ``start_mu`` acts only with ``start_from``).
:data:`crossmetric.registry.METHODS` holds each learner's paper grid
(``MethodSpec.paper_grid``), the one place where the papers' selections are written down.

The function only ever receives the outer training objects, so the outer test objects cannot
leak into the choice. :func:`crossmetric.protocols.run_protocols` calls it for every split when
given ``param_grids`` (``crossmetric benchmark --tune``); the grids of the command-line methods
are declared in :mod:`crossmetric.registry`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import check_random_state

from crossmetric._solvers.selection_scan import cv_results, scan_candidates
from crossmetric._utils.checks import check_indices, check_positive_int
from crossmetric._utils.content_cache import plain_params
from crossmetric.metrics import mean_average_precision, one_call_at_n, rank_accuracy, roc_auc
from crossmetric.protocols.evaluate import fit_on_pairs, measure_identification
from crossmetric.protocols.splits import Split, inner_pair_splits, object_folds
from crossmetric.protocols.views import cap_n_components
from crossmetric.registry import StageIf

__all__ = ["SCORINGS", "CMC_SCORE_RANK", "mean_cmc", "SearchResult", "object_folds",
           "inner_pair_splits", "search_params", "search_stages", "StageIf", "candidate_key",
           "beats_current"]

#: validation measures of :func:`search_params` (besides a callable scorer)
SCORINGS = ("auc", "rank1", "map", "cmc20")

#: ``scoring="cmc20"`` averages the validation CMC over ranks 1 to this rank
CMC_SCORE_RANK = 20


def mean_cmc(cmc) -> float:
    """The CMC curve ``cmc`` (``cmc[r - 1]``: the rate at rank ``r``) averaged over ranks 1 to
    :data:`CMC_SCORE_RANK` (over every rank when it is shorter): ``scoring="cmc20"`` and the
    re-id reproductions' ``max_iter`` selection.

    Examples
    --------
    >>> mean_cmc([0.5, 0.75, 1.0])
    0.75
    """
    return float(np.mean(np.asarray(cmc)[:CMC_SCORE_RANK]))


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
    scoring : str or callable
        The validation measure (one of :data:`SCORINGS`, or the callable scorer).
    fold_scores : ndarray of shape (n_candidates, n_folds) or None
        Every candidate's score on every fold (NaN where it failed), rows as ``candidates``.
    fit_times, score_times : ndarray of shape (n_candidates, n_folds) or None
        Seconds of every fit and of every validation score (NaN score time where the fit
        failed, or with ``evaluate=``, whose whole call counts as fit time).
    """

    best_params: dict
    best_score: float
    candidates: list = field(default_factory=list)
    scoring: str | Callable = "auc"
    fold_scores: np.ndarray | None = None
    fit_times: np.ndarray | None = None
    score_times: np.ndarray | None = None

    def cv_results(self) -> dict:
        """The candidates' scores as scikit-learn's ``GridSearchCV.cv_results_`` holds them.

        ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``, ``std_score_time``,
        ``params``, ``param_<name>`` (masked arrays: masked where a candidate lacks the
        parameter), ``split<k>_test_score``, ``mean_test_score``, ``std_test_score`` and
        ``rank_test_score`` (1 = best; ties share the smaller rank; failed candidates rank
        last), computed as ``GridSearchCV`` computes them from the same fold scores
        (:func:`crossmetric._solvers.selection_scan.cv_results`).

        Examples
        --------
        >>> import numpy as np
        >>> from crossmetric import Euclidean
        >>> from crossmetric.protocols.model_selection import search_params
        >>> labels = np.repeat(np.arange(12), 3)
        >>> noise = np.random.RandomState(0).normal(size=(36, 4)) * [0.1, 0.1, 4, 4]
        >>> X = labels[:, None] * [0.05, 0.05, 3, 3] + noise
        >>> res = search_params(Euclidean(), {"standardize": [False, True]}, X, X, labels,
        ...                     random_state=0)
        >>> cv = res.cv_results()
        >>> cv["param_standardize"].tolist(), cv["rank_test_score"].tolist()
        ([False, True], [1, 2])
        """
        if self.fold_scores is None:
            raise ValueError("cv_results needs fold_scores, which this SearchResult lacks "
                             "(built without them).")
        return cv_results([c["params"] for c in self.candidates], self.fold_scores,
                          self.fit_times, self.score_times)


def _identity(X, Y, pairs, y, estimator):
    return X, Y


def _identification_score(est, scoring: str, X, G, probe_labels, gallery_labels, *,
                          same_set: bool) -> float:
    """rank-1 / mAP / mean CMC over ranks 1-20 of probes ``X`` against gallery ``G``."""
    if scoring == "cmc20":
        n_gallery = len(gallery_labels) - (1 if same_set else 0)
        rep, _ = measure_identification(est, X, G, probe_labels, gallery_labels, ranks=(1,),
                                        same_set=same_set, blockwise=False,
                                        max_rank=max(1, min(CMC_SCORE_RANK, n_gallery)))
        return mean_cmc(rep["cmc"])
    rep, _ = measure_identification(est, X, G, probe_labels, gallery_labels, ranks=(1,),
                                    same_set=same_set, blockwise=False)
    return float(rep["rank1"] if scoring == "rank1" else rep["map"])


def _validation_score(est, scoring, fold: Split, Xf, Yf, labels, cross_modal: bool) -> float:
    """One fitted candidate's score on the validation side of ``fold`` (see
    :func:`search_params`)."""
    G = Yf if cross_modal else Xf
    if fold.test_pairs is None:  # an identification fold: its probe / gallery rows
        p, g = fold.probe_rows, fold.gallery_rows
        return _identification_score(est, scoring, Xf[p], G[g], labels[p], labels[g],
                                     same_set=False)
    va_p, va_y = fold.test_pairs, fold.test_y
    if callable(scoring):
        return float(scoring(est, va_p, va_y))
    if scoring == "auc":
        return roc_auc(va_y, -est.pair_distance(va_p))
    rows = np.unique(va_p)          # the validation objects (their pairs span them all)
    lab = labels[rows]
    # single-modal: each probe is also in the gallery and must not find itself (same_set)
    if scoring == "cmc20":
        return _identification_score(est, scoring, Xf[rows], G[rows], lab, lab,
                                     same_set=not cross_modal)
    D = est.cross_distance(Xf[rows], G[rows])
    if scoring == "rank1":
        return (rank_accuracy(D, lab, lab, rank=1) if cross_modal
                else one_call_at_n(D, lab, lab, 1, same_set=True))
    return mean_average_precision(D, lab, lab, same_set=not cross_modal)


def _check_fold_rows(k: int, fold: Split, n_x: int, n_y: int) -> None:
    """Every pair / probe / gallery row of a precomputed fold indexes ``X`` / ``Y``."""
    def rows(a, size, what):
        a = np.asarray(a)
        if a.dtype.kind not in "iu":
            raise ValueError(f"folds[{k}] {what} must be integer row indices, got dtype "
                             f"{a.dtype}.")
        check_indices(a, size, f"folds[{k}] {what}")

    for what, pairs in (("training pairs", fold.train_pairs),
                        ("validation pairs", fold.test_pairs)):
        if pairs is None:
            continue
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"folds[{k}] {what} must have shape (n_pairs, 2), got "
                             f"{pairs.shape}.")
        rows(pairs[:, 0], n_x, f"{what} (column 0, rows of X)")
        rows(pairs[:, 1], n_y, f"{what} (column 1, rows of the second side)")
    if fold.test_pairs is None:
        rows(fold.probe_rows, n_x, "probe_rows (rows of X)")
        rows(fold.gallery_rows, n_y, "gallery_rows (rows of the gallery side)")


def _as_splits(folds, draw_seed: Callable, n_x: int | None = None,
               n_y: int | None = None) -> list[Split]:
    """Precomputed ``folds`` as :class:`Split` objects (a tuple fold gets ``draw_seed()``),
    their rows checked against ``n_x`` / ``n_y`` when given."""
    out = []
    for k, fold in enumerate(folds):
        if isinstance(fold, Split):
            if fold.test_pairs is None and (fold.probe_rows is None
                                            or fold.gallery_rows is None):
                raise ValueError(f"folds[{k}] is a Split with neither test_pairs nor "
                                 "probe_rows and gallery_rows to validate on.")
            split = fold
        else:
            try:
                tr_p, tr_y, va_p, va_y = fold
            except (TypeError, ValueError):
                raise ValueError(f"folds must hold Split objects or (train_pairs, train_y, "
                                 f"validation_pairs, validation_y) tuples; folds[{k}] is "
                                 f"{type(fold).__name__}.") from None
            split = Split("verification", k, np.asarray(tr_p), np.asarray(tr_y),
                          test_pairs=np.asarray(va_p), test_y=np.asarray(va_y), seed=None)
        if n_x is not None:
            _check_fold_rows(k, split, n_x, n_y)
        if not isinstance(fold, Split):
            split.seed = draw_seed()
        out.append(split)
    if not out:
        raise ValueError("folds is empty.")
    return out


def _unseeded(estimator, grid) -> bool:
    """Whether some candidate of ``grid`` would have ``random_state=None``."""
    params = estimator.get_params(deep=False)
    return "random_state" in params and any(
        {**params, **cand}.get("random_state") is None for cand in grid)


#: the key under which a search's ``memo`` keeps its stopped fits (:func:`_stopped_key`)
_STOPPED = "stopped fits"


def _stopped_key(est, f: int):
    """``(key, max_iter)``: the key of the candidate ``est``'s fit on fold ``f`` with its
    ``max_iter`` left out, and that ``max_iter``, for a learner whose ``max_iter`` only caps
    its iterations (``_max_iter_only_caps``: the same steps whatever the cap, until a stop):
    a fit that stopped before its cap, after ``n`` iterations, is the fit of every
    ``max_iter`` above ``n`` (an iteration-count stage after a guarded fit that stopped
    early). ``None`` for other learners and candidates."""
    cap = est.get_params(deep=False).get("max_iter")
    if not getattr(est, "_max_iter_only_caps", False) or not isinstance(cap, int | np.integer):
        return None
    key = plain_params(est, exclude=("max_iter",))
    return None if key is None else ((key, f), int(cap))


def _fit_and_score(params, f, *, estimator, splits, views, scoring, labels, cross_modal,
                   evaluate, stopped=None) -> float | tuple[float, float, float]:
    """Candidate ``params`` on fold ``f``: its score, or ``(score, fit_seconds,
    score_seconds)`` (the ``fit_and_score`` of
    :func:`~crossmetric._solvers.selection_scan.scan_candidates`, which records a ``ValueError``
    / ``LinAlgError`` as a failure). ``stopped`` (a dict, or ``None``) holds ``(n_iter,
    score)`` of the fits that stopped before their ``max_iter`` (:func:`_stopped_key`): a
    candidate that would repeat one is scored from it (fit and score times 0)."""
    est = clone(estimator).set_params(**params)
    fold = splits[f]
    if evaluate is not None:
        return float(evaluate(est, fold))
    key, cap = (None if stopped is None else _stopped_key(est, f)) or (None, 0)
    if key is not None and key in stopped and stopped[key][0] < cap:
        return stopped[key][1], 0.0, 0.0
    Xf, Yf = views[f]
    # a candidate's n_components above the fold's prepared views is capped, as the outer fit
    # caps it (crossmetric.protocols.views.cap_n_components)
    cap_n_components({"": est}, Xf.shape[1] if Yf is None else min(Xf.shape[1], Yf.shape[1]))
    # the clone gets the fold's seed when its random_state is None; the inner fits'
    # warnings are recorded, not shown (the outer fit reports its own)
    fitted = fit_on_pairs(est, fold.train_pairs, fold.train_y,
                          preprocessor=(Xf, Yf) if cross_modal else Xf, seed=fold.seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score = _validation_score(fitted.model, scoring, fold, Xf, Yf, labels, cross_modal)
    n_iter = getattr(fitted.model, "n_iter_", None)
    if key is not None and isinstance(n_iter, int | np.integer) and n_iter < cap:
        stopped[key] = (int(n_iter), score)
    return score, fitted.fit_seconds, time.perf_counter() - t0


def candidate_key(estimator, params: Mapping):
    """The learner a candidate fits, as a hashable key: its class and all its parameters
    (``estimator`` with ``params`` set); ``None`` where a parameter is not a plain value
    (an array, an estimator), which is never taken for another."""
    return plain_params(clone(estimator).set_params(**params))


def _check_search_args(grid, scoring, labels, folds, patience, on_error, evaluate, prepare):
    if not grid:
        raise ValueError("param_grid is empty.")
    if not (callable(scoring) or scoring in SCORINGS):
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)} or a callable "
                         f"scorer(estimator, pairs, y), got {scoring!r}.")
    if on_error not in ("record", "raise"):
        raise ValueError(f"on_error must be 'record' or 'raise', got {on_error!r}.")
    if patience is not None:
        check_positive_int(patience, "patience")
    if evaluate is not None and not callable(evaluate):
        raise ValueError(f"evaluate must be a callable evaluate(estimator, fold) -> float, "
                         f"got {evaluate!r}.")
    if evaluate is not None and prepare is not None:
        raise ValueError("prepare and evaluate cannot both be given: evaluate does its own "
                         "fit and measure.")
    needs_labels = folds is None or (evaluate is None and scoring in ("rank1", "map", "cmc20"))
    if labels is None and needs_labels:
        raise ValueError("labels must be given to draw folds or for an identification "
                         "scoring (rank1, map, cmc20).")


def search_params(estimator, param_grid, X, Y, labels, *, n_splits: int = 3,
                  group: str = "identity", cross_modal: bool = True, n_negatives: int = 1,
                  max_positives: int | None = 1000, scoring="auc",
                  prepare: Callable | None = None, random_state=None, folds=None,
                  patience: int | None = None, evaluate: Callable | None = None,
                  on_error: str = "record", n_jobs: int | None = None,
                  memo: dict | None = None) -> SearchResult:
    """Choose ``estimator``'s parameters from ``param_grid`` by inner cross-validation.

    Parameters
    ----------
    estimator : pair learner
        Unfitted; cloned for every fit, its ``preprocessor`` set to the (prepared) objects.
    param_grid : dict or list of dict
        As :class:`sklearn.model_selection.ParameterGrid` (small grids: every candidate costs
        one fit per fold). For one parameter the candidates keep the order of its list.
    X, Y : ndarray of shape (n_objects, d_x), (n_objects, d_y)
        The *training* objects only (row ``r`` of both is object ``r``); ``Y`` may be
        ``None`` with ``cross_modal=False``.
    labels : array-like of shape (n_objects,) or None
        Identity of every object (forms the pairs and, with ``group="identity"``, the folds;
        names the probes and gallery items of the identification scorings). May be ``None``
        with precomputed ``folds`` scored on their pairs.
    n_splits : int, default=3
    group : {"identity", "sample"}, default="identity"
        See :func:`object_folds`.
    cross_modal : bool, default=True
        Pairs join a row of ``X`` and a row of ``Y``; ``False``: single-modal pairs of ``X``.
    n_negatives, max_positives :
        Passed to :func:`crossmetric.pairs.make_pairs` on every side of every fold.
    scoring : {"auc", "rank1", "map", "cmc20"} or callable, default="auc"
        Validation measure: ROC AUC of the validation pairs, or rank-1 / mAP / CMC averaged
        over ranks 1-20 (:data:`CMC_SCORE_RANK`; over every rank when the gallery is smaller)
        of the validation objects' ``X`` rows (probes) against their ``Y`` rows (gallery;
        ``cross_modal=False``: against the other validation objects). Identification scores
        need every validation identity to have an object on both sides, as the outer
        identification protocols do. An identification fold (see ``folds``) ranks its own
        probe rows against its gallery rows. A callable ``scoring(estimator, pairs, y) ->
        float`` (any scikit-learn scorer, e.g. ``sklearn.metrics.get_scorer("roc_auc")``)
        scores the validation pairs; higher is better.
    prepare : callable, optional
        ``prepare(X, Y, train_pairs, train_y, estimator) -> (X', Y')``: preprocessing fitted on
        the inner training pairs (the runner's PCA / CCA steps), applied to all objects.
    random_state : int, RandomState or None
        Folds and pairs (when ``folds`` is None), and the seed handed to a candidate whose
        ``random_state`` is ``None`` (a :class:`~crossmetric.protocols.Split` fold hands its
        own ``seed``).
    folds : sequence, optional
        Precomputed folds instead of drawn ones (``n_splits``, ``group``, ``n_negatives`` and
        ``max_positives`` are then unused): ``(train_pairs, train_y, validation_pairs,
        validation_y)`` tuples of index pairs into ``X`` / ``Y``, or
        :class:`~crossmetric.protocols.Split` objects -- validated on their ``test_pairs``
        when they have them, else on their ``probe_rows`` (of ``X``) against their
        ``gallery_rows`` (of ``Y``, or of ``X`` with ``cross_modal=False``). One fold is a
        single hold-out.
    patience : int, optional
        Scan the candidates in grid order and stop once ``patience`` consecutive candidates
        have not beaten the best mean score so far (ties do not beat it, so the first of
        equal candidates wins; a failed candidate does not beat it, and failures before the
        first scored candidate are not counted). ``None`` evaluates every candidate.
    evaluate : callable, optional
        ``evaluate(estimator, fold) -> float``: fits the unfitted candidate ``estimator``
        on ``fold`` (a :class:`~crossmetric.protocols.Split`) and returns its validation
        score (higher is better), in place of the built-in fit and ``scoring`` -- for a
        protocol with its own evaluation (:func:`crossmetric.protocols.reid.evaluate_reid`). It sees
        the candidate's ``random_state`` as given and ``fold.seed`` to hand on.
    on_error : {"record", "raise"}, default="record"
        A ``ValueError`` / ``LinAlgError`` of a fit or score: ``"record"`` gives that
        candidate a NaN score on the fold (counted in ``n_failed``); ``"raise"`` re-raises.
    n_jobs : int, optional
        Fits run in parallel through joblib (the candidates of a fold; with ``patience``, the
        folds of a candidate). Results do not depend on it.
    memo : dict, optional
        Fold scores of candidates measured on the same folds before, keyed by the learner a
        candidate fits (its class and every parameter; :func:`candidate_key`), updated with
        this search's: a candidate whose learner is a key is not fitted again (its times are
        0). :func:`search_stages` shares one over its stages, which use the same folds, so
        a stage's candidate that repeats the choice so far costs nothing. Only for searches
        over the same data, folds and ``prepare``. It also keeps, per fold, the fits that
        stopped before their ``max_iter`` (learners whose ``max_iter`` only caps the
        iterations): a candidate that differs from one only by a larger ``max_iter`` than
        its iterations is that fit, scored without fitting again (its times are 0; in this
        process only, not across ``n_jobs`` workers).

    Returns
    -------
    SearchResult
        With ``patience``, ``candidates`` lists the candidates evaluated before the stop.

    Raises
    ------
    ValueError
        Empty grid; every candidate failed on some fold.

    Examples
    --------
    An ordered scan of ``max_iter`` over one precomputed hold-out, stopped once two values
    in a row do not beat the best:

    >>> import numpy as np
    >>> from crossmetric import PCCA, make_pairs
    >>> from crossmetric.protocols.model_selection import search_params
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(10), 4)
    >>> X = np.c_[labels[:, None] + 0.6 * rng.normal(size=(40, 3)), rng.normal(size=(40, 5))]
    >>> tr, va = np.arange(20), np.arange(20, 40)
    >>> (tp, ty), (vp, vy) = (make_pairs(labels[r], random_state=0) for r in (tr, va))
    >>> res = search_params(PCCA(n_components=2, random_state=0),
    ...                     {"max_iter": [1, 2, 4, 8, 16, 32, 64]}, X, None, labels,
    ...                     folds=[(tr[tp], ty, va[vp], vy)], cross_modal=False,
    ...                     scoring="cmc20", patience=2)
    >>> [c["params"]["max_iter"] for c in res.candidates], res.best_params
    ([1, 2, 4, 8, 16], {'max_iter': 4})
    """
    grid = list(ParameterGrid(param_grid))
    _check_search_args(grid, scoring, labels, folds, patience, on_error, evaluate, prepare)
    labels = None if labels is None else np.asarray(labels)
    if Y is None and cross_modal and evaluate is None:
        raise ValueError("Y must be given with cross_modal=True (pairs join a row of X and "
                         "a row of Y); pass cross_modal=False for single-modal pairs of X.")
    rng = check_random_state(random_state)
    prepare = prepare or _identity
    if folds is None:
        drawn = inner_pair_splits(labels, n_splits, group=group, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_positives,
                                  random_state=rng)
        seed = int(rng.randint(2**31 - 1))
        splits = _as_splits(drawn, lambda: seed)
    else:
        # a seed is drawn only when a tuple fold's candidate will use it (a caller's
        # RandomState, or NumPy's global one, stays put); a Split brings its own seed
        drawn_seed: list[int] = []

        def draw_seed() -> int:
            if not drawn_seed:
                drawn_seed.append(int(rng.randint(2**31 - 1))
                                  if _unseeded(estimator, grid) else 0)
            return drawn_seed[0]

        n_x = len(X)
        n_y = len(Y) if cross_modal and Y is not None else n_x
        splits = _as_splits(folds, draw_seed, n_x, n_y)
        if evaluate is None and (scoring == "auc" or callable(scoring)) and any(
                f.test_pairs is None for f in splits):
            raise ValueError("an identification fold (probe / gallery rows) needs scoring "
                             "'rank1', 'map' or 'cmc20'; pair scorings need validation pairs.")
    # each fold's views prepared once, on its inner training pairs
    views = (None if evaluate is not None else
             [prepare(X, Y, fold.train_pairs, fold.train_y, estimator) for fold in splits])
    fit_and_score = partial(_fit_and_score, estimator=estimator, splits=splits, views=views,
                            scoring=scoring, labels=labels, cross_modal=cross_modal,
                            evaluate=evaluate,
                            stopped=None if memo is None else memo.setdefault(_STOPPED, {}))
    keys = [None if memo is None else candidate_key(estimator, p) for p in grid]
    known = {c: memo[k] for c, k in enumerate(keys) if k is not None and k in memo}
    scan = scan_candidates(grid, len(splits), fit_and_score, patience=patience,
                           n_jobs=n_jobs, on_error=on_error, known=known)
    if memo is not None:
        for c, k in enumerate(keys[:len(scan.params)]):
            if k is not None and c not in known and np.isfinite(scan.scores[c]).all():
                memo[k] = scan.scores[c].copy()
    candidates = scan.candidates()
    if scoring == "auc":
        for cand in candidates:
            cand.update(mean_auc=cand["mean_score"], std_auc=cand["std_score"])
    best = scan.best_index
    return SearchResult(dict(grid[best]), candidates[best]["mean_score"], candidates, scoring,
                        scan.scores, scan.fit_times, scan.score_times)


def search_stages(estimator, stages, X, Y, labels, *, random_state=None,
                  keep_current: bool = False, **search_kw) -> SearchResult:
    """:func:`search_params` over ``stages`` in turn, each stage's winner fixed for the next.

    A paper that selects its parameters one after the other (CML-AUC §V-B: γ from
    {0.1, …, 5} with μ = 1e-7, then μ from {1e-3, …, 1e-7} with that γ) is the list
    ``[{"gamma": [...], "mu": [1e-7]}, {"mu": [...]}]``. Every stage uses the same inner folds
    and pairs (one seed drawn from ``random_state``), so the stages compare like with like.

    Parameters
    ----------
    estimator : pair learner
    stages : dict or sequence of dict
        One grid (a plain :func:`search_params`) or one grid per stage. A stage given as
        :class:`StageIf` runs only when its ``requires`` parameter is set (not ``None``) on
        the estimator with the earlier stages' choices; otherwise it is skipped, which gives
        the same choice as fitting its candidates (one fit, repeated) without the fits.
    X, Y, labels :
        The training objects only, as in :func:`search_params`.
    random_state : int, RandomState or None
    keep_current : bool, default=False
        Give each stage the estimator's current setting of the stage's parameters (with the
        earlier stages' choices) as its first candidate, so that a tie keeps it and the
        selection can return the settings it started from -- what ``crossmetric benchmark
        --tune`` does, so that a tuned learner is never worse on the inner folds than its
        defaults (a closed form's ``"auto"`` size, which may keep the untrained distance; a
        learner's full rank). A grid that already holds it keeps it once. The current setting
        is then left only for a candidate that beats it beyond the folds' noise
        (:func:`beats_current`): the best of many candidates on a few inner folds is partly
        the luckiest, and the defaults are the guarded choice.
    **search_kw
        Passed to :func:`search_params` (``n_splits``, ``group``, ``scoring``, ...).

    Returns
    -------
    SearchResult
        ``best_params`` merges every stage's choice; ``best_score`` is the last stage run;
        ``candidates`` lists every run stage's candidates with their ``"stage"`` index, and
        ``fold_scores`` / ``fit_times`` / ``score_times`` their rows (the stages share their
        folds), so ``cv_results()`` covers every stage.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import CCA
    >>> from crossmetric.protocols.model_selection import search_stages
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
    memo: dict = {}  # the stages share their folds: a repeated candidate is not refitted
    chosen: dict = {}
    candidates: list = []
    results = []
    for k, grid in enumerate(stage_list):
        est = clone(estimator).set_params(**chosen)
        if isinstance(grid, StageIf) and not grid.applies(est.get_params()):
            continue  # its candidates would all be one fit: the choice before it stands
        if keep_current:
            grid = _current_first(est, grid)
        result = search_params(est, grid, X, Y, labels, random_state=seed, memo=memo,
                               **search_kw)
        if keep_current and not beats_current(result):
            result = replace(result, best_params=dict(result.candidates[0]["params"]),
                             best_score=result.candidates[0]["mean_score"])
        candidates += [{**cd, "params": {**chosen, **cd["params"]}, "stage": k}
                       for cd in result.candidates]
        chosen.update(result.best_params)
        results.append(result)
    if not results:
        raise ValueError(f"stages: every stage needs a parameter that is not set (requires="
                         f"{sorted({g.requires for g in stage_list})}); nothing to select.")
    # every stage scores on the same folds: the rows stack as ``candidates`` do
    stacked = [np.vstack([getattr(r, name) for r in results])
               for name in ("fold_scores", "fit_times", "score_times")]
    return SearchResult(chosen, results[-1].best_score, candidates, results[-1].scoring,
                        *stacked)


def beats_current(result: SearchResult) -> bool:
    """Whether ``result``'s choice beats its first candidate (the current setting) beyond the
    inner folds' noise: its mean fold score is higher by more than the standard error of the
    fold-by-fold differences (the one-standard-error rule, Hastie, Tibshirani & Friedman,
    *The Elements of Statistical Learning*, §7.10, on paired folds, the current setting in
    the place of the simplest model).

    The choice is the first candidate itself, or the current setting failed on a fold, or
    there is a single fold: the plain rule (the best mean) stands.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols.model_selection import SearchResult, beats_current
    >>> def result(rows):
    ...     rows = np.asarray(rows)
    ...     cands = [{"params": {"k": i}, "mean_score": float(r.mean())}
    ...              for i, r in enumerate(rows)]
    ...     best = int(np.argmax(rows.mean(axis=1)))
    ...     return SearchResult({"k": best}, cands[best]["mean_score"], cands, "rank1", rows)
    >>> beats_current(result([[0.50, 0.40, 0.60], [0.52, 0.38, 0.63]]))  # +0.01, noisy
    False
    >>> beats_current(result([[0.50, 0.40, 0.60], [0.53, 0.42, 0.64]]))  # +0.03 on each
    True
    """
    scores = result.fold_scores
    if scores is None or scores.shape[1] < 2 or not np.isfinite(scores[0]).all():
        return True
    means = np.array([c["mean_score"] for c in result.candidates], dtype=float)
    best = int(np.nanargmax(means))  # the scan's choice: the best mean, the first on ties
    if best == 0:
        return True
    diff = scores[best] - scores[0]
    return bool(diff.mean() > diff.std(ddof=1) / np.sqrt(diff.size))


def _current_first(est, grid) -> list:
    """``grid`` as single candidates, the estimator's current setting of its parameters first
    (and only there)."""
    cands = list(ParameterGrid(grid))
    params = est.get_params(deep=False)
    current = {k: params[k] for k in sorted({k for c in cands for k in c})}
    key = candidate_key(est, current)
    rest = [c for c in cands if key is None or candidate_key(est, c) != key]
    return [{k: [v] for k, v in c.items()} for c in (current, *rest)]


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
