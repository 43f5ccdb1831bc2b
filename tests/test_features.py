"""Image descriptors: StripHistograms against a slow per-pixel loop, HOG against scikit-image."""

import colorsys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from crossmetric.features import HOG, StripHistograms, rgb_to_hsv

pytest.importorskip("skimage", reason="the descriptors need scikit-image (the [images] extra)")

from skimage.color import rgb2gray, rgb2hsv  # noqa: E402
from skimage.feature import hog, local_binary_pattern  # noqa: E402

# full-range (JPEG) YCbCr of RGB in [0, 1]: Y, Cb − 0.5, Cr − 0.5
_YCBCR = np.array([[0.299, 0.587, 0.114],
                   [-0.168736, -0.331264, 0.5],
                   [0.5, -0.418688, -0.081312]])


def _slow_strip_histograms(images, n_strips=6, n_bins=16, lbp=True, gray=False):
    """Per-pixel loop: colorsys HSV, the JPEG YCrCb matrix, integer bins, strip by strip.

    Returns the descriptors and, per histogram, the number of pixels whose value lies within
    1e-9 of a bin edge (where two correct float formulas may legitimately disagree).
    """
    n, h, w = images.shape[:3]
    feats, edge = [], []
    for img in images:
        f = img.astype(float) / 255.0
        g8 = np.round((f if gray else rgb2gray(f)) * 255).astype(np.uint8)
        codes = local_binary_pattern(g8, 8, 1.0, method="uniform").astype(int)
        vec, amb = [], []
        for s in range(n_strips):
            rows = [r for r in range(h) if (r * n_strips) // h == s]
            chans = 1 if gray else 9
            hist = np.zeros((chans, n_bins))
            near = np.zeros(chans)
            for r in rows:
                for c in range(w):
                    if gray:
                        vals = [f[r, c]]
                        ranges = [(0, 1)]
                    else:
                        R, G, B = f[r, c]
                        y, cb, cr = _YCBCR @ np.array([R, G, B])
                        vals = [R, G, B, *colorsys.rgb_to_hsv(R, G, B), y, cr, cb]
                        ranges = [(0, 1)] * 7 + [(-0.5, 0.5)] * 2
                    for k, (v, (lo, hi)) in enumerate(zip(vals, ranges, strict=True)):
                        pos = (v - lo) / (hi - lo) * n_bins
                        b = min(max(int(np.floor(pos)), 0), n_bins - 1)
                        hist[k, b] += 1
                        if abs(pos - round(pos)) < 1e-9 and 0 < round(pos) < n_bins:
                            near[k] += 1
            npx = len(rows) * w
            for k in range(chans):
                vec.extend(hist[k] / npx)
                amb.extend([near[k] / npx] * n_bins)
            if lbp:
                lh = np.zeros(10)
                for r in rows:
                    for c in range(w):
                        lh[codes[r, c]] += 1
                vec.extend(lh / npx)
                amb.extend([0.0] * 10)
        feats.append(vec)
        edge.append(amb)
    return np.array(feats), np.array(edge)


@pytest.fixture(scope="module")
def images():
    rng = np.random.RandomState(0)
    imgs = rng.randint(0, 256, (3, 13, 7, 3)).astype(np.uint8)  # 13 rows: uneven strips
    imgs[0, :4] = 128  # a grey patch (hue 0 for every pixel)
    imgs[1, :, :2] = [255, 0, 0]  # pure red
    return imgs


def test_strip_histograms_equal_per_pixel_loop(images):
    fast = StripHistograms().fit_transform(images)
    slow, edge = _slow_strip_histograms(images)
    assert fast.shape == slow.shape == (3, 6 * (9 * 16 + 10))
    # equal except where a value sits on a bin edge (then at most those pixels move)
    assert np.all(np.abs(fast - slow) <= edge + 1e-12)
    assert edge.sum() < 0.05 * edge.size
    # every histogram sums to one
    per_hist = fast.reshape(3, 6, -1)
    sums = np.concatenate([per_hist[..., :144].reshape(3, 6, 9, 16).sum(-1),
                           per_hist[..., 144:].sum(-1, keepdims=True)], axis=-1)
    np.testing.assert_allclose(sums, 1.0)


def test_strip_histograms_gray_and_vector_normalisation(images):
    gray = np.round(rgb2gray(images) * 255).astype(np.uint8)
    fast = StripHistograms().fit_transform(gray)
    slow, edge = _slow_strip_histograms(gray, gray=True)
    assert fast.shape == (3, 6 * 26)
    assert np.all(np.abs(fast - slow) <= edge + 1e-12)
    vec = StripHistograms(normalize="vector").fit_transform(images)
    np.testing.assert_allclose(vec.sum(axis=1), 1.0)
    np.testing.assert_allclose(vec * 60, StripHistograms().fit_transform(images))
    # "root": the Hellinger map of each unit histogram (each histogram's squares sum to 1)
    root = StripHistograms(normalize="root").fit_transform(images)
    np.testing.assert_allclose(root, np.sqrt(StripHistograms().fit_transform(images)))
    np.testing.assert_allclose((root ** 2).sum(axis=1), 60.0)


def test_strip_histograms_options_and_input_forms(images):
    sh = StripHistograms(n_strips=3, n_bins=8, color_spaces=("hsv",), lbp=False).fit(images)
    out = sh.transform(images)
    assert out.shape == (3, 3 * 3 * 8) == (3, sh.n_features_out_)
    assert len(sh.get_feature_names_out()) == out.shape[1]
    np.testing.assert_allclose(sh.transform(images / 255.0), out)  # float [0, 1] input
    rich = StripHistograms(lbp_method="nri_uniform", lbp_points=8).fit_transform(images)
    assert rich.shape == (3, 6 * (144 + 59))
    # a scikit-learn transformer: clone, pipelines
    est = clone(StripHistograms(n_strips=2))
    assert make_pipeline(est).fit_transform(images).shape == (3, 2 * 154)


def test_rgb_to_hsv_equals_skimage():
    rng = np.random.RandomState(1)
    for vals in (rng.rand(5, 9, 9, 3), rng.randint(0, 4, (5, 9, 9, 3)) / 3.0):
        np.testing.assert_array_equal(rgb_to_hsv(vals), rgb2hsv(vals))


def test_strip_histograms_errors(images):
    with pytest.raises(ValueError, match="images must be an array"):
        StripHistograms().fit(images[..., :2])
    with pytest.raises(ValueError, match="0-255"):
        StripHistograms().fit(images.astype(int) * 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        StripHistograms().fit(images.astype(float))
    with pytest.raises(ValueError, match="NaN"):
        StripHistograms().fit(np.full((1, 8, 8, 3), np.nan))
    with pytest.raises(ValueError, match="color_spaces"):
        StripHistograms(color_spaces=("lab",)).fit(images)
    with pytest.raises(ValueError, match="needs RGB"):
        StripHistograms(color_spaces=("rgb",)).fit(images[..., 0])
    with pytest.raises(ValueError, match="n_strips"):
        StripHistograms(n_strips=20).fit(images)
    with pytest.raises(ValueError, match="normalize"):
        StripHistograms(normalize="l2").fit(images)
    with pytest.raises(ValueError, match="fitted on"):
        StripHistograms().fit(images).transform(images[:, :10])


def test_hog_equals_skimage(images):
    est = HOG(pixels_per_cell=(4, 4), cells_per_block=(1, 1)).fit(images)
    out = est.transform(images)
    for k in range(3):
        ref = hog(images[k] / 255.0, orientations=9, pixels_per_cell=(4, 4),
                  cells_per_block=(1, 1), block_norm="L2-Hys", channel_axis=-1)
        np.testing.assert_allclose(out[k], ref)
    gray = images[..., 1]
    g = HOG(pixels_per_cell=(4, 4), cells_per_block=(2, 1)).fit_transform(gray)
    np.testing.assert_allclose(g[0], hog(gray[0] / 255.0, pixels_per_cell=(4, 4),
                                         cells_per_block=(2, 1)))
    with pytest.raises(ValueError, match="HOG cannot describe images of shape"):
        HOG(pixels_per_cell=(4, 4), cells_per_block=(2, 2)).fit(gray)
    with pytest.raises(ValueError, match="block_norm"):
        HOG(block_norm="max").fit(images)
    with pytest.raises(ValueError, match="fitted on"):
        est.transform(images[:, :8])


def _slow_cell_hog(gy, gx, cell, n_bins):
    """Per-pixel loop of the numpy cell HOG on one image's (h, w) gradients."""
    h, w = gx.shape
    cx = w // cell[1]
    ref = np.zeros(((h // cell[0]) * cx, n_bins))
    for r in range(h):
        for c in range(w):
            mag = np.hypot(gx[r, c], gy[r, c])
            pos = np.mod(np.arctan2(gy[r, c], gx[r, c]), np.pi) / (np.pi / n_bins) - 0.5
            lo = int(np.floor(pos))
            k = (r // cell[0]) * cx + c // cell[1]
            ref[k, lo % n_bins] += mag * (1 - (pos - lo))
            ref[k, (lo + 1) % n_bins] += mag * (pos - lo)
    eps = 1e-3 * np.hypot(gx, gy).max()
    return (ref / np.sqrt((ref ** 2).sum(1, keepdims=True) + eps ** 2)).ravel()


def test_hog_numpy_implementation(images):
    from crossmetric.datasets import hog_descriptor

    kw = dict(cells_per_block=(1, 1), block_norm="L2", implementation="numpy")
    crop = images[:, :12, :6]
    gray = crop[..., 1]
    est = HOG(7, pixels_per_cell=(4, 2), **kw).fit(gray)
    out = est.transform(gray)
    assert out.shape == (3, est.n_features_out_) == (3, 3 * 3 * 7)
    for k in range(3):
        np.testing.assert_allclose(out[k], _slow_cell_hog(*np.gradient(gray[k] / 255.0),
                                                          (4, 2), 7))
    # RGB: at each pixel the gradient of the channel of largest magnitude (as scikit-image)
    rgb = HOG(5, pixels_per_cell=(4, 3), **kw).fit_transform(crop)
    for k in range(3):
        grads = [np.gradient(crop[k, ..., ch] / 255.0) for ch in range(3)]
        best = np.stack([np.hypot(gx, gy) for gy, gx in grads], axis=-1).argmax(-1)
        gy = np.choose(best, [g[0] for g in grads])
        gx = np.choose(best, [g[1] for g in grads])
        np.testing.assert_allclose(rgb[k], _slow_cell_hog(gy, gx, (4, 3), 5))
    # transform_sqrt: the square root of the image first
    np.testing.assert_allclose(
        HOG(7, pixels_per_cell=(4, 2), transform_sqrt=True, **kw).fit_transform(gray),
        HOG(7, pixels_per_cell=(4, 2), **kw).fit_transform(np.sqrt(gray / 255.0)))
    # hog_descriptor is this transformer
    sk = np.random.default_rng(1).random((3, 8, 12))
    np.testing.assert_array_equal(
        hog_descriptor(sk, cell=4, n_bins=6),
        HOG(6, pixels_per_cell=(4, 4), **kw).fit_transform(sk))
    np.testing.assert_allclose(hog_descriptor(3.0 * sk - 1.0, cell=4, n_bins=6),
                               hog_descriptor(sk, cell=4, n_bins=6), atol=1e-12)
    with pytest.raises(ValueError, match=r"needs cells_per_block=\(1, 1\) and block_norm='L2'"):
        HOG(implementation="numpy").fit(gray)
    with pytest.raises(ValueError, match="must be multiples of pixels_per_cell"):
        HOG(pixels_per_cell=(5, 5), **kw).fit(gray)
    with pytest.raises(ValueError, match="implementation must be one of"):
        HOG(implementation="torch").fit(gray)
