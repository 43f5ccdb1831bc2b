"""The user's path: ``crossmetric benchmark`` with its defaults on the real data sets, and what
the held-out guard did.

Runs ``crossmetric benchmark --protocol identification --repeats 3`` with the eight methods of
the comparison (the untrained distance, three closed forms, the papers' four learners) on each
set -- CUFS photo ↔ sketch (HOG, dense SIFT), VIPeR camera A ↔ B (strips, LOMO), PKU-Sketch --
and summarises, per method, the rank-1 against the untrained distance and, for the iterative
learners, the start each split chose (``init_``) and the check it kept (``best_iteration_``;
0: the start, unchanged). Writes ``results/start_guard/summary.json`` and ``summary.md``;
each run's own result folder stays under ``results/start_guard/RUN/`` (results.json and
config.toml: ``crossmetric benchmark --config .../config.toml`` repeats it).

Usage::

    python benchmarks/start_guard.py [--sets cufs_hog,viper_lomo] [--tune paper]
    python benchmarks/start_guard.py --summarise-only    # from the result folders
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _common import REPO, machine

DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "start_guard"
METHODS = "euclidean,cca,mvda,kcca,cmml,cmlauc,cmlpauc,gsm"
CUFS = ["--images", str(DATA / "cufs"), "--pattern",
        r"(train|test)/(?P<domain>photo|sketch)/(?P<id>(ar|xm2vts)-\d+)\.jpg"]
SETS = {
    "cufs_hog": [*CUFS, "--descriptor", "hog"],
    "cufs_dense_sift": [*CUFS, "--descriptor", "dense-sift"],
    "viper_strips": ["--dataset", "viper", "--data-home", str(DATA / "viper"),
                     "--descriptor", "strips"],
    "viper_lomo": ["--dataset", "viper", "--data-home", str(DATA / "viper"),
                   "--descriptor", "lomo"],
    "pku_sketch": ["--dataset", "pku-sketch", "--data-home", str(DATA / "pku_sketch")],
}
PAPER_LEARNERS = ("CMML", "CML_AUC", "CML_pAUC", "GSM")
CLOSED_FORMS = ("CCA", "MvDA", "KCCA")


def run(name: str, tune: str | None) -> dict:
    """One ``crossmetric benchmark`` run; returns its seconds."""
    folder = OUT / (name if tune is None else f"{name}_tune_{tune}")
    cmd = [sys.executable, "-m", "crossmetric", "benchmark", *SETS[name], "--protocol",
           "identification", "--repeats", "3", "--methods", METHODS, "--out", str(folder),
           "--quiet", "--n-jobs", "2"]
    if tune is not None:
        cmd += ["--tune", tune, "--tune-scoring", "rank1"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return {"seconds": round(time.perf_counter() - t0, 1), "command": cmd[2:]}


def summarise(folder: Path) -> dict:
    """Rank-1 (%) per method, and the starts / kept checks of the iterative learners."""
    res = json.loads((folder / "results.json").read_text())
    rank1 = {}
    for r in res["records"]:
        if r["measure"] == "rank1":
            rank1.setdefault(r["method"], []).append(100 * r["value"])
    mean = {m: round(sum(v) / len(v), 1) for m, v in rank1.items()}
    out = {"rank1": mean, "untrained": mean.get("Euclidean"), "starts": {}}
    for m, runs in res["info"].get("training", {}).items():
        inits = [r["init"] for r in runs if "init" in r]
        if inits:
            kept = [r.get("best_iteration") for r in runs]
            out["starts"][m] = {"init": dict(Counter(i.split("(")[0] for i in inits)),
                                "kept_start": sum(k == 0 for k in kept),
                                "trained": sum(k is not None and k > 0 for k in kept),
                                "best_iteration": kept}
    paper = [mean[m] for m in PAPER_LEARNERS if m in mean]
    closed = [mean[m] for m in CLOSED_FORMS if m in mean]
    if paper and closed:
        out["best_paper_minus_best_closed"] = round(max(paper) - max(closed), 1)
    if out["untrained"] is not None:
        out["worst_learned_minus_untrained"] = round(
            min(v for m, v in mean.items() if m in PAPER_LEARNERS) - out["untrained"], 1)
    return out


def table(summary: dict) -> str:
    cols = ["Euclidean", *CLOSED_FORMS, *PAPER_LEARNERS]
    lines = ["| run | " + " | ".join(cols) + " | paper − closed | learner − untrained |",
             "|---" * (len(cols) + 3) + "|"]
    for name, s in summary["runs"].items():
        cells = [f"{s['rank1'].get(c, float('nan')):.1f}" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {s.get('best_paper_minus_best_closed', '')} "
                     f"| {s.get('worst_learned_minus_untrained', '')} |")
    lines += ["", "Starts chosen on the held-out identities and kept checks (3 splits each; "
              "kept start = training did not beat the start beyond the hold-out's noise):", ""]
    for name, s in summary["runs"].items():
        for m, st in s["starts"].items():
            lines.append(f"- {name}, {m}: start {st['init']}, kept the start on "
                         f"{st['kept_start']}/3, trained past it on {st['trained']}/3 "
                         f"(best_iteration_ {st['best_iteration']})")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--tune", default=None, choices=(None, "paper", "small"))
    ap.add_argument("--summarise-only", action="store_true")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    summary["machine"] = machine()
    for name in args.sets.split(","):
        key = name if args.tune is None else f"{name}_tune_{args.tune}"
        timing = {} if args.summarise_only else run(name, args.tune)
        if (OUT / key / "results.json").exists():
            summary["runs"][key] = {**summarise(OUT / key), **timing}
    path.write_text(json.dumps(summary, indent=1))
    (OUT / "summary.md").write_text(table(summary))
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
