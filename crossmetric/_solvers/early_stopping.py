"""Early stopping on held-out pairs for the iterative pair learners (PCCA, CMML, LDML, CLML).

The objectives of the papers have no regulariser (PCCA, CMML) or a weak one (LDML, CLML) and
overfit small training sets: measured on digits instance pairs, the held-out AUC of kernel CMML
peaks after a few iterations and then falls while the training objective keeps decreasing.
The papers' gradient descent generalises partly because it stops early. ``early_stopping=True``
makes that explicit, as scikit-learn's ``MLPClassifier`` does:

1. :func:`validation_split` sets aside a fraction of the training *samples*, grouped by
   identity, together with the pairs among them. Identities are the connected components of the
   graph whose edges are the positive pairs (for cross-modal pairs the x- and y-samples are
   distinct nodes). Whole identities are drawn at random (``random_state``) until the validation
   side holds ``validation_fraction`` of the samples. Pairs with both ends on the validation
   side are validation pairs, pairs with both ends on the training side are training pairs, and
   the (negative) pairs that join the two sides are dropped, so that no sample of a validation
   pair is seen in training.
2. :class:`EarlyStopping` evaluates every iterate on the validation pairs: the ROC AUC of the
   learned distance, and the learner's own loss (the positives' and the negatives' mean
   losses weighted by the shares of the two classes among the *training* pairs, so that it
   estimates the training objective on unseen samples). The solver stops once *neither* has
   improved for ``n_iter_no_change`` consecutive iterations, and the iterate with the best
   validation AUC is kept. Both are watched because each alone stops too early: from a random
   start the AUC can sit at 0.5 for more than ten iterations while the loss falls (kernel
   CMML), and the loss can rise -- the model growing confident on a few pairs -- while the
   AUC still improves (kernel PCCA on digits classes).

With ``validation_fraction`` f and negatives drawn at random (as :func:`crossmetric.pairs.
make_pairs` does), about f of the positive pairs and only about f² of the negative pairs become
validation pairs (2 f (1 − f) of the negatives join the two sides and are dropped): use several
negatives per positive (``n_negatives``) or a larger fraction when pairs are few.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._base import squared_euclidean_rows, used_pairs
from crossmetric._checks import check_positive_int, check_positive_scalar
from crossmetric.losses import generalized_logistic
from crossmetric.metrics import roc_auc
from crossmetric.pairs import positive_components

__all__ = ["EarlyStopping", "validation_split", "check_early_stopping", "split_pairs",
           "vector_monitor", "clear"]


def check_early_stopping(estimator) -> tuple[bool, float, int]:
    """Validate ``early_stopping``, ``validation_fraction`` and ``n_iter_no_change``.

    An estimator without these parameters (a subclass that does not offer them) gets the
    defaults: no early stopping.
    """
    early = getattr(estimator, "early_stopping", False)
    if not isinstance(early, bool | np.bool_):
        raise ValueError(f"early_stopping must be True or False, got {early!r}.")
    raw = getattr(estimator, "validation_fraction", 0.1)
    fraction = check_positive_scalar(raw, "validation_fraction")
    if not fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), got {raw!r}.")
    patience = check_positive_int(getattr(estimator, "n_iter_no_change", 10),
                                  "n_iter_no_change")
    return bool(early), fraction, patience


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
        Pairs across the split are in neither.
    """
    rng = check_random_state(random_state)
    offset = 0 if tied else n_x
    n_nodes = n_x if tied else n_x + n_y
    n_comp, comp = positive_components(n_nodes, ix, iy + offset, y)
    # only the samples that take part in pairs count
    used = np.zeros(n_nodes, dtype=bool)
    used[ix] = True
    used[iy + offset] = True
    sizes = np.bincount(comp[used], minlength=n_comp)
    # the one splitter's draw: the groups (connected components) in random order
    from crossmetric._identity_draws import hold_out_identities

    groups = np.flatnonzero(sizes)
    order, _ = hold_out_identities(groups, groups.size, rng)
    target = fraction * used.sum()
    take = order[:max(1, int(np.searchsorted(np.cumsum(sizes[order]), target) + 1))]
    if take.size >= order.size:
        take = take[:-1]
    held = np.zeros(n_comp, dtype=bool)
    held[take] = True
    a, b = held[comp[ix]], held[comp[iy + offset]]
    validation, train = a & b, ~a & ~b
    for name, mask in (("validation", validation), ("training", train)):
        labels = set(np.unique(y[mask]).tolist())
        if labels != {-1, 1}:
            raise ValueError(
                f"early_stopping: the {name} side of the split by identity "
                f"(validation_fraction={fraction}) has no "
                f"{'positive' if 1 not in labels else 'negative'} pairs; use more pairs "
                f"(negatives among the samples of a few identities), another "
                f"validation_fraction, or early_stopping=False."
            )
    return train, validation


def split_pairs(estimator, data, y):
    """``(train_data, y_train, val_data, y_val)`` for ``estimator.early_stopping``.

    Without early stopping ``val_data`` and ``y_val`` are ``None`` and the data come back as
    they are. ``data`` is a :class:`crossmetric._base.PairData`; each split one holds only the
    samples its pairs use (:func:`crossmetric._base.used_pairs`), so that a learner fits from
    ``data.X`` / ``data.Y`` as they come, split or not.
    """
    early, fraction, _ = check_early_stopping(estimator)
    if not early:
        return data, y, None, None
    tied = data.X is data.Y and not estimator._cross_modal
    train, val = validation_split(data.ix, data.iy, y, data.X.shape[0], data.Y.shape[0],
                                  tied=tied, fraction=fraction,
                                  random_state=estimator.random_state)
    return (used_pairs(data._replace(ix=data.ix[train], iy=data.iy[train]), tied), y[train],
            used_pairs(data._replace(ix=data.ix[val], iy=data.iy[val]), tied), y[val])


class EarlyStopping:
    """Scores iterates on validation pairs; tells the solver when to stop.

    Parameters
    ----------
    distances : callable
        ``distances(params)`` → ``(d, threshold)``: learned distances of the validation pairs
        for the solver's parameters (a list of tower weights, or a flat vector) and the
        threshold of the loss (1 for PCCA / CMML, the learned bias for LDML / CLML).
    y : int array
        +1 / -1 labels of the validation pairs.
    n_iter_no_change : int
        Stop after this many consecutive iterations in which neither the validation AUC nor
        the validation loss improved.
    beta : float
        Sharpness of the generalized logistic loss ``ℓ_β(y (d − threshold))``.
    positive_share : float
        Weight of the positive pairs' mean loss (the share of positives among the training
        pairs); the negatives get ``1 − positive_share``.

    Attributes
    ----------
    losses : list of float
        Validation loss after each iteration (entry 0: the starting point).
    scores : list of float
        Validation ROC AUC after each iteration.
    best_iteration : int
        Iteration of the best validation AUC (0: the starting point).
    best_params
        A copy of the best parameters.
    """

    def __init__(self, distances, y, n_iter_no_change: int, beta: float = 1.0,
                 positive_share: float = 0.5):
        self.distances = distances
        self.y = np.asarray(y)
        self.n_iter_no_change = int(n_iter_no_change)
        self.beta = float(beta)
        self.positive_share = float(positive_share)
        self.losses: list[float] = []
        self.scores: list[float] = []
        self.best_loss = np.inf
        self.best_score = -np.inf
        self.best_iteration = 0
        self.last_improvement = 0
        self.best_params = None
        self.unpack = None  # set by a solver that works on a flat parameter vector

    def evaluate(self, params) -> tuple[float, float]:
        """``(validation loss, validation ROC AUC)`` of ``params``."""
        d, threshold = self.distances(self.unpack(params) if self.unpack is not None
                                      else params)
        if not (np.all(np.isfinite(d)) and np.isfinite(threshold)):
            return np.inf, 0.5
        terms = generalized_logistic(self.y * (d - threshold), self.beta)
        pos = self.y == 1
        w = self.positive_share
        loss = w * float(terms[pos].mean()) + (1.0 - w) * float(terms[~pos].mean())
        return loss, roc_auc(self.y, -d)

    def update(self, iteration: int, params) -> bool:
        """Record the validation loss of ``params`` after ``iteration`` iterations;
        returns True when the solver should stop."""
        loss, auc = self.evaluate(params)
        self.losses.append(float(loss))
        self.scores.append(float(auc))
        if loss < self.best_loss:
            self.best_loss = loss
            self.last_improvement = int(iteration)
        if auc > self.best_score:
            self.best_score = auc
            self.last_improvement = int(iteration)
            self.best_iteration = int(iteration)
            self.best_params = ([np.array(p, copy=True) for p in params]
                                if isinstance(params, list | tuple)
                                else np.array(params, copy=True))
        return iteration - self.last_improvement >= self.n_iter_no_change

    def record(self, estimator) -> None:
        """Set ``validation_scores_``, ``validation_loss_curve_`` and ``best_iteration_``."""
        estimator.validation_scores_ = list(self.scores)
        estimator.validation_loss_curve_ = list(self.losses)
        estimator.best_iteration_ = int(self.best_iteration)


def clear(estimator) -> None:
    """``validation_scores_`` and ``best_iteration_`` of a fit without early stopping."""
    estimator.validation_scores_ = None
    estimator.validation_loss_curve_ = None
    estimator.best_iteration_ = None


def vector_monitor(estimator, val, y_val, embed, y_train):
    """:class:`EarlyStopping` on the validation pairs ``val`` for a flat parameter vector
    ``theta`` whose last entry is the loss's threshold (LDML, CLML); ``embed(theta, Xv)``
    embeds the validation samples. ``None`` without a split."""
    if val is None:
        return None
    _, _, patience = check_early_stopping(estimator)

    def distances(theta):
        Z = embed(theta, val.X)
        return squared_euclidean_rows(Z[val.ix], Z[val.iy]), theta[-1]

    return EarlyStopping(distances, y_val, patience, 1.0, float(np.mean(y_train == 1)))
