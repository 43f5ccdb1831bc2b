"""The internal pair form of crossmetric: :class:`PairData` and the steps from and to it.

The public API takes pairs in three forms (integer index pairs into a ``preprocessor``, float
pairs ``(n_pairs, 2, ...)``, or row-aligned arrays ``(Xp, Yp)``). :class:`PairInputsMixin`
validates any of them into one :class:`PairData` ``(X, Y, ix, iy)``: the samples of each
modality and, per pair, the row of ``X`` and the row of ``Y`` it joins. The pairs → samples
steps work on that form: :func:`canonical_pairs` (distinct samples in a canonical order, the
one step that makes a fit independent of the input form) and :func:`used_pairs` (only the rows
a subset of the pairs uses). :mod:`crossmetric._base` re-exports every name of this module.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import gen_batches

from crossmetric._checks import as_float_array, check_indices

__all__ = ["PairData", "PairInputsMixin", "distinct_rows", "canonical_pairs", "used_rows",
           "used_pairs"]

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
    if not np.array_equal(flat[order], flat[first[group]]):  # pragma: no cover - hash clash
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
        Z, i, j = data.stacked()
        Z, i, j = distinct_rows(Z, i, j)
        return PairData(Z, Z, i, j)
    X, ix = distinct_rows(data.X, data.ix)
    Y, iy = distinct_rows(data.Y, data.iy)
    return PairData(X, Y, ix, iy)


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
