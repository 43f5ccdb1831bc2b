"""learners/ and features/ (issue 21): every module path from before the move still imports,
as the very module of its new path (private names and monkeypatching included), and model files
and pickles written before the move still load and give the same distances."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import crossmetric
from crossmetric._aliases import MOVED_MODULES, current_path
from crossmetric.persistence import FORMAT_VERSION, load_model, save_model

ROOT = Path(__file__).resolve().parents[1]
OLD_FILES = Path(__file__).parent / "data" / "models_format2"

#: old paths of the submodules of moved packages
OLD_SUBMODULES = [f"crossmetric.baselines.{m}" for m in
                  ("_cdfe", "_common", "_euclidean", "_kcca", "_kissme", "_latent")]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES) + OLD_SUBMODULES)
def test_old_module_path_is_the_new_module(old):
    new = current_path(old)
    assert new != old
    module = importlib.import_module(old)
    assert module is importlib.import_module(new) is sys.modules[old] is sys.modules[new]
    assert module.__name__ == new and module.__spec__.name == new
    # no file is left at the old path: the old name is only an alias
    rel = old.replace(".", "/")
    assert not (ROOT / f"{rel}.py").exists() and not (ROOT / rel).exists()
    parent, _, child = old.rpartition(".")
    assert getattr(importlib.import_module(parent), child) is module


def test_every_import_form_of_an_old_path():
    from crossmetric import baselines, pcca
    from crossmetric.baselines._latent import CCA, _SklearnCCA
    from crossmetric.learners import pcca as new_pcca
    from crossmetric.pcca import PCCA, check_kernel

    assert pcca is new_pcca and crossmetric.pcca is pcca and crossmetric.gsm.GSM is crossmetric.GSM
    assert PCCA is crossmetric.PCCA and PCCA.__module__ == "crossmetric.learners.pcca"
    assert check_kernel is crossmetric.kernels.check_kernel
    assert CCA is baselines.CCA is crossmetric.CCA
    assert _SklearnCCA.__name__ == "CCA" and baselines._latent is sys.modules[CCA.__module__]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("crossmetric.pcca.nothere")
    with pytest.raises(AttributeError, match="has no attribute 'nothere'"):
        crossmetric.nothere  # noqa: B018


def test_old_paths_first_in_a_fresh_interpreter_load_each_file_once():
    code = (
        "import sys\n"
        "from crossmetric.baselines._latent import CCA\n"
        "import crossmetric._dense_sift, crossmetric.clml, crossmetric._gsm_measure\n"
        "import crossmetric.learners.baselines._latent as new\n"
        "from crossmetric.features import DenseSIFT\n"
        "assert sys.modules['crossmetric.baselines._latent'] is new and CCA is new.CCA\n"
        "assert DenseSIFT.__module__ == 'crossmetric.features._dense_sift'\n"
        "files = {}\n"
        "for name, m in list(sys.modules.items()):\n"
        "    if name.startswith('crossmetric') and getattr(m, '__file__', None):\n"
        "        assert files.setdefault(m.__file__, m) is m, m.__file__\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_monkeypatching_an_old_path_reaches_the_moved_code(monkeypatch, data):
    import crossmetric.baselines._latent as old_latent
    import crossmetric.learners.pcca as new_pcca
    import crossmetric.pcca as old_pcca

    X, Y, pairs, y = data
    calls = []
    real = old_pcca.fit_logistic_towers
    monkeypatch.setattr(old_pcca, "fit_logistic_towers",
                        lambda *a, **k: calls.append("pcca") or real(*a, **k))
    assert new_pcca.fit_logistic_towers is not real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crossmetric.PCCA(n_components=2, max_iter=3, preprocessor=X).fit(pairs, y)
    real_norm = old_latent._l2_normalize
    monkeypatch.setattr(old_latent, "_l2_normalize",
                        lambda F: calls.append("cca") or real_norm(F))
    crossmetric.CCA(n_components=2, distance="cosine", preprocessor=(X, Y)).fit(pairs, y)\
        .cross_distance(X[:3], Y[:3])
    assert calls[0] == "pcca" and "cca" in calls
    monkeypatch.undo()
    assert new_pcca.fit_logistic_towers is real


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
    old_of = {new: old for old, new in MOVED_MODULES.items()}
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
        if header["tree"]["$object"].rpartition(".")[0] not in set(MOVED_MODULES.values()):
            continue  # a learner added after the move has no path from before it
        old = {**header, "format_version": 2, "tree": _as_format2(header["tree"])}
        assert old["tree"]["$object"].startswith("crossmetric.") and \
            not old["tree"]["$object"].startswith("crossmetric.learners.")
        blob = np.frombuffer(json.dumps(old).encode(), dtype=np.uint8)
        np.savez(tmp_path / "old.npz", __header__=blob, **arrays)
        again = load_model(tmp_path / "old.npz").set_params(preprocessor=prep)
        assert type(again) is type(est)
        np.testing.assert_array_equal(again.pair_distance(pairs), est.pair_distance(pairs))
