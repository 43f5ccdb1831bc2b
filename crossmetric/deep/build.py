"""DeepGSM's network from its parameters: the paper's, a user module, a named or saved backbone.

``p`` is an object with DeepGSM's parameters as attributes (see :mod:`crossmetric.deep.params`).
"""

from __future__ import annotations

import copy

import torch

from crossmetric.deep.networks import GSMNet
from crossmetric.deep.params import named_backbone

__all__ = ["build_net", "load_backbone_file"]


def build_net(p, input_shape, channels=(1, 1), *, seed: int = 0, load: bool = False) -> GSMNet:
    """The network; ``load``: read ``weights`` into a named or module backbone (training
    only: a fitted or unpickled model restores its own state afterwards)."""
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
                  bool(p.learn_f), channels=channels, backbone=bb)


def load_backbone_file(p, net: GSMNet) -> None:
    """Start ``net``'s feature layers from the state-dict file ``p.backbone``."""
    from crossmetric.deep.backbones import _read_state_dict

    path = p.backbone
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
