"""Shared base of the learners ported from metric-learn that learn from samples, not pairs.

RCA (chunklets), MLKR and LFDA (samples and targets) and SCML (triplets) take metric-learn
0.7.0's input forms in ``fit``. They are also pair learners: given pairs in one of the pair
forms of :class:`crossmetric._base.PairLearnerMixin` (index pairs ``(n_pairs, 2)`` with a
``preprocessor``, float pairs ``(n_pairs, 2, n_features)`` or a tuple ``(Xp, Yp)``) and labels
in {+1, -1}, they take as classes the connected components of the positive pairs
(:func:`crossmetric.pairs.labels_from_pairs`, as NCA and LMNN do) and fit on the distinct
samples of the pairs. Either way the fitted model is a linear single-modal pair learner
(``transform``, ``pair_distance``, ``get_mahalanobis_matrix``, ...).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from crossmetric._base import LinearSingleModalMixin, squared_euclidean_rows
from crossmetric._utils.checks import check_array_2d
from crossmetric.learners._mahalanobis_common import is_pair_input
from crossmetric.learners._threshold import best_threshold
from crossmetric.pairs import labels_from_pairs
from crossmetric.pairs._pair_data import PairData

#: pairs drawn to place ``threshold_`` after a fit on samples
_THRESHOLD_PAIRS = 4000


class _SampleFormMetric(LinearSingleModalMixin, BaseEstimator):
    """``fit`` on metric-learn's input form, or on pairs (classes = positive components)."""

    #: number of points per tuple of the native tuple form (SCML: 3); 0 for samples
    _native_tuple: int = 0

    def _is_pair_form(self, X) -> bool:
        return is_pair_input(X, getattr(self, "preprocessor", None))

    def _fit(self, data: PairData, y: np.ndarray) -> None:
        labels = labels_from_pairs(data.ix, data.iy, y, data.X.shape[0])
        self._fit_labels(data.X, labels)

    def _fit_labels(self, X: np.ndarray, labels: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError

    def _fit_class_samples(self, X, y):
        """``fit(X, y)`` on samples and class labels: :meth:`_fit_labels` on the class
        codes, then the attributes of a fit (:meth:`_finish_native`); returns ``self``."""
        X, y = check_samples_and_targets(X, y, type(self).__name__)
        self._fit_labels(X, np.unique(y, return_inverse=True)[1].ravel())
        self._finish_native(X, y)
        return self

    def _finish_native(self, X: np.ndarray, labels: np.ndarray | None) -> None:
        """Attributes a pair fit sets: feature counts, ``classes_`` and ``threshold_``.

        ``threshold_`` is the accuracy-optimal cut on up to 4,000 random same / different
        class pairs of the training samples when ``labels`` are classes, else the median
        learned distance of random pairs (recalibrate with :meth:`calibrate_threshold`).
        """
        d = X.shape[1]
        self._sample_shape_x_ = self._sample_shape_y_ = (d,)
        self.n_features_in_ = self.n_features_in_x_ = self.n_features_in_y_ = d
        self.classes_ = np.array([-1, 1])
        rng = np.random.RandomState(0)
        n = X.shape[0]
        i = rng.randint(n, size=_THRESHOLD_PAIRS)
        j = (i + 1 + rng.randint(max(n - 1, 1), size=_THRESHOLD_PAIRS)) % n
        Z = self._embed_x(X)
        dist = squared_euclidean_rows(Z[i], Z[j])
        if labels is not None:
            same = np.where(labels[i] == labels[j], 1, -1)
            if (same == 1).any() and (same == -1).any():
                self.threshold_ = float(best_threshold(dist, same, "accuracy"))
                return
        self.threshold_ = float(np.median(dist))


def check_samples_and_targets(X, y, name: str, *, numeric: bool = False):
    """``X`` (n, d) finite floats with at least 2 rows and ``y`` one target per row."""
    X = check_array_2d(X, "X", min_samples=2)
    if y is None:
        raise ValueError(f"{name}.fit needs targets y, one per row of X.")
    y = np.asarray(y)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"{name}: X has {X.shape[0]} rows but y has {y.shape[0]} targets; "
                         "they must have the same length.")
    if numeric:
        if y.dtype == object or y.dtype.kind not in "biuf" or y.ndim not in (1, 2):
            raise ValueError(f"{name}: y must be numeric targets of shape (n,) or "
                             f"(n, n_outputs), got dtype {y.dtype} and shape {y.shape}.")
        y = y.astype(np.float64)
        if not np.isfinite(y).all():
            raise ValueError(f"{name}: y contains NaN or infinity; every target must be finite.")
    elif y.ndim != 1:
        raise ValueError(f"{name}: y must be a 1-D array of class labels, got shape {y.shape}.")
    return X, y


def knn_triplets(X: np.ndarray, labels: np.ndarray, k_genuine: int,
                 k_impostor: int) -> np.ndarray:
    """Index triplets ``(a, b, c)``: ``b`` one of the ``k_genuine`` nearest same-class samples
    of ``a`` and ``c`` one of its ``k_impostor`` nearest other-class samples, every combination
    (metric-learn's ``Constraints.generate_knntriplets``; fewer neighbours where a class has
    fewer). Samples with a negative label are left out."""
    from crossmetric._base import squared_euclidean_matrix

    keep = np.flatnonzero(labels >= 0) if labels.dtype.kind in "iuf" else np.arange(len(labels))
    D = squared_euclidean_matrix(X[keep], X[keep])
    lab = labels[keep]
    np.fill_diagonal(D, np.inf)
    out = []
    for c in np.unique(lab):
        rows = np.flatnonzero(lab == c)
        others = np.flatnonzero(lab != c)
        kg, ki = min(k_genuine, rows.size - 1), min(k_impostor, others.size)
        if kg < 1 or ki < 1:
            continue
        Dr = D[rows]
        gen = rows[np.argsort(Dr[:, rows], axis=1, kind="stable")[:, :kg]]
        imp = others[np.argsort(Dr[:, others], axis=1, kind="stable")[:, :ki]]
        a = np.repeat(rows, kg * ki)
        b = np.repeat(gen, ki, axis=1).ravel()
        cc = np.tile(imp, (1, kg)).ravel()
        out.append(np.column_stack([a, b, cc]))
    if not out:
        return np.empty((0, 3), np.int64)
    return keep[np.vstack(out)]
