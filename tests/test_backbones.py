"""Backbones by name with weights from disk: build_backbone, load_weights, extract_features,
``crossmetric features`` and ``DeepGSM(backbone=NAME, weights=FILE)``.

torchvision does not import next to the CPU torch of this project's pin (see
crossmetric.deep.backbones), so most tests register a stand-in model zoo with torchvision's
interface (``list_models`` / ``get_model(name, weights=None)``); the test with the real
torchvision runs where it imports.
"""

from __future__ import annotations

import pickle
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric.cli import main  # noqa: E402
from crossmetric.deep import DeepGSM  # noqa: E402
from crossmetric.deep import backbones as B  # noqa: E402


class ZooNet(torch.nn.Module):
    """A classifier shaped like torchvision's ResNets: conv trunk, global pooling, ``fc``."""

    def __init__(self, width=6, num_classes=5):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, width, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(width, num_classes)

    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.bn1(self.conv1(x)))).flatten(1))


class ZooVGG(torch.nn.Module):
    """A classifier with a Sequential ``classifier`` (VGG / EfficientNet style)."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(2))
        self.classifier = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 7),
                                              torch.nn.ReLU(), torch.nn.Linear(7, 3))

    def forward(self, x):
        return self.classifier(self.features(x))


ZOO = {"zoonet": ZooNet, "zoonet_wide": lambda: ZooNet(width=9), "zoovgg": ZooVGG}


@pytest.fixture
def zoo(monkeypatch):
    calls = []

    def get_model(name, weights=None):
        calls.append((name, weights))
        return ZOO[name]()

    fake = types.SimpleNamespace(list_models=lambda: sorted(ZOO), get_model=get_model)
    monkeypatch.setattr(B, "_torchvision_models", lambda: (fake, None))
    return calls


def _images(n=4, size=32, seed=0, channels=3):
    rng = np.random.RandomState(seed)
    shape = (n, size, size, channels) if channels > 1 else (n, size, size)
    return (rng.rand(*shape) * 255).astype(np.uint8)


# ------------------------------------------------------------------------ load_weights
def test_load_weights_fits_unwraps_and_names_mismatches(tmp_path):
    src, dst = ZooNet(), ZooNet()
    path = tmp_path / "w.pth"
    torch.save(src.state_dict(), path)
    B.load_weights(dst, path)
    assert all(torch.equal(src.state_dict()[k], v) for k, v in dst.state_dict().items())
    # wrapped checkpoints: {"state_dict": ...}, DataParallel's "module." prefix
    for i, saved in enumerate(({"state_dict": src.state_dict(), "epoch": 3},
                               {f"module.{k}": v for k, v in src.state_dict().items()})):
        torch.save(saved, tmp_path / f"w{i}.pth")
        B.load_weights(ZooNet(), tmp_path / f"w{i}.pth")
    # a file for another architecture: one line naming the file and the first keys
    torch.save(ZooNet(width=9).state_dict(), tmp_path / "wide.pth")
    with pytest.raises(ValueError) as info:
        B.load_weights(ZooNet(), tmp_path / "wide.pth")
    msg = str(info.value)
    assert msg.startswith(f"weights {str(tmp_path / 'wide.pth')!r} do not fit ZooNet: "
                          "misshaped conv1.weight, conv1.bias, bn1.weight (9x3x3x3 in the "
                          "file, 6x3x3x3 in the model)")
    assert "\n" not in msg
    partial = {k: v for k, v in src.state_dict().items() if not k.startswith("bn1.")}
    partial["extra.weight"] = torch.zeros(2)
    torch.save(partial, tmp_path / "partial.pth")
    with pytest.raises(ValueError, match=r"missing bn1\.weight, bn1\.bias, bn1\.running_mean "
                                         r"and 2 more; unexpected extra\.weight\.$"):
        B.load_weights(ZooNet(), tmp_path / "partial.pth")
    # the classifier may be absent when it is declared optional
    no_fc = {k: v for k, v in src.state_dict().items() if not k.startswith("fc.")}
    torch.save(no_fc, tmp_path / "nofc.pth")
    with pytest.raises(ValueError, match="missing fc.weight, fc.bias"):
        B.load_weights(ZooNet(), tmp_path / "nofc.pth")
    B.load_weights(ZooNet(), tmp_path / "nofc.pth", optional_prefix="fc")


def test_load_weights_refuses_code_and_non_state_dicts(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("code ran",))

    with open(tmp_path / "evil.pth", "wb") as fh:
        pickle.dump({"w": Boom()}, fh, protocol=2)
    with pytest.raises(ValueError, match="not a state dict that loads without running code"):
        B.load_weights(ZooNet(), tmp_path / "evil.pth")
    torch.save([1, 2], tmp_path / "list.pth")
    with pytest.raises(ValueError, match=r"expected a state dict \(names -> tensors\)"):
        B.load_weights(ZooNet(), tmp_path / "list.pth")
    with pytest.raises(ValueError, match="no such file"):
        B.load_weights(ZooNet(), tmp_path / "none.pth")


# ---------------------------------------------------------------------- build_backbone
def test_build_backbone_by_name(zoo, tmp_path):
    before = torch.random.get_rng_state()
    a, b = B.build_backbone("zoonet", random_state=3), B.build_backbone("zoonet", random_state=3)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global stream untouched
    assert zoo == [("zoonet", None), ("zoonet", None)]          # never asks for weights
    assert isinstance(a.model.fc, torch.nn.Identity)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k              # seeded initialisation
    x = torch.rand(2, 3, 8, 8)
    assert a.eval()(x).shape == (2, 6)                           # pooled features, no classifier
    assert a(x[:, :1]).shape == (2, 6)                           # grey repeated to 3 channels
    # weights of the whole classifier, or of its features only
    src = ZooNet()
    torch.save(src.state_dict(), tmp_path / "full.pth")
    got = B.build_backbone("zoonet", tmp_path / "full.pth")
    assert torch.equal(got.model.conv1.weight, src.conv1.weight)
    torch.save({k: v for k, v in src.state_dict().items() if not k.startswith("fc.")},
               tmp_path / "trunk.pth")
    assert torch.equal(B.build_backbone("zoonet", tmp_path / "trunk.pth").model.bn1.running_var,
                       src.bn1.running_var)
    with pytest.raises(ValueError, match="do not fit ZooNet: misshaped conv1.weight"):
        B.build_backbone("zoonet_wide", tmp_path / "full.pth")
    # a Sequential classifier loses its last linear layer only
    vgg = B.build_backbone("zoovgg")
    assert isinstance(vgg.model.classifier[3], torch.nn.Identity)
    assert vgg.eval()(torch.rand(2, 3, 8, 8)).shape == (2, 7)
    # ImageNet standardisation of the inputs
    norm = B.build_backbone("zoonet", normalize="imagenet", random_state=3).eval()
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in B.IMAGENET_MEAN_STD)
    torch.testing.assert_close(norm(x), a.eval()((x - mean) / std))
    with pytest.raises(ValueError, match="backbone 'nope' is not a known architecture: not a "
                                         "torchvision model; "):
        B.build_backbone("nope")
    with pytest.raises(ValueError, match="normalize must be None or 'imagenet'"):
        B.build_backbone("zoonet", normalize="yes")


def test_extract_features_batches_and_layouts(zoo):
    net = B.build_backbone("zoonet", random_state=0)
    imgs = _images(5, size=16)
    whole = B.extract_features(net, imgs, batch_size=64)
    np.testing.assert_allclose(B.extract_features(net, imgs, batch_size=2), whole, rtol=1e-5,
                               atol=1e-6)
    assert whole.shape == (5, 6) and whole.dtype == np.float32
    assert net.training                                          # mode restored
    grey = B.extract_features(net, imgs[..., 0])
    np.testing.assert_allclose(grey, B.extract_features(net, np.repeat(imgs[..., :1], 3, -1)),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        B.extract_features(net, imgs, batch_size=0)


# --------------------------------------------------------------------------------- CLI
def test_cli_features_writes_embeddings(zoo, tmp_path, capsys):
    from PIL import Image

    from crossmetric.datasets import load_features

    folder = tmp_path / "imgs"
    folder.mkdir()
    imgs = _images(4, size=32)
    for i, im in enumerate(imgs):
        Image.fromarray(im).save(folder / f"{i}_{'ab'[i % 2]}.png")
    (folder / "README.txt").write_text("not an image")
    src = ZooNet()
    torch.save(src.state_dict(), tmp_path / "w.pth")
    out = tmp_path / "emb.npz"
    assert main(["features", "--backbone", "zoonet", "--weights", str(tmp_path / "w.pth"),
                 "--images", str(folder), "--out", str(out)]) == 0
    data = np.load(out)                                           # no pickles needed
    assert sorted(data.files) == ["X", "domains", "filenames", "ids"]
    assert list(data["ids"]) == ["0_a", "1_b", "2_a", "3_b"]
    expected = B.extract_features(B.build_backbone("zoonet", tmp_path / "w.pth"), imgs)
    np.testing.assert_allclose(data["X"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(load_features(out), data["X"])  # --x emb.npz reads X
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert main(["features", "--backbone", "zoonet", "--images", str(folder), "--pattern",
                 r"(?P<id>\d)_(?P<domain>[ab])\.png", "--out", str(out)]) == 0
    data = np.load(out)
    assert list(data["ids"]) == [0, 1, 2, 3] and list(data["domains"]) == ["a", "b", "a", "b"]
    assert "cams" not in data.files
    assert main(["features", "--backbone", "zoonet", "--images", str(folder), "--pattern",
                 r"(?P<id>\d)_(?P<cam>[ab])\.png", "--out", str(out)]) == 0
    assert list(np.load(out)["cams"]) == ["a", "b", "a", "b"]    # a 'cam' group is kept
    capsys.readouterr()
    torch.save(ZooNet(width=9).state_dict(), tmp_path / "wide.pth")
    assert main(["features", "--backbone", "zoonet", "--weights", str(tmp_path / "wide.pth"),
                 "--images", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"crossmetric: error: weights {str(tmp_path / 'wide.pth')!r} do not fit ZooNet: "
        "misshaped conv1.weight")
    assert main(["features", "--backbone", "zoonet", "--images", str(folder), "--out",
                 str(tmp_path / "emb.csv")]) == 2
    assert "must end in .npz" in capsys.readouterr().err


# ----------------------------------------------------------------------------- DeepGSM
SMALL = dict(hidden_units=16, n_identities=4, max_iter=2, device="cpu", tol=None,
             random_state=0)


def _people(n_ids=6, per=2, size=16, seed=0):
    rng = np.random.RandomState(seed)
    ids = np.repeat(np.arange(n_ids), per)
    photos = (rng.rand(ids.size, size, size, 3) * 255).astype(np.uint8)
    sketches = photos.mean(3).astype(np.uint8)
    return photos, ids, sketches, ids.copy()


def test_deepgsm_named_backbone_and_weights(zoo, tmp_path):
    px, ix, sy, iy = _people()
    src = ZooNet()
    torch.save(src.state_dict(), tmp_path / "w.pth")
    frozen = {**SMALL, "max_iter": 1, "learning_rate": 1e-12}
    m = DeepGSM(**frozen, backbone="zoonet", weights=str(tmp_path / "w.pth")).fit_identities(
        px, ix, sy, iy)
    trunk = m.net_.shared.module.model
    torch.testing.assert_close(trunk.conv1.weight, src.conv1.weight)
    assert m.transform_x(px[:2]).shape == (2, 13)                # r = 6 pooled features
    again = pickle.loads(pickle.dumps(m))                         # rebuilt without the file
    (tmp_path / "w.pth").unlink()
    np.testing.assert_allclose(again.transform_y(sy[:3]), m.transform_y(sy[:3]), rtol=1e-5)
    # random initialisation from random_state: two fits agree
    a = DeepGSM(**SMALL, backbone="zoonet").fit_identities(px, ix, sy, iy)
    b = DeepGSM(**SMALL, backbone="zoonet").fit_identities(px, ix, sy, iy)
    np.testing.assert_array_equal(a.transform_x(px[:3]), b.transform_x(px[:3]))
    # a module backbone takes weights too (into its copy)
    user = ZooNet()
    torch.save(src.state_dict(), tmp_path / "w2.pth")
    mod = DeepGSM(**frozen, backbone=user, weights=str(tmp_path / "w2.pth")).fit_identities(
        px, ix, px, ix)  # a plain module: no grey-to-RGB repeat
    torch.testing.assert_close(mod.net_.shared.module.conv1.weight, src.conv1.weight)
    assert not torch.equal(user.conv1.weight, src.conv1.weight)
    torch.save(ZooNet(width=9).state_dict(), tmp_path / "wide.pth")
    with pytest.raises(ValueError, match="do not fit ZooNet: misshaped conv1.weight"):
        DeepGSM(**SMALL, backbone="zoonet", weights=str(tmp_path / "wide.pth")).fit_identities(
            px, ix, sy, iy)
    with pytest.raises(ValueError, match="weights needs a backbone given by name"):
        DeepGSM(**SMALL, weights=str(tmp_path / "wide.pth")).fit_identities(px, ix, sy, iy)
    with pytest.raises(ValueError, match="'nope.pt' is not a known architecture.*It is no "
                                         "state-dict file either"):
        DeepGSM(**SMALL, backbone="nope.pt").fit_identities(px, ix, sy, iy)


def _real_torchvision():
    """The installed torchvision, or a skip saying why it does not import (next to the CPU
    torch 2.13.0 wheel, PyPI's torchvision 0.28.0 -- a CUDA build -- fails on
    ``register_fake("torchvision::nms")``: install its CPU build beside it)."""
    try:
        import torchvision
    except Exception as exc:  # noqa: BLE001 - a RuntimeError with a mismatched torch build
        pytest.skip(f"torchvision does not import here ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())})")
    return torchvision


def test_real_torchvision_resnet18_cli_features(tmp_path):
    """``crossmetric features --backbone resnet18`` on the real torchvision (no stand-in zoo):
    resnet18 built with ``weights=None`` (nothing downloaded), seeded, its classifier removed,
    one forward pass over two tiny images."""
    tv = _real_torchvision()
    Image = pytest.importorskip("PIL.Image", reason="the image folder needs Pillow")
    assert "resnet18" in tv.models.list_models()
    folder = tmp_path / "imgs"
    folder.mkdir()
    imgs = _images(2, size=24)
    for i, im in enumerate(imgs):
        Image.fromarray(im).save(folder / f"{i}.png")
    out = tmp_path / "emb.npz"
    assert main(["features", "--backbone", "resnet18", "--images", str(folder), "--seed", "3",
                 "--out", str(out)]) == 0
    X = np.load(out)["X"]
    assert X.shape == (2, 512) and X.dtype == np.float32 and np.all(np.isfinite(X))
    assert not np.allclose(X[0], X[1])
    # torchvision's own resnet18 from the same seed, without its classifier, in eval mode
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        ref = tv.models.resnet18(weights=None)
    ref.fc = torch.nn.Identity()
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).float() / 255.0
    with torch.no_grad():
        expected = ref.eval()(x).numpy()
    np.testing.assert_allclose(X, expected, rtol=1e-4, atol=1e-5)


def test_real_torchvision_resnet18(tmp_path):
    tv = _real_torchvision()
    torch.save(tv.models.resnet18().state_dict(), tmp_path / "r18.pth")
    net = B.build_backbone("resnet18", tmp_path / "r18.pth")
    assert B.extract_features(net, _images(4, size=32)).shape == (4, 512)
    torch.save(tv.models.resnet34().state_dict(), tmp_path / "r34.pth")
    with pytest.raises(ValueError, match=r"do not fit ResNet: unexpected layer1\.2\."):
        B.build_backbone("resnet18", tmp_path / "r34.pth")
