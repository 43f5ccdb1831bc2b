"""Kernels and explicit feature maps.

Kernels (``kernel=`` of the kernel learners):

* ``"linear"``   ``k(x, y) = xᵀy``
* ``"rbf"``      ``k(x, y) = exp(−γ ‖x − y‖²)``
* ``"chi2"``     ``k(x, y) = Σ_i 2 x_i y_i / (x_i + y_i)`` (pcca §4; 0/0 taken as 0)
* ``"chi2_rbf"`` ``k(x, y) = exp(−γ Σ_i (x_i − y_i)² / (x_i + y_i))`` (pcca §4, cmml eq. 13-14)

The χ² kernels need non-negative features (histograms) and reject anything else.

``gamma=None`` picks ``γ = 1 / mean d²(x, x')`` over training samples (the kernel's own squared
distance: Euclidean for ``rbf``, χ² for ``chi2_rbf``), estimated on at most 1,000 training
rows drawn at random with a fixed seed -- a scale-free default, where the papers fix γ for
their own features (cmml §4.1: γ = 2 on its LTP histograms).

Kernel rows of new samples against the training samples are computed in row blocks
(:class:`KernelMap`), so memory stays bounded for large inputs.

Past a few thousand samples the n × n kernel matrix is the bottleneck (O(n²) memory, O(n²k)
per iteration). :class:`NystroemMap` replaces it by an explicit m-dimensional feature map
``φ(x)`` with ``φ(x)ᵀφ(x') ≈ k(x, x')`` built on ``m`` random landmark samples (Williams &
Seeger 2001): the kernel learners' ``kernel_approximation="nystroem"`` feeds ``φ`` to their
*linear* tower, so a fit costs O(n·m²) once plus O(n·m·k) per iteration.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import additive_chi2_kernel, euclidean_distances
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import (
    check_array_2d,
    check_nonnegative,
    check_positive_int,
    check_positive_scalar,
    per_modality,
)
from crossmetric.pairs._pair_data import PairData

if TYPE_CHECKING:  # the learners the mixin below is put in front of
    from crossmetric._base import CrossModalMixin as _CrossModalLearner
else:
    _CrossModalLearner = object

__all__ = ["KERNELS", "pairwise_kernel", "estimate_gamma", "KernelMap", "HellingerMap",
           "KernelCoordinates", "NystroemMap", "KERNEL_APPROXIMATIONS"]

KERNELS = ("linear", "rbf", "chi2", "chi2_rbf")
_NEEDS_GAMMA = ("rbf", "chi2_rbf")
_NONNEGATIVE = ("chi2", "chi2_rbf")
_BLOCK_ELEMENTS = 1 << 22


def check_kernel(kernel: Any, name: str = "kernel") -> str:
    """``kernel`` must be one of :data:`KERNELS`."""
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"{name} must be one of {KERNELS}, got {kernel!r}.")
    return kernel


def check_kernel_input(X: np.ndarray, kernel: str, name: str) -> np.ndarray:
    """χ² kernels need non-negative input: raise ``ValueError`` naming ``name`` otherwise."""
    if kernel in _NONNEGATIVE:
        check_nonnegative(X, name, f"the {kernel!r} kernel")
    return X


def _squared_distances(X: np.ndarray, Y: np.ndarray, kernel: str) -> np.ndarray:
    if kernel == "chi2_rbf":
        return -additive_chi2_kernel(X, Y)
    return euclidean_distances(X, Y, squared=True)


def estimate_gamma(X: np.ndarray, kernel: str, max_samples: int = 1000) -> float:
    """``1 / mean d²`` over distinct pairs of at most ``max_samples`` rows.

    Beyond ``max_samples`` rows the estimate uses a uniform random subset drawn with a fixed
    seed (so it is deterministic), which represents every part of ``X`` whatever the row order:
    a prefix or a stride would over-represent the rows that happen to come first.
    """
    if X.shape[0] > max_samples:
        keep = np.random.RandomState(0).choice(X.shape[0], max_samples, replace=False)
        S = X[np.sort(keep)]
    else:
        S = X
    if S.shape[0] < 2:
        return 1.0
    D = _squared_distances(S, S, kernel)
    n = S.shape[0]
    mean = D.sum() / (n * (n - 1))
    return float(1.0 / mean) if mean > 0 else 1.0


def _kernel_block(X: np.ndarray, Y: np.ndarray, kernel: str, gamma: float | None) -> np.ndarray:
    if kernel == "linear":
        return X @ Y.T
    if kernel == "chi2":
        # Σ 2xy/(x+y) = Σ (x+y)/2 − Σ (x−y)²/(2(x+y)) = (Σx + Σy)/2 + additive_chi2/2
        K = additive_chi2_kernel(X, Y)
        K += X.sum(axis=1)[:, None]
        K += Y.sum(axis=1)[None, :]
        K *= 0.5
        return K
    if gamma is None:
        raise ValueError(f"gamma must be a positive number for kernel={kernel!r}, got None.")
    K = _squared_distances(X, Y, kernel)
    K *= -gamma
    np.exp(K, out=K)
    return K


def pairwise_kernel(X: ArrayLike, Y: ArrayLike | None = None, kernel: str = "linear",
                    gamma: float | None = None) -> np.ndarray:
    """Kernel matrix ``K[a, b] = k(X[a], Y[b])``.

    Parameters
    ----------
    X : array-like of shape (n_x, n_features)
    Y : array-like of shape (n_y, n_features), optional
        Defaults to ``X``.
    kernel : {"linear", "rbf", "chi2", "chi2_rbf"}
    gamma : float, optional
        Bandwidth of ``rbf`` / ``chi2_rbf``; ``None`` estimates it from ``X``
        (:func:`estimate_gamma`).

    Returns
    -------
    ndarray of shape (n_x, n_y)
    """
    kernel = check_kernel(kernel)
    X = check_kernel_input(check_array_2d(X, "X"), kernel, "X")
    Y = X if Y is None else check_kernel_input(check_array_2d(Y, "Y"), kernel, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features, got {X.shape[1]} and {Y.shape[1]}."
        )
    if kernel in _NEEDS_GAMMA:
        gamma = estimate_gamma(X, kernel) if gamma is None else check_positive_scalar(
            gamma, "gamma")
    return _kernel_block(X, Y, kernel, gamma)


class KernelMap(TransformerMixin, BaseEstimator):
    """Empirical kernel map ``x ↦ [k(x, x_1), …, k(x, x_n)]`` against the training samples.

    Parameters
    ----------
    kernel : {"linear", "rbf", "chi2", "chi2_rbf"}, default="rbf"
    gamma : float, optional
        Bandwidth for ``rbf`` / ``chi2_rbf``; ``None`` estimates it at ``fit``.
    block_elements : int, default=4194304
        Kernel values computed per block in :meth:`transform`.

    Attributes
    ----------
    X_fit_ : ndarray of shape (n_train, n_features)
    gamma_ : float or None
    n_features_in_ : int
    """

    def __init__(self, kernel: str = "rbf", *, gamma: float | None = None,
                 block_elements: int = _BLOCK_ELEMENTS):
        self.kernel = kernel
        self.gamma = gamma
        self.block_elements = block_elements

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Store the training samples and resolve ``gamma``."""
        kernel = check_kernel(self.kernel)
        X = check_kernel_input(check_array_2d(X, "X"), kernel, "X")
        self.gamma_: float | None
        if kernel in _NEEDS_GAMMA:
            self.gamma_ = (estimate_gamma(X, kernel) if self.gamma is None
                           else check_positive_scalar(self.gamma, "gamma"))
        else:
            self.gamma_ = None
        self.X_fit_ = X
        self.n_features_in_ = X.shape[1]
        return self

    def train_kernel(self) -> np.ndarray:
        """The training kernel matrix ``K(X_fit_, X_fit_)`` (symmetrised)."""
        check_is_fitted(self)
        K = _kernel_block(self.X_fit_, self.X_fit_, self.kernel, self.gamma_)
        K += K.T
        K *= 0.5
        return K

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Kernel rows ``K(X, X_fit_)``, computed in row blocks.

        Returns
        -------
        ndarray of shape (n_samples, n_train)
        """
        check_is_fitted(self)
        X = check_kernel_input(check_array_2d(X, "X"), self.kernel, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but KernelMap was fitted on "
                f"{self.n_features_in_} features."
            )
        n_fit = self.X_fit_.shape[0]
        out = np.empty((X.shape[0], n_fit))
        rows = max(1, int(self.block_elements) // n_fit)
        for sl in gen_batches(X.shape[0], rows):
            out[sl] = _kernel_block(X[sl], self.X_fit_, self.kernel, self.gamma_)
        return out


class HellingerMap(TransformerMixin, BaseEstimator):
    """Explicit map of the Hellinger (Bhattacharyya) kernel: ``x ↦ √x`` element-wise.

    Linear methods on square-rooted histograms are the papers' ``-sqrt`` variants (pcca §4).

    Parameters
    ----------
    normalize : bool, default=False
        L1-normalise each row before the square root (histograms that do not sum to one).
    """

    def __init__(self, normalize: bool = False):
        self.normalize = normalize

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Check ``X`` (non-negative) and record its number of features."""
        X = check_nonnegative(check_array_2d(X, "X"), "X", "the Hellinger map")
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Element-wise square root (after optional L1 normalisation)."""
        check_is_fitted(self)
        X = check_nonnegative(check_array_2d(X, "X"), "X", "the Hellinger map")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but HellingerMap was fitted on "
                f"{self.n_features_in_} features."
            )
        if self.normalize:
            s = X.sum(axis=1, keepdims=True)
            X = X / np.where(s > 0, s, 1.0)
        return np.sqrt(X)


class KernelCoordinates(TransformerMixin, BaseEstimator):
    """Exact coordinates of samples in the span of the training samples' feature space.

    With the centred training kernel ``K_c = U S Uᵀ`` (rank ``r``), a sample ``x`` has the
    coordinates ``z(x) = S^{-1/2} Uᵀ k_c(x)`` in the orthonormal basis of
    ``span{φ(x_i) − φ̄}`` (kernel PCA, Schölkopf, Smola & Müller 1998), ``k_c(x)`` its centred
    kernel row. Inner products and Euclidean distances of these coordinates equal those of
    the centred feature vectors for every training sample, and of the projections onto that
    span for new samples. A *linear* method run on ``z`` is therefore its kernel version with
    the weight vectors restricted to the span of the training samples (the representer form
    ``w = Σ α_i φ(x_i)``): this is how :class:`~crossmetric.learners.baselines.KPLS`,
    :class:`~crossmetric.learners.baselines.KCDFE` and
    :class:`~crossmetric.learners.discriminant.KCSR` are built.

    Parameters
    ----------
    kernel : {"linear", "rbf", "chi2", "chi2_rbf"}, default="rbf"
    gamma : float, optional
        Bandwidth (``None``: estimated at ``fit``, see the module docstring).
    rtol : float, default=1e-10
        Eigenvalues below ``rtol · max eigenvalue`` are dropped (numerical rank).

    Attributes
    ----------
    kernel_map_ : KernelMap
    eigenvalues_ : ndarray of shape (r,)
    projection_ : ndarray of shape (n_train, r)
        ``U S^{-1/2}``: centred kernel rows → coordinates.
    """

    def __init__(self, kernel: str = "rbf", *, gamma: float | None = None, rtol: float = 1e-10):
        self.kernel = kernel
        self.gamma = gamma
        self.rtol = rtol

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Centre and eigendecompose the training kernel."""
        self.kernel_map_ = KernelMap(self.kernel, gamma=self.gamma).fit(X)
        K = self.kernel_map_.train_kernel()
        self.col_mean_ = K.mean(axis=0)
        self.total_mean_ = float(self.col_mean_.mean())
        Kc = K - self.col_mean_[None, :] - self.col_mean_[:, None] + self.total_mean_
        s, U = np.linalg.eigh((Kc + Kc.T) / 2)
        keep = s > max(s.max(), 0.0) * float(self.rtol)
        if not keep.any():
            raise ValueError("the centred training kernel is zero: all training samples "
                             "coincide in feature space.")
        self.eigenvalues_ = s[keep][::-1]
        self.projection_ = U[:, keep][:, ::-1] / np.sqrt(self.eigenvalues_)
        self.n_features_in_ = self.kernel_map_.n_features_in_
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Coordinates ``z(x)`` of each row, shape ``(n_samples, r)``."""
        check_is_fitted(self)
        Kr = self.kernel_map_.transform(X)
        Kr = Kr - self.col_mean_[None, :] - Kr.mean(axis=1, keepdims=True) + self.total_mean_
        return Kr @ self.projection_


KERNEL_APPROXIMATIONS = (None, "nystroem")
#: our kernel name -> scikit-learn's, where sklearn's Nystroem computes the same kernel
#: (sklearn's ``chi2`` kernel is exp(−γ Σ (x−y)²/(x+y)), our ``chi2_rbf``)
_SKLEARN_KERNEL = {"rbf": "rbf", "chi2_rbf": "chi2"}


#: ``kernel_approximation="auto"`` computes exact kernels up to this many samples a side (an
#: n × n float64 kernel then takes at most 200 MB) and switches to Nyström features above
EXACT_KERNEL_MAX_SAMPLES = 5000


def check_kernel_approximation(value: Any, name: str = "kernel_approximation", *,
                               n_samples: int | None = None,
                               learner: str = "the learner") -> str | None:
    """``value`` checked; ``"auto"`` resolved for ``n_samples`` training samples: ``None``
    (exact kernels) up to :data:`EXACT_KERNEL_MAX_SAMPLES`, ``"nystroem"`` above, with a
    one-line note (a ``UserWarning``) that says so."""
    if value != "auto" and value not in KERNEL_APPROXIMATIONS:
        raise ValueError(f"{name} must be one of {(*KERNEL_APPROXIMATIONS, 'auto')}, got "
                         f"{value!r}.")
    if value != "auto":
        return value
    if n_samples is None or n_samples <= EXACT_KERNEL_MAX_SAMPLES:
        return None
    warnings.warn(f"{learner}: {n_samples} training samples a side; an exact kernel would "
                  f"take {n_samples ** 2 * 8 / 2 ** 30:.1f} GiB, so Nyström features are used "
                  f"(kernel_approximation='auto', above {EXACT_KERNEL_MAX_SAMPLES}); set "
                  f"kernel_approximation=None to force the exact kernel.", UserWarning,
                  stacklevel=3)
    return "nystroem"


class NystroemMap(TransformerMixin, BaseEstimator):
    """Nyström feature map ``φ(x) = K_mm^{-1/2} [k(x, l_1), …, k(x, l_m)]`` on m landmarks.

    ``φ(x)ᵀφ(x') = k_xmᵀ K_mm⁺ k_x'm`` is the Nyström approximation of ``k(x, x')``; it is exact
    when the landmarks are all the training samples (and ``K`` is non-singular). ``rbf`` and
    ``chi2_rbf`` use scikit-learn's :class:`~sklearn.kernel_approximation.Nystroem` (its
    ``"chi2"`` kernel is our ``chi2_rbf``); ``chi2`` (additive) and ``linear`` use the same
    construction with this module's kernels (sklearn would call a Python callable per pair).

    Parameters
    ----------
    kernel : {"linear", "rbf", "chi2", "chi2_rbf"}, default="rbf"
    gamma : float, optional
        Bandwidth; ``None`` estimates it from the training samples (:func:`estimate_gamma`).
    n_landmarks : int, default=1000
        Landmarks m, drawn uniformly without replacement (at most the number of samples).
    random_state : int, RandomState instance or None
    block_elements : int, default=4194304
        Kernel values computed per block in :meth:`transform`.
    center : bool, default=False
        Subtract the mean feature vector of the samples given to :meth:`fit`: the features of
        the centred kernel (as kernel PCA and kernel CCA centre it). Distances between samples
        mapped by one map do not change; two maps fitted on two modalities then share an
        origin, each its own modality's mean, which a map without bias (a tower ``A φ(x)``)
        cannot learn.

    Attributes
    ----------
    gamma_ : float or None
    landmarks_ : ndarray of shape (m, n_features)
    normalization_ : ndarray of shape (m, m)
        ``K_mm^{-1/2}`` (pseudo-inverse square root).
    feature_mean_ : ndarray of shape (m,)
        ``center=True`` only: the mean of ``φ`` over the fitted samples.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.kernels import NystroemMap
    >>> X = np.random.RandomState(0).rand(30, 4)
    >>> Phi = NystroemMap(gamma=1.0, n_landmarks=10, center=True, random_state=0).fit_transform(X)
    >>> Phi.shape, bool(np.allclose(Phi.mean(axis=0), 0.0))
    ((30, 10), True)
    """

    def __init__(self, kernel: str = "rbf", *, gamma: float | None = None,
                 n_landmarks: int = 1000, random_state: int | np.random.RandomState | None = None,
                 block_elements: int = _BLOCK_ELEMENTS, center: bool = False):
        self.kernel = kernel
        self.gamma = gamma
        self.n_landmarks = n_landmarks
        self.random_state = random_state
        self.block_elements = block_elements
        self.center = center

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Draw the landmarks and compute ``K_mm^{-1/2}``."""
        kernel = check_kernel(self.kernel)
        m = check_positive_int(self.n_landmarks, "n_landmarks")
        X = check_kernel_input(check_array_2d(X, "X"), kernel, "X")
        self.gamma_: float | None
        if kernel in _NEEDS_GAMMA:
            self.gamma_ = (estimate_gamma(X, kernel) if self.gamma is None
                           else check_positive_scalar(self.gamma, "gamma"))
        else:
            self.gamma_ = None
        m = min(m, X.shape[0])
        rng = check_random_state(self.random_state)
        if kernel in _SKLEARN_KERNEL:
            ny = Nystroem(kernel=_SKLEARN_KERNEL[kernel], gamma=self.gamma_, n_components=m,
                          random_state=rng).fit(X)
            self.landmarks_, self.normalization_ = ny.components_, ny.normalization_
        else:
            idx = np.sort(rng.permutation(X.shape[0])[:m])
            self.landmarks_ = X[idx]
            # as sklearn's Nystroem: K_mm^{-1/2} from the SVD, singular values floored at 1e-12
            U, S, Vt = np.linalg.svd(_kernel_block(self.landmarks_, self.landmarks_, kernel,
                                                   self.gamma_))
            S = np.maximum(S, 1e-12)
            self.normalization_ = (U / np.sqrt(S)) @ Vt
        self.n_features_in_ = X.shape[1]
        self.__dict__.pop("feature_mean_", None)  # a refit
        if self.center:
            self.feature_mean_ = self.transform(X).mean(axis=0)
        return self

    def __setstate__(self, state):
        # a map pickled or saved before ``center`` existed never centred
        super().__setstate__({"center": False, **state})

    def transform(self, X: ArrayLike) -> np.ndarray:
        """``φ(X)``, computed in row blocks. Returns an array of shape (n_samples, m)."""
        check_is_fitted(self)
        X = check_kernel_input(check_array_2d(X, "X"), self.kernel, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but NystroemMap was fitted on "
                f"{self.n_features_in_} features."
            )
        m = self.landmarks_.shape[0]
        out = np.empty((X.shape[0], m))
        rows = max(1, int(self.block_elements) // m)
        for sl in gen_batches(X.shape[0], rows):
            out[sl] = _kernel_block(X[sl], self.landmarks_, self.kernel,
                                    self.gamma_) @ self.normalization_.T
        mean = getattr(self, "feature_mean_", None)
        return out if mean is None else out - mean


# ------------------------------------------------------- linear learners on kernel coordinates
class _KernelCoordinatesMixin(_CrossModalLearner):
    """Run a linear cross-modal baseline on exact kernel coordinates of each modality.

    Each modality's samples (the distinct rows the training pairs use) fix a
    :class:`~crossmetric.kernels.KernelCoordinates` map; the linear method then runs on the
    coordinates, which is its kernel version (weights in the span of the training samples).
    The subclass lists the linear class first among its bases after this mixin.
    """

    kernel: Any  # the subclass's parameters: one kernel, or one per modality
    gamma: Any
    #: its towers start from kernel coordinates: the untrained distance is not one of them
    _holds_untrained = False

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        kx, ky = per_modality(self.kernel, "kernel")
        gx, gy = per_modality(self.gamma, "gamma")
        self.coordinates_x_ = KernelCoordinates(kx, gamma=gx).fit(data.X[np.unique(data.ix)])
        self.coordinates_y_ = KernelCoordinates(ky, gamma=gy).fit(data.Y[np.unique(data.iy)])
        super()._fit(PairData(self.coordinates_x_.transform(data.X),
                              self.coordinates_y_.transform(data.Y), data.ix, data.iy), y)

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return super()._embed_x(self.coordinates_x_.transform(X))

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return super()._embed_y(self.coordinates_y_.transform(Y))
