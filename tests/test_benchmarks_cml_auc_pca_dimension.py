"""benchmarks/cml_auc_pca_dimension.py: one run_protocols call per dimension, fixed settings."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    spec = importlib.util.spec_from_file_location("cml_auc_pca_dimension",
                                                  ROOT / "cml_auc_pca_dimension.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cml_auc_pca_dimension", mod)
    spec.loader.exec_module(mod)
    import crossmetric.reproduce.cufs as cufs

    monkeypatch.setattr(cufs, "N_TEST", 20)
    return mod


def test_dimensions_share_splits_and_one_pca_serves_both_views(bench, monkeypatch):
    rng = np.random.RandomState(0)
    labels = np.arange(60)
    Z = rng.normal(size=(60, 30)) * np.linspace(3, 0.1, 30)
    # identical views: with one PCA for both, the untrained distance ranks every probe first
    same = bench.run({"X": Z, "Y": Z.copy(), "labels": labels}, [4, 16], n_splits=2, seed=0,
                     methods=("euclidean",))
    assert same == {"Euclidean": {4: {"rank1": 100.0, "vr": 100.0},
                                  16: {"rank1": 100.0, "vr": 100.0}}}
    monkeypatch.setitem(bench.SETTINGS, "cca", {"n_components": 2, "reg": 0.1})
    noisy = {"X": Z + rng.normal(size=Z.shape), "Y": Z + rng.normal(size=Z.shape),
             "labels": labels}
    out = bench.run(noisy, [2, 16], n_splits=2, seed=0, methods=("euclidean", "cca"))
    assert set(out) == {"Euclidean", "CCA"} and set(out["CCA"]) == {2, 16}
    # two leading coordinates hold less identity than sixteen
    assert out["Euclidean"][2]["rank1"] < out["Euclidean"][16]["rank1"]
    assert out == bench.run(noisy, [2, 16], n_splits=2, seed=0, methods=("euclidean", "cca"))
