"""crossmetric evaluate --same-set / --re-rank / --query-expansion / --show-ranks, search --json."""

import json
from html.parser import HTMLParser

import numpy as np
import pytest

from crossmetric import metrics as M
from crossmetric.cli import main
from crossmetric.datasets import make_cross_modal
from crossmetric.persistence import load_model
from crossmetric.protocols.reid import refine_distances


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = make_cross_modal(120, n_classes=12, n_features_x=6, n_features_y=6, random_state=1)
    tmp = tmp_path_factory.mktemp("cli_reid")
    np.save(tmp / "x.npy", d.X)
    np.savetxt(tmp / "labels.txt", d.labels, fmt="%d")
    model = tmp / "pcca.model"
    assert main(["fit", "pcca", "--x", str(tmp / "x.npy"), "--labels", str(tmp / "labels.txt"),
                 "--out", str(model), "--param", "n_components=4", "--param", "max_iter=30",
                 "--seed", "0"]) == 0
    est = load_model(model)
    est.set_params(preprocessor=None)
    return tmp, d, model, est


def _evaluate(capsys, tmp, model, *extra):
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y", str(tmp / "x.npy"),
               "--probe-labels", str(tmp / "labels.txt"), "--gallery-labels",
               str(tmp / "labels.txt"), "--json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)["identification"]


def test_same_set_leaves_each_probe_out(fitted, capsys, tmp_path):
    tmp, d, model, est = fitted
    plain = _evaluate(capsys, tmp, model)
    assert plain["rank1"] == 1.0          # each probe finds itself
    same = _evaluate(capsys, tmp, model, "--same-set")
    D = est.cross_distance(d.X, d.X)
    want = M.one_call_at_n(D, d.labels, d.labels, 1, same_set=True)
    assert same["rank1"] == pytest.approx(want) and same["rank1"] < 1.0
    assert same["map"] == pytest.approx(M.mean_average_precision(D, d.labels, d.labels,
                                                                 same_set=True))
    # the matrix path (forced by --scores) agrees with the blockwise one
    mat = _evaluate(capsys, tmp, model, "--same-set", "--scores", str(tmp_path / "D.npy"))
    np.testing.assert_allclose(mat["cmc"], same["cmc"], atol=1e-9)
    assert mat["map"] == pytest.approx(same["map"])


def test_re_rank_and_query_expansion(fitted, capsys):
    tmp, d, model, est = fitted
    for extra, kw in ((["--re-rank"], {"re_rank": True}),
                      (["--query-expansion", "3"], {"query_expansion": 3}),
                      (["--re-rank", "--query-expansion", "2"],
                       {"re_rank": True, "query_expansion": 2})):
        rep = _evaluate(capsys, tmp, model, "--same-set", *extra)
        D = refine_distances(est, d.X, d.X, **kw)
        assert rep["map"] == pytest.approx(M.mean_average_precision(D, d.labels, d.labels,
                                                                    same_set=True))
        assert rep["rank5"] == pytest.approx(M.one_call_at_n(D, d.labels, d.labels, 5,
                                                             same_set=True))
        assert rep["re_rank"] == ("--re-rank" in extra)


class _Imgs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.src, self.classes = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.src.append(a["src"])
        if tag == "figure":
            self.classes.append(a["class"])


def test_show_ranks_writes_page_and_figure(fitted, capsys, tmp_path):
    tmp, d, model, est = fitted
    rng = np.random.RandomState(0)
    np.save(tmp_path / "imgs.npy", rng.randint(0, 255, size=(120, 12, 6, 3)).astype(np.uint8))
    page = tmp_path / "ranks.html"
    rep = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--probe-labels",
                str(tmp / "labels.txt"), "--gallery-labels", str(tmp / "labels.txt"),
                "--same-set", "--show-ranks", "3", "--top-k", "4", "--ranks-out", str(page),
                "--probe-images", str(tmp_path / "imgs.npy")])
    assert rep == 0, capsys.readouterr().err
    p = _Imgs()
    p.feed(page.read_text(encoding="utf-8"))
    assert len(p.src) == 3 * 5 and all(s.startswith("data:image/png;base64,") for s in p.src)
    # the lists leave the probe out and frame the true matches
    D = est.cross_distance(d.X[:3], d.X)
    D[np.arange(3), np.arange(3)] = np.inf
    order = np.argsort(D, axis=1, kind="stable")[:, :4]
    want = ["query" if j == 0 else ("match" if d.labels[order[i, j - 1]] == d.labels[i]
                                    else "miss") for i in range(3) for j in range(5)]
    assert p.classes == want
    assert (tmp_path / "ranks.png").read_bytes()[:4] == b"\x89PNG"


def test_search_json(fitted, capsys):
    pytest.importorskip("faiss")
    tmp, d, model, est = fitted
    assert main(["search", str(model), "--database", str(tmp / "x.npy"), "--queries",
                 str(tmp / "x.npy"), "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k"] == 3 and len(out["results"]) == 120
    D = est.cross_distance(d.X, d.X)
    for r in out["results"][:5]:
        np.testing.assert_allclose(r["distances"], np.sort(D[r["query"]])[:3], atol=1e-4)


@pytest.mark.parametrize("extra, match", [
    (["--show-ranks", "2"], "--probe-images"),
    (["--query-expansion", "0"], "--query-expansion"),
])
def test_bad_options(fitted, capsys, extra, match):
    tmp, d, model, est = fitted
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--probe-labels",
               str(tmp / "labels.txt"), "--gallery-labels", str(tmp / "labels.txt"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1


def test_options_need_identification(fitted, capsys):
    tmp, d, model, est = fitted
    np.savetxt(tmp / "p.csv", [[0, 1, 1], [0, 50, -1]], fmt="%d", delimiter=",")
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--pairs",
               str(tmp / "p.csv"), "--re-rank"])
    assert rc == 2 and "identification" in capsys.readouterr().err


def test_same_set_needs_the_same_rows(fitted, capsys, tmp_path):
    tmp, d, model, est = fitted
    np.save(tmp_path / "few.npy", d.X[:10])
    rc = main(["evaluate", str(model), "--x", str(tmp / "x.npy"), "--y",
               str(tmp_path / "few.npy"), "--probe-labels", str(tmp / "labels.txt"),
               "--gallery-labels", str(tmp / "labels.txt"), "--same-set"])
    assert rc == 2 and "--same-set" in capsys.readouterr().err
