"""The results table of the protocols: :class:`BenchmarkResult` (tables, CSV / JSON files)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from crossmetric._utils.atomic_io import write_csv_rows, write_json_document

__all__ = ["BenchmarkResult", "MEASURES"]

#: measure key -> (column title, scale for display, protocol)
MEASURES = {
    "auc": ("AUC", 1.0, "verification"),
    "one_minus_eer": ("1-EER(%)", 100.0, "verification"),
    "vr": ("VR@0.1%(%)", 100.0, "verification"),
    "pauc": ("pAUC[0,.1]", 1.0, "verification"),
    "accuracy_at_threshold": ("Acc(%)", 100.0, "verification"),
    "acc_median": ("Acc@med(%)", 100.0, "verification"),
    "rank1": ("Rank-1(%)", 100.0, "identification"),
    "rank5": ("Rank-5(%)", 100.0, "identification"),
    "rank10": ("Rank-10(%)", 100.0, "identification"),
    "rank20": ("Rank-20(%)", 100.0, "identification"),
    "map": ("mAP(%)", 100.0, "identification"),
    "nn_accuracy": ("NN(%)", 100.0, "identification"),
    "fit_seconds": ("fit(s)", 1.0, "both"),
    "map_x2y": ("mAP x->y(%)", 100.0, "retrieval"),
    "map_y2x": ("mAP y->x(%)", 100.0, "retrieval"),
    "map_mean": ("mAP avg(%)", 100.0, "retrieval"),
    "map_at_k_x2y": ("mAP@k x->y(%)", 100.0, "retrieval"),
    "map_at_k_y2x": ("mAP@k y->x(%)", 100.0, "retrieval"),
}

#: ``results.json`` written by :meth:`BenchmarkResult.to_json` (version 1: no format keys)
RESULT_FORMAT = "crossmetric-benchmark-result"
RESULT_VERSION = 2
#: columns of :meth:`BenchmarkResult.table` by default. ``acc_median`` is left out: it sets its
#: threshold on the test distances themselves (on the balanced test pairs of
#: :func:`verification_splits` it equals ``1 − EER`` exactly); it stays in the records. The
#: headline accuracy is ``accuracy_at_threshold`` (LFW's rule: threshold chosen on the training
#: folds). ``rank20`` is in the records, not in the default columns.
TABLE_MEASURES = ("auc", "one_minus_eer", "vr", "pauc", "accuracy_at_threshold", "rank1",
                  "rank5", "rank10", "map", "map_x2y", "map_y2x", "map_mean", "map_at_k_x2y",
                  "map_at_k_y2x", "fit_seconds")
#: former measure names -> current ones: results files written before (and code asking for
#: the old name) stay readable
MEASURE_ALIASES = {"accuracy": "accuracy_at_threshold"}


def _measure_name(name: str) -> str:
    return MEASURE_ALIASES.get(name, name)


@dataclass
class BenchmarkResult:
    """Output of :func:`run_protocols`.

    Attributes
    ----------
    records : list of dict
        Tidy raw results: one row per (method, protocol, split, measure) with its value.
    summary : list of dict
        One row per (method, measure): ``mean``, ``std`` (ddof=1; 0 for one run), ``sem``
        (``std/√n``, LFW's standard error), ``n``.
    curves : dict
        ``{method: {"roc": (fpr_grid, mean_tpr), "cmc": mean_cmc}}``, with ``roc_std`` /
        ``cmc_std``: the pointwise standard deviation over the splits (ddof=1; the bands of
        the figures).
    skipped : dict
        ``{method: reason}`` for methods not run (e.g. image learners on a feature dataset).
    errors : dict
        ``{method: message}`` for methods that failed (with ``on_error="record"``).
    warnings : dict
        ``{method: {warning class name: number of fits that raised it}}`` (e.g.
        ``ConvergenceWarning`` when a short schedule stops at ``max_iter``).
    methods : list of str
        Display names in the order given.

    Examples
    --------
    >>> from crossmetric.protocols import BenchmarkResult
    >>> res = BenchmarkResult(methods=["PCCA"], summary=[
    ...     {"method": "PCCA", "measure": "auc", "mean": 0.93, "std": 0.01, "sem": 0.003,
    ...      "n": 10}])
    >>> print(res.table())
    Method            AUC
    ------  -------------
    PCCA    0.930 ± 0.010
    >>> res.value("PCCA", "auc")
    0.93
    """

    records: list = field(default_factory=list)
    summary: list = field(default_factory=list)
    curves: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    warnings: dict = field(default_factory=dict)
    methods: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def value(self, method: str, measure: str, stat: str = "mean") -> float:
        measure = _measure_name(measure)
        for row in self.summary:
            if row["method"] == method and row["measure"] == measure:
                return row[stat]
        raise KeyError(f"no result for method {method!r}, measure {measure!r}.")

    def _grid(self, measures, pm: str = " ± ") -> tuple[list[str], list[str], list[list]]:
        """Measure keys, column titles and rows ``[method, (text, mean) ...]`` of a table."""
        have = {row["measure"] for row in self.summary}
        measures = [_measure_name(m) for m in (measures or TABLE_MEASURES)]
        measures = [m for m in measures if m in have]
        by = {(r["method"], r["measure"]): r for r in self.summary}
        head = [MEASURES[m][0] if m in MEASURES else m for m in measures]
        rows = []
        for meth in self.methods:
            if not any((meth, m) in by for m in measures):
                continue
            cells: list = [meth]
            for m in measures:
                r = by.get((meth, m))
                if r is None:
                    cells.append(("-", None))
                    continue
                scale = MEASURES.get(m, (m, 1.0))[1]
                digits = 3 if scale == 1.0 and m != "fit_seconds" else 1
                if m == "fit_seconds":
                    cells.append((f"{r['mean']:.2f}", r["mean"]))
                else:
                    cells.append((f"{r['mean'] * scale:.{digits}f}{pm}"
                                  f"{r['std'] * scale:.{digits}f}", r["mean"]))
            rows.append(cells)
        return measures, head, rows

    def table(self, measures: Sequence[str] | None = None) -> str:
        """A paper-style table: one row per method, ``mean ± std`` per measure."""
        _, head, grid = self._grid(measures)
        head = ["Method"] + head
        rows = [[r[0]] + [c[0] for c in r[1:]] for r in grid]
        widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
        lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                           for i, (h, w) in enumerate(zip(head, widths, strict=True)))]
        lines.append("  ".join("-" * w for w in widths))
        for cells in rows:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths, strict=True))))
        return "\n".join(lines)

    @staticmethod
    def _best(measures, grid) -> list[float | None]:
        """Best mean of each column (smallest fit time, largest otherwise)."""
        best = []
        for k, m in enumerate(measures):
            vals = [r[k + 1][1] for r in grid if r[k + 1][1] is not None]
            best.append(None if not vals else (min(vals) if m == "fit_seconds" else max(vals)))
        return best

    def to_markdown(self, measures: Sequence[str] | None = None, *, bold_best: bool = True
                    ) -> str:
        """The table as GitHub Markdown (``mean ± std``; the best of each column in bold).

        Examples
        --------
        >>> res = BenchmarkResult(methods=["A"], summary=[
        ...     {"method": "A", "measure": "auc", "mean": 0.9, "std": 0.01, "sem": 0.003,
        ...      "n": 10}])
        >>> print(res.to_markdown())
        | Method | AUC |
        |---|---:|
        | A | **0.900 ± 0.010** |
        """
        measures, head, grid = self._grid(measures)
        best = self._best(measures, grid) if bold_best else [None] * len(measures)
        lines = ["| Method | " + " | ".join(head) + " |",
                 "|---|" + "---:|" * len(head)]
        for r in grid:
            cells = [f"**{t}**" if b is not None and v == b else t
                     for (t, v), b in zip(r[1:], best, strict=True)]
            lines.append(f"| {r[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_latex(self, measures: Sequence[str] | None = None, *, caption: str | None = None,
                 label: str | None = None, bold_best: bool = True) -> str:
        """The table as a LaTeX ``table`` with ``booktabs`` rules (``\\usepackage{booktabs}``).

        Cells are ``mean $\\pm$ std``; the best of each column is in ``\\textbf``; ``%``, ``_``
        and ``&`` in names are escaped.
        """
        def esc(t: str) -> str:
            for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"),
                         ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
                t = t.replace(a, b)
            return t

        measures, head, grid = self._grid(measures, pm=" $\\pm$ ")
        best = self._best(measures, grid) if bold_best else [None] * len(measures)
        lines = [r"\begin{table}[t]", r"\centering"]
        if caption:
            lines.append(rf"\caption{{{esc(caption)}}}")
        if label:
            lines.append(rf"\label{{{label}}}")
        lines += [r"\begin{tabular}{l" + "r" * len(head) + "}", r"\toprule",
                  "Method & " + " & ".join(esc(h) for h in head) + r" \\", r"\midrule"]
        for r in grid:
            cells = [rf"\textbf{{{t}}}" if b is not None and v == b else t
                     for (t, v), b in zip(r[1:], best, strict=True)]
            lines.append(esc(r[0]) + " & " + " & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines)

    def to_csv(self, path) -> None:
        """The summary (method, measure, mean, std, sem, n) as CSV (written atomically)."""
        write_csv_rows(path, self.summary, ["method", "measure", "mean", "std", "sem", "n"])

    def to_dict(self) -> dict:
        from crossmetric.persistence import json_ready

        return json_ready({"summary": self.summary, "records": self.records,
                      "curves": self.curves, "skipped": self.skipped,
                      "errors": self.errors, "warnings": self.warnings,
                      "methods": self.methods, "info": self.info})

    def to_json(self, path) -> None:
        """Save everything (summary, records, curves, ...) as JSON; :meth:`load` reads it.

        The file also records ``format``, ``format_version`` and ``crossmetric_version``; it is
        written atomically (a temporary file moved over ``path`` once complete).
        """
        import crossmetric

        write_json_document(path, {"format": RESULT_FORMAT, "format_version": RESULT_VERSION,
                                   "crossmetric_version": crossmetric.__version__},
                            self.to_dict())

    save = to_json

    @classmethod
    def from_dict(cls, data: Mapping) -> BenchmarkResult:
        """The inverse of :meth:`to_dict` (curves become arrays again)."""
        if not isinstance(data, Mapping) or "summary" not in data or "methods" not in data:
            raise ValueError("data is not a BenchmarkResult dictionary (needs 'summary' and "
                             "'methods').")

        def nan(v):
            return float("nan") if v is None else v

        curves = {}
        for meth, c in (data.get("curves") or {}).items():
            cc: dict = {}
            if "roc" in c:
                cc["roc"] = tuple(np.asarray([nan(v) for v in a], dtype=float)
                                  for a in c["roc"])
            if "cmc" in c:
                cc["cmc"] = np.asarray([nan(v) for v in c["cmc"]], dtype=float)
            for key in ("roc_std", "cmc_std"):
                if key in c:
                    cc[key] = np.asarray([nan(v) for v in c[key]], dtype=float)
            for key in ("pr_x2y", "pr_y2x"):   # retrieval: (recall, mean precision)
                if key in c:
                    cc[key] = tuple(np.asarray([nan(v) for v in a], dtype=float)
                                    for a in c[key])
            curves[meth] = cc
        def row(r, numeric):
            return {k: nan(v) if k in numeric else _measure_name(v) if k == "measure" else v
                    for k, v in r.items()}

        fix = [row(r, ("mean", "std", "sem", "value")) for r in data.get("summary", [])]
        recs = [row(r, ("value",)) for r in data.get("records", [])]
        return cls(records=recs, summary=fix, curves=curves,
                   skipped=dict(data.get("skipped") or {}), errors=dict(data.get("errors") or {}),
                   warnings=dict(data.get("warnings") or {}), methods=list(data["methods"]),
                   info=dict(data.get("info") or {}))

    @classmethod
    def load(cls, path) -> BenchmarkResult:
        """Read a result written by :meth:`save` / :meth:`to_json` (``results.json``)."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: "
                             f"{' '.join(str(exc).split())}") from None
        version = data.get("format_version", 1) if isinstance(data, dict) else None
        if isinstance(data, dict) and (data.get("format", RESULT_FORMAT) != RESULT_FORMAT
                                       or not isinstance(version, int)
                                       or version > RESULT_VERSION):
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: format "
                             f"{data.get('format')!r} version {version!r} (crossmetric "
                             f"{data.get('crossmetric_version')}); this version reads "
                             f"{RESULT_FORMAT!r} up to version {RESULT_VERSION}.")
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"cannot read a BenchmarkResult from {str(path)!r}: {exc}") \
                from None


def _summarise(records: list[dict], methods: list[str]) -> list[dict]:
    values: dict[tuple[str, str], list[float]] = {}
    for r in records:
        values.setdefault((r["method"], r["measure"]), []).append(r["value"])
    order = {m: i for i, m in enumerate(methods)}
    mkeys = list(MEASURES)
    out = []
    for (meth, meas), vals in sorted(
            values.items(), key=lambda kv: (order.get(kv[0][0], 1e9),
                                            mkeys.index(kv[0][1]) if kv[0][1] in mkeys else 99)):
        v = np.asarray(vals, dtype=float)
        std = float(v.std(ddof=1)) if v.size > 1 else 0.0
        out.append({"method": meth, "measure": meas, "mean": float(v.mean()), "std": std,
                    "sem": std / math.sqrt(v.size), "n": int(v.size)})
    return out
