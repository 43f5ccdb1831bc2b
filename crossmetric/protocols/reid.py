"""The person re-identification protocol of VIPeR (Gray et al. 2007; PCCA §4.2).

``p`` persons are drawn at random for the test set, the others train. Training uses one positive
pair per training person (two of its images, from two different cameras when it has them) and
``n⁻`` negative pairs per training person, each "one image of the person and one image of
another person" drawn at random (pcca §4). For each test person one image, chosen at random,
goes to the probe set and another to the gallery (so the probe camera varies per person). The
CMC of the probes against the gallery is averaged over 10 random splits.

:func:`reid_splits` draws the splits (every random choice up front from ``random_state``);
:func:`evaluate_reid` fits a clone of a pair learner on one split and returns its CMC curve;
:func:`refine_distances` (:mod:`crossmetric._retrieval.refine`) applies average query expansion
and k-reciprocal re-ranking to a model's query-to-gallery distances (the ``re_rank`` /
``query_expansion`` options of :func:`evaluate_reid`, :func:`crossmetric.protocols.run_protocols`,
``crossmetric evaluate`` and :meth:`crossmetric.retrieval.Index.search`).
"""

from __future__ import annotations

import numpy as np

from crossmetric._retrieval.refine import refine_distances
from crossmetric.protocols.evaluate import RANKS
from crossmetric.protocols.splits import Split, reid_splits

__all__ = ["reid_splits", "evaluate_reid", "refine_distances", "CMC_RANKS"]

#: the ranks at which PCCA Table 2 reports the CMC (the evaluation unit's ranks)
CMC_RANKS = RANKS


def evaluate_reid(estimator, X, ids, split: Split, *, max_rank: int = 100, re_rank=False,
                  query_expansion: int | None = None) -> dict:
    """Fit a clone of ``estimator`` on ``split``'s training pairs and measure its CMC.

    The fit and the measures are the evaluation unit's
    (:func:`crossmetric.protocols.fit_on_pairs`,
    :func:`crossmetric.protocols.measure_identification` with the re-id codes' mAP).

    Parameters
    ----------
    estimator : pair learner, or None
        ``None`` ranks the gallery by squared Euclidean distance on ``X`` (no learning).
    X : ndarray of shape (n_images, n_features)
        Features; the learner gets them as ``preprocessor``.
    ids : array-like of shape (n_images,)
    split : Split
        From :func:`reid_splits`.
    max_rank : int, default=100
    re_rank, query_expansion :
        Refine the probe-to-gallery distances before measuring (:func:`refine_distances`).

    Returns
    -------
    dict
        ``cmc`` (max_rank,), ``rank1`` ... (``rank{r}`` for :data:`CMC_RANKS`), ``map`` and
        ``minp`` (:func:`crossmetric.metrics.evaluate_rank`, no camera ids: every probe's
        gallery image is from another camera by construction), ``nn_accuracy``,
        ``fit_seconds`` (the fit alone), ``warnings``
        (category names raised during ``fit``), ``model`` (the fitted clone or None).
    """
    from crossmetric.protocols.evaluate import fit_on_pairs, measure_identification

    ids = np.asarray(ids)
    fitted = fit_on_pairs(estimator, split.train_pairs, split.train_y, preprocessor=X,
                          seed=split.seed)
    rep, _ = measure_identification(
        fitted.model, X[split.probe_rows], X[split.gallery_rows], ids[split.probe_rows],
        ids[split.gallery_rows], ranks=CMC_RANKS, re_rank=re_rank,
        query_expansion=query_expansion,
        max_rank=min(int(max_rank), len(split.gallery_rows)), blockwise=False, minp=True)
    out = {"cmc": np.asarray(rep["cmc"]), "map": rep["map"], "minp": rep["minp"],
           "nn_accuracy": rep["nn_accuracy"], "fit_seconds": fitted.fit_seconds,
           "model": fitted.model, "warnings": fitted.warnings}
    for r in CMC_RANKS:
        out[f"rank{r}"] = rep[f"rank{r}"]
    return out
