"""Datasets: the embedded two-modality digits, UCI mfeat, LFW ``pairs.txt`` and generic files.

Every loader returns a :class:`sklearn.utils.Bunch` whose ``X`` and ``Y`` are row-aligned: row
``r`` of both describes the same object, ``labels[r]`` is its identity (class) and, where the
loader knows it, ``instance[r]`` the object id used for instance-level matching.

* :func:`load_digits_views` -- scikit-learn's 1,797 digits seen in two genuinely different
  modalities, a "photo" (the pixels) and a "sketch" (an edge map of a randomly deformed copy,
  described by a gradient-orientation histogram). The embedded default of
  ``crossmetric benchmark`` and the cross-domain image task of :class:`crossmetric.DeepGSM`.
* :func:`load_mfeat` -- the UCI *Multiple Features* layout (two of its six views).
* :func:`read_lfw_pairs`, :func:`lfw_pair_indices` -- LFW's ``pairs.txt`` and its join with a
  user's feature file.
* :func:`load_features`, :func:`load_pairs` -- ``.npy`` / ``.npz`` / ``.csv`` feature matrices
  and ``.csv`` pair lists (as the CLI reads them).
* :func:`make_cross_modal` -- synthetic two-view data with a known shared latent space.
* :func:`load_image_folder`, :func:`load_viper`, :func:`load_pku_sketch`, :func:`load_cufs`,
  :func:`load_cuhk01` -- images of any folder layout described by a regular expression (defined
  in :mod:`crossmetric.datasets._image_folder`); a file of more than :data:`MAX_IMAGE_PIXELS`
  pixels is refused before it is decoded, and a resize ``size`` has sides of at most
  :data:`MAX_IMAGE_SIDE` pixels.
* :func:`load_market1501`, :func:`load_dukemtmc`, :func:`load_msmt17`, :func:`load_cuhk03` --
  the large re-identification benchmarks in their own folder layouts, with their
  train / query / gallery split and camera ids, the images read on demand
  (:class:`ImageFiles`; defined in :mod:`.reid_layouts`).
* :func:`describe_images`, :func:`pair_domains`, :func:`image_views` -- loaded images as
  feature rows, the two domains of a folder paired row by row (defined in
  :mod:`crossmetric.features._image_views`).

One module per source (:mod:`.digits`, :mod:`.mfeat`, :mod:`.lfw`, :mod:`.files`,
:mod:`.synthetic`, :mod:`.reid_layouts`); the public loaders are importable from here.
"""

from __future__ import annotations

from crossmetric.datasets._image_folder import (
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    load_cufs,
    load_cuhk01,
    load_image_folder,
    load_pku_sketch,
    load_viper,
)
from crossmetric.datasets.digits import hog_descriptor, load_digits_views
from crossmetric.datasets.files import load_features, load_image_list, load_labels, load_pairs
from crossmetric.datasets.lfw import lfw_pair_indices, read_lfw_pairs
from crossmetric.datasets.mfeat import MFEAT_VIEWS, load_mfeat
from crossmetric.datasets.reid_layouts import (
    REID_SPLITS,
    ImageFiles,
    load_cuhk03,
    load_dukemtmc,
    load_market1501,
    load_msmt17,
)
from crossmetric.datasets.synthetic import make_cross_modal
from crossmetric.features._image_views import describe_images, image_views, pair_domains

__all__ = [
    "load_digits_views",
    "hog_descriptor",
    "load_mfeat",
    "MFEAT_VIEWS",
    "read_lfw_pairs",
    "lfw_pair_indices",
    "load_features",
    "load_pairs",
    "load_labels",
    "load_image_list",
    "make_cross_modal",
    "load_image_folder",
    "load_viper",
    "load_pku_sketch",
    "load_cufs",
    "load_cuhk01",
    "load_market1501",
    "load_dukemtmc",
    "load_msmt17",
    "load_cuhk03",
    "ImageFiles",
    "REID_SPLITS",
    "MAX_IMAGE_PIXELS",
    "MAX_IMAGE_SIDE",
    "describe_images",
    "pair_domains",
    "image_views",
]
