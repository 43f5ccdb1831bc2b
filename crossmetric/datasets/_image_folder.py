"""Image-folder loaders: any folder layout described by one regular expression.

Public through :mod:`crossmetric.datasets` (:func:`load_image_folder`, :func:`load_viper`,
:func:`load_pku_sketch`, :func:`load_cufs`, :func:`load_cuhk01`). Images are decoded with Pillow.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from crossmetric._utils.checks import MAX_IMAGE_SIDE, _check_size, check_choice

__all__ = ["load_image_folder", "load_viper", "load_pku_sketch", "load_cufs", "load_cuhk01",
           "read_image", "read_image_stack", "to_8bit", "ImageRefused", "MAX_IMAGE_PIXELS",
           "MAX_IMAGE_SIDE",
           "VIPER_PATTERN", "PKU_SKETCH_PATTERN", "CUFS_PATTERN", "CUHK01_PATTERN"]

#: VIPeR as in ``../shared/data/viper``: ``images/PPPPCCCC.png`` (person, camera 1 = A, 2 = B)
VIPER_PATTERN = r"images/(?P<id>\d{4})(?P<domain>\d{4})\.png"
#: PKU-Sketch: ``photo/ID_CAM_FRAME.jpg`` and ``sketch/ID.jpg``
PKU_SKETCH_PATTERN = r"(?P<domain>photo|sketch)/(?P<id>\d+)(?:_\d+_\d+)?\.jpg"
#: CUFS (AR + XM2VTS parts): ``{train,test}/{photo,sketch}/SET-N.jpg``, ``SET`` ar or xm2vts
CUFS_PATTERN = r"(?:train|test)/(?P<domain>photo|sketch)/(?P<id>(?:ar|xm2vts)-\d+)\.jpg"
#: CUHK01: ``campus/PPPPVVV.png``, person ``PPPP``, image ``VVV`` (001-002 camera A, 003-004 B)
CUHK01_PATTERN = r"campus/(?P<id>\d{4})(?P<domain>00[1-4])\.png"

_COLORS = {"rgb": "RGB", "gray": "L"}


#: the most pixels (width x height) an image file may have: larger files are refused before
#: their pixels are decoded (a 109 KB 1-bit PNG can hold 30000 x 30000 pixels). 50 million
#: pixels takes in a 48-megapixel camera picture; Pillow's own guard is 89 million.
MAX_IMAGE_PIXELS = 50_000_000


class ImageRefused(ValueError):
    """An image file that decodes but is refused: too many pixels, or values of no known
    range (floating-point values outside [0, 1], NaN)."""


def _declared_bits(im) -> int | None:
    """The bits per sample a TIFF file declares (tag 258), else None."""
    tags = getattr(im, "tag_v2", None)
    bits = tags.get(258) if tags is not None else None
    if bits is None:
        return None
    return int(max(bits)) if isinstance(bits, tuple | list) else int(bits)


def to_8bit(im):
    """``(image, note)``: a Pillow image whose samples are not 8-bit, scaled to 8-bit ``"L"``.

    * 16-bit integer (``"I;16*"`` modes, or ``"I"`` with values in 0-65535 and no 32-bit
      declaration): divided by the 16-bit range, ``v / 257``;
    * 32-bit integer (``"I"``, a TIFF declaring 32 bits per sample or values outside
      0-65535): no fixed range fits (the dtype's maximum would make it black), so the image is
      stretched from its own minimum / maximum to 0-255, and ``note`` says so;
    * floating point (``"F"``) with values in [0, 1]: kept as they are (``v * 255``).

    Pillow's own ``convert("RGB")`` clips each of these at 255 (a 16-bit or 32-bit file comes
    out white, a [0, 1] float file black). Other modes (palette, grey, RGBA, CMYK, ...) are
    returned unchanged for ``convert``, with ``note`` None.

    Parameters
    ----------
    im : PIL.Image.Image
        An opened image.

    Returns
    -------
    image : PIL.Image.Image
        ``im`` itself, or an 8-bit ``"L"`` image.
    note : str or None
        How a 32-bit image was scaled, else None.

    Raises
    ------
    ImageRefused
        A floating-point image with NaN / infinity or values outside [0, 1] (no known range).
    """
    mode = im.mode
    if not (mode.startswith("I;16") or mode in ("I", "F")):
        return im, None
    from PIL import Image

    a = np.asarray(im, dtype=np.float64)
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    note = None
    if mode == "F":
        if not np.isfinite(a).all():
            raise ImageRefused("floating-point image with NaN or infinity; expected values in "
                               "[0, 1].")
        if lo < 0.0 or hi > 1.0:
            raise ImageRefused(f"floating-point image with values in [{lo:g}, {hi:g}]; expected "
                               "[0, 1] (or an 8- / 16-bit integer image).")
        out = a * 255.0
    elif mode == "I" and ((_declared_bits(im) or 0) > 16 or lo < 0.0 or hi > 65535.0):
        out = (a - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(a)
        note = f"32-bit integer image stretched from its own range [{lo:.0f}, {hi:.0f}] to 0-255"
    else:  # 16-bit
        out = a / 257.0
    return Image.fromarray(np.clip(np.rint(out), 0, 255).astype(np.uint8)), note


def read_image(path, mode: str, size=None):
    """``(pixels, note)``: one image file decoded as 8-bit ``mode`` (``"RGB"`` or ``"L"``).

    Files of more than :data:`MAX_IMAGE_PIXELS` pixels are refused from their header, before
    any pixel is decoded; high-bit-depth and floating-point files are scaled by
    :func:`to_8bit`.

    Parameters
    ----------
    path : path-like
        The image file.
    mode : {"RGB", "L"}
        Pillow mode of the result.
    size : (width, height), optional
        Resize to this size (bilinear, with antialiasing).

    Returns
    -------
    pixels : ndarray of uint8, (h, w, 3) or (h, w)
    note : str or None
        How a 32-bit integer image was scaled (:func:`to_8bit`), else None.

    Raises
    ------
    ImageRefused
        Too many pixels, or a floating-point image of no known range.
    OSError, ValueError, SyntaxError, PIL.UnidentifiedImageError
        The file cannot be decoded (Pillow's errors).
    """
    import warnings

    from PIL import Image

    limit = f"the limit of {MAX_IMAGE_PIXELS:,} pixels (crossmetric.datasets.MAX_IMAGE_PIXELS)"
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(path)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            found = re.search(r"\((\d+) pixels\)", str(exc))
            pixels = f"{int(found.group(1)):,} pixels" if found else "its size"
            raise ImageRefused(f"{pixels}, above {limit}.") from None
    with im:
        w, h = im.size
        if w * h > MAX_IMAGE_PIXELS:
            raise ImageRefused(f"{w}x{h} = {w * h:,} pixels, above {limit}.")
        im, note = to_8bit(im)
        im = im.convert(mode)
        if size is not None and im.size != tuple(size):
            im = im.resize(tuple(size), Image.Resampling.BILINEAR)
        return np.asarray(im, dtype=np.uint8), note


def _convert_labels(values: list[str]) -> np.ndarray:
    """Digit-only labels become int64 (``"0007"`` → 7), anything else stays str."""
    if values and all(v.isdecimal() for v in values):
        return np.array([int(v) for v in values], dtype=np.int64)
    return np.array(values, dtype=str)


def load_image_folder(path, pattern: str, *, size=None, color: str = "rgb") -> Bunch:
    """Load every image under ``path`` whose relative path matches ``pattern``.

    Parameters
    ----------
    path : path-like
        Root folder; it is searched recursively.
    pattern : str
        Regular expression matched against the whole path of each file relative to ``path``
        (``re.fullmatch``, ``/`` as separator on every system). The named group ``id`` (required)
        is the identity, the optional group ``domain`` the modality (two values: two views
        paired row by row) and the optional group ``cam`` the camera of a re-identification
        image (gallery items of the query's identity *and* camera are left out of its ranking,
        :func:`crossmetric.metrics.evaluate_rank`). Examples:
        ``r"cam_(?P<domain>[ab])/(?P<id>\\d+)_\\d+\\.bmp"`` (one folder per camera),
        ``r"(?P<id>\\d{4})(?P<domain>\\d{4})\\.png"`` (camera in the file name),
        ``r"(?P<domain>photo|sketch)/(?P<id>\\d+).*\\.jpg"`` (modality folders),
        ``r"(?P<id>\\d{4})_c(?P<cam>\\d)s\\d_\\d+_\\d+\\.jpg"`` (camera in a Market-1501 name).
        Files that do not match are ignored (READMEs, lists, ...).
    size : (width, height), optional
        Resize every image to this size (Pillow, bilinear with antialiasing). Without it all
        images must have the same size.
    color : {"rgb", "gray"}, default="rgb"
        ``"rgb"``: images of shape (n, h, w, 3); ``"gray"``: (n, h, w), Pillow's ITU-R 601
        luma ``L = 0.299 R + 0.587 G + 0.114 B``. Palette, grey, RGBA and CMYK files are
        converted; 16-bit grey files are scaled to 8 bits (``v / 257``), floating-point files
        in [0, 1] by 255, 32-bit integer files from their own range (with a warning naming
        them; :func:`to_8bit`). Files of more than :data:`MAX_IMAGE_PIXELS` pixels are
        refused before they are decoded. Symbolic links to folders are not followed (no
        loops); file names that are not UTF-8 keep their bytes as surrogate escapes
        (``os.fsdecode``), so the names still open the files.

    Returns
    -------
    Bunch
        ``images`` (uint8, (n, h, w, 3) or (n, h, w)); ``ids`` and ``domains`` (n,) -- int64
        when every value is made of decimal digits (``"0007"`` → 7), str otherwise; ``domains``
        is all 0 when ``pattern`` has no ``domain`` group; ``filenames`` (n,) the relative
        paths; ``cams`` (n,) only when ``pattern`` has a ``cam`` group (int64 when every value
        is made of decimal digits, str otherwise). Rows are sorted by (id, domain, file name),
        so the result does not depend on the order in which the file system lists the folder.

    Raises
    ------
    ValueError
        ``path`` is not a folder; ``pattern`` is not a valid regular expression or has no
        ``id`` group; no file matches (the message shows the pattern and an example file name);
        a matching file cannot be decoded or is refused (too many pixels, floating-point
        values outside [0, 1]; the message names it); images of different sizes
        without ``size``; bad ``size`` or ``color``.
    """
    root = Path(os.fspath(path))
    if not root.is_dir():
        raise ValueError(f"path {os.fspath(path)!r} is not a directory.")
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a str regular expression, got {pattern!r}.")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}.") from None
    if "id" not in regex.groupindex:
        raise ValueError(f"pattern {pattern!r} must have a named group 'id' for the identity, "
                         r"e.g. r'(?P<id>\d+)_\d+\.png'.")
    if color not in _COLORS:
        raise ValueError(f"color must be one of {tuple(_COLORS)}, got {color!r}.")
    wh = _check_size(size)

    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    matched, cams_of = [], {}
    for rel in files:
        m = regex.fullmatch(rel)
        if m is not None:
            dom = m.group("domain") if "domain" in regex.groupindex else None
            matched.append((m.group("id"), dom, rel))
            if "cam" in regex.groupindex:
                cams_of[rel] = m.group("cam")
    if not matched:
        example = files[0] if files else None
        where = (f"e.g. {example!r} does not match" if example is not None
                 else "the folder holds no files")
        raise ValueError(f"no file under {os.fspath(path)!r} matches pattern {pattern!r} "
                         f"(matched against the whole relative path; {where}).")
    if any(i is None for i, _, _ in matched):
        bad = next(rel for i, _, rel in matched if i is None)
        raise ValueError(f"pattern {pattern!r} matched {bad!r} without capturing its 'id' group.")

    ids = _convert_labels([i for i, _, _ in matched])
    has_domain = "domain" in regex.groupindex
    domains = (_convert_labels([d or "" for _, d, _ in matched]) if has_domain
               else np.zeros(len(matched), dtype=np.int64))
    names = np.array([rel for _, _, rel in matched], dtype=str)
    order = np.lexsort((names, domains, ids))
    ids, domains, names = ids[order], domains[order], names[order]
    cams = None
    if "cam" in regex.groupindex:
        missing = [rel for rel in names.tolist() if cams_of[rel] is None]
        if missing:
            raise ValueError(f"pattern {pattern!r} matched {missing[0]!r} without capturing its "
                             "'cam' group.")
        cams = _convert_labels([cams_of[rel] for rel in names.tolist()])

    images = read_image_stack(root, names.tolist(), color, wh, where=os.fspath(path))
    out = Bunch(images=images, ids=ids, domains=domains, filenames=names,
                DESCR=f"images under {os.fspath(path)!r} matching {pattern!r}")
    if cams is not None:
        out.cams = cams
    return out


def read_image_stack(root, names, color: str = "rgb", size=None, *, where=None,
                     stacklevel: int = 3) -> np.ndarray:
    """The image files ``root / name`` for each of ``names`` decoded into one uint8 stack.

    The reading step of :func:`load_image_folder` (and of the lazy
    :class:`crossmetric.datasets.ImageFiles`): every file through :func:`read_image`; a
    file that cannot be decoded or is refused, and images of different sizes without ``size``,
    fail naming the file; 32-bit images stretched from their own range are named in one
    warning.

    Parameters
    ----------
    root : path-like
    names : sequence of str
        Paths relative to ``root`` (``/`` as separator).
    color : {"rgb", "gray"}, default="rgb"
    size : (width, height), optional
        Checked by the callers (:func:`_check_size`).
    where : str, optional
        How the messages name ``root`` (default: ``root`` itself).
    stacklevel : int, default=3
        Of the warning.

    Returns
    -------
    ndarray of uint8, (n, h, w, 3) or (n, h, w)
    """
    from PIL import UnidentifiedImageError

    root = Path(os.fspath(root))
    where = os.fspath(root) if where is None else where
    images, first, notes = [], None, []
    for rel in names:
        try:
            arr, note = read_image(root / rel, _COLORS[color], size)
        except ImageRefused as exc:
            raise ValueError(f"image file {rel!r} under {where!r} refused: {exc}") from None
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
            raise ValueError(f"cannot decode image file {rel!r} under {where!r}: "
                             f"{exc}") from None
        if note is not None:
            notes.append(f"{rel!r}: {note}")
        if first is None:
            first = (rel, arr.shape)
        elif arr.shape != first[1]:
            raise ValueError(
                f"images have different sizes: {first[0]!r} is {first[1][1]}x{first[1][0]} "
                f"(width x height), {rel!r} is {arr.shape[1]}x{arr.shape[0]}; pass "
                "size=(width, height) to resize them.")
        images.append(arr)
    if notes:
        import warnings

        more = f" (and {len(notes) - 1} more such files)" if len(notes) > 1 else ""
        warnings.warn(f"image file {notes[0]}{more}", UserWarning, stacklevel=stacklevel)
    if not images:
        shape = (0, 0, 0, 3) if color == "rgb" else (0, 0, 0)
        return np.zeros(shape, dtype=np.uint8)
    return np.stack(images)


def _dataset_dir(data_home, name: str, marker: str) -> Path:
    """``data_home/name`` or ``data_home`` itself, whichever holds ``marker``."""
    if data_home is None:
        raise ValueError(f"data_home must be the folder holding {name}/ (e.g. ../shared/data).")
    home = Path(os.fspath(data_home))
    for cand in (home / name, home):
        if (cand / marker).is_dir():
            return cand
    raise ValueError(f"data_home {os.fspath(data_home)!r}: no {name} data found (expected "
                     f"{name}/{marker}/ under it, or {marker}/ directly).")


def load_viper(data_home) -> Bunch:
    """VIPeR: 632 persons × 2 cameras, 48 × 128 RGB (the re-id benchmark of PCCA §4).

    Parameters
    ----------
    data_home : path-like
        The folder holding ``viper/`` (e.g. ``../shared/data``) or the ``viper`` folder itself,
        with ``images/PPPPCCCC.png`` (``PPPP`` the person 1-632, ``CCCC`` the camera: 1 = A,
        2 = B).

    Returns
    -------
    Bunch
        As :func:`load_image_folder`: ``images`` (1264, 128, 48, 3) uint8, ``ids`` (1-632),
        ``domains`` (camera 1 or 2), ``filenames``; rows sorted by (person, camera).
    """
    folder = _dataset_dir(data_home, "viper", "images")
    b = load_image_folder(folder, VIPER_PATTERN)
    b.DESCR = "VIPeR (Gray et al. 2007): 632 persons x cameras 1 (A) and 2 (B), 48x128 RGB."
    return b


def load_pku_sketch(data_home, size=(64, 160)) -> Bunch:
    """PKU-Sketch-ReID: 200 persons, 2 photos (``domain="photo"``) + 1 sketch (``"sketch"``).

    Parameters
    ----------
    data_home : path-like
        The folder holding ``pku_sketch/`` or the ``pku_sketch`` folder itself, with
        ``photo/ID_CAM_FRAME.jpg`` and ``sketch/ID.jpg``.
    size : (width, height), default=(64, 160)
        All images are resized to this size (the photos are 87-335 px wide and the sketches 400
        px tall; the default keeps their typical 2:5 aspect). ``None`` is refused (mixed sizes).

    Returns
    -------
    Bunch
        As :func:`load_image_folder` with RGB ``images``: 597 images (400 photos, 197 sketches:
        persons 160, 168 and 169 have none), ``ids`` (1-200), ``domains`` ("photo" / "sketch").
    """
    folder = _dataset_dir(data_home, "pku_sketch", "photo")
    if size is None:
        raise ValueError("size must be (width, height): the PKU-Sketch images have different "
                         "sizes.")
    b = load_image_folder(folder, PKU_SKETCH_PATTERN, size=size)
    b.DESCR = ("PKU-Sketch-ReID (Pang et al. 2018): 200 persons, 2 photos + 1 artist's sketch "
               f"each, resized to {tuple(size)} (width, height).")
    return b


_CUFS_SPLITS = ("all", "train", "test")


def load_cufs(data_home, split: str = "all", *, size=None, color: str = "rgb") -> Bunch:
    """CUFS, AR and XM2VTS parts: 418 persons, one photo (``domain="photo"``) and one artist's
    sketch (``"sketch"``) each, 250 × 200 pixels (height × width), aligned faces.

    Parameters
    ----------
    data_home : path-like
        The folder holding ``cufs/`` (e.g. ``../shared/data``) or the ``cufs`` folder itself, with
        ``{train,test}/{photo,sketch}/SET-N.jpg`` (``SET`` = ``ar`` or ``xm2vts``, ``N`` the
        person's number in that set).
    split : {"all", "train", "test"}, default="all"
        The photo-sketch synthesis literature's split (Wang & Tang): ``"train"`` 180 persons
        (AR 80, XM2VTS 100), ``"test"`` 238 (AR 43, XM2VTS 195); ``"all"`` both.
    size : (width, height), optional
        Resize every image (default: the stored 200 × 250).
    color : {"rgb", "gray"}, default="rgb"
        The sketches are grey pictures stored as RGB; ``"gray"`` gives ``(n, h, w)`` arrays.

    Returns
    -------
    Bunch
        As :func:`load_image_folder`: ``images`` uint8, ``ids`` (str, ``"ar-100"``,
        ``"xm2vts-1"`` ...), ``domains`` (``"photo"`` / ``"sketch"``), ``filenames``
        (``"test/photo/ar-1.jpg"`` ...), plus ``split`` (``"train"`` / ``"test"`` per row). Rows
        sorted by (id, domain): each person's photo, then sketch. ``split="all"`` gives 836
        images.
    """
    check_choice(split, "split", _CUFS_SPLITS)
    folder = _dataset_dir(data_home, "cufs", "test")
    pattern = CUFS_PATTERN if split == "all" else CUFS_PATTERN.replace(
        "(?:train|test)", split, 1)
    b = load_image_folder(folder, pattern, size=size, color=color)
    b.split = np.array([f.split("/", 1)[0] for f in b.filenames.tolist()], dtype=str)
    b.DESCR = (f"CUFS (Wang & Tang 2009), AR + XM2VTS parts, split {split!r}: one photo and one "
               "sketch per person, aligned faces.")
    return b


def load_cuhk01(data_home, *, size=None, color: str = "rgb") -> Bunch:
    """CUHK01 (CUHK Campus): 971 persons × 2 cameras × 2 images, 160 × 60 RGB (height × width).

    Parameters
    ----------
    data_home : path-like
        The folder holding ``cuhk01/`` or the ``cuhk01`` folder itself, with
        ``campus/PPPPVVV.png`` (``PPPP`` the person 0001-0971; ``VVV`` 001, 002 from camera A,
        003, 004 from camera B).
    size : (width, height), optional
        Resize every image (e.g. ``(48, 128)`` for the re-id descriptors sized for VIPeR).
    color : {"rgb", "gray"}, default="rgb"

    Returns
    -------
    Bunch
        As :func:`load_image_folder`: 3,884 ``images`` uint8, ``ids`` (1-971), ``domains`` (the
        camera: 1 = A, 2 = B, as :func:`load_viper`), ``filenames``, plus ``shots`` (the image's
        number 1-4 in the file name). Rows sorted by (person, image number).
    """
    folder = _dataset_dir(data_home, "cuhk01", "campus")
    b = load_image_folder(folder, CUHK01_PATTERN, size=size, color=color)
    b.shots = b.domains
    b.domains = np.where(b.shots <= 2, 1, 2).astype(np.int64)
    b.DESCR = ("CUHK01 (Li, Zhao & Wang 2012): 971 persons x cameras 1 (A) and 2 (B) x 2 "
               "images, 60x160 RGB.")
    return b
