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
  in :mod:`crossmetric._image_folder`).
* :func:`describe_images`, :func:`pair_domains`, :func:`image_views` -- loaded images as
  feature rows, the two domains of a folder paired row by row (defined in
  :mod:`crossmetric._image_views`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence

import numpy as np
from scipy import ndimage
from sklearn.utils import Bunch, check_random_state

from crossmetric._checks import check_pair_labels, check_positive_int, check_positive_scalar
from crossmetric._image_folder import (
    load_cufs,
    load_cuhk01,
    load_image_folder,
    load_pku_sketch,
    load_viper,
)
from crossmetric._image_views import describe_images, image_views, pair_domains

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
    "describe_images",
    "pair_domains",
    "image_views",
]

# ---------------------------------------------------------------------------------- digits
#: side of the upsampled digit images
DIGITS_SIDE = 16
#: seed of the sketch deformations (fixed: the loader is deterministic)
_SKETCH_SEED = 20120616
#: scale (pixels) of the Gaussian derivative that draws the sketch's outlines
_EDGE_SIGMA = 0.8


def hog_descriptor(images: np.ndarray, *, cell: int = 4, n_bins: int = 9) -> np.ndarray:
    """A HOG-like gradient-orientation descriptor of grey images.

    ``crossmetric.features.HOG(n_bins, pixels_per_cell=(cell, cell), cells_per_block=(1, 1),
    block_norm="L2", implementation="numpy")``: central-difference gradients (``np.gradient``);
    each pixel votes its gradient magnitude into ``n_bins`` unsigned orientation bins over
    [0, π), split linearly between the two nearest bin centres; votes are summed over
    non-overlapping ``cell × cell`` cells, and each cell's histogram is L2-normalised
    (``h / sqrt(‖h‖² + ε²)``, ε = 1e-3 of the image's largest magnitude, so empty cells stay
    near zero). No block normalisation (the images are tiny). The descriptor does not change
    under a positive affine change of the intensities, so images outside [0, 1] are rescaled
    to it first.

    Parameters
    ----------
    images : ndarray of shape (n, h, w)
        ``h`` and ``w`` must be multiples of ``cell``.
    cell : int, default=4
    n_bins : int, default=9

    Returns
    -------
    ndarray of shape (n, (h // cell) * (w // cell) * n_bins), non-negative
    """
    from crossmetric.features import HOG

    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3:
        raise ValueError(f"images must be a 3-D array (n, h, w), got shape {images.shape}.")
    n, h, w = images.shape
    if h % cell or w % cell:
        raise ValueError(f"image sides ({h}, {w}) must be multiples of cell={cell}.")
    if images.size and not np.isfinite(images).all():
        raise ValueError("images contains NaN or infinity.")
    lo, hi = (images.min(), images.max()) if images.size else (0.0, 1.0)
    if lo < 0.0 or hi > 1.0:
        images = (images - lo) / (hi - lo) if hi > lo else np.zeros_like(images)
    return HOG(n_bins, pixels_per_cell=(cell, cell), cells_per_block=(1, 1), block_norm="L2",
               implementation="numpy").fit_transform(images)


def _sketch_images(photos: np.ndarray, seed: int) -> np.ndarray:
    """Edge maps of randomly deformed copies of ``photos`` (n, s, s) in [0, 1]."""
    rng = np.random.RandomState(seed)
    n, s, _ = photos.shape
    # small random affine jitter about the image centre
    angle = np.deg2rad(rng.uniform(-10.0, 10.0, n))
    scale = rng.uniform(0.9, 1.1, n)
    shear = rng.uniform(-0.12, 0.12, n)
    shift = rng.uniform(-1.0, 1.0, (n, 2))
    cos, sin = np.cos(angle), np.sin(angle)
    # inverse map: output pixel (r, c) samples the photo at A @ (r - centre, c - centre) + centre
    a11, a12 = cos / scale, (-sin + shear) / scale
    a21, a22 = sin / scale, cos / scale
    centre = (s - 1) / 2.0
    rr, cc = np.meshgrid(np.arange(s) - centre, np.arange(s) - centre, indexing="ij")
    src_r = a11[:, None, None] * rr + a12[:, None, None] * cc + centre + shift[:, 0, None, None]
    src_c = a21[:, None, None] * rr + a22[:, None, None] * cc + centre + shift[:, 1, None, None]
    idx = np.broadcast_to(np.arange(n)[:, None, None], src_r.shape)
    warped = ndimage.map_coordinates(photos, [idx, src_r, src_c], order=1, mode="constant")
    # stroke-width change: a gamma in [0.5, 2] thickens (< 1) or thins (> 1) the strokes
    gamma = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
    warped = np.clip(warped, 0.0, 1.0) ** gamma[:, None, None]
    # the "drawing": Gaussian-derivative edge magnitude (outlines of the strokes), each
    # image scaled to a maximum of 1
    edges = ndimage.gaussian_gradient_magnitude(warped, (0.0, _EDGE_SIGMA, _EDGE_SIGMA),
                                                mode="constant")
    peak = edges.reshape(n, -1).max(axis=1)
    edges /= np.where(peak > 0, peak, 1.0)[:, None, None]
    return np.clip(edges, 0.0, 1.0)


@functools.lru_cache(maxsize=1)
def _digits_views_cached():
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = digits.images / 16.0  # (n, 8, 8) in [0, 1]
    photos = ndimage.zoom(small, (1, 2, 2), order=1, mode="nearest", grid_mode=True)
    photos = np.clip(photos, 0.0, 1.0)
    sketches = _sketch_images(photos, _SKETCH_SEED)
    Y = hog_descriptor(sketches, cell=4, n_bins=9)
    X = photos.reshape(photos.shape[0], -1)
    return X, Y, digits.target.astype(np.int64), photos, sketches


def load_digits_views() -> Bunch:
    """scikit-learn's digits in two modalities: a "photo" and a "sketch" of each image.

    The cross-modal default dataset of crossmetric (``crossmetric benchmark``) and the
    photo ↔ sketch image task of :class:`crossmetric.DeepGSM`. Deterministic (the random
    deformations use a fixed internal seed) and fast (the arrays are cached after the first
    call; each call returns fresh copies).

    How the two modalities are made
    -------------------------------
    * **photo** ``images_x``: the 8 × 8 digit (grey levels 0..16, divided by 16) upsampled to
      16 × 16 by bilinear interpolation (``scipy.ndimage.zoom``, order 1), values in [0, 1].
    * **sketch** ``images_y``: a second rendering of the same image, drawn by "another hand":
      the photo is warped by a random affine map about its centre (rotation ±10°, scale
      0.9–1.1, shear ±0.12, shift ±1 px; bilinear, zero outside), its strokes are thickened
      or thinned by a random gamma in [0.5, 2] (``v ↦ v^γ``), and the result is replaced by
      its Gaussian-derivative edge magnitude (σ = 0.8 px) scaled to a maximum of 1 -- an
      outline drawing, 16 × 16 in [0, 1]. Matching photo ↔ sketch of the same image is
      therefore not a copy task.
    * ``X`` (256 features): the photo's pixels, flattened row-major.
    * ``Y`` (144 features): :func:`hog_descriptor` of the sketch -- 4 × 4-pixel cells × 9
      unsigned orientation bins, cell-wise L2-normalised. A different modality and dimension.

    Both feature views are non-negative (usable with the ``chi2`` kernels).

    Returns
    -------
    Bunch
        ``X`` (1797, 256), ``Y`` (1797, 144), ``labels`` (digit class 0..9),
        ``instance`` (row ``r``'s image id, ``= r``), ``images_x`` and ``images_y``
        (1797, 16, 16) float64 in [0, 1], ``view_names`` (``("photo pixels",
        "sketch HOG")``), ``DESCR``.
    """
    X, Y, labels, photos, sketches = _digits_views_cached()
    n = X.shape[0]
    return Bunch(
        X=X.copy(),
        Y=Y.copy(),
        labels=labels.copy(),
        instance=np.arange(n, dtype=np.int64),
        images_x=photos.copy(),
        images_y=sketches.copy(),
        view_names=("photo pixels", "sketch HOG"),
        DESCR=(
            "scikit-learn digits in two modalities: X = 16x16 photo pixels, Y = HOG "
            "(4x4 cells x 9 bins) of an edge-map sketch of a randomly deformed copy; "
            "labels = digit class, instance = image id."
        ),
    )


# ----------------------------------------------------------------------------------- mfeat
#: feature count of each UCI Multiple Features view
MFEAT_VIEWS = {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6}
_MFEAT_ROWS = 2000


def _read_mfeat_view(data_home: str, view: str) -> np.ndarray:
    path = os.path.join(data_home, f"mfeat-{view}")
    if not os.path.isfile(path):
        raise ValueError(
            f"mfeat view {view!r}: file {path!r} not found; data_home must be the folder "
            "holding the UCI files mfeat-fou, mfeat-pix, ..."
        )
    try:
        arr = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"mfeat view {view!r}: {path!r} is malformed: {exc}") from None
    want = (_MFEAT_ROWS, MFEAT_VIEWS[view])
    if arr.shape != want:
        raise ValueError(
            f"mfeat view {view!r}: {path!r} has shape {arr.shape}, expected {want} "
            "(2,000 rows of whitespace-separated numbers)."
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"mfeat view {view!r}: {path!r} contains NaN or infinity.")
    return arr


def load_mfeat(data_home: str | os.PathLike, views: Sequence[str] = ("fou", "pix")) -> Bunch:
    """Two (or more) views of the UCI *Multiple Features* handwritten digits.

    Parameters
    ----------
    data_home : path
        Folder with the UCI files ``mfeat-fou``, ``mfeat-fac``, ``mfeat-kar``, ``mfeat-pix``,
        ``mfeat-zer``, ``mfeat-mor`` (2,000 rows each, whitespace-separated, no header; rows
        come in blocks of 200 per digit).
    views : sequence of str, default=("fou", "pix")
        The view for ``X``, the view for ``Y`` and optionally more (for the multi-view
        learners' ``fit_views``), distinct names among :data:`MFEAT_VIEWS`.

    Returns
    -------
    Bunch
        ``X``, ``Y`` (the first two views; row ``r`` = the same digit image), ``views`` (every
        view, in order), ``labels`` (``r // 200``), ``instance`` (``r``), ``view_names``.

    Raises
    ------
    ValueError
        Unknown view, missing file, or a file without the expected 2,000 × d numbers.
    """
    views = tuple(views)
    if len(views) < 2 or len(set(views)) != len(views):
        raise ValueError(f"views must name at least two distinct mfeat views (X, Y, ...), got "
                         f"{views!r}.")
    for v in views:
        if v not in MFEAT_VIEWS:
            raise ValueError(f"unknown mfeat view {v!r}; expected one of {sorted(MFEAT_VIEWS)}.")
    data_home = os.fspath(data_home)
    if not os.path.isdir(data_home):
        raise ValueError(f"data_home {data_home!r} is not a directory.")
    arrays = [_read_mfeat_view(data_home, v) for v in views]
    labels = np.repeat(np.arange(10, dtype=np.int64), _MFEAT_ROWS // 10)
    more = "".join(f", mfeat-{v}" for v in views[2:])
    return Bunch(X=arrays[0], Y=arrays[1], views=arrays, labels=labels,
                 instance=np.arange(_MFEAT_ROWS, dtype=np.int64), view_names=views,
                 DESCR=f"UCI Multiple Features: X = mfeat-{views[0]}, Y = mfeat-{views[1]}"
                       f"{more}.")


# ------------------------------------------------------------------------------------- LFW
def read_lfw_pairs(path: str | os.PathLike) -> Bunch:
    """Read LFW's ``pairs.txt`` (View 2: 10 folds of 300 positive + 300 negative pairs).

    Format: a header ``n_folds<TAB>n_per_class`` (``10  300``); then, per fold,
    ``n_per_class`` positive lines ``name  n1  n2`` followed by ``n_per_class`` negative lines
    ``name1  n1  name2  n2``. Image numbers are 1-based (``Aaron_Peirsol_0001.jpg`` is number 1).
    Fields may be separated by tabs or spaces. ``pairsDevTrain.txt`` / ``pairsDevTest.txt``
    (header ``n_per_class`` only, one fold) are read as one fold.

    Returns
    -------
    Bunch
        ``name1``, ``name2`` (object arrays of str), ``num1``, ``num2`` (int, 1-based),
        ``y`` (+1 same / -1 different), ``fold`` (0-based fold of each pair), ``n_folds``.

    Raises
    ------
    ValueError
        Missing file, bad header, a line with a wrong number of fields or non-integer image
        numbers, a positive block line with 4 fields or vice versa, or a wrong line count.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"LFW pairs file {path!r} not found.")
    with open(path, encoding="utf-8") as fh:
        lines = [ln.split() for ln in fh if ln.strip()]
    if not lines:
        raise ValueError(f"LFW pairs file {path!r} is empty.")
    head = lines[0]
    try:
        if len(head) == 2:
            n_folds, n_per = int(head[0]), int(head[1])
        elif len(head) == 1:
            n_folds, n_per = 1, int(head[0])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"LFW pairs file {path!r}: the first line must be 'n_folds n_per_class' "
            f"(e.g. '10\\t300'), got {' '.join(head)!r}."
        ) from None
    body = lines[1:]
    if n_folds < 1 or n_per < 1 or len(body) != 2 * n_folds * n_per:
        raise ValueError(
            f"LFW pairs file {path!r}: header announces {n_folds} folds x 2 x {n_per} pairs "
            f"= {2 * n_folds * n_per} lines, found {len(body)}."
        )
    name1, name2, num1, num2, y, fold = [], [], [], [], [], []
    for k, fields in enumerate(body):
        f, within = divmod(k, 2 * n_per)
        positive = within < n_per
        lineno = k + 2
        try:
            if positive and len(fields) == 3:
                a, b, na, nb = fields[0], fields[0], int(fields[1]), int(fields[2])
            elif not positive and len(fields) == 4:
                a, na, b, nb = fields[0], int(fields[1]), fields[2], int(fields[3])
            else:
                what = "'name n1 n2' (3 fields)" if positive else "'name1 n1 name2 n2' (4 fields)"
                raise ValueError(
                    f"LFW pairs file {path!r}, line {lineno}: expected {what} in the "
                    f"{'positive' if positive else 'negative'} block of fold {f + 1}, "
                    f"got {len(fields)} fields."
                )
        except ValueError as exc:
            if "LFW pairs file" in str(exc):
                raise
            raise ValueError(
                f"LFW pairs file {path!r}, line {lineno}: image numbers must be integers, "
                f"got {' '.join(fields)!r}."
            ) from None
        if na < 1 or nb < 1:
            raise ValueError(
                f"LFW pairs file {path!r}, line {lineno}: image numbers are 1-based, got "
                f"{na} and {nb}."
            )
        name1.append(a)
        name2.append(b)
        num1.append(na)
        num2.append(nb)
        y.append(1 if positive else -1)
        fold.append(f)
    return Bunch(name1=np.array(name1, dtype=object), name2=np.array(name2, dtype=object),
                 num1=np.array(num1, dtype=np.int64), num2=np.array(num2, dtype=np.int64),
                 y=np.array(y, dtype=np.int64), fold=np.array(fold, dtype=np.int64),
                 n_folds=n_folds)


_LFW_FILE = re.compile(r"^(?P<name>.+)_(?P<num>\d+)(\.[A-Za-z0-9]+)?$")


def _parse_image_key(key) -> tuple[str, int]:
    """``("Name", 3)``, ``"Name_0003"``, ``"Name_0003.jpg"``, ``"a/b/Name_0003.jpg"``, ``"Name 3"``
    or ``"Name,3"`` → ``("Name", 3)``."""
    if isinstance(key, tuple | list) and len(key) == 2:
        return str(key[0]), int(key[1])
    text = str(key).strip()
    for sep in (",", "\t", " "):
        if sep in text:
            a, _, b = text.rpartition(sep)
            if b.strip().isdigit():
                return a.strip(), int(b)
    m = _LFW_FILE.match(os.path.basename(text))
    if m is None:
        raise ValueError(
            f"image key {key!r} is not of the form 'Name_0001[.jpg]', 'Name,1' or (name, 1)."
        )
    return m.group("name"), int(m.group("num"))


def lfw_pair_indices(lfw: Bunch, image_keys: Sequence) -> np.ndarray:
    """Join LFW pairs with a feature file: the feature row of each side of each pair.

    Parameters
    ----------
    lfw : Bunch
        From :func:`read_lfw_pairs`.
    image_keys : sequence
        Key of each row of the user's feature matrix: ``(name, number)`` tuples, or strings
        ``"Name_0001"``, ``"Name_0001.jpg"`` (any folder prefix), ``"Name,1"`` or ``"Name 1"``.
        Numbers are 1-based as in LFW.

    Returns
    -------
    ndarray of shape (n_pairs, 2), int64
        Index pairs into the feature matrix (use with ``preprocessor=features``).

    Raises
    ------
    ValueError
        If a pair refers to an image that has no row, or a key appears twice.
    """
    row_of: dict[tuple[str, int], int] = {}
    for r, key in enumerate(image_keys):
        k = _parse_image_key(key)
        if k in row_of:
            raise ValueError(f"image_keys: image {k[0]}_{k[1]:04d} appears twice "
                             f"(rows {row_of[k]} and {r}).")
        row_of[k] = r
    out = np.empty((lfw.y.shape[0], 2), dtype=np.int64)
    for p, (a, na, b, nb) in enumerate(zip(lfw.name1, lfw.num1, lfw.name2, lfw.num2,
                                           strict=True)):
        for col, k in ((0, (a, int(na))), (1, (b, int(nb)))):
            r = row_of.get(k)
            if r is None:
                raise ValueError(
                    f"pair {p} refers to image {k[0]}_{k[1]:04d}, which has no row in the "
                    "feature file (image_keys)."
                )
            out[p, col] = r
    return out


# ---------------------------------------------------------------------------- generic files
#: extensions read as text matrices: comma-separated (``.csv``) or sniffed (others)
TEXT_EXTENSIONS = (".csv", ".txt", ".tsv", ".dat", "")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_text_lines(path: str, what: str) -> list[str]:
    """The lines of a UTF-8 text file (a BOM is dropped); one-line errors for binary or empty."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if not raw.strip():
        raise ValueError(f"{what} {path!r} is empty.")
    if b"\x00" in raw[:65536]:
        raise ValueError(f"{what} {path!r} is a binary file, not text (expected numbers "
                         "separated by commas or whitespace).")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path!r} is not UTF-8 text (byte {exc.start}); expected "
                         "numbers separated by commas or whitespace.") from None
    return text.splitlines()


def _read_csv_matrix(path: str, what: str, *, delimiter: str | None = ",") -> np.ndarray:
    """Numbers from a text file: comma-separated (``delimiter=","``) or whitespace-separated
    (``delimiter=None``, the UCI layout of ``mfeat-*``); ``"auto"`` sniffs commas.

    Blank lines and lines starting with ``#`` are skipped. A UTF-8 byte-order mark is dropped. The
    first line is a header only when *every* field of it is a name (not a number); a first line
    that mixes numbers and words (a typo such as ``5,3,l``) is an error naming the line, never
    silently dropped. Every error names the line and the field.
    """
    lines = _read_text_lines(path, what)
    rows = [(k + 1, ln) for k, ln in enumerate(lines)
            if ln.strip() and not ln.lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"{what} {path!r} has no data lines.")
    if delimiter == "auto":
        delimiter = "," if "," in rows[0][1] else None

    def fields(line: str) -> list[str]:
        parts = line.split(delimiter) if delimiter else line.split()
        return [f.strip() for f in parts]

    first = fields(rows[0][1])
    numeric = [_is_number(f) for f in first]
    if not any(numeric) and all(first):
        rows = rows[1:]  # a header of names
        if not rows:
            raise ValueError(f"{what} {path!r} has a header (line 1) but no data lines.")
    body = [ln for _, ln in rows]
    try:
        if delimiter:
            arr = np.loadtxt(body, delimiter=delimiter, dtype=np.float64, ndmin=2)
        else:
            arr = np.loadtxt(body, dtype=np.float64, ndmin=2)
    except ValueError:
        arr = None
    if arr is None:  # find the first bad line, for a one-line message
        width = len(fields(rows[0][1]))
        for lineno, ln in rows:
            fs = fields(ln)
            if len(fs) != width:
                raise ValueError(f"{what} {path!r}, line {lineno}: {len(fs)} fields, but line "
                                 f"{rows[0][0]} has {width}.") from None
            for f in fs:
                if not _is_number(f):
                    raise ValueError(f"{what} {path!r}, line {lineno}: {f!r} is not a number "
                                     "(a header line must contain only names).") from None
        raise ValueError(f"{what} {path!r} is not a numeric text file.")
    return arr


def load_features(path: str | os.PathLike, *, key: str | None = None,
                  allow_images: bool = False) -> np.ndarray:
    """A feature matrix ``(n_samples, n_features)`` from ``.npy``, ``.npz`` or ``.csv``.

    With ``allow_images=True`` a 3-D ``.npy`` / ``.npz`` array ``(n_samples, h, w)`` of images
    (for :class:`crossmetric.DeepGSM`) is accepted too.

    ``.npz``: the array named ``key``, else ``"X"``, else the only array in the file.
    ``.csv``: comma-separated numbers, one optional header line of names.
    ``.txt`` / ``.tsv`` / ``.dat`` / no extension: whitespace-separated numbers (the UCI layout
    of ``mfeat-fou`` ...), or comma-separated when the first line has commas.
    Text files may start with a UTF-8 byte-order mark; see :func:`_read_csv_matrix` for the
    header rule (a header is accepted only when it holds names, never numbers).

    Raises
    ------
    ValueError
        Missing file, unknown extension, unreadable content, not 2-D, empty, or NaN/inf.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"feature file {path!r} not found.")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if key is not None:
                    if key not in names:
                        raise ValueError(f"feature file {path!r} has no array {key!r}; "
                                         f"it holds {names}.")
                    name = key
                elif "X" in names:
                    name = "X"
                elif len(names) == 1:
                    name = names[0]
                else:
                    raise ValueError(f"feature file {path!r} holds several arrays {names}; "
                                     "name one (key) or call it 'X'.")
                arr = z[name]
        elif ext == ".csv":
            arr = _read_csv_matrix(path, "feature file")
        elif ext in TEXT_EXTENSIONS:
            arr = _read_csv_matrix(path, "feature file", delimiter="auto")
        else:
            raise ValueError(f"feature file {path!r}: unknown extension {ext!r}; "
                             "expected .npy, .npz, .csv or whitespace-separated text "
                             "(.txt, .dat or no extension, e.g. UCI's mfeat-fou).")
    except ValueError as exc:
        if path in str(exc):
            raise
        raise ValueError(f"feature file {path!r} could not be read: "
                         f"{' '.join(str(exc).split())}") from None
    except Exception as exc:  # corrupt archives, pickled objects, ...
        raise ValueError(f"feature file {path!r} could not be read: "
                         f"{' '.join(str(exc).split())}") from None
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"feature file {path!r} must hold numbers, got dtype {arr.dtype}.")
    ok_ndim = (2, 3) if allow_images else (2,)
    if arr.ndim not in ok_ndim or 0 in arr.shape:
        want = "a 2-D matrix (n_samples, n_features)" + (
            " or a 3-D stack of images (n_samples, h, w)" if allow_images else "")
        raise ValueError(f"feature file {path!r} must hold {want}, non-empty; got shape "
                         f"{arr.shape}.")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"feature file {path!r} contains NaN or infinity.")
    return arr


def load_pairs(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs and labels from a ``.csv`` with rows ``i, j, label`` (label +1 / -1).

    ``i`` indexes the rows of the X feature file, ``j`` those of the Y file (or of X again for
    single-modal data). One optional header line of names (``i,j,label``); a first line with a
    number in it is data, and a bad field fails naming its line. ``.npy`` / ``.npz`` holding an
    ``(n, 3)`` integer array are accepted too.

    Returns
    -------
    pairs : ndarray (n_pairs, 2) int64
    y : ndarray (n_pairs,) int64 of +1 / -1

    Raises
    ------
    ValueError
        Missing or unreadable file, not three columns, non-integer or negative indices,
        labels other than +1 / -1.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"pairs file {path!r} not found.")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".npy", ".npz"):
        arr = load_features(path)
    else:
        arr = _read_csv_matrix(path, "pairs file", delimiter="," if ext == ".csv" else "auto")
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] == 0:
        raise ValueError(f"pairs file {path!r} must have three columns i, j, label "
                         f"(+1 / -1), got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"pairs file {path!r} contains NaN or infinity.")
    idx = arr[:, :2]
    if np.any(idx != np.round(idx)) or np.any(idx < 0):
        raise ValueError(f"pairs file {path!r}: columns i, j must be non-negative integer "
                         "row indices.")
    y = check_pair_labels(arr[:, 2], name=f"labels (3rd column) of pairs file {path!r}",
                          require_both=False)
    return idx.astype(np.int64), y


_HEADER_WORDS = {"label", "labels", "id", "ids", "identity", "class", "target", "y",
                 "instance", "name", "image", "file", "filename", "path"}


def load_labels(path: str | os.PathLike, *, key: str | None = None,
                what: str = "labels file") -> np.ndarray:
    """One identity per sample, from ``.npy`` / ``.npz`` (a 1-D array) or a text file.

    A text file holds one label per line (numbers or names; blank lines are skipped, a UTF-8
    byte-order mark is dropped). The first line is taken as a header when it is one of the usual
    column names (``label``, ``id``, ``class``, ``name``, ...) or when it is the only non-numeric
    line of a file of numbers.

    Returns
    -------
    ndarray of shape (n_samples,)
        ``int64`` when every label is an integer, else ``str``.

    Raises
    ------
    ValueError
        Missing, empty or binary file, several columns, or a multi-dimensional array.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{what} {path!r} not found.")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".npy", ".npz"):
        try:
            if ext == ".npy":
                arr = np.load(path, allow_pickle=False)
            else:
                with np.load(path, allow_pickle=False) as z:
                    names = list(z.files)
                    name = key if key is not None else (names[0] if len(names) == 1 else None)
                    if name not in names:
                        raise ValueError(f"{what} {path!r}: name the array with key among "
                                         f"{names}.")
                    arr = z[name]
        except ValueError as exc:
            if path in str(exc):
                raise
            raise ValueError(f"{what} {path!r} could not be read: "
                             f"{' '.join(str(exc).split())}") from None
        except Exception as exc:
            raise ValueError(f"{what} {path!r} could not be read: "
                             f"{' '.join(str(exc).split())}") from None
        arr = np.asarray(arr)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{what} {path!r} must hold a non-empty 1-D array, got shape "
                             f"{arr.shape}.")
        if arr.dtype.kind == "f" and np.all(arr == np.round(arr)) and np.isfinite(arr).all():
            arr = arr.astype(np.int64)
        return arr
    lines = [(k + 1, ln.strip()) for k, ln in enumerate(_read_text_lines(path, what))
             if ln.strip()]
    for lineno, ln in lines:
        if "," in ln or "\t" in ln or len(ln.split()) > 1:
            raise ValueError(f"{what} {path!r}, line {lineno}: expected one label per line, "
                             f"got {ln!r}.")
    values = [ln for _, ln in lines]
    numeric = [_is_number(v) for v in values]
    if values and (values[0].lower() in _HEADER_WORDS
                   or (not numeric[0] and len(values) > 1 and all(numeric[1:]))):
        values, numeric = values[1:], numeric[1:]
    if not values:
        raise ValueError(f"{what} {path!r} has no labels.")
    if all(numeric):
        num = np.array([float(v) for v in values])
        if np.all(num == np.round(num)) and np.isfinite(num).all():
            return num.astype(np.int64)
    return np.array(values, dtype=str)


def load_image_list(path: str | os.PathLike, what: str = "image list") -> list[str]:
    """One image name per line (e.g. ``Aaron_Peirsol_0001.jpg``), in the row order of a feature
    file; blank lines are skipped. For :func:`lfw_pair_indices`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{what} {path!r} not found.")
    names = [ln.strip() for ln in _read_text_lines(path, what) if ln.strip()]
    if not names:
        raise ValueError(f"{what} {path!r} has no names.")
    return names


# ------------------------------------------------------------------------------- synthetic
def make_cross_modal(n_samples: int = 600, *, n_classes: int = 20, n_latent: int = 5,
                     n_features_x: int = 30, n_features_y: int = 20,
                     class_sep: float = 2.0, noise: float = 0.5, nonnegative: bool = False,
                     random_state=None) -> Bunch:
    """Synthetic two-view data with a known shared latent space.

    Each class ``c`` has a latent centre ``μ_c ~ N(0, class_sep² I)`` in ``R^n_latent``; sample
    ``r`` has latent ``z_r = μ_{label_r} + ε_r`` (``ε ~ N(0, I)``), and its two views are
    ``x_r = A z_r + noise·N(0, I)``, ``y_r = B z_r + noise·N(0, I)`` with random
    ``A (n_features_x × n_latent)``, ``B (n_features_y × n_latent)`` of i.i.d. N(0, 1/n_latent)
    entries. With ``nonnegative=True`` each view goes through ``log1p(exp(·))`` (softplus), so
    that ``chi2`` kernels apply; the latent structure stays recoverable.

    Returns
    -------
    Bunch
        ``X``, ``Y``, ``labels``, ``instance``, ``latent`` (``z``), ``A``, ``B``,
        ``centers``.
    """
    rng = check_random_state(random_state)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    n_classes = check_positive_int(n_classes, "n_classes")
    n_latent = check_positive_int(n_latent, "n_latent")
    n_features_x = check_positive_int(n_features_x, "n_features_x")
    n_features_y = check_positive_int(n_features_y, "n_features_y")
    class_sep = check_positive_scalar(class_sep, "class_sep", allow_zero=True)
    noise = check_positive_scalar(noise, "noise", allow_zero=True)
    if n_classes > n_samples:
        raise ValueError(f"n_classes={n_classes} must be <= n_samples={n_samples}.")
    labels = np.r_[np.arange(n_classes), rng.randint(0, n_classes, n_samples - n_classes)]
    labels = labels[rng.permutation(n_samples)].astype(np.int64)
    centers = class_sep * rng.standard_normal((n_classes, n_latent))
    Z = centers[labels] + rng.standard_normal((n_samples, n_latent))
    A = rng.standard_normal((n_features_x, n_latent)) / np.sqrt(n_latent)
    B = rng.standard_normal((n_features_y, n_latent)) / np.sqrt(n_latent)
    X = Z @ A.T + noise * rng.standard_normal((n_samples, n_features_x))
    Y = Z @ B.T + noise * rng.standard_normal((n_samples, n_features_y))
    if nonnegative:
        X, Y = np.logaddexp(0.0, X), np.logaddexp(0.0, Y)
    return Bunch(X=X, Y=Y, labels=labels, instance=np.arange(n_samples, dtype=np.int64),
                 latent=Z, A=A, B=B, centers=centers)
