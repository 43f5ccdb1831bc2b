"""Loaders: embedded digits views, mfeat, LFW pairs.txt, generic files, synthetic data."""

import os
from pathlib import Path

import numpy as np
import pytest

from crossmetric.datasets import (
    hog_descriptor,
    lfw_pair_indices,
    load_digits_views,
    load_features,
    load_mfeat,
    load_pairs,
    make_cross_modal,
    read_lfw_pairs,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MFEAT = os.path.join(ROOT, "..", "shared", "data", "mfeat")


# ------------------------------------------------------------------------------- digits
def test_digits_views_shapes_ranges_and_determinism():
    b = load_digits_views()
    n = 1797
    assert b.X.shape == (n, 256) and b.Y.shape == (n, 144)
    assert b.images_x.shape == (n, 16, 16) and b.images_y.shape == (n, 16, 16)
    assert np.array_equal(b.instance, np.arange(n))
    assert set(np.unique(b.labels)) == set(range(10))
    for a in (b.images_x, b.images_y):
        assert a.min() >= 0.0 and a.max() <= 1.0
    assert b.X.min() >= 0 and b.Y.min() >= 0  # chi2 kernels apply
    np.testing.assert_array_equal(b.X, b.images_x.reshape(n, -1))
    np.testing.assert_allclose(b.Y, hog_descriptor(b.images_y))
    c = load_digits_views()
    np.testing.assert_array_equal(b.images_y, c.images_y)
    b.X[0, 0] = 99.0  # callers get copies
    assert load_digits_views().X[0, 0] != 99.0


def test_digits_photo_is_the_upsampled_digit():
    from sklearn.datasets import load_digits

    b = load_digits_views()
    small = load_digits().images / 16.0
    # 2x2 block means of the photo follow the 8x8 digit closely
    pooled = b.images_x.reshape(-1, 8, 2, 8, 2).mean(axis=(2, 4))
    assert np.corrcoef(pooled.ravel(), small.ravel())[0, 1] > 0.95


def test_digits_sketch_is_a_deformed_other_modality():
    b = load_digits_views()
    n = b.X.shape[0]
    # not the same picture: no sketch equals its photo, and matching an image's sketch by
    # raw pixels is hard (instance rank-1 far from 1)
    assert np.abs(b.images_x - b.images_y).reshape(n, -1).max(axis=1).min() > 0.2
    P = b.images_x.reshape(n, -1)[:300]
    S = b.images_y.reshape(n, -1)[:300]
    D = ((P[:, None] - S[None]) ** 2).sum(-1)
    assert np.mean(D.argmin(1) == np.arange(300)) < 0.3
    # yet the sketch descriptor still carries the class (1-NN within the sketch view)
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    acc = cross_val_score(KNeighborsClassifier(1), b.Y, b.labels, cv=3).mean()
    assert acc > 0.8


def test_hog_descriptor_against_loop():
    rng = np.random.default_rng(0)
    img = rng.random((2, 8, 8))
    H = hog_descriptor(img, cell=4, n_bins=6)
    gy, gx = np.gradient(img, axis=(1, 2))
    ref = np.zeros((2, 4, 6))
    for k in range(2):
        for r in range(8):
            for c in range(8):
                mag = np.hypot(gx[k, r, c], gy[k, r, c])
                ang = np.mod(np.arctan2(gy[k, r, c], gx[k, r, c]), np.pi)
                pos = ang / (np.pi / 6) - 0.5
                lo = int(np.floor(pos))
                f = pos - lo
                cell = (r // 4) * 2 + c // 4
                ref[k, cell, lo % 6] += mag * (1 - f)
                ref[k, cell, (lo + 1) % 6] += mag * f
        eps = 1e-3 * np.hypot(gx[k], gy[k]).max()
        ref[k] /= np.sqrt((ref[k] ** 2).sum(1, keepdims=True) + eps**2)
    np.testing.assert_allclose(H, ref.reshape(2, -1))
    with pytest.raises(ValueError, match="multiples"):
        hog_descriptor(np.zeros((1, 6, 6)), cell=4)


# -------------------------------------------------------------------------------- mfeat
@pytest.mark.skipif(not os.path.isdir(MFEAT), reason="../shared/data/mfeat is not present")
def test_load_mfeat():
    b = load_mfeat(MFEAT, views=("fou", "pix"))
    assert b.X.shape == (2000, 76) and b.Y.shape == (2000, 240)
    assert np.array_equal(np.bincount(b.labels), np.full(10, 200))
    assert b.labels[199] == 0 and b.labels[200] == 1
    six = load_mfeat(MFEAT, views=("fou", "pix", "fac", "kar", "zer", "mor"))
    assert [v.shape[1] for v in six.views] == [76, 240, 216, 64, 47, 6]
    assert np.array_equal(six.views[0], b.X) and six.Y is six.views[1]


def test_load_mfeat_errors(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        load_mfeat(tmp_path / "nope")
    with pytest.raises(ValueError, match="not found"):
        load_mfeat(tmp_path)
    with pytest.raises(ValueError, match="unknown mfeat view"):
        load_mfeat(tmp_path, views=("fou", "abc"))
    with pytest.raises(ValueError, match="at least two distinct"):
        load_mfeat(tmp_path, views=("fou",))
    with pytest.raises(ValueError, match="at least two distinct"):
        load_mfeat(tmp_path, views=("fou", "pix", "fou"))
    (tmp_path / "mfeat-fou").write_text("1 2 3\n4 5 6\n")
    (tmp_path / "mfeat-pix").write_text("1 2\n")
    with pytest.raises(ValueError, match="expected"):
        load_mfeat(tmp_path)
    (tmp_path / "mfeat-fou").write_text("1 2 x\n")
    with pytest.raises(ValueError, match="malformed"):
        load_mfeat(tmp_path)


# ---------------------------------------------------------------------------------- LFW
def _write_lfw(path, n_folds=2, n_per=3):
    lines = [f"{n_folds}\t{n_per}"]
    for f in range(n_folds):
        for k in range(n_per):
            lines.append(f"Person_{f}_{k}\t{k + 1}\t{k + 2}")
        for k in range(n_per):
            lines.append(f"Alice_{f}\t{k + 1}\tBob_{f}_{k}\t{k + 3}")
    path.write_text("\n".join(lines) + "\n")


def test_read_lfw_pairs_official_format(tmp_path):
    p = tmp_path / "pairs.txt"
    _write_lfw(p)
    lfw = read_lfw_pairs(p)
    assert lfw.n_folds == 2 and lfw.y.shape == (12,)
    np.testing.assert_array_equal(lfw.y, np.tile(np.r_[np.ones(3), -np.ones(3)], 2))
    np.testing.assert_array_equal(lfw.fold, np.repeat([0, 1], 6))
    assert lfw.name1[0] == lfw.name2[0] == "Person_0_0"
    assert (lfw.num1[0], lfw.num2[0]) == (1, 2)
    assert (lfw.name1[3], lfw.num1[3], lfw.name2[3], lfw.num2[3]) == ("Alice_0", 1, "Bob_0_0", 3)
    # join with a feature file keyed by LFW file names (any order)
    keys = sorted({f"{a}_{n:04d}.jpg" for a, n in zip(lfw.name1, lfw.num1, strict=True)}
                  | {f"lfw/{b}/{b}_{n:04d}.jpg" for b, n in zip(lfw.name2, lfw.num2,
                                                                 strict=True)})
    idx = lfw_pair_indices(lfw, keys)
    for p_, (a, na, b, nb) in enumerate(zip(lfw.name1, lfw.num1, lfw.name2, lfw.num2,
                                            strict=True)):
        assert keys[idx[p_, 0]].endswith(f"{a}_{na:04d}.jpg")
        assert keys[idx[p_, 1]].endswith(f"{b}_{nb:04d}.jpg")
    # tuples and "name,number" keys work too
    tuple_keys = [(k.split("/")[-1].rsplit("_", 1)[0], int(k[-8:-4])) for k in keys]
    np.testing.assert_array_equal(lfw_pair_indices(lfw, tuple_keys), idx)
    with pytest.raises(ValueError, match="no row"):
        lfw_pair_indices(lfw, keys[1:])
    with pytest.raises(ValueError, match="twice"):
        lfw_pair_indices(lfw, keys + keys[:1])


@pytest.mark.parametrize("content, fragment", [
    ("", "empty"),
    ("ten 300\n", "first line"),
    ("1\t2\nA\t1\t2\n", "found 1"),
    ("1\t1\nA\t1\t2\tB\nB\t1\tC\t2\n", "3 fields"),
    ("1\t1\nA\t1\t2\nB\t1\tC\n", "4 fields"),
    ("1\t1\nA\tx\t2\nB\t1\tC\t2\n", "integers"),
    ("1\t1\nA\t0\t2\nB\t1\tC\t2\n", "1-based"),
])
def test_read_lfw_pairs_errors(tmp_path, content, fragment):
    p = tmp_path / "pairs.txt"
    p.write_text(content)
    with pytest.raises(ValueError, match=fragment):
        read_lfw_pairs(p)


# ------------------------------------------------------------------------ generic files
def test_load_features_formats(tmp_path):
    A = np.arange(12, dtype=float).reshape(4, 3)
    np.save(tmp_path / "a.npy", A)
    np.savez(tmp_path / "a.npz", X=A, other=A + 1)
    np.savez(tmp_path / "one.npz", feats=A)
    np.savetxt(tmp_path / "a.csv", A, delimiter=",")
    np.savetxt(tmp_path / "h.csv", A, delimiter=",", header="u,v,w", comments="")
    for name in ("a.npy", "a.npz", "one.npz", "a.csv", "h.csv"):
        np.testing.assert_array_equal(load_features(tmp_path / name), A)
    np.testing.assert_array_equal(load_features(tmp_path / "a.npz", key="other"), A + 1)
    np.save(tmp_path / "img.npy", np.zeros((2, 4, 4)))
    assert load_features(tmp_path / "img.npy", allow_images=True).shape == (2, 4, 4)
    with pytest.raises(ValueError, match="2-D"):
        load_features(tmp_path / "img.npy")
    np.save(tmp_path / "nan.npy", np.array([[np.nan]]))
    with pytest.raises(ValueError, match="NaN"):
        load_features(tmp_path / "nan.npy")
    np.savez(tmp_path / "two.npz", a=A, b=A)
    with pytest.raises(ValueError, match="several"):
        load_features(tmp_path / "two.npz")
    (tmp_path / "x.parquet").write_text("x")
    with pytest.raises(ValueError, match="extension"):
        load_features(tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="not found"):
        load_features(tmp_path / "missing.npy")
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    with pytest.raises(ValueError, match="line 2: 'x' is not a number"):
        load_features(tmp_path / "bad.csv")


def test_load_pairs(tmp_path):
    (tmp_path / "p.csv").write_text("i,j,label\n0,1,1\n2,3,-1\n")
    pairs, y = load_pairs(tmp_path / "p.csv")
    np.testing.assert_array_equal(pairs, [[0, 1], [2, 3]])
    np.testing.assert_array_equal(y, [1, -1])
    for text, frag in [("0,1\n", "three columns"), ("0,1,0\n", r"\+1"),
                       ("0.5,1,1\n", "integer"), ("-1,1,1\n", "integer")]:
        (tmp_path / "q.csv").write_text(text)
        with pytest.raises(ValueError, match=frag):
            load_pairs(tmp_path / "q.csv")


# ---------------------------------------------------------------------------- synthetic
def test_make_cross_modal_latent_structure():
    d = make_cross_modal(400, n_classes=8, n_latent=3, n_features_x=12, n_features_y=6,
                         noise=0.1, random_state=0)
    assert d.X.shape == (400, 12) and d.Y.shape == (400, 6) and d.latent.shape == (400, 3)
    assert set(np.unique(d.labels)) == set(range(8))
    # the views are linear images of the shared latent space plus small noise
    for V, W in ((d.X, d.A), (d.Y, d.B)):
        resid = V - d.latent @ W.T
        assert resid.std() == pytest.approx(0.1, rel=0.1)
    again = make_cross_modal(400, n_classes=8, n_latent=3, n_features_x=12, n_features_y=6,
                             noise=0.1, random_state=0)
    np.testing.assert_array_equal(d.X, again.X)
    nn = make_cross_modal(50, n_classes=5, nonnegative=True, random_state=1)
    assert nn.X.min() >= 0 and nn.Y.min() >= 0
    with pytest.raises(ValueError, match="n_classes"):
        make_cross_modal(5, n_classes=10)


# ------------------------------------------------------------- text formats
def test_pairs_csv_with_bom_keeps_first_pair(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeff0,1,1\n2,3,-1\n".encode())
    pairs, y = load_pairs(p)
    np.testing.assert_array_equal(pairs, [[0, 1], [2, 3]])
    np.testing.assert_array_equal(y, [1, -1])
    p.write_bytes("\ufeffi,j,label\n0,1,1\n".encode())
    assert load_pairs(p)[0].tolist() == [[0, 1]]


def test_typo_in_first_row_is_not_a_header(tmp_path):
    p = tmp_path / "typo.csv"
    p.write_text("5,3,l\n0,1,1\n")
    with pytest.raises(ValueError, match="line 1: 'l' is not a number"):
        load_pairs(p)
    p.write_text("0,1,1\n0,2,x\n")
    with pytest.raises(ValueError, match="line 2"):
        load_pairs(p)
    p.write_text("0,1,1\n0,2\n")
    with pytest.raises(ValueError, match="line 2: 2 fields"):
        load_pairs(p)


def test_whitespace_text_uci_layout(tmp_path):
    A = np.arange(12, dtype=float).reshape(4, 3) / 7
    np.savetxt(tmp_path / "feat", A)  # no extension, spaces (as mfeat-fou)
    np.savetxt(tmp_path / "feat.txt", A, delimiter="\t")
    for name in ("feat", "feat.txt"):
        np.testing.assert_allclose(load_features(tmp_path / name), A)
    home = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mfeat"
    if (home / "mfeat-fou").is_file():
        F = load_features(home / "mfeat-fou")
        assert F.shape == (2000, 76)


@pytest.mark.parametrize("content, fragment", [
    (b"", "is empty"), (b"\n  \n", "is empty"), (b"\x00\x01\x02\x03", "binary"),
    (b"\xff\xfe\xfa1,2", "not UTF-8"), (b"a,b\n", "no data lines"),
])
def test_empty_and_binary_text_files_one_line(tmp_path, content, fragment):
    p = tmp_path / "f.csv"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=fragment) as info:
        load_features(p)
    assert "\n" not in str(info.value)


def test_load_labels_and_image_list(tmp_path):
    from crossmetric.datasets import load_image_list, load_labels

    (tmp_path / "l.txt").write_text("label\n3\n1\n3\n")
    assert load_labels(tmp_path / "l.txt").tolist() == [3, 1, 3]
    (tmp_path / "s.txt").write_bytes("\ufeffanna\nbob\nanna\n".encode())
    assert load_labels(tmp_path / "s.txt").tolist() == ["anna", "bob", "anna"]
    np.save(tmp_path / "l.npy", np.array([1.0, 2.0]))
    assert load_labels(tmp_path / "l.npy").dtype == np.int64
    (tmp_path / "two.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match="one label per line"):
        load_labels(tmp_path / "two.csv")
    (tmp_path / "imgs.txt").write_text("A_0001.jpg\n\nB_0002.jpg\n")
    assert load_image_list(tmp_path / "imgs.txt") == ["A_0001.jpg", "B_0002.jpg"]
