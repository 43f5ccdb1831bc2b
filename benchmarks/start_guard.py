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
    python benchmarks/start_guard.py --closed-forms      # the untrained distance and the
                                                         # six closed forms only
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
CLOSED_FORMS = ("CCA", "MvDA", "KCCA", "PLS", "CDFE", "CSR")
#: ``--closed-forms``: the untrained distance and every closed form of the default benchmark
CLOSED_FORM_METHODS = "euclidean,cca,pls,kcca,cdfe,mvda,csr"


def run(name: str, tune: str | None, key: str, methods: str = METHODS) -> dict:
    """One ``crossmetric benchmark`` run into ``results/start_guard/KEY``; returns its
    seconds."""
    folder = OUT / key
    cmd = [sys.executable, "-m", "crossmetric", "benchmark", *SETS[name], "--protocol",
           "identification", "--repeats", "3", "--methods", methods, "--out", str(folder),
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
    out = {"rank1": mean, "untrained": mean.get("Euclidean"), "starts": {}, "chosen": {}}
    for m, runs in res["info"].get("training", {}).items():
        chosen = [json.dumps(r["chosen"], sort_keys=True) for r in runs if "chosen" in r]
        if chosen:  # a closed form's settings chosen on held-out identities, per split
            out["chosen"][m] = dict(Counter(chosen))
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
    for key, group in (("worst_learned_minus_untrained", PAPER_LEARNERS),
                       ("worst_closed_minus_untrained", CLOSED_FORMS)):
        values = [v for m, v in mean.items() if m in group]
        if out["untrained"] is not None and values:
            out[key] = round(min(values) - out["untrained"], 1)
    return out


def table(summary: dict) -> str:
    cols = ["Euclidean", *CLOSED_FORMS, *PAPER_LEARNERS]
    lines = ["| run | " + " | ".join(cols) + " | paper − closed | learner − untrained "
             "| closed − untrained |", "|---" * (len(cols) + 4) + "|"]
    for name, s in summary["runs"].items():
        cells = [f"{s['rank1'].get(c, float('nan')):.1f}" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {s.get('best_paper_minus_best_closed', '')} "
                     f"| {s.get('worst_learned_minus_untrained', '')} "
                     f"| {s.get('worst_closed_minus_untrained', '')} |")
    lines += ["", "Starts chosen on the held-out identities and kept checks (3 splits each; "
              "kept start = training did not beat the start beyond the hold-out's noise), "
              "and the settings the closed forms chose there:", ""]
    for name, s in summary["runs"].items():
        for m, st in s["starts"].items():
            lines.append(f"- {name}, {m}: start {st['init']}, kept the start on "
                         f"{st['kept_start']}/3, trained past it on {st['trained']}/3 "
                         f"(best_iteration_ {st['best_iteration']})")
        for m, chosen in s.get("chosen", {}).items():
            lines.append(f"- {name}, {m}: chose {chosen}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--tune", default=None, choices=(None, "paper", "small"))
    ap.add_argument("--summarise-only", action="store_true")
    ap.add_argument("--closed-forms", action="store_true",
                    help="run the untrained distance and the six closed forms only (into "
                         "SET_closed_forms)")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    summary["machine"] = machine()
    for name in args.sets.split(","):
        key = name if args.tune is None else f"{name}_tune_{args.tune}"
        methods = METHODS
        if args.closed_forms:
            key, methods = f"{key}_closed_forms", CLOSED_FORM_METHODS
        timing = {} if args.summarise_only else run(name, args.tune, key, methods)
        if (OUT / key / "results.json").exists():
            summary["runs"][key] = {**summarise(OUT / key), **timing}
    path.write_text(json.dumps(summary, indent=1))
    (OUT / "summary.md").write_text(table(summary))
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
