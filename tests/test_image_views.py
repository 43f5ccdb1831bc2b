"""Images → feature rows and domain pairing (crossmetric.features._image_views, public in datasets),
each against a slow obvious version on small data."""

import numpy as np
import pytest

from crossmetric.datasets import describe_images, image_views, pair_domains


def _obvious_pairs(ids, doms):
    """Per identity (sorted as strings), the k-th row of domain a with the k-th of domain b."""
    ids, doms = [str(i) for i in ids], [str(d) for d in doms]
    a_name, b_name = sorted(set(doms))
    ra, rb = [], []
    for ident in sorted(set(ids)):
        a = [r for r in range(len(ids)) if ids[r] == ident and doms[r] == a_name]
        b = [r for r in range(len(ids)) if ids[r] == ident and doms[r] == b_name]
        for k in range(min(len(a), len(b))):
            ra.append(a[k])
            rb.append(b[k])
    return ra, rb


def test_pair_domains_matches_the_obvious_pairing():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, 60)
    doms = rng.choice(["sketch", "photo"], 60)
    ra, rb, names = pair_domains(ids, doms)
    want_a, want_b = _obvious_pairs(ids, doms)
    assert ra.tolist() == want_a and rb.tolist() == want_b
    assert names.tolist() == ["photo", "sketch"]
    assert (doms[ra] == "photo").all() and (doms[rb] == "sketch").all()
    assert (ids[ra] == ids[rb]).all()


def test_pair_domains_errors():
    with pytest.raises(ValueError, match="exactly two"):
        pair_domains([1, 2, 3], ["a", "b", "c"])
    with pytest.raises(ValueError, match="only 1 identities have an image in both"):
        pair_domains([1, 1, 2], ["a", "b", "a"])
    with pytest.raises(ValueError, match="one length"):
        pair_domains([1, 2], ["a"])
    a, b, _ = pair_domains([1, 1, 2], ["a", "b", "a"], min_pairs=1)
    assert a.tolist() == [0] and b.tolist() == [1]


def test_describe_images_pixels_and_hog():
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    P = describe_images(rgb, "pixels")
    want = np.array([im.astype(float).mean(axis=-1).ravel() / 255 for im in rgb])
    np.testing.assert_allclose(P, want)
    grey = rgb[..., 0]
    np.testing.assert_allclose(describe_images(grey, "pixels"), grey.reshape(3, -1) / 255)
    pytest.importorskip("skimage")
    from crossmetric.features import HOG

    H = describe_images(rgb, "hog")
    np.testing.assert_allclose(H, HOG().fit_transform(rgb))
    assert H.dtype == np.float64
    with pytest.raises(ValueError, match="descriptor"):
        describe_images(rgb, "sift")
    with pytest.raises(ValueError, match="different sizes"):
        describe_images(np.zeros((3, 4)), "pixels")


def test_image_views_two_domains_and_one():
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (10, 4, 3, 3), dtype=np.uint8)
    ids = [5, 5, 7, 7, 9, 9, 11, 11, 13, 13]
    doms = ["b", "a"] * 5
    d = image_views(images, ids, doms, descriptor="pixels")
    F = describe_images(images, "pixels")
    ra, rb = _obvious_pairs(ids, doms)
    np.testing.assert_array_equal(d.X, F[ra])
    np.testing.assert_array_equal(d.Y, F[rb])
    assert d.labels.tolist() == [0, 1, 2, 3, 4]        # sorted identity codes of the pairs
    assert d.instance.tolist() == [0, 1, 2, 3, 4] and d.domain_names == ("a", "b")
    # the images as given, the pixels the descriptors describe (an image learner's input)
    np.testing.assert_array_equal(d.images_x, images[ra])
    np.testing.assert_array_equal(d.images_y, images[rb])
    assert d.images_x.dtype == images.dtype
    # one domain value, or none: one modality with every image
    for one in (None, ["a"] * 10, [None] * 10):
        s = image_views(images, ids, one, descriptor="pixels")
        assert s.Y is None and s.domain_names is None and s.X.shape == (10, 12)
        assert s.labels.tolist() == [2, 2, 3, 3, 4, 4, 0, 0, 1, 1]  # "11" < "13" < "5"
    with pytest.raises(ValueError, match="no image matched"):
        image_views(images[:0], [], None)
