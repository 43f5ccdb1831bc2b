"""benchmarks/which_method_when.py: runs, writes its table, rebuilds it with --merge."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "which_method_when.py"
DATA = Path("/work/shared/data")


@pytest.fixture
def wmw(monkeypatch):
    spec = importlib.util.spec_from_file_location("which_method_when", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # the lead's machine has no faiss: the run must not need it
    monkeypatch.setitem(sys.modules, "faiss", None)
    return mod


def _tiny_identity_set(root, images):
    """A stand-in for VIPeR: 60 identities, two views of one width (joint PCA applies)."""
    from crossmetric.datasets import make_cross_modal

    b = make_cross_modal(120, n_classes=60, n_features_x=12, n_features_y=12, random_state=0)
    return {"X": b.X, "Y": b.Y, "labels": b.labels}, "tiny identity set"


def _tiny_class_set(root, images):
    """A stand-in for digits: 10 classes, views of different widths (the "-C" path)."""
    from crossmetric.datasets import make_cross_modal

    b = make_cross_modal(200, n_classes=10, n_features_x=12, n_features_y=8, random_state=1)
    return {"X": b.X, "Y": b.Y, "labels": b.labels}, "tiny class set"


def test_runs_writes_table_and_merges(wmw, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(wmw.LOADERS, "viper", _tiny_identity_set)
    monkeypatch.setitem(wmw.LOADERS, "digits", _tiny_class_set)
    monkeypatch.setitem(wmw.N_TEST, "viper", 20)
    monkeypatch.setitem(wmw.PCA_DIMS, "viper", 8)
    monkeypatch.setitem(wmw.N_NEGATIVES, "viper", 2)
    out = tmp_path / "wmw"
    wmw.main(["--datasets", "viper,digits", "--methods", "euclidean,cca", "--n-splits", "1",
              "--tune", "small", "--n-jobs", "1", "--out", str(out), "--quiet"])
    table = (out / wmw.TABLE_MD).read_text(encoding="utf-8")
    summary = json.loads((out / wmw.SUMMARY_JSON).read_text(encoding="utf-8"))
    assert set(summary) == {"viper", "digits"}
    for d in ("viper", "digits"):
        rows = {r["method"]: r for r in summary[d]["methods"]}
        # single-modal Euclidean on views of unequal width goes through the CCA step
        assert set(rows) == ({"Euclidean", "CCA"} if d == "viper" else {"Euclidean-C", "CCA"})
        for r in rows.values():
            for k in ("rank1", "map", "auc"):
                assert 0.0 <= r[k]["mean"] <= 1.0 and r[k]["n"] == 1
        assert rows["CCA"]["chosen"].startswith("n_components=")   # the small grid ran
        assert summary[d]["info"]["faiss_imported"] is False
    assert summary["viper"]["info"]["protocol_options"]["pca_joint"] is True
    assert "| VIPeR cam A → B | CCA |" in table and "| digits photo ↔ sketch | CCA |" in table
    printed = capsys.readouterr().out
    assert table in printed
    (out / wmw.TABLE_MD).unlink()
    wmw.main(["--merge", "--out", str(out)])
    assert (out / wmw.TABLE_MD).read_text(encoding="utf-8") == table
    # the methods as two commands (--tag) into one folder: the same splits, the same numbers
    parts = tmp_path / "parts"
    for tag, meth in (("a", "euclidean"), ("b", "cca")):
        wmw.main(["--datasets", "viper", "--methods", meth, "--n-splits", "1", "--tune",
                  "small", "--n-jobs", "1", "--out", str(parts), "--tag", tag, "--quiet"])
    joined = json.loads((parts / wmw.SUMMARY_JSON).read_text(encoding="utf-8"))["viper"]
    key = {r["method"]: (r["rank1"], r["map"], r["auc"], r["chosen"])
           for r in joined["methods"]}
    assert key == {r["method"]: (r["rank1"], r["map"], r["auc"], r["chosen"])
                   for r in summary["viper"]["methods"]}
    with pytest.raises(SystemExit, match="n_splits"):   # parts of different runs: refused
        wmw.main(["--datasets", "viper", "--methods", "pls", "--n-splits", "2", "--tune",
                  "none", "--n-jobs", "1", "--out", str(parts), "--tag", "c", "--quiet"])


def test_update_replaces_rows_of_a_later_run_on_the_same_splits(wmw, monkeypatch, tmp_path,
                                                                capsys):
    monkeypatch.setitem(wmw.LOADERS, "digits", _tiny_class_set)
    base, later = tmp_path / "base", tmp_path / "later"
    common = ["--datasets", "digits", "--n-splits", "1", "--tune", "small", "--n-jobs", "1",
              "--quiet"]
    wmw.main(common + ["--methods", "euclidean,cca", "--out", str(base)])
    wmw.main(common + ["--methods", "cca", "--out", str(later)])
    # the later run's CCA row, changed so that the replacement shows
    path = later / wmw.SUMMARY_JSON
    summary = json.loads(path.read_text(encoding="utf-8"))
    row = next(r for r in summary["digits"]["methods"] if r["method"] == "CCA")
    row["rank1"]["mean"] = 0.123456
    path.write_text(json.dumps(summary), encoding="utf-8")
    capsys.readouterr()
    wmw.main(["--out", str(base), "--update", str(later)])
    table = (base / wmw.TABLE_MD).read_text(encoding="utf-8")
    merged = json.loads((base / wmw.SUMMARY_JSON).read_text(encoding="utf-8"))["digits"]
    rows = {r["method"]: r for r in merged["methods"]}
    assert list(rows) == ["Euclidean-C", "CCA"]                 # order kept, no duplicate
    assert rows["CCA"]["rank1"]["mean"] == 0.123456
    assert "| CCA | 12.3 /" in table and f"from the later run `{later}`" in table
    assert merged["info"]["row_sources"] == {"CCA": str(later)}
    assert wmw.stale_rows({"digits": merged}) == []
    # a row selected from another grid than the registry's is reported
    merged["info"]["tuning"]["grids"]["CCA"] = [{"reg": [1.0]}]
    assert wmw.stale_rows({"digits": merged}) == ["digits/CCA"]
    # a run on other splits is refused, and the table is left as it was
    other = tmp_path / "other"
    wmw.main(["--datasets", "digits", "--n-splits", "2", "--tune", "small", "--n-jobs", "1",
              "--quiet", "--methods", "euclidean", "--out", str(other)])
    with pytest.raises(SystemExit, match="n_splits .* not the same splits"):
        wmw.main(["--out", str(base), "--update", str(other / wmw.SUMMARY_JSON)])
    assert (base / wmw.TABLE_MD).read_text(encoding="utf-8") == table
    with pytest.raises(SystemExit, match="cannot read a summary"):
        wmw.main(["--out", str(base), "--update", str(tmp_path / "missing")])


def test_bad_names_are_refused(wmw, tmp_path):
    with pytest.raises(SystemExit, match="--datasets"):
        wmw.main(["--datasets", "lfw", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--methods"):
        wmw.main(["--methods", "pca", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="no <dataset>.json"):
        wmw.main(["--merge", "--out", str(tmp_path)])


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "pku_sketch").is_dir() or not (DATA / "viper").is_dir(),
                    reason="needs ../shared/data")
def test_real_sets_are_row_aligned(wmw):
    """Row r of X and Y is the same person: VIPeR camera A / B, PKU sketch / photo."""
    from crossmetric.reproduce.pku import pku_features

    data, _ = wmw.load_dataset("pku-sketch", str(DATA), images=False)
    d = pku_features(str(DATA))
    assert data["X"].shape == (394, d["H"].shape[1])             # 197 sketches x 2 photos
    assert np.unique(data["labels"]).size == 197
    H, ids, dom = d["H"], d["ids"], d["domains"]
    for r in (0, 1, 200, 393):
        sketch = np.flatnonzero((dom == "sketch") & (ids == data["labels"][r]))
        assert np.array_equal(data["X"][r], H[sketch[0]])
        photos = H[(dom == "photo") & (ids == data["labels"][r])]
        assert any(np.array_equal(data["Y"][r], p) for p in photos)
    v, _ = wmw.load_dataset("viper", str(DATA), images=True)
    assert v["X"].shape == (632, 924) and np.array_equal(np.sort(v["labels"]), np.arange(1, 633))
    assert v["images_x"].shape == (632, 128, 48, 3) and v["images_x"].max() <= 1.0
    # the LOMO variant: same persons in the same rows, the descriptor of those images
    from crossmetric.features._lomo import LOMO

    lomo, _ = wmw.load_dataset("viper-lomo", str(DATA), images=False)
    assert lomo["X"].shape == (632, 26960) and np.array_equal(lomo["labels"], v["labels"])
    u8 = {k: np.round(v[k] * 255).astype(np.uint8) for k in ("images_x", "images_y")}
    np.testing.assert_allclose(lomo["X"][[0, 631]], LOMO().fit_transform(u8["images_x"][[0, 631]]),
                               atol=1e-6)
    np.testing.assert_allclose(lomo["Y"][[5]], LOMO().fit_transform(u8["images_y"][[5]]),
                               atol=1e-6)


def test_choices_text_shows_split_votes(wmw):
    choices = [{"a": 2, "b": 0.1}, {"a": 1, "b": 0.1}, {"a": 1, "b": 0.1}]
    assert wmw.choices_text(choices) == "a=1 (2/3) or 2 (1/3), b=0.1 (3/3)"
    # a tie keeps the order in which the splits chose (no set order: same text every run)
    assert wmw.choices_text(choices[:2]) == "a=2 (1/2) or 1 (1/2), b=0.1 (2/2)"
