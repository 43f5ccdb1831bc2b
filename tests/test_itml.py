"""ITML: the blocked fast path against a plain loop over Algorithm 1, bounds, dual, checks."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from crossmetric.learners.itml import ITML, itml_bounds
from crossmetric.pairs import make_pairs


def _reference(V, y, xi0, orders, gamma, A0):
    """Algorithm 1 of Davis et al. (2007) as printed, one constraint at a time, with the exact
    projection step α = δ γ/(γ+1) (1/p − 1/ξ) (the printed step 3.4 for γ = 1)."""
    A = A0.copy()
    lam = np.zeros(len(V))
    xi = xi0.astype(float).copy()
    gp = 1.0 if np.isinf(gamma) else gamma / (gamma + 1.0)
    for order in orders:
        for k in order:
            v = V[k]
            p = v @ A @ v                                          # 3.2
            delta = y[k]                                           # 3.3
            alpha = min(lam[k], delta * gp * (1 / p - 1 / xi[k]))  # 3.4
            beta = delta * alpha / (1 - delta * alpha * p)         # 3.5
            if np.isfinite(gamma):
                xi[k] = gamma * xi[k] / (gamma + delta * alpha * xi[k])  # 3.6
            lam[k] -= alpha                                        # 3.7
            A = A + beta * np.outer(A @ v, v @ A)                  # 3.8
    return A, lam


@pytest.fixture(scope="module")
def small():
    rng = np.random.RandomState(0)
    lab = np.repeat(np.arange(8), 6)
    X = rng.randn(8, 5)[lab] + 0.7 * rng.randn(48, 5)
    pairs, y = make_pairs(lab, n_negatives=2, random_state=0)
    return X, pairs, y


def _replay(X, pairs, seed, n_pass, prior=None):
    """The bounds and the constraint order of each pass that ITML(random_state=seed) draws."""
    rng = np.random.RandomState(seed)
    b = itml_bounds(X[np.unique(pairs)], prior, random_state=rng)
    return b, [rng.permutation(len(pairs)) for _ in range(n_pass)]


@pytest.mark.parametrize("block_size", [1, 3, 16, 500])
@pytest.mark.parametrize("gamma", [1.0, 0.3, np.inf])
def test_fast_path_matches_algorithm_1(small, block_size, gamma):
    X, pairs, y = small
    n_pass = 6
    m = ITML(gamma=gamma, max_iter=n_pass, tol=0.0, block_size=block_size, random_state=3,
             preprocessor=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    (u, l_), orders = _replay(X, pairs, 3, n_pass)
    assert m.bounds_ == (u, l_)
    V = X[pairs[:, 0]] - X[pairs[:, 1]]
    A, lam = _reference(V, y, np.where(y == 1, u, l_), orders, gamma, np.eye(5))
    np.testing.assert_allclose(m.get_mahalanobis_matrix(), A, rtol=1e-9,
                               atol=1e-11 * np.abs(A).max())
    np.testing.assert_allclose(m.dual_coef_, lam, rtol=1e-6, atol=1e-12)
    assert m.n_iter_ == n_pass


def test_prior_matrix_matches_reference(small):
    X, pairs, y = small
    rng = np.random.RandomState(1)
    R = rng.randn(5, 5)
    A0 = R @ R.T + 0.5 * np.eye(5)
    m = ITML(prior=A0, max_iter=4, tol=0.0, random_state=0, preprocessor=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    (u, l_), orders = _replay(X, pairs, 0, 4, prior=A0)
    # the default bounds are percentiles of squared distances under the prior
    D = X[:, None] - X[None]
    d = np.einsum("abi,ij,abj->ab", D, A0, D)[np.triu_indices(len(X), 1)]
    np.testing.assert_allclose((u, l_), np.percentile(d, [5, 95]), rtol=1e-10)
    V = X[pairs[:, 0]] - X[pairs[:, 1]]
    A, _ = _reference(V, y, np.where(y == 1, u, l_), orders, 1.0, A0)
    np.testing.assert_allclose(m.get_mahalanobis_matrix(), A, rtol=1e-9,
                               atol=1e-11 * np.abs(A).max())


def test_converges_to_the_kkt_point(small):
    """At convergence: λ ≥ 0; active constraints sit on their slack target
    ξ = 1/(1/ξ₀ − δλ/γ); inactive ones hold with ξ₀; the dual objective never decreased."""
    X, pairs, y = small
    gamma = 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = ITML(gamma=gamma, tol=1e-10, max_iter=3000, random_state=0).fit(
            np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], 1), y)
    curve = np.asarray(m.loss_curve_)
    assert np.all(np.diff(curve) >= -1e-9 * np.abs(curve).max())
    d = m.pair_distance((X[pairs[:, 0]], X[pairs[:, 1]]))
    lam = m.dual_coef_
    u, l_ = m.bounds_
    xi = 1.0 / (1.0 / np.where(y == 1, u, l_) - y * lam / gamma)
    act = lam > 1e-9
    assert act.sum() > 10 and np.all(lam >= 0)
    np.testing.assert_allclose(d[act], xi[act], rtol=1e-5)
    assert np.all(d[~act & (y == 1)] <= u * (1 + 1e-6))
    assert np.all(d[~act & (y == -1)] >= l_ * (1 - 1e-6))


def test_learns_on_digits_and_warns_when_stopped():
    from sklearn.datasets import load_digits

    d = load_digits()
    X, lab = d.data[:400] / 16, d.target[:400]
    pairs, y = make_pairs(lab[:200], max_positives=300, random_state=0)
    pte, yte = make_pairs(lab[200:], max_positives=300, random_state=1)
    pte = pte + 200
    m = ITML(random_state=0, preprocessor=X).fit(pairs, y)
    eu = ITML(max_iter=1, random_state=0, preprocessor=X)
    from crossmetric import Euclidean

    base = Euclidean(preprocessor=X).fit(pairs, y).score(pte, yte)
    assert m.score(pte, yte) > base + 0.03
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        eu.fit(pairs, y)


def test_identical_pairs_dropped_and_bad_params(small):
    X, pairs, y = small
    p2 = np.r_[pairs, [[0, 0]]]
    y2 = np.r_[y, -1]
    m = ITML(random_state=0, preprocessor=X).fit(p2, y2)
    assert m.n_constraints_ == len(pairs)
    for kw, msg in [({"gamma": 0}, "gamma"), ({"gamma": -1.0}, "gamma"),
                    ({"bounds": (1.0,)}, "bounds"), ({"bounds": (0.0, 2.0)}, "bounds"),
                    ({"prior": "covariance"}, "prior"), ({"prior": np.eye(4)}, "prior"),
                    ({"prior": -np.eye(5)}, "positive definite"),
                    ({"percentiles": (95, 5)}, "percentiles"),
                    ({"max_iter": 0}, "max_iter"), ({"block_size": 0}, "block_size")]:
        with pytest.raises(ValueError, match=msg):
            ITML(preprocessor=X, **kw).fit(pairs, y)
