"""One identity-grouped splitter: the splitters that now share
crossmetric.protocols.splits give the same folds, pairs and seeds as their former code, for
the seeds of the benchmark, the reproductions and model selection.

The ``old_*`` functions below are the former implementations (main@a8b8480, docstrings and
error messages left out), the slow obvious versions the shared code is checked against.
"""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GroupKFold, StratifiedKFold
from sklearn.utils import check_random_state

from crossmetric._solvers.early_stopping import validation_split
from crossmetric._utils.checks import check_positive_int, user_stacklevel
from crossmetric.pairs import group_pair_folds, make_pairs, positive_components
from crossmetric.protocols import identification_splits, verification_splits
from crossmetric.protocols.model_selection import inner_pair_splits, object_folds
from crossmetric.protocols.reid import reid_splits
from crossmetric.protocols.splits import Split, _pairs_among, _single_shot_gallery
from crossmetric.reproduce.pku import pku_splits


# ---------------------------------------------------------------- former implementations
def old__sample_folds(labels: np.ndarray, n_folds: int, split: str, rng) -> list[np.ndarray]:
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= max(20, 2 * n_folds) else "sample"
    if split == "identity":
        if ids.size < 2 * n_folds:
            raise ValueError("legacy check")
        fold_of_id = rng.permutation(ids.size) % n_folds
        fold = fold_of_id[codes]
        return [np.flatnonzero(fold == f) for f in range(n_folds)]
    if split != "sample":
        raise ValueError("legacy check")
    min_count = np.bincount(codes).min()
    if min_count < n_folds:
        warnings.warn("legacy check", UserWarning, stacklevel=user_stacklevel())
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=rng.randint(2**31 - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return [te for _, te in skf.split(np.zeros(labels.size), codes)]


def old_verification_splits(
    labels,
    n_folds: int = 10,
    *,
    cross_modal: bool = True,
    n_negatives: int = 1,
    n_test_negatives: int = 1,
    max_train_positives: int | None = 2000,
    max_test_positives: int | None = 1000,
    split: str = "auto",
    random_state=None,
) -> list[Split]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError("legacy check")
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    rng = check_random_state(random_state)
    parts = old__sample_folds(labels, n_folds, split, rng)
    out = []
    for k, test_rows in enumerate(parts):
        train_rows = np.sort(np.concatenate([p for j, p in enumerate(parts) if j != k]))
        test_rows = np.sort(test_rows)
        tr_p, tr_y = _pairs_among(
            train_rows,
            labels,
            cross_modal=cross_modal,
            n_negatives=n_negatives,
            max_positives=max_train_positives,
            rng=rng,
        )
        te_p, te_y = _pairs_among(
            test_rows,
            labels,
            cross_modal=cross_modal,
            n_negatives=n_test_negatives,
            max_positives=max_test_positives,
            rng=rng,
        )
        out.append(
            Split(
                "verification",
                k,
                tr_p,
                tr_y,
                test_pairs=te_p,
                test_y=te_y,
                probe_rows=test_rows,
                seed=int(rng.randint(2**31 - 1)),
            )
        )
    return out


def old_identification_splits(
    labels,
    n_repeats: int = 10,
    *,
    test_size: float | int = 0.3,
    cross_modal: bool = True,
    n_negatives: int = 1,
    max_train_positives: int | None = 2000,
    split: str = "auto",
    random_state=None,
) -> list[Split]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size < 4:
        raise ValueError("legacy check")
    n_repeats = check_positive_int(n_repeats, "n_repeats")
    rng = check_random_state(random_state)
    ids, codes = np.unique(labels, return_inverse=True)
    if split == "auto":
        split = "identity" if ids.size >= 20 else "sample"
    if split not in ("identity", "sample"):
        raise ValueError("legacy check")
    units = ids.size if split == "identity" else labels.size
    if isinstance(test_size, bool) or not isinstance(test_size, int | float | np.number):
        raise ValueError("legacy check")
    n_test = int(round(test_size * units)) if isinstance(test_size, float) else int(test_size)
    if not 2 <= n_test <= units - 2:
        raise ValueError("legacy check")
    out = []
    for k in range(n_repeats):
        if split == "identity":
            test_ids = rng.choice(ids.size, n_test, replace=False)
            is_test = np.isin(codes, test_ids)
        else:
            order = rng.permutation(labels.size)
            is_test = np.zeros(labels.size, bool)
            frac = n_test / labels.size
            for c in range(ids.size):
                rows = order[codes[order] == c]
                is_test[rows[: max(1, int(round(frac * rows.size)))]] = True
        test_rows, train_rows = (np.flatnonzero(is_test), np.flatnonzero(~is_test))
        tr_p, tr_y = _pairs_among(
            train_rows,
            labels,
            cross_modal=cross_modal,
            n_negatives=n_negatives,
            max_positives=max_train_positives,
            rng=rng,
        )
        if cross_modal:
            probe_rows, gallery_rows = (test_rows, test_rows.copy())
        else:
            probe_rows, gallery_rows = _single_shot_gallery(test_rows, labels, rng)
        out.append(
            Split(
                "identification",
                k,
                tr_p,
                tr_y,
                probe_rows=probe_rows,
                gallery_rows=gallery_rows,
                seed=int(rng.randint(2**31 - 1)),
            )
        )
    return out


def old_object_folds(
    labels, n_splits: int = 3, *, group: str = "identity", random_state=None
) -> list[tuple[np.ndarray, np.ndarray]]:
    labels = np.asarray(labels)
    n_splits = check_positive_int(n_splits, "n_splits", minimum=2)
    rng = check_random_state(random_state)
    _, codes = np.unique(labels, return_inverse=True)
    seed = rng.randint(2**31 - 1)
    if group == "identity":
        if codes.max() + 1 < n_splits:
            raise ValueError("legacy check")
        cv = GroupKFold(n_splits, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(labels.size), groups=codes))
    if group == "sample":
        cv = StratifiedKFold(n_splits, shuffle=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return list(cv.split(np.zeros(labels.size), codes))
    raise ValueError("legacy check")


def old_inner_pair_splits(
    labels,
    n_splits: int = 3,
    *,
    group: str = "identity",
    cross_modal: bool = True,
    n_negatives: int = 1,
    max_positives: int | None = 1000,
    random_state=None,
) -> list[tuple]:
    labels = np.asarray(labels)
    rng = check_random_state(random_state)
    out = []
    for tr, va in old_object_folds(labels, n_splits, group=group, random_state=rng):
        part = []
        for rows in (np.sort(tr), np.sort(va)):
            lab = labels[rows]
            pairs, y = make_pairs(
                lab,
                lab if cross_modal else None,
                n_negatives=n_negatives,
                max_positives=max_positives,
                random_state=rng,
            )
            part += [rows[pairs], y]
        if np.unique(part[1]).size < 2 or np.unique(part[3]).size < 2:
            raise ValueError("legacy check")
        out.append(tuple(part))
    return out


def old_reid_splits(
    ids,
    domains=None,
    n_test: int = 316,
    *,
    n_negatives: int = 1,
    n_splits: int = 10,
    random_state=None,
) -> list[Split]:
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("legacy check")
    dom = np.zeros(ids.size, dtype=np.int64) if domains is None else np.asarray(domains)
    if dom.shape != ids.shape:
        raise ValueError("legacy check")
    n_splits = check_positive_int(n_splits, "n_splits")
    n_negatives = check_positive_int(n_negatives, "n_negatives", minimum=0)
    persons, codes = np.unique(ids, return_inverse=True)
    images_of = [np.flatnonzero(codes == c) for c in range(persons.size)]
    if min(len(r) for r in images_of) < 2:
        persons[[len(r) < 2 for r in images_of]][0]
        raise ValueError("legacy check")
    if (
        isinstance(n_test, bool)
        or not isinstance(n_test, int | np.integer)
        or (not 1 <= n_test <= persons.size - 2)
    ):
        raise ValueError("legacy check")
    rng = check_random_state(random_state)

    def two_views(rows):
        """Two images of one person, from different cameras when possible (random order)."""
        a = rows[rng.randint(rows.size)]
        other = rows[(rows != a) & (dom[rows] != dom[a])]
        if other.size == 0:
            other = rows[rows != a]
        return (a, other[rng.randint(other.size)])

    out = []
    for k in range(n_splits):
        perm = rng.permutation(persons.size)
        test_p, train_p = (np.sort(perm[:n_test]), np.sort(perm[n_test:]))
        pos = np.array([two_views(images_of[c]) for c in train_p])
        train_rows = np.concatenate([images_of[c] for c in train_p])
        neg, seen = ([], set())
        for c in train_p:
            own = images_of[c]
            others = train_rows[codes[train_rows] != c]
            drawn, tries = (0, 0)
            while drawn < n_negatives and tries < 100 * n_negatives:
                tries += 1
                a, b = (own[rng.randint(own.size)], others[rng.randint(others.size)])
                key = (min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
                neg.append((a, b))
                drawn += 1
        pairs = np.vstack([pos, np.asarray(neg, dtype=np.int64).reshape(-1, 2)])
        y = np.r_[np.ones(len(pos), dtype=np.int64), -np.ones(len(neg), dtype=np.int64)]
        pg = np.array([two_views(images_of[c]) for c in test_p])
        out.append(
            Split(
                "identification",
                k,
                pairs.astype(np.int64),
                y,
                probe_rows=pg[:, 0].astype(np.int64),
                gallery_rows=pg[:, 1].astype(np.int64),
                seed=int(rng.randint(2**31 - 1)),
            )
        )
    return out


def old_group_pair_folds(
    groups_a, groups_b, n_folds: int = 3, *, random_state=None, y=None
) -> list[tuple[np.ndarray, np.ndarray]]:
    ga, gb = (np.asarray(groups_a), np.asarray(groups_b))
    if ga.ndim != 1 or ga.shape != gb.shape:
        raise ValueError("legacy check")
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    names, codes = np.unique(np.r_[ga, gb], return_inverse=True)
    if names.size < n_folds:
        raise ValueError("legacy check")
    rng = check_random_state(random_state)
    part = rng.permutation(names.size) % n_folds
    pa, pb = (part[codes[: ga.size]], part[codes[ga.size :]])
    folds = []
    for f in range(n_folds):
        val = np.flatnonzero((pa == f) & (pb == f))
        train = np.flatnonzero((pa != f) & (pb != f))
        if y is not None:
            yy = np.asarray(y)
            for idx, _what in ((val, "validation"), (train, "training")):
                if np.unique(yy[idx]).size < 2:
                    raise ValueError("legacy check")
        folds.append((train, val))
    return folds


def old_pku_splits(persons, n_test: int, seed: int, n_splits: int):
    rng = check_random_state(seed)
    for _ in range(n_splits):
        test = rng.choice(persons, n_test, replace=False)
        yield (test, int(rng.randint(2**31 - 1)), int(rng.randint(2**31 - 1)))



def old_validation_split(
    ix: np.ndarray,
    iy: np.ndarray,
    y: np.ndarray,
    n_x: int,
    n_y: int,
    *,
    tied: bool,
    fraction: float,
    random_state=None,
):
    rng = check_random_state(random_state)
    offset = 0 if tied else n_x
    n_nodes = n_x if tied else n_x + n_y
    n_comp, comp = positive_components(n_nodes, ix, iy + offset, y)
    used = np.zeros(n_nodes, dtype=bool)
    used[ix] = True
    used[iy + offset] = True
    sizes = np.bincount(comp[used], minlength=n_comp)
    order = rng.permutation(np.flatnonzero(sizes))
    target = fraction * used.sum()
    take = order[: max(1, int(np.searchsorted(np.cumsum(sizes[order]), target) + 1))]
    if take.size >= order.size:
        take = take[:-1]
    held = np.zeros(n_comp, dtype=bool)
    held[take] = True
    a, b = (held[comp[ix]], held[comp[iy + offset]])
    validation, train = (a & b, ~a & ~b)
    for _name, mask in (("validation", validation), ("training", train)):
        labels = set(np.unique(y[mask]).tolist())
        if labels != {-1, 1}:
            raise ValueError("legacy check")
    return (train, validation)


# ------------------------------------------------------------------------------- checks
def _same_splits(a, b):
    assert len(a) == len(b)
    for s, t in zip(a, b, strict=True):
        assert (s.protocol, s.index, s.seed) == (t.protocol, t.index, t.seed)
        for f in ("train_pairs", "train_y", "test_pairs", "test_y", "probe_rows",
                  "gallery_rows"):
            x, y = getattr(s, f), getattr(t, f)
            assert (x is None) == (y is None), f
            if x is not None:
                np.testing.assert_array_equal(x, y)


def _same_folds(a, b):
    assert len(a) == len(b)
    for s, t in zip(a, b, strict=True):
        for x, y in zip(s, t, strict=True):
            np.testing.assert_array_equal(x, y)


LABELS = {"many ids": np.repeat(np.arange(40), 3), "few ids": np.repeat(np.arange(6), 12),
          "uneven": np.random.RandomState(5).randint(0, 25, 150)}


@pytest.mark.parametrize("name", list(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_benchmark_splits_unchanged(name, seed):
    lab = LABELS[name]
    for cross in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _same_splits(verification_splits(lab, 3, cross_modal=cross, random_state=seed),
                         old_verification_splits(lab, 3, cross_modal=cross, random_state=seed))
        _same_splits(identification_splits(lab, 3, test_size=0.3, cross_modal=cross,
                                           random_state=seed),
                     old_identification_splits(lab, 3, test_size=0.3, cross_modal=cross,
                                               random_state=seed))


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("group", ["identity", "sample"])
def test_model_selection_folds_unchanged(seed, group):
    lab = LABELS["many ids"]
    _same_folds(object_folds(lab, 3, group=group, random_state=seed),
                old_object_folds(lab, 3, group=group, random_state=seed))
    _same_folds(inner_pair_splits(lab, 3, group=group, random_state=seed),
                old_inner_pair_splits(lab, 3, group=group, random_state=seed))


@pytest.mark.parametrize("seed", [0, 3])
def test_reid_and_pku_splits_unchanged(seed):
    ids = np.repeat(np.arange(30), 3)
    cams = np.tile([1, 2, 2], 30)
    for n_neg in (1, 3):
        _same_splits(reid_splits(ids, cams, 10, n_negatives=n_neg, n_splits=3,
                                 random_state=seed),
                     old_reid_splits(ids, cams, 10, n_negatives=n_neg, n_splits=3,
                                     random_state=seed))
    persons = np.array([f"p{i:03d}" for i in range(200)])
    for (t, a, b), (t0, a0, b0) in zip(pku_splits(persons, 50, seed, 4),
                                       old_pku_splits(persons, 50, seed, 4), strict=True):
        np.testing.assert_array_equal(t, t0)
        assert (a, b) == (a0, b0)


@pytest.mark.parametrize("seed", [0, 11])
def test_group_pair_folds_unchanged(seed):
    lab = np.repeat(np.arange(12), 4)
    pairs, y = make_pairs(lab, random_state=0)
    _same_folds(group_pair_folds(pairs[:, 0], pairs[:, 1], 3, random_state=seed),
                old_group_pair_folds(pairs[:, 0], pairs[:, 1], 3, random_state=seed))


@pytest.mark.parametrize("seed", [0, 4])
@pytest.mark.parametrize("tied", [True, False])
def test_early_stopping_hold_out_unchanged(seed, tied):
    lab = np.repeat(np.arange(20), 3)
    pairs, y = make_pairs(lab, None if tied else lab, n_negatives=2, random_state=0)
    args = (pairs[:, 0], pairs[:, 1], y, lab.size, lab.size)
    _same_folds([validation_split(*args, tied=tied, fraction=0.25, random_state=seed)],
                [old_validation_split(*args, tied=tied, fraction=0.25, random_state=seed)])
