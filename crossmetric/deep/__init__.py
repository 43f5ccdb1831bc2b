"""End-to-end generalized similarity learning with PyTorch (the only torch-importing package).

:class:`DeepGSM` is §4 of Lin et al.: domain-specific and shared convolutional sub-networks
feed a similarity sub-network whose outputs are the components of the generalized similarity
measure (eq. 10), trained with sample-based batches (eq. 14-18) drawn by the cross-domain batch
generator of §4.2.

Modules: :mod:`~crossmetric.deep.networks` (the architecture), :mod:`~crossmetric.deep.sampler`
(cross-domain batch generator, NumPy only), :mod:`~crossmetric.deep.losses` (sample-based and
pair-based GSM hinge), :mod:`~crossmetric.deep.model` (the estimator and its training loop).
"""

from crossmetric.deep.model import DeepGSM

__all__ = ["DeepGSM"]
