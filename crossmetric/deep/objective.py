"""The objective of one DeepGSM round: balanced GSM hinge (eq. 6, 14-18) and eq. (7)'s penalties.

The pair weights are those of the feature-based GSM (:mod:`crossmetric._solvers.batches`): positives
and (kept) negatives weighted half and half, with ``hard_negatives`` only the hardest
negatives of every row and column (:func:`crossmetric._solvers.batches.hardest_negatives`).
"""

from __future__ import annotations

import numpy as np
import torch

from crossmetric._solvers.batches import balanced_weights, hardest_negatives
from crossmetric.deep.losses import similarity_matrix, similarity_rows
from crossmetric.deep.networks import GSMNet

__all__ = ["mined_weights", "penalised", "penalty", "round_hinge"]


def mined_weights(same: np.ndarray, S: np.ndarray, k: int | None) -> np.ndarray:
    """Balanced weights over positives and (with ``k``) each image's k hardest negatives."""
    return balanced_weights(same, None if k is None else hardest_negatives(S, same, k))


def round_hinge(TX, TY, f, gx: np.ndarray, gy: np.ndarray, *, batch_mode: str,
                hard_negatives: int | None, cache=None) -> torch.Tensor:
    """The balanced GSM hinge of a round. ``cache`` (a dict kept for one fit) holds the
    labels and weights of each pattern of same-identity pairs already seen: without hard
    negatives they depend on that pattern only, and most rounds repeat a few patterns."""
    dev = TX.device
    if batch_mode == "pair":
        S = similarity_rows(TX, TY, f)
        same = gx == gy
    else:
        S = similarity_matrix(TX, TY, f)
        same = gx[:, None] == gy[None, :]
    mined = batch_mode != "pair" and hard_negatives is not None
    key = None if cache is None or mined else (same.shape, same.tobytes())
    if key is not None and key in cache:
        ell, w = cache[key]
    else:
        if mined:
            w = mined_weights(same, S.detach().cpu().numpy(), hard_negatives)
        else:
            w = balanced_weights(same)
        ell = torch.as_tensor(np.where(same, -1.0, 1.0), dtype=S.dtype, device=dev)
        w = torch.as_tensor(w, dtype=S.dtype, device=dev)
        if key is not None:
            if len(cache) >= 64:
                cache.clear()
            cache[key] = (ell, w)
    return (w * torch.clamp(1.0 - ell * S, min=0.0)).sum()


def penalised(net: GSMNet) -> tuple[list, list]:
    """The tensors of eq. (7)'s penalties: W (feature weights, no biases) and Φ (a
    descriptor branch's scale is neither)."""
    return ([p for n, p in net.named_parameters()
             if not n.startswith("head.") and not n.endswith("bias")
             and n != "descriptor_log_scale"],
            list(net.head.params.values()))


def penalty(net: GSMNet, weight_decay: float, mu: float, tensors=None) -> torch.Tensor:
    """``λ‖W‖² + μ‖Φ‖²`` of eq. (7) (biases of W and the constant f not penalised).

    ``tensors``: :func:`penalised` of ``net``, computed once per fit by the caller.
    """
    ws, phis = penalised(net) if tensors is None else tensors
    pen_w = sum((p * p).sum() for p in ws)
    pen_phi = sum((p * p).sum() for p in phis)
    return float(weight_decay) * pen_w + float(mu) * pen_phi
