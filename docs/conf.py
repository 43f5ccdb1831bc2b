"""Sphinx configuration of the crossmetric documentation.

Build (warnings are errors, as in ``.ci/run``)::

    pip install -e ".[docs]"
    sphinx-build -W -b html docs docs/_build/html

The user guide is Markdown (MyST), the API reference is generated from the numpydoc docstrings
(autosummary), the examples gallery is executed by the build (sphinx-gallery) and the
Reproductions page is generated from the result files under ``benchmarks/results/``
(``docs/_ext/crossmetric_results.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))

# the gallery's examples fit small models: one BLAS thread each is faster on a busy machine
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import crossmetric  # noqa: E402

project = "crossmetric"
author = "the crossmetric developers"
copyright = "the crossmetric developers (BSD-3-Clause)"
release = crossmetric.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "crossmetric_results",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "examples/README.rst"]
templates_path = ["_templates"]

# -- MyST (the user guide pages are Markdown, moved from the README) ------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# -- API reference -----------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
# a module's page lists exactly its __all__ (docs/_templates/autosummary/module.rst), so a new
# public function or class is documented without editing api.rst
autosummary_ignore_module_all = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # methods are listed by the class template
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- examples gallery -------------------------------------------------------------------
sphinx_gallery_conf = {
    # crossmetric.plotting's figures first (docs/_ext/crossmetric_gallery.py), then pyplot's
    "image_scrapers": ("crossmetric_gallery.plotting_figures", "matplotlib"),
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "reset_modules": ("matplotlib",),
    "abort_on_example_error": True,
    "show_memory": False,
}

# -- the Reproductions page ------------------------------------------------------------
crossmetric_results_root = str(ROOT / "benchmarks" / "results")

# -- HTML ----------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"crossmetric {release}"
html_static_path: list[str] = []
pygments_style = "sphinx"


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document crossmetric's own members only: scikit-learn's inherited methods
    (``get_params``, ``set_*_request``, ...) are documented by scikit-learn."""
    if skip:
        return True
    if name.endswith("_request") or name in {"get_metadata_routing", "set_output"}:
        return True
    module = getattr(obj, "__module__", None) or ""
    if module.split(".")[0] in {"sklearn", "torch", "builtins", "abc", "typing"}:
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
