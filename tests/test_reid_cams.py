"""Camera-aware re-identification: the 'cam' group of an image folder's pattern, camera ids in
the evaluation unit, the protocol runner, `crossmetric evaluate --probe-cams/--gallery-cams` and
`crossmetric benchmark` on an image folder with cameras or a re-id layout (--dataset
market1501)."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics.pairwise import euclidean_distances

from crossmetric import Euclidean
from crossmetric import metrics as M
from crossmetric.cli import main
from crossmetric.datasets import load_image_folder, load_market1501
from crossmetric.protocols import (
    given_identification_splits,
    measure_identification,
    run_protocols,
)


def _torchreid_rule(D, q_pids, g_pids, q_cams, g_cams, max_rank):
    """CMC and mAP as the Market-1501 evaluation code counts them, written out query by
    query: gallery items of the query's id and camera removed, queries without a remaining
    true match skipped."""
    curves, aps = [], []
    for i in range(D.shape[0]):
        order = np.argsort(D[i], kind="stable")
        keep = ~((g_pids[order] == q_pids[i]) & (g_cams[order] == q_cams[i]))
        hits = (g_pids[order] == q_pids[i])[keep].astype(float)
        if not hits.any():
            continue
        curve = np.minimum(np.cumsum(hits), 1.0)
        curves.append(curve[:max_rank])
        precision = np.cumsum(hits) / np.arange(1, hits.size + 1)
        aps.append(float((precision * hits).sum() / hits.sum()))
    return np.mean(curves, axis=0), float(np.mean(aps)), D.shape[0] - len(aps)


def _reid_data(seed=0, n_q=12, n_g=40, n_ids=8, n_cams=3):
    rng = np.random.RandomState(seed)
    X, G = rng.rand(n_q, 5), rng.rand(n_g, 5)
    qp, gp = rng.randint(n_ids, size=n_q), rng.randint(n_ids, size=n_g)
    qc, gc = rng.randint(n_cams, size=n_q), rng.randint(n_cams, size=n_g)
    return X, G, qp, gp, qc, gc


def test_measure_identification_camera_rule():
    X, G, qp, gp, qc, gc = _reid_data()
    rep, D = measure_identification(None, X, G, qp, gp, ranks=(1, 5), probe_cams=qc,
                                    gallery_cams=gc, minp=True)
    cmc, ap, skipped = _torchreid_rule(D, qp, gp, qc, gc, 20)
    np.testing.assert_allclose(rep["cmc"], cmc, atol=1e-12)
    assert rep["rank1"] == pytest.approx(cmc[0]) and rep["rank5"] == pytest.approx(cmc[4])
    assert rep["map"] == pytest.approx(ap) and rep["n_skipped"] == skipped
    assert rep["nn_accuracy"] == pytest.approx(cmc[0])
    assert rep["minp"] == pytest.approx(M.evaluate_rank(D, qp, gp, qc, gc)["minp"])
    plain, _ = measure_identification(None, X, G, qp, gp, ranks=(1,))
    assert plain["map"] != pytest.approx(rep["map"])           # the rule changes the result
    with pytest.raises(ValueError, match="given together"):
        measure_identification(None, X, G, qp, gp, probe_cams=qc)


def test_measure_identification_same_set_with_cameras():
    X, _, qp, _, qc, _ = _reid_data(n_q=30)
    rep, D = measure_identification(None, X, X, qp, qp, ranks=(1,), same_set=True,
                                    probe_cams=qc, gallery_cams=qc)
    cmc, ap, _ = _torchreid_rule(D, qp, qp, qc, qc, 20)  # its own item: same id and camera
    assert rep["rank1"] == pytest.approx(cmc[0]) and rep["map"] == pytest.approx(ap)
    with pytest.raises(ValueError, match="gallery_cams must be probe_cams"):
        measure_identification(None, X, X, qp, qp, same_set=True, probe_cams=qc,
                               gallery_cams=(qc + 1) % 3)


def test_image_folder_cam_group(tmp_path):
    rng = np.random.RandomState(0)
    for name in ("0002_c1s1_000451_03.jpg", "0002_c3s2_000551_01.jpg",
                 "0001_c6s1_000101_00.jpg"):
        Image.fromarray(rng.randint(0, 256, (8, 4, 3), dtype=np.uint8)).save(tmp_path / name)
    b = load_image_folder(tmp_path, r"(?P<id>\d{4})_c(?P<cam>\d)s\d_\d+_\d+\.jpg")
    assert b.ids.tolist() == [1, 2, 2] and b.cams.tolist() == [6, 1, 3]
    assert b.domains.tolist() == [0, 0, 0]
    assert "cams" not in load_image_folder(tmp_path, r"(?P<id>\d{4})_.*\.jpg")


def test_given_split_and_cameras_in_run_protocols():
    X, G, qp, gp, qc, gc = _reid_data(seed=3)
    rng = np.random.RandomState(1)
    T, tp = rng.rand(20, 5), np.repeat(np.arange(100, 110), 2)
    data = {"X": np.vstack([T, X, G]), "labels": np.r_[tp, qp, gp],
            "cams": np.r_[np.tile([0, 1], 10), qc, gc],
            "reid_split": ["train"] * 20 + ["query"] * X.shape[0] + ["gallery"] * G.shape[0]}
    res = run_protocols({"Euclidean": Euclidean()}, data, protocols=("identification",),
                        n_repeats=2)
    cmc, ap, _ = _torchreid_rule(euclidean_distances(X, G, squared=True), qp, gp, qc, gc, 20)
    assert res.value("Euclidean", "rank1") == pytest.approx(cmc[0])
    assert res.value("Euclidean", "map") == pytest.approx(ap)
    with pytest.raises(ValueError, match="verification protocol does not apply"):
        run_protocols({"Euclidean": Euclidean()}, data)
    sp = given_identification_splits(data["labels"], data["reid_split"], 2,
                                     cross_modal=False, random_state=0)
    assert [s.probe_rows.tolist() for s in sp] == [list(range(20, 32))] * 2
    assert np.isin(sp[0].train_pairs, np.arange(20)).all()
    with pytest.raises(ValueError, match="no 'query' row"):
        given_identification_splits(data["labels"], ["train"] * len(data["labels"]))


@pytest.fixture
def reid_features(tmp_path):
    X, G, qp, gp, qc, gc = _reid_data(seed=5)
    for name, arr in (("q.npy", X), ("g.npy", G)):
        np.save(tmp_path / name, arr)
    for name, arr in (("qp.txt", qp), ("gp.txt", gp), ("qc.txt", qc + 1), ("gc.txt", gc + 1)):
        np.savetxt(tmp_path / name, arr, fmt="%d")
    model = tmp_path / "euclid.model"
    np.savetxt(tmp_path / "tl.txt", np.repeat([0, 1, 2], 4), fmt="%d")
    np.save(tmp_path / "t.npy", np.random.RandomState(0).rand(12, 5))
    assert main(["fit", "euclidean", "--x", str(tmp_path / "t.npy"), "--labels",
                 str(tmp_path / "tl.txt"), "--out", str(model)]) == 0
    return tmp_path, model, (X, G, qp, gp, qc, gc)


def test_cli_evaluate_with_camera_ids(reid_features, capsys):
    tmp, model, (X, G, qp, gp, qc, gc) = reid_features
    base = ["evaluate", str(model), "--x", str(tmp / "q.npy"), "--y", str(tmp / "g.npy"),
            "--probe-labels", str(tmp / "qp.txt"), "--gallery-labels", str(tmp / "gp.txt")]
    capsys.readouterr()
    assert main([*base, "--probe-cams", str(tmp / "qc.txt"), "--gallery-cams",
                 str(tmp / "gc.txt"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["identification"]
    cmc, ap, skipped = _torchreid_rule(euclidean_distances(X, G, squared=True), qp, gp, qc, gc,
                                       20)
    assert got["rank1"] == pytest.approx(cmc[0]) and got["map"] == pytest.approx(ap)
    assert got["n_skipped"] == skipped
    assert main([*base, "--probe-cams", str(tmp / "qc.txt"), "--gallery-cams",
                 str(tmp / "gc.txt")]) == 0
    assert "identity and camera left out" in capsys.readouterr().out
    assert main([*base, "--probe-cams", str(tmp / "qc.txt")]) == 2
    assert "error: camera ids need both --probe-cams and --gallery-cams" in \
        capsys.readouterr().err
    np.savetxt(tmp / "short.txt", gc[:-1], fmt="%d")
    assert main([*base, "--probe-cams", str(tmp / "qc.txt"), "--gallery-cams",
                 str(tmp / "short.txt")]) == 2
    assert "--gallery-cams:" in capsys.readouterr().err


def _bench(capsys, *args):
    capsys.readouterr()
    rc = main(["benchmark", "--methods", "euclidean", "--n-jobs", "1", "--quiet", "--json",
               *args])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out), out.err


def test_benchmark_image_folder_with_cameras(tmp_path, capsys):
    """Persons 0-11 have two identical images from one camera (found at rank 1 unless the
    camera rule leaves the twin out), persons 12-23 two unrelated images from two cameras."""
    rng = np.random.RandomState(0)
    folder = tmp_path / "imgs"
    folder.mkdir()
    for pid in range(24):
        same = pid < 12
        first = rng.randint(0, 256, (16, 8), dtype=np.uint8)
        for k, cam in enumerate((1, 1) if same else (1, 2)):
            arr = first if (same or k == 0) else rng.randint(0, 256, (16, 8), dtype=np.uint8)
            Image.fromarray(arr).save(folder / f"{pid:04d}_c{cam}_{k}.png")
    common = ["--images", str(folder), "--descriptor", "pixels", "--protocol",
              "identification", "--repeats", "3", "--seed", "1"]
    plain, _ = _bench(capsys, *common, "--pattern", r"(?P<id>\d{4})_c\d_\d\.png",
                      "--out", str(tmp_path / "a"))
    cams, _ = _bench(capsys, *common, "--pattern", r"(?P<id>\d{4})_c(?P<cam>\d)_\d\.png",
                     "--out", str(tmp_path / "b"))
    r_plain = [r["value"] for r in plain["records"] if r["measure"] == "rank1"]
    r_cams = [r["value"] for r in cams["records"] if r["measure"] == "rank1"]
    # the same splits: the twins' probes count as found without cameras, are skipped with them
    assert all(c < p for c, p in zip(r_cams, r_plain, strict=True))
    assert "3 cameras" not in cams["info"]["dataset"] and "2 cameras" in cams["info"]["dataset"]


MARKET = {
    "bounding_box_train": [f"{p:04d}_c{c}s1_00{p}{c}01_01.jpg" for p in range(1, 9)
                           for c in (1, 2)],
    "query": [f"{p:04d}_c1s1_00{p}101_00.jpg" for p in range(11, 16)],
    "bounding_box_test": [f"{p:04d}_c{c}s1_00{p}{c}02_01.jpg" for p in range(11, 16)
                          for c in (1, 3)] + ["0000_c1s1_000001_01.jpg",
                                              "-1_c2s1_000002_01.jpg"],
}


def _market(root: Path):
    rng = np.random.RandomState(2)
    for folder, names in MARKET.items():
        (root / folder).mkdir(parents=True)
        for name in names:
            Image.fromarray(rng.randint(0, 256, (16, 8, 3), dtype=np.uint8)).save(
                root / folder / name)


def test_benchmark_market1501_layout(tmp_path, capsys):
    root = tmp_path / "market1501"
    _market(root)
    res, err = _bench(capsys, "--dataset", "market1501", "--data-home", str(tmp_path),
                      "--size", "8x16", "--descriptor", "pixels", "--repeats", "1",
                      "--out", str(tmp_path / "out"))
    b = load_market1501(tmp_path, size=(8, 16))
    F = b.images.describe("pixels")
    q, g = b.split == "query", b.split == "gallery"
    assert g.sum() == 11                     # the junk image left out, the distractor kept
    cmc, ap, _ = _torchreid_rule(euclidean_distances(F[q], F[g], squared=True), b.ids[q],
                                 b.ids[g], b.cams[q], b.cams[g], 20)
    got = {r["measure"]: r["value"] for r in res["records"]}
    assert got["rank1"] == pytest.approx(cmc[0]) and got["map"] == pytest.approx(ap)
    assert res["info"]["protocols"] == ["identification"]
    assert "16 training, 5 query, 11 gallery images" in res["info"]["dataset"]


def test_benchmark_layout_errors(tmp_path, capsys):
    for args, msg in (
            (["--dataset", "market1501"], "needs --data-home"),
            (["--dataset", "market1501", "--data-home", str(tmp_path)], "no Market-1501 data"),
            (["--dataset", "cuhk03:both", "--data-home", str(tmp_path)], "detected or labeled"),
            (["--dataset", "msmt17", "--data-home", str(tmp_path), "--protocol",
              "verification"], "own query / gallery split")):
        capsys.readouterr()
        assert main(["benchmark", "--out", str(tmp_path / "o"), *args]) == 2
        assert msg in capsys.readouterr().err


def test_cli_rank_lists_leave_out_what_the_camera_rule_leaves_out(reid_features, capsys):
    """``--show-ranks`` with camera ids lists, for each probe, the gallery in the measure's
    order without the items of its identity under its own camera."""
    from html.parser import HTMLParser

    class Figures(HTMLParser):
        def __init__(self):
            super().__init__()
            self.classes = []

        def handle_starttag(self, tag, attrs):
            if tag == "figure":
                self.classes.append(dict(attrs)["class"])

    tmp, model, _ = reid_features
    rng = np.random.RandomState(0)
    # each probe's nearest gallery item is itself under its own camera (left out by the rule),
    # then its identity under the other camera, then distractors
    X = rng.rand(4, 5)
    G = np.vstack([X, X + 0.05 * rng.rand(4, 5), rng.rand(6, 5) + 2.0])
    qp, gp = np.arange(4), np.r_[np.arange(4), np.arange(4), np.arange(10, 16)]
    qc, gc = np.zeros(4, int), np.r_[np.zeros(4, int), np.ones(4, int), np.ones(6, int)]
    np.save(tmp / "q.npy", X)
    np.save(tmp / "g.npy", G)
    for name, arr in (("qp.txt", qp), ("gp.txt", gp), ("qc.txt", qc), ("gc.txt", gc)):
        np.savetxt(tmp / name, arr, fmt="%d")
    for name, n in (("qi.npy", X.shape[0]), ("gi.npy", G.shape[0])):
        np.save(tmp / name, rng.randint(0, 255, size=(n, 8, 4, 3)).astype(np.uint8))
    page = tmp / "ranks.html"
    assert main(["evaluate", str(model), "--x", str(tmp / "q.npy"), "--y", str(tmp / "g.npy"),
                 "--probe-labels", str(tmp / "qp.txt"), "--gallery-labels",
                 str(tmp / "gp.txt"), "--probe-cams", str(tmp / "qc.txt"), "--gallery-cams",
                 str(tmp / "gc.txt"), "--show-ranks", "4", "--top-k", "3", "--ranks-out",
                 str(page), "--probe-images", str(tmp / "qi.npy"), "--gallery-images",
                 str(tmp / "gi.npy")]) == 0, capsys.readouterr().err
    D = euclidean_distances(X[:4], G, squared=True)
    left_out = (qp[:4, None] == gp[None, :]) & (qc[:4, None] == gc[None, :])
    D[left_out] = np.inf
    k = min(3, int((~left_out).sum(axis=1).min()))
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    want = ["query" if j == 0 else ("match" if gp[order[i, j - 1]] == qp[i] else "miss")
            for i in range(4) for j in range(k + 1)]
    p = Figures()
    p.feed(page.read_text(encoding="utf-8"))
    assert p.classes == want
