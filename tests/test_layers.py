"""Imports run one way: no module imports a layer above its own, not even inside a function,
and there is no import circle. The layers follow the flow of ``docs/design.md`` (data → pairs
→ features → model → scores → report) with two differences the code needs: the descriptors
(transformers of image arrays) sit below the loaders, which describe what they load (the
digits' sketch view, image folders); the metrics, pure functions of arrays that every later
step uses and that use no learner, sit below the model. The registry declares the learners by
name and sits just above them, so that model files (persistence) can list their classes.

Every ``import`` statement of the package is read from its source with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "crossmetric"

#: the layers, lowest first, each a list of folders / modules of crossmetric/: a module may
#: import its own layer and those before it, never a later one
LAYERS = [
    ("utils", ["_utils"]),
    ("features", ["features"]),
    ("data", ["datasets"]),
    ("pairs", ["pairs"]),
    ("metrics", ["metrics"]),
    ("model", ["kernels", "losses", "_base", "_solvers", "learners", "deep"]),
    ("registry", ["registry"]),
    ("scores", ["_retrieval", "retrieval", "export", "persistence"]),
    ("report", ["protocols", "ranklists", "plotting", "cluster", "config", "reproduce", "cli",
                "__init__", "__main__"]),
]
LAYER_OF = {part: i for i, (_, parts) in enumerate(LAYERS) for part in parts}

#: at most this many modules lie loose in crossmetric/ (the public entry points, the
#: learners' base, __init__ and __main__); a private helper lives in the folder it serves
MAX_TOP_LEVEL = 13


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The crossmetric module an imported name belongs to (``None``: outside crossmetric)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path):
    """``(imported module, line)`` of every import in ``path``, at the top or in a function."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            # the version, the root package's one plain attribute, is no layer
            names = [f"{base}.{a.name}" for a in node.names
                     if (base, a.name) != ("crossmetric", "__version__")]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "crossmetric":
                target = _target(name)
                if target is not None and target != module:
                    yield target, node.lineno


def _layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYER_OF:
        raise AssertionError(f"{module}: crossmetric/{key} is in no layer of LAYERS")
    return LAYER_OF[key]


GRAPH = {m: sorted({t for t, _ in _imports(m, p)}) for m, p in MODULES.items()}


def test_every_module_is_in_a_layer():
    top = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
           if (p.suffix == ".py" or (p / "__init__.py").is_file())}
    assert top <= set(LAYER_OF) | {"__init__", "__main__"}, sorted(top - set(LAYER_OF))
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("name, parts", LAYERS, ids=[name for name, _ in LAYERS])
def test_no_module_imports_a_higher_layer(name, parts):
    level = LAYER_OF[parts[0]]
    bad = [f"{MODULES[m].relative_to(ROOT.parent)}:{line} imports {t} ({LAYERS[_layer(t)][0]})"
           for m in MODULES if _layer(m) == level
           for t, line in _imports(m, MODULES[m]) if _layer(t) > level]
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    """No group of modules imports itself round, counting the imports inside functions
    (a package's ``__init__`` importing its own submodules is the only edge it adds)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, circles


def test_few_modules_lie_loose_in_the_package():
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(loose) <= MAX_TOP_LEVEL, loose
    private = [n for n in loose if n.startswith("_") and n not in ("__init__.py",
                                                                    "__main__.py", "_base.py")]
    assert not private, private


def test_the_check_sees_imports_inside_functions(tmp_path):
    source = "def f():\n    from crossmetric.cli import main\n    import crossmetric.registry\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    found = {t for t, _ in _imports("crossmetric.metrics.fake", path)}
    assert found == {"crossmetric.cli", "crossmetric.registry"}
    assert _layer("crossmetric.cli") > _layer("crossmetric.metrics.knn")
