"""RCA, MLKR, LFDA and SCML (ported from metric-learn 0.7.0): gradients by finite differences,
fast paths against slow obvious versions, shapes, input forms and one-line errors."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris

import crossmetric
from crossmetric.learners import lfda, mlkr, rca, scml
from crossmetric.learners._sample_forms import knn_triplets


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def _fd_grad(f, L, eps=1e-6):
    g = np.zeros_like(L)
    for idx in np.ndindex(*L.shape):
        E = np.zeros_like(L)
        E[idx] = eps
        g[idx] = (f(L + E) - f(L - E)) / (2 * eps)
    return g


# ------------------------------------------------------------------------------- MLKR
@pytest.mark.parametrize("outputs", [1, 3])
def test_mlkr_gradient_matches_finite_differences(outputs):
    rng = np.random.RandomState(0)
    X = rng.randn(15, 4)
    Y = rng.randn(15, outputs)
    L = rng.randn(2, 4) * 0.5
    loss, grad = mlkr.mlkr_loss_grad(L, X, Y)
    fd = _fd_grad(lambda A: mlkr.mlkr_loss_grad(A, X, Y)[0], L)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)


def test_mlkr_loss_equals_the_obvious_loop():
    rng = np.random.RandomState(1)
    X, y, L = rng.randn(9, 3), rng.randn(9), rng.randn(3, 3)
    Z = X @ L.T
    loss = 0.0
    for i in range(9):
        w = np.array([np.exp(-np.sum((Z[i] - Z[j]) ** 2)) if j != i else 0.0
                      for j in range(9)])
        loss += (w @ y / w.sum() - y[i]) ** 2
    assert mlkr.mlkr_loss_grad(L, X, y[:, None])[0] == pytest.approx(loss, rel=1e-10)


def test_mlkr_fits_and_lowers_its_loss(iris):
    X, y = iris
    model = crossmetric.MLKR(n_components=2, max_iter=50, random_state=0).fit(X, y)
    assert model.components_.shape == (2, 4) and model.transform(X).shape == (150, 2)
    L0 = mlkr._initial_components("auto", 2, X, 0)
    assert model.loss_ < mlkr.mlkr_loss_grad(L0, X, y[:, None].astype(float))[0]


# ------------------------------------------------------------------------------- LFDA
def _slow_scatters(X, y, k):
    """The paper's eq. 13-14 with explicit pairwise weights."""
    n, d = X.shape
    sigma = np.zeros(n)
    for i in range(n):
        same = np.flatnonzero(y == y[i])
        dist = np.sort([np.sum((X[i] - X[j]) ** 2) for j in same])
        sigma[i] = np.sqrt(dist[min(k, same.size - 1)])
    Sb, Sw = np.zeros((d, d)), np.zeros((d, d))
    for i in range(n):
        for j in range(n):
            diff = np.outer(X[i] - X[j], X[i] - X[j])
            if y[i] == y[j]:
                nc = np.sum(y == y[i])
                a = np.exp(-np.sum((X[i] - X[j]) ** 2) / (sigma[i] * sigma[j]))
                Sw += 0.5 * a / nc * diff
                Sb += 0.5 * a * (1 / n - 1 / nc) * diff
            else:
                Sb += 0.5 / n * diff
    return Sb, Sw


def test_lfda_scatters_equal_the_papers_pairwise_sums():
    rng = np.random.RandomState(0)
    X, y = rng.randn(24, 3), np.repeat([0, 1, 2], 8)
    Sb, Sw = lfda.local_fisher_scatters(X, y, 3)
    Sb0, Sw0 = _slow_scatters(X, y, 3)
    np.testing.assert_allclose(Sw, Sw0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Sb, Sb0, rtol=1e-10, atol=1e-12)
    # metric-learn 0.7.0's between-class matrix is S_lb + 2 S_lw (same eigenvectors, λ + 2)
    Sb_ml, _ = lfda.local_fisher_scatters(X, y, 3, reproduce_metric_learn=True)
    Sb_ml2, _ = _slow_scatters(X, y, 3)
    assert not np.allclose(Sb_ml, Sb_ml2 + 2 * Sw0)  # its σ differ too
    # the eigenproblem: Sb v = λ Sw v for the returned (plain) rows
    V = lfda.lfda_components(Sb, Sw, 2, "plain").T
    lam = np.diag(V.T @ Sb @ V) / np.diag(V.T @ Sw @ V)
    np.testing.assert_allclose(Sb @ V, Sw @ V * lam, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("embedding", ["weighted", "orthonormalized", "plain"])
def test_lfda_shapes(iris, embedding):
    X, y = iris
    model = crossmetric.LFDA(n_components=2, k=2, embedding_type=embedding).fit(X, y)
    assert model.components_.shape == (2, 4) and model.transform(X[:5]).shape == (5, 2)
    if embedding == "orthonormalized":
        np.testing.assert_allclose(model.components_ @ model.components_.T, np.eye(2),
                                   atol=1e-10)


# -------------------------------------------------------------------------------- RCA
def test_rca_equals_the_inverse_within_chunklet_covariance():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    chunks = np.r_[np.repeat(np.arange(10), 3), -np.ones(10, int)]
    C = np.zeros((3, 3))
    for c in range(10):
        Xc = X[chunks == c] - X[chunks == c].mean(0)
        C += Xc.T @ Xc
    C /= 30
    L = rca.rca_components(X, chunks)
    np.testing.assert_allclose(L.T @ L, np.linalg.inv(C), rtol=1e-10)
    # reduced: the metric of the Fisher subspace, A (AᵀCA)⁻¹ Aᵀ
    L2 = rca.rca_components(X, chunks, 2)
    assert L2.shape == (2, 3)
    np.testing.assert_allclose(L2 @ C @ L2.T, np.eye(2), atol=1e-10)


def test_rca_supervised_chunks(iris):
    X, y = iris
    chunks = rca.chunks_from_labels(y, 30, 3, random_state=0)
    ids = chunks[chunks >= 0]
    assert np.bincount(ids).tolist() == [3] * 30
    assert all(np.unique(y[chunks == c]).size == 1 for c in range(30))
    model = crossmetric.RCA_Supervised(n_chunks=30, chunk_size=2, random_state=0).fit(X, y)
    assert model.components_.shape == (4, 4)
    np.testing.assert_array_equal(
        crossmetric.RCA_Supervised(n_chunks=30, random_state=0).fit(X, y).components_,
        model.components_)


# ------------------------------------------------------------------------------- SCML
def test_scml_distance_differences_and_objective_equal_loops():
    rng = np.random.RandomState(0)
    X, B = rng.randn(10, 3), rng.randn(5, 3)
    T = rng.randint(0, 10, size=(12, 3))
    delta = scml.triplet_distance_differences(X, T, B)
    slow = np.array([[(b @ (X[a] - X[p])) ** 2 - (b @ (X[a] - X[q])) ** 2 for b in B]
                     for a, p, q in T])
    np.testing.assert_allclose(delta, slow, rtol=1e-12, atol=1e-12)
    w = rng.rand(5)
    obj = np.mean([max(1 + delta[t] @ w, 0) for t in range(12)]) + 1e-2 * w.sum()
    assert scml.scml_objective(w, delta, 1e-2) == pytest.approx(obj)
    # the solver's subgradient (mean of the active rows + β) is the gradient off the kinks
    active = 1 + delta @ w > 0
    g = delta[active].sum(0) / 12 + 1e-2
    fd = _fd_grad(lambda v: scml.scml_objective(v.ravel(), delta, 1e-2), w[None])[0]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_knn_triplets_equal_brute_force():
    rng = np.random.RandomState(0)
    X, y = rng.randn(18, 2), np.repeat([0, 1, 2], 6)
    T = knn_triplets(X, y, 2, 3)
    expect = set()
    for a in range(18):
        d = np.sum((X - X[a]) ** 2, 1)
        same = [j for j in np.argsort(d, kind="stable") if y[j] == y[a] and j != a][:2]
        other = [j for j in np.argsort(d, kind="stable") if y[j] != y[a]][:3]
        expect |= {(a, b, c) for b in same for c in other}
    assert set(map(tuple, T.tolist())) == expect and len(T) == len(expect)


def test_scml_triplet_forms_agree_and_are_seeded(iris):
    X, y = iris
    T = knn_triplets(X, y, 2, 2)
    kw = dict(n_basis=40, max_iter=400, output_iter=100, random_state=0)
    by_index = crossmetric.SCML(preprocessor=X, **kw).fit(T)
    assert by_index.components_.shape[1] == 4
    again = crossmetric.SCML(preprocessor=X, **kw).fit(T)
    np.testing.assert_array_equal(again.components_, by_index.components_)
    floats = crossmetric.SCML(**kw).fit(X[T])
    assert floats.transform(X).shape[0] == 150 and np.isfinite(floats.components_).all()
    sup = crossmetric.SCML_Supervised(n_basis=20, max_iter=400, output_iter=100,
                                      random_state=0).fit(X, y)
    assert sup.basis_.shape == (20, 4) and (sup.weights_ >= 0).all()


# ------------------------------------------------------------------ forms and errors
@pytest.mark.parametrize("name", ["RCA", "MLKR", "LFDA", "SCML"])
def test_pair_form_gives_a_pair_learner(name, iris):
    X, y = iris
    pairs, py = crossmetric.make_pairs(y, max_positives=150, random_state=0)
    kw = {"MLKR": dict(max_iter=30, random_state=0),
          "SCML": dict(max_iter=300, n_basis=30, random_state=0)}.get(name, {})
    model = getattr(crossmetric, name)(preprocessor=X, **kw).fit(pairs, py)
    assert model.score(pairs, py) > 0.7
    assert model.pair_distance(pairs).shape == (len(py),)


def _bad_cases():
    X = np.random.RandomState(0).randn(20, 3)
    y = np.repeat([0, 1], 10)
    return [
        ("RCA", {}, (X, np.zeros(19, int)), "same length"),
        ("RCA", {}, (X, np.arange(20)), "chunklet of two"),
        ("RCA", {"n_components": 5}, (X, y), "n_components"),
        ("RCA_Supervised", {"n_chunks": 50}, (X, y), "Not enough samples"),
        ("MLKR", {}, (X, np.array(["a"] * 20)), "numeric"),
        ("MLKR", {"init": "lda"}, (X, y), "init must be"),
        ("MLKR", {"max_iter": 0}, (X, y), "max_iter"),
        ("LFDA", {"embedding_type": "bad"}, (X, y), "embedding_type"),
        ("LFDA", {}, (np.c_[X, np.zeros(20)], y), "singular"),
        ("LFDA", {}, (X[:, :, None], y), "2-D"),
        ("SCML", {}, (X[:, :2],), "triplets must have shape"),
        ("SCML", {"basis": "lda"}, (np.stack([X[:5], X[5:10], X[10:15]], 1),), "basis"),
        ("SCML", {"n_basis": 3}, (np.stack([X[:2], X[2:4], X[4:6]], 1),), "triplets"),
        ("SCML_Supervised", {"k_genuine": 0}, (X, y), "k_genuine"),
        ("SCML_Supervised", {"n_basis": 100}, (X[:6], np.repeat([0, 1], 3)), "n_basis"),
    ]


@pytest.mark.parametrize("name, params, args, match", _bad_cases(),
                         ids=[f"{c[0]}-{c[3]}" for c in _bad_cases()])
def test_bad_input_one_line_value_error(name, params, args, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=match) as err:
            getattr(crossmetric, name)(**params).fit(*args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("module", [rca, mlkr, lfda, scml])
def test_docstring_examples_run(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
