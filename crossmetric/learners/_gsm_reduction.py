"""The fixed linear reduction of :class:`crossmetric.learners.gsm.GSM`'s inputs (PCA or centring,
then one scale), per modality or shared by both.

A reducer is the tuple ``("pca", fitted PCA, scale)`` or ``("scale", mean, scale)`` and maps
``Z`` to ``PCA(Z) / scale`` or ``(Z − mean) / scale`` (:func:`apply_reducer`); ``scale`` is a
scalar, or per-feature standard deviations when whitening without a PCA.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.decomposition import PCA

from crossmetric._utils.checks import check_n_components
from crossmetric._utils.content_cache import ContentCache

__all__ = ["fit_reducer", "apply_reducer", "global_scale", "fit_reducers"]


def global_scale(Zc: np.ndarray, feature_norm: float) -> float:
    """One scalar that sets the mean squared norm of the centred rows to ``feature_norm²``."""
    rms = float(np.sqrt(np.mean(np.einsum("ij,ij->i", Zc, Zc))))
    return rms / float(feature_norm) if rms > 0 else 1.0


def fit_reducer(Z: np.ndarray, name: str, *, n_components, whiten: bool,
                feature_norm: float, rng) -> tuple:
    """Fit the fixed reduction of the rows ``Z``: ``(kind, pca_or_mean, scale)``.

    ``n_components=None`` on rows fewer than their features is the PCA onto the rows' centred
    span (every component: exact for the training samples, no d × d parameter; with the
    identity start GSM keeps the untrained distance of the rest, :mod:`crossmetric._solvers.
    span`); otherwise ``None`` only centres."""
    if n_components is None and Z.shape[0] <= Z.shape[1]:
        n_components = max(Z.shape[0] - 1, 1)
    if n_components is None:
        return _centring(Z, whiten, feature_norm)
    k = check_n_components(n_components, min(Z.shape),
                           what=f"the number of distinct samples and features of {name}")
    seed = int(rng.randint(2**31 - 1))
    # the candidates of a selection refit this same PCA on each fold: kept by content (the
    # fitted PCA is shared between the estimators that get it and never changed)
    return _PCA_REDUCERS.get((Z, k, bool(whiten), float(feature_norm), seed),
                             lambda: _pca_reducer(Z, k, whiten, feature_norm, seed))


#: the last fitted PCA reducers, by the content of their rows and settings
_PCA_REDUCERS = ContentCache(8)


def _pca_reducer(Z: np.ndarray, k: int, whiten: bool, feature_norm: float, seed: int) -> tuple:
    pca = PCA(n_components=k, whiten=bool(whiten), random_state=seed)
    Zr = pca.fit_transform(Z)
    return ("pca", pca, 1.0 if whiten else global_scale(Zr, feature_norm))


def _centring(Z: np.ndarray, whiten: bool, feature_norm: float) -> tuple:
    """The reducer that only centres the rows ``Z`` and scales them: per feature when
    ``whiten``, else by :func:`global_scale`."""
    mean = Z.mean(axis=0)
    if whiten:  # per-feature standardisation
        scale = Z.std(axis=0)
        return ("scale", mean, np.where(scale > 0, scale, 1.0))
    return ("scale", mean, global_scale(Z - mean, feature_norm))


def apply_reducer(reducer: tuple, Z: np.ndarray) -> np.ndarray:
    """``reduce(Z)`` of a reducer from :func:`fit_reducer`."""
    kind, obj, scale = reducer
    if kind == "pca":
        return obj.transform(Z) / scale
    return (Z - obj) / scale


def fit_reducers(X: np.ndarray, Y: np.ndarray, *, joint: bool, n_components, whiten: bool,
                 feature_norm: float, rng) -> tuple[tuple, tuple]:
    """The reducers of both modalities, fitted on their training rows ``X`` and ``Y``.

    ``joint=False``: one reduction per modality (with ``n_components=None`` on views of one
    width wider than their rows, on one shared basis: :func:`_shared_span_reducers`).
    ``joint=True`` (views of equal width, one descriptor of both): one reduction fitted on
    the rows of both stacked, used for both -- coordinates that correspond between the
    modalities, as the paper's shared layer gives and as the tied structures (``B = A``)
    assume.
    """
    kw = {"n_components": n_components, "whiten": whiten, "feature_norm": feature_norm,
          "rng": rng}
    if not joint and n_components is None and X.shape[1] == Y.shape[1] and (
            X.shape[0] <= X.shape[1] or Y.shape[0] <= Y.shape[1]):
        return _shared_span_reducers(X, Y, whiten=whiten, feature_norm=feature_norm, rng=rng)
    if not joint:
        return fit_reducer(X, "X", **kw), fit_reducer(Y, "Y", **kw)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"joint_reduction needs both modalities to have the same number of "
                         f"features, got {X.shape[1]} and {Y.shape[1]}.")
    red = fit_reducer(np.vstack([X, Y]), "X and Y", **kw)
    return red, red


def _shared_span_reducers(X: np.ndarray, Y: np.ndarray, *, whiten: bool,
                          feature_norm: float, rng) -> tuple[tuple, tuple]:
    """Per-modality reducers of views of one width wider than a modality's rows
    (``n_components=None``): each modality centred on its own mean and scaled on its own, both
    on one basis -- the span of the two modalities' centred rows -- so that the coordinates
    still correspond between the modalities (the identity start is then the untrained
    distance of the centred views, each at its own scale, as on unreduced views) and every
    training sample is kept exactly. Two separate span PCAs would give each modality its own
    axes, and the identity start would compare unrelated coordinates. Where the two spans
    fill every feature, centring only (no basis)."""
    k = X.shape[0] + Y.shape[0] - 2  # the rank of the two centred row sets at most
    if k >= X.shape[1]:
        return _centring(X, whiten, feature_norm), _centring(Y, whiten, feature_norm)
    mx, my = X.mean(axis=0), Y.mean(axis=0)
    # a seed drawn per "pca" reducer, as fit_reducer draws (reduced_views relies on it)
    seeds = [rng.randint(2**31 - 1) for _ in range(2)]
    pca = PCA(n_components=max(k, 1), whiten=bool(whiten), random_state=seeds[0])
    pca.fit(np.vstack([X - mx, Y - my]))
    out = []
    for Z, mean in ((X, mx), (Y, my)):
        side = copy.deepcopy(pca)
        side.mean_ = mean  # PCA.transform subtracts mean_ before the shared components_
        scale = 1.0 if whiten else global_scale(side.transform(Z), feature_norm)
        out.append(("pca", side, scale))
    return out[0], out[1]
