"""crossmetric: metric learning between two modalities, and within one, from pairs.

Learners share one pair API (``fit(pairs, y)``, ``pair_distance``, ``cross_distance``,
``transform_x`` / ``transform_y``, ``calibrate_threshold``); see the README.

Learner classes are imported on first use (``crossmetric.PCCA`` loads
``crossmetric.learners.pcca``), so ``import crossmetric`` stays light and never imports PyTorch
or faiss.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_LAZY = {
    "PCCA": "crossmetric.learners.pcca",
    "CMML": "crossmetric.learners.cmml",
    "CMLAUC": "crossmetric.learners.auc",
    "MahaAUC": "crossmetric.learners.auc",
    "LDML": "crossmetric.learners.ldml",
    "CLML": "crossmetric.learners.clml",
    "GSM": "crossmetric.learners.gsm",
    "DeepGSM": "crossmetric.deep",
    "CCA": "crossmetric.learners.baselines",
    "PLS": "crossmetric.learners.baselines",
    "KCCA": "crossmetric.learners.baselines",
    "CDFE": "crossmetric.learners.baselines",
    "KISSME": "crossmetric.learners.baselines",
    "KPLS": "crossmetric.learners.baselines",
    "KCDFE": "crossmetric.learners.baselines",
    "MvDA": "crossmetric.learners.discriminant",
    "MCCA": "crossmetric.learners.multiview",
    "CSR": "crossmetric.learners.discriminant",
    "KCSR": "crossmetric.learners.discriminant",
    "DMLEig": "crossmetric.learners.dml_eig",
    "Euclidean": "crossmetric.learners.baselines",
    "ITML": "crossmetric.learners.itml",
    "NCA": "crossmetric.learners.neighbours",
    "LMNN": "crossmetric.learners.neighbours",
    "MCC": "crossmetric.learners.neighbours",
    "PRDC": "crossmetric.learners.prdc",
    "RCA": "crossmetric.learners.rca",
    "RCA_Supervised": "crossmetric.learners.rca",
    "MLKR": "crossmetric.learners.mlkr",
    "LFDA": "crossmetric.learners.lfda",
    "SCML": "crossmetric.learners.scml",
    "SCML_Supervised": "crossmetric.learners.scml",
    "MMC": "crossmetric.learners.mmc",
    "SDML": "crossmetric.learners.sdml",
    "MMC_Supervised": "crossmetric.learners.mmc",
    "SDML_Supervised": "crossmetric.learners.sdml",
    "LSML": "crossmetric.learners.lsml",
    "LSML_Supervised": "crossmetric.learners.lsml",
    "Covariance": "crossmetric.learners.covariance",
    "make_pairs": "crossmetric.pairs",
    "SeedEnsemble": "crossmetric.learners.ensemble",
    "Supervised": "crossmetric.learners.supervised",
    "CrossPairs": "crossmetric.learners.supervised",
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
