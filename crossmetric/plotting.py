"""ROC, CMC and convergence figures, saved as PNG with matplotlib's Agg backend.

Figures are built on explicit :class:`matplotlib.figure.Figure` objects (no ``pyplot`` state,
no display needed), so plotting works in worker processes, on servers and in tests.

Every method keeps one look in every figure, run and dataset (:func:`method_style`): a colour
*and* a line style (and a marker on CMC curves). The known methods have fixed slots in a fixed
order (the first 20 slots have 20 different colours), other names a slot derived from a stable
hash of the name, and a "-C" variant looks like its base method; when two names of one figure
would share a look, :func:`method_styles` moves the later one to the next free slot (same
colour, next line style first). ROC and CMC curves can carry a shaded band of ±1 standard
deviation over folds / repeats, and ``top_k`` keeps the best methods only. Legends sit outside
the axes, sorted best first, with each method's AUC (ROC) or rank-1 rate (CMC). Titles never
show a folder: path-like words are cut to their last component (:func:`figure_title`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_roc", "plot_cmc", "plot_convergence", "save_figure", "method_style",
           "method_styles", "figure_title"]

#: display names with a reserved style slot, in a fixed order (registry order first; new names
#: are appended, never inserted, so that a method keeps its look across releases)
_FIXED = ("Euclidean", "PCCA", "CMML", "CML_AUC", "CML_pAUC", "Maha_AUC", "LDML", "CLML",
          "GSM", "DeepGSM", "CCA", "PLS", "KCCA", "CDFE", "KISSME", "KPLS", "KCDFE", "MvDA",
          "CSR", "KCSR", "DML-eig", "ITML", "MCC", "PRDC", "NCA", "LMNN", "CLMLCV",
          "Maha_pAUC", "MCCA", "MMC", "SDML", "LSML", "RCA", "MLKR", "LFDA", "SCML",
          "Covariance")
#: line styles; slot ``s`` uses colour ``s % 20`` and style ``(s + s // 20) % 4``, so the
#: 80 slots are 80 different (colour, style) pairs
_DASHES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
_N_COLORS = 20
_N_SLOTS = _N_COLORS * len(_DASHES)
#: tab10, then ten darker or more saturated colours, none pale (every line must stay readable
#: on white and over a shaded band); ordered so that a colour close to one of tab10's never
#: gets the same line style (chosen by CIELAB distance)
_EXTRA = ("#000000", "#1e90ff", "#a6761d", "#8b008b", "#00008b", "#1b9e77", "#800000",
          "#ff1493", "#556b2f", "#f032e6")


def _palette() -> list:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return [to_hex(c) for c in colormaps["tab10"](np.arange(10))] + list(_EXTRA)


def _base_name(name: str) -> str:
    return name[:-2] if name.endswith("-C") else name


def _slot(name: str) -> int:
    """The style slot of a name: fixed for :data:`_FIXED`, else a CRC-32 of the name among
    the slots after the fixed ones (stable across processes, unlike ``hash``)."""
    import zlib

    base = _base_name(name)
    if base in _FIXED:
        return _FIXED.index(base)
    free = _N_SLOTS - len(_FIXED)
    return len(_FIXED) + zlib.crc32(base.encode("utf-8")) % free


def _slot_style(slot: int) -> dict:
    colors = _palette()
    return {"color": colors[slot % _N_COLORS],
            "linestyle": _DASHES[(slot + slot // _N_COLORS) % len(_DASHES)],
            "marker": _MARKERS[slot % len(_MARKERS)]}


def method_style(name: str) -> dict:
    """Colour, line style and marker of a method, the same in every run and figure.

    The known methods (the registry's, in a fixed order, and a few planned ones) have fixed
    slots; any other name gets a slot from a CRC-32 of the name (stable across processes,
    unlike ``hash``). A trailing ``-C`` (single-modal learner on CCA views) is ignored. Slot
    ``s`` has colour ``s % 20`` (tab10, then ten darker colours) and line style
    ``("-", "--", "-.", ":")[(s + s // 20) % 4]``: 80 different (colour, style) pairs, the
    first 20 slots with 20 different colours.

    Parameters
    ----------
    name : str
        The method's display name (``BenchmarkResult.methods``).

    Returns
    -------
    dict
        ``color``, ``linestyle``, ``marker`` -- keyword arguments of ``Axes.plot``.

    See Also
    --------
    method_styles : the looks of the methods of one figure, never two alike.

    Examples
    --------
    >>> method_style("PCCA") == method_style("PCCA-C")
    True
    >>> a, b = method_style("CMML"), method_style("CCA")
    >>> (a["color"], a["linestyle"]) != (b["color"], b["linestyle"])
    True
    """
    return _slot_style(_slot(name))


def method_styles(names: Sequence[str]) -> dict[str, dict]:
    """The looks of the methods of one figure: :func:`method_style` of each, with no two
    names sharing a (colour, line style) pair.

    The known methods keep their fixed slots. A name whose slot is taken (two hashed names
    that collide, or ``X`` beside ``X-C``) moves to the next free slot -- same colour and the
    next line style first, then the next colour -- taken in sorted name order, so the same
    names get the same looks in every figure.

    Parameters
    ----------
    names : sequence of str

    Returns
    -------
    dict
        ``{name: {"color", "linestyle", "marker"}}``.

    Examples
    --------
    >>> st = method_styles(["PCCA", "PCCA-C"])
    >>> st["PCCA"]["color"] == st["PCCA-C"]["color"]
    True
    >>> st["PCCA"]["linestyle"] != st["PCCA-C"]["linestyle"]
    True
    """
    names = [str(n) for n in dict.fromkeys(names)]
    # fixed names first (their exact names before "-C" variants), then the others by name
    order = sorted(names, key=lambda n: (_base_name(n) not in _FIXED, n.endswith("-C"), n))
    used: set[int] = set()
    out = {}
    for name in order:
        first = _slot(name)
        slot = first
        if slot in used:
            probes = ((first + _N_COLORS * j + i) % _N_SLOTS
                      for i in range(_N_COLORS) for j in range(len(_DASHES)))
            slot = next((s for s in probes if s not in used), first)
        used.add(slot)
        out[name] = _slot_style(slot)
    return {n: out[n] for n in names}


_PATHLIKE = re.compile(r"(?<!\S)(?:[A-Za-z]:)?[^\s/\\]*[/\\]\S*")


def figure_title(text: str) -> str:
    """A title without folders: every path-like word is cut to its last component.

    ``"../shared/data/cufs: photo vs sketch"`` becomes ``"cufs: photo vs sketch"``; a lone
    ``/`` between words (``"Table 2 / Fig. 5"``) is kept. Long titles are wrapped onto lines of
    at most 80 characters.

    Parameters
    ----------
    text : str

    Returns
    -------
    str

    Examples
    --------
    >>> figure_title("ROC -- /home/me/data/cufs/: photo vs sketch")
    'ROC -- cufs: photo vs sketch'
    >>> figure_title("x.npy vs ./feats/y.npy")
    'x.npy vs y.npy'
    """
    def last(m: re.Match) -> str:
        split = re.fullmatch(r"([(\[\"']*)(.*?)([:,;.)\]\"']*)", m.group(0), flags=re.S)
        if split is None:  # (every group may be empty: not reached)
            return m.group(0)
        lead, body, punct = split.groups()
        parts = [p for p in re.split(r"[/\\]", body) if p not in ("", ".", "..")]
        return lead + (parts[-1] if parts else "") + punct

    out = _PATHLIKE.sub(lambda m: last(m) if m.group(0).strip("/\\") else m.group(0),
                        str(text))
    import textwrap

    return "\n".join(textwrap.wrap(out, 80, break_on_hyphens=False)) or out


def _legend_outside(ax, order=None, title: str | None = None) -> None:
    """Legend to the right of the axes (entries in ``order`` of labels when given)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if order is not None:
        rank = {lab: i for i, lab in enumerate(order)}
        pairs = sorted(zip(handles, labels, strict=True),
                       key=lambda hl: rank.get(hl[1], -1))
        handles, labels = [h for h, _ in pairs], [lab for _, lab in pairs]
    legend = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       fontsize=8, frameon=False, handlelength=3.0, borderaxespad=0.0,
                       title=title, title_fontsize=7)
    if title:
        legend._legend_box.align = "left"


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


def save_figure(fig: Figure, path: str | os.PathLike) -> str:
    """Write ``fig`` as PNG to ``path`` atomically (folders are created); returns the path."""
    from crossmetric.persistence import atomic_open

    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", bbox_inches="tight")
    return path


def _mean_std(values, what: str, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    """A curve and its spread: a 1-D array is a mean (no spread); a 2-D array holds one curve
    per fold / repeat (rows), summarised as mean and standard deviation (ddof=1, as the
    tables' ``±``; none for one row)."""
    a = np.asarray(values, dtype=float)
    if a.ndim == 2 and a.shape[0] >= 1:
        if a.shape[0] == 1:
            return a[0], None
        return a.mean(axis=0), a.std(axis=0, ddof=1)
    if a.ndim != 1:
        raise ValueError(f"{what} curve {name!r} must be 1-D (a mean) or 2-D (one row per "
                         f"fold / repeat), got shape {a.shape}.")
    return a, None


def _check_std(std, name: str, size: int, what: str) -> np.ndarray | None:
    if std is None or name not in std or std[name] is None:
        return None
    sd = np.asarray(std[name], dtype=float)
    if sd.shape != (size,):
        raise ValueError(f"std[{name!r}] must have the {what} curve's length {size}, got "
                         f"shape {sd.shape}.")
    return sd


def _as_curves(curves, std=None) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """``{name: (fpr, tpr, tpr_std or None)}`` from a mapping or a single ``(fpr, tpr)``."""
    items = list(curves.items()) if isinstance(curves, Mapping) else [("", curves)]
    out = {}
    for name, c in items:
        fpr, tpr = c
        fpr = np.asarray(fpr, dtype=float)
        tpr, sd = _mean_std(tpr, "ROC", name) if np.ndim(tpr) == 2 else (
            np.asarray(tpr, dtype=float), None)
        if fpr.shape != tpr.shape or fpr.ndim != 1 or fpr.size < 2:
            raise ValueError(f"ROC curve {name!r} must be two 1-D arrays (fpr, tpr) of equal "
                             f"length >= 2, got shapes {fpr.shape} and {tpr.shape}.")
        given = _check_std(std, str(name), fpr.size, "ROC")
        out[str(name)] = (fpr, tpr, given if given is not None else sd)
    return out


def _top(order: list[str], top_k: int | None) -> list[str]:
    if top_k is None:
        return order
    if isinstance(top_k, bool) or not isinstance(top_k, int | np.integer) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}.")
    return order[:int(top_k)]


def _band(ax, x, mean, sd, style: dict, name: str, low: float, high: float):
    """The ±1 std band of one curve (clipped to [low, high]); its ``gid`` is
    ``"band:<name>"``."""
    coll = ax.fill_between(x, np.clip(mean - sd, low, high), np.clip(mean + sd, low, high),
                           color=style.get("color"), alpha=0.14, lw=0, zorder=1.5)
    coll.set_gid(f"band:{name}")
    return coll


def _legend_title(shown: int, total: int, measure: str, spread: bool, over: str) -> str | None:
    parts = []
    if shown < total:
        parts.append(f"best {shown} of {total} by {measure}")
    if spread:
        parts.append(f"bands: ±1 std over {over}")
    return "\n".join(parts) or None


def plot_roc(curves: Mapping[str, Any] | Sequence[Any], *, fpr_range: Sequence[float] | None = None,
             log_fpr: bool = True, auc: Mapping[str, float] | None = None,
             fpr_mark: float | None = 1e-3, std: Mapping[str, Sequence[float]] | None = None,
             top_k: int | None = None, title: str = "ROC",
             path: str | os.PathLike | None = None) -> Figure:
    """ROC curves of one or several methods, each with its ±1 std band when known.

    Parameters
    ----------
    curves : mapping name -> (fpr, tpr), or one (fpr, tpr)
        E.g. ``BenchmarkResult.curves[m]["roc"]`` or ``metrics.roc(y, score)[:2]``. ``tpr``
        may be 2-D, one row per fold / repeat on the common ``fpr`` grid: the mean is drawn,
        with a band of ±1 standard deviation (ddof=1).
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
    std : mapping name -> array, optional
        Standard deviation of each mean ``tpr`` over folds / repeats (e.g.
        ``BenchmarkResult.curves[m]["roc_std"]``): a band from ``tpr - std`` to
        ``tpr + std`` (clipped to [0, 1]) in the method's colour, its ``gid``
        ``"band:<name>"``. Wins over the spread of a 2-D ``tpr``.
    top_k : int, optional
        Draw only the ``top_k`` methods of highest AUC (the legend says so).
    title : str
        Path-like words are cut to their last component (:func:`figure_title`).
    path : path, optional
        Save the figure there as PNG.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> grid = np.linspace(0, 1, 11)
    >>> fig = plot_roc({"a": (grid, np.sqrt(grid)), "b": (grid, grid)},
    ...                std={"a": np.full(11, 0.05)}, top_k=1, log_fpr=False)
    >>> [c.get_gid() for c in fig.axes[0].collections]
    ['band:a']
    """
    data = _as_curves(curves, std)
    fig, ax = _figure((7.6, 4.6))
    lo = 1e-4
    if fpr_range is not None:
        a, b = (float(v) for v in fpr_range)
        if not 0.0 <= a < b <= 1.0:
            raise ValueError(f"fpr_range must satisfy 0 <= alpha < beta <= 1, got {fpr_range!r}.")
        ax.axvspan(max(a, lo) if log_fpr else a, b, color="0.95", zorder=0,
                   label=f"pAUC window [{a:g}, {b:g}]")
    areas = {}
    for name, (fpr, tpr, _) in data.items():
        areas[name] = (float(auc[name]) if auc is not None and name in auc
                       else float(np.trapezoid(tpr, fpr)))
    order = _top(sorted(data, key=lambda n: -areas[n]), top_k)
    styles = method_styles([n for n in order if n])
    labels = {}
    for name in order:
        fpr, tpr, sd = data[name]
        keep = fpr > 0 if log_fpr else np.ones(fpr.size, bool)
        st = {k: v for k, v in styles[name].items() if k != "marker"} if name else {}
        label = f"{name}  AUC {areas[name]:.3f}" if name else None
        labels[name] = label
        line, = ax.plot(fpr[keep], tpr[keep], lw=1.6, label=label, zorder=2, **st)
        if sd is not None:
            _band(ax, fpr[keep], tpr[keep], sd[keep], {"color": line.get_color()}, name,
                  0.0, 1.0)
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
    ax.set_title(figure_title(title), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if log_fpr:
        ax.grid(True, which="minor", alpha=0.1)
    spread = any(data[n][2] is not None for n in order)
    _legend_outside(ax, [labels[n] for n in order if labels[n]] if any(data) else None,
                    title=_legend_title(len(order), len(data), "AUC", spread, "folds"))
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_cmc(curves: Mapping[str, Any] | Sequence[Any], *, rank1: Mapping[str, float] | None = None,
             std: Mapping[str, Sequence[float]] | None = None, top_k: int | None = None,
             title: str = "CMC", path: str | os.PathLike | None = None) -> Figure:
    """Cumulative match characteristic curves, each with its ±1 std band when known.

    The y-axis spans the curves' range (from just below the lowest rank-1 rate to just above
    the highest rate, in steps of 10 %), so that the differences between methods are visible;
    the legend (outside the axes) lists each method with its rank-1 rate, best first.

    Parameters
    ----------
    curves : mapping name -> cmc array, or one cmc array
        ``cmc[r - 1]`` = recognition rate at rank ``r`` (:func:`crossmetric.metrics.cmc`). A
        2-D array holds one curve per repeat (rows): the mean is drawn, with a band of ±1
        standard deviation (ddof=1).
    rank1 : mapping name -> float, optional
        Rank-1 rates (fractions) for the legend; default ``cmc[0]``.
    std : mapping name -> array, optional
        Standard deviation of each mean curve over repeats (e.g.
        ``BenchmarkResult.curves[m]["cmc_std"]``; fractions, as the curves): a band from
        ``cmc - std`` to ``cmc + std`` (clipped to [0, 100] %), its ``gid``
        ``"band:<name>"``. Wins over the spread of a 2-D curve.
    top_k : int, optional
        Draw only the ``top_k`` methods of highest rank-1 rate (the legend says so).
    title : str
        Path-like words are cut to their last component (:func:`figure_title`).
    path : path, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> runs = np.array([[0.5, 0.7, 0.9], [0.7, 0.9, 1.0]])   # two repeats
    >>> fig = plot_cmc({"m": runs})
    >>> fig.axes[0].get_lines()[0].get_ydata().tolist()
    [60.0, 80.0, 95.0]
    """
    items = list(curves.items()) if isinstance(curves, Mapping) else [("", curves)]
    fig, ax = _figure((7.6, 4.6))
    data, spread_of = {}, {}
    for name, c in items:
        c, sd = _mean_std(c, "CMC", str(name))
        if c.size == 0:
            raise ValueError(f"CMC curve {name!r} must be a non-empty 1-D array, got shape "
                             f"{c.shape}.")
        given = _check_std(std, str(name), c.size, "CMC")
        data[str(name)] = c
        spread_of[str(name)] = given if given is not None else sd
    r1 = {n: float(rank1[n]) if rank1 is not None and n in rank1 else float(c[0])
          for n, c in data.items()}
    order = _top(sorted(data, key=lambda n: -r1[n]), top_k)
    styles = method_styles([n for n in order if n])
    n_max = max(data[n].size for n in order)
    labels = []
    for name in order:
        c = data[name]
        st = styles[name] if name else {}
        label = f"{name}  rank-1 {100 * r1[name]:.1f}%" if name else None
        labels.append(label)
        x = np.arange(1, c.size + 1)
        line, = ax.plot(x, 100 * c, lw=1.5, ms=4, markevery=max(1, c.size // 10),
                        label=label, markerfacecolor="none", zorder=2, **st)
        band = spread_of[name]
        if band is not None:
            _band(ax, x, 100 * c, 100 * band, {"color": line.get_color()}, name,
                  0.0, 100.0)
    from matplotlib.ticker import MaxNLocator

    shown = [data[n] for n in order]
    low = min(float(c.min()) for c in shown)
    high = max(float(c.max()) for c in shown)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0.7, n_max + 0.3)
    ax.set_ylim(max(0.0, 10 * np.floor(10 * low - 0.5)),
                min(100.5, 10 * np.ceil(10 * high + 0.5)))
    ax.set_xlabel("rank")
    ax.set_ylabel("recognition rate (%)")
    ax.set_title(figure_title(title), fontsize=10)
    ax.grid(True, alpha=0.3)
    spread = any(spread_of[n] is not None for n in order)
    _legend_outside(ax, [lab for lab in labels if lab] or None,
                    title=_legend_title(len(order), len(data), "rank-1", spread, "repeats"))
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_convergence(models_or_curves: Any, *, log: bool = True, title: str = "convergence",
                     path: str | os.PathLike | None = None) -> Figure:
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
    names = [str(n) for n, _ in items if n]
    all_pos = True
    for name, obj in items:
        curve = getattr(obj, "loss_curve_", obj)
        if curve is obj and hasattr(obj, "fit") and not hasattr(obj, "__len__"):
            raise ValueError(f"model {name!r} has no loss_curve_ (not fitted or not iterative).")
        c = np.asarray(curve, dtype=float).ravel()
        if c.size == 0:
            raise ValueError(f"loss curve {name!r} is empty.")
        all_pos &= bool(np.all(c > 0))
        st = ({k: v for k, v in method_styles(names)[name].items() if k != "marker"}
              if name else {})
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


def _fit_box(h: int, w: int, box_w: float, box_h: float) -> tuple[float, float]:
    """Width and height (inches) of an ``h`` x ``w`` image scaled to fit ``box_w`` x
    ``box_h`` with its aspect ratio kept."""
    scale = min(box_w / w, box_h / h)
    return w * scale, h * scale


def _shorten(text: str, n: int) -> str:
    """``text`` cut in the middle to at most ``n`` characters (``abc…xyz``)."""
    if len(text) <= n:
        return text
    head = (n - 1) // 2
    return text[:head] + "\u2026" + text[len(text) - (n - 1 - head):]


def plot_rank_lists(query_images: Sequence[ArrayLike] | np.ndarray,
                    gallery_images: Sequence[ArrayLike] | np.ndarray, distance: ArrayLike,
                    q_labels: ArrayLike, g_labels: ArrayLike, *, k: int = 10, n_queries: int = 5,
                    queries: ArrayLike | None = None, same_set: bool = False,
                    failures: bool = False, q_names: Sequence[str] | None = None,
                    g_names: Sequence[str] | None = None, title: str | None = None,
                    path: str | os.PathLike | None = None, image_height: float = 1.3) -> Figure:
    """Rank lists as a figure: one row per query, the query first (blue frame), then its
    ``k`` nearest gallery images, true matches framed green and false ones red.

    Every image keeps its aspect ratio: the cells are sized from the images' median
    height / width ratio and each image is scaled to fit its cell without being stretched.
    Captions (identity, distance, file name) sit under each image, in columns wide enough for
    them (names longer than the column are cut in the middle), so they never overlap.

    Parameters
    ----------
    query_images, gallery_images : sequence of images
        One per query row / gallery column (``(h, w)`` or ``(h, w, 3)``; uint8 or floats in
        [0, 1]).
    distance : array-like of shape (n_query, n_gallery)
    q_labels, g_labels : array-like
    k, n_queries, queries, same_set, failures :
        As in :func:`crossmetric.ranklists.top_k_lists` (``failures=True``: only the queries
        whose first match is wrong).
    q_names, g_names : sequence of str, optional
        A name per query / gallery image (e.g. its file), shown in its caption (the last path
        component only; the query's then instead of its row number).
    title : str, optional
        Path-like words are cut to their last component (:func:`figure_title`).
    path : path, optional
        Also write the figure there as PNG.
    image_height : float, default=1.3
        Height of the image cells in inches (images wider than tall get at most 1.8 inches of
        width instead; tall images under wider captions grow to the column, up to 2.4
        inches high).

    Returns
    -------
    matplotlib.figure.Figure
        Its axes are in row order (query, then ranks 1..k); each axis carries ``match``
        (True / False, None for the query) and ``index`` (the query or gallery row shown).

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
        _names,
        to_rgb_uint8,
        top_k_lists,
    )

    if len(query_images) != np.shape(distance)[0] or len(gallery_images) != np.shape(
            distance)[1]:
        raise ValueError(f"query_images and gallery_images must hold one image per row / "
                         f"column of distance {np.shape(distance)}, got {len(query_images)} "
                         f"and {len(gallery_images)}.")
    qs, order, match = top_k_lists(distance, q_labels, g_labels, k, queries=queries,
                                   n_queries=n_queries, same_set=same_set, failures=failures)
    qn = _names(q_names, len(query_images), "q_names")
    gn = _names(g_names, len(gallery_images), "g_names")
    ql, gl = np.asarray(q_labels).ravel(), np.asarray(g_labels).ravel()
    Dm = np.asarray(distance, dtype=float)
    n, kk = order.shape
    rows = []
    for i, q in enumerate(qs):
        cells: list[tuple] = [(q, to_rgb_uint8(query_images[q]),
                  [f"query {q}" if not qn else "query", f"id {ql[q]}"]
                  + ([qn[q]] if qn else []), QUERY_COLOR, None)]
        for r, (g, ok) in enumerate(zip(order[i], match[i], strict=True)):
            cells.append((g, to_rgb_uint8(gallery_images[g]),
                          [f"{r + 1}. id {gl[g]}", f"d={Dm[q, g]:.3g}"]
                          + ([gn[g]] if gn else []),
                          MATCH_COLOR if ok else MISS_COLOR, bool(ok)))
        rows.append(cells)
    # the image box: the median aspect of the images shown, at most 1.8 in wide
    ratios = [c[1].shape[0] / c[1].shape[1] for cells in rows for c in cells]
    aspect = float(np.median(ratios))
    box_h = float(image_height)
    box_w = box_h / aspect
    if box_w > 1.8:
        box_w, box_h = 1.8, 1.8 * aspect
    font = 7.0
    char_w = 0.6 * font / 72.0          # inches per caption character (DejaVu Sans, approx.)
    max_chars = 26
    longest = max(len(t) for cells in rows for c in cells for t in c[2])
    col_w = max(box_w, min(longest, max_chars) * char_w + 0.08)
    if box_w < col_w and box_h < 2.4:   # tall images under wide captions: use the room
        box_h = min(col_w * aspect, 2.4)
        box_w = box_h / aspect
    n_lines = max(len(c[2]) for cells in rows for c in cells)
    cap_h = n_lines * font * 1.3 / 72.0 + 0.06
    gap_x, gap_q, gap_y = 0.10, 0.22, 0.18
    top = 0.45 if title else 0.12
    width = 0.15 + (kk + 1) * col_w + kk * gap_x + gap_q + 0.15
    height = top + n * (box_h + cap_h) + (n - 1) * gap_y + 0.1
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    max_chars = max(6, int((col_w - 0.08) / char_w))
    for i, cells in enumerate(rows):
        y_top = height - top - i * (box_h + cap_h + gap_y)
        for j, (idx, img, lines, color, ok) in enumerate(cells):
            x0 = 0.15 + j * (col_w + gap_x) + (gap_q if j else 0.0)
            w, h = _fit_box(img.shape[0], img.shape[1], box_w, box_h)
            left = x0 + (col_w - w) / 2.0
            bottom = y_top - h
            ax = fig.add_axes((left / width, bottom / height, w / width, h / height))
            ax.imshow(img, interpolation="antialiased", aspect="equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_edgecolor(color)
                side.set_linewidth(4 if ok is not None else 3)
            text = "\n".join(_shorten(t, max_chars) for t in lines)
            fig.text((x0 + col_w / 2.0) / width, (y_top - box_h - 0.05) / height, text,
                     ha="center", va="top", fontsize=font, linespacing=1.15)
            # the cell's match and index, for a caller that reads the figure back
            ax.match = ok  # type: ignore[attr-defined]
            ax.index = int(idx)  # type: ignore[attr-defined]
    if title:
        fig.text(0.5, 1.0 - 0.12 / height, figure_title(title), ha="center", va="top",
                 fontsize=10)
    if path is not None:
        save_figure(fig, path)
    return fig


__all__ += ["plot_rank_lists"]
