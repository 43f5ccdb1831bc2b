"""Dense patch colour histograms + SIFT: the hand-crafted re-id feature of Zhao et al. (CVPR 2013).

Public through :mod:`crossmetric.features` (:class:`PatchColorSIFT`).
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import check_choice, check_positive_int, check_positive_scalar
from crossmetric.features import _bin_index, check_images, check_images_as_fitted, to_unit_float
from crossmetric.features._dense_sift import (
    check_float_dtype,
    check_n_jobs,
    grid_keypoints,
    grid_starts,
    map_images,
    normalize_descriptors,
    sift_at,
)

__all__ = ["PatchColorSIFT", "PATCH_COLOR_SPACES", "to_patch_color"]

_S2, _S3, _S6 = np.sqrt(2.0), np.sqrt(3.0), np.sqrt(6.0)
#: colour space -> range of each channel for RGB in [0, 1]. CIELAB (D65, scikit-image's
#: ``rgb2lab``) over the sRGB gamut: L in [0, 100], a in [-86.183, 98.233], b in
#: [-107.857, 94.478] (measured on all 2^24 colours; rounded outwards). "opponent" is the
#: transform that Zhao's released code histograms: O1 = (R − G)/√2, O2 = (R + G − 2B)/√6,
#: O3 = (R + G + B)/√3.
PATCH_COLOR_SPACES = {
    "lab": ((0.0, 100.0), (-86.19, 98.24), (-107.86, 94.48)),
    "opponent": ((-1 / _S2, 1 / _S2), (-2 / _S6, 2 / _S6), (0.0, 3 / _S3)),
}
_OPPONENT = np.array([[1 / _S2, -1 / _S2, 0.0], [1 / _S6, 1 / _S6, -2 / _S6],
                      [1 / _S3, 1 / _S3, 1 / _S3]])
#: images whose colour histograms are computed at a time (bounds the gathered patch arrays)
_IMAGES_PER_BLOCK = 32


def to_patch_color(rgb: np.ndarray, space: str) -> np.ndarray:
    """``(..., 3)`` RGB in [0, 1] -> the channels of ``space`` (see :data:`PATCH_COLOR_SPACES`)."""
    if space == "lab":
        from skimage.color import rgb2lab

        return rgb2lab(rgb, channel_axis=-1)
    return rgb @ _OPPONENT.T


def _l2_clip(h: np.ndarray, clip: float) -> np.ndarray:
    """L2-normalise the last axis, clip at ``clip``, L2-normalise again (SIFT's rule)."""
    n = np.sqrt(np.einsum("...k,...k->...", h, h))[..., None]
    h = np.minimum(h / np.where(n > 0, n, 1), clip)
    n = np.sqrt(np.einsum("...k,...k->...", h, h))[..., None]
    return h / np.where(n > 0, n, 1)


def _color_block(block, space, levels, n_bins, sigma, clip):
    """``(m, n_patches, 3, n_scales, n_bins)`` colour histograms of a block of RGB images."""
    from scipy.ndimage import gaussian_filter

    conv = to_patch_color(to_unit_float(block), space)
    m, h, w = conv.shape[:3]
    ranges = PATCH_COLOR_SPACES[space]
    out = []
    for s, (hs, ws), rows, cols in levels:
        img = conv
        if s != 1.0:  # Gaussian smoothing (σ / s), then nearest-pixel subsampling
            img = gaussian_filter(conv, sigma=(0, sigma / s, sigma / s, 0), mode="nearest")
            ri = np.floor(np.linspace(0, h - 1, hs) + 0.5).astype(np.intp)
            ci = np.floor(np.linspace(0, w - 1, ws) + 0.5).astype(np.intp)
            img = img[:, ri][:, :, ci]
        codes = np.stack([_bin_index(img[..., c], lo, hi, n_bins)
                          for c, (lo, hi) in enumerate(ranges)], axis=-1)
        # (m, n_rows, n_cols, ps, ps, 3): the codes of every pixel of every patch
        patches = codes[:, rows[:, None, :, None], cols[None, :, None, :], :]
        n_p = rows.shape[0] * cols.shape[0]
        patches = patches.reshape(m, n_p, -1, 3)
        base = ((np.arange(m)[:, None, None, None] * n_p + np.arange(n_p)[None, :, None, None])
                * 3 + np.arange(3)) * n_bins
        counts = np.bincount((base + patches).ravel(), minlength=m * n_p * 3 * n_bins)
        out.append(counts.reshape(m, n_p, 3, n_bins).astype(np.float64))
    return _l2_clip(np.stack(out, axis=3), clip)


def _sift_block(block, space, keypoints):
    """``(m, n_patches, 3, 128)`` OpenCV SIFT of each colour channel (scaled to 0-255)."""
    import cv2

    sift = cv2.SIFT_create()
    conv = to_patch_color(to_unit_float(block), space)
    out = np.empty((block.shape[0], len(keypoints), 3, 128))
    for c, (lo, hi) in enumerate(PATCH_COLOR_SPACES[space]):
        u8 = np.clip(np.round((conv[..., c] - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)
        for k, im in enumerate(u8):
            out[k, :, c] = sift_at(im, keypoints, sift)
    return normalize_descriptors(out, "l2")


def _patch_rows(images, *, space, levels, n_bins, sigma, clip, sift, patch, step, dtype):
    """Descriptors of a chunk of images (module level: picklable for joblib)."""
    kps = grid_keypoints(images.shape[1:3], patch, step)[0] if sift else None
    rows = []
    for start in range(0, images.shape[0], _IMAGES_PER_BLOCK):
        block = images[start:start + _IMAGES_PER_BLOCK]
        m = block.shape[0]
        color = _color_block(block, space, levels, n_bins, sigma, clip)  # (m, P, 3, S, B)
        parts = [color.reshape(m, color.shape[1], -1)]
        if sift:
            parts.append(_sift_block(block, space, kps).reshape(m, len(kps), -1))
        rows.append(np.concatenate(parts, axis=2).reshape(m, -1).astype(dtype))
    return np.concatenate(rows)


class PatchColorSIFT(TransformerMixin, BaseEstimator):
    """Dense patches described by colour histograms at three downsampling levels + colour SIFT.

    The hand-crafted person re-identification feature of Zhao, Ouyang & Wang (CVPR 2013,
    "unsupervised salience learning"; their released salience-matching code), which the GSM
    paper (§5.5 ablations, Fig. 6) reduces to 400 dimensions on CUHK01 and CUHK03: ``patch_size ×
    patch_size`` patches every ``step`` pixels (10 and 5 on 128 × 48 images: 24 × 8 patches),
    each described by

    * 32-bin histograms of each LAB channel at each of three levels ``s`` in ``scales`` =
      (0.5, 0.75, 1): the channel smoothed by a Gaussian of σ = ``sigma / s`` and subsampled to
      ``round(s·h) × round(s·w)`` pixels (nearest pixel), the patch scaled to
      ``round(s · patch_size)`` pixels at the same centre; each histogram L2-normalised,
      clipped at ``clip`` and L2-normalised again (3 × 3 × 32 = 288 values), and
    * (``sift=True``) an OpenCV SIFT descriptor of the patch in each LAB channel (each channel
      scaled to 0-255; key point as in :class:`DenseSIFT`), unit L2 norm (3 × 128 = 384).

    That is 672 features per patch and 129,024 for a 128 × 48 image, patch by patch (row-major),
    within a patch ``[colour: channel, level, bin | SIFT: channel, 128]``. Reduce them (PCA)
    before metric learning.

    Parameters
    ----------
    patch_size : int, default=10
    step : int, default=5
    n_bins : int, default=32
        Equal-width bins over each channel's range on the sRGB gamut
        (:data:`PATCH_COLOR_SPACES`).
    scales : sequence of float, default=(0.5, 0.75, 1.0)
        Downsampling levels of the colour histograms, each in (0, 1].
    sigma : float, default=0.6
        Gaussian smoothing before downsampling, divided by the level (Zhao's code).
    clip : float, default=0.2
    color_space : {"lab", "opponent"}, default="lab"
        ``"lab"``: CIELAB, as the papers say; ``"opponent"``: the opponent colour transform
        that the released code actually histograms (it calls it LAB).
    sift : bool, default=True
        Add the SIFT descriptors (``False``: colour histograms only, 288 per patch).
    n_jobs : int, optional
        Images described in parallel by joblib; default one process.
    dtype : numpy dtype, default=np.float32
        float32 by default: CUHK01's 3,884 images give 3,884 × 129,024 values (2 GB).

    Attributes
    ----------
    grid_shape_ : (int, int)
        Patches along the rows and the columns
        (:func:`~crossmetric.features._dense_sift.grid_starts`).
    n_features_out_ : int
    image_shape_ : tuple

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.features import PatchColorSIFT
    >>> people = np.random.RandomState(0).randint(0, 256, (2, 128, 48, 3), dtype=np.uint8)
    >>> d = PatchColorSIFT().fit(people)
    >>> d.grid_shape_, d.n_features_out_
    ((24, 8), 129024)
    >>> X = d.transform(people)
    >>> X.shape, X.dtype
    ((2, 129024), dtype('float32'))
    >>> round(float(np.linalg.norm(X[0, :32])), 4)  # one colour histogram
    1.0
    """

    def __init__(self, patch_size: int = 10, *, step: int = 5, n_bins: int = 32,
                 scales=(0.5, 0.75, 1.0), sigma: float = 0.6, clip: float = 0.2,
                 color_space: str = "lab", sift: bool = True, n_jobs=None, dtype=np.float32):
        self.patch_size = patch_size
        self.step = step
        self.n_bins = n_bins
        self.scales = scales
        self.sigma = sigma
        self.clip = clip
        self.color_space = color_space
        self.sift = sift
        self.n_jobs = n_jobs
        self.dtype = dtype

    def _levels(self, h: int, w: int):
        """Per level: (s, (hs, ws), patch rows (n_rows, ps), patch cols (n_cols, ps))."""
        scales = np.atleast_1d(np.asarray(self.scales, dtype=float))
        if scales.ndim != 1 or scales.size == 0 or not np.all((scales > 0) & (scales <= 1)):
            raise ValueError(f"scales must be a non-empty sequence of factors in (0, 1], got "
                             f"{self.scales!r}.")
        p = self.patch_size
        centres_y = grid_starts(h, p, self.step) + (p - 1) / 2.0
        centres_x = grid_starts(w, p, self.step) + (p - 1) / 2.0
        levels = []
        for s in scales:
            hs, ws = (max(1, int(np.floor(s * n + 0.5))) for n in (h, w))
            ps = max(1, int(np.floor(s * p + 0.5)))
            if ps > min(hs, ws):
                raise ValueError(f"level {s:g}: {ps}-pixel patches do not fit {ws}x{hs} images.")

            def starts(centres, n, n_s, ps=ps):
                c = (centres + 0.5) * (n_s / n) - 0.5  # the centre at this level
                first = np.clip(np.floor(c - (ps - 1) / 2.0 + 0.5), 0, n_s - ps).astype(np.intp)
                return first[:, None] + np.arange(ps)

            levels.append((float(s), (hs, ws), starts(centres_y, h, hs), starts(centres_x, w, ws)))
        return levels

    def fit(self, images, y=None):
        """Check the parameters against the image size; record the grid and output size."""
        check_positive_int(self.patch_size, "patch_size", minimum=2)
        check_positive_int(self.step, "step")
        check_positive_int(self.n_bins, "n_bins")
        check_positive_scalar(self.sigma, "sigma")
        check_positive_scalar(self.clip, "clip")
        check_choice(self.color_space, "color_space", tuple(PATCH_COLOR_SPACES))
        check_n_jobs(self.n_jobs)
        check_float_dtype(self.dtype)
        images = check_images(images, allow_gray=False)
        h, w = images.shape[1:3]
        if min(h, w) < self.patch_size:
            raise ValueError(f"images of {h} x {w} pixels are smaller than patch_size="
                             f"{self.patch_size}.")
        self.levels_ = self._levels(h, w)
        self.image_shape_ = images.shape[1:]
        self.grid_shape_ = (self.levels_[0][2].shape[0], self.levels_[0][3].shape[0])
        per_patch = 3 * len(self.levels_) * self.n_bins + (3 * 128 if self.sift else 0)
        self.n_features_out_ = self.grid_shape_[0] * self.grid_shape_[1] * per_patch
        return self

    def transform(self, images) -> np.ndarray:
        """Descriptors of ``images``, shape ``(n, n_features_out_)``."""
        check_is_fitted(self)
        images = check_images_as_fitted(self, images, allow_gray=False)
        dtype = np.dtype(self.dtype)
        fn = functools.partial(_patch_rows, space=self.color_space, levels=self.levels_,
                               n_bins=self.n_bins, sigma=float(self.sigma), clip=float(self.clip),
                               sift=bool(self.sift), patch=self.patch_size, step=self.step,
                               dtype=dtype)
        return map_images(fn, images, self.n_jobs, self.n_features_out_, dtype)
