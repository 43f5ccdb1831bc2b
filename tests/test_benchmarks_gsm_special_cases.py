"""benchmarks/gsm_special_cases.py: its generalized row is which_method_when's GSM row."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    spec = importlib.util.spec_from_file_location(name, ROOT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    return mod


def _tiny_identity_set(root, images):
    from crossmetric.datasets import make_cross_modal

    b = make_cross_modal(120, n_classes=60, n_features_x=12, n_features_y=12, random_state=0)
    return {"X": b.X, "Y": b.Y, "labels": b.labels}, "tiny identity set"


@pytest.fixture
def scripts(monkeypatch):
    from crossmetric import registry

    wmw = _load("which_method_when", monkeypatch)
    monkeypatch.setitem(wmw.LOADERS, "viper", _tiny_identity_set)
    monkeypatch.setitem(wmw.N_TEST, "viper", 20)
    monkeypatch.setitem(wmw.PCA_DIMS, "viper", 8)
    monkeypatch.setitem(wmw.N_NEGATIVES, "viper", 2)
    # the paper's selection only: gsm_special_cases searches no start stage (ours)
    small = dataclasses.replace(registry.METHODS["gsm"], params={"max_iter": 5},
                                paper_grid=({"mu": [1e-4, 1e-2]},), start_stage={})
    monkeypatch.setitem(registry.METHODS, "gsm", small)
    return wmw, _load("gsm_special_cases", monkeypatch)


def test_generalized_row_is_the_which_method_when_gsm_row(scripts, tmp_path, capsys):
    wmw, gsc = scripts
    out = gsc.main(["--n-splits", "1", "--structures", "generalized,euclidean",
                    "--out", str(tmp_path / "g.json")])
    assert json.loads((tmp_path / "g.json").read_text()) == json.loads(
        capsys.readouterr().out)
    res = wmw.run_dataset("viper", "unused", ["gsm"], n_splits=1, tune="paper",
                          tune_scoring="rank1", n_jobs=1, seed=0)
    rank1 = [100 * r["value"] for r in res.records if r["measure"] == "rank1"]
    gen = out["structures"]["generalized"]
    assert gen["per_split"]["rank1"] == pytest.approx(rank1)
    assert gen["chosen"] == [t["params"] for t in res.info["tuned"]["GSM"]]
    assert set(out["structures"]) == {"generalized", "euclidean"}


def test_unknown_structure_is_refused(scripts, tmp_path):
    _, gsc = scripts
    with pytest.raises(SystemExit):
        gsc.main(["--structures", "generalised", "--out", str(tmp_path / "g.json")])
    assert not (tmp_path / "g.json").exists()
