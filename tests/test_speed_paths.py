"""Fast paths against the slow obvious versions they replace."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric.deep.augment import make_augmentation  # noqa: E402
from crossmetric.deep.data import (  # noqa: E402
    CrossDomainIdentitySampler,
    CrossDomainImages,
    IterationBatches,
    collate_domains,
)
from crossmetric.deep.threads import SMALL_ROUND_FLOPS, round_flops, small_net_threads  # noqa: E402
from crossmetric.learners._gsm_measure import gsm_loss, gsm_loss_grad  # noqa: E402
from tests._images import write_pngs  # noqa: E402


@pytest.mark.parametrize("structure", ["generalized", "euclidean", "inner_product", "ladf"])
def test_gsm_loss_is_the_loss_of_gsm_loss_grad(structure):
    from crossmetric.learners._gsm_training import init_params
    from crossmetric.learners.gsm import GSM

    rng = np.random.RandomState(0)
    X, Y = rng.randn(12, 5), rng.randn(9, 5)
    ix, iy = rng.randint(0, 12, 30), rng.randint(0, 9, 30)
    ell = np.where(rng.rand(30) < 0.5, -1.0, 1.0)
    w = rng.rand(30)
    params = init_params(GSM(structure=structure, init_scale=1.0), 5, 5, 5, rng)
    for k in params:
        params[k] = params[k] + 0.1 * rng.randn(*np.shape(params[k]))
    full = gsm_loss_grad(params, structure, -1.9, X, Y, ix, iy, ell, w, 1e-3)[0]
    assert gsm_loss(params, structure, -1.9, X, Y, ix, iy, ell, w, 1e-3) == full


@pytest.mark.parametrize("augment", [0, 1, "reid"])
def test_domain_batches_equal_the_dataloader_items(augment):
    rng = np.random.RandomState(0)
    x, y = rng.rand(24, 16, 16), rng.rand(20, 16, 16, 3).astype(np.float32)
    ids_x, ids_y = np.arange(24) % 6, np.arange(20) % 5
    tf = make_augmentation(augment, (16, 16))
    ds = CrossDomainImages(x, ids_x, y, ids_y, transform_x=tf, transform_y=tf)
    sampler = CrossDomainIdentitySampler(ids_x, ids_y, 3, 2, 2, seed=3)
    n = 0
    for keys in IterationBatches(sampler, 0, 5):
        a = ds.domain_batches(keys)
        b = collate_domains(ds.__getitems__(keys))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        n += 1
    assert n == 5


def test_small_net_threads_single_thread_then_restored():
    from crossmetric.deep import DeepGSM

    net = DeepGSM(hidden_units=16)._build_net((16, 16), (1, 1), seed=0)
    probe = (torch.zeros(2, 1, 16, 16), torch.zeros(2, 1, 16, 16))
    flops = round_flops(net, probe, 80)
    assert 0 < flops < SMALL_ROUND_FLOPS
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with small_net_threads(net, torch.device("cpu"), probe, 80):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        # a round above the limit keeps its threads
        with small_net_threads(net, torch.device("cpu"), probe,
                               int(2 * SMALL_ROUND_FLOPS / flops * 80)):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_hinge_weights_cache_gives_the_uncached_hinge():
    from crossmetric.deep import DeepGSM

    est = DeepGSM(hidden_units=8)
    rng = np.random.RandomState(0)
    TX, TY = torch.randn(8, 17), torch.randn(6, 17)
    gx, gy = rng.randint(0, 3, 8), rng.randint(0, 3, 6)
    cache = {}
    first = est._hinge(TX, TY, -1.9, gx, gy, cache)
    again = est._hinge(TX, TY, -1.9, gx, gy, cache)  # from the cache
    assert len(cache) == 1
    plain = est._hinge(TX, TY, -1.9, gx, gy)
    assert torch.equal(first, plain) and torch.equal(again, plain)


def test_epoch_batches_with_a_precomputed_index_are_the_same():
    from crossmetric.deep.sampler import epoch_identity_batches, identity_index

    rng = np.random.RandomState(1)
    ids_x, ids_y = rng.randint(0, 7, 60), rng.randint(1, 9, 50)
    a = epoch_identity_batches(ids_x, ids_y, 3, 2, 3, random_state=5)
    b = epoch_identity_batches(ids_x, ids_y, 3, 2, 3, random_state=5,
                               index=identity_index(ids_x, ids_y))
    assert len(a) == len(b)
    for (ax, ay), (bx, by) in zip(a, b, strict=True):
        assert np.array_equal(ax, bx) and np.array_equal(ay, by)


# ---------------------------------------------------------------- DeepGSM round overhead
def test_epoch_batches_draw_what_random_choice_draws():
    from crossmetric.deep.sampler import epoch_identity_batches, identity_index

    def slow(ids_x, ids_y, k, ox, oy, seed):  # the rows drawn with RandomState.choice
        rng = np.random.RandomState(seed)
        usable, order_x, lo_x, hi_x, order_y, lo_y, hi_y = identity_index(ids_x, ids_y)
        perm = rng.permutation(usable.size)
        rounds = [perm[i:i + k] for i in range(0, perm.size, k)]
        if rounds[-1].size < k:
            rest = np.setdiff1d(np.arange(usable.size), rounds[-1])
            rounds[-1] = np.r_[rounds[-1], rng.choice(rest, k - rounds[-1].size,
                                                      replace=False)]

        def draw(order, lo, hi, c, o):
            rows = order[lo[c]:hi[c]]
            return rows if rows.size <= o else rng.choice(rows, o, replace=False)

        return [(np.concatenate([draw(order_x, lo_x, hi_x, c, ox) for c in ch]),
                 np.concatenate([draw(order_y, lo_y, hi_y, c, oy) for c in ch]))
                for ch in rounds]

    rng = np.random.RandomState(2)
    ids_x, ids_y = rng.randint(0, 9, 200), rng.randint(1, 10, 150)
    for seed in range(3):
        fast = epoch_identity_batches(ids_x, ids_y, 4, 3, 5, random_state=seed)
        for (ax, ay), (bx, by) in zip(fast, slow(ids_x, ids_y, 4, 3, 5, seed), strict=True):
            assert np.array_equal(ax, bx) and np.array_equal(ay, by)


def test_sampler_generator_reseeded_is_a_fresh_one():
    s = CrossDomainIdentitySampler(np.arange(30) % 5, np.arange(20) % 5, 2, seed=4)
    for key in ((0,), (3, 1), (0,)):
        fresh = np.random.RandomState(np.random.SeedSequence([4, *key]).generate_state(1))
        assert np.array_equal(s._rng(*key).randint(0, 2**30, 20), fresh.randint(0, 2**30, 20))


@pytest.mark.parametrize("world", [1, 2])
def test_local_rows_are_the_keys(world):
    ids_x, ids_y = np.arange(40) % 8, np.arange(30) % 6
    for with_seeds in (True, False):
        for rank in range(world):
            s = CrossDomainIdentitySampler(ids_x, ids_y, 4, 2, 2, seed=1, rank=rank,
                                           world_size=world, with_seeds=with_seeds)
            for pos, (ix, iy) in enumerate(s.epoch_rounds(0)):
                keys = s.keys(0, pos, ix, iy)
                rx, sx, ry, sy = s.local_rows(0, pos, ix, iy)
                flat = [k[0] if with_seeds else k for k in keys]
                assert flat == np.r_[rx, ry + s.n_x].tolist()
                if with_seeds:
                    assert [k[1] for k in keys] == np.r_[sx, sy].tolist()


def test_splitmix_batch_draws_in_a_row():
    from crossmetric.deep.augment import SplitMix, SplitMixBatch

    seeds = [0, 7, 2**63 + 1, 2**64 - 1]
    a, b = SplitMixBatch.from_seeds(seeds), [SplitMix(s) for s in seeds]
    u = a.random(3)
    assert u.shape == (3, 4)
    for i in range(3):
        assert u[i].tolist() == [r.random() for r in b]
    assert a.states.tolist() == [r.state for r in b]


@pytest.mark.parametrize("augment", [1, "reid", "callable"])
def test_rows_batches_equal_the_dataloader_items(augment):
    rng = np.random.RandomState(0)
    x, y = rng.rand(24, 16, 16).astype(np.float32), rng.rand(20, 16, 16, 3).astype(np.float32)
    ids_x, ids_y = np.arange(24) % 6, np.arange(20) % 5
    if augment == "callable":  # a user transform without takes_rng: item by item
        def tf(img):
            return img.flip(-1) if torch.rand(()) < 0.5 else img
    else:
        tf = make_augmentation(augment, (16, 16))
    ds = CrossDomainImages(x, ids_x, y, ids_y, transform_x=tf, transform_y=tf)
    sampler = CrossDomainIdentitySampler(ids_x, ids_y, 3, 2, 2, seed=3)
    batches = IterationBatches(sampler, 0, 5)
    for t, (keys, (ix, iy, rows)) in enumerate(zip(batches, batches.local_rounds(),
                                                   strict=True)):
        gx, gy = batches.global_round(t)
        assert np.array_equal(ix, gx) and np.array_equal(iy, gy)
        a = ds.rows_batches(*rows)
        b = collate_domains(ds.__getitems__(keys))
        c = ds.domain_batches(keys)
        for u, v, w in zip(a, b, c, strict=True):
            assert torch.equal(u, v) and torch.equal(u, w)


def test_splitmix_batch_through_per_image_transforms_keeps_the_states():
    from crossmetric.deep.augment import SplitMix, SplitMixBatch, apply_batch

    tf = make_augmentation("reid", (16, 12))  # crop, flip batched; jitter, erasing per image
    imgs = torch.rand(7, 3, 16, 12)
    seeds = list(range(50, 57))
    g = SplitMixBatch.from_seeds(seeds)
    gens = [SplitMix(s) for s in seeds]
    assert torch.equal(apply_batch(tf, imgs, g), apply_batch(tf, imgs, gens))
    assert g.states.tolist() == [r.state for r in gens]


def test_decoded_cache_decodes_each_file_once_within_its_budget(tmp_path, monkeypatch):
    from crossmetric.deep import data as data_mod
    from crossmetric.deep.data import read_image, to_chw

    rng = np.random.RandomState(0)
    imgs = (rng.rand(10, 8, 6, 3) * 255).astype(np.uint8)
    files = write_pngs(tmp_path, imgs, "a")
    calls = []

    def counted(path, mode, size=None):
        calls.append(path)
        return read_image(path, mode, size)

    monkeypatch.setattr(data_mod, "read_image", counted)
    ids = np.arange(10) % 5
    rows = np.array([3, 1, 3, 7, 1])
    slow = torch.stack([to_chw(read_image(files[r], "RGB", (8, 6))) for r in rows])
    for budget, decodes in ((10**6, 3), (8 * 6 * 3 * 2, 4), (0, 10)):
        ds = CrossDomainImages(files, ids, files, ids, size=(8, 6), cache_bytes=budget)
        calls.clear()
        for _ in range(2):
            assert torch.equal(ds._load_rows(0, rows), slow)
        assert len(calls) == decodes  # 3 distinct files; 2 fit in the budget; no cache
        assert ds.cache is None or ds.cache.nbytes <= budget
    arrays = CrossDomainImages(imgs, ids, imgs, ids, cache_bytes=10**6)
    assert arrays.cache is None and not arrays.reads_files


def test_prefetch_yields_in_order_raises_and_stops():
    import threading

    from crossmetric.deep.prefetch import Prefetch

    assert list(Prefetch(iter(range(20)), depth=2)) == list(range(20))

    def failing():
        yield 1
        raise ValueError("bad file")

    it = Prefetch(failing())
    assert next(it) == 1
    with pytest.raises(ValueError, match="bad file"):
        next(it)
    it.close()
    endless = Prefetch(iter(int, 1))  # never ends
    assert next(endless) == 0
    endless.close()
    assert not any(t.name == "crossmetric-prefetch" for t in threading.enumerate())


def test_files_fit_with_cache_and_prefetch_equals_arrays(tmp_path):
    from crossmetric.deep import DeepGSM

    rng = np.random.RandomState(0)
    px = (rng.rand(24, 16, 16) * 255).astype(np.uint8)
    sy = (rng.rand(24, 16, 16) * 255).astype(np.uint8)
    ids = np.arange(24) % 8
    fx, fy = write_pngs(tmp_path, px, "x"), write_pngs(tmp_path, sy, "y")
    kw = dict(hidden_units=8, n_identities=4, n_images_x=2, n_images_y=2, max_iter=8,
              tol=None, device="cpu", random_state=0)
    mem = DeepGSM(**kw).fit_identities(px, ids, sy, ids)
    for budget in (1024, 0):  # cached, and decoded at every draw
        disk = DeepGSM(**kw, image_cache_mb=budget).fit_identities(fx, ids, fy, ids)
        assert disk.loss_curve_ == mem.loss_curve_
        for k, v in mem.net_.state_dict().items():
            assert torch.equal(disk.net_.state_dict()[k], v)
    with pytest.raises(ValueError, match="image_cache_mb"):
        DeepGSM(**kw, image_cache_mb=-1).fit_identities(fx, ids, fy, ids)
    # early stopping: the held-out files are kept in the cache between checks
    es = dict(kw, early_stopping=True, validation_fraction=0.25, validation_every=2)
    a = DeepGSM(**es).fit_identities(fx, ids, fy, ids)
    b = DeepGSM(**es, image_cache_mb=0).fit_identities(fx, ids, fy, ids)
    c = DeepGSM(**es).fit_identities(px, ids, sy, ids)
    assert len(a.validation_scores_) >= 2
    assert a.validation_scores_ == b.validation_scores_ == c.validation_scores_
    assert a.loss_curve_ == b.loss_curve_ == c.loss_curve_


def test_held_out_files_are_decoded_once_with_a_cache(tmp_path, monkeypatch):
    from crossmetric.deep import inference
    from crossmetric.deep.decoded import DecodedCache

    rng = np.random.RandomState(1)
    files = write_pngs(tmp_path, (rng.rand(5, 8, 8) * 255).astype(np.uint8), "v")
    calls = []
    read = inference.read_image
    monkeypatch.setattr(inference, "read_image",
                        lambda *a, **k: calls.append(a[0]) or read(*a, **k))
    plain = inference.FileImages(files, "L", (8, 8))
    cached = inference.FileImages(files, "L", (8, 8), cache=DecodedCache(10**6), tag="v")
    for _ in range(2):
        for i in range(5):
            assert torch.equal(cached[i], plain[i])
    assert len(calls) == 5 * 2 + 5  # plain: every read; cached: once each


class _BatchMean:
    """A user transform whose batch depends on the other images (not image by image)."""

    takes_rng = True

    def __call__(self, img, rng=None):
        return img - img.mean()

    def batch(self, images, rngs):
        return images - images.mean()


def test_image_by_image_transforms():
    from crossmetric.deep.augment import Compose, image_by_image

    assert image_by_image(None) and image_by_image(make_augmentation("reid", (16, 16)))
    assert image_by_image(make_augmentation(2, (16, 16))) and image_by_image(lambda im: im)
    assert not image_by_image(_BatchMean())
    assert not image_by_image(Compose([make_augmentation(1, (16, 16)), _BatchMean()]))


@pytest.mark.parametrize("augment", [None, 1, "reid", "batch-mean"])
@pytest.mark.parametrize("max_bytes", [1, 20_000, 10**9])
def test_round_batches_equal_round_by_round(tmp_path, augment, max_bytes):
    from crossmetric.deep.data import round_batches

    rng = np.random.RandomState(0)
    x = (rng.rand(30, 12, 10) * 255).astype(np.uint8)
    y = rng.rand(26, 12, 10, 3).astype(np.float32)
    ids_x, ids_y = np.arange(30) % 7, np.arange(26) % 6
    tf = _BatchMean() if augment == "batch-mean" else make_augmentation(augment, (12, 10))
    sources = [(x, y)]
    if max_bytes == 20_000:
        sources.append((write_pngs(tmp_path, x, "x"), y))
    for sx, sy in sources:
        ds = CrossDomainImages(sx, ids_x, sy, ids_y, size=(12, 10), transform_x=tf,
                               transform_y=tf, cache_bytes=10**6)
        sampler = CrossDomainIdentitySampler(ids_x, ids_y, 3, 2, 2, seed=1)
        batches = IterationBatches(sampler, 2, 13)  # from round 2 (a resumed run)
        calls = []
        ds.rows_batches = lambda *a, _f=ds.rows_batches, _c=calls: _c.append(1) or _f(*a)
        got = list(round_batches(ds, batches, max_rounds=4, max_bytes=max_bytes))
        assert len(got) == 11
        if max_bytes == 1 or augment == "batch-mean":  # one round at a time
            assert len(calls) == 11
        elif max_bytes == 10**9:  # rounds 1, then 4 + 4 + 2 together
            assert len(calls) == 4
        del ds.rows_batches
        for t, (ix, iy, xb, yb) in zip(range(2, 13), got, strict=True):
            gx, gy, rows = next(IterationBatches(sampler, t, t + 1).local_rounds())
            assert np.array_equal(ix, gx) and np.array_equal(iy, gy)
            ex, ey = ds.rows_batches(*rows)
            assert torch.equal(xb, ex) and torch.equal(yb, ey)
            assert xb.is_contiguous() and xb.storage_offset() == 0
