"""scikit-learn interoperability: pair learners as ordinary ``(X, y)`` estimators.

* :class:`Supervised` -- fits any *single-modal* pair learner from samples and class labels
  (``fit(X, labels)``), drawing the training pairs with :func:`crossmetric.pairs.make_pairs`,
  and ``transform(X)`` embeds samples in the learned metric: a ``Pipeline`` step before
  ``KNeighborsClassifier`` (the idea of metric-learn's ``*_Supervised`` classes).
* :class:`CrossPairs` -- cross-modal pairs ``(Xp, Yp)`` of different widths as one object that
  scikit-learn can split into folds, so that ``cross_val_score`` / ``GridSearchCV`` work on the
  tuple input form.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from crossmetric.pairs import make_pairs

__all__ = ["Supervised", "CrossPairs"]


class Supervised(TransformerMixin, BaseEstimator):
    """Fit a single-modal pair learner from ``(X, labels)`` and use it as a transformer.

    Parameters
    ----------
    learner : estimator
        An unfitted single-modal pair learner (``PCCA``, ``LDML``, ``CLML``, ``MahaAUC``,
        ``KISSME``, ...). It is cloned in :meth:`fit`.
    n_negatives : int, default=1
        Negative pairs per positive pair (the papers' n⁻), see
        :func:`crossmetric.pairs.make_pairs`.
    max_positives : int or None, default=None
        Cap on the positive pairs (class labels give quadratically many).
    random_state : int, RandomState or None
        Seeds the pair sampling.

    Attributes
    ----------
    learner_ : estimator
        The fitted clone (its ``preprocessor`` is reset to ``None``, so the training samples
        are not kept in it).
    pairs_ : ndarray (n_pairs, 2)
        Row indices of ``X`` of the training pairs; ``pair_labels_`` their +1 / -1 labels.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from crossmetric import PCCA, Supervised
    >>> X, y = load_iris(return_X_y=True)
    >>> model = make_pipeline(Supervised(PCCA(n_components=2, random_state=0),
    ...                                  random_state=0), KNeighborsClassifier(3))
    >>> model.fit(X, y).score(X, y) > 0.9
    True
    """

    def __init__(self, learner, *, n_negatives: int = 1, max_positives: int | None = None,
                 random_state=None):
        self.learner = learner
        self.n_negatives = n_negatives
        self.max_positives = max_positives
        self.random_state = random_state

    def fit(self, X, y):
        """Draw pairs from the labels ``y`` and fit the learner on them (index form).

        When the labels give more positive pairs than ``n_negatives`` distinct negatives each
        can be drawn for (few classes, e.g. two), a random subset of the positives is kept:
        at most half of the distinct negative pairs are asked for.
        """
        if bool(getattr(self.learner, "_cross_modal", False)):
            raise ValueError(
                f"learner must be single-modal; {type(self.learner).__name__} is cross-modal "
                "(fit it on pairs with preprocessor=(X, Y) instead)."
            )
        X, y = validate_data(self, X, y, accept_sparse=False, dtype=np.float64,
                             ensure_min_samples=2, y_numeric=False)
        max_positives = self._positive_cap(y)
        pairs, labels = make_pairs(y, n_negatives=self.n_negatives,
                                   max_positives=max_positives,
                                   random_state=self.random_state)
        learner = clone(self.learner).set_params(preprocessor=X)
        learner.fit(pairs, labels)
        learner.set_params(preprocessor=None)
        self.learner_ = learner
        self.pairs_, self.pair_labels_ = pairs, labels
        return self

    def _positive_cap(self, y: np.ndarray) -> int | None:
        """``max_positives``, lowered where the labels leave too few distinct negatives."""
        _, counts = np.unique(y, return_counts=True)
        if counts.size < 2:
            raise ValueError(f"y must hold at least two classes, got {counts.size}.")
        n_pos = int(np.sum(counts * (counts - 1) // 2))
        n_neg_possible = int((y.size ** 2 - np.sum(counts.astype(np.int64) ** 2)) // 2)
        n_neg = int(self.n_negatives)
        cap = self.max_positives
        if n_neg > 0 and n_pos * n_neg > n_neg_possible // 2:
            room = max(1, n_neg_possible // (2 * n_neg))
            cap = room if cap is None else min(int(cap), room)
        return cap

    def transform(self, X) -> np.ndarray:
        """Embed samples in the learned metric (the learner's ``transform``)."""
        check_is_fitted(self, "learner_")
        X = validate_data(self, X, reset=False, accept_sparse=False, dtype=np.float64)
        return self.learner_.transform(X)

    def get_metric(self):
        """The learned distance ``d(x, x')`` as a callable (the learner's ``get_metric``)."""
        check_is_fitted(self, "learner_")
        return self.learner_.get_metric()


class CrossPairs(tuple):
    """Cross-modal pairs ``(Xp, Yp)`` (row ``p`` of both = pair ``p``) that scikit-learn can split.

    A plain tuple ``(Xp, Yp)`` is a valid ``pairs`` argument but scikit-learn's model selection
    cannot index it by rows. ``CrossPairs(Xp, Yp)`` is the same tuple (``pairs[0]`` is ``Xp``,
    ``pairs[1]`` is ``Yp``, so every learner accepts it) with a ``shape`` of
    ``(n_pairs, 2)`` and row indexing: an integer array, boolean mask or slice selects pairs
    and returns a ``CrossPairs``.

    Examples
    --------
    >>> import numpy as np
    >>> p = CrossPairs(np.zeros((5, 3)), np.ones((5, 2)))
    >>> p.shape, p[[0, 2]].shape, p[1].shape
    ((5, 2), (2, 2), (5, 2))
    """

    def __new__(cls, Xp, Yp):
        Xp, Yp = np.asarray(Xp), np.asarray(Yp)
        if Xp.shape[:1] != Yp.shape[:1]:
            raise ValueError(f"Xp and Yp must be row-aligned, got {Xp.shape[0]} and "
                             f"{Yp.shape[0]} rows.")
        return super().__new__(cls, (Xp, Yp))

    def __getnewargs__(self):
        return tuple(self)

    @property
    def shape(self) -> tuple[int, int]:
        return (tuple.__getitem__(self, 0).shape[0], 2)

    def __getitem__(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            return tuple.__getitem__(self, key)  # the two modalities
        if isinstance(key, tuple) and len(key) == 2 and key[1] is Ellipsis:
            key = key[0]  # sklearn's array[key, ...]
        Xp, Yp = tuple.__getitem__(self, 0), tuple.__getitem__(self, 1)
        return CrossPairs(Xp[key], Yp[key])
