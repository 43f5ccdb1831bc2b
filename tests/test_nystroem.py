"""Nyström kernel approximation: the feature map, and kernel PCCA / CMML / KCCA on it."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from crossmetric.kernels import KERNELS, NystroemMap, pairwise_kernel
from crossmetric.learners.baselines import KCCA
from crossmetric.learners.cmml import CMML
from crossmetric.learners.pcca import PCCA
from crossmetric.pairs import make_pairs


@pytest.mark.parametrize("kernel", KERNELS)
def test_all_landmarks_reproduce_the_kernel(kernel):
    rng = np.random.RandomState(0)
    X, Xnew = rng.rand(120, 6), rng.rand(30, 6)
    fm = NystroemMap(kernel, n_landmarks=500, random_state=0).fit(X)
    assert fm.landmarks_.shape == (120, 6)  # clipped to the number of samples
    K = pairwise_kernel(Xnew, X, kernel=kernel, gamma=fm.gamma_)
    # φ(x)ᵀφ(x') = k_x K⁺ k_x' = k(x, x') when the landmarks are the training samples
    approx = fm.transform(Xnew) @ fm.transform(X).T
    np.testing.assert_allclose(approx, K, atol=1e-6 * max(1.0, np.abs(K).max()))
    # blocked transform equals one block
    small = NystroemMap(kernel, n_landmarks=500, random_state=0, block_elements=7).fit(X)
    np.testing.assert_allclose(small.transform(Xnew), fm.transform(Xnew), rtol=1e-6, atol=1e-9)


def test_fewer_landmarks_approximate_and_errors():
    rng = np.random.RandomState(1)
    X = rng.rand(400, 5)
    K = pairwise_kernel(X, kernel="chi2_rbf", gamma=1.0)
    errs = []
    for m in (20, 100, 300):
        F = NystroemMap("chi2_rbf", gamma=1.0, n_landmarks=m, random_state=0).fit_transform(X)
        errs.append(np.abs(F @ F.T - K).max())
    assert errs[0] > errs[1] > errs[2]
    with pytest.raises(ValueError, match="n_landmarks"):
        NystroemMap(n_landmarks=0).fit(X)
    with pytest.raises(ValueError, match="chi2"):
        NystroemMap("chi2").fit(X - 1)
    with pytest.raises(ValueError, match="features"):
        NystroemMap().fit(X).transform(X[:, :3])
    with pytest.raises(ValueError, match="kernel_approximation"):
        PCCA(kernel="rbf", kernel_approximation="rff", preprocessor=X).fit(
            np.array([[0, 1], [2, 3]]), [1, -1])


@pytest.fixture(scope="module")
def digits():
    X, lab = load_digits(return_X_y=True)
    X = X / 16.0
    tr, te = np.arange(0, 600), np.arange(1000, 1797)
    ptr, ytr = make_pairs(lab[tr], max_positives=1000, random_state=0)
    pte, yte = make_pairs(lab[te], max_positives=1500, random_state=1)
    return X[tr], X[te], ptr, ytr, pte, yte


def test_pcca_nystroem_close_to_exact_kernel(digits):
    Xtr, Xte, ptr, ytr, pte, yte = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact = PCCA(16, kernel="chi2_rbf", max_iter=100, random_state=0,
                     preprocessor=Xtr).fit(ptr, ytr)
        ny = PCCA(16, kernel="chi2_rbf", kernel_approximation="nystroem", n_landmarks=300,
                  max_iter=100, random_state=0, preprocessor=Xtr).fit(ptr, ytr)
    assert ny.feature_map_.landmarks_.shape[0] == 300 and not hasattr(ny, "dual_coef_")
    assert ny.feature_components_.shape == (16, 300)
    a_exact = exact.set_params(preprocessor=Xte).score(pte, yte)
    a_ny = ny.set_params(preprocessor=Xte).score(pte, yte)
    print(a_ny, a_exact)
    assert a_ny > a_exact - 0.02, (a_ny, a_exact)
    # refit without the approximation drops the Nyström tower
    ny.set_params(kernel_approximation=None, preprocessor=Xtr, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ny.fit(ptr, ytr)
    assert hasattr(ny, "dual_coef_") and not hasattr(ny, "feature_map_")


def test_cmml_nystroem_mixed_towers(digits):
    Xtr, Xte, ptr, ytr, pte, yte = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CMML(8, kernel=("rbf", "linear"), kernel_approximation="nystroem",
                     n_landmarks=200, max_iter=100, random_state=0,
                     preprocessor=(Xtr, Xtr[:, ::2])).fit(ptr, ytr)
    assert model.feature_components_x_.shape == (8, 200)
    assert model.components_y_.shape == (8, 32)
    Fx = model.transform_x(Xte)
    np.testing.assert_allclose(Fx, model.feature_map_x_.transform(Xte)
                               @ model.feature_components_x_.T)
    auc = model.set_params(preprocessor=(Xte, Xte[:, ::2])).score(pte, yte)
    assert auc > 0.9


def test_centred_map_keeps_distances_and_gives_each_modality_its_origin():
    rng = np.random.RandomState(0)
    X, Xnew = rng.rand(60, 5), rng.rand(9, 5)
    plain = NystroemMap(gamma=2.0, n_landmarks=40, random_state=0).fit(X)
    centred = NystroemMap(gamma=2.0, n_landmarks=40, random_state=0, center=True).fit(X)
    np.testing.assert_allclose(centred.transform(X).mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(centred.transform(Xnew),
                               plain.transform(Xnew) - plain.transform(X).mean(axis=0))
    d = np.linalg.norm(plain.transform(Xnew)[:, None] - plain.transform(X)[None], axis=2)
    dc = np.linalg.norm(centred.transform(Xnew)[:, None] - centred.transform(X)[None], axis=2)
    np.testing.assert_allclose(dc, d, atol=1e-10)  # one map: distances unchanged
    assert not hasattr(centred.set_params(center=False).fit(X), "feature_mean_")  # a refit


def test_cmml_nystroem_towers_are_centred_so_the_closed_form_start_is_exact():
    # two modalities whose kernel features have different means: CCA's distance of centred
    # samples is a point of two bias-free towers only on centred features
    rng = np.random.RandomState(0)
    Z = rng.normal(size=(80, 3))
    X = np.tanh(Z @ rng.normal(size=(3, 6))) + 2.0
    Y = (Z @ rng.normal(size=(3, 4))) ** 2 + 0.1 * rng.normal(size=(80, 4))
    pairs, y = np.c_[np.arange(80), np.arange(80)], np.ones(80, dtype=int)
    neg = np.c_[np.arange(80), (np.arange(80) + 1 + rng.randint(79, size=80)) % 80]
    pairs, y = np.r_[pairs, neg], np.r_[y, -np.ones(80, dtype=int)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CMML(3, kernel="rbf", kernel_approximation="nystroem", init="cca",
                     early_stopping=False, max_iter=5, random_state=0,
                     preprocessor=(X, Y)).fit(pairs, y)
    for side, V in (("x", X), ("y", Y)):
        fm = getattr(model, f"feature_map_{side}_")
        np.testing.assert_allclose(fm.transform(V).mean(axis=0), 0.0, atol=1e-9)
    # the latent codes of the matching pairs share their mean: no offset between modalities
    Fx, Fy = model.transform_x(X), model.transform_y(Y)
    gap = np.linalg.norm(Fx.mean(axis=0) - Fy.mean(axis=0))
    assert gap < 1e-6 * np.linalg.norm(Fx - Fy, axis=1).mean()


def test_kcca_nystroem_with_all_landmarks_equals_exact(digits):
    Xtr, Xte, ptr, ytr, pte, yte = digits
    X, Y = Xtr[:300], Xtr[:300, ::-1] ** 2
    pairs = np.c_[np.arange(300), np.arange(300)]
    y = np.ones(300, dtype=int)
    y[::7] = -1
    kw = dict(n_components=6, kernel=("rbf", "chi2"), preprocessor=(X, Y))
    exact = KCCA(**kw).fit(pairs, y)
    ny = KCCA(**kw, kernel_approximation="nystroem", n_landmarks=10_000,
              random_state=0).fit(pairs, y)
    np.testing.assert_allclose(ny.correlations_, exact.correlations_, rtol=1e-6)
    np.testing.assert_allclose(ny.cross_distance(Xte[:40], Xte[:30, ::-1] ** 2),
                               exact.cross_distance(Xte[:40], Xte[:30, ::-1] ** 2), atol=1e-6)
    small = KCCA(**kw, kernel_approximation="nystroem", n_landmarks=50, random_state=0)
    assert small.fit(pairs, y).feature_coef_x_.shape == (50, 6)


def test_kcca_switches_to_nystroem_above_the_exact_kernel_size(monkeypatch):
    """``kernel_approximation="auto"`` (KCCA's default): the exact n × n kernels up to
    ``EXACT_KERNEL_MAX_SAMPLES`` samples, Nyström features above, said in one warning."""
    import crossmetric.kernels as kernels
    from crossmetric import make_pairs

    rng = np.random.RandomState(0)
    X, Y = rng.randn(120, 5), rng.randn(120, 5)
    pairs, y = make_pairs(np.arange(120), np.arange(120), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact = KCCA(3, preprocessor=(X, Y)).fit(pairs, y)
    assert hasattr(exact, "dual_coef_x_") and not hasattr(exact, "feature_map_x_")
    monkeypatch.setattr(kernels, "EXACT_KERNEL_MAX_SAMPLES", 50)
    with pytest.warns(UserWarning, match="120 training samples a side.*Nyström"):
        approx = KCCA(3, n_landmarks=30, preprocessor=(X, Y)).fit(pairs, y)
    assert hasattr(approx, "feature_map_x_")
    with pytest.raises(ValueError, match="kernel_approximation must be one of"):
        KCCA(3, kernel_approximation="sometimes", preprocessor=(X, Y)).fit(pairs, y)


def test_a_map_saved_before_center_existed_loads_uncentred():
    import pickle

    from crossmetric.kernels import NystroemMap

    X = np.random.RandomState(0).rand(20, 3)
    m = NystroemMap(gamma=1.0, n_landmarks=5, random_state=0).fit(X)
    state = dict(m.__getstate__())
    del state["center"]                       # as pickled before the parameter existed
    old = NystroemMap.__new__(NystroemMap)
    old.__setstate__(state)
    assert old.get_params()["center"] is False
    np.testing.assert_array_equal(old.transform(X), m.transform(X))
    again = pickle.loads(pickle.dumps(old))
    assert again.get_params() == m.get_params()


def test_kcca_fitted_before_its_maps_centred_loads_into_centred_maps():
    """KCCA's Nyström form centres through ``NystroemMap(center=True)``; a model fitted when
    it kept ``feature_mean_x_`` / ``_y_`` beside uncentred maps embeds as it did."""
    import copy

    from crossmetric import make_pairs
    from crossmetric.datasets import make_cross_modal

    d = make_cross_modal(120, n_classes=6, random_state=0)
    pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    m = KCCA(kernel_approximation="nystroem", n_landmarks=30, n_components=4,
             random_state=0, preprocessor=(d.X, d.Y)).fit(pairs, y)
    assert m.feature_map_x_.center and m.feature_map_y_.center
    state = copy.deepcopy(m.__getstate__())
    for side in "xy":   # the former layout
        fm = state[f"feature_map_{side}_"]
        state[f"feature_mean_{side}_"] = fm.__dict__.pop("feature_mean_")
        fm.center = False
    old = KCCA.__new__(KCCA)
    old.__setstate__(state)
    assert not hasattr(old, "feature_mean_x_") and old.feature_map_y_.center
    np.testing.assert_array_equal(old.cross_distance(d.X[:9], d.Y[:9]),
                                  m.cross_distance(d.X[:9], d.Y[:9]))
