"""Identity batches for sample-based training (GSM §4.2), NumPy only.

The GSM paper trains on *sample-based* batches: "for each round, we first randomly choose K̂
instance categories. For each category, a number of Ô₁ images [of the] first domain and a
number of Ô₂ from [the] second domain are randomly selected", and the loss runs over all
``n_x · n_y`` pairs of the batch's samples, positives and negatives balanced (eq. 14-18).

This module builds such batches from identities for learners on fixed features (``GSM``),
without torch: identities are the connected components of the positive pairs
(:func:`crossmetric.pairs.identities_from_pairs`); :func:`pair_completeness` says whether
those components may be fragments; :class:`IdentityRounds` draws the rounds of an epoch;
:func:`balanced_weights` and :func:`hardest_negatives` weight a batch's pairs.
``crossmetric.deep.sampler`` has a generator of the same kind for images (torch-free too, but
inside the torch package); its ``balanced_weights`` is :func:`balanced_weights` without
``keep``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._utils.checks import check_positive_int

__all__ = ["pair_completeness", "balanced_weights", "hardest_negatives", "IdentityRounds"]


def pair_completeness(ids_x: np.ndarray, ids_y: np.ndarray, ix: np.ndarray, iy: np.ndarray,
                      y: np.ndarray) -> float:
    """Share of the same-identity cross pairs that the positive pairs list (1.0 = all).

    With identities taken from the positive pairs, a value below 1 means the positives are a
    sample of the same-identity pairs: the components may then be fragments of coarser
    classes, and a batch built from them would treat two samples of one class as a negative.
    """
    pos = np.unique(np.c_[ix[y == 1], iy[y == 1]], axis=0)
    cx = np.unique(ids_x, return_counts=True)
    cy = np.unique(ids_y, return_counts=True)
    _, ax, ay = np.intersect1d(cx[0], cy[0], return_indices=True)
    total = float(np.sum(cx[1][ax].astype(np.float64) * cy[1][ay]))
    return float(pos.shape[0] / total) if total else 1.0


def balanced_weights(same: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Weights ``1 / (2 n_pos)`` on positives and ``1 / (2 n_neg)`` on (kept) negatives."""
    neg = ~same if keep is None else (~same & keep)
    n_pos, n_neg = int(np.count_nonzero(same)), int(np.count_nonzero(neg))
    w = np.zeros(same.shape)
    if n_pos:
        w[same] = 0.5 / n_pos
    if n_neg:
        w[neg] = 0.5 / n_neg
    return w


def hardest_negatives(S: np.ndarray, same: np.ndarray, n_hard: int) -> np.ndarray:
    """Mask of the ``n_hard`` hardest negatives of every row and every column.

    A negative (``same`` False) is hard when its dissimilarity ``S`` is small (GSM wants
    ``S >= 1`` on negatives). The mask is the union over rows and columns: for sample ``a`` of
    the first domain its ``n_hard`` negatives of smallest ``S[a, :]``, and likewise for each
    column. Positives are never in the mask.
    """
    n_hard = check_positive_int(n_hard, "hard_negatives")
    Sn = np.where(same, np.inf, S)
    keep = np.zeros(S.shape, dtype=bool)
    kr, kc = min(n_hard, S.shape[1]), min(n_hard, S.shape[0])
    rows = np.argpartition(Sn, kr - 1, axis=1)[:, :kr]
    keep[np.arange(S.shape[0])[:, None], rows] = True
    cols = np.argpartition(Sn, kc - 1, axis=0)[:kc]
    keep[cols, np.arange(S.shape[1])[None, :]] = True
    return keep & ~same


class IdentityRounds:
    """Rounds of K̂ identities with up to Ô₁ / Ô₂ samples each, every sample drawn in turn.

    The identities with samples in both domains are visited in a shuffled order, K̂ per round
    (reshuffled when all have been drawn); each identity's samples are also visited in a
    shuffled order, Ô per round and domain (fewer when it has fewer: a batch never holds a
    sample twice). :meth:`epoch` returns as many rounds as it takes to draw about as many
    first-domain samples as there are, so an epoch sees every sample about once.

    Parameters
    ----------
    ids_x, ids_y : array-like of shape (n_x,), (n_y,)
        Identity of each sample of the two domains.
    n_identities : int
        K̂ (at most the number of usable identities; at least 2).
    n_images_x, n_images_y : int
        Ô₁, Ô₂.
    random_state : int, RandomState instance or None
    """

    def __init__(self, ids_x, ids_y, n_identities: int, n_images_x: int = 1,
                 n_images_y: int = 1, random_state=None):
        self.ids_x, self.ids_y = np.asarray(ids_x), np.asarray(ids_y)
        k = check_positive_int(n_identities, "n_identities", minimum=2)
        self.n_images_x = check_positive_int(n_images_x, "n_images_x")
        self.n_images_y = check_positive_int(n_images_y, "n_images_y")
        usable = np.intersect1d(self.ids_x, self.ids_y)
        if usable.size < 2:
            raise ValueError(
                "identity batches need at least 2 identities with samples in both domains "
                f"(joined by positive pairs), found {usable.size}.")
        self.identities = usable
        self.n_identities = min(k, usable.size)
        self.rng = check_random_state(random_state)
        self._rows = [[np.flatnonzero(ids == c) for c in usable]
                      for ids in (self.ids_x, self.ids_y)]
        # each identity's shuffled cycle as a Python list: a round takes a few samples of
        # each of K̂ identities, where NumPy's per-call overhead (isin, r_) cost as much as
        # the training step (about half of a GSM fit on 871 single-shot persons as
        # NumPy arrays; benchmarks/bench_gsm_rounds.py)
        self._queue = [[self.rng.permutation(r).tolist() for r in side] for side in self._rows]
        self._order = np.empty(0, dtype=np.int64)
        n_x = sum(min(r.size, self.n_images_x) for r in self._rows[0])
        self.rounds_per_epoch = max(1, int(np.ceil(
            sum(r.size for r in self._rows[0]) / max(1, n_x) * usable.size
            / self.n_identities)))

    def _take(self, side: int, c: int, o: int) -> list:
        """The next ``o`` distinct samples of identity ``c`` in its shuffled cycle."""
        q = self._queue[side][c]
        if len(self._rows[side][c]) == 1:  # single-shot: its one sample (no draw, as below)
            return q[:]
        if len(q) < o:  # the rest of this cycle, then the next shuffled cycle
            nxt = self.rng.permutation(self._rows[side][c]).tolist()
            drawn = set(q)
            fill = [v for v in nxt if v not in drawn][: o - len(q)]
            taken = set(fill)
            self._queue[side][c] = [v for v in nxt if v not in taken]
            return q + fill
        self._queue[side][c] = q[o:]
        return q[:o]

    def round(self) -> tuple[np.ndarray, np.ndarray]:
        """One round: rows of X and rows of Y (grouped by identity, same identity order)."""
        k = self.n_identities
        if self._order.size < k:
            rest = self._order
            fresh = self.rng.permutation(np.setdiff1d(np.arange(self.identities.size), rest))
            self._order = np.r_[rest, fresh]
        chosen, self._order = self._order[:k], self._order[k:]
        ix = [i for c in chosen.tolist() for i in self._take(0, c, self.n_images_x)]
        iy = [i for c in chosen.tolist() for i in self._take(1, c, self.n_images_y)]
        return np.array(ix, dtype=np.int64), np.array(iy, dtype=np.int64)

    def epoch(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The rounds of one epoch (about one pass over the first domain's samples)."""
        return [self.round() for _ in range(self.rounds_per_epoch)]
