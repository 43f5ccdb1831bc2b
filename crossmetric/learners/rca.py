"""Relevant components analysis (Shental et al., ECCV 2002; Bar-Hillel et al., JMLR 2005).

RCA whitens the data by the within-chunklet covariance: a *chunklet* is a set of samples known
to belong to one class. With
``C = (1/|S|) Σ_chunklets Σ_{x ∈ chunklet} (x − m_chunk)(x − m_chunk)ᵀ`` the learned
transform is ``L = C^{-1/2}`` (the metric ``M = C^{-1}``). With ``n_components < d``
the data are first projected onto the ``n_components`` directions of smallest
within-chunklet / total variance ratio (Fisher's discriminant, the generalised eigenproblem
``C a = λ T a``), then whitened there (metric-learn 0.7.0's ``RCA``).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
from sklearn.utils import check_random_state

from crossmetric._utils.checks import check_n_components, check_positive_int
from crossmetric.learners._sample_forms import _SampleFormMetric, check_samples_and_targets

__all__ = ["RCA", "RCA_Supervised", "rca_components", "chunks_from_labels"]


def _inv_sqrtm(S: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(S)
    return (V / np.sqrt(w)) @ V.T


def rca_components(X: np.ndarray, chunks: np.ndarray, n_components: int | None = None):
    """RCA's transform ``L`` (n_components × d) from samples and chunk ids (``-1``: none)."""
    chunks = np.asarray(chunks)
    if chunks.dtype.kind not in "iu" and not (chunks.dtype.kind == "f"
                                             and np.all(chunks == np.round(chunks))):
        raise ValueError(f"chunks must be integer chunklet ids (-1: no chunklet), got dtype "
                         f"{chunks.dtype}.")
    chunks = chunks.astype(np.int64)
    d = X.shape[1]
    dim = d if n_components is None else check_n_components(n_components, d)
    mask = chunks >= 0
    ids = chunks[mask]
    if ids.size == 0 or np.bincount(np.unique(ids, return_inverse=True)[1]).max() < 2:
        raise ValueError("RCA needs at least one chunklet of two or more samples "
                         "(chunks >= 0 shared by several rows).")
    Xc = X[mask]
    _, inv = np.unique(ids, return_inverse=True)
    means = np.zeros((inv.max() + 1, d))
    np.add.at(means, inv, Xc)
    means /= np.bincount(inv)[:, None]
    centred = Xc - means[inv]
    inner = centred.T @ centred / centred.shape[0]
    rank = np.linalg.matrix_rank(inner)
    if dim > rank:
        raise ValueError(f"RCA: the within-chunklet covariance has rank {rank} < "
                         f"n_components={dim}; use more or larger chunklets, remove linearly "
                         "dependent features (e.g. PCA first) or lower n_components.")
    if dim == d:
        return _inv_sqrtm(inner)
    total = np.atleast_2d(np.cov(Xc, rowvar=False))
    # the dim directions of smallest within/total variance ratio (C a = λ T a); the learned
    # metric A (AᵀCA)⁻¹ Aᵀ depends only on the subspace they span
    try:
        _, A = scipy.linalg.eigh(inner, total, subset_by_index=[0, dim - 1])
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eig(np.linalg.lstsq(total, inner, rcond=None)[0])
        A = np.real(vecs[:, np.argsort(np.real(vals))[:dim]])
    return _inv_sqrtm(A.T @ inner @ A) @ A.T


def chunks_from_labels(labels, n_chunks: int = 100, chunk_size: int = 2, random_state=None):
    """Chunk ids from class labels: ``n_chunks`` chunklets of ``chunk_size`` samples of one
    class each, a sample in at most one (``-1``: in none); labels ``< 0`` are unknown.

    Each chunklet draws a class uniformly among those with ``chunk_size`` samples left, then
    ``chunk_size`` of its unused samples (metric-learn's ``Constraints.chunks`` draws among all
    but the last class).
    """
    labels = np.asarray(labels)
    rng = check_random_state(random_state)
    known = labels >= 0 if labels.dtype.kind in "iuf" else np.ones(labels.shape, bool)
    classes = np.unique(labels[known])
    pools = [list(rng.permutation(np.flatnonzero(known & (labels == c)))) for c in classes]
    most = sum(len(p) // chunk_size for p in pools)
    if most < n_chunks:
        raise ValueError(f"Not enough samples for {n_chunks} chunks of {chunk_size}: at most "
                         f"{most} chunks of one class each can be formed.")
    chunks = -np.ones(labels.shape[0], np.int64)
    for idx in range(n_chunks):
        live = [p for p in pools if len(p) >= chunk_size]
        pool = live[rng.randint(len(live))]
        take = [pool.pop() for _ in range(chunk_size)]
        chunks[take] = idx
    return chunks


class RCA(_SampleFormMetric):
    """Relevant components analysis from chunklets (metric-learn 0.7.0's ``RCA``).

    Learns ``L = C^{-1/2}``, ``C`` the within-chunklet covariance (module docstring): dimensions
    that vary inside chunklets are shrunk. ``fit(X, chunks)`` takes the chunk id of each sample
    (``-1``: in no chunklet); given pairs and +1/-1 labels instead, the chunklets are the
    connected components of the positive pairs.

    Parameters
    ----------
    n_components : int or None, default=None
        Dimension of the learned space; all features when None (then ``L`` is square).
    preprocessor : array-like, optional
        Samples that index pairs ``(n_pairs, 2)`` point into (pair form only).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned transform ``L``.
    threshold_ : float
        Distance threshold of :meth:`predict` on pairs.

    Raises
    ------
    ValueError
        If the within-chunklet covariance has lower rank than ``n_components`` (metric-learn
        warns and returns NaN there).

    References
    ----------
    N. Shental, T. Hertz, D. Weinshall and M. Pavel, "Adjustment learning and relevant
    component analysis", ECCV 2002.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import RCA
    >>> X = np.array([[-0.05, 3.0], [0.05, -3.0], [0.1, -3.55], [-0.1, 3.55],
    ...               [-0.95, -0.05], [0.95, 0.05], [0.4, 0.05], [-0.4, -0.05]])
    >>> chunks = [0, 0, 1, 1, 2, 2, 3, 3]
    >>> rca = RCA().fit(X, chunks)
    >>> rca.transform(X).shape
    (8, 2)
    """

    def __init__(self, n_components=None, preprocessor=None):
        self.n_components = n_components
        self.preprocessor = preprocessor

    def fit(self, X, chunks):
        """Learn the metric from samples and chunk ids (or from pairs and +1/-1 labels).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        chunks : array-like of int, shape (n_samples,)
            ``chunks[i] = j``: sample ``i`` is in chunklet ``j``; ``-1``: in none.

        Returns
        -------
        self
        """
        if self._is_pair_form(X):
            return super().fit(X, chunks)
        X, chunks = check_samples_and_targets(X, chunks, type(self).__name__)
        self.components_ = rca_components(X, chunks, self.n_components)
        self._finish_native(X, None)
        return self

    def _fit_labels(self, X, labels):
        counts = np.bincount(labels)
        chunks = np.where(counts[labels] >= 2, labels, -1)
        self.components_ = rca_components(X, chunks, self.n_components)


class RCA_Supervised(RCA):
    """RCA from class labels (metric-learn 0.7.0's ``RCA_Supervised``).

    Draws ``n_chunks`` chunklets of ``chunk_size`` same-class samples
    (:func:`chunks_from_labels`) and fits :class:`RCA` on them.

    Parameters
    ----------
    n_components : int or None, default=None
        Dimension of the learned space; all features when None.
    n_chunks : int, default=100
        Number of chunklets to draw.
    chunk_size : int, default=2
        Samples per chunklet.
    preprocessor : array-like, optional
        Samples that index pairs point into (pair form only).
    random_state : int, RandomState instance or None
        Seeds the chunklet draw.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    chunks_ : ndarray of shape (n_samples,)
        The chunk ids drawn (``-1``: in no chunklet).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from crossmetric import RCA_Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> rca = RCA_Supervised(n_chunks=30, chunk_size=2, random_state=0).fit(X, y)
    >>> rca.components_.shape
    (4, 4)
    """

    def __init__(self, n_components=None, n_chunks=100, chunk_size=2, preprocessor=None,
                 random_state=None):
        self.n_components = n_components
        self.n_chunks = n_chunks
        self.chunk_size = chunk_size
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Draw chunklets from the class labels ``y`` and learn RCA (or fit on pairs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or pairs
        y : array-like of shape (n_samples,)
            Class labels (``< 0``: unknown), or +1/-1 pair labels with pairs.

        Returns
        -------
        self
        """
        if self._is_pair_form(X):
            return super().fit(X, y)
        X, y = check_samples_and_targets(X, y, type(self).__name__)
        n_chunks = check_positive_int(self.n_chunks, "n_chunks")
        size = check_positive_int(self.chunk_size, "chunk_size", minimum=2)
        if n_chunks * (size - 1) < X.shape[1]:
            warnings.warn(f"RCA_Supervised: {n_chunks} chunks of {size} give a within-chunklet "
                          f"covariance of rank < {X.shape[1]} features; the fit may fail. "
                          "Draw more or larger chunks.", UserWarning, stacklevel=2)
        self.chunks_ = chunks_from_labels(y, n_chunks, size, self.random_state)
        self.components_ = rca_components(X, self.chunks_, self.n_components)
        self._finish_native(X, y)
        return self
