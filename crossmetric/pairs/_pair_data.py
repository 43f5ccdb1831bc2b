"""The internal pair form of crossmetric: :class:`PairData` and the steps from and to it.

The public API takes pairs in three forms (integer index pairs into a ``preprocessor``, float
pairs ``(n_pairs, 2, ...)``, or row-aligned arrays ``(Xp, Yp)``). :class:`PairInputsMixin`
validates any of them into one :class:`PairData` ``(X, Y, ix, iy)``: the samples of each
modality and, per pair, the row of ``X`` and the row of ``Y`` it joins. The pairs → samples
steps work on that form: :func:`canonical_pairs` (distinct samples in a canonical order, the
one step that makes a fit independent of the input form), :func:`resolve_conflicts` (pairs of
the same two samples labelled both +1 and -1: refused, dropped or kept, see
:func:`pair_conflicts`) and :func:`used_pairs` (only the rows a subset of the pairs uses).
:mod:`crossmetric._base` re-exports every name of this module.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array, check_indices

__all__ = ["PairData", "PairInputsMixin", "distinct_rows", "canonical_pairs", "used_rows",
           "used_pairs", "ON_CONFLICT", "PairConflictError", "pair_conflicts",
           "conflict_policy", "resolve_conflicts"]

_FORMS = (
    "pairs must be one of: (1) an integer array (n_pairs, 2) of indices with "
    "preprocessor=X (single-modal) or preprocessor=(X, Y) (cross-modal); "
    "(2) a float array (n_pairs, 2, n_features); (3) a tuple (Xp, Yp) of row-aligned arrays"
)


class PairData(NamedTuple):
    """Validated pairs: pair ``p`` joins row ``ix[p]`` of ``X`` and row ``iy[p]`` of ``Y``.

    For single-modal input in index form ``Y is X``.
    """

    X: np.ndarray
    Y: np.ndarray
    ix: np.ndarray
    iy: np.ndarray

    @property
    def n_pairs(self) -> int:
        return self.ix.shape[0]

    def stacked(self, dedupe: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One sample matrix ``Z`` and indices ``(i, j)`` into it (for tied-weight learners).

        With ``dedupe`` identical rows are merged, so that a kernel learner fitted on array
        pairs ``(n_pairs, 2, d)`` builds its kernel over distinct samples only.
        """
        if self.X is self.Y:
            Z, i, j = self.X, self.ix, self.iy
        else:
            Z = np.concatenate([self.X, self.Y])
            i, j = self.ix, self.iy + self.X.shape[0]
        if dedupe:
            flat = Z.reshape(Z.shape[0], -1)
            uniq, first, inverse = np.unique(flat, axis=0, return_index=True,
                                             return_inverse=True)
            if uniq.shape[0] < Z.shape[0]:
                inverse = inverse.reshape(-1)
                Z = Z[np.sort(first)]
                # renumber so that the kept rows stay in their original order
                rank = np.empty(uniq.shape[0], dtype=np.int64)
                rank[np.argsort(first)] = np.arange(uniq.shape[0])
                i, j = rank[inverse[i]], rank[inverse[j]]
        return Z, i, j


_HASH_MULTIPLIERS: dict[int, np.ndarray] = {}


def _row_keys(flat: np.ndarray) -> np.ndarray:
    """Two 64-bit content hashes per row (n, 2): equal rows get equal keys, whatever their
    position, and the keys do not depend on anything but the row's values (fixed seeds)."""
    n, d = flat.shape
    if d not in _HASH_MULTIPLIERS:
        rng = np.random.RandomState(d % (2**32))
        _HASH_MULTIPLIERS[d] = rng.randint(1, 2**62, size=(2, d), dtype=np.int64).astype(
            np.uint64) * np.uint64(2) + np.uint64(1)
    mult = _HASH_MULTIPLIERS[d]
    keys = np.empty((n, 2), dtype=np.uint64)
    rows = max(1, (1 << 20) // max(1, d))
    with np.errstate(over="ignore"):
        for sl in gen_batches(n, rows):
            w = (flat[sl] + 0.0).view(np.uint64)  # + 0.0 turns −0.0 into 0.0
            w = w ^ (w >> np.uint64(31))
            for c in range(2):
                h = w * mult[c]
                h ^= h >> np.uint64(29)
                keys[sl, c] = h.sum(axis=1, dtype=np.uint64)
    return keys


def distinct_rows(A: np.ndarray, *indices: np.ndarray):
    """The distinct rows of ``A`` that ``indices`` use, in a canonical order, and the indices
    renumbered into them: ``(U, idx_1, idx_2, ...)``.

    The order depends only on the rows' values (sorted by a content hash), so the same samples
    give the same ``U`` whether they came as index pairs into a preprocessor, as arrays of
    pairs (one row per pair side, with repeats) or in any other row order. Identical rows are
    merged. Cost O(n · d) for the hashes plus O(n log n) for the sort; no d-wide comparison
    sort (``np.unique(axis=0)`` took 3.5 s on 2,000 × 10,000).
    """
    sizes = [ix.shape[0] for ix in indices]
    used, inverse = np.unique(np.concatenate(indices), return_inverse=True)
    U = A[used] if used.shape[0] < A.shape[0] else A
    flat = np.ascontiguousarray(U.reshape(U.shape[0], -1), dtype=np.float64)
    keys = _row_keys(flat)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    ks = keys[order]
    new_key = np.r_[True, np.any(ks[1:] != ks[:-1], axis=1)]
    group = np.cumsum(new_key) - 1
    first = order[np.flatnonzero(new_key)]
    # only the rows merged into an earlier one (equal keys) can be a hash clash: each is
    # compared with its group's first row, with no copy of the rows that stand alone
    merged = ~new_key
    if merged.any() and not np.array_equal(flat[order[merged]],
                                           flat[first[group[merged]]]):  # pragma: no cover
        _, first, inv = np.unique(flat, axis=0, return_index=True, return_inverse=True)
        group_of_row = inv.reshape(-1)
    else:
        group_of_row = np.empty(U.shape[0], dtype=np.int64)
        group_of_row[order] = group
    out = U[first]
    parts = np.split(group_of_row[inverse.reshape(-1)], np.cumsum(sizes)[:-1])
    return (out, *parts)


def canonical_pairs(data: PairData, tied: bool) -> PairData:
    """:class:`PairData` over distinct samples in canonical order (:func:`distinct_rows`).

    ``tied`` (single-modal learners): both sides of every pair index one sample set
    (``Y is X``), pooled from the two sides. Otherwise each modality gets its own set.
    """
    if tied:
        if data.X is data.Y:
            Z, i, j = distinct_rows(data.X, data.ix, data.iy)
        else:  # the rows the pairs use on each side, pooled (not both sample sets whole)
            used_x, i = np.unique(data.ix, return_inverse=True)
            used_y, j = np.unique(data.iy, return_inverse=True)
            Z, i, j = distinct_rows(np.concatenate([data.X[used_x], data.Y[used_y]]),
                                    i.reshape(-1), j.reshape(-1) + used_x.size)
        return PairData(Z, Z, i, j)
    X, ix = distinct_rows(data.X, data.ix)
    Y, iy = distinct_rows(data.Y, data.iy)
    return PairData(X, Y, ix, iy)


#: what :func:`resolve_conflicts` does with contradictory pairs (see :func:`pair_conflicts`)
ON_CONFLICT = ("error", "drop", "keep")

_POLICY: contextvars.ContextVar[str] = contextvars.ContextVar("crossmetric_on_conflict",
                                                              default="error")


class PairConflictError(ValueError):
    """Two pairs join the same two samples but one is labelled +1 and the other -1.

    Parameters
    ----------
    message : str
        The one-line message.
    first, second : int
        Positions of the two pairs in the ``pairs`` given to ``fit`` (``first < second``);
        ``second`` is the first pair that contradicts an earlier one.
    """

    def __init__(self, message: str, first: int, second: int):
        super().__init__(message)
        self.first, self.second = int(first), int(second)


def _check_policy(on_conflict) -> str:
    if not isinstance(on_conflict, str) or on_conflict not in ON_CONFLICT:
        raise ValueError(f"on_conflict must be one of {ON_CONFLICT}, got {on_conflict!r}.")
    return on_conflict


@contextlib.contextmanager
def pair_conflicts(on_conflict: str) -> Iterator[str]:
    """Say what every ``fit`` inside the block does with contradictory pairs.

    Two pairs are contradictory when they join the same two samples (the same rows, or rows
    of identical values; for a single-modal learner in either order) and one is labelled +1
    (same), the other -1 (different). Outside any block ``fit`` refuses them.

    Parameters
    ----------
    on_conflict : {"error", "drop", "keep"}
        ``"error"`` (the default outside the block): a one-line :class:`PairConflictError`
        naming the first contradictory pair. ``"drop"``: every pair of such samples is left
        out of the fit (a ``UserWarning`` says how many). ``"keep"``: fitted as given (label
        noise).

    Yields
    ------
    str
        The policy.

    Notes
    -----
    The setting lives in a :mod:`contextvars` variable: it holds for the current thread (and
    asyncio task), not for joblib worker processes started inside the block.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean
    >>> from crossmetric.pairs import pair_conflicts
    >>> X = np.arange(8.0).reshape(4, 2)
    >>> pairs, y = np.array([[0, 1], [2, 3], [0, 1]]), np.array([1, -1, -1])
    >>> with pair_conflicts("keep"):
    ...     model = Euclidean(preprocessor=X).fit(pairs, y)
    """
    token = _POLICY.set(_check_policy(on_conflict))
    try:
        yield on_conflict
    finally:
        _POLICY.reset(token)


def conflict_policy() -> str:
    """The policy of the innermost :func:`pair_conflicts` block (``"error"`` outside any).

    Returns
    -------
    str
    """
    return _POLICY.get()


def _pair_keys(data: PairData, tied: bool) -> np.ndarray:
    """One integer per pair that is equal exactly for pairs of the same two samples."""
    a, b = data.ix.astype(np.int64), data.iy.astype(np.int64)
    if tied:
        a, b = np.minimum(a, b), np.maximum(a, b)
    return a * np.int64(data.Y.shape[0]) + b


def resolve_conflicts(canon: PairData, y: np.ndarray, tied: bool,
                      on_conflict: str | None = None) -> np.ndarray | None:
    """Find contradictory pairs and apply the policy to them.

    Parameters
    ----------
    canon : PairData
        The pairs over distinct samples (:func:`canonical_pairs`), so that pairs of equal
        samples have equal indices whatever the input form.
    y : ndarray of shape (n_pairs,)
        Checked labels, +1 / -1.
    tied : bool
        Single-modal learner: ``(a, b)`` and ``(b, a)`` are the same pair.
    on_conflict : {"error", "drop", "keep"}, optional
        Default: :func:`conflict_policy`.

    Returns
    -------
    ndarray of bool or None
        ``None`` when every pair is kept; else the mask of the pairs to fit on (``"drop"``).

    Raises
    ------
    PairConflictError
        ``"error"`` and a contradiction: names the first pair that contradicts an earlier one.
    """
    policy = _check_policy(conflict_policy() if on_conflict is None else on_conflict)
    if policy == "keep":
        return None
    _, group = np.unique(_pair_keys(canon, tied), return_inverse=True)
    group = group.reshape(-1)
    n_groups = int(group.max()) + 1 if group.size else 0
    has_pos = np.bincount(group[y == 1], minlength=n_groups) > 0
    has_neg = np.bincount(group[y == -1], minlength=n_groups) > 0
    bad = has_pos & has_neg
    if not bad.any():
        return None
    in_bad = bad[group]
    if policy == "drop":
        warnings.warn(f"on_conflict='drop': left out {int(in_bad.sum())} pairs, those of the "
                      f"{int(bad.sum())} pairs of samples labelled both +1 and -1.",
                      UserWarning, stacklevel=3)
        return ~in_bad
    # the first pair (in the caller's order) whose label contradicts an earlier pair
    n = y.shape[0]
    first_pos = np.full(n_groups, n)
    first_neg = np.full(n_groups, n)
    idx = np.arange(n)
    np.minimum.at(first_pos, group[y == 1], idx[y == 1])
    np.minimum.at(first_neg, group[y == -1], idx[y == -1])
    later = np.maximum(first_pos, first_neg)
    g = int(np.argmin(np.where(bad, later, n)))
    first, second = int(min(first_pos[g], first_neg[g])), int(later[g])
    raise PairConflictError(
        f"pairs[{first}] and pairs[{second}] join the same two samples but are labelled "
        f"{int(y[first]):+d} and {int(y[second]):+d}; remove one of them, or fit inside "
        "crossmetric.pairs.pair_conflicts('drop') (leave such pairs out) or "
        "pair_conflicts('keep') (fit them as given).", first, second)


def used_rows(A: np.ndarray, *indices: np.ndarray):
    """Keep only the rows of ``A`` that ``indices`` refer to, and renumber the indices.

    Returns ``(A_used, idx_1, idx_2, ...)``; ``A`` itself (no copy) when every row is used.
    """
    sizes = [ix.shape[0] for ix in indices]
    used, inverse = np.unique(np.concatenate(indices), return_inverse=True)
    parts = np.split(inverse.reshape(-1).astype(np.int64), np.cumsum(sizes)[:-1])
    if used.shape[0] == A.shape[0]:
        return (A, *parts)
    return (A[used], *parts)


def used_pairs(data: PairData, tied: bool) -> PairData:
    """``data`` over only the rows its pairs use (:func:`used_rows`), indices renumbered.

    ``tied``: both sides index one sample set (``Y is X``), which stays shared. The canonical
    pairs handed to ``_fit`` use every row already; this is for subsets of them (the
    early-stopping split, :func:`crossmetric._solvers.early_stopping.split_pairs`).
    """
    if tied:
        Z, i, j = used_rows(data.X, data.ix, data.iy)
        return PairData(Z, Z, i, j)
    X, ix = used_rows(data.X, data.ix)
    Y, iy = used_rows(data.Y, data.iy)
    return PairData(X, Y, ix, iy)


class PairInputsMixin:
    """The three input forms of pairs → :class:`PairData`, with the samples' validation.

    Part of :class:`crossmetric._base.PairLearnerMixin`; reads ``_sample_ndim`` (dimensions of
    one sample), ``preprocessor`` and, once fitted, ``_sample_shape_x_`` / ``_sample_shape_y_``.
    A learner with other samples (DeepGSM's images) overrides :meth:`_check_samples`.
    """

    def _check_samples(self, A, name: str, side: str | None = None) -> np.ndarray:
        """Validate an array of samples; ``side`` ('x' / 'y') checks the fitted feature count."""
        arr = as_float_array(A, name, ndim=1 + self._sample_ndim)
        if arr.shape[0] == 0:
            raise ValueError(f"{name} has no samples (shape {arr.shape}).")
        if side is not None:
            self._check_fitted_shape(arr, name, side)
        return arr

    def _check_fitted_shape(self, arr: np.ndarray, name: str, side: str) -> None:
        expected = getattr(self, f"_sample_shape_{side}_")
        if arr.shape[1:] != expected:
            if self._sample_ndim == 1:
                what, want = f"{arr.shape[1]} features", f"{expected[0]} features"
            else:
                what, want = f"samples of shape {arr.shape[1:]}", f"samples of shape {expected}"
            raise ValueError(
                f"{name} has {what}, but {type(self).__name__} was fitted on {want} "
                f"for modality {side!r}."
            )

    def _preprocessor_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        prep = self.preprocessor
        if prep is None:
            raise ValueError(
                "pairs given as integer indices need preprocessor=X (single-modal) or "
                "preprocessor=(X, Y) (cross-modal) to look the samples up; "
                "preprocessor is None."
            )
        if isinstance(prep, tuple):
            if len(prep) != 2:
                raise ValueError(
                    f"preprocessor must be an array X or a tuple (X, Y); got a tuple of "
                    f"length {len(prep)}."
                )
            X = self._check_samples(prep[0], "preprocessor[0] (X)")
            Y = self._check_samples(prep[1], "preprocessor[1] (Y)")
            return X, Y
        X = self._check_samples(prep, "preprocessor")
        return X, X

    def _resolve_pairs(self, pairs) -> PairData:
        """Turn any accepted form of ``pairs`` into :class:`PairData` (no feature checks)."""
        nd = self._sample_ndim
        if isinstance(pairs, tuple):
            if len(pairs) != 2:
                raise ValueError(f"{_FORMS}; got a tuple of length {len(pairs)}.")
            Xp = self._check_samples(pairs[0], "pairs[0] (Xp)")
            Yp = self._check_samples(pairs[1], "pairs[1] (Yp)")
            if Xp.shape[0] != Yp.shape[0]:
                raise ValueError(
                    f"pairs (Xp, Yp) must be row-aligned: Xp has {Xp.shape[0]} rows, "
                    f"Yp has {Yp.shape[0]}."
                )
            n = Xp.shape[0]
            idx = np.arange(n, dtype=np.int64)
            return PairData(Xp, Yp, idx, idx.copy())
        try:
            arr = np.asarray(pairs)
        except Exception as exc:
            raise ValueError(f"{_FORMS}; could not read pairs: {exc}") from None
        if arr.dtype == object:
            raise ValueError(f"{_FORMS}; got a ragged/object array.")
        if arr.ndim == 2 and arr.shape[1] == 2 and (arr.dtype.kind in "iu" or (
                arr.dtype.kind == "f" and self.preprocessor is not None)):
            if arr.dtype.kind == "f":
                if not np.isfinite(arr).all() or np.any(arr != np.round(arr)):
                    raise ValueError(
                        "pairs given as indices must hold whole numbers; got non-integer "
                        "or non-finite values."
                    )
            idx = arr.astype(np.int64)
            X, Y = self._preprocessor_arrays()
            ix = check_indices(idx[:, 0], X.shape[0], "pairs[:, 0] (rows of X)")
            iy = check_indices(idx[:, 1], Y.shape[0], "pairs[:, 1] (rows of Y)")
            return PairData(X, Y, ix, iy)
        if arr.ndim == 2 + nd and arr.shape[1] == 2:
            arr = as_float_array(arr, "pairs")
            n = arr.shape[0]
            idx = np.arange(n, dtype=np.int64)
            return PairData(arr[:, 0], arr[:, 1], idx, idx.copy())
        raise ValueError(f"{_FORMS}; got an array of shape {arr.shape} and dtype {arr.dtype}.")

    def _validate_pairs(self, pairs, *, fitted: bool = True) -> PairData:
        data = self._resolve_pairs(pairs)
        if data.n_pairs == 0:
            raise ValueError("pairs is empty; at least one pair is needed.")
        if fitted:
            self._check_fitted_shape(data.X, "X (first modality of pairs)", "x")
            self._check_fitted_shape(data.Y, "Y (second modality of pairs)", "y")
        return data
