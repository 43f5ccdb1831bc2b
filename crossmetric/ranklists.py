"""Rank lists people can look at: each query beside its top-k gallery items.

:func:`top_k_lists` picks the lists (the k nearest gallery items of each chosen query and
whether each is a true match); :func:`write_rank_html` writes them as one self-contained HTML
page (every image embedded as a base64 PNG, true matches framed green, others red);
:func:`crossmetric.plotting.plot_rank_lists` draws the same lists as a matplotlib figure.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Mapping

import numpy as np

from crossmetric._utils.checks import as_float_array, check_positive_int

__all__ = ["top_k_lists", "write_rank_html", "to_rgb_uint8", "display_name"]

#: frame colours of true (green) and false (red) matches, and of the query (blue)
MATCH_COLOR, MISS_COLOR, QUERY_COLOR = "#1a9641", "#d7191c", "#2c7bb6"


def top_k_lists(distance, q_labels, g_labels, k: int = 10, *, queries=None,
                n_queries: int = 10, same_set: bool = False, failures: bool = False):
    """The ``k`` nearest gallery items of each chosen query and which of them are true matches.

    Parameters
    ----------
    distance : array-like of shape (n_query, n_gallery)
        Smaller = more alike. Ties are listed in gallery order (a stable sort).
    q_labels, g_labels : array-like
        Identity of each query / gallery item.
    k : int, default=10
        Length of each list (at most the gallery size, one less with ``same_set``).
    queries : array-like of int, optional
        Rows to show; default the first ``n_queries``.
    n_queries : int, default=10
    same_set : bool, default=False
        The gallery is the query set: a query's own item is left out of its list.
    failures : bool, default=False
        Only queries whose first match is wrong (rank-1 failures): among ``queries`` (default:
        every row, of which the first ``n_queries`` failures are kept).

    Returns
    -------
    queries : ndarray of shape (n,)
    order : ndarray of shape (n, k)
        Gallery indices, nearest first.
    match : ndarray of bool, shape (n, k)
        ``g_labels[order] == q_labels[queries]``.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0.3, 0.1, 0.2], [0.5, 0.9, 0.1]])
    >>> q, order, match = top_k_lists(D, [1, 2], [1, 2, 2], k=2)
    >>> order.tolist(), match.tolist()
    ([[1, 2], [2, 0]], [[False, False], [True, False]])
    >>> top_k_lists(D, [1, 2], [1, 2, 2], k=2, failures=True)[0].tolist()
    [0]
    """
    D = as_float_array(distance, "distance", ndim=2)
    n_q, n_g = D.shape
    ql, gl = np.asarray(q_labels).ravel(), np.asarray(g_labels).ravel()
    if ql.shape[0] != n_q or gl.shape[0] != n_g:
        raise ValueError(f"q_labels and g_labels must have {n_q} and {n_g} entries (the shape "
                         f"of distance), got {ql.shape[0]} and {gl.shape[0]}.")
    if same_set and n_q != n_g:
        raise ValueError(f"same_set=True needs a square distance matrix, got {D.shape}.")
    n_queries = check_positive_int(n_queries, "n_queries")
    if queries is None:
        queries = np.arange(n_q if failures else min(n_queries, n_q))
    queries = np.asarray(queries, dtype=np.int64).ravel()
    if queries.size == 0 or queries.min() < 0 or queries.max() >= n_q:
        raise ValueError(f"queries must be row indices in [0, {n_q}), got {queries.tolist()}.")
    if failures:
        rows = D[queries].copy()
        if same_set:
            rows[np.arange(queries.size), queries] = np.inf
        first = np.argmin(rows, axis=1)
        wrong = queries[gl[first] != ql[queries]]
        if wrong.size == 0:
            raise ValueError("no query's first match is wrong (failures=True found nothing "
                             "to show).")
        queries = wrong[:n_queries]
    k = min(check_positive_int(k, "k"), n_g - int(same_set))
    if k < 1:
        raise ValueError("the gallery has no item to list.")
    rows = D[queries].copy()
    if same_set:
        rows[np.arange(queries.size), queries] = np.inf
    order = np.argsort(rows, axis=1, kind="stable")[:, :k]
    return queries, order, gl[order] == ql[queries][:, None]


def to_rgb_uint8(image) -> np.ndarray:
    """An image as ``(h, w, 3)`` uint8: grey ``(h, w)`` is repeated, floats in [0, 1] are
    scaled by 255 (other floats are clipped to [0, 255]).

    Examples
    --------
    >>> to_rgb_uint8(np.ones((2, 3))).shape
    (2, 3, 3)
    """
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise ValueError(f"an image must be (h, w), (h, w, 1), (h, w, 3) or (h, w, 4), got "
                         f"shape {a.shape}.")
    a = a[:, :, :3]
    if a.dtype == np.uint8:
        return a
    a = a.astype(np.float64)
    if np.isfinite(a).all() and a.size and a.min() >= 0.0 and a.max() <= 1.0:
        a = a * 255.0
    return np.clip(np.round(a), 0, 255).astype(np.uint8)


def _png_data_uri(image) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(to_rgb_uint8(image)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _check_images(images, n: int, name: str):
    if len(images) != n:
        raise ValueError(f"{name} must hold one image per row of the distance matrix ({n}), "
                         f"got {len(images)}.")
    return images


_CSS = ("""
body { font-family: sans-serif; margin: 1em; background: #fafafa; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
.row { display: flex; align-items: flex-start; gap: 6px; margin: 8px 0; }
figure { margin: 0; text-align: center; font-size: 11px; }
figure img { display: block; border: 4px solid transparent; image-rendering: pixelated; }
figure.query img { border-color: QUERY; }
figure.match img { border-color: MATCH; }
figure.miss img { border-color: MISS; }
.sep { width: 12px; }
figcaption .name { display: inline-block; max-width: 12em; overflow: hidden;
                   text-overflow: ellipsis; white-space: nowrap; color: #555; }
""".replace("QUERY", QUERY_COLOR).replace("MATCH", MATCH_COLOR).replace("MISS", MISS_COLOR))


def write_rank_html(path, query_images, gallery_images, distance, q_labels, g_labels, *,
                    k: int = 10, n_queries: int = 10, queries=None, same_set: bool = False,
                    failures: bool = False, q_names=None, g_names=None,
                    title: str = "Rank lists", height: int = 128) -> str:
    """Write a self-contained HTML page of rank lists: each query, then its top-k gallery
    images, true matches framed green and false ones red.

    Every image is embedded as a base64 PNG (``data:`` URI), so the page needs no other file.
    The page is written to a temporary file in the same folder and moved into place
    (``os.replace``), so a reader never sees half a page.

    Parameters
    ----------
    path : str or path-like
        The ``.html`` file to write (its folder is created).
    query_images, gallery_images : sequence of images
        One image per query row / gallery column (``(h, w)``, ``(h, w, 3)``; uint8, or
        floats in [0, 1]).
    distance : array-like of shape (n_query, n_gallery), or mapping name -> such array
        A mapping gives one section per name (e.g. per method), all on the same queries.
    q_labels, g_labels : array-like
    k, n_queries, queries, same_set, failures :
        As in :func:`top_k_lists`.
    q_names, g_names : sequence of str, optional
        A name per query / gallery item (e.g. its image file), shown in its caption (the
        last path component only) instead of its row number.
    title : str
    height : int, default=128
        Displayed height of every image in pixels.

    Returns
    -------
    str
        ``path``.
    """
    sections = dict(distance) if isinstance(distance, Mapping) else {"": distance}
    if not sections:
        raise ValueError("distance is an empty mapping; give at least one matrix.")
    height = check_positive_int(height, "height")
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>Each row: the query (blue), then its {k} nearest gallery items, nearest "
             f"first; <span style='color:{MATCH_COLOR}'>green</span> = true match, "
             f"<span style='color:{MISS_COLOR}'>red</span> = other identity.</p>"]
    q_uri, g_uri = {}, {}
    for name, D in sections.items():
        qs, order, match = top_k_lists(D, q_labels, g_labels, k, queries=queries,
                                       n_queries=n_queries, same_set=same_set,
                                       failures=failures)
        qn = _names(q_names, np.shape(D)[0], "q_names")
        gn = _names(g_names, np.shape(D)[1], "g_names")
        _check_images(query_images, np.shape(D)[0], "query_images")
        _check_images(gallery_images, np.shape(D)[1], "gallery_images")
        ql, gl = np.asarray(q_labels).ravel(), np.asarray(g_labels).ravel()
        Dm = np.asarray(D, dtype=float)
        if name:
            hits = float(match[:, 0].mean())
            parts.append(f"<h2>{html.escape(str(name))} <small>(rank-1 on the rows shown: "
                         f"{100 * hits:.0f} %)</small></h2>")
        for i, q in enumerate(qs):
            if q not in q_uri:
                q_uri[q] = _png_data_uri(query_images[q])
            cells = [f"<figure class='query' data-query='{q}'><img src='{q_uri[q]}' "
                     f"height='{height}' alt='query {q}'><figcaption>query"
                     f"{'' if qn else f' {q}'}<br>id "
                     f"{html.escape(str(ql[q]))}{_name_line(qn, q)}</figcaption></figure>"
                     f"<div class='sep'></div>"]
            for r, (g, ok) in enumerate(zip(order[i], match[i], strict=True)):
                if g not in g_uri:
                    g_uri[g] = _png_data_uri(gallery_images[g])
                cls = "match" if ok else "miss"
                cells.append(f"<figure class='{cls}' data-gallery='{g}' data-rank='{r + 1}'>"
                             f"<img src='{g_uri[g]}' height='{height}' alt='gallery {g}'>"
                             f"<figcaption>{r + 1}. id {html.escape(str(gl[g]))}<br>"
                             f"d={Dm[q, g]:.3g}{_name_line(gn, g)}</figcaption></figure>")
            parts.append("<div class='row'>" + "".join(cells) + "</div>")
    parts.append("</body></html>\n")
    return _write_text_atomic(path, "\n".join(parts))


def _names(names, n: int, what: str) -> list[str] | None:
    """The last path component of each name (``None``: no names)."""
    if names is None:
        return None
    names = [str(v) for v in names]
    if len(names) != n:
        raise ValueError(f"{what} must hold one name per image ({n}), got {len(names)}.")
    return [display_name(v) for v in names]


def display_name(name: str) -> str:
    """The last component of a path (``a/b/c.png`` -> ``c.png``; a name without a folder is
    kept).

    Examples
    --------
    >>> display_name("../data/cufs/photos/f-005-01.jpg")
    'f-005-01.jpg'
    """
    text = str(name).rstrip("/\\")
    return text.replace("\\", "/").rsplit("/", 1)[-1] or str(name)


def _name_line(names, i: int) -> str:
    if names is None:
        return ""
    name = html.escape(names[i])
    return f"<br><span class='name' title='{name}'>{name}</span>"


def _write_text_atomic(path, text: str) -> str:
    """Write ``text`` to ``path`` atomically (:func:`crossmetric.persistence.atomic_open`),
    creating its folder."""
    from crossmetric.persistence import atomic_open

    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path
