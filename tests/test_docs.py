"""Every public learner, metric and protocol function has a numpydoc Examples section (they run
as doctests: ``--doctest-modules`` over ``crossmetric`` in the pytest options)."""

import importlib
import inspect
import re
from pathlib import Path

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


# --------------------------------------------------------------- the documentation site
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _results_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "crossmetric_results", DOCS / "_ext" / "crossmetric_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_lists_every_public_name():
    """Every learner importable from ``crossmetric`` has an autosummary entry in
    ``docs/api.rst``, and every public module has a page there, which lists its ``__all__``
    (the module template and ``autosummary_ignore_module_all = False``)."""
    api = (DOCS / "api.rst").read_text(encoding="utf-8")
    entries = set(re.findall(r"^   ([\w.]+)$", api, flags=re.MULTILINE))
    modules = (
        "crossmetric.pairs", "crossmetric.metrics", "crossmetric.protocols",
        "crossmetric.protocols.model_selection", "crossmetric.datasets", "crossmetric.features",
        "crossmetric.protocols.reid", "crossmetric.retrieval", "crossmetric.kernels",
        "crossmetric.losses",
        "crossmetric.plotting", "crossmetric.registry", "crossmetric.config",
        "crossmetric.persistence", "crossmetric.export", "crossmetric.reproduce",
        "crossmetric.cluster")
    in_modules = set()
    for module in modules:
        try:  # retrieval and features need their extras; the core install skips them here
            in_modules |= set(importlib.import_module(module).__all__)
        except ImportError:
            continue
    names = {entry.rsplit(".", 1)[-1] for entry in entries}
    missing = [name for name in crossmetric._LAZY if name not in names | in_modules]
    missing += [module for module in modules if module not in entries]
    assert not missing, f"not in docs/api.rst: {missing}"
    template = (DOCS / "_templates" / "autosummary" / "module.rst").read_text(encoding="utf-8")
    assert "{% for item in functions %}" in template and "{% for item in classes %}" in template
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert "autosummary_ignore_module_all = False" in conf


def test_user_guide_covers_the_topics():
    """The guide's pages exist, are in its toctree and carry the README's former sections."""
    index = (DOCS / "guide" / "index.md").read_text(encoding="utf-8")
    expected = {
        "pairs": "preprocessor=(X, Y)", "learners": "CMLAUC", "which_method_when": "KCSR",
        "starts": 'early_stopping="auto"', "evaluation": "evaluate_rank",
        "model_selection": "search_stages", "scaling": "dask_backend", "deep": "DeepGSM",
        "cli": "--config", "formats_security": "allow_pickle=False",
        "reproducing": "crossmetric reproduce",
    }
    for page, phrase in expected.items():
        text = (DOCS / "guide" / f"{page}.md").read_text(encoding="utf-8")
        assert phrase in text, (page, phrase)
        assert f"\n{page}\n" in index, f"{page} is not in the guide's toctree"


def test_gallery_examples_are_titled_and_use_real_data():
    examples = sorted((DOCS / "examples").glob("plot_*.py"))
    assert 3 <= len(examples) <= 5, examples
    for path in examples:
        text = path.read_text(encoding="utf-8")
        assert text.startswith('"""\n') and "\n====" in text.split('"""')[1], path.name
        assert "load_digits" in text or "shared/data" in text, path.name


def test_reproductions_page_is_generated_from_result_files(tmp_path):
    """A file written by ``ReproductionResult.write`` becomes a table with our values and the
    paper's; the stored results under ``benchmarks/results`` all appear."""
    from crossmetric.reproduce import ReproductionResult

    results = _results_module()
    res = ReproductionResult(name="demo-exp", source="A paper, Table 1")
    res.add("p=316", "PCCA", "r1", [20.0, 22.0], paper=19.27)
    res.add("p=316", "PCCA", "AUC", [0.95, 0.97], paper=None)
    res.write(str(tmp_path / "results" / "run"))
    page = results.render(tmp_path / "results", repo=tmp_path)
    assert "## `demo-exp`" in page and "A paper, Table 1" in page
    assert "| p=316 | PCCA | 21.0 ± 1.0 (19.3) | 0.960 ± 0.010 |" in page
    assert "`results/run/results.json`" in page

    stored = results.render(ROOT / "benchmarks" / "results", repo=ROOT)
    for name in ("cml-auc-cufs", "gsm-cufs", "gsm-cuhk01", "pku-sketch"):
        assert f"## `{name}`" in stored, name


def test_readme_is_short_and_links_into_the_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 150, len(lines)
    # CI and users read these two commands from the README
    assert 'pip install -e ".[all]"' in lines
    assert "python -m pytest -q" in lines
    for heading in ("## Install", "## Test", "## The main job", "## Which method when",
                    "## Security and data"):
        assert heading in lines, heading
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert any(link.startswith("docs/guide/") for link in links)
    broken = [link for link in links if not (ROOT / link).exists()]
    assert not broken, broken
    security = text.split("## Security and data", 1)[1]
    assert "allow_pickle=False" in security and "docs/guide/formats_security.md" in security
