"""Training-time augmentation for DeepGSM, as person re-identification training uses it.

Every transform takes one image as a float tensor ``(channels, h, w)`` and a NumPy
``Generator`` ``rng`` for its random choices; :class:`crossmetric.deep.data.CrossDomainImages`
creates that generator from a per-draw seed, so an augmented batch depends only on
``random_state`` and the iteration -- not on the number of ``DataLoader`` workers or processes,
nor on where a resumed run restarted. (A user callable without the ``rng`` argument runs with
torch's global generator seeded per draw instead, which costs more per image.)

Batches: :func:`apply_batch` runs a transform on a stack of images ``(n, c, h, w)`` with one
generator per image. Transforms with a ``batch`` method (resize, crop, flip, and a
:class:`Compose` of them) do it in a few whole-batch operations; the others run image by
image. Each image's generator is consumed in the same order either way, so a batch gives
exactly the images that the transform gives one at a time (tested). The generators may also
come as one :class:`SplitMixBatch` (the training loop's per-draw seeds, without a Python
object per image): the built-in batch transforms draw from it directly, any other transform
gets one :class:`SplitMix` per image, whose states are read back after.

The transforms are written with plain torch operations, and a ``torchvision`` pipeline (any
callable on a ``(c, h, w)`` tensor) can be passed as ``DeepGSM(augment=...)``. torchvision's
``transforms.v2`` is not used underneath: (1) it does not import next to the pinned CPU torch
2.13.0 (the PyPI torchvision 0.28.0 wheel is a CUDA build whose compiled operators need
``libtorch_cuda``; the matching CPU wheel is not on PyPI, and PyPI's torch 2.13.0 pulls the CUDA
13 packages), so the default augmentation would stop working; (2) where it imports, only the
deterministic kernels are the same -- resize (v2 with ``antialias=False``), pad + crop, flip
and erasing equal ``v2.functional`` exactly (``tests/test_augment_v2.py``) -- while v2's colour
jitter clamps to [0, 1] and takes the contrast mean of the grey image, and its grey level uses
0.2989 for red; (3) v2 draws its random parameters from torch's global generator, while these
transforms draw them from one generator per image, which is what makes a batch independent of
workers and processes and lets resize, crop and flip run on whole batches.

``"reid"`` (:func:`reid_augmentation`) is the usual recipe: resize to the input size, pad by
1/16 of each side and crop back at a random position, horizontal flip with probability 1/2,
brightness / contrast (and saturation for 3 channels) jitter of ±20 %, and random erasing of a
rectangle of 2-20 % of the image with probability 1/2 (Zhong et al., 2020).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["SplitMix", "SplitMixBatch", "as_rng", "apply_batch", "image_by_image", "Compose",
           "Resize",
           "RandomCrop", "RandomHorizontalFlip", "ColorJitter", "RandomGrayscale",
           "RandomErasing", "reid_augmentation", "make_augmentation"]


_MASK = (1 << 64) - 1


class SplitMix:
    """A tiny, fast generator (SplitMix64) with the few NumPy ``Generator`` methods used here.

    Creating one costs about a microsecond, against ~30 µs for ``np.random.default_rng``,
    which matters when every drawn image gets its own generator.
    """

    def __init__(self, seed: int):
        self.state = int(seed) & _MASK

    def _next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self._next() >> 11) * (1.0 / (1 << 53))

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.random()

    def integers(self, lo: int, hi: int) -> int:
        return lo + int(self.random() * (hi - lo))

    def permutation(self, n: int) -> np.ndarray:
        return np.argsort([self.random() for _ in range(n)])


class SplitMixBatch:
    """Several :class:`SplitMix` generators advanced together, one NumPy operation per draw.

    Each draw returns one value per generator, the value that generator's own method would
    return (the arithmetic is the same, in ``uint64`` with wrap-around).
    """

    _GAMMA, _M1, _M2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                        np.uint64(0x94D049BB133111EB))

    def __init__(self, states: np.ndarray):
        self.states = np.asarray(states, dtype=np.uint64).copy()

    @classmethod
    def from_rngs(cls, rngs) -> SplitMixBatch | None:
        """The generators' states together, or ``None`` unless every one is a SplitMix."""
        if not all(isinstance(r, SplitMix) for r in rngs):
            return None
        return cls(np.array([r.state for r in rngs], dtype=np.uint64))

    @classmethod
    def from_seeds(cls, seeds) -> SplitMixBatch:
        """The generators ``SplitMix(s)`` of non-negative integer seeds ``s < 2**64``."""
        return cls(seeds)

    def __len__(self) -> int:
        return int(self.states.shape[0])

    def generators(self) -> list:
        """One :class:`SplitMix` per generator, at its current state."""
        return [SplitMix(s) for s in self.states.tolist()]

    def read_back(self, rngs) -> None:
        """Take the states of ``rngs`` (from :meth:`generators`, after their draws)."""
        self.states = np.array([r.state for r in rngs], dtype=np.uint64)

    def write_back(self, rngs) -> None:
        """Leave each generator of ``rngs`` where its draws in this batch left it."""
        for r, st in zip(rngs, self.states.tolist(), strict=True):
            r.state = int(st)

    def random(self, k: int | None = None) -> np.ndarray:
        """One draw of each generator (shape ``(n,)``), or ``k`` draws in a row of each
        (shape ``(k, n)``, row ``i`` the ``i``-th draw: one pass instead of ``k``).

        ``uint64`` array arithmetic wraps around silently, as SplitMix64 needs."""
        if k is None:
            self.states += self._GAMMA
            z = self.states.copy()
        else:
            z = self.states + self._GAMMA * np.arange(1, int(k) + 1, dtype=np.uint64)[:, None]
            self.states = z[-1].copy()
        z = (z ^ (z >> np.uint64(30))) * self._M1
        z = (z ^ (z >> np.uint64(27))) * self._M2
        z ^= z >> np.uint64(31)
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def integers(self, lo: int, hi: int) -> np.ndarray:
        return lo + (self.random() * (hi - lo)).astype(np.int64)


def _batch_of(rngs) -> tuple[SplitMixBatch | None, bool]:
    """``(generators as one SplitMixBatch or None, whether to write back to rngs)``."""
    if isinstance(rngs, SplitMixBatch):
        return rngs, False
    g = SplitMixBatch.from_rngs(rngs)
    return g, g is not None


def as_rng(rng):
    """``rng`` if it is a generator, else ``np.random.default_rng(rng)``."""
    return rng if hasattr(rng, "integers") else np.random.default_rng(rng)


def apply_batch(transform, images: torch.Tensor, rngs) -> torch.Tensor:
    """``transform`` of every image of ``images`` ``(n, c, h, w)``, image ``i`` with ``rngs[i]``.

    Uses the transform's whole-batch ``batch`` method when it has one, else calls it image by
    image (``transform(img, rng)``). The result equals the image-by-image one exactly.
    ``rngs`` may be a :class:`SplitMixBatch`: the built-in transforms (``batch_rngs``) draw
    from it as it is; another transform gets its generators one by one, read back after.
    """
    if isinstance(rngs, SplitMixBatch) and not getattr(transform, "batch_rngs", False):
        gens = rngs.generators()
        out = apply_batch(transform, images, gens)
        rngs.read_back(gens)
        return out
    if hasattr(transform, "batch"):
        return transform.batch(images, rngs)
    return torch.stack([transform(img, rng) for img, rng in zip(images, rngs, strict=True)])


def image_by_image(transform) -> bool:
    """True when :func:`apply_batch` of ``transform`` treats each image alone (its result for
    an image does not depend on the other images of the batch), so that any grouping of the
    images into batches gives the same images: ``None``, the transforms of this module and
    any callable without a ``batch`` method (run image by image), and a :class:`Compose` of
    such. A user transform with its own ``batch`` method is not assumed to be.
    """
    if transform is None:
        return True
    if isinstance(transform, Compose):
        return all(image_by_image(t) for t in transform.transforms)
    return type(transform).__module__ == __name__ or not hasattr(transform, "batch")


class Compose:
    """Apply transforms in order."""

    takes_rng = True
    batch_rngs = True  # ``batch`` takes a SplitMixBatch (its parts get what they take)

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        rng = as_rng(rng)
        for t in self.transforms:
            img = t(img, rng)
        return img

    def batch(self, images: torch.Tensor, rngs) -> torch.Tensor:
        """Each transform on the whole batch in turn (see :func:`apply_batch`)."""
        for t in self.transforms:
            images = apply_batch(t, images, rngs)
        return images

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"


class Resize:
    """Bilinear resize to ``size = (h, w)`` (no-op when already that size)."""

    batch_rngs = True  # draws nothing

    def __init__(self, size):
        self.size = tuple(int(v) for v in size)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        if tuple(img.shape[-2:]) == self.size:
            return img
        return F.interpolate(img[None], size=self.size, mode="bilinear",
                             align_corners=False)[0]

    def batch(self, images: torch.Tensor, rngs=None) -> torch.Tensor:
        if tuple(images.shape[-2:]) == self.size:
            return images
        return F.interpolate(images, size=self.size, mode="bilinear", align_corners=False)

    def __repr__(self) -> str:
        return f"Resize({self.size})"


class RandomCrop:
    """Zero-pad by ``padding`` pixels on every side and crop ``size`` at a random position."""

    takes_rng = True
    batch_rngs = True

    def __init__(self, size, padding: int = 0):
        self.size = tuple(int(v) for v in size)
        self.padding = int(padding)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        rng = as_rng(rng)
        p = self.padding
        if p:
            img = F.pad(img, (p, p, p, p))
        h, w = img.shape[-2:]
        th, tw = self.size
        i, j = int(rng.integers(0, h - th + 1)), int(rng.integers(0, w - tw + 1))
        return img[..., i:i + th, j:j + tw]

    def batch(self, images: torch.Tensor, rngs) -> torch.Tensor:
        """All crops in one gather: each image's offsets drawn as :meth:`__call__` draws them."""
        p = self.padding
        if p:
            images = F.pad(images, (p, p, p, p))
        n, c, h, w = images.shape
        th, tw = self.size
        g, back = _batch_of(rngs)
        if g is not None:  # both draws of every generator in one pass, as integers() draws
            u = g.random(2)
            oi = (u[0] * (h - th + 1)).astype(np.int64)
            oj = (u[1] * (w - tw + 1)).astype(np.int64)
            if back:
                g.write_back(rngs)
        else:
            off = np.array([(int(r.integers(0, h - th + 1)), int(r.integers(0, w - tw + 1)))
                            for r in map(as_rng, rngs)], dtype=np.int64).reshape(n, 2)
            oi, oj = off[:, 0], off[:, 1]
        # one flat gather: pixel (a, k, i, j) of the crops is pixel
        # ((a c + k) h + oi_a + i) w + oj_a + j of the padded batch (index in NumPy: a few
        # small torch operators cost more than the gather itself)
        window = self._window(h, w)
        base = np.arange(n * c).reshape(n, c) * (h * w) + (oi * w + oj)[:, None]
        idx = torch.from_numpy((base[:, :, None] + window).reshape(-1))
        return images.reshape(-1).index_select(0, idx).reshape(n, c, th, tw)

    def _window(self, h: int, w: int) -> np.ndarray:
        """Flat offsets ``i w + j`` of a crop's pixels in an ``h × w`` image (kept)."""
        cache = self.__dict__.setdefault("_windows", {})
        if (h, w) not in cache:
            th, tw = self.size
            cache[h, w] = (np.arange(th)[:, None] * w + np.arange(tw)).reshape(-1)
        return cache[h, w]

    def __repr__(self) -> str:
        return f"RandomCrop({self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    batch_rngs = True

    def __init__(self, p: float = 0.5):
        self.p = float(p)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        return img.flip(-1) if as_rng(rng).random() < self.p else img

    def batch(self, images: torch.Tensor, rngs) -> torch.Tensor:
        g, back = _batch_of(rngs)
        if g is not None:
            u = g.random()
            if back:
                g.write_back(rngs)
        else:
            u = np.array([as_rng(rng).random() for rng in rngs])
        flip = torch.as_tensor(u < self.p)
        return torch.where(flip[:, None, None, None], images.flip(-1), images)

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class ColorJitter:
    """Random brightness, contrast and (3 channels only) saturation factors in ``1 ± value``.

    Applied in a random order like torchvision's; values are not clipped, so inputs outside
    [0, 1] (standardised images) keep their scale.
    """

    def __init__(self, brightness: float = 0.2, contrast: float = 0.2,
                 saturation: float = 0.2):
        self.brightness, self.contrast, self.saturation = brightness, contrast, saturation

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        rng = as_rng(rng)
        for k in rng.permutation(3).tolist():
            if k == 0 and self.brightness:
                img = img * rng.uniform(1 - self.brightness, 1 + self.brightness)
            elif k == 1 and self.contrast:
                c = rng.uniform(1 - self.contrast, 1 + self.contrast)
                img = (img - img.mean()) * c + img.mean()
            elif k == 2 and self.saturation and img.shape[0] == 3:
                s = rng.uniform(1 - self.saturation, 1 + self.saturation)
                grey = (0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2])[None]
                img = (img - grey) * s + grey
        return img

    def __repr__(self) -> str:
        return (f"ColorJitter(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation})")


class RandomGrayscale:
    """With probability ``p``, replace a 3-channel image by its luminance in every channel.

    The luminance is ITU-R 601's ``0.299 R + 0.587 G + 0.114 B`` (torchvision's
    ``RandomGrayscale``); images with another channel count are returned unchanged. Useful
    when one domain has no colour (sketches, infrared): the photo tower also sees the photo
    as the other domain shows it.
    """

    def __init__(self, p: float = 0.1):
        self.p = float(p)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        rng = as_rng(rng)
        if rng.random() >= self.p or img.shape[0] != 3:
            return img
        grey = 0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2]
        return grey.expand(3, *grey.shape).clone()

    def __repr__(self) -> str:
        return f"RandomGrayscale(p={self.p})"


class RandomErasing:
    """With probability ``p``, set a random rectangle of ``scale`` × the area to ``value``."""

    def __init__(self, p: float = 0.5, scale=(0.02, 0.2), ratio=(0.3, 3.3),
                 value: float = 0.0):
        self.p, self.scale, self.ratio, self.value = float(p), scale, ratio, float(value)

    def __call__(self, img: torch.Tensor, rng=None) -> torch.Tensor:
        rng = as_rng(rng)
        if rng.random() >= self.p:
            return img
        h, w = img.shape[-2:]
        for _ in range(10):
            area = rng.uniform(*self.scale) * h * w
            r = math.exp(rng.uniform(math.log(self.ratio[0]), math.log(self.ratio[1])))
            eh, ew = int(round(math.sqrt(area * r))), int(round(math.sqrt(area / r)))
            if 0 < eh < h and 0 < ew < w:
                i, j = int(rng.integers(0, h - eh + 1)), int(rng.integers(0, w - ew + 1))
                img = img.clone()
                img[..., i:i + eh, j:j + ew] = self.value
                return img
        return img

    def __repr__(self) -> str:
        return f"RandomErasing(p={self.p}, scale={self.scale})"


def reid_augmentation(input_shape, grayscale: float = 0.0) -> Compose:
    """Resize, pad-and-crop (1/16 of the side), flip, colour jitter, random erasing.

    ``grayscale`` > 0 inserts :class:`RandomGrayscale` with that probability after the
    colour jitter (before the erasing).
    """
    h, w = (int(v) for v in input_shape)
    pad = max(1, min(h, w) // 16)
    grey = [RandomGrayscale(grayscale)] if grayscale else []
    return Compose([Resize((h, w)), RandomCrop((h, w), padding=pad), RandomHorizontalFlip(),
                    ColorJitter(0.2, 0.2, 0.2), *grey, RandomErasing(0.5)])


def make_augmentation(augment, input_shape):
    """The training transform for ``DeepGSM(augment=...)`` (``None`` when there is none).

    ``augment`` is an int ``a`` (random shift: pad ``a`` pixels, crop back; 0 = none),
    ``"reid"``, ``None`` / ``False`` (none), or a callable on ``(c, h, w)`` tensors.
    """
    if augment is None or augment is False:
        return None
    if isinstance(augment, str):
        if augment != "reid":
            raise ValueError(f"augment must be an int >= 0, 'reid', None or a callable, got "
                             f"{augment!r}.")
        return reid_augmentation(input_shape)
    if callable(augment):
        return augment
    if isinstance(augment, (int,)) and not isinstance(augment, bool) and augment >= 0:
        return RandomCrop(input_shape, padding=int(augment)) if augment else None
    raise ValueError(f"augment must be an int >= 0, 'reid', None or a callable, got "
                     f"{augment!r}.")
