"""Training helpers of :class:`crossmetric.learners.gsm.GSM`: the two kinds of batch, validation,
epochs.

The optimiser and the epoch loop are the solver layer's (:mod:`crossmetric._solvers.optim`,
:mod:`crossmetric._solvers.epochs`); ``Adam`` stays importable from here.

* :func:`sample_batch_loss_grad`: the paper's sample-based batch (eq. 14-18) -- every pair of
  the batch's ``n_x`` and ``n_y`` samples, labelled by identity, positives and negatives
  weighted half and half, optionally only the hardest negatives of each row and column.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import gen_batches

from crossmetric._solvers.batches import balanced_weights, hardest_negatives, pair_completeness
from crossmetric._solvers.early_stopping import check_early_stopping
from crossmetric._solvers.epochs import run_epochs
from crossmetric._solvers.optim import Adam
from crossmetric._solvers.starting import check_init
from crossmetric._solvers.stochastic import PairBlocks
from crossmetric._solvers.stopping import EpochPlateau, WindowPlateau
from crossmetric._utils.checks import check_positive_int, check_positive_scalar, user_stacklevel
from crossmetric._utils.content_cache import ContentCache, plain_params
from crossmetric.learners._gsm_measure import _NO_F, _TIED, STRUCTURES, gsm_components, gsm_loss
from crossmetric.learners._gsm_reduction import apply_reducer, fit_reducers

#: the named starts of GSM (``init``)
GSM_INITS = ("auto", "euclidean", "identity", "random", "kissme", "cca")


def _check_choice(value, name: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got "
                         f"{value!r}.")


def check_params(est) -> None:
    """Validate the constructor arguments of a :class:`crossmetric.learners.gsm.GSM`."""
    if est.structure not in STRUCTURES:
        raise ValueError(
            f"structure must be one of {sorted(STRUCTURES)}, got {est.structure!r}."
        )
    if isinstance(est.f, bool) or not isinstance(est.f, (int, float, np.floating)) \
            or not np.isfinite(est.f):
        raise ValueError(f"f must be a finite real number, got {est.f!r}.")
    check_positive_scalar(est.mu, "mu", allow_zero=True)
    if isinstance(est.start_mu, str):
        if est.start_mu != "hold":
            raise ValueError(f"start_mu must be a real number >= 0, 'hold' or None, got "
                             f"{est.start_mu!r}.")
    elif est.start_mu is not None:
        check_positive_scalar(est.start_mu, "start_mu", allow_zero=True)
    check_positive_scalar(est.learning_rate, "learning_rate")
    check_positive_scalar(est.tol, "tol", allow_zero=True)
    check_positive_scalar(est.init_scale, "init_scale")
    check_positive_scalar(est.feature_norm, "feature_norm")
    check_init(est.init, GSM_INITS)
    _check_choice(est.penalty, "penalty", ("zero", "start"))
    special = tuple(k for k in STRUCTURES if k != "generalized")
    _check_choice(est.start_from, "start_from", (None, "auto", *special))
    if start_case(est) is not None:
        if est.structure != "generalized":
            raise ValueError(f"start_from={est.start_from!r} needs structure='generalized' (the "
                             f"one structure that contains every other), got "
                             f"{est.structure!r}.")
    _check_choice(est.class_weight, "class_weight", ("balanced", None))
    _check_choice(est.batch_mode, "batch_mode", ("auto", "sample", "pair"))
    _check_choice(est.stopping, "stopping", ("window", "patience"))
    check_positive_int(est.n_identities, "n_identities", minimum=2)
    check_positive_int(est.n_images_x, "n_images_x")
    check_positive_int(est.n_images_y, "n_images_y")
    if est.hard_negatives is not None:
        check_positive_int(est.hard_negatives, "hard_negatives")
    if est.rank is not None:
        check_positive_int(est.rank, "rank")
    if not (isinstance(est.joint_reduction, (bool, np.bool_)) or est.joint_reduction == "auto"):
        raise ValueError(f"joint_reduction must be True, False or 'auto', got "
                         f"{est.joint_reduction!r}.")
    check_early_stopping(est)
    check_positive_int(est.batch_size, "batch_size")
    check_positive_int(est.max_iter, "max_iter")
    check_positive_int(est.n_iter_no_change, "n_iter_no_change")


def start_case(est) -> str | None:
    """The special case a fit starts from: ``start_from``, where ``"auto"`` is
    ``"euclidean"`` for the generalized form and none for a special case (which contains no
    other)."""
    if isinstance(est.start_from, str) and est.start_from == "auto":
        return "euclidean" if est.structure == "generalized" else None
    return est.start_from


def fit_start(est, data, y, rng):
    """The fitted special case :func:`start_case` and the generator ``est`` goes on with.

    A clone of ``est`` with ``structure`` that case (every other parameter equal) is
    fitted on the same pairs with a seed drawn from ``rng``; ``est`` then goes on with a
    generator of that seed, so that its validation split and fixed reduction are the clone's
    (its features are the same coordinates).
    """
    seed = int(rng.randint(np.iinfo(np.int32).max))
    # start_mu acts only on the form trained from the special case: the special case itself
    # is the same fit for every start_mu, computed once for a selection's candidates on a fold
    # (kept by content; the fitted case is only read by the fits that start from it)
    start = clone(est).set_params(structure=start_case(est), start_from=None, start_mu=None,
                                  random_state=seed)
    key = plain_params(start, exclude=("preprocessor",))  # the samples are ``data``
    parts = None if key is None else (key, data.X, data.Y, data.ix, data.iy, np.asarray(y))

    def fitted():
        start._fit(data, y)
        return start

    return _FITTED_STARTS.get(parts, fitted), np.random.RandomState(seed)


#: the last special cases :func:`fit_start` fitted, by their settings and training pairs
_FITTED_STARTS = ContentCache(4)


def reduced_views(est, data, rx, ry, rng, start=None) -> tuple[np.ndarray, np.ndarray]:
    """Both modalities through the fixed reduction, fitted on the training samples ``rx`` /
    ``ry`` only (set as ``est.reducer_x_``, ``est.reducer_y_``); a tied structure needs both
    reduced to one width.

    ``start``: the special case :func:`fit_start` fitted, whose reduction is this one -- the
    same rows, settings and draws of a generator of the same seed: its reducers are taken
    (on wide views the reduction's SVD is much of a fit) and ``rng`` advanced as fitting them
    would advance it."""
    joint = (data.X.shape[1] == data.Y.shape[1] if est.joint_reduction == "auto"
             else bool(est.joint_reduction))
    if start is not None:
        est.reducer_x_, est.reducer_y_ = start.reducer_x_, start.reducer_y_
        fitted = (est.reducer_x_,) if joint else (est.reducer_x_, est.reducer_y_)
        for reducer in fitted:  # the draw of each PCA's seed (fit_reducer)
            if reducer[0] == "pca":
                rng.randint(2**31 - 1)
    else:
        est.reducer_x_, est.reducer_y_ = fit_reducers(
            data.X[rx], data.Y[ry], n_components=est.n_components, joint=joint,
            whiten=est.whiten, feature_norm=est.feature_norm, rng=rng)
    X, Y = apply_reducer(est.reducer_x_, data.X), apply_reducer(est.reducer_y_, data.Y)
    if est.structure in _TIED and X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"structure={est.structure!r} shares L_A (B = A) between the modalities and needs "
            f"both to have the same dimension, got {X.shape[1]} and {Y.shape[1]}; set "
            f"n_components.")
    return X, Y


def hold_at_start(est, start, params: dict, f0: float, r: int, p_x: int, p_y: int) -> None:
    """``start_mu="hold"``: ``est`` keeps the measure of the fitted ``start`` (``params``,
    :func:`start_params`) without an epoch of its own, and takes its training attributes
    (curves, ``n_iter_``, ``n_identities_``, ``best_iteration_``, ``init_``)."""
    for name in ("loss_curve_", "validation_loss_curve_", "validation_scores_", "n_iter_",
                 "n_identities_", "best_iteration_", "init_"):
        if hasattr(start, name):
            value = getattr(start, name)
            setattr(est, name, list(value) if isinstance(value, list) else value)
    est._set_components(params, f0, r, p_x, p_y)


def start_params(est, start) -> tuple[dict, float]:
    """The generalized form's free parameters (and fixed ``f``) equal to the fitted ``start``.

    Every structure's measure is a generalized one (:func:`gsm_components` of its free
    parameters): S starts as the special case's, exactly. Each array is a copy (a special
    case may use one matrix twice, e.g. ``U`` as ``L_A`` and ``L_Cx``).
    """
    p_x, p_y = start.components_x_.shape[1], start.components_y_.shape[1]
    *mats, f = gsm_components(start.params_, start.structure, float(start.f),
                              start.n_components_, p_x, p_y)
    params = {k: np.array(v, dtype=float)
              for k, v in zip(STRUCTURES["generalized"], mats, strict=True)}
    if est.learn_f:
        params["f"] = np.asarray(float(f))
    return params, float(f)


def starting_params(est, start, X, Y, ix, iy, r: int, rng, init: str | None = None
                    ) -> tuple[dict, float]:
    """The free parameters training starts from and the fixed ``f``: those of the fitted
    special case ``start`` (:func:`start_params`), else :func:`init_params` (with the mean
    squared distance of the training pairs ``(ix, iy)`` for ``init="identity"``); ``init``
    (one named start) in place of ``est.init``."""
    if start is not None:
        return start_params(est, start)
    init = est.init if init is None else init
    p_x, p_y = X.shape[1], Y.shape[1]
    sq_dist = None
    if init == "identity":
        k = min(r, p_x, p_y)
        sq_dist = float(np.mean(np.sum((X[ix, :k] - Y[iy, :k]) ** 2, axis=1)))
    return init_params(est, r, p_x, p_y, rng, sq_dist, init), float(est.f)


def init_params(est, r: int, p_x: int, p_y: int, rng, sq_dist: float | None = None,
                init: str | None = None) -> dict:
    """The starting parameters of ``est.structure`` (L rows ``r``, input widths ``p_x, p_y``).

    Entries of the L matrices are N(0, init_scale² / (r·p)); vectors start at 0;
    ``init="euclidean"`` copies L_A, L_B into the cross terms. ``init="identity"`` sets every
    L to ``α [I_r 0]`` (the first ``r`` reduced coordinates), so that S starts as the scaled
    untrained squared distance ``α² ‖x_r − y_r‖² + f`` (the inner product ``−2α² x_rᵀy_r + f``
    for ``"inner_product"``), with ``α² = init_scale² · |f| / sq_dist`` (``|f|`` taken as 1 for
    the structures without f): the mean training-pair distance ``sq_dist`` lands on the
    margin's centre ``S = 0``. ``init`` (a named start) in place of ``est.init``.
    """
    init = est.init if init is None else init
    sx = est.init_scale / np.sqrt(r * p_x)
    sy = est.init_scale / np.sqrt(r * p_y)
    shapes = {"LA": (r, p_x), "LB": (r, p_y), "LCx": (r, p_x), "LCy": (r, p_y),
              "U": (r, p_x), "V": (r, p_y), "d": (p_x,), "e": (p_y,),
              "c": (r,), "a": (r,), "b": (r,)}
    alpha = _identity_scale(est, sq_dist) if init == "identity" else None
    params = {}
    for k in STRUCTURES[est.structure]:
        shape = shapes[k]
        if len(shape) != 2:
            params[k] = np.zeros(shape)
        elif alpha is not None:
            params[k] = alpha * np.eye(*shape)
        else:
            scale = sx if k in ("LA", "LCx", "U") else sy
            params[k] = rng.normal(0.0, scale, size=shape)
    if init == "euclidean" and "LCx" in params:
        # start at the affine Euclidean special case: C = −L_Aᵀ L_B
        params["LCx"] = params["LA"].copy()
        params["LCy"] = (params["LB"] if "LB" in params else params["LA"]).copy()
    if est.learn_f and est.structure not in _NO_F:
        params["f"] = np.asarray(float(est.f))
    return params


def _identity_scale(est, sq_dist: float | None) -> float:
    """α of ``init="identity"`` (see :func:`init_params`)."""
    f_abs = abs(float(est.f)) if est.structure not in _NO_F else 0.0
    f_abs = f_abs if f_abs > 0 else 1.0
    sq = float(sq_dist) if sq_dist is not None and sq_dist > 0 else 1.0
    return float(est.init_scale) * np.sqrt(f_abs / sq)


def pair_weights(y: np.ndarray, class_weight) -> np.ndarray:
    """Hinge weights of the pairs: balanced halves, or uniform (``class_weight=None``)."""
    n_pos, n_neg = int(np.sum(y == 1)), int(np.sum(y == -1))
    if class_weight == "balanced":
        return np.where(y == 1, 0.5 / n_pos, 0.5 / n_neg)
    return np.full(y.shape[0], 1.0 / (n_pos + n_neg))


def sample_epoch(params, loss_grad, rounds, X, Y, rx, ry, ids_x, ids_y, hard_negatives,
                 similarity):
    """``epoch_step(opt)`` of sample-based batches: one pass of ``rounds``, mean objective."""

    def epoch_step(opt):
        losses = []
        for bx, by in rounds.epoch():
            bx, by = rx[bx], ry[by]
            same = ids_x[bx][:, None] == ids_y[by][None, :]
            loss, grad = sample_batch_loss_grad(loss_grad, params, X[bx], Y[by], same,
                                                hard_negatives, similarity)
            opt.step(params, grad)
            losses.append(loss)
        return float(np.mean(losses))

    return epoch_step


def pair_epoch(params, loss_grad, X, Y, ix, iy, y, weight, batch_size: int, rng,
               full_loss):
    """``epoch_step(opt)`` of pair slices: shuffled mini-batches, then the full objective."""
    ell_all = -y.astype(float)  # eq. (4): −1 same, +1 different
    n = y.shape[0]
    blocks = PairBlocks(X, Y, ix, iy, y, tied=False)

    def epoch_step(opt):
        perm = rng.permutation(n)
        for sl in gen_batches(n, int(batch_size)):
            b = perm[sl]
            (Xb, Yb), bix, biy, _ = blocks.gather(b)
            # unbiased estimate of the full objective's gradient
            _, grad = loss_grad(params, Xb, Yb, bix, biy, ell_all[b], weight[b] * (n / b.size))
            opt.step(params, grad)
        return full_loss(params, ell_all)

    return epoch_step


def full_pair_loss(structure: str, f0: float, X, Y, ix, iy, weight, mu: float,
                   anchor: dict | None = None):
    """The full pair objective as a function of ``(params, ell)``."""
    return lambda params, ell: gsm_loss(params, structure, f0, X, Y, ix, iy, ell, weight, mu,
                                        anchor)


def all_pairs(same: np.ndarray, keep: np.ndarray | None = None):
    """``(ix, iy, ell, weight)`` of the pairs of an ``n_x × n_y`` batch with weight > 0.

    ``ell`` is the paper's label (−1 same, +1 different); weights are balanced
    (:func:`~crossmetric._solvers.batches.balanced_weights`) over the positives and the kept
    negatives.
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


def train_epochs(est, params: dict, epoch_step, monitor=None) -> None:
    """Epochs of Adam until the objective stops improving (or ``est.max_iter``).

    Without a hold-out the rule watches the training objective (the full objective for pair
    batches, the mean batch objective of the epoch for sample-based ones); with one, the
    ``monitor`` (:class:`~crossmetric._solvers.early_stopping.EarlyStopping`, which has scored
    the start) decides and its best check -- the start included -- is kept. The loop and its
    rule are the stochastic solvers' (:func:`crossmetric._solvers.epochs.run_epochs`, absolute
    ``tol``, no rate decay), the optimiser the one Adam (:class:`crossmetric._solvers.optim.
    Adam`, ε on ``√v̂`` as in Kingma & Ba's Algorithm 1). Sets ``loss_curve_``,
    ``validation_loss_curve_``, ``validation_scores_``, ``best_iteration_`` and ``n_iter_`` on
    ``est``; warns when ``max_iter`` ends it.
    """
    opt = Adam(float(est.learning_rate))
    if est.stopping == "window":
        rule = WindowPlateau(est.tol, est.n_iter_no_change)
    else:
        rule = EpochPlateau(est.tol, est.n_iter_no_change, relative=False)
    run = run_epochs(lambda: epoch_step(opt), rule, int(est.max_iter), monitor=monitor,
                     params=params, verbose=est.verbose, name="GSM")
    est.loss_curve_ = run.curve
    est.n_iter_ = run.n_epochs
    if monitor is None:
        est.validation_loss_curve_, est.validation_scores_, est.best_iteration_ = [], [], None
    else:
        params.update(run.best_params)
        monitor.record(est)
    if not run.converged:
        what = "held-out score" if monitor is not None else "objective"
        warnings.warn(
            f"GSM: max_iter={est.max_iter} epochs reached before the {what} stopped "
            f"improving (tol={est.tol}); increase max_iter.", ConvergenceWarning,
            stacklevel=user_stacklevel())
