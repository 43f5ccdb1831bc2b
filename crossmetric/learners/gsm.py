"""Generalized similarity measure (GSM) on fixed feature vectors of two modalities.

Lin, Wang, Zuo, Feng & Zhang, *Cross-Domain Visual Matching via Generalized Similarity Measure
and Feature Learning*. The measure (eq. 1) is the quadratic form

    S(x, y) = [xᵀ yᵀ 1] [[A, C, d], [Cᵀ, B, e], [dᵀ, eᵀ, f]] [x; y; 1]

with ``A = L_Aᵀ L_A``, ``B = L_Bᵀ L_B``, ``C = −L_Cxᵀ L_Cy`` (eq. 2), i.e. (eq. 3)

    S(x, y) = ‖L_A x‖² + ‖L_B y‖² − 2 (L_Cx x)ᵀ(L_Cy y) + 2 dᵀx + 2 eᵀy + f.

Every term of x is computed independently of y, so each modality has an embedding
(eq. 10, the "similarity components")

    x̃ = [L_A x, L_Cx x, dᵀx],   ỹ = [L_B y, L_Cy y, eᵀy],

and S is the fixed aggregation (eq. 12) ``‖P₁x̃‖² + ‖P₁ỹ‖² − 2 (P₂x̃)ᵀ(P₂ỹ) + 2p₃ᵀx̃ + 2p₃ᵀỹ + f``.
``transform_x`` / ``transform_y`` return x̃ / ỹ, so a gallery is embedded once (the paper's
"efficient matching" remark) and ``cross_distance`` aggregates in row blocks.

Training minimises the hinge loss of eq. (6), ``Σ (1 − ℓ S)₊`` with the paper's labels ℓ = −1
for the same identity and +1 otherwise (eq. 4; the public API's ``y = +1 / −1`` for same /
different is converted with ``ℓ = −y``), plus ``μ‖Φ‖²`` (eq. 7) -- by mini-batch gradient descent
in the sample-based form (eq. 14-18): each distinct sample of a batch is embedded once and its
gradient is the sum over the pairs it takes part in (eq. 18).

This is the paper's "hand.fea + gen.sim" ablation (§5.5 (i)): an optional linear reduction of each
modality (here a fixed PCA, or centring, with one scale per modality -- no whitening by default,
see ``GSM``'s ``whiten`` -- where the paper has a learned fully connected layer), then the
similarity layers. ``structure`` selects the special cases of §3.2 and the baselines of §5.5.

Measurements behind the defaults (``GSM``'s parameters; rank-1 on the photo → sketch instance
task of ``benchmarks/bench_gsm.py`` unless said otherwise):

* ``mu``: Measured rank-1 on the task of ``whiten``: 44% at μ = 0 and 1e-4, 43% at 1e-5, 31% at
  1e-3 (the penalty then keeps S from reaching the margin); training and held-out rank-1 are
  equal, so the model underfits the ranking rather than overfits it.
* ``learning_rate``: Larger steps overfit the hinge quickly on identity-level pairs (rank-1 22%
  at 1e-2); 3e-4 gives the same rank-1 as 1e-3 (44%) in twice the epochs.
* ``max_iter``: 100 epochs, the former default, ended with a ConvergenceWarning on the default
  benchmark's class-level pairs (20 of 20 fits, which stop on their own at about 220 epochs) and
  on this docstring's example (516). Training for up to 200 epochs with ``n_iter_no_change=10``
  gave the same rank-1 (44%) as 100. Far fewer epochs undertrain the unwhitened model: on 2000
  class-level pairs (PCA-32) held-out AUC is 0.76 after 15 epochs and 0.93 with the plateau stop
  (whitened: 0.81 and 0.87).
* ``whiten``: Measured on the photo↔sketch instance task of ``benchmarks/bench_gsm.py`` (2
  splits): rank-1 33% → 44% ("generalized") and 43% → 55% ("euclidean"); class-level pairs of the
  same data, held-out AUC 0.950 → 0.958.
* ``feature_norm``: Measured rank-1 (task above, 3 splits): 37% at 1, 42% at 2, 41% at 4, 36% at
  8; 27% at 0.1 (the margin is then out of reach under the ``μ`` penalty). Class-level pairs of
  the same data (1000 positives, PCA-32): held-out AUC 0.931 at 2, 0.924 at 4, 0.920 at 8.
* ``class_weight``: Measured rank-1 44% balanced vs 43% unweighted.
* ``init``: Measured rank-1 43% ("euclidean") vs 44% ("random"): no gain, so without a
  hold-out the paper's independent random start is the default. ``"identity"`` needs views in
  shared coordinates (this task's two modalities are different descriptors, where it has no
  meaning); with a hold-out ``init="auto"`` scores it beside the closed form and the paper's
  start (:mod:`crossmetric.learners._gsm_guard`).
* ``batch_mode``: Rank-1 on the photo → sketch instance task of ``benchmarks/bench_gsm.py``
  (1,000 training objects, 200 held out): "generalized" 42.5% with pair slices → 43.5% with
  sample-based batches, "euclidean" 55.0% → 57.5%.
* ``hard_negatives``: Same task: "generalized" 43.5% → 53.0% (h = 5), 56.0% (h = 2), 53.0% (h =
  10); "euclidean" 57.5% → 60.0% (h = 5).
* ``early_stopping``: On the instance task above (1,000 identities: ``"auto"`` leaves it off)
  it does not pay: the objective does not overfit there, and holding out 20% of the objects
  costs rank-1 ("generalized" 43.5% → 36.0%, "euclidean" 57.5% → 45.0%). With fewer
  identities ``"auto"`` holds some out so that the fit never ends below its start.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from crossmetric._base import CrossModalMixin
from crossmetric._solvers.batches import IdentityRounds
from crossmetric.learners._gsm_guard import gsm_split, gsm_with_complement, guarded_start
from crossmetric.learners._gsm_measure import (
    STRUCTURES,
    gsm_components,
    gsm_loss_grad,
    gsm_matrix,
    gsm_rowwise,
)
from crossmetric.learners._gsm_reduction import apply_reducer
from crossmetric.learners._gsm_towers import GSMTowersMixin
from crossmetric.learners._gsm_training import (
    check_params,
    fit_start,
    full_pair_loss,
    hold_at_start,
    pair_epoch,
    pair_weights,
    reduced_views,
    resolve_batch_mode,
    sample_epoch,
    start_case,
    start_params,
    train_epochs,
)
from crossmetric.pairs import identities_from_pairs
from crossmetric.pairs._pair_data import PairData

__all__ = ["GSM", "STRUCTURES", "gsm_components", "gsm_rowwise", "gsm_matrix"]


# --------------------------------------------------------------------------------------------
# the learner
# --------------------------------------------------------------------------------------------
class GSM(GSMTowersMixin, CrossModalMixin, BaseEstimator):
    """Generalized similarity measure learned on fixed features of two modalities.

    ``pair_distance`` returns S of eq. (3) with the paper's sign: the model is trained so that
    ``S < −1`` for pairs of the same identity and ``S ≥ 1`` otherwise (eq. 5), so *smaller means
    more alike*, as for every learner of the package.

    With few identities (50-1000; VIPeR, CUHK01 camera A ↔ B): ``stopping="window",
    tol=1e-2, n_iter_no_change=10`` trains to a plateau of the smoothed objective, where the
    default stop can end while it still falls (CUHK01, 871 persons, PatchColorSIFT + PCA-64:
    rank-1 49 → 53 %). Two views of one descriptor share coordinates (one reduction of both,
    ``joint_reduction="auto"``), and the start ``init="identity"`` (which ``"auto"`` tries)
    is their untrained distance (CUFS, 180 persons, one PCA-100: rank-1 64.3 → 95.8 %).
    The benchmark's defaults start from the Euclidean case (``GSM_BENCHMARK_PARAMS``).

    Parameters
    ----------
    n_components : int or None, default=None
        Each modality is reduced to ``n_components`` dimensions by PCA (fitted on its distinct
        training samples; the paper's reduction layer of §5.5 (i), here unsupervised), or only
        centred when ``None`` (views wider than their samples: onto their span, one basis for
        both modalities of one width); then scaled (``whiten``, ``feature_norm``). The L
        matrices have ``r = n_components`` rows (as in the paper), else the smaller width.
    structure : {"generalized", "linear", "ladf", "joint_bayesian", "euclidean", \
"inner_product"}, default="generalized"
        ``"generalized"``: eq. (1)-(3) with all of L_A, L_B, L_Cx, L_Cy, d, e free.
        ``"linear"``: d = e = 0 and f = 0 (§5.5, separate linear transformations).
        ``"ladf"``: B = A and e = d (LADF, eq. 8).
        ``"joint_bayesian"``: B = A, C = −G, d = e = 0, f = 0 (eq. 9), with G = L_Cxᵀ L_Cy.
        ``"euclidean"``: affine Euclidean distance ``‖(Ux + a) − (Vy + b)‖² + f`` (Baseline-1).
        ``"inner_product"``: affine inner product ``−2 (Ux + a)ᵀ(Vy + b) + f`` (Baseline-2;
        the sign makes it a dissimilarity like S).
        The tied structures (``ladf``, ``joint_bayesian``) need both modalities to have the same
        dimension after reduction.
    f : float, default=-1.9
        The constant f of eq. (1); the paper fixes ``f = −1.9`` (§4.1). Unused (f = 0) by
        ``"linear"`` and ``"joint_bayesian"``.
    learn_f : bool, default=False
        Learn f by gradient descent instead of fixing it (initialised at ``f``).
    mu : float, default=1e-4
        Weight μ of the penalty ``μ‖Φ‖²`` of eq. (7) on the similarity parameters (f excluded).
    penalty : {"zero", "start"}, default="zero"
        What μ pulls the parameters towards: zero (eq. 7) or, ours, their start (docs guide).
    batch_size : int, default=512
        Pairs per mini-batch of ``batch_mode="pair"``.
    learning_rate : float, default=1e-3
        Step size of Adam (the paper uses plain gradient steps, eq. 16; Adam is our choice: it
        is insensitive to the scale of the features).
    max_iter : int, default=1000
        Maximum number of epochs (passes over the training pairs; for sample-based batches,
        rounds drawing about every first-modality sample once). Training stops earlier on a
        plateau of the objective.
    tol : float, default=1e-4
        The plateau threshold of ``stopping``.
    n_iter_no_change : int, default=5
        Patience (``"patience"``) or window length (``"window"``), in epochs.
    init_scale : float, default=1.0
        Entries of the L matrices start i.i.d. N(0, init_scale² / (r·p)) (so that ‖L x‖² is of
        order ‖x‖²/p: 1 for whitened x, ``feature_norm²/p`` otherwise); d, e and the affine
        offsets start at 0.
    random_state : int, RandomState instance or None
        Seeds the initialisation and the order of the mini-batches.
    verbose : int, default=0
        Print one line per epoch (epoch, objective, seconds).
    preprocessor : tuple (X, Y), optional
        Samples that integer index pairs refer to.
    whiten : bool, default=False
        ``True``: per-direction unit variance (PCA whitening, or per-feature standardisation
        when ``n_components=None``). ``False``: centred (PCA) features keep their relative
        variances, one scalar per modality (``feature_norm``); whitening would weigh the noisy
        low-variance directions like the informative ones.
    feature_norm : float, default=2.0
        With ``whiten=False`` each modality is scaled so that the mean squared norm of its
        centred training samples is ``feature_norm²``, so that an L of norm of order 1 moves S
        on the scale on which the fixed ``f = −1.9`` and the hinge margin 1 of eq. (5) act
        (standardised 256-d pixels have ‖x‖² ≈ 256, and S then swings far past the margin).
    class_weight : {"balanced", None}, default="balanced"
        ``"balanced"``: positives and negatives weigh equally in the hinge (see Notes);
        ``None``: every pair weighs the same.
    init : {"auto", "identity", "cca", "kissme", "random", "euclidean"}, default="auto"
        ``"random"`` (the paper's): independent L; ``"euclidean"``: ``L_Cx = L_A``, ``L_Cy =
        L_B``; ``"identity"``: every L at ``α [I_r 0]`` (S the scaled untrained distance, the
        mean training pair at ``S = 0``); ``"cca"``: S the scaled ridge-CCA distance;
        ``"kissme"``: S the scaled KISSME distance (views of one width). ``"auto"``: the best
        of all but ``"euclidean"`` on the held-out identities of ``early_stopping`` (``init_``;
        random without one); all but random are ours (:mod:`crossmetric.learners._gsm_guard`).
    start_from : str, "auto" or None, default=None
        Ours, for ``structure="generalized"``: fit this special case first (same settings) and
        train from its measure (``"auto"``: ``"euclidean"``, none for a special case);
        ``penalty="start"`` holds the extra terms near it (docs guide).
    start_mu : float, "hold" or None, default=None
        Ours: μ while training from the fitted ``start_from`` case (``None``: ``mu``, which
        fits that case). With ``penalty="start"`` large values hold the generalized form near
        it; ``"hold"``, their limit, keeps that fit itself (measure and training attributes).
    batch_mode : {"auto", "sample", "pair"}, default="auto"
        ``"sample"``: the paper's sample-based batches (§4.2, eq. 14-18) -- each round takes
        ``n_identities`` identities with up to ``n_images_x`` / ``n_images_y`` samples each
        (:class:`crossmetric._solvers.batches.IdentityRounds`) and the loss runs over *all*
        ``n_x · n_y`` pairs of those samples, labelled by identity, positives and negatives
        weighted half and half; identities are the connected components of the positive
        pairs (a ``UserWarning`` when the positives miss same-identity pairs of a component).
        ``"pair"``: ``batch_size`` slices of the given pairs (the paper's "sample-pair-based"
        batches). ``"auto"``: ``"sample"`` when the positives are complete and consistent
        with the negatives, else ``"pair"`` (attribute ``batch_mode_``).
    n_identities : int, default=64
        K̂, identities per sample-based batch.
    n_images_x, n_images_y : int, default=2
        Ô₁, Ô₂: samples per identity and modality in a sample-based batch (fewer when an
        identity has fewer).
    hard_negatives : int or None, default=None
        Sample-based batches only. ``None``: every negative of the batch enters the loss; an
        int ``h``: all positives and, for every sample, its ``h`` hardest negatives (smallest S;
        the union over rows and columns), re-balanced to half the weight.
    early_stopping : {"auto", True, False}, default="auto"
        Hold out ``validation_fraction`` of the training identities (whole connected
        components of the positive pairs) and score the start and every epoch on them: the
        rank-1, then ROC AUC, over all cross similarities of the held-out samples
        (:mod:`crossmetric._solvers.early_stopping`, as every iterative learner). Training
        stops once neither that score nor the held-out loss has improved for
        ``n_iter_no_change`` epochs, and the best check -- the start included -- is kept, so
        the fit is never worse on held-out identities than where it started. ``"auto"``: on
        with 30 to 999 training identities, off otherwise; ``False``: the paper's plain run.
    validation_fraction : float in (0, 1), default=0.2
        Share of the training samples (whole identities) held out by ``early_stopping``.
    rank : int or None, default=None
        Rows r of the L matrices (``None``: ``min(p_x, p_y)``, square as in the paper). A
        smaller r learns, jointly with the similarity, a projection of the reduced features
        to r dimensions -- the role of the paper's learned reduction layer (§5.5 (i)).
    joint_reduction : {"auto", True, False}, default="auto"
        One reduction (PCA or centring, and scale) fitted on the training samples of both
        modalities together and applied to both -- for two views of one descriptor (two
        cameras), where the paper's shared layer gives corresponding coordinates, the tied
        structures (``B = A``) assume them and the untrained distance is a start. ``True``
        needs views of equal width; ``"auto"``: joint when they have one width.
    stopping : {"patience", "window"}, default="patience"
        ``"patience"``: stop when the epoch objective has not decreased by more than ``tol``
        (absolute) for ``n_iter_no_change`` epochs in a row. ``"window"``: stop when the mean
        objective of the last ``n_iter_no_change`` epochs is less than ``tol`` (relative)
        below the mean of the window before -- a plateau of the smoothed objective, which a
        slow steady decrease does not trigger. With a hold-out (``early_stopping``) the held-out
        score and loss decide instead.

    Attributes
    ----------
    params_ : dict of ndarray
        The free parameters of ``structure`` (and ``"f"`` when learnt).
    components_x_, components_y_ : ndarray of shape (2r + 1, p_x), (2r + 1, p_y)
        Rows ``[L_A; L_Cx; dᵀ]`` and ``[L_B; L_Cy; eᵀ]``: ``transform_x(X) =
        reduce_x(X) @ components_x_.T``.
    f_ : float
        The constant of S actually used (including the offsets of the affine baselines).
    reducer_x_, reducer_y_ : tuple
        ``("pca", fitted PCA, scale)`` or ``("scale", mean, scale)``: the fixed reduction
        ``reduce(Z) = PCA(Z) / scale`` or ``(Z − mean) / scale``.
    loss_curve_ : list of float
        Objective (mean balanced hinge + penalty) after each epoch: over all training pairs
        (``"pair"``), or the mean of the epoch's batch objectives (``"sample"``).
    batch_mode_ : {"sample", "pair"}
        The batches used.
    n_identities_ : int
        Identities the sample-based batches drew from (``"sample"`` only).
    validation_scores_, validation_loss_curve_ : list of float
        Held-out rank-1 (``validation_aucs_``: AUC) and loss at the start (entry 0) and after
        each epoch (``early_stopping`` only; else empty).
    best_iteration_ : int or None
        The epoch whose parameters were kept (0: the start; ``early_stopping`` only).
    init_ : str
        The start trained from (``init``, the one ``"auto"`` chose, or ``start_from``).
    n_iter_ : int
        Epochs run.
    threshold_ : float
        Decision threshold on S calibrated on the training pairs.

    Notes
    -----
    Each pair's hinge term is weighted so that positives and negatives count equally,
    ``J = ½ mean_pos (1 + S)₊ + ½ mean_neg (1 − S)₊ + μ‖Φ‖²`` -- the balance that the paper's
    batch generator obtains by sampling (§4.2); sample-based batches apply it within each
    batch. The fixed reduction never sees the samples ``early_stopping`` holds out.

    Examples
    --------
    >>> from crossmetric import GSM, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> model = GSM(n_components=4, random_state=0, preprocessor=(d.X, d.Y)).fit(pairs, y)
    >>> model.n_iter_ < 1000  # stopped on a plateau of the objective
    True
    >>> model.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_components: int | None = None, *, structure: str = "generalized",
                 f: float = -1.9, learn_f: bool = False, mu: float = 1e-4,
                 batch_size: int = 512, learning_rate: float = 1e-3, max_iter: int = 1000,
                 tol: float = 1e-4, n_iter_no_change: int = 5, init_scale: float = 1.0,
                 random_state=None, verbose: int = 0, preprocessor=None, whiten: bool = False,
                 feature_norm: float = 2.0, class_weight: str | None = "balanced",
                 init: str = "auto", batch_mode: str = "auto", n_identities: int = 64,
                 n_images_x: int = 2, n_images_y: int = 2, hard_negatives: int | None = None,
                 early_stopping="auto", validation_fraction: float = 0.2,
                 rank: int | None = None, joint_reduction="auto",
                 stopping: str = "patience", penalty: str = "zero", start_from=None,
                 start_mu: float | str | None = None):
        self.n_components = n_components
        self.structure = structure
        self.f = f
        self.learn_f = learn_f
        self.mu = mu
        self.penalty = penalty
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.init_scale = init_scale
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.whiten = whiten
        self.feature_norm = feature_norm
        self.class_weight = class_weight
        self.init = init
        self.batch_mode = batch_mode
        self.n_identities = n_identities
        self.n_images_x = n_images_x
        self.n_images_y = n_images_y
        self.hard_negatives = hard_negatives
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.rank = rank
        self.joint_reduction = joint_reduction
        self.stopping = stopping
        self.start_from = start_from
        self.start_mu = start_mu

    # ----------------------------------------------------------------------------- fit
    def _fit(self, data: PairData, y: np.ndarray) -> None:
        check_params(self)
        rng = check_random_state(self.random_state)
        # start_from: the special case first (its split and reduction are this fit's)
        start, rng = fit_start(self, data, y, rng) if start_case(self) else (None, rng)
        # the base's canonical pairs: the distinct samples of each modality, every one used
        # (each embedded once per batch, eq. 14)
        ix, iy = data.ix, data.iy
        n_x, n_y = data.X.shape[0], data.Y.shape[0]
        ids_x, ids_y, n_conflicts = identities_from_pairs(n_x, n_y, ix, iy, y)
        # whole identities held out, as for every learner's early stopping
        split = gsm_split(self, data, ix, iy, y, rng)
        if split is not None:
            tr, va = split
            rows_vx, rows_vy = np.unique(ix[va]), np.unique(iy[va])
            ix, iy, y = ix[tr], iy[tr], y[tr]
        # the fixed reduction sees the training samples only
        rx, ry = np.unique(ix), np.unique(iy)
        X, Y = reduced_views(self, data, rx, ry, rng, start)
        p_x, p_y = X.shape[1], Y.shape[1]
        r = min(p_x, p_y) if self.rank is None else int(self.rank)
        f0 = float(start_params(self, start)[1]) if start is not None else float(self.f)
        monitor, params = guarded_start(
            self, start, None if split is None else (rows_vx, rows_vy), data, X, Y,
            (ids_x, ids_y), (ix, iy, y), r, f0, rng)
        anchor = {k: np.copy(v) for k, v in params.items()} if self.penalty == "start" else None
        self.batch_mode_ = resolve_batch_mode(self.batch_mode, ids_x, ids_y, ix, iy, y,
                                              n_conflicts)
        if start is not None and self.start_mu == "hold":  # the limit start_mu → ∞
            return hold_at_start(self, start, params, f0, r, p_x, p_y)
        mu = float(self.mu if start is None or self.start_mu is None else self.start_mu)

        def loss_grad(prm, Xb, Yb, bix, biy, ell, w, mu=mu):
            return gsm_loss_grad(prm, self.structure, f0, Xb, Yb, bix, biy, ell, w, mu, anchor)

        if self.batch_mode_ == "sample":
            rounds = IdentityRounds(ids_x[rx], ids_y[ry], int(self.n_identities),
                                    int(self.n_images_x), int(self.n_images_y), rng)
            self.n_identities_ = int(rounds.identities.size)
            epoch_step = sample_epoch(
                params, loss_grad, rounds, X, Y, rx, ry, ids_x, ids_y, self.hard_negatives,
                lambda prm, A, B: self._similarity(prm, A, B, f0, r))
        else:
            weight = pair_weights(y, self.class_weight)
            epoch_step = pair_epoch(params, loss_grad, X, Y, ix, iy, y, weight,
                                    int(self.batch_size), rng,
                                    full_pair_loss(self.structure, f0, X, Y, ix, iy, weight,
                                                   mu, anchor))
        if monitor is not None:
            monitor.update(0, params)
        train_epochs(self, params, epoch_step, monitor)
        self._set_components(params, f0, r, p_x, p_y)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return gsm_with_complement(self, apply_reducer(self.reducer_x_, X)
                                   @ self.components_x_.T, X)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return gsm_with_complement(self, apply_reducer(self.reducer_y_, Y)
                                   @ self.components_y_.T, Y)

