"""ROC, CMC and convergence figures, saved as PNG with matplotlib's Agg backend.

Figures are built on explicit :class:`matplotlib.figure.Figure` objects (no ``pyplot`` state,
no display needed), so plotting works in worker processes, on servers and in tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_roc", "plot_cmc", "plot_convergence", "save_figure"]


def _figure(figsize=(5.5, 4.2)):
    from cycler import cycler
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    # up to 20 distinguishable curves: tab20's dark shades first, then its light ones, each
    # with its own dash pattern so that curves stay apart in grey print too
    colors = list(colormaps["tab20"].colors)
    colors = colors[0::2] + colors[1::2]
    styles = ["-", "--", "-.", ":"] * 5
    ax.set_prop_cycle(cycler(color=colors) + cycler(linestyle=styles))
    return fig, ax


def save_figure(fig, path: str | os.PathLike) -> str:
    """Write ``fig`` as PNG to ``path`` (folders are created); returns the path."""
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def _as_curves(curves) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{name: (fpr, tpr)}`` from a mapping or a single ``(fpr, tpr)``."""
    if isinstance(curves, Mapping):
        items = curves.items()
    else:
        items = [("", curves)]
    out = {}
    for name, c in items:
        fpr, tpr = (np.asarray(v, dtype=float) for v in c)
        if fpr.shape != tpr.shape or fpr.ndim != 1 or fpr.size < 2:
            raise ValueError(f"ROC curve {name!r} must be two 1-D arrays (fpr, tpr) of equal "
                             f"length >= 2, got shapes {fpr.shape} and {tpr.shape}.")
        out[str(name)] = (fpr, tpr)
    return out


def plot_roc(curves, *, fpr_range: Sequence[float] | None = None, log_fpr: bool = False,
             title: str = "ROC", path: str | os.PathLike | None = None):
    """ROC curves of one or several methods.

    Parameters
    ----------
    curves : mapping name -> (fpr, tpr), or one (fpr, tpr)
        E.g. ``BenchmarkResult.curves[m]["roc"]`` or ``metrics.roc(y, score)[:2]``.
    fpr_range : (alpha, beta), optional
        The FPR window of a partial AUC, drawn as a shaded band.
    log_fpr : bool, default=False
        Logarithmic FPR axis (to see the low-FPR region, e.g. VR@0.1%).
    title : str
    path : path, optional
        Save the figure there as PNG.

    Returns
    -------
    matplotlib.figure.Figure
    """
    data = _as_curves(curves)
    fig, ax = _figure()
    if fpr_range is not None:
        a, b = (float(v) for v in fpr_range)
        if not 0.0 <= a < b <= 1.0:
            raise ValueError(f"fpr_range must satisfy 0 <= alpha < beta <= 1, got {fpr_range!r}.")
        ax.axvspan(max(a, 1e-4) if log_fpr else a, b, color="0.85", zorder=0,
                   label=f"pAUC window [{a:g}, {b:g}]")
    for name, (fpr, tpr) in data.items():
        ax.plot(fpr, tpr, lw=1.5, label=name or None)
    if log_fpr:
        ax.set_xscale("log")
        ax.set_xlim(1e-4, 1.0)
    else:
        ax.plot([0, 1], [0, 1], ls=":", color="0.5", lw=1)
        ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (verification rate)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if any(data) or fpr_range is not None:
        ax.legend(loc="lower right", fontsize=7)
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_cmc(curves, *, title: str = "CMC", path: str | os.PathLike | None = None):
    """Cumulative match characteristic curves.

    Parameters
    ----------
    curves : mapping name -> cmc array, or one cmc array
        ``cmc[r - 1]`` = recognition rate at rank ``r`` (:func:`crossmetric.metrics.cmc`).
    title : str
    path : path, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    items = curves.items() if isinstance(curves, Mapping) else [("", curves)]
    fig, ax = _figure()
    n_max = 1
    for name, c in items:
        c = np.asarray(c, dtype=float)
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"CMC curve {name!r} must be a non-empty 1-D array, got shape "
                             f"{c.shape}.")
        ranks = np.arange(1, c.size + 1)
        ax.plot(ranks, 100 * c, marker="o", ms=3, lw=1.5, label=name or None)
        n_max = max(n_max, c.size)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(1, n_max)
    ax.set_ylim(0, 101)
    ax.set_xlabel("rank")
    ax.set_ylabel("recognition rate (%)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if any(name for name, _ in (curves.items() if isinstance(curves, Mapping) else [])):
        ax.legend(loc="lower right", fontsize=7)
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_convergence(models_or_curves, *, log: bool = True, title: str = "convergence",
                     path: str | os.PathLike | None = None):
    """Objective value per iteration, from fitted models' ``loss_curve_`` or raw sequences.

    Parameters
    ----------
    models_or_curves : fitted model, sequence of floats, or mapping name -> either
    log : bool, default=True
        Log-log axes (as PCCA's Fig. 3) when every value is positive; linear otherwise.
    title : str
    path : path, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(models_or_curves, Mapping):
        items = list(models_or_curves.items())
    else:
        items = [("", models_or_curves)]
    fig, ax = _figure()
    all_pos = True
    for name, obj in items:
        curve = getattr(obj, "loss_curve_", obj)
        if curve is obj and hasattr(obj, "fit") and not hasattr(obj, "__len__"):
            raise ValueError(f"model {name!r} has no loss_curve_ (not fitted or not iterative).")
        c = np.asarray(curve, dtype=float).ravel()
        if c.size == 0:
            raise ValueError(f"loss curve {name!r} is empty.")
        all_pos &= bool(np.all(c > 0))
        ax.plot(np.arange(1, c.size + 1), c, lw=1.5, label=name or None)
    if log and all_pos:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if any(name for name, _ in items):
        ax.legend(fontsize=7)
    if path is not None:
        save_figure(fig, path)
    return fig
