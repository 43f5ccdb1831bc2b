"""The folder layouts of the large person re-identification benchmarks: Market-1501,
DukeMTMC-reID, MSMT17 and CUHK03 (the new protocol), read as torchreid reads them.

Each loader returns the benchmark's own split -- ``"train"``, ``"query"`` and ``"gallery"`` per
image -- with the person id and the 0-based camera of every image, and the images as an
:class:`ImageFiles`: file paths decoded on demand (Market-1501 alone holds 32,668 images), so
that a descriptor can run over them batch by batch (:meth:`ImageFiles.describe`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from crossmetric._utils.checks import check_choice
from crossmetric.datasets._image_folder import _COLORS, _check_size, read_image_stack

__all__ = ["ImageFiles", "load_market1501", "load_dukemtmc", "load_msmt17", "load_cuhk03",
           "REID_SPLITS"]

#: the values of a loader's ``split`` argument: one part of the benchmark, ``"test"`` (query and
#: gallery) or ``"all"``
REID_SPLITS = ("all", "train", "query", "gallery", "test")


class ImageFiles(Sequence):
    """Image files read when asked for: a lazy stand-in for a stack of images.

    ``files[i]`` decodes one image; ``files[rows]`` (a slice, an index array or a boolean
    mask) is the sub-list, still unread; :meth:`load` decodes a stack ``(n, h, w[, 3])`` and
    ``np.asarray(files)`` decodes them all; :meth:`describe` computes a descriptor batch by
    batch, so that the pixels of only one batch are held at a time.

    Parameters
    ----------
    root : path-like
        The folder the names are relative to.
    names : sequence of str
        Paths relative to ``root`` (``/`` as separator).
    size : (width, height), optional
        Resize every image to this size (needed when their sizes differ).
    color : {"rgb", "gray"}, default="rgb"

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from PIL import Image
    >>> from crossmetric.datasets import ImageFiles
    >>> root = tempfile.mkdtemp()
    >>> for k in range(3):
    ...     Image.fromarray(np.full((8, 4, 3), 40 * k, np.uint8)).save(f"{root}/{k}.png")
    >>> files = ImageFiles(root, ["0.png", "1.png", "2.png"])
    >>> len(files), files[1].shape, files[1:].load().shape
    (3, (8, 4, 3), (2, 8, 4, 3))
    >>> files.describe("pixels", batch_size=2).shape
    (3, 32)
    """

    def __init__(self, root, names, *, size=None, color: str = "rgb"):
        self.root = os.fspath(root)
        self.names = np.asarray(list(names), dtype=str)
        if self.names.ndim != 1:
            raise ValueError(f"names must be a 1-D list of paths, got shape {self.names.shape}.")
        self.size = _check_size(size)
        if color not in _COLORS:
            raise ValueError(f"color must be one of {tuple(_COLORS)}, got {color!r}.")
        self.color = color

    def __len__(self) -> int:
        return int(self.names.size)

    def __repr__(self) -> str:
        return f"ImageFiles({self.root!r}, {len(self)} files)"

    def __getitem__(self, rows):
        if isinstance(rows, int | np.integer):
            return self._read(self.names[[rows]])[0]
        return ImageFiles(self.root, self.names[rows], size=self.size, color=self.color)

    @property
    def paths(self) -> list[str]:
        """The full path of every file."""
        return [os.path.join(self.root, *n.split("/")) for n in self.names.tolist()]

    def _read(self, names) -> np.ndarray:
        return read_image_stack(self.root, list(names), self.color, self.size, stacklevel=4)

    def load(self) -> np.ndarray:
        """Every image decoded: uint8 ``(n, h, w, 3)`` (``"rgb"``) or ``(n, h, w)``.

        Raises
        ------
        ValueError
            A file cannot be decoded or is refused (the message names it); images of
            different sizes without ``size``.
        """
        return self._read(self.names)

    def __array__(self, dtype=None, copy=None):
        arr = self.load()
        return arr if dtype is None else arr.astype(dtype)

    def describe(self, descriptor: str = "hog", params=None, *,
                 batch_size: int = 256) -> np.ndarray:
        """One descriptor row per image (:func:`crossmetric.datasets.describe_images`), read
        and described ``batch_size`` images at a time.

        Parameters
        ----------
        descriptor : str, default="hog"
        params : mapping, optional
            Parameters of the descriptor's class.
        batch_size : int, default=256

        Returns
        -------
        ndarray of shape (n, n_features), float64
        """
        from crossmetric._utils.checks import check_positive_int
        from crossmetric.features._image_views import describe_images

        batch_size = check_positive_int(batch_size, "batch_size")
        if len(self) == 0:
            raise ValueError("no image to describe.")
        out, shape = None, None
        for start in range(0, len(self), batch_size):
            block = self._read(self.names[start:start + batch_size])
            if shape is not None and block.shape[1:] != shape:
                raise ValueError(
                    f"images have different sizes: {self.names[0]!r} is {shape[1]}x{shape[0]} "
                    f"(width x height), {self.names[start]!r} is {block.shape[2]}x"
                    f"{block.shape[1]}; pass size=(width, height) to resize them.")
            shape = block.shape[1:]
            F = describe_images(block, descriptor, params)
            if out is None:
                out = np.empty((len(self), F.shape[1]), dtype=np.float64)
            out[start:start + F.shape[0]] = F
        return out


def _find_root(data_home, candidates: Sequence[str], markers: Sequence[str], name: str,
               expected: str) -> Path:
    """The first of ``data_home / c`` that holds every marker (a folder or a file)."""
    if data_home is None:
        raise ValueError(f"data_home must be the folder holding the {name} data.")
    home = Path(os.fspath(data_home))
    if not home.is_dir():
        raise ValueError(f"data_home {os.fspath(data_home)!r} is not a folder.")
    for cand in candidates:
        folder = home / cand
        if all((folder / m).exists() for m in markers):
            return folder
    raise ValueError(f"data_home {os.fspath(data_home)!r}: no {name} data found (expected "
                     f"{expected} in it or in one of its sub-folders "
                     f"{', '.join(c for c in candidates if c != '.')}).")


def _assemble(root: Path, parts: list, split: str, size, color: str, descr: str) -> Bunch:
    """The Bunch of a loader from ``(split name, file names, ids, cams)`` per part."""
    keep = {"all": ("train", "query", "gallery"), "test": ("query", "gallery")}.get(
        split, (split,))
    parts = [p for p in parts if p[0] in keep]
    names = [n for _, ns, _, _ in parts for n in ns]
    ids = np.array([i for _, _, ii, _ in parts for i in ii], dtype=np.int64)
    cams = np.array([c for _, _, _, cc in parts for c in cc], dtype=np.int64)
    which = np.array([s for s, ns, _, _ in parts for _ in ns], dtype=str)
    return Bunch(images=ImageFiles(root, names, size=size, color=color), ids=ids, cams=cams,
                 split=which, filenames=np.array(names, dtype=str),
                 DESCR=f"{descr}; split {split!r}: {len(names)} images.")


_MARKET_NAME = re.compile(r"([-\d]+)_c(\d)")


def _bounding_box_dir(root: Path, folder: str, junk: tuple) -> tuple:
    """``(names, ids, cams)`` of the ``*.jpg`` files of one folder of the Market-1501 layout:
    id and camera from ``PPPP_cC...`` (torchreid's ``([-\\d]+)_c(\\d)``), cameras made
    0-based, ids in ``junk`` left out; sorted by file name."""
    names, ids, cams = [], [], []
    for path in sorted((root / folder).glob("*.jpg")):
        m = _MARKET_NAME.search(path.name)
        if m is None:
            raise ValueError(f"{folder}/{path.name}: expected a name such as "
                             "0002_c1s1_000451_03.jpg (person, then _c and the camera).")
        pid, cam = int(m.group(1)), int(m.group(2))
        if pid in junk:
            continue
        if cam < 1:
            raise ValueError(f"{folder}/{path.name}: camera {cam}; cameras are numbered from 1.")
        names.append(f"{folder}/{path.name}")
        ids.append(pid)
        cams.append(cam - 1)
    return names, ids, cams


def _market_layout(root: Path, junk: tuple) -> list:
    return [(part, *_bounding_box_dir(root, folder, junk))
            for part, folder in (("train", "bounding_box_train"), ("query", "query"),
                                 ("gallery", "bounding_box_test"))]


_MARKET_DIRS = ("bounding_box_train", "query", "bounding_box_test")


def load_market1501(data_home, split: str = "all", *, size=None, color: str = "rgb") -> Bunch:
    """Market-1501 (Zheng et al. 2015): 1,501 persons seen by 6 cameras, 64 × 128 crops.

    Read as torchreid reads it: the ``*.jpg`` files of ``bounding_box_train/`` (train),
    ``query/`` and ``bounding_box_test/`` (gallery), the person and camera from the name
    (``0002_c1s1_000451_03.jpg``: person 2, camera 1). Junk images (person ``-1``) are left
    out; distractors (person ``0``) are kept in the gallery, where they match no query.

    Parameters
    ----------
    data_home : path-like
        A folder holding ``bounding_box_train/``, ``query/`` and ``bounding_box_test/``, or
        holding it as ``market1501/``, ``market1501/Market-1501-v15.09.15/`` or
        ``Market-1501-v15.09.15/``.
    split : {"all", "train", "query", "gallery", "test"}, default="all"
        The part(s) to list (``"test"``: query and gallery).
    size : (width, height), optional
        Resize the images when they are read.
    color : {"rgb", "gray"}, default="rgb"

    Returns
    -------
    Bunch
        ``images`` (:class:`ImageFiles`, read on demand), ``ids`` (int64, the persons' own
        numbers; torchreid renumbers the training persons 0..750 for its classifier),
        ``cams`` (int64, 0-based: camera 1 is 0), ``split`` (``"train"`` / ``"query"`` /
        ``"gallery"`` per image), ``filenames`` (paths relative to the dataset folder). Rows:
        train, query, gallery, each sorted by file name. The full set has 12,936 + 3,368 +
        15,913 images.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> from PIL import Image
    >>> from crossmetric.datasets import load_market1501
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for folder, name in [("bounding_box_train", "0002_c1s1_000451_03.jpg"),
    ...                      ("query", "0005_c2s1_000101_00.jpg"),
    ...                      ("bounding_box_test", "0005_c3s1_000201_01.jpg"),
    ...                      ("bounding_box_test", "-1_c1s1_000001_00.jpg")]:
    ...     (root / folder).mkdir(exist_ok=True)
    ...     Image.fromarray(np.zeros((128, 64, 3), np.uint8)).save(root / folder / name)
    >>> b = load_market1501(root)
    >>> b.ids.tolist(), b.cams.tolist(), b.split.tolist()
    ([2, 5, 5], [0, 1, 2], ['train', 'query', 'gallery'])
    """
    check_choice(split, "split", REID_SPLITS)
    root = _find_root(data_home, (".", "market1501/Market-1501-v15.09.15", "market1501",
                                  "Market-1501-v15.09.15"), _MARKET_DIRS, "Market-1501",
                      "bounding_box_train/, query/ and bounding_box_test/")
    return _assemble(root, _market_layout(root, junk=(-1,)), split, size, color,
                     "Market-1501 (Zheng et al. 2015), read as torchreid reads it")


def load_dukemtmc(data_home, split: str = "all", *, size=None, color: str = "rgb") -> Bunch:
    """DukeMTMC-reID (Zheng et al. 2017): 1,404 persons (+ 408 gallery distractors), 8 cameras.

    The Market-1501 layout (``bounding_box_train/``, ``query/``, ``bounding_box_test/``;
    names such as ``0001_c2_f0046182.jpg``: person 1, camera 2), read as torchreid reads it:
    every ``*.jpg`` is kept (torchreid drops no person here).

    Parameters
    ----------
    data_home : path-like
        A folder holding the three folders, or holding it as ``DukeMTMC-reID/``,
        ``dukemtmc-reid/DukeMTMC-reID/`` or ``dukemtmc-reid/``.
    split : {"all", "train", "query", "gallery", "test"}, default="all"
    size : (width, height), optional
        Resize the images when they are read (their sizes differ).
    color : {"rgb", "gray"}, default="rgb"

    Returns
    -------
    Bunch
        As :func:`load_market1501`: ``images`` (:class:`ImageFiles`), ``ids``, ``cams``
        (0-based), ``split``, ``filenames``; 16,522 + 2,228 + 17,661 images in full.
    """
    check_choice(split, "split", REID_SPLITS)
    root = _find_root(data_home, (".", "dukemtmc-reid/DukeMTMC-reID", "DukeMTMC-reID",
                                  "dukemtmc-reid", "dukemtmc"), _MARKET_DIRS, "DukeMTMC-reID",
                      "bounding_box_train/, query/ and bounding_box_test/")
    return _assemble(root, _market_layout(root, junk=()), split, size, color,
                     "DukeMTMC-reID (Zheng et al. 2017), read as torchreid reads it")


#: MSMT17's two releases: (image folder of the training lists, of the test lists)
_MSMT17_DIRS = (("train", "test"), ("mask_train_v2", "mask_test_v2"))


def _msmt17_list(root: Path, list_name: str, folder: str) -> tuple:
    """``(names, ids, cams)`` of one list file: lines ``path pid``; the camera is the third
    ``_``-separated field of the file name, made 0-based (torchreid's rule)."""
    from crossmetric.datasets.files import _read_text_lines

    names, ids, cams = [], [], []
    for k, line in enumerate(_read_text_lines(str(root / list_name), "list file"), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            rel, pid = fields[0], int(fields[1])
            cam = int(os.path.basename(rel).split("_")[2])
        except (IndexError, ValueError):
            raise ValueError(f"{list_name}, line {k}: expected 'path pid' with a file name "
                             f"such as 0000_000_01_0303morning_0015_0.jpg, got "
                             f"{line.strip()!r}.") from None
        if len(fields) != 2 or cam < 1:
            raise ValueError(f"{list_name}, line {k}: expected 'path pid' with cameras "
                             f"numbered from 1, got {line.strip()!r}.")
        names.append(f"{folder}/{rel}")
        ids.append(pid)
        cams.append(cam - 1)
    return names, ids, cams


def load_msmt17(data_home, split: str = "all", *, include_val: bool = False, size=None,
                color: str = "rgb") -> Bunch:
    """MSMT17 (Wei et al. 2018): 4,101 persons, 15 cameras, from its list files.

    ``list_train.txt``, ``list_val.txt``, ``list_query.txt`` and ``list_gallery.txt`` hold
    lines ``path pid`` (paths relative to ``train/`` for the first two, ``test/`` for the
    others; ``mask_train_v2/`` and ``mask_test_v2/`` in the second release); the camera is the
    third ``_``-separated field of the file name (``0000_000_01_0303morning_0015_0.jpg``:
    camera 1), stored 0-based -- torchreid's rules.

    Parameters
    ----------
    data_home : path-like
        A folder holding the list files, or holding them as ``MSMT17_V1/``, ``MSMT17_V2/``,
        ``msmt17/MSMT17_V1/`` or ``msmt17/MSMT17_V2/``.
    split : {"all", "train", "query", "gallery", "test"}, default="all"
    include_val : bool, default=False
        Add the images of ``list_val.txt`` to the training split (torchreid's ``combineall``;
        published results train without them).
    size : (width, height), optional
        Resize the images when they are read (their sizes differ).
    color : {"rgb", "gray"}, default="rgb"

    Returns
    -------
    Bunch
        As :func:`load_market1501`: ``images`` (:class:`ImageFiles`), ``ids`` (as listed),
        ``cams`` (0-based), ``split``, ``filenames``; rows in the order of the list files.
    """
    check_choice(split, "split", REID_SPLITS)
    lists = ("list_train.txt", "list_query.txt", "list_gallery.txt")
    root = _find_root(data_home, (".", "MSMT17_V1", "MSMT17_V2", "msmt17/MSMT17_V1",
                                  "msmt17/MSMT17_V2", "msmt17"), lists, "MSMT17",
                      ", ".join(lists))
    train_dir, test_dir = next((d for d in _MSMT17_DIRS if (root / d[0]).is_dir()),
                               _MSMT17_DIRS[0])
    train = list(_msmt17_list(root, "list_train.txt", train_dir))
    if include_val:
        for acc, more in zip(train, _msmt17_list(root, "list_val.txt", train_dir), strict=True):
            acc.extend(more)
    parts = [("train", *train), ("query", *_msmt17_list(root, "list_query.txt", test_dir)),
             ("gallery", *_msmt17_list(root, "list_gallery.txt", test_dir))]
    return _assemble(root, parts, split, size, color,
                     "MSMT17 (Wei et al. 2018), read as torchreid reads it"
                     + (", validation images in the training split" if include_val else ""))


_CUHK03_KINDS = ("detected", "labeled")

#: the command line's ``--dataset`` names of the layouts (with their usual spellings)
_LAYOUT_NAMES = {"market1501": "load_market1501", "market-1501": "load_market1501",
                 "dukemtmc": "load_dukemtmc", "dukemtmc-reid": "load_dukemtmc",
                 "msmt17": "load_msmt17", "cuhk03": "load_cuhk03"}


def _mat_names(filelist) -> list[str]:
    """The strings of a MATLAB cell array of file names as :func:`scipy.io.loadmat` gives it."""
    out = []
    for cell in np.asarray(filelist, dtype=object).ravel():
        while isinstance(cell, np.ndarray):
            if cell.size != 1:
                raise ValueError("filelist must hold one file name per image.")
            cell = cell.ravel()[0]
        out.append(str(cell).strip())
    return out


def load_cuhk03(data_home, split: str = "all", *, kind: str = "detected", size=None,
                color: str = "rgb") -> Bunch:
    """CUHK03 under the new protocol (Zhong et al. 2017): 767 training and 700 test persons.

    The split comes from ``cuhk03_new_protocol_config_detected.mat`` (or ``..._labeled.mat``),
    read with :func:`scipy.io.loadmat`: ``filelist`` (image names), ``labels`` (person of each
    image), ``train_idx``, ``query_idx`` and ``gallery_idx`` (1-based rows). The images are
    those torchreid extracts from ``cuhk-03.mat`` into ``images_detected/`` (or
    ``images_labeled/``), named ``P_PPP_V_II.png`` (camera pair, person, view 1 or 2, image);
    the camera is the view, stored 0-based -- torchreid's rule.

    Parameters
    ----------
    data_home : path-like
        A folder holding the ``.mat`` file and the image folder, or holding them as
        ``cuhk03/``.
    split : {"all", "train", "query", "gallery", "test"}, default="all"
    kind : {"detected", "labeled"}, default="detected"
        The automatically detected boxes or the hand-drawn ones (torchreid's
        ``cuhk03_labeled``).
    size : (width, height), optional
        Resize the images when they are read (their sizes differ).
    color : {"rgb", "gray"}, default="rgb"

    Returns
    -------
    Bunch
        As :func:`load_market1501`: ``images`` (:class:`ImageFiles`), ``ids`` (the file's
        ``labels``), ``cams`` (0-based view), ``split``, ``filenames``; rows in the order of
        ``train_idx``, ``query_idx``, ``gallery_idx``.
    """
    from scipy.io import loadmat

    check_choice(split, "split", REID_SPLITS)
    check_choice(kind, "kind", _CUHK03_KINDS)
    mat_name = f"cuhk03_new_protocol_config_{kind}.mat"
    root = _find_root(data_home, (".", "cuhk03"), (mat_name, f"images_{kind}"), "CUHK03",
                      f"{mat_name} and images_{kind}/")
    try:
        mat = loadmat(str(root / mat_name))
    except (ValueError, OSError, NotImplementedError, TypeError) as exc:
        raise ValueError(f"{mat_name} could not be read: {' '.join(str(exc).split())}") \
            from None
    fields = ("filelist", "labels", "train_idx", "query_idx", "gallery_idx")
    missing = [f for f in fields if f not in mat]
    if missing:
        raise ValueError(f"{mat_name} has no {', '.join(missing)}; expected the fields "
                         f"{', '.join(fields)}.")
    names = _mat_names(mat["filelist"])
    labels = np.asarray(mat["labels"]).ravel()
    if labels.size != len(names):
        raise ValueError(f"{mat_name}: {labels.size} labels for {len(names)} file names.")
    parts = []
    for part in ("train", "query", "gallery"):
        idx = np.asarray(mat[f"{part}_idx"]).ravel()
        if idx.size == 0 or np.any(idx != np.round(idx)) or idx.min() < 1 or \
                idx.max() > len(names):
            raise ValueError(f"{mat_name}: {part}_idx must hold 1-based rows of filelist "
                             f"(1 to {len(names)}).")
        rows = idx.astype(np.int64) - 1
        sel = [names[r] for r in rows]
        try:
            cams = [int(n.split("_")[2]) - 1 for n in sel]
        except (IndexError, ValueError):
            bad = next(n for n in sel if len(n.split("_")) < 3 or not n.split("_")[2].isdigit())
            raise ValueError(f"{mat_name}: file name {bad!r}; expected names such as "
                             "1_001_1_01.png (camera pair, person, view, image).") from None
        parts.append((part, [f"images_{kind}/{n}" for n in sel],
                      labels[rows].astype(np.int64).tolist(), cams))
    return _assemble(root, parts, split, size, color,
                     f"CUHK03 new protocol (Zhong et al. 2017), {kind} boxes, read as "
                     "torchreid reads it")
