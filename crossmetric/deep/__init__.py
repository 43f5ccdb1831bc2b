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
and pair-based GSM hinge), :mod:`~crossmetric.deep.model` (the estimator's API: its parameters,
with its methods from :mod:`~crossmetric.deep.fitting`, :mod:`~crossmetric.deep.embedding` and
:mod:`~crossmetric.deep.saving`).

The estimator's work is done by: :mod:`~crossmetric.deep.params` (parameter checks, device,
checkpointed settings), :mod:`~crossmetric.deep.inputs` (pairs → distinct images and
identities, the rounds' data), :mod:`~crossmetric.deep.training` (the training loop:
rounds, optimiser and schedule, mixed precision, averaging, early stopping, spawned processes),
:mod:`~crossmetric.deep.objective` (a round's balanced hinge and eq. 7's penalties),
:mod:`~crossmetric.deep.checkpoint`, :mod:`~crossmetric.deep.build` (the network from the
parameters) and :mod:`~crossmetric.deep.inference` (embedding in batches, held-out rank-1).
Imports run one way: model → (fitting, embedding, saving) → training → (inputs, objective,
checkpoint, build, inference, distributed, params); nothing imports the estimator back.

``DeepGSM`` is imported lazily, so ``crossmetric.deep.sampler`` works without PyTorch.
"""

__all__ = ["DeepGSM"]


def __getattr__(name):
    if name == "DeepGSM":
        from crossmetric.deep.model import DeepGSM

        return DeepGSM
    raise AttributeError(f"module 'crossmetric.deep' has no attribute {name!r}")
