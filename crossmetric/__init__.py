"""crossmetric: metric learning between two modalities, and within one, from pairs.

Learners share one pair API (``fit(pairs, y)``, ``pair_distance``, ``cross_distance``,
``transform_x`` / ``transform_y``, ``calibrate_threshold``); see the user guide (``docs/guide``).

Learner classes are imported on first use (``crossmetric.PCCA`` loads
``crossmetric.learners.pcca``), so ``import crossmetric`` stays light and never imports PyTorch
or faiss. Which classes there are is declared once, in :mod:`crossmetric.registry`
(:func:`~crossmetric.registry.public_classes`).
"""

from __future__ import annotations

import importlib
import importlib.util

__version__ = "0.2.0"

#: the public functions of the package, beside its estimators (``registry.public_classes``)
_FUNCTIONS = {"make_pairs": "crossmetric.pairs"}


def _lazy() -> dict[str, str]:
    """Public name -> module that defines it: the estimators declared in
    :mod:`crossmetric.registry` (each by its ``MethodSpec``) and :data:`_FUNCTIONS`."""
    from crossmetric.registry import public_classes

    return {**public_classes(), **_FUNCTIONS}


def __getattr__(name: str):
    if name == "_LAZY":  # derived, not kept: a spec added to the registry shows at once
        return _lazy()
    if name == "__all__":
        return sorted(_lazy()) + ["__version__"]
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # a submodule not imported yet (``from crossmetric import metrics``): the import
        # system loads it on this AttributeError
        raise AttributeError(f"module 'crossmetric' has no attribute {name!r}")
    module = __getattr__("_LAZY").get(name)
    if module is None:
        raise AttributeError(f"module 'crossmetric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__getattr__("_LAZY")))
