"""From loaded images to a dataset of feature rows: one descriptor per image, and the two domains
of an image folder (camera A / B, photo / sketch) paired row by row.

Public through :mod:`crossmetric.datasets` (:func:`describe_images`, :func:`pair_domains`,
:func:`image_views`); ``crossmetric benchmark --images`` / ``--dataset viper`` run on it
(``--descriptor NAME``, ``--descriptor-param NAME=VALUE``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import Bunch

from crossmetric._utils.checks import check_choice

__all__ = ["DESCRIPTORS", "DescriptorError", "descriptor_parameter_names", "make_descriptor",
           "describe_images", "pair_domains", "image_views"]


class _GreyPixels(TransformerMixin, BaseEstimator):
    """The grey levels of each image scaled to [0, 1], one row per image (``"pixels"``).

    The mean of the three channels of RGB images; values divided by 255.
    """

    def fit(self, images, y=None):
        """Nothing to learn; returns ``self``."""
        return self

    def transform(self, images) -> np.ndarray:
        """Grey levels of ``images``, shape (n, h · w), float64."""
        images = np.asarray(images)
        grey = images.mean(axis=-1) if images.ndim == 4 else images
        return grey.reshape(grey.shape[0], -1).astype(np.float64) / 255.0


#: descriptor name -> (its class: a name in :mod:`crossmetric.features` or a class, the
#: parameters that differ from the class's defaults). Faces and sketches: hog, dense-sift
#: (the CML-AUC paper's), lbp and ltp (the CMML paper's: uniform LTP, threshold 5 grey levels, on
#: 10 x 8 cells); re-id: lomo, strips (the PCCA paper's histograms, square-rooted: compared by
#: the Hellinger distance, the input of the paper's PCCA-sqrt), patch-color-sift (the GSM paper's).
#: LOMO and PatchColorSIFT compute in float64 here, the dtype describe_images returns, so that no
#: float32 copy of their wide rows is kept beside it.
_DESCRIPTOR_SPECS: dict[str, tuple[str | type, dict]] = {
    "hog": ("HOG", {}),
    "dense-sift": ("DenseSIFT", {}),
    "lbp": ("LBPGrid", {"grid": (10, 8)}),
    "ltp": ("LBPGrid", {"grid": (10, 8), "threshold": 5}),
    "lomo": ("LOMO", {"dtype": np.float64}),
    "strips": ("StripHistograms", {"normalize": "root"}),
    "patch-color-sift": ("PatchColorSIFT", {"dtype": np.float64}),
    "pixels": (_GreyPixels, {}),
}

#: image descriptors of :func:`describe_images`
DESCRIPTORS = tuple(_DESCRIPTOR_SPECS)


class DescriptorError(ValueError):
    """A descriptor could not describe the images: a bad parameter value, or images too small
    for its cells or patches.

    Parameters
    ----------
    descriptor : str
        The descriptor's name.
    class_name : str
        Its class.
    reason : str
        The class's message (one line).
    """

    def __init__(self, descriptor: str, class_name: str, reason: str):
        self.descriptor, self.class_name, self.reason = descriptor, class_name, reason
        super().__init__(f"descriptor {descriptor!r} ({class_name}): {reason}")


def _descriptor_class(descriptor: str) -> type:
    check_choice(descriptor, "descriptor", DESCRIPTORS)
    cls = _DESCRIPTOR_SPECS[descriptor][0]
    if isinstance(cls, str):
        from crossmetric import features

        cls = getattr(features, cls)
    return cls


def descriptor_parameter_names(descriptor: str) -> list[str]:
    """Constructor parameters of a descriptor's class (what ``params`` may set).

    Parameters
    ----------
    descriptor : str
        One of :data:`DESCRIPTORS`.

    Returns
    -------
    list of str
        Sorted; empty for ``"pixels"``.

    Examples
    --------
    >>> descriptor_parameter_names("ltp")
    ['grid', 'method', 'n_jobs', 'n_points', 'radii', 'threshold']
    """
    return sorted(_descriptor_class(descriptor)._get_param_names())


def make_descriptor(descriptor: str = "hog", params: Mapping | None = None):
    """The unfitted transformer of a descriptor name, its defaults updated by ``params``.

    Parameters
    ----------
    descriptor : str, default="hog"
        One of :data:`DESCRIPTORS` (see :func:`describe_images`).
    params : mapping, optional
        Constructor parameters of the descriptor's class (:func:`descriptor_parameter_names`);
        they win over the defaults of :data:`DESCRIPTORS`' table (e.g. ``ltp``'s threshold).
        Values are checked when the transformer is fitted.

    Returns
    -------
    estimator
        A scikit-learn transformer, ``fit_transform(images)`` → ``(n, n_features)``.

    Raises
    ------
    ValueError
        Unknown descriptor, or a parameter its class does not have (the message lists those
        it has).

    Examples
    --------
    >>> make_descriptor("ltp", {"radii": (1, 2)})
    LBPGrid(grid=(10, 8), radii=(1, 2), threshold=5)
    """
    cls = _descriptor_class(descriptor)
    params = dict(params or {})
    names = sorted(cls._get_param_names())
    for name in params:
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            expected = f"expected one of {', '.join(names)}" if names else "it takes none"
            raise ValueError(f"params: descriptor {descriptor!r} ({cls.__name__}) has no "
                             f"parameter {name!r}{hint}; {expected}.")
    return cls(**{**_DESCRIPTOR_SPECS[descriptor][1], **params})


#: images described at once when :func:`describe_images` reports its progress
PROGRESS_BATCH = 64


def describe_images(images, descriptor: str = "hog", params: Mapping | None = None, *,
                    progress=None) -> np.ndarray:
    """One feature row per image of a stack ``(n, h, w)`` or ``(n, h, w, 3)``.

    Parameters
    ----------
    images : array-like of shape (n, h, w) or (n, h, w, 3)
        Pixels in [0, 255] (uint8 as the loaders return them).
    descriptor : str, default="hog"
        One of :data:`DESCRIPTORS`, each a class of :mod:`crossmetric.features`:

        * faces and sketches: ``"hog"`` (:class:`~crossmetric.features.HOG`),
          ``"dense-sift"`` (:class:`~crossmetric.features.DenseSIFT`, the CML-AUC paper's;
          its three scales need sides of at least 160 pixels), ``"lbp"`` and ``"ltp"``
          (:class:`~crossmetric.features.LBPGrid` on 10 × 8 cells, LBP or the CMML paper's
          local ternary patterns with ``threshold=5``);
        * person re-identification, sized for 48 × 128 crops: ``"lomo"``
          (:class:`~crossmetric.features.LOMO`), ``"strips"``
          (:class:`~crossmetric.features.StripHistograms`, the PCCA paper's) and
          ``"patch-color-sift"`` (:class:`~crossmetric.features.PatchColorSIFT`, the GSM
          paper's; 129,024 features at 48 × 128, more on larger images). ``"lomo"`` and
          ``"patch-color-sift"`` need RGB images;
        * ``"pixels"``: the grey levels scaled to [0, 1].

        scikit-image is needed by all but ``"pixels"``, OpenCV by the SIFT ones.
    params : mapping, optional
        Parameters of the descriptor's class (:func:`make_descriptor`).
    progress : callable, optional
        ``progress(k)`` is called after each batch of ``k`` images (:data:`PROGRESS_BATCH`)
        has been described, e.g. a tqdm bar's ``update``. The rows are the same as without it:
        every descriptor describes each image on its own.

    Returns
    -------
    ndarray of shape (n, n_features), float64

    Raises
    ------
    ValueError
        Unknown descriptor or parameter name; images not one stack.
    DescriptorError
        (a ``ValueError``) the descriptor rejected a parameter value or the image size.

    Examples
    --------
    >>> import numpy as np
    >>> images = np.full((2, 4, 3), 255, dtype=np.uint8)[None].repeat(5, axis=0)
    >>> describe_images(images, "pixels").shape
    (5, 8)
    """
    est = make_descriptor(descriptor, params)
    images = np.asarray(images)
    if images.dtype == object or images.ndim not in (3, 4):
        raise ValueError("images must be one array of shape (n, h, w) or (n, h, w, 3); images "
                         "of different sizes must be resized first (the loaders' size=).")
    try:
        if progress is None:
            F = est.fit_transform(images)
        else:
            est.fit(images[:1])
            parts = []
            for start in range(0, images.shape[0], PROGRESS_BATCH):
                batch = images[start:start + PROGRESS_BATCH]
                parts.append(np.asarray(est.transform(batch), dtype=np.float64))
                progress(batch.shape[0])
            F = np.concatenate(parts) if parts else est.fit_transform(images)
    except (ValueError, TypeError) as exc:  # a parameter value, or the image size
        raise DescriptorError(descriptor, type(est).__name__,
                              " ".join(str(exc).split())) from exc
    return np.asarray(F, dtype=np.float64)


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


def image_views(images, ids, domains=None, *, descriptor: str = "hog",
                descriptor_params: Mapping | None = None, progress=None) -> Bunch:
    """A dataset of feature rows from images, their identities and (optionally) domains.

    No ``domains`` (or one value): one modality, ``X`` = descriptors, ``Y`` = None. Two
    domains: ``X`` holds the first domain's images (sorted order of the values), ``Y`` their
    partners in the second, row-aligned by :func:`pair_domains`.

    Parameters
    ----------
    images : array-like of shape (n, h, w) or (n, h, w, 3)
    ids : array-like of shape (n,)
    domains : array-like of shape (n,), optional
    descriptor : str, default="hog"
        One of :data:`DESCRIPTORS`; see :func:`describe_images`.
    descriptor_params : mapping, optional
        Parameters of the descriptor's class (:func:`make_descriptor`).
    progress : callable, optional
        Handed to :func:`describe_images`.

    Returns
    -------
    Bunch
        ``X``, ``Y`` (None for one modality), ``labels`` (identity codes 0..k-1) and
        ``domain_names`` (None, or the two domain values); with two domains also
        ``instance`` (one id per pair), ``images_x``, ``images_y`` (the paired rows'
        images as given, the pixels their descriptors describe: what an image learner such
        as DeepGSM trains on) and ``descriptor`` (the unfitted transformer that made ``X``
        and ``Y`` from them, :func:`make_descriptor`).

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
        F = describe_images(images, descriptor, descriptor_params, progress=progress)
        codes = np.unique(ids.astype(str), return_inverse=True)[1].astype(np.int64)
        return Bunch(X=F, Y=None, labels=codes, domain_names=None)
    ra, rb, names = pair_domains(ids, domains)
    F = describe_images(images, descriptor, descriptor_params, progress=progress)
    codes = np.unique(ids.astype(str)[ra], return_inverse=True)[1].astype(np.int64)
    data = Bunch(X=F[ra], Y=F[rb], labels=codes, instance=np.arange(ra.size),
                 domain_names=(str(names[0]), str(names[1])),
                 descriptor=make_descriptor(descriptor, descriptor_params))
    data.images_x, data.images_y = images[ra], images[rb]
    return data
