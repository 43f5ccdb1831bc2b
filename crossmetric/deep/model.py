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

Identities for the batch generator: with ``fit(pairs, y, groups=(ids_x, ids_y))`` they are
given; otherwise images joined by a chain of positive pairs share an identity (connected
components) and every other combination is a negative (the closed-world assumption of
identity-labelled data, where the paper's n_x · n_y pairs per batch come from). When the
positive pairs list only part of the same-identity pairs of those components, the components
may be fragments of coarser classes and a ``UserWarning`` says so (pass ``groups``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from crossmetric import __version__
from crossmetric._base import CrossModalMixin, PairData
from crossmetric._checks import (
    as_float_array,
    check_positive_int,
    check_positive_scalar,
    user_stacklevel,
)
from crossmetric._gsm_measure import STRUCTURES, gsm_matrix, gsm_rowwise
from crossmetric.deep.augment import make_augmentation
from crossmetric.deep.averaging import WeightAverage, averaging_start
from crossmetric.deep.data import (
    CrossDomainIdentitySampler,
    CrossDomainImages,
    IterationBatches,
    collate_domains,
    fingerprint,
    image_layout,
    is_file_list,
    read_image,
    subset,
    to_chw,
)
from crossmetric.deep.distributed import active_group, free_port, gather_rows, once
from crossmetric.deep.losses import similarity_matrix, similarity_rows
from crossmetric.deep.networks import GSMNet, GSMTower
from crossmetric.deep.sampler import balanced_weights, identities_from_pairs, pair_completeness
from crossmetric.deep.schedule import OPTIMIZERS, SCHEDULES, WindowedConvergence, make_optimizer
from crossmetric.deep.threads import small_net_threads
from crossmetric.persistence import atomic_path

__all__ = ["DeepGSM"]

_BATCH_MODES = ("sample", "pair")
#: training checkpoints (``checkpoint_path``): a ``torch.save`` dict read back with
#: ``torch.load(weights_only=True)``; version 2 added these format keys
CHECKPOINT_FORMAT = "crossmetric-deepgsm-checkpoint"
CHECKPOINT_VERSION = 2
_INITS = ("default", "paper")
#: parameters that do not change what a training run computes (free to differ on resume)
_RUN_ONLY = ("checkpoint_path", "checkpoint_every", "resume", "progress", "verbose",
             "eval_batch_size", "max_time", "device", "n_processes", "num_workers",
             "preprocessor", "test_flip")


@contextlib.contextmanager
def _deterministic(enabled: bool):
    """``torch.use_deterministic_algorithms(True)`` for the duration of a fit (restored after)."""
    if not enabled:
        yield
        return
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def _dedupe(images: np.ndarray, idx: np.ndarray):
    """Distinct images among ``images[idx]``, their rows in ``images``, and each pair's image."""
    used, inv = np.unique(idx, return_inverse=True)
    sub = images[used]
    flat = sub.reshape(sub.shape[0], -1)
    uniq, first, inv2 = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    if uniq.shape[0] == sub.shape[0]:
        return sub, used, inv.reshape(-1)
    return sub[first], used[first], inv2.reshape(-1)[inv.reshape(-1)]


def _describe(value):
    """A comparable description of a parameter value (modules by class and shapes)."""
    if isinstance(value, torch.nn.Module):
        shapes = [tuple(v.shape) for v in value.state_dict().values()]
        return f"{type(value).__name__}{shapes}"
    if isinstance(value, (list, tuple)):
        return type(value)(_describe(v) for v in value)
    if isinstance(value, np.random.RandomState):
        return "RandomState"
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def _read_checkpoint(path, device) -> dict:
    """A training checkpoint, read with ``torch.load(weights_only=True)``: tensors, numbers,
    strings and containers only, so nothing from the file runs. A crafted, truncated or newer
    file gives one ``ValueError`` line naming it."""
    import pickle
    import zipfile

    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile,
            ValueError) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        # torch's message leads with advice to re-run unsafely; keep the line saying what was
        # unexpected (e.g. "Trying to load unsupported GLOBAL posix.system ...")
        why = next((ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln),
                   lines[0] if lines else type(exc).__name__)
        raise ValueError(f"checkpoint {str(path)!r} is not a crossmetric training checkpoint "
                         f"(refused by torch.load(weights_only=True): {why[:200]}); nothing "
                         "from it was run. Delete it or set resume=False.") from None
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {str(path)!r} is not a crossmetric training checkpoint "
                         f"(a {type(state).__name__}, expected a dict).")
    version = state.get("format_version", 1)  # files before versioning: format 1
    if state.get("format", CHECKPOINT_FORMAT) != CHECKPOINT_FORMAT or not isinstance(
            version, int) or version > CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint {str(path)!r} has format {state.get('format')!r} "
                         f"version {version!r} (crossmetric "
                         f"{state.get('crossmetric_version')}); this crossmetric {__version__} "
                         f"reads {CHECKPOINT_FORMAT!r} up to version {CHECKPOINT_VERSION}.")
    return state


def _batch_tensor(images: np.ndarray) -> torch.Tensor:
    """Images ``(n, h, w[, c])`` as float32 ``(n, c, h, w)`` (uint8 scaled to [0, 1])."""
    t = torch.from_numpy(np.ascontiguousarray(images))
    t = t.float().div_(255.0) if images.dtype == np.uint8 else t.float()
    return t[:, None] if t.ndim == 3 else t.permute(0, 3, 1, 2)


class _Files(torch.utils.data.Dataset):
    def __init__(self, paths, mode, size):
        self.paths, self.mode, self.size = list(paths), mode, size

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return to_chw(read_image(self.paths[i], self.mode, self.size))


class DeepGSM(CrossModalMixin, BaseEstimator):
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
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the identities; every ``validation_every``
        iterations measure rank-1 (second-domain probes against the first-domain gallery of
        the held-out identities; ties count as misses); stop after ``patience`` checks
        without improvement and restore the best weights.
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
        layers start the paper's network (the similarity sub-network is initialised anew).
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
    amp : bool or "auto", default="auto"
        Automatic mixed precision (float16 ``torch.autocast`` with ``GradScaler``). ``"auto"``
        uses it on CUDA devices only; ``True`` on a CPU is an error. The loss is formed in
        float32.
    n_processes : int, default=1
        > 1: data-parallel training with that many local processes (DDP: ``gloo`` on CPUs,
        ``nccl`` with one GPU each); each round's identities are shared among them and the
        loss is the one-process loss of the whole round (:mod:`crossmetric.deep.distributed`).
        Under ``torchrun`` (a process group already initialised) ``fit`` uses that group.
        The processes are started with ``torch.multiprocessing.spawn``: as with any spawned
        multiprocessing, the calling script must be a file whose top level is guarded by
        ``if __name__ == "__main__":`` (code piped to ``python -`` cannot be re-imported).
    num_workers : int, default=0
        ``DataLoader`` worker processes that read (and decode / augment) training images.
    device : {"auto", "cpu", "cuda", ...}, default="auto"
        ``"auto"`` uses CUDA when ``torch.cuda.is_available()``, else the CPU. Results are
        bit-for-bit reproducible for a fixed ``random_state`` on the CPU (deterministic
        algorithms are switched on during ``fit``), not necessarily on a GPU.
    checkpoint_path : str or None, default=None
        File to save the training state to every ``checkpoint_every`` iterations and at the end
        (network, optimiser, schedule, random states, loss curve).
    checkpoint_every : int, default=100
    resume : bool, default=False
        When ``checkpoint_path`` exists, continue training from it up to ``max_iter``. The
        checkpoint records the training settings (every parameter that changes the run:
        ``max_iter``, ``learning_rate``, schedule, augmentation, backbone, ...) and a
        fingerprint of the training data; a resume whose settings or data differ raises
        ``ValueError``. Checkpoints are read with ``torch.load(...,
        weights_only=False)``: only resume from files you wrote.
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
    validation_scores_ : list of (int, float)
        ``(iteration, rank-1)`` of every validation check (``early_stopping=True``).
    best_iteration_ : int or None
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
                 average_from: float | None = None, early_stopping: bool = False,
                 validation_fraction: float = 0.2, validation_every: int | None = None,
                 patience: int = 5, tol: float | None = 1e-4, n_iter_no_change: int = 200,
                 backbone=None, weights=None, amp="auto", n_processes: int = 1,
                 num_workers: int = 0,
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
        self.amp = amp
        self.n_processes = n_processes
        self.num_workers = num_workers
        self.device = device
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every
        self.resume = resume
        self.progress = progress
        self.eval_batch_size = eval_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------------- checks
    def _check_params(self) -> None:
        for name, allowed in (("structure", tuple(STRUCTURES)), ("batch_mode", _BATCH_MODES),
                              ("optimizer", OPTIMIZERS), ("lr_schedule", SCHEDULES),
                              ("init", _INITS)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}."
                )
        check_positive_int(self.hidden_units, "hidden_units")
        check_positive_int(self.n_identities, "n_identities", minimum=2)
        check_positive_int(self.n_images_x, "n_images_x")
        check_positive_int(self.n_images_y, "n_images_y")
        if self.n_pairs is not None:
            check_positive_int(self.n_pairs, "n_pairs", minimum=2)
        check_positive_int(self.max_iter, "max_iter")
        if self.max_time is not None:
            check_positive_scalar(self.max_time, "max_time")
        check_positive_scalar(self.learning_rate, "learning_rate")
        check_positive_scalar(self.momentum, "momentum", allow_zero=True)
        check_positive_scalar(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive_scalar(self.mu, "mu", allow_zero=True)
        make_augmentation(self.augment, (8, 8))  # validates augment
        if self.hard_negatives is not None:
            check_positive_int(self.hard_negatives, "hard_negatives")
        if self.average_from is not None and not (
                isinstance(self.average_from, (float, int, np.floating))
                and not isinstance(self.average_from, bool) and 0 <= self.average_from < 1):
            raise ValueError(f"average_from must be None or a fraction in [0, 1) of max_iter, "
                             f"got {self.average_from!r}.")
        if not (isinstance(self.validation_fraction, (float, int))
                and 0 < self.validation_fraction < 1):
            raise ValueError(f"validation_fraction must be in (0, 1), got "
                             f"{self.validation_fraction!r}.")
        if self.validation_every is not None:
            check_positive_int(self.validation_every, "validation_every")
        check_positive_int(self.patience, "patience")
        if self.tol is not None:
            check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_int(self.n_iter_no_change, "n_iter_no_change")
        check_positive_int(self.checkpoint_every, "checkpoint_every")
        check_positive_int(self.eval_batch_size, "eval_batch_size")
        check_positive_int(self.n_processes, "n_processes")
        check_positive_int(self.num_workers, "num_workers", minimum=0)
        if self.amp not in ("auto", True, False):
            raise ValueError(f"amp must be 'auto', True or False, got {self.amp!r}.")
        if isinstance(self.f, bool) or not isinstance(self.f, (int, float, np.floating)) \
                or not np.isfinite(self.f):
            raise ValueError(f"f must be a finite real number, got {self.f!r}.")
        bb = self.backbone
        ok = (bb is None or isinstance(bb, (torch.nn.Module, str, os.PathLike))
              or (isinstance(bb, (tuple, list)) and len(bb) == 2
                  and all(isinstance(m, torch.nn.Module) for m in bb)))
        if not ok:
            raise ValueError("backbone must be None, a torch.nn.Module, a pair of modules (one "
                             f"per domain), a state-dict file path or an architecture name, "
                             f"got {type(bb).__name__}.")
        if self.weights is not None:
            if not isinstance(self.weights, (str, os.PathLike)):
                raise ValueError(f"weights must be a file path or None, got "
                                 f"{type(self.weights).__name__}.")
            if not (self._named_backbone() or isinstance(bb, torch.nn.Module)):
                raise ValueError("weights needs a backbone given by name (e.g. 'resnet18') or "
                                 "as a module; the paper's network takes a state-dict file "
                                 "as backbone=PATH.")

    def _named_backbone(self) -> bool:
        """``backbone`` is an architecture name (a string that is not an existing file)."""
        return isinstance(self.backbone, str) and not os.path.exists(self.backbone)

    def _resolve_device(self, rank: int = 0) -> torch.device:
        if self.device == "auto":
            if torch.cuda.is_available():
                return torch.device("cuda", rank % torch.cuda.device_count())
            return torch.device("cpu")
        try:
            dev = torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be 'auto', 'cpu' or a torch device, got "
                             f"{self.device!r}: {exc}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} asked for CUDA, which is not available.")
        if dev.type == "cuda" and dev.index is None and rank:
            dev = torch.device("cuda", rank % torch.cuda.device_count())  # one GPU per process
        return dev

    def _use_amp(self, device: torch.device) -> bool:
        if self.amp is True and device.type != "cuda":
            raise ValueError(f"amp=True needs a CUDA device; training runs on {device}. Use "
                             "amp='auto' (mixed precision on CUDA only) or amp=False.")
        return device.type == "cuda" and self.amp is not False

    def _check_samples(self, A, name: str, side: str | None = None) -> np.ndarray:
        """Images ``(n, h, w)`` or ``(n, h, w, c)``; uint8 kept, other types as float."""
        arr = np.asarray(A) if not isinstance(A, np.ndarray) else A
        if arr.dtype != np.uint8:
            arr = as_float_array(arr, name)
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
        if arr.ndim not in (3, 4):
            raise ValueError(f"{name} must be a 3-D array of grey images (n, h, w) or a 4-D "
                             f"array (n, h, w, channels), got shape {arr.shape}.")
        if arr.shape[0] == 0:
            raise ValueError(f"{name} has no samples (shape {arr.shape}).")
        if side is not None:
            self._check_fitted_shape(arr, name, side)
        return arr

    def _check_layout(self, x, y) -> tuple[tuple[int, int], tuple[int, int]]:
        """``(input_shape, channels)`` of the two training sources."""
        (sx, cx), (sy, cy) = image_layout(x, "X"), image_layout(y, "Y")
        files = is_file_list(x) or is_file_list(y)
        want = None if self.input_shape is None else tuple(int(v) for v in self.input_shape)
        if want is not None and not files and want != sx:
            raise ValueError(f"input_shape={tuple(self.input_shape)} but the images are "
                             f"of shape {sx}.")
        shape = want or sx
        if not files and sx != sy and not isinstance(self.backbone, (tuple, list)):
            raise ValueError(
                f"DeepGSM's shared sub-network needs images of one size in both domains; got "
                f"{sx} for X and {sy} for Y (resize them first)."
            )
        if files:
            for src, s0, nm in ((x, sx, "X"), (y, sy, "Y")):
                if not is_file_list(src) and s0 != shape:
                    raise ValueError(f"{nm} images are of shape {s0}, expected {shape}.")
        return shape, (cx, cy)

    # ----------------------------------------------------------------------- building
    def _build_net(self, input_shape, channels=(1, 1), *, seed: int = 0,
                   load: bool = False) -> GSMNet:
        """The network; ``load``: read ``weights`` into a named or module backbone (training
        only: a fitted or unpickled model restores its own state afterwards)."""
        from crossmetric.deep.backbones import build_backbone, load_weights

        bb = self.backbone
        if self._named_backbone():
            try:
                bb = build_backbone(bb, self.weights if load else None, random_state=seed)
            except ValueError as exc:
                extra = (" It is no state-dict file either." if "not a known architecture"
                         in str(exc) else "")
                raise ValueError(f"{exc}{extra}") from None
        elif isinstance(bb, torch.nn.Module):
            bb = copy.deepcopy(bb)
            if load and self.weights is not None:
                load_weights(bb, self.weights)
        elif isinstance(bb, (tuple, list)):
            bb = tuple(copy.deepcopy(tuple(bb)))  # one copy: shared submodules stay shared
        else:
            bb = None
        return GSMNet(input_shape, int(self.hidden_units), self.structure, float(self.f),
                      bool(self.learn_f), channels=channels, backbone=bb)

    def _load_backbone_file(self, net: GSMNet) -> None:
        from crossmetric.deep.backbones import _read_state_dict

        path = self.backbone
        try:
            state = _read_state_dict(path)   # weights_only; a crafted file is one line
        except ValueError as exc:
            raise ValueError(f"backbone={str(path)!r}: {exc}") from None
        state = {k: v for k, v in state.items() if not k.startswith("head.")}
        own = {k: v for k, v in net.state_dict().items() if not k.startswith("head.")}
        bad = [k for k in own if k not in state or state[k].shape != own[k].shape]
        if bad:
            raise ValueError(f"backbone={str(path)!r} does not fit this network (input_shape, "
                             f"channels, hidden_units): missing or misshaped {bad[:4]}.")
        net.load_state_dict(state, strict=False)

    @staticmethod
    def _penalised(net: GSMNet) -> tuple[list, list]:
        """The tensors of eq. (7)'s penalties: W (feature weights, no biases) and Φ."""
        return ([p for n, p in net.named_parameters()
                 if not n.startswith("head.") and not n.endswith("bias")],
                list(net.head.params.values()))

    def _penalty(self, net: GSMNet, penalised=None) -> torch.Tensor:
        """``λ‖W‖² + μ‖Φ‖²`` of eq. (7) (biases of W and the constant f not penalised).

        ``penalised``: :meth:`_penalised` of ``net``, computed once per fit by the caller.
        """
        ws, phis = self._penalised(net) if penalised is None else penalised
        pen_w = sum((p * p).sum() for p in ws)
        pen_phi = sum((p * p).sum() for p in phis)
        return float(self.weight_decay) * pen_w + float(self.mu) * pen_phi

    def _make_optimizer(self, net: GSMNet, max_iter: int):
        return make_optimizer(net.parameters(), optimizer=self.optimizer,
                              learning_rate=self.learning_rate, momentum=self.momentum,
                              schedule=self.lr_schedule, max_iter=max_iter, tol=self.tol)

    def _settings(self) -> dict:
        """Every parameter that changes what training computes (recorded in checkpoints)."""
        return {k: _describe(v) for k, v in sorted(self.get_params(deep=False).items())
                if k not in _RUN_ONLY}

    # ----------------------------------------------------------------------------- fit
    def fit(self, pairs, y, groups=None):
        """Train from pair constraints (see the class docstring for the input forms).

        Parameters
        ----------
        pairs : array-like
            Index pairs ``(n_pairs, 2)`` with ``preprocessor=(images_x, images_y)``, image
            pairs ``(n_pairs, 2, h, w)``, or a tuple ``(Xp, Yp)`` of row-aligned images
            (``(n, h, w)`` or ``(n, h, w, c)``).
        y : array-like of shape (n_pairs,)
            +1 same, -1 different.
        groups : tuple (ids_x, ids_y) or None
            Identity label of every image the pairs refer to: of every row of
            ``images_x`` / ``images_y`` (index form), or of every row of ``Xp`` / ``Yp``.
            ``None`` infers identities as the connected components of the positive pairs.

        Returns
        -------
        self
        """
        self._groups = groups
        try:
            return super().fit(pairs, y)
        finally:
            del self._groups

    def _canonical_pairs(self, data: PairData) -> PairData:
        # ``_fit`` merges identical images itself (``_dedupe``: value-sorted distinct images,
        # so the fit still does not depend on the input form) and keeps each image's row in
        # the caller's arrays, which ``groups`` refers to.
        return data

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        X, rows_x, ix = _dedupe(data.X, data.ix)
        Y, rows_y, iy = _dedupe(data.Y, data.iy)
        groups = getattr(self, "_groups", None)
        if groups is not None:
            ids_x, ids_y = self._check_groups(groups, data)
            ids_x, ids_y = ids_x[rows_x], ids_y[rows_y]
            n_conflicts = int(np.sum((ids_x[ix] == ids_y[iy]) != (y == 1)))
            if n_conflicts:
                warnings.warn(
                    f"{n_conflicts} pair label(s) disagree with groups (a +1 pair across two "
                    "groups or a -1 pair within one); DeepGSM's batch generator follows groups.",
                    UserWarning, stacklevel=user_stacklevel())
        else:
            ids_x, ids_y, n_conflicts = identities_from_pairs(X.shape[0], Y.shape[0], ix, iy, y)
            if n_conflicts:
                warnings.warn(
                    f"{n_conflicts} pair(s) labelled -1 join images that positive pairs put in "
                    "one identity; DeepGSM's batch generator treats them as the same identity.",
                    UserWarning, stacklevel=user_stacklevel(),
                )
            share = pair_completeness(ids_x, ids_y, ix, iy, y)
            if share < 1.0:
                n_ids = np.intersect1d(ids_x, ids_y).size
                warnings.warn(
                    f"DeepGSM inferred {n_ids} identities from the positive pairs (connected "
                    f"components), but the positives list only {100 * share:.1f}% of the "
                    "same-identity pairs within them: the pairs look sampled, so these "
                    "identities may be fragments of fewer classes, and the batch generator "
                    "would treat images of one class as negatives. Pass the identity labels: "
                    "fit(pairs, y, groups=(ids_x, ids_y)).", UserWarning,
                    stacklevel=user_stacklevel())
        self._train_and_set(X, ids_x, Y, ids_y)

    @staticmethod
    def _check_groups(groups, data: PairData) -> tuple[np.ndarray, np.ndarray]:
        if not (isinstance(groups, (tuple, list)) and len(groups) == 2):
            raise ValueError("groups must be a tuple (ids_x, ids_y) with the identity of every "
                             f"image of each domain, got {type(groups).__name__}.")
        out = []
        for g, A, name in ((groups[0], data.X, "groups[0] (ids_x)"),
                           (groups[1], data.Y, "groups[1] (ids_y)")):
            g = np.asarray(g)
            if g.ndim != 1 or g.shape[0] != A.shape[0]:
                raise ValueError(f"{name} must be 1-D with one label per image ({A.shape[0]}), "
                                 f"got shape {g.shape}.")
            out.append(g)
        codes = np.unique(np.r_[out[0], out[1]], return_inverse=True)[1].reshape(-1)
        return codes[:out[0].size].astype(np.int64), codes[out[0].size:].astype(np.int64)

    def fit_identities(self, X, ids_x, Y, ids_y):
        """Train from identity-labelled images of the two domains (no pairs needed).

        Parameters
        ----------
        X, Y : ndarray or list of str / os.PathLike
            Images ``(n, h, w)`` or ``(n, h, w, c)``, or lists of image files read with Pillow
            while training (grey files as one channel, others as RGB; resized to
            ``input_shape``, default the size of the first file of ``X``) -- use
            ``num_workers`` to decode them in parallel.
        ids_x, ids_y : array-like of shape (n_x,), (n_y,)
            Identity of every image; identities with images in both domains are trained on.

        Returns
        -------
        self
            ``threshold_`` is 0, the midpoint of the margins of eq. (5) (use
            :meth:`calibrate_threshold` on pairs to choose another).
        """
        self._check_params()
        srcs = []
        for A, name in ((X, "X"), (Y, "Y")):
            if is_file_list(A):
                srcs.append(list(A))
            elif isinstance(A, (list, tuple)) and len(A) == 0:
                raise ValueError(f"{name} is empty.")
            else:
                srcs.append(self._check_samples(A, name))
        ids = []
        for g, A, name in ((ids_x, srcs[0], "ids_x"), (ids_y, srcs[1], "ids_y")):
            g = np.asarray(g)
            if g.ndim != 1 or g.shape[0] != len(A):
                raise ValueError(f"{name} must be 1-D with one label per image ({len(A)}), got "
                                 f"shape {g.shape}.")
            ids.append(g)
        codes = np.unique(np.r_[ids[0], ids[1]], return_inverse=True)[1].reshape(-1)
        cx, cy = codes[:ids[0].size].astype(np.int64), codes[ids[0].size:].astype(np.int64)
        self._train_and_set(srcs[0], cx, srcs[1], cy)
        h, w = self.input_shape_
        self._sample_shape_x_ = (h, w) if self.channels_[0] == 1 else (h, w, self.channels_[0])
        self._sample_shape_y_ = (h, w) if self.channels_[1] == 1 else (h, w, self.channels_[1])
        if not is_file_list(srcs[0]):
            self._sample_shape_x_ = tuple(srcs[0].shape[1:])
        if not is_file_list(srcs[1]):
            self._sample_shape_y_ = tuple(srcs[1].shape[1:])
        self.classes_ = np.array([-1, 1])
        self.threshold_ = 0.0
        return self

    def _train_and_set(self, x, ids_x, y, ids_y) -> None:
        shape, channels = self._check_layout(x, y)
        seed = int(check_random_state(self.random_state).randint(2**31 - 1))
        rank, world = active_group()
        args = (x, ids_x, y, ids_y, shape, channels, seed)
        if int(self.n_processes) > 1:
            if world > 1:
                raise ValueError("n_processes > 1 cannot be used inside an initialised "
                                 "torch.distributed process group (torchrun); leave it at 1.")
            result = self._spawn(args)
        else:
            result = self._train(*args, rank=rank, world=world)
        net = self._build_net(shape, channels)
        net.load_state_dict(result["state"])
        device = self._resolve_device(rank)
        self.net_ = net.to(device).eval()
        self.device_ = device
        self.input_shape_ = tuple(shape)
        self.channels_ = tuple(channels)
        self.loss_curve_ = result["curve"]
        self.n_iter_ = len(result["curve"])
        self.stop_reason_ = result["stop_reason"]
        self.train_time_ = result["train_time"]
        self.n_identities_ = result["n_identities"]
        self.validation_scores_ = result["validation_scores"]
        self.best_iteration_ = result["best_iteration"]
        self.n_averaged_ = int(result.get("n_averaged", 0))
        with torch.no_grad():
            self.f_ = net.f_value()
        if result["stop_reason"] == "max_iter" and not result["converged"] \
                and self.tol is not None and self.n_iter_ > result["start"]:
            warnings.warn(
                f"DeepGSM: max_iter={self.max_iter} iterations reached before the objective "
                f"levelled off (tol={self.tol}); increase max_iter.",
                ConvergenceWarning, stacklevel=user_stacklevel(),
            )

    def _spawn(self, args) -> dict:
        from crossmetric.deep.distributed import spawn_worker

        n = int(self.n_processes)
        dev = self._resolve_device()
        if dev.type == "cuda" and torch.cuda.device_count() < n:
            raise ValueError(f"n_processes={n} needs {n} GPUs with nccl; "
                             f"{torch.cuda.device_count()} found.")
        backend = "nccl" if dev.type == "cuda" else "gloo"
        threads = max(1, torch.get_num_threads() // n)
        params = {**self.get_params(deep=False), "preprocessor": None}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "result.pt")
            torch.multiprocessing.spawn(
                spawn_worker, args=(n, free_port(), backend, threads, params, args, path),
                nprocs=n, join=True)
            return torch.load(path, map_location="cpu", weights_only=True)

    # ---------------------------------------------------------------------- training
    @staticmethod
    def _mined_weights(same: np.ndarray, S: np.ndarray, k: int | None) -> np.ndarray:
        """Balanced weights over positives and (with ``k``) each image's k hardest negatives."""
        if k is None:
            return balanced_weights(same)
        neg = ~same
        Sn = np.where(neg, S, np.inf)
        keep = same.copy()
        kr, kc = min(k, S.shape[1]), min(k, S.shape[0])
        rows = np.argpartition(Sn, kr - 1, axis=1)[:, :kr]
        keep[np.arange(S.shape[0])[:, None], rows] = True
        cols = np.argpartition(Sn, kc - 1, axis=0)[:kc, :]
        keep[cols, np.arange(S.shape[1])[None, :]] = True
        w = np.zeros(S.shape)
        w[keep] = balanced_weights(same[keep])
        return w

    def _hinge(self, TX, TY, f, gx: np.ndarray, gy: np.ndarray, cache=None) -> torch.Tensor:
        """The balanced GSM hinge of a round. ``cache`` (a dict kept for one fit) holds the
        labels and weights of each pattern of same-identity pairs already seen: without hard
        negatives they depend on that pattern only, and most rounds repeat a few patterns."""
        dev = TX.device
        if self.batch_mode == "pair":
            S = similarity_rows(TX, TY, f)
            same = gx == gy
        else:
            S = similarity_matrix(TX, TY, f)
            same = gx[:, None] == gy[None, :]
        mined = self.batch_mode != "pair" and self.hard_negatives is not None
        key = None if cache is None or mined else (same.shape, same.tobytes())
        if key is not None and key in cache:
            ell, w = cache[key]
        else:
            if mined:
                w = self._mined_weights(same, S.detach().cpu().numpy(), self.hard_negatives)
            else:
                w = balanced_weights(same)
            ell = torch.as_tensor(np.where(same, -1.0, 1.0), dtype=S.dtype, device=dev)
            w = torch.as_tensor(w, dtype=S.dtype, device=dev)
            if key is not None:
                if len(cache) >= 64:
                    cache.clear()
                cache[key] = (ell, w)
        return (w * torch.clamp(1.0 - ell * S, min=0.0)).sum()

    def _embed_source(self, net: GSMNet, source, side: str, shape, channels, device):
        """x̃ or ỹ (a float32 tensor on ``device``) of an image array or file list."""
        fn = net.embed_x if side == "x" else net.embed_y
        flip = bool(self.test_flip)
        out = []
        with torch.no_grad():
            if is_file_list(source):
                c = channels[0] if side == "x" else channels[1]
                loader = torch.utils.data.DataLoader(
                    _Files(source, "L" if c == 1 else "RGB", shape),
                    batch_size=int(self.eval_batch_size), num_workers=int(self.num_workers))
                for b in loader:
                    out.append(fn(b.to(device), flip=flip).float())
            else:
                for sl in gen_batches(len(source), int(self.eval_batch_size)):
                    out.append(fn(_batch_tensor(source[sl]).to(device), flip=flip).float())
        return torch.cat(out)

    def _rank1(self, net, val, shape, channels, device) -> float:
        """Rank-1 of held-out second-domain probes against the first-domain gallery."""
        vx, vix, vy, viy = val
        net.eval()
        TX = self._embed_source(net, vx, "x", shape, channels, device)
        TY = self._embed_source(net, vy, "y", shape, channels, device)
        net.train()
        S = similarity_matrix(TX, TY, net.head.components()[2].detach().float()).cpu().numpy()
        same = vix[:, None] == viy[None, :]
        has = same.any(0)
        best_true = np.where(same, S, np.inf).min(0)
        best_false = np.where(same, np.inf, S).min(0)
        return float(np.mean((best_true < best_false)[has]))

    def _check_resume(self, state: dict, settings: dict, fp: str) -> None:
        path = self.checkpoint_path
        old = state.get("settings")
        if old is None:
            raise ValueError(f"checkpoint {path!r} records no training settings (written by an "
                             "older version); delete it or set resume=False.")
        diff = [f"{k}: {old.get(k)!r} in the checkpoint, {settings.get(k)!r} now"
                for k in sorted(set(old) | set(settings)) if old.get(k) != settings.get(k)]
        if diff:
            raise ValueError(f"cannot resume from checkpoint {path!r}: it was written with other "
                             f"settings ({'; '.join(diff)}). Use the same parameters, or delete "
                             "the file / set resume=False to start again.")
        if state.get("fingerprint") != fp:
            raise ValueError(f"cannot resume from checkpoint {path!r}: it was written for other "
                             "training data (images or identities differ). Use the same data, "
                             "or delete the file / set resume=False to start again.")

    def _train(self, x, ids_x, y, ids_y, shape, channels, seed, *, rank=0, world=1) -> dict:
        """Algorithm 2 on one process (of ``world``); returns the trained state and curve."""
        import torch.distributed as dist

        self._check_params()
        device = self._resolve_device(rank)
        amp = self._use_amp(device)
        settings, fp = self._settings(), fingerprint(x, ids_x, y, ids_y)
        path = self.checkpoint_path
        state = None
        if self.resume and path is not None and os.path.exists(path):
            state = _read_checkpoint(path, device)
            self._check_resume(state, settings, fp)
            seed = int(state["seed"])
        val = None
        if self.early_stopping:
            usable = np.intersect1d(ids_x, ids_y)
            n_val = max(2, int(round(float(self.validation_fraction) * usable.size)))
            if usable.size - n_val < 2:
                raise ValueError(f"early_stopping needs at least 2 training and 2 validation "
                                 f"identities; there are {usable.size} in all.")
            rs = np.random.RandomState(np.random.SeedSequence([seed, 7]).generate_state(1))
            held = rs.choice(usable, n_val, replace=False)
            mx, my = np.isin(ids_x, held), np.isin(ids_y, held)
            val = (subset(x, np.flatnonzero(mx)), ids_x[mx], subset(y, np.flatnonzero(my)),
                   ids_y[my])
            x, ids_x = subset(x, np.flatnonzero(~mx)), ids_x[~mx]
            y, ids_y = subset(y, np.flatnonzero(~my)), ids_y[~my]
        tf = make_augmentation(self.augment, shape)
        ds = CrossDomainImages(x, ids_x, y, ids_y, size=shape, channels=channels,
                               transform_x=tf, transform_y=tf)
        k = min(int(self.n_identities), np.intersect1d(ids_x, ids_y).size)
        n_pairs = self.n_pairs
        if n_pairs is None:
            n_pairs = max(2, (k * (int(self.n_images_x) + int(self.n_images_y))) // 2)
        sampler = CrossDomainIdentitySampler(
            ids_x, ids_y, int(self.n_identities), int(self.n_images_x), int(self.n_images_y),
            seed=seed, rank=rank, world_size=world, mode=self.batch_mode, n_pairs=int(n_pairs))

        net = self._build_net(shape, channels, seed=seed, load=True)
        n_probe = [min(32, len(x)), min(32, len(y))]
        probe = (torch.stack([ds.load(i)[0] for i in range(n_probe[0])]),
                 torch.stack([ds.load(ds.n_x + i)[0] for i in range(n_probe[1])]))
        net.initialize(self.init, torch.Generator().manual_seed(seed), probe=probe)
        if isinstance(self.backbone, (str, os.PathLike)) and not self._named_backbone():
            self._load_backbone_file(net)
        net.to(device)
        model = net
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(
                net, device_ids=[device.index] if device.type == "cuda" else None)
        max_iter = int(self.max_iter)
        opt, sched = self._make_optimizer(net, max_iter)
        scaler = torch.amp.GradScaler("cuda", enabled=amp)
        a0 = averaging_start(self.average_from, max_iter)
        avg = None if a0 is None else WeightAverage(net, a0)
        start, curve, val_scores, best, bad_checks = 0, [], [], None, 0
        if state is not None:
            net.load_state_dict(state["net"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            scaler.load_state_dict(state["scaler"])
            start, curve = int(state["iteration"]), list(state["loss_curve"])
            val_scores, best, bad_checks = (list(state["validation_scores"]), state["best"],
                                            int(state["bad_checks"]))
            if avg is not None:
                avg.load_state_dict(state["average"])
        every_val = int(self.validation_every or len(sampler))

        def save(done):
            if path is None or rank != 0:
                return
            with atomic_path(path) as tmp:
                torch.save({"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                            "crossmetric_version": __version__, "settings": settings,
                            "fingerprint": fp, "seed": seed, "net": net.state_dict(),
                            "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                            "scaler": scaler.state_dict(), "iteration": int(done),
                            "loss_curve": list(curve), "validation_scores": list(val_scores),
                            "best": best, "bad_checks": bad_checks,
                            "average": None if avg is None else avg.state_dict()}, tmp)

        batches = IterationBatches(sampler, start, max_iter)
        if int(self.num_workers) == 0 and device.type == "cpu":
            # the DataLoader's fetch without its machinery: the same batches, read in this
            # process by the dataset's batch path
            rounds = (ds.domain_batches(keys) for keys in batches)
        else:
            rounds = torch.utils.data.DataLoader(
                ds, batch_sampler=batches, num_workers=int(self.num_workers),
                collate_fn=collate_domains, pin_memory=device.type == "cuda")
        window = int(self.n_iter_no_change)
        rule = WindowedConvergence(opt, sched, self.lr_schedule, window, self.tol)
        converged, stop_reason, done = False, "max_iter", start
        t0 = time.perf_counter()
        verbose = self.verbose and rank == 0
        if verbose:
            print(f"{'iter':>7} {'objective':>11} {'lr':>9} {'time (s)':>9}")
        bar = tqdm(total=max_iter, initial=start, disable=not self.progress or rank != 0,
                   desc="DeepGSM", leave=False)
        penalised, weights_cache = self._penalised(net), {}
        n_images = 2 * int(n_pairs) if self.batch_mode == "pair" else k * (
            int(self.n_images_x) + int(self.n_images_y))
        with _deterministic(device.type == "cpu"), small_net_threads(net, device, probe,
                                                                     n_images):
            net.train()
            for t, (xb, yb) in zip(range(start, max_iter), rounds, strict=False):
                ix, iy = batches.global_round(t)
                if world > 1:
                    ixg, iyg, cx, cy = sampler.gathered_order(ix, iy)
                else:  # one process: the round in its own order
                    ixg, iyg = ix, iy
                xb = xb.to(device, non_blocking=True)
                yb = yb.to(device, non_blocking=True)
                if amp:
                    with torch.autocast(device_type=device.type, dtype=torch.float16):
                        TX, TY, fv = model(xb, yb)
                    TX, TY = TX.float(), TY.float()
                    fv = fv.float() if torch.is_tensor(fv) else fv
                else:
                    TX, TY, fv = model(xb, yb)
                if world > 1:
                    TX, TY = gather_rows(TX, cx, rank), gather_rows(TY, cy, rank)
                    fv = once(fv, rank)
                hinge = self._hinge(TX, TY, fv, ids_x[ixg], ids_y[iyg], weights_cache)
                pen = self._penalty(net, penalised)
                opt.zero_grad(set_to_none=True)
                if amp:
                    scaler.scale(hinge * world + pen).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    (hinge * world + pen).backward()
                    opt.step()
                rule.step_schedule()
                if avg is not None:
                    avg.update(net, t)
                curve.append(float(hinge.detach()) + float(pen.detach()))
                bar.update(1)
                done = t + 1
                if done % int(self.checkpoint_every) == 0 or done == max_iter:
                    save(done)
                if verbose and (done % int(self.checkpoint_every) == 0 or done == start + 1):
                    print(f"{done:>7} {np.mean(curve[-window:]):>11.5f} "
                          f"{opt.param_groups[0]['lr']:>9.2e} {time.perf_counter() - t0:>9.1f}")
                stop = None
                if val is not None and (done % every_val == 0 or done == max_iter):
                    now = net if avg is None else avg.current(net)
                    score = self._rank1(now, val, shape, channels, device)
                    val_scores.append((done, score))
                    if best is None or score > best[1]:
                        best = (done, score, {k: v.detach().cpu().clone()
                                              for k, v in now.state_dict().items()},
                                0 if now is net else avg.n_averaged)
                        bad_checks = 0
                    else:
                        bad_checks += 1
                        if bad_checks >= int(self.patience):
                            stop = "early_stopping"
                if rule.update(curve, done) and stop is None:
                    stop = "tol"
                if stop is None and self.max_time is not None \
                        and time.perf_counter() - t0 >= self.max_time:
                    stop = "max_time"
                if world > 1:  # every process stops at the same round
                    code = torch.tensor([("tol", "early_stopping", "max_time").index(stop) + 1
                                         if stop else 0])
                    dist.all_reduce(code, op=dist.ReduceOp.MAX)
                    c = int(code)
                    stop = ("tol", "early_stopping", "max_time")[c - 1] if c else None
                if stop is not None:
                    stop_reason, converged = stop, stop == "tol"
                    break
        bar.close()
        if stop_reason != "max_iter":
            save(done)
        final = net if avg is None else avg.current(net)
        state_out = {k: v.detach().cpu() for k, v in final.state_dict().items()}
        n_averaged = 0 if final is net else avg.n_averaged
        if best is not None:
            # (a checkpoint written before weight averaging existed keeps 3 entries)
            state_out, n_averaged = best[2], (best[3] if len(best) > 3 else 0)
        return {"state": state_out, "curve": curve, "start": start, "stop_reason": stop_reason,
                "converged": converged, "train_time": time.perf_counter() - t0,
                "n_identities": int(np.intersect1d(ids_x, ids_y).size),
                "validation_scores": [(int(a), float(b)) for a, b in val_scores],
                "best_iteration": None if best is None else int(best[0]),
                "n_averaged": n_averaged}

    # -------------------------------------------------------------------------- towers
    def _forward_blocks(self, images: np.ndarray, fn) -> np.ndarray:
        """``fn`` (a GSMNet ``embed_*`` / ``features_*``) in blocks, with ``test_flip``."""
        out, flip = [], bool(self.test_flip)
        with torch.no_grad():
            for sl in gen_batches(images.shape[0], int(self.eval_batch_size)):
                t = _batch_tensor(images[sl]).to(self.device_)
                out.append(fn(t, flip=flip).double().cpu().numpy())
        return np.concatenate(out)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._forward_blocks(X, self.net_.embed_x)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._forward_blocks(Y, self.net_.embed_y)

    def transform_x(self, X) -> np.ndarray:
        """x̃ (eq. 10) of first-domain images: an array, or a list of image files."""
        check_is_fitted(self)
        if is_file_list(X):
            return self._embed_source(self.net_, X, "x", self.input_shape_, self.channels_,
                                      self.device_).double().cpu().numpy()
        return super().transform_x(X)

    def transform_y(self, Y) -> np.ndarray:
        """ỹ (eq. 10) of second-domain images: an array, or a list of image files."""
        check_is_fitted(self)
        if is_file_list(Y):
            return self._embed_source(self.net_, Y, "y", self.input_shape_, self.channels_,
                                      self.device_).double().cpu().numpy()
        return super().transform_y(Y)

    def _rowwise_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_rowwise(FX, FY, self.f_)

    def _matrix_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_matrix(FX, FY, self.f_)

    def features_x(self, X) -> np.ndarray:
        """The learned deep features f₁(x) (L2-normalised, r wide; mirror-averaged with
        ``test_flip``)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(X, "X", side="x"),
                                    self.net_.features_x)

    def features_y(self, Y) -> np.ndarray:
        """The learned deep features f₂(y) (L2-normalised, r wide; mirror-averaged with
        ``test_flip``)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(Y, "Y", side="y"),
                                    self.net_.features_y)

    def export_torchscript(self, path, domain: str = "x") -> str:
        """Save one trained tower as TorchScript: embed a gallery without crossmetric.

        The saved module maps a float tensor of images ``(n, c, h, w)`` (values as in
        training: ``uint8`` images divided by 255) to x̃ or ỹ ``(n, 2r + 1)``; its method
        ``similarity(tx, ty)`` gives the matrix of S̃ (eq. 12) between the outputs of the
        first-domain and second-domain towers, and its buffer ``f`` the constant. Load with
        ``torch.jit.load(path)``. Paper networks are scripted; a user backbone that cannot
        be scripted is traced on a zero batch instead.

        Parameters
        ----------
        path : str or os.PathLike
        domain : {"x", "y"}

        Returns
        -------
        str
            ``path``.
        """
        check_is_fitted(self)
        if domain not in ("x", "y"):
            raise ValueError(f"domain must be 'x' or 'y', got {domain!r}.")
        tower = GSMTower(self.net_, domain, flip=bool(self.test_flip)).cpu().eval()
        with warnings.catch_warnings():
            # torch >= 2.10 marks TorchScript deprecated (in favour of torch.export); it still
            # works and is what C++ / older runtimes load
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                scripted = torch.jit.script(tower)
            except Exception:  # noqa: BLE001 - torch raises many types for unscriptable code
                c = self.channels_[0 if domain == "x" else 1]
                scripted = torch.jit.trace(tower, torch.zeros(2, c, *self.input_shape_))
            with atomic_path(path) as tmp:
                scripted.save(tmp)
        return str(path)

    # ------------------------------------------------------------------------ pickling
    def __getstate__(self):
        state = self.__dict__.copy()
        net = state.pop("net_", None)
        if net is not None:
            state["_net_state_"] = {k: v.detach().cpu() for k, v in net.state_dict().items()}
            state["device_"] = str(self.device_)
        return state

    def __setstate__(self, state):
        net_state = state.pop("_net_state_", None)
        self.__dict__.update(state)
        if net_state is not None:
            dev = torch.device(state["device_"])
            if dev.type == "cuda" and not torch.cuda.is_available():
                dev = torch.device("cpu")
            net = self._build_net(self.input_shape_, getattr(self, "channels_", (1, 1)))
            net.load_state_dict(net_state)
            net.to(dev).eval()
            self.net_ = net
            self.device_ = dev
