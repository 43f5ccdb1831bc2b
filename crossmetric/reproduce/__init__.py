"""Named reproductions of the papers' experiments on their own data (``crossmetric reproduce``).

Each reproduction runs an experiment of a paper and prints our numbers beside the published
ones, with a difference column; :func:`run_reproduction` also writes ``results.csv``,
``results.json`` and the figure into an output folder. The published numbers live in one place,
:data:`PUBLISHED`, each labelled with the table or figure it comes from.

===========================  ===============================================================
name                         experiment
===========================  ===============================================================
``pcca-viper``               PCCA Table 2: VIPeR CMC at r = 1, 5, 10, 20, p = 316 and 532
``pcca-viper-convergence``   PCCA Fig. 3: objective per iteration with / without K⁻¹
``pcca-viper-negatives``     PCCA Fig. 6: CMC@20 as a function of n⁻
``pku-sketch``               sketch → photo re-identification on PKU-Sketch (CMC, mAP)
``cml-auc-cufs``             CML-AUC Tables I-II protocol on CUFS (:mod:`.cufs`)
``gsm-cufs``                 GSM Table II protocol on CUFS's fixed split (:mod:`.gsm_cufs`)
``cmml-cufs``                CMML Figs. 6-7 on CUFS: rank-1, 1−EER vs d and n⁻ (:mod:`.cmml_cufs`)
===========================  ===============================================================

Choices the papers leave open, and what we measured (details in ``docs/measurements.md``)
-----------------------------------------------------------------------------------------
* **Descriptor** (pcca §4): :class:`crossmetric.features.StripHistograms` with its defaults (6
  strips; 16-bin RGB, HSV, YCrCb; uniform LBP, 8 neighbours, radius 1) -- 60 histograms, 924
  features.
* **Normalisation and the χ²-RBF bandwidth.** The paper writes ``K = exp(−D²_χ²)`` (γ = 1) and
  "all the histograms are independently normalized to unit L1 norm and concatenated". Taken
  literally (every histogram sums to 1, the vector to 60) the mean χ² distance between VIPeR
  images is 39.3, so ``exp(−D²)`` is nearly the identity matrix and PCCA-χ²RBF collapses (3.6 %
  rank-1, 3 splits, n⁻ = 10). Normalising the *concatenated* vector to unit L1 (dividing by the
  number of histograms; histogram weights unchanged) brings the mean χ² distance to 0.65, where
  γ = 1 is a sensible bandwidth: 21.7 % rank-1, the same as γ = 1 / mean D² (21.5 %) on the
  per-histogram vector. We therefore use ``normalize="vector"`` and γ = 1, which is the paper's
  formula on a vector that sums to one.
* **Stopping.** The papers fix d' = 40 and β = 3 but give no stopping rule, and on VIPeR's
  sparse pairs the unregularised objective overfits when run to a plateau (linear PCCA-sqrt,
  n⁻ = 10, 3 splits: 13.3 % rank-1 at L-BFGS convergence, 19.7 % after 20 iterations; with
  the fixed solvers, 10.8 % at the plateau after 186-207 iterations). Each
  split therefore chooses the number of iterations on its *training* persons only: a quarter
  of them (by identity) is held out, the model is fitted on the others with ``max_iter`` in
  :data:`ITER_GRID`, and the count with the best validation CMC (mean over ranks 1-20) is used
  to refit on all training persons. The chosen counts are reported.
* **PKU-Sketch** (no paper reports it): setting ``paper`` (default) -- the descriptor methods
  run on a :data:`PKU_DESCRIPTORS` descriptor (default LTP on a grid, the CMML paper's face
  descriptor), each modality centred on its training mean, one PCA-128 of both fitted on
  the split's training images, 10 negatives per positive, and every method's paper grid selected
  per split by 3-fold inner cross-validation on the *training* persons (rank-1;
  :func:`pku_select`); setting ``legacy`` is the former HOG run with the registry's defaults.
  DeepGSM trains end to end on the RGB images with :data:`PKU_DEEPGSM`, a recipe chosen on
  held-out *training* persons (its comment says how), from :data:`PKU_DEEPGSM_MEMBERS` seeds
  whose distances are averaged (the first seed is also reported alone); ``methods=`` (CLI
  ``--methods``) runs a subset, ``first_split=`` a later part of the same split sequence,
  ``n_jobs=`` the splits in parallel.

The package has one module per job: :mod:`.published` (the papers' numbers), :mod:`.results`
(the result table and its files), one module per paper's data (:mod:`.viper`, :mod:`.pku`,
:mod:`.cufs`, :mod:`.gsm_cufs`, :mod:`.cmml_cufs`) and :mod:`.runner` (the named
reproductions). To monkeypatch a name that an experiment looks up, patch it in the
experiment's module (e.g. ``crossmetric.reproduce.viper.evaluate_reid``).
"""

from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import ReproductionResult, default_data_home
from crossmetric.reproduce.runner import (
    REPRODUCTIONS,
    Reproduction,
    list_reproductions,
    run_reproduction,
)
from crossmetric.reproduce.viper import ITER_GRID, select_max_iter

__all__ = ["PUBLISHED", "REPRODUCTIONS", "Reproduction", "ReproductionResult",
           "run_reproduction", "list_reproductions", "default_data_home", "select_max_iter",
           "ITER_GRID"]
