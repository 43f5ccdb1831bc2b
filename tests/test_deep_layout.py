"""The layout of crossmetric.deep and of Index: no import cycle, old names importable,
one definition of GSM's parameter tying and of the hard-negative weights."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import crossmetric

PACKAGE = Path(crossmetric.__file__).parent


def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that ``path`` imports (at any depth of the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n.startswith(package + ".")}
    return out


def _graph(folder: str, package: str) -> dict[str, set[str]]:
    mods = {f"{package}.{p.stem}": p for p in (PACKAGE / folder).glob("*.py")
            if p.stem != "__init__"}
    return {m: {i for i in _imports(p, package) if i in mods and i != m}
            for m, p in mods.items()}


def _cycle(graph: dict[str, set[str]]):
    """A cycle of ``graph`` as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n, path + [n])):
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [m])):
            return found
    return None


@pytest.mark.parametrize("folder, package", [("deep", "crossmetric.deep"),
                                             ("_retrieval", "crossmetric._retrieval")])
def test_no_import_cycle(folder, package):
    graph = _graph(folder, package)
    assert graph, folder
    assert _cycle(graph) is None, _cycle(graph)


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_distributed_and_training_do_not_import_the_estimator():
    graph = _graph("deep", "crossmetric.deep")
    assert "crossmetric.deep.model" not in graph["crossmetric.deep.distributed"]
    assert "crossmetric.deep.model" not in graph["crossmetric.deep.training"]
    assert "crossmetric.deep.fitting" in graph["crossmetric.deep.model"]


def test_index_keeps_its_class_path():
    from crossmetric import retrieval

    assert retrieval.Index.__module__ == "crossmetric.retrieval"
    for method in ("add", "train", "search", "range_search", "remove_ids", "reset", "save",
                   "load"):
        assert callable(getattr(retrieval.Index, method)), method


def test_mined_weights_are_the_feature_gsm_hard_negatives():
    """DeepGSM's hard-negative weights are batches.hardest_negatives + balanced_weights, and
    equal the former in-model construction (positives plus each row's and column's k
    hardest negatives, re-balanced) bit for bit, ties included."""
    pytest.importorskip("torch")
    from crossmetric.deep.objective import mined_weights

    rng = np.random.RandomState(0)
    for k in (1, 2, 5):
        S = np.round(rng.randn(7, 9), 1)  # ties
        same = rng.rand(7, 9) < 0.25
        keep = same.copy()
        Sn = np.where(~same, S, np.inf)
        kr, kc = min(k, 9), min(k, 7)
        keep[np.arange(7)[:, None], np.argpartition(Sn, kr - 1, axis=1)[:, :kr]] = True
        keep[np.argpartition(Sn, kc - 1, axis=0)[:kc, :], np.arange(9)[None, :]] = True
        old = np.zeros(S.shape)
        n_pos, n_neg = same[keep].sum(), (~same[keep]).sum()
        old[keep] = np.where(same[keep], 0.5 / max(n_pos, 1), 0.5 / max(n_neg, 1))
        np.testing.assert_array_equal(mined_weights(same, S, k), old)


def test_tying_is_one_function_for_numpy_and_torch():
    """gsm_components (NumPy) and SimilarityHead (torch) give the same components."""
    torch = pytest.importorskip("torch")
    from crossmetric.deep.networks import SimilarityHead
    from crossmetric.learners.gsm import STRUCTURES, gsm_components

    r = 4
    for structure in STRUCTURES:
        head = SimilarityHead(r, structure, f=-1.5).double()
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in head.params.values():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
        Wx, Wy, f = head.components()
        params = {k: v.detach().numpy() for k, v in head.params.items()}
        LA, LB, LCx, LCy, d, e, fn = gsm_components(params, structure, -1.5, r, r, r)
        np.testing.assert_allclose(Wx.detach().numpy(), np.vstack([LA, LCx, d[None]]),
                                   rtol=1e-12)
        np.testing.assert_allclose(Wy.detach().numpy(), np.vstack([LB, LCy, e[None]]),
                                   rtol=1e-12)
        assert float(f.detach()) == pytest.approx(fn, rel=1e-12)
        assert isinstance(fn, float)
