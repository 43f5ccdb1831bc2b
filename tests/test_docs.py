"""Every public learner, metric and protocol function has a numpydoc Examples section (they run
as doctests: ``--doctest-modules`` over ``crossmetric`` in the pytest options)."""

import inspect

import pytest

import crossmetric
from crossmetric import metrics, protocols


def _public():
    for name in crossmetric._LAZY:
        if name == "DeepGSM" and not _has("torch"):
            continue
        yield name, getattr(crossmetric, name)
    for mod in (metrics, protocols):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("name, obj", list(_public()), ids=[n for n, _ in _public()])
def test_has_numpydoc_examples(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert "Examples\n--------\n>>> " in doc, f"{name} has no Examples section"


def test_doctests_are_collected(pytestconfig):
    opts = pytestconfig.getini("addopts")
    assert "--doctest-modules" in " ".join(opts) if isinstance(opts, list) else opts
    assert "crossmetric" in pytestconfig.getini("testpaths")
