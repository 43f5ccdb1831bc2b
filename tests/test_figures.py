"""Figures people can read: one look per method, fold-spread bands, top-k,
titles without folders, rank lists that keep aspect ratios, ``--ranks-failures``."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.image import AxesImage

from crossmetric import plotting
from crossmetric.plotting import (
    figure_title,
    method_style,
    method_styles,
    plot_cmc,
    plot_roc,
)
from crossmetric.ranklists import top_k_lists, write_rank_html


def _pair(st):
    return to_hex(st["color"]), st["linestyle"]


def _bands(ax):
    return {c.get_gid()[5:]: c for c in ax.collections
            if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("band:")}


def _band_limits(band):
    """Lower and upper edge of a fill_between band, by x (its path: lower edge forward,
    upper edge back)."""
    verts = band.get_paths()[0].vertices
    lo, hi = {}, {}
    for x, y in verts:
        lo[x] = min(lo.get(x, np.inf), y)
        hi[x] = max(hi.get(x, -np.inf), y)
    xs = np.array(sorted(lo))
    return xs, np.array([lo[x] for x in xs]), np.array([hi[x] for x in xs])


def test_twenty_methods_get_distinct_stable_looks():
    from crossmetric.registry import METHODS

    known = [s.display for s in METHODS.values()][:20]
    assert len(known) == 20
    pairs = [_pair(method_style(n)) for n in known]
    assert len(set(pairs)) == 20
    # stable: the same call again, and a fresh process (no dependence on hash seeds)
    assert pairs == [_pair(method_style(n)) for n in known]
    code = ("import json; from crossmetric.plotting import method_style as m; "
            f"print(json.dumps([m(n) for n in {known!r}]))")
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert [_pair(st) for st in json.loads(out)] == pairs
    # the collisions are gone
    assert _pair(method_style("CMML")) != _pair(method_style("CCA"))
    assert _pair(method_style("MvDA")) != _pair(method_style("PLS"))
    # twenty unknown names in one figure: still twenty looks, the same in any order
    names = [f"my method {i}" for i in range(20)]
    st = method_styles(names)
    assert len({_pair(v) for v in st.values()}) == 20
    assert method_styles(names[::-1]) == st
    # a known name keeps its look whatever else is drawn beside it
    assert method_styles(["PCCA", *names])["PCCA"] == method_style("PCCA")


def test_figures_draw_each_method_in_its_own_look():
    names = [f"m{i}" for i in range(20)]
    rng = np.random.default_rng(0)
    grid = np.linspace(0.0, 1.0, 21)
    fig = plot_roc({n: (grid, grid ** rng.uniform(0.1, 0.9)) for n in names}, log_fpr=False)
    lines = {ln.get_label().split("  ")[0]: ln for ln in fig.axes[0].get_lines()
             if ln.get_label().startswith("m")}
    assert len(lines) == 20
    assert len({(to_hex(ln.get_color()), ln.get_linestyle()) for ln in lines.values()}) == 20
    for n, ln in lines.items():
        assert _pair(method_styles(names)[n]) == (to_hex(ln.get_color()), ln.get_linestyle())


def test_roc_band_is_mean_plus_minus_fold_std():
    rng = np.random.default_rng(1)
    grid = np.linspace(0.0, 1.0, 11)
    folds = {"A": np.clip(np.sqrt(grid) + 0.03 * rng.standard_normal((5, 11)), 0.2, 0.8),
             "B": np.clip(grid + 0.02 * rng.standard_normal((5, 11)), 0.1, 0.7)}
    fig = plot_roc({n: (grid, f) for n, f in folds.items()}, log_fpr=False)
    ax = fig.axes[0]
    bands = _bands(ax)
    assert set(bands) == {"A", "B"}
    lines = {ln.get_label().split("  ")[0]: ln for ln in ax.get_lines()}
    for n, f in folds.items():
        mean, sd = f.mean(axis=0), f.std(axis=0, ddof=1)
        xs, lo, hi = _band_limits(bands[n])
        np.testing.assert_allclose(xs, grid)
        np.testing.assert_allclose(lo, mean - sd, atol=1e-12)
        np.testing.assert_allclose(hi, mean + sd, atol=1e-12)
        np.testing.assert_allclose(lines[n].get_ydata(), mean)
        # the band has its curve's colour
        assert to_hex(bands[n].get_facecolor()[0][:3]) == to_hex(lines[n].get_color())
    # an explicit std (as BenchmarkResult.curves[m]["roc_std"]) gives the same band
    fig2 = plot_roc({"A": (grid, folds["A"].mean(axis=0))}, log_fpr=False,
                    std={"A": folds["A"].std(axis=0, ddof=1)})
    np.testing.assert_allclose(_band_limits(_bands(fig2.axes[0])["A"])[1],
                               _band_limits(bands["A"])[1])
    # a single mean curve draws no band
    assert _bands(plot_roc({"A": (grid, grid)}, log_fpr=False).axes[0]) == {}


def test_cmc_band_top_k_and_legend():
    rng = np.random.default_rng(2)
    runs = {f"M{i}": np.clip(np.linspace(0.3 + 0.05 * i, 0.95, 10)
                             + 0.02 * rng.standard_normal((4, 10)), 0.0, 1.0)
            for i in range(6)}
    fig = plot_cmc(runs, top_k=3)
    ax = fig.axes[0]
    bands = _bands(ax)
    best = sorted(runs, key=lambda n: -runs[n].mean(axis=0)[0])[:3]
    assert sorted(bands) == sorted(best)
    for n in best:
        mean, sd = runs[n].mean(axis=0), runs[n].std(axis=0, ddof=1)
        _, lo, hi = _band_limits(bands[n])
        np.testing.assert_allclose(lo, 100 * np.clip(mean - sd, 0, 1), atol=1e-9)
        np.testing.assert_allclose(hi, 100 * np.clip(mean + sd, 0, 1), atol=1e-9)
    legend = ax.get_legend()
    assert [t.get_text().split("  ")[0] for t in legend.get_texts()] == best
    assert "best 3 of 6 by rank-1" in legend.get_title().get_text()
    with pytest.raises(ValueError, match="top_k"):
        plot_cmc(runs, top_k=0)


def test_benchmark_figures_have_bands_and_no_folders_in_titles(tmp_path):
    from crossmetric import Euclidean
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import BenchmarkResult, run_protocols
    from crossmetric.protocols.result_files import write_result_files

    d = make_cross_modal(60, n_classes=6, n_features_x=3, n_features_y=3, random_state=0)
    res = run_protocols({"Euclidean": Euclidean()}, d, n_folds=3, n_repeats=3)
    c = res.curves["Euclidean"]
    assert c["roc_std"].shape == c["roc"][1].shape and c["cmc_std"].shape == c["cmc"].shape
    assert c["cmc_std"].max() > 0
    res.to_json(tmp_path / "r.json")
    back = BenchmarkResult.load(tmp_path / "r.json")
    np.testing.assert_allclose(back.curves["Euclidean"]["cmc_std"], c["cmc_std"])
    seen = {}

    def spy(name):
        real = getattr(plotting, name)

        def wrapped(*a, **k):
            seen[name] = fig = real(*a, **k)
            return fig
        return wrapped

    import crossmetric.plotting as P

    orig = P.plot_roc, P.plot_cmc
    P.plot_roc, P.plot_cmc = spy("plot_roc"), spy("plot_cmc")
    try:
        write_result_files(res, tmp_path, top_k=1,
                           description="../shared/data/cufs: photo vs sketch, 606 pairs")
    finally:
        P.plot_roc, P.plot_cmc = orig
    for name, fig in seen.items():
        ax = fig.axes[0]
        assert "/" not in ax.get_title(), name
        assert "cufs: photo vs sketch" in ax.get_title()
        assert set(_bands(ax)) == {"Euclidean"}
    assert figure_title("C:\\data\\x.npy vs /home/u/y.npy") == "x.npy vs y.npy"
    assert figure_title("Table 2 / Fig. 5") == "Table 2 / Fig. 5"


def _faces():
    rng = np.random.RandomState(0)
    tall = [rng.rand(50, 20) for _ in range(3)]        # 5:2, like re-id crops
    wide = [rng.rand(30, 60, 3) for _ in range(5)]     # 1:2
    return tall, wide


def test_rank_list_cells_keep_the_images_aspect_ratio(tmp_path):
    q_img, g_img = _faces()
    D = np.random.RandomState(1).rand(3, 5)
    names = [f"/data/set/gallery/{i:04d}_c1s1_000451_03.jpg" for i in range(5)]
    fig = plotting.plot_rank_lists(q_img, g_img, D, [0, 1, 2], [0, 1, 2, 3, 4], k=4,
                                   n_queries=3, g_names=names, title="/a/b/ranks",
                                   path=tmp_path / "r.png")
    fig.canvas.draw()
    axes = fig.axes
    assert len(axes) == 3 * 5
    for ax in axes:
        im = [a for a in ax.get_children() if isinstance(a, AxesImage)][0]
        h, w = im.get_array().shape[:2]
        left, right, bottom, top = im.get_extent()
        assert (right - left, bottom - top) == (w, h)       # the whole image, unscaled
        box = ax.get_window_extent()
        assert box.height / box.width == pytest.approx(h / w, rel=0.02)
    # captions do not overlap one another, and the title has no folder
    texts = [t for t in fig.texts if t.get_text()]
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
    assert any(t.get_text() == "ranks" for t in texts)
    captions = " ".join(t.get_text() for t in texts)
    assert "/data" not in captions and "_03.jpg" in captions


def test_failures_select_only_wrong_first_matches(tmp_path):
    D = np.array([[0.1, 0.5, 0.9], [0.2, 0.1, 0.9], [0.3, 0.8, 0.1], [0.9, 0.2, 0.4]])
    ql, gl = [0, 0, 2, 2], [0, 1, 2]
    qs, order, match = top_k_lists(D, ql, gl, k=2, n_queries=5, failures=True)
    assert qs.tolist() == [1, 3] and not match[:, 0].any()
    assert top_k_lists(D, ql, gl, k=2, n_queries=1, failures=True)[0].tolist() == [1]
    with pytest.raises(ValueError, match="first match"):
        top_k_lists(D, [0, 1, 2, 1], gl, k=2, failures=True)
    imgs = np.random.RandomState(0).rand(4, 6, 6)
    fig = plotting.plot_rank_lists(imgs, imgs[:3], D, ql, gl, k=2, failures=True)
    assert [ax.index for ax in fig.axes[::3]] == [1, 3]
    assert all(ax.match is False for ax in fig.axes[1::3])
    page = write_rank_html(tmp_path / "f.html", imgs, imgs[:3], D, ql, gl, k=2,
                           failures=True, q_names=[f"dir/q{i}.png" for i in range(4)])
    text = open(page, encoding="utf-8").read()
    assert "data-query='1'" in text and "data-query='0'" not in text
    assert "q3.png" in text and "dir/q3.png" not in text


def test_cli_ranks_failures(tmp_path, capsys):
    from crossmetric.cli import main
    from crossmetric.datasets import make_cross_modal
    from crossmetric.persistence import load_model

    d = make_cross_modal(60, n_classes=12, n_features_x=4, n_features_y=4, random_state=1)
    np.save(tmp_path / "x.npy", d.X)
    np.savetxt(tmp_path / "labels.txt", d.labels, fmt="%d")
    np.save(tmp_path / "imgs.npy", np.random.RandomState(0).randint(
        0, 255, size=(60, 12, 6)).astype(np.uint8))
    model = tmp_path / "e.model"
    assert main(["fit", "euclidean", "--x", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "labels.txt"), "--out", str(model)]) == 0
    page = tmp_path / "ranks.html"
    rc = main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--probe-labels",
               str(tmp_path / "labels.txt"), "--gallery-labels", str(tmp_path / "labels.txt"),
               "--same-set", "--show-ranks", "4", "--ranks-failures", "--top-k", "3",
               "--ranks-out", str(page), "--probe-images", str(tmp_path / "imgs.npy")])
    assert rc == 0, capsys.readouterr().err
    est = load_model(model)
    est.set_params(preprocessor=None)
    D = est.cross_distance(d.X, d.X)
    np.fill_diagonal(D, np.inf)
    wrong = np.flatnonzero(d.labels[np.argmin(D, axis=1)] != d.labels)[:4]
    assert wrong.size > 0
    text = page.read_text(encoding="utf-8")
    import re

    shown = [int(q) for q in re.findall(
        r"<figure class='query'.*?imgs\.npy #(\d+)</span>", text)]
    assert shown == wrong.tolist()
    assert "whose first match is wrong" in text
    assert (tmp_path / "ranks.png").read_bytes()[:4] == b"\x89PNG"
    # --ranks-failures alone is refused
    assert main(["evaluate", str(model), "--x", str(tmp_path / "x.npy"), "--probe-labels",
                 str(tmp_path / "labels.txt"), "--gallery-labels",
                 str(tmp_path / "labels.txt"), "--ranks-failures"]) == 2
