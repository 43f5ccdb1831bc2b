"""SDML: sparse distance metric learning (Qi, Tang, Zha, Chua & Zhang, ICML 2009).

SDML regularises ``M`` towards a prior ``M₀`` in LogDet divergence and penalises the L1 norm
of its off-diagonal entries, with a pair term (the paper's eq. 4-6):

    min_{M ≻ 0}  tr(M (M₀⁻¹ + η K)) − log det M + λ ‖M‖_{1,off}

where ``K = Σ_pairs y_p v_p v_pᵀ`` (``v_p = x_i − x_j``, ``y_p = +1`` similar / ``−1``
dissimilar), ``η = balance_param`` and ``λ = sparsity_param``. This is the graphical lasso with
"empirical covariance" ``P = M₀⁻¹ + η K``: ``M`` is the sparse precision matrix that
:func:`sklearn.covariance.graphical_lasso` returns for ``P``.

``P`` must be positive semi-definite for the graphical lasso to be well posed; when it is not
(a large ``balance_param`` with many dissimilar pairs), a ``ConvergenceWarning`` says so and
``P`` is shifted by its most negative eigenvalue (plus 10⁻¹⁰), as metric-learn does with the
starting point it gives its solver. Recent scikit-learn's ``graphical_lasso`` takes no starting
point (``cov_init`` was removed in 1.5; metric-learn 0.7.0 still passes it), so the shifted
matrix is the one solved here.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.covariance import graphical_lasso
from sklearn.exceptions import ConvergenceWarning

from crossmetric._base import LinearSingleModalMixin
from crossmetric._utils.checks import check_positive_scalar, user_stacklevel
from crossmetric.learners._mahalanobis_common import (
    components_from_metric,
    is_pair_input,
    metric_matrix,
    supervised_pairs,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["SDML", "SDML_Supervised", "sdml_matrix"]


def sdml_matrix(prior_inv: np.ndarray, V: np.ndarray, y: np.ndarray,
                balance_param: float) -> np.ndarray:
    """The graphical lasso's input ``M₀⁻¹ + η Σ y_p v_p v_pᵀ`` (one BLAS-3 product)."""
    return prior_inv + balance_param * ((V.T * y) @ V)


class SDML(LinearSingleModalMixin, BaseEstimator):
    """Sparse distance metric learning (Qi et al., ICML 2009) with scikit-learn's graphical lasso.

    Learns a sparse Mahalanobis matrix ``M`` close to a prior in LogDet divergence from
    similar / dissimilar pairs (module docstring). Deterministic. Constructor parameters as
    metric-learn 0.7.0's ``SDML``.

    Parameters
    ----------
    balance_param : float, default=0.5
        Weight η of the pair term against the prior.
    sparsity_param : float, default=0.01
        L1 weight λ of the off-diagonal entries (the graphical lasso's ``alpha``).
    prior : {"identity", "covariance", "random"} or ndarray, default="identity"
        ``M₀`` (strictly positive definite; ``"covariance"``: the inverse covariance of the
        training samples; ``"random"``: a random SPD matrix drawn with ``random_state``).
    verbose : bool, default=False
        Passed to the graphical lasso.
    preprocessor : array-like, optional
        Samples that integer index pairs refer to.
    random_state : int, RandomState instance or None
        Seeds ``prior="random"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        ``L`` with ``M = Lᵀ L``.
    threshold_ : float

    References
    ----------
    G.-J. Qi, J. Tang, Z.-J. Zha, T.-S. Chua, H.-J. Zhang. An efficient sparse metric learning
    in high-dimensional space via l1-penalized log-determinant regularization. ICML 2009.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import SDML, make_pairs
    >>> X, labels = load_iris(return_X_y=True)
    >>> pairs, y = make_pairs(labels, max_positives=200, random_state=0)
    >>> model = SDML(prior="covariance", balance_param=1e-5, preprocessor=X).fit(pairs, y)
    >>> model.transform(X[:3]).shape
    (3, 4)
    >>> bool(model.score(pairs, y) > 0.7)  # ROC AUC on the training pairs
    True
    """

    def __init__(self, balance_param: float = 0.5, sparsity_param: float = 0.01,
                 prior="identity", verbose: bool = False, preprocessor=None,
                 random_state=None):
        self.balance_param = balance_param
        self.sparsity_param = sparsity_param
        self.prior = prior
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        check_positive_scalar(self.balance_param, "balance_param", allow_zero=True)
        check_positive_scalar(self.sparsity_param, "sparsity_param")
        Z, i, j = data.stacked()
        d = Z.shape[1]
        if d < 2:
            raise ValueError(f"SDML needs at least 2 features, got {d}.")
        _, prior_inv = metric_matrix(self.prior, Z, name="prior",
                                     random_state=self.random_state, strict_pd=True)
        P = sdml_matrix(prior_inv, Z[i] - Z[j], y.astype(float), float(self.balance_param))
        P = (P + P.T) / 2
        w, U = np.linalg.eigh(P)
        if w.min() < 0.0:
            warnings.warn("SDML: the graphical lasso's input M0^-1 + balance_param * K is not "
                          f"positive semi-definite (smallest eigenvalue {w.min():.3g}); it is "
                          "shifted to be. Decrease balance_param or use prior='identity'.",
                          ConvergenceWarning, stacklevel=user_stacklevel())
            P = (U * (w - w.min() + 1e-10)) @ U.T
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                _, M = graphical_lasso(P, alpha=float(self.sparsity_param),
                                       verbose=bool(self.verbose))
        except FloatingPointError as exc:
            raise ValueError(f"SDML: the graphical lasso failed ({exc}); increase "
                             "sparsity_param or decrease balance_param.") from None
        if not np.isfinite(M).all() or np.linalg.eigvalsh(M).min() < 0.0:
            raise ValueError("SDML: the graphical lasso returned a matrix that is not positive "
                             "semi-definite; increase sparsity_param or decrease balance_param.")
        self.components_ = components_from_metric(M)


class SDML_Supervised(SDML):  # noqa: N801 - metric-learn's name
    """SDML from samples and class labels (metric-learn 0.7.0's ``SDML_Supervised``).

    ``fit(X, y)`` draws ``n_constraints`` same-class and as many different-class pairs
    (:func:`crossmetric.learners.lsml.label_pairs`) and fits :class:`SDML` on them; pairs and
    +1 / -1 labels are also taken, as by :class:`SDML`. Parameters as :class:`SDML`, with
    ``n_constraints`` (default ``20 * n_classes**2``); ``random_state`` also seeds the pairs.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import SDML_Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> sdml = SDML_Supervised(prior="covariance", balance_param=1e-5, n_constraints=200,
    ...                        random_state=0).fit(X, y)
    >>> sdml.transform(X).shape
    (150, 4)
    """

    def __init__(self, balance_param: float = 0.5, sparsity_param: float = 0.01,
                 prior="identity", n_constraints=None, verbose: bool = False,
                 preprocessor=None, random_state=None):
        super().__init__(balance_param=balance_param, sparsity_param=sparsity_param,
                         prior=prior, verbose=verbose, preprocessor=preprocessor,
                         random_state=random_state)
        self.n_constraints = n_constraints

    def fit(self, X, y):
        """Draw pairs from the class labels ``y`` and fit SDML (or fit on given pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,), or the pairs' +1 / -1 labels

        Returns
        -------
        self
        """
        if is_pair_input(X, self.preprocessor):
            return super().fit(X, y)
        return super().fit(*supervised_pairs(X, y, self.n_constraints, self.random_state))
