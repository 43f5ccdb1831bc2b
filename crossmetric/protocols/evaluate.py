"""Fit on these pairs, measure on that probe / gallery or pair set: the one evaluation unit."""

from __future__ import annotations

import numpy as np

from crossmetric import metrics as M
from crossmetric.protocols.splits import Split

__all__ = []

#: FPR grid on which ROC curves of different folds are averaged (vertical averaging)
ROC_GRID = np.unique(np.r_[0.0, np.logspace(-4, 0, 81), np.linspace(0, 1, 101)])


def _verification_extras(est, Xs: np.ndarray, Ys: np.ndarray, split: Split,
                         options: dict) -> dict:
    """The LFW-style accuracy and, for a fold of samples, VR@FPR over all its cross pairs.

    * ``accuracy``: the fraction of test pairs that ``est.predict`` gets right, i.e. with the
      threshold ``threshold_`` chosen (for accuracy) on the *training* folds' pairs when the
      learner was fitted -- LFW's protocol ("the threshold is chosen on the nine training
      folds"). ``acc_median`` instead takes the median of the test distances, which looks at
      the test set; it is kept in the records for CMML's table.
    * ``vr``: when the fold is a set of held-out samples (:func:`verification_splits`), the
      verification rate is taken over *every* cross pair of the fold's rows (row ``a`` of
      ``X`` against row ``b`` of ``Y``, same label = positive), not over the few sampled test
      pairs: with 1,000 sampled negatives VR@0.1% is the TPR at one false positive, decided by
      a single pair. The other measures stay on the sampled, balanced test pairs.
    """
    pred = np.asarray(est.predict(split.test_pairs))
    extras = {"accuracy": float(np.mean(pred == split.test_y))}
    lab = options.get("labels")
    if split.probe_rows is not None and lab is not None:
        rows = split.probe_rows
        D = est.cross_distance(Xs[rows], Ys[rows])
        same = np.where(lab[rows][:, None] == lab[rows][None, :], 1, -1)
        if (same == 1).any() and (same == -1).any():
            extras["vr"] = M.verification_rate(same.ravel(), -np.asarray(D).ravel(),
                                               options["fpr"])
    return extras
