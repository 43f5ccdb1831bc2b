"""PCCA: objective, gradients, preconditioned kernel update, determinism, learning."""

import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning

from crossmetric import PCCA, Euclidean
from crossmetric._solvers.logistic import PairLogisticObjective, Tower, TowerProblem
from crossmetric.kernels import pairwise_kernel


def _problem(Phi, i, j, y, beta=3.0, preconditioned=False):
    n = Phi.shape[0]
    return TowerProblem([Tower(Phi, preconditioned)], PairLogisticObjective(i, j, y, beta, n, n))


def _slow_pcca(L, X, i, j, y, beta):
    """Eq. (2) and eq. (3) pair by pair, with C_n = (x_i − x_j)(x_i − x_j)ᵀ."""
    loss, grad = 0.0, np.zeros_like(L)
    for a, b, lab in zip(i, j, y, strict=False):
        diff = X[a] - X[b]
        d2 = diff @ L.T @ L @ diff
        loss += np.logaddexp(0, beta * lab * (d2 - 1)) / beta
        grad += 2 * lab * expit(beta * lab * (d2 - 1)) * L @ np.outer(diff, diff)
    return loss / len(y), grad / len(y)


def _fd(fun, W, eps=1e-6):
    g = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        Wp, Wm = W.copy(), W.copy()
        Wp[idx] += eps
        Wm[idx] -= eps
        g[idx] = (fun(Wp) - fun(Wm)) / (2 * eps)
    return g


def test_linear_objective_and_gradient(small_pairs):
    X, pairs, y = small_pairs
    rng = np.random.RandomState(0)
    L = rng.randn(3, 5) * 0.5
    prob = _problem(X, pairs[:, 0], pairs[:, 1], y)
    loss, (grad,) = prob.loss_grad([L])
    slow_loss, slow_grad = _slow_pcca(L, X, pairs[:, 0], pairs[:, 1], y, 3.0)
    assert loss == pytest.approx(slow_loss, rel=1e-12)
    np.testing.assert_allclose(grad, slow_grad, rtol=1e-10, atol=1e-12)
    num = _fd(lambda W: prob.loss_grad([W])[0], L)
    np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-8)


def test_kernel_objective_gradient_and_preconditioner(small_pairs):
    X, pairs, y = small_pairs
    i, j = pairs[:, 0], pairs[:, 1]
    K = pairwise_kernel(X, X, "chi2_rbf", gamma=1.0)
    rng = np.random.RandomState(1)
    A = rng.randn(3, K.shape[0]) * 0.3
    plain = _problem(K, i, j, y)
    loss, (grad,) = plain.loss_grad([A])
    # kernel distances are linear-PCCA distances on kernel rows (eq. 5)
    assert loss == pytest.approx(_slow_pcca(A, K, i, j, y, 3.0)[0], rel=1e-12)
    np.testing.assert_allclose(grad, _fd(lambda W: plain.loss_grad([W])[0], A),
                               rtol=1e-6, atol=1e-8)
    # eq. (9): the preconditioned direction is the plain gradient times K⁻¹
    pre = _problem(K, i, j, y, preconditioned=True)
    FX, _ = pre.embed([A])
    _, (G,) = pre.loss_grad_embeddings([FX])
    direction = pre.towers[0].direction(G)
    np.testing.assert_allclose(direction, grad @ np.linalg.inv(K), rtol=1e-6, atol=1e-8)
    # eq. (10): 2 Σ_n c_n A K J_n touches columns i_n and j_n only
    c = 2 * y * expit(3.0 * y * (((FX[i] - FX[j]) ** 2).sum(1) - 1)) / len(y)
    eq10 = np.zeros_like(A)
    for n, (a, b) in enumerate(zip(i, j, strict=False)):
        col = c[n] * (A @ (K[:, a] - K[:, b]))
        eq10[:, a] += col
        eq10[:, b] -= col
    np.testing.assert_allclose(direction, eq10, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(solver="gd"), dict(kernel="chi2_rbf"),
                                dict(kernel="chi2", preconditioned=False)])
def test_deterministic_components(small_pairs, kw):
    X, pairs, y = small_pairs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = PCCA(n_components=3, max_iter=40, random_state=3, preprocessor=X, **kw).fit(pairs, y)
        b = PCCA(n_components=3, max_iter=40, random_state=3, preprocessor=X, **kw).fit(pairs, y)
    attr = "components_" if "kernel" not in kw else "dual_coef_"
    np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert a.n_iter_ == len(a.loss_curve_) >= 1
    assert np.all(np.diff(a.loss_curve_) <= 1e-12)  # descent never goes up


def test_fit_lowers_objective_and_separates_pairs(small_pairs):
    X, pairs, y = small_pairs
    m = PCCA(n_components=3, random_state=0, preprocessor=X).fit(pairs, y)
    prob = _problem(X, pairs[:, 0], pairs[:, 1], y)
    assert prob.loss_grad([m.components_])[0] == pytest.approx(m.loss_curve_[-1], rel=1e-8)
    zero = prob.loss_grad([np.zeros_like(m.components_)])[0]  # all distances 0
    assert m.loss_curve_[-1] < 0.5 * zero and m.loss_curve_[-1] <= m.loss_curve_[0]
    assert m.score(pairs, y) > Euclidean(preprocessor=X).fit(pairs, y).score(pairs, y) + 0.05


def test_invalid_parameters(small_pairs):
    X, pairs, y = small_pairs
    for kw, match in [(dict(beta=0), "beta"), (dict(kernel="poly"), "kernel"),
                      (dict(solver="newton"), "solver"), (dict(init="lda"), "init"),
                      (dict(max_iter=0), "max_iter")]:
        with pytest.raises(ValueError, match=match):
            PCCA(n_components=2, preprocessor=X, **kw).fit(pairs, y)
    with pytest.raises(ValueError, match="negative values.*chi2"):
        PCCA(n_components=2, kernel="chi2", preprocessor=X - 1).fit(pairs, y)


def test_convergence_warning(small_pairs):
    X, pairs, y = small_pairs
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        PCCA(n_components=3, max_iter=2, preprocessor=X).fit(pairs, y)
    with pytest.warns(ConvergenceWarning):
        PCCA(n_components=3, max_iter=2, solver="gd", preprocessor=X).fit(pairs, y)


def test_verbose_prints_a_table(small_pairs, capsys):
    X, pairs, y = small_pairs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        PCCA(n_components=2, max_iter=5, verbose=1, solver="gd", preprocessor=X).fit(pairs, y)
    out = capsys.readouterr().out
    assert "objective" in out and len(out.strip().splitlines()) >= 3


def test_learns_on_digits_beyond_euclidean(digit_split):
    X, ptr, ytr, pte, yte = digit_split
    euclid = Euclidean(preprocessor=X).fit(ptr, ytr).score(pte, yte)
    pcca = PCCA(n_components=32, random_state=0, preprocessor=X).fit(ptr, ytr)
    auc = pcca.score(pte, yte)
    assert auc > euclid + 0.05, (auc, euclid)
    assert auc > 0.93
    kern = PCCA(n_components=32, kernel="chi2_rbf", max_iter=200, random_state=0,
                preprocessor=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert kern.fit(ptr, ytr).score(pte, yte) > euclid + 0.05
