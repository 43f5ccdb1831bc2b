"""Cross Modal Metric Learning (Mignon & Jurie, ACCV 2012).

Two projections ``A`` (k × d_x) and ``B`` (k × d_y) map each modality into a common space where
``D²(x, y) = ‖A x − B y‖²`` (eq. 1) is below 1 for matching pairs and above 1 otherwise, learned
with the generalized logistic loss (eq. 2-4). Kernel CMML (§3.2) writes ``A = Â Xᵀ``,
``B = B̂ Yᵀ`` (eq. 9), one kernel per modality, and descends along the K⁻¹-preconditioned
gradient (eq. 12), where a pair changes one column of ``Â`` and one of ``B̂``.

With ``X = Y`` and ``A = B`` the objective is PCCA's (tested).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import CrossModalMixin
from crossmetric._solvers.towers import embed_tower, fit_logistic_towers, store_towers
from crossmetric._utils.checks import per_modality
from crossmetric.kernels import check_kernel
from crossmetric.pairs._pair_data import PairData

__all__ = ["CMML"]


class CMML(CrossModalMixin, BaseEstimator):
    """Cross Modal Metric Learning, linear and kernel.

    Minimises ``mean_n ℓ_β(l_n (‖A x_{i_n} − B y_{j_n}‖² − 1))`` (eq. 4, the paper's sum divided
    by the number of pairs).

    With few identities (50-500) the unregularised objective overfits: on VIPeR (316
    training persons, PCA-64 views) training rank-1 reaches 75 % against 14.6 % on test
    persons. Choose ``max_iter`` and ``n_components`` on the training identities (``--tune
    paper --tune-scoring rank1``: iteration count, then dimension): on CUFS (180 training
    persons, dense SIFT + PCA-100) that took rank-1 from 66.4 % to 81.9 % (20 iterations).
    The paper also reports ``n⁻ = 1`` negative per positive as its best setting (Figs. 4, 7).
    Few identities, without a search: ``early_stopping=True`` with ``n_negatives`` ≥ 10 (whole
    identities held out). Measured, rank-1 / mAP %: PKU-Sketch (150 training persons, LTP,
    centred PCA-64, 3 splits) 9.7 / 15.8 → 13.9 / 18.9 (``max_iter=20``: 14.6 / 19.8); VIPeR
    camera A ↔ B (316, 2 splits) unchanged, 14.6 / 27.5 → 14.4 / 27.7. Not the default, for
    the reasons given under :class:`~crossmetric.PCCA`.

    Parameters
    ----------
    n_components : int or None, default=30
        Dimension k of the common space (the paper's Table 1 setting). At most
        ``p_x + p_y``, with p the number of features (linear) or of distinct training samples
        (kernel) of each modality. ``None``: full rank -- the narrower view's width, or for
        linear towers on views wider than the training samples the width of their span
        (:mod:`crossmetric._solvers.span`) -- so that the untrained distance of two views of
        one width is a point of the model (the start ``init="identity"``).
    beta : float, default=3.0
        Sharpness β of ℓ_β (the paper's value for all experiments).
    kernel : str or (str, str), default="linear"
        One of ``"linear"``, ``"rbf"``, ``"chi2"``, ``"chi2_rbf"`` for both modalities, or a pair
        ``(kernel_x, kernel_y)``. The paper uses ``chi2_rbf`` for its histograms (§4.1).
    gamma : float or (float, float), optional
        Bandwidths for ``rbf`` / ``chi2_rbf``; ``None`` = ``1 / mean d²`` per modality.
    solver : {"auto", "lbfgs", "gd", "minibatch", "sgd"}, default="auto"
        As in :class:`~crossmetric.PCCA`: ``"auto"`` is L-BFGS when both towers are linear,
        otherwise the paper's gradient descent with line search, preconditioned for kernel
        towers when ``preconditioned``. ``"minibatch"`` / ``"sgd"``: stochastic solvers reading
        ``batch_size`` pairs (and only their samples) at a time, for linear or Nyström towers.
    preconditioned : bool, default=True
        Use eq. (12)'s K⁻¹-preconditioned direction for kernel towers (``solver="gd"``).
    init : {"auto", "identity", "cca", "random", "pca"}, default="auto"
        Starting point, rescaled so that the mean training ``D²`` is 1. ``"random"``
        (Gaussian) is the paper's start; ``"pca"`` starts each tower on its own modality's
        principal axes (or kernel-PCA coordinates), which are not aligned across modalities.
        ``"identity"`` (linear towers) starts both towers on the first ``n_components`` input
        coordinates: for two views in shared coordinates (one descriptor, one PCA fitted on
        both) that is their untrained distance (with ``n_components`` ≥ the views' width,
        exactly). ``"cca"`` (linear towers) starts at the closed form, ridge CCA of the
        positive pairs, its ridge chosen on the held-out identities. ``"kissme"`` (linear
        towers, views of one width) starts both towers at the closed form of one metric on
        ``x − y``, KISSME's ``Σ_S⁻¹ − Σ_D⁻¹`` of the training pairs
        (:func:`crossmetric._solvers.starting.kissme_start`). ``"auto"``: each of these
        that applies (the untrained distance, the CCA closed form, KISSME's, the paper's start,
        in that order: a later one replaces an earlier only beyond the hold-out's noise),
        scored on the held-out identities of ``early_stopping``; the best is trained from, and
        kept if training does not beat it (``init_`` says which). The identity, CCA and KISSME
        starts are the library's, not the paper's; ``init="random", early_stopping=False`` is
        the paper's run.
    max_iter : int, default=1000
    tol : float, default=1e-4
        Stop on a plateau: when the objective has decreased by less than ``tol`` relative to
        its value per iteration, over the last 10 iterations.
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
    random_state : int, RandomState instance or None
        Seeds the initialisation and the validation split.
    verbose : int, default=0
    preprocessor : tuple (X, Y) or array-like, optional
        Samples that integer index pairs refer to (column 0 → rows of X, column 1 → rows of Y).
    kernel_approximation : {None, "nystroem"}, default=None
        ``"nystroem"``: each kernel tower uses the Nyström features of ``n_landmarks`` random
        training samples of its modality (:class:`~crossmetric.kernels.NystroemMap`),
        centred on that modality's training mean (the two maps have no common origin, and a
        tower has no bias to learn one), and learns a *linear* tower on them; O(n·m) memory
        instead of O(n²).
    n_landmarks : int, default=1000
    batch_size : int, default=4096
        ``solver="minibatch"`` / ``"sgd"`` only: pairs per block.
    learning_rate : float, default=0.3
        ``solver="minibatch"`` / ``"sgd"`` only: first step relative to the weights' size,
        divided by 5 at each plateau (rule in :mod:`crossmetric._solvers.stochastic`).
        Landmarks m per Nyström modality.

    Attributes
    ----------
    components_x_, components_y_ : ndarray of shape (n_components, n_features_x / _y)
        ``A`` and ``B`` of a linear tower.
    dual_coef_x_, dual_coef_y_ : ndarray of shape (n_components, n_train_x / _y)
        ``Â`` and ``B̂`` of a kernel tower (eq. 9).
    kernel_map_x_, kernel_map_y_ : KernelMap
        Training samples of a kernel tower.
    feature_map_x_, feature_map_y_ : NystroemMap
        Nyström towers only, with their linear maps ``feature_components_x_`` /
        ``feature_components_y_``.
    n_iter_ : int
    loss_curve_ : list of float
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

    Examples
    --------
    >>> from crossmetric import CMML, make_pairs
    >>> from crossmetric.datasets import load_digits_views
    >>> data = load_digits_views()
    >>> pairs, y = make_pairs(data.labels, data.labels, max_positives=2000, random_state=0)
    >>> model = CMML(n_components=16, preprocessor=(data.X, data.Y), random_state=0)
    >>> model.fit(pairs, y).cross_distance(data.X[:2], data.Y[:3]).shape
    (2, 3)
    """

    #: linear towers work in the span of wide views themselves (:mod:`crossmetric._solvers.
    #: span`): the protocols' ``pca_components="auto"`` leaves their views as they are
    _reduces_to_span = True
    #: the paper's start (``init="auto"`` scores it beside the library's starts)
    _paper_init = "random"
    #: ``max_iter`` only caps the solver's iterations (L-BFGS, gradient descent or epochs): a
    #: fit that stops before it is the fit of every larger ``max_iter`` (a selection of
    #: ``max_iter`` scores those from it: ``memo`` of
    #: :func:`crossmetric.protocols.model_selection.search_params`)
    _max_iter_only_caps = True

    def __init__(self, n_components: int | None = 30, *, beta: float = 3.0, kernel="linear",
                 gamma=None, solver: str = "auto", preconditioned: bool = True,
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
        kernels = tuple(check_kernel(k, "kernel") for k in per_modality(self.kernel, "kernel"))
        Ws, maps = fit_logistic_towers(
            self, data, y, kernels=kernels, gammas=per_modality(self.gamma, "gamma"),
            side_names=("X (first modality)", "Y (second modality)"), name="CMML")
        store_towers(self, Ws, maps, ("_x", "_y"))

    def _fit_threshold(self, data: PairData, y: np.ndarray) -> float:
        """``D² = 1``, the threshold of the loss (eq. 4): see ``threshold_``."""
        return 1.0

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return embed_tower(self, X, "_x")

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return embed_tower(self, Y, "_y")
