"""No class over ~300 lines (issue 21 item 3), and the classes split to get there keep every
name of their modules importable, with a monkeypatch through the old module reaching the code
that moved (DeepGSM's mixins, the pair form of ``_base``, GSM's measure)."""

import ast
from pathlib import Path

import numpy as np
import pytest

import crossmetric

PACKAGE = Path(crossmetric.__file__).parent
MAX_CLASS_LINES = 300


def test_no_class_is_over_300_lines():
    sizes = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                sizes.append((node.end_lineno - node.lineno + 1,
                              f"{path.relative_to(PACKAGE)}:{node.name}"))
    assert len(sizes) > 50
    assert not [s for s in sizes if s[0] > MAX_CLASS_LINES], sorted(sizes)[-5:]


class _Sentinel(Exception):
    pass


def _raise(*args, **kw):
    raise _Sentinel


def test_base_keeps_the_pair_form_names_and_patching_them_reaches_the_moved_code(monkeypatch):
    from crossmetric import _base, _pair_data
    from crossmetric.baselines import Euclidean

    for name in ("PairData", "_FORMS", "_HASH_MULTIPLIERS", "_row_keys", "distinct_rows",
                 "canonical_pairs", "used_rows", "used_pairs", "as_float_array",
                 "check_indices", "BLOCK_ELEMENTS", "_ArrayStub", "_shorten", "_has_array"):
        assert hasattr(_base, name), name
    assert _base.PairData is _pair_data.PairData
    assert issubclass(_base.PairLearnerMixin, _pair_data.PairInputsMixin)
    X = np.random.RandomState(0).rand(6, 3)
    pairs, y = np.array([[0, 1], [2, 3], [4, 5], [0, 5]]), np.array([1, 1, -1, -1])
    model = Euclidean(preprocessor=X).fit(pairs, y)
    monkeypatch.setattr(_base, "check_indices", _raise)  # read by the input forms
    with pytest.raises(_Sentinel):
        model.pair_distance(pairs)
    monkeypatch.undo()
    seen = []
    real = _base.distinct_rows
    monkeypatch.setattr(_base, "distinct_rows", lambda *a: seen.append(1) or real(*a))
    Euclidean(preprocessor=X).fit(pairs, y)  # canonical_pairs reads distinct_rows
    assert seen


def test_gsm_measure_patched_through_gsm_reaches_the_towers_mixin(monkeypatch):
    from crossmetric import GSM
    from crossmetric import gsm as gsm_module

    rng = np.random.RandomState(0)
    X, Y = rng.rand(20, 4), rng.rand(20, 5)
    labels = np.arange(20) % 5
    pairs = np.array([(i, j) for i in range(20) for j in range(20)])
    y = np.where(labels[pairs[:, 0]] == labels[pairs[:, 1]], 1, -1)
    seen = []
    real = gsm_module.gsm_components
    monkeypatch.setattr(gsm_module, "gsm_components",
                        lambda *a: seen.append(1) or real(*a))
    with pytest.warns(Warning):
        GSM(2, max_iter=2, batch_mode="pair", random_state=0,
            preprocessor=(X, Y)).fit(pairs, y)
    assert seen  # _set_components, now on GSMTowersMixin


def test_deep_model_keeps_its_names_and_patching_them_reaches_the_mixins(monkeypatch):
    pytest.importorskip("torch")
    from crossmetric.deep import embedding, fitting, model, saving

    assert model.DeepGSM.__module__ == "crossmetric.deep.model"
    assert model.DeepGSM.__mro__[1:4] == (fitting.FittingMixin, embedding.EmbeddingMixin,
                                          saving.SavingMixin)
    for name in ("train", "spawn_training", "check_params", "resolve_device", "build_net",
                 "pair_identities", "training_sources", "check_layout", "active_group",
                 "mined_weights", "round_hinge", "forward_blocks", "embed_source",
                 "gsm_matrix", "gsm_rowwise", "is_file_list", "GSMNet", "GSMTower",
                 "atomic_path", "check_images"):
        assert hasattr(model, name), name
    monkeypatch.setattr(model, "check_params", _raise)
    images = np.zeros((4, 8, 8))
    with pytest.raises(_Sentinel):
        model.DeepGSM(max_iter=1, device="cpu").fit_identities(images, [0, 0, 1, 1], images,
                                                               [0, 0, 1, 1])
