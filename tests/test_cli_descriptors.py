"""The papers' image descriptors on the command line: ``--descriptor NAME``,
``--descriptor-param NAME=VALUE`` and the ``[descriptor]`` table of a ``--config`` file, each
against the feature class called directly (crossmetric.features._image_views, crossmetric.config,
crossmetric.cli._data) on a small generated image folder."""

import json
import tomllib

import numpy as np
import pytest

pytest.importorskip("skimage")
pytest.importorskip("PIL")

from crossmetric import features  # noqa: E402
from crossmetric.cli import build_parser, main  # noqa: E402
from crossmetric.cli._data import _own_dataset  # noqa: E402
from crossmetric.cli.benchmark import _resolve_benchmark_config  # noqa: E402
from crossmetric.config import parse_descriptor_param, resolve_config  # noqa: E402
from crossmetric.datasets import describe_images, load_image_folder  # noqa: E402
from crossmetric.features._image_views import (  # noqa: E402
    DESCRIPTORS,
    DescriptorError,
    descriptor_parameter_names,
    make_descriptor,
)

PATTERN = r"(?P<id>\d+)_(?P<domain>[ab])\.png"

#: name -> (the class called directly, the image size (width, height) it runs on here, the
#: width its defaults give there, or None where it is not a round number worth pinning)
CASES = {
    "lomo": (lambda: features.LOMO(dtype=np.float64), (48, 128), 26960),
    "dense-sift": (lambda: features.DenseSIFT(), (160, 160), 13696),
    "lbp": (lambda: features.LBPGrid(grid=(10, 8)), (48, 128), 4720),
    "ltp": (lambda: features.LBPGrid(grid=(10, 8), threshold=5), (48, 128), 9440),
    "patch-color-sift": (lambda: features.PatchColorSIFT(dtype=np.float64), (48, 128), 129024),
    "hog": (lambda: features.HOG(), (48, 128), None),
    "strips": (lambda: features.StripHistograms(normalize="root"), (48, 128), 924),
}
NEEDS_CV2 = ("dense-sift", "patch-color-sift")


def _images(size, n=4, seed=0):
    """``n`` RGB images of ``size`` (width, height): smooth blobs plus noise (uint8)."""
    w, h = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    out = []
    for _ in range(n):
        c = rng.uniform(0, 1, (3, 3))
        img = np.stack([np.sin(6 * (c[k, 0] * yy + c[k, 1] * xx) + 6 * c[k, 2])
                        for k in range(3)], axis=-1)
        img = 127.5 * (img + 1) + rng.normal(0, 12, img.shape)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return np.stack(out)


def _folder(root, size, n_ids, seed=0):
    """Images ``III_a.png`` / ``III_b.png`` of ``n_ids`` identities (two noisy views each)."""
    from PIL import Image

    root.mkdir()
    base = _images(size, n_ids, seed)
    rng = np.random.default_rng(seed + 1)
    for i, im in enumerate(base):
        for dom in "ab":
            view = np.clip(im + rng.normal(0, 10, im.shape), 0, 255).astype(np.uint8)
            Image.fromarray(view).save(root / f"{i:03d}_{dom}.png")
    return root


def _skip_without_cv2(name):
    if name in NEEDS_CV2:
        pytest.importorskip("cv2")


def _err(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_every_descriptor_name_is_a_choice():
    assert set(DESCRIPTORS) == {*CASES, "pixels"}
    help_text = build_parser()._subparsers._group_actions[0].choices["benchmark"].format_help()
    flat = " ".join(help_text.split())
    for name in DESCRIPTORS:
        assert name in flat
    assert "--descriptor-param NAME=VALUE" in flat and "48x128" in flat


@pytest.mark.parametrize("name", list(CASES))
def test_describe_images_equals_the_class(name):
    _skip_without_cv2(name)
    make, size, width = CASES[name]
    images = _images(size, n=3)
    F = describe_images(images, name)
    want = make().fit_transform(images)
    assert F.dtype == np.float64 and F.shape == want.shape
    if width is not None:
        assert F.shape == (3, width)
    np.testing.assert_allclose(F, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_cli_path_gives_the_class_width(name, tmp_path):
    """--images --pattern --descriptor NAME through the parser and the resolved configuration,
    to the dataset the benchmark would run on."""
    _skip_without_cv2(name)
    make, size, _ = CASES[name]
    root = _folder(tmp_path / "imgs", size, n_ids=4)
    # one image pair per identity: too few for verification folds, so the identification
    # protocol that such data allows
    args = build_parser().parse_args(["benchmark", "--images", str(root), "--pattern", PATTERN,
                                      "--descriptor", name, "--protocol", "identification"])
    _resolve_benchmark_config(args)
    data, description = _own_dataset(args)
    images = load_image_folder(root, PATTERN).images
    width = make().fit(images).n_features_out_ if name != "hog" else \
        make().fit_transform(images).shape[1]
    assert data.X.shape == data.Y.shape == (4, width)
    assert f"{name} descriptors" in description


def test_descriptor_params_reach_the_class(tmp_path):
    images = _images((48, 128), n=3)
    ltp = describe_images(images, "ltp")
    two = describe_images(images, "ltp", {"radii": (1, 2)})
    assert two.shape[1] == 2 * ltp.shape[1]
    np.testing.assert_allclose(two, features.LBPGrid(grid=(10, 8), radii=(1, 2), threshold=5)
                               .fit_transform(images))
    low = describe_images(images, "ltp", {"threshold": 1})
    assert low.shape == ltp.shape and not np.allclose(low, ltp)
    lbp = describe_images(images, "lbp", {"grid": (4, 4)})
    assert lbp.shape[1] == 16 * 59
    # the CLI path: --descriptor-param items, read as TOML literals
    root = _folder(tmp_path / "imgs", (48, 128), n_ids=4)
    args = build_parser().parse_args([
        "benchmark", "--images", str(root), "--pattern", PATTERN, "--descriptor", "lomo",
        "--descriptor-param", "n_scales=2", "--descriptor-param", "radii=[3]",
        "--protocol", "identification"])
    cfg = _resolve_benchmark_config(args)
    assert cfg.options["descriptor_params"] == {"n_scales": 2, "radii": (3,)}
    data, _ = _own_dataset(args)
    # 24 + 11 rows of blocks x (512 HSV + 81 SILTP) bins
    assert data.X.shape == (4, (24 + 11) * (512 + 81))
    want = features.LOMO(n_scales=2, radii=(3,), dtype=np.float64).fit_transform(
        load_image_folder(root, PATTERN).images)
    np.testing.assert_allclose(np.vstack([data.X, data.Y]),
                               want[np.r_[0:8:2, 1:8:2]], rtol=1e-12)


def test_make_descriptor_and_parameter_names():
    assert descriptor_parameter_names("pixels") == []
    assert "threshold" in descriptor_parameter_names("lbp")
    est = make_descriptor("ltp", {"threshold": 2})
    assert isinstance(est, features.LBPGrid) and est.threshold == 2 and est.grid == (10, 8)
    with pytest.raises(ValueError, match=r"descriptor 'ltp' \(LBPGrid\) has no parameter "
                                         r"'treshold' \(did you mean 'threshold'\?\); expected "
                                         r"one of grid, method, n_jobs"):
        make_descriptor("ltp", {"treshold": 2})
    with pytest.raises(ValueError, match="'pixels' .* has no parameter 'x'; it takes none"):
        make_descriptor("pixels", {"x": 1})
    with pytest.raises(ValueError, match="descriptor must be one of"):
        make_descriptor("sift")
    with pytest.raises(DescriptorError, match=r"descriptor 'lomo' \(LOMO\): step must be an "
                                              r"integer >= 1, got -1\.") as info:
        describe_images(_images((48, 128), n=1), "lomo", {"step": -1})
    assert info.value.reason == "step must be an integer >= 1, got -1."


def test_parse_descriptor_param():
    assert parse_descriptor_param("radii=[1, 2.5]") == ("radii", (1, 2.5))
    assert parse_descriptor_param(" method = uniform ") == ("method", "uniform")
    assert parse_descriptor_param("retinex=true") == ("retinex", True)
    for bad in ("threshold", "=3", "threshold=", "a b=1"):
        with pytest.raises(ValueError, match="--descriptor-param expects NAME=VALUE"):
            parse_descriptor_param(bad)
    with pytest.raises(ValueError, match="the value '3x!' is not a TOML literal"):
        parse_descriptor_param("threshold=3x!")


def test_resolve_config_descriptor_precedence(tmp_path):
    run = tmp_path / "run.toml"
    run.write_text('[benchmark]\nimages = "imgs"\npattern = "x"\ndescriptor = "ltp"\n\n'
                   '[descriptor]\nradii = [1, 2]\nthreshold = 3\n')
    cfg = resolve_config({"descriptor_params": ["threshold=4"]}, run)
    assert cfg.options["descriptor"] == "ltp"
    assert cfg.options["descriptor_params"] == {"radii": (1, 2), "threshold": 4}
    # the file's parameters belong to the file's descriptor
    other = resolve_config({"descriptor": "lbp"}, run)
    assert other.options["descriptor"] == "lbp" and other.options["descriptor_params"] is None
    # a default descriptor for image data, none for feature files
    assert resolve_config({"images": "d"}).options["descriptor"] == "hog"
    assert resolve_config({"dataset": "viper"}).options["descriptor"] == "strips"
    assert resolve_config({"dataset": "pku-sketch"}).options["descriptor"] == "hog"
    assert resolve_config({"x": "x.npy"}).options["descriptor"] is None
    # a mapping from Python works as the items do
    assert resolve_config({"images": "d", "descriptor_params": {"orientations": 6}}
                          ).options["descriptor_params"] == {"orientations": 6}
    # written and read back
    cfg.write(tmp_path / "config.toml")
    written = tomllib.loads((tmp_path / "config.toml").read_text())
    assert written["descriptor"] == {"radii": [1, 2], "threshold": 4}
    assert "descriptor_params" not in written["benchmark"]
    assert resolve_config({}, tmp_path / "config.toml").options == cfg.options


@pytest.mark.parametrize("given, message", [
    ({"images": "d", "descriptor": "ltp", "descriptor_params": ["treshold=3"]},
     "--descriptor-param 'treshold=3': descriptor 'ltp' (LBPGrid) has no parameter 'treshold' "
     "(did you mean 'threshold'?); expected one of grid, method, n_jobs, n_points, radii, "
     "threshold."),
    ({"x": "x.npy", "descriptor_params": ["threshold=3"]},
     "--descriptor-param 'threshold=3': descriptor parameters apply to image data"),
])
def test_resolve_config_bad_descriptor_params(given, message):
    with pytest.raises(ValueError) as info:
        resolve_config(given)
    assert str(info.value).startswith(message)


def test_config_file_descriptor_table_names_the_culprit(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[benchmark]\nimages = "d"\ndescriptor = "lomo"\n[descriptor]\ngrid = 3\n')
    with pytest.raises(ValueError) as info:
        resolve_config({}, path)
    assert str(info.value).startswith(f"config {str(path)!r}: [descriptor]: descriptor 'lomo' "
                                      "(LOMO) has no parameter 'grid'; expected one of "
                                      "block_size, dtype, hsv_bins")


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    """24 identities x 2 views, 40 x 32 RGB: enough identities for 2 folds."""
    return _folder(tmp_path_factory.mktemp("desc") / "imgs", (32, 40), n_ids=24)


def _bench(folder, out, *extra):
    return main(["benchmark", "--images", str(folder), "--pattern", PATTERN,
                 "--methods", "euclidean", "--folds", "2", "--repeats", "1", "--quiet",
                 "--n-jobs", "1", "--out", str(out), *extra])


def test_cli_run_records_the_descriptor_and_repeats(small_folder, tmp_path, capsys):
    assert _bench(small_folder, tmp_path / "a", "--descriptor", "ltp",
                  "--descriptor-param", "radii=[1, 2]", "--descriptor-param", "grid=[4, 4]") == 0
    err = capsys.readouterr().err
    assert "ltp descriptors" in err
    assert f"views of {16 * 2 * 2 * 59} and {16 * 2 * 2 * 59} features" in err
    written = tomllib.loads((tmp_path / "a" / "config.toml").read_text())
    assert written["benchmark"]["descriptor"] == "ltp"
    assert written["descriptor"] == {"radii": [1, 2], "grid": [4, 4]}
    # the written configuration repeats the run; --descriptor-param wins over its table
    assert main(["benchmark", "--config", str(tmp_path / "a" / "config.toml"),
                 "--out", str(tmp_path / "b")]) == 0
    assert main(["benchmark", "--config", str(tmp_path / "a" / "config.toml"),
                 "--descriptor-param", "radii=[1]", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"views of {16 * 2 * 59} and {16 * 2 * 59} features" in err

    def summary(name):
        rows = json.loads((tmp_path / name / "results.json").read_text())["summary"]
        return [(r["method"], r["measure"], r["mean"]) for r in rows
                if "seconds" not in r["measure"]]

    assert summary("a") == summary("b")
    again = tomllib.loads((tmp_path / "c" / "config.toml").read_text())
    assert again["descriptor"] == {"radii": [1], "grid": [4, 4]}
    # without parameters: the default descriptor is recorded, no [descriptor] table
    assert _bench(small_folder, tmp_path / "d") == 0
    capsys.readouterr()
    plain = tomllib.loads((tmp_path / "d" / "config.toml").read_text())
    assert plain["benchmark"]["descriptor"] == "hog" and "descriptor" not in plain


@pytest.mark.parametrize("extra, message", [
    (["--descriptor", "ltp", "--descriptor-param", "treshold=3"],
     "--descriptor-param 'treshold=3': descriptor 'ltp' (LBPGrid) has no parameter 'treshold' "
     "(did you mean 'threshold'?); expected one of grid, method, n_jobs, n_points, radii, "
     "threshold."),
    (["--descriptor", "ltp", "--descriptor-param", "threshold=-1"],
     "--descriptor-param threshold=-1 (--descriptor ltp, LBPGrid): threshold must be None "
     "(LBP) or a number >= 0"),
    (["--descriptor", "lomo", "--descriptor-param", "step=x!"],
     "--descriptor-param 'step=x!': the value 'x!' is not a TOML literal"),
    (["--descriptor", "lomo", "--descriptor-param", "step"],
     "--descriptor-param expects NAME=VALUE (e.g. threshold=5), got 'step'."),
    (["--descriptor", "pixels", "--descriptor-param", "size=3"],
     "--descriptor-param 'size=3': descriptor 'pixels' (_GreyPixels) has no parameter 'size'; "
     "it takes none."),
    (["--descriptor", "lomo"],
     "--descriptor lomo (LOMO): n_scales=3: scale 2 has 10 x 8 pixels, fewer than the 11 "
     "that a block and the SILTP radius need; use fewer scales or larger images; --size WxH "
     "resizes the images."),
    (["--descriptor", "sift"], "argument --descriptor: invalid choice: 'sift'"),
])
def test_cli_bad_descriptor_params_are_one_line(small_folder, tmp_path, capsys, extra, message):
    rc = _bench(small_folder, tmp_path / "out", *extra)
    line = _err(capsys)
    assert rc == 2, line
    assert line.startswith(f"crossmetric: error: {message}"), line
    assert not (tmp_path / "out").exists()


def test_cli_descriptor_param_needs_image_data(capsys):
    assert main(["benchmark", "--descriptor-param", "threshold=3"]) == 2
    assert _err(capsys).startswith("crossmetric: error: --descriptor-param 'threshold=3': "
                                   "descriptor parameters apply to image data")
