import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from crossmetric.kernels import HellingerMap, KernelMap, estimate_gamma, pairwise_kernel
from crossmetric.losses import generalized_logistic, generalized_logistic_grad


@pytest.fixture
def hist():
    rng = np.random.RandomState(0)
    X, Y = rng.rand(6, 5), rng.rand(4, 5)
    X[0, :2] = 0.0
    Y[1, :2] = 0.0  # 0/0 terms
    return X, Y


def _brute(X, Y, f):
    return np.array([[f(x, y) for y in Y] for x in X])


def _safe_div(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b > 0)


def test_kernels_match_their_formulas(hist):
    X, Y = hist
    np.testing.assert_allclose(pairwise_kernel(X, Y, "linear"), X @ Y.T)
    np.testing.assert_allclose(pairwise_kernel(X, Y, "rbf", gamma=0.3),
                               _brute(X, Y, lambda x, y: np.exp(-0.3 * np.sum((x - y) ** 2))))
    np.testing.assert_allclose(pairwise_kernel(X, Y, "chi2"),
                               _brute(X, Y, lambda x, y: np.sum(_safe_div(2 * x * y, x + y))),
                               atol=1e-12)
    np.testing.assert_allclose(
        pairwise_kernel(X, Y, "chi2_rbf", gamma=2.0),
        _brute(X, Y, lambda x, y: np.exp(-2.0 * np.sum(_safe_div((x - y) ** 2, x + y)))))


def test_gamma_default_is_inverse_mean_squared_distance(hist):
    X, _ = hist
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    assert estimate_gamma(X, "rbf") == pytest.approx(1 / (D.sum() / (6 * 5)))
    km = KernelMap("rbf").fit(X)
    np.testing.assert_allclose(km.train_kernel(), pairwise_kernel(X, X, "rbf", km.gamma_))


def test_kernel_map_blocks_equal_one_shot(hist):
    X, Y = hist
    for kernel in ("linear", "rbf", "chi2", "chi2_rbf"):
        km = KernelMap(kernel, block_elements=5).fit(X)  # one row per block
        np.testing.assert_allclose(km.transform(Y), pairwise_kernel(Y, X, kernel, km.gamma_),
                                   atol=1e-12)


def test_chi2_rejects_negative_values(hist):
    X, _ = hist
    Xn = X.copy()
    Xn[2, 3] = -0.1
    for kernel in ("chi2", "chi2_rbf"):
        with pytest.raises(ValueError, match="X contains negative values.*chi2"):
            KernelMap(kernel).fit(Xn)
        with pytest.raises(ValueError, match="negative"):
            KernelMap(kernel).fit(X).transform(Xn)
    with pytest.raises(ValueError, match="negative"):
        HellingerMap().fit(Xn)
    KernelMap("rbf").fit(Xn)  # fine for other kernels


def test_kernel_map_errors(hist):
    X, Y = hist
    with pytest.raises(ValueError, match="kernel must be one of"):
        KernelMap("poly").fit(X)
    with pytest.raises(ValueError, match="gamma"):
        KernelMap("rbf", gamma=-1.0).fit(X)
    with pytest.raises(NotFittedError):
        KernelMap().transform(X)
    with pytest.raises(ValueError, match="X has 3 features, but KernelMap was fitted on 5"):
        KernelMap().fit(X).transform(Y[:, :3])


def test_hellinger_map(hist):
    X, _ = hist
    np.testing.assert_allclose(HellingerMap().fit_transform(X), np.sqrt(X))
    H = HellingerMap(normalize=True).fit_transform(X)
    np.testing.assert_allclose((H ** 2).sum(1), 1.0)


def test_generalized_logistic_is_stable_and_correct():
    x = np.array([-1e6, -50.0, -1.0, 0.0, 1.0, 50.0, 1e6])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        v = generalized_logistic(x, 3.0)
        g = generalized_logistic_grad(x, 3.0)
    np.testing.assert_allclose(v[2:5], np.log1p(np.exp(3 * x[2:5])) / 3)
    assert v[0] == 0.0 and v[-1] == pytest.approx(1e6)
    eps = 1e-6
    num = (generalized_logistic(x[1:6] + eps, 3.0) - generalized_logistic(x[1:6] - eps, 3.0)) / (
        2 * eps)
    np.testing.assert_allclose(g[1:6], num, rtol=1e-5, atol=1e-9)
