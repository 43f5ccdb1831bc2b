"""Images of two domains as a torch ``Dataset``, and the §4.2 identity sampler as a ``Sampler``.

* :class:`CrossDomainImages` -- the images of both domains behind one flat index (rows of
  the first domain, then rows of the second). Each domain is either an array held in memory,
  ``(n, h, w)`` grey or ``(n, h, w, c)`` with any channel count (``uint8`` images are scaled
  to [0, 1]; float images are used as they are), or a list of image files decoded with Pillow
  when an item is read -- so a ``DataLoader`` with workers streams a training set larger than
  memory. Files are converted to grey (``"L"``) or RGB and resized (bilinear) to the model's
  input size.
* :class:`CrossDomainIdentitySampler` -- a batch ``Sampler``: each epoch, every identity with
  images in both domains is drawn (:func:`crossmetric.deep.sampler.epoch_identity_batches`);
  with ``world_size > 1`` every process gets its share of each round's identities.
* :func:`collate_domains` -- stacks a batch into ``(images_x, images_y)``.
* :func:`fingerprint` -- a digest of a training set (array bytes, or file names, sizes and
  modification times, plus identities) that checkpoints record.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from crossmetric._utils.checks import check_positive_int
from crossmetric.deep.augment import SplitMix, SplitMixBatch, apply_batch, image_by_image
from crossmetric.deep.decoded import DecodedCache
from crossmetric.deep.sampler import (
    CrossDomainBatchSampler,
    epoch_identity_batches,
    identity_index,
)

__all__ = ["is_file_list", "image_layout", "read_image", "to_nchw", "to_chw",
           "CrossDomainImages", "collate_domains", "CrossDomainIdentitySampler",
           "IterationBatches", "round_batches", "fingerprint"]


def is_file_list(obj) -> bool:
    """True for a non-empty list / tuple of ``str`` or ``os.PathLike`` (image files)."""
    return (isinstance(obj, (list, tuple)) and len(obj) > 0
            and all(isinstance(p, (str, os.PathLike)) for p in obj))


def read_image(path, mode: str, size=None) -> np.ndarray:
    """Decode one file as ``mode`` ("L" or "RGB"), resized to ``size = (h, w)``
    (:func:`crossmetric.datasets._image_folder.read_image`: the pixel limit and the scaling of
    high-bit-depth files; a 32-bit file's scaling is warned about)."""
    import warnings

    from PIL import UnidentifiedImageError

    from crossmetric.datasets._image_folder import read_image as decode

    wh = None if size is None else (int(size[1]), int(size[0]))
    try:
        pixels, note = decode(path, mode, wh)
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError) as exc:
        raise ValueError(f"could not read image file {str(path)!r}: {exc}") from None
    if note is not None:
        warnings.warn(f"image file {str(path)!r}: {note}", UserWarning, stacklevel=2)
    return pixels


def image_layout(source, name: str) -> tuple[tuple[int, int], int]:
    """``((h, w), channels)`` of an image array, or of the first file of a list."""
    if is_file_list(source):
        from PIL import Image

        try:
            with Image.open(source[0]) as im:
                grey = im.mode in ("1", "L", "I", "I;16", "F")
                return (im.height, im.width), 1 if grey else 3
        except OSError as exc:
            raise ValueError(f"{name}: could not read image file {str(source[0])!r}: "
                             f"{exc}") from None
    shape = source.shape
    return (shape[1], shape[2]), (1 if len(shape) == 3 else shape[3])


def to_nchw(images: np.ndarray) -> torch.Tensor:
    """Images ``(n, h, w)`` or ``(n, h, w, c)`` as a float32 tensor ``(n, c, h, w)``.

    ``uint8`` images are scaled to [0, 1]; float images keep their values.
    """
    a = np.ascontiguousarray(images)
    t = torch.from_numpy(a if a.flags.writeable else a.copy())
    if images.dtype == np.uint8:
        t = t.float().div_(255.0)
    else:
        t = t.float()
    return t[:, None] if t.ndim == 3 else t.permute(0, 3, 1, 2).contiguous()


def to_chw(img: np.ndarray) -> torch.Tensor:
    """One image ``(h, w)`` or ``(h, w, c)`` as a float32 tensor ``(c, h, w)``."""
    return to_nchw(np.asarray(img)[None])[0]


class CrossDomainImages(Dataset):
    """Images of two domains with their identities behind one flat index.

    Item ``k < n_x`` is row ``k`` of the first domain, item ``n_x + j`` row ``j`` of the second.
    An item is ``(image, identity, domain)`` with ``image`` a float tensor ``(c, h, w)``. The
    key may also be ``(k, seed)``: the transform of that draw then runs with torch's generator
    seeded by ``seed`` (reproducible augmentation whatever the worker).

    Parameters
    ----------
    x, y : ndarray or list of paths
    ids_x, ids_y : array-like of int
    size : (h, w) or None
        Files are resized to it (arrays must already have it).
    channels : (c_x, c_y) or None
        Files are decoded as grey (1) or RGB (3); ``None`` takes it from each domain's first
        image.
    transform_x, transform_y : callable or None
        Applied to the ``(c, h, w)`` tensor of each item (augmentation).
    cache_bytes : int, default=0
        Files only: decoded images (``uint8``) kept in memory up to this many bytes, so that
        each file is decoded once (:class:`~crossmetric.deep.decoded.DecodedCache`).
    """

    def __init__(self, x, ids_x, y, ids_y, *, size=None, channels=None, transform_x=None,
                 transform_y=None, cache_bytes: int = 0):
        self.sources = (x, y)
        self.files = (is_file_list(x), is_file_list(y))
        self.reads_files = any(self.files)
        self.cache = DecodedCache(cache_bytes) if self.reads_files and cache_bytes > 0 else None
        self.ids = (np.asarray(ids_x, dtype=np.int64), np.asarray(ids_y, dtype=np.int64))
        self.n_x = len(x)
        for name, src, ids in (("x", x, self.ids[0]), ("y", y, self.ids[1])):
            if len(src) != ids.shape[0]:
                raise ValueError(f"ids_{name} has {ids.shape[0]} entries but there are "
                                 f"{len(src)} images in {name}.")
        if channels is None:
            channels = (image_layout(x, "x")[1], image_layout(y, "y")[1])
        self.channels = tuple(int(c) for c in channels)
        self.size = None if size is None else tuple(int(v) for v in size)
        self.transforms = (transform_x, transform_y)

    def __len__(self) -> int:
        return self.n_x + len(self.sources[1])

    def load(self, k: int) -> tuple[torch.Tensor, int, int]:
        dom, row = (0, k) if k < self.n_x else (1, k - self.n_x)
        return self._load_rows(dom, np.array([row]))[0], int(self.ids[dom][row]), dom

    def _load_rows(self, dom: int, rows: np.ndarray) -> torch.Tensor:
        """Rows of one domain as a float tensor ``(n, c, h, w)`` (an array: one gather)."""
        src = self.sources[dom]
        if self.files[dom]:
            mode, cache, imgs = "L" if self.channels[dom] == 1 else "RGB", self.cache, []
            for r in rows.tolist():
                img = None if cache is None else cache.get((dom, r))
                if img is None:
                    img = read_image(src[r], mode, self.size)
                    if cache is not None:
                        cache.put((dom, r), img)
                imgs.append(img)
            # the uint8 images scaled together: the values of torch.stack(to_chw(...))
            return to_nchw(np.stack(imgs))
        return to_nchw(src[rows])

    def __getitems__(self, keys) -> list:
        """A batch of items, as ``DataLoader`` asks for them: the items of :meth:`__getitem__`.

        Each domain's images are loaded together and augmented by :meth:`rows_batches` --
        the same images as item by item, in far fewer operations.
        """
        (pos_x, rows_x, seeds_x), (pos_y, rows_y, seeds_y) = self._split_keys(keys)
        out: list = [None] * (pos_x.size + pos_y.size)
        imgs = self.rows_batches(rows_x, seeds_x, rows_y, seeds_y)
        for dom, pos, rows in ((0, pos_x, rows_x), (1, pos_y, rows_y)):
            ids = self.ids[dom][rows]
            for j, i in enumerate(pos.tolist()):
                out[i] = (imgs[dom][j], int(ids[j]), dom)
        return out

    def domain_batches(self, keys) -> tuple[torch.Tensor, torch.Tensor]:
        """``collate_domains(self.__getitems__(keys))`` without the per-item detour: each
        domain's images in the order of ``keys`` (:meth:`rows_batches` of their rows)."""
        (_, rows_x, seeds_x), (_, rows_y, seeds_y) = self._split_keys(keys)
        return self.rows_batches(rows_x, seeds_x, rows_y, seeds_y)

    def _split_keys(self, keys) -> tuple:
        """``(positions, rows, seeds)`` of each domain's keys (``k`` or ``(k, seed)``);
        ``seeds`` is ``None`` when no key has one, else a list (``None`` for a bare key)."""
        keys = [k if isinstance(k, tuple) else (k, None) for k in keys]
        flat = np.array([int(k) for k, _ in keys], dtype=np.int64)
        out = []
        for dom, pos in enumerate((np.flatnonzero(flat < self.n_x),
                                   np.flatnonzero(flat >= self.n_x))):
            seeds = [keys[i][1] for i in pos.tolist()]
            out.append((pos, flat[pos] - dom * self.n_x,
                        None if all(v is None for v in seeds) else seeds))
        return out[0], out[1]

    def rows_batches(self, rows_x, seeds_x, rows_y, seeds_y) -> tuple[torch.Tensor,
                                                                     torch.Tensor]:
        """The images of rows ``rows_x`` of the first domain and ``rows_y`` of the second,
        augmented with their per-draw seeds: every batch path of the dataset (the training
        loop's, without a Python object per image; :meth:`__getitems__`;
        :meth:`domain_batches`).

        ``seeds_x``, ``seeds_y`` are arrays or lists of seeds, or ``None`` (unseeded draws:
        generators of seed 0 for a transform with ``takes_rng``, torch's global generator
        as it stands for one without, as :meth:`__getitem__` of a bare index). A transform
        with ``takes_rng`` augments the domain's images in one batch
        (:func:`~crossmetric.deep.augment.apply_batch`, a generator per image); one without
        runs image by image, under ``torch.random.fork_rng`` seeded by each image's seed.
        """
        return (self._domain_rows(0, rows_x, seeds_x), self._domain_rows(1, rows_y, seeds_y))

    def _domain_rows(self, dom: int, rows, seeds) -> torch.Tensor:
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:  # (a batch without an image of this domain)
            hw = self.size or image_layout(self.sources[dom], "xy"[dom])[0]
            return torch.empty((0, self.channels[dom], *hw))
        imgs = self._load_rows(dom, rows)
        tf = self.transforms[dom]
        if tf is None:
            return imgs
        if getattr(tf, "takes_rng", False):
            if seeds is None:
                seeds = np.zeros(rows.size, dtype=np.uint64)
            elif not isinstance(seeds, np.ndarray):
                seeds = np.array([0 if v is None else int(v) for v in seeds], dtype=np.uint64)
            return apply_batch(tf, imgs, SplitMixBatch.from_seeds(seeds))
        seeds = [None] * rows.size if seeds is None else list(seeds)
        return torch.stack([_torch_seeded(tf, imgs[j], seeds[j]) for j in range(rows.size)])

    def __getitem__(self, key):
        seed = None
        if isinstance(key, tuple):
            key, seed = key
        img, ident, dom = self.load(int(key))
        tf = self.transforms[dom]
        if tf is not None:
            if getattr(tf, "takes_rng", False):
                img = tf(img, rng=SplitMix(0 if seed is None else seed))
            else:
                img = _torch_seeded(tf, img, seed)
        return img, ident, dom


def _torch_seeded(tf, img: torch.Tensor, seed) -> torch.Tensor:
    """``tf(img)`` for a transform drawing from torch's global generator: as it stands when
    ``seed`` is None, else seeded by ``seed`` within ``fork_rng`` (restored after)."""
    if seed is None:
        return tf(img)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return tf(img)


def collate_domains(batch):
    """``[(image, identity, domain), ...]`` → ``(images_x, images_y)`` in batch order."""
    xs = [b[0] for b in batch if b[2] == 0]
    ys = [b[0] for b in batch if b[2] == 1]
    return torch.stack(xs), torch.stack(ys)


class CrossDomainIdentitySampler(Sampler):
    """The cross-domain batch generator of §4.2 as an epoch-based torch batch ``Sampler``.

    Iterating yields one epoch of rounds (``len(sampler)`` of them); each round is a list of
    keys of :class:`CrossDomainImages`: the first-domain images of K̂ identities, then their
    second-domain images (see :func:`~crossmetric.deep.sampler.epoch_identity_batches` for
    how every identity is drawn each epoch and what happens when an identity has fewer than
    Ô images). Epoch ``e`` depends only on ``(seed, e)``; call :meth:`set_epoch` between
    epochs, as with ``DistributedSampler``.

    Parameters
    ----------
    ids_x, ids_y : array-like of int
    n_identities, n_images_x, n_images_y : int
        K̂, Ô₁, Ô₂.
    n_x : int or None
        Offset of the second domain in the flat index (default ``len(ids_x)``).
    seed : int
    rank, world_size : int
        With ``world_size > 1`` the process of rank ``r`` gets identities ``r, r + P, ...``
        of every round (``P = world_size``).
    with_seeds : bool, default=True
        Keys are ``(index, seed)`` pairs with a per-draw augmentation seed.
    mode : {"sample", "pair"}
        ``"pair"``: rounds of ``n_pairs`` explicit pairs (first-domain images, then their
        row-aligned partners) from :meth:`CrossDomainBatchSampler.sample_pairs`; an epoch is
        then ``ceil(n_identities_usable / K̂)`` such rounds.
    n_pairs : int
    """

    def __init__(self, ids_x, ids_y, n_identities: int, n_images_x: int = 1,
                 n_images_y: int = 1, *, n_x: int | None = None, seed: int = 0, rank: int = 0,
                 world_size: int = 1, with_seeds: bool = True, mode: str = "sample",
                 n_pairs: int = 2):
        self.ids_x, self.ids_y = np.asarray(ids_x), np.asarray(ids_y)
        self.n_identities, self.n_images_x, self.n_images_y = (int(n_identities),
                                                               int(n_images_x),
                                                               int(n_images_y))
        self.n_x = len(self.ids_x) if n_x is None else int(n_x)
        self.seed, self.rank, self.world_size = int(seed), int(rank), int(world_size)
        self.with_seeds, self.mode, self.n_pairs = bool(with_seeds), mode, int(n_pairs)
        usable = np.intersect1d(self.ids_x, self.ids_y)
        if usable.size < 2:
            raise ValueError(
                "the cross-domain batch generator needs at least 2 identities with images "
                f"in both domains, found {usable.size}."
            )
        self.n_usable = int(usable.size)
        k = min(self.n_identities, self.n_usable)
        if k < self.world_size:
            raise ValueError(f"n_identities={k} usable per round cannot be shared among "
                             f"{self.world_size} processes; use at least one per process.")
        self._per_epoch = -(-self.n_usable // k)
        self.epoch = 0

    def __len__(self) -> int:
        return self._per_epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _rng(self, *key) -> np.random.RandomState:
        """``RandomState(SeedSequence([seed, *key]).generate_state(1))``, valid until the next
        call from the same thread: one generator per thread is re-seeded (``RandomState.seed``
        seeds as the constructor does), since creating one costs ~0.1 ms."""
        state = np.random.SeedSequence([self.seed, *key]).generate_state(1)
        rngs = self.__dict__.setdefault("_rngs", {})
        rs = rngs.get(threading.get_ident())
        if rs is None:
            rs = rngs[threading.get_ident()] = np.random.RandomState(state)
        else:
            rs.seed(state)
        return rs

    def epoch_rounds(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The global rounds ``(ix, iy)`` of an epoch (all processes)."""
        if self.mode == "pair":
            out = []
            if getattr(self, "_pair_sampler", None) is None:
                self._pair_sampler = CrossDomainBatchSampler(self.ids_x, self.ids_y,
                                                             self.n_identities)
            s = self._pair_sampler
            for pos in range(self._per_epoch):
                s.rng = self._rng(epoch, pos)
                b = s.sample_pairs(self.n_pairs)
                out.append((b.ix, b.iy))
            return out
        if getattr(self, "_index", None) is None:  # the identities' rows, sorted once
            self._index = identity_index(self.ids_x, self.ids_y)
        return epoch_identity_batches(self.ids_x, self.ids_y, self.n_identities,
                                      self.n_images_x, self.n_images_y,
                                      random_state=self._rng(epoch), index=self._index)

    def split(self, ix: np.ndarray, iy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Owner process of each image of a global round."""
        if self.world_size == 1:
            return np.zeros(ix.size, np.int64), np.zeros(iy.size, np.int64)
        if self.mode == "pair":
            own = np.arange(ix.size) % self.world_size
            return own, own.copy()
        # identity j of the round (in order of appearance) goes to process j mod P
        _, first_x, inv_x = np.unique(self.ids_x[ix], return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first_x))  # rank of each identity by first appearance
        own_x = order[inv_x.reshape(-1)] % self.world_size
        idents = self.ids_x[ix][np.sort(first_x)]
        pos = {c: j for j, c in enumerate(idents.tolist())}
        own_y = np.array([pos[c] for c in self.ids_y[iy].tolist()]) % self.world_size
        return own_x, own_y

    def local_rows(self, epoch: int, pos: int, ix: np.ndarray, iy: np.ndarray) -> tuple:
        """This process's part of a round as arrays ``(rows_x, seeds_x, rows_y, seeds_y)``:
        rows of each domain and their per-draw seeds (``None`` without ``with_seeds``), the
        entries of :meth:`keys` without a Python object per image."""
        if not self.with_seeds:  # unseeded draws, as the keys (bare indices)
            sx = sy = None
        else:
            seeds = np.random.SeedSequence([self.seed, epoch, pos, 1]).generate_state(
                ix.size + iy.size)
            sx, sy = seeds[:ix.size], seeds[ix.size:]
        if self.world_size == 1:
            return ix, sx, iy, sy
        own_x, own_y = self.split(ix, iy)
        mx, my = own_x == self.rank, own_y == self.rank
        return ix[mx], None if sx is None else sx[mx], iy[my], None if sy is None else sy[my]

    def keys(self, epoch: int, pos: int, ix: np.ndarray, iy: np.ndarray) -> list:
        """This process's keys of a round (with per-draw seeds when ``with_seeds``)."""
        rx, sx, ry, sy = self.local_rows(epoch, pos, ix, iy)
        flat = np.r_[rx, ry + self.n_x].tolist()
        if not self.with_seeds:
            return flat
        return list(zip(flat, np.r_[sx, sy].tolist(), strict=True))

    def __iter__(self):
        for pos, (ix, iy) in enumerate(self.epoch_rounds(self.epoch)):
            yield self.keys(self.epoch, pos, ix, iy)

    def gathered_order(self, ix: np.ndarray, iy: np.ndarray):
        """Rows of a global round in the order the processes' slices are concatenated.

        Returns ``(ix_g, iy_g, counts_x, counts_y)``: the rows sorted stably by owner, and the
        number of first- / second-domain images of each process.
        """
        own_x, own_y = self.split(ix, iy)
        ox, oy = np.argsort(own_x, kind="stable"), np.argsort(own_y, kind="stable")
        cx = np.bincount(own_x, minlength=self.world_size)
        cy = np.bincount(own_y, minlength=self.world_size)
        return ix[ox], iy[oy], cx, cy


class IterationBatches:
    """Rounds ``start, ..., stop - 1`` of a :class:`CrossDomainIdentitySampler` across epochs.

    A ``batch_sampler`` for ``DataLoader`` (round ``t`` is round ``t mod len(sampler)`` of epoch
    ``t // len(sampler)``), so a resumed run continues with exactly the rounds it would have
    drawn. :meth:`global_round` gives the same round's global rows (for the loss).
    """

    def __init__(self, sampler: CrossDomainIdentitySampler, start: int, stop: int):
        self.sampler, self.start, self.stop = sampler, int(start), int(stop)
        self._cache: dict[int, list] = {}

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def global_round(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        e, pos = divmod(int(t), len(self.sampler))
        if e not in self._cache:
            self._cache = {e: self.sampler.epoch_rounds(e)}
        return self._cache[e][pos]

    def __iter__(self):
        for t in range(self.start, self.stop):
            e, pos = divmod(t, len(self.sampler))
            ix, iy = self.global_round(t)
            yield self.sampler.keys(e, pos, ix, iy)

    def local_rounds(self):
        """``(ix, iy, local)`` of every round: its global rows and this process's
        :meth:`CrossDomainIdentitySampler.local_rows` (the keys of :meth:`__iter__`)."""
        for t in range(self.start, self.stop):
            e, pos = divmod(t, len(self.sampler))
            ix, iy = self.global_round(t)
            yield ix, iy, self.sampler.local_rows(e, pos, ix, iy)


def round_batches(ds: CrossDomainImages, batches: IterationBatches, *, max_rounds: int = 32,
                  max_bytes: int = 8 * 2**20):
    """``(ix, iy, images_x, images_y)`` of every round of ``batches``: the round's global rows
    and this process's images, :meth:`CrossDomainImages.rows_batches` of its
    :meth:`IterationBatches.local_rounds`.

    Several rounds are loaded and augmented together (up to ``max_rounds``, and about
    ``max_bytes`` of images): one gather and one batch transform for all of them instead of a
    few dozen small operations per round, then each round's images are copied out. The images
    are the same as round by round (each image is augmented with its own per-draw generator,
    by transforms that treat each image alone:
    :func:`~crossmetric.deep.augment.image_by_image`; otherwise rounds are prepared one at a
    time).
    """
    max_rounds = check_positive_int(max_rounds, "max_rounds")
    rounds = batches.local_rounds()
    together = all(image_by_image(tf) and getattr(tf, "takes_rng", True)
                   for tf in ds.transforms)
    n = 1
    while True:
        block = list(itertools.islice(rounds, n))
        if not block:
            return
        if len(block) == 1:
            ix, iy, rows = block[0]
            xb, yb = ds.rows_batches(*rows)
            if together:  # as many rounds next time as fit in max_bytes
                per_round = max(1, xb.numel() * xb.element_size() + yb.numel() * yb.element_size())
                n = int(min(max_rounds, max(1, max_bytes // per_round)))
            yield ix, iy, xb, yb
            continue
        parts = [None if block[0][2][i] is None else np.concatenate([b[2][i] for b in block])
                 for i in range(4)]
        xs, ys = ds.rows_batches(*parts)
        ox = np.cumsum([0] + [b[2][0].size for b in block]).tolist()
        oy = np.cumsum([0] + [b[2][2].size for b in block]).tolist()
        for j, (ix, iy, _) in enumerate(block):  # copies: each round's own tensors
            yield ix, iy, xs[ox[j]:ox[j + 1]].clone(), ys[oy[j]:oy[j + 1]].clone()


def fingerprint(x, ids_x, y, ids_y) -> str:
    """SHA-1 of a training set: image bytes (or file names, sizes, mtimes) and identities."""
    h = hashlib.sha1()
    for src, ids in ((x, ids_x), (y, ids_y)):
        if is_file_list(src):
            for p in src:
                st = os.stat(p)
                h.update(f"{os.fspath(p)}|{st.st_size}|{st.st_mtime_ns};".encode())
        else:
            arr = np.ascontiguousarray(src)
            h.update(f"{arr.dtype}{arr.shape}".encode())
            h.update(arr.data)
        h.update(np.asarray(ids, dtype=np.int64).tobytes())
    return h.hexdigest()


def subset(source, rows: Sequence[int] | np.ndarray):
    """Rows of an image array, or entries of a file list."""
    rows = np.asarray(rows, dtype=np.int64)
    if is_file_list(source):
        return [source[i] for i in rows.tolist()]
    return source[rows]
