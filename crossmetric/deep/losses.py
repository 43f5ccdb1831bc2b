"""The generalized similarity S (eq. 12) and the GSM hinge (eq. 6) on torch tensors.

The similarity components of a sample are ``x̃ = [L_A f₁(x), L_Cx f₁(x), dᵀf₁(x)]`` (eq. 10), a
row of ``2r + 1`` numbers; S aggregates one x̃ and one ỹ (eq. 12)::

    S = ‖P₁x̃‖² + ‖P₁ỹ‖² − 2 (P₂x̃)ᵀ(P₂ỹ) + 2 p₃ᵀx̃ + 2 p₃ᵀỹ + f.

Two forms of the same loss:

* **sample-based** (eq. 14): a batch of n_x + n_y samples is embedded once and S is formed for
  all n_x · n_y pairs as one matrix; autograd then sums each sample's gradient over its partners
  exactly as eq. (17)-(18) / Algorithm 1 do by hand;
* **pair-based** (eq. 13): a list of pairs, each with its own copy of both embeddings.

Labels follow eq. (4): ``ℓ = −1`` for the same identity, ``+1`` otherwise.
"""

from __future__ import annotations

import torch

__all__ = ["similarity_matrix", "similarity_rows", "gsm_hinge_sample_based",
           "gsm_hinge_pair_based"]


def _split(Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r = (Z.shape[1] - 1) // 2
    return Z[:, :r], Z[:, r:2 * r], Z[:, 2 * r]


def similarity_matrix(TX: torch.Tensor, TY: torch.Tensor, f) -> torch.Tensor:
    """S of eq. (12) for all pairs of rows of ``TX`` (n_x, 2r+1) and ``TY`` (n_y, 2r+1)."""
    ax, cx, dx = _split(TX)
    by, cy, ey = _split(TY)
    sx = (ax * ax).sum(1) + 2.0 * dx
    sy = (by * by).sum(1) + 2.0 * ey
    return sx[:, None] + sy[None, :] - 2.0 * (cx @ cy.T) + f


def similarity_rows(TX: torch.Tensor, TY: torch.Tensor, f) -> torch.Tensor:
    """S of eq. (12) between row ``p`` of ``TX`` and row ``p`` of ``TY``."""
    ax, cx, dx = _split(TX)
    by, cy, ey = _split(TY)
    return ((ax * ax).sum(1) + (by * by).sum(1) - 2.0 * (cx * cy).sum(1)
            + 2.0 * dx + 2.0 * ey + f)


def gsm_hinge_sample_based(TX: torch.Tensor, TY: torch.Tensor, f, ell: torch.Tensor,
                           weight: torch.Tensor) -> torch.Tensor:
    """``Σ_ab w_ab (1 − ℓ_ab S(x_a, y_b))₊`` over all n_x × n_y pairs of a batch (eq. 14).

    Parameters
    ----------
    TX, TY : Tensor of shape (n_x, 2r + 1), (n_y, 2r + 1)
        Similarity components of each sample, computed once.
    f : float or 0-d Tensor
    ell : Tensor of shape (n_x, n_y)
        −1 same identity, +1 different (eq. 4).
    weight : Tensor of shape (n_x, n_y)
        Weight of each pair (0 drops it).
    """
    S = similarity_matrix(TX, TY, f)
    return (weight * torch.clamp(1.0 - ell * S, min=0.0)).sum()


def gsm_hinge_pair_based(TXp: torch.Tensor, TYp: torch.Tensor, f, ell: torch.Tensor,
                         weight: torch.Tensor) -> torch.Tensor:
    """``Σ_p w_p (1 − ℓ_p S(x_p, y_p))₊`` over row-aligned pairs (eq. 13)."""
    S = similarity_rows(TXp, TYp, f)
    return (weight * torch.clamp(1.0 - ell * S, min=0.0)).sum()
