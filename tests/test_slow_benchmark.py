"""The main job end to end: ``crossmetric benchmark`` with no method or protocol options.

About 80 s on 2 cores, so it is marked ``slow`` (``python -m pytest -m slow``).
"""

import csv
import json

import pytest

from crossmetric.cli import main
from crossmetric.registry import METHODS


@pytest.mark.slow
def test_default_benchmark_runs_every_method_and_learners_beat_euclidean(tmp_path):
    out = tmp_path / "results"
    assert main(["benchmark", "--out", str(out)]) == 0
    for name in ("results.csv", "results.json", "roc.png", "cmc.png"):
        assert (out / name).stat().st_size > 0
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    auc = {r["method"]: float(r["mean"]) for r in rows if r["measure"] == "auc"}
    assert len(auc) == sum(spec.in_default for spec in METHODS.values()), sorted(auc)
    floor = auc["Euclidean-C"]
    for method in ("PCCA-C", "CMML", "KCCA", "CCA", "DeepGSM", "GSM", "Maha_AUC-C", "CLML-C"):
        assert auc[method] > floor + 0.15, (method, auc[method], floor)
    # every learner of the default run stops on its own convergence rule
    with open(out / "results.json") as fh:
        caught = json.load(fh)["warnings"]
    assert not {m: w for m, w in caught.items() if "ConvergenceWarning" in w}, caught
