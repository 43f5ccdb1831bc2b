"""The pair-learner base shared by every learner in crossmetric.

Every method scores a pair ``(x, y)`` as ``s(f(x), g(y))``: an x-tower ``f`` and a y-tower ``g``
embed each modality into a common space (``transform_x`` / ``transform_y``) and a fixed score
compares the embeddings (the squared Euclidean distance unless a learner says otherwise, see
:meth:`PairLearnerMixin._rowwise_distance`). A single-modal learner is the special case whose two
towers share their weights.

The three input forms of the public API become one internal form, :class:`PairData`
``(X, Y, ix, iy)``: the samples of each modality and, per pair, the row of ``X`` and the row of
``Y`` it joins (:mod:`crossmetric.pairs._pair_data`, whose names are re-exported here). Threshold
calibration, chunked all-pairs distances and the scikit-learn conventions live here, so a
learner only implements

* ``_fit(data, y)`` -- learn from a validated :class:`PairData` and labels in {+1, -1};
* ``_embed_x(X)`` / ``_embed_y(Y)`` -- its towers on validated samples;
* optionally ``_rowwise_distance`` / ``_matrix_distance`` for a score other than ``‖f − g‖²``.
"""

from __future__ import annotations

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import estimator_html_repr, gen_batches
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.checks import check_pair_labels
from crossmetric.learners._threshold import best_threshold
from crossmetric.metrics import roc_auc
from crossmetric.pairs._pair_data import (
    PairData,
    PairInputsMixin,
    canonical_pairs,
    resolve_conflicts,
)

__all__ = ["PairDecisionMixin", "PairLearnerMixin", "SingleModalMixin", "CrossModalMixin",
           "LinearSingleModalMixin", "squared_euclidean_rows", "squared_euclidean_matrix"]

#: Elements (float64) of one block of an all-pairs distance matrix: 4 Mi values, 32 MiB.
BLOCK_ELEMENTS = 1 << 22


def squared_euclidean_rows(F: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``‖F[p] − G[p]‖²`` for every row ``p``."""
    diff = F - G
    return np.einsum("ij,ij->i", diff, diff)


def squared_euclidean_matrix(F: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``‖F[a] − G[b]‖²`` for all ``a, b`` (expanded form, clipped at 0)."""
    d = np.einsum("ij,ij->i", F, F)[:, None] + np.einsum("ij,ij->i", G, G)[None, :]
    d -= 2.0 * (F @ G.T)
    np.maximum(d, 0.0, out=d)
    return d


def complement_coordinates(S: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``R s`` for each row ``s`` of ``S``, ``R = I − Q Qᵀ``: the part outside the span of the
    orthonormal columns of ``Q``."""
    return S - (S @ Q) @ Q.T


def with_complement(est, F: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Embeddings ``F`` of samples ``S`` with their coordinates outside the model's basis
    appended, scaled, when the model keeps the untrained distance there (``complement_scale_``
    ``s`` > 0, ``complement_basis_`` Q): the squared Euclidean distance of two embeddings then
    adds ``s² ‖R (x − y)‖²`` (:mod:`crossmetric._solvers.span`)."""
    scale = getattr(est, "complement_scale_", 0.0)
    if scale > 0:
        F = np.hstack([F, scale * complement_coordinates(S, est.complement_basis_)])
    return F


#: embedding values gathered per block of pairs by :meth:`PairLearnerMixin._rowwise_blocks`
_PAIR_BLOCK_ELEMENTS = 1 << 22


class _ArrayStub:
    """Stands for an array in a repr: ``<array 900×64>``."""

    def __init__(self, a):
        self.text = f"<array {'×'.join(map(str, np.shape(a)))}>"

    def __repr__(self) -> str:
        return self.text


def _has_array(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    return isinstance(v, tuple | list) and any(isinstance(x, np.ndarray) for x in v)


def _shorten(v):
    if isinstance(v, np.ndarray):
        return _ArrayStub(v)
    return type(v)(_ArrayStub(x) if isinstance(x, np.ndarray) else x for x in v)


class PairDecisionMixin(ClassifierMixin):
    """Scores, decisions and the threshold of anything with a ``pair_distance``.

    ``pair_score``, ``decision_function``, ``predict``, ``score`` and ``calibrate_threshold``
    are defined from :meth:`pair_distance` and ``threshold_`` alone, so that a pair learner
    (:class:`PairLearnerMixin`) and a model built from learners
    (:class:`crossmetric.SeedEnsemble`) decide the same way.
    """

    def pair_distance(self, pairs) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def pair_score(self, pairs) -> np.ndarray:
        """``-pair_distance(pairs)``: larger = more alike."""
        return -self.pair_distance(pairs)

    def decision_function(self, pairs) -> np.ndarray:
        """Same as :meth:`pair_score` (so that scikit-learn's ranking scorers work)."""
        return self.pair_score(pairs)

    def predict(self, pairs) -> np.ndarray:
        """+1 (same) where ``pair_distance <= threshold_``, else -1."""
        d = self.pair_distance(pairs)
        return np.where(d <= self.threshold_, 1, -1)

    def score(self, pairs, y) -> float:
        """ROC AUC of :meth:`pair_score` against the +1 / -1 labels ``y``."""
        return roc_auc(y, self.pair_score(pairs))

    def set_threshold(self, threshold: float):
        """Set ``threshold_`` by hand (as metric-learn's ``set_threshold``).

        Parameters
        ----------
        threshold : float
            Pairs with ``pair_distance <= threshold`` are predicted +1 (same); finite.

        Returns
        -------
        self
        """
        check_is_fitted(self)
        try:
            value = float(threshold)
        except (TypeError, ValueError):
            raise ValueError(f"threshold must be a finite real number, got {threshold!r}."
                             ) from None
        if isinstance(threshold, bool) or not np.isfinite(value):
            raise ValueError(f"threshold must be a finite real number, got {threshold!r}.")
        self.threshold_ = value
        return self

    def calibrate_threshold(self, pairs, y, strategy: str = "accuracy",
                            min_rate: float | None = None, beta: float = 1.0):
        """Set ``threshold_`` from labelled pairs.

        Parameters
        ----------
        pairs : array-like
            Any input form accepted by :meth:`fit`.
        y : array-like of shape (n_pairs,)
            +1 / -1 labels, both present.
        strategy : {"accuracy", "f_beta", "max_tpr", "max_tnr"}, default="accuracy"
            ``max_tpr`` maximises the true-positive rate with a true-negative rate of at least
            ``min_rate``; ``max_tnr`` the converse.
        min_rate : float in [0, 1], optional
            Required by ``max_tpr`` and ``max_tnr``.
        beta : float, default=1.0
            Recall weight for ``f_beta``.

        Returns
        -------
        self
        """
        d = self.pair_distance(pairs)
        y = check_pair_labels(y, d.shape[0])
        self.threshold_ = best_threshold(d, y, strategy, min_rate=min_rate, beta=beta)
        return self


class PairLearnerMixin(PairInputsMixin, PairDecisionMixin):
    """Members common to every pair learner (see the API reference, ``docs/api.rst``).

    The input forms of pairs and the samples' validation come from
    :class:`~crossmetric.pairs._pair_data.PairInputsMixin`.

    Subclasses set the class attribute ``_cross_modal`` and implement ``_fit``, ``_embed_x``
    and ``_embed_y``. The mixin must come before :class:`sklearn.base.BaseEstimator` in the
    bases so that scikit-learn sees a classifier (stratified folds in ``cross_val_score``).
    """

    _cross_modal: bool = False
    #: number of dimensions of one sample (1 for feature vectors, 2 or 3 for images)
    _sample_ndim: int = 1

    # ------------------------------------------------------------------ short repr
    def _stubbed(self):
        """A shallow copy whose array parameters (e.g. ``preprocessor``) print as
        ``<array 900×64>``, for :meth:`__repr__` and the notebook HTML repr."""
        import copy

        params = self.get_params(deep=False)
        stubs = {k: _shorten(v) for k, v in params.items() if _has_array(v)}
        if not stubs:
            return None
        twin = copy.copy(self)
        twin.__dict__.update(stubs)
        return twin

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        twin = self._stubbed()
        return super(PairLearnerMixin, twin if twin is not None else self).__repr__(N_CHAR_MAX)

    # the notebook (IPython display protocol) reprs, through scikit-learn's public
    # estimator_html_repr of the stubbed twin
    @property
    def _repr_html_(self):
        if get_config()["display"] != "diagram":
            raise AttributeError("_repr_html_ is only defined when scikit-learn's 'display' "
                                 "configuration option is 'diagram'.")
        return self._repr_html_text

    def _repr_html_text(self) -> str:
        twin = self._stubbed()
        return estimator_html_repr(twin if twin is not None else self)

    def _repr_mimebundle_(self, **kwargs):
        output = {"text/plain": repr(self)}
        if get_config()["display"] == "diagram":
            output["text/html"] = self._repr_html_text()
        return output

    # ------------------------------------------------------------------ cloning
    def __sklearn_clone__(self):
        """``sklearn.base.clone`` keeps ``preprocessor`` by reference.

        Every other parameter is cloned as scikit-learn does, but the samples that index
        pairs point into are data, not a setting: copying them on every clone (each fit of
        ``GridSearchCV`` / ``cross_val_score``) would cost their size each time and turn a
        memory-mapped array into an in-memory copy.
        """
        prep = getattr(self, "preprocessor", None)
        if prep is None:
            return BaseEstimator.__sklearn_clone__(self)
        import copy

        twin = copy.copy(self)
        twin.preprocessor = None
        new = BaseEstimator.__sklearn_clone__(twin)
        new.preprocessor = prep
        return new

    # ------------------------------------------------------------------------- fit
    def fit(self, pairs, y):
        """Learn the metric from pair constraints.

        Parameters
        ----------
        pairs : array-like
            Any of the three input forms: integer index pairs ``(n_pairs, 2)`` with a
            ``preprocessor``; float pairs ``(n_pairs, 2, n_features)``; or a tuple
            ``(Xp, Yp)`` of row-aligned arrays.
        y : array-like of shape (n_pairs,)
            +1 for *same*, -1 for *different*; both must be present.

        Returns
        -------
        self

        Raises
        ------
        PairConflictError
            Two pairs join the same two samples with opposite labels (a ``ValueError``
            naming the first such pair); :func:`crossmetric.pairs.pair_conflicts` says to
            drop or keep them instead.
        """
        data = self._resolve_pairs(pairs)
        if data.n_pairs == 0:
            raise ValueError("pairs is empty; at least one pair is needed.")
        y = check_pair_labels(y, data.n_pairs)
        if not self._cross_modal and data.X.shape[1:] != data.Y.shape[1:]:
            raise ValueError(
                f"{type(self).__name__} is single-modal: both sides of a pair need the same "
                f"number of features, got {data.X.shape[1:]} and {data.Y.shape[1:]}."
            )
        self._sample_shape_x_ = tuple(data.X.shape[1:])
        self._sample_shape_y_ = tuple(data.Y.shape[1:])
        if self._sample_ndim == 1:
            self.n_features_in_x_ = data.X.shape[1]
            self.n_features_in_y_ = data.Y.shape[1]
            if not self._cross_modal:
                self.n_features_in_ = data.X.shape[1]
        # the one step that makes a fit independent of the input form: every learner fits
        # from distinct samples in a canonical order and index pairs into them; pairs of the
        # same two samples with opposite labels are found there (whatever the input form)
        tied = not self._cross_modal
        canon = canonical_pairs(data, tied=tied)
        keep = resolve_conflicts(canon, y, tied)
        if keep is not None:  # on_conflict="drop"
            data = PairData(data.X, data.Y, data.ix[keep], data.iy[keep])
            if data.n_pairs == 0:
                raise ValueError("pairs: every pair was dropped as contradictory "
                                 "(on_conflict='drop'); no pair is left to fit on.")
            y = check_pair_labels(y[keep], data.n_pairs)
            canon = canonical_pairs(data, tied=tied)
        own_step = type(self)._canonical_pairs is not PairLearnerMixin._canonical_pairs
        self._fit_settings(self._canonical_pairs(data) if own_step else canon, y)
        del canon   # its sample copy is not needed for the threshold (wide views: GBs)
        self.classes_ = np.array([-1, 1])
        self.threshold_ = float(self._fit_threshold(data, y))
        return self

    def _canonical_pairs(self, data: PairData) -> PairData:
        """The pairs over distinct samples in canonical order (:func:`canonical_pairs`).

        A learner that needs to know which of the caller's rows each sample came from (to
        map per-sample side information) overrides this and does the same dedupe itself.
        """
        return canonical_pairs(data, tied=not self._cross_modal)

    def _fit(self, data: PairData, y: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_settings(self, data: PairData, y: np.ndarray) -> None:
        """:meth:`_fit` with the learner's settings; a learner that chooses some of them on
        the data first (:class:`crossmetric.learners._held_out_choice.HeldOutChoice`)
        overrides this."""
        self._fit(data, y)

    def _fit_threshold(self, data: PairData, y: np.ndarray) -> float:
        """``threshold_`` after ``fit``: the accuracy-optimal cut on the training pairs, except
        when the learned distance separates them.

        Training pairs cannot place the threshold of a model that separates them: every cut
        in the gap between the largest positive and the smallest negative training distance
        has 100 % training accuracy, and the middle of the gap reflects how far the fit pushed
        the training negatives rather than where unseen pairs fall (kernel CMML on separable
        instance pairs put it at 1.99 instead of 1). Then a learner's own decision threshold
        (:meth:`_own_threshold`, e.g. LDML's bias ``b`` where ``p(same) = 1/2``) is used when
        it has one and it lies in the gap; otherwise the middle of the gap. PCCA and CMML
        always use ``D² = 1``, the margin of their loss. Any learner can be recalibrated on
        held-out pairs with :meth:`calibrate_threshold`.
        """
        d = self._pair_distance_data(data)
        own = self._own_threshold()
        if own is not None and np.isfinite(own):
            pos, neg = d[y == 1], d[y == -1]
            if pos.max() <= own < neg.min():
                return float(own)
        return best_threshold(d, y, "accuracy")

    def _own_threshold(self) -> float | None:
        """The decision threshold of the learner's model, if it has one (see
        :meth:`_fit_threshold`)."""
        return None

    def _embed_x(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _embed_y(self, Y: np.ndarray) -> np.ndarray:
        return self._embed_x(Y)

    # ------------------------------------------------------------------- distances
    def _rowwise_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        """Distance between embedded row ``p`` of ``FX`` and row ``p`` of ``FY``."""
        return squared_euclidean_rows(FX, FY)

    def _matrix_distance(self, FX: np.ndarray, FY: np.ndarray) -> np.ndarray:
        """All-pairs distance between embedded rows of ``FX`` and ``FY``."""
        return squared_euclidean_matrix(FX, FY)

    def _pair_distance_data(self, data: PairData) -> np.ndarray:
        """Distances of validated pairs; each distinct sample is embedded once."""
        if data.X is data.Y and not self._cross_modal:
            used, inv = np.unique(np.r_[data.ix, data.iy], return_inverse=True)
            F = self._embed_x(data.X[used])
            n = data.n_pairs
            return self._rowwise_blocks(F, F, inv[:n], inv[n:])
        ux, inv_x = np.unique(data.ix, return_inverse=True)
        uy, inv_y = np.unique(data.iy, return_inverse=True)
        FX = self._embed_x(data.X[ux])
        FY = self._embed_y(data.Y[uy])
        return self._rowwise_blocks(FX, FY, inv_x.reshape(-1), inv_y.reshape(-1))

    def _rowwise_blocks(self, FX: np.ndarray, FY: np.ndarray, ix: np.ndarray,
                        iy: np.ndarray) -> np.ndarray:
        """``_rowwise_distance(FX[ix], FY[iy])`` over blocks of pairs, so that no
        ``n_pairs × width`` copy of the embeddings is made (wide views: 884 training pairs of
        129,024 features gathered whole took 3.6 GB)."""
        out = np.empty(ix.shape[0])
        rows = max(1, _PAIR_BLOCK_ELEMENTS // max(1, FX.shape[1]))
        for sl in gen_batches(ix.shape[0], rows):
            out[sl] = self._rowwise_distance(FX[ix[sl]], FY[iy[sl]])
        return out

    def pair_distance(self, pairs) -> np.ndarray:
        """Learned dissimilarity of each pair (smaller = more alike).

        Parameters
        ----------
        pairs : array-like
            Any input form accepted by :meth:`fit`.

        Returns
        -------
        ndarray of shape (n_pairs,)
        """
        check_is_fitted(self)
        return self._pair_distance_data(self._validate_pairs(pairs))

    # ------------------------------------------------------------------ embeddings
    def transform_x(self, X) -> np.ndarray:
        """Embed samples of the first modality into the common space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_x)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        return self._embed_x(self._check_samples(X, "X", side="x"))

    def transform_y(self, Y) -> np.ndarray:
        """Embed samples of the second modality into the common space.

        Parameters
        ----------
        Y : array-like of shape (n_samples, n_features_y)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        return self._embed_y(self._check_samples(Y, "Y", side="y"))

    def cross_distance(self, X, Y, *, block_elements: int = BLOCK_ELEMENTS) -> np.ndarray:
        """All-pairs learned distance between rows of ``X`` and rows of ``Y``.

        ``Y`` is embedded once; ``X`` is embedded and compared in row blocks so that each
        block's temporary matrices hold at most ``block_elements`` values.

        Returns
        -------
        ndarray of shape (n_x, n_y)
        """
        check_is_fitted(self)
        X = self._check_samples(X, "X", side="x")
        Y = self._check_samples(Y, "Y", side="y")
        FY = self._embed_y(Y)
        out = np.empty((X.shape[0], Y.shape[0]))
        rows = max(1, int(block_elements) // max(1, Y.shape[0]))
        for sl in gen_batches(X.shape[0], rows):
            out[sl] = self._matrix_distance(self._embed_x(X[sl]), FY)
        return out


class CrossModalMixin(PairLearnerMixin):
    """Cross-modal pair learner: separate towers for ``X`` and ``Y``."""

    _cross_modal = True


class SingleModalMixin(PairLearnerMixin):
    """Single-modal pair learner: one tower shared by both sides of a pair."""

    _cross_modal = False

    def transform(self, X) -> np.ndarray:
        """Embed samples into the learned space (same as :meth:`transform_x`)."""
        return self.transform_x(X)

    def get_metric(self):
        """A function ``metric(u, v, squared=False)`` on two 1-D samples.

        Usable wherever scipy / scikit-learn accept a callable metric, e.g.
        ``DBSCAN(metric=model.get_metric())``.
        """
        check_is_fitted(self)

        def metric(u, v, squared: bool = False) -> float:
            fu = self.transform(np.atleast_2d(np.asarray(u, dtype=float)))
            fv = self.transform(np.atleast_2d(np.asarray(v, dtype=float)))
            d = float(self._rowwise_distance(fu, fv)[0])
            return d if squared else float(np.sqrt(max(d, 0.0)))

        return metric


class LinearSingleModalMixin(SingleModalMixin):
    """Single-modal learner whose tower is ``x ↦ components_ @ x``, with the scaled coordinates
    of ``x`` outside ``complement_basis_`` appended when the model keeps the untrained distance
    there (``complement_scale_`` > 0, :mod:`crossmetric._solvers.span`):
    ``D(x, y) = ‖L (x − y)‖² + s² ‖(I − Q Qᵀ)(x − y)‖²``.

    A learner that is linear only for some settings (kernel PCCA) overrides ``_embed_x`` and
    leaves ``components_`` unset there; the Mahalanobis members then say so.
    """

    def _embed_x(self, X: np.ndarray) -> np.ndarray:
        return with_complement(self, X @ self.components_.T, X)

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """``M = Lᵀ L`` (+ ``s² (I − Q Qᵀ)`` when the model keeps the untrained distance
        outside its basis), n_features × n_features, formed on request only."""
        check_is_fitted(self)
        if not hasattr(self, "components_"):
            raise ValueError(
                f"get_mahalanobis_matrix needs a linear model; this {type(self).__name__} has "
                "no components_ (it was fitted with a kernel)."
            )
        M = self.components_.T @ self.components_
        scale = getattr(self, "complement_scale_", 0.0)
        if scale > 0:
            Q = self.complement_basis_
            M += scale ** 2 * (np.eye(M.shape[0]) - Q @ Q.T)
        return M

    def get_metric(self):
        """A function ``metric(u, v, squared=False) = ‖L (u − v)‖`` (squared if asked; with
        the kept untrained part, as :meth:`get_mahalanobis_matrix`)."""
        check_is_fitted(self)
        if not hasattr(self, "components_"):
            return super().get_metric()
        L = self.components_.copy()
        scale = getattr(self, "complement_scale_", 0.0)
        Q = self.complement_basis_.copy() if scale > 0 else None

        def metric(u, v, squared: bool = False) -> float:
            e = np.asarray(u, dtype=float) - np.asarray(v, dtype=float)
            diff = L @ e
            d = float(diff @ diff)
            if Q is not None:
                r = e - Q @ (Q.T @ e)
                d += scale ** 2 * float(r @ r)
            return d if squared else float(np.sqrt(d))

        return metric


def uses_l2_score(model) -> bool:
    """Whether the model's distance is ‖f(x) − g(y)‖² (the pair-learner base default), the
    only distance an ℓ2 faiss index over its embeddings reproduces."""
    inner = getattr(model, "learner_", None)
    if inner is not None and not isinstance(model, PairLearnerMixin):
        return uses_l2_score(inner)  # a linear view step before the learner (ViewPipeline)
    if not isinstance(model, PairLearnerMixin):
        return True  # a plain transformer: ℓ2 in its output space
    cls = type(model)
    return (cls._rowwise_distance is PairLearnerMixin._rowwise_distance
            and cls._matrix_distance is PairLearnerMixin._matrix_distance)
