"""Evaluation measures of the papers: verification, identification and retrieval.

==========================  ==================================================================
module                      what
==========================  ==================================================================
:mod:`.verification`        ROC, AUC, partial AUC, EER, verification rate (pair scores)
:mod:`.ranking`             CMC, rank-r, mAP, 1-call@n, :func:`identification_report`
:mod:`.knn`                 accuracies over kNN lists (``knn_accuracy``, ``knn_rank_report``)
:mod:`.reid`                the Market-1501 / torchreid protocol (:func:`evaluate_rank`)
:mod:`.retrieval`           class-level retrieval: mAP@k, precision-recall curve, report
:mod:`._counts`             the counting core shared by the rank measures (no sorting)
==========================  ==================================================================

Every name, private ones included, is importable from ``crossmetric.metrics`` as before, and
assigning one here (``monkeypatch.setattr(metrics, "_CHUNK_BYTES", ...)``) reaches the
submodule that reads it. Re-ranking (:func:`re_ranking`, :func:`query_expansion`) lives in
:mod:`crossmetric.metrics.reranking` and is part of this namespace.

Conventions
-----------
* Verification measures take pair labels ``y`` in {+1 (same), -1 (different)} and a *score*
  (larger = more alike, e.g. ``model.pair_score``), except :func:`accuracy_at_median`, which
  takes a *distance* (smaller = more alike) as CMML does.
* Identification and retrieval measures take a ``(n_probe, n_gallery)`` *distance* matrix
  (smaller = more alike, e.g. ``model.cross_distance(X_probe, Y_gallery)``) and the identity
  label of every probe and gallery item. They work on row blocks (``block_rows``) so that the
  temporaries of a 10,000 × 10,000 evaluation stay small, and :func:`identification_report`
  computes the same measures from two embeddings without ever holding the full matrix. No row
  is sorted: the place of a true match is a count of the items closer to the probe (and of
  those at the same distance), O(n_gallery) per relevant item (:func:`_relevant_counts`).

Ties
----
* ROC-based measures count a tie between a positive and a negative as one half (the ROC polyline
  through tied scores is a straight segment), as Eq. (4) of the CML-AUC paper does.
* Rank measures (CMC, rank-r accuracy, 1-call@n, nearest-neighbour accuracy) and average
  precision take ``ties="expected"`` by default: items at equal distance are ordered at random
  and the measure is its expectation over that order, computed exactly (hypergeometric
  probabilities for ranks, harmonic sums for AP) -- so a collapsed model whose distances are
  all equal scores chance (rank-1 = 1/n_gallery), never 1. ``"pessimistic"`` (true matches
  last among equals) and ``"optimistic"`` (first: ties count as wins) are also offered.
  Without ties the three agree; average precision then equals scikit-learn's
  :func:`~sklearn.metrics.average_precision_score` of the negated distances.
"""

from __future__ import annotations

from crossmetric.metrics.knn import knn_accuracy, knn_rank_report
from crossmetric.metrics.ranking import (
    average_precision_per_query,
    cmc,
    identification_report,
    mean_average_precision,
    nearest_neighbor_accuracy,
    one_call_at_n,
    rank_accuracy,
)
from crossmetric.metrics.reid import evaluate_rank
from crossmetric.metrics.reranking import query_expansion, re_ranking
from crossmetric.metrics.retrieval import (
    mean_average_precision_at_k,
    precision_recall_curve_mean,
    retrieval_report,
)
from crossmetric.metrics.verification import (
    accuracy_at_median,
    eer,
    one_minus_eer,
    partial_auc,
    roc,
    roc_auc,
    verification_rate,
    verification_report,
)

__all__ = [
    "roc_auc",
    "roc",
    "partial_auc",
    "eer",
    "one_minus_eer",
    "accuracy_at_median",
    "verification_rate",
    "verification_report",
    "cmc",
    "rank_accuracy",
    "nearest_neighbor_accuracy",
    "mean_average_precision",
    "average_precision_per_query",
    "one_call_at_n",
    "identification_report",
    "knn_accuracy",
    "knn_rank_report",
    "evaluate_rank",
    "re_ranking",
    "query_expansion",
    "mean_average_precision_at_k",
    "precision_recall_curve_mean",
    "retrieval_report",
]
