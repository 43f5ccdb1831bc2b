"""Image-folder loaders on tiny generated folders (several layouts, bad files), VIPeR and
PKU-Sketch presets on the shared data when present."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crossmetric.datasets import (
    load_cufs,
    load_cuhk01,
    load_image_folder,
    load_pku_sketch,
    load_viper,
)
from crossmetric.datasets._image_folder import _dataset_dir

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _save(path: Path, arr: np.ndarray, fmt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt)


def _img(seed, h=8, w=5):
    return np.random.RandomState(seed).randint(0, 256, (h, w, 3), dtype=np.uint8)


def test_one_folder_per_camera(tmp_path):
    """cam_a/NNN_ANGLE.bmp, cam_b/NNN_ANGLE.bmp (VIPeR's original layout)."""
    truth = {}
    for k, (cam, pid) in enumerate([("b", 3), ("a", 3), ("a", 12), ("b", 12), ("a", 7)]):
        arr = _img(k)
        truth[(pid, cam)] = arr
        _save(tmp_path / f"cam_{cam}" / f"{pid:03d}_{45 * k}.bmp", arr)
    (tmp_path / "README.txt").write_text("not an image")
    b = load_image_folder(tmp_path, r"cam_(?P<domain>[ab])/(?P<id>\d+)_\d+\.bmp")
    assert b.images.shape == (5, 8, 5, 3) and b.images.dtype == np.uint8
    assert b.ids.tolist() == [3, 3, 7, 12, 12]  # numeric ids sort numerically
    assert b.domains.tolist() == ["a", "b", "a", "a", "b"]
    for im, pid, cam in zip(b.images, b.ids, b.domains, strict=True):
        np.testing.assert_array_equal(im, truth[(pid, cam)])  # lossless format: exact pixels
    assert b.filenames[0] == "cam_a/003_45.bmp"


def test_camera_in_file_name_and_no_domain_group(tmp_path):
    for pid in (2, 1):
        for cam in (1, 2):
            _save(tmp_path / "images" / f"{pid:04d}{cam:04d}.png", _img(10 * pid + cam))
    b = load_image_folder(tmp_path, r"images/(?P<id>\d{4})(?P<domain>\d{4})\.png")
    assert b.ids.tolist() == [1, 1, 2, 2] and b.domains.tolist() == [1, 2, 1, 2]
    np.testing.assert_array_equal(b.images[3], _img(22))
    c = load_image_folder(tmp_path, r"images/(?P<id>\d{4})\d{4}\.png")
    assert c.domains.tolist() == [0, 0, 0, 0]  # no domain group
    assert c.ids.tolist() == [1, 1, 2, 2]


def test_modality_folders_resize_gray_and_string_ids(tmp_path):
    """photo/NAME_CAM.jpg of different sizes + sketch/NAME.png, resized; non-digit ids."""
    _save(tmp_path / "photo" / "bob_1.jpg", _img(1, 40, 20))
    _save(tmp_path / "photo" / "ann_2.jpg", _img(2, 30, 12))
    _save(tmp_path / "sketch" / "ann.png", _img(3, 50, 25)[..., 0])  # grey file
    pat = r"(?P<domain>photo|sketch)/(?P<id>[a-z]+)(?:_\d)?\.(jpg|png)"
    with pytest.raises(ValueError, match="different sizes.*size="):
        load_image_folder(tmp_path, pat)
    b = load_image_folder(tmp_path, pat, size=(6, 10))
    assert b.images.shape == (3, 10, 6, 3)
    assert b.ids.tolist() == ["ann", "ann", "bob"]
    assert b.domains.tolist() == ["photo", "sketch", "photo"]
    # grey file converted to RGB: three equal channels
    np.testing.assert_array_equal(b.images[1, ..., 0], b.images[1, ..., 2])
    expected = np.asarray(Image.open(tmp_path / "photo" / "bob_1.jpg").convert("RGB")
                          .resize((6, 10), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(b.images[2], expected)
    g = load_image_folder(tmp_path, pat, size=(6, 10), color="gray")
    assert g.images.shape == (3, 10, 6)
    rgb = b.images.astype(float)
    luma = rgb @ np.array([0.299, 0.587, 0.114])
    assert np.abs(g.images - luma).max() <= 1.0  # Pillow's "L" conversion


def test_deterministic_order(tmp_path):
    names = ["b/9_1.png", "a/10_1.png", "a/9_2.png", "b/10_2.png"]
    for k, n in enumerate(names):
        _save(tmp_path / n, _img(k))
    pat = r"(?P<domain>[ab])/(?P<id>\d+)_\d\.png"
    b1 = load_image_folder(tmp_path, pat)
    assert b1.ids.tolist() == [9, 9, 10, 10]
    assert b1.domains.tolist() == ["a", "b", "a", "b"]
    b2 = load_image_folder(tmp_path, pat)
    np.testing.assert_array_equal(b1.images, b2.images)
    np.testing.assert_array_equal(b1.filenames, b2.filenames)


def test_errors(tmp_path):
    _save(tmp_path / "x" / "1_a.png", _img(0))
    (tmp_path / "x" / "2_a.png").write_bytes(b"this is not a png")
    with pytest.raises(ValueError, match=r"cannot decode image file 'x/2_a\.png'"):
        load_image_folder(tmp_path, r"x/(?P<id>\d)_(?P<domain>a)\.png")
    with pytest.raises(ValueError, match=r"no file .*matches pattern .*'x/1_a\.png'"):
        load_image_folder(tmp_path, r"(?P<id>\d+)\.jpg")
    with pytest.raises(ValueError, match="named group 'id'"):
        load_image_folder(tmp_path, r"x/(\d)_a\.png")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        load_image_folder(tmp_path, r"x/(?P<id>\d")
    with pytest.raises(ValueError, match="not a directory"):
        load_image_folder(tmp_path / "missing", r"(?P<id>.*)")
    with pytest.raises(ValueError, match="color"):
        load_image_folder(tmp_path, r"x/(?P<id>1)_a\.png", color="cmyk")
    for bad in [(0, 4), (4,), "44", (2.5, 3)]:
        with pytest.raises(ValueError, match="size"):
            load_image_folder(tmp_path, r"x/(?P<id>1)_a\.png", size=bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no files"):
        load_image_folder(empty, r"(?P<id>.*)")
    with pytest.raises(ValueError, match="without capturing"):
        load_image_folder(tmp_path, r"x/(?:(?P<id>9)|1)_a\.png")


@pytest.mark.skipif(not (DATA / "viper" / "images").is_dir(), reason="VIPeR data absent")
def test_load_viper():
    b = load_viper(DATA)
    assert b.images.shape == (1264, 128, 48, 3) and b.images.dtype == np.uint8
    assert np.unique(b.ids).tolist() == list(range(1, 633))
    assert np.all(np.bincount(b.ids)[1:] == 2)
    assert b.domains.tolist()[:4] == [1, 2, 1, 2]
    assert _dataset_dir(DATA / "viper", "viper", "images") == DATA / "viper"
    with pytest.raises(ValueError, match="no viper data"):
        load_viper(DATA / "mfeat")


@pytest.mark.skipif(not (DATA / "pku_sketch" / "photo").is_dir(), reason="PKU-Sketch absent")
def test_load_pku_sketch():
    b = load_pku_sketch(DATA, size=(32, 80))
    assert b.images.shape == (597, 80, 32, 3)
    assert (b.domains == "photo").sum() == 400 and (b.domains == "sketch").sum() == 197
    assert np.unique(b.ids).size == 200
    sketched = set(b.ids[b.domains == "sketch"].tolist())
    assert {160, 168, 169}.isdisjoint(sketched)
    with pytest.raises(ValueError, match="size"):
        load_pku_sketch(DATA, size=None)


def test_cufs_and_cuhk01_layouts(tmp_path):
    """The presets on tiny folders with the shared data's layouts."""
    for split, names in [("train", ["ar-7", "xm2vts-2"]), ("test", ["ar-1"])]:
        for name in names:
            for dom in ("photo", "sketch"):
                _save(tmp_path / "cufs" / split / dom / f"{name}.jpg", _img(len(name), 10, 8))
    (tmp_path / "cufs" / "README.md").write_text("not an image")
    b = load_cufs(tmp_path)
    assert b.ids.tolist() == ["ar-1", "ar-1", "ar-7", "ar-7", "xm2vts-2", "xm2vts-2"]
    assert b.domains.tolist() == ["photo", "sketch"] * 3
    assert b.split.tolist() == ["test", "test"] + ["train"] * 4
    t = load_cufs(tmp_path / "cufs", "train", size=(4, 5), color="gray")
    assert t.images.shape == (4, 5, 4) and set(t.split) == {"train"}
    with pytest.raises(ValueError, match="split"):
        load_cufs(tmp_path, "val")
    for pid in (3, 12):
        for shot in (1, 2, 3, 4):
            _save(tmp_path / "cuhk01" / "campus" / f"{pid:04d}{shot:03d}.png", _img(shot))
    c = load_cuhk01(tmp_path)
    assert c.ids.tolist() == [3] * 4 + [12] * 4
    assert c.domains.tolist() == [1, 1, 2, 2] * 2 and c.shots.tolist() == [1, 2, 3, 4] * 2
    assert c.filenames[2] == "campus/0003003.png"
    with pytest.raises(ValueError, match="no cuhk01 data"):
        load_cuhk01(tmp_path / "cufs")


@pytest.mark.skipif(not (DATA / "cufs" / "test").is_dir(), reason="CUFS data absent")
def test_load_cufs():
    """Counts of ../shared/data/cufs/README.md: 418 persons (AR 123, XM2VTS 295), one photo and
    one sketch each, 200 x 250; train 180 (AR 80, XM2VTS 100), test 238 (AR 43, XM2VTS 195)."""
    b = load_cufs(DATA)
    assert b.images.shape == (836, 250, 200, 3) and b.images.dtype == np.uint8
    ids = np.unique(b.ids)
    assert ids.size == 418 and sum(i.startswith("ar-") for i in ids) == 123
    for dom in ("photo", "sketch"):
        assert sorted(b.ids[b.domains == dom].tolist()) == sorted(ids.tolist())
    for split, n, n_ar in [("train", 180, 80), ("test", 238, 43)]:
        s = load_cufs(DATA, split, size=(20, 25), color="gray")
        assert s.images.shape == (2 * n, 25, 20) and np.unique(s.ids).size == n
        assert sum(i.startswith("ar-") for i in np.unique(s.ids)) == n_ar
        assert set(b.ids[b.split == split]) == set(s.ids)


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cuhk01" / "campus").is_dir(), reason="CUHK01 data absent")
def test_load_cuhk01():
    """971 persons x 2 cameras x 2 images, 60 x 160 RGB (../shared/data/cuhk01/README.md)."""
    b = load_cuhk01(DATA)
    assert b.images.shape == (3884, 160, 60, 3)
    assert np.unique(b.ids).tolist() == list(range(1, 972))
    assert np.all(np.bincount(b.ids)[1:] == 4)
    per = b.domains.reshape(971, 4)
    assert np.all(per == [1, 1, 2, 2])
