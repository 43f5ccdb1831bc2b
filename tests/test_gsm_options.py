"""GSM's plateau rule on the smoothed objective, the shared reduction and the rank option."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from crossmetric import GSM, make_pairs
from crossmetric._solvers.stopping import WindowPlateau
from crossmetric.datasets import make_cross_modal


def run(rule, values):
    """Epochs until ``rule`` stops, or None."""
    for k, v in enumerate(values, 1):
        if rule.update(v):
            return k
    return None


def test_window_plateau_ignores_noise_and_slow_steady_decrease():
    # 0.5 % lower every epoch: never a plateau at tol = 1 % per 10-epoch window
    assert run(WindowPlateau(1e-2, 10), 0.995 ** np.arange(200)) is None
    # a flat curve with noise larger than an absolute tol stops after two windows
    noisy = 1.0 + 0.01 * np.random.RandomState(0).randn(100)
    assert run(WindowPlateau(1e-2, 10), noisy) == 20
    # a falling then flat curve stops at the first window boundary after it flattens
    curve = np.r_[np.linspace(2.0, 1.0, 30), np.ones(40)]
    assert run(WindowPlateau(1e-2, 10), curve) == 50
    rule = WindowPlateau(1e-2, 3)
    run(rule, [3.0, 1.0, 2.0])
    assert rule.best == 1.0 and not rule.new_best


@pytest.fixture(scope="module")
def data():
    d = make_cross_modal(120, n_classes=6, n_features_x=8, n_features_y=8, random_state=0)
    pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    return d, pairs, y


def test_window_stopping_trains_longer_and_warns_at_max_iter(data):
    d, pairs, y = data
    kw = {"n_components": 4, "random_state": 0, "preprocessor": (d.X, d.Y)}
    a = GSM(**kw).fit(pairs, y)
    b = GSM(stopping="window", tol=1e-2, n_iter_no_change=10, **kw).fit(pairs, y)
    assert b.n_iter_ % 10 == 0 and b.n_iter_ >= 20
    last, prev = np.mean(b.loss_curve_[-10:]), np.mean(b.loss_curve_[-20:-10])
    assert prev - last <= 1e-2 * prev  # stopped on the plateau
    assert a.n_iter_ != b.n_iter_
    with pytest.warns(ConvergenceWarning, match="max_iter=5"):
        GSM(stopping="window", max_iter=5, **kw).fit(pairs, y)
    with pytest.raises(ValueError, match="stopping must be one of"):
        GSM(stopping="never", **kw).fit(pairs, y)


def test_joint_reduction_is_one_pca_of_both_views(data):
    d, pairs, y = data
    m = GSM(n_components=4, joint_reduction=True, structure="ladf", max_iter=20,
            early_stopping=False, random_state=0, preprocessor=(d.X, d.Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    assert m.reducer_x_ is m.reducer_y_
    rows = np.unique(pairs[:, 0]), np.unique(pairs[:, 1])
    Z = np.vstack([d.X[rows[0]], d.Y[rows[1]]])
    np.testing.assert_allclose(m.reducer_x_[1].mean_, Z.mean(axis=0))
    np.testing.assert_allclose(m.reduce_x(d.X[:3]), m.reduce_y(d.X[:3]))
    wide = make_cross_modal(60, n_classes=6, n_features_x=8, n_features_y=5, random_state=0)
    p2, y2 = make_pairs(wide.labels, wide.labels, max_positives=100, random_state=0)
    with pytest.raises(ValueError, match="joint_reduction needs"):
        GSM(joint_reduction=True, preprocessor=(wide.X, wide.Y)).fit(p2, y2)
    with pytest.raises(ValueError, match="joint_reduction must be True, False or 'auto'"):
        GSM(joint_reduction="yes", preprocessor=(d.X, d.Y)).fit(pairs, y)


def test_per_modality_reduction_of_wide_views_keeps_corresponding_coordinates():
    from crossmetric.learners._gsm_reduction import fit_reducers

    rng = np.random.RandomState(0)
    X, Y = rng.randn(12, 30) + 1.0, rng.randn(9, 30) - 2.0  # fewer rows than features
    rx, ry = fit_reducers(X, Y, joint=False, n_components=None, whiten=False,
                          feature_norm=2.0, rng=np.random.RandomState(0))
    (kx, px, cx), (ky, py, cy) = rx, ry
    assert kx == ky == "pca" and px.n_components_ == 12 + 9 - 2
    np.testing.assert_array_equal(px.components_, py.components_)  # one basis
    np.testing.assert_allclose(px.mean_, X.mean(0))  # each modality its own mean
    np.testing.assert_allclose(py.mean_, Y.mean(0))
    # every training sample kept exactly, on axes that correspond: before each modality's
    # scale, distances are those of the centred views (two separate span PCAs would compare
    # unrelated axes)
    assert cx > 0 and cy > 0
    Zx, Zy = px.transform(X), py.transform(Y)
    D = ((Zx[:, None, :] - Zy[None]) ** 2).sum(-1)
    Dc = (((X - X.mean(0))[:, None, :] - (Y - Y.mean(0))[None]) ** 2).sum(-1)
    np.testing.assert_allclose(D, Dc, rtol=1e-8)
    # rows that span every feature together: centring only, on the full width
    wide_enough = fit_reducers(X[:, :10], Y[:, :10], joint=False, n_components=None,
                               whiten=False, feature_norm=2.0, rng=np.random.RandomState(0))
    assert [r[0] for r in wide_enough] == ["scale", "scale"]


def test_rank_sets_the_rows_of_the_l_matrices(data):
    d, pairs, y = data
    m = GSM(n_components=6, rank=2, max_iter=20, random_state=0, preprocessor=(d.X, d.Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(pairs, y)
    assert m.n_components_ == 2 and m.components_x_.shape == (5, 6)
    assert m.transform_x(d.X[:4]).shape == (4, 5)
    D = m.cross_distance(d.X[:3], d.Y[:4])
    M = m.get_similarity_matrices()  # the slow obvious S of eq. (1) on the reduced features
    x, v = m.reduce_x(d.X[1:2])[0], m.reduce_y(d.Y[2:3])[0]
    S = (x @ M["A"] @ x + v @ M["B"] @ v + 2 * x @ M["C"] @ v + 2 * M["d"] @ x
         + 2 * M["e"] @ v + M["f"])
    np.testing.assert_allclose(D[1, 2], S, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="rank"):
        GSM(rank=0, preprocessor=(d.X, d.Y)).fit(pairs, y)


@pytest.mark.parametrize("structure", ["generalized", "linear", "ladf", "joint_bayesian",
                                       "euclidean", "inner_product"])
def test_identity_init_starts_at_the_scaled_untrained_distance(structure):
    from crossmetric.learners._gsm_measure import embed, gsm_components, gsm_rowwise
    from crossmetric.learners._gsm_training import init_params

    rng = np.random.RandomState(0)
    X, Y = rng.randn(30, 6), rng.randn(30, 6)
    est = GSM(structure=structure, init="identity", learn_f=True)
    r = 4
    params = init_params(est, r, 6, 6, rng, sq_dist=2.5)
    f0 = float(est.f)
    LA, LB, LCx, LCy, d, e, f = gsm_components(params, structure, f0, r, 6, 6)
    S = gsm_rowwise(embed(X, LA, LCx, d), embed(Y, LB, LCy, e), f)
    has_f = structure not in ("linear", "joint_bayesian")
    alpha2 = (abs(f0) if has_f else 1.0) / 2.5
    if structure == "inner_product":
        want = -2 * alpha2 * np.sum(X[:, :r] * Y[:, :r], axis=1)
    else:
        want = alpha2 * np.sum((X[:, :r] - Y[:, :r]) ** 2, axis=1)
    np.testing.assert_allclose(S, want + (f0 if has_f else 0.0), atol=1e-12)


def test_identity_init_ranks_as_the_untrained_distance_before_training():
    # one epoch at a negligible learning rate: the ranking is the untrained distance of the
    # raw features -- the reduced coordinates' and, kept at the start's scale, the rest's
    b = make_cross_modal(n_samples=80, n_classes=40, n_features_x=12, n_features_y=12,
                         random_state=0)
    pairs, y = make_pairs(b.labels, b.labels, n_negatives=3, random_state=0)
    est = GSM(n_components=8, init="identity", joint_reduction=True, learning_rate=1e-12,
              max_iter=1, early_stopping=False, random_state=0, preprocessor=(b.X, b.Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(pairs, y)
    assert est.complement_scale_ > 0
    E = ((b.X[:, None, :] - b.Y[None, :, :]) ** 2).sum(-1)
    np.testing.assert_array_equal(np.argsort(est.cross_distance(b.X, b.Y), axis=1),
                                  np.argsort(E, axis=1))


def test_init_rejects_unknown_values():
    b = make_cross_modal(n_samples=20, n_classes=10, random_state=0)
    pairs, y = make_pairs(b.labels, b.labels, n_negatives=1, random_state=0)
    with pytest.raises(ValueError, match="init must be one of"):
        GSM(init="eye", preprocessor=(b.X, b.Y)).fit(pairs, y)


@pytest.mark.parametrize("special", ["euclidean", "linear", "ladf", "joint_bayesian",
                                     "inner_product"])
def test_start_params_give_the_special_case_measure_exactly(data, special):
    from crossmetric.learners._gsm_training import start_params

    d, pairs, y = data
    for learn_f in (False, True):
        start = GSM(n_components=4, structure=special, max_iter=5, learn_f=learn_f,
                    random_state=0, preprocessor=(d.X, d.Y))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            start.fit(pairs, y)
        est = GSM(n_components=4, learn_f=learn_f)
        params, f0 = start_params(est, start)
        assert set(params) == {"LA", "LB", "LCx", "LCy", "d", "e"} | ({"f"} if learn_f else set())
        Rx, Ry = start.reduce_x(d.X[:20]), start.reduce_y(d.Y[:25])
        S = est._similarity(params, Rx, Ry, f0, 4)
        np.testing.assert_allclose(S, start.cross_distance(d.X[:20], d.Y[:25]), atol=1e-10)


def test_start_from_trains_the_generalized_form_from_the_fitted_special_case(data):
    d, pairs, y = data
    kw = dict(n_components=4, init="identity", joint_reduction=True, random_state=3,
              early_stopping=False, preprocessor=(d.X, d.Y))
    # a negligible step: the generalized form stays at the special case the fit made first,
    # which is GSM(structure=special) with the seed drawn from random_state
    est = GSM(start_from="euclidean", learning_rate=1e-12, max_iter=2, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(pairs, y)
        seed = int(np.random.RandomState(3).randint(np.iinfo(np.int32).max))
        ref = GSM(structure="euclidean", learning_rate=1e-12, max_iter=2,
                  **{**kw, "random_state": seed}).fit(pairs, y)
        # trained for real, it moves away from the start; the same seed, the same model
        a = GSM(start_from="euclidean", max_iter=30, **kw).fit(pairs, y)
        b = GSM(start_from="euclidean", max_iter=30, **kw).fit(pairs, y)
    assert est.structure == "generalized" and set(est.params_) >= {"LA", "LCx", "d", "e"}
    np.testing.assert_allclose(est.cross_distance(d.X, d.Y), ref.cross_distance(d.X, d.Y),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a.cross_distance(d.X, d.Y), b.cross_distance(d.X, d.Y))
    assert not np.allclose(a.cross_distance(d.X, d.Y), ref.cross_distance(d.X, d.Y))


@pytest.mark.parametrize("joint, early", [(True, False), (False, True), (True, True)])
def test_start_from_takes_the_special_cases_reduction_as_a_refit_would(data, monkeypatch,
                                                                       joint, early):
    """The generalized form takes the reduction its special case fitted (the same rows and
    draws) instead of fitting it again: the fit equals the one that refits it."""
    from crossmetric.learners import _gsm_training, gsm

    d, pairs, y = data
    # small batches and rounds: their draws follow the generator, which must be where a refit
    # leaves it
    kw = dict(n_components=4, init="identity", joint_reduction=joint, random_state=3,
              start_from="euclidean", max_iter=15, early_stopping=early, n_identities=3,
              batch_size=32, preprocessor=(d.X, d.Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        taken = GSM(**kw).fit(pairs, y)
        refit = _gsm_training.reduced_views
        monkeypatch.setattr(gsm, "reduced_views",
                            lambda est, data, rx, ry, rng, start=None:
                            refit(est, data, rx, ry, rng))
        fitted = GSM(**kw).fit(pairs, y)
    for a, b in ((taken.reducer_x_, fitted.reducer_x_), (taken.reducer_y_, fitted.reducer_y_)):
        np.testing.assert_array_equal(a[1].components_, b[1].components_)
    np.testing.assert_array_equal(taken.cross_distance(d.X, d.Y),
                                  fitted.cross_distance(d.X, d.Y))


def test_start_mu_holds_the_generalized_form_at_the_fitted_special_case(data):
    """A large ``start_mu`` holds the generalized form near the special case it starts from;
    ``"hold"``, their limit, is that fit itself (measure and training attributes)."""
    d, pairs, y = data
    kw = dict(n_components=4, init="identity", joint_reduction=True, random_state=3,
              start_from="euclidean", penalty="start", mu=1e-4, max_iter=30,
              early_stopping=False, preprocessor=(d.X, d.Y))
    seed = int(np.random.RandomState(3).randint(np.iinfo(np.int32).max))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # the special case the fits start from: the seed they draw from random_state
        special = {k: v for k, v in kw.items() if k != "start_from"} | {"random_state": seed}
        ref = GSM(structure="euclidean", **special).fit(pairs, y)
        free = GSM(**kw).fit(pairs, y)
        held = GSM(start_mu=1e4, **kw).fit(pairs, y)
        same = GSM(start_mu=1e-4, **kw).fit(pairs, y)
        kept = GSM(start_mu="hold", **kw).fit(pairs, y)
    S_ref = ref.cross_distance(d.X, d.Y)
    gap_free = np.abs(free.cross_distance(d.X, d.Y) - S_ref).mean()
    gap_held = np.abs(held.cross_distance(d.X, d.Y) - S_ref).mean()
    assert gap_held < 0.1 * gap_free
    # a large start_mu trains, and so ends near the start, not at it; "hold" is at it
    assert gap_held > 1e-6
    np.testing.assert_allclose(kept.cross_distance(d.X, d.Y), S_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kept.pair_distance(pairs), ref.pair_distance(pairs),
                               rtol=1e-9, atol=1e-9)
    assert kept.structure == "generalized" and set(kept.params_) >= {"LA", "LCx", "d", "e"}
    assert kept.n_iter_ == ref.n_iter_ and kept.loss_curve_ == ref.loss_curve_
    assert kept.batch_mode_ == ref.batch_mode_
    # None means mu: the same fit as start_mu=mu
    np.testing.assert_array_equal(same.cross_distance(d.X, d.Y), free.cross_distance(d.X, d.Y))
    with pytest.raises(ValueError, match="start_mu"):
        GSM(start_mu=-1.0, preprocessor=(d.X, d.Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="start_mu must be a real number >= 0, 'hold' or None"):
        GSM(start_mu="keep", preprocessor=(d.X, d.Y)).fit(pairs, y)


def test_start_from_auto_is_the_euclidean_case_for_the_generalized_form_and_none_else(data):
    d, pairs, y = data
    kw = dict(n_components=4, random_state=3, max_iter=20, preprocessor=(d.X, d.Y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        auto = GSM(start_from="auto", **kw).fit(pairs, y)
        euclid = GSM(start_from="euclidean", **kw).fit(pairs, y)
        special = GSM(structure="linear", start_from="auto", **kw).fit(pairs, y)
        plain = GSM(structure="linear", **kw).fit(pairs, y)
    np.testing.assert_array_equal(auto.cross_distance(d.X, d.Y), euclid.cross_distance(d.X, d.Y))
    assert auto.init_ == euclid.init_ == "start_from=euclidean"
    np.testing.assert_array_equal(special.cross_distance(d.X, d.Y),
                                  plain.cross_distance(d.X, d.Y))
    assert auto.start_from == "auto"  # fit does not change the parameter


def test_start_from_rejects_a_structure_that_cannot_hold_it(data):
    d, pairs, y = data
    with pytest.raises(ValueError, match="start_from='euclidean' needs structure='generalized'"):
        GSM(structure="linear", start_from="euclidean", preprocessor=(d.X, d.Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="start_from must be one of"):
        GSM(start_from="generalized", preprocessor=(d.X, d.Y)).fit(pairs, y)
