"""scikit-learn conventions: short reprs, Supervised in a Pipeline, cross-modal
tuple pairs in model selection, warnings pointing at the caller, py.typed."""

import os
import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline

import crossmetric
from crossmetric.datasets import make_cross_modal
from crossmetric.pairs import make_pairs
from crossmetric.registry import METHODS, make_estimator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("name", [n for n in METHODS if n != "deepgsm"])
def test_repr_stays_short_with_a_preprocessor_array(name):
    rng = np.random.default_rng(0)
    est = make_estimator(name)
    est.set_params(preprocessor=(rng.random((900, 64)), rng.random((900, 32))))
    text = repr(est)
    assert "preprocessor=(<array 900×64>, <array 900×32>)" in text, text
    assert len(text) < 400 and "\n" not in text.split("preprocessor")[1]
    assert est.preprocessor[0].shape == (900, 64)  # the estimator itself is untouched
    est.set_params(preprocessor=rng.random((900, 64)))
    assert "preprocessor=<array 900×64>" in repr(est)
    html = est._repr_html_()
    assert "900×64" in html and len(html) < 100_000


def test_supervised_pipeline_before_knn():
    X, y = load_iris(return_X_y=True)
    sup = crossmetric.Supervised(crossmetric.PCCA(n_components=2, random_state=0),
                                 random_state=0)
    with pytest.raises(NotFittedError):
        sup.transform(X)
    pipe = make_pipeline(sup, KNeighborsClassifier(3))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.mean() > 0.9
    sup.fit(X, y)
    Z = sup.transform(X)
    assert Z.shape == (150, 2)
    np.testing.assert_allclose(Z, sup.learner_.transform(X))
    assert sup.learner_.preprocessor is None  # no training data kept in the model
    # the pairs are the papers' pairs from the labels
    pairs, lab = make_pairs(y, random_state=0)
    np.testing.assert_array_equal(sup.pairs_, pairs)
    pickle.loads(pickle.dumps(pipe.fit(X, y)))
    pipe.set_params(supervised__max_positives=200)
    gs = GridSearchCV(pipe, {"supervised__n_negatives": [1, 2]}, cv=2,
                      error_score="raise").fit(X, y)
    assert gs.best_params_["supervised__n_negatives"] in (1, 2)
    with pytest.raises(ValueError, match="single-modal"):
        crossmetric.Supervised(crossmetric.CMML()).fit(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        crossmetric.Supervised(crossmetric.PCCA()).fit(X, y[:-1])


def test_cross_modal_tuple_pairs_in_model_selection():
    d = make_cross_modal(300, n_classes=10, n_features_x=8, n_features_y=5, random_state=0)
    pairs, y = make_pairs(d.labels, d.labels, random_state=0)
    P = crossmetric.CrossPairs(d.X[pairs[:, 0]], d.Y[pairs[:, 1]])
    assert P.shape == (pairs.shape[0], 2)
    Xp, Yp = P
    assert Xp.shape[1] == 8 and Yp.shape[1] == 5
    est = crossmetric.CMML(n_components=3, max_iter=100, random_state=0)
    scores = cross_val_score(est, P, y, cv=3)
    assert scores.min() > 0.7
    # the same folds on the index form give about the same scores (the PCA start differs:
    # it sees the pairs' rows instead of every sample)
    est_idx = crossmetric.CMML(n_components=3, max_iter=100, random_state=0,
                              preprocessor=(d.X, d.Y))
    np.testing.assert_allclose(cross_val_score(est_idx, pairs, y, cv=3), scores, atol=0.01)
    gs = GridSearchCV(crossmetric.CMML(max_iter=100), {"n_components": [2, 3]}, cv=2)
    assert gs.fit(P, y).best_params_["n_components"] in (2, 3)
    assert type(pickle.loads(pickle.dumps(P))) is crossmetric.CrossPairs
    with pytest.raises(ValueError, match="row-aligned"):
        crossmetric.CrossPairs(np.zeros((3, 2)), np.zeros((4, 2)))


def test_warnings_point_at_the_callers_line():
    d = make_cross_modal(100, n_classes=5, random_state=0)
    pairs, y = make_pairs(d.labels, d.labels, random_state=0)
    est = crossmetric.CMML(n_components=3, max_iter=2, preprocessor=(d.X, d.Y))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(pairs, y)
        cross_val_score(est, pairs, y, cv=2)
    conv = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 3
    assert all(w.filename == __file__ for w in conv), [w.filename for w in conv]


def test_py_typed_is_shipped():
    assert os.path.isfile(os.path.join(os.path.dirname(crossmetric.__file__), "py.typed"))
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        assert 'crossmetric = ["py.typed"]' in fh.read()


# ------------------------------------------------------------------ scikit-learn anchors
@pytest.mark.parametrize("learner", [
    crossmetric.PCCA(n_components=1, random_state=0), crossmetric.LDML(random_state=0),
    crossmetric.KISSME(),
    pytest.param(crossmetric.ITML(random_state=0), marks=pytest.mark.slow),
    pytest.param(crossmetric.MahaAUC(random_state=0), marks=pytest.mark.slow)],
    ids=lambda e: type(e).__name__)
def test_supervised_passes_check_estimator(learner):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(crossmetric.Supervised(learner, random_state=0),
                                  on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results
              if r["status"] == "failed"]
    assert len(results) > 40 and not failed, failed


def test_supervised_caps_positives_for_two_classes():
    rng = np.random.RandomState(0)
    X, y = rng.rand(40, 3), np.r_[np.zeros(35, int), np.ones(5, int)]
    sup = crossmetric.Supervised(crossmetric.KISSME(), random_state=0).fit(X, y)
    n_neg = np.count_nonzero(sup.pair_labels_ == -1)
    assert n_neg <= 35 * 5 // 2 and np.count_nonzero(sup.pair_labels_ == 1) == n_neg
    with pytest.raises(ValueError, match="two classes"):
        crossmetric.Supervised(crossmetric.KISSME()).fit(X, np.zeros(40))
    with pytest.raises(ValueError, match="features"):
        sup.transform(X[:, :2])


def test_clone_keeps_the_preprocessor_by_reference(tmp_path, small_pairs, small_cross):
    from sklearn.base import clone

    X, pairs, y = small_pairs
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    est = crossmetric.LDML(n_components=2, preprocessor=Xm)
    twin = clone(est)
    assert twin.preprocessor is Xm and isinstance(twin.preprocessor, np.memmap)
    assert twin.get_params()["n_components"] == 2 and not hasattr(twin, "threshold_")
    gs = GridSearchCV(est, {"n_components": [1, 2]}, cv=2).fit(pairs, y)
    assert gs.best_estimator_.preprocessor is Xm
    Xc, Yc, cpairs, cy = small_cross
    cm = crossmetric.CMML(n_components=2, preprocessor=(Xc, Yc))
    c2 = clone(cm)
    assert c2.preprocessor[0] is Xc and c2.preprocessor[1] is Yc
    # other parameters are still cloned (not shared)
    est.set_params(preprocessor=None)
    assert clone(est).preprocessor is None


def test_no_private_scikit_learn_api():
    pattern = __import__("re").compile(
        r"from sklearn[\w.]* import _|sklearn\.(?:\w+\.)*_\w|\._html_repr\b")
    for folder in ("crossmetric", "benchmarks"):
        for root, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(root, name), encoding="utf-8") as fh:
                        hits = pattern.findall(fh.read())
                    assert not hits, (name, hits)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_pair_learner_has_set_threshold(name):
    from crossmetric.registry import _learner_class, _spec

    if crossmetric._LAZY[_spec(name).class_name].startswith("crossmetric.deep"):
        pytest.importorskip("torch", reason="DeepGSM needs torch (the [deep] extra)")
    assert callable(getattr(_learner_class(_spec(name)), "set_threshold", None))


def test_set_threshold(small_pairs):
    X, pairs, y = small_pairs
    est = crossmetric.KISSME(preprocessor=X)
    with pytest.raises(NotFittedError):
        est.set_threshold(1.0)
    est.fit(pairs, y)
    d = est.pair_distance(pairs)
    cut = float(np.median(d))
    assert est.set_threshold(cut) is est and est.threshold_ == cut
    np.testing.assert_array_equal(est.predict(pairs), np.where(d <= cut, 1, -1))
    for bad in (np.nan, np.inf, "a", None, True):
        with pytest.raises(ValueError, match="threshold"):
            est.set_threshold(bad)
    assert est.threshold_ == cut
