"""Closed forms at d ≫ n: the solve in the span of the samples
(:func:`crossmetric._solvers.linalg.span_basis`) is the feature-space solve, which the module flag
``_REDUCE_TO_SPAN = False`` forces; with d ≤ n nothing changes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crossmetric import CCA, CDFE, CSR, KISSME, PLS, DMLEig, MvDA, make_pairs
from crossmetric._solvers import linalg
from crossmetric._solvers.linalg import fit_pca, pca_basis, span_basis
from crossmetric.learners.baselines import _kissme
from crossmetric.protocols import CCAProjection
from crossmetric.protocols.views import _pca_fit_views


def views(n=40, dx=300, dy=200, n_classes=8, seed=0):
    rng = np.random.RandomState(seed)
    lab = rng.randint(n_classes, size=n)
    X = rng.randn(n_classes, dx)[lab] + rng.randn(n, dx) + 1.0
    Y = rng.randn(n_classes, dy)[lab] + rng.randn(n, dy) - 2.0
    pairs, y = make_pairs(lab, lab, n_negatives=3, random_state=0)
    return X, Y, pairs, y, rng.randn(7, dx) + 1.0, rng.randn(9, dy) - 2.0


@pytest.fixture
def solve(monkeypatch):
    """``solve(fn)`` -> ``(span, full, n_qr)``: ``fn()`` in the span and in feature space, and
    how many span bases the first call built."""
    calls = []
    thin_qr = linalg._thin_qr
    for module in (linalg, _kissme):   # KISSME calls it directly too
        monkeypatch.setattr(module, "_thin_qr", lambda A: calls.append(A.shape) or thin_qr(A))

    def run(fn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = len(calls)
            span = fn()
            n_qr = len(calls) - before
            with monkeypatch.context() as m:
                m.setattr(linalg, "_REDUCE_TO_SPAN", False)
                full = fn()
        assert len(calls) == before + n_qr    # the flag switches the reduction off
        return span, full, n_qr

    return run


def close(a, b, rtol=1e-6):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= rtol * np.abs(b).max(), np.abs(a - b).max() / np.abs(b).max()


def test_span_basis_holds_the_rows():
    V = np.random.RandomState(0).randn(6, 50)
    Q = span_basis(np.vstack([V, V[:2]]))           # repeated rows are dropped
    assert Q.shape == (50, 6)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(V @ Q @ Q.T, V, atol=1e-12)
    e = np.eye(1, 50, 7)
    np.testing.assert_allclose(np.abs(span_basis(e, V)[:, 0]), e[0], atol=1e-15)
    assert span_basis(V[:, :6]) is None             # as many rows as features: no gain


LEARNERS = [
    CCA(5), CCA(4, reg=0.1, distance="euclidean"), CCA(5, reg=1e-4, scale=False),
    PLS(5), PLS(4, scale=False, distance="euclidean"),
    MvDA(5), MvDA(4, reg=0.1, distance="euclidean"),
    CDFE(5), CDFE(4, alpha=0.5, beta=2.0, distance="cosine"),
    CSR(), CSR(4, coupling=0.0, distance="euclidean"),
]


@pytest.mark.parametrize("est", LEARNERS, ids=repr)
def test_span_solve_is_the_feature_space_solve(est, solve):
    X, Y, pairs, y, Xt, Yt = views()
    fit = lambda: est.__class__(**est.get_params()).set_params(preprocessor=(X, Y)).fit(pairs, y)  # noqa: E731
    span, full, n_qr = solve(fit)
    assert n_qr == 2                                 # one basis per view
    close(span.cross_distance(Xt, Yt), full.cross_distance(Xt, Yt))
    close(span.pair_distance(pairs), full.pair_distance(pairs))
    # the same projections up to the sign of each direction (the problems' only freedom)
    for Fs, Ff in ((span.transform_x(Xt), full.transform_x(Xt)),
                   (span.transform_y(Yt), full.transform_y(Yt))):
        signs = np.sign(np.sum(Fs * Ff, axis=0))
        close(Fs * signs, Ff)
    for attr in ("correlations_", "eigenvalues_"):    # the objective values
        if hasattr(full, attr):
            close(getattr(span, attr), getattr(full, attr), 1e-8)


@pytest.mark.parametrize("dx, dy", [(20, 300), (300, 20)])
def test_nipals_in_the_span_of_one_view(dx, dy, solve):
    X, Y, pairs, y, Xt, Yt = views(dx=dx, dy=dy)
    for est in (CCA(4, solver="nipals"), PLS(4)):
        span, full, n_qr = solve(lambda est=est: est.set_params(preprocessor=(X, Y)).fit(pairs, y))
        assert n_qr == 1
        assert span.n_iter_ == full.n_iter_          # the same iteration, step by step
        close(span.cross_distance(Xt, Yt), full.cross_distance(Xt, Yt))


def test_nipals_with_both_views_wide(solve):
    # every canonical correlation is 1 when both views are wider than the pairs: NIPALS' later
    # components follow round-off in either solve, its first one is determined by its start
    X, Y, pairs, y, Xt, Yt = views()
    span, full, _ = solve(lambda: CCA(1, solver="nipals", distance="euclidean",
                                      preprocessor=(X, Y)).fit(pairs, y))
    close(span.cross_distance(Xt, Yt), full.cross_distance(Xt, Yt))


def test_cca_directions_and_the_c_views_in_the_span(solve):
    X, Y, pairs, y, Xt, Yt = views()
    pos = pairs[y == 1]
    span, full, n_qr = solve(lambda: CCAProjection(6).fit(X[pos[:, 0]], Y[pos[:, 1]]))
    assert n_qr == 2
    close(span.correlations_, full.correlations_, 1e-8)
    for a, b in zip(span.transform(Xt, Yt), full.transform(Xt, Yt), strict=True):
        close(np.abs(a), np.abs(b))


@pytest.mark.parametrize("kw", [{}, {"reg": 1e-2}, {"reg": 0.0}])
def test_kissme_keeps_the_complement_term(kw, solve):
    X, _, pairs, y, Xt, _ = views()
    span, full, n_qr = solve(lambda: KISSME(**kw, preprocessor=X).fit(pairs, y))
    assert n_qr == 1
    # the full solve's 300 × 300 L; the span solve's one row per basis vector of the
    # training samples' span, the complement kept as a scale (no d × d matrix)
    assert full.components_.shape == (300, 300)
    m = span.components_.shape[0]
    assert span.components_.shape == (m, 300) and m < 300
    if getattr(span, "complement_scale_", 0.0) > 0:
        assert span.complement_basis_.shape == (300, m)
    close(span.eigenvalues_, full.eigenvalues_)
    close(span.get_mahalanobis_matrix(), full.get_mahalanobis_matrix())
    close(span.cross_distance(Xt, Xt[::-1]), full.cross_distance(Xt, Xt[::-1]))


def test_kissme_top_directions_and_complement_directions(solve):
    X, _, pairs, y, Xt, _ = views()
    span, full, _ = solve(lambda: KISSME(5, reg=1.0, preprocessor=X).fit(pairs, y))
    close(span.eigenvalues_, full.eigenvalues_)
    close(span.cross_distance(Xt, Xt[::-1]), full.cross_distance(Xt, Xt[::-1]))
    # with a tiny ridge the complement's eigenvalue 1/ρ_S − 1/ρ_D leads: its directions are
    # any orthonormal ones off the data, in either solve
    span, full, _ = solve(lambda: KISSME(250, preprocessor=X).fit(pairs, y))
    close(span.eigenvalues_, full.eigenvalues_)
    L = span.components_ / np.sqrt(span.eigenvalues_)[:, None]
    np.testing.assert_allclose(L @ L.T, np.eye(250), atol=1e-8)


def test_pca_steps_are_exact_in_the_span(solve):
    X, Y, pairs, y, *_ = views()
    assert fit_pca(X, 5).svd_solver == "full" and fit_pca(X.T, 5).svd_solver == "auto"
    Z = np.vstack([X, X + 1])
    i, j = np.arange(40), np.arange(40, 80)
    (_, Ps), (_, Pf), _ = solve(lambda: pca_basis(Z, i, j, 10))
    close(np.abs(Ps @ Pf.T), np.eye(10))
    assert pca_basis(Z, i, j, None) == (None, None)    # no d × d identity without a PCA
    (Xs, _), (Xf, _), _ = solve(lambda: _pca_fit_views(X, Y, pairs, 10))
    close(np.abs(Xs), np.abs(Xf))
    span, full, _ = solve(lambda: DMLEig(pca_components=10, max_iter=300,
                                         preprocessor=X).fit(pairs, y))
    close(span.pair_distance(pairs), full.pair_distance(pairs), 1e-5)


def test_cdfe_keeps_the_full_solve_when_the_complement_ties(solve):
    # without the negative-pair term the objective is ⪰ 0, so the complement's eigenvalue 0
    # is among the k smallest: the reduced problem cannot say which directions the full solve
    # picks, and the full solve runs
    X, Y, pairs, y, Xt, Yt = views()
    span, full, _ = solve(lambda: CDFE(5, alpha=0.0, preprocessor=(X, Y)).fit(pairs, y))
    np.testing.assert_array_equal(span.components_x_, full.components_x_)
    assert span.components_x_.shape == (5, 300)


def test_mvda_more_directions_than_coordinates_solves_in_full(solve):
    X, Y, pairs, y, Xt, Yt = views(dx=60, dy=50)
    span, full, _ = solve(lambda: MvDA(90, preprocessor=(X, Y)).fit(pairs, y))
    np.testing.assert_array_equal(span.components_x_, full.components_x_)


@pytest.mark.parametrize("est", LEARNERS + [CCA(3, solver="nipals"), KISSME(), KISSME(3)],
                         ids=repr)
def test_d_at_most_n_is_unchanged(est, solve):
    X, Y, pairs, y, Xt, Yt = views(n=60, dx=12, dy=8)
    XY = X if isinstance(est, KISSME) else (X, Y)
    span, full, n_qr = solve(lambda: est.__class__(**est.get_params()).set_params(
        preprocessor=XY).fit(pairs, y))
    assert n_qr == 0
    Yt = Xt[::-1] if isinstance(est, KISSME) else Yt
    np.testing.assert_array_equal(span.cross_distance(Xt, Yt), full.cross_distance(Xt, Yt))
