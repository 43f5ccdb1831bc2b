"""DeepGSM: joint feature and generalized-similarity learning (Lin et al., §4), as a pair learner.

The estimator takes raw images of two domains through the pair API -- index pairs with
``preprocessor=(images_x, images_y)`` (images of shape ``(n, h, w)``) or row-aligned image
arrays ``(Xp, Yp)`` -- and trains the network of :mod:`crossmetric.deep.networks` with
Algorithm 2 of the paper: rounds of the cross-domain batch generator (§4.2), the GSM hinge
(eq. 6) in the sample-based form (eq. 14-18) plus ``λ‖W‖² + μ‖Φ‖²`` (eq. 7), and gradient
steps (eq. 16; with momentum and a learning-rate schedule here).

Identities for the batch generator come from the training pairs: images joined by a chain of
positive pairs share an identity (connected components), every other combination is treated as
a negative (the closed-world assumption of identity-labelled data, which is where the paper's
n_x · n_y pairs per batch come from).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from crossmetric._base import CrossModalMixin, PairData
from crossmetric._checks import check_positive_int, check_positive_scalar, user_stacklevel
from crossmetric.deep.losses import gsm_hinge_pair_based, gsm_hinge_sample_based
from crossmetric.deep.networks import GSMNet
from crossmetric.deep.sampler import CrossDomainBatchSampler, identities_from_pairs
from crossmetric.gsm import STRUCTURES, gsm_matrix, gsm_rowwise

__all__ = ["DeepGSM"]

_SCHEDULES = ("constant", "step", "cosine")
_OPTIMIZERS = ("sgd", "adam")
_BATCH_MODES = ("sample", "pair")
_INITS = ("default", "paper")


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


def _dedupe(images: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct images among ``images[idx]`` and the index of each pair's image among them."""
    used, inv = np.unique(idx, return_inverse=True)
    sub = images[used]
    flat = sub.reshape(sub.shape[0], -1)
    uniq, first, inv2 = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    if uniq.shape[0] == sub.shape[0]:
        return sub, inv.reshape(-1)
    return sub[first], inv2.reshape(-1)[inv.reshape(-1)]


class DeepGSM(CrossModalMixin, BaseEstimator):
    """Deep generalized similarity model: CNN features and the measure of eq. (1), end to end.

    ``pair_distance`` returns S̃(x, y) of eq. (3) with the paper's sign (trained towards
    ``S̃ < −1`` for the same identity and ``S̃ ≥ 1`` otherwise, eq. 5): smaller = more alike.
    ``transform_x`` / ``transform_y`` return the similarity components x̃ / ỹ (eq. 10), shape
    ``(n, 2r + 1)``, so a gallery is embedded once and matched with ``cross_distance``.

    Parameters
    ----------
    input_shape : tuple (h, w) or None, default=None
        Image size; ``None`` takes it from the training images. Both domains must share it.
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
    lr_schedule : {"constant", "step", "cosine"}, default="cosine"
        ``step`` divides the rate by 10 after 1/2 and 3/4 of ``max_iter``; ``cosine`` anneals
        it to 0 over ``max_iter``.
    weight_decay : float, default=5e-4
        λ of eq. (7): penalty ``λ‖W‖²`` on the weights of the feature sub-networks.
    mu : float, default=5e-4
        μ of eq. (7): penalty ``μ‖Φ‖²`` on the similarity components (f excluded).
    init : {"default", "paper"}, default="default"
        ``"paper"``: Gaussians of standard deviation 0.01 (convolutions) and 0.001 (fully
        connected), as in §5; ``"default"``: He-uniform feature layers and N(0, 1/r)
        similarity components, which learn much faster from scratch on a small CPU budget.
    augment : int, default=1
        Training images are shifted by a random offset of up to ``augment`` pixels in each
        direction (zero padding) -- the paper's "cropped ... with a small random
        perturbation". 0 disables it.
    tol : float or None, default=1e-4
        Convergence: training stops when the mean batch objective of the last
        ``n_iter_no_change`` iterations is not ``tol`` below that of the window before.
        ``None`` disables the test (and the warning). (A single batch with zero hinge does not
        stop training: the next round's identities differ.)
    n_iter_no_change : int, default=200
    device : {"auto", "cpu", "cuda", ...}, default="auto"
        ``"auto"`` uses CUDA when ``torch.cuda.is_available()``, else the CPU. Results are
        bit-for-bit reproducible for a fixed ``random_state`` on the CPU (deterministic
        algorithms are switched on during ``fit``), not necessarily on a GPU.
    checkpoint_path : str or None, default=None
        File to save the training state to every ``checkpoint_every`` iterations and at the end
        (network, optimiser, schedule, random states, loss curve).
    checkpoint_every : int, default=100
    resume : bool, default=False
        When ``checkpoint_path`` exists, continue training from it (same data and parameters
        assumed) up to ``max_iter``. Checkpoints are read with ``torch.load(...,
        weights_only=False)``: only resume from files you wrote.
    progress : bool, default=False
        Show a tqdm progress bar.
    eval_batch_size : int, default=512
        Images per forward pass when embedding (``transform_*``, ``pair_distance``, ...).
    random_state : int, RandomState instance or None
        Seeds the initialisation, the batch generator and the augmentation.
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
        Identities found among the training pairs (with images in both domains).
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
    >>> model = DeepGSM(hidden_units=16, n_identities=10, n_images_x=2, n_images_y=2,
    ...                 max_iter=10, device="cpu", random_state=0, preprocessor=(X, Y))
    >>> model.fit(pairs, y).cross_distance(X[:2], Y[:3]).shape
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
                 augment: int = 1, tol: float | None = 1e-4, n_iter_no_change: int = 200,
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
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
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
                              ("optimizer", _OPTIMIZERS), ("lr_schedule", _SCHEDULES),
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
        check_positive_int(self.augment, "augment", minimum=0)
        if self.tol is not None:
            check_positive_scalar(self.tol, "tol", allow_zero=True)
        check_positive_int(self.n_iter_no_change, "n_iter_no_change")
        check_positive_int(self.checkpoint_every, "checkpoint_every")
        check_positive_int(self.eval_batch_size, "eval_batch_size")
        if isinstance(self.f, bool) or not isinstance(self.f, (int, float, np.floating)) \
                or not np.isfinite(self.f):
            raise ValueError(f"f must be a finite real number, got {self.f!r}.")

    def _resolve_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be 'auto', 'cpu' or a torch device, got "
                             f"{self.device!r}: {exc}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} asked for CUDA, which is not available.")
        return dev

    def _check_input_shape(self, data: PairData) -> tuple[int, int]:
        sx, sy = tuple(data.X.shape[1:]), tuple(data.Y.shape[1:])
        if sx != sy:
            raise ValueError(
                f"DeepGSM's shared sub-network needs images of one size in both domains; got "
                f"{sx} for X and {sy} for Y (resize them first)."
            )
        if self.input_shape is not None:
            want = tuple(int(v) for v in self.input_shape)
            if want != sx:
                raise ValueError(f"input_shape={tuple(self.input_shape)} but the images are "
                                 f"of shape {sx}.")
        return sx

    # ----------------------------------------------------------------------- building
    def _build_net(self, input_shape) -> GSMNet:
        return GSMNet(input_shape, int(self.hidden_units), self.structure, float(self.f),
                      bool(self.learn_f))

    def _penalty(self, net: GSMNet) -> torch.Tensor:
        """``λ‖W‖² + μ‖Φ‖²`` of eq. (7) (biases of W and the constant f not penalised)."""
        pen_w = sum((p * p).sum() for n, p in net.named_parameters()
                    if not n.startswith("head.") and not n.endswith("bias"))
        pen_phi = sum((p * p).sum() for p in net.head.params.values())
        return float(self.weight_decay) * pen_w + float(self.mu) * pen_phi

    def _shift(self, imgs: torch.Tensor, rng: np.random.RandomState) -> torch.Tensor:
        """Random translation by up to ``augment`` pixels per image (zero padding)."""
        a = int(self.augment)
        if a == 0:
            return imgs
        n, h, w = imgs.shape
        padded = torch.nn.functional.pad(imgs, (a, a, a, a))
        off = rng.randint(0, 2 * a + 1, size=(n, 2))
        rows = torch.as_tensor(off[:, 0], device=imgs.device)[:, None] + \
            torch.arange(h, device=imgs.device)[None, :]
        cols = torch.as_tensor(off[:, 1], device=imgs.device)[:, None] + \
            torch.arange(w, device=imgs.device)[None, :]
        idx = torch.arange(n, device=imgs.device)[:, None, None]
        return padded[idx, rows[:, :, None], cols[:, None, :]]

    def _make_optimizer(self, net: GSMNet, max_iter: int):
        lr = float(self.learning_rate)
        if self.optimizer == "sgd":
            opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=float(self.momentum))
        else:
            opt = torch.optim.Adam(net.parameters(), lr=lr)
        if self.lr_schedule == "constant":
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0)
        elif self.lr_schedule == "step":
            sched = torch.optim.lr_scheduler.MultiStepLR(
                opt, milestones=[max(1, max_iter // 2), max(2, (3 * max_iter) // 4)], gamma=0.1)
        else:
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_iter)
        return opt, sched

    # ----------------------------------------------------------------------------- fit
    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        device = self._resolve_device()
        input_shape = self._check_input_shape(data)
        X, ix = _dedupe(data.X, data.ix)
        Y, iy = _dedupe(data.Y, data.iy)
        ids_x, ids_y, n_conflicts = identities_from_pairs(X.shape[0], Y.shape[0], ix, iy, y)
        if n_conflicts:
            warnings.warn(
                f"{n_conflicts} pair(s) labelled -1 join images that positive pairs put in one "
                "identity; DeepGSM's batch generator treats them as the same identity.",
                UserWarning, stacklevel=user_stacklevel(),
            )
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(2**31 - 1))
        sampler = CrossDomainBatchSampler(ids_x, ids_y, int(self.n_identities),
                                          int(self.n_images_x), int(self.n_images_y),
                                          random_state=rng)
        self.n_identities_ = int(sampler.identities.size)
        max_iter = int(self.max_iter)
        n_pairs = self.n_pairs
        if n_pairs is None:
            k = sampler.n_identities
            n_pairs = max(2, (k * (int(self.n_images_x) + int(self.n_images_y))) // 2)

        net = self._build_net(input_shape)
        net.initialize(self.init, torch.Generator().manual_seed(seed))
        net.to(device)
        opt, sched = self._make_optimizer(net, max_iter)
        start, curve = 0, []
        path = self.checkpoint_path
        if self.resume and path is not None and os.path.exists(path):
            state = torch.load(path, map_location=device, weights_only=False)
            net.load_state_dict(state["net"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            rng.set_state(state["rng"])
            start, curve = int(state["iteration"]), list(state["loss_curve"])

        X_t = torch.as_tensor(X, dtype=torch.float32, device=device)
        Y_t = torch.as_tensor(Y, dtype=torch.float32, device=device)
        window = int(self.n_iter_no_change)
        converged = False
        stop_reason = "max_iter"
        t0 = time.perf_counter()
        if self.verbose:
            print(f"{'iter':>7} {'objective':>11} {'lr':>9} {'time (s)':>9}")
        bar = tqdm(total=max_iter, initial=start, disable=not self.progress, desc="DeepGSM",
                   leave=False)
        it = start
        with _deterministic(device.type == "cpu"):
            net.train()
            for it in range(start, max_iter):
                if self.batch_mode == "sample":
                    b, hinge_of = sampler.sample(), gsm_hinge_sample_based
                else:
                    b, hinge_of = sampler.sample_pairs(int(n_pairs)), gsm_hinge_pair_based
                xb = self._shift(X_t[torch.as_tensor(b.ix, device=device)], rng)
                yb = self._shift(Y_t[torch.as_tensor(b.iy, device=device)], rng)
                TX, TY, fv = net(xb, yb)
                hinge = hinge_of(
                    TX, TY, fv,
                    torch.as_tensor(np.where(b.same, -1.0, 1.0), dtype=torch.float32,
                                    device=device),
                    torch.as_tensor(b.weight, dtype=torch.float32, device=device))
                loss = hinge + self._penalty(net)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                curve.append(float(loss.detach()))
                bar.update(1)
                done = it + 1
                if path is not None and (done % int(self.checkpoint_every) == 0
                                         or done == max_iter):
                    self._save_checkpoint(path, net, opt, sched, rng, done, curve)
                if self.verbose and (done % int(self.checkpoint_every) == 0 or done == 1):
                    print(f"{done:>7} {np.mean(curve[-window:]):>11.5f} "
                          f"{opt.param_groups[0]['lr']:>9.2e} {time.perf_counter() - t0:>9.1f}")
                if self.tol is not None and len(curve) >= 2 * window and done % window == 0:
                    prev = np.mean(curve[-2 * window:-window])
                    cur = np.mean(curve[-window:])
                    if cur > prev - float(self.tol):
                        converged, stop_reason = True, "tol"
                        break
                if self.max_time is not None and time.perf_counter() - t0 >= self.max_time:
                    stop_reason = "max_time"
                    break
        bar.close()
        if path is not None and stop_reason != "max_iter":
            self._save_checkpoint(path, net, opt, sched, rng, it + 1, curve)
        self.train_time_ = time.perf_counter() - t0
        net.eval()
        self.net_ = net
        self.device_ = device
        self.input_shape_ = input_shape
        self.loss_curve_ = curve
        self.n_iter_ = len(curve)
        self.stop_reason_ = stop_reason
        with torch.no_grad():
            self.f_ = net.f_value()
        if stop_reason == "max_iter" and not converged and self.tol is not None \
                and self.n_iter_ > start:
            warnings.warn(
                f"DeepGSM: max_iter={max_iter} iterations reached before the objective "
                f"levelled off (tol={self.tol}); increase max_iter.",
                ConvergenceWarning, stacklevel=user_stacklevel(),
            )

    @staticmethod
    def _save_checkpoint(path, net, opt, sched, rng, iteration, curve) -> None:
        tmp = f"{path}.tmp"
        torch.save({"net": net.state_dict(), "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(), "rng": rng.get_state(),
                    "iteration": int(iteration), "loss_curve": list(curve)}, tmp)
        os.replace(tmp, path)

    # -------------------------------------------------------------------------- towers
    def _forward_blocks(self, images: np.ndarray, fn) -> np.ndarray:
        out = []
        with torch.no_grad():
            for sl in gen_batches(images.shape[0], int(self.eval_batch_size)):
                t = torch.as_tensor(images[sl], dtype=torch.float32, device=self.device_)
                out.append(fn(t).double().cpu().numpy())
        return np.concatenate(out)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return self._forward_blocks(X, self.net_.embed_x)

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._forward_blocks(Y, self.net_.embed_y)

    def _rowwise_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_rowwise(FX, FY, self.f_)

    def _matrix_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        return gsm_matrix(FX, FY, self.f_)

    def features_x(self, X) -> np.ndarray:
        """The learned deep features f₁(x) (L2-normalised, ``hidden_units`` wide)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(X, "X", side="x"),
                                    self.net_.features_x)

    def features_y(self, Y) -> np.ndarray:
        """The learned deep features f₂(y) (L2-normalised, ``hidden_units`` wide)."""
        check_is_fitted(self)
        return self._forward_blocks(self._check_samples(Y, "Y", side="y"),
                                    self.net_.features_y)

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
            net = self._build_net(self.input_shape_)
            net.load_state_dict(net_state)
            net.to(dev).eval()
            self.net_ = net
            self.device_ = dev
