"""scikit-learn's digits in two genuinely different modalities: a "photo" and a "sketch".

The embedded default of ``crossmetric benchmark`` and the photo ↔ sketch image task of
:class:`crossmetric.DeepGSM`; :func:`hog_descriptor` describes the sketches.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import ndimage
from sklearn.utils import Bunch

__all__ = ["load_digits_views", "hog_descriptor"]


#: side of the upsampled digit images
DIGITS_SIDE = 16
#: seed of the sketch deformations (fixed: the loader is deterministic)
_SKETCH_SEED = 20120616
#: scale (pixels) of the Gaussian derivative that draws the sketch's outlines
_EDGE_SIGMA = 0.8


def hog_descriptor(images: np.ndarray, *, cell: int = 4, n_bins: int = 9) -> np.ndarray:
    """A HOG-like gradient-orientation descriptor of grey images.

    ``crossmetric.features.HOG(n_bins, pixels_per_cell=(cell, cell), cells_per_block=(1, 1),
    block_norm="L2", implementation="numpy")``: central-difference gradients (``np.gradient``);
    each pixel votes its gradient magnitude into ``n_bins`` unsigned orientation bins over
    [0, π), split linearly between the two nearest bin centres; votes are summed over
    non-overlapping ``cell × cell`` cells, and each cell's histogram is L2-normalised
    (``h / sqrt(‖h‖² + ε²)``, ε = 1e-3 of the image's largest magnitude, so empty cells stay
    near zero). No block normalisation (the images are tiny). The descriptor does not change
    under a positive affine change of the intensities, so images outside [0, 1] are rescaled
    to it first.

    Parameters
    ----------
    images : ndarray of shape (n, h, w)
        ``h`` and ``w`` must be multiples of ``cell``.
    cell : int, default=4
    n_bins : int, default=9

    Returns
    -------
    ndarray of shape (n, (h // cell) * (w // cell) * n_bins), non-negative
    """
    from crossmetric.features import HOG

    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3:
        raise ValueError(f"images must be a 3-D array (n, h, w), got shape {images.shape}.")
    n, h, w = images.shape
    if h % cell or w % cell:
        raise ValueError(f"image sides ({h}, {w}) must be multiples of cell={cell}.")
    if images.size and not np.isfinite(images).all():
        raise ValueError("images contains NaN or infinity.")
    lo, hi = (images.min(), images.max()) if images.size else (0.0, 1.0)
    if lo < 0.0 or hi > 1.0:
        images = (images - lo) / (hi - lo) if hi > lo else np.zeros_like(images)
    return HOG(n_bins, pixels_per_cell=(cell, cell), cells_per_block=(1, 1), block_norm="L2",
               implementation="numpy").fit_transform(images)


def _sketch_images(photos: np.ndarray, seed: int) -> np.ndarray:
    """Edge maps of randomly deformed copies of ``photos`` (n, s, s) in [0, 1]."""
    rng = np.random.RandomState(seed)
    n, s, _ = photos.shape
    # small random affine jitter about the image centre
    angle = np.deg2rad(rng.uniform(-10.0, 10.0, n))
    scale = rng.uniform(0.9, 1.1, n)
    shear = rng.uniform(-0.12, 0.12, n)
    shift = rng.uniform(-1.0, 1.0, (n, 2))
    cos, sin = np.cos(angle), np.sin(angle)
    # inverse map: output pixel (r, c) samples the photo at A @ (r - centre, c - centre) + centre
    a11, a12 = cos / scale, (-sin + shear) / scale
    a21, a22 = sin / scale, cos / scale
    centre = (s - 1) / 2.0
    rr, cc = np.meshgrid(np.arange(s) - centre, np.arange(s) - centre, indexing="ij")
    src_r = a11[:, None, None] * rr + a12[:, None, None] * cc + centre + shift[:, 0, None, None]
    src_c = a21[:, None, None] * rr + a22[:, None, None] * cc + centre + shift[:, 1, None, None]
    idx = np.broadcast_to(np.arange(n)[:, None, None], src_r.shape)
    warped = ndimage.map_coordinates(photos, [idx, src_r, src_c], order=1, mode="constant")
    # stroke-width change: a gamma in [0.5, 2] thickens (< 1) or thins (> 1) the strokes
    gamma = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
    warped = np.clip(warped, 0.0, 1.0) ** gamma[:, None, None]
    # the "drawing": Gaussian-derivative edge magnitude (outlines of the strokes), each
    # image scaled to a maximum of 1
    edges = ndimage.gaussian_gradient_magnitude(warped, (0.0, _EDGE_SIGMA, _EDGE_SIGMA),
                                                mode="constant")
    peak = edges.reshape(n, -1).max(axis=1)
    edges /= np.where(peak > 0, peak, 1.0)[:, None, None]
    return np.clip(edges, 0.0, 1.0)


@functools.lru_cache(maxsize=1)
def _digits_views_cached():
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = digits.images / 16.0  # (n, 8, 8) in [0, 1]
    photos = ndimage.zoom(small, (1, 2, 2), order=1, mode="nearest", grid_mode=True)
    photos = np.clip(photos, 0.0, 1.0)
    sketches = _sketch_images(photos, _SKETCH_SEED)
    Y = hog_descriptor(sketches, cell=4, n_bins=9)
    X = photos.reshape(photos.shape[0], -1)
    return X, Y, digits.target.astype(np.int64), photos, sketches


def load_digits_views() -> Bunch:
    """scikit-learn's digits in two modalities: a "photo" and a "sketch" of each image.

    The cross-modal default dataset of crossmetric (``crossmetric benchmark``) and the
    photo ↔ sketch image task of :class:`crossmetric.DeepGSM`. Deterministic (the random
    deformations use a fixed internal seed) and fast (the arrays are cached after the first
    call; each call returns fresh copies).

    Notes
    -----
    How the two modalities are made:

    * **photo** ``images_x``: the 8 × 8 digit (grey levels 0..16, divided by 16) upsampled to
      16 × 16 by bilinear interpolation (``scipy.ndimage.zoom``, order 1), values in [0, 1].
    * **sketch** ``images_y``: a second rendering of the same image, drawn by "another hand":
      the photo is warped by a random affine map about its centre (rotation ±10°, scale
      0.9–1.1, shear ±0.12, shift ±1 px; bilinear, zero outside), its strokes are thickened
      or thinned by a random gamma in [0.5, 2] (``v ↦ v^γ``), and the result is replaced by
      its Gaussian-derivative edge magnitude (σ = 0.8 px) scaled to a maximum of 1 -- an
      outline drawing, 16 × 16 in [0, 1]. Matching photo ↔ sketch of the same image is
      therefore not a copy task.
    * ``X`` (256 features): the photo's pixels, flattened row-major.
    * ``Y`` (144 features): :func:`hog_descriptor` of the sketch -- 4 × 4-pixel cells × 9
      unsigned orientation bins, cell-wise L2-normalised. A different modality and dimension.

    Both feature views are non-negative (usable with the ``chi2`` kernels).

    Returns
    -------
    Bunch
        ``X`` (1797, 256), ``Y`` (1797, 144), ``labels`` (digit class 0..9),
        ``instance`` (row ``r``'s image id, ``= r``), ``images_x`` and ``images_y``
        (1797, 16, 16) float64 in [0, 1], ``view_names`` (``("photo pixels",
        "sketch HOG")``), ``DESCR``.
    """
    X, Y, labels, photos, sketches = _digits_views_cached()
    n = X.shape[0]
    return Bunch(
        X=X.copy(),
        Y=Y.copy(),
        labels=labels.copy(),
        instance=np.arange(n, dtype=np.int64),
        images_x=photos.copy(),
        images_y=sketches.copy(),
        view_names=("photo pixels", "sketch HOG"),
        DESCR=(
            "scikit-learn digits in two modalities: X = 16x16 photo pixels, Y = HOG "
            "(4x4 cells x 9 bins) of an edge-map sketch of a randomly deformed copy; "
            "labels = digit class, instance = image id."
        ),
    )
