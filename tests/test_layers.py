"""Data flows one way: the lower layers never import the layers above them (issue 21).

Every ``import`` of a module below -- at the top or inside a function -- is read from its
source; a lower layer naming a higher one fails here, lazily imported or not.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "crossmetric"

#: folder or module -> the crossmetric packages it must not import
LOWER = {
    "_solvers": ("protocols", "cli", "reproduce", "registry"),
    "metrics": ("protocols", "cli", "reproduce", "learners", "deep", "registry"),
    "pairs": ("protocols", "cli", "reproduce", "learners", "registry"),
    "learners": ("protocols", "cli", "reproduce"),
    "protocols": ("cli", "reproduce"),
}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("lower", sorted(LOWER))
def test_lower_layer_imports_no_higher_one(lower):
    target = ROOT / lower
    files = [target] if target.is_file() else sorted(target.rglob("*.py"))
    assert files
    banned = tuple(f"crossmetric.{name}" for name in LOWER[lower])
    bad = [f"{f.relative_to(ROOT)}: {mod}" for f in files for mod in _imports(f)
           if mod.startswith(banned) and mod.split(".")[:2] != ["crossmetric", lower]]
    assert not bad, bad
