"""The data sources of ``crossmetric benchmark``: a named dataset, the user's feature files or an
image folder."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from crossmetric.cli._common import (
    CLIError,
    _check_identities,
    _load_array,
    _load_label_file,
    _one_line,
    _parse_size,
)


def _describe_images(images, descriptor: str, params=None, progress: bool = False
                     ) -> np.ndarray:
    """Feature rows of an image stack ``(n, h, w[, 3])``
    (:func:`crossmetric.datasets.describe_images`), with the command line's messages;
    ``progress``: a bar on stderr."""
    from crossmetric.datasets import describe_images

    _check_image_stack(images)
    _check_descriptor(descriptor, params)
    with _descriptor_errors(descriptor, params), \
            _descriptor_bar(progress, len(images), descriptor) as update:
        return describe_images(images, descriptor, params, progress=update)


def _check_descriptor(descriptor: str, params) -> None:
    """The descriptor's class has every parameter of ``params`` (checked before images load)."""
    from crossmetric.features._image_views import make_descriptor

    try:
        make_descriptor(descriptor, params)
    except ValueError as exc:
        raise CLIError(f"--descriptor-param: {_one_line(exc).removeprefix('params: ')}") \
            from None


@contextlib.contextmanager
def _descriptor_errors(descriptor: str, params, what: str | None = None):
    """A descriptor's failures as the command line's one-line errors: a missing optional
    dependency, a rejected parameter value or image size, and (``what`` given) any other bad
    value, named by ``what``."""
    from crossmetric.features._image_views import DescriptorError

    try:
        yield
    except ImportError as exc:  # scikit-image or OpenCV, optional dependencies
        raise CLIError(f"--descriptor {descriptor}: {_one_line(exc)}; use --descriptor "
                       "pixels.") from None
    except DescriptorError as exc:
        raise _descriptor_error(descriptor, params, exc) from None
    except ValueError as exc:
        if what is None:
            raise
        raise CLIError(f"{what}: {_one_line(exc)}") from None


def _descriptor_error(descriptor: str, params, exc) -> CLIError:
    """The descriptor rejected a parameter value or the image size: one line naming the
    options that set it."""
    if not params:
        return CLIError(f"--descriptor {descriptor} ({exc.class_name}): "
                        f"{exc.reason.rstrip('.')}; --size WxH resizes the images.")
    from crossmetric.config import _toml_value

    given = " ".join(f"{k}={_toml_value(v)}" for k, v in params.items())
    return CLIError(f"--descriptor-param {given} (--descriptor {descriptor}, "
                    f"{exc.class_name}): {exc.reason}")


def _check_image_stack(images) -> None:
    images = np.asarray(images)
    if images.dtype == object or images.ndim not in (3, 4):
        raise CLIError("the images differ in size; give --size WIDTHxHEIGHT to resize them.")


@contextlib.contextmanager
def _descriptor_bar(show: bool, total: int, descriptor: str):
    """A tqdm bar on stderr over the images being described (its ``update``), or ``None``."""
    if not show:
        yield None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=f"{descriptor} descriptors", unit="image",
              file=sys.stderr) as bar:
        yield bar.update


def _images_to_dataset(bunch, descriptor: str, what: str, params=None,
                       progress: bool = False):
    """``(dataset, description)`` from a loader's ``images``, ``ids``, ``domains``
    (:func:`crossmetric.datasets.image_views`: one modality, or two domains paired row by
    row), described by ``descriptor`` with the class parameters ``params``; ``progress``: a
    bar on stderr while the descriptors are computed."""
    from crossmetric.datasets import image_views

    if np.asarray(bunch.ids).size:
        _check_image_stack(bunch.images)
    _check_descriptor(descriptor, params)
    with _descriptor_errors(descriptor, params, what), \
            _descriptor_bar(progress, len(bunch.ids), descriptor) as update:
        data = image_views(bunch.images, bunch.ids, getattr(bunch, "domains", None),
                           descriptor=descriptor, descriptor_params=params, progress=update)
    n_ids = np.unique(data.labels).size
    cams = _attach_cams(data, bunch)
    if data.Y is None:
        return data, (f"{what}: {data.X.shape[0]} images, {n_ids} identities, one "
                      f"modality{cams}")
    a, b = data.domain_names
    return data, (f"{what}: {a} vs {b}, {data.X.shape[0]} matched pairs of images, "
                  f"{n_ids} identities, {descriptor} descriptors{cams}")


def _descriptor_args(args, source: dict) -> tuple[str, dict | None]:
    """``(descriptor, params)`` of ``--descriptor`` / ``--descriptor-param`` (resolved by
    :func:`crossmetric.config.resolve_config`; the data's default when not set), checked
    before any image is read."""
    from crossmetric.config import _default_descriptor

    descriptor = args.descriptor or _default_descriptor(source)
    params = getattr(args, "descriptor_params", None) or None
    _check_descriptor(descriptor, params)
    return descriptor, params


def _size_kw(args) -> dict:
    size = _parse_size(args.size)
    return {} if size is None else {"size": size}


def _mfeat(spec: str, arg: str, data_home: str | None):
    from crossmetric.datasets import MFEAT_VIEWS, load_mfeat

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


def _image_dataset(name: str, spec: str, arg: str, args):
    """``--dataset viper`` / ``pku-sketch``: the loader's images, described and paired."""
    from crossmetric.datasets import load_pku_sketch, load_viper

    data_home = args.data_home
    if arg:
        raise CLIError(f"--dataset {name} takes no options, got {spec!r}.")
    if not data_home:
        raise CLIError(f"--dataset {name} needs --data-home DIR (e.g. "
                       f"../shared/data/{name.replace('-', '_')}).")
    if not os.path.isdir(data_home):
        raise CLIError(f"--data-home: {data_home!r} is not a folder.")
    loader = load_viper if name == "viper" else load_pku_sketch
    descriptor, params = _descriptor_args(args, {"dataset": name})
    try:
        bunch = loader(data_home, **_size_kw(args))
    except (ValueError, OSError) as exc:
        raise CLIError(f"--data-home: {_one_line(exc)}") from None
    return _images_to_dataset(bunch, descriptor, name, params)


#: the size re-id layouts are read at without --size (Market-1501's own crops)
_LAYOUT_SIZE = (64, 128)


def _reid_layout_dataset(name: str, spec: str, arg: str, args):
    """``--dataset market1501`` / ``dukemtmc`` / ``msmt17`` / ``cuhk03[:labeled]``: the
    benchmark's own split (train / query / gallery) and camera ids
    (:mod:`crossmetric.datasets.reid_layouts`), each image described as it is read."""
    import sys

    from sklearn.utils import Bunch

    from crossmetric import datasets
    from crossmetric.datasets.reid_layouts import _CUHK03_KINDS, _LAYOUT_NAMES

    kw = {}
    if name == "cuhk03":
        if arg and arg not in _CUHK03_KINDS:
            raise CLIError(f"--dataset cuhk03:KIND takes {' or '.join(_CUHK03_KINDS)}, got "
                           f"{spec!r}.")
        kw["kind"] = arg or "detected"
    elif arg:
        raise CLIError(f"--dataset {name} takes no options, got {spec!r}.")
    if not args.data_home:
        raise CLIError(f"--dataset {name} needs --data-home DIR (the folder of its "
                       "bounding_box_train/, list files or split file).")
    if not os.path.isdir(args.data_home):
        raise CLIError(f"--data-home: {args.data_home!r} is not a folder.")
    if args.protocol == "verification":
        raise CLIError(f"--dataset {name} gives its own query / gallery split: --protocol "
                       "identification (verification folds do not apply).")
    args.protocol = "identification"
    descriptor, params = _descriptor_args(args, {"dataset": name})
    size = _parse_size(args.size) or _LAYOUT_SIZE
    try:
        bunch = getattr(datasets, _LAYOUT_NAMES[name])(args.data_home, size=size, **kw)
    except (ValueError, OSError) as exc:
        raise CLIError(f"--data-home: {_one_line(exc)}") from None
    counts = {r: int((bunch.split == r).sum()) for r in ("train", "query", "gallery")}
    if not args.quiet:
        print(f"crossmetric: describing {len(bunch.images)} images of {name} "
              f"({descriptor}, {size[0]}x{size[1]})", file=sys.stderr)
    with _descriptor_errors(descriptor, params, "--data-home"):
        X = bunch.images.describe(descriptor, params)
    data = Bunch(X=X, Y=None, labels=bunch.ids, cams=bunch.cams, reid_split=bunch.split)
    return data, (f"{name}: its own split ({counts['train']} training, {counts['query']} query, "
                  f"{counts['gallery']} gallery images), camera ids, {descriptor} descriptors")


def _attach_cams(data, bunch) -> str:
    """The cameras of a ``cam`` group of --pattern, row by row of ``data``'s views; the
    description's words for them (``", 6 cameras"``, or nothing)."""
    cams = getattr(bunch, "cams", None)
    if cams is None:
        return ""
    if data.Y is None:
        data.cams = cams
    else:
        from crossmetric.datasets import pair_domains

        rows_x, rows_y, _ = pair_domains(bunch.ids, bunch.domains)
        data.cams, data.cams_y = cams[rows_x], cams[rows_y]
    return f", {np.unique(cams).size} cameras"


def _check_identities_and_folds(args, data, what: str) -> None:
    """The benchmark's identities (the labels, or the instance ids at ``--level instance``)
    allow its protocols: two identities at least, and no more ``--folds`` than the objects
    can be dealt into. ``what`` names the option the identities come from."""
    level = args.level or ("instance" if getattr(args, "instance", None) is not None
                           else "labels")
    if level == "instance" and data.get("instance") is not None:
        labels, what = data["instance"], ("--instance" if what == "--labels" else what)
    else:
        labels = data["labels"]
    _check_identities(labels, what)
    if args.folds is None or args.protocol in ("identification", "retrieval"):
        return
    ids, counts = np.unique(np.asarray(labels), return_counts=True)
    # crossmetric.protocols.verification_splits: identity-disjoint folds (two identities
    # each) from 20 identities on, else folds stratified by identity, which need an identity
    # with an object in every fold
    most = max(int(counts.max()), ids.size // 2 if ids.size >= 20 else 0)
    if args.folds > most:
        allowed = (f"at most {most}" if most >= 2 else
                   "more data, or --protocol identification")
        raise CLIError(f"--folds {args.folds} exceeds the {counts.sum()} objects / {ids.size} "
                       f"identities of {what}; expected {allowed} (folds: the most objects "
                       "one identity has, or half the identities when there are 20 or more).")


def _load_named_dataset(spec: str, args):
    """``(dataset, description)`` of ``--dataset NAME[:ARG]``, its identities checked
    against the protocol (:func:`_check_identities_and_folds`)."""
    data, description = _named_dataset(spec, args)
    _check_identities_and_folds(args, data, "--dataset")
    return data, description


def _named_dataset(spec: str, args):
    """``(dataset, description)`` of ``--dataset NAME[:ARG]``."""
    from crossmetric.datasets import load_digits_views

    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name == "digits":
        if arg:
            raise CLIError(f"--dataset digits takes no views, got {spec!r}.")
        return load_digits_views(), "digits (photo pixels vs sketch HOG)"
    if name == "mfeat":
        return _mfeat(spec, arg, args.data_home)
    if name in ("viper", "pku-sketch", "pku_sketch"):
        return _image_dataset(name, spec, arg, args)
    from crossmetric.datasets.reid_layouts import _LAYOUT_NAMES

    if name in _LAYOUT_NAMES:
        return _reid_layout_dataset(name, spec, arg, args)
    raise CLIError(f"unknown --dataset {spec!r}; expected 'digits', 'mfeat:V1,V2', 'viper', "
                   "'pku-sketch', 'market1501', 'dukemtmc', 'msmt17' or 'cuhk03[:labeled]'.")


def _image_folder_dataset(args, progress: bool = False):
    """``--images DIR --pattern REGEX``; ``progress``: a bar while the descriptors are
    computed."""
    bunch, descriptor, params = _load_image_folder(args)
    return _images_to_dataset(bunch, descriptor, args.images, params, progress)


def _load_image_folder(args):
    """``(bunch, descriptor, params)`` of ``--images DIR --pattern REGEX`` (the images as
    :func:`crossmetric.datasets.load_image_folder` reads them, not yet described)."""
    import re

    from crossmetric.datasets import load_image_folder

    if args.pattern is None:
        raise CLIError("--images needs --pattern REGEX with a named group 'id' (and "
                       "optionally 'domain' and 'cam'), e.g. "
                       "'(?P<id>\\d+)_(?P<domain>[ab])\\.png'.")
    try:
        rx = re.compile(args.pattern)
    except re.error as exc:
        raise CLIError(f"--pattern: not a regular expression: {exc}.") from None
    if "id" not in rx.groupindex:
        raise CLIError("--pattern must have a named group 'id', e.g. (?P<id>\\d+).")
    if not os.path.isdir(args.images):
        raise CLIError(f"--images: {args.images!r} is not a folder.")
    descriptor, params = _descriptor_args(args, {"images": args.images})
    try:
        bunch = load_image_folder(args.images, args.pattern, **_size_kw(args))
    except (ValueError, OSError) as exc:
        raise CLIError(f"--images: {_one_line(exc)}") from None
    return bunch, descriptor, params


def _check_instances(inst: np.ndarray, args) -> None:
    """With ``--y`` each row is one object seen in both modalities, so its ``--instance`` id
    must be unique (one modality: rows of one object share their id)."""
    if args.y is None:
        return
    _, first, counts = np.unique(inst, return_index=True, return_counts=True)
    if (counts > 1).any():
        k = int(np.flatnonzero(counts > 1)[0])
        rows = np.flatnonzero(inst == inst[first[k]])[:2] + 1
        raise CLIError(f"--instance: duplicate ids ({inst[first[k]]} on rows {rows[0]} and "
                       f"{rows[1]}; {int((counts > 1).sum())} ids repeated); expected one id "
                       "per object: with --y, row r of --x and --y is one object.")


def _feature_files_dataset(args):
    """``--x FILE [--y FILE] --labels FILE [--instance FILE]``."""
    from sklearn.utils import Bunch

    X = _load_array(args.x, "--x", key=args.key)
    Y = _load_array(args.y, "--y", key=args.key) if args.y else None
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise CLIError(f"--y: {Y.shape[0]} rows, but --x has {X.shape[0]}; row r of both "
                       "files must describe the same object.")
    if args.labels is None and args.instance is None:
        raise CLIError("--x needs --labels FILE (the identity of each row) or --instance FILE.")
    labels = _load_label_file(args.labels, "--labels", X.shape[0]) if args.labels else None
    inst = _load_label_file(args.instance, "--instance", X.shape[0]) if args.instance else None
    if inst is not None:
        _check_instances(inst, args)
    data = Bunch(X=X, Y=Y, labels=labels if labels is not None else inst)
    if inst is not None:
        data.instance = inst
    what = f"{os.path.basename(args.x)}" + (f" vs {os.path.basename(args.y)}" if args.y else
                                            " (one modality)")
    return data, what


def _own_dataset(args):
    """The benchmark's data from --x/--y/--labels/--instance or --images/--pattern, its
    identities checked against the protocol (:func:`_check_identities_and_folds`)."""
    if args.images is not None:
        data, description = _image_folder_dataset(args)
        _check_identities_and_folds(args, data, "--images")
    else:
        data, description = _feature_files_dataset(args)
        _check_identities_and_folds(args, data, "--labels" if args.labels else "--instance")
    return data, description
