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
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"a", "b"}
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
    with pytest.raises(ValueError, match="CMC"):
        plot_cmc({"m": np.zeros((2, 2))})


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
