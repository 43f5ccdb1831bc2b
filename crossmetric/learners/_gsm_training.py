"""Training helpers of :class:`crossmetric.gsm.GSM`: the two kinds of batch, validation, epochs.

The optimiser and the epoch loop are the solver layer's (:mod:`crossmetric._solvers.optim`,
:mod:`crossmetric._solvers.epochs`); ``Adam`` stays importable from here.

* :func:`sample_batch_loss_grad`: the paper's sample-based batch (eq. 14-18) -- every pair of
  the batch's ``n_x`` and ``n_y`` samples, labelled by identity, positives and negatives
  weighted half and half, optionally only the hardest negatives of each row and column.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from crossmetric._checks import user_stacklevel
from crossmetric._solvers.epochs import EpochPlateau, run_epochs
from crossmetric._solvers.optim import Adam
from crossmetric.batches import balanced_weights, hardest_negatives, pair_completeness


def all_pairs(same: np.ndarray, keep: np.ndarray | None = None):
    """``(ix, iy, ell, weight)`` of the pairs of an ``n_x × n_y`` batch with weight > 0.

    ``ell`` is the paper's label (−1 same, +1 different); weights are balanced
    (:func:`~crossmetric.batches.balanced_weights`) over the positives and the kept negatives.
    """
    w = balanced_weights(same, keep)
    ix, iy = np.nonzero(w)
    return ix, iy, np.where(same[ix, iy], -1.0, 1.0), w[ix, iy]


def sample_batch_loss_grad(loss_grad, params: dict, Xb: np.ndarray, Yb: np.ndarray,
                           same: np.ndarray, hard_negatives: int | None, embed_matrix):
    """Objective and gradient of one sample-based batch (all ``n_x · n_y`` pairs).

    ``loss_grad(params, Xb, Yb, ix, iy, ell, weight)`` is the pair objective (GSM's eq. 7 in
    the sample-based form); ``embed_matrix(params, Xb, Yb)`` gives ``S`` of every pair, used
    only to pick the hardest negatives when ``hard_negatives`` is set.
    """
    keep = None
    if hard_negatives is not None:
        keep = hardest_negatives(embed_matrix(params, Xb, Yb), same, hard_negatives)
    ix, iy, ell, w = all_pairs(same, keep)
    return loss_grad(params, Xb, Yb, ix, iy, ell, w)


def resolve_batch_mode(mode: str, ids_x, ids_y, ix, iy, y, n_conflicts: int) -> str:
    """``"sample"`` or ``"pair"`` for GSM's ``batch_mode``; warns where identities are doubtful.

    ``"auto"`` takes sample-based batches when the identities (connected components of the
    positive pairs) are trustworthy: the positives list *every* same-identity pair of the
    training samples, and no −1 pair joins two samples of one component. Otherwise (e.g.
    class labels with a sampled subset of positives, whose components are fragments of the
    classes) the batches are slices of the given pairs.
    """
    # only the samples of these (training) pairs count
    rx, lx = np.unique(ix, return_inverse=True)
    ry, ly = np.unique(iy, return_inverse=True)
    usable = np.intersect1d(ids_x[rx], ids_y[ry]).size
    share = pair_completeness(ids_x[rx], ids_y[ry], lx, ly, y)
    if mode == "auto":
        return "sample" if share == 1.0 and n_conflicts == 0 and usable >= 2 else "pair"
    if mode == "sample":
        if n_conflicts:
            warnings.warn(
                f"GSM: {n_conflicts} pair(s) labelled -1 join samples that positive pairs put "
                "in one identity; the sample-based batches treat them as the same identity.",
                UserWarning, stacklevel=user_stacklevel())
        if share < 1.0:
            warnings.warn(
                f"GSM inferred {usable} identities from the positive pairs (connected "
                f"components), but the positives list only {100 * share:.1f}% of the "
                "same-identity pairs within them: the pairs look sampled, so these identities "
                "may be fragments of fewer classes, and the sample-based batches would treat "
                "samples of one class as negatives. Give every positive pair, or use "
                "batch_mode='pair'.", UserWarning, stacklevel=user_stacklevel())
    return mode


def validation_loss(batch_mode: str, val, ids_x, ids_y, X, Y, pair_loss, pair_weights, rng):
    """A function of the parameters: the balanced hinge (no penalty) on held-out pairs.

    Sample-based training is scored like it is trained, on every cross pair of the held-out
    samples labelled by identity (at most 2,000 samples a side); pair batches on the held-out
    pairs given. ``pair_loss(params, X, Y, ix, iy, ell, weight)`` is the hinge objective.
    """
    vix, viy, vy = val
    if batch_mode == "sample":
        rows = []
        for r in (np.unique(vix), np.unique(viy)):
            rows.append(r if r.size <= 2000 else rng.choice(r, 2000, replace=False))
        same = ids_x[rows[0]][:, None] == ids_y[rows[1]][None, :]
        bx, by, ell, w = all_pairs(same)
        Xv, Yv = X[rows[0]], Y[rows[1]]
    else:
        bx, by, ell, w = vix, viy, -vy.astype(float), pair_weights(vy)
        Xv, Yv = X, Y
    return lambda params: pair_loss(params, Xv, Yv, bx, by, ell, w)


def train_epochs(est, params: dict, epoch_step, val_loss) -> None:
    """Epochs of Adam until the monitored quantity stops improving (or ``est.max_iter``).

    Without early stopping the monitored quantity is the training objective (the full
    objective for pair batches, the mean batch objective of the epoch for sample-based ones);
    with it, the validation loss, and the parameters of the best epoch are kept. The loop and
    its rule are the stochastic solvers' (:func:`crossmetric._solvers.epochs.run_epochs`,
    absolute ``tol``, no rate decay), the optimiser the one Adam
    (:class:`crossmetric._solvers.optim.Adam`, ε on ``√v̂`` as in Kingma & Ba's Algorithm 1).
    Sets ``loss_curve_``, ``validation_scores_`` (minus the validation loss of each epoch),
    ``best_validation_score_`` and ``n_iter_`` on ``est``; warns when ``max_iter`` ends it.
    """
    opt = Adam(float(est.learning_rate))
    rule = EpochPlateau(est.tol, est.n_iter_no_change, relative=False)
    run = run_epochs(lambda: epoch_step(opt), rule, int(est.max_iter), val_loss=val_loss,
                     params=params, verbose=est.verbose, name="GSM")
    est.loss_curve_ = run.curve
    est.validation_scores_ = [-v for v in run.val_curve]
    est.n_iter_ = run.n_epochs
    if run.best_params is not None:
        params.update(run.best_params)
        est.best_validation_score_ = -float(rule.best)
    if not run.converged:
        what = "validation loss" if val_loss is not None else "objective"
        warnings.warn(
            f"GSM: max_iter={est.max_iter} epochs reached before the {what} stopped "
            f"decreasing (tol={est.tol}); increase max_iter.", ConvergenceWarning,
            stacklevel=user_stacklevel())
