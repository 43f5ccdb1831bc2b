"""benchmarks/select_cuhk01_deepgsm.py: the reproduction's test persons are never used, the
held-out persons are never trained on, the smoke candidate runs and a rerun resumes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.utils import Bunch

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "select_cuhk01_deepgsm.py"
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TINY = {"hidden_units": 8, "n_identities": 4}


@pytest.fixture
def sel(monkeypatch):
    """The script as a module, CUHK01 replaced by 24 random persons x 2 cameras x 2 images."""
    import crossmetric.datasets as datasets

    rng = np.random.RandomState(0)
    n = 24
    ids = np.repeat(np.arange(1, n + 1), 4)
    dom = np.tile([1, 1, 2, 2], n)
    fake = Bunch(images=rng.randint(0, 256, (4 * n, 160, 60, 3)).astype(np.uint8), ids=ids,
                 domains=dom, shots=np.tile([1, 2, 3, 4], n))

    def load(data_home, size=None):
        if size is None:
            return fake
        w, h = size  # nearest-neighbour resize of the same rows
        rows, cols = np.arange(h) * 160 // h, np.arange(w) * 60 // w
        return Bunch(**{**fake, "images": fake.images[:, rows][:, :, cols]})

    monkeypatch.setattr(datasets, "load_cuhk01", load)
    spec = importlib.util.spec_from_file_location("select_cuhk01_deepgsm", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_test_persons_are_the_reproductions(sel, monkeypatch):
    """split_draws gives the persons that ``reproduce gsm-cuhk01-deep`` tests on (the same
    seed), on the same single-shot views."""
    import crossmetric.protocols.runner as runner
    from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01_deep

    seen = []
    original = runner.identification_splits

    def splits(labels, *a, **kw):
        out = original(labels, *a, **kw)
        seen.append(np.unique(np.asarray(labels)[out[0].probe_rows]))
        return out

    monkeypatch.setattr(runner, "identification_splits", splits)
    reproduce_gsm_cuhk01_deep("unused", n_splits=2, verbose=False, n_test=5, n_negatives=2,
                              with_gsm=False, deepgsm_params={"max_iter": 2, **TINY})
    draws = list(sel.split_draws(sel.cuhk01_images("unused"), 0, 2, 5, n_negatives=2))
    assert len(seen) == len(draws) == 2
    for (_, _, _, test), expect in zip(draws, seen, strict=True):
        np.testing.assert_array_equal(test, expect)
    assert not np.array_equal(draws[0][3], draws[1][3])


def test_smoke_trains_on_neither_test_nor_held_out_persons_and_resumes(sel, monkeypatch,
                                                                       tmp_path):
    fits = []
    fit_one = sel._fit_one

    def record(params, data, rx, ry, *a):
        fits.append((params, set(data["ids"][rx]) | set(data["ids"][ry]), rx.size))
        return fit_one(params, data, rx, ry, *a)

    monkeypatch.setattr(sel, "_fit_one", record)
    path = tmp_path / "sel.json"
    out = sel.run("unused", 2, 4, ["smoke", "both-shots"], n_test=5, n_negatives=2,
                  json_path=str(path), verbose=False, overrides={**TINY, "max_iter": 3})
    assert len(fits) == 4 and sel.CANDIDATES["smoke"] == {"max_iter": 20}  # not mutated
    draws = list(sel.split_draws(sel.cuhk01_images("unused"), 0, 2, 5, n_negatives=2))
    for j, (params, persons, n_rows) in enumerate(fits):
        k = j // 2
        test = set(draws[k][3].tolist())
        row = out["per_split"][k]
        assert len(persons) == 24 - 5 - 4 == row["n_fit"] and not persons & test
        # single shot: one image a camera and person; both-shots: two
        assert n_rows == (2 if params.get("n_images_x") == 2 else 1) * len(persons)
    for row in out["per_split"]:
        for key in ("euclid", "smoke", "smoke+noflip", "both-shots", "both-shots+noflip"):
            assert all(0 <= row[key][m] <= 100 for m in ("r1", "r5", "r20", "mAP"))
        assert row["smoke"]["rounds"] == 3 and row["smoke"]["seconds"] > 0
    assert json.loads(path.read_text())["per_split"] == json.loads(json.dumps(out))[
        "per_split"]
    # a rerun with the same file fits nothing and gives the same table
    again = sel.run("unused", 2, 4, ["smoke", "both-shots"], n_test=5, n_negatives=2,
                    json_path=str(path), verbose=False, overrides={**TINY, "max_iter": 3})
    assert len(fits) == 4
    assert sel.table(again) == sel.table(out)
    assert "smoke+noflip" in sel.table(out) and "euclid" in sel.table(out)


def test_paper_input_size_trains_and_ranks_resized_images(sel, monkeypatch):
    shapes = []
    fit_one = sel._fit_one

    def record(params, data, *a):
        shapes.append((params.get("input_shape"), data["Z"].shape[1:3]))
        return fit_one(params, data, *a)

    monkeypatch.setattr(sel, "_fit_one", record)
    out = sel.run("unused", 1, 4, ["size230", "smoke"], n_test=5, n_negatives=2,
                  verbose=False, overrides={**TINY, "max_iter": 2})
    assert shapes == [((230, 80), (230, 80)), (None, (160, 60))]
    assert 0 <= out["per_split"][0]["size230"]["mAP"] <= 100


def test_unknown_candidate_is_refused(sel, capsys):
    with pytest.raises(SystemExit):
        sel.main(["--candidates", "recipe,nope"])
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cuhk01").is_dir(), reason="CUHK01 absent")
def test_smoke_on_real_cuhk01(tmp_path):
    spec = importlib.util.spec_from_file_location("select_cuhk01_deepgsm_real", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch

    threads = torch.get_num_threads()
    try:
        out = mod.main(["--data-home", str(DATA), "--persons", "20", "--n-test", "4",
                        "--held-out", "4", "--n-negatives", "2", "--candidates", "smoke",
                        "--json", str(tmp_path / "o.json")])
    finally:
        torch.set_num_threads(threads)
    assert out["per_split"][0]["n_fit"] == 12
    assert (tmp_path / "o.json").is_file()
