"""The result of a reproduction (our numbers, the paper's, the difference), written
atomically as CSV and JSON; where the data live by default; progress lines."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from crossmetric import __version__
from crossmetric._utils.atomic_io import write_csv_rows, write_json_document
from crossmetric.persistence import json_ready

__all__ = ["ReproductionResult", "default_data_home", "GUARDED"]

#: the word that names a learner's guarded run beside its paper run ("CMML guarded"; the
#: method ``gsm-guarded``): :func:`crossmetric.registry.guarded_estimator`
GUARDED = "guarded"


def default_data_home() -> str | None:
    """``../shared/data`` relative to the current directory when it exists, else ``None``."""
    cand = os.path.join(os.getcwd(), "..", "shared", "data")
    return os.path.normpath(cand) if os.path.isdir(cand) else None


@dataclass
class ReproductionResult:
    """Output of :func:`run_reproduction`: a long table of our and the published numbers.

    ``rows``: dicts with ``setting``, ``method``, ``measure``, ``ours`` (mean over splits, %),
    ``std``, ``paper`` (% or None) and ``diff`` (ours − paper); ``extra``: anything else the
    experiment records (per-split values, chosen iteration counts, curves, timings).
    """

    name: str
    source: str
    rows: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: rank lists to draw (``show_ranks``): ``images_q``, ``images_g``, ``ids_q``, ``ids_g``,
    #: ``distances`` ({method: (n_q, n_g)}), ``n`` -- not written to results.json
    rank_lists: dict = field(default_factory=dict, repr=False)

    def add(self, setting: str, method: str, measure: str, values, paper=None, **info):
        values = np.asarray(values, dtype=float)
        ours = float(np.mean(values)) if values.size else math.nan
        row = {"setting": setting, "method": method, "measure": measure, "ours": ours,
               "std": float(np.std(values)) if values.size else math.nan,
               "paper": None if paper is None else float(paper),
               "diff": None if paper is None or math.isnan(ours) else ours - float(paper)}
        row.update(info)
        self.rows.append(row)

    def table(self) -> str:
        """Our numbers, the paper's and the difference, one line per (setting, method)."""
        keys, measures = [], []
        for r in self.rows:
            k = (r["setting"], r["method"])
            if k not in keys:
                keys.append(k)
            if r["measure"] not in measures:
                measures.append(r["measure"])
        cell = {(r["setting"], r["method"], r["measure"]): r for r in self.rows}
        head = f"{'setting':<14} {'method':<26}" + "".join(
            f" | {m + ' ours':>10} {'paper':>6} {'diff':>6}" for m in measures)
        lines = [f"{self.name}: {self.source}", head, "-" * len(head)]
        for s, m in keys:
            line = f"{s:<14} {m:<26}"
            for meas in measures:
                r = cell.get((s, m, meas))
                if r is None:
                    line += f" | {'':>10} {'':>6} {'':>6}"
                    continue
                ours = "n/a" if math.isnan(r["ours"]) else _fmt(r["ours"])
                paper = "" if r["paper"] is None else _fmt(r["paper"])
                diff = "" if r["diff"] is None else _fmt(r["diff"], sign=True)
                line += f" | {ours:>10} {paper:>6} {diff:>6}"
            if any(cell.get((s, m, meas), {}).get("note") for meas in measures):
                line += "   " + next(cell[(s, m, meas)]["note"] for meas in measures
                                     if cell.get((s, m, meas), {}).get("note"))
            lines.append(line)
        return "\n".join(lines)

    def write(self, out: str) -> list[str]:
        """Write ``results.csv`` (the long table) and ``results.json`` (rows + extra), each
        atomically (:func:`crossmetric.persistence.atomic_open`)."""
        os.makedirs(out, exist_ok=True)
        cols = ["setting", "method", "measure", "ours", "std", "paper", "diff"]
        extra_cols = sorted({k for r in self.rows for k in r} - set(cols))
        path_csv = os.path.join(out, "results.csv")
        write_csv_rows(path_csv, self.rows, cols + extra_cols)
        path_json = os.path.join(out, "results.json")
        write_json_document(path_json, {"format": "crossmetric-reproduction",
                                        "format_version": 1,
                                        "crossmetric_version": __version__}, self.to_dict())
        return [path_csv, path_json]

    def to_dict(self) -> dict:
        """``name``, ``source``, ``seconds``, ``rows`` and ``extra`` as plain JSON values (NaN
        becomes ``None``)."""
        return json_ready({"name": self.name, "source": self.source, "seconds": self.seconds,
                          "rows": self.rows, "extra": self.extra})


def _fmt(v: float, sign: bool = False) -> str:
    """Two decimals (percentages), four significant digits for small values (objectives)."""
    if sign:
        return f"{v:+.2f}"
    return f"{v:.3g}" if v != 0 and abs(v) < 0.1 else f"{v:.2f}"


#: the former name of :func:`crossmetric.persistence.json_ready`
_jsonable = json_ready


def _progress(verbose: bool, msg: str):
    if verbose:
        print(msg, flush=True)
