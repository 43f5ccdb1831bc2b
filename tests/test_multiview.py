"""More than two views: MCCA (MAXVAR) and MvDA.fit_views, checked against the two-view learners
and against their objectives."""

import os

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from crossmetric import CCA, MCCA, MvDA, make_pairs
from crossmetric.learners.multiview import mcca_directions, mvda_directions, mvda_scatter_matrices

MFEAT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "mfeat")


def _views(n=90, dims=(7, 5, 6), noise=0.5, seed=0):
    rng = np.random.RandomState(seed)
    Z = rng.randn(n, 3)
    return [Z @ rng.randn(3, d) + noise * rng.randn(n, d) + rng.randn(d) for d in dims]


def test_mcca_two_views_is_cca():
    X, Y = _views(dims=(8, 6))
    pairs, y = make_pairs(np.arange(90), np.arange(90), random_state=0)
    cca = CCA(3, reg=1e-3, preprocessor=(X, Y)).fit(pairs, y)  # MCCA's ridge
    pair_fit = MCCA(3, preprocessor=(X, Y)).fit(pairs, y)
    view_fit = MCCA(3).fit_views([X, Y])
    np.testing.assert_allclose(pair_fit.eigenvalues_ - 1, cca.correlations_, atol=1e-10)
    np.testing.assert_allclose(view_fit.eigenvalues_, pair_fit.eigenvalues_, atol=1e-10)
    D = cca.cross_distance(X, Y)
    np.testing.assert_allclose(pair_fit.cross_distance(X, Y), D, atol=1e-9)
    np.testing.assert_allclose(view_fit.view_distance(X, 0, Y, 1), D, atol=1e-9)
    np.testing.assert_allclose(view_fit.cross_distance(X, Y), D, atol=1e-9)
    # each view's variates: unit variance, as CCA's (up to the shared sign)
    np.testing.assert_allclose(np.abs(view_fit.transform_view(X, 0)),
                               np.abs(cca.transform_x(X)), atol=1e-9)


def test_mvda_fit_views_two_views_is_the_pair_fit():
    X, Y = _views(dims=(8, 6), seed=1)
    labels = np.arange(90) % 7
    pairs, y = make_pairs(labels, labels, random_state=0)
    pair_fit = MvDA(4, preprocessor=(X, Y)).fit(pairs, y)
    view_fit = MvDA(4).fit_views([X, Y], labels)
    np.testing.assert_allclose(view_fit.eigenvalues_, pair_fit.eigenvalues_, rtol=1e-9)
    np.testing.assert_allclose(view_fit.cross_distance(X, Y), pair_fit.cross_distance(X, Y),
                               atol=1e-9)
    # per-view labels of different lengths give the same as one shared array
    again = MvDA(4).fit_views([X, Y[:60]], [labels, labels[:60]])
    assert again.view_components_[1].shape == (4, 6)
    # the pair fit also answers transform_view for its two views
    np.testing.assert_allclose(pair_fit.transform_view(Y, 1), pair_fit.transform_y(Y))


def _maxvar_objective(views, ws, reg):
    """Largest eigenvalue of the views' correlation matrix along ``ws`` (ridged variances)."""
    n = views[0].shape[0]
    Vc = [(V - V.mean(0)) / V.std(0, ddof=1) for V in views]
    u = [V @ w for V, w in zip(Vc, ws, strict=True)]
    var = [u_ @ u_ / (n - 1) + reg * np.trace(V.T @ V / (n - 1)) / V.shape[1] * (w @ w)
           for u_, V, w in zip(u, Vc, ws, strict=True)]
    R = np.array([[u[i] @ u[j] / (n - 1) if i != j else var[i] for j in range(len(u))]
                  for i in range(len(u))])
    s = np.sqrt(var)
    return np.linalg.eigvalsh(R / np.outer(s, s))[-1]


def test_mcca_top_direction_maximises_maxvar():
    views = _views(dims=(6, 4, 5, 3), seed=2)
    model = MCCA(2, reg=1e-2).fit_views(views)
    Vc = [(V - V.mean(0)) / V.std(0, ddof=1) for V in views]
    lam, dirs = mcca_directions(Vc, 2, 1e-2)
    np.testing.assert_allclose(lam, model.eigenvalues_)
    ws = [W[:, 0] for W in dirs]
    best = _maxvar_objective(views, ws, 1e-2)
    assert best == pytest.approx(lam[0], rel=1e-9)
    assert 1 < lam[0] <= 4
    rng = np.random.RandomState(0)
    for _ in range(30):  # no nearby direction does better
        trial = [w + 0.05 * np.linalg.norm(w) * rng.randn(w.size) for w in ws]
        assert _maxvar_objective(views, trial, 1e-2) <= best + 1e-12


def _slow_mvda_ratio(views, codes, ws):
    """Between / within scatter of all projected samples, classes pooled across views (Kan et
    al. eq. 4-5), by loops."""
    proj = np.concatenate([(V - V.mean(0)) @ w for V, w in zip(views, ws, strict=True)])
    c = np.concatenate(codes)
    mean = proj.mean()
    within = sum(((proj[c == k] - proj[c == k].mean()) ** 2).sum() for k in np.unique(c))
    between = sum((c == k).sum() * (proj[c == k].mean() - mean) ** 2 for k in np.unique(c))
    return between / within


def test_mvda_three_views_matches_the_papers_ratio():
    views = _views(n=60, dims=(5, 4, 3), seed=3)
    labels = np.arange(60) % 5
    model = MvDA(2, reg=1e-8).fit_views(views, labels)
    ws = [C[0] for C in model.view_components_]
    assert _slow_mvda_ratio(views, [labels] * 3, ws) == pytest.approx(model.eigenvalues_[0],
                                                                       rel=1e-5)
    rng = np.random.RandomState(1)
    for _ in range(30):
        trial = [w + 0.05 * np.linalg.norm(w) * rng.randn(w.size) for w in ws]
        assert _slow_mvda_ratio(views, [labels] * 3, trial) <= model.eigenvalues_[0] * (1 + 1e-6)
    means, lam, dirs = mvda_directions(views, [labels] * 3, 2, 1e-8)
    np.testing.assert_allclose(lam, model.eigenvalues_)
    S, D = mvda_scatter_matrices([V - m for V, m in zip(views, means, strict=True)],
                                 [labels] * 3)
    assert S.shape == (12, 12)


def test_view_api_errors_and_refit():
    views = _views(dims=(4, 3, 5))
    with pytest.raises(NotFittedError):
        MCCA(2).transform_view(views[0], 0)
    m = MCCA(2).fit_views(views)
    with pytest.raises(ValueError, match=r"view must be an integer in \[0, 2\], got 3"):
        m.transform_view(views[0], 3)
    with pytest.raises(ValueError, match="X has 4 features, but view 2 was fitted with 5"):
        m.transform_view(views[0], 2)
    with pytest.raises(ValueError, match="no labels"):
        MCCA(2).fit_views(views, np.zeros(90))
    with pytest.raises(ValueError, match="row-aligned views of equal length"):
        MCCA(2).fit_views([views[0], views[1][:50]])
    with pytest.raises(ValueError, match="at least two"):
        MCCA(2).fit_views([views[0]])
    with pytest.raises(ValueError, match="needs labels"):
        MvDA(2).fit_views(views)
    with pytest.raises(ValueError, match="labels of view 1: 80 labels for 90 rows"):
        MvDA(2).fit_views(views[:2], [np.zeros(90), np.zeros(80)])
    # a later pair fit replaces the views
    pairs, y = make_pairs(np.arange(90), np.arange(90), random_state=0)
    m.set_params(preprocessor=(views[0], views[1])).fit(pairs, y)
    assert not hasattr(m, "view_components_")
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        m.transform_view(views[2], 2)
    assert m.predict(pairs[:5]).shape == (5,)


@pytest.mark.skipif(not os.path.isdir(MFEAT), reason="../shared/data/mfeat is not present")
def test_mfeat_six_views():
    from crossmetric.datasets import load_mfeat

    data = load_mfeat(MFEAT, views=("fou", "pix", "fac", "kar", "zer", "mor"))
    rows = np.arange(0, 2000, 4)
    views = [V[rows] for V in data.views]
    two = MCCA(10).fit_views(views[:2])
    pairs, y = make_pairs(np.arange(rows.size), np.arange(rows.size), random_state=0)
    cca = CCA(10, reg=1e-3, preprocessor=(views[0], views[1])).fit(pairs, y)
    np.testing.assert_allclose(two.cross_distance(views[0][:50], views[1][:50]),
                               cca.cross_distance(views[0][:50], views[1][:50]), atol=1e-7)
    six = MCCA(10).fit_views(views)
    assert six.n_views_ == 6 and six.transform_view(views[5], 5).shape == (rows.size, 10)
    assert six.eigenvalues_[0] > two.eigenvalues_[0]   # six views share more than two
    mvda = MvDA(9).fit_views(views, data.labels[rows])
    D = mvda.view_distance(views[2], 2, views[3], 3)
    same = data.labels[rows][D.argmin(axis=1)] == data.labels[rows]
    assert same.mean() > 0.5                           # class-level rank-1 fac -> kar
