"""Every feature-based learner honours the pair-learner contract of API.md."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score

import crossmetric
from crossmetric.registry import WRAPPERS, public_classes

#: quick settings of a learner for these checks; a learner not listed takes the
#: ``GENERIC`` settings its constructor accepts
QUICK = {
    "PCCA": dict(n_components=3, max_iter=30),
    "MahaAUC": dict(n_components=3, max_iter=5),
    "LDML": dict(n_components=3, max_iter=30),
    "CLML": dict(n_clusters=2, n_components=3, max_iter=30),
    "KISSME": dict(),
    "Euclidean": dict(),
    "DMLEig": dict(max_iter=50),
    "ITML": dict(max_iter=50),
    "RCA": dict(n_components=3),
    "RCA_Supervised": dict(n_components=3),
    "LFDA": dict(n_components=3),
    "SCML": dict(max_iter=300, output_iter=100),
    "SCML_Supervised": dict(n_basis=20, max_iter=300, output_iter=100),
    "MMC": dict(max_iter=20),
    "MMC_Supervised": dict(max_iter=20, diagonal=True),
    "SDML": dict(balance_param=1e-5),
    "SDML_Supervised": dict(balance_param=1e-5),
    "LSML": dict(max_iter=50),
    "LSML_Supervised": dict(max_iter=50),
    "Covariance": dict(),
    "CMLAUC": dict(n_components=3, max_iter=5),
    "GSM": dict(n_components=3, max_iter=3),
    "CCA": dict(n_components=2),
    "PLS": dict(n_components=2),
    "KCCA": dict(n_components=2),
    "CDFE": dict(n_components=2),
    "KPLS": dict(n_components=2),
    "KCDFE": dict(n_components=2),
    "MvDA": dict(n_components=2),
    "CSR": dict(),
    "KCSR": dict(),
}
GENERIC = dict(n_components=3, max_iter=30)
#: public learners checked elsewhere, and why
ELSEWHERE = {
    "DeepGSM": "fits raw images (tests/test_deep_gsm.py)",
    "CLMLCV": "CLML with a cross-validated n_clusters (tests/test_clml.py)",
    "MCCA": "a multi-view learner fitted on views and labels (tests/test_multiview.py)",
}


def conformance_classes() -> dict:
    """``{class name: quick settings}`` of every public learner of the registry."""
    names = [n for n in public_classes() if n not in WRAPPERS and n not in ELSEWHERE]
    out = {}
    for name in names:
        params = getattr(crossmetric, name)().get_params()
        out[name] = QUICK.get(name, {k: v for k, v in GENERIC.items() if k in params})
    return out


ALL = conformance_classes()
CROSS = {n: kw for n, kw in ALL.items() if getattr(crossmetric, n)()._cross_modal}
SINGLE = {n: kw for n, kw in ALL.items() if n not in CROSS}
RANDOM = {n for n in ALL if "random_state" in getattr(crossmetric, n)().get_params()}


def _make(name, X, Y):
    prep = X if name in SINGLE else (X, Y)
    kw = dict(ALL[name])
    if name in RANDOM:
        kw["random_state"] = 0
    return getattr(crossmetric, name)(preprocessor=prep, **kw)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@pytest.mark.parametrize("name", sorted(ALL))
def test_contract(name, data):
    X, Y, pairs, y = data
    model = _make(name, X, Y)
    assert is_classifier(model)
    params = model.get_params()
    assert set(ALL[name]) <= set(params) and "preprocessor" in params
    with pytest.raises(NotFittedError):
        model.pair_distance(pairs)
    assert model.fit(pairs, y) is model
    d = model.pair_distance(pairs)
    assert d.shape == (len(y),) and np.isfinite(d).all()
    np.testing.assert_array_equal(model.pair_score(pairs), -d)
    np.testing.assert_array_equal(model.decision_function(pairs), -d)
    assert set(np.unique(model.predict(pairs))) <= {-1, 1}
    assert 0.0 <= model.score(pairs, y) <= 1.0
    assert np.isfinite(model.threshold_)
    # the three input forms (cross-modal tuple form for everyone)
    np.testing.assert_allclose(model.pair_distance((X[pairs[:, 0]], Y[pairs[:, 1]]) if name in
                                                   CROSS else (X[pairs[:, 0]], X[pairs[:, 1]])),
                               d, rtol=1e-6, atol=1e-9)
    # pair_distance equals the matching entries of the chunked cross_distance
    B = X if name in SINGLE else Y
    D = model.cross_distance(X, B, block_elements=50)
    np.testing.assert_allclose(D[pairs[:, 0], pairs[:, 1]], d, rtol=1e-6, atol=1e-8)
    fx, fy = model.transform_x(X), model.transform_y(B)
    assert fx.shape[0] == X.shape[0] and fy.shape[0] == B.shape[0]
    with pytest.raises(ValueError, match="features"):
        model.transform_x(X[:, :-1])
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.transform_x(bad)
    # clone and pickle
    c = clone(model)
    assert not hasattr(c, "threshold_")
    m2 = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(m2.pair_distance(pairs), d)
    if name in RANDOM:  # reproducible
        np.testing.assert_array_equal(_make(name, X, Y).fit(pairs, y).pair_distance(pairs), d)


@pytest.mark.parametrize("name", sorted(ALL))
def test_bad_labels_and_single_class(name, data):
    X, Y, pairs, y = data
    with pytest.raises(ValueError, match="y must contain only"):
        _make(name, X, Y).fit(pairs, np.where(y > 0, 1, 0))
    with pytest.raises(ValueError, match="both"):
        _make(name, X, Y).fit(pairs[y == 1], y[y == 1])


@pytest.mark.parametrize("name", ["PCCA", "CMML", "LDML", "KISSME", "CCA"])
def test_cross_val_score_on_index_pairs(name, data):
    X, Y, pairs, y = data
    scores = cross_val_score(_make(name, X, Y), pairs, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_single_modal_extras(name, data):
    X, Y, pairs, y = data
    model = _make(name, X, Y).fit(pairs, y)
    np.testing.assert_array_equal(model.transform(X), model.transform_x(X))
    metric = model.get_metric()
    d = model.pair_distance(np.array([[0, 9]]))[0]
    assert metric(X[0], X[9], squared=True) == pytest.approx(d, rel=1e-6, abs=1e-9)
    if hasattr(model, "components_"):
        assert model.components_.shape[1] == X.shape[1]
        M = model.get_mahalanobis_matrix()
        diff = X[0] - X[9]
        assert diff @ M @ diff == pytest.approx(d, rel=1e-6, abs=1e-9)
