"""DeepGSM's descriptor branch (:mod:`crossmetric.deep.descriptor`): S̃ plus a fixed
descriptor's scaled squared distance, and a start at that distance."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric import DeepGSM  # noqa: E402
from crossmetric.datasets import load_digits_views  # noqa: E402
from crossmetric.deep.descriptor import attach, initial_log_scale  # noqa: E402
from crossmetric.deep.losses import similarity_matrix  # noqa: E402
from crossmetric.deep.objective import penalised  # noqa: E402
from crossmetric.features import HOG  # noqa: E402
from crossmetric.learners._gsm_measure import gsm_matrix  # noqa: E402

#: HOG cells that fit the 16 x 16 digit images
HOG16 = {"orientations": 8, "pixels_per_cell": (4, 4), "cells_per_block": (2, 2)}
SMALL = {"hidden_units": 8, "n_identities": 10, "tol": None, "device": "cpu",
         "random_state": 0}


@pytest.fixture(scope="module")
def digits():
    b = load_digits_views()
    return b.images_x[:160], b.images_y[:160], np.arange(160)


def _descriptor_distance(model, X, Y):
    U, V = model.descriptor_.transform(X), model.descriptor_.transform(Y)
    return ((U[:, None] - V[None]) ** 2).sum(-1)


def test_attach_adds_the_scaled_squared_distance_to_the_similarity():
    rng = np.random.default_rng(0)
    r, width = 3, 5
    TX, TY = rng.normal(size=(4, 2 * r + 1)), rng.normal(size=(6, 2 * r + 1))
    U, V = rng.normal(size=(4, width)), rng.normal(size=(6, width))
    s, f = 0.7, -1.9
    slow = gsm_matrix(TX, TY, f) + s ** 2 * ((U[:, None] - V[None]) ** 2).sum(-1)
    assert attach(TX, U, s).shape == (4, 2 * (r + width) + 1)
    np.testing.assert_allclose(gsm_matrix(attach(TX, U, s), attach(TY, V, s), f), slow,
                               atol=1e-12)
    t = [torch.tensor(a) for a in (TX, U, TY, V)]
    fast = similarity_matrix(attach(t[0], t[1], torch.tensor(s, dtype=torch.float64)),
                             attach(t[2], t[3], torch.tensor(s, dtype=torch.float64)), f)
    np.testing.assert_allclose(fast.numpy(), slow, atol=1e-12)


def test_initial_scale_puts_the_median_cross_distance_at_two():
    rng = np.random.default_rng(1)
    U, V = rng.normal(size=(40, 6)), rng.normal(size=(30, 6)) + 1.0
    d2 = ((U[:, None] - V[None]) ** 2).sum(-1)
    s = np.exp(initial_log_scale(U, V, seed=0))
    assert s ** 2 * np.median(d2) == pytest.approx(2.0)
    assert initial_log_scale(np.ones((3, 2)), np.ones((3, 2)), 0) == 0.0   # no distance


def test_start_is_the_descriptors_distance(digits):
    X, Y, ids = digits
    # one step of a vanishing rate: the returned model is the start
    m = DeepGSM(descriptor=HOG(**HOG16), max_iter=1, optimizer="sgd", learning_rate=1e-12,
                momentum=0.0, **SMALL).fit_identities(X, ids, Y, ids)
    assert m.descriptor_width_ == m.descriptor_.transform(X[:1]).shape[1]
    assert m.init_ == "descriptor"
    assert m.transform_x(X[:3]).shape == (3, 2 * (8 + m.descriptor_width_) + 1)
    S = m.cross_distance(X[:40], Y[:40])
    scaled = float(m.net_.descriptor_scale().detach()) ** 2 \
        * _descriptor_distance(m, X[:40], Y[:40])
    # the network's terms start at the order of 1e-4: the ranking is the descriptor's
    assert np.abs(S - m.f_ - scaled).max() < 1e-3 * np.median(scaled)
    np.testing.assert_array_equal(S.argsort(0)[:5], scaled.argsort(0)[:5])


def test_scale_is_learnt_and_not_penalised(digits):
    X, Y, ids = digits
    m = DeepGSM(descriptor=HOG(**HOG16), max_iter=20, optimizer="adam", learning_rate=1e-2,
                **SMALL).fit_identities(X, ids, Y, ids)
    ws, phis = penalised(m.net_)
    assert all(p is not m.net_.descriptor_log_scale for p in [*ws, *phis])
    U, V = m.descriptor_.transform(X), m.descriptor_.transform(Y)
    start = initial_log_scale(U.astype(np.float32), V.astype(np.float32), 0)
    assert float(m.net_.descriptor_log_scale.detach()) != pytest.approx(start, abs=1e-4)


def test_early_stopping_scores_the_start_with_its_descriptor(digits):
    X, Y, ids = digits
    m = DeepGSM(descriptor=HOG(**HOG16), max_iter=30, early_stopping=True,
                validation_every=10, **SMALL).fit_identities(X, ids, Y, ids)
    plain = DeepGSM(max_iter=30, early_stopping=True, validation_every=10,
                    **SMALL).fit_identities(X, ids, Y, ids)
    assert m.validation_iterations_[0] == 0 and len(m.validation_scores_) == 4
    assert plain.init_ == "random"
    # the same held-out identities; the start with the descriptor ranks far better than a
    # random network (HOG alone: 80-90 % on these digit views)
    assert m.validation_scores_[0] > plain.validation_scores_[0] + 0.3


def test_descriptor_errors(digits, tmp_path):
    X, Y, ids = digits
    with pytest.raises(ValueError, match="descriptor must be None or a transformer"):
        DeepGSM(descriptor="hog", max_iter=1, **SMALL).fit_identities(X, ids, Y, ids)
    with pytest.raises(ValueError, match="n_processes"):
        DeepGSM(descriptor=HOG(**HOG16), n_processes=2, max_iter=1,
                **SMALL).fit_identities(X, ids, Y, ids)
    files = []
    from PIL import Image
    for i in range(4):
        path = os.path.join(tmp_path, f"{i}.png")
        Image.fromarray((X[i] * 255).astype(np.uint8)).save(path)
        files.append(path)
    with pytest.raises(ValueError, match="descriptor needs the training images as arrays"):
        DeepGSM(descriptor=HOG(**HOG16), max_iter=1, **SMALL).fit_identities(
            files, np.arange(4), files, np.arange(4))
    m = DeepGSM(descriptor=HOG(**HOG16), max_iter=1, **SMALL).fit_identities(X, ids, Y, ids)
    with pytest.raises(ValueError, match="no self-contained tower"):
        m.export_torchscript(os.path.join(tmp_path, "t.pt"))
    with pytest.raises(ValueError, match="embeds image arrays"):
        m.transform_x(files)


def test_descriptor_model_round_trips_through_the_model_format(digits, tmp_path):
    from crossmetric.features._image_views import make_descriptor
    from crossmetric.persistence import load_model, save_model

    X, Y, ids = digits
    m = DeepGSM(descriptor=HOG(**HOG16), max_iter=3, **SMALL).fit_identities(X, ids, Y, ids)
    path = os.path.join(tmp_path, "m.npz")
    save_model(path, m)
    np.testing.assert_allclose(load_model(path).cross_distance(X[:5], Y[:5]),
                               m.cross_distance(X[:5], Y[:5]), atol=1e-10)
    # every descriptor of the command line is saved, its dtype given as a NumPy type too
    save_model(path, DeepGSM(descriptor=make_descriptor("lomo")))
    assert load_model(path).descriptor.get_params()["dtype"] is np.float64


def test_benchmark_gives_image_learners_the_runs_descriptor():
    from crossmetric import CMML
    from crossmetric.cli.benchmark import _start_at_descriptor

    own = HOG(orientations=4)
    ests = {"DeepGSM": DeepGSM(), "mine": DeepGSM(descriptor=own), "CMML": CMML()}
    _start_at_descriptor(ests, {"descriptor": HOG(**HOG16), "images_x": np.zeros((2, 4, 4))})
    assert ests["DeepGSM"].descriptor.get_params() == HOG(**HOG16).get_params()
    assert ests["mine"].descriptor is own          # a descriptor given is kept
    _start_at_descriptor({"DeepGSM": (d := DeepGSM())}, {"descriptor": HOG()})  # no images
    assert d.descriptor is None


def test_resume_continues_the_guard_and_the_descriptor_branch(digits, tmp_path):
    X, Y, ids = digits
    kw = {**SMALL, "descriptor": HOG(**HOG16), "max_iter": 12, "early_stopping": True,
          "validation_every": 2, "patience": 20, "lr_schedule": "step",
          "checkpoint_every": 4, "learning_rate": 0.05}
    full = DeepGSM(**kw).fit_identities(X, ids, Y, ids)
    path = str(tmp_path / "ckpt.pt")
    part = DeepGSM(**kw, checkpoint_path=path, max_time=1e-9).fit_identities(X, ids, Y, ids)
    assert part.stop_reason_ == "max_time"
    resumed = DeepGSM(**kw, checkpoint_path=path, resume=True).fit_identities(X, ids, Y, ids)
    assert resumed.validation_iterations_ == full.validation_iterations_
    np.testing.assert_allclose(resumed.validation_scores_, full.validation_scores_)
    assert resumed.best_iteration_ == full.best_iteration_
    np.testing.assert_allclose(resumed.cross_distance(X[:8], Y[:8]),
                               full.cross_distance(X[:8], Y[:8]), rtol=1e-5, atol=1e-6)
    # a checkpoint without the guard's record (format 2) cannot continue the guard
    state = torch.load(path, weights_only=True)
    del state["monitor"]
    torch.save({**state, "format_version": 2}, path)
    with pytest.raises(ValueError, match="before the held-out guard's record"):
        DeepGSM(**kw, checkpoint_path=path, resume=True).fit_identities(X, ids, Y, ids)
