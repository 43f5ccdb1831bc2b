"""The papers' remaining baselines: regularised CCA, kernel PLS / CDFE, MvDA, CSR / KCSR, DML-eig.

Each is checked against a slow, obvious computation or a known special case.
"""

import warnings

import numpy as np
import pytest
from sklearn.cross_decomposition import CCA as SkCCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge

from crossmetric import CCA, CDFE, CSR, KCDFE, KCSR, KPLS, PLS, DMLEig, MvDA
from crossmetric._solvers.linalg import cca_directions
from crossmetric.kernels import KernelCoordinates, pairwise_kernel
from crossmetric.learners.discriminant import identity_samples, spectral_responses
from crossmetric.learners.dml_eig import project_spectrahedron, smoothed_min_objective
from crossmetric.learners.multiview import mvda_scatter_matrices
from crossmetric.pairs import identities_from_pairs, make_pairs
from crossmetric.protocols import CCAProjection


@pytest.fixture(scope="module")
def views():
    rng = np.random.RandomState(3)
    labels = np.repeat(np.arange(8), 6)
    Z = rng.randn(8, 3)[labels] + 0.3 * rng.randn(48, 3)
    X = Z @ rng.randn(3, 7) + 0.1 * rng.randn(48, 7)
    Y = Z @ rng.randn(3, 5) + 0.1 * rng.randn(48, 5)
    pairs, y = make_pairs(labels, labels, n_negatives=2, random_state=0)
    return X, Y, labels, pairs, y


# ------------------------------------------------------------------ CCA
def test_closed_form_cca_matches_scikit_learn_correlations(views):
    X, Y, *_ = views
    A, B, corr = cca_directions(X - X.mean(0), Y - Y.mean(0), 3, reg=0.0)
    sk = SkCCA(n_components=3, scale=False, max_iter=5000, tol=1e-12).fit(X, Y)
    u, v = sk.transform(X, Y)
    sk_corr = [abs(np.corrcoef(u[:, c], v[:, c])[0, 1]) for c in range(3)]
    np.testing.assert_allclose(corr, sk_corr, rtol=1e-4)
    ours = [np.corrcoef((X - X.mean(0)) @ A[:, c], (Y - Y.mean(0)) @ B[:, c])[0, 1]
            for c in range(3)]
    np.testing.assert_allclose(ours, corr, rtol=1e-8)


def test_cca_class_and_protocol_projection_share_one_closed_form(views):
    X, Y, labels, pairs, y = views
    model = CCA(3, reg=1e-2, scale=False, distance="euclidean", preprocessor=(X, Y)).fit(pairs, y)
    pos = pairs[y == 1]
    proj = CCAProjection(3, reg=1e-2).fit(X[pos[:, 0]], Y[pos[:, 1]])
    np.testing.assert_allclose(model.transform_x(X), proj.transform(X, Y)[0], atol=1e-10)
    np.testing.assert_allclose(model.transform_y(Y), proj.transform(X, Y)[1], atol=1e-10)


def test_cca_nipals_solver_is_scikit_learn(views):
    X, Y, labels, pairs, y = views
    model = CCA(2, solver="nipals", preprocessor=(X, Y)).fit(pairs, y)
    assert model.estimator_.__class__ is SkCCA
    with pytest.raises(ValueError, match="solver"):
        CCA(2, solver="svd", preprocessor=(X, Y)).fit(pairs, y)


def test_regularisation_shrinks_canonical_correlations(views):
    X, Y, *_ = views
    c0 = cca_directions(X - X.mean(0), Y - Y.mean(0), 3, reg=0.0)[2]
    c1 = cca_directions(X - X.mean(0), Y - Y.mean(0), 3, reg=1.0)[2]
    assert np.all(c1 < c0)


# ------------------------------------------------------------------ kernel coordinates
def test_kernel_coordinates_reproduce_the_centred_kernel(views):
    X = np.abs(views[0])
    kc = KernelCoordinates("chi2_rbf", gamma=0.5).fit(X)
    Zc = kc.transform(X)
    K = pairwise_kernel(X, kernel="chi2_rbf", gamma=0.5)
    H = np.eye(len(X)) - 1.0 / len(X)
    np.testing.assert_allclose(Zc @ Zc.T, H @ K @ H, atol=1e-8)
    # a new sample: its coordinates are the projection of its centred feature vector, so
    # its inner products with the training samples equal the centred kernel values
    Xn = np.abs(views[1][:5, :X.shape[1]]) if views[1].shape[1] >= X.shape[1] else X[:5] * 1.1
    Kn = pairwise_kernel(Xn, X, kernel="chi2_rbf", gamma=0.5)
    Kn_c = Kn - K.mean(0)[None, :] - Kn.mean(1, keepdims=True) + K.mean()
    np.testing.assert_allclose(kc.transform(Xn) @ Zc.T, Kn_c @ H, atol=1e-8)


@pytest.mark.parametrize("linear, kernel", [
    (PLS(2, scale=False, distance="euclidean", tol=1e-12, max_iter=5000),
     KPLS(2, kernel="linear", distance="euclidean", tol=1e-12, max_iter=5000)),
    (CDFE(2), KCDFE(2, kernel="linear", reg=1e-3)),
    (CSR(), KCSR(kernel="linear", alpha=1e-2)),
])
def test_kernel_version_with_linear_kernel_is_the_linear_method(views, linear, kernel):
    X, Y, labels, pairs, y = views
    a = linear.set_params(preprocessor=(X, Y)).fit(pairs, y)
    b = kernel.set_params(preprocessor=(X, Y)).fit(pairs, y)
    np.testing.assert_allclose(a.cross_distance(X, Y), b.cross_distance(X, Y), rtol=1e-4,
                               atol=1e-8)


def test_kernel_baselines_beat_linear_on_a_nonlinear_problem():
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(10), 6)
    T = rng.rand(10) * 2 * np.pi
    t = T[labels] + 0.05 * rng.randn(60)
    X = np.c_[np.cos(t), np.sin(t)] + 0.02 * rng.randn(60, 2)
    Y = np.c_[np.cos(2 * t), np.sin(2 * t), t * 0] + 0.02 * rng.randn(60, 3)
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    lin = CDFE(2, preprocessor=(X, Y)).fit(pairs, y).score(pairs, y)
    ker = KCDFE(2, kernel="rbf", preprocessor=(X, Y)).fit(pairs, y).score(pairs, y)
    assert ker > lin + 0.05


# ------------------------------------------------------------------ MvDA
def test_identities_from_pairs_in_pairs_module():
    ix, iy = np.array([0, 1, 2, 2]), np.array([0, 0, 1, 2])
    ids_x, ids_y, conflicts = identities_from_pairs(3, 3, ix, iy, np.array([1, 1, 1, -1]))
    assert ids_x[0] == ids_x[1] == ids_y[0] and ids_x[2] == ids_y[1] != ids_x[0]
    assert conflicts == 0


def test_mvda_scatter_matrices_equal_projected_scatter(views):
    X, Y, labels, pairs, y = views
    rng = np.random.RandomState(1)
    cx, cy = labels[:40], labels[8:]
    Xs, Ys = X[:40], Y[8:]
    S, D = mvda_scatter_matrices([Xs, Ys], [cx, cy])
    W = rng.randn(X.shape[1] + Y.shape[1], 2)
    P = np.vstack([Xs @ W[:7], Ys @ W[7:]])
    c = np.r_[cx, cy]
    mu = P.mean(0)
    Sw = np.zeros((2, 2))
    Sb = np.zeros((2, 2))
    for k in np.unique(c):
        Pk = P[c == k]
        mk = Pk.mean(0)
        Sw += (Pk - mk).T @ (Pk - mk)
        Sb += len(Pk) * np.outer(mk - mu, mk - mu)
    np.testing.assert_allclose(W.T @ S @ W, Sw, atol=1e-8)
    np.testing.assert_allclose(W.T @ D @ W, Sb, atol=1e-8)


def test_mvda_separates_identities(views):
    X, Y, labels, pairs, y = views
    model = MvDA(3, preprocessor=(X, Y)).fit(pairs, y)
    assert model.n_identities_ == 8
    assert model.score(pairs, y) > 0.95
    assert np.all(np.diff(model.eigenvalues_) <= 1e-12)


# ------------------------------------------------------------------ CSR
def test_spectral_responses_are_orthonormal_class_constant():
    codes = np.array([0, 0, 1, 1, 1, 2, 0, 2])
    R = spectral_responses(codes)
    assert R.shape == (8, 2)
    np.testing.assert_allclose(R.T @ R / 8, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(R.sum(0), 0, atol=1e-12)
    for k in range(3):
        assert np.ptp(R[codes == k], axis=0).max() < 1e-12


def test_csr_without_coupling_is_two_ridge_regressions(views):
    X, Y, labels, pairs, y = views
    model = CSR(7, alpha=0.1, coupling=0.0, distance="euclidean",
                preprocessor=(X, Y)).fit(pairs, y)
    data = model._validate_pairs((pairs, y)[0], fitted=False) if False else None
    from crossmetric.pairs._pair_data import PairData, canonical_pairs
    # fit sees the samples in the base's canonical order (distinct rows, sorted by content)
    Xu, Yu, cx, cy, _, _ = identity_samples(
        canonical_pairs(PairData(X, Y, pairs[:, 0], pairs[:, 1]), tied=False), y)
    R = spectral_responses(np.r_[cx, cy])
    lam = 0.1 * (np.sum((Xu - Xu.mean(0)) ** 2) + np.sum((Yu - Yu.mean(0)) ** 2)) / 12
    rx = Ridge(alpha=lam, fit_intercept=True).fit(Xu, R[:len(cx)])
    ry = Ridge(alpha=lam, fit_intercept=True).fit(Yu, R[len(cx):])
    np.testing.assert_allclose(model.components_x_, rx.coef_, atol=1e-8)
    np.testing.assert_allclose(model.components_y_, ry.coef_, atol=1e-8)
    assert data is None


def test_coupling_pulls_positive_pairs_together(views):
    X, Y, labels, pairs, y = views
    pos = y == 1

    def pos_gap(mu):
        m = CSR(7, coupling=mu, distance="euclidean", preprocessor=(X, Y)).fit(pairs, y)
        return np.mean(m.pair_distance(pairs[pos])) / np.mean(m.pair_distance(pairs[~pos]))

    assert pos_gap(10.0) < pos_gap(0.0)


# ------------------------------------------------------------------ DML-eig
def test_dml_eig_gradient_matches_finite_differences():
    rng = np.random.RandomState(0)
    Dt = rng.randn(30, 4)
    P = project_spectrahedron(rng.randn(4, 4))
    f, G = smoothed_min_objective(P, Dt, 0.3)
    E = rng.randn(4, 4)
    E = (E + E.T) / 2
    h = 1e-6
    fd = (smoothed_min_objective(P + h * E, Dt, 0.3)[0]
          - smoothed_min_objective(P - h * E, Dt, 0.3)[0]) / (2 * h)
    assert fd == pytest.approx(np.sum(G * E), rel=1e-6)


def test_spectrahedron_projection_is_the_nearest_feasible_point():
    rng = np.random.RandomState(1)
    A = rng.randn(5, 5)
    A = (A + A.T) / 2
    P = project_spectrahedron(A)
    assert np.trace(P) == pytest.approx(1.0)
    assert np.linalg.eigvalsh(P).min() > -1e-12
    for _ in range(200):               # no random feasible point is closer
        Q = project_spectrahedron(rng.randn(5, 5)) * 0 + np.diag(rng.dirichlet(np.ones(5)))
        V = np.linalg.qr(rng.randn(5, 5))[0]
        Q = V @ Q @ V.T
        assert np.linalg.norm(A - P) <= np.linalg.norm(A - Q) + 1e-12


def test_dml_eig_solvers_reach_the_same_optimum(views):
    """The accelerated solver's result is certified optimal by the Frank-Wolfe duality gap
    (an upper bound on the suboptimality of a concave objective), and the paper's Frank-Wolfe
    iteration approaches the same value from below."""
    X, _, labels, _, _ = views
    pairs, y = make_pairs(labels, n_negatives=2, random_state=0)
    acc = DMLEig(tol=1e-8, max_iter=5000, preprocessor=X[:, :4]).fit(pairs, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fw = DMLEig(solver="frank_wolfe", tol=1e-8, max_iter=300,
                    preprocessor=X[:, :4]).fit(pairs, y)
    f_acc, f_fw = -acc.loss_curve_[-1], -fw.loss_curve_[-1]
    assert f_fw <= f_acc + 1e-10
    assert f_fw == pytest.approx(f_acc, rel=1e-2)
    assert acc.n_iter_ < 300
    assert np.all(np.diff(fw.loss_curve_) <= 1e-12)        # FW with line search: monotone


def test_dml_eig_constraint_is_active(views):
    X, _, labels, _, _ = views
    pairs, y = make_pairs(labels, n_negatives=2, random_state=0)
    m = DMLEig(reg=1e-9, preprocessor=X).fit(pairs, y)
    d_pos = m.pair_distance(pairs[y == 1])
    assert d_pos.mean() == pytest.approx(1.0, rel=1e-5)     # ⟨X_S, M⟩ = tr P = 1
    assert m.score(pairs, y) > 0.9
