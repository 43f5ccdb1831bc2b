"""Histograms of local binary / ternary pattern codes on a grid of cells, at several radii.

Public through :mod:`crossmetric.features` (:class:`LBPGrid`).
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import check_choice, check_positive_int
from crossmetric.features import _to_gray, check_images, check_images_as_fitted, to_unit_float
from crossmetric.features._dense_sift import check_n_jobs, map_images

__all__ = ["LBPGrid", "pattern_labels", "ternary_codes"]

_METHODS = ("uniform", "nri_uniform", "default", "ror")
_MAX_POINTS = 16


def n_labels(n_points: int, method: str) -> int:
    """Number of distinct codes of ``method`` with ``n_points`` neighbours (as scikit-image)."""
    p = n_points
    return {"uniform": p + 2, "nri_uniform": p * (p - 1) + 3}.get(method, 2 ** p)


@functools.lru_cache(maxsize=16)
def pattern_labels(n_points: int, method: str) -> np.ndarray:
    """Look-up table: bit pattern (bit ``i`` = neighbour ``i`` is set) -> code of ``method``.

    The rules of scikit-image's ``local_binary_pattern``: ``"default"`` the pattern itself,
    ``"ror"`` its smallest circular rotation, ``"uniform"`` the number of set bits when the
    pattern has at most two 0/1 changes along neighbours ``0 .. P-1`` (else ``P + 1``),
    ``"nri_uniform"`` one code per uniform pattern and rotation (``0``, ``1 + (n_ones − 1) P +
    rotation``, ``P (P − 1) + 1`` for all ones) and ``P (P − 1) + 2`` for the others.
    """
    P = n_points
    codes = np.arange(2 ** P, dtype=np.int64)
    if method == "default":
        return codes
    bits = (codes[:, None] >> np.arange(P)) & 1
    if method == "ror":
        rots = [(codes >> k) | ((codes << (P - k)) & (2 ** P - 1)) for k in range(P)]
        return np.min(rots, axis=0)
    changes = np.abs(np.diff(bits, axis=1)).sum(axis=1)
    n_ones = bits.sum(axis=1)
    uniform = changes <= 2
    if method == "uniform":
        return np.where(uniform, n_ones, P + 1)
    first_one = np.argmax(bits == 1, axis=1)
    first_zero = np.argmax(bits == 0, axis=1)
    rot = np.where(first_one == 0, n_ones - first_zero, P - first_one)
    lab = np.where(n_ones == 0, 0, np.where(n_ones == P, P * (P - 1) + 1,
                                            1 + (n_ones - 1) * P + rot))
    return np.where(uniform, lab, P * (P - 1) + 2)


def ternary_codes(gray: np.ndarray, n_points: int, radius: float, threshold: float,
                  method: str) -> tuple[np.ndarray, np.ndarray]:
    """Upper and lower local ternary pattern codes of grey images ``(n, h, w)`` (float64).

    Neighbour ``i`` of pixel ``(r, c)`` is sampled at ``(r − R sin(2πi/P), c + R cos(2πi/P))``
    (offsets rounded to 5 decimals) by bilinear interpolation with zeros outside the image --
    scikit-image's sampling, in the same floating-point order, so that with ``threshold=0`` the
    upper code equals ``skimage.feature.local_binary_pattern``. With ``d`` the neighbour minus
    the centre, the upper pattern sets bit ``i`` when ``d ≥ t`` and the lower pattern when
    ``d ≤ −t`` (Tan & Triggs 2010); both are mapped by :func:`pattern_labels`.
    """
    n, h, w = gray.shape
    P, R = n_points, float(radius)
    rp = np.round(-R * np.sin(2 * np.pi * np.arange(P, dtype=np.double) / P), 5)
    cp = np.round(R * np.cos(2 * np.pi * np.arange(P, dtype=np.double) / P), 5)
    pad = int(np.ceil(R)) + 1
    padded = np.zeros((n, h + 2 * pad, w + 2 * pad))
    padded[:, pad:pad + h, pad:pad + w] = gray
    rows, cols = np.arange(h, dtype=np.intp), np.arange(w, dtype=np.intp)
    upper = np.zeros((n, h, w), dtype=np.int64)
    lower = np.zeros((n, h, w), dtype=np.int64)
    for i in range(P):
        r_pos = rows + rp[i]
        c_pos = cols + cp[i]
        minr, maxr = np.floor(r_pos), np.ceil(r_pos)
        minc, maxc = np.floor(c_pos), np.ceil(c_pos)
        dr = (r_pos - minr)[None, :, None]
        dc = (c_pos - minc)[None, None, :]
        r0, r1 = (minr.astype(np.intp) + pad)[:, None], (maxr.astype(np.intp) + pad)[:, None]
        c0, c1 = (minc.astype(np.intp) + pad)[None, :], (maxc.astype(np.intp) + pad)[None, :]
        top = (1 - dc) * padded[:, r0, c0] + dc * padded[:, r0, c1]
        bottom = (1 - dc) * padded[:, r1, c0] + dc * padded[:, r1, c1]
        d = ((1 - dr) * top + dr * bottom) - gray
        upper |= (d >= threshold).astype(np.int64) << i
        lower |= (d <= -threshold).astype(np.int64) << i
    table = pattern_labels(P, method)
    return table[upper], table[lower]


#: pixels coded at a time (bounds the temporaries of :func:`ternary_codes`)
_PIXELS_PER_BLOCK = 1 << 18


def _lbp_rows(images, *, cell_rows, cell_cols, n_cols, radii, n_points, method, threshold):
    """Histograms of a chunk of images (module level: picklable for joblib)."""
    from skimage.feature import local_binary_pattern

    h, w = images.shape[1:3]
    n_cells = (cell_rows[-1] + 1) * n_cols
    cell = cell_rows[:, None] * n_cols + cell_cols[None, :]
    pixels = np.bincount(cell.ravel(), minlength=n_cells)
    size = n_labels(n_points, method)
    out = []
    step = max(1, _PIXELS_PER_BLOCK // (h * w))
    for start in range(0, images.shape[0], step):
        # 8-bit grey levels, as float
        gray = np.round(_to_gray(to_unit_float(images[start:start + step])) * 255.0)
        m = gray.shape[0]
        codes = []
        for R in radii:
            if threshold is None:
                codes.append(np.stack([local_binary_pattern(im.astype(np.uint8), n_points, R,
                                                            method=method) for im in gray]))
            else:
                codes.extend(ternary_codes(gray, n_points, R, threshold, method))
        width = size * len(codes)  # features per cell
        base = (np.arange(m)[:, None, None] * n_cells + cell[None]) * width
        flat = np.concatenate([(base + k * size + c.astype(np.int64)).ravel()
                               for k, c in enumerate(codes)])
        counts = np.bincount(flat, minlength=m * n_cells * width).reshape(m, n_cells, width)
        out.append((counts / pixels[None, :, None]).reshape(m, -1))
    return np.concatenate(out)


class LBPGrid(TransformerMixin, BaseEstimator):
    """Histograms of LBP or local ternary pattern (LTP) codes on a grid of cells, at several radii.

    The image (grey, 8-bit levels) is cut into ``grid = (n_rows, n_cols)`` cells (pixel row ``r``
    of an ``h``-row image is in cell row ``floor(r · n_rows / h)``, likewise for columns, so the
    cells cover the whole image). For each radius in ``radii`` every pixel gets a code from its
    ``n_points`` neighbours on that circle, and each cell one histogram of each code, normalised
    to unit L1 norm (the fraction of the cell's pixels with each code).

    * ``threshold=None``: LBP codes from scikit-image's ``local_binary_pattern`` (one histogram
      per cell and radius).
    * ``threshold=t`` (grey levels): local ternary patterns (Tan & Triggs 2010), the CMML
      paper's face descriptor (cmml §4.1: uniform LTP on a grid, 9,440 features on CUFSF = 80
      cells × 2 × 59 codes). A neighbour ``t`` or more above the centre sets a bit of the *upper*
      code, one ``t`` or more below it a bit of the *lower* code; each gets its own histogram.
      Sampling as scikit-image (:func:`ternary_codes`).

    Parameters
    ----------
    grid : (int, int), default=(8, 8)
        Cells along the rows and the columns.
    radii : sequence of float, default=(1.0,)
        Several radii give a multi-scale descriptor (e.g. ``(1, 2, 3)``).
    n_points : int, default=8
        Neighbours on each circle (at most 16).
    method : {"nri_uniform", "uniform", "default", "ror"}, default="nri_uniform"
        Code of a pattern (scikit-image's names): ``"nri_uniform"`` -- the classic face
        descriptor's 59 codes for 8 neighbours, ``P (P − 1) + 3``; ``"uniform"`` rotation
        invariant, ``P + 2``; ``"default"`` every pattern, ``2^P``; ``"ror"`` its smallest
        rotation (``2^P`` bins, most empty).
    threshold : float, optional
        ``None``: LBP; a number ``t ≥ 0`` (grey levels 0-255, e.g. 5): LTP.
    n_jobs : int, optional
        Images described in parallel by joblib; default one process.

    Attributes
    ----------
    n_features_out_ : int
        ``n_rows · n_cols · len(radii) · (1 or 2) · n_codes``, cell by cell (row-major), then
        radius, then (LTP) upper before lower, then code.
    image_shape_ : tuple

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.features import LBPGrid
    >>> faces = np.random.RandomState(0).randint(0, 256, (2, 40, 32), dtype=np.uint8)
    >>> ltp = LBPGrid(grid=(4, 4), radii=(1, 2), threshold=5).fit(faces)
    >>> X = ltp.transform(faces)
    >>> X.shape  # 16 cells x 2 radii x (upper, lower) x 59 codes
    (2, 3776)
    >>> float(X[0, :59].sum())  # each histogram sums to one
    1.0
    """

    def __init__(self, grid=(8, 8), *, radii=(1.0,), n_points: int = 8,
                 method: str = "nri_uniform", threshold=None, n_jobs=None):
        self.grid = grid
        self.radii = radii
        self.n_points = n_points
        self.method = method
        self.threshold = threshold
        self.n_jobs = n_jobs

    def _check_params(self) -> tuple[int, int]:
        try:
            rows, cols = (int(g) for g in self.grid)
            ok = rows >= 1 and cols >= 1 and all(float(g) == int(g) for g in self.grid)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"grid must be a pair of positive integers (n_rows, n_cols), got "
                             f"{self.grid!r}.")
        radii = np.atleast_1d(np.asarray(self.radii, dtype=object))
        if radii.ndim != 1 or radii.size == 0 or not all(
                isinstance(r, int | float | np.number) and not isinstance(r, bool) and r > 0
                and np.isfinite(r) for r in radii):
            raise ValueError(f"radii must be a non-empty sequence of positive numbers, got "
                             f"{self.radii!r}.")
        check_positive_int(self.n_points, "n_points")
        if self.n_points > _MAX_POINTS:
            raise ValueError(f"n_points must be at most {_MAX_POINTS}, got {self.n_points}.")
        check_choice(self.method, "method", _METHODS)
        t = self.threshold
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float | np.number)
                              or not np.isfinite(t) or t < 0):
            raise ValueError(f"threshold must be None (LBP) or a number >= 0 (LTP, grey levels "
                             f"0-255), got {t!r}.")
        check_n_jobs(self.n_jobs)
        return rows, cols

    def fit(self, images, y=None):
        """Check the parameters against the image size; record the output size."""
        rows, cols = self._check_params()
        images = check_images(images)
        h, w = images.shape[1:3]
        if h < rows or w < cols:
            raise ValueError(f"images of {h} x {w} pixels cannot hold grid={self.grid!r} "
                             "(at most one cell per pixel).")
        self.image_shape_ = images.shape[1:]
        parts = 1 if self.threshold is None else 2
        self.n_features_out_ = (rows * cols * len(np.atleast_1d(self.radii)) * parts
                                * n_labels(self.n_points, self.method))
        return self

    def transform(self, images) -> np.ndarray:
        """Histograms of ``images``, shape ``(n, n_features_out_)``, float64."""
        check_is_fitted(self)
        rows, cols = self._check_params()
        images = check_images_as_fitted(self, images)
        h, w = images.shape[1:3]
        fn = functools.partial(
            _lbp_rows, cell_rows=(np.arange(h) * rows) // h, cell_cols=(np.arange(w) * cols) // w,
            n_cols=cols, radii=[float(r) for r in np.atleast_1d(self.radii)],
            n_points=self.n_points, method=self.method,
            threshold=None if self.threshold is None else float(self.threshold))
        return map_images(fn, images, self.n_jobs, self.n_features_out_, np.float64)
