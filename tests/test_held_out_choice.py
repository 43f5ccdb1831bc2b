"""Closed forms with settings chosen on held-out training identities (``"auto"``): the folds
hold every identity out once, the choice equals an obvious loop over candidates and folds, the
refit equals the fixed setting, and without identities the former fixed default is used."""

import numpy as np
import pytest
from sklearn.base import clone

from crossmetric import CCA, CDFE, CSR, KCCA, PLS, MvDA, make_pairs
from crossmetric._solvers.early_stopping import identity_folds
from crossmetric.learners._auto_grids import COMPONENT_CANDIDATES
from crossmetric.learners._held_out_choice import AUTO_FOLDS
from crossmetric.pairs._pair_data import PairData, canonical_pairs
from crossmetric.registry import METHODS, make_estimator


def _identities(n=60, d=40, seed=0):
    """Two noisy views of ``n`` identities (one sample each)."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(n, d)
    return Z + 0.8 * rng.randn(n, d), Z @ rng.randn(d, d) / np.sqrt(d) + 0.8 * rng.randn(n, d)


def _pairs(n, seed=0):
    labels = np.arange(n)
    return make_pairs(labels, labels, n_negatives=3, random_state=seed)


def test_identity_folds_hold_every_identity_out_once_and_share_no_sample():
    X, Y = _identities()
    pairs, y = _pairs(60)
    data = PairData(X, Y, pairs[:, 0], pairs[:, 1])
    folds = identity_folds(data, y, tied=False, n_folds=3, random_state=0)
    held = []
    for train, y_train, validation in folds:
        V = validation.data
        # samples are rows of X: the held-out ones appear in no training pair
        assert not {r.tobytes() for r in V.X} & {r.tobytes() for r in train.X}
        assert not {r.tobytes() for r in V.Y} & {r.tobytes() for r in train.Y}
        assert set(np.unique(y_train)) == {-1, 1}
        held += [r.tobytes() for r in V.X]
    assert sorted(held) == sorted(r.tobytes() for r in X)  # each identity once
    again = identity_folds(data, y, tied=False, n_folds=3, random_state=0)
    for (_, _, va), (_, _, vb) in zip(folds, again, strict=True):
        np.testing.assert_array_equal(va.data.X, vb.data.X)


def _rank1(D, ids_x, ids_y):
    """Probes (rows) whose nearest gallery sample is of their identity, strictly."""
    hits = []
    for i in range(D.shape[0]):
        same = ids_y == ids_x[i]
        if same.any():
            hits.append(D[i, same].min() < D[i, ~same].min())
    return float(np.mean(hits))


def test_the_choice_is_the_best_mean_held_out_rank1_of_an_obvious_loop():
    X, Y = _identities(seed=1)
    pairs, y = _pairs(60, seed=1)
    model = CCA(n_components="auto", preprocessor=(X, Y)).fit(pairs, y)
    # fit works on the distinct samples in canonical order, as every learner
    data = canonical_pairs(PairData(X, Y, pairs[:, 0], pairs[:, 1]), tied=False)
    folds = identity_folds(data, y, tied=False, n_folds=AUTO_FOLDS, random_state=0)
    # the untrained distance is the scan's first candidate (the views share their features)
    means = {"untrained": np.mean([
        _rank1(((v.data.X[:, None] - v.data.Y[None]) ** 2).sum(-1), v.ids_x, v.ids_y)
        for _, _, v in folds])}
    for k in COMPONENT_CANDIDATES:
        scores = []
        for train, y_train, validation in folds:
            try:
                est = CCA(n_components=k).fit(
                    (train.X[train.ix], train.Y[train.iy]), y_train)
            except ValueError:  # more components than the fold's data allow
                scores = None
                break
            V = validation.data
            scores.append(_rank1(est.cross_distance(V.X, V.Y), validation.ids_x,
                                 validation.ids_y))
        if scores is not None:
            means[k] = np.mean(scores)
    best = max(means.values())
    expected = next(k for k in ("untrained", *COMPONENT_CANDIDATES) if means.get(k) == best)
    assert expected != "untrained"  # these views are mixed: the closed form wins
    assert model.chosen_params_ == {"n_components": expected}
    assert not model.untrained_
    got = {s["params"].get("n_components", "untrained"): s["rank1"]
           for s in model.selection_scores_}
    assert list(got)[0] == "untrained"
    for k, v in means.items():
        assert got[k] == pytest.approx(v)
    # the refit on all pairs is the fixed setting's fit
    fixed = CCA(n_components=expected, preprocessor=(X, Y)).fit(pairs, y)
    np.testing.assert_allclose(model.transform_x(X), fixed.transform_x(X), atol=1e-10)
    assert model.threshold_ == pytest.approx(fixed.threshold_)
    assert model.n_components == "auto"  # parameters are not changed by fit
    assert clone(model).get_params()["n_components"] == "auto"


def test_without_identities_auto_is_the_former_fixed_default():
    """Positives drawn from a few classes are not identities: no hold-out, the old default."""
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 5, 200)
    X, Y = rng.randn(200, 30) + labels[:, None], rng.randn(200, 30) - labels[:, None]
    pairs, y = make_pairs(labels, labels, max_positives=300, random_state=0)
    model = CCA(n_components="auto", reg="auto", preprocessor=(X, Y)).fit(pairs, y)
    assert model.chosen_params_ == {"n_components": 10, "reg": 0.1}
    assert model.selection_scores_ is None
    fixed = CCA(preprocessor=(X, Y)).fit(pairs, y)
    np.testing.assert_allclose(model.transform_x(X), fixed.transform_x(X), atol=1e-10)


@pytest.mark.parametrize("make, params", [
    (CCA, {"n_components": "auto", "reg": "auto"}),
    (PLS, {"n_components": "auto"}),
    (KCCA, {"n_components": "auto", "reg": "auto", "gamma": "auto"}),
    (CDFE, {"n_components": "auto", "reg": "auto"}),
    (MvDA, {"n_components": "auto"}),
    (CSR, {"alpha": "auto"}),
    (KCCA, {"n_components": "auto", "reg": "auto"}),
])
def test_every_closed_form_chooses_its_auto_settings_from_its_candidates(make, params):
    X, Y = _identities(n=45, d=12, seed=2)
    pairs, y = _pairs(45, seed=2)
    model = make(preprocessor=(X, Y), **params).fit(pairs, y)
    assert set(model.chosen_params_) == set(params)  # mixed views: the untrained loses
    for name, value in model.chosen_params_.items():
        assert value in model._auto_values(name, canonical_pairs(
            PairData(X, Y, pairs[:, 0], pairs[:, 1]), tied=False), y)
    assert all(np.isfinite(s["rank1"]) or s["rank1"] != s["rank1"]
               for s in model.selection_scores_)
    fixed = make(preprocessor=(X, Y), **model.chosen_params_).fit(pairs, y)
    np.testing.assert_allclose(model.cross_distance(X, Y), fixed.cross_distance(X, Y),
                               atol=1e-8)


def test_the_benchmark_chooses_and_the_paper_runs_keep_the_fixed_sizes():
    for name in ("cca", "pls", "kcca", "cdfe", "mvda", "csr"):
        bench = make_estimator(name).get_params(deep=False)
        paper = make_estimator(name, paper=True).get_params(deep=False)
        assert "auto" in {bench.get("n_components"), bench.get("reg"), bench.get("alpha")}
        assert "auto" not in {paper.get("n_components"), paper.get("reg"),
                              paper.get("alpha")}, name
        assert METHODS[name].paper_params


def test_auto_on_multi_view_fit_is_a_clear_error():
    X, Y = _identities(n=40, d=8)
    with pytest.raises(ValueError, match="n_components must be a positive integer"):
        MvDA(n_components="auto").fit_views([X, Y], np.arange(40))


def test_the_protocols_record_the_chosen_settings_per_split():
    from crossmetric.protocols import run_protocols

    X, Y = _identities(n=80, d=20, seed=3)
    res = run_protocols({"CCA": CCA(n_components="auto")},
                        {"X": X, "Y": Y, "labels": np.arange(80)},
                        protocols=("identification",), n_repeats=2, random_state=0)
    records = res.info["training"]["CCA"]
    assert len(records) == 2
    for record in records:
        assert record["n_components"] == "auto"
        assert record["chosen"]["n_components"] in COMPONENT_CANDIDATES
    # a bandwidth pair and the untrained distance are recorded as JSON holds them
    near = X + 0.05 * np.random.RandomState(1).randn(*X.shape)
    res = run_protocols({"CDFE": CDFE(n_components="auto", reg="auto")},
                        {"X": X, "Y": near, "labels": np.arange(80)},
                        protocols=("identification",), n_repeats=1, random_state=0)
    assert not res.errors
    assert res.info["training"]["CDFE"][0]["chosen"] == {"untrained": True}
    # (views of two widths: no untrained distance to keep)
    res = run_protocols({"KCCA": KCCA(n_components="auto", gamma="auto")},
                        {"X": X, "Y": near[:, :-1], "labels": np.arange(80)},
                        protocols=("identification",), n_repeats=1, random_state=0)
    (kcca,) = res.info["training"]["KCCA"]
    gx, gy = kcca["chosen"]["gamma"]
    assert isinstance(gx, float) and isinstance(gy, float)


def test_a_model_file_keeps_the_chosen_settings(tmp_path):
    from crossmetric.persistence import load_object, save_object

    X, Y = _identities(seed=1)
    pairs, y = _pairs(60, seed=1)
    model = CCA(n_components="auto", reg="auto", preprocessor=(X, Y)).fit(pairs, y)
    model.preprocessor = None
    save_object(tmp_path / "cca.cm", model)
    loaded, _ = load_object(tmp_path / "cca.cm")
    assert loaded.chosen_params_ == model.chosen_params_
    assert loaded.n_components == "auto"
    np.testing.assert_allclose(loaded.cross_distance(X, Y), model.cross_distance(X, Y))


def test_auto_sizes_are_cut_to_what_narrow_data_allow():
    """Five features: the candidates and the fallback become 5 (the protocols cut a fixed
    size to the narrower view the same way), with identities or without."""
    X, Y = _identities(n=45, d=5, seed=4)
    pairs, y = _pairs(45, seed=4)
    model = CCA(n_components="auto", preprocessor=(X, Y)).fit(pairs, y)
    assert model.chosen_params_ == {"n_components": 5}
    assert [s["params"].get("n_components") for s in model.selection_scores_] == [None, 5]
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(8), 5)
    X, Y = rng.randn(40, 5) + labels[:, None], rng.randn(40, 5) + labels[:, None]
    pairs, y = make_pairs(labels, labels, random_state=0)
    for make in (CCA, PLS, KCCA, MvDA, CDFE):
        model = make(n_components="auto", preprocessor=(X, Y)).fit(pairs, y)
        assert model.chosen_params_["n_components"] == 5, make.__name__


def _same_person_views(n=50, d=120, seed=5):
    """Two views with the same features in which the raw samples already match: the
    untrained distance is as good as it gets."""
    rng = np.random.RandomState(seed)
    Z = 3.0 * rng.randn(n, d)
    return Z + 0.5 * rng.randn(n, d), Z + 0.5 * rng.randn(n, d)


@pytest.mark.parametrize("make, params", [
    (CCA, {"n_components": "auto", "reg": "auto"}),
    (PLS, {"n_components": "auto"}),
    (CDFE, {"n_components": "auto", "reg": "auto"}),
    (MvDA, {"n_components": "auto"}),
    (CSR, {"alpha": "auto"}),
    (KCCA, {"n_components": "auto", "reg": "auto"}),
])
@pytest.mark.parametrize("d", [20, 120])  # narrower and wider than the training samples
def test_a_closed_form_that_no_setting_lets_beat_the_untrained_distance_keeps_it(
        make, params, d, tmp_path):
    from crossmetric.persistence import load_object, save_object

    X, Y = _same_person_views(d=d)
    pairs, y = _pairs(50, seed=5)
    model = make(preprocessor=(X, Y), **params).fit(pairs, y)
    assert model.chosen_params_ == {"untrained": True} and model.untrained_
    scores = model.selection_scores_
    assert scores[0]["params"] == {"untrained": True}
    assert scores[0]["rank1"] >= max(s["rank1"] for s in scores[1:] if s["rank1"] == s["rank1"])
    # the distance is the untrained one exactly, on samples outside the training span too
    rng = np.random.RandomState(9)
    A, B = rng.randn(7, d), rng.randn(4, d)
    want = ((A[:, None] - B[None]) ** 2).sum(-1)
    np.testing.assert_allclose(model.cross_distance(A, B), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        model.pair_distance((A[:4], B)), np.diag(want[:4]), rtol=1e-9, atol=1e-9)
    # a refit that keeps it drops what a learned fit left
    learned = make(preprocessor=(X, Y), **{k: v for k, v in params.items()
                                           if k != "n_components"}, n_components=3) \
        if "n_components" in params else make(preprocessor=(X, Y), alpha=1.0)
    learned.fit(pairs, y)
    left = {k for k in vars(learned) if k.endswith("_") and not k.startswith("_")}
    learned.set_params(**params).fit(pairs, y)
    assert learned.untrained_
    assert {k for k in vars(learned) if k.endswith("_") and not k.startswith("_")} == {
        k for k in vars(model) if k.endswith("_") and not k.startswith("_")}, left
    # a model file keeps it
    model.preprocessor = None
    save_object(tmp_path / "m.cm", model)
    loaded, _ = load_object(tmp_path / "m.cm")
    assert loaded.untrained_
    np.testing.assert_allclose(loaded.cross_distance(A, B), want, rtol=1e-9, atol=1e-9)
    # a refit with a fixed setting is the learner's own towers again
    Xm, Ym = _identities(n=50, d=d, seed=6)
    fixed = {k: v for k, v in {"n_components": 5, "reg": 0.1, "alpha": 1.0}.items()
             if k in params}
    model.set_params(preprocessor=(Xm, Ym), **fixed).fit(pairs, y)
    assert not model.untrained_ and model.complement_scale_ == 0.0
    plain = make(preprocessor=(Xm, Ym), **fixed).fit(pairs, y)
    np.testing.assert_allclose(model.cross_distance(Xm, Ym), plain.cross_distance(Xm, Ym),
                               atol=1e-8)


def test_the_untrained_distance_is_offered_only_where_a_tower_can_hold_it():
    from crossmetric import KCDFE

    X, Y = _same_person_views(d=30)
    pairs, y = _pairs(50, seed=5)
    # views of different widths: no untrained distance between them
    model = CCA(n_components="auto", preprocessor=(X, Y[:, :25])).fit(pairs, y)
    assert "untrained" not in model.chosen_params_ and not model.untrained_
    assert all("untrained" not in s["params"] for s in model.selection_scores_)
    # KCDFE's towers are linear maps of kernel coordinates, which do not hold it
    est = KCDFE(n_components="auto", preprocessor=(X, Y)).fit(pairs, y)
    assert "untrained" not in est.chosen_params_
    assert all("untrained" not in s["params"] for s in est.selection_scores_)
    # KCCA's towers skip the kernel when the choice keeps it
    est = KCCA(n_components="auto", preprocessor=(X, Y)).fit(pairs, y)
    assert est.selection_scores_[0]["params"] == {"untrained": True}


def test_kcca_bandwidth_candidates_scale_the_default_bandwidth():
    from crossmetric.kernels import estimate_gamma
    from crossmetric.learners._auto_grids import KCCA_GAMMA_SCALES

    X, Y = _identities(n=45, d=12, seed=2)
    pairs, y = _pairs(45, seed=2)
    data = PairData(X, Y, pairs[:, 0], pairs[:, 1])
    pos = y == 1
    gx = estimate_gamma(X[pairs[pos, 0]], "rbf")
    gy = estimate_gamma(Y[pairs[pos, 1]], "rbf")
    got = KCCA(gamma="auto")._auto_values("gamma", data, y)
    assert got == tuple((s * gx, s * gy) for s in KCCA_GAMMA_SCALES)
    # a view whose kernel has no bandwidth keeps None
    got = KCCA(gamma="auto", kernel=("linear", "rbf"))._auto_values("gamma", data, y)
    assert [g[0] for g in got] == [None] * len(KCCA_GAMMA_SCALES)
    # the default bandwidth is the first candidate: its fit equals gamma=None's
    none = KCCA(n_components=5, preprocessor=(X, Y)).fit(pairs, y)
    first = KCCA(n_components=5, gamma=(gx, gy), preprocessor=(X, Y)).fit(pairs, y)
    np.testing.assert_allclose(first.cross_distance(X, Y), none.cross_distance(X, Y),
                               atol=1e-10)
