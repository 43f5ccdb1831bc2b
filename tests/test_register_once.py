"""A learner is declared once, by its ``MethodSpec`` in ``crossmetric.registry``: the package's
names, the classes a model file may name, the command line's method list and the API
conformance checks are derived from the registry."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import crossmetric
from crossmetric import registry
from crossmetric.cli.parser import _methods_epilog
from crossmetric.learners.baselines import Euclidean
from crossmetric.persistence import load_model, save_model


class Dummy(Euclidean):
    """A learner declared only by a registry entry (the untrained distance)."""


@pytest.fixture
def dummy(monkeypatch):
    """``Dummy`` in a module of its own, registered as the command-line method ``dummy``."""
    module = types.ModuleType("crossmetric_dummy_learner")
    module.Dummy = Dummy
    Dummy.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.METHODS, "dummy", registry.MethodSpec(
        "dummy", "Dummy", "Dummy", note="a throwaway learner", module=module.__name__))
    return module


def test_a_spec_is_all_a_new_learner_needs(dummy, tmp_path):
    from tests.test_api_conformance import conformance_classes

    assert crossmetric._LAZY["Dummy"] == "crossmetric_dummy_learner"
    assert "Dummy" in crossmetric.__all__ and "Dummy" in dir(crossmetric)
    assert crossmetric.Dummy is Dummy
    assert "crossmetric_dummy_learner.Dummy" in crossmetric.persistence.ALLOWED_CLASSES
    assert "dummy" in _methods_epilog() and "a throwaway learner" in _methods_epilog()
    assert "Dummy" in conformance_classes()
    X = np.random.RandomState(0).rand(6, 3)
    model = registry.make_estimator("dummy", preprocessor=X)
    model.fit(np.array([[0, 1], [2, 3], [0, 5], [1, 4]]), np.array([1, 1, -1, -1]))
    save_model(tmp_path / "m.npz", model)   # refused unless the class is allowed
    assert type(load_model(tmp_path / "m.npz")) is Dummy


def test_every_public_estimator_is_a_name_of_the_package():
    classes = registry.public_classes()
    assert {"CLMLCV", "RCA_Supervised", "SeedEnsemble", "CrossPairs"} <= set(classes)
    for name, module in classes.items():
        if module.startswith("crossmetric.deep"):
            continue  # torch
        assert name in crossmetric.__all__
        assert getattr(crossmetric, name).__name__ == name
    allowed = crossmetric.persistence.ALLOWED_CLASSES
    assert {f"{m}.{n}" for n, m in classes.items()} <= allowed


def test_a_reproduction_is_one_declaration(monkeypatch, tmp_path, capsys):
    """Methods, options and figure of a reproduction come from its ``Reproduction`` alone:
    the command line lists and checks them, ``run_reproduction`` draws the figure."""
    from crossmetric.cli import main
    from crossmetric.reproduce import REPRODUCTIONS, Reproduction, ReproductionResult
    from crossmetric.reproduce.published import PUBLISHED

    calls = []

    def run(data_home, *, n_splits, seed, verbose, methods=("euclidean",), device="cpu"):
        calls.append((tuple(methods), device))
        cmc = {m: np.linspace(0.2, 1.0, 5) for m in methods}
        return ReproductionResult("dummy-repro", "a test", extra={"cmc": cmc})

    monkeypatch.setitem(PUBLISHED, "dummy-repro", {"source": "a test", "rows": {}})
    monkeypatch.setitem(REPRODUCTIONS, "dummy-repro", Reproduction(
        "dummy-repro", "a throwaway reproduction", run, 1, methods=("euclidean", "pcca"),
        options={"device": "device"}, figure="Dummy CMC"))
    assert main(["reproduce", "--list"]) == 0
    assert "--methods: some of euclidean,pcca" in capsys.readouterr().out
    assert main(["reproduce", "dummy-repro", "--methods", "pcca,nope",
                 "--data-home", str(tmp_path)]) == 2
    assert "expected some of euclidean, pcca" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["reproduce", "dummy-repro", "--methods", "pcca", "--device", "cuda",
                 "--data-home", str(tmp_path), "--out", str(out), "-q"]) == 0
    assert calls == [(("pcca",), "cuda")] and (out / "cmc.png").is_file()
    assert main(["reproduce", "pcca-viper", "--device", "cpu"]) == 2
    assert "only gsm-cufs, gsm-cuhk01-deep and dummy-repro take it" in capsys.readouterr().err
    assert REPRODUCTIONS["dummy-repro"].published["source"] == "a test"
