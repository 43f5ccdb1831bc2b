"""The learners: one paper (or one family of baselines) per module.

Each module holds one estimator family with the pair API of :mod:`crossmetric._base`:
:mod:`~crossmetric.learners.pcca` (PCCA), :mod:`~crossmetric.learners.cmml` (CMML),
:mod:`~crossmetric.learners.auc` (CML-AUC, MahaAUC), :mod:`~crossmetric.learners.ldml`,
:mod:`~crossmetric.learners.clml` (CLML, its model in ``_local_metrics``),
:mod:`~crossmetric.learners.gsm` (GSM; ``_gsm_measure``, ``_gsm_training``),
:mod:`~crossmetric.learners.baselines` (CCA, PLS, KCCA, CDFE, KISSME, Euclidean),
:mod:`~crossmetric.learners.discriminant` (MvDA, CSR), :mod:`~crossmetric.learners.multiview`
(MCCA), :mod:`~crossmetric.learners.dml_eig`, :mod:`~crossmetric.learners.itml`,
:mod:`~crossmetric.learners.neighbours` (NCA, LMNN, MCC), :mod:`~crossmetric.learners.prdc`,
and the wrappers of any learner: :mod:`~crossmetric.learners.ensemble` (SeedEnsemble) and
:mod:`~crossmetric.learners.supervised` (``(X, y)`` estimators). DeepGSM lives in
:mod:`crossmetric.deep`. Import the classes from ``crossmetric``; nothing is imported here, so
loading one learner does not load the others.
"""
