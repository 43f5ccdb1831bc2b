"""ROC, CMC and convergence figures, saved as PNG with matplotlib's Agg backend.

Figures are built on explicit :class:`matplotlib.figure.Figure` objects (no ``pyplot`` state,
no display needed), so plotting works in worker processes, on servers and in tests.

Every method keeps one look in every figure, run and dataset (:func:`method_style`): the
registry's methods have fixed colour / dash / marker slots, other names a slot derived from a
stable hash of the name, and a "-C" variant looks like its base method. Legends sit outside the
axes, sorted best first, with each method's AUC (ROC) or rank-1 rate (CMC).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_roc", "plot_cmc", "plot_convergence", "save_figure", "method_style"]

#: display names with a reserved style slot (registry order; later names get hashed slots)
_FIXED = ("Euclidean", "PCCA", "CMML", "CML_AUC", "CML_pAUC", "Maha_AUC", "LDML", "CLML",
          "GSM", "DeepGSM", "CCA", "PLS", "KCCA", "CDFE", "KISSME", "KPLS", "KCDFE", "MvDA",
          "CSR", "KCSR", "DML-eig", "ITML", "MCC", "PRDC", "NCA", "LMNN", "CLMLCV",
          "Maha_pAUC")
_DASHES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def _palette() -> list:
    from matplotlib import colormaps

    # tab10's ten colours, then ten more saturated ones (no pale shades: every line must
    # stay readable on white and next to a shaded band)
    extra = ["#1b9e77", "#000075", "#e6ab02", "#800000", "#f032e6", "#469990", "#9a6324",
             "#4363d8", "#808000", "#000000"]
    return list(colormaps["tab10"].colors) + extra


def method_style(name: str) -> dict:
    """Colour, line style and marker of a method, the same in every run and figure.

    The methods of :data:`crossmetric.registry.METHODS` (and a few planned ones) have fixed
    slots; any other name gets a slot from a CRC-32 of the name (stable across processes,
    unlike ``hash``). A trailing ``-C`` (single-modal learner on CCA views) is ignored.

    Returns
    -------
    dict
        ``color``, ``linestyle``, ``marker`` -- keyword arguments of ``Axes.plot``.

    Examples
    --------
    >>> method_style("PCCA") == method_style("PCCA-C")
    True
    >>> method_style("PCCA")["color"] != method_style("CMML")["color"]
    True
    """
    import zlib

    base = name[:-2] if name.endswith("-C") else name
    colors = _palette()
    if base in _FIXED:
        slot = _FIXED.index(base)
    else:
        slot = len(_FIXED) + zlib.crc32(base.encode("utf-8")) % 997
    return {"color": colors[slot % len(colors)],
            "linestyle": _DASHES[(slot // len(colors) + slot) % len(_DASHES)],
            "marker": _MARKERS[slot % len(_MARKERS)]}


def _legend_outside(ax, order=None) -> None:
    """Legend to the right of the axes (entries in ``order`` of labels when given)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if order is not None:
        rank = {lab: i for i, lab in enumerate(order)}
        pairs = sorted(zip(handles, labels, strict=True),
                       key=lambda hl: rank.get(hl[1], -1))
        handles, labels = [h for h, _ in pairs], [lab for _, lab in pairs]
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8,
              frameon=False, handlelength=3.0, borderaxespad=0.0)


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
    """Write ``fig`` as PNG to ``path`` atomically (folders are created); returns the path."""
    from crossmetric.persistence import atomic_open

    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", bbox_inches="tight")
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


def plot_roc(curves, *, fpr_range: Sequence[float] | None = None, log_fpr: bool = True,
             auc: Mapping[str, float] | None = None, fpr_mark: float | None = 1e-3,
             title: str = "ROC", path: str | os.PathLike | None = None):
    """ROC curves of one or several methods.

    Parameters
    ----------
    curves : mapping name -> (fpr, tpr), or one (fpr, tpr)
        E.g. ``BenchmarkResult.curves[m]["roc"]`` or ``metrics.roc(y, score)[:2]``.
    fpr_range : (alpha, beta), optional
        The FPR window of a partial AUC, drawn as a shaded band.
    log_fpr : bool, default=True
        Logarithmic FPR axis from 10⁻⁴ (the low-FPR region where the papers' VR@0.1 % is
        read); ``False``: linear axis with the chance diagonal.
    auc : mapping name -> float, optional
        Shown in the legend (``PCCA  AUC 0.935``), which is sorted by it; default: the area
        under each given curve (trapezoid rule).
    fpr_mark : float or None, default=1e-3
        A vertical line at this FPR (the VR operating point).
    title : str
    path : path, optional
        Save the figure there as PNG.

    Returns
    -------
    matplotlib.figure.Figure
    """
    data = _as_curves(curves)
    fig, ax = _figure((7.6, 4.6))
    lo = 1e-4
    if fpr_range is not None:
        a, b = (float(v) for v in fpr_range)
        if not 0.0 <= a < b <= 1.0:
            raise ValueError(f"fpr_range must satisfy 0 <= alpha < beta <= 1, got {fpr_range!r}.")
        ax.axvspan(max(a, lo) if log_fpr else a, b, color="0.95", zorder=0,
                   label=f"pAUC window [{a:g}, {b:g}]")
    areas = {}
    for name, (fpr, tpr) in data.items():
        areas[name] = (float(auc[name]) if auc is not None and name in auc
                       else float(np.trapezoid(tpr, fpr)))
    order = sorted(data, key=lambda n: -areas[n])
    labels = {}
    for name in order:
        fpr, tpr = data[name]
        keep = fpr > 0 if log_fpr else np.ones(fpr.size, bool)
        st = method_style(name) if name else {}
        label = f"{name}  AUC {areas[name]:.3f}" if name else None
        labels[name] = label
        ax.plot(fpr[keep], tpr[keep], lw=1.6, label=label,
                **({k: v for k, v in st.items() if k != "marker"}))
    if fpr_mark is not None:
        ax.axvline(fpr_mark, color="0.3", lw=0.8, ls=(0, (1, 2)), zorder=1)
        ax.annotate(f"FPR {100 * fpr_mark:g}%", (fpr_mark, 0.01), xytext=(3, 2),
                    textcoords="offset points", fontsize=7, color="0.3")
    if log_fpr:
        ax.set_xscale("log")
        ax.set_xlim(lo, 1.0)
    else:
        ax.plot([0, 1], [0, 1], ls=":", color="0.5", lw=1)
        ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.01)
    ax.set_xlabel("false positive rate" + (" (log scale)" if log_fpr else ""))
    ax.set_ylabel("true positive rate (verification rate)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if log_fpr:
        ax.grid(True, which="minor", alpha=0.1)
    _legend_outside(ax, [labels[n] for n in order if labels[n]] if any(data) else None)
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_cmc(curves, *, rank1: Mapping[str, float] | None = None, title: str = "CMC",
             path: str | os.PathLike | None = None):
    """Cumulative match characteristic curves.

    The y-axis spans the curves' range (from just below the lowest rank-1 rate to just above
    the highest rate, in steps of 10 %), so that the differences between methods are visible;
    the legend (outside the axes) lists each method with its rank-1 rate, best first.

    Parameters
    ----------
    curves : mapping name -> cmc array, or one cmc array
        ``cmc[r - 1]`` = recognition rate at rank ``r`` (:func:`crossmetric.metrics.cmc`).
    rank1 : mapping name -> float, optional
        Rank-1 rates (fractions) for the legend; default ``cmc[0]``.
    title : str
    path : path, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    items = list(curves.items()) if isinstance(curves, Mapping) else [("", curves)]
    fig, ax = _figure((7.6, 4.6))
    data = {}
    for name, c in items:
        c = np.asarray(c, dtype=float)
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"CMC curve {name!r} must be a non-empty 1-D array, got shape "
                             f"{c.shape}.")
        data[str(name)] = c
    r1 = {n: float(rank1[n]) if rank1 is not None and n in rank1 else float(c[0])
          for n, c in data.items()}
    order = sorted(data, key=lambda n: -r1[n])
    n_max = max(c.size for c in data.values())
    labels = []
    for name in order:
        c = data[name]
        st = method_style(name) if name else {}
        label = f"{name}  rank-1 {100 * r1[name]:.1f}%" if name else None
        labels.append(label)
        ax.plot(np.arange(1, c.size + 1), 100 * c, lw=1.5, ms=4, markevery=max(1, c.size // 10),
                label=label, markerfacecolor="none", **st)
    from matplotlib.ticker import MaxNLocator

    low = min(float(c.min()) for c in data.values())
    high = max(float(c.max()) for c in data.values())
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0.7, n_max + 0.3)
    ax.set_ylim(max(0.0, 10 * np.floor(10 * low - 0.5)),
                min(100.5, 10 * np.ceil(10 * high + 0.5)))
    ax.set_xlabel("rank")
    ax.set_ylabel("recognition rate (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    _legend_outside(ax, [lab for lab in labels if lab] or None)
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
        st = {k: v for k, v in method_style(name).items() if k != "marker"} if name else {}
        ax.plot(np.arange(1, c.size + 1), c, lw=1.5, label=name or None, **st)
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


def plot_rank_lists(query_images, gallery_images, distance, q_labels, g_labels, *,
                    k: int = 10, n_queries: int = 5, queries=None, same_set: bool = False,
                    title: str | None = None, path: str | os.PathLike | None = None):
    """Rank lists as a figure: one row per query, the query first (blue frame), then its
    ``k`` nearest gallery images, true matches framed green and false ones red.

    Parameters
    ----------
    query_images, gallery_images : sequence of images
        One per query row / gallery column (``(h, w)`` or ``(h, w, 3)``; uint8 or floats in
        [0, 1]).
    distance : array-like of shape (n_query, n_gallery)
    q_labels, g_labels : array-like
    k, n_queries, queries, same_set :
        As in :func:`crossmetric.ranklists.top_k_lists`.
    title : str, optional
    path : path, optional
        Also write the figure there as PNG.

    Returns
    -------
    matplotlib.figure.Figure
        Its axes are in row order (query, then ranks 1..k); each axis carries ``match``
        (True / False, None for the query).

    Examples
    --------
    >>> import numpy as np
    >>> imgs = np.random.RandomState(0).rand(4, 8, 4)
    >>> fig = plot_rank_lists(imgs[:2], imgs, np.random.RandomState(1).rand(2, 4),
    ...                       [0, 1], [0, 1, 2, 3], k=3)
    >>> len(fig.axes)
    8
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from crossmetric.ranklists import (
        MATCH_COLOR,
        MISS_COLOR,
        QUERY_COLOR,
        to_rgb_uint8,
        top_k_lists,
    )

    qs, order, match = top_k_lists(distance, q_labels, g_labels, k, queries=queries,
                                   n_queries=n_queries, same_set=same_set)
    ql, gl = np.asarray(q_labels).ravel(), np.asarray(g_labels).ravel()
    if len(query_images) != np.shape(distance)[0] or len(gallery_images) != np.shape(
            distance)[1]:
        raise ValueError(f"query_images and gallery_images must hold one image per row / "
                         f"column of distance {np.shape(distance)}, got {len(query_images)} "
                         f"and {len(gallery_images)}.")
    n, kk = order.shape
    height = 2.1 * n + (0.4 if title else 0.0)
    fig = Figure(figsize=(1.0 * (kk + 1) + 0.3, height), dpi=100)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(n, kk + 1, wspace=0.08, hspace=0.35,
                            top=1.0 - (0.55 if title else 0.2) / height, bottom=0.1 / height)
    for i, q in enumerate(qs):
        cells = [(query_images[q], f"query\nid {ql[q]}", QUERY_COLOR, None)]
        cells += [(gallery_images[g], f"{r + 1}. id {gl[g]}", MATCH_COLOR if ok else MISS_COLOR,
                   bool(ok)) for r, (g, ok) in enumerate(zip(order[i], match[i], strict=True))]
        for j, (img, label, color, ok) in enumerate(cells):
            ax = fig.add_subplot(grid[i, j])
            ax.imshow(to_rgb_uint8(img), interpolation="nearest", aspect="equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_edgecolor(color)
                side.set_linewidth(4 if ok is not None else 3)
            ax.set_title(label, fontsize=7, pad=2)
            ax.match = ok
    if title:
        fig.suptitle(title, fontsize=10, y=1.0 - 0.1 / height)
    if path is not None:
        save_figure(fig, path)
    return fig


__all__ += ["plot_rank_lists"]
