"""Image descriptors as scikit-learn transformers: ``transform(images)`` → ``(n, n_features)``.

* :class:`StripHistograms` -- the PCCA paper's VIPeR descriptor (pcca §4, after PRDC [33]):
  16-bin histograms of every channel of RGB, HSV and YCrCb plus LBP texture histograms, on 6
  non-overlapping horizontal strips, every histogram L1-normalised, all concatenated.
* :class:`HOG` -- histogram of oriented gradients: scikit-image's, one image at a time, or
  the library's vectorised cell HOG (``implementation="numpy"``).
* :class:`DenseSIFT` -- OpenCV SIFT on a grid of patches at several scales (the CML-AUC paper's
  face descriptor, cml-auc §IV-A).
* :class:`LBPGrid` -- histograms of LBP codes (scikit-image) or of local ternary pattern codes
  (upper + lower, Tan & Triggs; the CMML paper's face descriptor, cmml §4.1) on a grid of cells,
  at one or several radii.
* :class:`PatchColorSIFT` -- dense patches, each described by LAB colour histograms at three
  downsampling levels and SIFT in each LAB channel (Zhao et al. CVPR 2013, the hand-crafted
  re-id feature of the GSM paper §5.5).
* :class:`LOMO` -- local maximal occurrence of joint HSV and SILTP codes along each row of
  blocks, at three scales, after Retinex (Liao et al. CVPR 2015): the hand-crafted re-id
  descriptor most later re-id metric learners are measured on.

The last four live in their own modules and are imported on first use (OpenCV is optional:
``pip install opencv-python-headless``, the ``images`` extra). All take uint8 images (values
0-255) or float images in [0, 1], RGB ``(n, h, w, 3)`` or grey ``(n, h, w)`` (PatchColorSIFT: RGB
only). Colour conversions, LBP and HOG come from scikit-image, SIFT from OpenCV; histograms are
vectorised ``np.bincount`` calls over blocks of images.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import check_choice, check_positive_int

#: public name -> module that defines it (imported on first use)
_LAZY = {"DenseSIFT": "crossmetric.features._dense_sift",
         "LBPGrid": "crossmetric.features._local_patterns",
         "PatchColorSIFT": "crossmetric.features._patch_color_sift",
         "LOMO": "crossmetric.features._lomo"}

__all__ = ["StripHistograms", "HOG", *_LAZY, "COLOR_SPACES", "check_images",
           "check_images_as_fitted"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crossmetric.features' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

#: colour space -> value range of each of its channels (after scikit-image's conversion)
COLOR_SPACES = {
    "rgb": ((0.0, 1.0),) * 3,
    "hsv": ((0.0, 1.0),) * 3,
    # full-range YCrCb (as JPEG / OpenCV): Y in [0, 1], Cr and Cb in [-0.5, 0.5]
    "ycrcb": ((0.0, 1.0), (-0.5, 0.5), (-0.5, 0.5)),
    "gray": ((0.0, 1.0),),
}
#: pixels converted and histogrammed at a time: small blocks stay in the CPU caches (measured on
#: VIPeR without LBP: 2^21 pixels per block 11.6 s, 2^16 5.7 s, 2^14 4.9 s on a loaded machine)
_PIXELS_PER_BLOCK = 1 << 15


def check_images(images, name: str = "images", *, allow_gray: bool = True) -> np.ndarray:
    """Validate images: ``(n, h, w, 3)`` RGB or (with ``allow_gray``) ``(n, h, w)`` grey,
    integer values 0-255 or float values in [0, 1]. Returns the array unchanged (see
    :func:`to_unit_float` for the conversion, done block by block by the transformers)."""
    arr = np.asarray(images)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}.")
    ok = (arr.ndim == 4 and arr.shape[-1] == 3) or (allow_gray and arr.ndim == 3)
    if not ok:
        want = "(n, h, w, 3) RGB or (n, h, w) grey" if allow_gray else "(n, h, w, 3) RGB"
        raise ValueError(f"{name} must be an array of {want} images, got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"{name} must hold at least one non-empty image, got shape {arr.shape}.")
    if arr.dtype == bool:
        return arr.astype(np.uint8) * 255
    if np.issubdtype(arr.dtype, np.integer):
        if arr.min() < 0 or arr.max() > 255:
            raise ValueError(f"{name}: integer images must have values in 0-255, got "
                             f"[{arr.min()}, {arr.max()}].")
        return arr
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity.")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(f"{name}: float images must have values in [0, 1], got "
                         f"[{arr.min():.4g}, {arr.max():.4g}] (pass uint8 images for 0-255).")
    return arr


def check_images_as_fitted(est, images, *, allow_gray: bool = True) -> np.ndarray:
    """:func:`check_images`, then the per-image shape that the fitted descriptor ``est``
    recorded in ``image_shape_`` (one message for every descriptor of this package)."""
    images = check_images(images, allow_gray=allow_gray)
    if images.shape[1:] != est.image_shape_:
        raise ValueError(f"images have shape {images.shape[1:]} per image, but "
                         f"{type(est).__name__} was fitted on {est.image_shape_}.")
    return images


def to_unit_float(images: np.ndarray) -> np.ndarray:
    """float64 values in [0, 1]: integer images (0-255) are divided by 255."""
    if np.issubdtype(images.dtype, np.integer):
        return images.astype(np.float64) / 255.0
    return images.astype(np.float64, copy=False)


def _to_gray(images: np.ndarray) -> np.ndarray:
    from skimage.color import rgb2gray

    return images if images.ndim == 3 else rgb2gray(images)


def rgb_to_hsv(images: np.ndarray) -> np.ndarray:
    """HSV of RGB values in [0, 1], equal to ``skimage.color.rgb2hsv`` (same formula and tie
    rules: blue over green over red when several channels are the maximum; hue 0 for greys).

    Written out because scikit-image's version takes ~8 s on the 7.8 M pixels of VIPeR on a busy
    machine (matplotlib's too); this one is a handful of whole-array operations.
    """
    r, g, b = images[..., 0], images[..., 1], images[..., 2]
    v = images.max(axis=-1)
    delta = v - images.min(axis=-1)
    grey = delta == 0
    safe = np.where(grey, 1.0, delta)
    h = np.where(b == v, 4.0 + (r - g) / safe,
                 np.where(g == v, 2.0 + (b - r) / safe, (g - b) / safe))
    h = np.where(grey, 0.0, (h / 6.0) % 1.0)
    s = np.where(grey, 0.0, delta / np.where(v == 0, 1.0, v))
    return np.stack([h, s, v], axis=-1)


def _convert(images: np.ndarray, space: str) -> np.ndarray:
    """``(n, h, w, c)`` channels of ``space`` (scikit-image conversions; HSV see
    :func:`rgb_to_hsv`)."""
    from skimage import color

    if space == "gray":
        return _to_gray(images)[..., None]
    if space == "rgb":
        return images
    if space == "hsv":
        return rgb_to_hsv(images)
    ypbpr = color.rgb2ypbpr(images, channel_axis=-1)  # Y, Pb (= Cb), Pr (= Cr)
    return ypbpr[..., [0, 2, 1]]


def _bin_index(values: np.ndarray, lo: float, hi: float, n_bins: int) -> np.ndarray:
    """Equal-width bins over [lo, hi]; the top edge belongs to the last bin."""
    b = np.floor((values - lo) * (n_bins / (hi - lo))).astype(np.int64)
    return np.clip(b, 0, n_bins - 1)


class StripHistograms(TransformerMixin, BaseEstimator):
    """Colour and LBP histograms on horizontal strips (the PCCA / PRDC VIPeR descriptor).

    Each image is cut into ``n_strips`` non-overlapping horizontal strips (row ``r`` of an
    ``h``-row image belongs to strip ``floor(r · n_strips / h)``). On each strip it takes one
    ``n_bins``-bin histogram of every channel of every colour space in ``color_spaces`` and,
    when ``lbp`` is set, one histogram of the uniform LBP codes of the grey image. Every
    histogram is normalised to unit L1 norm (pcca §4) and all are concatenated, strip by strip:
    ``[strip 0: space 0 channel 0, ..., LBP | strip 1: ...]``.

    Parameters
    ----------
    n_strips : int, default=6
    n_bins : int, default=16
        Bins per colour channel, equal width over the channel's range: RGB and HSV in [0, 1],
        YCrCb full-range (JPEG / OpenCV convention: Y in [0, 1], Cr and Cb in [-0.5, 0.5],
        scikit-image's ``rgb2ypbpr``), grey in [0, 1].
    color_spaces : "auto" or sequence of {"rgb", "hsv", "ycrcb", "gray"}, default="auto"
        ``"auto"``: RGB, HSV and YCrCb (the paper) for RGB images, ``("gray",)`` for grey ones.
        Colour spaces other than ``"gray"`` need RGB images.
    lbp : bool, default=True
        Add the LBP texture histogram of each strip. The paper only says "texture histograms
        based on LBP"; the default is the usual rotation-invariant uniform LBP with 8 neighbours
        at radius 1 (scikit-image ``local_binary_pattern(..., method="uniform")``), whose
        ``P + 2 = 10`` codes give a 10-bin histogram.
    lbp_points : int, default=8
    lbp_radius : float, default=1.0
    lbp_method : {"uniform", "nri_uniform", "default", "ror", "var"... }, default="uniform"
        Passed to scikit-image. ``"uniform"`` has ``P + 2`` codes, ``"nri_uniform"``
        ``P (P − 1) + 3``, ``"default"`` / ``"ror"`` ``2^P``.
    normalize : {"histogram", "vector", "root"}, default="histogram"
        ``"histogram"``: every histogram sums to 1 (the paper, literally); the vector then sums
        to the number of histograms (60 with the defaults). ``"vector"``: in addition the whole
        vector is divided by the number of histograms, so it sums to 1 -- the relative weights
        of the histograms are unchanged, only the scale of χ² distances is (a χ²-RBF kernel
        with ``γ = 1`` is then meaningful; see :mod:`crossmetric.reproduce`). ``"root"``:
        every histogram sums to 1, then the square root of every bin (the Hellinger map of
        :class:`crossmetric.kernels.HellingerMap`, as RootSIFT does for SIFT): Euclidean
        distances become Hellinger distances between the histograms, inner products their
        Bhattacharyya coefficients, and linear methods on the result are the papers' ``-sqrt``
        variants (pcca §4). ``crossmetric benchmark --descriptor strips`` uses it.

    Attributes
    ----------
    n_features_out_ : int
    feature_names_ : list of str
        ``"s{strip}_{space}{channel}_{bin}"`` / ``"s{strip}_lbp_{code}"``.
    image_shape_ : tuple
        Shape of one training image.
    """

    def __init__(self, n_strips: int = 6, *, n_bins: int = 16, color_spaces="auto",
                 lbp: bool = True, lbp_points: int = 8, lbp_radius: float = 1.0,
                 lbp_method: str = "uniform", normalize: str = "histogram"):
        self.n_strips = n_strips
        self.n_bins = n_bins
        self.color_spaces = color_spaces
        self.lbp = lbp
        self.lbp_points = lbp_points
        self.lbp_radius = lbp_radius
        self.lbp_method = lbp_method
        self.normalize = normalize

    # -------------------------------------------------------------------------- settings
    def _spaces(self, gray: bool) -> tuple[str, ...]:
        spaces = self.color_spaces
        if isinstance(spaces, str) and spaces == "auto":
            return ("gray",) if gray else ("rgb", "hsv", "ycrcb")
        if isinstance(spaces, str):
            spaces = (spaces,)
        spaces = tuple(spaces)
        for s in spaces:
            if s not in COLOR_SPACES:
                raise ValueError(f"color_spaces must be 'auto' or a sequence of "
                                 f"{tuple(COLOR_SPACES)}, got {self.color_spaces!r}.")
        if gray and any(s != "gray" for s in spaces):
            raise ValueError(f"color_spaces={self.color_spaces!r} needs RGB images (n, h, w, 3); "
                             "grey images only allow 'gray'.")
        if not spaces and not self.lbp:
            raise ValueError("color_spaces is empty and lbp=False: no histogram to compute.")
        return spaces

    def _n_lbp_codes(self) -> int:
        p = self.lbp_points
        return {"uniform": p + 2, "nri_uniform": p * (p - 1) + 3}.get(self.lbp_method, 2 ** p)

    def _check_params(self):
        check_positive_int(self.n_strips, "n_strips")
        check_positive_int(self.n_bins, "n_bins")
        if self.normalize not in ("histogram", "vector", "root"):
            raise ValueError(f"normalize must be 'histogram', 'vector' or 'root', got "
                             f"{self.normalize!r}.")
        if self.lbp:
            check_positive_int(self.lbp_points, "lbp_points")
            if self.lbp_method not in ("uniform", "nri_uniform", "default", "ror"):
                raise ValueError(f"lbp_method must be one of 'uniform', 'nri_uniform', "
                                 f"'default', 'ror', got {self.lbp_method!r}.")
            if not np.isscalar(self.lbp_radius) or not self.lbp_radius > 0:
                raise ValueError(f"lbp_radius must be a positive number, got "
                                 f"{self.lbp_radius!r}.")

    # ------------------------------------------------------------------------------- API
    def fit(self, images, y=None):
        """Check the parameters and record the image shape and the feature names."""
        self._check_params()
        images = check_images(images)
        spaces = self._spaces(images.ndim == 3)
        if images.shape[1] < self.n_strips:
            raise ValueError(f"images have {images.shape[1]} rows, fewer than "
                             f"n_strips={self.n_strips}.")
        self.image_shape_ = images.shape[1:]
        names = []
        for s in range(self.n_strips):
            for space in spaces:
                for c in range(len(COLOR_SPACES[space])):
                    names += [f"s{s}_{space}{c}_{b}" for b in range(self.n_bins)]
            if self.lbp:
                names += [f"s{s}_lbp_{b}" for b in range(self._n_lbp_codes())]
        self.feature_names_ = names
        self.n_features_out_ = len(names)
        self.n_features_in_ = int(np.prod(self.image_shape_))
        return self

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self)
        return np.asarray(self.feature_names_, dtype=object)

    def _codes(self, block: np.ndarray, spaces) -> tuple[list[np.ndarray], list[int]]:
        """Per pixel, the bin of each histogram channel: list of (n, h, w) int arrays."""
        codes, sizes = [], []
        for space in spaces:
            conv = _convert(block, space)
            for c, (lo, hi) in enumerate(COLOR_SPACES[space]):
                codes.append(_bin_index(conv[..., c], lo, hi, self.n_bins))
                sizes.append(self.n_bins)
        if self.lbp:
            from skimage.feature import local_binary_pattern

            gray = _to_gray(block)
            # LBP on 8-bit grey levels (as usual); integer codes
            g8 = np.round(gray * 255.0).astype(np.uint8)
            lbp = np.stack([local_binary_pattern(im, self.lbp_points, self.lbp_radius,
                                                 method=self.lbp_method) for im in g8])
            codes.append(lbp.astype(np.int64))
            sizes.append(self._n_lbp_codes())
        return codes, sizes

    def transform(self, images) -> np.ndarray:
        """Descriptors of ``images``.

        Parameters
        ----------
        images : array of shape (n, h, w, 3) or (n, h, w)
            uint8 (0-255) or float in [0, 1]; the shape of the training images.

        Returns
        -------
        ndarray of shape ``(n, n_features_out_)``, float64, non-negative
        """
        check_is_fitted(self)
        images = check_images_as_fitted(self, images)
        spaces = self._spaces(images.ndim == 3)
        n, h, w = images.shape[:3]
        S = self.n_strips
        strip_of_row = (np.arange(h) * S) // h
        per_strip = np.bincount(strip_of_row, minlength=S) * w  # pixels per strip
        out = np.empty((n, self.n_features_out_))
        rows = max(1, _PIXELS_PER_BLOCK // (h * w))
        for start in range(0, n, rows):
            block = to_unit_float(images[start:start + rows])
            m = block.shape[0]
            codes, sizes = self._codes(block, spaces)
            offsets = np.cumsum([0] + sizes)
            width = offsets[-1]  # features per strip
            # flat index: (image, strip, histogram offset + bin)
            base = (np.arange(m)[:, None, None] * S + strip_of_row[None, :, None]) * width
            flat = np.concatenate([(base + offsets[k] + codes[k]).ravel()
                                   for k in range(len(codes))])
            counts = np.bincount(flat, minlength=m * S * width).reshape(m, S, width)
            out[start:start + m] = (counts / per_strip[None, :, None]).reshape(m, -1)
        if self.normalize == "vector":
            out /= S * len(sizes)
        elif self.normalize == "root":
            np.sqrt(out, out=out)
        return out


def _cell_hog(images: np.ndarray, cell: tuple[int, int], n_bins: int) -> np.ndarray:
    """The vectorised cell HOG of ``HOG(implementation="numpy")`` on float images.

    Central-difference gradients (``np.gradient``; RGB: the channel of largest magnitude at
    each pixel); each pixel votes its magnitude into ``n_bins`` unsigned orientation bins over
    [0, π), split linearly between the two nearest bin centres; votes are summed over
    non-overlapping cells and each cell's histogram is L2-normalised,
    ``h / sqrt(‖h‖² + ε²)`` with ε = 1e-3 of the image's largest magnitude (so empty cells stay
    near zero).
    """
    n, h, w = images.shape[:3]
    ch, cw = cell
    gy, gx = np.gradient(images, axis=(1, 2))
    mag = np.hypot(gx, gy)
    if images.ndim == 4:  # the channel of largest magnitude, as scikit-image
        pick = mag.argmax(axis=-1)[..., None]
        gx, gy, mag = (np.take_along_axis(a, pick, axis=-1)[..., 0] for a in (gx, gy, mag))
    ang = np.mod(np.arctan2(gy, gx), np.pi)  # unsigned orientation in [0, π)
    pos = ang / (np.pi / n_bins) - 0.5  # position between bin centres
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    lo_bin, hi_bin = np.mod(lo, n_bins), np.mod(lo + 1, n_bins)
    cy, cx = h // ch, w // cw
    cell_id = (np.arange(h)[:, None] // ch) * cx + (np.arange(w)[None, :] // cw)
    base = (np.arange(n)[:, None, None] * (cy * cx) + cell_id[None]) * n_bins
    hist = np.zeros(n * cy * cx * n_bins)
    np.add.at(hist, (base + lo_bin).ravel(), (mag * (1.0 - frac)).ravel())
    np.add.at(hist, (base + hi_bin).ravel(), (mag * frac).ravel())
    hist = hist.reshape(n, cy * cx, n_bins)
    eps = 1e-3 * np.maximum(mag.reshape(n, -1).max(axis=1), 1e-12)
    norm = np.sqrt(np.einsum("ncb,ncb->nc", hist, hist) + eps[:, None] ** 2)
    return (hist / norm[:, :, None]).reshape(n, -1)


class HOG(TransformerMixin, BaseEstimator):
    """Histogram of oriented gradients of each image.

    Parameters
    ----------
    orientations : int, default=9
    pixels_per_cell : (int, int), default=(8, 8)
    cells_per_block : (int, int), default=(2, 2)
    block_norm : {"L1", "L1-sqrt", "L2", "L2-Hys"}, default="L2-Hys"
    transform_sqrt : bool, default=False
        Gamma compression (square root of the image) before the gradients.
    implementation : {"skimage", "numpy"}, default="skimage"
        ``"skimage"``: scikit-image's ``skimage.feature.hog``, one image at a time.
        ``"numpy"``: the library's vectorised cell HOG (:func:`crossmetric.datasets.hog_descriptor`,
        the embedded digits' sketch view): votes split linearly between the two nearest
        orientation bins and each cell normalised alone, so it needs
        ``cells_per_block=(1, 1)``, ``block_norm="L2"`` and image sides that are multiples of
        the cell; all images at once.

    RGB images use, at each pixel, the gradient of the channel with the largest magnitude
    (scikit-image's ``channel_axis``); grey images use their single channel. Every image must
    have the training images' shape.

    Attributes
    ----------
    n_features_out_ : int
    image_shape_ : tuple
    """

    def __init__(self, orientations: int = 9, *, pixels_per_cell=(8, 8), cells_per_block=(2, 2),
                 block_norm: str = "L2-Hys", transform_sqrt: bool = False,
                 implementation: str = "skimage"):
        self.orientations = orientations
        self.pixels_per_cell = pixels_per_cell
        self.cells_per_block = cells_per_block
        self.block_norm = block_norm
        self.transform_sqrt = transform_sqrt
        self.implementation = implementation

    def _check_numpy(self, shape: tuple) -> None:
        cell = tuple(int(c) for c in self.pixels_per_cell)
        if tuple(self.cells_per_block) != (1, 1) or self.block_norm != "L2":
            raise ValueError(f"implementation='numpy' normalises each cell alone: it needs "
                             f"cells_per_block=(1, 1) and block_norm='L2', got "
                             f"{tuple(self.cells_per_block)} and {self.block_norm!r}.")
        if len(cell) != 2 or min(cell) < 1 or shape[0] % cell[0] or shape[1] % cell[1]:
            raise ValueError(f"image sides {tuple(shape[:2])} must be multiples of "
                             f"pixels_per_cell={self.pixels_per_cell} (implementation='numpy').")

    def _batch(self, images: np.ndarray) -> np.ndarray:
        images = to_unit_float(images)
        if self.implementation == "numpy":
            return _cell_hog(np.sqrt(images) if self.transform_sqrt else images,
                             tuple(int(c) for c in self.pixels_per_cell), int(self.orientations))
        out = np.empty((images.shape[0], self.n_features_out_))
        for k, im in enumerate(images):
            out[k] = self._one(im)
        return out

    def _one(self, image: np.ndarray) -> np.ndarray:
        from skimage.feature import hog

        return hog(image, orientations=self.orientations,
                   pixels_per_cell=tuple(self.pixels_per_cell),
                   cells_per_block=tuple(self.cells_per_block), block_norm=self.block_norm,
                   transform_sqrt=self.transform_sqrt, feature_vector=True,
                   channel_axis=-1 if image.ndim == 3 else None)

    def fit(self, images, y=None):
        """Check the parameters on the first image and record the output size."""
        check_positive_int(self.orientations, "orientations")
        if self.block_norm not in ("L1", "L1-sqrt", "L2", "L2-Hys"):
            raise ValueError(f"block_norm must be one of 'L1', 'L1-sqrt', 'L2', 'L2-Hys', got "
                             f"{self.block_norm!r}.")
        impl = check_choice(self.implementation, "implementation", ("skimage", "numpy"))
        images = check_images(images)
        self.image_shape_ = images.shape[1:]
        if impl == "numpy":
            self._check_numpy(self.image_shape_)
            cell = tuple(int(c) for c in self.pixels_per_cell)
            self.n_features_out_ = (self.image_shape_[0] // cell[0]) * (
                self.image_shape_[1] // cell[1]) * int(self.orientations)
            self.n_features_in_ = int(np.prod(self.image_shape_))
            return self
        try:
            self.n_features_out_ = int(self._one(to_unit_float(images[0])).size)
        except ValueError as exc:
            raise ValueError(f"HOG cannot describe images of shape {self.image_shape_} with "
                             f"pixels_per_cell={self.pixels_per_cell}, cells_per_block="
                             f"{self.cells_per_block}: {exc}") from None
        self.n_features_in_ = int(np.prod(self.image_shape_))
        return self

    def transform(self, images) -> np.ndarray:
        """HOG vectors, shape ``(n, n_features_out_)``."""
        check_is_fitted(self)
        images = check_images_as_fitted(self, images)
        return self._batch(images)
