"""DeepGSM: joint feature and generalized-similarity learning (Lin et al., §4), as a pair learner.

The estimator takes raw images of two domains -- through the pair API (index pairs with
``preprocessor=(images_x, images_y)``, or row-aligned image arrays ``(Xp, Yp)``) or with
identity labels (:meth:`DeepGSM.fit_identities`, which also takes lists of image files that
are decoded while training) -- and trains the network of :mod:`crossmetric.deep.networks`
with Algorithm 2 of the paper: rounds of the cross-domain batch generator (§4.2, an
epoch-based torch ``Sampler`` here), the GSM hinge (eq. 6) in the sample-based form
(eq. 14-18) plus ``λ‖W‖² + μ‖Φ‖²`` (eq. 7), and gradient steps (eq. 16; with momentum and a
learning-rate schedule here).

Images: ``(n, h, w)`` grey or ``(n, h, w, c)`` with any number of channels (each domain its
own; ``uint8`` is scaled to [0, 1], float used as given).

Few identities (50-500, one or two images each): the class defaults and the registry's setting
(a 64-unit network for 16 × 16 digits) do not learn photos -- 1.2 % rank-1 on VIPeR
(``docs/guide/which_method_when.md``). Start from the recipe chosen on PKU-Sketch's training
persons, :data:`crossmetric.reproduce.pku.PKU_DEEPGSM` (128 units, rounds of 30 persons, Adam
1e-3 with a cosine schedule, weight decay and μ 5e-4, ``augment="reid"``, ``test_flip=True``,
1,500 rounds), average two seeds (:class:`crossmetric.SeedEnsemble`: 14.1 % rank-1 against 10.9
% for one seed over 10 PKU splits), and compare with GSM on a descriptor, which needs no
images; from scratch on 180 CUFS persons it reached 21.8 % (``docs/measurements.md``,
``gsm-cufs``).

Identities for the batch generator: with ``fit(pairs, y, groups=(ids_x, ids_y))`` they are
given; otherwise images joined by a chain of positive pairs share an identity (connected
components) and every other combination is a negative (the closed-world assumption of
identity-labelled data, where the paper's n_x · n_y pairs per batch come from). When the
positive pairs list only part of the same-identity pairs of those components, the components
may be fragments of coarser classes and a ``UserWarning`` says so (pass ``groups``).

This module is the estimator's API: its parameters and their documentation. Its methods come
from three mixins, one job each: :mod:`~crossmetric.deep.fitting` (``fit``,
``fit_identities``, the training run and the fitted attributes),
:mod:`~crossmetric.deep.embedding` (``transform_*``, ``features_*``, S̃) and
:mod:`~crossmetric.deep.saving` (TorchScript export, pickling). The work is done by
:mod:`~crossmetric.deep.params` (validation, device), :mod:`~crossmetric.deep.inputs` (pairs →
images and identities, the rounds), :mod:`~crossmetric.deep.training` (the training loop),
:mod:`~crossmetric.deep.checkpoint`, :mod:`~crossmetric.deep.build` (the network) and
:mod:`~crossmetric.deep.inference` (embedding in batches).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import CrossModalMixin
from crossmetric.deep.embedding import EmbeddingMixin
from crossmetric.deep.fitting import FittingMixin
from crossmetric.deep.inputs import check_images
from crossmetric.deep.saving import SavingMixin

__all__ = ["DeepGSM"]


class DeepGSM(FittingMixin, EmbeddingMixin, SavingMixin, CrossModalMixin, BaseEstimator):
    """Deep generalized similarity model: CNN features and the measure of eq. (1), end to end.

    ``pair_distance`` returns S̃(x, y) of eq. (3) with the paper's sign (trained towards
    ``S̃ < −1`` for the same identity and ``S̃ ≥ 1`` otherwise, eq. 5): smaller = more alike.
    ``transform_x`` / ``transform_y`` return the similarity components x̃ / ỹ (eq. 10), shape
    ``(n, 2r + 1)``, so a gallery is embedded once and matched with ``cross_distance``;
    :meth:`export_torchscript` saves a tower that does the same without crossmetric.

    Parameters
    ----------
    input_shape : tuple (h, w) or None, default=None
        Image size; ``None`` takes it from the training images (the first file of a list).
        Both domains must share it (files are resized to it; arrays must have it).
        It scales the architecture (see :mod:`crossmetric.deep.networks`): the paper's strides
        for sides ≥ 48 pixels, size-preserving convolutions and 2 × 2 pooling below.
    hidden_units : int, default=400
        Units of the two fully connected layers of the shared sub-network (paper: 400); also
        r, the size of each similarity block.
    structure : str, default="generalized"
        Similarity sub-network: ``"generalized"``, ``"linear"``, ``"ladf"``,
        ``"joint_bayesian"``, ``"euclidean"`` (Baseline-1) or ``"inner_product"``
        (Baseline-2), as for :class:`crossmetric.GSM` (§5.5 (ii)).
    f : float, default=-1.9
        The constant f of eq. (1), fixed as in the paper (§4.1).
    learn_f : bool, default=False
        Learn f instead.
    batch_mode : {"sample", "pair"}, default="sample"
        ``"sample"``: each round's K̂(Ô₁ + Ô₂) images go through the network once and all
        their K̂Ô₁ × K̂Ô₂ pairs enter the loss (eq. 14-18). ``"pair"``: the sample-pair-based
        form, ``n_pairs`` explicit pairs whose images are fed once per pair (§5.5 comparison).
    n_identities : int, default=32
        K̂, identities per round of the batch generator (paper: 30 on CUFS, 60 on CUHK03).
    n_images_x, n_images_y : int, default=1
        Ô₁, Ô₂: images of each identity per round from the first / second domain.
    n_pairs : int or None, default=None
        Pairs per round in ``"pair"`` mode (half positive); ``None`` feeds as many images as a
        sample-based round, ``n_pairs = K̂(Ô₁ + Ô₂) / 2``.
    max_iter : int, default=2000
        Training iterations (rounds).
    max_time : float or None, default=None
        Stop after this many seconds of training (checked after each iteration).
    learning_rate : float, default=0.05
        Initial step size α of eq. (16).
    optimizer : {"sgd", "adam"}, default="sgd"
        SGD with ``momentum``, or Adam.
    momentum : float, default=0.9
    lr_schedule : {"constant", "step", "cosine", "plateau"}, default="cosine"
        ``step`` divides the rate by 10 after 1/2 and 3/4 of ``max_iter``; ``cosine`` anneals
        it to 0 over ``max_iter`` (both are training budgets: they rarely converge before
        ``max_iter``); ``plateau`` divides it by 10 whenever a window of ``n_iter_no_change``
        iterations brings no improvement of ``tol`` and stops, converged, when a
        window at ``learning_rate / 100`` still brings none (:mod:`crossmetric.deep.schedule`)
        -- the schedule to use to train until the objective stops decreasing.
    weight_decay : float, default=5e-4
        λ of eq. (7): penalty ``λ‖W‖²`` on the weights of the feature sub-networks.
    mu : float, default=5e-4
        μ of eq. (7): penalty ``μ‖Φ‖²`` on the similarity components (f excluded).
    init : {"default", "paper"}, default="default"
        ``"paper"``: Gaussians of standard deviation 0.01 (convolutions) and 0.001 (fully
        connected), as in §5; ``"default"``: He-uniform feature layers and N(0, 1/r)
        similarity components, which learn much faster from scratch on a small CPU budget.
    augment : int, "reid", callable or None, default=1
        Training-time augmentation (:mod:`crossmetric.deep.augment`): an int ``a`` shifts
        each image by up to ``a`` pixels (zero padding, random crop) -- the paper's "cropped
        ... with a small random perturbation"; ``"reid"`` is the re-id recipe (resize, pad and
        random crop, horizontal flip, colour jitter, random erasing); a callable is applied to
        each ``(c, h, w)`` float tensor (a torchvision ``v2`` pipeline works); 0 / None: none.
    test_flip : bool, default=False
        Test-time flipping, as re-id evaluation commonly uses it: every embedding (x̃, ỹ,
        ``features_*``, the exported towers, the validation of ``early_stopping``) is computed
        from the mean of the deep features of the image and of its horizontal mirror. x̃ is
        linear in the features, so this is also the mean of the two x̃. It changes no
        training step (a fitted model can switch it with ``set_params``).
    hard_negatives : int or None, default=None
        ``None``: every pair of the all-pairs batch enters the loss. An int ``k``: all
        positive pairs, and for every image only its ``k`` hardest negatives (smallest S̃,
        i.e. most violating ``S̃ ≥ 1``), the union over both domains' images; positives and
        the kept negatives are re-balanced to half the weight each.
    average_from : float in [0, 1) or None, default=None
        Stochastic weight averaging (:mod:`crossmetric.deep.averaging`): the trained model is
        the mean of the weights after every round from ``floor(average_from · max_iter)`` on
        (``0.5``: the second half of the schedule) instead of the last round's weights. No
        training step changes. With ``early_stopping`` the validation scores the weights
        training would return (the mean once it has begun). A run stopped before the first
        averaged round returns the last weights (``n_averaged_ = 0``).
    early_stopping : bool or "auto", default=False
        Hold out ``validation_fraction`` of the identities; score the initial network and
        every ``validation_every`` iterations on them as every learner's hold-out is scored
        (:mod:`crossmetric._solvers.early_stopping`: rank-1 of first-domain probes and AUC;
        a check replaces the start only when it beats it beyond the hold-out's noise); return
        the best, stopping after ``patience`` checks without progress.
        ``"auto"``: on with 30 to 999 identities in both domains, the learners' rule. ``False``
        (the paper's plain run) is the default: from scratch on a few hundred identities the
        hold-out cost rank-1 (CUFS, 292 training persons: 16.8 % plain, 8.0 % held out).
    validation_fraction : float, default=0.2
    validation_every : int or None, default=None
        ``None``: once per epoch of the batch generator.
    patience : int, default=5
    tol : float or None, default=1e-4
        Convergence: with a fixed schedule training stops when the mean batch objective of
        the last ``n_iter_no_change`` iterations is not ``tol`` below that of the window
        before; with ``"plateau"``, see ``lr_schedule``. ``None`` disables the test (and
        the warning). (A single batch with zero hinge does not stop training: the next
        round's identities differ.)
    n_iter_no_change : int, default=200
    backbone : torch.nn.Module, (Module, Module), str or None, default=None
        ``None``: the paper's network (:mod:`crossmetric.deep.networks`). A module: used for
        both domains in place of the domain-specific and shared sub-networks (its output is
        flattened and L2-normalised and feeds the similarity sub-network; ``hidden_units`` is
        then its output width). A pair: one module per domain (outputs of one width); a
        submodule both contain (a shared trunk after domain-specific stems, as the paper's
        g₁, g₂ and f) stays one module, trained on both domains' images. A file
        path: a state dict (``torch.save(model.net_.state_dict(), path)``) whose feature
        layers start the paper's network, and whose GSM head (the similarity sub-network)
        starts it too when the file holds one of this ``structure`` and width (else the
        head is initialised anew, with a one-line warning when the file's head does not fit).
        Any other string: an architecture name, torchvision's (``"resnet18"``, ``"vit_b_16"``,
        ...) or timm's when installed, randomly initialised from ``random_state`` or loaded
        from ``weights``; its classifier's last linear layer is dropped, so its pooled
        features feed the similarity sub-network, and grey images are repeated to its three
        channels (:func:`crossmetric.deep.backbones.build_backbone`).
        Modules are copied, never trained in place; nothing is downloaded.
    weights : path or None, default=None
        State dict for a ``backbone`` given by name or as a module, read with
        ``torch.load(weights_only=True)`` (:func:`crossmetric.deep.backbones.load_weights`):
        a file that does not fit the architecture is a one-line error naming the file and
        the first mismatched keys.
    descriptor : transformer or None, default=None
        A fixed image descriptor beside the network (ours, not the paper's), e.g.
        :class:`crossmetric.features.HOG`: S̃ adds ``s²‖u(x) − u(y)‖²`` of its rows ``u``
        (``s`` learnt) and training starts at that untrained distance instead of a random
        network (:mod:`crossmetric.deep.descriptor`). Image arrays, one process, no export.
    amp : bool or "auto", default="auto"
        Automatic mixed precision (float16 ``torch.autocast`` with ``GradScaler``). ``"auto"``
        uses it on CUDA devices only; ``True`` on a CPU is an error. The loss is formed in
        float32.
    n_processes : int, default=1
        > 1: data-parallel training with that many local processes (DDP, the loss of the
        whole round; :mod:`crossmetric.deep.distributed`, which says how they start); under
        ``torchrun`` ``fit`` uses the group already initialised.
    num_workers : int, default=0
        ``DataLoader`` worker processes that read (and decode / augment) training images;
        with 0 on a CPU a background thread reads files ahead of the training when it can
        (:mod:`crossmetric.deep.prefetch`).
    image_cache_mb : float, default=1024
        Training images given as files: MiB of decoded images kept in memory per process
        (:mod:`crossmetric.deep.decoded`), so that each file is decoded once; 0 decodes
        every draw. Changes no result.
    device : {"auto", "cpu", "cuda", ...}, default="auto"
        ``"auto"`` uses CUDA when ``torch.cuda.is_available()``, else the CPU. Results are
        bit-for-bit reproducible for a fixed ``random_state`` on the CPU (deterministic
        algorithms are switched on during ``fit``), not necessarily on a GPU.
    checkpoint_path : str or None, default=None
        File to save the training state to every ``checkpoint_every`` iterations and at the end
        (network, optimiser, schedule, random states, loss curve).
    checkpoint_every : int, default=100
    resume : bool, default=False
        When ``checkpoint_path`` exists, continue training from it up to ``max_iter``; a
        checkpoint whose settings (every parameter that changes the run) or training data
        differ raises ``ValueError``. Nothing from the file runs
        (:mod:`crossmetric.deep.checkpoint`).
    progress : bool, default=False
        Show a tqdm progress bar.
    eval_batch_size : int, default=512
        Images per forward pass when embedding (``transform_*``, ``pair_distance``, ...).
    random_state : int, RandomState instance or None
        Seeds the initialisation, the batch generator and the augmentation. Round ``t`` and
        its augmentation depend only on the seed and ``t`` (not on workers or processes).
    verbose : int, default=0
        When > 0, print a line (iteration, mean objective over the last
        ``n_iter_no_change`` iterations, learning rate, seconds) after the first iteration and
        every ``checkpoint_every`` iterations.
    preprocessor : tuple (images_x, images_y), optional
        Images that integer index pairs refer to.

    Attributes
    ----------
    net_ : crossmetric.deep.networks.GSMNet
        The trained network (in eval mode).
    f_ : float
        The constant of S̃ (including the offsets of the affine baselines).
    loss_curve_ : list of float
        Batch objective (hinge + penalties) of every iteration.
    n_iter_ : int
        Iterations run in total (including those before a resume).
    device_ : torch.device
    input_shape_ : tuple (h, w)
    n_identities_ : int
        Training identities (with images in both domains; without the held-out ones).
    channels_ : tuple (c_x, c_y)
    stop_reason_ : {"max_iter", "tol", "max_time", "early_stopping"}
    validation_scores_ : list of float
        Validation rank-1 of every check, the initial network's first (when identities were
        held out, see ``early_stopping``; else empty): as in every
        crossmetric learner, one float per check, higher is better, the quantity whose best
        check is kept.
    validation_iterations_ : list of int
        The training round of each check (0: the initial network).
    best_iteration_ : int or None
    init_ : {"descriptor", "random"}
        The start trained from: the descriptor's distance or a random network.
    descriptor_, descriptor_width_ : transformer or None, int
        The fitted ``descriptor`` and its number of features (``None``, 0 without one).
    n_averaged_ : int
        Rounds whose weights make up the model (``average_from``); 0 without averaging.
    train_time_ : float
        Seconds spent in the training loop by the last ``fit``.
    threshold_ : float
        Decision threshold on S̃ calibrated on the training pairs.

    Examples
    --------
    >>> from crossmetric import DeepGSM, make_pairs
    >>> from crossmetric.datasets import load_digits_views
    >>> data = load_digits_views()
    >>> X, Y, labels = data.images_x[:100], data.images_y[:100], data.labels[:100]
    >>> pairs, y = make_pairs(labels, labels, max_positives=200, random_state=0)
    >>> # a fixed budget of 10 rounds: tol=None switches the convergence test off
    >>> model = DeepGSM(hidden_units=16, n_identities=10, n_images_x=2, n_images_y=2,
    ...                 max_iter=10, tol=None, device="cpu", random_state=0,
    ...                 preprocessor=(X, Y))
    >>> model.fit(pairs, y, groups=(labels, labels)).cross_distance(X[:2], Y[:3]).shape
    (2, 3)
    """

    _sample_ndim = 2

    def __init__(self, input_shape: tuple[int, int] | None = None, *, hidden_units: int = 400,
                 structure: str = "generalized", f: float = -1.9, learn_f: bool = False,
                 batch_mode: str = "sample", n_identities: int = 32, n_images_x: int = 1,
                 n_images_y: int = 1, n_pairs: int | None = None, max_iter: int = 2000,
                 max_time: float | None = None, learning_rate: float = 0.05,
                 optimizer: str = "sgd", momentum: float = 0.9, lr_schedule: str = "cosine",
                 weight_decay: float = 5e-4, mu: float = 5e-4, init: str = "default",
                 augment=1, test_flip: bool = False, hard_negatives: int | None = None,
                 average_from: float | None = None, early_stopping: bool | str = False,
                 validation_fraction: float = 0.2, validation_every: int | None = None,
                 patience: int = 5, tol: float | None = 1e-4, n_iter_no_change: int = 200,
                 backbone=None, weights=None, descriptor=None, amp="auto",
                 n_processes: int = 1,
                 num_workers: int = 0, image_cache_mb: float = 1024,
                 device: str = "auto", checkpoint_path: str | None = None,
                 checkpoint_every: int = 100, resume: bool = False, progress: bool = False,
                 eval_batch_size: int = 512, random_state=None, verbose: int = 0,
                 preprocessor=None):
        self.input_shape = input_shape
        self.hidden_units = hidden_units
        self.structure = structure
        self.f = f
        self.learn_f = learn_f
        self.batch_mode = batch_mode
        self.n_identities = n_identities
        self.n_images_x = n_images_x
        self.n_images_y = n_images_y
        self.n_pairs = n_pairs
        self.max_iter = max_iter
        self.max_time = max_time
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.lr_schedule = lr_schedule
        self.weight_decay = weight_decay
        self.mu = mu
        self.init = init
        self.augment = augment
        self.test_flip = test_flip
        self.hard_negatives = hard_negatives
        self.average_from = average_from
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.validation_every = validation_every
        self.patience = patience
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.backbone = backbone
        self.weights = weights
        self.descriptor = descriptor
        self.amp = amp
        self.n_processes = n_processes
        self.num_workers = num_workers
        self.image_cache_mb = image_cache_mb
        self.device = device
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every
        self.resume = resume
        self.progress = progress
        self.eval_batch_size = eval_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------------- input
    def _check_samples(self, A, name: str, side: str | None = None) -> np.ndarray:
        """Images ``(n, h, w)`` or ``(n, h, w, c)``; uint8 kept, other types as float."""
        arr = check_images(A, name)
        if side is not None:
            self._check_fitted_shape(arr, name, side)
        return arr

