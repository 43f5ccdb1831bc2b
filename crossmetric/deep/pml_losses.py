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
(:mod:`crossmetric._solvers.logistic`, :mod:`crossmetric.learners.auc`,
:mod:`crossmetric.learners.gsm`).
"""

from __future__ import annotations

import torch
from torch import nn

from crossmetric.deep.losses import similarity_matrix, similarity_rows
from crossmetric.losses import pauc_window_bounds

__all__ = ["GeneralizedLogisticLoss", "PAUCHingeLoss", "GSMHingeLoss", "pair_indices"]


def pair_indices(labels, ref_labels=None, indices_tuple=None):
    """Rows ``(i, j)`` and same-identity flags of the pairs a loss is taken over.

    ``indices_tuple`` may be pytorch-metric-learning's pair form ``(a1, p, a2, n)`` or its
    triplet form ``(a, p, n)``, turned into the pairs ``(a, p)`` and ``(a, n)`` as PML's
    ``convert_to_pairs`` does.

    Returns
    -------
    i, j : LongTensor
        Rows of the query embeddings and of the reference embeddings (the query embeddings
        themselves when ``ref_labels`` is None).
    same : BoolTensor
    """
    if indices_tuple is not None:
        if len(indices_tuple) == 3:
            a, p, n = indices_tuple
            indices_tuple = (a, p, a, n)
        if len(indices_tuple) != 4:
            raise ValueError("indices_tuple must be pytorch-metric-learning's pair form "
                             "(a1, p, a2, n) or triplet form (a, p, n), got "
                             f"{len(indices_tuple)} tensors.")
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


class _PMLPairLoss(nn.Module):
    """The calling convention of pytorch-metric-learning's losses, shared by the losses here.

    ``forward(embeddings, labels=None, indices_tuple=None, ref_emb=None, ref_labels=None)``:

    * ``labels`` may be left out when ``indices_tuple`` is given;
    * ``ref_emb`` without ``ref_labels`` (as PML's ``set_ref_emb`` / ``get_all_pairs_indices``):
      row ``j`` of ``ref_emb`` carries ``labels[j]``, and the pairs are every ``(i, j)``
      except the positives ``i == j``;
    * a miner that finds nothing (empty ``indices_tuple``) gives a zero loss connected to the
      graph (PML's ``zero_loss``), never NaN;
    * ``distance``: a PML distance (``LpDistance(power=2, normalize_embeddings=False)`` is
      the default's squared Euclidean distance) or any callable ``(query, ref) → matrix``;
      one with ``is_inverted=True`` (a similarity) is negated;
    * ``reducer``: a PML reducer, given the per-pair losses as ``"element"`` losses indexed
      by the anchor row of each pair; ``None`` takes the mean.
    """

    def __init__(self, distance=None, reducer=None):
        super().__init__()
        self.distance = distance
        self.reducer = reducer

    def _pairs(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        if embeddings.ndim != 2:
            raise ValueError(f"embeddings must be 2-D (batch, dim), got shape "
                             f"{tuple(embeddings.shape)}.")
        if labels is None and indices_tuple is None:
            raise ValueError("labels is required unless indices_tuple is given.")
        if labels is not None:
            labels = torch.as_tensor(labels, device=embeddings.device)
            if labels.shape[0] != embeddings.shape[0]:
                raise ValueError("labels must have one entry per row of embeddings.")
        if ref_emb is None:
            if ref_labels is not None:
                raise ValueError("ref_labels was given without ref_emb.")
            i, j, same = pair_indices(labels, None, indices_tuple)
            return embeddings, i, j, same
        if ref_emb.ndim != 2 or ref_emb.shape[1] != embeddings.shape[1]:
            raise ValueError(f"ref_emb must be 2-D with {embeddings.shape[1]} columns, got "
                             f"shape {tuple(ref_emb.shape)}.")
        if ref_labels is None and indices_tuple is None:
            if ref_emb.shape[0] != embeddings.shape[0]:
                raise ValueError("ref_emb without ref_labels takes the labels of embeddings "
                                 "(as pytorch-metric-learning): it needs as many rows.")
            eq = labels[:, None] == labels[None, :]
            eq.fill_diagonal_(False)
            a1, p = torch.where(eq)
            a2, n = torch.where(labels[:, None] != labels[None, :])
            return ref_emb, *pair_indices(None, None, (a1, p, a2, n))
        if ref_labels is not None and ref_emb.shape[0] != torch.as_tensor(ref_labels).shape[0]:
            raise ValueError("ref_labels must have one entry per row of ref_emb.")
        i, j, same = pair_indices(labels, ref_labels, indices_tuple)
        return ref_emb, i, j, same

    def _distances(self, embeddings, ref, i, j):
        if self.distance is None:
            diff = embeddings[i] - ref[j]
            return (diff * diff).sum(1)
        d = self.distance(embeddings, ref)[i, j]
        return -d if getattr(self.distance, "is_inverted", False) else d

    @staticmethod
    def _zero(embeddings, ref):
        return torch.sum(embeddings * 0) + (0 if ref is embeddings else torch.sum(ref * 0))

    def _reduce(self, losses, anchors, embeddings, labels):
        if losses.numel() == 0:
            return torch.sum(embeddings * 0)
        if self.reducer is None:
            return losses.mean()
        return self.reducer({"loss": {"losses": losses, "indices": anchors,
                                      "reduction_type": "element"}}, embeddings, labels)


class GeneralizedLogisticLoss(_PMLPairLoss):
    """PCCA / CMML's pair loss: mean of ``ℓ_β(y (‖e_i − r_j‖² − b))`` over the pairs.

    Parameters
    ----------
    beta : float, default=3.0
        Sharpness of ``ℓ_β`` (the papers' β = 3).
    threshold : float, default=1.0
        ``b``; the papers fix it to 1 (the scale of the embedding absorbs it).
    learn_threshold : bool, default=False
        Make ``b`` a trainable parameter (LDML's learned bias, with ``beta=1``).
    distance, reducer : optional
        pytorch-metric-learning's ``distance`` / ``reducer`` (see :class:`_PMLPairLoss`).

    Examples
    --------
    >>> import torch
    >>> loss_fn = GeneralizedLogisticLoss(beta=3.0)
    >>> emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [2.0, 0.0]])
    >>> float(loss_fn(emb, torch.tensor([0, 0, 1]))) < 0.1
    True
    """

    def __init__(self, beta: float = 3.0, threshold: float = 1.0,
                 learn_threshold: bool = False, *, distance=None, reducer=None):
        super().__init__(distance, reducer)
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
        ref, i, j, same = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        if i.numel() == 0:
            return self._zero(embeddings, ref)
        d = self._distances(embeddings, ref, i, j)
        y = same.to(embeddings.dtype) * 2.0 - 1.0
        m = y * (d - self.threshold.to(embeddings.dtype))
        # log(1 + e^{βm}) / β without overflow (softplus's linear cut-off at 20 is not exact)
        losses = torch.logaddexp(torch.zeros_like(m), self.beta * m) / self.beta
        return self._reduce(losses, i, embeddings, labels)


class PAUCHingeLoss(_PMLPairLoss):
    """CML-AUC's (partial) AUC hinge on a batch of pairs (eq. 4-6, without the log-det term).

    ``mean_{p ∈ S, q ∈ W} [margin + d_p − d_q]₊`` where ``S`` are the must-link pairs and ``W``
    the cannot-link pairs ranked ``j_α … j_β`` by ascending distance (eq. 4: the negatives
    that fall in the FPR window ``[α, β]``); ``fpr_range=(0, 1)`` is the full AUC.

    Parameters
    ----------
    fpr_range : (float, float), default=(0.0, 1.0)
    margin : float, default=1.0
    distance, reducer : optional
        pytorch-metric-learning's ``distance`` / ``reducer``; the reducer gets one loss per
        (must-link pair, windowed cannot-link pair), indexed by the must-link pair's anchor.

    Examples
    --------
    >>> import torch
    >>> loss_fn = PAUCHingeLoss(fpr_range=(0.0, 0.5))
    >>> emb = torch.tensor([[0.0], [0.1], [3.0], [3.1]])
    >>> float(loss_fn(emb, torch.tensor([0, 0, 1, 1])))
    0.0
    """

    def __init__(self, fpr_range=(0.0, 1.0), margin: float = 1.0, *, distance=None,
                 reducer=None):
        super().__init__(distance, reducer)
        self.fpr_range = tuple(float(v) for v in fpr_range)
        self.margin = float(margin)

    def forward(self, embeddings, labels=None, indices_tuple=None, ref_emb=None,
                ref_labels=None):
        ref, i, j, same = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        if not bool(same.any()) or bool(same.all()):
            return self._zero(embeddings, ref)  # no pair of one kind: nothing to rank
        d = self._distances(embeddings, ref, i, j)
        d_pos, d_neg = d[same], d[~same]
        j_a, j_b = pauc_window_bounds(d_neg.numel(), self.fpr_range)
        # the window is chosen by rank (a constant selection); gradients flow through d
        order = torch.sort(d_neg.detach(), stable=True).indices[j_a - 1: j_b]
        win = d_neg[order]
        losses = torch.relu(self.margin + d_pos[:, None] - win[None, :])
        anchors = i[same][:, None].expand_as(losses)
        return self._reduce(losses.reshape(-1), anchors.reshape(-1), embeddings, labels)


class GSMHingeLoss(_PMLPairLoss):
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
    reducer : optional
        pytorch-metric-learning's reducer of the per-pair hinge losses (the penalty is added
        after it). ``distance`` is not taken: S of eq. 12 is the loss's own learned measure.

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
                 f: float = 0.0, learn_f: bool = True, mu: float = 0.0, distance=None,
                 reducer=None):
        if distance is not None:
            raise ValueError("GSMHingeLoss scores pairs with its own learned similarity S "
                             "(eq. 12); distance must be None.")
        super().__init__(None, reducer)
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
        ref, i, j, same = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        head_y = self.head_x if ref_emb is None else self.head_y
        if i.numel() == 0:
            loss = self._zero(embeddings, ref)
        else:
            S = similarity_rows(self.head_x(embeddings)[i], head_y(ref)[j], self.f)
            ell = 1.0 - 2.0 * same.to(embeddings.dtype)
            loss = self._reduce(torch.relu(1.0 - ell * S), i, embeddings, labels)
        if self.mu:
            heads = {id(self.head_x): self.head_x, id(self.head_y): self.head_y}
            loss = loss + self.mu * sum((h.weight ** 2).sum() for h in heads.values())
        return loss
