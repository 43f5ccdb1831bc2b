"""The re-id benchmarks' folder layouts (Market-1501, DukeMTMC-reID, MSMT17, CUHK03 new
protocol), each on a small folder generated in that exact layout, and the lazy ImageFiles."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crossmetric.datasets import (
    ImageFiles,
    load_cuhk03,
    load_dukemtmc,
    load_market1501,
    load_msmt17,
)


def _jpg(path: Path, value: int = 0, size=(16, 32)):
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size
    arr = np.full((h, w, 3), value, dtype=np.uint8)
    arr[: h // 2, :, 0] = 255 - value
    Image.fromarray(arr).save(path)


def _market(root: Path, names: dict, size=(16, 32)):
    for folder, files in names.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for k, name in enumerate(files):
            _jpg(root / folder / name, 20 * k, size)


MARKET = {
    "bounding_box_train": ["0002_c1s1_000451_03.jpg", "0002_c2s1_000551_01.jpg",
                           "0007_c3s3_064869_04.jpg", "0007_c6s1_000526_02.jpg"],
    "query": ["0001_c1s1_001051_00.jpg", "0003_c4s6_015641_00.jpg"],
    "bounding_box_test": ["0001_c2s1_000301_01.jpg", "0001_c1s1_002301_02.jpg",
                          "0003_c5s3_065187_04.jpg", "0000_c1s1_000201_03.jpg",
                          "-1_c1s1_000401_03.jpg", "-1_c3s1_000501_06.jpg"],
}


def test_market1501_rules(tmp_path):
    root = tmp_path / "market1501" / "Market-1501-v15.09.15"
    _market(root, MARKET)
    (root / "bounding_box_test" / "Thumbs.db").write_bytes(b"\x00")   # not a .jpg: ignored
    b = load_market1501(tmp_path)
    assert b.split.tolist() == ["train"] * 4 + ["query"] * 2 + ["gallery"] * 4
    # junk (-1) left out, the distractor 0000 kept in the gallery; cameras 0-based
    assert b.ids.tolist() == [2, 2, 7, 7, 1, 3, 0, 1, 1, 3]
    assert b.cams.tolist() == [0, 1, 2, 5, 0, 3, 0, 0, 1, 4]
    assert b.filenames[6] == "bounding_box_test/0000_c1s1_000201_03.jpg"
    assert isinstance(b.images, ImageFiles) and len(b.images) == 10
    assert b.images.load().shape == (10, 32, 16, 3)
    test = load_market1501(root, "test", size=(8, 16), color="gray")
    assert test.split.tolist() == ["query"] * 2 + ["gallery"] * 4
    assert np.asarray(test.images).shape == (6, 16, 8)
    assert load_market1501(tmp_path / "market1501", "query").ids.tolist() == [1, 3]


def test_market1501_errors(tmp_path):
    with pytest.raises(ValueError, match="no Market-1501 data found"):
        load_market1501(tmp_path)
    _market(tmp_path, MARKET)
    with pytest.raises(ValueError, match="split must be one of"):
        load_market1501(tmp_path, "val")
    _jpg(tmp_path / "query" / "person7.jpg")
    with pytest.raises(ValueError, match="query/person7.jpg: expected a name such as"):
        load_market1501(tmp_path)


def test_dukemtmc_layout(tmp_path):
    root = tmp_path / "dukemtmc-reid" / "DukeMTMC-reID"
    _market(root, {"bounding_box_train": ["0001_c2_f0046182.jpg", "0001_c5_f0051341.jpg"],
                   "query": ["0005_c2_f0046985.jpg"],
                   "bounding_box_test": ["0005_c5_f0054074.jpg", "0009_c8_f0016249.jpg"]})
    b = load_dukemtmc(tmp_path, size=(8, 16))
    assert b.ids.tolist() == [1, 1, 5, 5, 9]
    assert b.cams.tolist() == [1, 4, 1, 4, 7]
    assert b.split.tolist() == ["train", "train", "query", "gallery", "gallery"]
    assert b.images[0].shape == (16, 8, 3)


def test_msmt17_lists(tmp_path):
    root = tmp_path / "msmt17" / "MSMT17_V1"
    train = ["0000/0000_000_01_0303morning_0015_0.jpg 0",
             "0000/0000_001_05_0303morning_0036_1.jpg 0",
             "0001/0001_000_03_0303afternoon_0020_0.jpg 1"]
    val = ["0002/0002_000_07_0303noon_0011_0.jpg 2"]
    query = ["0000/0000_000_12_0303morning_0003_0.jpg 0"]
    gallery = ["0000/0000_001_15_0303morning_0004_1.jpg 0",
               "0003/0003_000_02_0303noon_0010_0.jpg 3"]
    for name, lines, folder in (("list_train.txt", train, "train"),
                                ("list_val.txt", val, "train"),
                                ("list_query.txt", query, "test"),
                                ("list_gallery.txt", gallery, "test")):
        root.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("\n".join(lines) + "\n")
        for line in lines:
            _jpg(root / folder / line.split()[0])
    b = load_msmt17(tmp_path)
    assert b.ids.tolist() == [0, 0, 1, 0, 0, 3]
    assert b.cams.tolist() == [0, 4, 2, 11, 14, 1]
    assert b.split.tolist() == ["train"] * 3 + ["query", "gallery", "gallery"]
    assert b.filenames[3] == "test/0000/0000_000_12_0303morning_0003_0.jpg"
    assert b.images[3].shape == (32, 16, 3)
    with_val = load_msmt17(root, "train", include_val=True)
    assert with_val.ids.tolist() == [0, 0, 1, 2] and with_val.cams[-1] == 6
    (root / "list_query.txt").write_text("0000/0000_000_12_x.jpg\n")
    with pytest.raises(ValueError, match="list_query.txt, line 1: expected 'path pid'"):
        load_msmt17(tmp_path)


def test_cuhk03_new_protocol(tmp_path):
    from scipy.io import savemat

    root = tmp_path / "cuhk03"
    names = ["1_001_1_01.png", "1_001_2_06.png", "1_002_1_01.png", "1_002_2_07.png",
             "2_001_1_02.png", "2_001_2_08.png", "3_004_1_01.png"]
    labels = [1, 1, 2, 2, 3, 3, 4]
    for k, name in enumerate(names):
        _jpg(root / "images_labeled" / name, 30 * k)
    filelist = np.empty((len(names), 1), dtype=object)
    for k, n in enumerate(names):
        filelist[k, 0] = np.array([n])
    savemat(root / "cuhk03_new_protocol_config_labeled.mat", {
        "filelist": filelist, "labels": np.array(labels, dtype=np.float64)[:, None],
        "train_idx": np.array([[1], [2], [3], [4]]), "query_idx": np.array([[5]]),
        "gallery_idx": np.array([[6], [7]]),
        "camId": np.array([[1], [2], [1], [2], [1], [2], [1]])})
    b = load_cuhk03(tmp_path, kind="labeled")
    assert b.ids.tolist() == [1, 1, 2, 2, 3, 3, 4]
    assert b.cams.tolist() == [0, 1, 0, 1, 0, 1, 0]
    assert b.split.tolist() == ["train"] * 4 + ["query", "gallery", "gallery"]
    assert b.filenames[4] == "images_labeled/2_001_1_02.png"
    got = b.images[4]
    want = np.asarray(Image.open(root / "images_labeled" / "2_001_1_02.png").convert("RGB"))
    np.testing.assert_array_equal(got, want)
    assert load_cuhk03(root, "gallery", kind="labeled").ids.tolist() == [3, 4]
    with pytest.raises(ValueError, match="no CUHK03 data found"):
        load_cuhk03(tmp_path)          # detected: no such file
    savemat(root / "cuhk03_new_protocol_config_labeled.mat", {
        "filelist": filelist, "labels": np.array(labels)[:, None],
        "train_idx": np.array([[0], [1]]), "query_idx": np.array([[5]]),
        "gallery_idx": np.array([[6]])})
    with pytest.raises(ValueError, match="train_idx must hold 1-based rows"):
        load_cuhk03(tmp_path, kind="labeled")


def test_image_files_lazy_and_batched(tmp_path):
    for k in range(5):
        _jpg(tmp_path / f"{k}.jpg", 40 * k)
    files = ImageFiles(tmp_path, [f"{k}.jpg" for k in range(5)])
    sub = files[np.array([True, False, True, False, True])]
    assert isinstance(sub, ImageFiles) and sub.names.tolist() == ["0.jpg", "2.jpg", "4.jpg"]
    assert sub.paths[1] == str(tmp_path / "2.jpg")
    np.testing.assert_array_equal(np.asarray(sub)[1], files[2])
    whole = files.describe("pixels", batch_size=5)
    np.testing.assert_allclose(files.describe("pixels", batch_size=2), whole)
    from crossmetric.datasets import describe_images

    np.testing.assert_allclose(whole, describe_images(files.load(), "pixels"))
    _jpg(tmp_path / "big.jpg", size=(20, 32))
    mixed = ImageFiles(tmp_path, ["0.jpg", "1.jpg", "big.jpg"])
    with pytest.raises(ValueError, match="different sizes"):
        mixed.describe("pixels", batch_size=2)
    with pytest.raises(ValueError, match="different sizes"):
        mixed.load()
    assert ImageFiles(tmp_path, ["0.jpg", "big.jpg"], size=(8, 8)).load().shape == (2, 8, 8, 3)
