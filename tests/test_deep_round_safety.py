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


def _pngs(folder, images, tag):
    from PIL import Image

    paths = []
    for i, im in enumerate(images):
        p = folder / f"{tag}{i}.png"
        Image.fromarray(im).save(p)
        paths.append(str(p))
    return paths


def _torch_flip(img):
    """A torchvision-like transform: draws from torch's global generator, no takes_rng."""
    return img.flip(-1) if torch.rand(()) < 0.5 else img


def test_prefetch_only_with_transforms_that_own_their_generator(tmp_path):
    from crossmetric.deep.training import _rounds

    rng = np.random.RandomState(0)
    imgs = (rng.rand(12, 8, 8) * 255).astype(np.uint8)
    files, ids = _pngs(tmp_path, imgs, "a"), np.arange(12) % 4
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
