"""Fast paths of issue 24 against the slow obvious versions they replace."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric._gsm_measure import gsm_loss, gsm_loss_grad  # noqa: E402
from crossmetric.deep.augment import make_augmentation  # noqa: E402
from crossmetric.deep.data import (  # noqa: E402
    CrossDomainIdentitySampler,
    CrossDomainImages,
    IterationBatches,
    collate_domains,
)
from crossmetric.deep.threads import SMALL_ROUND_FLOPS, round_flops, small_net_threads  # noqa: E402


@pytest.mark.parametrize("structure", ["generalized", "euclidean", "inner_product", "ladf"])
def test_gsm_loss_is_the_loss_of_gsm_loss_grad(structure):
    from crossmetric._gsm_training import init_params
    from crossmetric.gsm import GSM

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
