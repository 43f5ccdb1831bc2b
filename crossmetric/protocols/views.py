"""The view step before a learner: PCA of each view (or one joint PCA) and the CCA of the
"-C" variants, fitted on a split's training pairs only."""

from __future__ import annotations

import numpy as np

from crossmetric._utils.checks import as_float_array
from crossmetric.protocols.splits import Split

__all__ = ["CCAProjection", "PCAThen", "ViewReduction", "fit_view_pca", "fit_view_reduction",
           "method_view_pca", "pca_views", "bounded_dimension", "cap_n_components",
           "cap_n_components_to_views"]


class CCAProjection:
    """Regularised linear CCA used to bring two views to one common dimension ("-C" variants).

    The CML-AUC paper (§IV-B) runs single-modal learners on CCA-processed features of the two
    modalities (PCA-C, LMNN-C, LDML-C, ...). The directions come from the library's one closed
    form, :func:`crossmetric._solvers.linalg.cca_directions` (also behind :class:`crossmetric.CCA`);
    scikit-learn's NIPALS ``CCA`` needs about a minute for 32 components on the 1,800 digits.
    ``transform`` returns ``((X − x̄) A, (Y − ȳ) B)``.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols import CCAProjection
    >>> rng = np.random.RandomState(0)
    >>> Z = rng.randn(50, 2)
    >>> X, Y = Z @ rng.randn(2, 6), Z @ rng.randn(2, 4) + 0.01 * rng.randn(50, 4)
    >>> proj = CCAProjection(n_components=2).fit(X, Y)
    >>> bool(proj.correlations_.min() > 0.99)
    True
    """

    def __init__(self, n_components: int = 32, reg: float = 1e-3):
        self.n_components = n_components
        self.reg = reg

    def fit(self, X: np.ndarray, Y: np.ndarray) -> CCAProjection:
        """Fit on row-aligned views (row ``r`` of ``X`` and ``Y`` = one matching pair)."""
        from crossmetric._solvers.linalg import cca_directions

        X = as_float_array(X, "X", ndim=2)
        Y = as_float_array(Y, "Y", ndim=2)
        n = X.shape[0]
        if Y.shape[0] != n or n < 2:
            raise ValueError(f"CCA needs >= 2 row-aligned pairs, got {n} and {Y.shape[0]} rows.")
        k = min(int(self.n_components), X.shape[1], Y.shape[1], n - 1)
        self.mean_x_, self.mean_y_ = X.mean(0), Y.mean(0)
        self.x_weights_, self.y_weights_, self.correlations_ = cca_directions(
            X - self.mean_x_, Y - self.mean_y_, k, self.reg)
        return self

    def transform(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.transform_x(X), self.transform_y(Y)

    def transform_x(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_x_) @ self.x_weights_

    def transform_y(self, Y: np.ndarray) -> np.ndarray:
        return (Y - self.mean_y_) @ self.y_weights_


def _pca_views(X: np.ndarray, Y: np.ndarray, split: Split, k: int):
    """Each view reduced by PCA to ``k`` dims, fitted on the rows the training pairs use."""
    return _pca_fit_views(X, Y, split.train_pairs, k)


def fit_view_pca(V: np.ndarray, n_components: int, *, svd_solver: str | None = None,
                 random_state=0):
    """The one PCA of the view step: fitted on the rows ``V`` (a view's training rows).

    Parameters
    ----------
    V : ndarray (n_rows, n_features)
    n_components : int
    svd_solver : str, optional
        ``None``: the library's exact PCA (:func:`crossmetric._solvers.linalg.fit_pca`: the thin
        SVD in the span of the rows when they are fewer than the features); a scikit-learn
        ``svd_solver`` (``"auto"``, ``"randomized"``, ``"full"``, ...): scikit-learn's PCA
        with that solver (``"auto"`` is its default, randomized for wide data).
    random_state : int, default=0

    Returns
    -------
    sklearn.decomposition.PCA
        Fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols.views import fit_view_pca
    >>> V = np.random.RandomState(0).randn(20, 6)
    >>> fit_view_pca(V, 3).transform(V).shape, fit_view_pca(V, 3, svd_solver="auto").n_components_
    ((20, 3), 3)
    """
    if svd_solver is None:
        from crossmetric._solvers.linalg import fit_pca

        return fit_pca(V, n_components, random_state=random_state)
    from sklearn.decomposition import PCA

    return PCA(n_components, svd_solver=svd_solver, random_state=random_state).fit(V)


def pca_views(X: np.ndarray, Y: np.ndarray, rows_x: np.ndarray, rows_y: np.ndarray, k: int,
              *, joint: bool = False, svd_solver: str | None = None):
    """Each view reduced to ``k`` dims by a PCA fitted on its training rows (``rows_x`` of
    ``X``, ``rows_y`` of ``Y``); ``joint``: one PCA fitted on both views' training rows
    (views in one feature space, e.g. one descriptor of a sketch and of a photo), so that
    coordinates stay comparable. ``k`` is capped by the features and the rows; ``svd_solver``
    as in :func:`fit_view_pca`.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols.views import pca_views
    >>> rng = np.random.RandomState(0)
    >>> X, Y = rng.randn(30, 8), rng.randn(30, 5)
    >>> [V.shape for V in pca_views(X, Y, np.arange(20), np.arange(20), 4)]
    [(30, 4), (30, 4)]
    """
    pca_x, pca_y = _fit_view_pcas(X, Y, rows_x, rows_y, k, joint=joint, svd_solver=svd_solver)
    return pca_x.transform(X), pca_y.transform(Y)


def _fit_view_pcas(X, Y, rows_x, rows_y, k: int, *, joint: bool = False,
                   svd_solver: str | None = None):
    """The fitted PCAs of :func:`pca_views` ``(pca_x, pca_y)``: one object twice when
    ``joint``."""
    if joint:
        kk = min(int(k), X.shape[1], rows_x.size + rows_y.size)
        pca = fit_view_pca(np.vstack([X[rows_x], Y[rows_y]]), kk, svd_solver=svd_solver)
        return pca, pca
    out = []
    for V, rows in ((X, rows_x), (Y, rows_y)):
        kk = min(int(k), V.shape[1], rows.size)
        out.append(fit_view_pca(V[rows], kk, svd_solver=svd_solver))
    return out[0], out[1]


def _pca_fit_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray, k: int,
                   joint: bool = False, svd_solver: str | None = None):
    """:func:`pca_views` fitted on the rows that the training pairs use -- exact, in the span
    of the rows when they are fewer than the features (:func:`crossmetric._solvers.linalg.fit_pca`)
    unless ``svd_solver`` names another."""
    rx, ry = np.unique(train_pairs[:, 0]), np.unique(train_pairs[:, 1])
    return pca_views(X, Y, rx, ry, k, joint=joint, svd_solver=svd_solver)


def _is_cross_modal(est) -> bool:
    return bool(getattr(est, "_cross_modal", True))


def _uses_images(est) -> bool:
    return int(getattr(est, "_sample_ndim", 1)) > 1


def bounded_dimension(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray,
                      train_y: np.ndarray) -> int | None:
    """The width the views are reduced to by ``pca_components="auto"``: the training
    identities minus one, when a view is wider; ``None`` when no view is.

    A learner on views wider than its training identities fits directions that no identity
    constrains (and costs d² memory where it forms a d × d matrix): below ``n_identities − 1``
    dimensions the identities' means still span the reduced space, the room that
    discriminant and metric learning use. The identities are the connected components of the
    positive training pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols.views import bounded_dimension
    >>> pairs = np.array([[0, 0], [1, 1], [2, 2], [0, 1]])
    >>> bounded_dimension(np.zeros((3, 10)), np.zeros((3, 10)), pairs, np.array([1, 1, 1, -1]))
    2
    """
    from crossmetric.pairs import identities_from_pairs

    pos = train_y == 1
    ids_x, _, _ = identities_from_pairs(X.shape[0], Y.shape[0], train_pairs[:, 0],
                                        train_pairs[:, 1], train_y)
    n_ids = np.unique(ids_x[train_pairs[pos, 0]]).size
    k = max(n_ids - 1, 1)
    return k if max(X.shape[1], Y.shape[1]) > k else None


def cap_n_components(estimators, n_features: int) -> dict:
    """Cap each estimator's integer ``n_components`` at ``n_features``, in place.

    The registry's ``n_components`` are sized for the built-in data; on data with fewer
    features (the narrowest view of two, or views reduced by the protocols) a learner would
    fail.

    Parameters
    ----------
    estimators : dict of str to estimator
    n_features : int

    Returns
    -------
    dict of str to (int, int)
        ``{name: (before, after)}`` of the estimators changed.

    Examples
    --------
    >>> from crossmetric import PCCA
    >>> ests = {"PCCA": PCCA(n_components=32)}
    >>> cap_n_components(ests, 5), ests["PCCA"].n_components
    ({'PCCA': (32, 5)}, 5)
    """
    changed = {}
    for name, est in estimators.items():
        k = est.get_params(deep=False).get("n_components")
        if isinstance(k, int) and not isinstance(k, bool) and k > n_features:
            est.set_params(n_components=n_features)
            changed[name] = (k, n_features)
    return changed


def _prepare_views(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray,
                   train_y: np.ndarray, est, options):
    """The per-split preprocessing (PCA, then CCA for single-modal learners), fitted on the
    training pairs only: the views of :func:`fit_view_reduction`."""
    return fit_view_reduction(X, Y, train_pairs, train_y, est, options)[1:]


def fit_view_reduction(X: np.ndarray, Y: np.ndarray, train_pairs: np.ndarray,
                       train_y: np.ndarray, est, options):
    """``(reduction, Xs, Ys)``: the view step before a learner fitted on the training pairs
    only, and the views it gives.

    PCA, then CCA for single-modal learners. ``options``: a
    :class:`~crossmetric.protocols.options.RunOptions` (or a mapping of its fields).
    ``pca="auto"`` reduces the views to the training identities minus one when they are
    wider (:func:`bounded_dimension`); ``pca_joint="auto"`` fits one PCA on both views when
    they have one width. A learner's ``n_components`` above the prepared views' width is
    capped (:func:`cap_n_components`). ``reduction`` is a :class:`ViewReduction` (``None``
    when the views are kept as they are) that applies the same step to new samples.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import CCA
    >>> from crossmetric.protocols.views import fit_view_reduction
    >>> rng = np.random.RandomState(0)
    >>> X, Y = rng.randn(12, 20), rng.randn(12, 20)
    >>> pairs, y = np.c_[np.arange(12), np.arange(12)], np.ones(12, dtype=int)
    >>> red, Xs, Ys = fit_view_reduction(X, Y, pairs, y, CCA(), {"pca": "auto"})
    >>> Xs.shape, bool(np.allclose(red.transform_x(X), Xs))
    ((12, 11), True)
    """
    from crossmetric.protocols.options import RunOptions

    opts = RunOptions.of(options)
    Xs, Ys = X, Y
    pcas, proj = None, None
    k = opts.pca
    if k == "auto":
        k = bounded_dimension(X, Y, train_pairs, train_y)
    if k:
        joint = X.shape[1] == Y.shape[1] if opts.pca_joint == "auto" else opts.pca_joint
        rx, ry = np.unique(train_pairs[:, 0]), np.unique(train_pairs[:, 1])
        pcas = _fit_view_pcas(X, Y, rx, ry, k, joint=bool(joint))
        Xs, Ys = pcas[0].transform(X), pcas[1].transform(Y)
    if opts.cca and not _is_cross_modal(est):
        pos = train_pairs[train_y == 1]
        proj = CCAProjection(opts.cca_components).fit(Xs[pos[:, 0]], Ys[pos[:, 1]])
        Xs, Ys = proj.transform(Xs, Ys)
    cap_n_components({"": est}, min(Xs.shape[1], Ys.shape[1]))
    reduction = None
    if pcas is not None or proj is not None:
        reduction = ViewReduction(*(pcas or (None, None)), cca=proj)
    return reduction, Xs, Ys


class ViewReduction:
    """The fitted view step of :func:`fit_view_reduction`, applied to new samples: each view's
    PCA (one object for both views when it was fitted jointly; ``None``: none), then the
    "-C" :class:`CCAProjection` (``None``: none).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.protocols.views import ViewReduction, fit_view_pca
    >>> V = np.random.RandomState(0).randn(10, 5)
    >>> pca = fit_view_pca(V, 2)
    >>> ViewReduction(pca, pca).transform_y(V).shape
    (10, 2)
    """

    def __init__(self, pca_x=None, pca_y=None, cca=None):
        self.pca_x = pca_x
        self.pca_y = pca_y
        self.cca = cca

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.pca_x is not None and self.pca_y is self.pca_x:  # one PCA, stored once
            state["pca_y"], state["joint"] = None, True
        return state

    def __setstate__(self, state):
        state = dict(state)
        joint = bool(state.pop("joint", False))
        self.__dict__.update(state)
        if joint:
            self.pca_y = self.pca_x

    def transform_x(self, X) -> np.ndarray:
        """First-view samples through the step."""
        Z = X if self.pca_x is None else self.pca_x.transform(X)
        return Z if self.cca is None else self.cca.transform_x(Z)

    def transform_y(self, Y) -> np.ndarray:
        """Second-view samples through the step."""
        Z = Y if self.pca_y is None else self.pca_y.transform(Y)
        return Z if self.cca is None else self.cca.transform_y(Z)

    def transform(self, X, Y) -> tuple[np.ndarray, np.ndarray]:
        """Both views through the step."""
        return self.transform_x(X), self.transform_y(Y)


def method_view_pca(est, pca_components):
    """The view step's ``pca`` of one learner under a protocol's ``pca_components`` setting
    (``None``, ``"auto"`` or a width): ``"auto"`` is dropped for the learners that reduce wide
    views to their span themselves (``_reduces_to_span``) and for the untrained
    :class:`~crossmetric.Euclidean`, whose distance is measured on the views as given.

    Examples
    --------
    >>> from crossmetric import CCA, RCA
    >>> from crossmetric.protocols.views import method_view_pca
    >>> method_view_pca(CCA(), "auto"), method_view_pca(RCA(), "auto"), method_view_pca(RCA(), 5)
    (None, 'auto', 5)
    """
    from crossmetric.learners.baselines import Euclidean

    if isinstance(pca_components, str) and pca_components == "auto":
        if getattr(est, "_reduces_to_span", False) or isinstance(est, Euclidean):
            return None
        return "auto"
    return pca_components


class PCAThen:
    """A pair learner on PCA-reduced samples: the PCA (:func:`fit_view_pca`) is fitted on the
    samples of the training pairs, then ``learner`` on the reduced data.

    For single-modal learners that need a dimensionality reduction first (ITML learns a full
    d × d matrix). Duck-types the parts of the pair API that
    :func:`crossmetric.protocols.fit_on_pairs` and
    :func:`crossmetric.protocols.measure_identification` use (``fit``, ``cross_distance``).

    Parameters
    ----------
    learner : single-modal pair learner
    n_components : int, default=64
        Capped by the features and by the training samples minus one.
    preprocessor : ndarray, optional
        The samples that pairs index.
    random_state : int, optional
        Handed to ``learner`` when it has one.
    svd_solver : str, default="auto"
        As in :func:`fit_view_pca` (``"auto"``: scikit-learn's default PCA).

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean, make_pairs
    >>> from crossmetric.protocols.views import PCAThen
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(5), 4)
    >>> X = rng.randn(20, 10)
    >>> pairs, y = make_pairs(labels, random_state=0)
    >>> m = PCAThen(Euclidean(), n_components=3, preprocessor=X).fit(pairs, y)
    >>> m.cross_distance(X[:2], X[:4]).shape
    (2, 4)
    """

    def __init__(self, learner, n_components: int = 64, preprocessor=None, random_state=None,
                 svd_solver: str | None = "auto"):
        self.learner = learner
        self.n_components = n_components
        self.preprocessor = preprocessor
        self.random_state = random_state
        self.svd_solver = svd_solver

    def get_params(self, deep=False):
        return {"learner": self.learner, "n_components": self.n_components,
                "preprocessor": self.preprocessor, "random_state": self.random_state,
                "svd_solver": self.svd_solver}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def fit(self, pairs, y):
        from sklearn.base import clone

        X = np.asarray(self.preprocessor)
        rows = np.unique(pairs)
        k = min(self.n_components, rows.size - 1, X.shape[1])
        self.pca_ = fit_view_pca(X[rows], k, svd_solver=self.svd_solver)
        Z = self.pca_.transform(X)
        self.model_ = clone(self.learner)
        params = self.model_.get_params()
        if "random_state" in params:
            self.model_.set_params(random_state=self.random_state)
        self.model_.set_params(preprocessor=Z)
        self.model_.fit(pairs, y)
        return self

    def cross_distance(self, A, B):
        return self.model_.cross_distance(self.pca_.transform(A), self.pca_.transform(B))


def cap_n_components_to_views(estimators, X, Y=None) -> list[str]:
    """:func:`cap_n_components` at the narrowest view of ``X`` / ``Y``; one note per change.

    What ``crossmetric benchmark`` (and ``benchmarks/which_method_when.py``) do with the
    registry's estimators on the user's data, the notes being the lines they print on stderr.

    Parameters
    ----------
    estimators : dict of str to estimator
        Capped in place.
    X : ndarray of shape (n_samples, d_x)
    Y : ndarray of shape (n_samples, d_y), optional

    Returns
    -------
    list of str
        ``"crossmetric: NAME: n_components K -> NEW (the data has NEW features)"`` for every
        estimator changed.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import PCCA
    >>> cap_n_components_to_views({"PCCA": PCCA(n_components=32)}, np.zeros((3, 8)),
    ...                           np.zeros((3, 5)))
    ['crossmetric: PCCA: n_components 32 -> 5 (the data has 5 features)']
    """
    cap = X.shape[1] if Y is None else min(X.shape[1], Y.shape[1])
    return [f"crossmetric: {name}: n_components {k} -> {new} (the data has {new} features)"
            for name, (k, new) in cap_n_components(estimators, cap).items()]
