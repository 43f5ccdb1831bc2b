"""Tests of crossmetric.learners.auc: CMLAUC / MahaAUC (Huo et al., TNNLS 2018)."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score
from sklearn.utils.extmath import svd_flip

from crossmetric.learners.auc import (
    CMLAUC,
    MahaAUC,
    hinge_coefficients,
    pair_quadratic_forms,
    pauc_window,
    pauc_window_bounds,
    phi_plus,
    prox_logdet,
    weighted_pair_outer_sum,
)
from crossmetric.pairs import make_pairs


# ----------------------------------------------------------------------------- data
def cross_modal_data(n=120, dx=6, dy=4, n_classes=5, noise=0.6, seed=0):
    rng = np.random.RandomState(seed)
    labels = rng.randint(n_classes, size=n)
    centers = rng.randn(n_classes, 3) * 2.0
    H = centers[labels] + noise * rng.randn(n, 3)
    A, B = rng.randn(3, dx), rng.randn(3, dy)
    X = H @ A + 0.3 * rng.randn(n, dx) + 5.0
    Y = -H @ B + 0.3 * rng.randn(n, dy) - 2.0
    return X, Y, labels


def random_sym(d, rng):
    A = rng.randn(d, d)
    return (A + A.T) / 2


# ----------------------------------------------------------------------------- eq. (4)
def brute_force_window(d, alpha, beta):
    """Positions ranked j_α..j_β in ascending order, with exact rational arithmetic."""
    n = d.size
    a, b = Fraction(alpha).limit_denominator(10**6), Fraction(beta).limit_denominator(10**6)
    j_alpha = math.ceil(n * a) + 1
    j_beta = math.floor(n * b)
    order = sorted(range(n), key=lambda k: d[k])
    return np.array([order[r - 1] for r in range(j_alpha, j_beta + 1)])


@pytest.mark.parametrize("alpha,beta", [(0.0, 1.0), (0.0, 0.1), (0.05, 0.3), (0.1, 0.5),
                                        (0.25, 0.75), (0.9, 1.0), (1 / 3, 2 / 3)])
@pytest.mark.parametrize("n", [10, 37, 100, 1000])
def test_pauc_window_equals_brute_force(alpha, beta, n):
    rng = np.random.RandomState(n)
    d = rng.rand(n)
    a, b = Fraction(alpha).limit_denominator(10**6), Fraction(beta).limit_denominator(10**6)
    if n * (b - a) < 1 or math.ceil(n * a) + 1 > math.floor(n * b):
        with pytest.raises(ValueError, match="batch_size_neg"):
            pauc_window(d, (alpha, beta))
        return
    got = pauc_window(d, (alpha, beta))
    np.testing.assert_array_equal(got, brute_force_window(d, alpha, beta))


def test_pauc_window_full_auc_selects_all():
    d = np.random.RandomState(0).rand(50)
    assert sorted(pauc_window(d, (0.0, 1.0)).tolist()) == list(range(50))
    assert pauc_window_bounds(50, (0, 1)) == (1, 50)


def test_pauc_window_float_products_are_exact():
    # 1000 * 0.1 is 100.00000000000001 in floating point; j_alpha must still be 101
    assert pauc_window_bounds(1000, (0.1, 0.2)) == (101, 200)
    assert pauc_window_bounds(10, (0.0, 0.1)) == (1, 1)


@pytest.mark.parametrize("n,rng_", [(5, (0.0, 0.1)), (9, (0.0, 0.1)), (3, (0.5, 0.7))])
def test_pauc_window_too_few_negatives_raises(n, rng_):
    with pytest.raises(ValueError, match=r"\|D\|·\(beta − alpha\)"):
        pauc_window(np.arange(n, dtype=float), rng_)


def test_pauc_window_empty_window_raises():
    # |D|(β − α) = 1 but the window [ceil(0.5)+1, floor(1.5)] = [2, 1] is empty
    with pytest.raises(ValueError, match="empty"):
        pauc_window_bounds(10, (0.05, 0.15))


@pytest.mark.parametrize("bad", [(0.2, 0.1), (-0.1, 0.5), (0.0, 1.5), (0.1,), "ab",
                                 (0.0, np.nan), (True, 1.0)])
def test_fpr_range_validation(bad):
    with pytest.raises(ValueError, match="fpr_range"):
        pauc_window_bounds(100, bad)


# ----------------------------------------------------------------------------- eq. (8), (5)
def test_hinge_coefficients_match_index_matrix():
    rng = np.random.RandomState(1)
    d_pos = rng.rand(13) * 3
    d_neg = rng.rand(29) * 3 + 0.5
    J = (1 + d_pos[:, None] > d_neg[None, :]).astype(float)
    rows, cols, loss = hinge_coefficients(d_pos, d_neg)
    np.testing.assert_array_equal(rows, J.sum(1))
    np.testing.assert_array_equal(cols, J.sum(0))
    naive = np.maximum(0, 1 + d_pos[:, None] - d_neg[None, :]).sum() / J.size
    assert loss == pytest.approx(naive, rel=1e-12)


# ----------------------------------------------------------------------------- eq. (20)-(22)
@pytest.mark.parametrize("cross", [True, False])
def test_weighted_pair_outer_sum_equals_naive(cross):
    rng = np.random.RandomState(2)
    X, Y = rng.randn(9, 4), rng.randn(7, 3 if cross else 4)
    ix, iy = rng.randint(9, size=25), rng.randint(7, size=25)
    w = rng.randn(25)
    naive = 0
    for p in range(25):
        z = np.r_[X[ix[p]], -Y[iy[p]]] if cross else X[ix[p]] - Y[iy[p]]
        naive = naive + w[p] * np.outer(z, z)
    got = weighted_pair_outer_sum(X, Y, ix, iy, w, cross=cross)
    np.testing.assert_allclose(got, naive, atol=1e-12)


@pytest.mark.parametrize("cross", [True, False])
def test_P_A_equals_naive_tetrad_sum(cross):
    """P_A via eq. (20)-(22) equals Σ_S Σ_D J (z zᵀ − z' z'ᵀ) / (|S| |D|) (eq. 10)."""
    rng = np.random.RandomState(3)
    X, Y = rng.randn(8, 3), rng.randn(6, 2 if cross else 3)
    d = 5 if cross else 3
    Lm = rng.randn(d, d)
    M = Lm @ Lm.T / d

    def z(i, j):
        return np.r_[X[i], -Y[j]] if cross else X[i] - Y[j]

    S = [(0, 1), (2, 2), (3, 0), (5, 5), (7, 3)]
    Dn = [(0, 2), (1, 3), (4, 4), (6, 0), (7, 1), (2, 5), (3, 3)]
    Ds = np.array([z(i, j) @ M @ z(i, j) for i, j in S])
    Dd = np.array([z(k, l) @ M @ z(k, l) for k, l in Dn])
    naive = np.zeros((d, d))
    for (p, (i, j)), (q, (k, l)) in itertools.product(enumerate(S), enumerate(Dn)):
        if 1 + Ds[p] > Dd[q]:
            naive += np.outer(z(i, j), z(i, j)) - np.outer(z(k, l), z(k, l))
    naive /= len(S) * len(Dn)
    rows, cols, _ = hinge_coefficients(Ds, Dd)
    assert 0 < rows.sum() < len(S) * len(Dn)  # both branches of J are exercised
    s = 1.0 / (len(S) * len(Dn))
    ix = np.array([i for i, _ in S] + [k for k, _ in Dn])
    iy = np.array([j for _, j in S] + [l for _, l in Dn])
    got = weighted_pair_outer_sum(X, Y, ix, iy, np.r_[rows * s, -cols * s], cross=cross)
    np.testing.assert_allclose(got, naive, atol=1e-12)


@pytest.mark.parametrize("cross", [True, False])
def test_pair_quadratic_forms_equal_naive(cross):
    rng = np.random.RandomState(20)
    X, Y = rng.randn(9, 4), rng.randn(7, 3 if cross else 4)
    d = 7 if cross else 4
    Lm = rng.randn(d, d)
    M = Lm @ Lm.T
    ix, iy = rng.randint(9, size=30), rng.randint(7, size=30)
    Z = (np.concatenate([X[ix], -Y[iy]], axis=1) if cross else X[ix] - Y[iy])
    naive = np.array([z @ M @ z for z in Z])
    np.testing.assert_allclose(pair_quadratic_forms(M, X, Y, ix, iy, cross=cross), naive,
                               rtol=1e-10)


# ----------------------------------------------------------------------------- Lemmas 1-3
def test_phi_plus_scalar_is_stable():
    lam = 1e-6
    v = np.array([-1e8, -1e3, -1.0, 0.0, 1.0, 1e3, 1e150])
    got = phi_plus(v, lam)
    assert np.all(got > 0) and np.all(np.isfinite(got))
    # for v << 0, φ⁺(v) ≈ λ / |v|
    assert got[0] == pytest.approx(lam / 1e8, rel=1e-9)
    assert got[3] == pytest.approx(np.sqrt(lam))
    assert got[-1] == pytest.approx(1e150)
    # φ⁺(v) − λ / φ⁺(v) = v (Lemma 1 on scalars)
    mid = v[1:-1]
    np.testing.assert_allclose(got[1:-1] - lam / got[1:-1], mid, atol=1e-9)


@pytest.mark.parametrize("lam", [1e-6, 1e-2, 3.0])
def test_prox_logdet_is_pd_and_solves_lemma_2(lam):
    rng = np.random.RandomState(4)
    X = random_sym(7, rng) * 3
    Yp = prox_logdet(X, lam)
    np.testing.assert_allclose(Yp, Yp.T, atol=1e-12)
    assert np.linalg.eigvalsh(Yp).min() > 0
    np.testing.assert_allclose(Yp - lam * np.linalg.inv(Yp), X, atol=1e-8 * max(1, 1 / lam))
    # X1 − X2 = X and X1 X2 = λ I (Lemma 1)
    v, U = np.linalg.eigh(X)
    X2 = (U * ((np.sqrt(v**2 + 4 * lam) - v) / 2)) @ U.T
    np.testing.assert_allclose(Yp - X2, X, atol=1e-10)
    np.testing.assert_allclose(Yp @ X2, lam * np.eye(7), atol=1e-8)


def _minimise_over_pd(f, d, x0):
    """Minimise f(Y) over PD Y = L Lᵀ (L lower triangular) with BFGS."""
    tril = np.tril_indices(d)

    def unpack(theta):
        L = np.zeros((d, d))
        L[tril] = theta
        return L @ L.T

    theta0 = np.linalg.cholesky(x0)[tril]
    res = minimize(lambda t: f(unpack(t)), theta0, method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 10000})
    return unpack(res.x), res.fun


def test_prox_matches_numerical_minimiser_lemma_2():
    rng = np.random.RandomState(5)
    d, eta, mu = 3, 0.4, 0.5
    X = random_sym(d, rng)

    def f(Y):
        sign, logdet = np.linalg.slogdet(Y)
        if sign <= 0:
            return np.inf
        return np.sum((Y - X) ** 2) / (2 * eta) - mu * logdet

    Yp = prox_logdet(X, eta * mu)
    Ynum, fnum = _minimise_over_pd(f, d, np.eye(d))
    assert f(Yp) <= fnum + 1e-9
    np.testing.assert_allclose(Yp, Ynum, atol=1e-4)
    # eq. (16): the optimal value
    X2 = Yp - X
    assert f(Yp) == pytest.approx(np.sum(X2**2) / (2 * eta) - mu * np.linalg.slogdet(Yp)[1])


def test_one_ppa_step_solves_proximal_problem_lemma_3():
    """M_{t+1} of eq. (14) minimises F_t(M) + ‖M − M_t‖² / (2η) (eq. 13)."""
    rng = np.random.RandomState(6)
    d, eta, mu, gamma = 3, 0.3, 0.2, 0.7
    Lm = rng.randn(d, d)
    Mt = Lm @ Lm.T + 0.1 * np.eye(d)
    PA, PS = random_sym(d, rng), random_sym(d, rng)

    def obj(M):
        sign, logdet = np.linalg.slogdet(M)
        if sign <= 0:
            return np.inf
        Ft = np.sum(PA * M) + gamma * np.sum(PS * M) + mu * (np.trace(M) - logdet)
        return Ft + np.sum((M - Mt) ** 2) / (2 * eta)

    Mnext = prox_logdet(Mt - eta * (PA + gamma * PS + mu * np.eye(d)), eta * mu)
    Mnum, fnum = _minimise_over_pd(obj, d, Mt)
    assert obj(Mnext) <= fnum + 1e-9
    np.testing.assert_allclose(Mnext, Mnum, atol=1e-4)


# ----------------------------------------------------------------------------- objective
def naive_objective(M, X, Y, S, Dn, gamma, mu, cross=True):
    def z(i, j):
        return np.r_[X[i], -Y[j]] if cross else X[i] - Y[j]

    Ds = np.array([z(i, j) @ M @ z(i, j) for i, j in S])
    Dd = np.array([z(k, l) @ M @ z(k, l) for k, l in Dn])
    hinge = np.maximum(0, 1 + Ds[:, None] - Dd[None, :]).mean()
    return hinge + gamma * Ds.mean() + mu * (np.trace(M) - np.linalg.slogdet(M)[1])


@pytest.mark.parametrize("cross", [True, False])
def test_subgradient_matches_finite_differences(cross):
    """∇F = P_A + γ P_S + μ (I − M⁻¹) (eq. 9-12) against central differences of eq. (6)."""
    rng = np.random.RandomState(7)
    X, Y = rng.randn(10, 3), rng.randn(10, 2 if cross else 3)
    d = 5 if cross else 3
    S = [(i, i) for i in range(5)]
    Dn = [(i, (i + 3) % 10) for i in range(10)]
    Lm = rng.randn(d, d)
    M = Lm @ Lm.T / d + 0.2 * np.eye(d)
    gamma, mu = 0.8, 0.3

    def z(i, j):
        return np.r_[X[i], -Y[j]] if cross else X[i] - Y[j]

    Ds = np.array([z(i, j) @ M @ z(i, j) for i, j in S])
    Dd = np.array([z(k, l) @ M @ z(k, l) for k, l in Dn])
    rows, cols, _ = hinge_coefficients(Ds, Dd)
    s = 1.0 / (len(S) * len(Dn))
    ix = np.array([i for i, _ in S] + [k for k, _ in Dn])
    iy = np.array([j for _, j in S] + [l for _, l in Dn])
    PA = weighted_pair_outer_sum(X, Y, ix, iy, np.r_[rows * s, -cols * s], cross=cross)
    PS = weighted_pair_outer_sum(X, Y, ix[:5], iy[:5], np.full(5, 0.2), cross=cross)
    grad = PA + gamma * PS + mu * (np.eye(d) - np.linalg.inv(M))
    for _ in range(4):
        E = random_sym(d, rng)
        h = 1e-6
        fd = (naive_objective(M + h * E, X, Y, S, Dn, gamma, mu, cross)
              - naive_objective(M - h * E, X, Y, S, Dn, gamma, mu, cross)) / (2 * h)
        assert fd == pytest.approx(np.sum(grad * E), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("Model", [CMLAUC, MahaAUC])
def test_first_iteration_is_algorithm_1(Model):
    """loss_curve_[0] is eq. (6) at M₀ and M_ after one step is eq. (14) with naive P_A."""
    cross = Model is CMLAUC
    X, Y, lab = cross_modal_data(n=30, dx=4, dy=3 if cross else 4, seed=8)
    pairs, y = make_pairs(lab, lab, n_negatives=2, random_state=0)
    gamma, mu, eta0 = 0.5, 0.05, 0.05
    m = Model(max_iter=1, gamma=gamma, mu=mu, eta0=eta0, standardize=False,
              preprocessor=(X, Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    S = [tuple(p) for p in pairs[y == 1]]
    Dn = [tuple(p) for p in pairs[y == -1]]
    def z(i, j):
        return np.r_[X[i], -Y[j]] if cross else X[i] - Y[j]

    # M₀ as documented: PCA initialisation passed through φ⁺_{η₀μ}
    if cross:
        k = min(X.shape[1], Y.shape[1])
        Xu, Yu = X[np.unique(pairs[:, 0])], Y[np.unique(pairs[:, 1])]
        Vx, Vy = (svd_flip(*np.linalg.svd(A - A.mean(0), full_matrices=False)[::2],
                           u_based_decision=False)[1][:k] for A in (Xu, Yu))
        W0 = np.concatenate([Vx.T, Vy.T])
        M0 = W0 @ W0.T
    else:
        M0 = np.eye(X.shape[1])
    # scaled to mean training distance 1, then through the log-det prox
    Z = [z(i, j) for i, j in pairs]
    M0 = prox_logdet(M0 / np.mean([v @ M0 @ v for v in Z]), eta0 * mu)
    assert m.loss_curve_[0] == pytest.approx(
        naive_objective(M0, X, Y, S, Dn, gamma, mu, cross), rel=1e-9)

    Ds = np.array([z(i, j) @ M0 @ z(i, j) for i, j in S])
    Dd = np.array([z(k, l) @ M0 @ z(k, l) for k, l in Dn])
    d = M0.shape[0]
    PA = np.zeros((d, d))
    for (p, (i, j)), (q, (k, l)) in itertools.product(enumerate(S), enumerate(Dn)):
        if 1 + Ds[p] > Dd[q]:
            PA += np.outer(z(i, j), z(i, j)) - np.outer(z(k, l), z(k, l))
    PA /= len(S) * len(Dn)
    PS = sum(np.outer(z(i, j), z(i, j)) for i, j in S) / len(S)
    M1 = prox_logdet(M0 - eta0 * (PA + gamma * PS + mu * np.eye(d)), eta0 * mu)
    F1 = naive_objective(M1, X, Y, S, Dn, gamma, mu, cross)
    assert m.loss_curve_[1] == pytest.approx(F1, rel=1e-9)
    assert F1 < m.loss_curve_[0]          # so the kept (best) iterate is M₁
    np.testing.assert_allclose(m.M_, M1, atol=1e-10)


# ----------------------------------------------------------------------------- learners
@pytest.fixture(scope="module")
def fitted_cml():
    X, Y, lab = (a[:120] for a in cross_modal_data(seed=9, n=240))
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=300, random_state=0)
    m = CMLAUC(max_iter=200, random_state=0, preprocessor=(X, Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    return m, X, Y, lab, pairs, y


def test_factors_reproduce_zMz(fitted_cml):
    m, X, Y, _, pairs, _ = fitted_cml
    Xs = (X - m.mean_x_) @ m.whitening_x_
    Ys = (Y - m.mean_y_) @ m.whitening_y_
    Z = np.concatenate([Xs[pairs[:, 0]], -Ys[pairs[:, 1]]], axis=1)
    zMz = np.einsum("ij,jk,ik->i", Z, m.M_, Z)
    np.testing.assert_allclose(m.pair_distance(pairs), zMz, rtol=1e-9, atol=1e-9)
    full = m.cross_distance(X[:15], Y[:11])
    Zall = np.concatenate([np.repeat(Xs[:15], 11, 0), -np.tile(Ys[:11], (15, 1))], axis=1)
    np.testing.assert_allclose(full.ravel(), np.einsum("ij,jk,ik->i", Zall, m.M_, Zall),
                               rtol=1e-8, atol=1e-8)
    assert m.transform_x(X).shape == (X.shape[0], X.shape[1] + Y.shape[1])


def test_truncated_factors_use_top_eigenpairs(fitted_cml):
    m, X, Y, _, pairs, y = fitted_cml
    m2 = clone(m).set_params(n_components=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m2.fit(pairs, y)
    np.testing.assert_allclose(m2.M_, m.M_)  # n_components does not change learning
    w, U = np.linalg.eigh(m.M_)
    Mk = (U[:, -3:] * w[-3:]) @ U[:, -3:].T
    Xs = (X - m.mean_x_) @ m.whitening_x_
    Ys = (Y - m.mean_y_) @ m.whitening_y_
    Z = np.concatenate([Xs[pairs[:, 0]], -Ys[pairs[:, 1]]], axis=1)
    np.testing.assert_allclose(m2.pair_distance(pairs), np.einsum("ij,jk,ik->i", Z, Mk, Z),
                               rtol=1e-7, atol=1e-9)
    assert m2.transform_y(Y).shape == (Y.shape[0], 3)
    assert np.all(np.diff(m2.eigenvalues_) <= 0)


def test_cmlauc_learns_and_generalises(fitted_cml):
    m, X, Y, lab, pairs, y = fitted_cml
    X2, Y2, lab2 = cross_modal_data(seed=9, n=240)
    Xt, Yt, labt = X2[120:], Y2[120:], lab2[120:]
    pt, yt = make_pairs(labt, labt, n_negatives=2, max_positives=300, random_state=1)
    auc = m.set_params(preprocessor=(Xt, Yt)).score(pt, yt)
    m.set_params(preprocessor=(X, Y))
    assert auc > 0.9
    assert m.loss_curve_[-1] < m.loss_curve_[0]
    assert len(m.loss_curve_) == m.n_iter_ + 1   # M₀ and every (full-batch) iterate
    assert m.objective_ == min(m.loss_curve_)


def test_pauc_variant_runs_and_learns():
    X, Y, lab = cross_modal_data(seed=10)
    pairs, y = make_pairs(lab, lab, n_negatives=3, max_positives=200, random_state=0)
    m = CMLAUC(fpr_range=(0.0, 0.1), max_iter=40, random_state=0, preprocessor=(X, Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    assert m.score(pairs, y) > 0.9


def test_minibatch_counts_and_ratios_are_reproducible():
    X, Y, lab = cross_modal_data(seed=11)
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=200, random_state=0)
    kw = dict(batch_size_pos=50, batch_size_neg=0.3, max_iter=15, random_state=3,
              preprocessor=(X, Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CMLAUC(**kw).fit(pairs, y)
        b = CMLAUC(**kw).fit(pairs, y)
        c = CMLAUC(**{**kw, "random_state": 4}).fit(pairs, y)
    np.testing.assert_array_equal(a.M_, b.M_)
    assert not np.allclose(a.M_, c.M_)


def test_mahaauc_single_modal_forms_and_psd():
    X, _, lab = cross_modal_data(seed=12, dx=5)
    pairs, y = make_pairs(lab, n_negatives=2, max_positives=200, random_state=0)
    m = MahaAUC(max_iter=40, random_state=0, preprocessor=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    M = m.get_mahalanobis_matrix()
    assert np.linalg.eigvalsh(M).min() > 0
    P = m.whitening_
    np.testing.assert_allclose(M, P @ m.M_ @ P.T, rtol=1e-9, atol=1e-12)
    diff = X[pairs[:, 0]] - X[pairs[:, 1]]
    np.testing.assert_allclose(m.pair_distance(pairs), np.einsum("ij,jk,ik->i", diff, M, diff),
                               rtol=1e-9)
    arr = np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], axis=1)
    np.testing.assert_allclose(m.pair_distance(arr), m.pair_distance(pairs))
    assert m.score(pairs, y) > 0.85
    f = m.get_metric()
    i, j = pairs[0]
    assert f(X[i], X[j], squared=True) == pytest.approx(m.pair_distance(pairs[:1])[0])


def test_mahaauc_on_cross_modal_equal_dims():
    X, Y, lab = cross_modal_data(seed=13, dx=4, dy=4)
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=200, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = MahaAUC(max_iter=20, random_state=0, preprocessor=(X, Y)).fit(pairs, y)
        m2 = MahaAUC(max_iter=20, random_state=0).fit((X[pairs[:, 0]], Y[pairs[:, 1]]), y)
    np.testing.assert_allclose(m.transform_x(X), m.transform_y(X))
    assert m2.pair_distance((X[:3], Y[:3])).shape == (3,)
    with pytest.raises(ValueError, match="single-modal"):
        MahaAUC().fit((X[pairs[:, 0]], Y[pairs[:, 1], :3]), y)


def test_cross_val_score_with_index_pairs():
    X, Y, lab = cross_modal_data(seed=14)
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=150, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(CMLAUC(max_iter=10, random_state=0, preprocessor=(X, Y)),
                                 pairs, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)


def test_convergence_warning_and_stopping_rule():
    X, Y, lab = cross_modal_data(seed=15)
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=100, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        CMLAUC(max_iter=2, preprocessor=(X, Y)).fit(pairs, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = CMLAUC(max_iter=500, tol=0.5, n_iter_no_change=3, preprocessor=(X, Y))
        m.fit(pairs, y)
    assert m.n_iter_ < 500


def test_verbose_prints_table(capsys):
    X, Y, lab = cross_modal_data(seed=16)
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=60, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        CMLAUC(max_iter=3, verbose=1, preprocessor=(X, Y)).fit(pairs, y)
    out = capsys.readouterr().out
    assert "objective" in out and out.count("\n") >= 4


@pytest.mark.parametrize("params,match", [
    (dict(fpr_range=(0.5, 0.1)), "fpr_range"),
    (dict(gamma=-1.0), "gamma"),
    (dict(mu=0.0), "mu"),
    (dict(rho=0.9), "rho"),
    (dict(batch_size_pos=0), "batch_size_pos"),
    (dict(batch_size_neg=1.5), "batch_size_neg"),
    (dict(batch_size_neg="all"), "batch_size_neg"),
    (dict(n_components=100), "n_components"),
    (dict(max_iter=0), "max_iter"),
    (dict(init="random"), "init"),
    (dict(standardize="zca"), "standardize"),
    (dict(eval_every=0), "eval_every"),
    (dict(whiten_reg=-1.0), "whiten_reg"),
    (dict(fpr_range=(0.0, 0.1), batch_size_neg=5), "batch_size_neg"),
])
def test_bad_parameters_raise(params, match):
    X, Y, lab = cross_modal_data(seed=17)
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=60, random_state=0)
    with pytest.raises(ValueError, match=match):
        CMLAUC(preprocessor=(X, Y), **params).fit(pairs, y)


def test_bad_inputs_and_unfitted():
    X, Y, lab = cross_modal_data(seed=18)
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=60, random_state=0)
    with pytest.raises(NotFittedError):
        CMLAUC(preprocessor=(X, Y)).pair_distance(pairs)
    with pytest.raises(ValueError, match="only"):
        CMLAUC(preprocessor=(X, Y)).fit(pairs, np.ones_like(y))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CMLAUC(preprocessor=(Xn, Y)).fit(pairs, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = CMLAUC(max_iter=2, preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="features"):
        m.transform_x(Y)


def test_clone_and_params():
    m = CMLAUC(5, fpr_range=(0.0, 0.1), gamma=2.0)
    c = clone(m)
    assert c.get_params()["fpr_range"] == (0.0, 0.1) and c.n_components == 5
    assert "fpr_range" in MahaAUC().get_params()


@pytest.mark.parametrize("mode", ["scale", True, "whiten"])
def test_standardize_is_centring_and_preconditioning(mode):
    X, Y, lab = cross_modal_data(seed=19)
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=80, random_state=0)
    Xu, Yu = X[np.unique(pairs[:, 0])], Y[np.unique(pairs[:, 1])]

    def precondition(A, Au):
        C = np.cov(Au.T, bias=True)
        lam, V = np.linalg.eigh(C)
        if mode == "whiten":
            return (A - Au.mean(0)) @ V @ np.diag(1 / np.sqrt(lam + 0.1 * lam.mean())) @ V.T
        return (A - Au.mean(0)) / np.sqrt(lam.max())

    Xs, Ys = precondition(X, Xu), precondition(Y, Yu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CMLAUC(max_iter=5, standardize=mode, preprocessor=(X, Y)).fit(pairs, y)
        b = CMLAUC(max_iter=5, standardize=False, preprocessor=(Xs, Ys)).fit(pairs, y)
    np.testing.assert_allclose(a.M_, b.M_, atol=1e-9)
    np.testing.assert_allclose(a.pair_distance(pairs), b.pair_distance(pairs), rtol=1e-8)
    if mode == "whiten":
        C = np.cov(((Xu - a.mean_x_) @ a.whitening_x_).T, bias=True)
        lam = np.linalg.eigvalsh(np.cov((Xu - a.mean_x_).T, bias=True))
        np.testing.assert_allclose(np.linalg.eigvalsh(C), np.sort(lam / (lam + 0.1 * lam.mean())),
                                   rtol=1e-8)

# -----------------------------------------------------------------------------
def naive_full_objective(m, X, Y, pairs, y, cross=True):
    """eq. (6) on all pairs for the fitted ``M_`` (preconditioned inputs), by loops."""
    if cross:
        Xs, Ys = (X - m.mean_x_) @ m.whitening_x_, (Y - m.mean_y_) @ m.whitening_y_
        Z = np.concatenate([Xs[pairs[:, 0]], -Ys[pairs[:, 1]]], axis=1)
    else:
        Z = (X[pairs[:, 0]] - Y[pairs[:, 1]]) @ m.whitening_
    dist = np.einsum("ij,jk,ik->i", Z, m.M_, Z)
    dp, dn = dist[y == 1], dist[y == -1]
    dn = dn[pauc_window(dn, m.fpr_range)]
    hinge = np.maximum(0.0, 1.0 + dp[:, None] - dn[None, :]).mean()
    w = np.linalg.eigvalsh(m.M_)
    return hinge + m.gamma * dp.mean() + m.mu * (w.sum() - np.log(w).sum())


@pytest.mark.parametrize("batches", [(1.0, 1.0), (40, 60)])
def test_returns_best_iterate_of_the_full_objective(batches):
    """M_ is the evaluated iterate with the lowest full objective, and objective_ is its value.

    Earlier, the loss curve held the mini-batch objective and M_ was the last iterate.
    """
    X, Y, lab = cross_modal_data(seed=21)
    pairs, y = make_pairs(lab, lab, n_negatives=2, max_positives=200, random_state=0)
    m = CMLAUC(fpr_range=(0.0, 0.3), batch_size_pos=batches[0], batch_size_neg=batches[1],
               eta0=0.5, tau=2.0, max_iter=300, random_state=0, preprocessor=(X, Y))
    m.fit(pairs, y)
    full = naive_full_objective(m, X, Y, pairs, y)
    assert m.objective_ == pytest.approx(full, rel=1e-9)
    assert full == pytest.approx(min(m.loss_curve_), rel=1e-9)
    assert m.loss_curve_[0] > full


def test_safeguarded_step_does_not_diverge():
    """A too large, growing step (paper's rule, large τ) made the pAUC objective drift up.

    The safeguard halves η on every rise of the full objective, and the best iterate is kept.
    """
    X, Y, lab = cross_modal_data(seed=22, dx=6, dy=6, noise=1.0)
    pairs, y = make_pairs(lab, lab, n_negatives=3, max_positives=200, random_state=0)
    m = MahaAUC(fpr_range=(0.0, 0.1), eta0=2.0, rho=1.05, tau=50.0, max_iter=300,
                tol=1e-9, n_iter_no_change=300, random_state=0, preprocessor=(X, Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    curve = np.asarray(m.loss_curve_)
    assert m.n_step_halvings_ > 0
    # the last iterates stay near the best one instead of running away
    assert curve[-50:].max() < 1.05 * curve.min()
    assert naive_full_objective(m, X, Y, pairs, y, cross=False) == pytest.approx(
        curve.min(), rel=1e-9)


def test_badly_scaled_features_converge_within_default_max_iter():
    """Features whose variances span 4 orders of magnitude: whitening converges in the default
    budget (the earlier sqrt(lambda_max) scaling raised a ConvergenceWarning at 300)."""
    X, Y, lab = cross_modal_data(n=200, dx=8, dy=6, seed=23)
    X = X * np.logspace(0, -2, X.shape[1])
    Y = Y * np.logspace(-2, 0, Y.shape[1])
    pairs, y = make_pairs(lab, lab, n_negatives=1, max_positives=600, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = CMLAUC(preprocessor=(X, Y)).fit(pairs, y)
    assert m.n_iter_ < 300
    assert m.score(pairs, y) > 0.9
