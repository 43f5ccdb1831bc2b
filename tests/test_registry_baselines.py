"""The papers' extra baselines in the registry: named, outside the default run, converging."""

import warnings

import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from crossmetric.cli.benchmark import _method_list
from crossmetric.pairs import make_pairs
from crossmetric.registry import METHODS, make_estimator

EXTRA = ["itml", "nca", "lmnn", "mcc", "prdc"]


def test_extra_baselines_run_when_named_or_all():
    default = _method_list(None)
    assert not set(EXTRA) & set(default)
    assert set(EXTRA) <= set(_method_list("all")) == set(METHODS)
    assert _method_list("itml,prdc") == ["itml", "prdc"]


@pytest.mark.parametrize("name", EXTRA)
def test_registry_settings_converge(name):
    d = load_digits()
    X = d.data[:200] / 16.0
    pairs, y = make_pairs(d.target[:200], max_positives=250, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = make_estimator(name, preprocessor=X).fit(pairs, y)
    assert model.score(pairs, y) > 0.9
