"""How :class:`~crossmetric.deep.model.DeepGSM` fits: its two entry points and its training run.

:class:`FittingMixin` holds ``fit`` (pairs, through the pair-learner base), ``fit_identities``
(identity-labelled images or files), the parameter and device checks, the network of the
parameters, and ``_train_and_set``: Algorithm 2 here or on ``n_processes`` spawned processes
(:mod:`crossmetric.deep.training`), then the fitted attributes. The estimator's parameters and
their documentation stay in :mod:`crossmetric.deep.model`.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from crossmetric._utils.checks import user_stacklevel
from crossmetric.deep.build import build_net
from crossmetric.deep.data import is_file_list
from crossmetric.deep.descriptor import describe, fit_descriptor
from crossmetric.deep.distributed import active_group
from crossmetric.deep.inputs import check_layout, pair_identities, training_sources
from crossmetric.deep.networks import GSMNet
from crossmetric.deep.objective import mined_weights, round_hinge
from crossmetric.deep.params import check_params, resolve_device
from crossmetric.deep.training import spawn_training, train
from crossmetric.pairs._pair_data import PairData

__all__ = ["FittingMixin"]


class FittingMixin:
    """``fit``, ``fit_identities`` and the training run of DeepGSM (see the module docstring).

    Comes before the pair-learner base in the bases: ``fit`` adds ``groups`` and hands the
    pairs on to :meth:`crossmetric._base.PairLearnerMixin.fit`, which calls ``_fit`` here.
    """

    # ------------------------------------------------------------------------- checks
    def _check_params(self) -> None:
        check_params(self)

    def _resolve_device(self, rank: int = 0) -> torch.device:
        return resolve_device(self, rank)

    def _build_net(self, input_shape, channels=(1, 1), *, seed: int = 0,
                   load: bool = False) -> GSMNet:
        """The network of these parameters (:func:`crossmetric.deep.build.build_net`), with
        the fitted descriptor branch's width."""
        return build_net(self, input_shape, channels, seed=seed, load=load,
                         descriptor_width=getattr(self, "descriptor_width_", 0))

    # ----------------------------------------------------------------------------- fit
    def fit(self, pairs, y, groups=None):
        """Train from pair constraints (see DeepGSM's docstring for the input forms).

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
        # ``_fit`` merges identical images itself (``deep.inputs.dedupe``: value-sorted
        # distinct images, so the fit still does not depend on the input form) and keeps each
        # image's row in the caller's arrays, which ``groups`` refers to.
        return data

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        self._check_params()
        self._train_and_set(*pair_identities(data, y, getattr(self, "_groups", None)))

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
        srcs = training_sources(X, ids_x, Y, ids_y)
        self._train_and_set(*srcs)
        h, w = self.input_shape_
        self._sample_shape_x_ = (h, w) if self.channels_[0] == 1 else (h, w, self.channels_[0])
        self._sample_shape_y_ = (h, w) if self.channels_[1] == 1 else (h, w, self.channels_[1])
        if not is_file_list(srcs[0]):
            self._sample_shape_x_ = tuple(srcs[0].shape[1:])
        if not is_file_list(srcs[2]):
            self._sample_shape_y_ = tuple(srcs[2].shape[1:])
        self.classes_ = np.array([-1, 1])
        self.threshold_ = 0.0
        return self

    # ---------------------------------------------------------------------- training
    def _train_and_set(self, x, ids_x, y, ids_y) -> None:
        """Train (here, or on ``n_processes`` spawned processes) and set the attributes."""
        shape, channels = check_layout(x, y, self.input_shape, self.backbone)
        seed = int(check_random_state(self.random_state).randint(2**31 - 1))
        rank, world = active_group()
        args = (x, ids_x, y, ids_y, shape, channels, seed)
        descriptor, descriptors = self._fit_descriptor(x, y)
        if int(self.n_processes) > 1:
            if world > 1:
                raise ValueError("n_processes > 1 cannot be used inside an initialised "
                                 "torch.distributed process group (torchrun); leave it at 1.")
            result = spawn_training(self.get_params(deep=False), args, int(self.n_processes),
                                    self._resolve_device())
        else:
            result = self._train(*args, rank=rank, world=world, descriptors=descriptors)
        self.descriptor_ = descriptor
        self.init_ = "random" if descriptor is None else "descriptor"
        self.descriptor_width_ = 0 if descriptors is None else int(descriptors[0].shape[1])
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
        # one meaning across learners: a float per validation check, higher is better
        self.validation_scores_ = [float(s) for _, s in result["validation_scores"]]
        self.validation_iterations_ = [int(i) for i, _ in result["validation_scores"]]
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

    def _fit_descriptor(self, x, y):
        """``(fitted descriptor, (u_x, u_y))`` of the training images, or ``(None, None)``
        without ``descriptor`` (:mod:`crossmetric.deep.descriptor`)."""
        if self.descriptor is None:
            return None, None
        if is_file_list(x) or is_file_list(y):
            raise ValueError("descriptor needs the training images as arrays, got a list of "
                             "files; load them first (crossmetric.datasets.load_image_folder).")
        if int(self.n_processes) > 1:
            raise ValueError("descriptor trains on one process; leave n_processes at 1.")
        descriptor = fit_descriptor(self.descriptor, x)
        return descriptor, (describe(descriptor, x), describe(descriptor, y))

    def _train(self, x, ids_x, y, ids_y, shape, channels, seed, *, rank=0, world=1,
               descriptors=None) -> dict:
        """Algorithm 2 on one process (:func:`crossmetric.deep.training.train`)."""
        return train(self.get_params(deep=False), x, ids_x, y, ids_y, shape, channels, seed,
                     rank=rank, world=world, descriptors=descriptors)

    _mined_weights = staticmethod(mined_weights)

    def _hinge(self, TX, TY, f, gx: np.ndarray, gy: np.ndarray, cache=None) -> torch.Tensor:
        """The balanced GSM hinge of a round (:func:`crossmetric.deep.objective.round_hinge`)."""
        return round_hinge(TX, TY, f, gx, gy, batch_mode=self.batch_mode,
                           hard_negatives=self.hard_negatives, cache=cache)
