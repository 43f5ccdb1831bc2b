"""The deep architecture of §4.1 (Figure 3), scaled to the input size.

* **Domain-specific sub-networks** g₁, g₂ (one per modality): a convolution with 3 filters of
  5 × 5, stride 2, ReLU, and a 3 × 3 max-pooling with stride 3.
* **Shared sub-network** f (the same weights for both modalities): a convolution with 32
  filters of 5 × 5, stride 1, ReLU, 3 × 3 max-pooling with stride 3, then two fully connected
  layers of 400 units (ReLU between them); the output is L2-normalised.
* **Similarity sub-network**: one structured fully connected layer per modality (no bias) whose
  ``2r + 1`` outputs are the similarity components ``[L_A f₁(x), L_Cx f₁(x), dᵀf₁(x)]`` and
  ``[L_B f₂(y), L_Cy f₂(y), eᵀf₂(y)]`` (eq. 10), r = 400 = the dimension of f(·).

Scaling with ``input_shape``: the paper's geometry (stride-2 first convolution, no padding,
3 × 3 / stride-3 pooling) needs images of at least about 48 pixels a side (its inputs are
230 × 80 and larger). For smaller images (``min(h, w) < 48``) both convolutions keep the size
(stride 1, padding 2) and both poolings are 2 × 2 with stride 2, so that a 16 × 16 image gives
a 32 × 4 × 4 map before the fully connected layers. ``hidden_units`` replaces the 400 units.

Channels: each domain-specific sub-network takes its own number of input channels (grey
sketches and RGB photos, say); images are ``(n, c, h, w)`` tensors (``(n, h, w)`` is read as
one channel).

Other backbones: ``backbone`` replaces the domain-specific and shared sub-networks by any
``torch.nn.Module`` (one module shared by both domains, or a pair, one per domain) whose
output, flattened and L2-normalised as in the paper, feeds the similarity sub-network; r is then
the backbone's output width (found by one forward pass on a zero image).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from crossmetric._solvers.gsm_tying import tied_components
from crossmetric.deep.descriptor import attach
from crossmetric.learners._gsm_measure import _NO_F, STRUCTURES

__all__ = ["PAPER_MIN_SIDE", "conv_geometry", "DomainNet", "SharedNet", "SimilarityHead",
           "GSMNet", "NormalizedFeatures", "GSMTower"]

#: smallest image side for which the paper's strides and pooling are used
PAPER_MIN_SIDE = 48


def conv_geometry(input_shape: tuple[int, int]) -> dict:
    """Kernel, stride, padding and pooling of the two convolutions for an image size."""
    h, w = input_shape
    if min(h, w) >= PAPER_MIN_SIDE:
        return dict(stride1=2, pad=0, pool=3, name="paper")
    return dict(stride1=1, pad=2, pool=2, name="small")


class DomainNet(nn.Module):
    """g_i: conv 3 @ 5 × 5 + ReLU + max-pool (§4.1, domain-specific sub-network)."""

    def __init__(self, geometry: dict, in_channels: int = 1, channels: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 5, stride=geometry["stride1"],
                              padding=geometry["pad"])
        self.pool = nn.MaxPool2d(geometry["pool"], stride=geometry["pool"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


class SharedNet(nn.Module):
    """f: conv 32 @ 5 × 5 + ReLU + max-pool, fc 400, ReLU, fc 400, L2 normalisation."""

    def __init__(self, geometry: dict, in_shape: tuple[int, int, int], hidden_units: int,
                 channels: int = 32):
        super().__init__()
        self.conv = nn.Conv2d(in_shape[0], channels, 5, stride=1, padding=geometry["pad"])
        self.pool = nn.MaxPool2d(geometry["pool"], stride=geometry["pool"])
        with torch.no_grad():
            n_flat = self.pool(self.conv(torch.zeros(1, *in_shape))).numel()
        self.fc1 = nn.Linear(n_flat, hidden_units)
        self.fc2 = nn.Linear(hidden_units, hidden_units)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(torch.relu(self.conv(x))).flatten(1)
        h = self.fc2(torch.relu(self.fc1(h)))
        return nn.functional.normalize(h, dim=1)


class SimilarityHead(nn.Module):
    """The two structured fully connected layers of the similarity sub-network (eq. 10).

    ``structure`` ties or drops parameters exactly as :class:`crossmetric.GSM` does
    (see :data:`crossmetric.learners.gsm.STRUCTURES`).
    """

    #: free parameters of each structure: the same table as the feature-based GSM
    _PARAMS = STRUCTURES

    def __init__(self, r: int, structure: str = "generalized", f: float = -1.9,
                 learn_f: bool = False):
        super().__init__()
        if structure not in self._PARAMS:
            raise ValueError(
                f"structure must be one of {sorted(self._PARAMS)}, got {structure!r}."
            )
        self.r = r
        self.structure = structure
        self.params = nn.ParameterDict({
            k: nn.Parameter(torch.zeros((r, r) if k[0] in "LUV" else (r,)))
            for k in self._PARAMS[structure]
        })
        f_value = torch.tensor(0.0 if structure in _NO_F else float(f))
        if learn_f and structure not in _NO_F:
            self.f0 = nn.Parameter(f_value)
        else:
            self.register_buffer("f0", f_value)

    def components(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W_x, W_y, f)``: ``W_x = [L_A; L_Cx; dᵀ]`` (2r+1, r), ``W_y = [L_B; L_Cy; eᵀ]``."""
        p, r = self.params, self.r
        first = next(iter(p.values()))

        def zeros(kind):  # as the NumPy side's zeros, of the parameters' dtype and device
            like = self.f0 if kind in ("x", "y") else first
            return torch.zeros((r,) if kind in ("x", "y") else (r, r), dtype=like.dtype,
                               device=like.device)

        LA, LB, LCx, LCy, d, e, f = tied_components(p, self.structure, self.f0, zeros,
                                                    lambda v: v)
        Wx = torch.cat([LA, LCx, d[None, :]], dim=0)
        Wy = torch.cat([LB, LCy, e[None, :]], dim=0)
        return Wx, Wy, f


class NormalizedFeatures(nn.Module):
    """``x ↦ normalize(flatten(module(x)))``: a backbone's output as unit-length features."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.module(x).flatten(1), dim=1)


class GSMNet(nn.Module):
    """The whole network of Figure 3: ``x ↦ x̃``, ``y ↦ ỹ`` and the constant f.

    Parameters
    ----------
    input_shape : (h, w)
    hidden_units : int
        r for the paper's network (ignored with a ``backbone``).
    structure, f, learn_f : as :class:`SimilarityHead`.
    channels : (c_x, c_y), default=(1, 1)
    backbone : nn.Module, (nn.Module, nn.Module) or None
        Used as given (the caller copies it if needed).
    descriptor_width : int, default=0
        D > 0: the network has a descriptor branch of D features
        (:mod:`crossmetric.deep.descriptor`), with its learnt log-scale
        ``descriptor_log_scale``; :meth:`with_descriptor` adds the rows to the components.
    """

    def __init__(self, input_shape: tuple[int, int], hidden_units: int = 400,
                 structure: str = "generalized", f: float = -1.9, learn_f: bool = False,
                 channels: tuple[int, int] = (1, 1), backbone=None,
                 descriptor_width: int = 0):
        super().__init__()
        self.descriptor_width = int(descriptor_width)
        if self.descriptor_width:
            self.descriptor_log_scale = nn.Parameter(torch.zeros(()))
        self.input_shape = tuple(input_shape)
        self.channels = tuple(int(c) for c in channels)
        cx, cy = self.channels
        if backbone is None:
            geometry = conv_geometry(input_shape)
            self.domain_x = DomainNet(geometry, in_channels=cx)
            self.domain_y = DomainNet(geometry, in_channels=cy)
            try:
                with torch.no_grad():
                    mid = self.domain_x(torch.zeros(1, cx, *input_shape)).shape[1:]
                self.shared = SharedNet(geometry, tuple(mid), hidden_units)
            except RuntimeError as exc:
                raise ValueError(
                    f"input_shape={tuple(input_shape)} is too small for the architecture (each "
                    f"side needs at least 4 pixels): {exc}"
                ) from None
            r = hidden_units
        else:
            if isinstance(backbone, nn.Module):
                self.domain_x = self.domain_y = nn.Identity()
                self.shared = NormalizedFeatures(backbone)
            else:
                self.domain_x = NormalizedFeatures(backbone[0])
                self.domain_y = NormalizedFeatures(backbone[1])
                self.shared = nn.Identity()
            try:
                with torch.no_grad():
                    was = [m.training for m in (self.domain_x, self.domain_y, self.shared)]
                    self.eval()
                    rx = self.shared(self.domain_x(torch.zeros(2, cx, *input_shape))).shape
                    ry = self.shared(self.domain_y(torch.zeros(2, cy, *input_shape))).shape
                    for m, w in zip((self.domain_x, self.domain_y, self.shared), was,
                                    strict=True):
                        m.train(w)
            except RuntimeError as exc:
                raise ValueError(
                    f"backbone could not embed zero images of shape ({cx} or {cy}, "
                    f"{input_shape[0]}, {input_shape[1]}): {exc}"
                ) from None
            if rx[1:] != ry[1:]:
                raise ValueError(f"the two backbones give features of different widths "
                                 f"({rx[1]} and {ry[1]}); the GSM head needs one width.")
            r = int(rx[1])
        self.custom_backbone = backbone is not None
        self.head = SimilarityHead(r, structure, f, learn_f)

    @staticmethod
    def _nchw(x: torch.Tensor) -> torch.Tensor:
        return x[:, None] if x.ndim == 3 else x

    def features_x(self, x: torch.Tensor, flip: bool = False) -> torch.Tensor:
        """f₁(x) = f(g₁(x)), L2-normalised, shape (n, r).

        ``flip``: the mean of the features of each image and of its mirror image (test-time
        flipping; the mean of two unit vectors, not normalised again).
        """
        return self._mirror_mean(lambda t: self.shared(self.domain_x(t)), self._nchw(x), flip)

    def features_y(self, y: torch.Tensor, flip: bool = False) -> torch.Tensor:
        """f₂(y) = f(g₂(y)), L2-normalised, shape (n, r); ``flip`` as in :meth:`features_x`."""
        return self._mirror_mean(lambda t: self.shared(self.domain_y(t)), self._nchw(y), flip)

    @staticmethod
    def _mirror_mean(features, x: torch.Tensor, flip: bool) -> torch.Tensor:
        if not flip:
            return features(x)
        return (features(x) + features(x.flip(-1))) / 2

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        """Similarity components ``(x̃, ỹ, f)`` of a batch of images of each domain.

        The paper's network sends both domains' maps through the shared sub-network in one
        call (it has no batch statistics, so this is the same function, at about half the
        per-call cost for small batches); a custom backbone sees each domain's batch alone.
        """
        Wx, Wy, f = self.head.components()
        if self.custom_backbone:
            return self.features_x(x) @ Wx.T, self.features_y(y) @ Wy.T, f
        gx, gy = self.domain_x(self._nchw(x)), self.domain_y(self._nchw(y))
        h = self.shared(torch.cat([gx, gy]))
        return h[:gx.shape[0]] @ Wx.T, h[gx.shape[0]:] @ Wy.T, f

    def embed_x(self, x: torch.Tensor, flip: bool = False) -> torch.Tensor:
        """x̃ (eq. 10); with ``flip``, of the mirror-averaged features (linear in them)."""
        Wx, _, _ = self.head.components()
        return self.features_x(x, flip) @ Wx.T

    def embed_y(self, y: torch.Tensor, flip: bool = False) -> torch.Tensor:
        """ỹ (eq. 10); ``flip`` as in :meth:`embed_x`."""
        _, Wy, _ = self.head.components()
        return self.features_y(y, flip) @ Wy.T

    def descriptor_scale(self) -> torch.Tensor:
        """``s``, the learnt scale of the descriptor branch's rows."""
        return self.descriptor_log_scale.exp()

    def with_descriptor(self, T: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Components ``T`` of the network's features joined by the descriptor rows ``u``
        (:func:`crossmetric.deep.descriptor.attach`, at the learnt scale)."""
        return attach(T, u, self.descriptor_scale())

    def f_value(self) -> float:
        return float(self.head.components()[2])

    def feature_parameters(self):
        """W of eq. (7): the weights of the domain-specific and shared sub-networks."""
        for mod in (self.domain_x, self.domain_y, self.shared):
            yield from mod.parameters()

    def similarity_parameters(self):
        """Φ of eq. (7): the similarity components (and f when it is learnt)."""
        return self.head.parameters()

    def initialize(self, init: str, generator: torch.Generator, probe=None) -> None:
        """Initialise every parameter from ``generator``.

        ``"paper"``: zero-mean Gaussians with standard deviation 0.01 for convolutions and
        0.001 for fully connected layers, zero biases (§5, experimental setting).
        ``"default"``: He-uniform weights ``U(±√(6 / fan_in))`` for the feature layers (zero
        biases) and ``N(0, 1/r)`` for the similarity components, so that activations keep
        their scale; trains faster from scratch on small CPU budgets.

        ``probe = (images_x, images_y)``: with ``"paper"``, each feature layer's weights are
        then divided by the root mean square of its output on these images, layer after layer.
        With zero biases the feature sub-networks are positively homogeneous, so this leaves
        the L2-normalised features f₁(x), f₂(y) -- the network's function at initialisation
        -- exactly as the paper's draw; it only removes the ~1e-6 scale of the pre-normalised
        features, whose 1/‖h‖ gradient otherwise lets the first step's bias update swamp h
        and maps every image to one vector. (The paper does not say what input scale its
        standard deviations assume.)

        A user ``backbone`` is left as it is; only the similarity components are drawn.
        """
        with torch.no_grad():
            if not self.custom_backbone:
                for m in self.modules():
                    if isinstance(m, (nn.Conv2d, nn.Linear)):
                        if init == "paper":
                            std = 0.01 if isinstance(m, nn.Conv2d) else 0.001
                            m.weight.normal_(0.0, std, generator=generator)
                        else:
                            bound = math.sqrt(6.0 / m.weight[0].numel())
                            m.weight.uniform_(-bound, bound, generator=generator)
                        m.bias.zero_()
                if init == "paper" and probe is not None:
                    self._rescale_layers(*probe)
            # with a descriptor branch the start is the descriptor's distance: the network's
            # terms start small (crossmetric.deep.descriptor)
            std = (0.001 if init == "paper" or self.descriptor_width
                   else 1.0 / math.sqrt(self.head.r))
            for p in self.head.params.values():
                if p.ndim == 2:
                    p.normal_(0.0, std, generator=generator)
                else:
                    p.zero_()

    def _rescale_layers(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Divide each feature layer's weights by the RMS of its output on ``(x, y)``."""
        x, y = self._nchw(x), self._nchw(y)
        layers = [(self.domain_x.conv, "x"), (self.domain_y.conv, "y"), (self.shared.conv, "xy"),
                  (self.shared.fc1, "xy"), (self.shared.fc2, "xy")]
        for layer, sides in layers:
            outs: list = []
            hook = layer.register_forward_hook(lambda m, i, o, outs=outs: outs.append(o))
            try:
                if "x" in sides:
                    self.features_x(x)
                if "y" in sides:
                    self.features_y(y)
            finally:
                hook.remove()
            rms = float(torch.sqrt(torch.mean(torch.cat([o.flatten() for o in outs]) ** 2)))
            if rms > 0:
                layer.weight.div_(rms)


class GSMTower(nn.Module):
    """One trained tower, self-contained: images ``(n, c, h, w)`` ↦ x̃ (or ỹ), for export.

    ``similarity(tx, ty)`` is S̃ of eq. (12) between first-domain and second-domain outputs;
    ``f`` is the constant. ``flip``: features averaged over each image and its mirror
    (``DeepGSM(test_flip=True)``).
    """

    def __init__(self, net: GSMNet, domain: str = "x", flip: bool = False):
        super().__init__()
        import copy

        if net.descriptor_width:
            raise ValueError("a DeepGSM with a descriptor has no self-contained tower to "
                             "export: its descriptor runs outside torch (export the model "
                             "without descriptor, or compute x̃ with transform_x).")
        self.flip = bool(flip)

        self.domain = copy.deepcopy(net.domain_x if domain == "x" else net.domain_y)
        self.shared = copy.deepcopy(net.shared)
        with torch.no_grad():
            Wx, Wy, f = net.head.components()
            W = (Wx if domain == "x" else Wy).detach().clone().cpu()
        self.register_buffer("W", W)
        self.register_buffer("f", torch.as_tensor(float(f)))
        self.r = int(net.head.r)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.shared(self.domain(x))
        if self.flip:  # test-time flipping, as GSMNet.embed_x(x, flip=True)
            h = (h + self.shared(self.domain(x.flip(-1)))) / 2
        return h @ self.W.T

    @torch.jit.export
    def similarity(self, tx: torch.Tensor, ty: torch.Tensor) -> torch.Tensor:
        r = self.r
        ax, cx, dx = tx[:, :r], tx[:, r:2 * r], tx[:, 2 * r]
        by, cy, ey = ty[:, :r], ty[:, r:2 * r], ty[:, 2 * r]
        sx = (ax * ax).sum(1) + 2.0 * dx
        sy = (by * by).sum(1) + 2.0 * ey
        return sx[:, None] + sy[None, :] - 2.0 * (cx @ cy.T) + self.f
