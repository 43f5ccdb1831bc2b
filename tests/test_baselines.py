"""Tests of the baselines: CCA, PLS, KCCA, CDFE, KISSME (Euclidean: its own tests)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cross_decomposition import CCA as SkCCA
from sklearn.cross_decomposition import PLSCanonical
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score

from crossmetric.learners.baselines import CCA, CDFE, KCCA, KISSME, PLS, Euclidean
from crossmetric.pairs import make_pairs


def cross_modal_data(n=150, dx=6, dy=5, n_classes=5, noise=0.5, seed=0):
    rng = np.random.RandomState(seed)
    labels = rng.randint(n_classes, size=n)
    centers = rng.randn(n_classes, 3) * 2.0
    H = centers[labels] + noise * rng.randn(n, 3)
    X = H @ rng.randn(3, dx) + 0.3 * rng.randn(n, dx) + 3.0
    Y = np.tanh(H @ rng.randn(3, dy) / 3) + 0.05 * rng.randn(n, dy) - 1.0
    return X, Y, labels


@pytest.fixture(scope="module")
def data():
    X, Y, lab = cross_modal_data(n=300)
    tr, te = slice(0, 150), slice(150, 300)
    pairs, y = make_pairs(lab[tr], lab[tr], n_negatives=2, max_positives=300, random_state=0)
    pt, yt = make_pairs(lab[te], lab[te], n_negatives=2, max_positives=300, random_state=1)
    return X[tr], Y[tr], pairs, y, X[te], Y[te], pt, yt


def test_cca_matches_sklearn_transforms(data):
    X, Y, pairs, y, *_ = data
    for Model, Sk, kw, sk_kw in [(CCA, SkCCA, {"solver": "nipals"}, {}),
                                 (PLS, PLSCanonical, {}, {"algorithm": "svd"})]:
        m = Model(3, distance="euclidean", preprocessor=(X, Y), **kw).fit(pairs, y)
        pos = pairs[y == 1]
        sk = Sk(n_components=3, max_iter=500, tol=1e-6, **sk_kw).fit(X[pos[:, 0]],
                                                                     Y[pos[:, 1]])
        a, b = sk.transform(X, Y)
        np.testing.assert_allclose(m.transform_x(X), a, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(m.transform_y(Y), b, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(
            m.pair_distance(pairs), np.sum((a[pairs[:, 0]] - b[pairs[:, 1]]) ** 2, axis=1))


def test_pls_by_svd_is_the_converged_nipals_and_never_warns(data):
    """PLS's SVD gives the directions NIPALS converges to (up to its tolerance), with no
    iterations and no ConvergenceWarning where NIPALS stops at max_iter."""
    import warnings

    X, Y, pairs, y, *_ = data
    pos = pairs[y == 1]
    m = PLS(3, distance="euclidean", preprocessor=(X, Y)).fit(pairs, y)
    nipals = PLSCanonical(n_components=3, max_iter=5000, tol=1e-14).fit(X[pos[:, 0]],
                                                                      Y[pos[:, 1]])
    a, b = nipals.transform(X, Y)
    np.testing.assert_allclose(m.transform_x(X), a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.transform_y(Y), b, rtol=1e-5, atol=1e-6)
    assert m.n_iter_ == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PLS(5, max_iter=1, preprocessor=(X, Y)).fit(pairs, y)
    with pytest.warns(ConvergenceWarning):
        PLSCanonical(n_components=5, max_iter=1).fit(X[pos[:, 0]], Y[pos[:, 1]])


def test_cca_cosine_is_normalised_and_learns(data):
    X, Y, pairs, y, Xt, Yt, pt, yt = data
    m = CCA(3, preprocessor=(X, Y)).fit(pairs, y)
    F = m.transform_x(X)
    np.testing.assert_allclose(np.linalg.norm(F, axis=1), 1.0)
    d = m.cross_distance(X[:4], Y[:5])
    Fy = m.transform_y(Y[:5])
    np.testing.assert_allclose(d, 2 - 2 * F[:4] @ Fy.T, atol=1e-12)
    assert m.set_params(preprocessor=(Xt, Yt)).score(pt, yt) > 0.85


def test_kcca_linear_kernel_recovers_cca_correlations():
    """With a linear kernel and vanishing κ, KCCA's correlations equal linear CCA's."""
    rng = np.random.RandomState(3)
    n = 200
    H = rng.randn(n, 2)
    X = H @ rng.randn(2, 4) + 0.5 * rng.randn(n, 4)
    Y = H @ rng.randn(2, 3) + 0.5 * rng.randn(n, 3)
    pairs = np.c_[np.arange(n), np.arange(n)]
    neg = np.c_[np.arange(n), (np.arange(n) + 7) % n]
    P, yy = np.r_[pairs, neg], np.r_[np.ones(n), -np.ones(n)].astype(int)
    m = KCCA(3, kernel="linear", reg=1e-10, distance="euclidean", preprocessor=(X, Y))
    m.fit(P, yy)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    Wx = np.linalg.inv(np.linalg.cholesky(Xc.T @ Xc)).T
    Wy = np.linalg.inv(np.linalg.cholesky(Yc.T @ Yc)).T
    rho = np.linalg.svd(Wx.T @ Xc.T @ Yc @ Wy, compute_uv=False)
    np.testing.assert_allclose(m.correlations_, rho[:3], rtol=1e-6)
    # the canonical variates on the training data have those correlations
    a, b = m.transform_x(X), m.transform_y(Y)
    for k in range(3):
        assert abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) == pytest.approx(rho[k], rel=1e-5)


def test_kcca_rbf_learns_and_takes_kernel_pairs(data):
    X, Y, pairs, y, Xt, Yt, pt, yt = data
    m = KCCA(3, kernel=("rbf", "linear"), reg=0.1, preprocessor=(X, Y)).fit(pairs, y)
    assert m.kernel_map_x_.kernel == "rbf" and m.kernel_map_y_.kernel == "linear"
    assert np.all(np.diff(m.correlations_) <= 1e-12) and m.correlations_.max() <= 1 + 1e-9
    assert m.set_params(preprocessor=(Xt, Yt)).score(pt, yt) > 0.85
    with pytest.raises(ValueError, match="kernel"):
        KCCA(kernel=("rbf",), preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="kernel"):
        KCCA(kernel="poly", preprocessor=(X, Y)).fit(pairs, y)


def test_kcca_embedding_of_training_rows_is_consistent(data):
    X, Y, pairs, y, *_ = data
    m = KCCA(2, kernel="rbf", preprocessor=(X, Y), distance="euclidean").fit(pairs, y)
    pos = pairs[y == 1]
    # centred training kernel rows through the dual coefficients
    K = m.kernel_map_x_.train_kernel()
    Kc = K - K.mean(0)[None] - K.mean(1)[:, None] + K.mean()
    np.testing.assert_allclose(m.transform_x(X[pos[:, 0]]), Kc @ m.dual_coef_x_, atol=1e-8)


def naive_cdfe_objective(W, X, Y, pairs, y, alpha, beta, Rx, Ry, mx, my):
    dx = X.shape[1]
    U, V = W[:dx], W[dx:]
    f = (X[pairs[:, 0]] - mx) @ U - (Y[pairs[:, 1]] - my) @ V
    d = np.sum(f**2, axis=1)
    return (d[y == 1].mean() - alpha * d[y == -1].mean()
            + beta * (np.trace(U.T @ Rx @ U) + np.trace(V.T @ Ry @ V)))


def test_cdfe_minimises_its_objective_under_the_constraint(data):
    X, Y, pairs, y, Xt, Yt, pt, yt = data
    m = CDFE(2, alpha=0.5, beta=0.3, preprocessor=(X, Y)).fit(pairs, y)
    W = np.r_[m.components_x_.T, m.components_y_.T]
    Xu = X[np.unique(pairs[:, 0])] - m.mean_x_
    Yu = Y[np.unique(pairs[:, 1])] - m.mean_y_
    C = np.zeros((W.shape[0],) * 2)
    dx = X.shape[1]
    C[:dx, :dx] = Xu.T @ Xu / Xu.shape[0]
    C[dx:, dx:] = Yu.T @ Yu / Yu.shape[0]
    C += 1e-3 * np.trace(C) / C.shape[0] * np.eye(C.shape[0])
    np.testing.assert_allclose(W.T @ C @ W, np.eye(2), atol=1e-8)
    Rx = CDFE._local_scatter(Xu, 5)
    Ry = CDFE._local_scatter(Yu, 5)
    # naive local scatter
    from sklearn.neighbors import NearestNeighbors
    dist, idx = NearestNeighbors(n_neighbors=6).fit(Xu).kneighbors(Xu)
    Wg = np.zeros((Xu.shape[0],) * 2)
    s2 = np.mean(dist[:, 1:] ** 2)
    for i in range(Xu.shape[0]):
        for dd, j in zip(dist[i, 1:], idx[i, 1:], strict=True):
            Wg[i, j] = np.exp(-dd**2 / s2)
    Wg = np.maximum(Wg, Wg.T)
    naive = sum(Wg[i, j] * np.outer(Xu[i] - Xu[j], Xu[i] - Xu[j])
                for i in range(len(Xu)) for j in range(len(Xu)) if Wg[i, j]) / Wg.sum()
    np.testing.assert_allclose(Rx, naive, atol=1e-10)
    obj = naive_cdfe_objective(W, X, Y, pairs, y, 0.5, 0.3, Rx, Ry, m.mean_x_, m.mean_y_)
    assert obj == pytest.approx(m.eigenvalues_.sum(), rel=1e-6)
    # any other feasible W (C-orthonormal) is no better
    rng = np.random.RandomState(0)
    Lc = np.linalg.cholesky(C)
    for _ in range(20):
        Q = np.linalg.qr(rng.randn(W.shape[0], 2))[0]
        W2 = np.linalg.solve(Lc.T, Q)
        assert naive_cdfe_objective(W2, X, Y, pairs, y, 0.5, 0.3, Rx, Ry, m.mean_x_,
                                    m.mean_y_) >= obj - 1e-9
    assert m.set_params(preprocessor=(Xt, Yt)).score(pt, yt) > 0.8


def test_cdfe_large_ridge_drops_the_whitening(data):
    """The docstring's claim: as ``reg`` grows, ``W`` tends to a scaled orthonormal basis."""
    X, Y, pairs, y, *_ = data
    m = CDFE(2, alpha=0.5, beta=0.3, reg=1e8, preprocessor=(X, Y)).fit(pairs, y)
    W = np.r_[m.components_x_.T, m.components_y_.T]
    G = W.T @ W
    np.testing.assert_allclose(G / G[0, 0], np.eye(2), atol=1e-6)
    small = CDFE(2, alpha=0.5, beta=0.3, preprocessor=(X, Y)).fit(pairs, y)
    W = np.r_[small.components_x_.T, small.components_y_.T]
    G = W.T @ W
    assert np.abs(G / G[0, 0] - np.eye(2)).max() > 1e-3  # the default still whitens


def test_kissme_is_psd_and_matches_formula():
    X, _, lab = cross_modal_data(seed=5, dx=5)
    pairs, y = make_pairs(lab, n_negatives=2, max_positives=300, random_state=0)
    m = KISSME(reg=0.0, preprocessor=X).fit(pairs, y)
    M = m.get_mahalanobis_matrix()
    assert np.linalg.eigvalsh(M).min() >= -1e-10
    diff = X[pairs[:, 0]] - X[pairs[:, 1]]
    Ss = diff[y == 1].T @ diff[y == 1] / (y == 1).sum()
    Sd = diff[y == -1].T @ diff[y == -1] / (y == -1).sum()
    Mraw = np.linalg.inv(Ss) - np.linalg.inv(Sd)
    w, U = np.linalg.eigh(Mraw)
    assert w.min() < 0   # the projection does something here
    np.testing.assert_allclose(M, (U * np.clip(w, 0, None)) @ U.T, atol=1e-8)
    assert m.score(pairs, y) > 0.85


def test_kissme_pca_low_rank_and_cross_modal_equal_dims():
    X, Y, lab = cross_modal_data(seed=6, dx=6, dy=6)
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=200, random_state=0)
    m = KISSME(n_components=2, pca_components=4, preprocessor=(X, Y)).fit(pairs, y)
    assert m.components_.shape == (2, 6)
    assert np.linalg.eigvalsh(m.get_mahalanobis_matrix()).min() >= -1e-10
    np.testing.assert_allclose(m.transform_x(X), m.transform_y(X))
    with pytest.raises(ValueError, match="pca_components"):
        KISSME(pca_components=50, preprocessor=(X, Y)).fit(pairs, y)


@pytest.mark.parametrize("Model", [CCA, PLS, KCCA, CDFE])
def test_cross_modal_baselines_api(Model, data):
    X, Y, pairs, y, *_ = data
    m = Model(2, preprocessor=(X, Y))
    with pytest.raises(NotFittedError):
        m.transform_x(X)
    m.fit(pairs, y)
    assert m.transform_x(X).shape == (X.shape[0], 2)
    assert m.transform_y(Y).shape == (Y.shape[0], 2)
    np.testing.assert_allclose(
        m.cross_distance(X[:7], Y[:9])[np.arange(7), np.arange(7)],
        m.pair_distance((X[:7], Y[:7])), atol=1e-10)
    with pytest.raises(ValueError, match="features"):
        m.transform_x(Y)
    with pytest.raises(ValueError, match="n_components"):
        clone(m).set_params(n_components=500).fit(pairs, y)
    scores = cross_val_score(clone(m), pairs, y, cv=3)
    assert np.all(scores > 0.6)


@pytest.mark.parametrize("Model", [CCA, PLS, KCCA, CDFE])
def test_bad_distance_raises(Model, data):
    X, Y, pairs, y, *_ = data
    with pytest.raises(ValueError, match="distance"):
        Model(2, distance="manhattan", preprocessor=(X, Y)).fit(pairs, y)


def test_euclidean_unchanged():
    X, _, lab = cross_modal_data(seed=7)
    pairs, y = make_pairs(lab, n_negatives=1, random_state=0)
    m = Euclidean(preprocessor=X).fit(pairs, y)
    d = np.sum((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2, axis=1)
    np.testing.assert_allclose(m.pair_distance(pairs), d)
