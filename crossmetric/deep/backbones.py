"""Backbones by name, with weights from a file on disk; their pooled features as embeddings.

* :func:`build_backbone` -- any torchvision classification architecture by name
  (``torchvision.models.get_model(name, weights=None)``), else a timm one when timm is
  installed (``timm.create_model(name, pretrained=False)``), randomly initialised from
  ``random_state``; nothing is ever downloaded. The classifier's last linear layer is replaced
  by the identity, so the module returns the features that fed it (the global-pooled features
  of ResNets, EfficientNets, ConvNeXts, the class token of ViTs; VGG's fc7). Grey images
  (one channel) are repeated to the three channels these architectures take.
* :func:`load_weights` -- a state dict from a local file, ``torch.load(weights_only=True)``
  (no code runs), into a module; a file that does not fit raises a one-line ``ValueError``
  naming the file and the first mismatched keys. Checkpoints that wrap the state dict under
  ``"state_dict"`` / ``"model"`` or prefix its keys with ``"module."`` (DataParallel) or
  ``"model."`` (a saved :class:`BackboneFeatures`) are unwrapped;
  the classifier's keys may be absent (a checkpoint of the feature part only).
* :func:`extract_features` -- embeddings of an image array, in batches, for the shallow
  learners (``crossmetric features`` on the command line).

``DeepGSM(backbone="resnet18", weights="file.pth")`` builds its towers with these.

torchvision note: the torchvision 0.28.0 wheel on PyPI is built against CUDA torch; next to the
CPU wheel of torch 2.13.0 its compiled operators do not load and ``import torchvision`` fails
(an unconditional ``register_fake("torchvision::nms")``). Names then resolve through timm
when installed, else the error says why.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import torch
from torch import nn

__all__ = ["build_backbone", "load_weights", "extract_features", "write_embeddings",
           "BackboneFeatures", "IMAGENET_MEAN_STD"]


class BackboneFeatures(nn.Module):
    """``x ↦ model(x)`` with grey inputs repeated to ``in_channels`` and optional input
    standardisation ``(x − mean) / std`` per channel."""

    def __init__(self, model: nn.Module, in_channels: int | None = 3, mean=None, std=None):
        super().__init__()
        self.model = model
        self.in_channels = in_channels
        self.register_buffer("mean", None if mean is None else
                             torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", None if std is None else
                             torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_channels is not None and x.shape[1] == 1 and self.in_channels != 1:
            x = x.expand(-1, self.in_channels, -1, -1)
        if self.mean is not None:
            x = (x - self.mean) / self.std
        return self.model(x)


#: ``normalize="imagenet"``: the channel statistics torchvision's and timm's weights expect
IMAGENET_MEAN_STD = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def _torchvision_models():
    """``torchvision.models``, or the reason it cannot be imported."""
    try:
        import torchvision.models as models
    except Exception as exc:  # noqa: BLE001 - any import failure is reported, not raised
        return None, f"torchvision does not import ({type(exc).__name__}: " \
                     f"{' '.join(str(exc).split())})"
    return models, None


def _timm():
    try:
        import timm
    except Exception as exc:  # noqa: BLE001
        return None, f"timm is not available ({type(exc).__name__})"
    return timm, None


def _classifier_path(model: nn.Module) -> str | None:
    """Dotted name of the final linear layer: the one of the usual head attributes (``fc``,
    ``head``, ``heads``, ``classifier``), else the last ``nn.Linear`` registered."""
    names = dict(model.named_modules())
    for attr in ("fc", "head", "heads", "classifier"):
        mod = names.get(attr)
        if isinstance(mod, nn.Linear):
            return attr
        if mod is not None:
            inner = [n for n, m in mod.named_modules() if isinstance(m, nn.Linear)]
            if inner:
                return f"{attr}.{inner[-1]}"
    linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    return linear[-1] if linear else None


def _set_module(model: nn.Module, path: str, new: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


def _first_conv_channels(model: nn.Module) -> int | None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            return int(m.in_channels)
    return None


def build_backbone(name: str, weights=None, *, normalize: str | None = None,
                   random_state: int | None = 0) -> BackboneFeatures:
    """A classification architecture by name, as a feature extractor (module docstring).

    Parameters
    ----------
    name : str
        A torchvision model name (``torchvision.models.list_models()``: ``"resnet18"``,
        ``"efficientnet_b0"``, ``"vit_b_16"``, ...) or, when torchvision has no such model or
        does not import, a timm model name.
    weights : path or None
        State dict of the whole classifier or of its feature part (:func:`load_weights`);
        ``None``: random initialisation.
    normalize : {"imagenet", None}, default=None
        Standardise inputs (in [0, 1]) with ImageNet's channel means and deviations, as
        ImageNet-trained weights expect.
    random_state : int or None, default=0
        Seed of the random initialisation (the global torch generator is left as it was).

    Raises
    ------
    ValueError
        Unknown name (the message says which libraries were searched and why one was not),
        or weights that do not fit.
    """
    if normalize not in (None, "imagenet"):
        raise ValueError(f"normalize must be None or 'imagenet', got {normalize!r}.")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"backbone must be an architecture name, got {name!r}.")
    model, why = None, []
    with _seeded(random_state):
        models, reason = _torchvision_models()
        if models is not None and name in models.list_models():
            model = models.get_model(name, weights=None)
        elif reason is not None:
            why.append(reason)
        else:
            why.append("not a torchvision model")
        if model is None:
            timm, reason = _timm()
            if timm is not None and timm.is_model(name):
                model = timm.create_model(name, pretrained=False)
            else:
                why.append(reason or "not a timm model")
    if model is None:
        raise ValueError(f"backbone {name!r} is not a known architecture: {'; '.join(why)}.")
    head = _classifier_path(model)
    if weights is not None:
        load_weights(model, weights, optional_prefix=head)
    if head is not None:
        _set_module(model, head, nn.Identity())
    mean, std = IMAGENET_MEAN_STD if normalize == "imagenet" else (None, None)
    return BackboneFeatures(model, _first_conv_channels(model), mean, std)


@contextlib.contextmanager
def _seeded(seed):
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def _read_state_dict(path) -> dict:
    where = f"weights {os.fspath(path)!r}"
    if not os.path.isfile(path):
        raise ValueError(f"{where}: no such file.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise ValueError(f"{where}: not a state dict that loads without running code "
                         f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}).") from None
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(state, dict) and isinstance(state.get(key), dict) and not any(
                isinstance(v, torch.Tensor) for v in state.values()):
            state = state[key]
            break
    if not isinstance(state, dict) or not state or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise ValueError(f"{where}: expected a state dict (names -> tensors), e.g. "
                         "torch.save(model.state_dict(), path).")
    return state


def load_weights(module: nn.Module, path, *, optional_prefix: str | None = None) -> nn.Module:
    """Load a state dict from ``path`` into ``module`` (in place), checking that it fits.

    Parameters
    ----------
    module : torch.nn.Module
    path : path-like
        Read with ``torch.load(path, weights_only=True)``.
    optional_prefix : str, optional
        Keys under this submodule may be missing from the file (a checkpoint of the features
        without the classifier).

    Raises
    ------
    ValueError
        Unreadable file, not a state dict, or keys that are missing, unexpected or of another
        shape: one line with the file and the first mismatched keys.

    Examples
    --------
    >>> import os, tempfile, torch
    >>> from crossmetric.deep.backbones import load_weights
    >>> net = torch.nn.Linear(3, 2)
    >>> path = os.path.join(tempfile.mkdtemp(), "w.pth")
    >>> torch.save(torch.nn.Linear(3, 2).state_dict(), path)
    >>> _ = load_weights(net, path)
    >>> torch.save(torch.nn.Linear(4, 2).state_dict(), path)
    >>> load_weights(net, path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: weights '...w.pth' do not fit Linear: misshaped weight (2x4 in the file, ...
    """
    state = _read_state_dict(path)
    own = module.state_dict()
    for wrapper in ("module.", "model."):  # DataParallel, BackboneFeatures
        if not any(k in own for k in state) and all(k.startswith(wrapper) for k in state):
            state = {k[len(wrapper):]: v for k, v in state.items()}
    prefix = None if not optional_prefix else optional_prefix + "."
    missing = [k for k in own if k not in state and not (prefix and k.startswith(prefix))]
    unexpected = [k for k in state if k not in own]
    misshaped = [k for k in own if k in state and state[k].shape != own[k].shape]
    if missing or unexpected or misshaped:
        parts = []
        if misshaped:
            k = misshaped[0]
            parts.append(f"misshaped {', '.join(misshaped[:3])} ({_shape(state[k])} in the "
                         f"file, {_shape(own[k])} in the model)")
        if missing:
            parts.append(f"missing {', '.join(missing[:3])}"
                         f"{f' and {len(missing) - 3} more' if len(missing) > 3 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:3])}"
                         f"{f' and {len(unexpected) - 3} more' if len(unexpected) > 3 else ''}")
        raise ValueError(f"weights {os.fspath(path)!r} do not fit {type(module).__name__}: "
                         f"{'; '.join(parts)}.")
    module.load_state_dict(state, strict=False)
    return module


def _shape(t: torch.Tensor) -> str:
    return "x".join(str(s) for s in t.shape) if t.ndim else "scalar"


def extract_features(module: nn.Module, images, *, batch_size: int = 64,
                     device: str = "cpu") -> np.ndarray:
    """Embeddings ``module(x)`` (flattened, float32) of images ``(n, h, w)`` or
    ``(n, h, w, c)`` (uint8 0-255 or float in [0, 1]), in evaluation mode and batches.

    Returns
    -------
    ndarray of shape (n, n_features), float32
    """
    from crossmetric.deep.data import to_nchw
    from crossmetric.features import check_images

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    arr = np.asarray(images)
    if arr.ndim == 4 and arr.shape[-1] not in (1, 3):
        raise ValueError(f"images must be (n, h, w) or (n, h, w, 1 or 3), got {arr.shape}.")
    arr = check_images(arr[..., 0] if arr.ndim == 4 and arr.shape[-1] == 1 else arr)
    was = module.training
    module.eval().to(device)
    out = []
    try:
        with torch.no_grad():
            for start in range(0, arr.shape[0], batch_size):
                x = to_nchw(arr[start:start + batch_size]).to(device)
                out.append(module(x).flatten(1).float().cpu().numpy())
    finally:
        module.train(was)
    return np.concatenate(out).astype(np.float32, copy=False)


def write_embeddings(path, features: np.ndarray, **columns) -> None:
    """Save ``features`` as array ``X`` of an ``.npz`` file, with per-row ``columns`` (ids,
    domains, file names), atomically; the file loads without pickles
    (``np.load(path)``, :func:`crossmetric.datasets.load_features`)."""
    from crossmetric._utils.atomic_io import atomic_open

    arrays = {"X": np.asarray(features)}
    for name, col in columns.items():
        col = np.asarray(col)
        if col.dtype == object:
            col = col.astype(str)
        if col.shape[0] != arrays["X"].shape[0]:
            raise ValueError(f"{name} has {col.shape[0]} rows, the features "
                             f"{arrays['X'].shape[0]}.")
        arrays[name] = col
    with atomic_open(path, "wb") as fh:   # a file object: np.savez appends no extension
        np.savez(fh, **arrays)
