"""Rank-list figure and self-contained HTML page."""

import base64
import io
import os
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib.colors import to_hex

from crossmetric import plotting
from crossmetric.ranklists import MATCH_COLOR, MISS_COLOR, top_k_lists, write_rank_html


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.figures, self._fig = [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure":
            self._fig = a
            self.figures.append(a)
        elif tag == "img":
            self.imgs.append((a.get("src", ""), self._fig))


def _data(rng, n_q=4, n_g=12):
    q_ids = np.arange(n_q)
    g_ids = np.r_[np.arange(n_q), rng.randint(n_q, 40, size=n_g - n_q)]
    q_img = rng.randint(0, 256, size=(n_q, 16, 8, 3)).astype(np.uint8)
    g_img = rng.rand(n_g, 16, 8)          # grey floats in [0, 1]
    return rng.rand(n_q, n_g), q_ids, g_ids, q_img, g_img


def test_html_is_self_contained_and_frames_the_true_matches(tmp_path):
    rng = np.random.RandomState(0)
    D, q_ids, g_ids, q_img, g_img = _data(rng)
    path = write_rank_html(tmp_path / "out" / "ranks.html", q_img, g_img,
                           {"A": D, "B": D[:, ::-1].copy()}, q_ids, g_ids, k=5, n_queries=3)
    text = open(path, encoding="utf-8").read()
    assert not [f for f in os.listdir(tmp_path / "out") if f.startswith(".tmp")]
    p = _Collect()
    p.feed(text)
    assert len(p.imgs) == 2 * 3 * (1 + 5)
    for src, _ in p.imgs:
        assert src.startswith("data:image/png;base64,")
    assert "http" not in text and "<link" not in text and "<script" not in text
    # the framed matches are the true ones, computed here independently
    gal = [f for f in p.figures if "data-gallery" in f]
    for section, Dm in enumerate((D, D[:, ::-1])):
        for i in range(3):
            order = np.argsort(Dm[i], kind="stable")[:5]
            rows = gal[(section * 3 + i) * 5:(section * 3 + i + 1) * 5]
            assert [int(f["data-gallery"]) for f in rows] == order.tolist()
            assert [f["class"] == "match" for f in rows] == (g_ids[order] == i).tolist()
            assert all(f["class"] in ("match", "miss") for f in rows)
    # images decode back to the pixels given
    from PIL import Image

    src = p.imgs[0][0]
    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))))
    np.testing.assert_array_equal(img, q_img[0])


def test_figure_frames(tmp_path):
    rng = np.random.RandomState(1)
    D, q_ids, g_ids, q_img, g_img = _data(rng)
    D[0, 0] = -1.0   # query 0's true match first
    fig = plotting.plot_rank_lists(q_img, g_img, D, q_ids, g_ids, k=4, n_queries=2,
                                   title="t", path=tmp_path / "r.png")
    assert os.path.getsize(tmp_path / "r.png") > 0
    _, order, match = top_k_lists(D, q_ids, g_ids, 4, n_queries=2)
    axes = np.array(fig.axes, dtype=object).reshape(2, 5)
    assert axes[0, 1].match is True
    for i in range(2):
        assert axes[i, 0].match is None
        for r in range(4):
            ax = axes[i, r + 1]
            assert ax.match == bool(match[i, r])
            want = MATCH_COLOR if match[i, r] else MISS_COLOR
            assert to_hex(ax.spines["top"].get_edgecolor()) == want


def test_same_set_leaves_the_query_out():
    D = np.array([[0.0, 0.2, 0.1], [0.3, 0.0, 0.4], [0.1, 0.5, 0.0]])
    _, order, match = top_k_lists(D, [0, 1, 0], [0, 1, 0], k=2, same_set=True)
    assert order.tolist() == [[2, 1], [0, 2], [0, 1]]
    assert match[:, 0].tolist() == [True, False, True]


def test_bad_input(tmp_path):
    D = np.ones((2, 3))
    with pytest.raises(ValueError, match="q_labels and g_labels"):
        top_k_lists(D, [0], [0, 1, 2])
    with pytest.raises(ValueError, match="queries"):
        top_k_lists(D, [0, 1], [0, 1, 2], queries=[5])
    with pytest.raises(ValueError, match="gallery_images"):
        write_rank_html(tmp_path / "x.html", np.zeros((2, 4, 4)), np.zeros((2, 4, 4)), D,
                        [0, 1], [0, 1, 2])
    assert not os.path.exists(tmp_path / "x.html")


def test_reproduction_rank_lists_are_written(tmp_path):
    from crossmetric.reproduce import ReproductionResult
    from crossmetric.reproduce.runner import _rank_lists

    rng = np.random.RandomState(2)
    D, q_ids, g_ids, q_img, g_img = _data(rng)
    res = ReproductionResult("pku-sketch", "test")
    assert _rank_lists(res, str(tmp_path)) == []
    res.rank_lists = {"images_q": q_img, "images_g": g_img, "ids_q": q_ids, "ids_g": g_ids,
                      "n": 2, "distances": {"Euclidean (HOG)": D, "GSM": -D}}
    files = _rank_lists(res, str(tmp_path))
    assert [os.path.basename(f) for f in files] == ["ranks.html", "ranks_euclidean_hog.png",
                                                     "ranks_gsm.png"]
    p = _Collect()
    p.feed(open(files[0], encoding="utf-8").read())
    assert len(p.imgs) == 2 * 2 * 11
    assert all(s.startswith("data:") for s, _ in p.imgs)


def test_reproduce_show_ranks_only_for_pku(capsys):
    from crossmetric.cli import main

    assert main(["reproduce", "pcca-viper", "--show-ranks", "3"]) == 2
    assert "only pku-sketch" in capsys.readouterr().err
