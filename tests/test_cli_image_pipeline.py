"""``fit`` / ``evaluate`` / ``search`` on image folders: the pipeline stored in the model file
(descriptor settings, view step, learner), the sides of a cross-modal model
(``--probe-domain``, the wrong-direction warning) and ``fit``'s held-out identities."""

from __future__ import annotations

import csv
import io
import json
import shutil

import numpy as np
import pytest

pytest.importorskip("PIL")

from crossmetric.cli import main  # noqa: E402
from crossmetric.persistence import load_model, save_model  # noqa: E402
from crossmetric.protocols.pipeline import ViewPipeline  # noqa: E402

PATTERN = r"(train|test)/(?P<domain>photo|sketch)/(?P<id>p-\d+)\.png"
ALL = r"(?P<domain>photo|sketch)/(?P<id>p-\d+)\.png"


def _faces(n_ids: int, seed: int = 0, size=(24, 32)):
    """``(photos, sketches)``: one smooth random pattern per identity (h x w grey levels); a
    sketch is the inverted pattern, so that the two sides' statistics differ."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    photos, sketches = [], []
    for _ in range(n_ids):
        c = rng.normal(size=(3, 3))
        base = sum(np.sin(5 * (c[k, 0] * yy + c[k, 1] * xx) + 6 * c[k, 2]) for k in range(3))
        base = 60 + 40 * base / 3
        photos.append(np.clip(base + rng.normal(0, 8, base.shape), 0, 255))
        sketches.append(np.clip(255 - 0.6 * base + rng.normal(0, 8, base.shape), 0, 255))
    return np.asarray(photos, np.uint8), np.asarray(sketches, np.uint8)


def _write(root, photos, sketches, ids, part: str | None = None):
    from PIL import Image

    for dom, ims in (("photo", photos), ("sketch", sketches)):
        folder = root / part / dom if part else root / dom
        folder.mkdir(parents=True, exist_ok=True)
        for i in ids:
            Image.fromarray(ims[i]).save(folder / f"p-{i}.png")


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    """24 identities: ``all/{photo,sketch}`` and a 16 / 8 split ``{train,test}/...``."""
    root = tmp_path_factory.mktemp("faces")
    photos, sketches = _faces(24)
    _write(root / "all", photos, sketches, range(24))
    _write(root / "cufs", photos, sketches, range(16), "train")
    _write(root / "cufs", photos, sketches, range(16, 24), "test")
    return root


def _fit_images(faces, out, *extra, method="cca"):
    return main(["fit", method, "--images", str(faces / "cufs"), "--pattern",
                 r"train/(?P<domain>photo|sketch)/(?P<id>p-\d+)\.png", "--out", str(out),
                 "--quiet", *extra])


def test_images_round_trip_stores_and_reapplies_the_pipeline(faces, tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert _fit_images(faces, model, "--descriptor", "hog", "--descriptor-param",
                       "orientations=6", "--size", "20x28", "--no-validation",
                       method="rca") == 0
    out = capsys.readouterr()
    assert "fitted RCA" in out.out and "training identities (16)" in out.out
    assert "reduced by PCA" in out.err and "to 15 dims" in out.err
    pipe = load_model(model)
    assert isinstance(pipe, ViewPipeline)
    assert (pipe.descriptor, pipe.descriptor_params, pipe.size) == ("hog", {"orientations": 6},
                                                                     (20, 28))
    assert pipe.domain_names == ("photo", "sketch")
    assert pipe.reduction_.pca_x is pipe.reduction_.pca_y  # one PCA for views of one width
    assert pipe.reduction_.pca_x.n_components_ == 15   # 16 training identities - 1
    width = pipe.input_mean_[0].size
    assert pipe._sample_shape_x_ == (width,) and pipe.input_std_[1].shape == (width,)
    assert pipe.learner_.preprocessor is None  # no training samples in the file

    test = [str(faces / "cufs"), "--pattern", r"test/(?P<domain>photo|sketch)/(?P<id>p-\d+)\.png"]
    assert main(["evaluate", str(model), "--images", *test, "--json", "--quiet"]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    # the same numbers by hand: the folder described with the stored settings, the pipeline
    from crossmetric.datasets import image_views, load_image_folder
    from crossmetric.protocols import measure_identification

    bunch = load_image_folder(faces / "cufs", test[2], size=(20, 28))
    data = image_views(bunch.images, bunch.ids, bunch.domains, descriptor="hog",
                       descriptor_params={"orientations": 6})
    ref, _ = measure_identification(pipe, data.X, data.Y, data.labels, data.labels,
                                    ranks=(1, 5, 10, 20))
    assert rep["n_probes"] == 8 and rep["rank1"] == pytest.approx(ref["rank1"], abs=1e-12)
    assert rep["map"] == pytest.approx(ref["map"], abs=1e-12)

    # search: photo queries against the sketch database, the images' files in the CSV
    assert main(["search", str(model), "--images", *test, "-k", "3", "--quiet"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 8 * 3
    assert all(r["query_file"].startswith("test/photo/") and r["file"].startswith("test/sketch/")
               for r in rows)
    firsts = [r for r in rows if r["rank"] == "1"]
    hits = np.mean([r["query_file"].split("/")[-1] == r["file"].split("/")[-1] for r in firsts])
    assert hits == pytest.approx(ref["rank1"])
    # another descriptor than the model's is refused
    assert main(["evaluate", str(model), "--images", *test, "--descriptor", "lbp"]) == 2
    assert "the model was fitted with --descriptor hog" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["cca", "rca"])
def test_evaluate_images_equals_benchmark_on_its_split(faces, tmp_path, capsys, method):
    """The benchmark's identification split rebuilt as two folders: fit --images on its
    training identities and evaluate --images on its test ones give its numbers (RCA: views
    reduced by the PCA, CCA: kept, as the benchmark does)."""
    from crossmetric.datasets import image_views, load_image_folder
    from crossmetric.protocols import identification_splits

    assert main(["benchmark", "--images", str(faces / "all"), "--pattern", ALL, "--descriptor",
                 "pixels", "--methods", method, "--protocol", "identification", "--repeats", "1",
                 "--seed", "0", "--n-jobs", "1", "--quiet", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "b" / "results.json").read_text())["summary"]
    bench = {r["measure"]: r["mean"] for r in summary}
    # the benchmark's split (run_protocols: seed 0, identification only, 30 % of identities)
    bunch = load_image_folder(faces / "all", ALL)
    data = image_views(bunch.images, bunch.ids, bunch.domains, descriptor="pixels")
    split = identification_splits(data.labels, 1, random_state=0)[0]
    ids = np.unique(bunch.ids)
    test_ids = set(ids[np.unique(data.labels[split.probe_rows])].tolist())
    for dom in ("photo", "sketch"):
        for f in (faces / "all" / dom).iterdir():
            part = "test" if f.stem in test_ids else "train"
            (tmp_path / "split" / part / dom).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, tmp_path / "split" / part / dom / f.name)
    model = tmp_path / "m.npz"
    assert main(["fit", method, "--images", str(tmp_path / "split"), "--pattern",
                 r"train/" + ALL, "--descriptor", "pixels", "--no-validation", "--quiet",
                 "--out", str(model)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(model), "--images", str(tmp_path / "split"), "--pattern",
                 r"test/" + ALL, "--json", "--quiet"]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    assert rep["n_probes"] == len(test_ids) == 7
    for key in ("rank1", "rank5", "map"):
        assert rep[key] == pytest.approx(bench[key], abs=1e-9), key
    assert (load_model(model).reduction_ is None) == (method == "cca")


def _features(n_ids=30, dx=12, dy=8, seed=0):
    """Paired features of two sides with distinct statistics: x ~ N(0, 1), y ~ N(5, 1)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_ids, 4))
    X = Z @ rng.normal(size=(4, dx)) + 0.1 * rng.normal(size=(n_ids, dx))
    Y = Z @ rng.normal(size=(4, dy)) + 0.1 * rng.normal(size=(n_ids, dy)) + 5.0
    return X, Y, np.arange(n_ids)


def _save(tmp_path, **arrays):
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)


def test_probe_domain_swaps_the_sides_and_the_wrong_direction_warns(tmp_path, capsys):
    X, Y, labels = _features(dx=10, dy=10)
    _save(tmp_path, x=X, y=Y, labels=labels)
    model = tmp_path / "m.npz"
    assert main(["fit", "cca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", str(tmp_path / "labels.npy"), "--x-name", "photo", "--y-name",
                 "sketch", "--param", "n_components=4", "--no-validation",
                 "--out", str(model)]) == 0
    capsys.readouterr()
    pipe = load_model(model)
    assert pipe.domain_names == ("photo", "sketch")
    lab = str(tmp_path / "labels.npy")
    ident = ["--probe-labels", lab, "--gallery-labels", lab, "--json"]
    # sketches given as --x without saying so: one warning line, then the (wrong) numbers
    assert main(["evaluate", str(model), "--x", str(tmp_path / "y.npy"), "--y",
                 str(tmp_path / "x.npy"), *ident]) == 0
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if "warning" in ln]
    assert any("--x looks like the model's 'sketch' side" in ln for ln in warnings)
    assert any("--y looks like the model's 'photo' side" in ln for ln in warnings)
    # --probe-domain sketch: sketches probe the photo gallery, no warning
    assert main(["evaluate", str(model), "--x", str(tmp_path / "y.npy"), "--y",
                 str(tmp_path / "x.npy"), "--probe-domain", "sketch", *ident]) == 0
    out = capsys.readouterr()
    assert "warning" not in out.err
    rep = json.loads(out.out)["identification"]
    D = pipe.cross_distance(X, Y).T   # sketch i against photo j
    assert rep["rank1"] == pytest.approx(np.mean(np.argmin(D, axis=1) == labels))
    # photo probes, the default, give the other direction's figure
    assert main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--y",
                 str(tmp_path / "y.npy"), *ident]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    assert rep["rank1"] == pytest.approx(np.mean(np.argmin(D.T, axis=1) == labels))
    # search in that direction too: the nearest photo of each sketch
    assert main(["search", str(model), "--queries", str(tmp_path / "y.npy"), "--database",
                 str(tmp_path / "x.npy"), "--probe-domain", "sketch", "-k", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)["results"]
    assert [r["ids"][0] for r in res] == np.argmin(D, axis=1).tolist()
    assert main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--y",
                 str(tmp_path / "y.npy"), "--probe-domain", "face", *ident]) == 2
    assert "'face' is not a side of the model; expected 'photo' or 'sketch'" in \
        capsys.readouterr().err


def test_other_direction_of_unequal_widths_works_with_probe_domain(tmp_path, capsys):
    """A cross-modal model on 12- and 8-feature sides evaluated sketch -> photo: without
    --probe-domain a one-line error that names it, with it the numbers."""
    X, Y, labels = _features(dx=12, dy=8)
    _save(tmp_path, x=X, y=Y, labels=labels)
    model = tmp_path / "m.npz"
    assert main(["fit", "cca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", str(tmp_path / "labels.npy"), "--param", "n_components=4",
                 "--out", str(model)]) == 0
    capsys.readouterr()
    lab = str(tmp_path / "labels.npy")
    args = ["evaluate", str(model), "--x", str(tmp_path / "y.npy"), "--y",
            str(tmp_path / "x.npy"), "--probe-labels", lab, "--gallery-labels", lab]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--x: 8 features, but the model's 'x' side takes 12" in err
    assert "give --probe-domain y" in err
    assert main([*args, "--probe-domain", "y"]) == 0
    assert "rank-1" in capsys.readouterr().out


def test_fit_holds_out_identities_and_warns_on_a_large_gap(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 60   # noise: nothing carries over from the training identities to new ones
    _save(tmp_path, x=rng.normal(size=(n, 40)), y=rng.normal(size=(n, 40)),
          labels=np.arange(n))
    common = ["fit", "cca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
              "--labels", str(tmp_path / "labels.npy"), "--param", "n_components=30",
              "--seed", "3"]
    assert main([*common, "--out", str(tmp_path / "a.npz")]) == 0
    out = capsys.readouterr()
    assert "held-out identities (6, not fitted)" in out.out
    assert "training identities (54)" in out.out
    assert "warning: the held-out identities score far below the training ones" in out.err
    # the held-out identities are those of the learners' early stopping (one splitter)
    from crossmetric._solvers.early_stopping import validation_split
    from crossmetric.pairs import make_pairs

    labels = np.arange(n)
    pairs, y = make_pairs(labels, labels, random_state=3)
    train, val = validation_split(pairs[:, 0], pairs[:, 1], y, n, n, tied=False, fraction=0.1,
                                  random_state=3)
    assert f"fitted CCA on {int(train.sum())} pairs" in out.out
    assert np.unique(pairs[val & (y == 1), 0]).size == 6
    assert main([*common, "--no-validation", "--out", str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr()
    assert "held-out" not in out.out and "warning" not in out.err
    assert f"fitted CCA on {y.size} pairs" in out.out


def test_feature_files_fit_reduces_and_evaluate_applies_the_reduction(tmp_path, capsys):
    """Views wider than the training identities minus one are reduced by the PCA fitted on
    the training side (RCA, a learner that does not reduce itself); evaluate applies it."""
    X, Y, labels = _features(n_ids=20, dx=40, dy=40, seed=2)
    _save(tmp_path, x=X, y=Y, labels=labels)
    model = tmp_path / "m.npz"
    assert main(["fit", "rca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", str(tmp_path / "labels.npy"), "--no-validation",
                 "--out", str(model)]) == 0
    assert "to 19 dims" in capsys.readouterr().err
    pipe = load_model(model)
    assert pipe.reduction_.pca_x.n_components_ == 19
    lab = str(tmp_path / "labels.npy")
    assert main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--y",
                 str(tmp_path / "y.npy"), "--probe-labels", lab, "--gallery-labels", lab,
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    D = pipe.learner_.cross_distance(pipe.reduction_.pca_x.transform(X),
                                     pipe.reduction_.pca_y.transform(Y))
    assert rep["rank1"] == pytest.approx(np.mean(np.argmin(D, axis=1) == labels))
    # --pca N: that width; --pca takes auto, none or a width
    assert main(["fit", "rca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", lab, "--no-validation", "--pca", "5",
                 "--out", str(tmp_path / "n.npz")]) == 0
    assert load_model(tmp_path / "n.npz").reduction_.pca_x.n_components_ == 5
    assert main(["fit", "rca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", lab, "--pca", "some", "--out", str(tmp_path / "n.npz")]) == 2
    assert "--pca expects auto, none or a positive width" in capsys.readouterr().err


def test_older_model_files_still_evaluate_and_search(tmp_path, capsys):
    """A file holding the learner alone (written before the pipeline) is read as before, and
    --probe-domain names its sides x and y."""
    from crossmetric import CCA, make_pairs

    X, Y, labels = _features(dx=10, dy=6)
    pairs, y = make_pairs(labels, labels, random_state=0)
    est = CCA(n_components=3, preprocessor=(X, Y)).fit(pairs, y)
    save_model(tmp_path / "old.npz", est, meta={"method": "cca"})
    _save(tmp_path, x=X, y=Y, labels=labels)
    lab = str(tmp_path / "labels.npy")
    base = ["evaluate", str(tmp_path / "old.npz"), "--probe-labels", lab, "--gallery-labels",
            lab, "--json"]
    assert main([*base, "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy")]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    D = est.cross_distance(X, Y)
    assert rep["rank1"] == pytest.approx(np.mean(np.argmin(D, axis=1) == labels))
    assert main([*base, "--x", str(tmp_path / "y.npy"), "--y", str(tmp_path / "x.npy"),
                 "--probe-domain", "y"]) == 0
    rep = json.loads(capsys.readouterr().out)["identification"]
    assert rep["rank1"] == pytest.approx(np.mean(np.argmin(D.T, axis=1) == labels))
    assert main(["search", str(tmp_path / "old.npz"), "--queries", str(tmp_path / "x.npy"),
                 "--database", str(tmp_path / "y.npy"), "-k", "2"]) == 0
    assert capsys.readouterr().out.startswith("query,rank,id,distance\n")


def test_image_options_are_checked_before_anything_is_read(tmp_path, capsys):
    assert main(["fit", "cca", "--images", str(tmp_path), "--x", "a.npy", "--pattern", ALL,
                 "--out", str(tmp_path / "m.npz")]) == 2
    assert "leave out --x" in capsys.readouterr().err
    assert main(["fit", "cca", "--x", "a.npy", "--labels", "l.npy", "--pattern", ALL,
                 "--out", str(tmp_path / "m.npz")]) == 2
    assert "--pattern needs --images DIR" in capsys.readouterr().err
    assert main(["fit", "cca", "--out", str(tmp_path / "m.npz")]) == 2
    assert "--images DIR --pattern REGEX" in capsys.readouterr().err


def test_descriptor_progress_gives_the_rows_of_one_call():
    from crossmetric.datasets import describe_images

    photos, _ = _faces(70, size=(16, 16))
    seen = []
    F = describe_images(photos, "hog", progress=seen.append)
    assert seen == [64, 6]
    assert np.array_equal(F, describe_images(photos, "hog"))


def test_fit_shows_the_descriptor_progress_unless_quiet(faces, tmp_path, capsys):
    args = ["fit", "cca", "--images", str(faces / "cufs"), "--pattern", r"train/" + ALL,
            "--descriptor", "pixels", "--out", str(tmp_path / "m.npz")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "pixels descriptors" in err and "32/32" in err
    assert main([*args, "--quiet"]) == 0
    assert "descriptors:" not in capsys.readouterr().err


def test_contradictory_pairs_are_refused_by_their_rows_with_a_hold_out(tmp_path, capsys):
    """With identities held out, the rows named are still those of the --pairs file, and a
    contradiction among held-out pairs is refused too."""
    X, Y, labels = _features(n_ids=30)
    _save(tmp_path, x=X, y=Y)
    rows = [(i, i, 1) for i in range(30)] + [(i, (i + 1) % 30, -1) for i in range(30)]
    for k in (13, 17):   # identity 13 is held out (seed 0), 17 is not
        bad = [*rows, (k, k, -1)]
        (tmp_path / "p.csv").write_text("i,j,label\n" + "".join(f"{a},{b},{c}\n"
                                                               for a, b, c in bad))
        assert main(["fit", "cca", "--x", str(tmp_path / "x.npy"), "--y",
                     str(tmp_path / "y.npy"), "--pairs", str(tmp_path / "p.csv"),
                     "--out", str(tmp_path / "m.npz")]) == 2
        assert (f"--pairs: data rows {k + 1} ({k},{k},1) and 61 ({k},{k},-1) join the same "
                "two samples") in capsys.readouterr().err
    from crossmetric._solvers.early_stopping import validation_split

    p, y = np.array([r[:2] for r in rows]), np.array([r[2] for r in rows])
    held = validation_split(p[:, 0], p[:, 1], y, 30, 30, tied=False, fraction=0.1,
                            random_state=0)[1]
    assert 13 in p[held, 0] and 17 not in p[held, 0]
    assert not (tmp_path / "m.npz").exists()
