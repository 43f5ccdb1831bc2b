"""CLML: eq. (3) against the explicit x̃ of eq. (4), gradients, CLML(k=1) ≡ LDML, CV of k."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric.learners._local_metrics import _local_backprop, _local_embed
from crossmetric.learners.clml import CLML, CLMLCV, sparsify_assignments
from crossmetric.learners.ldml import LDML
from crossmetric.pairs import make_pairs
from crossmetric.pairs._pair_data import used_rows


@pytest.fixture(scope="module")
def digits():
    X, lab = load_digits(return_X_y=True)
    X, lab = X[:300] / 16.0, lab[:300]
    pairs, y = make_pairs(lab, max_positives=500, random_state=0)
    return X, lab, pairs, y


def _small(seed=0, n=40, d=4, n_pairs=80):
    rng = np.random.RandomState(seed)
    X = np.r_[rng.randn(n // 2, d) - 2, rng.randn(n - n // 2, d) + 2]
    pairs = rng.randint(0, n, size=(n_pairs, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    # each pair of samples once: a repeat drawn with the other label is refused
    _, first = np.unique(np.sort(pairs, axis=1), axis=0, return_index=True)
    pairs = pairs[np.sort(first)]
    y = np.where(rng.rand(pairs.shape[0]) < 0.5, 1, -1)
    y[:2] = [1, -1]
    return X, pairs, y


def test_sparsify_matches_slow_rule():
    rng = np.random.RandomState(0)
    P = rng.dirichlet(np.full(6, 0.3), size=200)
    P[0] = [0.3, 0.3, 0.3, 0.1, 0.0, 0.0]  # tie at the max_assignments boundary
    for min_a, max_a in [(0.01, 3), (0.2, None), (0.0, 1), (0.5, 2)]:
        q = sparsify_assignments(P, min_a, max_a)
        for r in range(P.shape[0]):
            order = sorted(range(6), key=lambda s: (-P[r, s], s))
            top = order if max_a is None else order[:max_a]
            kept = [s for s in top if P[r, s] >= min_a] or [order[0]]
            expect = np.zeros(6)
            expect[kept] = P[r, kept] / P[r, kept].sum()
            np.testing.assert_allclose(q[r], expect, atol=1e-15)
        np.testing.assert_allclose(q.sum(axis=1), 1.0)


def test_direct_embedding_equals_explicit_expansion():
    X, pairs, y = _small()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CLML(3, n_components=5, preprocessor=X, max_iter=10, min_assignment=1e-4,
                     max_assignments=2, random_state=0).fit(pairs, y)
    q = model.cluster_posteriors(X, sparse=True)
    assert np.count_nonzero(q) < q.size  # sparsity is exercised
    Xt = model.expand(X)
    assert Xt.shape == (X.shape[0], 3 * (X.shape[1] + 1))
    # x̃_i = (q_i1 (x_iᵀ, 1), ..., q_ik (x_iᵀ, 1)) built by hand
    slow = np.array([np.concatenate([q[i, s] * np.r_[X[i], 1.0] for s in range(3)])
                     for i in range(X.shape[0])])
    np.testing.assert_allclose(Xt, slow)
    Lt = model.get_expanded_projection()
    assert Lt.shape == (5, 3 * (X.shape[1] + 1))
    np.testing.assert_allclose(model.transform(X), Xt @ Lt.T, atol=1e-12)
    # cross_distance is ℓ2 in z
    Z = model.transform(X)
    np.testing.assert_allclose(model.cross_distance(X[:7], X),
                               ((Z[:7, None] - Z[None]) ** 2).sum(-1), atol=1e-10)


def test_local_embed_and_backprop_against_dense():
    rng = np.random.RandomState(1)
    n, d, p, k = 25, 4, 3, 3
    X = rng.randn(n, d)
    q = sparsify_assignments(rng.dirichlet(np.ones(k) * 0.5, size=n), 0.1, 2)
    Ls, bs = rng.randn(k, p, d), rng.randn(k, p)
    Z = sum(q[:, s, None] * (X @ Ls[s].T + bs[s]) for s in range(k))
    np.testing.assert_allclose(_local_embed(X, q, Ls, bs), Z)
    dZ = rng.randn(n, p)
    gL, gb = _local_backprop(X, q, dZ, k)
    for s in range(k):
        np.testing.assert_allclose(gL[s], sum(q[i, s] * np.outer(dZ[i], X[i]) for i in range(n)))
        np.testing.assert_allclose(gb[s], (q[:, s, None] * dZ).sum(0))


def _objective_pieces(X, pairs, y, k, p, seed=0):
    model = CLML(k, n_components=p, alpha=0.07, random_state=seed)
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    obj = PairLogisticObjective(i, j, y, 1.0, Xu.shape[0], Xu.shape[0])
    rng = np.random.RandomState(seed)
    q = sparsify_assignments(rng.dirichlet(np.ones(k) * 0.5, size=Xu.shape[0]), 0.05, 2)
    return model, Xu, obj, q


def test_gradient_finite_differences():
    X, pairs, y = _small(seed=4)
    k, p, d = 3, 2, X.shape[1]
    model, Xu, obj, q = _objective_pieces(X, pairs, y, k, p)
    rng = np.random.RandomState(5)
    theta = np.r_[rng.randn(k * p * d) * 0.3, rng.randn(k * p) * 0.3, 0.9]
    _, g = model._loss_grad(theta, Xu, q, obj, k, p)
    eps = 1e-6
    num = np.empty_like(theta)
    for t in range(theta.size):
        e = np.zeros_like(theta)
        e[t] = eps
        num[t] = (model._loss_grad(theta + e, Xu, q, obj, k, p)[0]
                  - model._loss_grad(theta - e, Xu, q, obj, k, p)[0]) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-8)


def test_one_cluster_objective_is_ldml():
    X, pairs, y = _small(seed=6)
    p, d = 3, X.shape[1]
    clml, Xu, obj, _ = _objective_pieces(X, pairs, y, 1, p)
    ldml = LDML(p, alpha=0.07)
    rng = np.random.RandomState(7)
    L, b = rng.randn(p, d), 1.7
    q = np.ones((Xu.shape[0], 1))
    f1, g1 = ldml._loss_grad(np.r_[L.ravel(), b], Xu, obj, p)
    f2, g2 = clml._loss_grad(np.r_[L.ravel(), np.zeros(p), b], Xu, q, obj, 1, p)
    assert f1 == pytest.approx(f2, rel=1e-13)
    np.testing.assert_allclose(g2[: p * d], g1[:-1], rtol=1e-12)
    np.testing.assert_allclose(g2[-1], g1[-1], rtol=1e-12)
    np.testing.assert_allclose(g2[p * d: p * d + p], 0.0, atol=1e-12)  # b_1 cancels


@pytest.mark.parametrize("init", ["auto", "array"])
def test_one_cluster_fit_matches_ldml(digits, init):
    X, lab, pairs, y = digits
    if init == "array":
        init = np.random.RandomState(0).randn(6, 64) * 0.1
    ldml = LDML(6, alpha=1e-3, init=init, preprocessor=X, random_state=0).fit(pairs, y)
    clml = CLML(1, n_components=6, alpha=1e-3, init=init, preprocessor=X,
                random_state=0).fit(pairs, y)
    np.testing.assert_allclose(clml.local_components_[0], ldml.components_, atol=1e-5)
    assert clml.bias_ == pytest.approx(ldml.bias_, abs=1e-5)
    assert clml.loss_curve_[-1] == pytest.approx(ldml.loss_curve_[-1], rel=1e-6)
    np.testing.assert_allclose(clml.pair_distance(pairs), ldml.pair_distance(pairs),
                               rtol=1e-4, atol=1e-6)


def test_local_metrics_improve_on_global(digits):
    X, lab, pairs, y = digits
    ldml = LDML(8, preprocessor=X, random_state=0).fit(pairs, y)
    clml = CLML(4, n_components=8, init="ldml", preprocessor=X, random_state=0).fit(pairs, y)
    # starts at LDML's optimum (same penalty for equal local metrics), L-BFGS only goes down
    assert clml.loss_curve_[0] <= ldml.loss_curve_[-1] + 1e-9
    assert clml.loss_curve_[-1] < ldml.loss_curve_[-1]
    assert clml.transform(X).shape == (X.shape[0], 8)
    assert clml.local_components_.shape == (4, 8, 64)
    assert not np.allclose(clml.local_components_[0], clml.local_components_[1])


def test_gmm_on_pca_and_input_forms(digits):
    X, lab, pairs, y = digits
    a = CLML(3, n_components=4, gmm_pca_components=5, covariance_type="full", preprocessor=X,
             random_state=0, max_iter=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a.fit(pairs, y)
        b = CLML(3, n_components=4, gmm_pca_components=5, covariance_type="full", random_state=0,
                 max_iter=50).fit(np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], axis=1), y)
    assert a.pca_.n_components_ == 5
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-6)


def test_bad_parameters(digits):
    X, lab, pairs, y = digits
    with pytest.raises(ValueError, match="n_clusters"):
        CLML(0, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="n_clusters=5000"):
        CLML(5000, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="covariance_type"):
        CLML(2, n_components=4, covariance_type="banana", preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="min_assignment"):
        CLML(2, n_components=4, min_assignment=1.5, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="gmm_pca_components"):
        CLML(2, n_components=4, gmm_pca_components=100, preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="init must have shape"):
        CLML(2, n_components=4, init=np.zeros((3, 4, 64)), preprocessor=X).fit(pairs, y)
    with pytest.raises(NotFittedError):
        CLML(2, n_components=4).transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CLML(2, n_components=4, preprocessor=X, max_iter=3).fit(pairs, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :5])


def test_convergence_warning(digits):
    X, lab, pairs, y = digits
    with pytest.warns(ConvergenceWarning, match="CLML did not converge"):
        CLML(2, n_components=4, preprocessor=X, max_iter=2, random_state=0).fit(pairs, y)


def test_clmlcv_chooses_k_from_grid(digits):
    X, lab, pairs, y = digits
    cv = CLMLCV((1, 3), n_components=6, preprocessor=X, random_state=0, cv=2, max_iter=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cv.fit(pairs, y)
    assert cv.best_n_clusters_ in (1, 3)
    scores = cv.cv_results_["mean_test_score"]
    assert cv.best_n_clusters_ == (1, 3)[int(np.argmax(scores))]
    assert cv.local_components_.shape[0] == cv.best_n_clusters_
    assert "n_clusters" not in cv.get_params()
    np.testing.assert_allclose(cv.transform(X), cv.best_estimator_._embed_x(X))
    assert 0.5 < cv.score(pairs, y) <= 1.0
    np.testing.assert_allclose(cv.pair_probability(pairs),
                               1 / (1 + np.exp(cv.pair_distance(pairs) - cv.bias_)))
    with pytest.raises(ValueError, match="n_clusters_grid"):
        CLMLCV((0, 2), n_components=6, preprocessor=X).fit(pairs, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        auc = CLMLCV((1, 2), n_components=4, scoring="roc_auc", cv=2, preprocessor=X,
                     random_state=0, max_iter=20).fit(pairs, y)
    assert auc.cv_results_["mean_test_score"].max() <= 1.0


def test_per_cluster_array_init():
    X, pairs, y = _small(seed=8)
    k, p = 3, 2
    Xu, i, j = used_rows(X, pairs[:, 0], pairs[:, 1])
    rng = np.random.RandomState(0)
    q = sparsify_assignments(rng.dirichlet(np.ones(k), size=Xu.shape[0]), 0.05, 2)
    init = rng.randn(k, p, X.shape[1])
    model = CLML(k, n_components=p, init=init)
    Ls, bs, b0 = model._initial_parameters(k, p, Xu, q, i, j, None, y)
    np.testing.assert_array_equal(Ls, init)
    np.testing.assert_array_equal(bs, 0.0)
    Z0 = np.stack([sum(q[r, s] * init[s] @ Xu[r] for s in range(k)) for r in range(len(Xu))])
    assert b0 == pytest.approx(np.median(((Z0[i] - Z0[j]) ** 2).sum(1)))
    # a global (n_components, n_features) array is copied to every cluster
    Ls, _, _ = CLML(k, n_components=p, init=init[0])._initial_parameters(k, p, Xu, q, i, j, None, y)
    np.testing.assert_array_equal(Ls, np.repeat(init[:1], k, axis=0))


# ------------------------------------------------------------- no leaks
def test_group_pair_folds_keep_samples_apart():
    from crossmetric.pairs import group_pair_folds

    rng = np.random.RandomState(0)
    a, b = rng.randint(0, 60, 500), rng.randint(0, 60, 500)
    y = np.where(rng.rand(500) < 0.5, 1, -1)
    folds = group_pair_folds(a, b, 3, random_state=0, y=y)
    seen_val = []
    for train, val in folds:
        s_tr = set(a[train]) | set(b[train])
        s_val = set(a[val]) | set(b[val])
        assert not s_tr & s_val and len(val) > 0 and len(train) > 0
        # every pair with neither end in the fold trains; every pair inside it validates
        inside = np.isin(a, list(s_val)) & np.isin(b, list(s_val))
        assert set(val) == set(np.flatnonzero(inside))
        seen_val.append(s_val)
    assert not (seen_val[0] & seen_val[1]) and not (seen_val[1] & seen_val[2])
    assert [v.tolist() for _, v in folds] == [
        v.tolist() for _, v in group_pair_folds(a, b, 3, random_state=0)]
    with pytest.raises(ValueError, match="n_folds"):
        group_pair_folds(a[:2], b[:2], 5)
    with pytest.raises(ValueError, match="both labels"):
        group_pair_folds(a, b, 3, y=np.ones(500))


def test_clmlcv_validation_pairs_share_no_sample_with_training(digits, monkeypatch):
    """Regression: CLMLCV used folds of pairs, so validation samples were trained on."""
    import crossmetric.learners.clml as clml_module

    X, lab, pairs, y = digits
    events = []
    fit = clml_module.CLML._fit

    def spy_fit(self, data, yy):
        events.append(("fit", set(map(tuple, data.X[np.r_[data.ix, data.iy]].round(6)))))
        return fit(self, data, yy)

    def scoring(est, p, yy):
        Xu = est.preprocessor
        events.append(("score", set(map(tuple, Xu[np.unique(p)].round(6)))))
        return est.score(p, yy)

    monkeypatch.setattr(clml_module.CLML, "_fit", spy_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        CLMLCV((1, 2), n_components=4, cv=3, scoring=scoring, preprocessor=X,
               random_state=0, max_iter=20).fit(pairs, y)
    n_checked = 0
    for (kind_a, fitted), (kind_b, scored) in zip(events, events[1:], strict=False):
        if kind_a == "fit" and kind_b == "score":
            assert not fitted & scored
            n_checked += 1
    assert n_checked == 6


def test_gmm_pca_auto_default():
    rng = np.random.RandomState(0)
    X = rng.randn(120, 40)
    lab = np.repeat(np.arange(6), 20)
    X[:, :3] += 3 * lab[:, None] % 5
    pairs, y = make_pairs(lab, max_positives=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = CLML(3, n_components=4, preprocessor=X, random_state=0, max_iter=20).fit(pairs, y)
        assert m.gmm_pca_components == "auto" and m.pca_.n_components_ == 32
        small = CLML(3, n_components=4, preprocessor=X[:, :10], random_state=0,
                     max_iter=20).fit(pairs, y)
        assert small.pca_ is None
    with pytest.raises(ValueError, match="gmm_pca_components"):
        CLML(3, n_components=4, gmm_pca_components="pca", preprocessor=X).fit(pairs, y)


def test_clmlcv_cv_results_equal_gridsearchcv(digits):
    """CLMLCV's scan on explicit folds: GridSearchCV's keys (times included, in its order),
    fold scores, ranks and choice, and the same refitted distances."""
    from sklearn.model_selection import GridSearchCV

    from crossmetric.pairs import group_pair_folds

    X, lab, pairs, y = digits
    X, keep = X[:120], (pairs < 120).all(1)
    pairs, y = pairs[keep], y[keep]
    folds = group_pair_folds(pairs[:, 0], pairs[:, 1], 2, random_state=0, y=y)
    kw = dict(n_components=4, max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cv = CLMLCV((1, 2, 3), cv=folds, preprocessor=X, **kw).fit(pairs, y)
        gs = GridSearchCV(CLML(preprocessor=X, **kw), {"n_clusters": [1, 2, 3]}, cv=folds,
                          scoring="roc_auc", error_score="raise").fit(pairs, y)
    ours = dict(cv.cv_results_)
    assert list(ours) == list(gs.cv_results_)
    for key, want in gs.cv_results_.items():
        got = ours[key]
        if "time" in key:
            assert got.shape == want.shape and (got >= 0).all()
        elif key == "params":
            assert got == want
        else:
            np.testing.assert_array_equal(got, want)
    assert cv.best_n_clusters_ == gs.best_params_["n_clusters"]
    np.testing.assert_array_equal(cv.pair_distance(pairs),
                                  gs.best_estimator_.pair_distance(pairs))
