"""Starting points of the pair learners' solvers.

* :func:`initial_weights` / :func:`rescale_to_unit_distance`: the tower weights of PCCA and CMML
  (PCA axes, kernel-PCA coordinates or random rows, scaled to a mean training ``D²`` of 1);
* :func:`initial_projection`: the projection ``L₀`` and bias ``b₀`` of LDML, CLML, LMNN and MCC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from sklearn.decomposition import PCA
from sklearn.utils import check_random_state
from sklearn.utils.extmath import randomized_svd

from crossmetric._base import squared_euclidean_matrix, squared_euclidean_rows
from crossmetric._solvers.early_stopping import scan_identity_folds
from crossmetric._utils.checks import as_float_array
from crossmetric._utils.content_cache import ContentCache
from crossmetric.learners._auto_grids import COMPONENT_CANDIDATES
from crossmetric.pairs._pair_data import PairData

if TYPE_CHECKING:  # pragma: no cover
    from crossmetric._solvers.logistic import TowerProblem

__all__ = ["INITS", "CCA_RIDGES", "PROJECTION_INITS", "initial_weights",
           "rescale_to_unit_distance", "initial_projection", "cca_start", "start_candidates",
           "check_init", "fitted_towers", "FITTED", "KISSME_START", "kissme_start",
           "cca_start_size", "ridge_of", "build_starts", "closed_start_distances"]

#: the name of a start given as a fitted estimator (``init=estimator``)
FITTED = "fitted"
#: the closed form of one metric on the pair differences (:func:`kissme_start`)
KISSME_START = "kissme"

INITS = ("auto", "pca", "random", "identity", "kissme", "cca")
#: the ridges (relative to the mean eigenvalue) of the closed-form starts tried by ``"auto"``
CCA_RIDGES = (0.01, 0.1, 1.0)
#: identity folds on which a closed-form start's size is chosen
CCA_START_FOLDS = 3
#: the named starting projections of :func:`initial_projection`
PROJECTION_INITS = ("auto", "pca", "identity", "random")


def initial_weights(Phi: np.ndarray, k: int, init: str, rng: np.random.RandomState,
                    is_kernel: bool) -> np.ndarray:
    """Starting weights ``W₀`` (k × n_features of ``Φ``); the papers leave this open.

    ``"pca"``: for a linear tower the top-k principal axes of the samples (randomized SVD, so
    no d × d matrix is formed); for a kernel tower the top-k eigenvectors of ``K``, i.e. the
    embeddings start as uncentred kernel-PCA coordinates. Components beyond the rank of the
    data are filled with small random rows. ``"random"``: Gaussian entries. ``"identity"``
    (linear towers only): the first k input coordinates, so that two towers on views in shared
    coordinates (one descriptor and one PCA of both) start at their untrained distance; rows
    beyond the number of features are small random ones. Each is rescaled afterwards by
    :func:`rescale_to_unit_distance`.
    """
    n, p = Phi.shape
    if init == "random":
        return rng.standard_normal((k, p)) / np.sqrt(p)
    W = np.zeros((k, p))
    if init == "identity":
        if is_kernel:
            raise ValueError("init='identity' needs linear towers (kernel='linear'): a kernel "
                             "tower's coordinates are its training samples.")
        r = min(k, p)
        W[:r] = np.eye(r, p)
    elif is_kernel:
        r = min(k, n - 1) if n > 1 else 0
        if r > 0:
            if n > 600 and r < n // 4:
                v0 = rng.uniform(-1, 1, n)
                vals, vecs = scipy.sparse.linalg.eigsh(Phi, k=r, which="LA", v0=v0)
            else:
                vals, vecs = scipy.linalg.eigh(Phi, subset_by_index=[n - r, n - 1])
            W[:r] = vecs[:, ::-1].T
    else:
        r = min(k, n - 1, p)
        if r > 0:
            centered = Phi - Phi.mean(axis=0)
            if min(n, p) <= max(256, 4 * k):  # exact thin SVD is cheap here
                Vt = np.linalg.svd(centered, full_matrices=False)[2][:r]
            else:  # randomized SVD: O(n·p·k) time, O((n + p)·k) extra memory, no p × p matrix
                Vt = randomized_svd(centered, r, random_state=rng)[2]
            W[:r] = Vt
    # rows beyond the leading r: small random ones
    W[r:] = rng.standard_normal((k - r, p)) * (1e-3 / np.sqrt(p))
    return W


def rescale_to_unit_distance(problem: TowerProblem, Ws, *, balance: bool = True):
    """Scale the starting weights so that the mean training ``D²`` is 1 (the threshold).

    With two towers and ``balance`` each is first scaled so that its centred embeddings have
    unit mean squared norm: modalities of very different scales (mfeat's Fourier coefficients
    ~0.1, its pixel averages ~3) then start on an equal footing instead of one tower
    dominating ``D²``. The untrained distance and the closed form are not balanced: their
    two towers keep their relative scale.
    """
    if balance and not problem.tied:
        balanced = []
        for tower, W in zip(problem.towers, Ws, strict=True):
            F = tower.embed(W)
            spread = float(np.mean(np.sum((F - F.mean(axis=0)) ** 2, axis=1)))
            balanced.append(W / np.sqrt(spread) if np.isfinite(spread) and spread > 0 else W)
        Ws = balanced
    FX, FY = problem.embed(Ws)
    mean = float(np.mean(problem.objective.distances(FX, FY)))
    if not np.isfinite(mean) or mean <= 0:
        return Ws
    return [W / np.sqrt(mean) for W in Ws]



def cca_start(X: np.ndarray, Y: np.ndarray, ix: np.ndarray, iy: np.ndarray, y: np.ndarray,
              k: int, reg: float, size: int | str | None = "auto", random_state=None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form cross-modal start: ridge CCA of the positive pairs' samples.

    Returns ``(A, B)`` of shape (k, d_x) and (k, d_y): the canonical directions (unit-variance
    canonical variates) as rows, the first ``size`` of them (all for ``None``; ``"auto"``: the
    size :func:`cca_start_size` chooses on held-out identities, the folds drawn from
    ``random_state``), rows beyond zero. ``‖A x − B y‖²``
    is then CCA's common-space distance of *centred* samples up to the shift ``A x̄ − B ȳ``:
    exact where each view is centred (a per-view PCA, or a learner that centres, as CML_AUC).
    ``reg`` is the ridge relative to the mean eigenvalue of each view's covariance
    (:func:`crossmetric._solvers.linalg.cca_directions`).
    """
    from crossmetric._solvers.linalg import cca_directions

    pos = np.asarray(y) == 1
    Xp, Yp = X[ix[pos]], Y[iy[pos]]
    Xc, Yc = Xp - Xp.mean(axis=0), Yp - Yp.mean(axis=0)
    r = min(int(k), X.shape[1], Y.shape[1], max(Xp.shape[0] - 1, 1))
    if isinstance(size, str) and size == "auto":
        size = cca_start_size(X, Y, ix, iy, y, r, reg, random_state)
    if size is not None:
        r = min(r, int(size))
    Ad, Bd, _ = cca_directions(Xc, Yc, r, float(reg))
    A, B = np.zeros((k, X.shape[1])), np.zeros((k, Y.shape[1]))
    A[:Ad.shape[1]], B[:Bd.shape[1]] = Ad.T, Bd.T
    return A, B


def kissme_start(data: PairData, y: np.ndarray, k: int) -> np.ndarray | None:
    """The closed-form start of one metric on the pair differences: KISSME's
    ``M = Σ_S⁻¹ − Σ_D⁻¹`` (its PSD part; Köstinger et al., CVPR 2012, the library's
    :class:`~crossmetric.KISSME` with its default ridge) of the pairs ``data`` labelled ``y``,
    as ``k`` rows ``L`` with ``Lᵀ L`` its top ``k`` eigenpairs (zero rows beyond its rank), so
    that ``‖L x − L y‖²`` is its distance (two towers: the same ``L`` on both views, which
    need one width).

    Where the views are wider than the pairs' samples, ``Σ_S`` is singular and the small ridge
    makes ``Σ_S⁻¹`` weigh most the directions the similar pairs' differences do not span (KISSME
    alone, rank-1 %: CUFS HOG at 100 × 125 100.0, untrained 95.2; VIPeR LOMO 41.1, untrained
    16.3). ``None`` where one kind of pair joins identical samples only (KISSME is undefined
    there).
    """
    from crossmetric.learners.baselines._kissme import KISSME

    model = KISSME(n_components=min(int(k), data.X.shape[1]))
    try:
        model._fit(data, np.asarray(y))
    except ValueError:
        return None
    L = np.zeros((int(k), data.X.shape[1]))
    L[:model.components_.shape[0]] = model.components_
    return L


def cca_start_size(X: np.ndarray, Y: np.ndarray, ix: np.ndarray, iy: np.ndarray,
                   y: np.ndarray, r: int, reg: float, random_state=None) -> int | None:
    """The number of directions of a closed-form start: of the closed form's own
    ``n_components="auto"`` candidates
    (:data:`~crossmetric.learners._auto_grids.COMPONENT_CANDIDATES`, up to ``r``) and all
    ``r``, the best mean rank-1 of the start's own distance ``‖A x − B y‖²`` on
    :data:`CCA_START_FOLDS` folds of the identities drawn from ``random_state``
    (:func:`~crossmetric._solvers.early_stopping.identity_folds`, scored as the held-out guard
    scores, the scan :func:`~crossmetric._solvers.selection_scan.scan_candidates`; a tie keeps
    the smaller). ``None`` (all) where the pairs do not describe identities or cannot fill the
    folds.
    """
    from crossmetric._solvers.linalg import cca_directions

    # with a few hundred identities all directions weigh the noisy ones alike: on VIPeR LOMO
    # the size chosen on held-out persons took CCA from 21.6 % rank-1 at 10 directions to 37.5 %
    sizes = [s for s in COMPONENT_CANDIDATES if s < r]
    if not sizes:
        return None
    directions: dict = {}  # per fold (by its training pairs): all r directions, once

    def distances(params, fold):
        train, y_train, validation = fold
        key = id(train)
        if key not in directions:
            pos = y_train == 1
            Xp, Yp = train.X[train.ix[pos]], train.Y[train.iy[pos]]
            m = min(r, max(Xp.shape[0] - 1, 1))
            directions[key] = cca_directions(Xp - Xp.mean(axis=0), Yp - Yp.mean(axis=0), m,
                                             float(reg))[:2]
        A, B = directions[key]
        s = A.shape[1] if params["size"] is None else min(params["size"], A.shape[1])
        V = validation.data
        return squared_euclidean_matrix(V.X @ A[:, :s], V.Y @ B[:, :s])

    scan = scan_identity_folds(PairData(X, Y, np.asarray(ix), np.asarray(iy)), y,
                               [{"size": s} for s in (*sizes, None)], distances, tied=False,
                               n_folds=CCA_START_FOLDS, random_state=random_state)
    return None if scan is None else scan.params[scan.best_index]["size"]


def check_init(init, names=INITS):
    """``init``: one of ``names``, or a fitted estimator (returned as :data:`FITTED`)."""
    if isinstance(init, str):
        if init not in names:
            raise ValueError(f"init must be one of {', '.join(map(repr, names))} or a fitted "
                             f"estimator, got {init!r}.")
        return init
    if any(hasattr(init, a) for a in ("components_", "components_x_", "x_rotations_")):
        return FITTED
    raise ValueError(f"init must be one of {', '.join(map(repr, names))} or a fitted "
                     f"estimator with linear towers (components_, components_x_ and "
                     f"components_y_, or x_rotations_ and y_rotations_), got "
                     f"{type(init).__name__}.")


def fitted_towers(init, cross: bool) -> list[np.ndarray]:
    """The linear towers ``[A]`` (one modality) or ``[A, B]`` of a fitted estimator given as
    ``init`` -- its ``components_`` or ``components_x_`` / ``components_y_`` (rows over the
    features), or the rotations of :class:`crossmetric.CCA` / PLS -- so that a learner starts
    at its distance ``‖A x − B y‖²``.

    A shift the estimator subtracts first (``mean_x_``, ``mean_y_``) is not a point of a tower
    without bias: the start then differs from it by the constant offset ``A x̄ − B ȳ``, exact
    where the two shifts map to one point (one mean of two views of one descriptor). A
    learner that works on a reduction (CML_AUC's ``reduce_to``, GSM's ``n_components``)
    starts from the towers' part inside it. Note
    that :func:`sklearn.base.clone` (and so every protocol of the library) clones a fitted
    estimator given as a parameter into an unfitted one: give it to a learner that is fitted
    directly.
    """
    if getattr(init, "distance", "euclidean") != "euclidean":
        raise ValueError(f"init: a fitted {type(init).__name__} with distance="
                         f"{init.distance!r} is not a distance of linear towers; fit it with "
                         f"distance='euclidean' to start from it.")
    if cross:
        if hasattr(init, "components_x_") and hasattr(init, "components_y_"):
            return [np.asarray(init.components_x_, float), np.asarray(init.components_y_, float)]
        if hasattr(init, "x_rotations_"):  # CCA / PLS: ((x − x̄) / s_x) @ rotations
            return [(np.asarray(getattr(init, f"{v}_rotations_"), float)
                     / np.asarray(getattr(init, f"{v}_std_", 1.0), float).reshape(-1, 1)).T
                    for v in ("x", "y")]
        if hasattr(init, "components_"):  # a single-modal metric on both views
            A = np.asarray(init.components_, float)
            return [A, A]
    elif hasattr(init, "components_"):
        return [np.asarray(init.components_, float)]
    raise ValueError(f"init: a fitted {type(init).__name__} has no linear towers this learner "
                     f"can start from (components_{'x_ and components_y_' if cross else ''}).")


def start_candidates(init, paper_init: str, *, cross: bool, features: bool,
                     equal_widths: bool, held_out: bool = True, full_rank: bool = True,
                     kissme: bool = True) -> list[str]:
    """The named starts a fit tries, in order of preference (the first wins ties).

    ``init="auto"`` (the learners' default), in this order: the untrained distance
    (``"identity"``: linear towers of ``full_rank`` -- as many rows as input coordinates, so
    that the start is that distance and not a truncation of it -- and for two towers views of
    one width), the cross-modal closed form (``"cca"``: two linear towers, one candidate per
    ridge of :data:`CCA_RIDGES`, so that the ridge too is chosen on held-out identities, each
    with its size chosen by :func:`cca_start_size`), the closed form of one metric
    (``"kissme"``, :func:`kissme_start`: linear towers, views of one width; ``kissme=False``
    leaves it out, for a learner that trains further from the others) and the paper's own
    start ``paper_init``; the validation hold-out
    of :mod:`crossmetric._solvers.early_stopping` keeps the best; without a hold-out
    (``held_out=False``) ``"auto"`` is the paper's start.
    ``init="cca"``: the ridges only. Any other name (:data:`FITTED` for an estimator):
    itself. These starts are the library's: the papers start from random or PCA weights.
    """
    if init == "cca":
        if not (cross and features):
            raise ValueError("init='cca' needs two linear towers (kernel='linear' or Nyström "
                             "features): the closed form is a linear CCA.")
        return [f"cca(reg={r:g})" for r in CCA_RIDGES]
    if init == KISSME_START and not (features and (equal_widths or not cross)):
        raise ValueError("init='kissme' needs linear towers on views of one width (one metric "
                         "on the differences x − y).")
    if init != "auto":
        return [init]
    if not held_out:
        return [paper_init]
    names = []
    if features and full_rank and (equal_widths or not cross):
        names.append("identity")
    if cross and features:
        names += [f"cca(reg={r:g})" for r in CCA_RIDGES]
    if kissme and features and (equal_widths or not cross):
        names.append(KISSME_START)
    if paper_init not in names:
        names.append(paper_init)
    return names


def build_starts(names: list[str], make) -> dict:
    """``{name: make(name)}`` over the named starts, in order, without those ``make`` cannot
    build (``None``: :func:`kissme_start` on pairs of identical samples); a single name that
    cannot be built (``init`` asked for it) is an error."""
    starts = {}
    for name in names:
        start = make(name)
        if start is None:
            if len(names) == 1:
                raise ValueError(f"init={name!r} cannot be built from these pairs: KISSME's "
                                 f"start needs similar and dissimilar pairs of differing "
                                 f"samples.")
            continue
        starts[name] = start
    return starts


def closed_start_distances(name: str, fold, k: int, random_state=None):
    """The distances between a fold's held-out samples of the closed-form start ``name``
    (``"identity"``, ``"cca(reg=R)"``, ``"kissme"``) built from the fold's training side, in
    the coordinates the fold holds (a learner's own: span or kernel coordinates, a basis), for
    :func:`~crossmetric._solvers.early_stopping.fold_start_hits`; ``fold = (train_data,
    y_train, validation)``, ``k`` the rows of the start. ``None`` for any other start (the
    paper's is not a distance of its own: the hold-out alone scores it) and for KISSME's on
    pairs of identical samples."""
    train, y_train, validation = fold
    V = validation.data
    if name == "identity":  # the first k coordinates
        return squared_euclidean_matrix(V.X[:, :k], V.Y[:, :k])
    return _FOLD_DISTANCES.get(
        _fold_parts(name, fold, k, random_state),
        lambda: _closed_start_distances(name, train, y_train, V, k, random_state))


#: the fold distances of the last closed-form starts (the held-out samples of a fold: a few
#: hundred squared, a few hundred kB each), by the content of the fold
_FOLD_DISTANCES = ContentCache(64)


def _fold_parts(name: str, fold, k: int, random_state) -> tuple | None:
    """What a closed-form start's fold distances depend on (:class:`ContentCache`'s inputs):
    the candidates of a selection that differ only in what the start does not see (the
    iterations, a penalty) fit on the same folds and get the same starts. ``None`` (not kept)
    for CCA's start without an integer seed (its size folds draw from a shared random
    state) and for the names that have no closed form."""
    if name.startswith("cca("):
        if not isinstance(random_state, int | np.integer):
            return None
        seed = int(random_state)
    elif name == KISSME_START:
        seed = None  # KISSME draws nothing
    else:
        return None
    train, y_train, validation = fold
    return (name, int(k), seed, train.X, train.Y, train.ix, train.iy, y_train,
            validation.data.X, validation.data.Y)


def _closed_start_distances(name: str, train, y_train, V, k: int, random_state):
    if name.startswith("cca("):
        A, B = cca_start(train.X, train.Y, train.ix, train.iy, y_train, k, ridge_of(name),
                         random_state=random_state)
        return squared_euclidean_matrix(V.X @ A.T, V.Y @ B.T)
    if name == KISSME_START:
        L = kissme_start(train, y_train, k)
        return None if L is None else squared_euclidean_matrix(V.X @ L.T, V.Y @ L.T)
    return None


def ridge_of(name: str) -> float:
    """The ridge of a ``"cca(reg=R)"`` start name."""
    return float(name[len("cca(reg="):-1])


def initial_projection(init, n_components: int, Xu: np.ndarray, i: np.ndarray,
                       j: np.ndarray, random_state, *, name: str = "init"):
    """Initial ``L0`` (n_components × n_features) and bias ``b0``.

    ``init`` is ``"pca"`` (leading principal axes of the training samples), ``"identity"``
    (the first ``n_components`` rows of the identity), ``"random"`` (Gaussian rows), ``"auto"``
    (``"pca"`` when ``n_components`` < n_features, else ``"identity"``) or an array. A named
    initialisation is rescaled so that the median training-pair distance is 1; an array is used
    as given. In both cases ``b0`` is the median training-pair distance under ``L0``, so the
    initial model calls half of the pairs *same*.
    """
    p, d = n_components, Xu.shape[1]
    if isinstance(init, str):
        if init not in PROJECTION_INITS:
            raise ValueError(
                f"{name} must be one of {PROJECTION_INITS} or an array, got {init!r}.")
        if init == "auto":
            init = "pca" if p < d and p <= Xu.shape[0] else ("identity" if p <= d else "random")
        if init == "pca":
            if p > min(Xu.shape):
                raise ValueError(
                    f"{name}='pca' gives at most min(n_samples, n_features) = {min(Xu.shape)} "
                    f"axes, but n_components={p}; use init='random'."
                )
            L0 = PCA(n_components=p, random_state=random_state).fit(Xu).components_
        elif init == "identity":
            if p > d:
                raise ValueError(
                    f"{name}='identity' needs n_components <= n_features ({d}), got {p}."
                )
            L0 = np.eye(p, d)
        else:
            rng = check_random_state(random_state)
            L0 = rng.standard_normal((p, d)) / np.sqrt(d)
        L0 = np.array(L0, dtype=np.float64)
        D = _pair_dist(Xu @ L0.T, i, j)
        med = float(np.median(D))
        if med > 0:
            L0 /= np.sqrt(med)
    else:
        L0 = as_float_array(init, name, ndim=2).astype(np.float64, copy=True)
        if L0.shape != (p, d):
            raise ValueError(
                f"{name} must have shape (n_components, n_features) = {(p, d)}, "
                f"got {L0.shape}."
            )
    b0 = float(np.median(_pair_dist(Xu @ L0.T, i, j)))
    return L0, b0


def _pair_dist(Z: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    return squared_euclidean_rows(Z[i], Z[j])
