"""The candidates a closed form tries for a parameter set to ``"auto"``
(:mod:`crossmetric.learners._held_out_choice`), in order of preference: a tie keeps the earlier.

Plain values, importing nothing, so that the registry can name them in its paper grids
without loading a learner.
"""

from __future__ import annotations

__all__ = ["COMPONENT_CANDIDATES", "CDFE_COMPONENT_CANDIDATES", "CCA_REG_GRID",
           "KCCA_REG_GRID", "KCCA_GAMMA_SCALES", "CDFE_REG_GRID", "CSR_ALPHA_GRID"]

#: ``n_components="auto"``, smallest first (a candidate larger than a fold's data allows fails
#: on that fold and drops out)
COMPONENT_CANDIDATES = (10, 20, 32, 64, 128)
#: CDFE's: past about 32 directions its smallest eigenvalues stop being negative in the span
#: of the samples and the solve moves to the feature space (95 s a fit at 128 on 5,544 HOG
#: features against 1.4 s at 10)
CDFE_COMPONENT_CANDIDATES = (10, 20, 32)
#: CCA's ridge, relative to each covariance's mean eigenvalue (the default 0.1 first)
CCA_REG_GRID = (0.1, 1e-3, 1e-2, 1.0)
#: KCCA's ``κ``, relative to each centred kernel's mean eigenvalue (the default 0.1 first)
KCCA_REG_GRID = (0.1, 0.01, 1.0)
#: KCCA's bandwidth, as multiples of each view's scale-free ``1 / mean d²`` over the positive
#: pairs' samples (the default first); the smaller is nearer a linear kernel (CUFS photo →
#: sketch, HOG, 3 splits: 91.5 % rank-1 at 1, 92.8 % at 0.1, 84.0 % at 4, the untrained 93.3 %)
KCCA_GAMMA_SCALES = (1.0, 0.1)
#: CDFE's ridge (relative to the covariance's mean eigenvalue) as the cmml paper's selection
#: tries it: "for CCA and CDFE the regularization parameters are cross-validated" (§4); the
#: range is ours, wide because the best value moves from 1e-3 (mfeat) to 10-100 (CUFS, digits)
CDFE_REG_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
#: CSR's ridge ``λ``, relative to the mean squared feature norm
CSR_ALPHA_GRID = (1e-2, 0.1, 1.0, 10.0, 100.0)
