"""NCA, LMNN, MCC from pairs: labels from components, objectives vs slow loops, gradients."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import NeighborhoodComponentsAnalysis

from crossmetric import Euclidean
from crossmetric.learners.neighbours import (
    LMNN,
    MCC,
    NCA,
    lmnn_loss_grad,
    mcc_loss_grad,
    samples_and_labels,
    target_neighbours,
)
from crossmetric.pairs import labels_from_pairs, make_pairs
from crossmetric.pairs._pair_data import canonical_pairs


def test_labels_from_pairs_are_connected_components():
    i = np.array([0, 1, 3, 5, 0, 2])
    j = np.array([1, 2, 4, 5, 3, 6])
    y = np.array([1, 1, 1, 1, -1, -1])
    lab = labels_from_pairs(i, j, y, 7)
    # {0,1,2} chained by positives; {3,4}; 5 (self pair) and 6 alone; negatives ignored
    np.testing.assert_array_equal(lab, [0, 0, 0, 1, 1, 2, 3])


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.RandomState(0)
    lab = np.r_[np.repeat(np.arange(5), 8), np.repeat(np.arange(5), 6)]
    X = rng.randn(5, 4)[lab] * 2 + rng.randn(70, 4)
    X[:, 3] = 5 * rng.randn(70)                     # a noisy dimension to be shrunk
    pairs, y = make_pairs(lab[:40], n_negatives=1, random_state=0)
    return X, lab, pairs, y   # rows 40-69: held-out samples


def _fd(fun, L, eps=1e-6):
    g = np.zeros_like(L)
    for idx in np.ndindex(L.shape):
        E = np.zeros_like(L)
        E[idx] = eps
        g[idx] = (fun(L + E)[0] - fun(L - E)[0]) / (2 * eps)
    return g


def _lmnn_slow(L, X, lab, targets, mu):
    n = len(X)
    d = lambda a, b: float(np.sum((L @ (X[a] - X[b])) ** 2))  # noqa: E731
    loss = 0.0
    for i in range(n):
        for j in targets[i]:
            if j < 0:
                continue
            loss += (1 - mu) * d(i, j)
            for m in range(n):
                if lab[m] != lab[i]:
                    loss += mu * max(0.0, 1 + d(i, j) - d(i, m))
    return loss


def _mcc_slow(L, X, lab):
    n = len(X)
    D = np.array([[np.sum((L @ (X[a] - X[b])) ** 2) for b in range(n)] for a in range(n)])
    total, count = 0.0, 0
    for i in range(n):
        same = [j for j in range(n) if j != i and lab[j] == lab[i]]
        if not same:
            continue
        others = [k for k in range(n) if k != i]
        z = np.sum(np.exp(-D[i, others]))
        p = np.exp(-D[i]) / z
        total += sum((1 / len(same)) * np.log((1 / len(same)) / p[j]) for j in same)
        count += 1
    return total / count


def test_lmnn_objective_matches_triple_loop_and_gradient(blobs):
    X, lab, _, _ = blobs
    X, lab = X[:40:2], lab[:40:2].copy()
    lab[-1] = 99                                     # a singleton class: impostor only
    rng = np.random.RandomState(1)
    L = rng.randn(3, 4) * 0.3
    T = target_neighbours(X, lab, 2)
    assert np.all(T[-1] == -1)
    loss, grad = lmnn_loss_grad(L, X, lab, T, 0.4)
    assert loss == pytest.approx(_lmnn_slow(L, X, lab, T, 0.4), rel=1e-10)
    np.testing.assert_allclose(grad, _fd(lambda A: lmnn_loss_grad(A, X, lab, T, 0.4), L),
                               rtol=1e-5, atol=1e-6)


def test_target_neighbours_are_nearest_same_class(blobs):
    X, lab, _, _ = blobs
    X, lab = X[:40], lab[:40]
    T = target_neighbours(X, lab, 3)
    for i in range(len(X)):
        cand = [j for j in range(len(X)) if j != i and lab[j] == lab[i]]
        d = [np.sum((X[i] - X[j]) ** 2) for j in cand]
        np.testing.assert_array_equal(T[i], np.array(cand)[np.argsort(d, kind="stable")[:3]])


def test_mcc_objective_is_the_kl_sum_and_gradient(blobs):
    X, lab, _, _ = blobs
    X, lab = X[:40:2], lab[:40:2].copy()
    lab[-1] = 99
    L = np.random.RandomState(2).randn(4, 4) * 0.3
    loss, grad = mcc_loss_grad(L, X, lab)
    assert loss == pytest.approx(_mcc_slow(L, X, lab), rel=1e-9)
    np.testing.assert_allclose(grad, _fd(lambda A: mcc_loss_grad(A, X, lab), L),
                               rtol=1e-5, atol=1e-7)


def test_nca_is_sklearn_on_the_component_labels(blobs):
    X, lab, pairs, y = blobs
    m = NCA(n_components=2, random_state=0, preprocessor=X).fit(pairs, y)
    # fit sees the base's canonical form: distinct samples ordered by content
    Xu, _, _, labels = samples_and_labels(canonical_pairs(m._resolve_pairs(pairs), tied=True), y)
    ref = NeighborhoodComponentsAnalysis(n_components=2, random_state=0).fit(Xu, labels)
    np.testing.assert_allclose(m.components_, ref.components_)
    # the positives of make_pairs connect each class: components are the classes
    assert len(np.unique(labels)) == 5


@pytest.mark.parametrize("cls", [LMNN, MCC, NCA])
def test_learns_beyond_euclidean_and_converges(cls, blobs):
    X, lab, pairs, y = blobs
    pte, yte = make_pairs(lab[40:], random_state=1)
    pte = pte + 40
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = cls(random_state=0, max_iter=300, preprocessor=X).fit(pairs, y)
    base = Euclidean(preprocessor=X).fit(pairs, y).score(pte, yte)
    assert m.score(pte, yte) > base + 0.02
    M = m.get_mahalanobis_matrix()
    assert M[3, 3] < np.median(np.diag(M))          # the noisy dimension is shrunk


@pytest.mark.parametrize("cls", [LMNN, MCC])
def test_needs_a_positive_between_distinct_samples(cls, blobs):
    X, _, _, _ = blobs
    pairs = np.array([[0, 0], [0, 1]])
    with pytest.raises(ValueError, match="at least two samples"):
        cls(preprocessor=X).fit(pairs, np.array([1, -1]))


def test_lmnn_bad_mu(blobs):
    X, _, pairs, y = blobs
    with pytest.raises(ValueError, match="mu"):
        LMNN(mu=1.5, preprocessor=X).fit(pairs, y)
