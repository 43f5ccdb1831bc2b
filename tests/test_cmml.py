"""CMML: gradients (linear and kernel), preconditioner, equivalence with PCCA, learning."""

import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning

from crossmetric import CMML, PCCA, Euclidean
from crossmetric._solvers.logistic import PairLogisticObjective, Tower, TowerProblem
from crossmetric.kernels import pairwise_kernel
from crossmetric.pairs import make_pairs
from tests.test_pcca import _fd


def _problem(PX, PY, ix, iy, y, beta=3.0, pre=(False, False)):
    obj = PairLogisticObjective(ix, iy, y, beta, PX.shape[0], PY.shape[0])
    return TowerProblem([Tower(PX, pre[0]), Tower(PY, pre[1])], obj)


def _slow_cmml(A, B, X, Y, ix, iy, y, beta):
    """Eq. (4)-(6) pair by pair."""
    loss, gA, gB = 0.0, np.zeros_like(A), np.zeros_like(B)
    for i, j, lab in zip(ix, iy, y, strict=False):
        e = A @ X[i] - B @ Y[j]
        m = lab * (e @ e - 1)
        loss += np.logaddexp(0, beta * m) / beta
        s = lab * expit(beta * m)
        gA += 2 * s * np.outer(e, X[i])
        gB -= 2 * s * np.outer(e, Y[j])
    n = len(y)
    return loss / n, gA / n, gB / n


def test_linear_gradient(small_cross):
    X, Y, pairs, y = small_cross
    rng = np.random.RandomState(0)
    A, B = rng.randn(3, 4), rng.randn(3, 6)
    prob = _problem(X, Y, pairs[:, 0], pairs[:, 1], y)
    loss, (gA, gB) = prob.loss_grad([A, B])
    sl, sA, sB = _slow_cmml(A, B, X, Y, pairs[:, 0], pairs[:, 1], y, 3.0)
    assert loss == pytest.approx(sl, rel=1e-12)
    np.testing.assert_allclose(gA, sA, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gB, sB, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gA, _fd(lambda W: prob.loss_grad([W, B])[0], A), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(gB, _fd(lambda W: prob.loss_grad([A, W])[0], B), rtol=1e-6,
                               atol=1e-8)


def test_kernel_gradient_and_preconditioner(small_cross):
    X, Y, pairs, y = small_cross
    ix, iy = pairs[:, 0], pairs[:, 1]
    KX = pairwise_kernel(X, X, "chi2_rbf", gamma=1.0)
    KY = pairwise_kernel(Y, Y, "rbf", gamma=0.5)
    rng = np.random.RandomState(2)
    A, B = rng.randn(3, 20) * 0.3, rng.randn(3, 20) * 0.3
    plain = _problem(KX, KY, ix, iy, y)
    loss, (gA, gB) = plain.loss_grad([A, B])
    assert loss == pytest.approx(_slow_cmml(A, B, KX, KY, ix, iy, y, 3.0)[0], rel=1e-12)
    np.testing.assert_allclose(gA, _fd(lambda W: plain.loss_grad([W, B])[0], A), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(gB, _fd(lambda W: plain.loss_grad([A, W])[0], B), rtol=1e-6,
                               atol=1e-8)
    # eq. (12): the update direction is the gradient right-multiplied by K⁻¹
    pre = _problem(KX, KY, ix, iy, y, pre=(True, True))
    _, Gs = pre.loss_grad_embeddings(list(pre.embed([A, B])))
    dA, dB = (t.direction(G) for t, G in zip(pre.towers, Gs, strict=False))
    np.testing.assert_allclose(dA, gA @ np.linalg.inv(KX), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(dB, gB @ np.linalg.inv(KY), rtol=1e-5, atol=1e-8)


def test_tied_cmml_is_pcca(small_pairs):
    X, pairs, y = small_pairs
    rng = np.random.RandomState(0)
    L = rng.randn(3, 5)
    i, j = pairs[:, 0], pairs[:, 1]
    n = X.shape[0]
    pcca = TowerProblem([Tower(X)], PairLogisticObjective(i, j, y, 3.0, n, n))
    cmml = _problem(X, X, i, j, y)
    lp, (gL,) = pcca.loss_grad([L])
    lc, (gA, gB) = cmml.loss_grad([L, L])
    assert lp == pytest.approx(lc, rel=1e-14)
    np.testing.assert_allclose(gL, gA + gB, rtol=1e-12, atol=1e-14)


def test_fitted_cmml_on_identical_modalities_matches_pcca_objective(small_pairs):
    X, pairs, y = small_pairs
    p = PCCA(n_components=3, init="random", random_state=0, preprocessor=X).fit(pairs, y)
    c = CMML(n_components=3, random_state=0, preprocessor=(X, X)).fit(pairs, y)
    # both optimise the same convex-in-M objective; untied CMML can only do as well or better
    assert c.loss_curve_[-1] <= p.loss_curve_[-1] + 1e-4


def test_kernel_pair_and_validation(small_cross):
    X, Y, pairs, y = small_cross
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = CMML(n_components=3, kernel=("chi2_rbf", "linear"), max_iter=30,
                 preprocessor=(X, Y), random_state=0).fit(pairs, y)
    assert hasattr(m, "dual_coef_x_") and hasattr(m, "components_y_")
    assert m.transform_x(X).shape == (20, 3)
    with pytest.raises(ValueError, match="kernel must be one of"):
        CMML(kernel=("rbf", "poly"), preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="kernel must be one value or a pair"):
        CMML(kernel=("rbf",) * 3, preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="n_components=11 is out of range"):
        CMML(n_components=11, preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="Y \\(second modality\\) contains negative"):
        CMML(kernel="chi2", preprocessor=(X, -Y)).fit(pairs, y)


def test_cmml_learns_cross_modal_digits(digit_split):
    """Digits seen as pixels (64-d) and as 4×4 block sums (16-d, non-linear view)."""
    X, _, _, _, _ = digit_split
    from sklearn.datasets import load_digits

    labels = load_digits().target
    Y = X.reshape(-1, 4, 2, 4, 2).sum(axis=(2, 4)).reshape(-1, 16) ** 2
    rng = np.random.RandomState(0)
    perm = rng.permutation(len(X))
    tr, te = perm[:900], perm[900:]
    ptr, ytr = make_pairs(labels[tr], labels[tr], max_positives=1500, random_state=0)
    pte, yte = make_pairs(labels[te], labels[te], max_positives=1500, random_state=1)
    ptr, pte = np.c_[tr[ptr[:, 0]], tr[ptr[:, 1]]], np.c_[te[pte[:, 0]], te[pte[:, 1]]]
    m = CMML(n_components=16, random_state=0, preprocessor=(X, Y)).fit(ptr, ytr)
    auc = m.score(pte, yte)
    assert auc > 0.9, auc
    # a single-modal Euclidean baseline cannot even compare the two views; check the learned
    # metric beats Euclidean within the pixel view
    e = Euclidean(preprocessor=X).fit(ptr, ytr)
    assert auc > e.score(pte, yte)
