"""The data sources of ``crossmetric benchmark``: a named dataset, the user's feature files or an
image folder."""

from __future__ import annotations

import os

import numpy as np

from crossmetric.cli._common import CLIError, _load_array, _load_label_file, _one_line, _parse_size


def _describe_images(images, descriptor: str) -> np.ndarray:
    """Feature rows of an image stack ``(n, h, w[, 3])`` with the chosen descriptor."""
    images = np.asarray(images)
    if images.dtype == object or images.ndim not in (3, 4):
        raise CLIError("the images differ in size; give --size WIDTHxHEIGHT to resize them.")
    if descriptor == "pixels":
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        return grey.reshape(grey.shape[0], -1).astype(np.float64) / 255.0
    try:
        from crossmetric import features
    except ImportError as exc:
        raise CLIError(f"--descriptor {descriptor}: crossmetric.features is not available "
                       f"({_one_line(exc)}); use --descriptor pixels.") from None
    cls = {"hog": "HOG", "strips": "StripHistograms"}[descriptor]
    return np.asarray(getattr(features, cls)().fit_transform(images), dtype=np.float64)


def _images_to_dataset(bunch, descriptor: str, what: str):
    """A benchmark dataset from a loader's ``images``, ``ids``, ``domains``.

    No ``domain`` (or one value): one modality, ``X`` = descriptors, identity = ``ids``.
    Two domains (camera A / B, photo / sketch): the first domain in sorted order is ``X``, the
    second ``Y``; the ``k``-th image of an identity in one domain is row-aligned with its
    ``k``-th image in the other (images without a partner are left out).
    """
    from sklearn.utils import Bunch

    images = np.asarray(bunch.images) if not isinstance(bunch.images, np.ndarray) else \
        bunch.images
    ids = np.asarray(bunch.ids)
    if ids.size == 0:
        raise CLIError(f"{what}: no image matched.")
    domains = getattr(bunch, "domains", None)
    doms = None if domains is None else np.asarray(domains)
    if doms is not None and (doms.size == 0 or all(d is None for d in doms.tolist())):
        doms = None
    if doms is None or np.unique(doms.astype(str)).size == 1:
        F = _describe_images(images, descriptor)
        codes = np.unique(ids.astype(str), return_inverse=True)[1].astype(np.int64)
        return Bunch(X=F, Y=None, labels=codes), \
            f"{what}: {F.shape[0]} images, {np.unique(codes).size} identities, one modality"
    names = np.unique(doms.astype(str))
    if names.size != 2:
        raise CLIError(f"{what}: the pattern's 'domain' group must take exactly two values "
                       f"(the two modalities), got {names.size}: {', '.join(names[:5])}.")
    rows_a, rows_b = [], []
    sid, sdom = ids.astype(str), doms.astype(str)
    for ident in np.unique(sid):
        a = np.flatnonzero((sid == ident) & (sdom == names[0]))
        b = np.flatnonzero((sid == ident) & (sdom == names[1]))
        m = min(a.size, b.size)
        rows_a += a[:m].tolist()
        rows_b += b[:m].tolist()
    if len(rows_a) < 4:
        raise CLIError(f"{what}: only {len(rows_a)} identities have an image in both domains "
                       f"{names[0]!r} and {names[1]!r}.")
    ra, rb = np.asarray(rows_a), np.asarray(rows_b)
    F = _describe_images(images, descriptor)
    codes = np.unique(sid[ra], return_inverse=True)[1].astype(np.int64)
    data = Bunch(X=F[ra], Y=F[rb], labels=codes, instance=np.arange(ra.size))
    if images.ndim in (3, 4) and images.dtype != object:
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        grey = grey.astype(np.float64) / (255.0 if grey.max() > 1 else 1.0)
        data.images_x, data.images_y = grey[ra], grey[rb]
    return data, (f"{what}: {names[0]} vs {names[1]}, {ra.size} matched pairs of images, "
                  f"{np.unique(codes).size} identities, {descriptor} descriptors")


def _load_named_dataset(spec: str, args):
    from crossmetric.datasets import MFEAT_VIEWS, load_digits_views, load_mfeat

    data_home = args.data_home
    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name == "digits":
        if arg:
            raise CLIError(f"--dataset digits takes no views, got {spec!r}.")
        return load_digits_views(), "digits (photo pixels vs sketch HOG)"
    if name == "mfeat":
        views = tuple(v.strip() for v in (arg or "fou,pix").split(","))
        if len(views) != 2 or any(v not in MFEAT_VIEWS for v in views):
            raise CLIError(f"--dataset mfeat:V1,V2 needs two views among "
                           f"{','.join(MFEAT_VIEWS)}, got {spec!r}.")
        home = data_home or os.environ.get("CROSSMETRIC_DATA")
        if not home:
            raise CLIError("--dataset mfeat needs --data-home DIR (the folder with mfeat-fou, "
                           "mfeat-pix, ...).")
        try:
            return load_mfeat(home, views), f"mfeat {views[0]} vs {views[1]}"
        except ValueError as exc:
            raise CLIError(f"--data-home: {exc}") from None
    if name in ("viper", "pku-sketch", "pku_sketch"):
        if arg:
            raise CLIError(f"--dataset {name} takes no options, got {spec!r}.")
        if not data_home:
            raise CLIError(f"--dataset {name} needs --data-home DIR (e.g. "
                           f"../shared/data/{name.replace('-', '_')}).")
        if not os.path.isdir(data_home):
            raise CLIError(f"--data-home: {data_home!r} is not a folder.")
        from crossmetric import datasets

        loader = "load_viper" if name == "viper" else "load_pku_sketch"
        if not hasattr(datasets, loader):
            raise CLIError(f"--dataset {name}: crossmetric.datasets.{loader} is not part of "
                           "this installation.")
        kw = {}
        size = _parse_size(args.size)
        if size is not None:
            kw["size"] = size
        try:
            bunch = getattr(datasets, loader)(data_home, **kw)
        except (ValueError, OSError) as exc:
            raise CLIError(f"--data-home: {_one_line(exc)}") from None
        descriptor = args.descriptor or ("strips" if name == "viper" else "hog")
        return _images_to_dataset(bunch, descriptor, name)
    raise CLIError(f"unknown --dataset {spec!r}; expected 'digits', 'mfeat:V1,V2', 'viper' "
                   "or 'pku-sketch'.")


def _own_dataset(args):
    """The benchmark's data from --x/--y/--labels/--instance or --images/--pattern."""
    from sklearn.utils import Bunch

    if args.images is not None:
        if args.pattern is None:
            raise CLIError("--images needs --pattern REGEX with a named group 'id' (and "
                           "optionally 'domain'), e.g. '(?P<id>\\d+)_(?P<domain>[ab])\\.png'.")
        import re

        try:
            rx = re.compile(args.pattern)
        except re.error as exc:
            raise CLIError(f"--pattern: not a regular expression: {exc}.") from None
        if "id" not in rx.groupindex:
            raise CLIError("--pattern must have a named group 'id', e.g. (?P<id>\\d+).")
        if not os.path.isdir(args.images):
            raise CLIError(f"--images: {args.images!r} is not a folder.")
        from crossmetric import datasets

        if not hasattr(datasets, "load_image_folder"):
            raise CLIError("--images: crossmetric.datasets.load_image_folder is not part of "
                           "this installation.")
        kw = {}
        size = _parse_size(args.size)
        if size is not None:
            kw["size"] = size
        try:
            bunch = datasets.load_image_folder(args.images, args.pattern, **kw)
        except (ValueError, OSError) as exc:
            raise CLIError(f"--images: {_one_line(exc)}") from None
        return _images_to_dataset(bunch, args.descriptor or "hog", args.images)
    X = _load_array(args.x, "--x", key=args.key)
    Y = _load_array(args.y, "--y", key=args.key) if args.y else None
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise CLIError(f"--y: {Y.shape[0]} rows, but --x has {X.shape[0]}; row r of both "
                       "files must describe the same object.")
    if args.labels is None and args.instance is None:
        raise CLIError("--x needs --labels FILE (the identity of each row) or --instance FILE.")
    labels = _load_label_file(args.labels, "--labels", X.shape[0]) if args.labels else None
    inst = _load_label_file(args.instance, "--instance", X.shape[0]) if args.instance else None
    data = Bunch(X=X, Y=Y, labels=labels if labels is not None else inst)
    if inst is not None:
        data.instance = inst
    what = f"{os.path.basename(args.x)}" + (f" vs {os.path.basename(args.y)}" if args.y else
                                            " (one modality)")
    return data, what
