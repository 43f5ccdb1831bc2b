"""crossmetric: metric learning between two modalities, and within one, from pairs.

Learners share one pair API (``fit(pairs, y)``, ``pair_distance``, ``cross_distance``,
``transform_x`` / ``transform_y``, ``calibrate_threshold``); see the README.

Learner classes are imported on first use (``crossmetric.PCCA`` loads ``crossmetric.pcca``), so
``import crossmetric`` stays light and never imports PyTorch or faiss.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_LAZY = {
    "PCCA": "crossmetric.pcca",
    "CMML": "crossmetric.cmml",
    "CMLAUC": "crossmetric.auc",
    "MahaAUC": "crossmetric.auc",
    "LDML": "crossmetric.ldml",
    "CLML": "crossmetric.clml",
    "GSM": "crossmetric.gsm",
    "DeepGSM": "crossmetric.deep",
    "CCA": "crossmetric.baselines",
    "PLS": "crossmetric.baselines",
    "KCCA": "crossmetric.baselines",
    "CDFE": "crossmetric.baselines",
    "KISSME": "crossmetric.baselines",
    "KPLS": "crossmetric.baselines",
    "KCDFE": "crossmetric.baselines",
    "MvDA": "crossmetric.discriminant",
    "MCCA": "crossmetric.multiview",
    "CSR": "crossmetric.discriminant",
    "KCSR": "crossmetric.discriminant",
    "DMLEig": "crossmetric.dml_eig",
    "Euclidean": "crossmetric.baselines",
    "ITML": "crossmetric.itml",
    "NCA": "crossmetric.neighbours",
    "LMNN": "crossmetric.neighbours",
    "MCC": "crossmetric.neighbours",
    "PRDC": "crossmetric.prdc",
    "make_pairs": "crossmetric.pairs",
    "SeedEnsemble": "crossmetric.ensemble",
    "Supervised": "crossmetric.supervised",
    "CrossPairs": "crossmetric.supervised",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crossmetric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
