"""Tests of DeepGSM and its parts (crossmetric.deep): losses, batch generator, training."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import ConvergenceWarning, NotFittedError  # noqa: E402

from crossmetric.deep import DeepGSM  # noqa: E402
from crossmetric.deep.losses import (  # noqa: E402
    gsm_hinge_pair_based,
    gsm_hinge_sample_based,
    similarity_matrix,
    similarity_rows,
)
from crossmetric.deep.networks import GSMNet, SimilarityHead  # noqa: E402
from crossmetric.deep.sampler import (  # noqa: E402
    CrossDomainBatchSampler,
    identities_from_pairs,
)
from crossmetric.learners.gsm import STRUCTURES, gsm_components, gsm_matrix  # noqa: E402

# one thread: the test machine's two cores are shared with other processes
torch.set_num_threads(1)


def _stand_in(n=400, seed=0):
    """Photo / sketch stand-in: upsampled digits and edge maps of shifted copies."""
    from scipy import ndimage
    from sklearn.datasets import load_digits

    rng = np.random.RandomState(seed)
    small = load_digits().images[:n] / 16.0
    photos = np.clip(ndimage.zoom(small, (1, 2, 2), order=1), 0, 1)
    shifted = np.stack([ndimage.shift(p, rng.uniform(-1, 1, 2), order=1) for p in photos])
    sketches = ndimage.gaussian_gradient_magnitude(shifted, (0, 0.8, 0.8))
    sketches /= sketches.reshape(n, -1).max(1)[:, None, None] + 1e-12
    return photos, sketches


@pytest.fixture(scope="module")
def photo_sketch():
    """(images_x, images_y) of the embedded photo / sketch task, instance = row."""
    try:
        from crossmetric.datasets import load_digits_views

        b = load_digits_views()
        return b.images_x[:400], b.images_y[:400]
    except (ImportError, AttributeError):  # pragma: no cover - before the loader landed
        return _stand_in()


def instance_pairs(n, n_neg=1, seed=0):
    """Positive (i, i) for every instance and n_neg random negatives each."""
    rng = np.random.RandomState(seed)
    pos = np.c_[np.arange(n), np.arange(n)]
    neg_x = np.repeat(np.arange(n), n_neg)
    neg_y = (neg_x + rng.randint(1, n, neg_x.size)) % n
    pairs = np.r_[pos, np.c_[neg_x, neg_y]]
    y = np.r_[np.ones(n, int), -np.ones(neg_x.size, int)]
    return pairs, y


SMALL = dict(hidden_units=16, n_identities=12, max_iter=5, device="cpu", tol=None,
             random_state=0)


# --------------------------------------------------------------------------------- losses
def test_similarity_matrix_matches_numpy_and_rows():
    rng = np.random.RandomState(0)
    TX, TY = rng.normal(size=(5, 9)), rng.normal(size=(4, 9))
    M = similarity_matrix(torch.tensor(TX), torch.tensor(TY), -1.9).numpy()
    np.testing.assert_allclose(M, gsm_matrix(TX, TY, -1.9), rtol=1e-12)
    R = similarity_rows(torch.tensor(TX[:4]), torch.tensor(TY), -1.9).numpy()
    np.testing.assert_allclose(R, np.diag(M[:4]), rtol=1e-12)


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_similarity_head_equals_numpy_structures(structure):
    r = 4
    head = SimilarityHead(r, structure, f=-1.9, learn_f=True).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in head.params.values():
            p.normal_(0, 1, generator=g)
    Wx, Wy, f = head.components()
    params = {k: v.detach().numpy() for k, v in head.params.items()}
    if structure not in ("linear", "joint_bayesian"):
        params["f"] = np.asarray(-1.9)
    LA, LB, LCx, LCy, d, e, fn = gsm_components(params, structure, -1.9, r, r, r)
    np.testing.assert_allclose(Wx.detach().numpy(), np.vstack([LA, LCx, d]), atol=1e-12)
    np.testing.assert_allclose(Wy.detach().numpy(), np.vstack([LB, LCy, e]), atol=1e-12)
    assert np.isclose(float(f.detach()), fn)


def test_sample_based_loss_and_gradient_equal_pair_based(photo_sketch):
    """eq. (14) on n_x + n_y images = eq. (13) on the n_x·n_y pairs with copied images."""
    images_x, images_y = photo_sketch
    net = GSMNet((16, 16), hidden_units=12).double()
    net.initialize("default", torch.Generator().manual_seed(0))
    rng = np.random.RandomState(0)
    xb = torch.tensor(images_x[:6])
    yb = torch.tensor(images_y[2:9])
    same = rng.rand(6, 7) < 0.3
    ell = torch.tensor(np.where(same, -1.0, 1.0))
    w = torch.tensor(rng.uniform(0.1, 1.0, (6, 7)))

    net.zero_grad()
    TX, TY, f = net(xb, yb)
    loss_s = gsm_hinge_sample_based(TX, TY, f, ell, w)
    loss_s.backward()
    grads_s = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    # the hinge is active on some pairs and not on others: a real test of the indicator
    S = similarity_matrix(TX, TY, f).detach()
    active = (1 - ell * S) > 0
    assert active.any() and (~active).any()

    net.zero_grad()
    a, b = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    TXp, TYp, f = net(xb[a.ravel()], yb[b.ravel()])
    loss_p = gsm_hinge_pair_based(TXp, TYp, f, ell.reshape(-1), w.reshape(-1))
    loss_p.backward()
    grads_p = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}

    assert torch.allclose(loss_s, loss_p, rtol=1e-10)
    assert grads_s.keys() == grads_p.keys() and len(grads_s) > 10
    for n in grads_s:
        assert torch.allclose(grads_s[n], grads_p[n], rtol=1e-8, atol=1e-12), n


def test_sample_based_gradient_is_eq_18():
    """Autograd's ∂L/∂x̃ equals the closed form of eq. (18)."""
    rng = np.random.RandomState(2)
    r = 3
    TX = torch.tensor(rng.normal(size=(4, 2 * r + 1)), requires_grad=True)
    TY = torch.tensor(rng.normal(size=(5, 2 * r + 1)))
    ell = torch.tensor(rng.choice([-1.0, 1.0], (4, 5)))
    loss = gsm_hinge_sample_based(TX, TY, -1.9, ell, torch.ones(4, 5, dtype=torch.float64))
    loss.backward()
    S = similarity_matrix(TX, TY, -1.9).detach().numpy()
    ind = (ell.numpy() * S < 1).astype(float)
    tx, ty, L = TX.detach().numpy(), TY.numpy(), ell.numpy()
    want = np.zeros_like(tx)
    for i in range(4):
        for j in range(5):
            p1x = np.r_[tx[i, :r], np.zeros(r + 1)]  # P₁ᵀP₁ x̃
            p2y = np.r_[np.zeros(r), ty[j, r:2 * r], 0.0]  # P₂ᵀP₂ ỹ
            p3 = np.r_[np.zeros(2 * r), 1.0]
            want[i] -= 2 * ind[i, j] * L[i, j] * (p1x - p2y + p3)
    np.testing.assert_allclose(TX.grad.numpy(), want, rtol=1e-10)


# ---------------------------------------------------------------------- batch generator
def test_batch_generator_counts_and_balance():
    ids_x = np.repeat(np.arange(10), 3)  # 3 images of each of 10 identities
    ids_y = np.repeat(np.arange(10), 4)
    s = CrossDomainBatchSampler(ids_x, ids_y, n_identities=5, n_images_x=2, n_images_y=3,
                                random_state=0)
    for _ in range(5):
        b = s.sample()
        assert b.ix.shape == (10,) and b.iy.shape == (15,)
        cx, nx = np.unique(ids_x[b.ix], return_counts=True)
        cy, ny = np.unique(ids_y[b.iy], return_counts=True)
        assert cx.size == 5 and np.array_equal(cx, cy)
        assert np.all(nx == 2) and np.all(ny == 3)
        assert len(set(b.ix.tolist())) == 10  # without replacement when enough images
        assert b.same.shape == (10, 15)
        assert b.same.sum() == 5 * 2 * 3
        assert (~b.same).sum() == 5 * 4 * 2 * 3
        np.testing.assert_allclose(b.weight[b.same].sum(), 0.5)
        np.testing.assert_allclose(b.weight[~b.same].sum(), 0.5)
        assert np.array_equal(b.same, ids_x[b.ix][:, None] == ids_y[b.iy][None, :])
    p = s.sample_pairs(41)
    assert p.ix.shape == (41,)
    assert p.same.sum() == 20
    assert np.array_equal(p.same, ids_x[p.ix] == ids_y[p.iy])
    assert np.unique(ids_x[p.ix]).size <= 5
    np.testing.assert_allclose([p.weight[p.same].sum(), p.weight[~p.same].sum()], 0.5)


def test_batch_generator_uses_only_identities_in_both_domains():
    ids_x = np.array([0, 1, 2, 3])
    ids_y = np.array([1, 2, 3, 4, 5])
    s = CrossDomainBatchSampler(ids_x, ids_y, n_identities=10, random_state=0)
    assert s.n_identities == 3
    b = s.sample()
    assert set(ids_x[b.ix]) == {1, 2, 3}
    with pytest.raises(ValueError, match="at least 2 identities"):
        CrossDomainBatchSampler([0, 1], [1, 5], n_identities=2)


def test_identities_from_pairs_are_positive_components():
    ix = np.array([0, 1, 1, 2, 3])
    iy = np.array([0, 0, 1, 2, 0])
    y = np.array([1, 1, 1, 1, -1])
    ids_x, ids_y, conflicts = identities_from_pairs(4, 3, ix, iy, y)
    assert ids_x[0] == ids_x[1] == ids_y[0] == ids_y[1]
    assert ids_x[2] == ids_y[2] != ids_x[0]
    assert ids_x[3] not in (ids_x[0], ids_x[2])
    assert conflicts == 0
    _, _, conflicts = identities_from_pairs(4, 3, ix, iy, np.array([1, 1, 1, 1, 1])[[0, 1, 2,
                                                                                      3, 0]])
    assert conflicts == 0
    _, _, conflicts = identities_from_pairs(2, 2, np.array([0, 1, 1]), np.array([0, 0, 0]),
                                            np.array([1, 1, -1]))
    assert conflicts == 1


# --------------------------------------------------------------------------- the learner
def test_short_training_lowers_loss_and_beats_chance(photo_sketch):
    images_x, images_y = photo_sketch
    tr, te = np.arange(300), np.arange(300, 400)
    pairs, y = instance_pairs(300)
    model = DeepGSM(hidden_units=64, n_identities=32, max_iter=300, device="cpu", tol=None,
                    random_state=0, preprocessor=(images_x[tr], images_y[tr]))
    model.fit(pairs, y)
    curve = np.asarray(model.loss_curve_)
    assert model.n_iter_ == 300 == curve.size
    assert curve[-20:].mean() < 0.8 * curve[:20].mean()
    # CUFS protocol: gallery = photos of held-out instances, probes = their sketches
    D = model.cross_distance(images_x[te], images_y[te]).T  # (probes, gallery)
    rank1 = np.mean(np.argmin(D, axis=1) == np.arange(te.size))
    assert rank1 > 0.1  # chance is 0.01; about 0.3 is typical after these 300 iterations


def test_pair_mode_trains(photo_sketch):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(200)
    model = DeepGSM(batch_mode="pair", n_pairs=128, hidden_units=32, n_identities=32,
                    max_iter=100, device="cpu", tol=None, random_state=0,
                    preprocessor=(images_x[:200], images_y[:200])).fit(pairs, y)
    curve = np.asarray(model.loss_curve_)
    assert curve[-10:].mean() < 0.8 * curve[:10].mean()
    assert model.score(pairs, y) > 0.75


def test_deterministic_on_cpu(photo_sketch):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(60)
    prep = (images_x[:60], images_y[:60])
    a = DeepGSM(**SMALL, preprocessor=prep).fit(pairs, y)
    b = DeepGSM(**SMALL, preprocessor=prep).fit(pairs, y)
    c = DeepGSM(**{**SMALL, "random_state": 1}, preprocessor=prep).fit(pairs, y)
    np.testing.assert_array_equal(a.pair_distance(pairs), b.pair_distance(pairs))
    assert a.loss_curve_ == b.loss_curve_
    assert not np.array_equal(a.pair_distance(pairs), c.pair_distance(pairs))


def test_checkpoint_resume_equals_uninterrupted(photo_sketch, tmp_path):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(60)
    prep = (images_x[:60], images_y[:60])
    kw = {**SMALL, "max_iter": 8, "lr_schedule": "step", "checkpoint_every": 4}
    full = DeepGSM(**kw, preprocessor=prep).fit(pairs, y)
    path = str(tmp_path / "ckpt.pt")
    # an interrupted run: stop after 4 iterations via the time limit's twin, a short max_iter
    # cannot be used (the schedule depends on max_iter), so save at 4 and stop with max_time
    part = DeepGSM(**kw, checkpoint_path=path, max_time=1e-9, preprocessor=prep)
    part.fit(pairs, y)
    assert part.n_iter_ == 1 and part.stop_reason_ == "max_time"
    resumed = DeepGSM(**kw, checkpoint_path=path, resume=True, preprocessor=prep).fit(pairs, y)
    assert resumed.n_iter_ == 8
    np.testing.assert_allclose(resumed.loss_curve_, full.loss_curve_, rtol=1e-6)
    np.testing.assert_allclose(resumed.pair_distance(pairs), full.pair_distance(pairs),
                               rtol=1e-5, atol=1e-6)


def test_pickle_and_joblib_round_trip(photo_sketch, tmp_path):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(60)
    model = DeepGSM(**SMALL, preprocessor=(images_x[:60], images_y[:60])).fit(pairs, y)
    before = model.cross_distance(images_x[:20], images_y[:20])
    clone_p = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone_p.cross_distance(images_x[:20], images_y[:20]), before)
    joblib.dump(model, tmp_path / "m.joblib")
    clone_j = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(clone_j.pair_distance(pairs), model.pair_distance(pairs))
    np.testing.assert_array_equal(clone_j.transform_y(images_y[:5]),
                                  model.transform_y(images_y[:5]))


def test_embeddings_and_distances_agree(photo_sketch):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(60)
    model = DeepGSM(**SMALL, structure="ladf",
                    preprocessor=(images_x[:60], images_y[:60])).fit(pairs, y)
    TX = model.transform_x(images_x[:7])
    assert TX.shape == (7, 2 * 16 + 1)
    D = model.cross_distance(images_x[:7], images_y[:9], block_elements=10)
    ii, jj = np.meshgrid(np.arange(7), np.arange(9), indexing="ij")
    d = model.pair_distance((images_x[:7][ii.ravel()], images_y[:9][jj.ravel()]))
    np.testing.assert_allclose(D.ravel(), d, rtol=1e-5, atol=1e-5)  # float32 network
    assert model.features_x(images_x[:3]).shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(model.features_y(images_y[:3]), axis=1), 1.0,
                               rtol=1e-5)
    assert model.predict(pairs).shape == (120,)


def test_array_pairs_form_and_clone(photo_sketch):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(40)
    Xp, Yp = images_x[pairs[:, 0]], images_y[pairs[:, 1]]
    model = DeepGSM(**SMALL, progress=True).fit((Xp, Yp), y)  # with a tqdm bar
    assert model.n_identities_ == 40  # duplicated images are merged back into instances
    assert clone(model).get_params()["hidden_units"] == 16


def test_paper_geometry_for_large_images():
    net = GSMNet((60, 50), hidden_units=8)
    assert net.domain_x.conv.stride == (2, 2) and net.domain_x.pool.kernel_size == 3
    TX, TY, _ = net(torch.zeros(2, 60, 50), torch.zeros(3, 60, 50))
    assert TX.shape == (2, 17) and TY.shape == (3, 17)
    with pytest.raises(ValueError, match="too small"):
        GSMNet((3, 3), hidden_units=8)
    assert GSMNet((6, 6), hidden_units=8).embed_x(torch.zeros(1, 6, 6)).shape == (1, 17)


def test_convergence_warning_and_verbose(photo_sketch, capsys):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(40)
    with pytest.warns(ConvergenceWarning):
        DeepGSM(**{**SMALL, "tol": 1e-4}, verbose=1, checkpoint_every=2,
                preprocessor=(images_x[:40], images_y[:40])).fit(pairs, y)
    out = capsys.readouterr().out
    assert "objective" in out and len(out.strip().splitlines()) >= 3


def test_bad_input(photo_sketch):
    images_x, images_y = photo_sketch
    pairs, y = instance_pairs(20)
    prep = (images_x[:20], images_y[:20])
    with pytest.raises(ValueError, match="3-D"):
        DeepGSM(**SMALL, preprocessor=(images_x[:20].reshape(20, -1), images_y[:20])).fit(
            pairs, y)
    with pytest.raises(ValueError, match="one size"):
        DeepGSM(**SMALL, preprocessor=(images_x[:20], images_y[:20, :12, :12])).fit(pairs, y)
    with pytest.raises(ValueError, match="input_shape"):
        DeepGSM(**SMALL, input_shape=(20, 20), preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="batch_mode"):
        DeepGSM(**SMALL, batch_mode="triplet", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="structure"):
        DeepGSM(**SMALL, structure="cosine", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="n_identities"):
        DeepGSM(**{**SMALL, "n_identities": 1}, preprocessor=prep).fit(pairs, y)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            DeepGSM(**{**SMALL, "device": "cuda"}, preprocessor=prep).fit(pairs, y)
    bad = images_x[:20].copy()
    bad[0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        DeepGSM(**SMALL, preprocessor=(bad, images_y[:20])).fit(pairs, y)
    with pytest.raises(NotFittedError):
        DeepGSM().transform_x(images_x[:2])
    model = DeepGSM(**SMALL, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="shape"):
        model.transform_y(images_y[:3, :8, :8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.pair_distance(pairs)


def test_import_crossmetric_does_not_import_torch():
    code = ("import sys, crossmetric; crossmetric.GSM; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "crossmetric.DeepGSM; assert 'torch' in sys.modules")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
