"""From loaded images to a dataset of feature rows: one descriptor per image, and the two domains
of an image folder (camera A / B, photo / sketch) paired row by row.

Public through :mod:`crossmetric.datasets` (:func:`describe_images`, :func:`pair_domains`,
:func:`image_views`); ``crossmetric benchmark --images`` / ``--dataset viper`` run on it.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch

from crossmetric._checks import check_choice

__all__ = ["DESCRIPTORS", "describe_images", "pair_domains", "image_views"]

#: image descriptors of :func:`describe_images`
DESCRIPTORS = ("hog", "strips", "pixels")


def describe_images(images, descriptor: str = "hog") -> np.ndarray:
    """One feature row per image of a stack ``(n, h, w)`` or ``(n, h, w, 3)``.

    Parameters
    ----------
    images : array-like of shape (n, h, w) or (n, h, w, 3)
        Pixels in [0, 255] (uint8 as the loaders return them).
    descriptor : {"hog", "strips", "pixels"}, default="hog"
        ``"hog"``: :class:`crossmetric.features.HOG`; ``"strips"``: colour and LBP histograms of
        horizontal strips (:class:`crossmetric.features.StripHistograms`, the re-id
        descriptor); ``"pixels"``: the grey levels scaled to [0, 1]. The first two need
        scikit-image.

    Returns
    -------
    ndarray of shape (n, n_features), float64

    Examples
    --------
    >>> import numpy as np
    >>> images = np.full((2, 4, 3), 255, dtype=np.uint8)[None].repeat(5, axis=0)
    >>> describe_images(images, "pixels").shape
    (5, 8)
    """
    check_choice(descriptor, "descriptor", DESCRIPTORS)
    images = np.asarray(images)
    if images.dtype == object or images.ndim not in (3, 4):
        raise ValueError("images must be one array of shape (n, h, w) or (n, h, w, 3); images "
                         "of different sizes must be resized first (the loaders' size=).")
    if descriptor == "pixels":
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        return grey.reshape(grey.shape[0], -1).astype(np.float64) / 255.0
    from crossmetric import features

    cls = {"hog": features.HOG, "strips": features.StripHistograms}[descriptor]
    return np.asarray(cls().fit_transform(images), dtype=np.float64)


def pair_domains(ids, domains, *, min_pairs: int = 4):
    """Rows of two domains paired by identity.

    The ``k``-th image of an identity in one domain is paired with its ``k``-th image in the
    other (in row order); images without a partner are left out.

    Parameters
    ----------
    ids, domains : array-like of shape (n,)
        Identity and domain of each image; ``domains`` must take exactly two values.
    min_pairs : int, default=4
        Fewer matched pairs raise ``ValueError``.

    Returns
    -------
    rows_a, rows_b : ndarray of int of shape (n_pairs,)
        Rows of the first domain (in sorted order of the domain values) and of their partners
        in the second, identity by identity (identities in sorted order).
    names : ndarray of str of shape (2,)
        The two domain values, sorted.

    Examples
    --------
    >>> a, b, names = pair_domains([1, 1, 2, 2, 2], ["a", "b", "a", "b", "b"], min_pairs=1)
    >>> a.tolist(), b.tolist(), names.tolist()
    ([0, 2], [1, 3], ['a', 'b'])
    """
    sid, sdom = np.asarray(ids).astype(str), np.asarray(domains).astype(str)
    if sid.shape != sdom.shape or sid.ndim != 1:
        raise ValueError(f"ids and domains must be 1-d of one length, got shapes {sid.shape} "
                         f"and {sdom.shape}.")
    names = np.unique(sdom)
    if names.size != 2:
        raise ValueError(f"the 'domain' values must be exactly two (the two modalities), got "
                         f"{names.size}: {', '.join(names[:5])}.")
    rows_a, rows_b = [], []
    for ident in np.unique(sid):
        a = np.flatnonzero((sid == ident) & (sdom == names[0]))
        b = np.flatnonzero((sid == ident) & (sdom == names[1]))
        m = min(a.size, b.size)
        rows_a += a[:m].tolist()
        rows_b += b[:m].tolist()
    if len(rows_a) < min_pairs:
        raise ValueError(f"only {len(rows_a)} identities have an image in both domains "
                         f"{names[0]!r} and {names[1]!r}.")
    return np.asarray(rows_a, dtype=np.int64), np.asarray(rows_b, dtype=np.int64), names


def _one_domain(domains) -> bool:
    if domains is None:
        return True
    doms = np.asarray(domains)
    if doms.size == 0 or all(d is None for d in doms.tolist()):
        return True
    return np.unique(doms.astype(str)).size == 1


def image_views(images, ids, domains=None, *, descriptor: str = "hog") -> Bunch:
    """A dataset of feature rows from images, their identities and (optionally) domains.

    No ``domains`` (or one value): one modality, ``X`` = descriptors, ``Y`` = None. Two
    domains: ``X`` holds the first domain's images (sorted order of the values), ``Y`` their
    partners in the second, row-aligned by :func:`pair_domains`.

    Parameters
    ----------
    images : array-like of shape (n, h, w) or (n, h, w, 3)
    ids : array-like of shape (n,)
    domains : array-like of shape (n,), optional
    descriptor : {"hog", "strips", "pixels"}, default="hog"
        See :func:`describe_images`.

    Returns
    -------
    Bunch
        ``X``, ``Y`` (None for one modality), ``labels`` (identity codes 0..k-1) and
        ``domain_names`` (None, or the two domain values); with two domains also
        ``instance`` (one id per pair) and ``images_x``, ``images_y`` (grey levels in [0, 1]
        of the paired rows).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> images = rng.integers(0, 256, (8, 4, 3), dtype=np.uint8)
    >>> d = image_views(images, [0, 0, 1, 1, 2, 2, 3, 3], list("abababab"), descriptor="pixels")
    >>> d.X.shape, d.Y.shape, d.labels.tolist(), d.domain_names
    ((4, 12), (4, 12), [0, 1, 2, 3], ('a', 'b'))
    """
    images = images if isinstance(images, np.ndarray) else np.asarray(images)
    ids = np.asarray(ids)
    if ids.size == 0:
        raise ValueError("no image matched.")
    if _one_domain(domains):
        F = describe_images(images, descriptor)
        codes = np.unique(ids.astype(str), return_inverse=True)[1].astype(np.int64)
        return Bunch(X=F, Y=None, labels=codes, domain_names=None)
    ra, rb, names = pair_domains(ids, domains)
    F = describe_images(images, descriptor)
    codes = np.unique(ids.astype(str)[ra], return_inverse=True)[1].astype(np.int64)
    data = Bunch(X=F[ra], Y=F[rb], labels=codes, instance=np.arange(ra.size),
                 domain_names=(str(names[0]), str(names[1])))
    grey = images.mean(axis=-1) if images.ndim == 4 else images
    grey = grey.astype(np.float64) / (255.0 if grey.max() > 1 else 1.0)
    data.images_x, data.images_y = grey[ra], grey[rb]
    return data
