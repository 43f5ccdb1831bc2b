"""deep/augment.py's transforms against torchvision.transforms.v2 where the two are equivalent.

Runs where torchvision imports (not next to the pinned CPU torch 2.13.0: the PyPI torchvision
0.28.0 wheel is a CUDA build whose operators do not load there). The deterministic kernels
match exactly; the random parameters come from the per-image generators of augment.py, not
from torch's global generator as in v2, so that batches do not depend on workers.
"""

import pytest

torch = pytest.importorskip("torch")

from crossmetric.deep.augment import (  # noqa: E402
    RandomCrop,
    RandomErasing,
    RandomHorizontalFlip,
    Resize,
    SplitMix,
)


@pytest.fixture
def TF():
    try:
        from torchvision.transforms.v2 import functional
    except Exception as exc:  # noqa: BLE001 - a RuntimeError with the pinned CPU torch
        pytest.skip(f"torchvision does not import here ({type(exc).__name__}: {exc})")
    return functional


def test_kernels_equal_torchvision_v2(TF):
    img = torch.rand(3, 20, 12, generator=torch.Generator().manual_seed(0))
    # bilinear resize without antialiasing (v2's antialias=True differs when shrinking)
    for size in ((31, 17), (10, 6)):
        torch.testing.assert_close(Resize(size)(img), TF.resize(img, list(size),
                                                                antialias=False))
    # zero padding + crop at the offsets the generator draws
    out = RandomCrop((20, 12), padding=2)(img, SplitMix(5))
    g = SplitMix(5)
    i, j = g.integers(0, 5), g.integers(0, 5)
    torch.testing.assert_close(out, TF.crop(TF.pad(img, [2, 2, 2, 2]), i, j, 20, 12))
    torch.testing.assert_close(RandomHorizontalFlip(1.0)(img, SplitMix(0)),
                               TF.horizontal_flip(img))
    # erasing: the rectangle drawn by the generator, set to the value
    erased = RandomErasing(p=1.0, value=0.0)(img, SplitMix(3))
    rows, cols = torch.nonzero((erased != img).any(0), as_tuple=True)
    i, j = int(rows.min()), int(cols.min())
    h, w = int(rows.max()) - i + 1, int(cols.max()) - j + 1
    torch.testing.assert_close(erased, TF.erase(img, i, j, h, w, torch.tensor(0.0)))
