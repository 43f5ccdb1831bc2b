"""The candidate scan shared by every parameter selection: candidates × folds, ``patience``,
the tie and failure rules, the fold-score aggregation and ``GridSearchCV``-style results.

This module knows nothing of how a candidate is fitted or measured: the caller hands a
``fit_and_score(params, fold_index)`` callable. It imports nothing from crossmetric's higher
layers (protocols, model_selection), so a learner (:class:`crossmetric.learners.clml.CLMLCV`)
and :func:`crossmetric.protocols.model_selection.search_params` both build on it.

The rules:

* without ``patience`` every candidate is scored on every fold, fold by fold (the candidates
  of one fold run together, in parallel with ``n_jobs``);
* with ``patience=N`` the candidates are scanned in grid order (the folds of one candidate
  together) and the scan stops once ``N`` in a row have not beaten the best mean so far --
  a tie does not beat it, a failed candidate (NaN mean) does not beat it, and failures before
  the first scored candidate are not counted;
* a candidate's mean / std are over its folds, NaN when it failed on one;
* the best mean wins; on ties the first candidate in grid order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import rankdata

__all__ = ["Scan", "scan_candidates", "cv_results"]


@dataclass
class Scan:
    """The outcome of :func:`scan_candidates` (rows: the evaluated candidates, grid order).

    Attributes
    ----------
    params : list of dict
    scores, fit_times, score_times : ndarray of shape (n_evaluated, n_folds)
        NaN score where a candidate failed; NaN score time where it failed or where
        ``fit_and_score`` returned a bare score (its whole time then counts as fit time).
    errors : dict
        Candidate index → the first error message it raised (``on_error="record"``).
    """

    params: list
    scores: np.ndarray
    fit_times: np.ndarray
    score_times: np.ndarray
    errors: dict = field(default_factory=dict)

    @property
    def means(self) -> np.ndarray:
        """Mean score of every candidate (NaN where it failed on some fold)."""
        return np.array([float(s.mean()) if np.isfinite(s).all() else float("nan")
                         for s in self.scores])

    @property
    def best_index(self) -> int:
        """The best mean (the first on ties); ``ValueError`` when every candidate failed."""
        means = self.means
        if not np.isfinite(means).any():
            raise ValueError(f"every candidate of param_grid failed on some inner fold; first "
                             f"error: {next(iter(self.errors.values()), 'unknown')}")
        return int(np.nanargmax(means))

    def candidates(self) -> list[dict]:
        """``{"params", "mean_score", "std_score", "n_failed"}`` per candidate."""
        out = []
        for params, s in zip(self.params, self.scores, strict=True):
            ok = np.isfinite(s)
            mean = float(s.mean()) if ok.all() else float("nan")
            std = float(s.std()) if ok.all() else float("nan")
            out.append({"params": params, "mean_score": mean, "std_score": std,
                        "n_failed": int((~ok).sum())})
        return out

    def cv_results(self) -> dict:
        """:func:`cv_results` of this scan, fit and score times included."""
        return cv_results(self.params, self.scores, self.fit_times, self.score_times)


def _timed(fit_and_score, params, f, on_error, catch):
    """``(score, error, fit_seconds, score_seconds)`` of one candidate on one fold."""
    t0 = time.perf_counter()
    try:
        out = fit_and_score(params, f)
    except catch as exc:
        if on_error == "raise":
            raise
        return float("nan"), f"{type(exc).__name__}: {exc}", time.perf_counter() - t0, np.nan
    if isinstance(out, tuple):
        score, fit_s, score_s = out
        return float(score), None, float(fit_s), float(score_s)
    return float(out), None, time.perf_counter() - t0, np.nan


def scan_candidates(grid: Sequence[dict], n_folds: int, fit_and_score: Callable, *,
                    patience: int | None = None, n_jobs: int | None = None,
                    on_error: str = "record",
                    catch: tuple = (ValueError, np.linalg.LinAlgError),
                    known: Mapping[int, Sequence[float]] | None = None) -> Scan:
    """Score the candidates of ``grid`` on ``n_folds`` folds by the rules of the module.

    Parameters
    ----------
    grid : sequence of dict
        The candidates, in the order the ties and ``patience`` follow.
    n_folds : int
    fit_and_score : callable
        ``fit_and_score(params, fold_index)`` fits candidate ``params`` on the training side
        of fold ``fold_index`` and returns its validation score (higher is better), or
        ``(score, fit_seconds, score_seconds)``. Sent to joblib workers when ``n_jobs`` asks
        for them.
    patience : int, optional
        Stop after ``patience`` candidates in a row that do not beat the best mean so far.
    n_jobs : int, optional
        Parallel calls through joblib; ``None`` / 1: in this process. Results do not depend
        on it.
    on_error : {"record", "raise"}, default="record"
        An exception of ``catch`` is recorded (NaN score) or re-raised.
    catch : tuple of exception types
    known : mapping, optional
        Candidate index → its fold scores, already measured on these folds (the same fit
        scored before): recorded without calling ``fit_and_score``, with fit and score times
        of 0. The scan's rules treat it as any other candidate.

    Returns
    -------
    Scan

    Examples
    --------
    >>> from crossmetric._solvers.selection_scan import scan_candidates
    >>> table = {1: [0.5, 0.7], 2: [0.8, 0.8], 3: [0.6, 0.9], 4: [0.9, 0.9]}
    >>> scan = scan_candidates([{"k": k} for k in (1, 2, 3, 4)], 2,
    ...                        lambda p, f: table[p["k"]][f], patience=1)
    >>> [c["params"]["k"] for c in scan.candidates()], scan.params[scan.best_index]
    ([1, 2, 3], {'k': 2})
    """
    from joblib import Parallel, delayed

    grid = list(grid)

    def run(tasks):  # n_jobs None / 1: in this process, whatever joblib's configuration
        if n_jobs in (None, 1):
            return [fn(*args, **kwargs) for fn, args, kwargs in tasks]
        return Parallel(n_jobs=n_jobs)(tasks)

    shape = (len(grid), n_folds)
    scores, fit_t, score_t = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    errors: dict[int, str] = {}

    def record(c, f, out):
        scores[c, f], fit_t[c, f], score_t[c, f] = out[0], out[2], out[3]
        if out[1] is not None:
            errors.setdefault(c, out[1])

    known = dict(known or {})
    for c, row in known.items():
        scores[c], fit_t[c], score_t[c] = row, 0.0, 0.0
    n_seen = len(grid)
    if patience is None:
        todo = [c for c in range(len(grid)) if c not in known]
        for f in range(n_folds):
            outs = run(delayed(_timed)(fit_and_score, grid[c], f, on_error, catch)
                       for c in todo)
            for c, out in zip(todo, outs, strict=True):
                record(c, f, out)
    else:
        best, worse = -np.inf, 0
        for c, params in enumerate(grid):
            if c not in known:
                outs = run(delayed(_timed)(fit_and_score, params, f, on_error, catch)
                           for f in range(n_folds))
                for f, out in enumerate(outs):
                    record(c, f, out)
            mean = scores[c].mean()         # NaN when a fold failed: never an improvement
            if mean > best:
                best, worse = mean, 0
            elif np.isfinite(best):         # failures before the first score do not count
                worse += 1
                if worse >= patience:
                    n_seen = c + 1
                    break
    return Scan([dict(p) for p in grid[:n_seen]], scores[:n_seen], fit_t[:n_seen],
                score_t[:n_seen], errors)


def _mean_std(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = np.average(a, axis=1)
    return mean, np.sqrt(np.average((a - mean[:, None]) ** 2, axis=1))


def cv_results(params: Sequence[dict], fold_scores, fit_times=None, score_times=None) -> dict:
    """Candidates' fold scores as scikit-learn's ``GridSearchCV.cv_results_`` holds them.

    ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``, ``std_score_time`` (when the
    times are given), ``param_<name>`` (masked arrays: masked where a candidate lacks the
    parameter), ``params``, ``split<k>_test_score``, ``mean_test_score``, ``std_test_score``
    and ``rank_test_score`` (1 = best; ties share the smaller rank; failed candidates rank
    last), computed as ``GridSearchCV`` computes them.
    """
    S = np.asarray(fold_scores, dtype=np.float64)
    params = list(params)
    out: dict = {}
    if fit_times is not None and score_times is not None:
        for name, times in (("fit", fit_times), ("score", score_times)):
            mean, std = _mean_std(np.asarray(times, dtype=np.float64))
            out[f"mean_{name}_time"], out[f"std_{name}_time"] = mean, std
    for name in dict.fromkeys(k for p in params for k in p):
        try:
            arr = np.array([p[name] for p in params if name in p])
            dtype = arr.dtype if arr.dtype.kind != "U" and arr.ndim == 1 else object
        except ValueError:  # sequences of different lengths
            dtype = np.dtype(object)
        col = np.ma.MaskedArray(np.empty(len(params), dtype=dtype), mask=True)
        for i, p in enumerate(params):
            if name in p:
                col[i] = p[name]
        out[f"param_{name}"] = col
    out["params"] = params
    for f in range(S.shape[1]):
        out[f"split{f}_test_score"] = S[:, f]
    out["mean_test_score"], out["std_test_score"] = _mean_std(S)
    mean = out["mean_test_score"]
    if np.isnan(mean).all():
        out["rank_test_score"] = np.ones(mean.size, dtype=np.int32)
    else:
        filled = np.where(np.isnan(mean), np.nanmin(mean) - 1, mean)
        out["rank_test_score"] = rankdata(-filled, method="min").astype(np.int32)
    return out
