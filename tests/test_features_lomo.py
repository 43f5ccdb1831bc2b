"""LOMO (Liao et al. 2015): every vectorised step against a slow loop on a few small images."""

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from crossmetric.features._dense_sift import grid_starts
from crossmetric.features._lomo import LOMO, max_occurrence, retinex, siltp_codes

pytest.importorskip("skimage", reason="LOMO needs scikit-image ([images])")

from skimage.color import rgb2gray, rgb2hsv  # noqa: E402

RNG = np.random.RandomState(0)
# smooth-ish random people: blocks of colour plus noise, so that the codes are not all one
SMALL = np.clip(np.kron(RNG.randint(0, 256, (3, 6, 4, 3)), np.ones((1, 7, 6, 1)))
                + RNG.randint(-30, 30, (3, 42, 24, 3)), 0, 255).astype(np.uint8)


def slow_retinex(rgb, sigmas, clip=0.01):
    out = np.empty_like(rgb)
    for n, img in enumerate(rgb):
        inten = img * 255.0 + 1.0
        total = inten.sum(axis=2)
        v = np.empty_like(img)
        for c in range(3):
            ch = inten[:, :, c]
            msr = np.mean([np.log(ch) - np.log(gaussian_filter(ch, s, mode="nearest"))
                           for s in sigmas], axis=0)
            v[:, :, c] = msr * 46.0 * (np.log(125.0 * ch) - np.log(total))
        lo, hi = np.quantile(v, clip), np.quantile(v, 1 - clip)  # one stretch, all channels
        out[n] = np.clip((v - lo) / (hi - lo), 0, 1)
    return out


def slow_siltp(gray, tau, R):
    m, h, w = gray.shape
    out = np.zeros(gray.shape, dtype=int)
    for n in range(m):
        for r in range(h):
            for c in range(w):
                centre = gray[n, r, c]
                code = 0
                for k, (rr, cc) in enumerate(((r, c + R), (r - R, c), (r, c - R), (r + R, c))):
                    v = gray[n, min(max(rr, 0), h - 1), min(max(cc, 0), w - 1)]
                    t = 1 if v < (1 - tau) * centre else 2 if v > (1 + tau) * centre else 0
                    code += t * 3 ** k
                out[n, r, c] = code
    return out


def slow_max_occurrence(codes, n_bins, block, step):
    m, h, w = codes.shape
    rows, cols = grid_starts(h, block, step), grid_starts(w, block, step)
    out = np.zeros((m, len(rows), n_bins))
    for n in range(m):
        for i, r in enumerate(rows):
            for c in cols:
                hist = np.bincount(codes[n, r:r + block, c:c + block].ravel(), minlength=n_bins)
                out[n, i] = np.maximum(out[n, i], hist)
    return out


def slow_pool(a):
    h, w = a.shape[1] // 2 * 2, a.shape[2] // 2 * 2
    out = np.zeros((a.shape[0], h // 2, w // 2) + a.shape[3:])
    for r in range(h // 2):
        for c in range(w // 2):
            out[:, r, c] = a[:, 2 * r:2 * r + 2, 2 * c:2 * c + 2].mean(axis=(1, 2))
    return out


def slow_lomo(images, block, step, n_scales, bins, tau, radii, sigmas):
    rgb = images / 255.0
    hsv = rgb2hsv(retinex(rgb, sigmas) if sigmas else rgb, channel_axis=-1)
    q = np.stack([np.minimum(np.floor(hsv[..., c] * b), b - 1) for c, b in enumerate(bins)], -1)
    parts, hsv_part = [], []
    for _ in range(n_scales):
        joint = (q[..., 2] * bins[0] * bins[1] + q[..., 1] * bins[0] + q[..., 0]).astype(int)
        hsv_part.append(slow_max_occurrence(joint, int(np.prod(bins)), block, step)
                        .reshape(len(rgb), -1))
        q = np.floor(slow_pool(q))
    parts.append(np.hstack(hsv_part))
    for R in radii:
        gray, tex = rgb2gray(rgb), []
        for _ in range(n_scales):
            tex.append(slow_max_occurrence(slow_siltp(gray, tau, R), 81, block, step)
                       .reshape(len(rgb), -1))
            gray = slow_pool(gray)
        parts.append(np.hstack(tex))
    out = []
    for p in parts:
        p = np.log(p + 1)
        out.append(p / np.linalg.norm(p, axis=1, keepdims=True))
    return np.hstack(out)


def test_retinex_equals_per_channel_loop():
    rgb = SMALL / 255.0
    np.testing.assert_allclose(retinex(rgb, (2.0, 5.0)), slow_retinex(rgb, (2.0, 5.0)),
                               atol=1e-12)


def test_siltp_codes_equal_per_pixel_loop():
    gray = rgb2gray(SMALL / 255.0)
    for tau, R in ((0.3, 1), (0.05, 3)):
        codes = siltp_codes(gray, tau, R)
        np.testing.assert_array_equal(codes, slow_siltp(gray, tau, R))
        assert codes.min() >= 0 and codes.max() <= 80
    # a flat image has every neighbour within the tolerance: code 0 everywhere
    assert not siltp_codes(np.full((1, 9, 9), 0.5), 0.3, 2).any()


def test_max_occurrence_equals_per_block_loop():
    codes = RNG.randint(0, 7, (2, 23, 17))
    for block, step in ((6, 3), (5, 5), (4, 2)):
        np.testing.assert_array_equal(max_occurrence(codes, 7, block, step),
                                      slow_max_occurrence(codes, 7, block, step))


@pytest.mark.parametrize("use_retinex", [True, False])
def test_lomo_equals_slow_composition(use_retinex):
    params = dict(block_size=6, step=3, n_scales=2, hsv_bins=(4, 3, 3), tau=0.2, radii=(1, 2))
    lomo = LOMO(**params, retinex=use_retinex, retinex_sigmas=(2.0, 5.0), dtype=np.float64)
    X = lomo.fit_transform(SMALL)
    ref = slow_lomo(SMALL, 6, 3, 2, (4, 3, 3), 0.2, (1, 2), (2.0, 5.0) if use_retinex else ())
    assert X.shape == ref.shape == (3, lomo.n_features_out_)
    np.testing.assert_allclose(X, ref, atol=1e-12)


def test_lomo_paper_size_parts_and_parallel():
    people = np.random.RandomState(1).randint(0, 256, (5, 128, 48, 3), dtype=np.uint8)
    lomo = LOMO().fit(people)
    assert lomo.n_rows_ == [24, 11, 5] and lomo.n_features_out_ == 26960
    X = lomo.transform(people)
    assert X.dtype == np.float32 and np.isfinite(X).all() and (X >= 0).all()
    for a, b in ((0, 20480), (20480, 23720), (23720, 26960)):  # HSV, SILTP R=3, SILTP R=5
        np.testing.assert_allclose(np.linalg.norm(X[:, a:b], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(clone(lomo).set_params(n_jobs=2).fit_transform(people), X)
    # float images in [0, 1] describe like their uint8 originals
    np.testing.assert_allclose(lomo.transform(people / 255.0), X, atol=1e-6)


def test_lomo_max_over_a_row_ignores_where_in_the_row():
    # rolling the image sideways by whole blocks (that tile it) permutes the blocks of each
    # row: the colour part is unchanged (the texture part is not: its borders are replicated)
    wide = np.concatenate([SMALL[:1], SMALL[:1]], axis=2)
    lomo = LOMO(block_size=6, step=6, n_scales=1, radii=(1,), retinex=False).fit(wide)
    n_hsv = lomo.n_rows_[0] * 512
    a, b = lomo.transform(wide), lomo.transform(np.roll(wide, 6, axis=2))
    np.testing.assert_array_equal(a[:, :n_hsv], b[:, :n_hsv])
    assert not np.array_equal(lomo.transform(np.roll(wide, 3, axis=1))[:, :n_hsv], a[:, :n_hsv])


@pytest.mark.parametrize("params, match", [
    ({"n_scales": 4}, "n_scales=4"),
    ({"hsv_bins": (8, 8)}, "hsv_bins"),
    ({"radii": (0, 3)}, "radii"),
    ({"tau": 0.0}, "tau"),
    ({"retinex": True, "retinex_sigmas": ()}, "retinex_sigmas"),
    ({"dtype": np.int32}, "dtype"),
])
def test_lomo_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        LOMO(**params).fit(np.zeros((1, 40, 30, 3), dtype=np.uint8))


def test_lomo_bad_images_and_unfitted():
    with pytest.raises(NotFittedError):
        LOMO().transform(SMALL)
    with pytest.raises(ValueError, match="RGB"):
        LOMO(n_scales=1).fit(SMALL[..., 0])
    lomo = LOMO(n_scales=1).fit(SMALL)
    with pytest.raises(ValueError, match="fitted on"):
        lomo.transform(SMALL[:, :40])


def test_lomo_colour_only_is_the_hsv_part():
    full = LOMO(n_scales=2, dtype=np.float64).fit(SMALL)
    colour = clone(full).set_params(radii=()).fit(SMALL)
    n = sum(full.n_rows_) * 512
    assert colour.n_features_out_ == n
    np.testing.assert_array_equal(colour.transform(SMALL), full.transform(SMALL)[:, :n])
