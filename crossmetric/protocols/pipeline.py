"""A pair learner together with the steps its inputs went through: the image descriptor that
made them (when it was fitted on images), the view step of the protocols and the inputs'
statistics, so that a saved model applies to new samples exactly what its fit used."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from crossmetric._utils.checks import as_float_array
from crossmetric.protocols.views import _is_cross_modal, fit_view_reduction, method_view_pca

__all__ = ["ViewPipeline"]


class ViewPipeline(BaseEstimator):
    """A pair learner fitted behind the protocols' view step, with what its inputs are.

    ``fit`` reduces the views as ``crossmetric benchmark`` does on each split
    (:func:`~crossmetric.protocols.views.fit_view_reduction`: with ``pca="auto"`` each view
    wider than the training identities minus one is reduced by a PCA fitted on the training
    side, one PCA for views of one width; learners that reduce to their span themselves keep
    the views, :func:`~crossmetric.protocols.views.method_view_pca`; a single-modal learner on
    views of two widths gets the "-C" CCA step), then fits a clone of ``learner`` on the
    reduced views. The distances of new samples go through the same fitted step.

    Parameters
    ----------
    learner : pair learner
        Unfitted; cloned by ``fit``.
    pca : "auto", int or None, default="auto"
        The view step's width (``None``: no PCA).
    descriptor : str, optional
        The image descriptor (:func:`crossmetric.datasets.describe_images`) that made the
        samples, kept for whoever describes new images; not applied by the pipeline.
    descriptor_params : dict, optional
        Its class parameters.
    size : (width, height), optional
        The size the images were resized to before the descriptor.
    domain_names : (str, str), optional
        Names of the first and the second view (e.g. ``("photo", "sketch")``).
    preprocessor : (X, Y) or X, optional
        The samples that the index pairs of ``fit`` point into; one array: one modality.

    Attributes
    ----------
    learner_ : pair learner
        Fitted on the reduced views.
    reduction_ : ViewReduction or None
    input_mean_, input_std_ : tuple of two ndarrays
        Per-feature mean and standard deviation of each view's training samples (before the
        view step), for :meth:`side_distances`.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import RCA, make_pairs
    >>> from crossmetric.protocols.pipeline import ViewPipeline
    >>> rng = np.random.RandomState(0)
    >>> labels = np.arange(12)
    >>> X, Y = rng.randn(12, 30), rng.randn(12, 30) + 3
    >>> pairs, y = make_pairs(labels, labels, random_state=0)
    >>> pipe = ViewPipeline(RCA(), domain_names=("a", "b"), preprocessor=(X, Y)).fit(pairs, y)
    >>> pipe.reduction_.pca_x.n_components_, pipe.cross_distance(X[:2], Y).shape
    (11, (2, 12))
    >>> [int(np.argmin(pipe.side_distances(V))) for V in (X, Y)]
    [0, 1]
    """

    def __init__(self, learner, *, pca="auto", descriptor=None, descriptor_params=None,
                 size=None, domain_names=None, preprocessor=None):
        self.learner = learner
        self.pca = pca
        self.descriptor = descriptor
        self.descriptor_params = descriptor_params
        self.size = size
        self.domain_names = domain_names
        self.preprocessor = preprocessor

    @property
    def _cross_modal(self) -> bool:
        return _is_cross_modal(self.learner)

    def _views(self):
        p = self.preprocessor
        if p is None:
            raise ValueError("preprocessor must hold the samples (X, Y) or X that the pairs "
                             "index; got None.")
        if isinstance(p, tuple | list) and len(p) == 2:
            return (as_float_array(p[0], "preprocessor X", ndim=2),
                    as_float_array(p[1], "preprocessor Y", ndim=2), False)
        X = as_float_array(p, "preprocessor", ndim=2)
        return X, X, True

    def fit(self, pairs, y, **fit_params):
        """Fit the view step on the rows the pairs use, then a clone of ``learner`` on the
        reduced views (``fit_params`` go to its ``fit``)."""
        X, Y, tied = self._views()
        pairs = np.asarray(pairs)
        y = np.asarray(y)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
            raise ValueError(f"pairs must be index pairs of shape (n_pairs, 2), got shape "
                             f"{pairs.shape} of dtype {pairs.dtype}.")
        learner = clone(self.learner)
        cross = _is_cross_modal(learner)
        options = {"pca": method_view_pca(learner, self.pca), "pca_joint": "auto",
                   "cca": not tied and not cross and X.shape[1] != Y.shape[1]}
        self.reduction_, Xs, Ys = fit_view_reduction(X, Y, pairs, y, learner, options)
        learner.set_params(preprocessor=Xs if tied and not cross else (Xs, Ys))
        learner.fit(pairs, y, **fit_params)
        self.learner_ = learner
        means, stds = [], []
        for V, rows in ((X, pairs[:, 0]), (Y, pairs[:, 1])):
            used = V[np.unique(rows)]
            means.append(used.mean(axis=0))
            stds.append(used.std(axis=0))
        self.input_mean_, self.input_std_ = tuple(means), tuple(stds)
        self._sample_shape_x_, self._sample_shape_y_ = (X.shape[1],), (Y.shape[1],)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "learner_")

    def _check_fitted(self) -> None:
        if not hasattr(self, "learner_"):
            raise NotFittedError("This ViewPipeline is not fitted yet; call fit first.")

    def reduce_x(self, X) -> np.ndarray:
        """First-view samples through the fitted view step."""
        self._check_fitted()
        X = as_float_array(X, "X", ndim=2)
        return X if self.reduction_ is None else self.reduction_.transform_x(X)

    def reduce_y(self, Y) -> np.ndarray:
        """Second-view samples through the fitted view step."""
        self._check_fitted()
        Y = as_float_array(Y, "Y", ndim=2)
        return Y if self.reduction_ is None else self.reduction_.transform_y(Y)

    def cross_distance(self, X, Y) -> np.ndarray:
        """The learner's distances between every first-view sample and every second-view one."""
        return self.learner_.cross_distance(self.reduce_x(X), self.reduce_y(Y))

    def pair_distance(self, pairs) -> np.ndarray:
        """Distances of ``(A, B)`` (row-aligned samples of the two views) or of index pairs
        into ``preprocessor``."""
        self._check_fitted()
        if isinstance(pairs, tuple) and len(pairs) == 2:
            A, B = pairs
        else:
            X, Y, _ = self._views()
            idx = np.asarray(pairs)
            A, B = X[idx[:, 0]], Y[idx[:, 1]]
        return self.learner_.pair_distance((self.reduce_x(A), self.reduce_y(B)))

    def transform_x(self, X) -> np.ndarray:
        """First-view samples through the view step and the learner's ``transform_x``."""
        return self.learner_.transform_x(self.reduce_x(X))

    def transform_y(self, Y) -> np.ndarray:
        """Second-view samples through the view step and the learner's ``transform_y``."""
        return self.learner_.transform_y(self.reduce_y(Y))

    def side_distances(self, V) -> np.ndarray:
        """How far the feature means of the samples ``V`` are from each view's training
        samples: the mean over features of the squared difference of means, in units of the
        two views' pooled standard deviation (each view's own when their widths differ);
        ``inf`` for a view of another width. The smaller is the view ``V`` looks like."""
        self._check_fitted()
        V = as_float_array(V, "V", ndim=2)
        m = V.mean(axis=0)
        same_width = self.input_mean_[0].shape == self.input_mean_[1].shape
        pooled = (np.sqrt((self.input_std_[0] ** 2 + self.input_std_[1] ** 2) / 2.0)
                  if same_width else None)
        out = np.full(2, np.inf)
        for k, (mu, sd) in enumerate(zip(self.input_mean_, self.input_std_, strict=True)):
            if mu.shape != m.shape:
                continue
            scale = pooled if pooled is not None else sd
            scale = scale + 1e-12 + 1e-6 * float(np.mean(scale))
            out[k] = float(np.mean(((m - mu) / scale) ** 2))
        return out

    def __getstate__(self):
        """The state without the training samples (``preprocessor``, also the learner's)."""
        from crossmetric.metrics._faiss_tools import strip_model

        state = dict(super().__getstate__())
        state["preprocessor"] = None
        if "learner_" in state:
            state["learner_"] = strip_model(state["learner_"])
        return state
