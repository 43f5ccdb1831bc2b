"""Baselines the papers compare against, behind the common pair-learner API.

Sources (each class documents its choices):

* ``Euclidean`` -- the untrained distance, the floor of every results table.
* ``CCA`` -- canonical correlation analysis (Hotelling 1936) via scikit-learn's
  :class:`~sklearn.cross_decomposition.CCA`, fitted on the positive pairs (cmml §2, cml-auc
  Tables II, V, VIII).
* ``PLS`` -- partial least squares via scikit-learn's
  :class:`~sklearn.cross_decomposition.PLSCanonical`, fitted on the positive pairs (cmml §4).
* ``KCCA`` -- regularised kernel CCA (Hardoon, Szedmak & Shawe-Taylor, Neural Computation 16,
  2004), with the library's kernels (:mod:`crossmetric.kernels`).
* ``CDFE`` -- Common Discriminant Feature Extraction (Lin & Tang, "Inter-modality face
  recognition", ECCV 2006), the baseline of cmml §4 and cml-auc Table II.
* ``KISSME`` -- "keep it simple and straightforward" metric (Köstinger, Hirzer, Wohlhart, Roth
  & Bischof, CVPR 2012): ``M = Σ_S⁻¹ − Σ_D⁻¹`` projected onto the PSD cone.

Latent-space distance of CCA / PLS / KCCA: ``distance="cosine"`` (default) L2-normalises the
canonical variates, so the squared Euclidean distance between embeddings is
``2 (1 − cos)``; ``"euclidean"`` compares the raw variates. Cosine is the usual choice for
canonical variates (their scale carries no matching information) and was the better of the two
on mfeat fac ↔ pix (``benchmarks/bench_auc_comparison.py``).

High-dimensional features: when a view has more features than the samples that the pairs use
(HOG descriptors of a few hundred images), CCA, PLS, CDFE and KISSME -- and MvDA, CSR and the
PCA / CCA steps of :mod:`crossmetric.protocols` -- solve their closed form in the span of the
samples (:func:`span_basis`): the same model, O(n² d) instead of O(d³)
(``benchmarks/bench_closed_forms.py``: 100 × 3,564 per view).
"""

from __future__ import annotations

from crossmetric.learners.baselines._cdfe import CDFE, KCDFE
from crossmetric.learners.baselines._euclidean import Euclidean
from crossmetric.learners.baselines._kcca import KCCA
from crossmetric.learners.baselines._kissme import KISSME
from crossmetric.learners.baselines._latent import CCA, KPLS, PLS

__all__ = ["Euclidean", "CCA", "PLS", "KPLS", "KCCA", "CDFE", "KCDFE", "KISSME"]
