"""Generate the documentation's Reproductions page from the result files.

``crossmetric reproduce NAME --out DIR`` writes ``DIR/results.json`` (format
``crossmetric-reproduction``: the experiment's name, the paper it reproduces, and one row per
setting, method and measure with our mean, its spread over the splits, the published number and
the difference). Runs kept for the record live under ``benchmarks/results/``, each folder with a
``README.md`` saying how they were run. This module turns those files into
``docs/reproductions.md`` when the documentation is built, so that no number on that page is
typed by hand:

* every ``results.json`` of a ``crossmetric reproduce`` run, grouped by experiment, as a table
  of ours ± std against the paper;
* every other JSON file whose ``rows`` are such rows (one split or one GSM structure of a
  reproduction, run on its own), grouped by folder;
* the ``README.md`` notes of each folder that holds any of them.

Run it alone to print the page: ``python docs/_ext/crossmetric_results.py benchmarks/results``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

FORMAT = "crossmetric-reproduction"
ROW_KEYS = {"setting", "method", "measure", "ours"}
PAGE = "reproductions.md"

INTRO = """\
# Reproductions

Every table on this page is generated, when the documentation is built, from the result files
under `benchmarks/results/` (`docs/_ext/crossmetric_results.py`); none is typed by hand.
`crossmetric reproduce NAME --out DIR` writes such a file (`DIR/results.json`, beside
`results.csv` and the figure); `crossmetric reproduce --list` names the experiments, and
{doc}`guide/reproducing` says what each one runs. Values are our mean over the splits (± the
standard deviation over the splits) and, in brackets, the paper's number where it publishes one;
rank measures and rates are in %. The history of these measurements, and what they mean for
each paper's claims, is on the {doc}`measurements` page.
"""


def _fmt(value, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value):.{digits}f}"


def _cell(row: dict) -> str:
    """``ours ± std (paper)``: three decimals for values in [0, 1] (AUC), else one (%)."""
    ours = row.get("ours")
    ref = ours if ours is not None and not math.isnan(float(ours)) else row.get("paper")
    digits = 3 if ref is not None and abs(float(ref)) <= 1.0 else 1
    text = _fmt(ours, digits)
    std = row.get("std")
    if std is not None and not math.isnan(float(std)) and float(std) > 0:
        text += f" ± {_fmt(std, digits)}"
    if row.get("paper") is not None:
        text += f" ({_fmt(row['paper'], digits)})"
    return text


def _escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rows_table(rows: list[dict]) -> list[str]:
    """A Markdown table: one line per (setting, method), one column per measure."""
    keys, measures, cells, notes = [], [], {}, {}
    for r in rows:
        key = (str(r.get("setting", "")), str(r.get("method", "")))
        if key not in keys:
            keys.append(key)
        if r["measure"] not in measures:
            measures.append(r["measure"])
        cells[key + (r["measure"],)] = _cell(r)
        if r.get("note"):
            notes.setdefault(key, str(r["note"]))
    head = ["setting", "method"] + [str(m) for m in measures]
    lines = ["| " + " | ".join(_escape(h) for h in head) + " |",
             "|" + "---|" * 2 + "---:|" * len(measures)]
    for key in keys:
        values = [cells.get(key + (m,), "") for m in measures]
        lines.append("| " + " | ".join(_escape(v) for v in list(key) + values) + " |")
    used = [(k, n) for k, n in notes.items()]
    if used:
        lines.append("")
        for (setting, method), note in used:
            lines.append(f"* {_escape(setting)} / {_escape(method)}: {_escape(note)}")
    return lines


def _is_rows(rows) -> bool:
    return (isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)
            and all(ROW_KEYS <= set(r) for r in rows))


def collect(root: Path) -> tuple[dict, dict, set]:
    """``(by_name, partial, folders)``: full reproduction files by experiment name, other
    files of reproduction rows by folder, and the folders whose notes to show."""
    by_name: dict[str, list[tuple[Path, dict]]] = {}
    partial: dict[Path, list[tuple[Path, dict]]] = {}
    for path in sorted(root.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not _is_rows(data.get("rows")):
            continue
        if data.get("format") == FORMAT and data.get("name"):
            by_name.setdefault(str(data["name"]), []).append((path, data))
        else:
            partial.setdefault(path.parent, []).append((path, data))
    folders = set()
    for files in list(by_name.values()) + list(partial.values()):
        for path, _ in files:
            folder = path.parent
            while folder != root and root in folder.parents and not (folder / "README.md").exists():
                folder = folder.parent
            if (folder / "README.md").exists() and folder != root:
                folders.add(folder)
    return by_name, partial, folders


def _notes(readme: Path) -> list[str]:
    """A folder's README as part of the page: its headings become bold lines."""
    out = []
    for line in readme.read_text(encoding="utf-8").splitlines():
        stripped = line.lstrip("#").strip()
        out.append(f"**{stripped}**" if line.startswith("#") and stripped else line)
    return out


def _describe(data: dict) -> str:
    bits = []
    if data.get("row") is not None:
        bits.append(f"row `{data['row']}`")
    if data.get("first_split") is not None:
        bits.append(f"split {data['first_split']}")
    if data.get("random_state") is not None:
        bits.append(f"seed {data['random_state']}")
    if data.get("crossmetric_version"):
        bits.append(f"crossmetric {data['crossmetric_version']}")
    seconds = data.get("seconds")
    if isinstance(seconds, (int, float)) and seconds > 0:
        bits.append(f"{seconds:,.0f} s")
    return ", ".join(bits)


def render(root: Path, repo: Path | None = None) -> str:
    """The Markdown of the Reproductions page for the result files under ``root``."""
    root = Path(root).resolve()
    repo = Path(repo).resolve() if repo is not None else root.parent.parent
    by_name, partial, folders = collect(root)

    def rel(path: Path) -> str:
        try:
            return path.resolve().relative_to(repo).as_posix()
        except ValueError:
            return path.as_posix()

    out = [INTRO]
    if not by_name and not partial:
        out.append(f"No reproduction result files were found under `{rel(root)}`.")
        return "\n".join(out) + "\n"
    out += ["## Experiments", "",
            "| experiment | reproduces | result files |", "|---|---|---:|"]
    for name, files in sorted(by_name.items()):
        out.append(f"| `{name}` | {_escape(files[0][1].get('source', ''))} | {len(files)} |")
    out.append("")
    for name, files in sorted(by_name.items()):
        out += [f"## `{name}`", "", _escape(files[0][1].get("source", "")), ""]
        for path, data in files:
            out += [f"### `{rel(path)}`", ""]
            described = _describe(data)
            if described:
                out += [described, ""]
            out += rows_table(data["rows"]) + [""]
    if partial:
        out += ["## Single splits and structures", "",
                "Runs of one split, one GSM structure or one seed of a reproduction, each "
                "written as its own file; the folder's notes below say which call made them.",
                ""]
        for folder, files in sorted(partial.items()):
            out += [f"### `{rel(folder)}/`", ""]
            for path, data in files:
                out += [f"#### `{path.name}`", ""]
                described = _describe(data)
                if described:
                    out += [described, ""]
                out += rows_table(data["rows"]) + [""]
    if folders:
        out += ["## Notes on the runs", "",
                "The `README.md` of each folder above, as written when the runs were made.", ""]
        for folder in sorted(folders):
            out += [f"### `{rel(folder)}/`", ""] + _notes(folder / "README.md") + [""]
    return "\n".join(out).rstrip() + "\n"


def _write_page(app) -> None:
    root = Path(app.config.crossmetric_results_root)
    page = Path(app.srcdir) / PAGE
    text = render(root, repo=Path(app.srcdir).parent)
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        page.write_text(text, encoding="utf-8")


def setup(app):
    app.add_config_value("crossmetric_results_root", "", "env")
    app.connect("builder-inited", _write_page)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")))
