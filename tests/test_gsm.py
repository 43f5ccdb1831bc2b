"""Tests of the generalized similarity measure on fixed features (crossmetric.learners.gsm)."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score

from crossmetric.learners._gsm_measure import gsm_loss_grad
from crossmetric.learners.gsm import GSM, STRUCTURES, gsm_components, gsm_matrix, gsm_rowwise
from crossmetric.pairs import make_pairs

ALL = sorted(STRUCTURES)


def random_params(structure, r, p_x, p_y, rng, learn_f=False):
    shapes = {"LA": (r, p_x), "LB": (r, p_y), "LCx": (r, p_x), "LCy": (r, p_y),
              "U": (r, p_x), "V": (r, p_y), "d": (p_x,), "e": (p_y,), "c": (r,), "a": (r,),
              "b": (r,)}
    params = {k: rng.normal(size=shapes[k]) for k in STRUCTURES[structure]}
    if learn_f and structure not in ("linear", "joint_bayesian"):
        params["f"] = np.asarray(rng.normal())
    return params


def explicit_S(x, y, LA, LB, LCx, LCy, d, e, f):
    """The 6-block quadratic form of eq. (1), written out."""
    A, B, C = LA.T @ LA, LB.T @ LB, -(LCx.T @ LCy)
    M = np.block([[A, C, d[:, None]], [C.T, B, e[:, None]],
                  [d[None, :], e[None, :], np.array([[f]])]])
    z = np.concatenate([x, y, [1.0]])
    return z @ M @ z


def embedded(params, structure, f0, r, X, Y):
    LA, LB, LCx, LCy, d, e, f = gsm_components(params, structure, f0, r, X.shape[1], Y.shape[1])
    FX = np.hstack([X @ LA.T, X @ LCx.T, (X @ d)[:, None]])
    FY = np.hstack([Y @ LB.T, Y @ LCy.T, (Y @ e)[:, None]])
    return FX, FY, (LA, LB, LCx, LCy, d, e, f)


@pytest.fixture(scope="module")
def two_views():
    """Digits as two modalities: pixels, and a mirrored noisy copy with fewer features."""
    digits = load_digits()
    rng = np.random.RandomState(0)
    X = digits.data[:600]
    Y = X[:, ::-1][:, :48] + rng.normal(0, 2.0, (600, 48))
    return X, Y, digits.target[:600]


# ------------------------------------------------------------------------ the measure
@pytest.mark.parametrize("structure", ALL)
def test_factorised_equals_six_block_quadratic_form(structure):
    rng = np.random.RandomState(1)
    p = 5
    p_y = p if structure in ("ladf", "joint_bayesian") else 4
    r = 3
    params = random_params(structure, r, p, p_y, rng, learn_f=True)
    X, Y = rng.normal(size=(7, p)), rng.normal(size=(6, p_y))
    FX, FY, comps = embedded(params, structure, -1.9, r, X, Y)
    M = gsm_matrix(FX, FY, comps[-1])
    slow = np.array([[explicit_S(x, y, *comps) for y in Y] for x in X])
    np.testing.assert_allclose(M, slow, rtol=1e-10, atol=1e-10)
    # row-wise fast path equals the matrix diagonal
    np.testing.assert_allclose(gsm_rowwise(FX[:6], FY, comps[-1]), np.diag(M[:6]), rtol=1e-12)


def test_special_cases_equal_their_formulas():
    rng = np.random.RandomState(2)
    p, r, f0 = 4, 4, -1.9
    x, y = rng.normal(size=p), rng.normal(size=p)
    X, Y = x[None], y[None]

    def S(params, structure, f=f0):
        FX, FY, comps = embedded(params, structure, f, r, X, Y)
        return gsm_rowwise(FX, FY, comps[-1])[0]

    # Mahalanobis distance (§3.2): A = B = M, C = −M, d = e = 0, f = 0
    L = rng.normal(size=(r, p))
    P = dict(LA=L, LB=L, LCx=L, LCy=L, d=np.zeros(p), e=np.zeros(p))
    assert np.isclose(S(P, "generalized", 0.0), (x - y) @ L.T @ L @ (x - y))
    # bilinear similarity xᵀMy (§3.2): A = B = 0, C = M / 2
    Pm, Qm = rng.normal(size=(r, p)), rng.normal(size=(r, p))
    P = dict(LA=np.zeros((r, p)), LB=np.zeros((r, p)), LCx=Pm, LCy=Qm, d=np.zeros(p),
             e=np.zeros(p))
    M = -2.0 * Pm.T @ Qm
    assert np.isclose(S(P, "generalized", 0.0), x @ M @ y)
    # linear: d = e = 0, f = 0 whatever f0 says
    P = random_params("linear", r, p, p, rng)
    want = (np.sum((P["LA"] @ x) ** 2) + np.sum((P["LB"] @ y) ** 2)
            - 2 * (P["LCx"] @ x) @ (P["LCy"] @ y))
    assert np.isclose(S(P, "linear"), want)
    # LADF, eq. (8): xᵀAx + yᵀAy + 2xᵀCy + 2dᵀ(x + y) + f
    P = random_params("ladf", r, p, p, rng)
    A, C = P["LA"].T @ P["LA"], -(P["LCx"].T @ P["LCy"])
    want = x @ A @ x + y @ A @ y + 2 * x @ C @ y + 2 * P["d"] @ (x + y) + f0
    assert np.isclose(S(P, "ladf"), want)
    # Joint Bayesian, eq. (9): xᵀAx + yᵀAy − 2xᵀGy, f = 0
    P = random_params("joint_bayesian", r, p, p, rng)
    A, G = P["LA"].T @ P["LA"], P["LCx"].T @ P["LCy"]
    assert np.isclose(S(P, "joint_bayesian"), x @ A @ x + y @ A @ y - 2 * x @ G @ y)
    # Baseline-1: affine Euclidean distance ‖(Ux + a) − (Vy + b)‖² + f, c = a − b
    P = random_params("euclidean", r, p, p, rng)
    want = np.sum((P["U"] @ x - P["V"] @ y + P["c"]) ** 2) + f0
    assert np.isclose(S(P, "euclidean"), want)
    # Baseline-2: affine inner product −2 (Ux + a)ᵀ(Vy + b) + f
    P = random_params("inner_product", r, p, p, rng)
    want = -2 * (P["U"] @ x + P["a"]) @ (P["V"] @ y + P["b"]) + f0
    assert np.isclose(S(P, "inner_product"), want)


# ------------------------------------------------------------------------ the gradient
@pytest.mark.parametrize("structure", ALL)
def test_objective_gradient_matches_finite_differences(structure):
    rng = np.random.RandomState(3)
    p_x = 5
    p_y = p_x if structure in ("ladf", "joint_bayesian") else 4
    r = 3
    params = random_params(structure, r, p_x, p_y, rng, learn_f=True)
    for k in params:
        params[k] = params[k] * 0.5
    X, Y = rng.normal(size=(8, p_x)), rng.normal(size=(7, p_y))
    ix = rng.randint(0, 8, 40)
    iy = rng.randint(0, 7, 40)
    ell = rng.choice([-1.0, 1.0], 40)
    w = rng.uniform(0.5, 1.5, 40) / 40
    mu = 0.05
    loss, grad = gsm_loss_grad(params, structure, -1.9, X, Y, ix, iy, ell, w, mu)
    assert set(grad) == set(params)
    eps = 1e-6
    for k, v in params.items():
        flat = np.atleast_1d(v).astype(float).ravel()
        num = np.empty_like(flat)
        for i in range(flat.size):
            for sign in (1, -1):
                pert = dict(params)
                q = flat.copy()
                q[i] += sign * eps
                pert[k] = q.reshape(np.shape(v))
                val, _ = gsm_loss_grad(pert, structure, -1.9, X, Y, ix, iy, ell, w, mu)
                num[i] = val if sign == 1 else (num[i] - val) / (2 * eps)
        np.testing.assert_allclose(np.ravel(grad[k]), num, rtol=1e-4, atol=1e-6,
                                   err_msg=f"{structure}: d/d{k}")
    assert np.isfinite(loss)


def test_sample_based_gradient_sums_over_duplicate_pairs():
    """Listing a pair twice doubles its contribution (partners are summed, eq. 18)."""
    rng = np.random.RandomState(4)
    params = random_params("generalized", 3, 4, 4, rng)
    X, Y = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    ix, iy = np.array([0, 1, 2]), np.array([1, 1, 3])
    ell, w = np.array([-1.0, 1.0, 1.0]), np.ones(3)
    l1, g1 = gsm_loss_grad(params, "generalized", -1.9, X, Y, ix, iy, ell, w, 0.0)
    l2, g2 = gsm_loss_grad(params, "generalized", -1.9, X, Y, np.r_[ix, ix], np.r_[iy, iy],
                           np.r_[ell, ell], np.r_[w, w], 0.0)
    assert np.isclose(l2, 2 * l1)
    for k in g1:
        np.testing.assert_allclose(g2[k], 2 * g1[k])


@pytest.mark.parametrize("structure", ALL)
def test_dense_grid_scoring_equals_the_gathered_pairs(structure, monkeypatch):
    """A batch that fills its x × y grid is scored by one matrix product (the sample-based
    batches); the loss and gradient equal those of the pair-by-pair gather, repeats included."""
    from crossmetric.learners import _gsm_measure

    rng = np.random.RandomState(5)
    p_x = 6
    p_y = p_x if structure in ("ladf", "joint_bayesian") else 5
    params = random_params(structure, 4, p_x, p_y, rng, learn_f=True)
    X, Y = rng.normal(size=(9, p_x)), rng.normal(size=(7, p_y))
    ix, iy = np.divmod(np.arange(63), 7)
    ix, iy = np.r_[ix, ix[:5]], np.r_[iy, iy[:5]]
    ell = rng.choice([-1.0, 1.0], ix.size)
    w = rng.uniform(0.5, 1.5, ix.size) / ix.size
    results = []
    for share in (0.0, 2.0):  # always the grid, never the grid
        monkeypatch.setattr(_gsm_measure, "DENSE_GRID_SHARE", share)
        results.append(gsm_loss_grad(params, structure, -1.9, X, Y, ix, iy, ell, w, 0.01))
    (l_grid, g_grid), (l_pairs, g_pairs) = results
    assert np.isclose(l_grid, l_pairs)
    assert g_grid.keys() == g_pairs.keys()
    for k in g_grid:
        np.testing.assert_allclose(g_grid[k], g_pairs[k], rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------ the learner
@pytest.mark.parametrize("structure", ALL)
def test_fitted_pair_distance_is_the_quadratic_form(two_views, structure):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:200], labels[:200], n_negatives=1, max_positives=800,
                          random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = GSM(6, structure=structure, max_iter=3, random_state=0,
                    preprocessor=(X[:200], Y[:200])).fit(pairs, y)
    blocks = model.get_similarity_matrices()
    M = np.block([[blocks["A"], blocks["C"], blocks["d"][:, None]],
                  [blocks["C"].T, blocks["B"], blocks["e"][:, None]],
                  [blocks["d"][None, :], blocks["e"][None, :], np.array([[blocks["f"]]])]])
    Xr, Yr = model.reduce_x(X[:200]), model.reduce_y(Y[:200])
    Z = np.hstack([Xr[pairs[:, 0]], Yr[pairs[:, 1]], np.ones((len(pairs), 1))])
    slow = np.einsum("ij,jk,ik->i", Z, M, Z)
    np.testing.assert_allclose(model.pair_distance(pairs), slow, rtol=1e-8, atol=1e-8)
    # chunked all-pairs distance agrees with per-pair distances
    D = model.cross_distance(X[:30], Y[:40], block_elements=100)
    ii, jj = np.meshgrid(np.arange(30), np.arange(40), indexing="ij")
    np.testing.assert_allclose(D.ravel(), model.pair_distance(
        (X[:30][ii.ravel()], Y[:40][jj.ravel()])), rtol=1e-10, atol=1e-10)
    if structure in ("linear", "joint_bayesian"):
        assert model.f_ == 0.0
        assert np.all(blocks["d"] == 0) and np.all(blocks["e"] == 0)
    if structure in ("ladf", "joint_bayesian"):
        np.testing.assert_allclose(blocks["A"], blocks["B"])
    assert model.transform_x(X[:3]).shape == (3, 2 * 6 + 1)


def test_training_lowers_the_objective_and_matches(two_views):
    X, Y, labels = two_views
    tr, te = np.arange(400), np.arange(400, 600)
    pairs, y = make_pairs(labels[tr], labels[tr], n_negatives=1, max_positives=4000,
                          random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = GSM(16, max_iter=15, random_state=0,
                    preprocessor=(X[tr], Y[tr])).fit(pairs, y)
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    assert model.n_iter_ == len(model.loss_curve_)
    D = model.cross_distance(X[te], Y[te])
    # class-level retrieval accuracy far above chance (0.1)
    acc = np.mean(labels[te][np.argmin(D, axis=1)] == labels[te])
    assert acc > 0.6
    # same-class pairs get S below the threshold, most different-class pairs above
    pt, yt = make_pairs(labels[te], labels[te], random_state=1)
    model_te = clone(model).set_params(preprocessor=(X[te], Y[te]))
    model_te.__dict__.update({k: v for k, v in model.__dict__.items() if k.endswith("_")})
    assert model_te.score(pt, yt) > 0.85


def test_learn_f_changes_f_and_fixed_f_does_not(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:200], labels[:200], max_positives=800, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed = GSM(5, max_iter=3, random_state=0, preprocessor=(X[:200], Y[:200]))
        fixed.fit(pairs, y)
        learnt = clone(fixed).set_params(learn_f=True).fit(pairs, y)
    assert fixed.f_ == -1.9
    assert "f" in learnt.params_ and learnt.f_ != -1.9


def test_deterministic_and_convergence_warning(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:150], labels[:150], max_positives=500, random_state=0)
    kw = dict(max_iter=2, random_state=3, preprocessor=(X[:150], Y[:150]))
    with pytest.warns(ConvergenceWarning):
        a = GSM(4, **kw).fit(pairs, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        b = GSM(4, **kw).fit(pairs, y)
    np.testing.assert_array_equal(a.pair_distance(pairs), b.pair_distance(pairs))


def test_converges_early_with_large_tol(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:150], labels[:150], max_positives=500, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = GSM(4, max_iter=50, tol=10.0, n_iter_no_change=2, random_state=0,
                    preprocessor=(X[:150], Y[:150])).fit(pairs, y)
    assert model.n_iter_ == 3  # epoch 1 sets the best, epochs 2-3 do not improve by tol


def test_cross_val_score_with_index_pairs(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:200], labels[:200], max_positives=600, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(GSM(5, max_iter=30, random_state=0,
                                     preprocessor=(X[:200], Y[:200])), pairs, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)


@pytest.mark.parametrize("n_components", [None, 6])
def test_reduction_keeps_relative_variances_unless_whiten(two_views, n_components):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:150], labels[:150], max_positives=300, random_state=0)
    prep = (X[:150], Y[:150])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = GSM(n_components, max_iter=1, feature_norm=3.0, random_state=0,
                    preprocessor=prep).fit(pairs, y)
        white = GSM(n_components, max_iter=1, whiten=True, random_state=0,
                    preprocessor=prep).fit(pairs, y)
    # the reduction is fitted on the distinct samples that the pairs use
    ux, uy = np.unique(pairs[:, 0]), np.unique(pairs[:, 1])
    for Z, reduce in ((X[ux], plain.reduce_x), (Y[uy], plain.reduce_y)):
        R = reduce(Z)
        # one scalar per modality: mean squared norm feature_norm², variances proportional
        assert np.isclose(np.mean(np.sum(R ** 2, axis=1)), 9.0)
        v = R.var(axis=0)
        ref = (Z - Z.mean(0)).var(axis=0) if n_components is None else None
        if ref is not None:
            assert np.allclose(v / v.max(), ref / ref.max())
        else:
            assert np.all(np.diff(v) <= 1e-9)  # PCA order kept, not equalised
            assert v[0] > 2 * v[-1]
    for Z, reduce in ((X[ux], white.reduce_x), (Y[uy], white.reduce_y)):
        v = reduce(Z).var(axis=0)
        keep = (Z.std(axis=0) > 0) if n_components is None else slice(None)
        assert np.allclose(v[keep], 1.0, rtol=0.02)


def test_euclidean_init_starts_at_the_distance_special_case(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:100], labels[:100], max_positives=200, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kw = dict(max_iter=1, learning_rate=1e-12, random_state=0,
                  preprocessor=(X[:100], Y[:100]))
        eu = GSM(5, init="euclidean", **kw).fit(pairs, y)
        rnd = GSM(5, init="random", **kw).fit(pairs, y)
    p = eu.params_
    assert np.allclose(p["LCx"], p["LA"], atol=1e-9) and np.allclose(p["LCy"], p["LB"], atol=1e-9)
    assert not np.allclose(rnd.params_["LCx"], rnd.params_["LA"], atol=1e-3)
    # S = ‖L_A x − L_B y‖² + 2dᵀx + 2eᵀy + f ≥ f (d = e = 0 at the start)
    assert np.all(eu.pair_distance(pairs) >= eu.f_ - 1e-6)


def test_array_pairs_and_verbose(two_views, capsys):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:100], labels[:100], max_positives=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = GSM(None, max_iter=2, verbose=1, random_state=0)
        model.fit((X[pairs[:, 0]], Y[pairs[:, 1]]), y)
    out = capsys.readouterr().out
    assert "objective" in out and len(out.strip().splitlines()) == 3
    assert model.n_components_ == 48
    assert model.predict((X[:5], Y[:5])).shape == (5,)


def test_bad_input_raises_value_error(two_views):
    X, Y, labels = two_views
    pairs, y = make_pairs(labels[:100], labels[:100], max_positives=300, random_state=0)
    prep = (X[:100], Y[:100])
    with pytest.raises(ValueError, match="structure"):
        GSM(4, structure="cosine", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="same dimension"):
        GSM(None, structure="ladf", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="n_components"):
        GSM(1000, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="mu"):
        GSM(4, mu=-1.0, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="feature_norm"):
        GSM(4, feature_norm=0.0, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="class_weight"):
        GSM(4, class_weight="auto", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="init"):
        GSM(4, init="zeros", preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="f must be"):
        GSM(4, f=np.nan, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="y"):
        GSM(4, preprocessor=prep).fit(pairs, np.ones_like(y))
    bad = X[:100].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        GSM(4, preprocessor=(bad, Y[:100])).fit(pairs, y)
    with pytest.raises(NotFittedError):
        GSM(4).transform_x(X[:3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = GSM(4, max_iter=1, random_state=0, preprocessor=prep).fit(pairs, y)
    with pytest.raises(ValueError, match="features"):
        model.transform_x(X[:3, :10])
    with pytest.raises(ValueError, match="features"):
        model.cross_distance(X[:3], X[:3])


def test_gsm_module_does_not_import_torch():
    import importlib

    importlib.import_module("crossmetric.learners.gsm")
    if "torch" in sys.modules:  # another test may have imported it; check the source instead
        import crossmetric.learners.gsm as mod

        assert "import torch" not in open(mod.__file__).read()
    else:
        assert "torch" not in sys.modules


# ----------------------------------------- sample-based identity batches
def _instance_task(n=120, seed=0):
    """Every object an identity with one sample per modality; complete positives."""
    rng = np.random.RandomState(seed)
    Z = rng.normal(size=(n, 6))
    X = np.hstack([Z, rng.normal(size=(n, 4))]) + 0.2 * rng.normal(size=(n, 10))
    Y = Z @ rng.normal(size=(6, 8)) + 0.2 * rng.normal(size=(n, 8))
    inst = np.arange(n)
    pairs, y = make_pairs(inst, inst, n_negatives=5, random_state=seed)
    return X, Y, pairs, y


def test_identity_rounds_cover_identities_without_duplicates():
    from crossmetric._solvers.batches import IdentityRounds

    ids_x = np.repeat(np.arange(10), 3)          # 10 identities, 3 samples each in X
    ids_y = np.r_[np.repeat(np.arange(10), 2), [99]]  # 2 in Y; identity 99 only in Y
    rounds = IdentityRounds(ids_x, ids_y, 4, n_images_x=2, n_images_y=5, random_state=0)
    assert rounds.n_identities == 4 and 99 not in rounds.identities
    seen = []
    for bx, by in rounds.epoch() + rounds.epoch():
        assert np.unique(bx).size == bx.size and np.unique(by).size == by.size
        assert set(ids_x[bx]) == set(ids_y[by]) and len(set(ids_x[bx])) == 4
        assert np.all(np.bincount(ids_x[bx]) <= 2) and np.all(np.bincount(ids_y[by]) <= 2)
        seen.append(bx)
    counts = np.bincount(np.concatenate(seen), minlength=30)
    # every X sample drawn, as evenly as the rounds allow
    assert counts.min() >= 1 and counts.max() - counts.min() <= 2
    with pytest.raises(ValueError, match="2 identities"):
        IdentityRounds([0, 1], [0, 5], 2)


def _reference_rounds(ids_x, ids_y, k, o_x, o_y, seed, n_rounds):
    """IdentityRounds' draws written with NumPy set operations (the slow obvious version)."""
    rng = np.random.RandomState(seed)
    usable = np.intersect1d(ids_x, ids_y)
    k = min(k, usable.size)
    rows = [[np.flatnonzero(ids == c) for c in usable] for ids in (ids_x, ids_y)]
    queue = [[rng.permutation(r) for r in side] for side in rows]
    order = np.empty(0, dtype=np.int64)

    def take(side, c, o):
        q = queue[side][c]
        if q.size >= o:
            queue[side][c] = q[o:]
            return q[:o]
        nxt = rng.permutation(rows[side][c])
        fill = nxt[~np.isin(nxt, q)][: o - q.size]
        queue[side][c] = nxt[~np.isin(nxt, fill)]
        return np.concatenate([q, fill])

    out = []
    for _ in range(n_rounds):
        if order.size < k:
            order = np.concatenate([order, rng.permutation(
                np.setdiff1d(np.arange(usable.size), order))])
        chosen, order = order[:k], order[k:]
        out.append((np.concatenate([take(0, c, o_x) for c in chosen]),
                    np.concatenate([take(1, c, o_y) for c in chosen])))
    return out


@pytest.mark.parametrize("sizes,k,o_x,o_y", [((1, 1), 8, 2, 2), ((1, 1), 5, 1, 1),
                                             ((1, 4), 6, 1, 3), ((3, 2), 4, 2, 5),
                                             ((7, 5), 3, 3, 2), ((2, 9), 20, 1, 4)])
def test_identity_rounds_equal_the_numpy_set_version(sizes, k, o_x, o_y):
    from crossmetric._solvers.batches import IdentityRounds

    rng = np.random.RandomState(1)
    ids_x = rng.permutation(np.repeat(np.arange(12), sizes[0]))
    ids_y = rng.permutation(np.r_[np.repeat(np.arange(12), sizes[1]), [40, 41]])
    rounds = IdentityRounds(ids_x, ids_y, k, n_images_x=o_x, n_images_y=o_y, random_state=5)
    got = [rounds.round() for _ in range(60)]
    ref = _reference_rounds(ids_x, ids_y, k, o_x, o_y, 5, 60)
    for (gx, gy), (rx, ry) in zip(got, ref, strict=True):
        assert gx.dtype == np.int64 and gy.dtype == np.int64
        np.testing.assert_array_equal(gx, rx)
        np.testing.assert_array_equal(gy, ry)


def test_hardest_negatives_and_all_pairs_match_bruteforce():
    from crossmetric._solvers.batches import hardest_negatives
    from crossmetric.learners._gsm_training import all_pairs

    rng = np.random.RandomState(1)
    S = rng.normal(size=(7, 9))
    same = rng.rand(7, 9) < 0.2
    keep = hardest_negatives(S, same, 2)
    ref = np.zeros_like(same)
    for a in range(7):
        neg = np.flatnonzero(~same[a])
        ref[a, neg[np.argsort(S[a, neg])[:2]]] = True
    for b in range(9):
        neg = np.flatnonzero(~same[:, b])
        ref[neg[np.argsort(S[neg, b])[:2]], b] = True
    np.testing.assert_array_equal(keep, ref)
    ix, iy, ell, w = all_pairs(same, keep)
    assert np.isclose(w[ell == -1].sum(), 0.5) and np.isclose(w[ell == 1].sum(), 0.5)
    got = {(a, b, lab) for a, b, lab in zip(ix, iy, ell, strict=True)}
    assert got == {(a, b, 1.0) for a, b in np.argwhere(keep)} | {
        (a, b, -1.0) for a, b in np.argwhere(same)}


def test_sample_batch_objective_is_the_all_pairs_sum():
    from crossmetric.learners._gsm_training import sample_batch_loss_grad

    rng = np.random.RandomState(2)
    params = random_params("generalized", 3, 5, 4, rng)
    Xb, Yb = rng.normal(size=(6, 5)), rng.normal(size=(7, 4))
    same = np.zeros((6, 7), bool)
    same[np.arange(6), np.arange(6)] = True

    def lg(prm, A, B, ix, iy, ell, w):
        return gsm_loss_grad(prm, "generalized", -1.9, A, B, ix, iy, ell, w, 0.0)

    loss, _ = sample_batch_loss_grad(lg, params, Xb, Yb, same, None, None)
    FX, FY, (*_, f) = embedded(params, "generalized", -1.9, 3, Xb, Yb)
    S = gsm_matrix(FX, FY, f)
    ref = 0.5 * np.mean(np.maximum(0, 1 + S[same])) + 0.5 * np.mean(np.maximum(0, 1 - S[~same]))
    assert loss == pytest.approx(ref)


def test_batch_mode_auto_uses_identities_when_positives_are_complete(two_views):
    X, Y, pairs, y = _instance_task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = GSM(4, max_iter=3, random_state=0, early_stopping=False,
                preprocessor=(X, Y)).fit(pairs, y)
        assert m.batch_mode_ == "sample" and m.n_identities_ == 120
        # class labels with a sample of the positives: components are fragments -> pairs
        Xd, Yd, labels = two_views
        cp, cy = make_pairs(labels[:150], labels[:150], max_positives=300, random_state=0)
        prep = (Xd[:150], Yd[:150])
        m2 = GSM(4, max_iter=2, random_state=0, preprocessor=prep).fit(cp, cy)
        assert m2.batch_mode_ == "pair"
    with pytest.warns(UserWarning, match="fragments"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            GSM(4, max_iter=2, batch_mode="sample", random_state=0,
                preprocessor=prep).fit(cp, cy)


def test_sample_batches_learn_and_hard_negatives_run():
    X, Y, pairs, y = _instance_task(200)
    tr = pairs[:, 0] < 150  # the first 150 objects train (their pairs among themselves)
    tr &= pairs[:, 1] < 150
    scores = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, kw in (("sample", {}), ("hard", {"hard_negatives": 3})):
            m = GSM(6, max_iter=60, learning_rate=1e-2, random_state=0, preprocessor=(X, Y),
                    **kw)
            m.fit(pairs[tr], y[tr])
            D = m.cross_distance(X[150:], Y[150:])
            scores[name] = np.mean(np.argmin(D, axis=1) == np.arange(50))
    assert scores["sample"] > 0.3 and scores["hard"] > 0.3  # chance: 0.02


# ----------------------------------------------------- early stopping
def test_early_stopping_holds_out_whole_identities_shared_with_no_training_pair(monkeypatch):
    """GSM's held-out samples come from the split every learner uses (whole identities)."""
    import crossmetric.learners._gsm_guard as guard

    X, Y, pairs, y = _instance_task(100)
    seen = {}
    real = guard.validation_split

    def spy(*args, **kw):
        seen["split"] = (args, real(*args, **kw))
        return seen["split"][1]

    monkeypatch.setattr(guard, "validation_split", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        GSM(max_iter=3, early_stopping=True, random_state=0).fit((X[pairs[:, 0]],
                                                                  Y[pairs[:, 1]]), y)
    (ix, iy, yy, *_), (tr, va) = seen["split"]
    assert not set(ix[tr]) & set(ix[va]) and not set(iy[tr]) & set(iy[va])
    assert 1 in set(yy[va]) and 10 <= np.unique(ix[va]).size <= 30


def test_early_stopping_keeps_the_best_check_the_start_included():
    X, Y, pairs, y = _instance_task(150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = GSM(6, early_stopping=True, n_iter_no_change=3, max_iter=60, learning_rate=3e-2,
                random_state=0, preprocessor=(X, Y)).fit(pairs, y)
    # check 0 is the start, then one check per epoch
    assert len(m.validation_scores_) == m.n_iter_ + 1 == len(m.loss_curve_) + 1
    assert len(m.validation_loss_curve_) == len(m.validation_scores_)
    # the kept check is the start or one better than it on the held-out identities
    assert m.validation_scores_[m.best_iteration_] >= m.validation_scores_[0]
    # it stopped once neither the score nor the loss improved for n_iter_no_change epochs
    last = max(m.best_iteration_, int(np.argmin(m.validation_loss_curve_)))
    assert last + 3 >= m.n_iter_ or m.n_iter_ == 60
    with pytest.raises(ValueError, match="validation_fraction"):
        GSM(4, early_stopping=True, validation_fraction=1.5,
            preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="batch_mode"):
        GSM(4, batch_mode="identity", preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="hard_negatives"):
        GSM(4, hard_negatives=0, preprocessor=(X, Y)).fit(pairs, y)


def test_penalty_towards_the_start_gradient_and_effect():
    """``penalty="start"``: μ‖Φ − Φ₀‖², its gradient against finite differences; with a huge
    μ the identity start stays put (the untrained distance), with ``"zero"`` it shrinks."""
    from crossmetric.learners._gsm_measure import gsm_loss

    rng = np.random.RandomState(0)
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(5, 3))
    ix, iy = rng.randint(0, 6, 12), rng.randint(0, 5, 12)
    ell, w = rng.choice([-1.0, 1.0], 12), rng.uniform(0.5, 1.5, 12)
    params = {"LA": rng.normal(size=(2, 4)), "LB": rng.normal(size=(2, 3)),
              "LCx": rng.normal(size=(2, 4)), "LCy": rng.normal(size=(2, 3)),
              "d": rng.normal(size=4), "e": rng.normal(size=3)}
    anchor = {k: rng.normal(size=v.shape) for k, v in params.items()}
    loss, grad = gsm_loss_grad(params, "generalized", -1.9, X, Y, ix, iy, ell, w, 0.3, anchor)
    assert loss == pytest.approx(gsm_loss(params, "generalized", -1.9, X, Y, ix, iy, ell, w,
                                          0.3, anchor))
    h = 1e-6
    for k, v in params.items():
        for idx in np.ndindex(v.shape):
            up = {**params, k: v.copy()}
            up[k][idx] += h
            dn = {**params, k: v.copy()}
            dn[k][idx] -= h
            fd = (gsm_loss(up, "generalized", -1.9, X, Y, ix, iy, ell, w, 0.3, anchor)
                  - gsm_loss(dn, "generalized", -1.9, X, Y, ix, iy, ell, w, 0.3, anchor))
            fd /= 2 * h
            assert grad[k][idx] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    # at the anchor the penalty and its gradient vanish
    base = gsm_loss_grad(anchor, "generalized", -1.9, X, Y, ix, iy, ell, w, 0.0)
    at = gsm_loss_grad(anchor, "generalized", -1.9, X, Y, ix, iy, ell, w, 5.0, anchor)
    assert at[0] == pytest.approx(base[0])

    from crossmetric.datasets import make_cross_modal

    d = make_cross_modal(120, n_classes=12, n_features_x=6, n_features_y=6, random_state=1)
    pairs, y = make_pairs(d.labels, n_negatives=2, random_state=0)
    kw = dict(init="identity", n_components=None, mu=100.0, max_iter=30, random_state=0,
              preprocessor=(d.X, d.Y), tol=0.0)
    # the start itself: a step too small to move it
    with warnings.catch_warnings():  # 30 epochs, tol=0: stopped by max_iter on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        D0 = GSM(learning_rate=1e-12, **kw).fit(pairs, y).cross_distance(d.X, d.Y)
        D = GSM(penalty="start", **kw).fit(pairs, y).cross_distance(d.X, d.Y)
        shrunk = GSM(penalty="zero", **kw).fit(pairs, y).cross_distance(d.X, d.Y)
    # the penalty towards the start holds S there; towards zero it pulls S away
    assert np.abs(D - D0).max() < 0.02 * np.abs(D0).max()
    assert np.abs(shrunk - D0).max() > 0.3 * np.abs(D0).max()
    with pytest.raises(ValueError, match="penalty"):
        GSM(penalty="one", preprocessor=(d.X, d.Y)).fit(pairs, y)
