"""Plots are written as PNG files without a display and reject malformed curves."""

import numpy as np
import pytest

from crossmetric import metrics as M
from crossmetric.plotting import plot_cmc, plot_convergence, plot_roc

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path):
    return path.exists() and path.read_bytes()[:8] == PNG and path.stat().st_size > 1000


def test_roc_with_pauc_window(tmp_path):
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(50, int), -np.ones(50, int)]
    s = rng.standard_normal(100) + (y == 1)
    fpr, tpr, _ = M.roc(y, s)
    fig = plot_roc({"a": (fpr, tpr), "b": (fpr, np.sqrt(tpr))}, fpr_range=(0, 0.1),
                   path=tmp_path / "roc.png")
    assert _is_png(tmp_path / "roc.png")
    ax = fig.axes[0]
    assert len(ax.patches) == 1  # the shaded window
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    # sorted best first, each with its AUC; b = sqrt(tpr) dominates a
    assert texts[1].startswith("b  AUC") and texts[2].startswith("a  AUC")
    assert texts[2].endswith(f"{M.roc_auc(y, s):.3f}")
    assert ax.get_xscale() == "log"  # the default: VR@0.1% region visible
    plot_roc((fpr, tpr), log_fpr=False, path=tmp_path / "sub" / "roc_lin.png")
    assert _is_png(tmp_path / "sub" / "roc_lin.png")
    plot_roc((fpr, tpr), log_fpr=True, path=tmp_path / "sub" / "roc_log.png")
    assert _is_png(tmp_path / "sub" / "roc_log.png")
    with pytest.raises(ValueError, match="fpr_range"):
        plot_roc((fpr, tpr), fpr_range=(0.5, 0.1))
    with pytest.raises(ValueError, match="ROC curve"):
        plot_roc({"bad": ([0, 1], [0])})


def test_cmc_plot(tmp_path):
    fig = plot_cmc({"m": np.linspace(0.5, 1, 20)}, path=tmp_path / "cmc.png")
    assert _is_png(tmp_path / "cmc.png")
    line = fig.axes[0].get_lines()[0]
    assert np.allclose(line.get_xdata(), np.arange(1, 21))
    assert np.allclose(line.get_ydata(), 100 * np.linspace(0.5, 1, 20))
    # the y-axis starts below the lowest rate (50 %), not at 0
    assert fig.axes[0].get_ylim() == (40.0, 100.5)
    low = plot_cmc({"m": np.linspace(0.1, 0.6, 20)}).axes[0].get_ylim()
    assert low == (0.0, 70.0)  # a low curve is not squeezed under an empty top
    with pytest.raises(ValueError, match="CMC"):
        plot_cmc({"m": np.zeros((2, 2, 2))})  # 2-D: one curve per repeat


class _Fitted:
    loss_curve_ = [10.0, 5.0, 2.0, 1.5, 1.4]


def test_convergence_plot_from_model_and_list(tmp_path):
    fig = plot_convergence({"model": _Fitted(), "raw": [3.0, 2.0, 1.0]},
                           path=tmp_path / "conv.png")
    assert _is_png(tmp_path / "conv.png")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert np.allclose(ax.get_lines()[0].get_ydata(), _Fitted.loss_curve_)
    # negative objectives: linear axes
    fig = plot_convergence([1.0, -1.0, -2.0])
    assert fig.axes[0].get_yscale() == "linear"
    with pytest.raises(ValueError, match="empty"):
        plot_convergence([])


def test_method_styles_fixed_across_runs_and_legend_outside():
    from crossmetric.plotting import method_style
    from crossmetric.registry import METHODS

    names = [s.display for s in METHODS.values()]
    from crossmetric.plotting import _FIXED

    styles = [tuple(method_style(n).values()) for n in names]
    assert len({st[:2] for st in styles}) == len(styles)  # colour + dash differ
    first = [method_style(n)["color"] for n in _FIXED[:20]]
    assert len(set(first)) == 20  # the first 20 reserved slots: colour alone
    assert method_style("PCCA-C") == method_style("PCCA")
    assert method_style("my new method") == method_style("my new method")
    rng = np.random.default_rng(0)
    grid = np.r_[0, np.logspace(-4, 0, 30)]
    curves = {n: (grid, grid ** rng.uniform(0.05, 0.5)) for n in names}
    fig = plot_roc(curves)
    fig2 = plot_roc(dict(reversed(list(curves.items()))))  # other order, same looks
    for f in (fig, fig2):
        ax = f.axes[0]
        by_label = {ln.get_label().split("  ")[0]: ln for ln in ax.get_lines()}
        assert by_label["PCCA"].get_color() == method_style("PCCA")["color"]
        assert by_label["GSM"].get_linestyle() == by_label["GSM"].get_linestyle()
        legend = ax.get_legend()
        assert len(legend.get_texts()) == len(names)
        f.canvas.draw()
        box = legend.get_window_extent()
        assert box.x0 >= ax.get_window_extent().x1  # outside the curves
    cm = plot_cmc({n: np.linspace(rng.uniform(0.6, 0.9), 1.0, 20) for n in names})
    assert len(cm.axes[0].get_legend().get_texts()) == len(names)
