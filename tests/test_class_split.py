"""No class over ~300 lines."""

import ast
from pathlib import Path

import crossmetric

PACKAGE = Path(crossmetric.__file__).parent
MAX_CLASS_LINES = 300


def test_no_class_is_over_300_lines():
    sizes = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                sizes.append((node.end_lineno - node.lineno + 1,
                              f"{path.relative_to(PACKAGE)}:{node.name}"))
    assert len(sizes) > 50
    assert not [s for s in sizes if s[0] > MAX_CLASS_LINES], sorted(sizes)[-5:]
