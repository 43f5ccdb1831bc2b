"""Embedding images with a trained :class:`~crossmetric.deep.networks.GSMNet`, in batches.

Arrays and lists of image files, with test-time flipping; and the held-out similarities that
DeepGSM's early stopping scores.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils import gen_batches

from crossmetric.deep.data import is_file_list, read_image, to_chw
from crossmetric.deep.losses import similarity_matrix
from crossmetric.deep.networks import GSMNet

__all__ = ["batch_tensor", "embed_source", "forward_blocks", "held_out_similarity"]


def batch_tensor(images: np.ndarray) -> torch.Tensor:
    """Images ``(n, h, w[, c])`` as float32 ``(n, c, h, w)`` (uint8 scaled to [0, 1])."""
    t = torch.from_numpy(np.ascontiguousarray(images))
    t = t.float().div_(255.0) if images.dtype == np.uint8 else t.float()
    return t[:, None] if t.ndim == 3 else t.permute(0, 3, 1, 2)


class FileImages(torch.utils.data.Dataset):
    """Image files read with Pillow (``mode`` "L" or "RGB", resized to ``size``).

    ``cache``: a :class:`~crossmetric.deep.decoded.DecodedCache` that keeps the decoded
    images under the keys ``(tag, i)`` (the held-out images of early stopping, embedded at
    every check, are then decoded once per fit).
    """

    def __init__(self, paths, mode, size, cache=None, tag=None):
        self.paths, self.mode, self.size = list(paths), mode, size
        self.cache, self.tag = cache, tag

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.cache is None:
            return to_chw(read_image(self.paths[i], self.mode, self.size))
        img = self.cache.get((self.tag, i))
        if img is None:
            img = read_image(self.paths[i], self.mode, self.size)
            self.cache.put((self.tag, i), img)
        return to_chw(img)


def forward_blocks(images: np.ndarray, fn, *, batch_size: int, flip: bool,
                   device) -> np.ndarray:
    """``fn`` (a GSMNet ``embed_*`` / ``features_*``) on an image array in blocks, float64."""
    out = []
    with torch.no_grad():
        for sl in gen_batches(images.shape[0], int(batch_size)):
            t = batch_tensor(images[sl]).to(device)
            out.append(fn(t, flip=flip).double().cpu().numpy())
    return np.concatenate(out)


def embed_source(net: GSMNet, source, side: str, shape, channels, device, *,
                 flip: bool, batch_size: int, num_workers: int, cache=None,
                 tag=None) -> torch.Tensor:
    """x̃ or ỹ (a float32 tensor on ``device``) of an image array or file list (decoded
    images kept in ``cache`` under ``(tag, i)``, see :class:`FileImages`)."""
    fn = net.embed_x if side == "x" else net.embed_y
    out = []
    with torch.no_grad():
        if is_file_list(source):
            c = channels[0] if side == "x" else channels[1]
            loader = torch.utils.data.DataLoader(
                FileImages(source, "L" if c == 1 else "RGB", shape, cache=cache, tag=tag),
                batch_size=int(batch_size), num_workers=int(num_workers))
            for b in loader:
                out.append(fn(b.to(device), flip=flip).float())
        else:
            for sl in gen_batches(len(source), int(batch_size)):
                out.append(fn(batch_tensor(source[sl]).to(device), flip=flip).float())
    return torch.cat(out)


def held_out_similarity(net, val, shape, channels, device, descriptors=None,
                        **embed_options) -> np.ndarray:
    """S̃ between the held-out images of early stopping, first-domain rows against
    second-domain columns (float64), for :class:`crossmetric._solvers.early_stopping.
    EarlyStopping` to score as it scores every learner's hold-out.

    ``val`` is ``(images_x, ids_x, images_y, ids_y)``. ``net`` is put in eval mode to embed
    and back in training mode after. ``descriptors``: the descriptor rows ``(u_x, u_y)`` of
    those images (a descriptor branch) or None. ``embed_options`` go to :func:`embed_source`
    (a ``cache`` keeps held-out files under ``("val", side, i)``).
    """
    vx, _, vy, _ = val
    net.eval()
    TX = embed_source(net, vx, "x", shape, channels, device, tag=("val", "x"),
                      **embed_options)
    TY = embed_source(net, vy, "y", shape, channels, device, tag=("val", "y"),
                      **embed_options)
    with torch.no_grad():
        if descriptors is not None:
            TX = net.with_descriptor(TX, torch.as_tensor(descriptors[0], device=device))
            TY = net.with_descriptor(TY, torch.as_tensor(descriptors[1], device=device))
        f = net.head.components()[2].detach().float()
    net.train()
    return similarity_matrix(TX, TY, f).double().cpu().numpy()
