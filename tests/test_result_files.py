"""result_files.write_result_files: the tables and figures of a benchmark result."""

import json

import numpy as np
import pytest

from crossmetric import Euclidean
from crossmetric.datasets import make_cross_modal
from crossmetric.protocols import BenchmarkResult, run_protocols
from crossmetric.protocols.result_files import RESULT_FILES, write_result_files


@pytest.fixture(scope="module")
def result():
    d = make_cross_modal(60, n_classes=6, n_features_x=3, n_features_y=3, random_state=0)
    return run_protocols({"Euclidean": Euclidean()}, d, n_folds=2, n_repeats=1,
                         random_state=0)


def test_writes_every_table_and_both_figures(result, tmp_path):
    written = write_result_files(result, tmp_path, description="toy data")
    assert written == list(RESULT_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RESULT_FILES)
    assert (tmp_path / "results.md").read_text() == result.to_markdown() + "\n"
    tex = (tmp_path / "results.tex").read_text()
    assert tex == result.to_latex(caption="toy data") + "\n" and "toy data" in tex
    back = BenchmarkResult.load(tmp_path / "results.json")
    assert back.value("Euclidean", "auc") == pytest.approx(result.value("Euclidean", "auc"))
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert rows[0].startswith("method") and any("rank1" in r for r in rows)
    for png in ("roc.png", "cmc.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.loads((tmp_path / "results.json").read_text())


def test_figures_only_for_the_curves_there_are(result, tmp_path):
    verif = BenchmarkResult.from_dict(result.to_dict())
    verif.curves = {m: {k: v for k, v in c.items() if k == "roc"}
                    for m, c in verif.curves.items()}
    assert write_result_files(verif, tmp_path)[-1] == "roc.png"
    assert not (tmp_path / "cmc.png").exists()
    none = BenchmarkResult.from_dict(result.to_dict())
    none.curves = {}
    assert write_result_files(none, tmp_path) == list(RESULT_FILES[:4])


def test_folder_must_exist(result, tmp_path):
    with pytest.raises(ValueError, match="folder must be an existing folder"):
        write_result_files(result, tmp_path / "missing")
    assert np.isfinite(result.value("Euclidean", "auc"))
