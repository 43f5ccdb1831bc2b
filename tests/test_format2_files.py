"""Model files of format 2 and pickles, which name the module paths from before
``crossmetric/learners/``, still load (through ``persistence.FORMAT2_MODULES``) and give the
same distances; the old paths are not importable otherwise."""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import crossmetric
from crossmetric.persistence import (
    FORMAT2_MODULES,
    FORMAT_VERSION,
    current_path,
    load_model,
    save_model,
)

ROOT = Path(__file__).resolve().parents[1]
OLD_FILES = Path(__file__).parent / "data" / "models_format2"

def _problem():
    """The ``data`` problem of conftest.py, which the files of OLD_FILES were fitted on."""
    from crossmetric.pairs import make_pairs

    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(6), 8)
    Z = rng.rand(6, 4)[labels]
    X = np.abs(Z @ rng.rand(4, 6) + 0.1 * rng.rand(48, 6))
    Y = np.abs(Z @ rng.rand(4, 5) + 0.1 * rng.rand(48, 5))
    return X, Y, make_pairs(labels, labels, max_positives=120, random_state=0)


@pytest.mark.parametrize("name, cls, pickled", [
    ("pcca", "crossmetric.pcca.PCCA", True), ("cca", "crossmetric.baselines.CCA", True),
    ("gsm", "crossmetric.gsm.GSM", False), ("ensemble", "crossmetric.ensemble.SeedEnsemble", False),
])
def test_files_written_before_the_move_load(name, cls, pickled):
    X, Y, _ = _problem()
    path = OLD_FILES / f"{name}.npz"
    header = json.loads(bytes(np.load(path)["__header__"]).decode())
    assert header["format_version"] == 2 and header["class"] == cls  # really an old file
    expected = np.load(OLD_FILES / f"{name}.dist.npy")
    for ext in ("npz", "joblib") if pickled else ("npz",):
        model = load_model(OLD_FILES / f"{name}.{ext}", allow_pickle=ext == "joblib")
        assert f"{type(model).__module__}.{type(model).__name__}".startswith(current_path(
            cls).rpartition(".")[0])
        B = Y if getattr(model, "_cross_modal", False) else X
        np.testing.assert_allclose(model.cross_distance(X[:10], B[:12]), expected,
                                   rtol=1e-12, atol=1e-12)


def _as_format2(tree):
    """A format-3 header tree with every class named by its path from before the move."""
    old_of = {new: old for old, new in FORMAT2_MODULES.items()}
    if isinstance(tree, list):
        return [_as_format2(t) for t in tree]
    if not isinstance(tree, dict):
        return tree
    out = {k: _as_format2(v) for k, v in tree.items()}
    if isinstance(out.get("$object"), str):
        module, _, name = out["$object"].rpartition(".")
        out["$object"] = f"{old_of.get(module, module)}.{name}"
    return out


def test_every_learner_saved_under_its_new_path_and_read_under_its_old_one(data, tmp_path):
    from crossmetric.registry import METHODS, make_estimator

    X, Y, pairs, y = data
    for name in METHODS:
        if name == "deepgsm":
            continue  # DeepGSM did not move (crossmetric.deep.model)
        est = make_estimator(name)
        small = {"n_components": 3, "n_clusters": 2, "max_iter": 5}
        est.set_params(**{k: v for k, v in small.items() if k in est.get_params()})
        prep = (X, Y) if getattr(est, "_cross_modal", True) else X
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.set_params(preprocessor=prep).fit(pairs, y)
        save_model(tmp_path / "m.npz", est)
        arrays = dict(np.load(tmp_path / "m.npz"))
        header = json.loads(bytes(arrays.pop("__header__")).decode())
        assert header["format_version"] == FORMAT_VERSION == 3
        assert header["class"].startswith("crossmetric.learners."), header["class"]
        if header["tree"]["$object"].rpartition(".")[0] not in set(FORMAT2_MODULES.values()):
            continue  # a learner added after the move has no path from before it
        old = {**header, "format_version": 2, "tree": _as_format2(header["tree"])}
        assert old["tree"]["$object"].startswith("crossmetric.") and \
            not old["tree"]["$object"].startswith("crossmetric.learners.")
        blob = np.frombuffer(json.dumps(old).encode(), dtype=np.uint8)
        np.savez(tmp_path / "old.npz", __header__=blob, **arrays)
        again = load_model(tmp_path / "old.npz").set_params(preprocessor=prep)
        assert type(again) is type(est)
        np.testing.assert_array_equal(again.pair_distance(pairs), est.pair_distance(pairs))


def test_old_paths_do_not_import_and_a_pickle_read_leaves_none_behind():
    X, Y, _ = _problem()
    with pytest.raises(ImportError):
        importlib.import_module("crossmetric.pcca")
    model = load_model(OLD_FILES / "cca.joblib", allow_pickle=True)
    assert type(model) is crossmetric.CCA
    old = ("crossmetric.pcca", "crossmetric.baselines")
    assert not [m for m in sys.modules if m.startswith(old)]
