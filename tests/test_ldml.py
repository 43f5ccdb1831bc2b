"""LDML: objective against a slow per-pair version, finite-difference gradient, fitting."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV

from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric.learners.ldml import LDML, pair_log_likelihood
from crossmetric.pairs import make_pairs
from crossmetric.pairs._pair_data import used_rows


@pytest.fixture(scope="module")
def digits():
    X, lab = load_digits(return_X_y=True)
    X, lab = X[:400] / 16.0, lab[:400]
    pairs, y = make_pairs(lab, max_positives=600, random_state=0)
    return X, lab, pairs, y


def _small(seed=0, n=30, d=5, n_pairs=60):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    pairs = rng.randint(0, n, size=(n_pairs, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    y = np.where(rng.rand(pairs.shape[0]) < 0.5, 1, -1)
    y[:2] = [1, -1]
    return X, pairs, y


def _slow_objective(X, pairs, y, L, b, alpha):
    """Sum over pairs of ln(1 + exp(-y (b - (xi-xj)ᵀ M (xi-xj)))) / n + α/2 tr(M)."""
    M = L.T @ L
    total = 0.0
    for (i, j), yy in zip(pairs, y, strict=True):
        u = X[i] - X[j]
        D = u @ M @ u
        total += np.log1p(np.exp(-yy * (b - D)))
    return total / len(y) + 0.5 * alpha * np.trace(M)


@pytest.mark.parametrize("p", [None, 3])
def test_objective_matches_slow_version(p):
    X, pairs, y = _small()
    model = LDML(p, alpha=0.3)
    rng = np.random.RandomState(1)
    d = X.shape[1]
    r = d if p is None else p
    L, b = rng.randn(r, d) * 0.4, 1.3
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    obj = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0])
    loss, _ = model._loss_grad(np.r_[L.ravel(), b], Xu, obj, r)
    assert loss == pytest.approx(_slow_objective(X, pairs, y, L, b, 0.3), rel=1e-12)


def test_objective_with_a_fixed_part_matches_slow_version():
    """A fixed part of each pair's distance (the untrained distance a model keeps outside its
    basis) is added to ``‖L (x_i − x_j)‖²`` before the loss."""
    X, pairs, y = _small()
    model = LDML(3, alpha=0.3)
    L, b = np.random.RandomState(1).randn(3, X.shape[1]) * 0.4, 1.3
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    rest = np.random.RandomState(4).rand(len(y))
    obj = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0], offset=rest)
    loss, _ = model._loss_grad(np.r_[L.ravel(), b], Xu, obj, 3)
    E = (X[pairs[:, 0]] - X[pairs[:, 1]]) @ L.T
    D = np.einsum("ij,ij->i", E, E) + rest
    slow = np.mean(np.log1p(np.exp(-y * (b - D)))) + 0.15 * np.sum(L * L)
    assert loss == pytest.approx(slow, rel=1e-12)


@pytest.mark.parametrize("p, offset", [(None, False), (2, False), (2, True)])
def test_gradient_finite_differences(p, offset):
    X, pairs, y = _small(seed=3)
    model = LDML(p, alpha=0.05)
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    rest = np.random.RandomState(5).rand(len(y)) if offset else None
    obj = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0], offset=rest)
    r = X.shape[1] if p is None else p
    rng = np.random.RandomState(2)
    theta = np.r_[rng.randn(r * X.shape[1]) * 0.5, 0.7]
    _, g = model._loss_grad(theta, Xu, obj, r)
    eps = 1e-6
    num = np.empty_like(theta)
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = eps
        num[k] = (model._loss_grad(theta + e, Xu, obj, r)[0]
                  - model._loss_grad(theta - e, Xu, obj, r)[0]) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-8)


def test_no_overflow_warning_on_huge_distances():
    X, pairs, y = _small()
    model = LDML(2)
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    obj = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0])
    theta = np.r_[np.full(2 * X.shape[1], 1e4), -1e3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, g = model._loss_grad(theta, Xu, obj, 2)
    assert np.isfinite(loss) and np.isfinite(g).all()


def test_fit_learns_a_better_metric_than_euclidean(digits):
    X, lab, pairs, y = digits
    from crossmetric.learners.baselines import Euclidean

    base = Euclidean(preprocessor=X).fit(pairs, y).score(pairs, y)
    model = LDML(10, preprocessor=X, random_state=0).fit(pairs, y)
    assert model.components_.shape == (10, 64)
    assert model.score(pairs, y) > base + 0.02
    assert model.n_iter_ == len(model.loss_curve_) > 0
    # L-BFGS decreases the objective
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    prob = model.pair_probability(pairs)
    assert np.all((prob > 0) & (prob < 1))
    # σ(b − D) > 1/2 exactly when D < b
    np.testing.assert_array_equal(prob > 0.5, model.pair_distance(pairs) < model.bias_)


def test_full_metric_is_psd_and_matches_transform(digits):
    X, lab, pairs, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LDML(preprocessor=X, max_iter=30).fit(pairs, y)
    M = model.get_mahalanobis_matrix()
    assert M.shape == (64, 64)
    assert np.linalg.eigvalsh(M).min() > -1e-10
    u = X[pairs[:5, 0]] - X[pairs[:5, 1]]
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", u, M, u), model.pair_distance(pairs[:5]))


def test_three_input_forms_agree(digits):
    X, lab, pairs, y = digits
    a = LDML(4, preprocessor=X, random_state=0).fit(pairs, y)
    b = LDML(4, random_state=0).fit(np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], axis=1), y)
    c = LDML(4, random_state=0).fit((X[pairs[:, 0]], X[pairs[:, 1]]), y)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-6)
    np.testing.assert_allclose(a.components_, c.components_, atol=1e-6)


def test_convergence_warning_and_verbose(digits, capsys):
    X, lab, pairs, y = digits
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        LDML(3, preprocessor=X, max_iter=2, verbose=1).fit(pairs, y)
    out = capsys.readouterr().out
    assert "objective" in out and "[LDML]" in out


def test_bad_parameters(digits):
    X, lab, pairs, y = digits
    with pytest.raises(ValueError, match="n_components"):
        LDML(65, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="alpha"):
        LDML(2, alpha=-1.0, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="init"):
        LDML(2, init="nope", preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="init must have shape"):
        LDML(2, init=np.zeros((3, 64)), preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="y must contain only"):
        LDML(2, preprocessor=X).fit(pairs, np.zeros(len(y)))
    with pytest.raises(NotFittedError):
        LDML(2).transform(X)
    model = LDML(2, preprocessor=X, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(pairs, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :10])


def test_clone_and_grid_search(digits):
    X, lab, pairs, y = digits
    model = LDML(3, preprocessor=X, max_iter=20, random_state=0)
    cloned = clone(model)
    assert cloned.get_params()["alpha"] == model.alpha
    np.testing.assert_array_equal(cloned.preprocessor, model.preprocessor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gs = GridSearchCV(model, {"alpha": [1e-4, 1e-1]}, cv=2).fit(pairs, y)
    assert gs.best_params_["alpha"] in (1e-4, 1e-1)


def test_pair_log_likelihood_is_the_data_term(digits):
    X, lab, pairs, y = digits
    model = LDML(4, alpha=1e-2, preprocessor=X, random_state=0).fit(pairs, y)
    ll = pair_log_likelihood(model, pairs, y)
    # the penalty acts on L for the samples divided by their scale (scale-free fit)
    penalty = 0.5 * 1e-2 * np.sum((model.components_ * model.input_scale_) ** 2)
    assert -ll + penalty == pytest.approx(model.loss_curve_[-1], rel=1e-6)
    slow = np.mean([np.log(p if t == 1 else 1 - p)
                    for p, t in zip(model.pair_probability(pairs), y, strict=True)])
    assert ll == pytest.approx(slow, rel=1e-9)


def test_usable_on_cross_modal_data_of_equal_dimension():
    """Single-modal learners run on two modalities with the same number of features."""
    rng = np.random.RandomState(0)
    lab = np.repeat(np.arange(10), 6)
    X = rng.randn(60, 5) + lab[:, None] * 0.5
    Y = X + 0.1 * rng.randn(60, 5)
    pairs, y = make_pairs(lab, lab, random_state=0)
    model = LDML(3, preprocessor=(X, Y), random_state=0).fit(pairs, y)
    D = model.cross_distance(X[:4], Y)
    np.testing.assert_allclose(D[:, :3],
                               ((model.transform(X[:4])[:, None] - model.transform(Y[:3])[None])
                                ** 2).sum(-1))
    assert model.score(pairs, y) > 0.7
