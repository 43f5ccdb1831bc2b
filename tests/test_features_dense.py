"""DenseSIFT, LBPGrid and PatchColorSIFT against slow loops (one OpenCV call per key point,
per-cell / per-pixel histograms), plus shapes, dtypes, invariances and bad input."""

import math

import numpy as np
import pytest
from joblib import parallel_config
from scipy.ndimage import gaussian_filter
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from crossmetric.features._dense_sift import DenseSIFT, grid_starts
from crossmetric.features._local_patterns import LBPGrid, pattern_labels, ternary_codes
from crossmetric.features._patch_color_sift import (
    PATCH_COLOR_SPACES,
    PatchColorSIFT,
    to_patch_color,
)

pytest.importorskip("skimage", reason="the descriptors need scikit-image ([images])")

from skimage.color import rgb2gray, rgb2lab  # noqa: E402
from skimage.feature import local_binary_pattern  # noqa: E402

try:
    import cv2
except ImportError:  # OpenCV is optional (the images extra); LBPGrid does not need it
    cv2 = None
needs_cv2 = pytest.mark.skipif(cv2 is None, reason="opencv-python-headless is not installed")


def _smooth_images(n, h, w, channels=None, seed=0):
    """uint8 images with real gradients: blurred noise stretched to 0-255."""
    rng = np.random.RandomState(seed)
    shape = (n, h, w) if channels is None else (n, h, w, channels)
    sigma = (0, 2, 2) if channels is None else (0, 2, 2, 0)
    x = gaussian_filter(rng.rand(*shape), sigma)
    x = (x - x.min()) / (x.max() - x.min())
    return np.round(x * 255).astype(np.uint8)


def _sift_one(img, x, y, size):
    """OpenCV SIFT of one key point, unit L2 norm."""
    _, d = cv2.SIFT_create().compute(img, [cv2.KeyPoint(float(x), float(y), size, 0.0)])
    return d[0] / np.linalg.norm(d[0])


# ---------------------------------------------------------------------------------- DenseSIFT
@needs_cv2
def test_grid_starts_cover_and_centre():
    assert grid_starts(160, 32, 16).tolist() == list(range(0, 129, 16))
    s = grid_starts(100, 32, 16)  # 4 pixels left over: 2 on each side
    assert s.tolist() == [2, 18, 34, 50, 66] and 100 - (s[-1] + 32) == 2
    assert grid_starts(32, 32, 16).tolist() == [0]


@needs_cv2
def test_dense_sift_equals_per_keypoint_loop():
    imgs = _smooth_images(2, 64, 48)
    est = DenseSIFT(16, step=8, scales=(1.0, 0.5)).fit(imgs)
    assert est.grid_shapes_ == [(7, 5), (3, 2)]
    fast = est.transform(imgs)
    assert fast.shape == (2, 128 * (35 + 6)) and fast.dtype == np.float64
    for k, img in enumerate(imgs):
        slow = []
        for w, h in [(48, 64), (24, 32)]:
            im = img if w == 48 else cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
            for y0 in range(0, h - 16 + 1, 8):
                for x0 in range(0, w - 16 + 1, 8):
                    slow.append(_sift_one(im, x0 + 7.5, y0 + 7.5, 16 / 6))
        np.testing.assert_allclose(fast[k], np.concatenate(slow), atol=1e-6)


@needs_cv2
def test_dense_sift_rgb_float_and_parallel_agree():
    rgb = _smooth_images(3, 40, 40, channels=3, seed=1)
    gray = np.round(rgb2gray(rgb) * 255).astype(np.uint8)
    est = DenseSIFT(16, step=8, scales=(1.0,))
    a = est.fit_transform(rgb)
    np.testing.assert_array_equal(a, clone(est).fit_transform(gray))
    np.testing.assert_array_equal(a, clone(est).fit_transform(rgb / 255.0))
    with parallel_config(backend="threading"):  # the chunking, without process start-up
        np.testing.assert_array_equal(a, clone(est).set_params(n_jobs=2).fit_transform(rgb))
    b = clone(est).set_params(dtype=np.float32).fit_transform(rgb)
    assert b.dtype == np.float32 and np.allclose(a, b, atol=1e-6)


@needs_cv2
def test_dense_sift_translation_and_brightness():
    img = _smooth_images(1, 64, 96, seed=2)
    est = DenseSIFT(16, step=8, scales=(1.0,))
    full = est.fit_transform(img).reshape(7, 11, 128)
    crop = clone(est).fit_transform(img[:, :, 8:]).reshape(7, 10, 128)
    # crop column j is full column j + 1; cells 16+ px away from the crop's new left border
    np.testing.assert_allclose(crop[:, 2:], full[:, 3:], atol=1e-6)
    dark = (img.astype(int) * 200 // 255).astype(np.uint8)
    shifted = est.fit_transform(dark + 40)  # same gradients: same descriptors up to rounding
    np.testing.assert_allclose(shifted, est.fit_transform(dark), atol=0.01)


@needs_cv2
def test_dense_sift_image_size_and_normalisations():
    imgs = _smooth_images(2, 64, 48, seed=3)
    small = np.stack([cv2.resize(im, (40, 48), interpolation=cv2.INTER_AREA) for im in imgs])
    a = DenseSIFT(16, step=8, scales=(1.0,), image_size=(40, 48)).fit_transform(imgs)
    np.testing.assert_array_equal(a, DenseSIFT(16, step=8, scales=(1.0,)).fit_transform(small))
    raw = DenseSIFT(16, step=8, scales=(1.0,), normalize="none").fit_transform(small)
    root = DenseSIFT(16, step=8, scales=(1.0,), normalize="root").fit_transform(small)
    raw, root = raw.reshape(-1, 128), root.reshape(-1, 128)
    np.testing.assert_allclose(root ** 2, raw / raw.sum(axis=1, keepdims=True), atol=1e-12)
    assert raw.max() <= 255 / 512 and np.allclose(np.linalg.norm(raw, axis=1), 1, atol=0.01)


@needs_cv2
def test_dense_sift_paper_dimensions():
    est = DenseSIFT(image_size=(160, 160)).fit(np.zeros((1, 250, 200), np.uint8))
    assert est.scaled_sizes_ == [(160, 160), (96, 96), (32, 32)]
    assert est.n_features_out_ == 13696  # 128 x (81 + 25 + 1), cml-auc §IV-A
    flat = est.transform(np.full((1, 250, 200), 90, np.uint8))
    assert np.all(flat == 0)  # no gradient: zero descriptors, no NaN


@needs_cv2
@pytest.mark.parametrize("params, match", [
    (dict(scales=(1.0, 0.0)), "scales"), (dict(scales=(1.5,)), "scales"),
    (dict(scales=(0.1,)), "smaller than patch_size"), (dict(patch_size=1), "patch_size"),
    (dict(step=0), "step"), (dict(normalize="l1"), "normalize"),
    (dict(image_size=(0, 5)), "image_size"), (dict(image_size="big"), "image_size"),
    (dict(n_jobs=0), "n_jobs"), (dict(dtype=int), "dtype"), (dict(dtype="fancy"), "dtype"),
])
def test_dense_sift_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        DenseSIFT(**params).fit(np.zeros((1, 64, 64), np.uint8))


@needs_cv2
def test_dense_sift_bad_images():
    with pytest.raises(NotFittedError):
        DenseSIFT().transform(np.zeros((1, 64, 64), np.uint8))
    est = DenseSIFT(scales=(1.0,)).fit(np.zeros((1, 64, 64), np.uint8))
    with pytest.raises(ValueError, match="fitted on"):
        est.transform(np.zeros((1, 64, 65), np.uint8))
    with pytest.raises(ValueError, match="values"):
        est.transform(np.full((1, 64, 64), 300))


# ------------------------------------------------------------------------------------ LBPGrid
def _slow_cells(code_maps, grid, n_codes):
    """Per-cell histograms with explicit loops over the cells' pixels."""
    h, w = code_maps[0].shape
    rows, cols = grid
    out = []
    for i in range(rows):
        for j in range(cols):
            pix = [(r, c) for r in range(h) for c in range(w)
                   if (r * rows) // h == i and (c * cols) // w == j]
            for codes in code_maps:
                hist = np.zeros(n_codes)
                for r, c in pix:
                    hist[int(codes[r, c])] += 1
                out.extend(hist / len(pix))
    return np.array(out)


def test_lbp_grid_equals_skimage_per_cell():
    imgs = _smooth_images(2, 23, 17, seed=4)
    imgs[1, :6] = 77  # a flat area
    for method, n_codes in [("nri_uniform", 59), ("uniform", 10)]:
        est = LBPGrid(grid=(4, 3), radii=(1, 2.5), method=method).fit(imgs)
        fast = est.transform(imgs)
        assert fast.shape == (2, 12 * 2 * n_codes) == (2, est.n_features_out_)
        for k, im in enumerate(imgs):
            maps = [local_binary_pattern(im, 8, R, method=method) for R in (1, 2.5)]
            np.testing.assert_allclose(fast[k], _slow_cells(maps, (4, 3), n_codes), atol=1e-12)


@pytest.mark.parametrize("P, R", [(8, 1.0), (8, 2.0), (4, 1.5), (12, 3.0), (16, 2.0)])
@pytest.mark.parametrize("method", ["default", "ror", "uniform", "nri_uniform"])
def test_ternary_codes_at_zero_threshold_are_skimage_lbp(P, R, method):
    imgs = _smooth_images(2, 19, 15, seed=5).astype(float)
    imgs[1] = np.minimum(np.round(imgs[1] / 64) * 64, 255)  # many ties with the centre
    upper, _ = ternary_codes(imgs, P, R, 0.0, method)
    ref = np.stack([local_binary_pattern(im.astype(np.uint8), P, R, method=method)
                    for im in imgs])
    np.testing.assert_array_equal(upper, ref)


def _slow_ternary(img, P, R, t):
    """Per-pixel loop: bilinear neighbours (zeros outside), upper / lower bit patterns."""
    h, w = img.shape

    def px(r, c):
        return img[r, c] if 0 <= r < h and 0 <= c < w else 0.0

    up, lo = np.zeros((h, w), int), np.zeros((h, w), int)
    for r in range(h):
        for c in range(w):
            for i in range(P):
                y = r + round(-R * math.sin(2 * math.pi * i / P), 5)
                x = c + round(R * math.cos(2 * math.pi * i / P), 5)
                y0, x0 = math.floor(y), math.floor(x)
                fy, fx = y - y0, x - x0
                v = ((1 - fy) * ((1 - fx) * px(y0, x0) + fx * px(y0, math.ceil(x)))
                     + fy * ((1 - fx) * px(math.ceil(y), x0) + fx * px(math.ceil(y), math.ceil(x))))
                up[r, c] += (v - img[r, c] >= t) << i
                lo[r, c] += (v - img[r, c] <= -t) << i
    return up, lo


def test_ternary_codes_equal_per_pixel_loop_and_grid_histograms():
    imgs = _smooth_images(2, 9, 7, seed=6).astype(float)
    for R in (1.0, 1.5):
        up, lo = ternary_codes(imgs, 8, R, 10.0, "default")
        for k in range(2):
            su, sl = _slow_ternary(imgs[k], 8, R, 10.0)
            np.testing.assert_array_equal(up[k], su)
            np.testing.assert_array_equal(lo[k], sl)
    table = pattern_labels(8, "nri_uniform")
    est = LBPGrid(grid=(2, 2), radii=(1.0, 1.5), threshold=10).fit(imgs.astype(np.uint8))
    fast = est.transform(imgs.astype(np.uint8))
    for k in range(2):
        maps = []
        for R in (1.0, 1.5):
            su, sl = _slow_ternary(imgs[k], 8, R, 10.0)
            maps += [table[su], table[sl]]
        np.testing.assert_allclose(fast[k], _slow_cells(maps, (2, 2), 59), atol=1e-12)


def test_lbp_grid_invariances_and_parallel():
    img = _smooth_images(1, 30, 30, seed=7)
    img = (img.astype(int) * 150 // 255 + 50).astype(np.uint8)
    est = LBPGrid(grid=(3, 3), radii=(1, 2), threshold=5)
    a = est.fit_transform(img).reshape(9, -1)
    b = est.fit_transform(img + np.uint8(30)).reshape(9, -1)
    # cell (1, 1) is 10 pixels from every border: LTP is invariant to a grey-level shift there
    np.testing.assert_array_equal(a[4], b[4])
    lbp = LBPGrid(grid=(3, 3))
    c = lbp.fit_transform(img).reshape(9, -1)
    d = lbp.fit_transform(np.round(np.sqrt(img / 255.0) * 255).astype(np.uint8)).reshape(9, -1)
    assert np.allclose(c.sum(axis=1), 1) and np.abs(c[4] - d[4]).max() < 0.05  # monotone map
    imgs = _smooth_images(4, 20, 20, seed=8)
    with parallel_config(backend="threading"):
        np.testing.assert_array_equal(est.fit_transform(imgs),
                                      clone(est).set_params(n_jobs=2).fit_transform(imgs))


@pytest.mark.parametrize("params, match", [
    (dict(grid=(0, 2)), "grid"), (dict(grid=4), "grid"), (dict(radii=()), "radii"),
    (dict(radii=(1, -1)), "radii"), (dict(n_points=17), "n_points"),
    (dict(method="var"), "method"), (dict(threshold=-1), "threshold"),
    (dict(threshold="5"), "threshold"), (dict(grid=(40, 2)), "grid"),
])
def test_lbp_grid_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        LBPGrid(**params).fit(np.zeros((1, 30, 30), np.uint8))


# ----------------------------------------------------------------------------- PatchColorSIFT
def test_patch_color_ranges_hold_the_gamut():
    rgb = np.random.RandomState(9).rand(20000, 3)
    corners = np.array([[r, g, b] for r in (0, 1) for g in (0, 1) for b in (0, 1)], float)
    rgb = np.concatenate([rgb, corners])
    for space, ranges in PATCH_COLOR_SPACES.items():
        conv = to_patch_color(rgb, space)
        for c, (lo, hi) in enumerate(ranges):
            assert lo - 1e-9 <= conv[:, c].min() and conv[:, c].max() <= hi + 1e-9, (space, c)
    np.testing.assert_allclose(to_patch_color(rgb, "lab"), rgb2lab(rgb))


def _slow_color(img, patch, step, scales, n_bins, sigma, clip, ranges):
    """Patch by patch: blurred + subsampled LAB, bins per pixel, L2-clip-L2 histograms."""
    h, w = img.shape[:2]
    lab = rgb2lab(img / 255.0)
    ys = grid_starts(h, patch, step) + (patch - 1) / 2
    xs = grid_starts(w, patch, step) + (patch - 1) / 2
    feats = {}
    for s in scales:
        hs, ws, ps = int(s * h + 0.5), int(s * w + 0.5), int(s * patch + 0.5)
        chans = []
        for c in range(3):
            ch = lab[..., c] if s == 1 else gaussian_filter(lab[..., c], sigma / s, mode="nearest")
            ri = [int(v + 0.5) for v in np.linspace(0, h - 1, hs)]
            ci = [int(v + 0.5) for v in np.linspace(0, w - 1, ws)]
            chans.append(ch if s == 1 else ch[np.ix_(ri, ci)])

        def first(centre, n, n_s, ps=ps):  # the patch's first pixel at this level
            c = (centre + 0.5) * n_s / n - 0.5
            return min(max(math.floor(c - (ps - 1) / 2 + 0.5), 0), n_s - ps)

        for py, cy in enumerate(ys):
            for px, cx in enumerate(xs):
                y0, x0 = first(cy, h, hs), first(cx, w, ws)
                for c, (lo, hi) in enumerate(ranges):
                    hist = np.zeros(n_bins)
                    for v in chans[c][y0:y0 + ps, x0:x0 + ps].ravel():
                        b = math.floor((v - lo) * n_bins / (hi - lo))
                        hist[min(max(b, 0), n_bins - 1)] += 1
                    hist = np.minimum(hist / np.linalg.norm(hist), clip)
                    feats[(py, px, c, s)] = hist / np.linalg.norm(hist)
    return np.concatenate([feats[(py, px, c, s)] for py in range(len(ys)) for px in range(len(xs))
                           for c in range(3) for s in scales])


@needs_cv2
def test_patch_color_histograms_equal_slow_loop():
    imgs = _smooth_images(2, 31, 22, channels=3, seed=10)
    est = PatchColorSIFT(sift=False, n_bins=8).fit(imgs)
    fast = est.transform(imgs)
    assert est.grid_shape_ == (5, 3) and fast.shape == (2, 15 * 3 * 3 * 8)
    for k, im in enumerate(imgs):
        slow = _slow_color(im, 10, 5, (0.5, 0.75, 1.0), 8, 0.6, 0.2, PATCH_COLOR_SPACES["lab"])
        np.testing.assert_allclose(fast[k], slow, atol=1e-6)


@needs_cv2
def test_patch_color_sift_part_equals_per_keypoint_loop():
    imgs = _smooth_images(1, 30, 20, channels=3, seed=11)
    est = PatchColorSIFT(n_bins=4, scales=(1.0,), dtype=np.float64).fit(imgs)
    per_patch = est.transform(imgs).reshape(est.grid_shape_ + (3 * 4 + 3 * 128,))
    lab = rgb2lab(imgs[0] / 255.0)
    for c, (lo, hi) in enumerate(PATCH_COLOR_SPACES["lab"]):
        u8 = np.clip(np.round((lab[..., c] - lo) * 255 / (hi - lo)), 0, 255).astype(np.uint8)
        for py, y0 in enumerate(grid_starts(30, 10, 5)):
            for px, x0 in enumerate(grid_starts(20, 10, 5)):
                want = _sift_one(u8, x0 + 4.5, y0 + 4.5, 10 / 6)
                got = per_patch[py, px, 12 + 128 * c: 12 + 128 * (c + 1)]
                np.testing.assert_allclose(got, want, atol=1e-6)


@needs_cv2
def test_patch_color_uniform_image_and_options():
    img = np.zeros((2, 20, 20, 3), np.uint8)
    img[:] = [200, 30, 90]
    est = PatchColorSIFT(sift=False).fit(img)
    X = est.transform(img).reshape(-1, 32)
    assert np.all(np.sort(X, axis=1)[:, -1] == 1.0) and np.all(np.sort(X, axis=1)[:, -2] == 0)
    opp = PatchColorSIFT(color_space="opponent", n_jobs=2).fit(img)
    with parallel_config(backend="threading"):
        Y = opp.transform(img)
    np.testing.assert_array_equal(Y, clone(opp).set_params(n_jobs=None).fit_transform(img))
    assert Y.dtype == np.float32 and Y.shape == (2, opp.n_features_out_) == (2, 9 * 672)
    with pytest.raises(ValueError, match="RGB"):
        est.fit(np.zeros((1, 20, 20), np.uint8))
    with pytest.raises(ValueError, match="fitted on"):
        est.transform(np.zeros((1, 20, 21, 3), np.uint8))
    for params, match in [(dict(color_space="hsv"), "color_space"), (dict(clip=0), "clip"),
                          (dict(scales=(0.0,)), "scales"), (dict(patch_size=30), "smaller")]:
        with pytest.raises(ValueError, match=match):
            PatchColorSIFT(**params).fit(img)


@pytest.mark.slow
@needs_cv2
def test_process_workers_agree():
    """n_jobs with joblib's default (process) backend: the chunk functions pickle."""
    gray = _smooth_images(5, 40, 40, seed=12)
    rgb = _smooth_images(5, 30, 20, channels=3, seed=13)
    for est, imgs in [(DenseSIFT(16, step=8, scales=(1, 0.5)), gray), (LBPGrid(threshold=3), gray),
                      (PatchColorSIFT(), rgb)]:
        np.testing.assert_array_equal(est.fit_transform(imgs),
                                      clone(est).set_params(n_jobs=2).fit_transform(imgs))
