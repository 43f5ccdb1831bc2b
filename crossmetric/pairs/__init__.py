"""Pair constraints from identity labels, as the papers generate them.

PCCA (§4.2, VIPeR) and CMML (§4.1) train on every *positive* pair available (two samples of
the same identity) and ``n⁻`` random *negative* pairs per positive. Here each positive
``(i, j)`` gets ``n_negatives`` negatives that keep its first sample ``i`` and draw a partner of
another identity, so every sample that has a positive also takes part in negatives
(the papers' "each person is involved in one positive and n⁻ negative pairs").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from sklearn.utils import check_random_state

from crossmetric._utils.checks import check_positive_int
from crossmetric.pairs._pair_data import ON_CONFLICT, PairConflictError, pair_conflicts

__all__ = ["make_pairs", "count_positive_pairs", "DEFAULT_MAX_POSITIVES",
           "identities_from_pairs", "labels_from_pairs", "group_pair_folds",
           "positive_components", "pair_conflicts", "PairConflictError", "ON_CONFLICT"]


def _as_labels(labels, name: str) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of identity labels, got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError(f"{name} is empty.")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity.")
    return arr


#: the cap on positive pairs drawn from class labels where a caller sets none (``crossmetric fit
#: --labels``): class-level labels make quadratically many positives (2,173 items of 10
#: categories: at least 472,193 cross-modal positives); on mfeat (1,500 training rows) CCA
#: fitted on 10,000 of the 225,000 positives scores within a point of mAP of all of them
DEFAULT_MAX_POSITIVES = 10_000


def count_positive_pairs(labels_x, labels_y=None) -> int:
    """How many positive pairs :func:`make_pairs` can form, counted without forming them.

    Cross-modal: ``Σ_c n_x(c) · n_y(c)``; one modality (``labels_y=None``):
    ``Σ_c n(c) (n(c) − 1) / 2``.

    Examples
    --------
    >>> from crossmetric.pairs import count_positive_pairs
    >>> count_positive_pairs([0, 0, 0, 1, 1]), count_positive_pairs([0, 0, 1], [0, 1, 1])
    (4, 4)
    """
    lx = _as_labels(labels_x, "labels_x")
    if labels_y is None:
        _, n = np.unique(lx, return_counts=True)
        return int(np.sum(n.astype(np.int64) * (n - 1) // 2))
    ly = _as_labels(labels_y, "labels_y")
    _, codes = np.unique(np.concatenate([lx, ly]), return_inverse=True)
    codes = codes.reshape(-1)
    m = int(codes.max()) + 1
    nx = np.bincount(codes[: lx.size], minlength=m).astype(np.int64)
    ny = np.bincount(codes[lx.size:], minlength=m).astype(np.int64)
    return int(np.sum(nx * ny))


#: above this many positives a capped :func:`make_pairs` samples them without listing them all
#: (listing 2**24 pairs takes 256 MB); at or below it the listed pairs are subsampled
_ENUMERATE_LIMIT = 2**24


def _n_positives(cx: np.ndarray, cy: np.ndarray, single: bool) -> int:
    m = int(max(cx.max(), cy.max())) + 1
    nx = np.bincount(cx, minlength=m).astype(np.int64)
    if single:
        return int(np.sum(nx * (nx - 1) // 2))
    return int(np.sum(nx * np.bincount(cy, minlength=m).astype(np.int64)))


def _sample_positives(cx: np.ndarray, cy: np.ndarray, single: bool, n: int,
                      rng) -> np.ndarray:
    """``n`` distinct positive pairs drawn uniformly from all of them, never listing them:
    a class with probability proportional to its positive pairs, then one member of each
    side (two different members, ``i < j``, for one modality); repeats are drawn again."""
    m = int(max(cx.max(), cy.max())) + 1
    nx = np.bincount(cx, minlength=m).astype(np.int64)
    ny = nx if single else np.bincount(cy, minlength=m).astype(np.int64)
    weight = (nx * (nx - 1) // 2 if single else nx * ny).astype(float)
    order_x, order_y = np.argsort(cx, kind="stable"), np.argsort(cy, kind="stable")
    start_x = np.r_[0, np.cumsum(nx)[:-1]]
    start_y = np.r_[0, np.cumsum(ny)[:-1]]
    n_y = cy.size
    keys = np.empty(0, dtype=np.int64)
    while keys.size < n:
        k = 2 * (n - keys.size) + 16
        c = rng.choice(m, size=k, p=weight / weight.sum())
        a = order_x[start_x[c] + (rng.random_sample(k) * nx[c]).astype(np.int64)]
        b = order_y[start_y[c] + (rng.random_sample(k) * ny[c]).astype(np.int64)]
        if single:
            keep = a != b
            a, b = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
        new = a * n_y + b
        _, first = np.unique(new, return_index=True)
        new = new[np.sort(first)]                       # first draw of each, in draw order
        new = new[~np.isin(new, keys)]
        keys = np.concatenate([keys, new[: n - keys.size]])
    keys = np.sort(keys)
    return np.column_stack([keys // n_y, keys % n_y]).astype(np.int64)


def _positive_pairs(codes_x: np.ndarray, codes_y: np.ndarray, single: bool) -> np.ndarray:
    """All (i, j) with equal identity; for single-modal only i < j."""
    order_y = np.argsort(codes_y, kind="stable")
    sorted_y = codes_y[order_y]
    chunks = []
    for c in np.unique(codes_x):
        xs = np.flatnonzero(codes_x == c)
        lo, hi = np.searchsorted(sorted_y, [c, c + 1])
        ys = order_y[lo:hi]
        if xs.size == 0 or ys.size == 0:
            continue
        ii, jj = np.meshgrid(xs, ys, indexing="ij")
        p = np.column_stack([ii.ravel(), jj.ravel()])
        if single:
            p = p[p[:, 0] < p[:, 1]]
        chunks.append(p)
    if not chunks:
        return np.empty((0, 2), dtype=np.int64)
    return np.concatenate(chunks).astype(np.int64)


def make_pairs(labels_x: ArrayLike, labels_y: ArrayLike | None = None, *, n_negatives: int = 1,
               max_positives: int | None = None,
               random_state: int | np.random.RandomState | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs with +1 / -1 labels from identity labels.

    Parameters
    ----------
    labels_x : array-like of shape (n_x,)
        Identity of each sample of the first modality (or of the only one).
    labels_y : array-like of shape (n_y,), optional
        Identity of each sample of the second modality. ``None`` means single-modal: pairs
        index two rows of the same array, ``i < j`` for positives, never ``i == j``.
    n_negatives : int, default=1
        Random different-identity pairs per positive pair (the papers' ``n⁻``).
    max_positives : int, optional
        Cap on the number of positives; when more exist a random subset is kept (drawn from
        ``random_state``). Class-level labels (categories rather than identities) make
        quadratically many positives (:func:`count_positive_pairs`); the command line caps
        them at :data:`DEFAULT_MAX_POSITIVES` and the protocols at their
        ``max_train_positives``.
    random_state : int, RandomState instance or None
        Seeds the subset of positives and the negatives.

    Returns
    -------
    pairs : ndarray of shape (n_pairs, 2), int64
        Column 0 indexes ``labels_x``, column 1 ``labels_y`` (or ``labels_x`` again).
    y : ndarray of shape (n_pairs,), int64
        +1 for same identity, -1 for different. Pairs are shuffled and never repeated
        (for single-modal pairs ``(i, j)`` and ``(j, i)`` count as the same pair).

    Raises
    ------
    ValueError
        If no positive pair exists, the labels hold one identity only (no negative pair), or
        too few distinct negatives exist.

    Examples
    --------
    >>> from crossmetric import make_pairs
    >>> pairs, y = make_pairs([0, 0, 1, 1], random_state=0)   # one modality
    >>> pairs.tolist(), y.tolist()
    ([[0, 1], [0, 3], [2, 3], [2, 1]], [1, -1, 1, -1])
    """
    rng = check_random_state(random_state)
    n_negatives = check_positive_int(n_negatives, "n_negatives", minimum=0)
    single = labels_y is None
    lx = _as_labels(labels_x, "labels_x")
    ly = lx if single else _as_labels(labels_y, "labels_y")
    if max_positives is not None:
        max_positives = check_positive_int(max_positives, "max_positives")
    # common integer codes for both label arrays
    _, codes = np.unique(np.concatenate([lx, ly]), return_inverse=True)
    cx, cy = codes[: lx.size].astype(np.int64), codes[lx.size:].astype(np.int64)

    if max_positives is not None and _n_positives(cx, cy, single) > max(
            max_positives, _ENUMERATE_LIMIT):
        # too many to list (class labels on a large set): sample them without listing
        pos = _sample_positives(cx, cy, single, max_positives, rng)
    else:
        pos = _positive_pairs(cx, cy, single)
    if pos.shape[0] == 0:
        raise ValueError(
            "no positive pair can be formed: no identity appears "
            + ("twice in labels_x." if single else "in both labels_x and labels_y.")
        )
    if max_positives is not None and pos.shape[0] > max_positives:
        pos = pos[np.sort(rng.choice(pos.shape[0], max_positives, replace=False))]

    neg = _negative_pairs(pos[:, 0], cx, cy, n_negatives, single, rng)
    pairs = np.concatenate([pos, neg])
    y = np.r_[np.ones(pos.shape[0], np.int64), -np.ones(neg.shape[0], np.int64)]
    perm = rng.permutation(pairs.shape[0])
    return pairs[perm], y[perm]


def _negative_pairs(anchors: np.ndarray, cx: np.ndarray, cy: np.ndarray, n_negatives: int,
                    single: bool, rng: np.random.RandomState) -> np.ndarray:
    """``n_negatives`` distinct different-identity partners per anchor (with repeats)."""
    n_y = cy.size
    wanted = anchors.size * n_negatives
    if wanted == 0:
        return np.empty((0, 2), dtype=np.int64)
    # how many different-identity pairs exist at all
    counts_y = np.bincount(cy, minlength=max(cx.max(), cy.max()) + 1)
    n_possible = int(np.sum(n_y - counts_y[cx]))
    if single:
        n_possible //= 2
    if n_possible == 0:
        raise ValueError("no negative pair can be formed: the labels hold one identity only "
                         "(among the rows that form pairs); need at least 2 identities.")
    if n_possible < wanted:
        raise ValueError(
            f"only {n_possible} distinct negative pairs exist but {wanted} were asked for "
            f"(n_negatives={n_negatives}); lower n_negatives or max_positives."
        )
    order_y = np.argsort(cy, kind="stable")
    sorted_y = cy[order_y]
    starts = np.searchsorted(sorted_y, np.arange(counts_y.size))

    def draw(anchor_rows: np.ndarray) -> np.ndarray:
        """A uniformly random partner of another identity for each anchor row."""
        c = cx[anchor_rows]
        n_other = n_y - counts_y[c]
        r = (rng.random_sample(anchor_rows.size) * n_other).astype(np.int64)
        # skip the block of the anchor's own identity in the identity-sorted order
        r = np.where(r >= starts[c], r + counts_y[c], r)
        return order_y[r]

    def key(i, j):
        if single:
            i, j = np.minimum(i, j), np.maximum(i, j)
        return i * n_y + j

    ai = np.repeat(anchors, n_negatives)
    aj = draw(ai)
    keep = np.zeros(ai.size, dtype=bool)
    seen: np.ndarray = np.empty(0, dtype=np.int64)
    todo = np.arange(ai.size)
    for _ in range(50):
        k = key(ai[todo], aj[todo])
        _, first = np.unique(k, return_index=True)
        fresh = np.zeros(todo.size, dtype=bool)
        fresh[first] = True
        fresh &= ~np.isin(k, seen)
        keep[todo[fresh]] = True
        seen = np.union1d(seen, k[fresh])
        todo = todo[~fresh]
        if todo.size == 0:
            break
        # re-draw collisions, from any anchor so that saturated anchors do not stall
        ai[todo] = ai[rng.randint(0, ai.size, todo.size)]
        aj[todo] = draw(ai[todo])
    if todo.size:  # pragma: no cover - only when negatives are nearly exhausted
        raise ValueError("could not draw enough distinct negative pairs; lower n_negatives.")
    return np.column_stack([ai, aj]).astype(np.int64)


def positive_components(n_nodes: int, a: np.ndarray, b: np.ndarray,
                        y: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of the graph on ``n_nodes`` nodes whose edges are the positive
    pairs ``(a[p], b[p])`` (``y[p] == 1``): ``(n_components, component of each node)``."""
    pos = np.asarray(y) == 1
    graph = sparse.coo_matrix((np.ones(int(pos.sum())), (a[pos], b[pos])),
                              shape=(n_nodes, n_nodes))
    return connected_components(graph, directed=False)


def identities_from_pairs(n_x: int, n_y: int, ix: np.ndarray, iy: np.ndarray,
                          y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Identity of every row of X and Y: connected components of the positive pairs.

    Rows of X and of Y are the nodes of one bipartite graph; each pair labelled +1 is an edge.
    Two images are of the same identity when a chain of positive pairs joins them.

    Returns
    -------
    ids_x : ndarray of shape (n_x,)
    ids_y : ndarray of shape (n_y,)
    n_conflicts : int
        Pairs labelled −1 whose two images nevertheless fall in one component.
    """
    pos = y == 1
    _, comp = positive_components(n_x + n_y, ix, n_x + iy, y)
    ids_x, ids_y = comp[:n_x], comp[n_x:]
    neg = ~pos
    n_conflicts = int(np.sum(ids_x[ix[neg]] == ids_y[iy[neg]]))
    return ids_x.astype(np.int64), ids_y.astype(np.int64), n_conflicts


def group_pair_folds(groups_a: ArrayLike, groups_b: ArrayLike | None, n_folds: int = 3, *,
                     random_state: int | np.random.RandomState | None = None,
                     y: ArrayLike | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cross-validation folds of pairs that keep groups (samples, identities) apart.

    The groups are dealt at random into ``n_folds`` parts of (nearly) equal group count. For
    part ``f`` the validation pairs are those whose *two* ends belong to groups of part ``f``
    and the training pairs those with *neither* end in part ``f``; pairs that join part ``f``
    to another part are left out of both, so that no sample (or identity) of a validation pair
    is seen in training -- splitting the pairs themselves would put most validation samples in
    training pairs too, and model selection would then favour the models that overfit.
    With ``g`` = the sample indices of the two ends (single-modal pairs), each validation fold
    holds about ``1/n_folds²`` of the pairs and its training set ``((n_folds − 1)/n_folds)²``.

    Parameters
    ----------
    groups_a, groups_b : array-like of shape (n_pairs,)
        Group of the first and of the second end of every pair (one label space for both,
        e.g. the sample index for single-modal pairs, a shared identity for cross-modal ones).
    n_folds : int, default=3
    random_state : int, RandomState instance or None
    y : array-like of shape (n_pairs,), optional
        Pair labels; when given, every validation and training set must hold both labels.

    Returns
    -------
    list of (train_index, validation_index)
        Usable as ``cv=`` of scikit-learn's ``GridSearchCV`` / ``cross_val_score``.
    """
    ga, gb = np.asarray(groups_a), np.asarray(groups_b)
    if ga.ndim != 1 or ga.shape != gb.shape:
        raise ValueError(f"groups_a and groups_b must be 1-D with one entry per pair, got "
                         f"shapes {ga.shape} and {gb.shape}.")
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    names, codes = np.unique(np.r_[ga, gb], return_inverse=True)
    if names.size < n_folds:
        raise ValueError(f"n_folds={n_folds} exceeds the {names.size} groups of the pairs.")
    from crossmetric.pairs._identity_draws import deal_identities  # the one splitter's draw

    rng = check_random_state(random_state)
    part = deal_identities(names.size, n_folds, rng)
    pa, pb = part[codes[: ga.size]], part[codes[ga.size:]]
    folds = []
    for f in range(n_folds):
        val = np.flatnonzero((pa == f) & (pb == f))
        train = np.flatnonzero((pa != f) & (pb != f))
        if y is not None:
            yy = np.asarray(y)
            for idx, what in ((val, "validation"), (train, "training")):
                if np.unique(yy[idx]).size < 2:
                    raise ValueError(
                        f"fold {f}: its {what} pairs do not hold both labels once samples are "
                        f"kept apart ({idx.size} pairs); use fewer folds or more pairs.")
        folds.append((train, val))
    return folds


def labels_from_pairs(i: ArrayLike, j: ArrayLike, y: ArrayLike, n_samples: int) -> np.ndarray:
    """Class labels implied by single-modal pairs: connected components of the positive pairs.

    Learners that need class labels (NCA, LMNN, MCC) but are given only pairs take, as the
    classes, the connected components of the graph on the samples whose edges are the
    *same* (+1) pairs: two samples share a label when a chain of positive pairs joins them.
    Negative pairs do not enter. A sample in no positive pair is a class of its own. This is
    :func:`identities_from_pairs` with each sample both an X and a Y node, the two joined.

    Parameters
    ----------
    i, j : array-like of int, shape (n_pairs,)
        The two samples of each pair (indices in ``[0, n_samples)``).
    y : array-like of shape (n_pairs,)
        +1 (same) / -1 (different).
    n_samples : int

    Returns
    -------
    labels : ndarray of shape (n_samples,), int64
        Component number of each sample, numbered by first appearance.
    """
    k = np.arange(n_samples, dtype=np.int64)
    comp, _, _ = identities_from_pairs(
        n_samples, n_samples, np.r_[np.asarray(i, np.int64), k],
        np.r_[np.asarray(j, np.int64), k], np.r_[np.asarray(y), np.ones(n_samples, np.int64)])
    # renumber by first appearance so that the labels do not depend on scipy's numbering
    _, first, inv = np.unique(comp, return_index=True, return_inverse=True)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[inv.reshape(-1)]
