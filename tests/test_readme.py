"""The README's commands run: every fenced block after a ``<!-- runnable -->`` comment is
executed (``bash`` blocks with bash, ``python`` blocks with this interpreter) from the
repository root and must exit 0. Only fast commands are marked; the others (real data sets,
minutes of training) are checked by hand and by the documentation's executed gallery."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = "<!-- runnable -->"
_FENCE = re.compile(r"^```(\w+)\s*$")


def runnable_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of each fenced block that follows the marker line (blank
    lines between them allowed)."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() != MARKER:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        match = _FENCE.match(lines[j]) if j < len(lines) else None
        if match is None:
            raise AssertionError(f"README line {i + 1}: {MARKER} is not followed by a fenced block")
        k = j + 1
        while k < len(lines) and lines[k].strip() != "```":
            k += 1
        blocks.append((j + 1, match.group(1), "\n".join(lines[j + 1:k]) + "\n"))
        i = k + 1
    return blocks


BLOCKS = runnable_blocks(README.read_text(encoding="utf-8"))


def test_marker_parser_finds_blocks():
    text = f"x\n{MARKER}\n\n```bash\necho 1\n```\n```bash\nnot marked\n```\n"
    assert runnable_blocks(text) == [(4, "bash", "echo 1\n")]
    with pytest.raises(AssertionError, match="not followed"):
        runnable_blocks(f"{MARKER}\ntext\n")


def test_readme_marks_shell_and_python_blocks():
    languages = {lang for _, lang, _ in BLOCKS}
    assert {"bash", "python"} <= languages, languages
    assert all(lang in {"bash", "python"} for lang in languages), languages


@pytest.mark.parametrize("line, language, code", BLOCKS,
                         ids=[f"README line {line}" for line, _, _ in BLOCKS])
def test_readme_block_runs(line, language, code):
    env = dict(os.environ, MPLBACKEND="Agg")
    if language == "bash":
        bindir = str(Path(sys.executable).parent)  # the console script of this installation
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        cmd = ["bash", "-euo", "pipefail", "-c", code]
    else:
        cmd = [sys.executable, "-c", code]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"README block at line {line} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    assert proc.stdout.strip(), f"README block at line {line} printed nothing"
