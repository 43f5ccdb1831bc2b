"""Strong starts and the held-out guard: the untrained distance is a start of every iterative
cross-modal learner (exactly, also on views wider than the training samples), the held-out
identities choose the start and keep it when training does not beat it, and ``"auto"`` holds
out only identity-complete pairs."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import crossmetric._solvers.early_stopping as es
import crossmetric._solvers.linalg as linalg
from crossmetric import CLML, CMLAUC, CMML, GSM, ITML, LDML, PCCA, MahaAUC, make_pairs
from crossmetric._base import squared_euclidean_matrix
from crossmetric._solvers.span import complement_distances
from crossmetric.pairs._pair_data import PairData


def _wide_views(n=40, d=120, seed=0):
    """Two noisy views of ``n`` identities in one ``d``-feature space (d > training samples)."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(n, d)
    return Z + 0.7 * rng.randn(n, d), Z + 0.7 * rng.randn(n, d), np.arange(n)


LEARNERS = {
    "CMML": lambda **kw: CMML(None, max_iter=30, random_state=0, **kw),
    "CMLAUC": lambda **kw: CMLAUC(max_iter=30, random_state=0, **kw),
    "CMLAUC-pca8": lambda **kw: CMLAUC(max_iter=30, reduce_to=8, random_state=0, **kw),
    "GSM": lambda **kw: GSM(None, max_iter=5, random_state=0, **kw),
    # single-modal learners on a basis of the training samples, the rest kept
    "LDML": lambda **kw: LDML(None, max_iter=30, random_state=0, **kw),
    "LDML-8": lambda **kw: LDML(8, max_iter=30, random_state=0, **kw),
    "CLML-8": lambda **kw: CLML(2, n_components=8, max_iter=30, random_state=0, **kw),
    "MahaAUC": lambda **kw: MahaAUC(max_iter=30, random_state=0, **kw),
    "MahaAUC-8": lambda **kw: MahaAUC(8, reduce_to=8, max_iter=30, random_state=0, **kw),
}


def _fit(model, X, Y, labels):
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.set_params(preprocessor=(X, Y)).fit(pairs, y)


def _spread(D, E):
    """0 when ``D`` is ``E`` times one positive constant."""
    ratio = D[E > 0] / E[E > 0]
    return float(np.ptp(ratio) / np.mean(ratio))


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_a_start_that_training_does_not_beat_is_kept_and_is_the_untrained_distance(
        name, monkeypatch):
    """Every check after the start scores worse on the held-out identities: the fitted model
    is the start, and the start ``"identity"`` is the untrained distance of the raw samples
    up to one scale -- the part outside the training span (120 features, 32 training
    samples a view) included."""
    X, Y, labels = _wide_views()
    calls = []

    def falling(self, D):
        calls.append(1)
        return 1.0 / len(calls), 1.0 / len(calls)

    monkeypatch.setattr(es.EarlyStopping, "score_matrix", falling)
    model = _fit(LEARNERS[name](init="identity", early_stopping=True), X, Y, labels)
    assert model.init_ == "identity" and model.best_iteration_ == 0
    assert model.complement_scale_ > 0 and len(calls) > 1
    D = model.cross_distance(X, Y)
    if name == "GSM":  # S = α² ‖x − y‖² + f: a distance up to the offset f
        D = D - model.f_
    assert _spread(D, squared_euclidean_matrix(X, Y)) < 1e-8
    if name == "CMLAUC-pca8":  # M on 8 principal axes of both views, the rest kept
        assert model.M_.shape == (16, 16)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_auto_chooses_a_start_on_the_held_out_identities_and_never_ends_below_it(name):
    X, Y, labels = _wide_views(60)
    model = _fit(LEARNERS[name](), X, Y, labels)
    assert model.init_ in ("identity", "random", "pca") or model.init_.startswith("cca")
    scores = model.validation_scores_
    assert scores[model.best_iteration_] == max(scores) >= scores[0]
    # the pairs are identity-complete with 60 identities: "auto" held some out
    assert model.best_iteration_ is not None


def test_wide_linear_towers_in_the_span_equal_the_full_space_fit(monkeypatch):
    """The span reduction is exact: CMML at full rank from the identity on 120-feature views
    of 32 training samples gives the distances of the plain fit in the 120 features."""
    X, Y, labels = _wide_views(16)
    kw = dict(init="identity", early_stopping=False, max_iter=15, tol=0.0)
    fast = _fit(CMML(None, **kw), X, Y, labels)
    assert fast.components_x_.shape[0] < X.shape[1] and fast.complement_scale_ > 0
    monkeypatch.setattr(linalg, "_REDUCE_TO_SPAN", False)
    slow = _fit(CMML(None, **kw), X, Y, labels)
    assert slow.components_x_.shape == (120, 120) and slow.complement_scale_ == 0
    np.testing.assert_allclose(fast.cross_distance(X, Y), slow.cross_distance(X, Y),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(fast.loss_curve_, slow.loss_curve_, rtol=1e-8)


def test_complement_distances_against_the_projector():
    rng = np.random.RandomState(0)
    Q = np.linalg.qr(rng.randn(10, 3))[0]
    A, B = rng.randn(4, 10), rng.randn(5, 10)
    R = np.eye(10) - Q @ Q.T
    brute = np.array([[np.sum((R @ (a - b)) ** 2) for b in B] for a in A])
    np.testing.assert_allclose(complement_distances(A, B, Q), brute, atol=1e-10)


def _data(labels_x, labels_y, **kw):
    pairs, y = make_pairs(labels_x, labels_y, random_state=0, **kw)
    n_x, n_y = len(labels_x), len(labels_y)
    return PairData(np.zeros((n_x, 1)), np.zeros((n_y, 1)), pairs[:, 0], pairs[:, 1]), y


@pytest.mark.parametrize("labels, kw, expected", [
    (np.arange(100), {}, True),                     # persons, every matching pair given
    (np.arange(20), {}, False),                     # too few identities
    (np.arange(1200), {}, False),                   # many: the paper's plain run
    (np.repeat(np.arange(10), 60), {"max_positives": 500}, False),  # sampled class pairs
])
def test_auto_holds_out_only_identity_complete_pairs(labels, kw, expected):
    data, y = _data(labels, labels, **kw)
    assert es.resolve_early_stopping(CMML(), data, y, tied=False) is expected
    assert es.resolve_early_stopping(CMML(early_stopping=True), data, y, tied=False)
    assert not es.resolve_early_stopping(CMML(early_stopping=False), data, y, tied=False)


def test_single_modal_pcca_guard_and_the_papers_run():
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(50), 3)
    X = rng.randn(50, 8)[labels] + 0.5 * rng.randn(150, 8)
    pairs, y = make_pairs(labels, n_negatives=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        guarded = PCCA(None, random_state=0, preprocessor=X).fit(pairs, y)
        plain = PCCA(8, init="pca", early_stopping=False, random_state=0,
                     preprocessor=X).fit(pairs, y)
    assert guarded.init_ in ("identity", "pca") and guarded.best_iteration_ is not None
    assert plain.init_ == "pca" and plain.best_iteration_ is None
    with pytest.raises(ValueError, match="early_stopping must be True, False or 'auto'"):
        PCCA(early_stopping="sometimes", preprocessor=X).fit(pairs, y)
    with pytest.raises(ValueError, match="init='cca' needs two linear towers"):
        PCCA(None, init="cca", preprocessor=X).fit(pairs, y)


@pytest.mark.parametrize("name", ["CMLAUC", "CMML", "GSM"])
def test_a_fitted_estimator_is_a_start_at_its_own_distance(name, monkeypatch):
    """``init=<fitted CCA>``: kept when training does not beat it, the learner's distance ranks
    every gallery as the CCA's (whose shift, one mean of views of one descriptor, is a common
    offset), and an estimator without linear towers is refused in one line."""
    from crossmetric import CCA, KCCA

    X, Y, labels = _wide_views(40, 30)
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    cca = CCA(5, distance="euclidean", preprocessor=(X, Y)).fit(pairs, y)
    monkeypatch.setattr(es.EarlyStopping, "score_matrix",
                        lambda self, D, calls=[]: (calls.append(1), (1 / len(calls),) * 2)[1])
    model = _fit(LEARNERS[name](init=cca, early_stopping=True), X, Y, labels)
    assert model.init_ == "fitted" and model.best_iteration_ == 0
    D = model.cross_distance(X, Y)
    if name == "GSM":
        D = D - model.f_
    ref = cca.cross_distance(X, Y)
    assert np.corrcoef(D.ravel(), ref.ravel())[0, 1] > 0.98
    with pytest.raises(ValueError, match="init must be one of .* or a fitted estimator"):
        _fit(LEARNERS[name](init=KCCA(), early_stopping=False), X, Y, labels)
    cosine = CCA(5, preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="distance='cosine' is not a distance of linear"):
        _fit(LEARNERS[name](init=cosine, early_stopping=False), X, Y, labels)


def test_protocols_bound_wide_views_and_cap_every_candidates_dimension():
    """``pca_components="auto"``: views wider than the training identities are reduced to
    the identities minus one (not the untrained distance, not a learner that works in the
    span itself); every learner's and every tuning candidate's ``n_components`` above the
    views' width is capped, recorded per split."""
    from crossmetric import Euclidean
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import run_protocols

    d = make_cross_modal(120, n_classes=40, n_features_x=10, n_features_y=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_protocols({"PCCA": PCCA(), "Euclidean": Euclidean()}, d,
                            protocols=("identification",), n_repeats=1,
                            param_grids={"PCCA": [{"n_components": [16, 32]}]},
                            tune_scoring="rank1")
    # every candidate is capped to the 10 features: one fit, and the tie keeps the first, the
    # learner's own setting (keep_current)
    assert not res.errors and res.info["tuned"]["PCCA"][0]["params"] == {
        "n_components": PCCA().n_components}
    assert res.info["training"]["PCCA"][0]["n_components"] == 10
    rng = np.random.RandomState(0)
    wide = {"X": rng.randn(120, 300), "Y": rng.randn(120, 300), "labels": d.labels}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_protocols({"ITML": ITML(max_iter=5), "LDML": LDML(8),
                             "CMML": CMML(None, max_iter=5), "Euclidean": Euclidean()}, wide,
                            protocols=("identification",), n_repeats=1,
                            pca_components="auto", pca_joint="auto")
    n_ids = 40 - round(0.3 * 40)  # training identities of the split
    assert res.info["pca"] == {"ITML": "auto"}
    assert res.info["reduced_inside"] == ["LDML", "CMML"]
    assert res.info["training"]["ITML"][0]["view_dims"] == [n_ids - 1, n_ids - 1]
    assert "view_dims" not in res.info["training"]["CMML"][0]


def test_a_large_metric_is_announced_up_front(monkeypatch):
    """CML_AUC from the paper's start keeps the feature space: above LARGE_METRIC_SIDE it says
    what M costs and the fix before fitting; the default (init="auto") works on the span."""
    import crossmetric.learners.auc as auc

    monkeypatch.setattr(auc, "LARGE_METRIC_SIDE", 50)
    X, Y, labels = _wide_views(40, 30)
    with pytest.warns(UserWarning, match="M is 60 x 60 .* give reduce_to"):
        _fit(CMLAUC(init="pca", early_stopping=False, max_iter=2), X, Y, labels)
    monkeypatch.setattr(auc, "LARGE_METRIC_SIDE", 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _fit(CMLAUC(max_iter=2), X, Y, labels)


def test_ldml_on_the_span_equals_the_full_space_fit():
    """LDML at full rank from the identity on 120 features of 64 training samples: the fit on
    their span (the default for samples fewer than their features) gives the distances of
    the plain fit of a 120 × 120 ``L`` from the same start (without the ℓ2 penalty, which
    the plain fit also applies outside the span)."""
    X, Y, labels = _wide_views(32)
    S = np.vstack([X, Y])
    pairs, y = make_pairs(np.r_[labels, labels], n_negatives=3, random_state=0)
    kw = dict(alpha=0.0, early_stopping=False, max_iter=15, tol=0.0, preprocessor=S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        span = LDML(None, init="identity", **kw).fit(pairs, y)
        assert span.components_.shape == (64, 120) and span.complement_scale_ > 0
        # the same start, c·I on all 120 features, as an array (the plain full-space path)
        full = LDML(None, init=span.complement_scale_ * np.eye(120), **kw).fit(pairs, y)
    assert not hasattr(full, "complement_basis_") and full.components_.shape == (120, 120)
    Xt, Yt, _ = _wide_views(10, seed=1)
    np.testing.assert_allclose(span.cross_distance(Xt, Yt), full.cross_distance(Xt, Yt),
                               rtol=1e-6)
    assert span.bias_ == pytest.approx(full.bias_, rel=1e-6)


@pytest.mark.parametrize("make", [
    lambda: LDML(8, init="identity", early_stopping=False, max_iter=5),
    lambda: MahaAUC(8, reduce_to=8, init="identity", early_stopping=False, max_iter=5),
    lambda: PCCA(None, init="identity", early_stopping=False, max_iter=5),
])
def test_the_metric_matrix_and_function_include_the_kept_untrained_part(make):
    """``get_mahalanobis_matrix`` and ``get_metric`` of a model that keeps the untrained
    distance outside its basis give its ``pair_distance``, not that of ``components_`` alone."""
    X, Y, labels = _wide_views(20, d=60)
    S = np.vstack([X, Y])
    pairs, y = make_pairs(np.r_[labels, labels], n_negatives=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = make().set_params(preprocessor=S).fit(pairs, y)
    assert model.complement_scale_ > 0
    E = S[pairs[:, 0]] - S[pairs[:, 1]]
    D = model.pair_distance(pairs)
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", E, model.get_mahalanobis_matrix(), E),
                               D, rtol=1e-8)
    metric = model.get_metric()
    a, b = pairs[0]
    assert metric(S[a], S[b], squared=True) == pytest.approx(D[0], rel=1e-8)


def test_the_benchmark_note_tells_started_learners_from_closed_forms(tmp_path, capsys):
    """On views wider than the training samples the note names the learners that keep the
    untrained distance outside their basis apart from the closed forms solved on the span."""
    from crossmetric.cli import main

    X, Y, labels = _wide_views(40, d=300)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    np.savetxt(tmp_path / "labels.txt", labels, fmt="%d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["benchmark", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                     "--labels", str(tmp_path / "labels.txt"), "--methods", "ldml,cca",
                     "--protocol", "identification", "--repeats", "1", "--quiet",
                     "--out", str(tmp_path / "out")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "LDML: views wider than the training samples learned on a basis" in out
    assert "CCA: solved on the span of each split's training samples" in out


def test_a_closed_form_start_keeps_its_leading_directions_and_chooses_their_number():
    """``cca_start(size=K)`` is the start of all directions with those after the K-th set to
    zero; ``size="auto"`` keeps the number whose own distance ranks the held-out identities of
    three folds best (an obvious loop over the sizes and folds)."""
    from crossmetric._base import squared_euclidean_matrix as sq
    from crossmetric._solvers.early_stopping import identity_folds
    from crossmetric._solvers.starting import cca_start, cca_start_size
    from crossmetric.learners._auto_grids import COMPONENT_CANDIDATES

    rng = np.random.RandomState(0)
    n, d = 90, 40
    Z = rng.randn(n, 6)
    X = Z @ rng.randn(6, d) + 1.5 * rng.randn(n, d)
    Y = Z @ rng.randn(6, d) + 1.5 * rng.randn(n, d)
    labels = np.arange(n)
    pairs, y = make_pairs(labels, labels, n_negatives=2, random_state=0)
    ix, iy = pairs[:, 0], pairs[:, 1]
    A, B = cca_start(X, Y, ix, iy, y, 35, 0.1, size=None)
    A10, B10 = cca_start(X, Y, ix, iy, y, 35, 0.1, size=10)
    np.testing.assert_allclose(A10[:10], A[:10], atol=1e-10)
    np.testing.assert_allclose(B10[:10], B[:10], atol=1e-10)
    assert not A10[10:].any() and not B10[10:].any()
    # the obvious loop
    folds = identity_folds(PairData(X, Y, ix, iy), y, tied=False, n_folds=3, random_state=0)
    means = {}
    for s in (*[s for s in COMPONENT_CANDIDATES if s < 35], None):
        scores = []
        for train, y_train, validation in folds:
            Af, Bf = cca_start(train.X, train.Y, train.ix, train.iy, y_train, 35, 0.1,
                               size=s)
            V = validation.data
            D = sq(V.X @ Af.T, V.Y @ Bf.T)
            hits = [D[i, validation.ids_y == validation.ids_x[i]].min()
                    < D[i, validation.ids_y != validation.ids_x[i]].min()
                    for i in range(D.shape[0])]
            scores.append(np.mean(hits))
        means[s] = np.mean(scores)
    best = max(means.values())
    expected = next(s for s in means if means[s] == best)
    assert cca_start_size(X, Y, ix, iy, y, 35, 0.1) == expected
    Aa, _ = cca_start(X, Y, ix, iy, y, 35, 0.1)
    kept = 35 if expected is None else expected
    np.testing.assert_allclose(Aa[:kept], A[:kept], atol=1e-10)
    assert not Aa[kept:].any()


def _nuisance_views(n=120, seed=0):
    """Two views of ``n`` identities in 8 shared features whose first four carry a large
    per-sample nuisance: the untrained distance ranks by the nuisance, KISSME's metric
    (Σ_S⁻¹ − Σ_D⁻¹) sees through it."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(n, 8)
    noise = np.r_[np.full(4, 3.0), np.full(4, 0.3)]
    return Z + noise * rng.randn(n, 8), Z + noise * rng.randn(n, 8), np.arange(n)


def test_the_kissme_start_is_kissmes_metric_in_k_rows():
    from crossmetric import KISSME
    from crossmetric._solvers.starting import kissme_start

    X, Y, labels = _nuisance_views()
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    L = kissme_start(PairData(X, Y, pairs[:, 0], pairs[:, 1]), y, 10)
    assert L.shape == (10, 8) and not np.any(L[8:])
    ref = KISSME(preprocessor=(X, Y)).fit(pairs, y)
    np.testing.assert_allclose(L.T @ L, ref.components_.T @ ref.components_, rtol=1e-8,
                               atol=1e-10)
    top = kissme_start(PairData(X, Y, pairs[:, 0], pairs[:, 1]), y, 3)
    np.testing.assert_allclose(top, ref.components_[:3], rtol=1e-8, atol=1e-10)
    same = PairData(X, np.array(X), pairs[:, 0], pairs[:, 0])  # every pair joins one sample
    assert kissme_start(same, y, 4) is None


def test_auto_tries_the_single_metric_closed_form_after_the_cross_modal_one():
    from crossmetric._solvers.starting import start_candidates

    cross = start_candidates("auto", "pca", cross=True, features=True, equal_widths=True)
    assert cross == ["identity", "cca(reg=0.01)", "cca(reg=0.1)", "cca(reg=1)", "kissme",
                     "pca"]
    assert start_candidates("auto", "pca", cross=True, features=True,
                            equal_widths=False) == cross[1:4] + ["pca"]
    assert start_candidates("auto", "pca", cross=False, features=True,
                            equal_widths=True) == ["identity", "kissme", "pca"]
    assert start_candidates("auto", "pca", cross=False, features=False,
                            equal_widths=True) == ["pca"]
    with pytest.raises(ValueError, match="init='kissme' needs linear towers on views of one"):
        start_candidates("kissme", "pca", cross=True, features=True, equal_widths=False)


KISSME_LEARNERS = {"PCCA": lambda **kw: PCCA(None, max_iter=30, random_state=0, **kw),
                   **{k: LEARNERS[k] for k in ("CMML", "CMLAUC", "GSM", "LDML", "MahaAUC")}}


@pytest.mark.parametrize("name", sorted(KISSME_LEARNERS))
def test_a_kissme_start_kept_is_kissmes_distance(name, monkeypatch):
    """``init="kissme"`` with every later check worse on the held-out identities: the model
    ranks every gallery as KISSME does (fitted on the learner's training pairs, so here on
    all but the held-out share: close, not equal), which the untrained distance does not."""
    from crossmetric import KISSME

    X, Y, labels = _nuisance_views()
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    calls = []
    monkeypatch.setattr(es.EarlyStopping, "score_matrix",
                        lambda self, D: (calls.append(1), (1 / len(calls),) * 2)[1])
    model = _fit(KISSME_LEARNERS[name](init="kissme", early_stopping=True), X, Y, labels)
    assert model.init_ == "kissme" and model.best_iteration_ == 0
    D = model.cross_distance(X, Y)
    if name == "GSM":
        D = D - model.f_
    ref = KISSME(preprocessor=(X, Y)).fit(pairs, y).cross_distance(X, Y)
    assert np.corrcoef(D.ravel(), ref.ravel())[0, 1] > 0.95
    assert np.corrcoef(squared_euclidean_matrix(X, Y).ravel(), ref.ravel())[0, 1] < 0.8


def test_kissme_needs_a_full_batch_solver_and_views_of_one_width():
    X, Y, labels = _nuisance_views(40)
    with pytest.raises(ValueError, match="init='kissme' needs a full-batch solver"):
        _fit(CMML(None, init="kissme", solver="sgd"), X, Y, labels)
    with pytest.raises(ValueError, match="init='kissme' needs linear towers on views of one"):
        _fit(CMML(None, init="kissme"), X, Y[:, :6], labels)
    with pytest.raises(ValueError, match="not Nyström features"):
        _fit(CMML(16, init="kissme", kernel="rbf", kernel_approximation="nystroem"), X, Y,
             labels)


@pytest.mark.parametrize("name", ["PCCA", "CMML", "LDML"])
def test_auto_chooses_the_start_on_every_training_identity(name, monkeypatch):
    """A nuisance KISSME's metric sees through, too mild for the hold-out's 30 identities to
    prove it: with the folds' probes of the other 120 training identities the learner starts
    at KISSME's metric; on the hold-out alone it keeps the untrained distance."""
    import crossmetric._solvers.towers as towers
    import crossmetric.learners._basis_guard as basis_guard

    rng = np.random.RandomState(1)
    Z = rng.randn(150, 8)
    noise = np.r_[np.full(4, 0.6), np.full(4, 0.3)]
    X, Y = Z + noise * rng.randn(150, 8), Z + noise * rng.randn(150, 8)
    make = {"PCCA": KISSME_LEARNERS["PCCA"], "CMML": LEARNERS["CMML"],
            "LDML": LEARNERS["LDML"]}[name]
    assert _fit(make(), X, Y, np.arange(150)).init_ == "kissme"
    for module in (towers, basis_guard):
        monkeypatch.setattr(module, "fold_start_hits", lambda *a, **k: {})
    assert _fit(make(), X, Y, np.arange(150)).init_ == "identity"
