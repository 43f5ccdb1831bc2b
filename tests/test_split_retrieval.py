"""The user's split and direction (test size, probe side, fixed split files) and the
class-level cross-modal retrieval protocol (mAP x->y / y->x, mAP@k, precision-recall)."""

import json

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from crossmetric import CCA, Euclidean
from crossmetric.cli import main
from crossmetric.datasets import make_cross_modal
from crossmetric.metrics import mean_average_precision
from crossmetric.metrics.retrieval import (
    mean_average_precision_at_k,
    precision_recall_curve_mean,
    retrieval_report,
)
from crossmetric.pairs import count_positive_pairs, make_pairs
from crossmetric.protocols import fixed_split, identification_splits, run_protocols
from crossmetric.protocols.split_files import (
    read_split_file,
    read_train_index,
    write_split_file,
)


# ----------------------------------------------------------------- slow, obvious references
def _slow_map_at_k(D, ql, dl, k):
    out = []
    for i in range(D.shape[0]):
        order = np.argsort(D[i], kind="stable")[:k]
        hits, s = 0, 0.0
        for p, j in enumerate(order, 1):
            if dl[j] == ql[i]:
                hits += 1
                s += hits / p
        out.append(s / hits if hits else 0.0)
    return float(np.mean(out))


def _slow_pr(D, ql, dl, levels):
    curves = []
    for i in range(D.shape[0]):
        rel = dl[np.argsort(D[i], kind="stable")] == ql[i]
        if not rel.any():
            continue
        prec = [rel[: p + 1].sum() / (p + 1) for p in range(rel.size)]
        rec = [rel[: p + 1].sum() / rel.sum() for p in range(rel.size)]
        curves.append([max(pr for pr, rc in zip(prec, rec, strict=True) if rc >= r - 1e-12)
                       for r in levels])
    return np.mean(curves, axis=0)


@pytest.fixture
def ranked():
    rng = np.random.RandomState(3)
    D = rng.rand(23, 31)
    return D, rng.randint(0, 4, 23), rng.randint(0, 4, 31)


def test_map_equals_sklearn_average_precision_over_the_whole_set(ranked):
    D, ql, dl = ranked
    slow = np.mean([average_precision_score(dl == ql[i], -D[i]) for i in range(len(ql))
                    if (dl == ql[i]).any()])
    assert retrieval_report(D, ql, dl)["map"] == pytest.approx(slow, abs=1e-12)


@pytest.mark.parametrize("k", [1, 5, 31, 100])
def test_map_at_k_equals_the_slow_loop(ranked, k):
    D, ql, dl = ranked
    assert mean_average_precision_at_k(D, ql, dl, k, block_rows=4) == pytest.approx(
        _slow_map_at_k(D, ql, dl, k), abs=1e-12)


def test_map_at_full_length_is_the_map(ranked):
    D, ql, dl = ranked
    assert mean_average_precision_at_k(D, ql, dl, D.shape[1]) == pytest.approx(
        mean_average_precision(D, ql, dl), abs=1e-12)


def test_precision_recall_curve_equals_the_slow_loop(ranked):
    D, ql, dl = ranked
    levels = np.linspace(0, 1, 11)
    r, p = precision_recall_curve_mean(D, ql, dl, block_rows=5)
    np.testing.assert_allclose(r, levels)
    np.testing.assert_allclose(p, _slow_pr(D, ql, dl, levels), atol=1e-12)
    assert np.all(np.diff(p) <= 1e-12)   # interpolated precision never rises with recall


def test_precision_recall_rejects_levels_outside_unit_interval(ranked):
    D, ql, dl = ranked
    with pytest.raises(ValueError, match="recall"):
        precision_recall_curve_mean(D, ql, dl, recall=[0.5, 1.5])


# ------------------------------------------------------------------------ capped category pairs
def test_category_pairs_are_capped_and_deterministic():
    labels = np.repeat(np.arange(10), 60)          # 10 categories: 36,000 cross positives
    assert count_positive_pairs(labels, labels) == 10 * 60 * 60
    assert count_positive_pairs(labels) == 10 * 60 * 59 // 2
    p1, y1 = make_pairs(labels, labels, max_positives=500, n_negatives=2, random_state=7)
    p2, y2 = make_pairs(labels, labels, max_positives=500, n_negatives=2, random_state=7)
    p3, _ = make_pairs(labels, labels, max_positives=500, n_negatives=2, random_state=8)
    assert (y1 == 1).sum() == 500 and (y1 == -1).sum() == 1000
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(p1, p3)
    same = labels[p1[:, 0]] == labels[p1[:, 1]]
    np.testing.assert_array_equal(same, y1 == 1)   # positives within, negatives across


@pytest.mark.parametrize("single", [False, True])
def test_capped_pairs_are_sampled_without_listing_them(monkeypatch, single):
    """Above the listing limit the positives are drawn class by class (here the limit is
    lowered so that a small set takes that path): the same guarantees, and every class in
    proportion to its positive pairs."""
    import crossmetric.pairs as P

    monkeypatch.setattr(P, "_ENUMERATE_LIMIT", 100)
    labels = np.repeat(np.arange(3), [20, 40, 60])
    ly = None if single else labels
    pairs, y = make_pairs(labels, ly, max_positives=1500, random_state=5)
    again, _ = make_pairs(labels, ly, max_positives=1500, random_state=5)
    np.testing.assert_array_equal(pairs, again)
    pos, neg = pairs[y == 1], pairs[y == -1]
    assert pos.shape[0] == 1500 and neg.shape[0] == 1500
    assert (labels[pos[:, 0]] == labels[pos[:, 1]]).all()
    assert (labels[neg[:, 0]] != labels[neg[:, 1]]).all()
    assert np.unique(pos, axis=0).shape[0] == 1500
    if single:
        assert (pos[:, 0] < pos[:, 1]).all()
    sizes = np.array([20, 40, 60])
    share = (sizes * (sizes - 1) / 2 if single else sizes ** 2).astype(float)
    got = np.bincount(labels[pos[:, 0]], minlength=3) / 1500
    np.testing.assert_allclose(got, share / share.sum(), atol=0.04)


def test_fit_labels_caps_the_pairs_and_says_so(tmp_path, capsys):
    data = make_cross_modal(300, n_classes=3, n_features_x=4, n_features_y=4, random_state=0)
    np.save(tmp_path / "x.npy", data.X)
    np.save(tmp_path / "y.npy", data.Y)
    np.savetxt(tmp_path / "labels.txt", data.labels, fmt="%d")
    base = ["fit", "cca", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
            "--labels", str(tmp_path / "labels.txt"), "--out", str(tmp_path / "m.npz"),
            "--param", "n_components=2"]
    assert main(base + ["--max-positives", "200"]) == 0
    out = capsys.readouterr()
    assert "fitted CCA on 400 pairs" in out.out
    assert f"{count_positive_pairs(data.labels, data.labels)} positive pairs exist; 200 " \
           "drawn" in out.err
    assert main(base + ["--max-positives", "all"]) == 0
    assert f"on {2 * count_positive_pairs(data.labels, data.labels)} pairs" in \
        capsys.readouterr().out
    assert main(base + ["--max-positives", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--max-positives must be a positive integer" in err


# ------------------------------------------------------------------------------ split options
@pytest.fixture(scope="module")
def data():
    return make_cross_modal(160, n_classes=40, n_features_x=5, n_features_y=5, random_state=1)


def test_test_size_as_count_and_share(data):
    by_count = identification_splits(data.labels, 1, test_size=10, random_state=0)[0]
    by_share = identification_splits(data.labels, 1, test_size=0.5, random_state=0)[0]
    assert np.unique(data.labels[by_count.probe_rows]).size == 10
    assert np.unique(data.labels[by_share.probe_rows]).size == 20
    res = run_protocols({"E": Euclidean()}, data, protocols=("identification",), n_repeats=1,
                        test_size=10)
    assert res.info["test_size"] == 10


@pytest.mark.parametrize("size, expected", [("10", 10), ("0.25", 0.25)])
def test_cli_test_size_count_or_share(tmp_path, data, capsys, size, expected):
    np.save(tmp_path / "x.npy", data.X)
    np.save(tmp_path / "y.npy", data.Y)
    np.savetxt(tmp_path / "labels.txt", data.labels, fmt="%d")
    assert main(["benchmark", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                 "--labels", str(tmp_path / "labels.txt"), "--methods", "euclidean",
                 "--protocol", "identification", "--repeats", "1", "--test-size", size,
                 "-q", "--json", "--n-jobs", "1", "--out", str(tmp_path / "o")]) == 0
    info = json.loads(capsys.readouterr().out)["info"]
    assert info["test_size"] == expected and type(info["test_size"]) is type(expected)
    assert "test_size = " + size in (tmp_path / "o" / "config.toml").read_text()


def test_probe_side_switches_the_direction(data):
    kw = dict(protocols=("identification",), n_repeats=2, test_size=12, random_state=4)
    est = CCA(n_components=3)
    fwd = run_protocols({"CCA": est}, data, **kw)
    rev = run_protocols({"CCA": est}, data, probe="y", **kw)
    assert rev.info["probe"] == "y" and "probe" not in fwd.info
    # the reverse direction is the forward one measured on the transposed distances
    sp = identification_splits(data.labels, 2, test_size=12, random_state=4)[0]
    model = CCA(n_components=3, preprocessor=(data.X, data.Y)).fit(sp.train_pairs, sp.train_y)
    D = model.cross_distance(data.X[sp.probe_rows], data.Y[sp.gallery_rows])
    lab = data.labels[sp.probe_rows]
    from crossmetric.metrics import cmc
    r1 = [r["value"] for r in rev.records if r["measure"] == "rank1" and r["split"] == 0][0]
    f1 = [r["value"] for r in fwd.records if r["measure"] == "rank1" and r["split"] == 0][0]
    assert r1 == pytest.approx(cmc(D.T, lab, lab, max_rank=1)[0])
    assert f1 == pytest.approx(cmc(D, lab, lab, max_rank=1)[0])
    with pytest.raises(ValueError, match="probe must be 'x' or 'y'"):
        run_protocols({"E": Euclidean()}, data, probe="z", **kw)
    with pytest.raises(ValueError, match="probe='y' needs two modalities"):
        run_protocols({"E": Euclidean()}, {"X": data.X, "labels": data.labels}, probe="y",
                      **kw)


def test_fixed_split_trains_and_tests_on_the_given_rows(data):
    train = np.arange(data.labels.size) % 2 == 0
    for protocol in ("verification", "identification", "retrieval"):
        sp = fixed_split(data.labels, train, protocol=protocol, random_state=0)
        assert train[sp.train_pairs].all()
        rows = sp.test_pairs.ravel() if protocol == "verification" else sp.probe_rows
        assert not train[rows].any()
    res = run_protocols({"E": Euclidean()}, data, train_rows=np.flatnonzero(train),
                        protocols=("identification", "retrieval"))
    assert res.info["fixed_split"] and {r["split"] for r in res.records} == {0}
    with pytest.raises(ValueError, match="at least 2 rows on each side"):
        fixed_split(data.labels, np.ones(data.labels.size, bool))


def test_retrieval_curves_survive_save_and_load(data, tmp_path):
    from crossmetric.protocols import BenchmarkResult

    res = run_protocols({"CCA": CCA(n_components=3)}, data, protocols=("retrieval",),
                        n_repeats=2, test_size=0.5)
    rec, prec = res.curves["CCA"]["pr_x2y"]
    assert rec.tolist() == pytest.approx(np.linspace(0, 1, 11).tolist())
    assert prec[0] >= prec[-1] > 0
    res.save(tmp_path / "r.json")
    back = BenchmarkResult.load(tmp_path / "r.json")
    np.testing.assert_allclose(back.curves["CCA"]["pr_y2x"][1], res.curves["CCA"]["pr_y2x"][1])
    assert back.value("CCA", "map_x2y") == pytest.approx(res.value("CCA", "map_x2y"))


# ---------------------------------------------------------------------------------- split files
def test_split_file_round_trip_and_forms(tmp_path):
    labels = np.array(["a", "a", "b", "b", "c", "c"])
    train = np.array([True, False, True, False, True, False])
    write_split_file(tmp_path / "s.csv", train)
    np.testing.assert_array_equal(read_split_file(tmp_path / "s.csv", 6), train)
    (tmp_path / "ids.txt").write_text("# by identity\nid split\na train\nb train\nc test\n")
    np.testing.assert_array_equal(read_split_file(tmp_path / "ids.txt", 6, labels),
                                  [True, True, True, True, False, False])
    (tmp_path / "col.txt").write_text("split\n" + "\n".join(
        "TRAIN" if t else "test" for t in train) + "\n")
    np.testing.assert_array_equal(read_split_file(tmp_path / "col.txt", 6), train)
    (tmp_path / "idx.txt").write_text("0, 2\n4\n")
    np.testing.assert_array_equal(read_train_index(tmp_path / "idx.txt", 6), train)


@pytest.mark.parametrize("text, n_rows, match", [
    ("", 4, "is empty"),
    ("rows,side\n0,train\n", 4, "line 1: expected a header"),
    ("row,split\n0,train\n1,train\n2,test\n3,tset\n", 4, "line 5: expected 'train' or 'test'"),
    ("row,split\n0,train\n1,train\n2,test\n9,test\n", 4, "line 5: row 9 is not in the data"),
    ("row,split\n0,train\n0,train\n2,test\n3,test\n", 4, "line 3: row 0 is named twice"),
    ("row,split\n0,train\n1,train\n2,test\n", 4, "1 rows are not named"),
    ("row,split\n0,train\n1,test\n2,test\n3,test\n", 4, "1 rows on the training side"),
    ("row,split\n0,train,x\n", 4, "line 2: expected 2 field"),
    ("split\ntrain\ntest\n", 4, "2 entries, but the data has 4 rows"),
    ("id,split\n0,train\n7,test\n", 4, "identity '7' is not in"),
    ("id,split\n0,train\n", 4, "1 identities are not named"),
])
def test_bad_split_files_give_one_line_errors(tmp_path, text, n_rows, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        read_split_file(path, n_rows, labels=[0, 0, 1, 1])
    assert "\n" not in str(err.value) and "bad.csv" in str(err.value)


# ---------------------------------------------------------------------------- CLI end to end
@pytest.fixture
def tiny(tmp_path):
    d = make_cross_modal(120, n_classes=4, n_features_x=5, n_features_y=5, random_state=2)
    np.save(tmp_path / "x.npy", d.X)
    np.save(tmp_path / "y.npy", d.Y)
    np.savetxt(tmp_path / "labels.txt", d.labels, fmt="%d")
    train = np.arange(120) % 3 != 0
    write_split_file(tmp_path / "split.csv", train)
    return tmp_path, d, train


def test_cli_benchmark_retrieval_on_a_fixed_split(tiny, capsys):
    tmp, d, train = tiny
    rc = main(["benchmark", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.npy"), "--labels",
               str(tmp / "labels.txt"), "--protocol", "retrieval", "--split-file",
               str(tmp / "split.csv"), "--methods", "euclidean,cca", "--n-jobs", "1", "-q",
               "--json", "--out", str(tmp / "out")])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    means = {(r["method"], r["measure"]): r["mean"] for r in res["summary"]}
    assert {"map_x2y", "map_y2x", "map_mean", "map_at_k_x2y"} <= {m for _, m in means}
    assert res["info"]["fixed_split"] and res["info"]["protocols"] == ["retrieval"]
    # the untrained distance on the split's test rows, measured here directly
    test = np.flatnonzero(~train)
    D = ((d.X[test][:, None, :] - d.Y[test][None, :, :]) ** 2).sum(-1)
    lab = d.labels[test]
    assert means[("Euclidean", "map_x2y")] == pytest.approx(
        mean_average_precision(D, lab, lab))
    assert means[("Euclidean", "map_y2x")] == pytest.approx(
        mean_average_precision(D.T, lab, lab))
    assert means[("Euclidean", "map_at_k_x2y")] == pytest.approx(
        _slow_map_at_k(D, lab, lab, 50))
    assert 0.4 < means[("CCA", "map_x2y")] <= 1.0     # chance: 0.25 (4 equal categories)
    assert "pr_x2y" in res["curves"]["CCA"]
    assert (tmp / "out" / "config.toml").read_text().count('split_file = ') == 1


def test_cli_train_index_gives_the_split_files_numbers(tiny, capsys):
    tmp, _, train = tiny
    (tmp / "train.txt").write_text("\n".join(map(str, np.flatnonzero(train))) + "\n")
    runs = []
    for extra in (["--split-file", str(tmp / "split.csv")],
                  ["--train-index", str(tmp / "train.txt")]):
        assert main(["benchmark", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.npy"),
                     "--labels", str(tmp / "labels.txt"), "--protocol", "retrieval",
                     "--methods", "cca", "--n-jobs", "1", "-q", "--json", "--out",
                     str(tmp / "o"), *extra]) == 0
        runs.append({r["measure"]: r["mean"] for r in json.loads(capsys.readouterr().out)[
            "summary"] if r["measure"] != "fit_seconds"})
    assert runs[0] == runs[1] and "map_x2y" in runs[0]


@pytest.mark.parametrize("text, match", [
    ("0\nx\n", "line 2: expected 0-based row indices"),
    ("0 1 7\n", "row 7 is not in the data"),
    ("0 1\n1\n", "line 2: row 1 is named twice"),
    ("0\n", "names 1 of 6 rows"),
])
def test_bad_train_index_files(tmp_path, text, match):
    (tmp_path / "t.txt").write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        read_train_index(tmp_path / "t.txt", 6)
    assert "\n" not in str(err.value)


def test_cli_benchmark_split_options_errors(tiny, capsys):
    tmp, _, _ = tiny
    (tmp / "bad.csv").write_text("row,split\n0,train\n")
    base = ["benchmark", "--x", str(tmp / "x.npy"), "--y", str(tmp / "y.npy"), "--labels",
            str(tmp / "labels.txt"), "--methods", "euclidean", "-q", "--out", str(tmp / "o")]
    for extra, match in ((["--split-file", str(tmp / "bad.csv")], "--split-file: split file"),
                         (["--test-size", "1.5"], "--test-size as a share"),
                         (["--test-size", "1"], "--test-size as a count"),
                         (["--test-size", "abc"], "expected a count"),
                         (["--probe-domain", "sketch"], "--probe-domain: expected one of x, y"),
                         (["--split-file", str(tmp / "split.csv"), "--train-index",
                           str(tmp / "split.csv")], "not both")):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and match in err, (extra, err)
        assert not (tmp / "o").exists()


def test_cli_evaluate_retrieval(tiny, capsys):
    tmp, d, train = tiny
    test = np.flatnonzero(~train)
    np.save(tmp / "xt.npy", d.X[test])
    np.save(tmp / "yt.npy", d.Y[test])
    np.savetxt(tmp / "lt.txt", d.labels[test], fmt="%d")
    np.savetxt(tmp / "ltr.txt", d.labels[train], fmt="%d")
    np.save(tmp / "xtr.npy", d.X[train])
    np.save(tmp / "ytr.npy", d.Y[train])
    assert main(["fit", "cca", "--x", str(tmp / "xtr.npy"), "--y", str(tmp / "ytr.npy"),
                 "--labels", str(tmp / "ltr.txt"), "--out", str(tmp / "m.npz"), "--param",
                 "n_components=3"]) == 0
    capsys.readouterr()
    args = ["evaluate", str(tmp / "m.npz"), "--x", str(tmp / "xt.npy"), "--y",
            str(tmp / "yt.npy"), "--probe-labels", str(tmp / "lt.txt"), "--gallery-labels",
            str(tmp / "lt.txt"), "--protocol", "retrieval", "--map-k", "10"]
    assert main(args + ["--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["retrieval"]
    from crossmetric.persistence import load_model

    model = load_model(str(tmp / "m.npz"))
    D = model.cross_distance(d.X[test], d.Y[test])
    lab = d.labels[test]
    assert rep["map_x2y"] == pytest.approx(mean_average_precision(D, lab, lab))
    assert rep["map_y2x"] == pytest.approx(mean_average_precision(D.T, lab, lab))
    assert rep["map_at_k_x2y"] == pytest.approx(_slow_map_at_k(D, lab, lab, 10))
    assert main(args) == 0
    assert "mAP y->x" in capsys.readouterr().out
    assert main(args[:-4] + ["--protocol", "retrieval", "--re-rank"]) == 2
    assert "do(es) not apply to --protocol retrieval" in capsys.readouterr().err


def test_config_file_accepts_the_split_options(tiny, capsys):
    tmp, _, _ = tiny
    (tmp / "c.toml").write_text(
        f'[benchmark]\nx = "{tmp / "x.npy"}"\ny = "{tmp / "y.npy"}"\n'
        f'labels = "{tmp / "labels.txt"}"\nmethods = "euclidean"\nprotocol = "identification"\n'
        f'test_size = 0.5\nprobe_domain = "y"\nrepeats = 1\nquiet = true\njson = true\n'
        f'n_jobs = 1\nout = "{tmp / "oc"}"\n')
    assert main(["benchmark", "--config", str(tmp / "c.toml")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["info"]["probe"] == "y"
    (tmp / "d.toml").write_text('[benchmark]\ntest_size = "half"\n')
    assert main(["benchmark", "--config", str(tmp / "d.toml")]) == 2
    assert "test_size" in capsys.readouterr().err


def test_cli_probe_domain_and_id_split_on_an_image_folder(tmp_path, capsys):
    """--probe-domain sketch searches the photos with the sketches of the split file's test
    identities: the rank-1 rates equal those of the transposed / plain distance matrix."""
    pytest.importorskip("PIL")
    from PIL import Image

    from crossmetric.datasets import image_views, load_image_folder
    from crossmetric.metrics import cmc

    rng = np.random.default_rng(0)
    root = tmp_path / "imgs"
    root.mkdir()
    for ident in range(24):
        base = rng.integers(110, 146, (16, 8, 3))     # faint identities under strong noise
        for dom in ("photo", "sketch"):
            img = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(root / f"{ident:03d}_{dom}.png")
    pattern = r"(?P<id>\d+)_(?P<domain>photo|sketch)\.png"
    test_ids = [f"{i:03d}" for i in range(0, 24, 2)]
    (tmp_path / "split.txt").write_text("id,split\n" + "".join(
        f"{i:03d},{'test' if f'{i:03d}' in test_ids else 'train'}\n" for i in range(24)))
    rank1 = {}
    for probe in ("photo", "sketch"):
        assert main(["benchmark", "--images", str(root), "--pattern", pattern, "--descriptor",
                     "pixels", "--methods", "euclidean", "--protocol", "identification",
                     "--split-file", str(tmp_path / "split.txt"), "--probe-domain", probe,
                     "--json", "-q", "--n-jobs", "1", "--out", str(tmp_path / probe)]) == 0
        out = capsys.readouterr()
        res = json.loads(out.out)
        assert res["info"].get("probe", "x") == ("y" if probe == "sketch" else "x")
        rank1[probe] = [r["mean"] for r in res["summary"] if r["measure"] == "rank1"][0]
    data = image_views(*(lambda b: (b.images, b.ids, b.domains))(
        load_image_folder(str(root), pattern)), descriptor="pixels")
    assert list(data.domain_names) == ["photo", "sketch"]
    test = np.asarray(data.labels).astype(int) % 2 == 0     # the even ids are tested
    D = ((data.X[test][:, None, :] - data.Y[test][None, :, :]) ** 2).sum(-1)
    lab = data.labels[test]
    assert rank1["photo"] == pytest.approx(cmc(D, lab, lab, max_rank=1)[0])
    assert rank1["sketch"] == pytest.approx(cmc(D.T, lab, lab, max_rank=1)[0])
    assert rank1["photo"] != rank1["sketch"]
