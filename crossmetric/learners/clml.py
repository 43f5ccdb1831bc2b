"""CLML: coordinated local metric learning (Saxena & Verbeek, 2015).

A k-component Gaussian mixture softly assigns each sample to clusters (``q_is``); each cluster
has a local projection ``L_s`` and a translation ``b_s`` that coordinate the local coordinate
systems into one global space (eq. 2-3):

    z_i = Σ_s q_is (L_s x_i + b_s).

Distances are ℓ2 in ``z`` between any two samples, whatever their clusters, so fitted models can
be searched with standard ℓ2 indexes (:mod:`crossmetric.retrieval`). ``{L_s, b_s}`` and LDML's
scalar bias ``b`` are learned by minimising the LDML log-loss (eq. 5) plus an ℓ2 penalty, with the
same objective code as :class:`crossmetric.learners.ldml.LDML` -- ``CLML(n_clusters=1)`` *is* LDML.

Equivalently ``z_i = L̃ x̃_i`` (eq. 4) with ``L̃ = (L_1, b_1, …, L_k, b_k)`` and
``x̃_i = (q_i1 (x_iᵀ, 1), …, q_ik (x_iᵀ, 1))ᵀ``; the code never builds ``x̃`` for the data set
(:meth:`CLML.expand` does, for checks on small data) but loops over clusters and touches only
the samples with ``q_is > 0``, so the cost grows with the number of non-zero assignments,
not with k.
"""

from __future__ import annotations

import numbers
import time
import warnings
from functools import partial

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state

from crossmetric._base import SingleModalMixin, with_complement
from crossmetric._solvers.descent import fit_lbfgs
from crossmetric._solvers.early_stopping import clear, split_pairs, vector_monitor
from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric._solvers.selection_scan import scan_candidates
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
from crossmetric.learners._basis_guard import uses_basis
from crossmetric.learners._local_metrics import (
    _local_embed,
    _LocalMetricsModel,
    sparsify_assignments,
)
from crossmetric.learners.ldml import LDML, _check_common, input_scale
from crossmetric.pairs import group_pair_folds
from crossmetric.pairs._pair_data import PairData

__all__ = ["CLML", "CLMLCV", "sparsify_assignments"]

_COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


class CLML(_LocalMetricsModel, SingleModalMixin, BaseEstimator):
    """Coordinated local metric learning (Saxena & Verbeek, 2015).

    Fits, in this order: (1) optionally a PCA of the training samples to
    ``gmm_pca_components`` dimensions; (2) a ``GaussianMixture`` with ``n_clusters`` components on
    them (the fixed clustering of the paper); (3) the local projections ``L_s`` (n_components ×
    n_features), translations ``b_s`` and the scalar bias ``b`` by L-BFGS on::

        J = (1/|P|) Σ_p ln(1 + exp(y_p (‖z_i − z_j‖² − b)))  +  (α / 2k) Σ_s (‖L_s‖_F² + ‖b_s‖²)

    with ``z_i = Σ_s q_is (L_s x_i + b_s)`` (eq. 3, 5). The ℓ2 penalty is the paper's ℓ2
    regularisation of ``L̃``, divided by ``k`` so that it is the *mean* over clusters: identical
    local metrics then cost the same as one global metric, and with ``k = 1`` (``q_i1 = 1``; the
    translation ``b_1`` cancels in every distance) ``J`` is exactly the objective of
    :class:`~crossmetric.learners.ldml.LDML` (``n_components``, ``alpha`` equal).

    Soft assignments: ``q`` are the mixture posteriors sparsified by
    :func:`sparsify_assignments` -- the ``max_assignments`` largest, those below
    ``min_assignment`` dropped (the largest always kept), renormalised to sum to 1.

    Parameters
    ----------
    n_clusters : int, default=16
        Number of local metrics ``k`` (mixture components). Choose it by cross-validation with
        :class:`CLMLCV` (the paper's "cross validated k"). With a few hundred identities
        selection keeps 1-2 (VIPeR, 316 training persons: 2 on 2 of 3 splits; PKU-Sketch, 147:
        1 on 2 of 3, ``docs/guide/which_method_when.md``): each metric needs its own identities.
    n_components : int, default=32
        Dimension of the global space (rows of each ``L_s``; 32 in the paper). At most
        ``n_clusters · (n_features + 1)``, the dimension of ``x̃``.
    alpha : float, default=1e-4
        ℓ2 penalty weight (see the objective above). The local metrics are learned on the
        samples divided by one global scale (:func:`crossmetric.learners.ldml.input_scale`;
        ``input_scale_``) and folded back, and the mixture's ``reg_covar`` is multiplied by
        its square, so that the fit is the same for ``X`` and ``c · X``.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="diag"
        Covariance of the mixture components (scikit-learn's ``GaussianMixture``).
    gmm_pca_components : int, "auto" or None, default="auto"
        Fit the mixture on the samples reduced by PCA to this many dimensions (the metric itself
        always acts on the full features). ``"auto"``: 32 dimensions when the features have
        more (else no reduction); ``None``: no reduction. On hundreds of raw features a
        diagonal mixture's posteriors are near-hard and its clusters poor (mfeat fou + pix, k =
        16: mAP 86.9 against 95.3 on PCA-32, ``benchmarks/bench_clml.py``).
    min_assignment : float in [0, 1), default=0.01
        Assignments ``q_is`` below this are dropped (the row's largest is always kept).
    max_assignments : int, default=3
        At most this many clusters per sample (``None``: no limit).
    reg_covar : float, default=1e-6
        Passed to ``GaussianMixture``.
    init : {"auto", "pca", "identity", "kissme", "random", "ldml"} or ndarray, default="auto"
        Initial local projections, all equal to one global ``L0`` (translations 0): the named
        initialisations of :class:`~crossmetric.learners.ldml.LDML` (rescaled so that the median
        training distance is 1; ``"identity"``, ``"kissme"`` and ``"auto"`` with held-out
        identities on a basis of the training samples, as LDML),
        ``"ldml"`` (fit a global LDML with the same ``n_components``, ``alpha``, ``max_iter``,
        ``tol`` first and start every cluster from it), or an array of shape (n_components,
        n_features) or (n_clusters, n_components, n_features). The initial model therefore is a
        global metric, and the initial bias is the median training distance (the fitted LDML's
        bias for ``"ldml"``).
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-4
        Stop on a plateau: when ``J`` has decreased by less than ``tol`` relative to its value
        per iteration, over the last 10 L-BFGS iterations (as :class:`~crossmetric.LDML`).
    early_stopping : {"auto", True, False}, default="auto"
        The held-out guard of every iterative learner, as in :class:`~crossmetric.PCCA`
        (:mod:`crossmetric._solvers.early_stopping`); ``False``: the paper's plain run.
    validation_fraction : float in (0, 1), default=0.2
    n_iter_no_change : int, default=10
        Patience of early stopping, in iterations.
    verbose : int, default=0
    random_state : int, RandomState instance or None
        Seeds the PCA, the mixture, a random initialisation and the validation split.
    preprocessor : array-like, optional
        Samples that integer index pairs refer to.
    solver : {"lbfgs", "minibatch", "sgd"}, default="lbfgs"
        ``"minibatch"`` (Adam) / ``"sgd"``: stochastic solvers reading ``batch_size`` pairs
        and only their samples at a time (pairs and samples may be memory-mapped). The PCA,
        the mixture and the starting point are fitted on the samples of 20,000 random pairs;
        ``max_iter`` counts epochs (rate rule in :mod:`crossmetric._solvers.stochastic`).
    batch_size : int, default=4096
    learning_rate : float, default=0.3

    Attributes
    ----------
    pca_ : PCA or None
        Reduction before the mixture.
    gmm_ : GaussianMixture
        The fixed clustering.
    local_components_ : ndarray of shape (n_clusters, n_components, n_features)
        ``L_s``.
    local_offsets_ : ndarray of shape (n_clusters, n_components)
        ``b_s``.
    bias_ : float
        LDML's ``b``: pairs with ``‖z_i − z_j‖² < b`` are more likely *same*.
    input_scale_ : float
        The global scale of the training samples (folded into ``local_components_``).
    init_, complement_scale_, complement_basis_
        As in :class:`~crossmetric.LDML`.
    ldml_init_ : LDML
        The global metric the local ones started from (``init="ldml"`` only).
    n_iter_ : int
    loss_curve_ : list of float
    validation_scores_, validation_aucs_, validation_loss_curve_, best_iteration_
        As in :class:`~crossmetric.PCCA` (``early_stopping``).
    threshold_ : float
        The accuracy-optimal cut on the training pairs; when the learned distance separates
        the training pairs (every cut in the gap is 100 % accurate), ``bias_`` if it lies in
        the gap (the model's own rule ``p(same) >= 1/2``), else the middle of the gap.
        :meth:`calibrate_threshold` recalibrates it on (held-out) pairs.

    Notes
    -----
    One objective evaluation costs O(n_pairs · r + nnz(q) · d · r) for r = ``n_components``:
    each distinct training sample is embedded once through its non-zero assignments only
    (``nnz(q) ≤ max_assignments · n_samples``), and the gradient flows back through the same
    structure.

    References
    ----------
    S. Saxena, J. Verbeek. Coordinated local metric learning. ICCV ChaLearn Looking at People
    workshop, 2015.

    Examples
    --------
    >>> from crossmetric import CLML, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, max_positives=300, random_state=0)
    >>> model = CLML(n_clusters=2, n_components=4, random_state=0, preprocessor=d.X).fit(pairs, y)
    >>> bool(model.score(pairs, y) > 0.8)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, n_clusters: int = 16, *, n_components: int = 32, alpha: float = 1e-4,
                 covariance_type: str = "diag", gmm_pca_components="auto",
                 min_assignment: float = 0.01, max_assignments: int | None = 3,
                 reg_covar: float = 1e-6, init="auto", max_iter: int = 1000,
                 tol: float = 1e-4, early_stopping="auto",
                 validation_fraction: float = 0.2, n_iter_no_change: int = 10,
                 verbose: int = 0, random_state=None, preprocessor=None,
                 solver: str = "lbfgs", batch_size: int = 4096, learning_rate: float = 0.3):
        self.solver = solver
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_clusters = n_clusters
        self.n_components = n_components
        self.alpha = alpha
        self.covariance_type = covariance_type
        self.gmm_pca_components = gmm_pca_components
        self.min_assignment = min_assignment
        self.max_assignments = max_assignments
        self.reg_covar = reg_covar
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    # ----------------------------------------------------------------------- checks
    def _check_params(self, n_samples: int, d: int) -> tuple[int, int]:
        _check_common(self)
        k = check_positive_int(self.n_clusters, "n_clusters")
        if k > n_samples:
            raise ValueError(
                f"n_clusters={k} exceeds the {n_samples} distinct samples in the training pairs."
            )
        p = check_n_components(self.n_components, k * (d + 1),
                               what="n_clusters · (n_features + 1), the dimension of x̃")
        check_choice(self.covariance_type, "covariance_type", _COVARIANCE_TYPES)
        if self._gmm_dims(n_samples, d) is not None and not (
                isinstance(self.gmm_pca_components, str)):
            check_n_components(self.gmm_pca_components, min(n_samples, d),
                               name="gmm_pca_components",
                               what="min(n_samples, n_features)")
        m = check_positive_scalar(self.min_assignment, "min_assignment", allow_zero=True)
        if m >= 1:
            raise ValueError(f"min_assignment must be in [0, 1), got {self.min_assignment!r}.")
        if self.max_assignments is not None:
            check_positive_int(self.max_assignments, "max_assignments")
        check_positive_scalar(self.reg_covar, "reg_covar", allow_zero=True)
        return k, p

    # -------------------------------------------------------------------------- fit
    def _fit(self, data: PairData, y: np.ndarray) -> None:
        set_complement(self, 0.0, None)
        if check_choice(self.solver, "solver", ("lbfgs", *STOCHASTIC_SOLVERS)) != "lbfgs":
            refuse_early_stopping(self, self.solver)
            self._fit_stochastic(data, y)
            clear(self)
            return
        # one global scale of the samples (LDML's input_scale): the metrics are learned on
        # X / scale and folded back, the mixture's reg_covar scaled by scale², so that the
        # defaults act alike at any scale of the features
        scale = input_scale(data.X)
        data, y, val = split_pairs(self, data, y)
        Xu, i, j = data.X, data.ix, data.iy
        n, d = Xu.shape
        k, p = self._check_params(n, d)
        self._fit_mixture(Xu, scale)
        q = self._posteriors(Xu, True)
        Xs = Xu / scale
        self.input_scale_ = scale
        self.init_ = self.init if isinstance(self.init, str) else "array"

        # (3) the coordinated local metrics
        if uses_basis(self, val, p, Xs):
            self._fit_in_basis(Xs, q, i, j, y, val, k, p, scale)
            return
        Ls0, bs0, b0 = self._initial_parameters(k, p, Xs, q, i, j, data, y, scale)
        objective, qv = PairLogisticObjective(i, j, y, 1.0, n, n), {}

        def embed_validation(theta, Xv):  # the assignments are fixed: once a side
            if id(Xv) not in qv:
                qv[id(Xv)] = self._posteriors(Xv, True)
            Ls, bs, _ = self._unpack(theta, k, p, d)
            return _local_embed(Xv / scale, qv[id(Xv)], Ls, bs)

        theta = fit_lbfgs(
            self, lambda t: self._loss_grad(t, Xs, q, objective, k, p),
            np.r_[Ls0.ravel(), bs0.ravel(), b0],
            vector_monitor(self, val, embed_validation, y),
        )
        Ls, self.local_offsets_, self.bias_ = self._unpack(theta, k, p, d)
        self.local_components_ = Ls / scale

    def _fit_stochastic(self, data: PairData, y: np.ndarray) -> None:
        """Mini-batch version of :meth:`_fit`
        (:func:`crossmetric._solvers.stochastic.fit_theta`)."""
        d = data.X.shape[1]
        shape = {}
        scale = input_scale(data.X)  # as in _fit

        def init_fn(block):
            (Z,), i, j, yb = block
            shape["k"], shape["p"] = k, p = self._check_params(Z.shape[0], d)
            self._fit_mixture(Z, scale)
            Ls0, bs0, b0 = self._initial_parameters(k, p, Z / scale, self._posteriors(Z, True),
                                                    i, j, PairData(Z, Z, i, j), yb, scale)
            return np.r_[Ls0.ravel(), bs0.ravel(), b0]

        def loss_fn(theta, block):
            (Z,), i, j, yb = block
            obj = PairLogisticObjective(i, j, yb, 1.0, Z.shape[0], Z.shape[0])
            return self._loss_grad(theta, Z / scale, self._posteriors(Z, True), obj,
                                   shape["k"], shape["p"])

        theta, self.loss_curve_, self.n_iter_ = fit_theta(
            data, y, init_fn, loss_fn, solver=self.solver, name="CLML",
            **stochastic_settings(self))
        Ls, self.local_offsets_, self.bias_ = self._unpack(theta, shape["k"], shape["p"], d)
        self.local_components_ = Ls / scale
        self.input_scale_ = scale

    def _initial_parameters(self, k, p, Xs, q, i, j, data, y, scale: float = 1.0):
        """``(L_s, b_s, b)`` to start from, for the samples divided by ``scale`` (``Xs``);
        ``data`` holds the raw samples (for ``init="ldml"``), a given ``init`` acts on raw
        samples and is multiplied by ``scale``."""
        d = Xs.shape[1]
        init = self.init
        if isinstance(init, str) and init == "ldml":
            ldml = LDML(p, alpha=self.alpha, init="auto", max_iter=self.max_iter, tol=self.tol,
                        random_state=self.random_state)
            ldml._fit(data, y)
            self.ldml_init_ = ldml
            L0, b0 = ldml.components_ * scale, ldml.bias_  # LDML's acts on raw samples
        elif not isinstance(init, str) and np.ndim(init) == 3:
            Ls = as_float_array(init, "init", ndim=3).astype(np.float64, copy=True)
            if Ls.shape != (k, p, d):
                raise ValueError(
                    f"init must have shape (n_clusters, n_components, n_features) = "
                    f"{(k, p, d)}, got {Ls.shape}."
                )
            Ls *= scale
            Z0 = _local_embed(Xs, q, Ls, np.zeros((k, p)))
            diff = Z0[i] - Z0[j]
            return Ls, np.zeros((k, p)), float(np.median(np.einsum("ij,ij->i", diff, diff)))
        else:
            if not isinstance(init, str):
                init = as_float_array(init, "init", ndim=2) * scale
            L0, b0 = initial_projection(init, p, Xs, i, j, self.random_state)
        return np.repeat(L0[None], k, axis=0), np.zeros((k, p)), b0

    # ------------------------------------------------------------------- embedding
    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        q = self._posteriors(X, sparse=True)
        return with_complement(self, _local_embed(X, q, self.local_components_,
                                                  self.local_offsets_), X)

    def _own_threshold(self) -> float:
        """The learned bias ``b`` (``p(same) = 1/2``): see ``threshold_``."""
        return self.bias_

    def pair_probability(self, pairs) -> np.ndarray:
        """LDML's ``p(same) = σ(b − ‖z_i − z_j‖²)`` for each pair."""
        return expit(self.bias_ - self.pair_distance(pairs))


def _fold_score(params, f, *, base, folds, scorer, seed):
    """CLMLCV's ``fit_and_score`` of the scan: a clone of ``base`` with ``params`` (and
    ``random_state=seed`` when given) fitted on fold ``f``'s training pairs, its
    ``(validation score, fit seconds, score seconds)``. The inner fits' warnings are
    swallowed, as ``GridSearchCV`` users see them only from the refit."""
    est = clone(base).set_params(**params)
    if seed is not None:
        est.set_params(random_state=seed)
    tr_p, tr_y, va_p, va_y = folds[f]
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        est.fit(tr_p, tr_y)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score = float(scorer(est, va_p, va_y))
    return score, t1 - t0, time.perf_counter() - t1


class CLMLCV(CLML):
    """CLML with the number of local metrics ``k`` chosen by cross-validation.

    Searches ``n_clusters`` in ``n_clusters_grid`` on the training pairs with the candidate
    scan of :func:`crossmetric.protocols.model_selection.search_params`
    (:func:`crossmetric._solvers.selection_scan.scan_candidates`; the folds and scorer
    scikit-learn's ``GridSearchCV`` would use, the same scores and choice), then refits a
    :class:`CLML` with the best ``k`` on all pairs. The folds are folds of *samples*
    (:func:`crossmetric.pairs.group_pair_folds`): a validation fold holds the pairs among its
    own samples only, and its model is trained on the pairs that touch none of them. Folds of
    pairs would leak -- most samples of a validation pair also appear in training pairs, so
    the criterion rewards memorising samples and picks the most overfitting ``k`` (mfeat
    fou + pix: k = 32, test mAP 76.1, where k = 1 gives 94.7).
    The default criterion is the held-out pair ROC AUC, the ranking the retrieval measures
    score. With sample-disjoint folds it picked k = 16 on mfeat fou + pix (test mAP 96.6; k = 32
    gives 97.1, k = 1 94.7) and k = 8 on digits (90.5; k = 32 93.0, k = 1 82.8), where LDML's
    held-out log-likelihood (:func:`crossmetric.learners.ldml.pair_log_likelihood`, the former
    default) picked k = 1 and k = 8: the likelihood also punishes the over-confident
    probabilities of local metrics, which do not hurt the ranking
    (``benchmarks/bench_clml.py``). When the AUC saturates (1.0 for several k) the smallest
    such k of the grid wins. Every other parameter is CLML's. It gives what the recipe::

        from crossmetric.pairs import group_pair_folds
        folds = group_pair_folds(pairs[:, 0], pairs[:, 1], 3, y=y)
        GridSearchCV(CLML(preprocessor=X), {"n_clusters": [1, 2, 4, 8, 16, 32]}, cv=folds,
                     scoring="roc_auc").fit(pairs, y)

    packaged as a pair learner (``transform``, ``pair_distance``, retrieval ...).

    Parameters
    ----------
    n_clusters_grid : sequence of int, default=(1, 2, 4, 8, 16, 32)
        Candidate values of ``k``.
    cv : int or iterable of (train, validation) pair indices, default=3
        An int: that many sample-disjoint folds (see above; seeded by ``random_state``).
        Anything else is read as ``GridSearchCV`` reads its ``cv``
        (:func:`sklearn.model_selection.check_cv`) -- it must then keep the samples of
        validation pairs out of the training pairs itself.
    scoring : str or callable, optional
        A scikit-learn scorer or its name (:func:`sklearn.metrics.check_scoring`), called on
        the validation pairs; ``None``: ``"roc_auc"`` (the pair ROC AUC);
        :func:`~crossmetric.learners.ldml.pair_log_likelihood` scores LDML's held-out
        log-likelihood.
    n_jobs : int, optional
        Parallel fits of the search (joblib).
    **CLML parameters
        See :class:`CLML` (``n_clusters`` is ignored: the grid decides).

    Attributes
    ----------
    best_n_clusters_ : int
    cv_results_ : dict
        The entries of ``GridSearchCV.cv_results_``: ``mean_fit_time``, ``std_fit_time``,
        ``mean_score_time``, ``std_score_time``, ``param_n_clusters``, ``params``,
        ``split{i}_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``.
    best_estimator_ : CLML
        The refitted model (a complete CLML whose preprocessor holds the distinct training
        samples); its fitted attributes are copied onto this object.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import CLMLCV, make_pairs
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(6), 5)
    >>> X = rng.normal(size=(6, 4))[labels] + 0.3 * rng.normal(size=(30, 4))
    >>> pairs, y = make_pairs(labels, random_state=0)
    >>> model = CLMLCV((1, 2), n_components=2, cv=2, random_state=0,
    ...                preprocessor=X).fit(pairs, y)
    >>> model.best_n_clusters_ in (1, 2)
    True
    """

    def __init__(self, n_clusters_grid=(1, 2, 4, 8, 16, 32), *, n_components: int = 32,
                 cv=3, scoring=None, n_jobs=None, alpha: float = 1e-4,
                 covariance_type: str = "diag", gmm_pca_components="auto",
                 min_assignment: float = 0.01, max_assignments: int | None = 3,
                 reg_covar: float = 1e-6, init="auto", max_iter: int = 1000,
                 tol: float = 1e-5, verbose: int = 0, random_state=None, preprocessor=None):
        self.n_clusters_grid = n_clusters_grid
        self.n_components = n_components
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.alpha = alpha
        self.covariance_type = covariance_type
        self.gmm_pca_components = gmm_pca_components
        self.min_assignment = min_assignment
        self.max_assignments = max_assignments
        self.reg_covar = reg_covar
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        grid = list(np.atleast_1d(self.n_clusters_grid))
        if not grid or not all(isinstance(g, numbers.Integral) and g >= 1 for g in grid):
            raise ValueError(
                f"n_clusters_grid must be a non-empty sequence of integers >= 1, "
                f"got {self.n_clusters_grid!r}."
            )
        Xu, i, j = data.X, data.ix, data.iy
        params = {k: v for k, v in self.get_params(deep=False).items()
                  if k not in ("n_clusters_grid", "cv", "scoring", "n_jobs", "preprocessor")}
        base = CLML(preprocessor=Xu, **params)
        pairs = np.column_stack([i, j])
        cv = self.cv
        if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
            # folds of samples, not of pairs: a validation pair never shares a sample with a
            # training pair (splitting pairs let the most overfitting k win)
            cv = group_pair_folds(i, j, int(cv), random_state=self.random_state, y=y)
        # the folds and scorer GridSearchCV would use; the scan is the one selection routine
        splits = check_cv(cv, y, classifier=is_classifier(base)).split(pairs, y)
        folds = [(pairs[tr], y[tr], pairs[va], y[va]) for tr, va in splits]
        scorer = check_scoring(base, "roc_auc" if self.scoring is None else self.scoring)
        # unseeded: every candidate gets the same drawn seed, so they differ only in k
        seed = (None if self.random_state is not None
                else int(check_random_state(None).randint(2**31 - 1)))
        grid = [{"n_clusters": int(g)} for g in grid]
        res = scan_candidates(grid, len(folds),
                              partial(_fold_score, base=base, folds=folds, scorer=scorer,
                                      seed=seed),
                              n_jobs=self.n_jobs, on_error="raise")
        self.cv_results_ = res.cv_results()
        self.best_n_clusters_ = int(res.params[res.best_index]["n_clusters"])
        best = clone(base).set_params(n_clusters=self.best_n_clusters_).fit(pairs, y)
        self.best_estimator_ = best
        for name in ("pca_", "gmm_", "local_components_", "local_offsets_", "bias_",
                     "input_scale_", "n_iter_", "loss_curve_"):
            setattr(self, name, getattr(best, name))
