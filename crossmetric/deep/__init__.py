"""End-to-end generalized similarity learning with PyTorch (the only torch-importing package).

:class:`DeepGSM` is §4 of Lin et al.: domain-specific and shared convolutional sub-networks
feed a similarity sub-network whose outputs are the components of the generalized similarity
measure (eq. 10), trained with sample-based batches (eq. 14-18) drawn by the cross-domain batch
generator of §4.2.

Modules: :mod:`~crossmetric.deep.networks` (the architecture), :mod:`~crossmetric.deep.sampler`
(cross-domain batch generator, NumPy only: importable without torch),
:mod:`~crossmetric.deep.data` (torch ``Dataset`` over arrays or image files and the epoch-based
identity ``Sampler``), :mod:`~crossmetric.deep.augment` (re-id augmentation),
:mod:`~crossmetric.deep.distributed` (DDP helpers), :mod:`~crossmetric.deep.losses` (sample-based
and pair-based GSM hinge), :mod:`~crossmetric.deep.model` (the estimator and its training loop).

``DeepGSM`` is imported lazily, so ``crossmetric.deep.sampler`` works without PyTorch.
"""

__all__ = ["DeepGSM"]


def __getattr__(name):
    if name == "DeepGSM":
        from crossmetric.deep.model import DeepGSM

        return DeepGSM
    raise AttributeError(f"module 'crossmetric.deep' has no attribute {name!r}")
