"""DeepGSM's data preparation: pairs → distinct images and identities, and the training rounds.

:func:`pair_identities` turns the pair API's input into the identity-labelled images that the
§4.2 batch generator draws from (given ``groups``, or the connected components of the positive
pairs); :func:`round_data` builds the dataset, the held-out identities of early stopping and
the generator (:class:`~crossmetric.deep.data.CrossDomainIdentitySampler`) of a training run.
"""

from __future__ import annotations

import warnings

import numpy as np

from crossmetric._solvers.early_stopping import auto_identity_count, identity_validation
from crossmetric._utils.checks import as_float_array, user_stacklevel
from crossmetric.deep.augment import make_augmentation
from crossmetric.deep.data import (
    CrossDomainIdentitySampler,
    CrossDomainImages,
    image_layout,
    is_file_list,
    subset,
)
from crossmetric.deep.sampler import identities_from_pairs, pair_completeness
from crossmetric.pairs._identity_draws import hold_out_identities
from crossmetric.pairs._pair_data import PairData

__all__ = ["check_images", "check_layout", "dedupe", "identity_codes", "pair_identities",
           "round_data", "training_sources"]


def dedupe(images: np.ndarray, idx: np.ndarray):
    """Distinct images among ``images[idx]``, their rows in ``images``, and each pair's image."""
    used, inv = np.unique(idx, return_inverse=True)
    sub = images[used]
    flat = sub.reshape(sub.shape[0], -1)
    uniq, first, inv2 = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    if uniq.shape[0] == sub.shape[0]:
        return sub, used, inv.reshape(-1)
    return sub[first], used[first], inv2.reshape(-1)[inv.reshape(-1)]


def check_images(A, name: str) -> np.ndarray:
    """Images ``(n, h, w)`` or ``(n, h, w, c)``; uint8 kept, other types as float32."""
    arr = np.asarray(A) if not isinstance(A, np.ndarray) else A
    if arr.dtype != np.uint8:
        arr = as_float_array(arr, name)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    if arr.ndim not in (3, 4):
        raise ValueError(f"{name} must be a 3-D array of grey images (n, h, w) or a 4-D "
                         f"array (n, h, w, channels), got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no samples (shape {arr.shape}).")
    return arr


def identity_codes(ids_x: np.ndarray, ids_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels of the two domains as int64 codes of one shared numbering."""
    codes = np.unique(np.r_[ids_x, ids_y], return_inverse=True)[1].reshape(-1)
    return codes[:ids_x.size].astype(np.int64), codes[ids_x.size:].astype(np.int64)


def check_groups(groups, data: PairData) -> tuple[np.ndarray, np.ndarray]:
    """``groups=(ids_x, ids_y)`` of ``fit`` as codes, one label per image of each domain."""
    if not (isinstance(groups, (tuple, list)) and len(groups) == 2):
        raise ValueError("groups must be a tuple (ids_x, ids_y) with the identity of every "
                         f"image of each domain, got {type(groups).__name__}.")
    out = []
    for g, A, name in ((groups[0], data.X, "groups[0] (ids_x)"),
                       (groups[1], data.Y, "groups[1] (ids_y)")):
        g = np.asarray(g)
        if g.ndim != 1 or g.shape[0] != A.shape[0]:
            raise ValueError(f"{name} must be 1-D with one label per image ({A.shape[0]}), "
                             f"got shape {g.shape}.")
        out.append(g)
    return identity_codes(out[0], out[1])


def pair_identities(data: PairData, y: np.ndarray, groups):
    """``(X, ids_x, Y, ids_y)``: the distinct images of the pairs and their identities.

    Identities are ``groups`` when given (a warning counts the pairs that disagree), else
    the connected components of the positive pairs (warning when the positives look sampled,
    so that the components may be fragments of coarser classes).
    """
    X, rows_x, ix = dedupe(data.X, data.ix)
    Y, rows_y, iy = dedupe(data.Y, data.iy)
    if groups is not None:
        ids_x, ids_y = check_groups(groups, data)
        ids_x, ids_y = ids_x[rows_x], ids_y[rows_y]
        n_conflicts = int(np.sum((ids_x[ix] == ids_y[iy]) != (y == 1)))
        if n_conflicts:
            warnings.warn(
                f"{n_conflicts} pair label(s) disagree with groups (a +1 pair across two "
                "groups or a -1 pair within one); DeepGSM's batch generator follows groups.",
                UserWarning, stacklevel=user_stacklevel())
        return X, ids_x, Y, ids_y
    ids_x, ids_y, n_conflicts = identities_from_pairs(X.shape[0], Y.shape[0], ix, iy, y)
    if n_conflicts:
        warnings.warn(
            f"{n_conflicts} pair(s) labelled -1 join images that positive pairs put in "
            "one identity; DeepGSM's batch generator treats them as the same identity.",
            UserWarning, stacklevel=user_stacklevel(),
        )
    share = pair_completeness(ids_x, ids_y, ix, iy, y)
    if share < 1.0:
        n_ids = np.intersect1d(ids_x, ids_y).size
        warnings.warn(
            f"DeepGSM inferred {n_ids} identities from the positive pairs (connected "
            f"components), but the positives list only {100 * share:.1f}% of the "
            "same-identity pairs within them: the pairs look sampled, so these "
            "identities may be fragments of fewer classes, and the batch generator "
            "would treat images of one class as negatives. Pass the identity labels: "
            "fit(pairs, y, groups=(ids_x, ids_y)).", UserWarning,
            stacklevel=user_stacklevel())
    return X, ids_x, Y, ids_y


def training_sources(X, ids_x, Y, ids_y):
    """``fit_identities``' input checked: ``(x, codes_x, y, codes_y)``, files kept as lists."""
    srcs = []
    for A, name in ((X, "X"), (Y, "Y")):
        if is_file_list(A):
            srcs.append(list(A))
        elif isinstance(A, (list, tuple)) and len(A) == 0:
            raise ValueError(f"{name} is empty.")
        else:
            srcs.append(check_images(A, name))
    ids = []
    for g, A, name in ((ids_x, srcs[0], "ids_x"), (ids_y, srcs[1], "ids_y")):
        g = np.asarray(g)
        if g.ndim != 1 or g.shape[0] != len(A):
            raise ValueError(f"{name} must be 1-D with one label per image ({len(A)}), got "
                             f"shape {g.shape}.")
        ids.append(g)
    cx, cy = identity_codes(ids[0], ids[1])
    return srcs[0], cx, srcs[1], cy


def check_layout(x, y, input_shape, backbone) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(input_shape, channels)`` of the two training sources."""
    (sx, cx), (sy, cy) = image_layout(x, "X"), image_layout(y, "Y")
    files = is_file_list(x) or is_file_list(y)
    want = None if input_shape is None else tuple(int(v) for v in input_shape)
    if want is not None and not files and want != sx:
        raise ValueError(f"input_shape={tuple(input_shape)} but the images are "
                         f"of shape {sx}.")
    shape = want or sx
    if not files and sx != sy and not isinstance(backbone, (tuple, list)):
        raise ValueError(
            f"DeepGSM's shared sub-network needs images of one size in both domains; got "
            f"{sx} for X and {sy} for Y (resize them first)."
        )
    if files:
        for src, s0, nm in ((x, sx, "X"), (y, sy, "Y")):
            if not is_file_list(src) and s0 != shape:
                raise ValueError(f"{nm} images are of shape {s0}, expected {shape}.")
    return shape, (cx, cy)


def _hold_out(x, ids_x, y, ids_y, fraction: float, seed: int):
    """Early stopping's held-out identities: ``(x, ids_x, y, ids_y)`` left, ``val``
    (their images, at most :data:`~crossmetric._solvers.early_stopping.MAX_VALIDATION_SAMPLES`
    a side, a seeded subset above, as the learners' hold-out), and the rows of the inputs
    each keeps ``(training x, training y, held-out x, held-out y)``."""
    usable = np.intersect1d(ids_x, ids_y)
    n_val = max(2, int(round(float(fraction) * usable.size)))
    if usable.size - n_val < 2:
        raise ValueError(f"early_stopping needs at least 2 training and 2 validation "
                         f"identities; there are {usable.size} in all.")
    rs = np.random.RandomState(np.random.SeedSequence([seed, 7]).generate_state(1))
    # the one identity draw of the library's splitters and early-stopping hold-out
    held, _ = hold_out_identities(usable, n_val, rs)
    mx, my = np.isin(ids_x, held), np.isin(ids_y, held)
    # scored as the learners' hold-out is: at most MAX_VALIDATION_SAMPLES images a side
    rows_x, rows_y = np.flatnonzero(mx), np.flatnonzero(my)
    held_out, kx, ky = identity_validation(ids_x[mx], ids_y[my], rs)
    val = (subset(x, rows_x[kx]), held_out.ids_x, subset(y, rows_y[ky]), held_out.ids_y)
    rows = (np.flatnonzero(~mx), np.flatnonzero(~my), rows_x[kx], rows_y[ky])
    x, ids_x = subset(x, rows[0]), ids_x[~mx]
    y, ids_y = subset(y, rows[1]), ids_y[~my]
    return (x, ids_x, y, ids_y), val, rows


def holds_out(p, ids_x, ids_y) -> bool:
    """Whether a training run holds out identities: ``early_stopping`` itself, or for
    ``"auto"`` the learners' rule on the identities with images in both domains
    (:func:`crossmetric._solvers.early_stopping.auto_identity_count`)."""
    if isinstance(p.early_stopping, str):
        return auto_identity_count(np.intersect1d(ids_x, ids_y).size)
    return bool(p.early_stopping)


def round_data(p, x, ids_x, y, ids_y, shape, channels, seed: int, rank: int, world: int,
               descriptors=None):
    """``(ds, sampler, ids_x, ids_y, val, k, n_pairs, desc)`` of a training run of
    parameters ``p``.

    ``val`` is the held-out identities' data (``early_stopping``) or ``None``; ``ids_x``,
    ``ids_y`` those of the training images; ``k`` the identities per round. ``descriptors``:
    the descriptor rows ``(u_x, u_y)`` of ``x`` and ``y`` (a descriptor branch,
    :mod:`crossmetric.deep.descriptor`) or None; ``desc`` is then ``(rows of the training
    images, rows of val's images or None)``, each a pair in the images' order.
    """
    val, rows = None, None
    if holds_out(p, ids_x, ids_y):
        (x, ids_x, y, ids_y), val, rows = _hold_out(x, ids_x, y, ids_y,
                                                   p.validation_fraction, seed)
    desc = None
    if descriptors is not None:
        ux, uy = descriptors
        desc = (((ux, uy), None) if rows is None
                else ((ux[rows[0]], uy[rows[1]]), (ux[rows[2]], uy[rows[3]])))
    tf = make_augmentation(p.augment, shape)
    ds = CrossDomainImages(x, ids_x, y, ids_y, size=shape, channels=channels,
                           transform_x=tf, transform_y=tf,
                           cache_bytes=int(float(p.image_cache_mb) * 2**20))
    k = min(int(p.n_identities), np.intersect1d(ids_x, ids_y).size)
    n_pairs = p.n_pairs
    if n_pairs is None:
        n_pairs = max(2, (k * (int(p.n_images_x) + int(p.n_images_y))) // 2)
    sampler = CrossDomainIdentitySampler(
        ids_x, ids_y, int(p.n_identities), int(p.n_images_x), int(p.n_images_y),
        seed=seed, rank=rank, world_size=world, mode=p.batch_mode, n_pairs=int(n_pairs))
    return ds, sampler, ids_x, ids_y, val, k, n_pairs, desc
