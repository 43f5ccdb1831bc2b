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

from crossmetric._aliases import forward_assignments
from crossmetric._checks import per_modality as _pair_param  # noqa: F401
from crossmetric._solvers import linalg as _linalg
from crossmetric._solvers.linalg import (  # noqa: F401  (their former home: old import paths)
    _REDUCE_TO_SPAN,
    _from_span,
    _in_span,
    _thin_qr,
    cca_directions,
    fit_pca,
    pca_basis,
    span_basis,
)
from crossmetric.kernels import KernelCoordinates, _KernelCoordinatesMixin  # noqa: F401
from crossmetric.learners.baselines import _cdfe, _common, _euclidean, _kcca, _kissme, _latent
from crossmetric.learners.baselines._cdfe import (  # noqa: F401
    CDFE,
    KCDFE,
)
from crossmetric.learners.baselines._common import (  # noqa: F401
    _DISTANCES,
    LinearTowers,
    _check_distance,
    _l2_normalize,
    _positive_samples,
)
from crossmetric.learners.baselines._euclidean import (  # noqa: F401
    Euclidean,
)
from crossmetric.learners.baselines._kcca import (  # noqa: F401
    KCCA,
)
from crossmetric.learners.baselines._kissme import (  # noqa: F401
    KISSME,
    _differing,
)
from crossmetric.learners.baselines._latent import (  # noqa: F401
    CCA,
    KPLS,
    PLS,
    _SklearnLatent,
)

__all__ = ["Euclidean", "CCA", "PLS", "KPLS", "KCCA", "CDFE", "KCDFE", "KISSME", "cca_directions",
           "span_basis"]

# the code lives in the submodules (classes keep the saved-file path crossmetric.baselines.NAME,
# see crossmetric.persistence._public_name) and the span reduction in crossmetric._solvers.linalg:
# assigning a name here (``_REDUCE_TO_SPAN``, ``_thin_qr``, ...) also rebinds it where it is read
forward_assignments(__name__, _linalg, _common, _euclidean, _latent, _kissme, _cdfe, _kcca)
