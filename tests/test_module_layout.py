"""Code that moved to another module keeps its old import paths, including private names and
monkeypatching through the old module (issue 21: solver layer, one job per module)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

#: old module -> (new module, names that must be the very same objects)
MOVED = {
    "crossmetric.baselines": ("crossmetric._solvers.linalg", [
        "span_basis", "fit_pca", "pca_basis", "cca_directions", "_thin_qr", "_in_span",
        "_from_span", "_REDUCE_TO_SPAN"]),
    "crossmetric.kernels": ("crossmetric.kernels", ["_KernelCoordinatesMixin"]),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_names_are_the_same_objects(old):
    new, names = MOVED[old]
    old_mod, new_mod = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_mod, name) is getattr(new_mod, name), f"{old}.{name}"


def test_baselines_kernel_mixin_and_pair_param_stay():
    from crossmetric import baselines, cmml, kernels
    from crossmetric._checks import per_modality

    assert baselines._KernelCoordinatesMixin is kernels._KernelCoordinatesMixin
    assert baselines._pair_param is per_modality and cmml.per_modality is per_modality
    assert per_modality((1, 2), "gamma") == (1, 2) and per_modality(3, "gamma") == (3, 3)
    with pytest.raises(ValueError, match="gamma must be one value or a pair"):
        per_modality((1, 2, 3), "gamma")


def test_patching_the_span_flag_through_baselines_reaches_the_solver(monkeypatch):
    from crossmetric import baselines
    from crossmetric._solvers import linalg

    V = np.random.RandomState(0).randn(4, 30)
    assert baselines.span_basis(V) is not None
    monkeypatch.setattr(baselines, "_REDUCE_TO_SPAN", False)
    assert linalg._REDUCE_TO_SPAN is False and baselines.span_basis(V) is None
    calls = []
    monkeypatch.setattr(baselines, "_thin_qr", lambda A: calls.append(A.shape) or np.eye(2))
    monkeypatch.setattr(baselines, "_REDUCE_TO_SPAN", True)
    linalg.span_basis(V)
    assert calls == [(30, 4)]
    monkeypatch.undo()
    assert linalg._REDUCE_TO_SPAN is True and linalg._thin_qr is baselines._thin_qr
    assert linalg._thin_qr.__module__ == "crossmetric._solvers.linalg"
