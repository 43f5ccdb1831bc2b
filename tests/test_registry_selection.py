"""registry.select_methods / method_kind / cap_n_components (moved out of the CLI)."""

import importlib.util

import numpy as np
import pytest

import crossmetric
from crossmetric.protocols.views import cap_n_components, cap_n_components_to_views
from crossmetric.registry import METHODS, make_estimator, method_kind, select_methods


def test_select_methods():
    assert select_methods(None) == [n for n, s in METHODS.items() if s.in_default]
    assert set(select_methods(None)) < set(METHODS)
    assert select_methods("all") == select_methods(" ALL ") == list(METHODS)
    assert select_methods("PCCA, cmml,,pcca") == ["pcca", "cmml"]
    assert select_methods(["gsm", "Euclidean"]) == ["gsm", "euclidean"]
    with pytest.raises(ValueError, match=r"unknown method\(s\) pcaa \(did you mean 'pcca'\?\)"):
        select_methods("cmml,pcaa")
    with pytest.raises(ValueError, match=r"unknown method\(s\) zzzzzz; expected a comma"):
        select_methods("zzzzzz")
    with pytest.raises(ValueError, match=r"unknown method\(s\) pcaa, cmmll; expected"):
        select_methods("pcaa,cmmll")
    with pytest.raises(ValueError, match="names is empty"):
        select_methods(" , ")


@pytest.mark.parametrize("name", list(METHODS))
def test_method_kind_matches_the_learner_class(name):
    kind, reason = method_kind(name)
    if METHODS[name].class_name == "DeepGSM":
        assert kind == "cross-modal (raw images)"
        assert (reason is None) == (importlib.util.find_spec("torch") is not None)
        return
    cls = getattr(crossmetric, METHODS[name].class_name)
    want = "cross-modal" if getattr(cls, "_cross_modal", True) else "single-modal"
    if getattr(cls, "_sample_ndim", 1) > 1:
        want += " (raw images)"
    assert (kind, reason) == (want, None)


def test_method_kind_reports_a_missing_module(monkeypatch):
    from crossmetric import registry

    monkeypatch.setitem(registry.METHODS, "ghost", registry.MethodSpec(
        "ghost", "Ghost", "GhostLearner", module="crossmetric.ghost_module"))
    kind, reason = method_kind("ghost")
    assert kind == "?" and "ghost_module" in reason
    with pytest.raises(ValueError, match="unknown method"):
        method_kind("nosuch")


def test_cap_n_components():
    ests = {"PCCA": make_estimator("pcca", n_components=32),
            "CMML": make_estimator("cmml", n_components=3),
            "Euclidean": make_estimator("euclidean")}
    assert cap_n_components(ests, 5) == {"PCCA": (32, 5)}
    assert ests["PCCA"].n_components == 5 and ests["CMML"].n_components == 3
    assert cap_n_components(ests, 5) == {}


def test_cap_n_components_to_views_is_the_clis_note(capsys):
    """One function caps at the narrowest view and words the note; the CLI prints it."""
    import crossmetric.registry as registry
    from crossmetric.cli.benchmark import _cap_components

    assert "CDFE_REG_GRID" in registry.__all__
    X, Y = np.zeros((4, 8)), np.zeros((4, 6))
    ests = {"PCCA": make_estimator("pcca", n_components=32),
            "CMML": make_estimator("cmml", n_components=7)}
    notes = cap_n_components_to_views(ests, X, Y)
    assert notes == ["crossmetric: PCCA: n_components 32 -> 6 (the data has 6 features)",
                     "crossmetric: CMML: n_components 7 -> 6 (the data has 6 features)"]
    assert cap_n_components_to_views(ests, X[:, :5]) == [
        f"crossmetric: {n}: n_components 6 -> 5 (the data has 5 features)"
        for n in ("PCCA", "CMML")]
    ests = {"PCCA": make_estimator("pcca", n_components=32)}
    _cap_components(ests, X, None)
    assert capsys.readouterr().err == (
        "crossmetric: PCCA: n_components 32 -> 8 (the data has 8 features)\n")


@pytest.mark.parametrize("structure", ["generalized", "linear", "ladf", "joint_bayesian",
                                       "euclidean", "inner_product"])
def test_gsm_paper_grid_gives_every_structure_only_candidates_it_accepts(structure):
    from sklearn.model_selection import ParameterGrid

    from crossmetric.learners._gsm_training import check_params
    from crossmetric.registry import GSM_PAPER_GRID, gsm_paper_grid

    stages = gsm_paper_grid(structure)
    generalized = structure == "generalized"
    # the start_mu stage is the generalized form's only
    assert len(stages) == len(GSM_PAPER_GRID) - (not generalized)
    assert ("start_mu" in stages[-1]) == generalized
    first = [p for c in stages[0] for p in ParameterGrid(c)]
    starts = [p for p in first if "start_from" in p]
    assert bool(starts) == generalized
    # every candidate of stage 1, then every one of the later stages on it, is a valid GSM
    for p in first:
        for q in ParameterGrid(stages[1]):
            for r in ParameterGrid(stages[2]) if generalized else [{}]:
                check_params(crossmetric.GSM(structure=structure, **p, **q, **r))
    assert gsm_paper_grid() == list(GSM_PAPER_GRID) == METHODS["gsm"].search_grid(
        "paper", with_start=False)
    assert METHODS["gsm"].search_grid("paper")[1:] == list(GSM_PAPER_GRID)


@pytest.mark.parametrize("name", ["cmlauc", "cmlpauc", "mahaauc"])
def test_the_papers_run_of_the_auc_learners_keeps_the_feature_space(name):
    """The reproductions fit the paper's own run (``make_estimator(name, paper=True)``): its PCA
    start and plain optimisation on the whole feature space, not the benchmark's 32 principal
    axes."""
    from crossmetric.registry import make_estimator

    default, paper = make_estimator(name), make_estimator(name, paper=True)
    assert default.reduce_to == 32 and default.init == "auto"
    assert paper.reduce_to is None and paper.init == "pca" and paper.early_stopping is False
