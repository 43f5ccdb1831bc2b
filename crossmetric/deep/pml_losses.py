"""The papers' objectives as PyTorch losses on embeddings, in pytorch-metric-learning's style.

Every loss is a :class:`torch.nn.Module` called as ::

    loss = loss_fn(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)

the calling convention of `pytorch-metric-learning <https://kevinmusgrave.github.io/
pytorch-metric-learning/>`_, so it drops into an existing training loop (and works with its
miners, which return ``indices_tuple``):

* ``ref_emb is None`` (one modality): the pairs are all ``(i, j)``, ``i < j``, among
  ``embeddings``; ``ref_emb`` given (two modalities, e.g. photo embeddings against sketch
  embeddings from another network): all ``(i, j)`` between ``embeddings[i]`` and
  ``ref_emb[j]``, labelled by ``labels[i] == ref_labels[j]``.
* ``indices_tuple = (a1, p, a2, n)`` (pytorch-metric-learning's pair form) restricts the loss
  to the positive pairs ``(a1[k], p[k])`` and negative pairs ``(a2[k], n[k])`` (rows of
  ``embeddings`` and of ``ref_emb``, or of ``embeddings`` again).

Losses (distances are squared Euclidean between embeddings, as in the papers' learned
Mahalanobis forms ``‖Lx − Ly‖²``):

* :class:`GeneralizedLogisticLoss` -- PCCA / CMML (pcca eq. 2, cmml eq. 4):
  mean ``ℓ_β(y (D² − b))``, ``ℓ_β(x) = log(1 + e^{βx}) / β``, threshold ``b`` (1 in the
  papers; optionally learned, as LDML's bias).
* :class:`PAUCHingeLoss` -- CML-AUC (eq. 4-6): mean over must-link pairs ``p`` and over the
  cannot-link pairs ranked ``j_α … j_β`` by distance (the FPR window ``[α, β]``) of
  ``[1 + d_p − d_q]₊``.
* :class:`GSMHingeLoss` -- GSM (eq. 6, 10, 12): a learned linear *head* turns each embedding
  into the similarity components ``x̃ = [L_A e, L_C e, dᵀe]`` (one head per modality when
  ``cross_modal=True``), ``S`` of eq. 12 is formed for every pair, and the loss is the mean of
  ``(1 − ℓ S)₊`` with ``ℓ = −1`` for same identity and ``+1`` otherwise (eq. 4).

They are tested against the NumPy objectives the learners minimise
(:mod:`crossmetric._solvers.logistic`, :mod:`crossmetric.auc`, :mod:`crossmetric.gsm`).
"""

from __future__ import annotations

import torch
from torch import nn

from crossmetric.deep.losses import similarity_matrix, similarity_rows
from crossmetric.losses import pauc_window_bounds

__all__ = ["GeneralizedLogisticLoss", "PAUCHingeLoss", "GSMHingeLoss", "pair_indices"]


def pair_indices(labels, ref_labels=None, indices_tuple=None):
    """Rows ``(i, j)`` and same-identity flags of the pairs a loss is taken over.

    Returns
    -------
    i, j : LongTensor
        Rows of the query embeddings and of the reference embeddings (the query embeddings
        themselves when ``ref_labels`` is None).
    same : BoolTensor
    """
    if indices_tuple is not None:
        if len(indices_tuple) != 4:
            raise ValueError("indices_tuple must be pytorch-metric-learning's pair form "
                             f"(a1, p, a2, n), got {len(indices_tuple)} tensors.")
        a1, p, a2, n = (torch.as_tensor(t, dtype=torch.long) for t in indices_tuple)
        i, j = torch.cat([a1, a2]), torch.cat([p, n])
        same = torch.cat([torch.ones_like(a1, dtype=torch.bool),
                          torch.zeros_like(a2, dtype=torch.bool)])
        return i, j, same
    labels = torch.as_tensor(labels)
    if ref_labels is None:
        i, j = torch.triu_indices(labels.shape[0], labels.shape[0], offset=1,
                                  device=labels.device)
        return i, j, labels[i] == labels[j]
    ref_labels = torch.as_tensor(ref_labels, device=labels.device)
    eq = labels[:, None] == ref_labels[None, :]
    i, j = torch.meshgrid(torch.arange(labels.shape[0], device=labels.device),
                          torch.arange(ref_labels.shape[0], device=labels.device),
                          indexing="ij")
    return i.reshape(-1), j.reshape(-1), eq.reshape(-1)


def _check(embeddings, labels, ref_emb, ref_labels):
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (batch, dim), got shape "
                         f"{tuple(embeddings.shape)}.")
    if labels is not None and torch.as_tensor(labels).shape[0] != embeddings.shape[0]:
        raise ValueError("labels must have one entry per row of embeddings.")
    if (ref_emb is None) != (ref_labels is None):
        raise ValueError("give ref_emb and ref_labels together.")
    if ref_emb is not None and ref_emb.shape[0] != torch.as_tensor(ref_labels).shape[0]:
        raise ValueError("ref_labels must have one entry per row of ref_emb.")
    return embeddings if ref_emb is None else ref_emb


def _sq_dist_rows(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    diff = A - B
    return (diff * diff).sum(1)


class GeneralizedLogisticLoss(nn.Module):
    """PCCA / CMML's pair loss: mean of ``ℓ_β(y (‖e_i − r_j‖² − b))`` over the pairs.

    Parameters
    ----------
    beta : float, default=3.0
        Sharpness of ``ℓ_β`` (the papers' β = 3).
    threshold : float, default=1.0
        ``b``; the papers fix it to 1 (the scale of the embedding absorbs it).
    learn_threshold : bool, default=False
        Make ``b`` a trainable parameter (LDML's learned bias, with ``beta=1``).

    Examples
    --------
    >>> import torch
    >>> loss_fn = GeneralizedLogisticLoss(beta=3.0)
    >>> emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [2.0, 0.0]])
    >>> float(loss_fn(emb, torch.tensor([0, 0, 1]))) < 0.1
    True
    """

    def __init__(self, beta: float = 3.0, threshold: float = 1.0,
                 learn_threshold: bool = False):
        super().__init__()
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta}.")
        self.beta = float(beta)
        t = torch.tensor(float(threshold))
        if learn_threshold:
            self.threshold = nn.Parameter(t)
        else:
            self.register_buffer("threshold", t)

    def forward(self, embeddings, labels=None, indices_tuple=None, ref_emb=None,
                ref_labels=None):
        ref = _check(embeddings, labels, ref_emb, ref_labels)
        i, j, same = pair_indices(labels, ref_labels, indices_tuple)
        d = _sq_dist_rows(embeddings[i], ref[j])
        y = same.to(embeddings.dtype) * 2.0 - 1.0
        m = y * (d - self.threshold.to(embeddings.dtype))
        # log(1 + e^{βm}) / β without overflow (softplus's linear cut-off at 20 is not exact)
        return (torch.logaddexp(torch.zeros_like(m), self.beta * m) / self.beta).mean()


class PAUCHingeLoss(nn.Module):
    """CML-AUC's (partial) AUC hinge on a batch of pairs (eq. 4-6, without the log-det term).

    ``mean_{p ∈ S, q ∈ W} [margin + d_p − d_q]₊`` where ``S`` are the must-link pairs and ``W``
    the cannot-link pairs ranked ``j_α … j_β`` by ascending distance (eq. 4: the negatives
    that fall in the FPR window ``[α, β]``); ``fpr_range=(0, 1)`` is the full AUC.

    Parameters
    ----------
    fpr_range : (float, float), default=(0.0, 1.0)
    margin : float, default=1.0

    Examples
    --------
    >>> import torch
    >>> loss_fn = PAUCHingeLoss(fpr_range=(0.0, 0.5))
    >>> emb = torch.tensor([[0.0], [0.1], [3.0], [3.1]])
    >>> float(loss_fn(emb, torch.tensor([0, 0, 1, 1])))
    0.0
    """

    def __init__(self, fpr_range=(0.0, 1.0), margin: float = 1.0):
        super().__init__()
        self.fpr_range = tuple(float(v) for v in fpr_range)
        self.margin = float(margin)

    def forward(self, embeddings, labels=None, indices_tuple=None, ref_emb=None,
                ref_labels=None):
        ref = _check(embeddings, labels, ref_emb, ref_labels)
        i, j, same = pair_indices(labels, ref_labels, indices_tuple)
        d = _sq_dist_rows(embeddings[i], ref[j])
        d_pos, d_neg = d[same], d[~same]
        if d_pos.numel() == 0 or d_neg.numel() == 0:
            return embeddings.sum() * 0.0  # no pair of one kind: nothing to rank
        j_a, j_b = pauc_window_bounds(d_neg.numel(), self.fpr_range)
        # the window is chosen by rank (a constant selection); gradients flow through d
        order = torch.sort(d_neg.detach(), stable=True).indices[j_a - 1: j_b]
        win = d_neg[order]
        return torch.relu(self.margin + d_pos[:, None] - win[None, :]).mean()


class GSMHingeLoss(nn.Module):
    """GSM's generalized-similarity head and hinge (eq. 6, 10, 12) on embeddings.

    A linear head maps an embedding ``e`` (``in_features``) to ``x̃ = [L_A e, L_C e, dᵀe]``
    (``2 r + 1`` numbers, ``r = n_components``); with ``cross_modal=True`` the reference side
    has its own head ``[L_B e, L_C' e, eᵀe]``. ``S`` of eq. 12 is taken for each pair and the
    loss is ``mean (1 − ℓ S)₊`` (ℓ = −1 same identity, +1 different; a *small* S means
    similar) plus ``mu`` times the squared norm of the head (the paper's μ Σ‖θ‖²).

    Parameters
    ----------
    in_features : int
    n_components : int, default=32
    cross_modal : bool, default=True
        Separate heads for ``embeddings`` and ``ref_emb``; ``False`` shares one head.
    f : float, default=0.0
        Initial offset ``f`` of eq. 12 (learned when ``learn_f``).
    learn_f : bool, default=True
    mu : float, default=0.0

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> loss_fn = GSMHingeLoss(8, n_components=4)
    >>> x, y = torch.randn(5, 8), torch.randn(6, 8)
    >>> loss = loss_fn(x, torch.arange(5), ref_emb=y, ref_labels=torch.arange(6))
    >>> loss.backward(); loss_fn.head_x.weight.grad.shape
    torch.Size([9, 8])
    """

    def __init__(self, in_features: int, n_components: int = 32, *, cross_modal: bool = True,
                 f: float = 0.0, learn_f: bool = True, mu: float = 0.0):
        super().__init__()
        self.r = int(n_components)
        self.mu = float(mu)
        self.head_x = nn.Linear(int(in_features), 2 * self.r + 1, bias=False)
        self.head_y = (nn.Linear(int(in_features), 2 * self.r + 1, bias=False)
                       if cross_modal else self.head_x)
        f_t = torch.tensor(float(f))
        if learn_f:
            self.f = nn.Parameter(f_t)
        else:
            self.register_buffer("f", f_t)

    def similarity(self, embeddings, ref_emb=None) -> torch.Tensor:
        """S (eq. 12) of every pair, shape (n, n_ref) (smaller = more alike)."""
        ref = embeddings if ref_emb is None else ref_emb
        head_y = self.head_x if ref_emb is None else self.head_y
        return similarity_matrix(self.head_x(embeddings), head_y(ref), self.f)

    def forward(self, embeddings, labels=None, indices_tuple=None, ref_emb=None,
                ref_labels=None):
        ref = _check(embeddings, labels, ref_emb, ref_labels)
        head_y = self.head_x if ref_emb is None else self.head_y
        i, j, same = pair_indices(labels, ref_labels, indices_tuple)
        S = similarity_rows(self.head_x(embeddings)[i], head_y(ref)[j], self.f)
        ell = 1.0 - 2.0 * same.to(embeddings.dtype)
        loss = torch.relu(1.0 - ell * S).mean()
        if self.mu:
            heads = {id(self.head_x): self.head_x, id(self.head_y): self.head_y}
            loss = loss + self.mu * sum((h.weight ** 2).sum() for h in heads.values())
        return loss
