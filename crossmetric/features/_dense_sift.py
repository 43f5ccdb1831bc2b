"""Dense SIFT on a regular grid (OpenCV's SIFT descriptor at given key points), at several scales.

Public through :mod:`crossmetric.features` (:class:`DenseSIFT`). The grid and key-point helpers
are shared with :class:`crossmetric.features.PatchColorSIFT`.
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import _check_size, check_choice, check_positive_int
from crossmetric.features import _to_gray, check_images, check_images_as_fitted, to_unit_float

__all__ = ["DenseSIFT"]

#: OpenCV's SIFT descriptor has 4 × 4 spatial bins, each ``3 σ`` wide, with ``σ = size / 2``
#: (``SIFT_DESCR_SCL_FCTR = 3``): the bins span ``6 · size`` pixels, so a key point of size
#: ``patch / 6`` has bins covering a ``patch × patch`` square.
_SIZE_PER_PATCH = 1.0 / 6.0
_NORMS = ("l2", "root", "none")


def grid_starts(length: int, patch: int, step: int) -> np.ndarray:
    """First pixel of each patch along one axis: ``offset + step · k``, ``k = 0 .. n − 1`` with
    ``n = (length − patch) // step + 1``; the ``(length − patch) % step`` pixels the grid cannot
    reach are split evenly between the two borders (``offset`` = half of them, rounded down)."""
    n = (length - patch) // step + 1
    offset = ((length - patch) % step) // 2
    return offset + step * np.arange(n)


def grid_keypoints(shape: tuple[int, int], patch: int, step: int):
    """OpenCV key points (upright, ``angle = 0``) at the centres of the grid's patches, row by
    row (top row first, left to right), sized so that the descriptor covers each patch.

    Returns the list of ``cv2.KeyPoint`` and the grid shape ``(n_rows, n_cols)``."""
    import cv2

    ys = grid_starts(shape[0], patch, step) + (patch - 1) / 2.0
    xs = grid_starts(shape[1], patch, step) + (patch - 1) / 2.0
    size = patch * _SIZE_PER_PATCH
    kps = [cv2.KeyPoint(float(x), float(y), size, 0.0) for y in ys for x in xs]
    return kps, (len(ys), len(xs))


def sift_at(image_u8: np.ndarray, keypoints, sift=None) -> np.ndarray:
    """OpenCV SIFT descriptors ``(n_keypoints, 128)`` float32 of a 2-D uint8 image."""
    import cv2

    sift = cv2.SIFT_create() if sift is None else sift
    kept, desc = sift.compute(np.ascontiguousarray(image_u8), keypoints)
    if desc is None or len(kept) != len(keypoints):  # OpenCV keeps every provided key point
        raise RuntimeError(f"OpenCV SIFT returned {0 if desc is None else len(kept)} descriptors "
                           f"for {len(keypoints)} key points.")
    return desc


def normalize_descriptors(desc: np.ndarray, how: str) -> np.ndarray:
    """Normalise the last axis (128 values) of SIFT descriptors.

    ``"l2"``: unit Euclidean norm (OpenCV's values are already normalised, clipped at 0.2 and
    quantised to 0-255 at a scale of 512; this removes the scale); ``"root"``: RootSIFT (unit
    L1 norm, then square root: Euclidean distances become Hellinger distances); ``"none"``:
    OpenCV's values divided by 512. An all-zero descriptor (a flat patch) stays zero."""
    if how == "none":
        return desc / np.asarray(512.0, desc.dtype)
    if how == "root":
        s = desc.sum(axis=-1, keepdims=True)
        return np.sqrt(desc / np.where(s > 0, s, 1))
    n = np.sqrt(np.einsum("...k,...k->...", desc, desc))[..., None]
    return desc / np.where(n > 0, n, 1)


def gray_u8(image: np.ndarray) -> np.ndarray:
    """One image (h, w) or (h, w, 3), uint8 or float in [0, 1] -> grey uint8 (scikit-image's
    ``rgb2gray`` weights for RGB)."""
    if image.dtype == np.uint8 and image.ndim == 2:
        return image
    g = _to_gray(to_unit_float(image[None]))[0]
    return np.round(g * 255.0).astype(np.uint8)


def resize_u8(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """``cv2.resize``: pixel-area averaging when shrinking, bilinear when enlarging."""
    import cv2

    if image.shape[:2] == (height, width):
        return image
    shrink = width <= image.shape[1] and height <= image.shape[0]
    return cv2.resize(image, (width, height),
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def check_float_dtype(dtype) -> np.dtype:
    """A numpy floating dtype (float32 or float64)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.")
    return dt


def check_n_jobs(n_jobs) -> None:
    if n_jobs is not None and (not isinstance(n_jobs, int | np.integer) or n_jobs == 0
                               or isinstance(n_jobs, bool)):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}.")


def map_images(fn, images: np.ndarray, n_jobs, out_dim: int, dtype) -> np.ndarray:
    """``fn(chunk) -> (len(chunk), out_dim)`` over chunks of ``images``, in this process
    (``n_jobs`` None or 1) or with joblib over ``n_jobs`` workers; rows in input order."""
    n = images.shape[0]
    if n_jobs is None or n_jobs == 1 or n < 2:
        return fn(images).astype(dtype, copy=False)
    from joblib import Parallel, delayed, effective_n_jobs

    workers = min(effective_n_jobs(n_jobs), n)
    bounds = np.linspace(0, n, 4 * workers + 1).astype(int)
    chunks = [images[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    parts = Parallel(n_jobs=workers)(delayed(fn)(c) for c in chunks)
    return np.concatenate(parts).astype(dtype, copy=False)


def _dense_sift_rows(images, base, sizes, patch, step, normalize, dtype):
    """Descriptors of a chunk of images (module level: picklable for joblib)."""
    import cv2

    sift = cv2.SIFT_create()
    grids = [grid_keypoints((h, w), patch, step)[0] for w, h in sizes]
    rows = []
    for im in images:
        g = gray_u8(im)
        if base is not None:
            g = resize_u8(g, *base)
        desc = np.concatenate([sift_at(resize_u8(g, w, h), kps, sift)
                               for (w, h), kps in zip(sizes, grids, strict=True)])
        rows.append(normalize_descriptors(desc.astype(np.float64), normalize).astype(dtype).ravel())
    return np.stack(rows)


class DenseSIFT(TransformerMixin, BaseEstimator):
    """Dense SIFT: OpenCV SIFT descriptors on a regular grid of patches, at several scales.

    The CML-AUC paper's face descriptor (cml-auc §IV-A): the aligned 160 × 160 face and its
    rescales to 96 × 96 and 32 × 32, SIFT on 32 × 32 cells every 16 pixels on each, all
    concatenated: ``128 × (81 + 25 + 1) = 13,696`` features (then PCA).

    Each image is converted to grey (scikit-image's ``rgb2gray`` weights, 8-bit), optionally
    resized to ``image_size``, then for each ``s`` in ``scales`` resized to
    ``round(s · height) × round(s · width)`` (OpenCV, pixel-area averaging). On each scaled image a
    grid of ``patch_size × patch_size`` patches every ``step`` pixels (:func:`grid_starts`:
    leftover border pixels split evenly) gets one upright SIFT descriptor per patch
    (``cv2.SIFT_create().compute`` at ``cv2.KeyPoint(centre_x, centre_y, patch_size / 6, 0)``:
    OpenCV's 4 × 4 spatial bins are ``1.5 · size`` pixels wide, so they tile the patch; OpenCV
    smooths the image with σ ≈ 1.52 before the gradients, as for its own key points).

    Parameters
    ----------
    patch_size : int, default=32
        Side of the square cells, in pixels of each scaled image.
    step : int, default=16
        Grid stride in pixels.
    scales : sequence of float, default=(1.0, 0.6, 0.2)
        Rescale factors (each in (0, 1]); 160 × 160 gives 160, 96 and 32 pixels (the paper).
    image_size : (width, height), optional
        Resize every image to this size first (the paper's 160 × 160 crop); default: as given.
    normalize : {"l2", "root", "none"}, default="l2"
        Per descriptor: unit L2 norm, RootSIFT (L1 then square root), or OpenCV's values / 512.
    n_jobs : int, optional
        Images described in parallel by joblib (``-1``: all cores); default one process.
    dtype : numpy dtype, default=np.float64

    Attributes
    ----------
    image_shape_ : tuple
        Shape of one training image.
    scaled_sizes_ : list of (int, int)
        (width, height) of the image at each scale.
    grid_shapes_ : list of (int, int)
        Rows and columns of patches at each scale.
    n_features_out_ : int
        ``128 ×`` the number of patches over all scales; features are ordered scale by scale,
        patch by patch (row-major), 128 per patch (OpenCV's order: 4 × 4 spatial bins × 8
        orientations).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.features import DenseSIFT
    >>> faces = np.random.RandomState(0).randint(0, 256, (2, 160, 160), dtype=np.uint8)
    >>> sift = DenseSIFT().fit(faces)
    >>> sift.grid_shapes_, sift.n_features_out_
    ([(9, 9), (5, 5), (1, 1)], 13696)
    >>> X = sift.transform(faces)
    >>> X.shape, bool(np.allclose(np.linalg.norm(X[:, :128], axis=1), 1.0))
    ((2, 13696), True)
    """

    def __init__(self, patch_size: int = 32, *, step: int = 16, scales=(1.0, 0.6, 0.2),
                 image_size=None, normalize: str = "l2", n_jobs=None, dtype=np.float64):
        self.patch_size = patch_size
        self.step = step
        self.scales = scales
        self.image_size = image_size
        self.normalize = normalize
        self.n_jobs = n_jobs
        self.dtype = dtype

    def _scaled_sizes(self, width: int, height: int) -> list[tuple[int, int]]:
        scales = np.atleast_1d(np.asarray(self.scales, dtype=float))
        if scales.ndim != 1 or scales.size == 0 or not np.all((scales > 0) & (scales <= 1)):
            raise ValueError(f"scales must be a non-empty sequence of factors in (0, 1], got "
                             f"{self.scales!r}.")
        sizes = [(max(1, int(np.floor(s * width + 0.5))), max(1, int(np.floor(s * height + 0.5))))
                 for s in scales]
        for s, (w, h) in zip(scales, sizes, strict=True):
            if min(w, h) < self.patch_size:
                raise ValueError(f"scale {s:g} makes {w}x{h} (width x height) images, smaller "
                                 f"than patch_size={self.patch_size}.")
        return sizes

    def fit(self, images, y=None):
        """Check the parameters against the image size; record the grids and output size."""
        check_positive_int(self.patch_size, "patch_size", minimum=2)
        check_positive_int(self.step, "step")
        check_choice(self.normalize, "normalize", _NORMS)
        check_n_jobs(self.n_jobs)
        check_float_dtype(self.dtype)
        base = _check_size(self.image_size, "image_size")
        images = check_images(images)
        self.image_shape_ = images.shape[1:]
        width, height = base if base is not None else (images.shape[2], images.shape[1])
        self.scaled_sizes_ = self._scaled_sizes(width, height)
        self.grid_shapes_ = [grid_keypoints((h, w), self.patch_size, self.step)[1]
                             for w, h in self.scaled_sizes_]
        self.n_features_out_ = 128 * sum(r * c for r, c in self.grid_shapes_)
        return self

    def transform(self, images) -> np.ndarray:
        """Descriptors of ``images``, shape ``(n, n_features_out_)``."""
        check_is_fitted(self)
        images = check_images_as_fitted(self, images)
        fn = functools.partial(_dense_sift_rows,
                               base=_check_size(self.image_size, "image_size"),
                               sizes=self.scaled_sizes_, patch=self.patch_size, step=self.step,
                               normalize=self.normalize, dtype=np.dtype(self.dtype))
        return map_images(fn, images, self.n_jobs, self.n_features_out_, np.dtype(self.dtype))
