"""Many runs, one table: fan out evaluation runs and gather their results per method.

A reproduction that sweeps splits, settings or parameters is a list of :class:`Run`\\ s --
named estimators on a dataset with the options of one
:func:`~crossmetric.protocols.run_protocols` call, tagged with what identifies the run
(``{"split": 3}``, ``{"split": 3, "n_negatives": 5}``) -- handed to :func:`run_many`, which
runs them in parallel (joblib) and returns one :class:`~crossmetric.protocols.BenchmarkResult`
per run, in order; :func:`gather` then collects, per method, the values of every measure, the
CMC curves, the tuning choices (tagged with their run), the warning counts and the errors. The
reproduction only builds its runs and reads the gathered lists into its published table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Run", "Gathered", "run_many", "gather"]


class Run(NamedTuple):
    """One run of a batch: ``evaluate(estimators, dataset, **options)``, tagged.

    Attributes
    ----------
    tags : dict
        What identifies the run in the gathered table (e.g. ``{"split": 0}``); added to every
        tuning choice of the run.
    estimators : mapping name -> unfitted estimator
    dataset : mapping
        As :func:`~crossmetric.protocols.run_protocols` takes it.
    options : mapping, optional
        Keyword arguments of this run (they replace the batch's shared ones).

    Examples
    --------
    >>> from crossmetric import Euclidean
    >>> from crossmetric.protocols import Run
    >>> run = Run({"split": 2}, {"Euclidean": Euclidean()}, {"X": None}, {"random_state": 7})
    >>> run.tags, sorted(run.options)
    ({'split': 2}, ['random_state'])
    """

    tags: dict
    estimators: Mapping
    dataset: Mapping
    options: Mapping | None = None


def _evaluate(evaluate, run: Run, shared: dict):
    """One run (in a worker): ``run_protocols`` looked up when called, so that a patched
    ``crossmetric.protocols.runner.run_protocols`` is the one used."""
    if evaluate is None:
        from crossmetric.protocols import runner

        evaluate = runner.run_protocols
    return evaluate(run.estimators, run.dataset, **{**shared, **(run.options or {})})


def run_many(runs: Iterable[Run], *, n_jobs: int | None = None,
             options: Mapping | None = None, evaluate: Callable | None = None,
             on_result: Callable | None = None) -> list:
    """Run every :class:`Run` (in parallel) and return their results in order.

    Parameters
    ----------
    runs : iterable of Run
    n_jobs : int, optional
        Runs at a time (joblib; ``None``: one, unless inside ``joblib.parallel_config``). Each
        run's own randomness is fixed by its options (``random_state``), so the results do not
        depend on ``n_jobs``.
    options : mapping, optional
        Keyword arguments of ``evaluate`` shared by every run (a run's ``options`` replace
        them), e.g. ``{"protocols": ("identification",), "n_jobs": 1}`` (``n_jobs`` there is
        the workers of one run).
    evaluate : callable, optional
        ``evaluate(estimators, dataset, **options)`` returning a
        :class:`~crossmetric.protocols.BenchmarkResult`; default
        :func:`~crossmetric.protocols.run_protocols`.
    on_result : callable, optional
        ``on_result(run, result)``, called in the calling process as each result arrives (in
        order; e.g. a progress line).

    Returns
    -------
    list of BenchmarkResult
        One per run, in the order of ``runs``.

    Examples
    --------
    >>> from crossmetric import Euclidean
    >>> from crossmetric.datasets import make_cross_modal
    >>> from crossmetric.protocols.batch import Run, gather, run_many
    >>> d = make_cross_modal(60, n_classes=20, n_features_x=4, n_features_y=4, random_state=0)
    >>> data = {"X": d.X, "Y": d.Y, "labels": d.labels}
    >>> runs = [Run({"split": k}, {"Euclidean": Euclidean()}, data, {"random_state": k})
    ...         for k in range(2)]
    >>> results = run_many(runs, options={"protocols": ("identification",), "n_repeats": 1,
    ...                                   "test_size": 8})
    >>> table = gather(runs, results)
    >>> len(table.values["Euclidean"]["rank1"]), len(table.curves["Euclidean"])
    (2, 2)
    """
    from joblib import Parallel, delayed

    runs = list(runs)
    outs = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_evaluate)(evaluate, run, dict(options or {})) for run in runs)
    results = []
    for run, res in zip(runs, outs, strict=True):
        if on_result is not None:
            on_result(run, res)
        results.append(res)
    return results


@dataclass
class Gathered:
    """Per-method lists of a batch (:func:`gather`), one entry per run that ran the method.

    Attributes
    ----------
    values : dict
        ``{method: {measure: [value per run]}}`` from the runs' records (as recorded: no
        scaling), in run order.
    curves : dict
        ``{method: [CMC curve per run]}`` (the identification curve of each run).
    tuned : dict
        ``{method: [choice, ...]}``: every tuning choice of every run, each with its run's
        ``tags`` added (they replace the runner's own ``split``, the index inside one run).
    warnings : dict
        ``{method: {warning class name: number of fits that raised it}}``, summed.
    errors : dict
        ``{method: message}``: the first error of a method in run order.

    Examples
    --------
    >>> from crossmetric.protocols import Gathered
    >>> Gathered(values={"PCCA": {"rank1": [0.5, 0.7]}}).values["PCCA"]["rank1"]
    [0.5, 0.7]
    """

    values: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)
    tuned: dict = field(default_factory=dict)
    warnings: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)


def gather(runs: Sequence[Run], results: Sequence, methods: Sequence[str] | None = None
           ) -> Gathered:
    """Collect the results of :func:`run_many` per method (see :class:`Gathered`).

    Parameters
    ----------
    runs : sequence of Run
    results : sequence of BenchmarkResult
        ``run_many(runs)``.
    methods : sequence of str, optional
        Methods that get (possibly empty) ``values`` and ``curves`` entries even when no run
        gave them a value.

    Returns
    -------
    Gathered

    Examples
    --------
    >>> from crossmetric.protocols import BenchmarkResult, Run, gather
    >>> res = BenchmarkResult(records=[{"method": "A", "measure": "rank1", "value": 0.5}],
    ...                       info={"tuned": {"A": [{"params": {"mu": 1}, "split": 0}]}})
    >>> got = gather([Run({"split": 4}, {}, {})], [res], methods=["A", "B"])
    >>> got.values, got.tuned["A"][0]["split"]
    ({'A': {'rank1': [0.5]}, 'B': {}}, 4)
    """
    out = Gathered()
    for m in methods or ():
        out.values[m], out.curves[m] = {}, []
    for run, res in zip(runs, results, strict=True):
        for m, msg in res.errors.items():
            out.errors.setdefault(m, msg)
        for r in res.records:
            out.values.setdefault(r["method"], {}).setdefault(r["measure"], []).append(
                r["value"])
        for m, cur in res.curves.items():
            if "cmc" in cur:
                out.curves.setdefault(m, []).append(cur["cmc"])
        for m, choices in res.info.get("tuned", {}).items():
            out.tuned.setdefault(m, []).extend({**c, **run.tags} for c in choices)
        for m, counts in res.warnings.items():
            acc = out.warnings.setdefault(m, {})
            for cat, n in counts.items():
                acc[cat] = acc.get(cat, 0) + n
    return out
