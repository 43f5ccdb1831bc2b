"""protocols.batch: many runs, one table (run_many + gather), against the obvious loop."""

import numpy as np
import pytest

from crossmetric import PCCA, Euclidean
from crossmetric.datasets import make_cross_modal
from crossmetric.protocols import BenchmarkResult, Run, gather, run_many, run_protocols

SHARED = {"protocols": ("identification",), "n_repeats": 1, "test_size": 8, "max_rank": 20}


def _data(seed=0):
    d = make_cross_modal(80, n_classes=20, n_features_x=6, n_features_y=6, random_state=seed)
    return {"X": d.X, "Y": d.Y, "labels": d.labels}


def _runs():
    est = {"Euclidean": Euclidean(), "PCCA": PCCA(n_components=3, max_iter=20)}
    return [Run({"split": k}, est, _data(k), {"random_state": 10 + k}) for k in range(3)]


def test_run_many_is_the_plain_loop_of_run_protocols_in_order():
    runs = _runs()
    got = run_many(runs, options=SHARED)
    for run, res in zip(runs, got, strict=True):
        ref = run_protocols(run.estimators, run.dataset, **SHARED, **run.options)
        assert [(r["method"], r["measure"], r["value"]) for r in res.records
                if r["measure"] != "fit_seconds"] == \
            [(r["method"], r["measure"], r["value"]) for r in ref.records
             if r["measure"] != "fit_seconds"]


@pytest.mark.slow
def test_run_many_gives_the_same_with_two_workers():
    runs = _runs()
    one, two = gather(runs, run_many(runs, options=SHARED)), \
        gather(runs, run_many(runs, n_jobs=2, options=SHARED))
    for m in ("Euclidean", "PCCA"):
        assert one.values[m]["rank1"] == two.values[m]["rank1"]
        np.testing.assert_array_equal(one.curves[m], two.curves[m])


def test_run_options_replace_shared_ones_and_results_arrive_in_order():
    seen = []

    def evaluate(estimators, dataset, **kw):
        return BenchmarkResult(methods=list(estimators), info={"kw": kw})

    runs = [Run({"split": 0}, {"A": None}, {}, {"x": 1}), Run({"split": 1}, {"A": None}, {})]
    out = run_many(runs, options={"x": 0, "y": 2}, evaluate=evaluate,
                   on_result=lambda run, res: seen.append((run.tags["split"], res.info["kw"])))
    assert [r.info["kw"] for r in out] == [{"x": 1, "y": 2}, {"x": 0, "y": 2}]
    assert seen == [(0, {"x": 1, "y": 2}), (1, {"x": 0, "y": 2})]


def test_gather_collects_per_method_in_run_order():
    def result(k, fail=False):
        res = BenchmarkResult(methods=["A", "B"])
        res.records = [{"method": "A", "measure": "rank1", "value": 0.1 * k},
                       {"method": "A", "measure": "map", "value": 0.2 * k}]
        res.curves = {"A": {"cmc": np.full(3, k, float)}, "B": {"roc": (0, 0)}}
        res.info["tuned"] = {"A": [{"params": {"mu": k}, "split": 0}]}
        res.warnings = {"A": {"ConvergenceWarning": 1}}
        if fail:
            res.errors = {"B": f"boom {k}"}
        return res

    runs = [Run({"split": k, "n": 5}, {}, {}) for k in range(3)]
    got = gather(runs, [result(0), result(1, True), result(2, True)], methods=["A", "B", "C"])
    assert got.values["A"] == {"rank1": [0.0, 0.1, 0.2], "map": [0.0, 0.2, 0.4]}
    assert got.values["C"] == {} and got.curves["C"] == [] and got.curves["B"] == []
    assert [c[0] for c in got.curves["A"]] == [0.0, 1.0, 2.0]
    # the run's tags replace the runner's own split index (0 inside every run)
    assert got.tuned["A"] == [{"params": {"mu": k}, "split": k, "n": 5} for k in range(3)]
    assert got.warnings == {"A": {"ConvergenceWarning": 3}}
    assert got.errors == {"B": "boom 1"}   # the first failure
    with pytest.raises(ValueError):
        gather(runs, [result(0)])           # one result per run
