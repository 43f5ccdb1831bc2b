"""The pair-learner base: input forms, validation, thresholds, distances, sklearn conventions."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score

from crossmetric import CMML, PCCA, Euclidean
from crossmetric.learners._threshold import best_threshold
from crossmetric.pairs._pair_data import PairData


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _pcca(X, **kw):
    return PCCA(n_components=3, max_iter=50, random_state=0, preprocessor=X, **kw)


def test_mixin_order_makes_a_classifier():
    for cls in (PCCA, CMML, Euclidean):
        assert is_classifier(cls())
        names = [c.__name__ for c in cls.__mro__]
        assert names.index("BaseEstimator") > names.index("PairLearnerMixin")


def test_three_input_forms_agree(small_pairs, small_cross):
    X, pairs, y = small_pairs
    m = _pcca(X).fit(pairs, y)
    d_idx = m.pair_distance(pairs)
    np.testing.assert_allclose(m.pair_distance(X[pairs]), d_idx)
    np.testing.assert_allclose(m.pair_distance((X[pairs[:, 0]], X[pairs[:, 1]])), d_idx)
    # fitting on array pairs learns the same model as on index pairs
    m2 = PCCA(n_components=3, max_iter=50, random_state=0).fit(X[pairs], y)
    np.testing.assert_allclose(m2.pair_distance(X[pairs]), d_idx, rtol=1e-5, atol=1e-8)

    Xc, Yc, pc, yc = small_cross
    c = CMML(n_components=3, max_iter=50, random_state=0, preprocessor=(Xc, Yc)).fit(pc, yc)
    np.testing.assert_allclose(c.pair_distance((Xc[pc[:, 0]], Yc[pc[:, 1]])),
                               c.pair_distance(pc))


def test_pair_distance_matches_cross_distance(small_cross):
    X, Y, pairs, y = small_cross
    m = CMML(n_components=3, max_iter=50, random_state=0, preprocessor=(X, Y)).fit(pairs, y)
    D = m.cross_distance(X, Y, block_elements=7)  # many tiny blocks
    np.testing.assert_allclose(m.pair_distance(pairs), D[pairs[:, 0], pairs[:, 1]],
                               rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(D, m.cross_distance(X, Y), rtol=1e-9, atol=1e-12)
    assert m.transform_x(X).shape == (20, 3) and m.transform_y(Y).shape == (20, 3)


def test_predict_is_pm1_and_monotone_in_score(small_pairs):
    X, pairs, y = small_pairs
    m = _pcca(X).fit(pairs, y)
    pred, s = m.predict(pairs), m.pair_score(pairs)
    assert set(np.unique(pred)) <= {-1, 1}
    order = np.argsort(s)
    assert np.all(np.diff(pred[order]) >= 0)  # higher score never predicts -1 after +1
    np.testing.assert_array_equal(m.decision_function(pairs), s)
    np.testing.assert_array_equal(s, -m.pair_distance(pairs))


def _brute_best(d, y, value):
    best = -np.inf
    for t in np.r_[d.min() - 1, d]:
        best = max(best, value(np.where(d <= t, 1, -1)))
    return best


def test_calibrate_accuracy_reaches_best_training_accuracy(small_pairs):
    X, pairs, y = small_pairs
    m = _pcca(X).fit(pairs, y).calibrate_threshold(pairs, y)  # fit sets D² = 1 (the loss's)
    d = m.pair_distance(pairs)
    acc = np.mean(m.predict(pairs) == y)
    assert acc == pytest.approx(_brute_best(d, y, lambda p: np.mean(p == y)))
    m.calibrate_threshold(pairs, y, strategy="f_beta", beta=2.0)
    p = m.predict(pairs)
    tp, fp, fn = np.sum((p == 1) & (y == 1)), np.sum((p == 1) & (y == -1)), np.sum(
        (p == -1) & (y == 1))
    f2 = 5 * tp / (5 * tp + 4 * fn + fp)

    def fbeta(q):
        t, f, n = np.sum((q == 1) & (y == 1)), np.sum((q == 1) & (y == -1)), np.sum(
            (q == -1) & (y == 1))
        return 5 * t / (5 * t + 4 * n + f) if t else 0.0

    assert f2 == pytest.approx(_brute_best(d, y, fbeta))


def test_rate_constrained_strategies():
    rng = np.random.RandomState(0)
    y = np.r_[np.ones(200), -np.ones(200)].astype(int)
    d = np.r_[rng.normal(0, 1, 200), rng.normal(1.5, 1, 200)]
    t = best_threshold(d, y, "max_tpr", min_rate=0.9)
    tnr, tpr = np.mean(d[y == -1] > t), np.mean(d[y == 1] <= t)
    assert tnr >= 0.9
    # no threshold with TNR >= 0.9 has a higher TPR
    for c in np.sort(d):
        if np.mean(d[y == -1] > c) >= 0.9:
            assert np.mean(d[y == 1] <= c) <= tpr + 1e-12
    t = best_threshold(d, y, "max_tnr", min_rate=0.8)
    assert np.mean(d[y == 1] <= t) >= 0.8
    with pytest.raises(ValueError, match="min_rate"):
        best_threshold(d, y, "max_tpr")
    with pytest.raises(ValueError, match="strategy"):
        best_threshold(d, y, "precision")


def test_not_fitted():
    m = PCCA()
    for call in (lambda: m.pair_distance(np.zeros((2, 2, 3))),
                 lambda: m.transform(np.zeros((2, 3))),
                 lambda: m.cross_distance(np.zeros((2, 3)), np.zeros((2, 3))),
                 lambda: m.predict(np.zeros((2, 2, 3))), lambda: m.get_metric()):
        with pytest.raises(NotFittedError):
            call()


@pytest.mark.parametrize("make, match", [
    (lambda X, p, y: (p, np.where(y > 0, 2, -1)), "y must contain only"),
    (lambda X, p, y: (p, np.ones_like(y)), "both"),
    (lambda X, p, y: (p, y[:-1]), "same length"),
    (lambda X, p, y: (np.r_[p, [[0, 99]]], np.r_[y, 1]), r"pairs\[:, 1\].*out of range"),
    (lambda X, p, y: (np.r_[p, [[-1, 0]]], np.r_[y, 1]), r"pairs\[:, 0\].*negative"),
    (lambda X, p, y: (np.zeros((3, 3), dtype=int), y[:3]), "pairs must be one of"),
    (lambda X, p, y: (np.zeros((0, 2), dtype=int), y[:0]), "empty"),
])
def test_fit_errors_name_the_argument(small_pairs, make, match):
    X, pairs, y = small_pairs
    p, yy = make(X, pairs, y)
    with pytest.raises(ValueError, match=match):
        _pcca(X).fit(p, yy)


def test_nan_and_inf_rejected(small_pairs):
    X, pairs, y = small_pairs
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="preprocessor contains NaN or infinity"):
        _pcca(bad).fit(pairs, y)
    arr = X[pairs].copy()
    arr[1, 0, 2] = np.inf
    with pytest.raises(ValueError, match="pairs contains NaN or infinity"):
        PCCA(n_components=2).fit(arr, y)
    m = _pcca(X).fit(pairs, y)
    with pytest.raises(ValueError, match="X contains NaN"):
        m.transform(bad)


def test_wrong_shapes_and_feature_counts(small_pairs, small_cross):
    X, pairs, y = small_pairs
    m = _pcca(X).fit(pairs, y)
    with pytest.raises(ValueError, match="X has 4 features, but PCCA was fitted on 5"):
        m.transform(X[:, :4])
    with pytest.raises(ValueError, match="2-D"):
        m.transform(X[0])
    with pytest.raises(ValueError, match="fitted on 5 features"):
        m.pair_distance(X[pairs][:, :, :4])
    with pytest.raises(ValueError, match="row-aligned"):
        m.pair_distance((X[:3], X[:4]))
    with pytest.raises(ValueError, match="single-modal"):
        PCCA(n_components=2).fit((X[pairs[:, 0]], X[pairs[:, 1], :4]), y)
    Xc, Yc, pc, yc = small_cross
    c = CMML(n_components=2, max_iter=20, preprocessor=(Xc, Yc)).fit(pc, yc)
    with pytest.raises(ValueError, match="Y has 4 features, but CMML was fitted on 6"):
        c.transform_y(Xc)
    with pytest.raises(ValueError, match="preprocessor"):
        CMML(n_components=2).fit(pc, yc)


@pytest.mark.parametrize("n_components", [0, 6, 2.5, -1])
def test_n_components_out_of_range(small_pairs, n_components):
    X, pairs, y = small_pairs
    with pytest.raises(ValueError, match="n_components"):
        PCCA(n_components=n_components, preprocessor=X).fit(pairs, y)


def test_clone_cross_val_and_grid_search(digits):
    from crossmetric.pairs import make_pairs

    X, labels = digits
    pairs, y = make_pairs(labels[:300], max_positives=300, random_state=0)
    model = PCCA(n_components=8, max_iter=60, random_state=0, preprocessor=X)
    c = clone(model)
    assert c.get_params()["n_components"] == 8
    np.testing.assert_array_equal(c.preprocessor, X)
    scores = cross_val_score(model, pairs, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.7)
    gs = GridSearchCV(model, {"n_components": [4, 8]}, cv=2).fit(pairs, y)
    assert gs.best_params_["n_components"] in (4, 8)
    assert np.isfinite(gs.score(pairs, y))


def test_pickle_round_trip(small_pairs, small_cross, tmp_path):
    X, pairs, y = small_pairs
    Xc, Yc, pc, yc = small_cross
    models = [(_pcca(X).fit(pairs, y), pairs, X),
              (_pcca(X, kernel="chi2_rbf").fit(pairs, y), pairs, X),
              (CMML(n_components=3, max_iter=30, preprocessor=(Xc, Yc), kernel=("rbf", "linear"),
                    random_state=0).fit(pc, yc), pc, Xc)]
    for i, (m, p, A) in enumerate(models):
        path = tmp_path / f"m{i}.joblib"
        joblib.dump(m, path)
        m2 = joblib.load(path)
        np.testing.assert_array_equal(m2.pair_distance(p), m.pair_distance(p))
        np.testing.assert_array_equal(m2.transform_x(A), m.transform_x(A))
        m3 = pickle.loads(pickle.dumps(m))
        np.testing.assert_array_equal(m3.predict(p), m.predict(p))


def test_get_metric_and_mahalanobis(small_pairs):
    X, pairs, y = small_pairs
    m = _pcca(X).fit(pairs, y)
    metric = m.get_metric()
    u, v = X[0], X[1]
    M = m.get_mahalanobis_matrix()
    assert metric(u, v, squared=True) == pytest.approx((u - v) @ M @ (u - v))
    assert metric(u, v) == pytest.approx(np.sqrt(m.pair_distance(X[[[0, 1]]])[0]))
    from sklearn.cluster import DBSCAN
    DBSCAN(metric=metric, eps=0.5).fit(X[:10])
    k = _pcca(X, kernel="rbf").fit(pairs, y)
    with pytest.raises(ValueError, match="linear"):
        k.get_mahalanobis_matrix()
    assert k.get_metric()(u, v, squared=True) == pytest.approx(k.pair_distance(X[[[0, 1]]])[0])


def test_stacked_dedupe_keeps_pairs():
    rng = np.random.RandomState(0)
    S = rng.rand(4, 3)
    X, Y = S[[0, 1, 2, 0]], S[[1, 3, 0, 2]]
    data = PairData(X, Y, np.arange(4), np.arange(4))
    Z, i, j = data.stacked(dedupe=True)
    assert Z.shape[0] == 4
    np.testing.assert_array_equal(Z[i], X)
    np.testing.assert_array_equal(Z[j], Y)


def test_euclidean_baseline(small_pairs):
    X, pairs, y = small_pairs
    e = Euclidean(preprocessor=X).fit(pairs, y)
    np.testing.assert_allclose(e.pair_distance(pairs),
                               ((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2).sum(1))
    s = Euclidean(standardize=True, preprocessor=X).fit(pairs, y)
    assert s.transform(X).shape == X.shape
