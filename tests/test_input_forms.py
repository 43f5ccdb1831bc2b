"""A fit does not depend on the input form of the pairs (item 5).

The pair-learner base turns index pairs, arrays of pairs and tuples of row-aligned arrays into
one form -- distinct samples in a canonical order and index pairs into them -- and every learner
fits from that, so the three forms of the same pairs give the same model.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from test_api_conformance import ALL, CROSS, _make

from crossmetric import CMML, PCCA
from crossmetric.kernels import estimate_gamma
from crossmetric.pairs._pair_data import PairData, canonical_pairs, distinct_rows


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _forms(name, X, Y, pairs):
    B = Y if name in CROSS else X
    Xp, Bp = X[pairs[:, 0]], B[pairs[:, 1]]
    forms = {"index": pairs, "tuple": (Xp, Bp)}
    if name not in CROSS:
        forms["array"] = np.stack([Xp, Bp], axis=1)
    return forms


@pytest.mark.parametrize("name", sorted(ALL))
def test_same_model_from_every_input_form(name, data):
    X, Y, pairs, y = data
    B = Y if name in CROSS else X
    models = {form: _make(name, X, Y).fit(p, y)
              for form, p in _forms(name, X, Y, pairs).items()}
    ref = models.pop("index")
    d_ref = ref.cross_distance(X, B)
    for form, model in models.items():
        np.testing.assert_allclose(model.cross_distance(X, B), d_ref, rtol=1e-7, atol=1e-9,
                                   err_msg=f"{name}: {form} form differs from index form")
        assert model.threshold_ == pytest.approx(ref.threshold_, rel=1e-7, abs=1e-9)


def test_kernel_cmml_builds_its_kernel_over_distinct_samples(data):
    """The tuple form repeats a sample once per pair it is in; the kernel must not."""
    X, Y, pairs, y = data
    m = CMML(3, kernel="rbf", max_iter=5, random_state=0).fit((X[pairs[:, 0]],
                                                               Y[pairs[:, 1]]), y)
    assert m.dual_coef_x_.shape[1] == len(np.unique(pairs[:, 0]))
    assert m.dual_coef_y_.shape[1] == len(np.unique(pairs[:, 1]))


def test_duplicate_rows_are_merged_and_order_is_canonical():
    rng = np.random.RandomState(3)
    A = rng.rand(20, 3)
    A[7] = A[2]
    A[11] = -0.0 * A[11]  # −0.0 and 0.0 are one value
    perm = rng.permutation(20)
    U1, i1 = distinct_rows(A, np.arange(20))
    U2, i2 = distinct_rows(A[perm], np.arange(20))
    assert U1.shape == (19, 3)
    np.testing.assert_array_equal(U1, U2)
    np.testing.assert_array_equal(U1[i1], A)
    np.testing.assert_array_equal(U2[i2], A[perm])
    # single-modal: the two sides of the pairs are pooled into one sample set
    data = PairData(A[:10], A[10:], np.arange(10), np.arange(10))
    c = canonical_pairs(data, tied=True)
    assert c.X is c.Y and c.X.shape[0] == 19
    np.testing.assert_array_equal(c.X[c.ix], A[:10])
    np.testing.assert_array_equal(c.X[c.iy], A[10:])


def test_kernel_pcca_same_dual_size_from_arrays(data):
    X, _, pairs, y = data
    m = PCCA(3, kernel="rbf", max_iter=5, random_state=0)
    m.fit(np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], axis=1), y)
    assert m.dual_coef_.shape[1] == len(np.unique(pairs))


def test_estimate_gamma_samples_rows_evenly():
    """1,999 rows sorted so that the first 1,000 are one tight cluster: the estimate must
    see the whole set (the old prefix gave γ = 120 instead of 0.044)."""
    rng = np.random.RandomState(0)
    X = np.r_[rng.rand(1000, 5) * 0.1, rng.rand(999, 5) * 0.1 + 3.0]
    full = estimate_gamma(X, "rbf", max_samples=len(X))
    assert estimate_gamma(X, "rbf") == pytest.approx(full, rel=0.05)
    assert estimate_gamma(X[::-1], "rbf") == pytest.approx(full, rel=0.05)
