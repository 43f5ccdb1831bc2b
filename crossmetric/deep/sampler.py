"""The cross-domain batch generator of §4.2 (NumPy only).

"For each round, we first randomly choose K̂ instance categories. For each category, a number of
Ô₁ images [of the] first domain and a number of Ô₂ from [the] second domain are randomly
selected. For each selected image in [the] first domain, we randomly take samples from the
second domain and the proportions of positive and negative samples are equal."

:meth:`CrossDomainBatchSampler.sample` returns the K̂·Ô₁ + K̂·Ô₂ images of one round together
with the labels of all their K̂Ô₁ × K̂Ô₂ pairs and pair weights that give positives and negatives
equal total weight (the sample-based batch of eq. 14-18). :meth:`~CrossDomainBatchSampler.
sample_pairs` draws the same kind of round as an explicit list of pairs, half positive and half
negative, whose images are fed once per pair (the paper's sample-pair-based batch of §5.5).

Identities come from labels, or from pairs: :func:`identities_from_pairs` takes the connected
components of the graph whose edges are the positive pairs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._solvers.batches import balanced_weights, pair_completeness
from crossmetric._utils.checks import check_positive_int
from crossmetric.pairs import identities_from_pairs

__all__ = ["CrossDomainBatchSampler", "SampleBatch", "PairBatch", "identities_from_pairs",
           "balanced_weights", "epoch_identity_batches", "pair_completeness"]


class SampleBatch(NamedTuple):
    """One sample-based batch: images ``ix`` of X and ``iy`` of Y, and all their pairs."""

    ix: np.ndarray  #: (n_x,) rows of the first domain
    iy: np.ndarray  #: (n_y,) rows of the second domain
    same: np.ndarray  #: (n_x, n_y) bool, True where the two images share an identity
    weight: np.ndarray  #: (n_x, n_y) pair weights; positives and negatives each sum to 1/2


class PairBatch(NamedTuple):
    """One pair-based batch: pair ``p`` joins row ``ix[p]`` of X and ``iy[p]`` of Y."""

    ix: np.ndarray
    iy: np.ndarray
    same: np.ndarray  #: (n_pairs,) bool
    weight: np.ndarray  #: (n_pairs,) positives and negatives each sum to 1/2


class CrossDomainBatchSampler:
    """Draw rounds of K̂ identities with Ô₁ first-domain and Ô₂ second-domain images each.

    Parameters
    ----------
    ids_x, ids_y : array-like of shape (n_x,), (n_y,)
        Identity of each image of the two domains. Only identities with at least one image in
        each domain are drawn.
    n_identities : int
        K̂, identities per round (at most the number of usable identities; at least 2).
    n_images_x, n_images_y : int
        Ô₁ and Ô₂, images per identity and domain. Drawn without replacement when the identity
        has enough images, with replacement otherwise.
    random_state : int, RandomState instance or None
    """

    def __init__(self, ids_x, ids_y, n_identities: int, n_images_x: int = 1,
                 n_images_y: int = 1, random_state=None):
        ids_x, ids_y = np.asarray(ids_x), np.asarray(ids_y)
        self.n_identities = check_positive_int(n_identities, "n_identities", minimum=2)
        self.n_images_x = check_positive_int(n_images_x, "n_images_x")
        self.n_images_y = check_positive_int(n_images_y, "n_images_y")
        usable = np.intersect1d(ids_x, ids_y)
        if usable.size < 2:
            raise ValueError(
                "the cross-domain batch generator needs at least 2 identities with images in "
                f"both domains (positive pairs), found {usable.size}."
            )
        self.identities = usable
        self.n_identities = min(self.n_identities, usable.size)
        self._rows_x = {c: np.flatnonzero(ids_x == c) for c in usable}
        self._rows_y = {c: np.flatnonzero(ids_y == c) for c in usable}
        # flat layout for vectorised single draws: rows of identity usable[k] are
        # flat[start[k]:start[k] + count[k]]
        self._flat = {}
        for side, rows in (("x", self._rows_x), ("y", self._rows_y)):
            counts = np.array([rows[c].size for c in usable])
            starts = np.r_[0, np.cumsum(counts)[:-1]]
            self._flat[side] = (np.concatenate([rows[c] for c in usable]), starts, counts)
        self.ids_x, self.ids_y = ids_x, ids_y
        self.rng = check_random_state(random_state)

    def _draw(self, rows: np.ndarray, k: int) -> np.ndarray:
        return self.rng.choice(rows, k, replace=rows.size < k)

    def _draw_one(self, side: str, identities: np.ndarray) -> np.ndarray:
        """One random image of each identity in ``identities`` (vectorised)."""
        flat, starts, counts = self._flat[side]
        k = np.searchsorted(self.identities, identities)
        offset = (self.rng.random_sample(k.size) * counts[k]).astype(np.int64)
        return flat[starts[k] + offset].astype(np.int64)

    def _identities(self) -> np.ndarray:
        return self.rng.choice(self.identities, self.n_identities, replace=False)

    def sample(self) -> SampleBatch:
        """One round as a sample-based batch: all K̂Ô₁ × K̂Ô₂ pairs of its images."""
        chosen = self._identities()
        ix = np.concatenate([self._draw(self._rows_x[c], self.n_images_x) for c in chosen])
        iy = np.concatenate([self._draw(self._rows_y[c], self.n_images_y) for c in chosen])
        same = self.ids_x[ix][:, None] == self.ids_y[iy][None, :]
        return SampleBatch(ix, iy, same, balanced_weights(same))

    def sample_pairs(self, n_pairs: int) -> PairBatch:
        """One round as ``n_pairs`` explicit pairs, half positive and half negative.

        Positives join a random first-domain and a random second-domain image of one chosen
        identity; negatives join images of two different chosen identities.
        """
        n_pairs = check_positive_int(n_pairs, "n_pairs", minimum=2)
        chosen = self._identities()
        n_pos = n_pairs // 2
        n_neg = n_pairs - n_pos
        a = self.rng.choice(chosen, n_pos)
        b1 = self.rng.randint(0, chosen.size, n_neg)
        b2 = (b1 + self.rng.randint(1, chosen.size, n_neg)) % chosen.size
        cx = np.r_[a, chosen[b1]]
        cy = np.r_[a, chosen[b2]]
        ix = self._draw_one("x", cx)
        iy = self._draw_one("y", cy)
        same = self.ids_x[ix] == self.ids_y[iy]
        return PairBatch(ix, iy, same, balanced_weights(same))


def identity_index(ids_x, ids_y) -> tuple:
    """Where each usable identity's images are: ``(usable, order_x, lo_x, hi_x, order_y, lo_y,
    hi_y)``, identity ``usable[c]`` having rows ``order_x[lo_x[c]:hi_x[c]]`` of X (and of Y
    likewise). Depends on the identities only; :func:`epoch_identity_batches` takes it
    precomputed (``index=``) so that a sampler does not sort them again every epoch."""
    ids_x, ids_y = np.asarray(ids_x), np.asarray(ids_y)
    usable = np.intersect1d(ids_x, ids_y)
    if usable.size < 2:
        raise ValueError(
            "the cross-domain batch generator needs at least 2 identities with images in "
            f"both domains, found {usable.size}."
        )
    order_x, order_y = np.argsort(ids_x, kind="stable"), np.argsort(ids_y, kind="stable")
    sx, sy = ids_x[order_x], ids_y[order_y]
    return (usable, order_x, np.searchsorted(sx, usable), np.searchsorted(sx, usable, "right"),
            order_y, np.searchsorted(sy, usable), np.searchsorted(sy, usable, "right"))


def epoch_identity_batches(ids_x, ids_y, n_identities: int, n_images_x: int = 1,
                           n_images_y: int = 1, random_state=None, *, index=None
                           ) -> list[tuple[np.ndarray, np.ndarray]]:
    """One epoch of the §4.2 generator: every usable identity is drawn at least once.

    The identities with images in both domains are shuffled and cut into rounds of
    ``n_identities``; the last, short round is filled up with identities drawn at random from
    the others, so that every round has K̂ identities and every identity appears in the epoch.
    Each identity contributes ``n_images_x`` / ``n_images_y`` distinct images drawn without
    replacement; an identity with fewer images contributes all it has (once each): a batch
    never holds the same image twice, it is smaller instead, and the balanced pair weights
    (:func:`balanced_weights`) absorb the difference.

    Parameters
    ----------
    ids_x, ids_y : array-like of shape (n_x,), (n_y,)
    n_identities, n_images_x, n_images_y : int
    random_state : int, RandomState instance or None
    index : tuple or None
        :func:`identity_index` of ``ids_x, ids_y``, if already computed.

    Returns
    -------
    list of (ix, iy)
        Rows of X and of Y of each round, grouped by identity (the identities in the same
        order in ``ix`` and ``iy``).
    """
    k = check_positive_int(n_identities, "n_identities", minimum=2)
    ox = check_positive_int(n_images_x, "n_images_x")
    oy = check_positive_int(n_images_y, "n_images_y")
    rng = check_random_state(random_state)
    if index is None:
        index = identity_index(ids_x, ids_y)
    usable, order_x, lo_x, hi_x, order_y, lo_y, hi_y = index
    k = min(k, usable.size)
    perm = rng.permutation(usable.size)
    rounds = [perm[i:i + k] for i in range(0, perm.size, k)]
    if rounds[-1].size < k:
        last = rounds[-1]
        rest = np.setdiff1d(np.arange(usable.size), last)
        rounds[-1] = np.r_[last, rng.choice(rest, k - last.size, replace=False)]

    def draw(order, lo, hi, c, o):
        rows = order[lo[c]:hi[c]]
        if rows.size <= o:
            return rows
        # = rng.choice(rows, o, replace=False), which takes the first o of
        # rows[rng.permutation(rows.size)]: shuffling a copy of rows makes the same swaps
        # (the same draws), without choice's argument handling
        rows = rows.copy()
        rng.shuffle(rows)
        return rows[:o]

    out = []
    for chosen in rounds:
        ix = np.concatenate([draw(order_x, lo_x, hi_x, c, ox) for c in chosen])
        iy = np.concatenate([draw(order_y, lo_y, hi_y, c, oy) for c in chosen])
        out.append((ix.astype(np.int64), iy.astype(np.int64)))
    return out
