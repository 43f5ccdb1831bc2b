"""The one validation hold-out of the iterative learners (PCCA, CMML, LDML, CLML, CML_AUC,
CML_pAUC, GSM): early stopping, the choice of a start, and the guard that keeps the start.

The objectives of the papers have no regulariser (PCCA, CMML) or a weak one (LDML, CLML) and
overfit small training sets: on VIPeR (316 training persons) CMML reaches 75 % training rank-1
against 15 % on test persons, and from a random start a learned distance can end below the
untrained one. ``early_stopping`` makes the hold-out explicit, as scikit-learn's
``MLPClassifier`` does, and turns it into a guarantee:

1. :func:`validation_split` sets aside a fraction of the training *samples*, grouped by
   identity, together with the pairs among them. Identities are the connected components of the
   graph whose edges are the positive pairs (for cross-modal pairs the x- and y-samples are
   distinct nodes). Whole identities are drawn at random (``random_state``) until the validation
   side holds ``validation_fraction`` of the samples. Pairs with both ends on the training side
   are the training pairs; no sample of the validation side is seen in training.
2. :class:`EarlyStopping` scores the start and every iterate on the validation *identities*:
   all cross distances among the held-out samples (every pair of them, not only the sparse
   validation pairs) give the rank-1 rate (first-view samples as probes against the second
   view's, as the identification protocol measures; leave-one-out for one view; ties count as
   misses) and the ROC AUC of same vs different identity. The check kept is the best (rank-1,
   then AUC) of those better than the start beyond the hold-out's noise -- its probes won
   against the start outnumber those lost by a one-sided sign test at 5 % with an AUC no lower
   (:meth:`EarlyStopping.better`), or, no probe changing, its AUC is higher -- and the start
   when there is none, so that the fitted model is never worse than its start on the
   held-out identities, and a move away from it is not one of chance. The solver
   stops once neither the score nor the learner's own loss on those samples (the positives'
   and the negatives' mean losses weighted by the shares of the two classes among the
   *training* pairs) has improved for ``n_iter_no_change`` iterations. Both are watched because each
   alone stops too early: from a random start the score can sit flat for more than ten
   iterations while the loss falls (kernel CMML), and the loss can rise -- the model growing
   confident on a few pairs -- while the score still improves.
3. :func:`choose_start` scores several candidate starts (the untrained distance, the closed
   forms, the paper's start) the same way; a later one replaces an earlier only by the same
   rule. The closed-form starts are also fitted on :data:`START_FOLDS` identity folds of the
   training side and scored on each fold's held-out identities (:func:`fold_start_hits`), so
   that two of them are compared on every training identity, not on the hold-out's fifth
   alone.

``early_stopping="auto"`` (the learners' default) turns this on when the training pairs hold
:data:`AUTO_MIN_IDENTITIES` to :data:`AUTO_MAX_IDENTITIES` identities whose same-identity pairs
are all given as positives -- persons of a face, sketch or re-id set, where overfitting is the
rule and a held-out share is cheap. It is off otherwise: with many identities the plain run of
the paper is both faithful and safe, and with few, or with positives sampled from classes
(digits, mfeat), the components of the positives are classes or fragments of classes that the
test pairs share. ``early_stopping=False`` is the paper's plain run, and without a hold-out
``init="auto"`` is the paper's start. These guards are the library's, not the papers'.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._base import squared_euclidean_matrix
from crossmetric._solvers.selection_scan import scan_candidates
from crossmetric._utils.checks import check_positive_int, check_positive_scalar
from crossmetric.losses import generalized_logistic
from crossmetric.metrics import roc_auc
from crossmetric.pairs import identities_from_pairs, positive_components
from crossmetric.pairs._identity_draws import deal_identities, hold_out_identities
from crossmetric.pairs._pair_data import PairData, used_pairs

__all__ = ["AUTO_MAX_IDENTITIES", "EarlyStopping", "Validation", "validation_split",
           "check_early_stopping", "resolve_early_stopping", "describes_identities",
           "auto_identity_count",
           "split_pairs", "identity_folds", "fold_seed", "scan_identity_folds", "choose_start",
           "fold_start_hits", "START_FOLDS",
           "identity_validation",
           "vector_monitor", "clear"]

#: ``early_stopping="auto"`` holds out identities below this many training identities
AUTO_MAX_IDENTITIES = 1000
#: the fewest identities ``"auto"`` holds some out from: below, the identities are classes
#: (digits, mfeat), test pairs share them, and holding out whole classes would both take a
#: large share of them from training and measure another task than the test's
AUTO_MIN_IDENTITIES = 30
#: a check replaces the start (or the best so far) when its held-out probes won exceed those
#: lost by this many standard deviations of a fair coin (one-sided, 5 %): the normal
#: approximation of the sign test, which at three or four changed probes (3 of 3: exact p =
#: 0.125) is more lenient than the exact binomial test. The exact test was measured in its
#: place (the benchmark's defaults on the five sets of ``benchmarks/start_guard.py``, rank-1
#: %): CUFS HOG unchanged, CUFS dense SIFT CML_AUC 99.2 → 98.1, CML_pAUC 98.9 → 97.6, GSM 98.7
#: → 97.6, VIPeR LOMO CML_AUC 27.0 → 25.1, VIPeR strips CML_AUC 21.8 → 22.6, PKU-Sketch CMML
#: 5.1 → 6.8 -- more starts kept where training helped; not taken. Counting a probe as won or
#: lost by its true match's rank (won: ranked higher) rather than by its hit, for power on hard
#: hold-outs where few probes hit, was measured too (same runs): CUFS HOG CML_AUC and CML_pAUC
#: 93.3 → 92.3, dense SIFT CML_pAUC 98.9 → 95.5, CMML 97.3 → 96.8, VIPeR strips and LOMO within
#: ±1.4, and on PKU-Sketch the start kept on more splits, not fewer (CMML and GSM 3/3, were
#: 1/3): rank moves are noisy both ways; not taken.
SIGN_TEST_Z = 1.645
#: at most this many held-out samples per side are scored (a seeded subset above)
MAX_VALIDATION_SAMPLES = 2000
#: identity folds of a learner's training side on which :func:`fold_start_hits` scores the
#: closed-form starts: each holds out as many identities as the hold-out (a fifth of the
#: training identities each, at ``validation_fraction=0.2``), so that with the hold-out every
#: training identity is scored once
START_FOLDS = 4


def check_early_stopping(estimator) -> tuple[bool | str, float, int]:
    """Validate ``early_stopping`` (True, False or ``"auto"``), ``validation_fraction`` and
    ``n_iter_no_change``.

    An estimator without these parameters (a subclass that does not offer them) gets the
    defaults: no early stopping.
    """
    early = getattr(estimator, "early_stopping", False)
    if not (isinstance(early, bool | np.bool_) or (isinstance(early, str) and early == "auto")):
        raise ValueError(f"early_stopping must be True, False or 'auto', got {early!r}.")
    raw = getattr(estimator, "validation_fraction", 0.1)
    fraction = check_positive_scalar(raw, "validation_fraction")
    if not fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), got {raw!r}.")
    patience = check_positive_int(getattr(estimator, "n_iter_no_change", 10),
                                  "n_iter_no_change")
    return (early if isinstance(early, str) else bool(early)), fraction, patience


def _components(ix, iy, y, n_x: int, n_y: int, tied: bool):
    """``(n_nodes, offset, component of each node)`` of the positive-pair graph."""
    offset = 0 if tied else n_x
    n_nodes = n_x if tied else n_x + n_y
    n_comp, comp = positive_components(n_nodes, ix, iy + offset, y)
    return n_nodes, offset, n_comp, comp


def _used_components(ix, iy, y, n_x: int, n_y: int, tied: bool):
    """``(offset, component of each node, used nodes, used samples per component)``: only the
    samples that take part in pairs count."""
    n_nodes, offset, n_comp, comp = _components(ix, iy, y, n_x, n_y, tied)
    used = np.zeros(n_nodes, dtype=bool)
    used[ix] = True
    used[iy + offset] = True
    return offset, comp, used, np.bincount(comp[used], minlength=n_comp)


def resolve_early_stopping(estimator, data: PairData, y: np.ndarray, tied: bool) -> bool:
    """Whether this fit holds out identities: ``early_stopping`` itself, or for ``"auto"``
    whether the pairs describe identities -- every same-identity pair of samples is a given
    positive (:func:`positive_completeness`), so that the components of the positives are the
    identities and not fragments of coarser classes -- and hold between
    :data:`AUTO_MIN_IDENTITIES` and :data:`AUTO_MAX_IDENTITIES` of them."""
    early, _, _ = check_early_stopping(estimator)
    if early != "auto":
        return bool(early)
    return describes_identities(data, y, tied)


def auto_identity_count(n_identities: int) -> bool:
    """Whether ``early_stopping="auto"`` holds out from this many identities: between
    :data:`AUTO_MIN_IDENTITIES` and :data:`AUTO_MAX_IDENTITIES` (excluded)."""
    return AUTO_MIN_IDENTITIES <= n_identities < AUTO_MAX_IDENTITIES


def describes_identities(data: PairData, y: np.ndarray, tied: bool) -> bool:
    """The rule of ``early_stopping="auto"``: the pairs describe between
    :data:`AUTO_MIN_IDENTITIES` and :data:`AUTO_MAX_IDENTITIES` identities, every
    same-identity pair of their samples being a given positive (:func:`positive_completeness`)."""
    _, offset, _, comp = _components(data.ix, data.iy, y, data.X.shape[0], data.Y.shape[0],
                                     tied)
    pos = y == 1
    if not auto_identity_count(np.unique(comp[data.ix[pos]]).size):
        return False
    return positive_completeness(comp, data.ix, data.iy + offset, y, data.X.shape[0],
                                 tied) >= 1.0 - 1e-9


def positive_completeness(comp: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray,
                          n_x: int, tied: bool) -> float:
    """Share of the same-component pairs of samples (x with y, or unordered pairs of one set
    when ``tied``) that the positive pairs ``(a, b)`` (node indices) list; 1.0 = all of them.

    Below 1 the positives are a sample of the same-identity pairs, and their components may be
    fragments of coarser classes (two samples of one class in different components), whose
    held-out cross pairs would be mislabelled.
    """
    pos = y == 1
    a, b = a[pos], b[pos]
    if tied:
        a, b = np.minimum(a, b), np.maximum(a, b)
        keep = a != b
        n_pos = np.unique(np.c_[a[keep], b[keep]], axis=0).shape[0]
        counts = np.bincount(comp)
        total = float(np.sum(counts * (counts - 1) / 2.0))
    else:
        n_pos = np.unique(np.c_[a, b], axis=0).shape[0]
        total = float(np.sum(np.bincount(comp[:n_x], minlength=comp.max() + 1).astype(float)
                             * np.bincount(comp[n_x:], minlength=comp.max() + 1)))
    return n_pos / total if total else 1.0


def validation_split(ix: np.ndarray, iy: np.ndarray, y: np.ndarray, n_x: int, n_y: int, *,
                     tied: bool, fraction: float, random_state=None):
    """Masks ``(train, validation)`` over the pairs; the two share no sample.

    Parameters
    ----------
    ix, iy : int arrays (n_pairs,)
        Sample indices of each pair (rows of X and of Y).
    y : int array (n_pairs,)
        +1 / -1.
    n_x, n_y : int
        Number of samples of each modality.
    tied : bool
        ``ix`` and ``iy`` index one set of samples (single-modal).
    fraction : float in (0, 1)
        Share of the samples (whole identities) set aside for validation.
    random_state : int, RandomState instance or None

    Returns
    -------
    train, validation : bool arrays (n_pairs,)
        Pairs across the split are in neither. The training side holds positive and negative
        pairs, the validation side positive ones (it is scored on all the cross distances of
        its samples, so it needs no negative pairs of its own).
    """
    rng = check_random_state(random_state)
    offset, comp, used, sizes = _used_components(ix, iy, y, n_x, n_y, tied)
    # the one splitter's draw: the groups (connected components) in random order
    groups = np.flatnonzero(sizes)
    order, _ = hold_out_identities(groups, groups.size, rng)
    target = fraction * used.sum()
    take = order[:max(1, int(np.searchsorted(np.cumsum(sizes[order]), target) + 1))]
    if take.size >= order.size:
        take = take[:-1]
    held = np.zeros(sizes.size, dtype=bool)
    held[take] = True
    a, b = held[comp[ix]], held[comp[iy + offset]]
    validation, train = a & b, ~a & ~b
    for name, mask, needed in (("validation", validation, {1}),
                               ("training", train, {-1, 1})):
        missing = needed - set(np.unique(y[mask]).tolist())
        if missing:
            raise ValueError(
                f"early_stopping: the {name} side of the split by identity "
                f"(validation_fraction={fraction}) has no "
                f"{'positive' if 1 in missing else 'negative'} pairs; use more pairs "
                f"(negatives among the samples of a few identities), another "
                f"validation_fraction, or early_stopping=False."
            )
    return train, validation


class Validation(NamedTuple):
    """The held-out side of a fit: its samples and the identity of each.

    ``data.X`` / ``data.Y`` hold the validation samples (rows scored against each other),
    ``ids_x`` / ``ids_y`` their identities (components of the validation positives), ``tied``
    whether one set of samples plays both parts (single-modal)."""

    data: PairData
    y: np.ndarray
    ids_x: np.ndarray
    ids_y: np.ndarray
    tied: bool


def _subsample(ids: np.ndarray, rng) -> np.ndarray:
    """Rows kept for scoring: all, or a seeded subset of :data:`MAX_VALIDATION_SAMPLES`."""
    if ids.size <= MAX_VALIDATION_SAMPLES:
        return np.arange(ids.size)
    return np.sort(rng.choice(ids.size, MAX_VALIDATION_SAMPLES, replace=False))


def identity_validation(ids_x: np.ndarray, ids_y: np.ndarray, rng, *, tied: bool = False,
                        data: PairData | None = None, y: np.ndarray | None = None):
    """``(validation, rows_x, rows_y)``: the :class:`Validation` of held-out samples of
    identities ``ids_x`` / ``ids_y``, at most :data:`MAX_VALIDATION_SAMPLES` a side (a seeded
    subset: ``rows_x`` / ``rows_y`` index the kept ones)."""
    kx = _subsample(ids_x, rng)
    ky = kx if tied else _subsample(ids_y, rng)
    if data is not None:
        X = data.X[kx]
        data = data._replace(X=X, Y=X if tied else data.Y[ky])
    return Validation(data, y, ids_x[kx], ids_y[ky], bool(tied)), kx, ky


def _validation(val: PairData, y_val: np.ndarray, tied: bool, rng,
                oriented: bool = False) -> Validation:
    if tied:
        _, comp = positive_components(val.X.shape[0], val.ix, val.iy, y_val)
        if oriented:  # probes: the samples pairs name first; gallery: those named second
            first, ix = np.unique(val.ix, return_inverse=True)
            second, iy = np.unique(val.iy, return_inverse=True)
            data = PairData(val.X[first], val.X[second], ix, iy)
            return identity_validation(comp[first], comp[second], rng, data=data, y=y_val)[0]
        return identity_validation(comp, comp, rng, tied=True, data=val, y=y_val)[0]
    ids_x, ids_y, _ = identities_from_pairs(val.X.shape[0], val.Y.shape[0], val.ix, val.iy,
                                            y_val)
    return identity_validation(ids_x, ids_y, rng, data=val, y=y_val)[0]


def split_pairs(estimator, data: PairData, y: np.ndarray, *, tied: bool | None = None):
    """``(train_data, y_train, validation)`` for ``estimator.early_stopping``.

    Without a hold-out (``early_stopping=False``, or ``"auto"`` on many identities)
    ``validation`` is ``None`` and the data come back as they are. ``data`` is a
    :class:`crossmetric._base.PairData`; the training side holds only the samples its pairs
    use (:func:`crossmetric._base.used_pairs`), so that a learner fits from ``data.X`` /
    ``data.Y`` as they come, split or not; ``validation`` is a :class:`Validation`.
    """
    if tied is None:
        tied = data.X is data.Y and not estimator._cross_modal
    if not resolve_early_stopping(estimator, data, y, tied):
        return data, y, None
    _, fraction, _ = check_early_stopping(estimator)
    rng = check_random_state(estimator.random_state)
    try:
        train, val = validation_split(data.ix, data.iy, y, data.X.shape[0], data.Y.shape[0],
                                      tied=tied, fraction=fraction, random_state=rng)
    except ValueError:
        if estimator.early_stopping == "auto":  # too few pairs to hold any out: the plain run
            return data, y, None
        raise
    held = used_pairs(data._replace(ix=data.ix[val], iy=data.iy[val]), tied)
    # one sample set whose pairs join two disjoint parts of it (two domains stacked, as the
    # protocols give them to a single-modal learner) is scored as the protocols score it:
    # the first part's samples as probes against the second's, not all against all
    oriented = tied and np.intersect1d(data.ix, data.iy).size == 0
    return (used_pairs(data._replace(ix=data.ix[train], iy=data.iy[train]), tied), y[train],
            _validation(held, y[val], tied, rng, oriented))


def fold_seed(random_state):
    """The seed of :func:`identity_folds` for a learner's ``random_state``: itself, or 0 for
    ``None`` (the folds are then a fixed function of the training pairs, as the closed forms
    that draw them are deterministic given their folds)."""
    return 0 if random_state is None else random_state


def identity_folds(data: PairData, y: np.ndarray, *, tied: bool, n_folds: int,
                   random_state=None) -> list[tuple[PairData, np.ndarray, Validation]]:
    """The training identities dealt into ``n_folds`` folds (:func:`deal_identities` over the
    components of the positive pairs, as :func:`validation_split` groups them): per fold
    ``(train_data, y_train, validation)``, its identities held out as :func:`split_pairs`
    holds out one share, so that every identity is scored once.

    A ``ValueError`` when a fold's training side lacks a positive or a negative pair, or its
    held-out side a positive pair.
    """
    rng = check_random_state(random_state)
    offset, comp, _, sizes = _used_components(data.ix, data.iy, y, data.X.shape[0],
                                              data.Y.shape[0], tied)
    groups = np.flatnonzero(sizes)
    if groups.size < n_folds:
        raise ValueError(f"identity_folds: {groups.size} identities cannot fill "
                         f"{n_folds} folds.")
    fold_of = np.full(sizes.size, -1)
    fold_of[groups] = deal_identities(groups.size, n_folds, rng)
    fa, fb = fold_of[comp[data.ix]], fold_of[comp[data.iy + offset]]
    oriented = tied and np.intersect1d(data.ix, data.iy).size == 0
    out = []
    for f in range(n_folds):
        validation, train = (fa == f) & (fb == f), (fa != f) & (fb != f)
        if not (y[validation] == 1).any() or np.unique(y[train]).size < 2:
            raise ValueError(f"identity_folds: fold {f} has no held-out positive pair or "
                             f"no training pair of one label.")
        held = used_pairs(data._replace(ix=data.ix[validation], iy=data.iy[validation]),
                          tied)
        out.append((used_pairs(data._replace(ix=data.ix[train], iy=data.iy[train]), tied),
                    y[train], _validation(held, y[validation], tied, rng, oriented)))
    return out


def _identity_folds_or_none(data: PairData, y: np.ndarray, tied: bool, n_folds: int,
                            random_state):
    """:func:`identity_folds` drawn from :func:`fold_seed`, or ``None`` where the pairs do not
    describe identities (:func:`describes_identities`) or cannot fill the folds."""
    if not describes_identities(data, y, tied):
        return None
    try:
        return identity_folds(data, y, tied=tied, n_folds=n_folds,
                              random_state=fold_seed(random_state))
    except ValueError:
        return None


def scan_identity_folds(data: PairData, y: np.ndarray, grid: list, distances, *, tied: bool,
                        n_folds: int, random_state=None):
    """Every candidate of ``grid`` scored on ``n_folds`` :func:`identity_folds` by the held-out
    rank-1 of :meth:`EarlyStopping.score_matrix`, through the one scan
    (:func:`~crossmetric._solvers.selection_scan.scan_candidates`: the best mean wins, a tie
    keeps the earlier candidate). ``distances(params, fold)`` returns the distances between a
    fold's held-out samples (``fold = (train_data, y_train, validation)``) of the candidate
    fitted on its training side. Returns the :class:`~crossmetric._solvers.selection_scan.Scan`,
    or ``None`` where the pairs do not describe identities (:func:`describes_identities`) or
    cannot fill the folds -- the closed forms' size choices and the closed-form start's.
    """
    folds = _identity_folds_or_none(data, y, tied, n_folds, random_state)
    if folds is None:
        return None

    def rank1(params, f):
        return EarlyStopping(None, folds[f][2], 1).score_matrix(distances(params, folds[f]))[0]

    return scan_candidates(grid, n_folds, rank1)


class EarlyStopping:
    """Scores a start and the iterates on held-out identities; tells the solver when to stop.

    Parameters
    ----------
    cross : callable
        ``cross(params)`` → ``(D, threshold)``: the learned distances between the validation
        samples (``D[a, b]`` between x-sample ``a`` and y-sample ``b``; one square matrix for a
        single modality) for the solver's parameters, and the threshold of the loss (1 for
        PCCA / CMML / CML_AUC, the learned bias for LDML / CLML).
    validation : Validation
        The held-out samples' identities.
    n_iter_no_change : int
        Stop after this many consecutive iterations in which neither the validation score nor
        the validation loss improved.
    beta : float
        Sharpness of the generalized logistic loss ``ℓ_β(l (d − threshold))``.
    positive_share : float
        Weight of the positive pairs' mean loss (the share of positives among the training
        pairs); the negatives get ``1 − positive_share``.

    Attributes
    ----------
    losses : list of float
        Validation loss after each iteration (entry 0: the starting point).
    scores : list of float
        Validation rank-1 after each iteration.
    aucs : list of float
        Validation ROC AUC after each iteration.
    best_iteration : int
        Iteration of the best validation score (0: the starting point).
    best_params
        A copy of the best parameters.
    """

    def __init__(self, cross, validation: Validation, n_iter_no_change: int,
                 beta: float = 1.0, positive_share: float = 0.5):
        self.cross = cross
        self.n_iter_no_change = int(n_iter_no_change)
        self.beta = float(beta)
        self.positive_share = float(positive_share)
        same = validation.ids_x[:, None] == validation.ids_y[None, :]
        valid = np.ones_like(same)
        if validation.tied:
            np.fill_diagonal(valid, False)
        self._same, self._valid, self._validation = same, valid, validation
        self._label = np.where(same[valid], 1, -1)
        # probes with a true match among the other side's samples
        self._probes_x = np.flatnonzero((same & valid).any(axis=1))
        self.losses: list[float] = []
        self.scores: list[float] = []
        self.aucs: list[float] = []
        self.best_loss = np.inf
        self.best_score = (-np.inf, -np.inf)
        self.best_seen = (-np.inf, -np.inf)  # for the patience: any improvement counts
        self.best_hits = None
        self.start_score, self.start_hits = None, None
        self.last_hits = None
        self.best_iteration = 0
        self.last_improvement = 0
        self.best_params = None
        self.unpack = None  # set by a solver that works on a flat parameter vector

    def probe_hits(self, D: np.ndarray) -> np.ndarray:
        """Whether each probe's nearest gallery sample is a true match (strictly nearer than
        every other identity's: ties are misses), first-view samples as probes against the
        second view's, as the identification protocol and :meth:`cross_distance` order
        them (a distance need not rank the same both ways: on raw HOG of CUFS photo → sketch
        is 97 % and sketch → photo 43 %)."""
        P = D[self._probes_x]
        same = self._same[self._probes_x]
        valid = self._valid[self._probes_x]
        nearest_same = np.where(same & valid, P, np.inf).min(axis=1)
        nearest_other = np.where(~same & valid, P, np.inf).min(axis=1)
        return nearest_same < nearest_other

    def score_matrix(self, D: np.ndarray) -> tuple[float, float]:
        """``(rank-1, ROC AUC)`` of the validation distances ``D`` (:meth:`probe_hits`)."""
        hits = self.probe_hits(D)
        r1 = float(hits.mean()) if hits.size else 0.0
        labels = self._label
        auc = roc_auc(labels, -D[self._valid]) if np.unique(labels).size == 2 else 0.5
        return r1, float(auc)

    def evaluate(self, params) -> tuple[float, tuple[float, float]]:
        """``(validation loss, (rank-1, AUC))`` of ``params``; the probes' hits are kept in
        ``last_hits``."""
        D, threshold = self.cross(self.unpack(params) if self.unpack is not None else params)
        if not (np.all(np.isfinite(D)) and np.isfinite(threshold)):
            self.last_hits = np.zeros(self._probes_x.size, dtype=bool)
            return np.inf, (-np.inf, -np.inf)
        d = D[self._valid]
        terms = generalized_logistic(self._label * (d - threshold), self.beta)
        pos = self._label == 1
        w = self.positive_share
        loss = (w * float(terms[pos].mean()) if pos.any() else 0.0) + \
            ((1.0 - w) * float(terms[~pos].mean()) if (~pos).any() else 0.0)
        score = self.score_matrix(D)
        self.last_hits = self.probe_hits(D)
        return loss, score

    def better(self, score, hits, than_score, than_hits) -> bool:
        """Whether a check beats a reference (the start) on the held-out identities beyond
        their noise: its probes won (hit where the reference missed) outnumber those lost by
        more than 1.645 √(won + lost) (a one-sided sign test at 5 %) and its AUC is not lower,
        or no probe changed and its AUC is higher. Moving away from the start on a difference
        the held-out probes cannot tell from chance would make the returned model the
        luckiest of many checks rather than a better one."""
        if than_hits is None:
            return True
        won = int(np.sum(hits & ~than_hits))
        lost = int(np.sum(~hits & than_hits))
        if won == lost == 0:
            return bool(score[1] > than_score[1])
        # and no lower AUC: the ranking of every held-out pair, not only each probe's first
        return bool(won - lost > SIGN_TEST_Z * np.sqrt(won + lost)
                    and score[1] >= than_score[1])

    def update(self, iteration: int, params) -> bool:
        """Record the validation loss and score of ``params`` after ``iteration`` iterations;
        returns True when the solver should stop."""
        loss, score = self.evaluate(params)
        hits = self.last_hits
        self.losses.append(float(loss))
        self.scores.append(score[0])
        self.aucs.append(score[1])
        if loss < self.best_loss:
            self.best_loss = loss
            self.last_improvement = int(iteration)
        if score > self.best_seen:
            self.best_seen = score
            self.last_improvement = int(iteration)
        if self.start_hits is None:  # the start: the reference of every later check
            self.start_score, self.start_hits = score, hits
        # kept: the best check of those better than the start beyond the hold-out's noise
        if self.best_hits is None or (score > self.best_score and self.better(
                score, hits, self.start_score, self.start_hits)):
            self.best_score, self.best_hits = score, hits
            self.best_iteration = int(iteration)
            if isinstance(params, dict):
                self.best_params = {k: np.array(v, copy=True) for k, v in params.items()}
            elif isinstance(params, list | tuple):
                self.best_params = [np.array(p, copy=True) for p in params]
            else:
                self.best_params = np.array(params, copy=True)
        return iteration - self.last_improvement >= self.n_iter_no_change

    #: what :meth:`state_dict` holds beside the probes' hits
    _RECORD = ("losses", "scores", "aucs", "best_loss", "best_score", "best_seen",
               "start_score", "best_iteration", "last_improvement")

    def state_dict(self) -> dict:
        """The record of the checks so far as plain Python values (floats, lists, bools: what
        a ``torch.load(weights_only=True)`` checkpoint holds), the parameters left out."""
        state = {k: (list(v) if isinstance(v, tuple) else v)
                 for k, v in ((k, getattr(self, k)) for k in self._RECORD)}
        for k in ("start_hits", "best_hits"):
            hits = getattr(self, k)
            state[k] = None if hits is None else [bool(h) for h in hits]
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (a resumed run)."""
        for k in self._RECORD:
            v = state[k]
            setattr(self, k, tuple(v) if k in ("best_score", "best_seen", "start_score")
                    and v is not None else v)
        for k in ("start_hits", "best_hits"):
            setattr(self, k, None if state[k] is None else np.asarray(state[k], dtype=bool))

    def record(self, estimator) -> None:
        """Set ``validation_scores_`` (rank-1), ``validation_aucs_``,
        ``validation_loss_curve_`` and ``best_iteration_``."""
        estimator.validation_scores_ = list(self.scores)
        estimator.validation_aucs_ = list(self.aucs)
        estimator.validation_loss_curve_ = list(self.losses)
        estimator.best_iteration_ = int(self.best_iteration)


def fold_start_hits(data: PairData, y: np.ndarray, names, distances, *, tied: bool,
                    random_state=None) -> dict:
    """``{name: (hits, aucs)}``: each named start of ``names`` fitted on the training side of
    :data:`START_FOLDS` identity folds of the pairs ``data`` (a learner's training side, the
    hold-out already set aside) and scored on each fold's held-out identities as the guard
    scores (:meth:`EarlyStopping.probe_hits`, the probes of every fold in one array; the
    folds' ROC AUCs).

    ``distances(name, fold, rows)`` returns the distances between a fold's held-out samples
    (``fold = (train_data, y_train, validation)`` on the samples of ``data``) of that start
    built from the fold's training side, or ``None`` where it cannot be built (that name is
    then left out); ``rows = (rows_x, rows_y)`` number the held-out samples in ``data.X`` /
    ``data.Y``, for a start scored on other coordinates of the same samples (the untrained
    distance of the raw samples beside a learner's reduction). Empty where the pairs do not
    describe identities (:func:`describes_identities`) or cannot fill the folds: the hold-out
    alone then chooses.
    """
    names = list(names)
    if len(names) < 2:
        return {}
    # the folds drawn over row numbers, so that each fold's samples can be taken anywhere
    numbers_x = np.arange(data.X.shape[0], dtype=float)[:, None]
    numbers = PairData(numbers_x, numbers_x if tied else
                       np.arange(data.Y.shape[0], dtype=float)[:, None], data.ix, data.iy)
    folds = _identity_folds_or_none(numbers, y, tied, START_FOLDS, random_state)
    if folds is None:
        return {}
    hits: dict = {name: [] for name in names}
    aucs: dict = {name: [] for name in names}
    for train, y_train, validation in folds:
        rows = _row_numbers(validation.data)
        fold = (_samples_of(train, data), y_train,
                validation._replace(data=_samples_of(validation.data, data)))
        scorer = EarlyStopping(None, fold[2], 1)
        for name in list(hits):
            D = distances(name, fold, rows)
            if D is None:
                del hits[name], aucs[name]
                continue
            hits[name].append(scorer.probe_hits(D))
            aucs[name].append(scorer.score_matrix(D)[1])
    return {name: (np.concatenate(hits[name]), aucs[name]) for name in hits}


def _row_numbers(numbers: PairData) -> tuple[np.ndarray, np.ndarray]:
    return numbers.X[:, 0].astype(int), numbers.Y[:, 0].astype(int)


def _samples_of(numbers: PairData, data: PairData) -> PairData:
    """The pairs of ``numbers`` (samples given by their row numbers) on ``data``'s samples;
    one shared sample set stays shared."""
    rows_x, rows_y = _row_numbers(numbers)
    X = data.X[rows_x]
    return numbers._replace(X=X, Y=X if numbers.Y is numbers.X else data.Y[rows_y])


def choose_start(monitor: EarlyStopping | None, candidates: dict, before=None,
                 folds: dict | None = None):
    """``(name, params)`` of the best start among ``candidates`` (name → params, in order of
    preference): a later candidate replaces the one kept so far only when it is better beyond
    the held-out noise (:meth:`EarlyStopping.better`); without a monitor, the first.
    ``before(name)``, when given, is called before a candidate is scored (a learner whose
    distance has a fixed part that depends on the start sets it there).

    ``folds`` (:func:`fold_start_hits`) adds the probes of identity folds of the training
    side to the hold-out's for the starts it scored: two such starts are compared on every
    training identity (rank-1 of all the probes, mean of the ROC AUCs), the others on the
    hold-out alone. A hold-out of a fifth of a few hundred identities cannot tell 95 % from
    100 % rank-1 (two or three probes change); all of them can. Each candidate's score is
    kept in ``monitor.start_scores`` (with the folds' probes where they count).
    """
    names = list(candidates)
    if monitor is None or len(names) == 1:
        if monitor is not None:
            monitor.start_scores = {names[0]: None}
        return names[0], candidates[names[0]]
    folds = folds or {}
    scores, held, pooled = {}, {}, {}
    best = None
    for name, params in candidates.items():
        if before is not None:
            before(name)
        held[name] = (monitor.evaluate(params)[1], monitor.last_hits)
        if name in folds:
            hits = np.concatenate([monitor.last_hits, folds[name][0]])
            auc = float(np.mean([held[name][0][1], *folds[name][1]]))
            pooled[name] = ((float(hits.mean()) if hits.size else 0.0, auc), hits)
        scores[name] = (pooled.get(name) or held[name])[0]
        if best is None:
            best = name
            continue
        both = pooled if name in pooled and best in pooled else held
        if monitor.better(*both[name], *both[best]):
            best = name
    monitor.start_scores = scores
    return best, candidates[best]


def clear(estimator) -> None:
    """``validation_scores_`` and ``best_iteration_`` of a fit without a hold-out."""
    estimator.validation_scores_ = None
    estimator.validation_aucs_ = None
    estimator.validation_loss_curve_ = None
    estimator.best_iteration_ = None


def embedding_monitor(estimator, validation: Validation | None, embed, threshold,
                      y_train: np.ndarray, beta: float = 1.0, offset=None):
    """:class:`EarlyStopping` for a learner whose distance is a squared Euclidean distance
    between embeddings: ``embed(params, side)`` embeds the validation samples of ``side``
    (``"x"``, or ``"y"`` for the second tower of a two-tower learner) and ``threshold(params)``
    is the loss's threshold; ``offset()``, when given, returns a fixed part added to the
    distances. ``None`` without a hold-out."""
    if validation is None:
        return None
    _, _, patience = check_early_stopping(estimator)

    def cross(params):
        FX = embed(params, "x")
        FY = FX if validation.tied else embed(params, "y")
        D = squared_euclidean_matrix(FX, FY)
        return (D if offset is None else D + offset()), threshold(params)

    return EarlyStopping(cross, validation, patience, beta, float(np.mean(y_train == 1)))


def vector_monitor(estimator, validation: Validation | None, embed, y_train):
    """:func:`embedding_monitor` for a flat parameter vector ``theta`` whose last entry is the
    loss's threshold (LDML, CLML); ``embed(theta, V)`` embeds validation samples ``V``."""
    if validation is None:
        return None
    v = validation.data
    return embedding_monitor(estimator, validation,
                             lambda t, side: embed(t, v.X if side == "x" else v.Y),
                             lambda t: t[-1], y_train)
