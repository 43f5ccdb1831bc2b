"""Pairwise Constrained Component Analysis (Mignon & Jurie, CVPR 2012).

A low-rank projection ``L`` (k × d) learned from sparse same / different pairs so that
``D²(x, x') = ‖L (x − x')‖²`` (eq. 1) falls below 1 for same pairs and above 1 for different
ones, by minimising the generalized logistic loss (eq. 2). Kernel PCCA (§3.3) writes
``L = A Xᵀ`` so that ``D² = ‖A (k_i − k_j)‖²`` (eq. 5) and descends along the
K⁻¹-preconditioned gradient (eq. 9-10).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import LinearSingleModalMixin
from crossmetric._solvers.towers import embed_tower, fit_logistic_towers, store_towers
from crossmetric.kernels import check_kernel
from crossmetric.pairs._pair_data import PairData

__all__ = ["PCCA"]


class PCCA(LinearSingleModalMixin, BaseEstimator):
    """Pairwise Constrained Component Analysis, linear and kernel.

    Minimises ``mean_n ℓ_β(y_n (‖L (x_{i_n} − x_{j_n})‖² − 1))`` (eq. 2, the papers' sum
    divided by the number of pairs) with ``ℓ_β(x) = log(1 + e^{βx}) / β``.

    With few identities (50-500) the objective, which has no regulariser but the rank, is
    minimised far past the best held-out point: choose ``max_iter`` (and ``n_components``) on
    the training identities -- ``crossmetric benchmark --tune paper --tune-scoring rank1``
    searches the registry's paper grid, iteration count first
    (:func:`crossmetric.protocols.model_selection.search_stages`). On VIPeR (316 training persons,
    n⁻ = 10, 3 splits) linear PCCA-sqrt gave 13.3 % rank-1 at L-BFGS convergence and 19.7 %
    after 20 iterations (:mod:`crossmetric.reproduce`, which chooses the count per split).
    Few identities, without a search: ``early_stopping=True`` with ``n_negatives`` ≥ 10 in
    the pairs (it holds out whole identities; with 1 negative per positive its validation
    set has almost no negatives). Measured, rank-1 / mAP %: PKU-Sketch (150 training persons,
    LTP, centred PCA-64, 3 splits) 16.0 / 21.2 → 18.8 / 23.2; VIPeR camera A ↔ B (316,
    √StripHistograms PCA-64, 2 splits) 17.2 / 31.1 → 19.3 / 31.8. It is not the default: on
    digits instance pairs it lowered the held-out AUC (``early_stopping`` below), and with
    fewer than about 20 identities the held-out tenth is one or two identities.

    Parameters
    ----------
    n_components : int or None, default=40
        Dimension ``d'`` of the learned space (the paper's default, §4.1). At most the number of
        features (linear) or of distinct training samples (kernel). ``None``: full rank -- as
        many as the features, or for a linear tower on views wider than the training samples
        their span (:mod:`crossmetric._solvers.span`) -- so that the untrained distance is a
        point of the model (the start ``init="identity"``).
    beta : float, default=3.0
        Sharpness β of the generalized logistic loss (the paper's default).
    kernel : {"linear", "rbf", "chi2", "chi2_rbf"}, default="linear"
        ``"linear"`` learns ``L`` in the input space; any other value learns kernel PCCA
        (§3.3) over the samples of the training pairs.
    gamma : float, optional
        Kernel bandwidth for ``rbf`` / ``chi2_rbf``; ``None`` = ``1 / mean d²`` of the training
        samples (see :mod:`crossmetric.kernels`).
    solver : {"auto", "lbfgs", "gd"}, default="auto"
        ``"gd"`` is the paper's gradient descent with (backtracking) line search; for kernels
        it uses the K⁻¹-preconditioned direction of eq. (9)-(10) when ``preconditioned``.
        ``"lbfgs"`` is scipy's L-BFGS on the plain gradient. ``"auto"`` picks L-BFGS for the
        linear model (it reaches the same optimum in far fewer passes over the pairs: the
        problem is smooth and small) and preconditioned GD for kernels (the paper's method; its
        direction needs no product with K). ``"minibatch"`` (Adam) / ``"sgd"``: stochastic
        solvers reading ``batch_size`` pairs at a time, only the samples those pairs use, for
        pairs and samples that do not fit in memory (``preprocessor`` may be a memmap); linear
        or Nyström towers (:mod:`crossmetric._solvers.stochastic`); ``max_iter`` counts epochs.
    preconditioned : bool, default=True
        Kernel PCCA with ``solver="gd"`` only: descend along ``∇_A K⁻¹`` (eq. 9-10), where each
        pair touches two columns. ``False`` descends along the plain gradient ``∇_A`` (the
        paper's Fig. 3 comparison).
    init : {"auto", "identity", "kissme", "pca", "random"}, default="auto"
        Starting point, rescaled so that the mean training ``D²`` is 1: ``"pca"`` (PCA axes,
        or kernel-PCA coordinates) is the paper's; ``"identity"`` (linear kernel) the first
        ``n_components`` input coordinates -- the untrained distance when ``n_components`` ≥
        the number of features; ``"kissme"`` (linear kernel) the closed form of one metric,
        KISSME's ``Σ_S⁻¹ − Σ_D⁻¹`` of the training pairs in its top ``n_components``
        eigenpairs (:func:`crossmetric._solvers.starting.kissme_start`); ``"random"`` Gaussian
        rows. ``"auto"``: the untrained distance, KISSME's (linear kernel) and the paper's
        start, scored on the held-out identities of
        ``early_stopping``; the better is trained from, and kept if training does not beat it
        (``init_`` says which). ``init="pca", early_stopping=False`` is the paper's run.
    max_iter : int, default=1000
    tol : float, default=1e-4
        Stop on a plateau: when the objective has decreased by less than ``tol`` relative to
        its value per iteration, over the last 10 iterations.
        The default stops when 10 iterations together lower the objective by less than
        0.1 %: on digits (1,600 objects) 1e-5 took up to 3× the iterations for the same
        held-out AUC (PCCA 0.9750 vs 0.9748, CMML 0.9591 vs 0.9581, LDML 0.9575 vs 0.9576).
    early_stopping : {"auto", True, False}, default="auto"
        Hold out ``validation_fraction`` of the training samples, whole identities (the connected
        components of the positive pairs), and score the start and every iteration on them: the
        rank-1 rate, then the ROC AUC, over all cross distances of the held-out samples (see
        :mod:`crossmetric._solvers.early_stopping`). The best of these -- the start
        included -- is kept, so that the fitted model is never worse on held-out identities than
        where it started; training stops once neither that score nor the model's loss on the
        held-out samples has improved for ``n_iter_no_change`` iterations. The model is learned
        from the remaining pairs. ``"auto"``: on with 30 to 999 training identities (where the
        objective overfits), off with fewer (classes, which test pairs share) or more.
        ``False``: the paper's plain run. The guard is the library's, not the paper's.
    validation_fraction : float in (0, 1), default=0.2
        Share of the training samples (whole identities) held out by ``early_stopping``.
    n_iter_no_change : int, default=10
        Patience of early stopping, in iterations.
    random_state : int, RandomState instance or None
        Seeds the initialisation and the validation split.
    verbose : int, default=0
        Print one line per iteration (iteration, objective, step, time).
    preprocessor : array-like or tuple (X, Y), optional
        Samples that integer index pairs refer to.
    kernel_approximation : {None, "nystroem"}, default=None
        ``"nystroem"``: replace the n × n kernel matrix by the Nyström features of
        ``n_landmarks`` random training samples (:class:`~crossmetric.kernels.NystroemMap`)
        and learn the *linear* tower on them (solver as for ``kernel="linear"``). Memory
        O(n·m) instead of O(n²); use it past a few thousand samples. Ignored for
        ``kernel="linear"``.
    n_landmarks : int, default=1000
    batch_size : int, default=4096
        ``solver="minibatch"`` / ``"sgd"`` only: pairs per block.
    learning_rate : float, default=0.3
        ``solver="minibatch"`` / ``"sgd"`` only: first step relative to the weights' size,
        divided by 5 at each plateau (rule in :mod:`crossmetric._solvers.stochastic`).
        Landmarks m of the Nyström map.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        ``L`` (linear kernel only).
    dual_coef_ : ndarray of shape (n_components, n_train)
        ``A`` of ``L = A Xᵀ`` (kernels only).
    kernel_map_ : KernelMap
        The training samples and resolved bandwidth (exact kernels only).
    feature_map_ : NystroemMap
        ``kernel_approximation="nystroem"`` only; ``feature_components_`` (n_components, m)
        is then the linear tower on its features.
    n_iter_ : int
    loss_curve_ : list of float
        Objective after each iteration.
    validation_scores_ : list of float or None
        Validation rank-1 on the held-out identities after each iteration, entry 0 at the
        start (``early_stopping``); ``validation_aucs_`` their ROC AUC.
    validation_loss_curve_ : list of float or None
        Loss on the validation pairs after each iteration (``early_stopping``).
    best_iteration_ : int or None
        Iteration whose weights are kept (``early_stopping``; 0: the start).
    init_ : str
        The start trained from (``init``, or the one ``"auto"`` chose).
    threshold_ : float
        1.0: the threshold of the loss (pairs with ``D² <= 1`` are predicted *same*), which
        generalises better than a cut calibrated on training pairs that the model separates.
        :meth:`calibrate_threshold` recalibrates it on (held-out) pairs.

    Notes
    -----
    One objective evaluation costs O(n · d · k) for the embeddings plus O(n_pairs · k) for the
    pairs (n samples in the pairs); the gradient adds one O(n · d · k) product. Kernel PCCA with
    preconditioning costs O(n² · k) per iteration (the embedding update ``K Aᵀ``) and
    O(n_pairs · k) per line-search trial.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from crossmetric import PCCA, make_pairs
    >>> X, labels = load_digits(return_X_y=True)
    >>> pairs, y = make_pairs(labels, max_positives=1000, random_state=0)
    >>> model = PCCA(n_components=16, preprocessor=X / 16, random_state=0).fit(pairs, y)
    >>> model.transform(X[:3] / 16).shape
    (3, 16)
    """

    #: linear towers work in the span of wide views themselves (:mod:`crossmetric._solvers.
    #: span`): the protocols' ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True
    #: the paper's start (``init="auto"`` scores it beside the library's starts)
    _paper_init = "pca"
    #: ``max_iter`` only caps the solver's iterations (L-BFGS, gradient descent or epochs): a
    #: fit that stops before it is the fit of every larger ``max_iter`` (a selection of
    #: ``max_iter`` scores those from it: ``memo`` of
    #: :func:`crossmetric.protocols.model_selection.search_params`)
    _max_iter_only_caps = True

    def __init__(self, n_components: int | None = 40, *, beta: float = 3.0, kernel: str = "linear",
                 gamma: float | None = None, solver: str = "auto", preconditioned: bool = True,
                 init: str = "auto", max_iter: int = 1000, tol: float = 1e-4,
                 early_stopping="auto", validation_fraction: float = 0.2,
                 n_iter_no_change: int = 10, random_state=None, verbose: int = 0,
                 preprocessor=None, kernel_approximation=None, n_landmarks: int = 1000,
                 batch_size: int = 4096, learning_rate: float = 0.3):
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.kernel_approximation = kernel_approximation
        self.n_landmarks = n_landmarks
        self.n_components = n_components
        self.beta = beta
        self.kernel = kernel
        self.gamma = gamma
        self.solver = solver
        self.preconditioned = preconditioned
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        Ws, maps = fit_logistic_towers(self, data, y, kernels=(check_kernel(self.kernel),),
                                       gammas=(self.gamma,), side_names=("X",), name="PCCA")
        store_towers(self, Ws, maps, ("",))

    def _fit_threshold(self, data: PairData, y: np.ndarray) -> float:
        """``D² = 1``, the threshold of the loss (eq. 2): see ``threshold_``."""
        return 1.0

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return embed_tower(self, X, "")
