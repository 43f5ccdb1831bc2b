"""The examples gallery's image scraper for :mod:`crossmetric.plotting`.

crossmetric's plots are built on explicit :class:`matplotlib.figure.Figure` objects, without
pyplot, so sphinx-gallery's matplotlib scraper does not see them. ``conf.py`` names
:func:`plotting_figures` before the matplotlib scraper in ``image_scrapers`` (by its dotted
name, so that the configuration stays picklable).
"""

from __future__ import annotations

import weakref

#: every figure already looked at (pyplot's too), held weakly
_shown: weakref.WeakSet = weakref.WeakSet()


def plotting_figures(block, block_vars, gallery_conf):
    """Show the figures of :mod:`crossmetric.plotting`, which are built without pyplot (so
    the matplotlib scraper does not see them): every such figure the example holds in a
    variable, once. It runs before the matplotlib scraper, which closes pyplot's figures: a
    figure seen while pyplot still manages it is pyplot's and is never saved here."""
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    paths = []
    for value in list(block_vars["example_globals"].values()):
        if not isinstance(value, Figure) or value in _shown:
            continue
        _shown.add(value)
        if value.canvas.manager is None:  # built without pyplot
            path = next(block_vars["image_path_iterator"])
            value.savefig(path, bbox_inches="tight")
            paths.append(path)
    return figure_rst(paths, gallery_conf["src_dir"])
