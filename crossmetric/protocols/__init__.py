"""Evaluation protocols of the papers and a runner that turns them into a results table.

* **Verification** (LFW / CMML / CML-AUC): k folds; a model is trained on the pairs of k − 1
  folds and scored on the pairs of the held-out fold; measures are reported as mean ± standard
  deviation (and standard error ``σ/√k``) over the folds. :func:`kfold_pairs` splits a fixed
  set of pairs (LFW's ``pairs.txt``); :func:`verification_splits` first splits the *samples* of
  a labelled dataset into folds and then draws pairs inside each part with
  :func:`crossmetric.pairs.make_pairs`. The headline ``accuracy_at_threshold`` (named
  ``accuracy`` before; the old name still reads) uses the threshold chosen on the training
  folds (the learner's ``threshold_``, LFW's rule), never the test distances; VR@FPR is taken
  over every cross pair of a fold's held-out samples (see :func:`_verification_extras`).
* **Identification** (VIPeR in PCCA, CUFSF in CML-AUC, GSM): repeated random splits; the test
  objects' first modality is the probe set, their second modality the gallery
  (:func:`identification_splits`), or the query and gallery a data set gives
  (:func:`given_identification_splits`); measures are CMC / rank-r (1, 5, 10, 20) / mAP,
  with camera ids under the Market-1501 / torchreid rule.
* :func:`run_protocols` fits named estimators (cloned for every split) under both protocols,
  in parallel through joblib (and so on a Dask cluster with ``joblib.parallel_config("dask")``),
  and returns a :class:`BenchmarkResult` -- a tidy table (method × measure, mean ± std).

Every random choice (splits, pairs, the seeds handed to estimators whose ``random_state`` is
``None``) is drawn in the calling process from ``random_state`` before any work is dispatched,
so results do not depend on the joblib backend or the number of workers.

The package is laid out by layer: :mod:`~crossmetric.protocols.splits` (the identity-grouped
splitter), :mod:`~crossmetric.protocols.views` (the PCA / CCA step before a learner),
:mod:`~crossmetric.protocols.evaluate` (fit on pairs, measure on a probe / gallery or pair set),
:mod:`~crossmetric.protocols.runner` (:func:`run_protocols`, :func:`run_pair_folds`),
:mod:`~crossmetric.protocols.batch` (many runs, one table: :func:`run_many`, :func:`gather`)
and :mod:`~crossmetric.protocols.results` (:class:`BenchmarkResult`).
"""


from crossmetric.protocols.batch import Gathered, Run, gather, run_many
from crossmetric.protocols.evaluate import (
    RANKS,
    fit_on_pairs,
    measure_identification,
    measure_retrieval,
    measure_verification,
)
from crossmetric.protocols.options import RunOptions, TuneOptions
from crossmetric.protocols.pipeline import ViewPipeline
from crossmetric.protocols.results import (
    MEASURE_ALIASES,
    MEASURES,
    BenchmarkResult,
)
from crossmetric.protocols.runner import (
    run_pair_folds,
    run_protocols,
)
from crossmetric.protocols.split_files import (
    read_split_file,
    read_train_index,
    write_split_file,
)
from crossmetric.protocols.splits import (
    Split,
    deal_identities,
    fixed_split,
    given_identification_splits,
    hold_out_identities,
    identification_splits,
    kfold_pairs,
    verification_splits,
)
from crossmetric.protocols.views import (
    CCAProjection,
    PCAThen,
    ViewReduction,
    fit_view_pca,
    fit_view_reduction,
    method_view_pca,
    pca_views,
)

__all__ = [
    "Split",
    "kfold_pairs",
    "verification_splits",
    "identification_splits",
    "given_identification_splits",
    "CCAProjection",
    "run_protocols",
    "run_pair_folds",
    "BenchmarkResult",
    "MEASURES",
    "MEASURE_ALIASES",
    "RANKS",
    "RunOptions",
    "TuneOptions",
    "fit_on_pairs",
    "measure_identification",
    "measure_verification",
    "PCAThen",
    "fit_view_pca",
    "pca_views",
    "deal_identities",
    "hold_out_identities",
    "Run",
    "Gathered",
    "run_many",
    "gather",
    "fixed_split",
    "measure_retrieval",
    "read_split_file",
    "read_train_index",
    "write_split_file",
    "ViewReduction",
    "fit_view_reduction",
    "method_view_pca",
    "ViewPipeline",
]
