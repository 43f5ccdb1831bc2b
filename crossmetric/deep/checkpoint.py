"""DeepGSM's training checkpoints (``checkpoint_path``): write, read safely, check a resume.

A checkpoint is a ``torch.save`` dict of tensors, numbers, strings and containers, read back
with ``torch.load(weights_only=True)`` so that nothing from the file runs.
"""

from __future__ import annotations

import torch

from crossmetric import __version__
from crossmetric._utils.atomic_io import atomic_path

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "check_resume", "read_checkpoint",
           "write_checkpoint"]

#: training checkpoints (``checkpoint_path``): a ``torch.save`` dict read back with
#: ``torch.load(weights_only=True)``; version 2 added these format keys, version 3 the record
#: of the held-out guard (``"monitor"``, with ``early_stopping``)
CHECKPOINT_FORMAT = "crossmetric-deepgsm-checkpoint"
CHECKPOINT_VERSION = 3


def write_checkpoint(path, fields: dict) -> None:
    """Write ``fields`` (the training state) atomically, after the format keys."""
    with atomic_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                    "crossmetric_version": __version__, **fields}, tmp)


def read_checkpoint(path, device) -> dict:
    """A training checkpoint, read with ``torch.load(weights_only=True)``: tensors, numbers,
    strings and containers only, so nothing from the file runs. A crafted, truncated or newer
    file gives one ``ValueError`` line naming it."""
    import pickle
    import zipfile

    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile,
            ValueError) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        # torch's message leads with advice to re-run unsafely; keep the line saying what was
        # unexpected (e.g. "Trying to load unsupported GLOBAL posix.system ...")
        why = next((ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln),
                   lines[0] if lines else type(exc).__name__)
        raise ValueError(f"checkpoint {str(path)!r} is not a crossmetric training checkpoint "
                         f"(refused by torch.load(weights_only=True): {why[:200]}); nothing "
                         "from it was run. Delete it or set resume=False.") from None
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {str(path)!r} is not a crossmetric training checkpoint "
                         f"(a {type(state).__name__}, expected a dict).")
    version = state.get("format_version", 1)  # files before versioning: format 1
    if state.get("format", CHECKPOINT_FORMAT) != CHECKPOINT_FORMAT or not isinstance(
            version, int) or version > CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint {str(path)!r} has format {state.get('format')!r} "
                         f"version {version!r} (crossmetric "
                         f"{state.get('crossmetric_version')}); this crossmetric {__version__} "
                         f"reads {CHECKPOINT_FORMAT!r} up to version {CHECKPOINT_VERSION}.")
    return state


def check_resume(path, state: dict, settings: dict, fp: str) -> None:
    """Refuse to resume from ``state`` written with other settings or for other data."""
    old = state.get("settings")
    if old is None:
        raise ValueError(f"checkpoint {path!r} records no training settings (written by an "
                         "older version); delete it or set resume=False.")
    diff = [f"{k}: {old.get(k)!r} in the checkpoint, {settings.get(k)!r} now"
            for k in sorted(set(old) | set(settings)) if old.get(k) != settings.get(k)]
    if diff:
        raise ValueError(f"cannot resume from checkpoint {path!r}: it was written with other "
                         f"settings ({'; '.join(diff)}). Use the same parameters, or delete "
                         "the file / set resume=False to start again.")
    if state.get("fingerprint") != fp:
        raise ValueError(f"cannot resume from checkpoint {path!r}: it was written for other "
                         "training data (images or identities differ). Use the same data, "
                         "or delete the file / set resume=False to start again.")
