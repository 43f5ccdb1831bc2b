"""DeepGSM's network from its parameters: the paper's, a user module, a named or saved backbone.

``p`` is an object with DeepGSM's parameters as attributes (see :mod:`crossmetric.deep.params`).
"""

from __future__ import annotations

import copy

import torch

from crossmetric.deep.networks import GSMNet
from crossmetric.deep.params import named_backbone

__all__ = ["build_net", "load_backbone_file"]


def build_net(p, input_shape, channels=(1, 1), *, seed: int = 0, load: bool = False,
              descriptor_width: int = 0) -> GSMNet:
    """The network; ``load``: read ``weights`` into a named or module backbone (training
    only: a fitted or unpickled model restores its own state afterwards);
    ``descriptor_width``: the width of its descriptor branch (0: none)."""
    from crossmetric.deep.backbones import build_backbone, load_weights

    bb = p.backbone
    if named_backbone(p):
        try:
            bb = build_backbone(bb, p.weights if load else None, random_state=seed)
        except ValueError as exc:
            extra = (" It is no state-dict file either." if "not a known architecture"
                     in str(exc) else "")
            raise ValueError(f"{exc}{extra}") from None
    elif isinstance(bb, torch.nn.Module):
        bb = copy.deepcopy(bb)
        if load and p.weights is not None:
            load_weights(bb, p.weights)
    elif isinstance(bb, (tuple, list)):
        bb = tuple(copy.deepcopy(tuple(bb)))  # one copy: shared submodules stay shared
    else:
        bb = None
    return GSMNet(input_shape, int(p.hidden_units), p.structure, float(p.f),
                  bool(p.learn_f), channels=channels, backbone=bb,
                  descriptor_width=descriptor_width)


def load_backbone_file(p, net: GSMNet) -> bool:
    """Start ``net`` from the state-dict file ``p.backbone``: its feature layers, and its
    GSM head (the similarity sub-network, ``head.*``) when the file holds one that fits
    (same ``structure``, width and ``learn_f``). A head that does not fit is not loaded and
    a one-line ``UserWarning`` says so. Returns whether the head was loaded."""
    import warnings

    from crossmetric.deep.backbones import _read_state_dict

    path = p.backbone
    try:
        state = _read_state_dict(path)   # weights_only; a crafted file is one line
    except ValueError as exc:
        raise ValueError(f"backbone={str(path)!r}: {exc}") from None
    head = {k: v for k, v in state.items() if k.startswith("head.")}
    state = {k: v for k, v in state.items() if not k.startswith("head.")}
    own = {k: v for k, v in net.state_dict().items()
           if not k.startswith("head.") and k != "descriptor_log_scale"}
    bad = [k for k in own if k not in state or state[k].shape != own[k].shape]
    if bad:
        raise ValueError(f"backbone={str(path)!r} does not fit this network (input_shape, "
                         f"channels, hidden_units): missing or misshaped {bad[:4]}.")
    own_head = {k: v for k, v in net.state_dict().items() if k.startswith("head.")}
    fits = bool(head) and set(head) == set(own_head) and all(
        head[k].shape == own_head[k].shape for k in head)
    if head and not fits:
        warnings.warn(f"backbone={str(path)!r} also holds a GSM head (head.*) that does not "
                      f"fit this network (structure {net.head.structure!r}, width "
                      f"{net.head.r}); only its feature layers are loaded and the similarity "
                      "sub-network starts anew.", UserWarning, stacklevel=2)
    net.load_state_dict({**state, **(head if fits else {})}, strict=False)
    return fits
