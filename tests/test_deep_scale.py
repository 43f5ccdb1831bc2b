"""DeepGSM on real images and hardware: paper init, resume checks, identities, RGB, streaming,
the identity sampler, backbones, augmentation, hard negatives, early stopping, export, DDP."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric.deep import DeepGSM  # noqa: E402
from crossmetric.deep.augment import (  # noqa: E402
    RandomCrop,
    RandomErasing,
    RandomGrayscale,
    RandomHorizontalFlip,
    Resize,
    SplitMix,
    SplitMixBatch,
    apply_batch,
    make_augmentation,
    reid_augmentation,
)
from crossmetric.deep.data import (  # noqa: E402
    CrossDomainIdentitySampler,
    CrossDomainImages,
    IterationBatches,
)
from crossmetric.deep.networks import GSMNet  # noqa: E402
from crossmetric.deep.sampler import epoch_identity_batches  # noqa: E402
from tests._images import write_pngs  # noqa: E402

torch.set_num_threads(1)

SMALL = dict(hidden_units=16, n_identities=8, max_iter=6, device="cpu", tol=None,
             random_state=0)


@pytest.fixture(scope="module")
def digits():
    """Photo / sketch views of digits: images_x, images_y (16 × 16) and the class of each row."""
    from sklearn.datasets import load_digits

    from crossmetric.datasets import load_digits_views

    b = load_digits_views()
    cls = load_digits().target[:b.images_x.shape[0]]
    return b.images_x[:300], b.images_y[:300], cls[:300]


def instance_pairs(n, seed=0):
    rng = np.random.RandomState(seed)
    neg = (np.arange(n) + rng.randint(1, n, n)) % n
    pairs = np.r_[np.c_[np.arange(n), np.arange(n)], np.c_[np.arange(n), neg]]
    return pairs, np.r_[np.ones(n, int), -np.ones(n, int)]


def rgb_people(n_ids=12, per=2, h=24, w=16, seed=0):
    """Synthetic RGB 'photos' (uint8) and grey 'sketches' of n_ids identities."""
    rng = np.random.RandomState(seed)
    base = rng.rand(n_ids, h, w, 3)
    ids = np.repeat(np.arange(n_ids), per)
    photos = np.clip(base[ids] + 0.1 * rng.randn(ids.size, h, w, 3), 0, 1)
    sketches = photos.mean(3) + 0.05 * rng.randn(ids.size, h, w)
    return ((photos * 255).astype(np.uint8), ids,
            (np.clip(sketches, 0, 1) * 255).astype(np.uint8), ids.copy())


# -------------------------------------------------------------------
def test_paper_init_does_not_collapse(digits):
    """init='paper' used to map every image to one vector after one step (spread ~1e-8)."""
    X, Y, _ = digits
    pairs, y = instance_pairs(120)
    m = DeepGSM(**{**SMALL, "max_iter": 20, "n_identities": 16}, init="paper",
                preprocessor=(X[:120], Y[:120])).fit(pairs, y)
    F = m.features_x(X[:60])
    spread = np.linalg.norm(F - F.mean(0), axis=1).mean()
    assert spread > 1e-2, spread
    assert np.isfinite(m.loss_curve_).all()


def test_paper_init_rescaling_keeps_the_papers_function(digits):
    X, Y, _ = digits
    x, y = torch.tensor(X[:20]).float(), torch.tensor(Y[:20]).float()
    a = GSMNet((16, 16), 12)
    a.initialize("paper", torch.Generator().manual_seed(3))
    b = GSMNet((16, 16), 12)
    b.initialize("paper", torch.Generator().manual_seed(3), probe=(x, y))
    with torch.no_grad():
        fa, fb = a.features_x(x), b.features_x(x)
        sh = b.shared
        h = sh.fc2(torch.relu(sh.fc1(sh.pool(torch.relu(sh.conv(b.domain_x(x[:, None]))))
                                     .flatten(1))))
    torch.testing.assert_close(fa, fb, rtol=1e-4, atol=1e-5)
    assert 0.1 < float(h.norm(dim=1).mean()) < 100  # the paper's draw gives about 1e-6


def _ckpt_setup(digits, tmp_path, **kw):
    X, Y, _ = digits
    pairs, y = instance_pairs(40)
    prep = (X[:40], Y[:40])
    path = str(tmp_path / "c.pt")
    base = {**SMALL, "checkpoint_path": path, "checkpoint_every": 2, **kw}
    DeepGSM(**base, preprocessor=prep).fit(pairs, y)
    return base, pairs, y, prep


@pytest.mark.parametrize("change", [{"max_iter": 12}, {"learning_rate": 0.01},
                                    {"augment": "reid"}, {"hard_negatives": 2},
                                    {"average_from": 0.5}])
def test_resume_refuses_other_settings(digits, tmp_path, change):
    base, pairs, y, prep = _ckpt_setup(digits, tmp_path)
    with pytest.raises(ValueError, match="other settings"):
        DeepGSM(**{**base, **change}, resume=True, preprocessor=prep).fit(pairs, y)


def test_resume_refuses_other_data_and_accepts_same(digits, tmp_path):
    base, pairs, y, prep = _ckpt_setup(digits, tmp_path)
    X, Y, _ = digits
    with pytest.raises(ValueError, match="other training data"):
        DeepGSM(**base, resume=True, preprocessor=(X[40:80], Y[40:80])).fit(pairs, y)
    # same settings and data, a run-only parameter changed: accepted (nothing left to do)
    m = DeepGSM(**{**base, "verbose": 0, "eval_batch_size": 7}, resume=True,
                preprocessor=prep).fit(pairs, y)
    assert m.n_iter_ == base["max_iter"]


def test_sampled_pairs_warn_about_fragmented_identities_and_groups_fix_it(digits):
    X, Y, cls = digits
    rng = np.random.RandomState(0)
    # class-level pairs, sampled: 2 positives and 2 negatives per image (as a pair protocol
    # makes them); their connected components are not the 10 classes
    n = 200
    a = np.repeat(np.arange(n), 2)
    pos = np.array([rng.choice(np.flatnonzero(cls[:n] == cls[i])) for i in a])
    neg = np.array([rng.choice(np.flatnonzero(cls[:n] != cls[i])) for i in a])
    pairs = np.r_[np.c_[a, pos], np.c_[a, neg]]
    y = np.r_[np.ones(a.size, int), -np.ones(a.size, int)]
    kw = {**SMALL, "max_iter": 2, "preprocessor": (X[:n], Y[:n])}
    with pytest.warns(UserWarning, match="fragments"):
        m = DeepGSM(**kw).fit(pairs, y)
    assert m.n_identities_ != 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = DeepGSM(**kw).fit(pairs, y, groups=(cls[:n], cls[:n]))
    assert m.n_identities_ == 10
    with pytest.raises(ValueError, match="groups"):
        DeepGSM(**kw).fit(pairs, y, groups=(cls[:n], cls[:5]))
    # instance pairs list every same-identity pair: no warning
    ip, iy = instance_pairs(60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DeepGSM(**kw).fit(ip, iy)


# ------------------------------------------------------------------ images, streaming
def test_rgb_and_grey_domains_with_uint8(tmp_path):
    px, ix, sy, iy = rgb_people()
    m = DeepGSM(**SMALL).fit_identities(px, ix, sy, iy)
    assert m.channels_ == (3, 1) and m.net_.domain_x.conv.in_channels == 3
    TX, TY = m.transform_x(px[:5]), m.transform_y(sy[:4])
    assert TX.shape == (5, 33) and TY.shape == (4, 33)
    D = m.cross_distance(px[:5], sy[:4])
    assert D.shape == (5, 4) and np.isfinite(D).all()
    assert m.threshold_ == 0.0 and m.predict((px[:4], sy[:4])).shape == (4,)
    # uint8 is scaled to [0, 1]: the same as float input / 255
    np.testing.assert_allclose(TX, m.transform_x(px[:5] / 255.0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        m.transform_x(sy[:3])
    # the pair API takes colour images too (index form)
    pairs = np.c_[np.arange(24), np.arange(24)]
    pairs = np.r_[pairs, np.c_[np.arange(24), (np.arange(24) + 2) % 24]]
    yl = np.r_[np.ones(24, int), -np.ones(24, int)]
    m2 = DeepGSM(**SMALL, preprocessor=(px, sy)).fit(pairs, yl, groups=(ix, iy))
    assert m2.n_identities_ == 12


def test_streaming_from_files_equals_in_memory(tmp_path):
    px, ix, sy, iy = rgb_people()
    fx, fy = write_pngs(tmp_path, px, "p"), write_pngs(tmp_path, sy, "s")
    kw = {**SMALL, "augment": "reid"}
    mem = DeepGSM(**kw).fit_identities(px, ix, sy, iy)
    disk = DeepGSM(**kw).fit_identities(fx, ix, fy, iy)  # PNG is lossless
    np.testing.assert_allclose(disk.loss_curve_, mem.loss_curve_, rtol=1e-6)
    np.testing.assert_allclose(disk.transform_x(fx[:3]), mem.transform_x(px[:3]), rtol=1e-5,
                               atol=1e-6)
    # files of another size are resized to input_shape
    from PIL import Image

    big = [str(tmp_path / f"b{i}.png") for i in range(4)]
    for i, p in enumerate(big):
        Image.fromarray(px[i]).resize((32, 48)).save(p)
    assert disk.transform_x(big).shape == (4, 33)
    with pytest.raises(ValueError, match="could not read"):
        disk.transform_x([str(tmp_path / "missing.png")])


@pytest.mark.slow
def test_streaming_with_dataloader_workers(tmp_path):
    px, ix, sy, iy = rgb_people()
    fx, fy = write_pngs(tmp_path, px, "p"), write_pngs(tmp_path, sy, "s")
    a = DeepGSM(**SMALL, augment="reid").fit_identities(fx, ix, fy, iy)
    b = DeepGSM(**SMALL, augment="reid", num_workers=2).fit_identities(fx, ix, fy, iy)
    np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, rtol=1e-6)


def test_epoch_sampler_draws_every_identity_without_duplicates():
    ids_x = np.r_[np.repeat(np.arange(10), 3), [10]]  # identity 10: one image in X
    ids_y = np.r_[np.repeat(np.arange(10), 2), [10, 11]]  # 11 only in Y: never drawn
    s = CrossDomainIdentitySampler(ids_x, ids_y, 4, n_images_x=2, n_images_y=3, seed=1,
                                   with_seeds=False)
    assert len(s) == 3  # ceil(11 / 4)
    for epoch in range(3):
        s.set_epoch(epoch)
        seen = set()
        for keys in s:
            keys = np.asarray(keys)
            assert np.unique(keys).size == keys.size  # no image twice in a round
            kx, ky = keys[keys < ids_x.size], keys[keys >= ids_x.size] - ids_x.size
            idents = np.unique(ids_x[kx])
            assert idents.size == 4 and np.array_equal(idents, np.unique(ids_y[ky]))
            for c in idents:  # min(Ô, available) images per identity and domain
                assert np.sum(ids_x[kx] == c) == min(2, np.sum(ids_x == c))
                assert np.sum(ids_y[ky] == c) == min(3, np.sum(ids_y == c))
            seen |= set(idents.tolist())
        assert seen == set(range(11))
    # epochs differ, and an epoch is a function of (seed, epoch)
    r0 = epoch_identity_batches(ids_x, ids_y, 4, 2, 3, random_state=0)
    r0b = epoch_identity_batches(ids_x, ids_y, 4, 2, 3, random_state=0)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(r0, r0b, strict=True))


def test_sampler_shards_rounds_among_processes_and_resumes():
    ids = np.repeat(np.arange(9), 2)
    full = CrossDomainIdentitySampler(ids, ids, 6, 2, 2, seed=3)
    parts = [CrossDomainIdentitySampler(ids, ids, 6, 2, 2, seed=3, rank=r, world_size=2)
             for r in range(2)]
    for a, b, c in zip(full, *parts, strict=True):
        assert sorted(a) == sorted(b + c)  # same keys and seeds, split
        assert not set(k for k, _ in b) & set(k for k, _ in c)
        assert len({ids[k % 18] for k, _ in b}) == 3  # 3 identities each
    it = IterationBatches(full, 0, 7)
    rest = IterationBatches(full, 4, 7)
    assert list(it)[4:] == list(rest)  # a resumed run draws the same rounds
    with pytest.raises(ValueError, match="processes"):
        CrossDomainIdentitySampler(ids, ids, 2, world_size=3)


def test_numpy_sampler_importable_without_torch():
    code = ("import sys; "
            "from crossmetric.deep.sampler import epoch_identity_batches, "
            "CrossDomainBatchSampler; "
            "b = epoch_identity_batches([0, 1, 2], [0, 1, 2], 2); assert len(b) == 2; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parents[1])


# ------------------------------------------------------------------------ augmentation
def test_augmentation_is_seeded_per_draw_and_keeps_shape():
    img = torch.rand(3, 24, 16)
    tf = reid_augmentation((24, 16))
    a, b = tf(img, SplitMix(5)), tf(img, SplitMix(5))
    torch.testing.assert_close(a, b)
    outs = [tf(img, SplitMix(s)) for s in range(20)]
    assert all(o.shape == (3, 24, 16) for o in outs)
    assert sum(not torch.equal(outs[0], o) for o in outs[1:]) >= 18
    erased = RandomErasing(p=1.0, value=-7.0)(img, SplitMix(1))
    frac = float((erased == -7.0).float().mean())
    assert 0.015 < frac < 0.25
    assert make_augmentation(0, (8, 8)) is None
    shifted = make_augmentation(2, (24, 16))(img, SplitMix(0))
    assert shifted.shape == img.shape
    with pytest.raises(ValueError, match="augment"):
        DeepGSM(**SMALL, augment="mixup").fit_identities(*rgb_people())
    # a user callable without rng (torchvision-style) runs with a seeded torch generator
    ds = CrossDomainImages(np.zeros((2, 4, 4), np.float32), [0, 1],
                           np.zeros((2, 4, 4), np.float32), [0, 1],
                           transform_x=lambda t: t + torch.rand(()))
    assert torch.equal(ds[(0, 9)][0], ds[(0, 9)][0])


def test_random_grayscale_is_the_luminance_in_every_channel():
    img = torch.rand(3, 6, 5)
    grey = RandomGrayscale(p=1.0)(img, SplitMix(0))
    expected = 0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2]
    for c in range(3):
        torch.testing.assert_close(grey[c], expected)
    assert torch.equal(RandomGrayscale(p=0.0)(img, SplitMix(0)), img)
    one = torch.rand(1, 6, 5)  # not three channels: unchanged
    assert torch.equal(RandomGrayscale(p=1.0)(one, SplitMix(0)), one)
    drawn = [not torch.equal(RandomGrayscale(p=0.5)(img, SplitMix(s)), img) for s in range(200)]
    assert 70 < sum(drawn) < 130
    assert "RandomGrayscale(p=0.5)" in repr(reid_augmentation((24, 16), grayscale=0.5))
    assert "Grayscale" not in repr(reid_augmentation((24, 16)))


def test_torchvision_v2_pipeline_as_augment():
    try:
        from torchvision.transforms import v2
    except Exception as exc:  # noqa: BLE001 - a CUDA wheel beside a CPU torch raises RuntimeError
        pytest.skip(f"torchvision does not import here ({type(exc).__name__}: {exc})")
    tf = v2.Compose([v2.RandomResizedCrop((24, 16), scale=(0.8, 1.0)), v2.RandomHorizontalFlip(),
                     v2.ColorJitter(0.2, 0.2, 0.2), v2.RandomErasing(0.5)])
    px, ix, sy, iy = rgb_people()
    a = DeepGSM(**SMALL, augment=tf).fit_identities(px, ix, sy, iy)
    b = DeepGSM(**SMALL, augment=tf).fit_identities(px, ix, sy, iy)
    assert np.all(np.isfinite(a.loss_curve_))
    np.testing.assert_array_equal(a.loss_curve_, b.loss_curve_)  # seeded per draw


def test_splitmix_batch_draws_what_each_generator_draws():
    seeds = [0, 1, 2**63 + 5, 2**64 - 1, 123456789]
    rngs = [SplitMix(s) for s in seeds]
    g = SplitMixBatch.from_rngs([SplitMix(s) for s in seeds])
    for _ in range(3):
        np.testing.assert_array_equal(g.random(), [r.random() for r in rngs])
        np.testing.assert_array_equal(g.integers(2, 9), [r.integers(2, 9) for r in rngs])
    fresh = [SplitMix(0) for _ in seeds]
    g.write_back(fresh)
    assert [r.state for r in fresh] == [r.state for r in rngs]
    assert SplitMixBatch.from_rngs([SplitMix(0), np.random.default_rng(0)]) is None


@pytest.mark.parametrize("tf", [RandomCrop((24, 16), padding=3), RandomHorizontalFlip(),
                                Resize((12, 10)), reid_augmentation((24, 16)),
                                reid_augmentation((24, 16), grayscale=0.5),
                                make_augmentation(1, (24, 16))])
def test_batch_augmentation_equals_image_by_image(tf):
    imgs = torch.rand(9, 3, 24, 16)
    seeds = list(range(100, 109))
    slow = torch.stack([tf(img, SplitMix(s)) for img, s in zip(imgs, seeds, strict=True)])
    fast = apply_batch(tf, imgs, [SplitMix(s) for s in seeds])
    torch.testing.assert_close(fast, slow, rtol=0, atol=0)


@pytest.mark.parametrize("augment", [0, 2, "reid"])
def test_batched_items_equal_single_items(tmp_path, augment):
    px, ix, sy, iy = rgb_people(n_ids=5)
    tf = make_augmentation(augment, (24, 16))
    keys = [(3, 11), (0, 12), (12, 13), (1, 14), (10, 15), (15, 16)]
    for x, y in ((px, sy), (write_pngs(tmp_path, px, "p"), write_pngs(tmp_path, sy, "s"))):
        ds = CrossDomainImages(x, ix, y, iy, size=(24, 16), transform_x=tf, transform_y=tf)
        fast = ds.__getitems__(keys)
        slow = [ds[k] for k in keys]
        for (a, ia, da), (b, ib, db) in zip(fast, slow, strict=True):
            assert (ia, da) == (ib, db)
            # same draws; colour jitter's image mean may sum in another order (1 ulp)
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------- hard negatives
def test_mined_weights_against_brute_force():
    rng = np.random.RandomState(0)
    same = rng.rand(6, 7) < 0.25
    S = rng.randn(6, 7)
    w = DeepGSM._mined_weights(same, S, 2)
    keep = same.copy()
    for i in range(6):
        negs = [j for j in range(7) if not same[i, j]]
        for j in sorted(negs, key=lambda j: S[i, j])[:2]:
            keep[i, j] = True
    for j in range(7):
        negs = [i for i in range(6) if not same[i, j]]
        for i in sorted(negs, key=lambda i: S[i, j])[:2]:
            keep[i, j] = True
    assert np.array_equal(w > 0, keep)
    np.testing.assert_allclose([w[same].sum(), w[~same].sum()], 0.5)
    np.testing.assert_allclose(DeepGSM._mined_weights(same, S, None)[~same].sum(), 0.5)


def test_hard_negatives_train(digits):
    X, Y, _ = digits
    pairs, y = instance_pairs(100)
    m = DeepGSM(**{**SMALL, "max_iter": 40, "n_identities": 16}, hard_negatives=3,
                preprocessor=(X[:100], Y[:100])).fit(pairs, y)
    assert np.isfinite(m.loss_curve_).all()
    assert np.mean(m.loss_curve_[-10:]) < np.mean(m.loss_curve_[:5])


# ------------------------------------------------------------------- early stopping
def test_early_stopping_on_held_out_rank1(digits):
    X, Y, _ = digits
    pairs, y = instance_pairs(120)
    m = DeepGSM(**{**SMALL, "max_iter": 400, "learning_rate": 0.5, "n_identities": 16},
                early_stopping=True, validation_fraction=0.25, validation_every=5, patience=2,
                preprocessor=(X[:120], Y[:120])).fit(pairs, y)
    assert m.n_identities_ == 90  # 30 of the 120 held out
    scores = m.validation_scores_
    assert all(type(s) is float for s in scores)
    assert len(m.validation_iterations_) == len(scores)
    assert m.validation_iterations_ == sorted(m.validation_iterations_)
    assert m.stop_reason_ == "early_stopping" and m.n_iter_ < 400
    assert len(scores) >= 3 and all(0.0 <= s <= 1.0 for s in scores)
    # the kept check is the start or one that beats it (the library's guard decides)
    kept = m.validation_iterations_.index(m.best_iteration_)
    assert kept == 0 or scores[kept] >= scores[0]
    with pytest.raises(ValueError, match="validation"):
        DeepGSM(**SMALL, early_stopping=True, validation_fraction=0.9,
                preprocessor=(X[:6], Y[:6])).fit(*instance_pairs(6))


def test_early_stopping_is_the_learners_guard(digits, monkeypatch):
    """A check replaces the start only when the library's rule says it beats it beyond the
    hold-out's noise (:meth:`crossmetric._solvers.early_stopping.EarlyStopping.better`)."""
    from crossmetric._solvers.early_stopping import EarlyStopping

    X, Y, _ = digits
    pairs, y = instance_pairs(120)
    kw = {**SMALL, "max_iter": 60, "learning_rate": 0.5, "n_identities": 16,
          "early_stopping": True, "validation_fraction": 0.25, "validation_every": 10,
          "patience": 10, "preprocessor": (X[:120], Y[:120])}
    monkeypatch.setattr(EarlyStopping, "better", lambda self, *a: False)
    assert DeepGSM(**kw).fit(pairs, y).best_iteration_ == 0
    monkeypatch.setattr(EarlyStopping, "better", lambda self, *a: True)
    m = DeepGSM(**kw).fit(pairs, y)
    # every check may replace the start: the best (rank-1, then AUC) is kept
    assert m.validation_scores_[m.validation_iterations_.index(m.best_iteration_)] \
        == max(m.validation_scores_)


def test_early_stopping_auto_holds_out_from_30_identities_and_keeps_the_start(digits):
    X, Y, _ = digits
    kw = {**SMALL, "n_identities": 8, "validation_every": 3, "early_stopping": "auto"}
    few = DeepGSM(**kw, preprocessor=(X[:29], Y[:29])).fit(*instance_pairs(29))
    assert few.n_identities_ == 29 and few.validation_scores_ == []  # classes, not held out
    assert few.best_iteration_ is None
    some = DeepGSM(**kw, preprocessor=(X[:40], Y[:40])).fit(*instance_pairs(40))
    assert some.n_identities_ == 32  # 8 of the 40 held out (validation_fraction 0.2)
    # the initial network is the first check; the kept weights are the best check's
    assert some.validation_iterations_ == [0, 3, 6]  # the start, then every 3 rounds
    assert some.best_iteration_ in some.validation_iterations_
    plain = DeepGSM(**{**kw, "early_stopping": False}, preprocessor=(X[:40], Y[:40]))
    assert plain.fit(*instance_pairs(40)).n_identities_ == 40
    # a start no check beats is returned unchanged: at a learning rate of 1e-30 every check
    # scores the initial weights (no step moves them), and the first (the start) is kept
    frozen = DeepGSM(**{**kw, "learning_rate": 1e-30, "weight_decay": 0.0, "mu": 0.0},
                     preprocessor=(X[:40], Y[:40])).fit(*instance_pairs(40))
    assert frozen.best_iteration_ == 0
    with pytest.raises(ValueError, match="early_stopping must be 'auto', True or False"):
        DeepGSM(**{**kw, "early_stopping": "yes"},
                preprocessor=(X[:40], Y[:40])).fit(*instance_pairs(40))


# ------------------------------------------------------------------------ backbones
class TinyBackbone(torch.nn.Module):
    def __init__(self, c=1, width=10):
        super().__init__()
        self.conv = torch.nn.Conv2d(c, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, width)

    def forward(self, x):
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 4)
                       .flatten(1))


def test_custom_backbones_shared_pair_and_state_dict_file(digits, tmp_path):
    X, Y, _ = digits
    pairs, y = instance_pairs(40)
    prep = (X[:40], Y[:40])
    user = TinyBackbone()
    before = {k: v.clone() for k, v in user.state_dict().items()}
    m = DeepGSM(**SMALL, backbone=user, preprocessor=prep).fit(pairs, y)
    assert m.transform_x(X[:3]).shape == (3, 21)  # r = the backbone's width, 10
    assert all(torch.equal(before[k], v) for k, v in user.state_dict().items())  # copied
    np.testing.assert_allclose(np.linalg.norm(m.features_y(Y[:3]), axis=1), 1, rtol=1e-5)
    # a colour photo tower and a grey sketch tower
    px, ix, sy, iy = rgb_people()
    m2 = DeepGSM(**SMALL, backbone=(TinyBackbone(3), TinyBackbone(1))).fit_identities(
        px, ix, sy, iy)
    assert m2.transform_x(px[:2]).shape == (2, 21)
    # a pair may share a trunk after domain-specific stems: it stays one module, trained once
    trunk = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten())
    stems = [torch.nn.Conv2d(c, 4, 3, padding=1) for c in (3, 1)]
    m3 = DeepGSM(**SMALL, backbone=(torch.nn.Sequential(stems[0], trunk),
                                     torch.nn.Sequential(stems[1], trunk))).fit_identities(
        px, ix, sy, iy)
    tx, ty = m3.net_.domain_x.module, m3.net_.domain_y.module
    assert tx[1] is ty[1] and tx[1] is not trunk and tx[0] is not ty[0]
    n_shared = sum(p.numel() for p in trunk.parameters())
    assert sum(p.numel() for p in m3.net_.parameters()) == (
        sum(p.numel() for p in m3.net_.head.parameters()) + n_shared
        + sum(p.numel() for st in stems for p in st.parameters()))
    assert not torch.equal(tx[1][0].weight, trunk[0].weight)  # the copy trained
    with pytest.raises(ValueError, match="widths"):
        DeepGSM(**SMALL, backbone=(TinyBackbone(3, 10), TinyBackbone(1, 8))).fit_identities(
            px, ix, sy, iy)
    with pytest.raises(ValueError, match="backbone"):
        DeepGSM(**SMALL, backbone=42, preprocessor=prep).fit(pairs, y)
    # a state-dict file of the paper's network starts the feature layers
    base = DeepGSM(**SMALL, preprocessor=prep).fit(pairs, y)
    path = tmp_path / "w.pt"
    torch.save(base.net_.state_dict(), path)
    warm = DeepGSM(**{**SMALL, "max_iter": 1, "learning_rate": 1e-12}, backbone=str(path),
                   preprocessor=prep).fit(pairs, y)
    np.testing.assert_allclose(warm.features_x(X[:5]), base.features_x(X[:5]), atol=1e-5)
    with pytest.raises(ValueError, match="does not fit"):
        DeepGSM(**{**SMALL, "hidden_units": 8}, backbone=str(path), preprocessor=prep).fit(
            pairs, y)


# --------------------------------------------------------------------------- export
# loading TorchScript is what a user of the exported file does; torch >= 2.10 marks it deprecated
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_towers_reproduce_the_embeddings(digits, tmp_path):
    px, ix, sy, iy = rgb_people()
    m = DeepGSM(**SMALL).fit_identities(px, ix, sy, iy)
    tx = torch.jit.load(m.export_torchscript(tmp_path / "x.pt", "x"))
    ty = torch.jit.load(m.export_torchscript(tmp_path / "y.pt", "y"))
    with torch.no_grad():
        ex = tx(torch.tensor(px[:6]).permute(0, 3, 1, 2).float() / 255)
        ey = ty(torch.tensor(sy[:5])[:, None].float() / 255)
    np.testing.assert_allclose(ex.numpy(), m.transform_x(px[:6]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ey.numpy(), m.transform_y(sy[:5]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tx.similarity(ex, ey).numpy(), m.cross_distance(px[:6], sy[:5]),
                               rtol=1e-4, atol=1e-4)
    # a user backbone that is traced rather than scripted still exports
    m2 = DeepGSM(**SMALL, backbone=TinyBackbone(3)).fit_identities(px, ix, px, ix)
    t2 = torch.jit.load(m2.export_torchscript(tmp_path / "b.pt"))
    with torch.no_grad():
        e2 = t2(torch.tensor(px[:3]).permute(0, 3, 1, 2).float() / 255)
    np.testing.assert_allclose(e2.numpy(), m2.transform_x(px[:3]), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="domain"):
        m.export_torchscript(tmp_path / "z.pt", "z")


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_test_flip_averages_each_image_with_its_mirror(tmp_path):
    px, ix, sy, iy = rgb_people()
    m = DeepGSM(**SMALL).fit_identities(px, ix, sy, iy)
    plain_x, plain_y = m.transform_x(px[:6]), m.transform_y(sy[:5])
    mirror_x, mirror_y = m.transform_x(px[:6, :, ::-1]), m.transform_y(sy[:5, :, ::-1])
    fx = m.features_x(px[:6])
    assert not np.allclose(plain_x, mirror_x)
    m.set_params(test_flip=True)  # evaluation only: no refit
    np.testing.assert_allclose(m.transform_x(px[:6]), (plain_x + mirror_x) / 2, atol=1e-6)
    np.testing.assert_allclose(m.transform_y(sy[:5]), (plain_y + mirror_y) / 2, atol=1e-6)
    np.testing.assert_allclose(m.features_x(px[:6]),
                               (fx + m.set_params(test_flip=False).features_x(
                                   px[:6, :, ::-1])) / 2, atol=1e-6)
    m.set_params(test_flip=True)
    # a mirrored image is scored like the image itself
    np.testing.assert_allclose(m.cross_distance(px[:6, :, ::-1], sy[:5]),
                               m.cross_distance(px[:6], sy[:5]), rtol=1e-5, atol=1e-5)
    # the exported tower does the same; files as input too
    tx = torch.jit.load(m.export_torchscript(tmp_path / "x.pt", "x"))
    with torch.no_grad():
        ex = tx(torch.tensor(px[:6]).permute(0, 3, 1, 2).float() / 255)
    np.testing.assert_allclose(ex.numpy(), m.transform_x(px[:6]), rtol=1e-5, atol=1e-5)
    files = write_pngs(tmp_path, sy[:5], "s")
    np.testing.assert_allclose(m.transform_y(files), m.transform_y(sy[:5]), atol=1e-5)


# ------------------------------------------------------------------ weight averaging
def test_weight_averaging_is_the_mean_of_the_late_rounds_weights(digits, monkeypatch):
    """Slow obvious version: record every round's weights, average those from the start."""
    from crossmetric.deep import averaging

    X, Y, cls = digits
    data = (X[:80], cls[:80], Y[:80], cls[:80])
    kw = {**SMALL, "max_iter": 10, "optimizer": "adam", "learning_rate": 1e-2}
    seen = []
    update = averaging.WeightAverage.update

    def spy(self, net, t):
        seen.append((t, {k: v.detach().clone() for k, v in net.state_dict().items()}))
        update(self, net, t)

    monkeypatch.setattr(averaging.WeightAverage, "update", spy)
    plain = DeepGSM(**kw).fit_identities(*data)
    avg = DeepGSM(**kw, average_from=0.6).fit_identities(*data)
    assert [t for t, _ in seen] == list(range(10))
    assert avg.loss_curve_ == plain.loss_curve_  # the same training trajectory
    assert avg.n_averaged_ == 4 and plain.n_averaged_ == 0
    for name, value in avg.net_.state_dict().items():
        mean = torch.stack([w[name] for t, w in seen if t >= 6]).mean(0)
        torch.testing.assert_close(value, mean, rtol=1e-5, atol=1e-6)
    for name, value in plain.net_.state_dict().items():  # without it: the last weights
        torch.testing.assert_close(value, seen[-1][1][name])
    assert not np.allclose(avg.transform_x(X[:5]), plain.transform_x(X[:5]))


def test_weight_averaging_resumes_exactly(digits, tmp_path):
    X, Y, cls = digits
    data = (X[:80], cls[:80], Y[:80], cls[:80])
    kw = {**SMALL, "max_iter": 30, "average_from": 0.0, "checkpoint_every": 5}
    full = DeepGSM(**kw).fit_identities(*data)
    path = str(tmp_path / "swa.pt")
    DeepGSM(**kw, checkpoint_path=path).fit_identities(*data)
    assert int(torch.load(path, weights_only=False)["average"]["n_averaged"]) == 30
    # an interrupted run (stopped by max_time) writes its checkpoint; resuming it must give
    # the uninterrupted model: the running mean and its count are restored
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = DeepGSM(**kw, max_time=1e-9, checkpoint_path=path).fit_identities(*data)
    assert part.stop_reason_ == "max_time" and part.n_iter_ < 30
    assert part.n_averaged_ == part.n_iter_
    resumed = DeepGSM(**kw, checkpoint_path=path, resume=True).fit_identities(*data)
    assert resumed.n_iter_ == 30 and resumed.n_averaged_ == 30
    np.testing.assert_allclose(resumed.loss_curve_, full.loss_curve_, rtol=1e-6)
    np.testing.assert_allclose(resumed.transform_x(X[:8]), full.transform_x(X[:8]),
                               rtol=1e-5, atol=1e-6)


def test_weight_averaging_with_early_stopping_scores_the_mean(digits):
    X, Y, _ = digits
    pairs, y = instance_pairs(120)
    m = DeepGSM(**{**SMALL, "max_iter": 60, "n_identities": 16}, average_from=0.5,
                early_stopping=True, validation_fraction=0.25, validation_every=10,
                patience=10, preprocessor=(X[:120], Y[:120])).fit(pairs, y)
    assert len(m.validation_scores_) == 7  # the initial network, then every 10 rounds
    assert m.validation_iterations_ == [0, 10, 20, 30, 40, 50, 60]
    # the kept model is the one validated: averaged over the rounds 30 .. best_iteration
    assert m.n_averaged_ == max(0, m.best_iteration_ - 30)


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "half"])
def test_average_from_must_be_a_fraction(bad):
    px, ix, sy, iy = rgb_people()
    with pytest.raises(ValueError, match="average_from"):
        DeepGSM(**SMALL, average_from=bad).fit_identities(px, ix, sy, iy)


# ---------------------------------------------------------------------- devices, DDP
def test_amp_needs_cuda():
    px, ix, sy, iy = rgb_people()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="amp=True needs a CUDA"):
            DeepGSM(**SMALL, amp=True).fit_identities(px, ix, sy, iy)
    with pytest.raises(ValueError, match="amp"):
        DeepGSM(**SMALL, amp="fp8").fit_identities(px, ix, sy, iy)


@pytest.mark.slow
def test_ddp_two_processes_match_one_process(digits):
    """2 gloo processes sharing each round equal one process with the same global round.

    Tolerance: the processes differ from one process only in float32 summation order (the
    gathered similarity matrix is summed in another order; DDP all-reduces gradients), about
    1e-7 relative per step; over 12 SGD steps with momentum this stays below 1e-4.
    """
    X, Y, _ = digits
    pairs, y = instance_pairs(96)
    kw = {**SMALL, "max_iter": 12, "n_identities": 16, "n_images_x": 1, "augment": 1,
          "hidden_units": 24, "preprocessor": (X[:96], Y[:96])}
    one = DeepGSM(**kw).fit(pairs, y)
    two = DeepGSM(**kw, n_processes=2).fit(pairs, y)
    np.testing.assert_allclose(two.loss_curve_, one.loss_curve_, rtol=1e-4)
    np.testing.assert_allclose(two.pair_distance(pairs), one.pair_distance(pairs), rtol=1e-3,
                               atol=1e-3)
    assert not np.allclose(one.loss_curve_[0], one.loss_curve_[-1])  # it did train


# ------------------------------------------------------------- schedules and convergence
def _rule(schedule, window=2, tol=0.01, lr=1.0):
    from crossmetric.deep.schedule import convergence_rule

    return convergence_rule(schedule, window, tol, lr)


def test_plateau_schedule_lowers_the_rate_then_converges_on_a_flat_objective():
    rule = _rule("plateau")
    lrs, stopped = [], None
    values = [1.0, 0.8, 0.6, 0.4] + [0.3] * 20      # decreasing, then flat
    for t, v in enumerate(values, start=1):
        if rule.update(v):
            stopped = t
            break
        lrs.append(rule.rate)
    # windows of 2: improvements until the flat part, then 1 -> 0.1 -> 0.01, then converged
    assert sorted(set(lrs), reverse=True) == pytest.approx([1.0, 0.1, 0.01])
    assert stopped == 12
    # a still-decreasing objective never converges, whatever the rate
    rule = _rule("plateau")
    for t in range(1, 41):
        assert not rule.update(1.0 - 0.02 * t)
    assert rule.rate == 1.0


@pytest.mark.parametrize("tol", [None, 0.0, 1e-3, 0.05])
def test_plateau_rule_is_pytorchs_reduce_lr_on_plateau_per_window(tol):
    """The library's RatePlateau gives the learning rates and the stop of the schedule that
    DeepGSM ran on torch's ReduceLROnPlateau, bit for bit, on noisy falling objectives."""
    window, lr = 4, 3e-3
    rng = np.random.default_rng(0)
    values = np.exp(-np.arange(400) / 80.0) + rng.normal(0, 0.02, 400)
    rule = _rule("plateau", window=window, tol=tol, lr=lr)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", factor=0.1, patience=0, threshold=0.0 if tol is None else tol,
        threshold_mode="abs", min_lr=lr * 1e-2, eps=0.0)
    for t, v in enumerate(values, start=1):
        stop = rule.update(float(v))
        if t % window == 0:
            at_floor = opt.param_groups[0]["lr"] <= sched.min_lrs[0] * (1 + 1e-9)
            best = sched.best
            sched.step(float(np.mean(values[t - window:t])))
            assert stop == (tol is not None and at_floor and sched.best == best), t
        else:
            assert not stop
        assert rule.rate == opt.param_groups[0]["lr"], t
        if stop:
            break
    assert rule.rate < lr  # the rate did drop


def test_fixed_schedule_convergence_is_an_absolute_decrease_between_windows():
    rule = _rule("constant", window=3, tol=0.01)
    # a decrease of 0.015 > tol, then one of 0.005 < tol; a test only at window ends
    assert [rule.update(v) for v in (1.0, 1.0, 1.0, 0.985, 0.985, 0.985)] == [False] * 6
    assert [rule.update(v) for v in (0.98, 0.98, 0.98)] == [False, False, True]
    assert _rule("cosine", window=3, tol=None) is None     # tol=None: never


def test_early_stopping_hold_out_is_the_librarys_draw_and_cap(monkeypatch):
    from crossmetric._solvers import early_stopping
    from crossmetric.deep.inputs import _hold_out
    from crossmetric.pairs._identity_draws import hold_out_identities

    ids_x, ids_y = np.repeat(np.arange(20), 4), np.repeat(np.arange(20), 3)
    x, y = np.arange(80.0)[:, None], np.arange(60.0)[:, None]
    (xt, train_x, _, train_y), (vx, vid_x, vy, vid_y), rows = _hold_out(x, ids_x, y, ids_y,
                                                                         0.25, 5)
    # the rows of the inputs each part keeps (a descriptor branch's rows follow them)
    np.testing.assert_array_equal(x[rows[0]], xt)
    np.testing.assert_array_equal(x[rows[2]], vx)
    np.testing.assert_array_equal(y[rows[3]], vy)
    rs = np.random.RandomState(np.random.SeedSequence([5, 7]).generate_state(1))
    held, _ = hold_out_identities(np.arange(20), 5, rs)
    assert set(vid_x) == set(vid_y) == set(held.tolist())
    assert not set(train_x) & set(held.tolist()) and not set(train_y) & set(held.tolist())
    np.testing.assert_array_equal(ids_x[vx[:, 0].astype(int)], vid_x)
    assert vid_x.size == 20 and vid_y.size == 15       # all the held-out images
    # above MAX_VALIDATION_SAMPLES images a side, a seeded subset of them is scored
    monkeypatch.setattr(early_stopping, "MAX_VALIDATION_SAMPLES", 6)
    _, (vx, vid_x, vy, vid_y), _ = _hold_out(x, ids_x, y, ids_y, 0.25, 5)
    assert vid_x.size == vid_y.size == 6 and set(vid_x) <= set(held.tolist())
    np.testing.assert_array_equal(ids_y[vy[:, 0].astype(int)], vid_y)


def test_plateau_training_stops_converged_without_warning(digits):
    X, Y, cls = digits
    kw = {**SMALL, "tol": 0.05, "n_iter_no_change": 5, "max_iter": 400, "optimizer": "adam",
          "learning_rate": 3e-3, "lr_schedule": "plateau"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = DeepGSM(**kw).fit_identities(X[:120], cls[:120], Y[:120], cls[:120])
    assert model.stop_reason_ == "tol" and model.n_iter_ < 400
    assert model.n_iter_ % 5 == 0


def test_shared_subnetwork_on_both_domains_at_once_is_the_same_function():
    net = GSMNet((16, 16), 16, channels=(3, 1))
    x, y = torch.rand(5, 3, 16, 16), torch.rand(7, 16, 16)
    TX, TY, _ = net(x, y)
    torch.testing.assert_close(TX, net.embed_x(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(TY, net.embed_y(y), rtol=1e-5, atol=1e-6)


def test_plateau_schedule_resumes_exactly(digits, tmp_path):
    X, Y, cls = digits
    kw = {**SMALL, "tol": 1e-3, "n_iter_no_change": 5, "max_iter": 400, "optimizer": "adam",
          "learning_rate": 3e-3, "lr_schedule": "plateau", "checkpoint_every": 10}
    data = (X[:120], cls[:120], Y[:120], cls[:120])
    full = DeepGSM(**kw).fit_identities(*data)
    path = str(tmp_path / "plateau.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = DeepGSM(**kw, max_time=0.05, checkpoint_path=path).fit_identities(*data)
    assert part.stop_reason_ == "max_time" and part.n_iter_ < full.n_iter_
    resumed = DeepGSM(**kw, checkpoint_path=path, resume=True).fit_identities(*data)
    assert resumed.stop_reason_ == full.stop_reason_ == "tol"
    np.testing.assert_allclose(resumed.loss_curve_, full.loss_curve_, rtol=1e-6)


def test_seed_ensemble_of_deepgsm_passes_groups_and_averages(digits):
    from crossmetric import SeedEnsemble, make_pairs

    X, Y, cls = digits
    pairs, y = make_pairs(cls[:60], cls[:60], max_positives=100, random_state=0)
    kw = {**SMALL, "preprocessor": (X[:60], Y[:60])}
    groups = (cls[:60], cls[:60])
    ens = SeedEnsemble(DeepGSM(**kw), n_members=2, random_state=3).fit(pairs, y, groups=groups)
    one = DeepGSM(**{**kw, "random_state": 3}).fit(pairs, y, groups=groups)
    np.testing.assert_allclose(ens.estimators_[0].cross_distance(X[:4], Y[:5]),
                               one.cross_distance(X[:4], Y[:5]), rtol=1e-6)
    np.testing.assert_allclose(
        ens.cross_distance(X[:4], Y[:5]),
        (one.cross_distance(X[:4], Y[:5]) + ens.estimators_[1].cross_distance(X[:4], Y[:5])) / 2,
        rtol=1e-6)
