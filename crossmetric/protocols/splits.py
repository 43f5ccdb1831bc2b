"""Identity-grouped splits of a labelled dataset: the one splitter of the library.

:func:`verification_splits` (k folds of objects) and :func:`identification_splits` (repeated
probe / gallery draws) are the benchmark's protocols; :func:`kfold_pairs` splits a fixed set
of labelled pairs (LFW). Every random choice is drawn up front from ``random_state``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import GroupKFold, StratifiedKFold
from sklearn.utils import check_random_state

from crossmetric._utils.checks import check_pair_labels, check_positive_int, user_stacklevel
from crossmetric.pairs import make_pairs

__all__ = ["Split", "kfold_pairs", "verification_splits", "identification_splits",
           "given_identification_splits",
           "deal_identities", "hold_out_identities", "object_folds", "inner_pair_splits",
           "reid_splits", "fixed_split"]


# the shared random draws live below the layers that use them (pairs, the solvers' hold-out)
from crossmetric.pairs._identity_draws import deal_identities, hold_out_identities  # noqa: E402


def _stratified_folds(codes: np.ndarray, n_folds: int, seed: int) -> list:
    """``(train, test)`` folds of the rows stratified by identity code (shuffled with ``seed``);
    an identity rarer than ``n_folds`` is missing from some folds, silently."""
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return list(skf.split(np.zeros(codes.size), codes))


@dataclass
class Split:
    """One train/test unit of a protocol.

    ``train_pairs`` index rows of ``(X, Y)`` (column 0: ``X``, column 1: ``Y``). Verification
    splits carry ``test_pairs`` / ``test_y`` and, in ``probe_rows``, the fold's held-out rows;
    identification splits ``probe_rows`` (rows of ``X``) and ``gallery_rows`` (rows of ``Y``).
    ``seed`` is handed to an estimator whose ``random_state`` is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import Split
    >>> sp = Split("verification", 0, np.array([[0, 1]]), np.array([1]))
    >>> sp.protocol, sp.train_pairs.shape
    ('verification', (1, 2))
    """

    protocol: str
    index: int
    train_pairs: np.ndarray
    train_y: np.ndarray
    test_pairs: np.ndarray | None = None
    test_y: np.ndarray | None = None
    probe_rows: np.ndarray | None = None
    gallery_rows: np.ndarray | None = None
    seed: int = 0


def kfold_pairs(y, n_folds: int = 10, *, folds=None, random_state=None
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """k-fold split of a fixed set of labelled pairs (LFW View 2 style).

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        +1 / -1 labels; folds are stratified so that each has both.
    n_folds : int, default=10
    folds : array-like of shape (n_pairs,), optional
        Predefined fold of every pair (e.g. ``read_lfw_pairs(...).fold``); overrides
        ``n_folds`` and ``random_state``.
    random_state : int, RandomState or None
        Shuffles the pairs before the stratified split.

    Returns
    -------
    list of (train_index, test_index)
        Test folds are disjoint and together cover every pair.

    Examples
    --------
    >>> from crossmetric.protocols import kfold_pairs
    >>> folds = kfold_pairs([1, 1, 1, -1, -1, -1], n_folds=3, random_state=0)
    >>> [test.size for _, test in folds]
    [2, 2, 2]
    """
    y = check_pair_labels(y)
    if folds is not None:
        folds = np.asarray(folds)
        if folds.shape != y.shape:
            raise ValueError(f"folds must have one entry per pair ({y.shape[0]}), got shape "
                             f"{folds.shape}.")
        ids = np.unique(folds)
        if ids.size < 2:
            raise ValueError("folds must name at least two different folds.")
        return [(np.flatnonzero(folds != f), np.flatnonzero(folds == f)) for f in ids]
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True,
                          random_state=check_random_state(random_state).randint(2**31 - 1))
    return [(tr, te) for tr, te in skf.split(np.zeros(y.size), y)]


def _pairs_among(rows: np.ndarray, labels: np.ndarray, *, cross_modal: bool, n_negatives: int,
                 max_positives: int | None, rng) -> tuple[np.ndarray, np.ndarray]:
    """``make_pairs`` on a subset of rows, returned as indices into the full arrays."""
    lab = labels[rows]
    pairs, y = make_pairs(lab, lab if cross_modal else None, n_negatives=n_negatives,
                          max_positives=max_positives, random_state=rng)
    return rows[pairs], y


def _sample_folds(labels: np.ndarray, n_folds: int, split: str, rng) -> list[np.ndarray]:
    """Test rows of each fold: identity-disjoint or stratified by identity."""
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= max(20, 2 * n_folds) else "sample"
    if split == "identity":
        if ids.size < 2 * n_folds:
            raise ValueError(
                f"split='identity' needs at least 2 identities per fold: {ids.size} "
                f"identities for n_folds={n_folds}."
            )
        fold = deal_identities(ids.size, n_folds, rng)[codes]
        return [np.flatnonzero(fold == f) for f in range(n_folds)]
    if split != "sample":
        raise ValueError(f"split must be 'auto', 'identity' or 'sample', got {split!r}.")
    min_count = np.bincount(codes).min()
    if min_count < n_folds:
        warnings.warn(f"an identity has only {min_count} samples, fewer than n_folds="
                      f"{n_folds}; some folds lack it.", UserWarning, stacklevel=user_stacklevel())
    return [te for _, te in _stratified_folds(codes, n_folds, rng.randint(2**31 - 1))]


def verification_splits(labels, n_folds: int = 10, *, cross_modal: bool = True,
                        n_negatives: int = 1, n_test_negatives: int = 1,
                        max_train_positives: int | None = 2000,
                        max_test_positives: int | None = 1000, split: str = "auto",
                        random_state=None) -> list[Split]:
    """k-fold verification on a labelled dataset whose row ``r`` of ``X`` and ``Y`` is one object.

    The rows are split into ``n_folds`` parts. ``split="identity"`` puts every identity in one
    part only (LFW: "people cannot be represented in more than one set"); ``"sample"``
    stratifies the rows by identity (each part holds every identity -- the only choice when
    there are few identities, such as the 10 digit classes); ``"auto"`` takes ``identity`` when
    there are at least 20 identities and two per fold, else ``sample``.

    Fold ``k`` trains on pairs drawn among the other parts (``n_negatives`` negatives per
    positive, at most ``max_train_positives`` positives) and is tested on pairs drawn among its
    own rows (``n_test_negatives`` per positive, at most ``max_test_positives``; the default 1
    makes the test set balanced as in LFW and CMML, so that the median-threshold accuracy sits
    at the EER).

    Returns
    -------
    list of Split
        ``protocol="verification"``. The test rows of the folds are disjoint and cover every row.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import verification_splits
    >>> labels = np.repeat(np.arange(6), 5)
    >>> splits = verification_splits(labels, n_folds=3, random_state=0)
    >>> len(splits), splits[0].protocol, sorted(set(splits[0].test_y.tolist()))
    (3, 'verification', [-1, 1])
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError(f"labels must be a 1-D array of at least 4 identities, got shape "
                         f"{labels.shape}.")
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    rng = check_random_state(random_state)
    parts = _sample_folds(labels, n_folds, split, rng)
    out = []
    for k, test_rows in enumerate(parts):
        train_rows = np.sort(np.concatenate([p for j, p in enumerate(parts) if j != k]))
        test_rows = np.sort(test_rows)
        tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_train_positives,
                                  rng=rng)
        te_p, te_y = _pairs_among(test_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_test_negatives,
                                  max_positives=max_test_positives, rng=rng)
        out.append(Split("verification", k, tr_p, tr_y, test_pairs=te_p, test_y=te_y,
                         probe_rows=test_rows, seed=int(rng.randint(2**31 - 1))))
    return out


def identification_splits(labels, n_repeats: int = 10, *, test_size: float | int = 0.3,
                          cross_modal: bool = True, n_negatives: int = 1,
                          max_train_positives: int | None = 2000, split: str = "auto",
                          random_state=None) -> list[Split]:
    """Repeated random gallery / probe splits (VIPeR in PCCA §4.2, CUFSF in CML-AUC §IV).

    Each repetition puts ``p`` identities (``split="identity"``; ``test_size`` is ``p`` when an
    integer, a fraction of the identities when a float) or a stratified fraction of the rows
    (``split="sample"``, for datasets with few identities) in the test set and trains on pairs
    drawn among the others. The test objects' first modality (rows of ``X``) is the probe set
    and their second modality (rows of ``Y``) the gallery -- as photo probes against a sketch
    gallery in CUFSF. ``"auto"`` takes ``identity`` when there are at least 20 identities.
    With ``cross_modal=False`` (one modality) the gallery is one random sample per test
    identity and the identity's other test samples are the probes ("single-shot" gallery).

    Returns
    -------
    list of Split
        ``protocol="identification"`` with ``probe_rows`` and ``gallery_rows``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import identification_splits
    >>> labels = np.repeat(np.arange(30), 2)
    >>> sp = identification_splits(labels, n_repeats=2, test_size=10, random_state=0)[0]
    >>> sp.probe_rows.size, np.unique(labels[sp.gallery_rows]).size
    (20, 10)
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError(f"labels must be a 1-D array of at least 4 identities, got shape "
                         f"{labels.shape}.")
    n_repeats = check_positive_int(n_repeats, "n_repeats")
    rng = check_random_state(random_state)
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= 20 else "sample"
    if split not in ("identity", "sample"):
        raise ValueError(f"split must be 'auto', 'identity' or 'sample', got {split!r}.")
    units = ids.size if split == "identity" else labels.size
    if isinstance(test_size, bool) or not isinstance(test_size, int | float | np.number):
        raise ValueError(f"test_size must be a fraction in (0, 1) or a count, got {test_size!r}.")
    n_test = int(round(test_size * units)) if isinstance(test_size, float) else int(test_size)
    if not 2 <= n_test <= units - 2:
        raise ValueError(f"test_size={test_size!r} gives {n_test} test "
                         f"{'identities' if split == 'identity' else 'rows'} out of {units}; "
                         "at least 2 must be in each of the test and training sets.")
    out = []
    for k in range(n_repeats):
        if split == "identity":
            test_ids, _ = hold_out_identities(np.arange(ids.size), n_test, rng)
            is_test = np.isin(codes, test_ids)
        else:
            order = rng.permutation(labels.size)
            # stratified: the same fraction of every identity
            is_test = np.zeros(labels.size, bool)
            frac = n_test / labels.size
            for c in range(ids.size):
                rows = order[codes[order] == c]
                is_test[rows[: max(1, int(round(frac * rows.size)))]] = True
        test_rows, train_rows = np.flatnonzero(is_test), np.flatnonzero(~is_test)
        tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_train_positives,
                                  rng=rng)
        if cross_modal:
            probe_rows, gallery_rows = test_rows, test_rows.copy()
        else:
            probe_rows, gallery_rows = _single_shot_gallery(test_rows, labels, rng)
        out.append(Split("identification", k, tr_p, tr_y, probe_rows=probe_rows,
                         gallery_rows=gallery_rows, seed=int(rng.randint(2**31 - 1))))
    return out


def fixed_split(labels, train, *, protocol: str = "identification", cross_modal: bool = True,
                n_negatives: int = 1, max_train_positives: int | None = 2000,
                max_test_positives: int | None = 1000, random_state=None) -> Split:
    """One split whose training and test rows are given, not drawn (a published split).

    The training pairs are drawn among the training rows as in the random splits (positives
    within an identity or category, ``n_negatives`` negatives each, at most
    ``max_train_positives`` positives). ``protocol="verification"``: test pairs among the
    test rows (``max_test_positives``, one negative each); ``"identification"`` and
    ``"retrieval"``: the test rows are the probes (rows of ``X``) and the gallery (rows of
    ``Y``); with ``cross_modal=False`` identification takes a single-shot gallery.

    Parameters
    ----------
    labels : array-like of shape (n_rows,)
    train : array-like
        Boolean mask of the training rows (``n_rows`` entries), or their integer indices;
        every other row is a test row.

    Returns
    -------
    Split
        ``index=0``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import fixed_split
    >>> labels = np.repeat(np.arange(4), 3)
    >>> sp = fixed_split(labels, np.arange(12) < 6, protocol="retrieval", random_state=0)
    >>> sp.probe_rows.tolist(), bool(np.isin(sp.train_pairs, np.arange(6)).all())
    ([6, 7, 8, 9, 10, 11], True)
    """
    labels = np.asarray(labels)
    if protocol not in ("verification", "identification", "retrieval"):
        raise ValueError(f"protocol must be 'verification', 'identification' or 'retrieval', "
                         f"got {protocol!r}.")
    is_train = _train_mask(train, labels.size)
    train_rows, test_rows = np.flatnonzero(is_train), np.flatnonzero(~is_train)
    if train_rows.size < 2 or test_rows.size < 2:
        raise ValueError(f"train must leave at least 2 rows on each side, got "
                         f"{train_rows.size} training and {test_rows.size} test rows.")
    rng = check_random_state(random_state)
    tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                              n_negatives=n_negatives, max_positives=max_train_positives,
                              rng=rng)
    if protocol == "verification":
        te_p, te_y = _pairs_among(test_rows, labels, cross_modal=cross_modal, n_negatives=1,
                                  max_positives=max_test_positives, rng=rng)
        return Split("verification", 0, tr_p, tr_y, test_pairs=te_p, test_y=te_y,
                     probe_rows=test_rows, seed=int(rng.randint(2**31 - 1)))
    if cross_modal or protocol == "retrieval":
        probe_rows, gallery_rows = test_rows, test_rows.copy()
    else:
        probe_rows, gallery_rows = _single_shot_gallery(test_rows, labels, rng)
    return Split(protocol, 0, tr_p, tr_y, probe_rows=probe_rows, gallery_rows=gallery_rows,
                 seed=int(rng.randint(2**31 - 1)))


def _train_mask(train, n_rows: int) -> np.ndarray:
    """``train`` (a boolean mask or integer row indices) as a boolean mask of ``n_rows``."""
    arr = np.asarray(train)
    if arr.dtype == bool:
        if arr.shape != (n_rows,):
            raise ValueError(f"train as a boolean mask must have one entry per row "
                             f"({n_rows}), got shape {arr.shape}.")
        return arr.copy()
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"train must be a boolean mask or integer row indices, got dtype "
                         f"{arr.dtype} and shape {arr.shape}.")
    if arr.size and (arr.min() < 0 or arr.max() >= n_rows):
        raise ValueError(f"train indices must lie in 0..{n_rows - 1}, got "
                         f"{int(arr.min())}..{int(arr.max())}.")
    if np.unique(arr).size != arr.size:
        raise ValueError("train indices must not repeat a row.")
    mask = np.zeros(n_rows, bool)
    mask[arr] = True
    return mask


def _single_shot_gallery(test_rows: np.ndarray, labels: np.ndarray, rng
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Single-modal identification: one random sample of each test identity forms the
    gallery, the identity's other samples are probes (identities with one test sample are
    gallery distractors)."""
    order = test_rows[rng.permutation(test_rows.size)]
    _, first = np.unique(labels[order], return_index=True)
    is_gallery = np.zeros(order.size, bool)
    is_gallery[first] = True
    probes, gallery = np.sort(order[~is_gallery]), np.sort(order[is_gallery])
    if probes.size == 0:
        raise ValueError("single-modal identification needs test identities with at least two "
                         "samples (one for the gallery, one probe).")
    return probes, gallery


# ------------------------------------------------ inner folds of model selection
def object_folds(labels, n_splits: int = 3, *, group: str = "identity",
                 random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_splits`` (train, validation) splits of objects, grouped by identity or by object.

    Parameters
    ----------
    labels : array-like of shape (n_objects,)
        Identity of every object.
    n_splits : int, default=3
    group : {"identity", "sample"}, default="identity"
        ``"identity"``: an identity's objects are all in one validation fold (shuffled
        :class:`~sklearn.model_selection.GroupKFold`); ``"sample"``: folds of objects stratified
        by identity.
    random_state : int, RandomState or None

    Returns
    -------
    list of (train_index, validation_index)
    """
    labels = np.asarray(labels)
    n_splits = check_positive_int(n_splits, "n_splits", minimum=2)
    rng = check_random_state(random_state)
    _, codes = np.unique(labels, return_inverse=True)
    seed = rng.randint(2**31 - 1)
    if group == "identity":
        if codes.max() + 1 < n_splits:
            raise ValueError(f"group='identity' needs at least n_splits={n_splits} identities, "
                             f"got {codes.max() + 1}.")
        cv = GroupKFold(n_splits, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(labels.size), groups=codes))
    if group == "sample":
        return _stratified_folds(codes, n_splits, seed)   # an identity rarer than n_splits
    raise ValueError(f"group must be 'identity' or 'sample', got {group!r}.")


def inner_pair_splits(labels, n_splits: int = 3, *, group: str = "identity",
                      cross_modal: bool = True, n_negatives: int = 1,
                      max_positives: int | None = 1000, random_state=None) -> list[tuple]:
    """Pairs among each side of :func:`object_folds`: ``(tr_pairs, tr_y, va_pairs, va_y)``.

    Pair indices refer to the objects (rows) given, as in the outer protocols: column 0 a row
    of ``X``, column 1 a row of ``Y`` (the same object list). Validation pairs get at most
    ``max_positives`` positives too, and ``n_negatives`` negatives per positive.
    """
    labels = np.asarray(labels)
    rng = check_random_state(random_state)
    out = []
    for tr, va in object_folds(labels, n_splits, group=group, random_state=rng):
        part = []
        for rows in (np.sort(tr), np.sort(va)):
            part += list(_pairs_among(rows, labels, cross_modal=cross_modal,
                                      n_negatives=n_negatives, max_positives=max_positives,
                                      rng=rng))
        if np.unique(part[1]).size < 2 or np.unique(part[3]).size < 2:
            raise ValueError("an inner fold has pairs of one class only; use fewer n_splits "
                             "or more objects per identity.")
        out.append(tuple(part))
    return out


# ------------------------------------------------------------ re-identification
def reid_splits(ids, domains=None, n_test: int = 316, *, n_negatives: int = 1,
                n_splits: int = 10, random_state=None) -> list[Split]:
    """Random train / test splits of a re-identification dataset (PCCA §4).

    Parameters
    ----------
    ids : array-like of shape (n_images,)
        Person of every image. Every person needs at least two images.
    domains : array-like of shape (n_images,), optional
        Camera of every image: the positive training pair and the probe / gallery images of a
        test person are taken from two different cameras when the person has images in two.
    n_test : int, default=316
        ``p``, the number of test persons (PCCA: 316 or 532 of VIPeR's 632).
    n_negatives : int, default=1
        ``n⁻``, negative training pairs per training person: a random image of the person with
        a random image of a random other training person, no pair drawn twice.
    n_splits : int, default=10
    random_state : int, RandomState or None

    Returns
    -------
    list of Split
        ``protocol="identification"``; ``train_pairs`` (one positive per training person, then
        its negatives) index images, ``train_y`` ±1, ``probe_rows`` and ``gallery_rows`` one
        image per test person each, in the same person order.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"ids must be a non-empty 1-D array, got shape {ids.shape}.")
    dom = np.zeros(ids.size, dtype=np.int64) if domains is None else np.asarray(domains)
    if dom.shape != ids.shape:
        raise ValueError(f"domains must have one entry per image ({ids.size}), got shape "
                         f"{dom.shape}.")
    n_splits = check_positive_int(n_splits, "n_splits")
    n_negatives = check_positive_int(n_negatives, "n_negatives", minimum=0)
    persons, codes = np.unique(ids, return_inverse=True)
    images_of = [np.flatnonzero(codes == c) for c in range(persons.size)]
    if min(len(r) for r in images_of) < 2:
        bad = persons[[len(r) < 2 for r in images_of]][0]
        raise ValueError(f"every person needs at least two images; person {bad!r} has one.")
    if isinstance(n_test, bool) or not isinstance(n_test, int | np.integer) or not (
            1 <= n_test <= persons.size - 2):
        raise ValueError(f"n_test must be an int in [1, {persons.size - 2}] (test persons; at "
                         f"least 2 persons must train), got {n_test!r}.")
    rng = check_random_state(random_state)

    def two_views(rows):
        """Two images of one person, from different cameras when possible (random order)."""
        a = rows[rng.randint(rows.size)]
        other = rows[(rows != a) & (dom[rows] != dom[a])]
        if other.size == 0:
            other = rows[rows != a]
        return a, other[rng.randint(other.size)]

    out = []
    for k in range(n_splits):
        test_p, train_p = hold_out_identities(np.arange(persons.size), n_test, rng)
        test_p, train_p = np.sort(test_p), np.sort(train_p)
        pos = np.array([two_views(images_of[c]) for c in train_p])
        train_rows = np.concatenate([images_of[c] for c in train_p])
        neg, seen = [], set()
        for c in train_p:
            own = images_of[c]
            others = train_rows[codes[train_rows] != c]
            drawn, tries = 0, 0
            while drawn < n_negatives and tries < 100 * n_negatives:
                tries += 1
                a, b = own[rng.randint(own.size)], others[rng.randint(others.size)]
                key = (min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
                neg.append((a, b))
                drawn += 1
        pairs = np.vstack([pos, np.asarray(neg, dtype=np.int64).reshape(-1, 2)])
        y = np.r_[np.ones(len(pos), dtype=np.int64), -np.ones(len(neg), dtype=np.int64)]
        pg = np.array([two_views(images_of[c]) for c in test_p])
        out.append(Split("identification", k, pairs.astype(np.int64), y,
                         probe_rows=pg[:, 0].astype(np.int64),
                         gallery_rows=pg[:, 1].astype(np.int64),
                         seed=int(rng.randint(2**31 - 1))))
    return out


def given_identification_splits(labels, roles, n_repeats: int = 1, *,
                                cross_modal: bool = True, n_negatives: int = 1,
                                max_train_positives: int | None = 1000,
                                random_state=None) -> list[Split]:
    """Identification on a split the data set gives: its query rows against its gallery rows.

    The re-identification benchmarks fix their split (Market-1501's ``bounding_box_train/``,
    ``query/`` and ``bounding_box_test/``; the loaders' ``split``). Every repetition measures
    the same query and gallery rows, after training on pairs drawn afresh among the
    ``"train"`` rows (the repetitions differ in those pairs and in the learners' seeds).

    Parameters
    ----------
    labels : array-like of shape (n_rows,)
        Identity of every row.
    roles : array-like of shape (n_rows,)
        ``"train"``, ``"query"`` or ``"gallery"`` for every row (other values, e.g. unused
        rows, are left out).
    n_repeats : int, default=1
    cross_modal : bool, default=True
        Training pairs join a row of ``X`` with a row of ``Y`` (two modalities) or two rows of
        ``X``.
    n_negatives : int, default=1
    max_train_positives : int or None, default=1000
    random_state : int, RandomState or None

    Returns
    -------
    list of Split
        ``protocol="identification"``, ``probe_rows`` the query rows (of ``X``),
        ``gallery_rows`` the gallery rows (of ``Y``).

    Examples
    --------
    >>> from crossmetric.protocols import given_identification_splits
    >>> labels = [0, 0, 1, 1, 2, 2, 3]
    >>> roles = ["train"] * 4 + ["query", "gallery", "gallery"]
    >>> sp = given_identification_splits(labels, roles, cross_modal=False, random_state=0)[0]
    >>> sp.probe_rows.tolist(), sp.gallery_rows.tolist(), int((sp.train_y == 1).sum())
    ([4], [5, 6], 2)
    """
    labels, roles = np.asarray(labels), np.asarray(roles).astype(str)
    if labels.ndim != 1 or roles.shape != labels.shape:
        raise ValueError(f"roles must give one of 'train', 'query', 'gallery' for each of the "
                         f"{labels.size} rows, got shape {roles.shape}.")
    n_repeats = check_positive_int(n_repeats, "n_repeats")
    rng = check_random_state(random_state)
    train_rows, probe_rows, gallery_rows = (np.flatnonzero(roles == r)
                                            for r in ("train", "query", "gallery"))
    for name, rows in (("query", probe_rows), ("gallery", gallery_rows)):
        if rows.size == 0:
            raise ValueError(f"roles name no {name!r} row; the given split needs query and "
                             "gallery rows.")
    if np.unique(labels[train_rows]).size < 2:
        raise ValueError("roles: the 'train' rows need at least two identities (pairs of "
                         "different identities to learn from).")
    if not np.isin(labels[probe_rows], labels[gallery_rows]).any():
        raise ValueError("roles: no query identity is in the gallery.")
    out = []
    for k in range(n_repeats):
        tr_p, tr_y = _pairs_among(train_rows, labels, cross_modal=cross_modal,
                                  n_negatives=n_negatives, max_positives=max_train_positives,
                                  rng=rng)
        out.append(Split("identification", k, tr_p, tr_y, probe_rows=probe_rows.copy(),
                         gallery_rows=gallery_rows.copy(), seed=int(rng.randint(2**31 - 1))))
    return out
