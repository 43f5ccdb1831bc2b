"""DeepGSM's round preparation: when the prefetching thread runs, validation, old pickles."""

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric.deep.augment import make_augmentation  # noqa: E402
from crossmetric.deep.data import (  # noqa: E402
    CrossDomainIdentitySampler,
    CrossDomainImages,
    IterationBatches,
)
from crossmetric.deep.prefetch import Prefetch  # noqa: E402
from tests._images import write_pngs  # noqa: E402


def _torch_flip(img):
    """A torchvision-like transform: draws from torch's global generator, no takes_rng."""
    return img.flip(-1) if torch.rand(()) < 0.5 else img


def test_prefetch_only_with_transforms_that_own_their_generator(tmp_path):
    from crossmetric.deep.training import _rounds

    rng = np.random.RandomState(0)
    imgs = (rng.rand(12, 8, 8) * 255).astype(np.uint8)
    files, ids = write_pngs(tmp_path, imgs, "a"), np.arange(12) % 4
    sampler = CrossDomainIdentitySampler(ids, ids, 2, 1, 1, seed=0)
    p, cpu = types.SimpleNamespace(num_workers=0), torch.device("cpu")
    for tf, threaded in ((None, True), (make_augmentation("reid", (8, 8)), True),
                         (_torch_flip, False)):
        ds = CrossDomainImages(files, ids, files, ids, size=(8, 8), transform_x=tf,
                               transform_y=tf)
        rounds = _rounds(p, ds, IterationBatches(sampler, 0, 3), cpu)
        assert isinstance(rounds, Prefetch) == threaded
        assert len(list(rounds)) == 3
        rounds.close()
    arrays = CrossDomainImages(imgs, ids, imgs, ids)  # in memory: never a thread
    assert not isinstance(_rounds(p, arrays, IterationBatches(sampler, 0, 3), cpu), Prefetch)


def test_a_model_pickled_before_a_parameter_existed_gets_its_default():
    import pickle

    from sklearn.base import clone

    from crossmetric.deep import DeepGSM

    rng = np.random.RandomState(0)
    x, ids = rng.rand(12, 8, 8).astype(np.float32), np.arange(12) % 4
    model = DeepGSM(hidden_units=4, n_identities=2, max_iter=2, tol=None, device="cpu",
                    image_cache_mb=5, random_state=0).fit_identities(x, ids, x, ids)
    state = model.__getstate__()
    del state["image_cache_mb"], state["num_workers"]  # as saved by an older version
    old = DeepGSM.__new__(DeepGSM)
    old.__setstate__(state)
    assert old.get_params()["image_cache_mb"] == 1024 and old.num_workers == 0
    assert "DeepGSM" in repr(old) and clone(old).image_cache_mb == 1024
    np.testing.assert_array_equal(old.transform_x(x), model.transform_x(x))
    again = pickle.loads(pickle.dumps(old))
    assert again.get_params() == old.get_params()


def test_a_model_pickled_with_tuple_validation_scores_reads_as_floats():
    """Before validation_scores_ had one meaning, DeepGSM stored (iteration, rank-1) pairs."""
    from crossmetric.deep import DeepGSM

    rng = np.random.RandomState(0)
    x, ids = rng.rand(12, 8, 8).astype(np.float32), np.arange(12) % 4
    model = DeepGSM(hidden_units=4, n_identities=2, max_iter=2, tol=None, device="cpu",
                    random_state=0).fit_identities(x, ids, x, ids)
    state = model.__getstate__()
    state["validation_scores_"] = [(5, 0.25), (10, 0.5)]
    state.pop("validation_iterations_", None)
    old = DeepGSM.__new__(DeepGSM)
    old.__setstate__(state)
    assert old.validation_scores_ == [0.25, 0.5] and old.validation_iterations_ == [5, 10]


def test_round_batches_rejects_max_rounds_below_one():
    from crossmetric.deep.data import round_batches

    ids = np.arange(12) % 4
    x = np.zeros((12, 4, 4), np.float32)
    ds = CrossDomainImages(x, ids, x, ids)
    batches = IterationBatches(CrossDomainIdentitySampler(ids, ids, 2, seed=0), 0, 4)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="max_rounds"):
            list(round_batches(ds, batches, max_rounds=bad))
    assert len(list(round_batches(ds, batches, max_rounds=1))) == 4


def test_prefetch_raises_when_its_thread_dies_without_posting(monkeypatch):
    import threading

    monkeypatch.setattr(Prefetch, "_run", lambda self: None)  # ends, posts nothing
    it, got = Prefetch(iter(range(3))), []

    def consume():
        try:
            next(it)
        except BaseException as exc:  # noqa: BLE001 - checked below
            got.append(exc)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(timeout=10)  # the consumer used to wait for ever
    assert len(got) == 1 and isinstance(got[0], RuntimeError)
    assert "prefetching thread" in str(got[0])
    with pytest.raises(StopIteration):
        next(it)
    it.close()


@pytest.mark.parametrize("augment", [None, 1, "reid", "torch-global"])
@pytest.mark.parametrize("files", [False, True])
def test_batch_paths_equal_item_by_item(tmp_path, augment, files):
    from crossmetric.deep.data import collate_domains

    rng = np.random.RandomState(0)
    x = (rng.rand(20, 12, 10) * 255).astype(np.uint8)
    y = rng.rand(16, 12, 10, 3).astype(np.float32)
    ids_x, ids_y = np.arange(20) % 5, np.arange(16) % 4
    tf = _torch_flip if augment == "torch-global" else make_augmentation(augment, (12, 10))
    sx = write_pngs(tmp_path, x, "x") if files else x
    ds = CrossDomainImages(sx, ids_x, y, ids_y, size=(12, 10), transform_x=tf, transform_y=tf)
    for with_seeds in (True, False):
        sampler = CrossDomainIdentitySampler(ids_x, ids_y, 3, 2, 2, seed=2,
                                             with_seeds=with_seeds)
        for keys in IterationBatches(sampler, 0, 3):
            torch.manual_seed(7)  # (unseeded torch-global draws: the same stream each time)
            slow = collate_domains([ds[k] for k in keys])
            torch.manual_seed(7)
            items = ds.__getitems__(keys)
            assert [(i, d) for _, i, d in items] == [ds[k][1:] for k in keys]
            batched = collate_domains(items)
            torch.manual_seed(7)
            again = ds.domain_batches(keys)
            for fast, ref, other in zip(batched, slow, again, strict=True):
                assert torch.equal(fast, other)
                # a batched transform may round differently from image by image (~1 ulp)
                torch.testing.assert_close(fast, ref, rtol=0, atol=1e-6)
                if augment in (None, "torch-global"):  # the same operations
                    assert torch.equal(fast, ref)


@pytest.mark.parametrize("world", [1, 2])
def test_without_seeds_rows_batches_draw_as_the_keys(world):
    """with_seeds=False: an image is not augmented with torch seed 0 but from the global
    stream, as the DataLoader path of the keys (bare indices) does."""
    rng = np.random.RandomState(0)
    x = rng.rand(32, 6, 6).astype(np.float32)
    ids = np.arange(32) % 8
    ds = CrossDomainImages(x, ids, x, ids, transform_x=_torch_flip, transform_y=_torch_flip)
    for rank in range(world):
        sampler = CrossDomainIdentitySampler(ids, ids, 8, 2, 2, seed=0, with_seeds=False,
                                             rank=rank, world_size=world)
        batches = IterationBatches(sampler, 0, 2)
        for keys, (_, _, rows) in zip(batches, batches.local_rounds(), strict=True):
            assert rows[1] is None and rows[3] is None
            torch.manual_seed(3)
            fast = ds.rows_batches(*rows)
            torch.manual_seed(3)
            slow = [ds[k][0] for k in keys]
            flipped = [not torch.equal(a, b) for a, b in zip(slow, ds._load_rows(
                0, np.r_[rows[0], rows[2]]), strict=True)]
            assert 0 < sum(flipped) < len(flipped)  # not one seed for every image
            assert torch.equal(torch.cat(fast), torch.stack(slow))
