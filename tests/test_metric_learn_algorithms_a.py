"""MMC, SDML, LSML / LSML_Supervised and Covariance (metric-learn 0.7.0's algorithms
item 5): gradients against finite differences, fast paths against slow obvious versions,
shapes of the fitted members, and one-line errors on bad input. The comparison with
metric-learn itself is ``benchmarks/bench_metric_learn_parity_a.py``."""

import warnings

import numpy as np
import pytest
from scipy.linalg import pinvh
from sklearn.datasets import load_iris

import crossmetric
from crossmetric import LSML, MMC, SDML, Covariance, LSML_Supervised, make_pairs
from crossmetric.learners.lsml import label_pairs, lsml_gradient, lsml_loss
from crossmetric.learners.mmc import (
    diagonal_terms,
    dissimilarity_gradient,
    dissimilarity_objective,
)
from crossmetric.learners.sdml import sdml_matrix
from crossmetric.persistence import load_model, save_model


@pytest.fixture(scope="module")
def iris():
    X, labels = load_iris(return_X_y=True)
    pairs, y = make_pairs(labels, max_positives=150, random_state=0)
    return X, labels, pairs, y


def _spd(d, rng):
    B = rng.randn(d, d)
    return B @ B.T / d + np.eye(d)


def _fd_matrix(f, A, h=1e-6):
    G = np.zeros_like(A)
    for k in range(A.shape[0]):
        for m in range(A.shape[1]):
            E = np.zeros_like(A)
            E[k, m] = h
            G[k, m] = (f(A + E) - f(A - E)) / (2 * h)
    return G


# ----------------------------------------------------------------- gradients (finite differences)
def test_mmc_dissimilarity_gradient_matches_finite_differences():
    rng = np.random.RandomState(0)
    Vd, A = rng.randn(30, 4), _spd(4, rng)
    G = dissimilarity_gradient(Vd, A)
    np.testing.assert_allclose(G, _fd_matrix(lambda B: dissimilarity_objective(Vd, B), A),
                               rtol=1e-4, atol=1e-7)


def test_mmc_diagonal_gradient_and_hessian_match_finite_differences():
    rng = np.random.RandomState(1)
    Dsq, w = rng.randn(25, 5) ** 2, rng.rand(5) + 0.5
    h, g, H = diagonal_terms(Dsq, w)
    eps = 1e-6
    E = np.eye(5) * eps
    g_fd = np.array([(diagonal_terms(Dsq, w + e)[0] - diagonal_terms(Dsq, w - e)[0]) / (2 * eps)
                     for e in E])
    H_fd = np.array([(diagonal_terms(Dsq, w + e)[1] - diagonal_terms(Dsq, w - e)[1]) / (2 * eps)
                     for e in E])
    np.testing.assert_allclose(g, g_fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-8)
    assert h == pytest.approx(np.log(np.sqrt(Dsq @ w).sum()))


def test_lsml_gradient_matches_finite_differences():
    rng = np.random.RandomState(2)
    d = 4
    Vab, Vcd = rng.randn(40, d), rng.randn(40, d)
    w = rng.rand(40)
    w /= w.sum()
    M, P = _spd(d, rng), np.linalg.inv(_spd(d, rng))
    dab = np.sum(Vab @ M * Vab, 1)
    dcd = np.sum(Vcd @ M * Vcd, 1)
    assert 0 < np.sum(dab > dcd) < 40          # both violated and satisfied comparisons
    G = lsml_gradient(M, Vab, Vcd, w, P)
    np.testing.assert_allclose(G, _fd_matrix(lambda B: lsml_loss(B, Vab, Vcd, w, P), M),
                               rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------ fast paths against slow versions
def test_mmc_gradient_equals_the_outer_product_sum():
    rng = np.random.RandomState(3)
    Vd, A = rng.randn(20, 3), _spd(3, rng)
    dist = np.sqrt([v @ A @ v for v in Vd])
    slow = sum(np.outer(v, v) * 0.5 / (s + 1e-6) for v, s in zip(Vd, dist, strict=True))
    slow /= dist.sum() + 1e-6
    np.testing.assert_allclose(dissimilarity_gradient(Vd, A), slow, rtol=1e-12)


def test_lsml_gradient_equals_the_loop_over_violations():
    rng = np.random.RandomState(4)
    Vab, Vcd = rng.randn(30, 3), rng.randn(30, 3)
    w = np.full(30, 1 / 30)
    M, P = _spd(3, rng), np.eye(3)
    slow = P - np.linalg.inv(M)
    for va, vc, wk in zip(Vab, Vcd, w, strict=True):
        a, c = va @ M @ va, vc @ M @ vc
        if a > c:
            slow += wk * ((1 - np.sqrt(c / a)) * np.outer(va, va)
                          + (1 - np.sqrt(a / c)) * np.outer(vc, vc))
    np.testing.assert_allclose(lsml_gradient(M, Vab, Vcd, w, P), slow, rtol=1e-12)


def test_sdml_matrix_equals_the_outer_product_sum():
    rng = np.random.RandomState(5)
    V, y = rng.randn(15, 3), np.where(rng.rand(15) > 0.5, 1.0, -1.0)
    P = np.eye(3)
    slow = P + 0.3 * sum(yk * np.outer(v, v) for v, yk in zip(V, y, strict=True))
    np.testing.assert_allclose(sdml_matrix(P, V, y, 0.3), slow, rtol=1e-12)


def test_label_pairs_are_distinct_and_labelled():
    labels = np.repeat(np.arange(4), 6)
    a, b, c, d = label_pairs(labels, 40, random_state=0)
    assert a.size == c.size == 40
    assert np.all(labels[a] == labels[b]) and np.all(a != b)
    assert np.all(labels[c] != labels[d])
    assert len(set(zip(a.tolist(), b.tolist(), strict=True))) == 40
    np.testing.assert_array_equal(label_pairs(labels, 40, random_state=0)[0], a)


def test_covariance_is_the_pseudo_inverse_covariance(iris):
    X = iris[0]
    M = Covariance().fit(X).get_mahalanobis_matrix()
    np.testing.assert_allclose(M, pinvh(np.cov(X, rowvar=False)), rtol=1e-10)
    one = Covariance().fit(X[:, :1]).get_mahalanobis_matrix()
    np.testing.assert_allclose(one, [[1 / np.var(X[:, 0], ddof=1)]])


# ----------------------------------------------------------------------------- fitted members
@pytest.mark.parametrize("make", [
    lambda X: MMC(preprocessor=X), lambda X: MMC(diagonal=True, preprocessor=X),
    lambda X: SDML(prior="covariance", balance_param=1e-5, preprocessor=X),
    lambda X: LSML(random_state=0, preprocessor=X),
    lambda X: LSML_Supervised(random_state=0, preprocessor=X),
    lambda X: Covariance(preprocessor=X)], ids=["MMC", "MMC-diag", "SDML", "LSML",
                                                "LSML_Supervised", "Covariance"])
def test_fit_transform_score_shapes_on_pairs(make, iris):
    X, _, pairs, y = iris
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make(X).fit(pairs, y)
    assert model.transform(X[:5]).shape == (5, 4)
    d = model.pair_distance(pairs)
    assert d.shape == (len(y),) and np.all(d >= 0)
    M = model.get_mahalanobis_matrix()
    v = X[pairs[0, 0]] - X[pairs[0, 1]]
    assert v @ M @ v == pytest.approx(d[0], rel=1e-8, abs=1e-12)
    assert np.all(np.linalg.eigvalsh(M) > -1e-10)
    assert 0.5 < model.score(pairs, y) <= 1.0
    assert model.predict(pairs).shape == (len(y),)


def test_mmc_diagonal_learns_a_diagonal(iris):
    X, _, pairs, y = iris
    M = MMC(diagonal=True, preprocessor=X).fit(pairs, y).get_mahalanobis_matrix()
    np.testing.assert_array_equal(M, np.diag(np.diag(M)))


def test_lsml_quadruplet_forms_agree_and_score(iris):
    X, labels = iris[0], iris[1]
    a, b, c, d = label_pairs(labels, 60, random_state=0)
    idx = np.stack([a, b, c, d], axis=1)
    m1 = LSML(preprocessor=X).fit(idx)
    m2 = LSML().fit(X[idx])
    np.testing.assert_allclose(m1.get_mahalanobis_matrix(), m2.get_mahalanobis_matrix())
    assert m1.loss_curve_ == sorted(m1.loss_curve_, reverse=True)
    assert m1.predict(idx).shape == (60,) and m1.score(idx) > 0.8
    assert m1.decision_function(X[idx]).shape == (60,)
    # uniform weights are the default
    m3 = LSML().fit(X[idx], weights=np.full(60, 2.0))
    np.testing.assert_allclose(m3.get_mahalanobis_matrix(), m2.get_mahalanobis_matrix())


def test_lsml_supervised_fits_samples_and_labels(iris):
    X, labels = iris[0], iris[1]
    model = LSML_Supervised(n_constraints=100, random_state=0).fit(X, labels)
    assert model.transform(X).shape == X.shape and model.n_iter_ >= 1
    assert model.components_.shape == (4, 4)


def test_models_save_and_load(tmp_path, iris):
    X, labels, pairs, y = iris
    for model in (MMC(diagonal=True, preprocessor=X).fit(pairs, y),
                  SDML(prior="covariance", balance_param=1e-5, preprocessor=X).fit(pairs, y),
                  LSML_Supervised(n_constraints=50, random_state=0).fit(X, labels),
                  Covariance().fit(X)):
        path = tmp_path / f"{type(model).__name__}.cmz"
        save_model(path, model)
        back = load_model(path)
        np.testing.assert_allclose(back.transform(X[:7]), model.transform(X[:7]))


def test_exported_and_registered():
    from crossmetric.registry import METHODS

    for name in ("MMC", "SDML", "LSML", "LSML_Supervised", "Covariance"):
        assert name in crossmetric.__all__
    assert {"mmc", "sdml", "lsml", "covariance"} <= set(METHODS)
    assert not any(METHODS[k].in_default for k in ("mmc", "sdml", "lsml", "covariance"))


# -------------------------------------------------------------------------------- bad input
def _one_line(exc_info):
    assert "\n" not in str(exc_info.value)


@pytest.mark.parametrize("call, match", [
    (lambda X, p, y: MMC(init="bogus", preprocessor=X).fit(p, y), "init must be"),
    (lambda X, p, y: MMC(max_proj=0, preprocessor=X).fit(p, y), "max_proj"),
    (lambda X, p, y: MMC(diagonal_c=-1.0, preprocessor=X).fit(p, y), "diagonal_c"),
    (lambda X, p, y: MMC(init=np.ones((3, 3)), preprocessor=X).fit(p, y), "shape"),
    (lambda X, p, y: SDML(sparsity_param=0.0, preprocessor=X).fit(p, y), "sparsity_param"),
    (lambda X, p, y: SDML(prior=np.diag([1.0, 1.0, 1.0, 0.0]), preprocessor=X).fit(p, y),
     "definite"),
    (lambda X, p, y: SDML().fit(np.random.RandomState(0).randn(6, 2, 1), [1, -1] * 3),
     "2 features"),
    (lambda X, p, y: LSML().fit(np.zeros((3, 3, 2))), "shape"),
    (lambda X, p, y: LSML().fit(np.zeros((3, 4), dtype=int)), "preprocessor"),
    (lambda X, p, y: LSML(preprocessor=X).fit(np.full((3, 4), 999)), "indices"),
    (lambda X, p, y: LSML().fit(X[:8].reshape(2, 4, 4), weights=[1.0]), "weights"),
    (lambda X, p, y: LSML(tol=-1.0).fit(X[:8].reshape(2, 4, 4)), "tol"),
    (lambda X, p, y: LSML_Supervised().fit(X[:10], np.zeros(10)), "labels"),
    (lambda X, p, y: LSML_Supervised().fit(X[:10], np.zeros(9)), "one label per sample"),
    (lambda X, p, y: Covariance().fit(X[:1]), "at least 2"),
    (lambda X, p, y: Covariance().fit(np.full((4, 2), np.nan)), "NaN"),
])
def test_bad_input_is_a_one_line_value_error(call, match, iris):
    X, _, pairs, y = iris
    with pytest.raises(ValueError, match=match) as exc_info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(X, pairs, y)
    _one_line(exc_info)


# ------------------------------------------ metric-learn 0.7.0's own numbers (same iris pairs)
#: ``metric_learn.MMC(preprocessor=X).fit(pairs, y).get_mahalanobis_matrix()`` (scikit-learn
#: 1.7) for the ``iris`` fixture's pairs; the diagonal one with ``diagonal=True``
ML_MMC_FULL = np.array([
    [0.01098372309442763, 0.01311452622574378, -0.01929421939130012, -0.02343081227591789],
    [0.01311452622574378, 0.01565869756976827, -0.02303722918332051, -0.02797630634360209],
    [-0.01929421939130012, -0.02303722918332051, 0.03389259713844059, 0.04115901581652957],
    [-0.02343081227591789, -0.02797630634360209, 0.04115901581652957, 0.04998332161048653]])
ML_MMC_DIAG = np.array([7.599302788894485e-17, 0.0, 1.272793288079792, 1.193979874680993])


def test_mmc_matches_metric_learns_numbers(iris):
    X, _, pairs, y = iris
    M = MMC(preprocessor=X).fit(pairs, y).get_mahalanobis_matrix()
    np.testing.assert_allclose(M, ML_MMC_FULL, rtol=1e-6, atol=1e-12)
    Md = MMC(diagonal=True, preprocessor=X).fit(pairs, y).get_mahalanobis_matrix()
    np.testing.assert_allclose(np.diag(Md), ML_MMC_DIAG, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("cls, kw", [
    (crossmetric.MMC_Supervised, dict(diagonal=True)),
    (crossmetric.SDML_Supervised, dict(prior="covariance", balance_param=1e-5))])
def test_supervised_pair_learners_fit_samples_and_labels(cls, kw, iris):
    X, labels, pairs, y = iris
    model = cls(n_constraints=100, random_state=0, **kw).fit(X, labels)
    assert model.transform(X).shape == X.shape and np.isfinite(model.threshold_)
    assert model.score(X[pairs], y) > 0.5
    params = cls().get_params()
    assert "n_constraints" in params and params["preprocessor"] is None
    with pytest.raises(ValueError, match="one label per sample"):
        cls(**kw).fit(X, labels[:-1])
