"""LDML: logistic discriminant metric learning (Guillaumin, Verbeek & Schmid, ICCV 2009).

LDML models the probability that a pair ``(x_i, x_j)`` is *same* as

    p_ij = σ(b − D_ij),   D_ij = (x_i − x_j)ᵀ M (x_i − x_j) = ‖L x_i − L x_j‖²

(LDML eq. 1-2; the clml paper's eq. 1) and fits ``M`` and the scalar bias ``b`` by maximising the
log-likelihood of the pair labels, i.e. minimising the log-loss of the clml paper's eq. (5)

    ℒ(L, b) = Σ_ij ln(1 + exp(−y_ij (b − D_ij))).

The log-loss is PCCA's generalized logistic objective with β = 1 and a learned threshold b
(:class:`crossmetric._solvers.logistic.PairLogisticObjective`, ``loss_grad_tied``): each sample is
embedded once and the pair gradients are scattered back through a sparse incidence matrix,
O(n_pairs · p) per call, no ``(n_pairs, d, d)`` or ``d × d`` arrays. It is minimised with the
same L-BFGS driver (:func:`crossmetric._solvers.descent.lbfgs`). CLML
(``crossmetric.learners.clml``) reuses the objective, the starting point
(:func:`crossmetric._solvers.starting.initial_projection`) and the driver, so that
``CLML(n_clusters=1)`` runs *the same* code as :class:`LDML`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator

from crossmetric._base import LinearSingleModalMixin
from crossmetric._solvers.descent import fit_lbfgs
from crossmetric._solvers.early_stopping import (
    check_early_stopping,
    clear,
    split_pairs,
    vector_monitor,
)
from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric._solvers.span import set_complement
from crossmetric._solvers.starting import initial_projection
from crossmetric._solvers.stochastic import (
    STOCHASTIC_SOLVERS,
    fit_theta,
    refuse_early_stopping,
    stochastic_settings,
)
from crossmetric._utils.checks import (
    as_float_array,
    check_choice,
    check_n_components,
    check_positive_int,
    check_positive_scalar,
)
from crossmetric.learners._basis_guard import basis_starts, fit_in_basis, store_in_basis, uses_basis
from crossmetric.losses import generalized_logistic
from crossmetric.pairs._pair_data import PairData, used_rows

__all__ = ["LDML", "pair_log_likelihood", "input_scale"]

# ------------------------------------------------------- old private paths (kept importable)
#: :func:`crossmetric._solvers.starting.initial_projection`
_initial_projection = initial_projection


def _used_samples(data: PairData):
    """Samples taking part in the pairs, and pair indices into them (tied learners).

    Kept for old imports: the learners fit from the base's canonical pairs
    (:func:`crossmetric._base.canonical_pairs`), which hold only used samples already.
    """
    Z, i, j = data.stacked()
    return used_rows(Z, i, j)


def pair_log_likelihood(estimator, pairs, y) -> float:
    """Mean log-likelihood of labelled pairs under LDML's model ``p(same) = σ(b − D)``.

    ``−(1/n) Σ_p ln(1 + exp(y_p (D_p − b)))`` (the negated data term of eq. 5), for any fitted
    estimator with ``pair_distance`` and ``bias_`` (LDML, CLML). Usable as a scikit-learn scorer
    (``scoring=pair_log_likelihood``; higher is better): unlike the pair ROC AUC it does not
    saturate at 1 when held-out pairs are perfectly ranked, so it still separates models by
    how confidently they are right.
    """
    from crossmetric._utils.checks import check_pair_labels

    D = estimator.pair_distance(pairs)
    y = check_pair_labels(y, D.shape[0], require_both=False)
    return float(-np.mean(generalized_logistic(y * (D - estimator.bias_), 1.0)))


#: rows that :func:`input_scale` reads at most (evenly spaced), for memory-mapped samples
_SCALE_ROWS = 20_000


def input_scale(X: np.ndarray) -> float:
    """One global scale of the training samples: the root mean square of the distances of the
    samples to their mean, ``sqrt(mean_i ‖x_i − μ‖²)`` (1 for constant samples).

    LDML and CLML fit on ``X / input_scale(X)`` -- samples of unit RMS norm around their
    mean -- and fold the scale back into the learned projections, so that ``alpha`` (and
    CLML's ``reg_covar``) act alike on ``X``, ``X × 1e-3`` and ``X × 1e3``: without it,
    features × 1e-3 made the penalty a million times stronger (CLML rank-1 58.3 → 27.8 %).
    The norm, not the per-feature deviation, so that the penalty means the same for any
    number of features (the start is scaled to median pair distance 1, so ``‖L‖`` is then of
    order 1). At most :data:`_SCALE_ROWS` evenly spaced rows are read.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    float
    """
    n = X.shape[0]
    rows = X if n <= _SCALE_ROWS else X[np.linspace(0, n - 1, _SCALE_ROWS).astype(np.int64)]
    rows = np.asarray(rows, dtype=np.float64)
    scale = float(np.sqrt(np.sum(rows.var(axis=0)))) if rows.size else 0.0
    return scale if np.isfinite(scale) and scale > 0 else 1.0


def scaled_pairs(data: PairData, scale: float) -> PairData:
    """``data`` with its samples divided by ``scale`` (a tied ``Y is X`` stays tied)."""
    X = data.X / scale
    return PairData(X, X if data.Y is data.X else data.Y / scale, data.ix, data.iy)


def _check_common(est) -> None:
    check_positive_scalar(est.alpha, "alpha", allow_zero=True)
    check_positive_int(est.max_iter, "max_iter")
    check_positive_scalar(est.tol, "tol", allow_zero=True)
    check_early_stopping(est)


# ------------------------------------------------------------------------------- estimator
class LDML(LinearSingleModalMixin, BaseEstimator):
    """Logistic discriminant metric learning (Guillaumin, Verbeek & Schmid, ICCV 2009).

    Learns ``D(x, x') = ‖L x − L x'‖²`` and a bias ``b`` such that ``σ(b − D)`` is the probability
    that a pair is *same*, by minimising::

        J(L, b) = (1/|P|) Σ_p ln(1 + exp(y_p (D_p − b)))  +  (α/2) ‖L‖_F²

    (the log-loss of LDML, eq. 5 of the clml paper, averaged over the pairs, plus the ℓ2 penalty
    the clml paper credits for part of its gain) with scipy's L-BFGS on ``(L, b)``. ``L`` here
    acts on the samples divided by their global scale ``s`` (``input_scale_``), so the penalty
    is ``(α/2) ‖s · components_‖_F²`` and the fit does not depend on the units of the features.

    *Full metric.* With ``n_components=None``, ``L`` is square (n_features × n_features) and
    ``M = Lᵀ L`` ranges over all PSD matrices, so the model is the full-``M`` LDML of the paper
    parameterised by a factor instead of projected gradient steps on ``M``: no eigen-decomposition
    per step, and the penalty ``‖L‖_F² = tr(M)`` is a trace penalty on ``M``. ``J`` is convex in
    ``(M, b)`` but not in ``L``; with a square ``L`` every local minimum is nevertheless a global
    minimum of the convex problem (a full-rank local minimiser has ``∇_M J · Lᵀ = 0`` hence
    ``∇_M J = 0``; a rank-deficient one is global by Journée et al., SIAM J. Optim. 2010). With
    ``n_components=r`` the metric has rank ≤ r (low-rank LDML, non-convex).

    Parameters
    ----------
    n_components : int, optional
        Rows of ``L`` (dimension of the embedding). ``None``: n_features (full ``M``). With a
        few hundred identities keep it low (16-32): selection on training persons chose 32 on
        VIPeR (3 of 3 splits) and 16-32 on PKU-Sketch (``docs/guide/which_method_when.md``).
    alpha : float, default=1e-4
        Weight of the ℓ2 penalty ``(α/2)‖L‖_F²``. ``L`` is learned on the samples divided by
        one global scale (:func:`input_scale`, the RMS distance of the training samples to
        their mean; ``input_scale_``) and folded back, so the penalty and the fit are the same for
        ``X`` and ``c · X``. Standardise features of very different scales first: one global
        scale does not even them out.
    init : {"auto", "pca", "identity", "kissme", "random"} or ndarray
        Initial ``L`` (an array: of shape (n_components, n_features)). ``"identity"`` (the library's
        start, not the paper's) is the untrained distance: ``L`` then acts on the top
        ``n_components`` principal axes of the training samples (their span when ``None``) and the
        model keeps the untrained distance of the rest (``complement_scale_``;
        :mod:`crossmetric.learners._basis_guard`). ``"kissme"`` (the library's too) is KISSME's
        ``Σ_S⁻¹ − Σ_D⁻¹`` of the training pairs on that basis. ``"auto"``: with held-out identities
        (``early_stopping``) the best of ``"identity"``, ``"kissme"`` and the paper's ``"pca"`` on
        them; without, ``"pca"`` for a low-rank ``L`` and ``"identity"`` for the full one (on the
        span of samples fewer than their features, exactly). Named initialisations are rescaled so
        that the median training-pair distance is 1; the initial bias is the median training-pair
        distance.
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-4
        Stop on a plateau: when ``J`` has decreased by less than ``tol`` relative to its value
        per iteration, over the last 10 L-BFGS iterations.
        The default stops when 10 iterations together lower the objective by less than
        0.1 %: on digits (1,600 objects) 1e-5 took up to 3× the iterations for the same
        held-out AUC (PCCA 0.9750 vs 0.9748, CMML 0.9591 vs 0.9581, LDML 0.9575 vs 0.9576).
    early_stopping : {"auto", True, False}, default="auto"
        The held-out guard of every iterative learner, as in :class:`~crossmetric.PCCA`
        (:mod:`crossmetric._solvers.early_stopping`): the start and every iteration scored on
        held-out training identities, the best check that beats the start beyond the
        hold-out's noise kept, else the start. ``False``: the paper's plain run.
    validation_fraction : float in (0, 1), default=0.2
        Share of the training samples (whole identities) held out by ``early_stopping``.
    n_iter_no_change : int, default=10
        Patience of early stopping, in iterations.
    verbose : int, default=0
        Print a per-iteration table (iteration, objective, time).
    random_state : int, RandomState instance or None
        Seeds the PCA solver, the random initialisation and the validation split.
    preprocessor : array-like, optional
        Samples that integer index pairs refer to.
    solver : {"lbfgs", "minibatch", "sgd"}, default="lbfgs"
        ``"minibatch"`` (Adam) / ``"sgd"``: stochastic solvers that read ``batch_size`` pairs
        and only their samples at a time (pairs and samples may be memory-mapped); the
        starting point is computed on 20,000 random pairs; ``max_iter`` counts epochs
        (learning-rate rule in :mod:`crossmetric._solvers.stochastic`).
    batch_size : int, default=4096
    learning_rate : float, default=0.3

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned ``L``; ``M = components_.T @ components_``.
    bias_ : float
        The learned ``b``: pairs with ``D < b`` have ``p(same) > 1/2``.
    input_scale_ : float
        The global scale of the training samples the fit divided them by (folded into
        ``components_``, which act on raw samples).
    init_ : str
        The start trained from (``"array"`` for a given ``L0``).
    complement_scale_ : float
        ``c`` of the kept untrained distance ``c² ‖(I − B Bᵀ)(x − y)‖²`` (0: none);
        ``complement_basis_`` is ``B`` (n_features × k).
    n_iter_ : int
    loss_curve_ : list of float
        Objective ``J`` after each L-BFGS iteration.
    validation_scores_ : list of float or None
        Validation rank-1 on the held-out identities after each iteration, entry 0 at the
        start (``early_stopping``); ``validation_aucs_`` their ROC AUC.
    validation_loss_curve_ : list of float or None
        Loss on the validation pairs after each iteration (``early_stopping``).
    best_iteration_ : int or None
        Iteration whose parameters are kept (``early_stopping``).
    threshold_ : float
        The accuracy-optimal cut on the training pairs; when the learned distance separates
        the training pairs (every cut in the gap is 100 % accurate), ``bias_`` if it lies in
        the gap (the model's own rule ``p(same) >= 1/2``), else the middle of the gap.
        :meth:`calibrate_threshold` recalibrates it on (held-out) pairs.


    Notes
    -----
    One objective evaluation costs O(n_pairs · r + n_samples · d · r) for ``n_samples`` distinct
    samples in the pairs: each sample is embedded once and the pair gradients are scattered back
    to the samples, so no per-pair outer product and no d × d matrix is formed (except ``L``
    itself when ``n_components=None``).

    References
    ----------
    M. Guillaumin, J. Verbeek, C. Schmid. Is that you? Metric learning approaches for face
    identification. ICCV 2009.

    Examples
    --------
    >>> from crossmetric import LDML, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = LDML(n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> model.transform(d.X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    #: wide samples are fitted on a basis of theirs, with the untrained distance of the rest
    #: (:mod:`crossmetric.learners._basis_guard`): the protocols' ``pca_components="auto"``
    #: leaves them as they are
    _reduces_to_span = True

    def __init__(self, n_components: int | None = None, *, alpha: float = 1e-4,
                 init="auto", max_iter: int = 1000, tol: float = 1e-4,
                 early_stopping="auto", validation_fraction: float = 0.2,
                 n_iter_no_change: int = 10, verbose: int = 0, random_state=None,
                 preprocessor=None, solver: str = "lbfgs", batch_size: int = 4096,
                 learning_rate: float = 0.3):
        self.solver = solver
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_components = n_components
        self.alpha = alpha
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _scaled_init(self, scale: float):
        """``init`` for samples divided by ``scale``: a given ``L0`` acts on raw samples, so
        it is multiplied by ``scale`` (named initialisations are scale-free)."""
        if isinstance(self.init, str):
            return self.init
        return as_float_array(self.init, "init", ndim=2) * scale

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        _check_common(self)
        set_complement(self, 0.0, None)
        solver = check_choice(self.solver, "solver", ("lbfgs", *STOCHASTIC_SOLVERS))
        # fitted on the samples / one global scale, folded back into components_ at the end
        # (see input_scale): the defaults then act alike at any scale of the features
        scale = input_scale(data.X)
        init = self._scaled_init(scale)
        if solver != "lbfgs":
            refuse_early_stopping(self, solver)
            d = data.X.shape[1]
            p = d if self.n_components is None else check_n_components(self.n_components, d)

            def init_fn(block):
                (Z,), i, j, _ = block
                L0, b0 = initial_projection(init, p, Z / scale, i, j, self.random_state)
                return np.r_[L0.ravel(), b0]

            def loss_fn(theta, block):
                (Z,), i, j, yb = block
                obj = PairLogisticObjective(i, j, yb, 1.0, Z.shape[0], Z.shape[0])
                return self._loss_grad(theta, Z / scale, obj, p)

            theta, self.loss_curve_, self.n_iter_ = fit_theta(
                data, y, init_fn, loss_fn, solver=solver, name="LDML",
                **stochastic_settings(self))
            self.components_ = theta[:-1].reshape(p, d) / scale
            self.bias_ = float(theta[-1])
            self.input_scale_ = scale
            clear(self)
            return
        data, y, val = split_pairs(self, scaled_pairs(data, scale), y)
        Xu, i, j = data.X, data.ix, data.iy
        d = Xu.shape[1]
        p = d if self.n_components is None else check_n_components(self.n_components, d)
        self.input_scale_ = scale
        if uses_basis(self, val, self.n_components, Xu):
            form, starts, folds = basis_starts(self, Xu, i, j, y, self.n_components,
                                               val is not None)
            p, k = next(iter(starts.values()))[0].shape
            theta, c = fit_in_basis(
                self, form, starts, folds, i, j, y, val, 1.0,
                pack=lambda L0, b0: np.r_[L0.ravel(), b0],
                loss_grad=lambda t, obj: self._loss_grad(t, form.coords, obj, p),
                embed=lambda t, Vb, side: Vb @ t[:-1].reshape(p, k).T)
            self.components_ = store_in_basis(self, theta[:-1].reshape(p, k), form, c, scale)
            self.bias_ = float(theta[-1])
            return
        self.init_ = init if isinstance(init, str) else "array"
        L0, b0 = initial_projection(init, p, Xu, i, j, self.random_state)
        objective = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0])
        monitor = vector_monitor(self, val, lambda t, Xv: Xv @ t[:-1].reshape(p, d).T, y)
        theta = fit_lbfgs(self, lambda t: self._loss_grad(t, Xu, objective, p),
                          np.r_[L0.ravel(), b0], monitor)
        self.components_ = theta[:-1].reshape(p, d) / scale
        self.bias_ = float(theta[-1])

    def _loss_grad(self, theta: np.ndarray, Xu: np.ndarray,
                   objective: PairLogisticObjective, p: int) -> tuple[float, np.ndarray]:
        """Objective ``J(L, b)`` and its gradient at ``theta = [vec(L), b]``.

        ``∂J/∂L = (∂ℓ/∂Z)ᵀ X + α L`` with ``Z = X Lᵀ`` (chain rule through the embedding);
        ``∂ℓ/∂Z`` comes from :meth:`PairLogisticObjective.loss_grad_tied`.
        """
        L = theta[:-1].reshape(p, Xu.shape[1])
        loss, dZ, db = objective.loss_grad_tied(Xu @ L.T, threshold=theta[-1])
        loss += 0.5 * self.alpha * float(np.sum(L * L))
        gL = dZ.T @ Xu + self.alpha * L
        return loss, np.r_[gL.ravel(), db]

    def _own_threshold(self) -> float:
        """The learned bias ``b`` (``p(same) = 1/2``): see ``threshold_``."""
        return self.bias_

    def pair_probability(self, pairs) -> np.ndarray:
        """LDML's ``p(same) = σ(b − D)`` for each pair (LDML eq. 1)."""
        return expit(self.bias_ - self.pair_distance(pairs))
