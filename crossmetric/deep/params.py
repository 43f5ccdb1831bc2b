"""DeepGSM's parameters: validation, device and precision, and the settings a checkpoint records.

Every function takes ``p``, an object with DeepGSM's parameters as attributes (the estimator,
or :func:`namespace` of its ``get_params()`` in a spawned training process), so that the
training loop (:mod:`crossmetric.deep.training`) needs no estimator.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import torch

from crossmetric._utils.checks import check_positive_int, check_positive_scalar
from crossmetric.deep.augment import make_augmentation
from crossmetric.deep.schedule import OPTIMIZERS, SCHEDULES
from crossmetric.learners._gsm_measure import STRUCTURES

__all__ = ["BATCH_MODES", "INITS", "RUN_ONLY", "check_params", "describe", "namespace",
           "named_backbone", "resolve_device", "settings", "use_amp"]

BATCH_MODES = ("sample", "pair")
INITS = ("default", "paper")
#: parameters that do not change what a training run computes (free to differ on resume)
RUN_ONLY = ("checkpoint_path", "checkpoint_every", "resume", "progress", "verbose",
            "eval_batch_size", "max_time", "device", "n_processes", "num_workers",
            "image_cache_mb", "preprocessor", "test_flip")


def namespace(params: dict) -> SimpleNamespace:
    """``params`` (``get_params(deep=False)``) as attributes, like the estimator has them."""
    return SimpleNamespace(**params)


def check_params(p) -> None:
    """One-line ``ValueError`` naming the first invalid parameter of ``p``."""
    for name, allowed in (("structure", tuple(STRUCTURES)), ("batch_mode", BATCH_MODES),
                          ("optimizer", OPTIMIZERS), ("lr_schedule", SCHEDULES),
                          ("init", INITS)):
        if getattr(p, name) not in allowed:
            raise ValueError(
                f"{name} must be one of {list(allowed)}, got {getattr(p, name)!r}."
            )
    check_positive_int(p.hidden_units, "hidden_units")
    check_positive_int(p.n_identities, "n_identities", minimum=2)
    check_positive_int(p.n_images_x, "n_images_x")
    check_positive_int(p.n_images_y, "n_images_y")
    if p.n_pairs is not None:
        check_positive_int(p.n_pairs, "n_pairs", minimum=2)
    check_positive_int(p.max_iter, "max_iter")
    if p.max_time is not None:
        check_positive_scalar(p.max_time, "max_time")
    check_positive_scalar(p.learning_rate, "learning_rate")
    check_positive_scalar(p.momentum, "momentum", allow_zero=True)
    check_positive_scalar(p.weight_decay, "weight_decay", allow_zero=True)
    check_positive_scalar(p.mu, "mu", allow_zero=True)
    make_augmentation(p.augment, (8, 8))  # validates augment
    if p.hard_negatives is not None:
        check_positive_int(p.hard_negatives, "hard_negatives")
    if p.average_from is not None and not (
            isinstance(p.average_from, (float, int, np.floating))
            and not isinstance(p.average_from, bool) and 0 <= p.average_from < 1):
        raise ValueError(f"average_from must be None or a fraction in [0, 1) of max_iter, "
                         f"got {p.average_from!r}.")
    if p.early_stopping not in ("auto", True, False):
        raise ValueError(f"early_stopping must be 'auto', True or False, got "
                         f"{p.early_stopping!r}.")
    if not (isinstance(p.validation_fraction, (float, int))
            and 0 < p.validation_fraction < 1):
        raise ValueError(f"validation_fraction must be in (0, 1), got "
                         f"{p.validation_fraction!r}.")
    if p.validation_every is not None:
        check_positive_int(p.validation_every, "validation_every")
    check_positive_int(p.patience, "patience")
    if p.tol is not None:
        check_positive_scalar(p.tol, "tol", allow_zero=True)
    check_positive_int(p.n_iter_no_change, "n_iter_no_change")
    check_positive_int(p.checkpoint_every, "checkpoint_every")
    check_positive_int(p.eval_batch_size, "eval_batch_size")
    check_positive_int(p.n_processes, "n_processes")
    check_positive_int(p.num_workers, "num_workers", minimum=0)
    check_positive_scalar(p.image_cache_mb, "image_cache_mb", allow_zero=True)
    if p.amp not in ("auto", True, False):
        raise ValueError(f"amp must be 'auto', True or False, got {p.amp!r}.")
    if isinstance(p.f, bool) or not isinstance(p.f, (int, float, np.floating)) \
            or not np.isfinite(p.f):
        raise ValueError(f"f must be a finite real number, got {p.f!r}.")
    _check_backbone(p)
    if p.descriptor is not None and not (hasattr(p.descriptor, "fit")
                                         and hasattr(p.descriptor, "transform")):
        raise ValueError(f"descriptor must be None or a transformer of images with fit and "
                         f"transform (e.g. crossmetric.features.HOG()), got "
                         f"{type(p.descriptor).__name__}.")


def _check_backbone(p) -> None:
    bb = p.backbone
    ok = (bb is None or isinstance(bb, (torch.nn.Module, str, os.PathLike))
          or (isinstance(bb, (tuple, list)) and len(bb) == 2
              and all(isinstance(m, torch.nn.Module) for m in bb)))
    if not ok:
        raise ValueError("backbone must be None, a torch.nn.Module, a pair of modules (one "
                         f"per domain), a state-dict file path or an architecture name, "
                         f"got {type(bb).__name__}.")
    if p.weights is not None:
        if not isinstance(p.weights, (str, os.PathLike)):
            raise ValueError(f"weights must be a file path or None, got "
                             f"{type(p.weights).__name__}.")
        if not (named_backbone(p) or isinstance(bb, torch.nn.Module)):
            raise ValueError("weights needs a backbone given by name (e.g. 'resnet18') or "
                             "as a module; the paper's network takes a state-dict file "
                             "as backbone=PATH.")


def named_backbone(p) -> bool:
    """``backbone`` is an architecture name (a string that is not an existing file)."""
    return isinstance(p.backbone, str) and not os.path.exists(p.backbone)


def resolve_device(p, rank: int = 0) -> torch.device:
    """The torch device of ``p.device`` for process ``rank`` (one GPU per process)."""
    if p.device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", rank % torch.cuda.device_count())
        return torch.device("cpu")
    try:
        dev = torch.device(p.device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu' or a torch device, got "
                         f"{p.device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={p.device!r} asked for CUDA, which is not available.")
    if dev.type == "cuda" and dev.index is None and rank:
        dev = torch.device("cuda", rank % torch.cuda.device_count())  # one GPU per process
    return dev


def use_amp(p, device: torch.device) -> bool:
    """Whether training on ``device`` uses mixed precision (``amp``)."""
    if p.amp is True and device.type != "cuda":
        raise ValueError(f"amp=True needs a CUDA device; training runs on {device}. Use "
                         "amp='auto' (mixed precision on CUDA only) or amp=False.")
    return device.type == "cuda" and p.amp is not False


def describe(value):
    """A comparable description of a parameter value (modules by class and shapes)."""
    if isinstance(value, torch.nn.Module):
        shapes = [tuple(v.shape) for v in value.state_dict().values()]
        return f"{type(value).__name__}{shapes}"
    if isinstance(value, (list, tuple)):
        return type(value)(describe(v) for v in value)
    if isinstance(value, np.random.RandomState):
        return "RandomState"
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def settings(params: dict) -> dict:
    """Every parameter that changes what training computes (recorded in checkpoints)."""
    return {k: describe(v) for k, v in sorted(params.items()) if k not in RUN_ONLY}
