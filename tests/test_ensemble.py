"""SeedEnsemble: member seeds, the mean distance against the members, sklearn conventions."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GroupKFold, cross_val_score

from crossmetric import CMML, GSM, SeedEnsemble, make_pairs
from crossmetric.datasets import make_cross_modal
from crossmetric.learners.ensemble import member_seeds


@pytest.fixture(scope="module")
def data():
    d = make_cross_modal(90, n_classes=6, random_state=1)
    pairs, y = make_pairs(d.labels, d.labels, max_positives=200, random_state=0)
    return d, pairs, y


def test_member_seeds():
    s = member_seeds(7, 4)
    assert s[0] == 7 and len(set(s)) == 4 and s == member_seeds(7, 4)
    assert member_seeds(7, 2) == s[:2]  # prefix-stable
    rs = np.random.RandomState(3)
    assert member_seeds(rs, 2)[0] == np.random.RandomState(3).randint(2**31 - 1)
    assert all(0 <= v < 2**31 for v in s)


def test_mean_of_the_members_and_member_zero_is_the_single_model(data):
    d, pairs, y = data
    gsm = GSM(n_components=3, preprocessor=(d.X, d.Y))
    ens = SeedEnsemble(gsm, n_members=3, random_state=5).fit(pairs, y)
    single = clone(gsm).set_params(random_state=5).fit(pairs, y)
    np.testing.assert_allclose(ens.estimators_[0].cross_distance(d.X[:7], d.Y[:9]),
                               single.cross_distance(d.X[:7], d.Y[:9]))
    slow = np.mean([m.cross_distance(d.X[:7], d.Y[:9]) for m in ens.estimators_], axis=0)
    np.testing.assert_allclose(ens.cross_distance(d.X[:7], d.Y[:9]), slow)
    slow_p = np.mean([m.pair_distance(pairs) for m in ens.estimators_], axis=0)
    np.testing.assert_allclose(ens.pair_distance(pairs), slow_p)
    # members differ (seeded anew); the ensemble's decisions follow its own threshold
    assert not np.allclose(ens.estimators_[0].pair_distance(pairs),
                           ens.estimators_[1].pair_distance(pairs))
    np.testing.assert_array_equal(ens.predict(pairs),
                                  np.where(slow_p <= ens.threshold_, 1, -1))
    assert 0.5 < ens.score(pairs, y) <= 1.0
    assert np.mean(ens.predict(pairs) == y) >= 0.5
    assert ens.estimator.random_state is None  # never fitted in place


def test_parallel_members_equal_sequential(data):
    d, pairs, y = data
    cmml = CMML(n_components=3, preprocessor=(d.X, d.Y))
    a = SeedEnsemble(cmml, n_members=2, random_state=0).fit(pairs, y)
    b = SeedEnsemble(cmml, n_members=2, random_state=0, n_jobs=2).fit(pairs, y)
    np.testing.assert_allclose(a.pair_distance(pairs), b.pair_distance(pairs))


def test_errors_and_sklearn_conventions(data):
    d, pairs, y = data
    gsm = GSM(n_components=3, preprocessor=(d.X, d.Y))
    with pytest.raises(NotFittedError):
        SeedEnsemble(gsm).pair_distance(pairs)
    with pytest.raises(ValueError, match="n_members"):
        SeedEnsemble(gsm, n_members=0).fit(pairs, y)
    with pytest.raises(ValueError, match="y"):
        SeedEnsemble(gsm).fit(pairs, np.zeros(len(y)))

    class NoSeed(GSM):
        def get_params(self, deep=True):
            return {k: v for k, v in super().get_params(deep).items() if k != "random_state"}

    with pytest.raises(ValueError, match="random_state"):
        SeedEnsemble(NoSeed(preprocessor=(d.X, d.Y))).fit(pairs, y)
    ens = SeedEnsemble(CMML(n_components=3, preprocessor=(d.X, d.Y)), n_members=2,
                       random_state=0)
    assert clone(ens).get_params()["n_members"] == 2
    groups = d.labels[pairs[:, 0]]
    s = cross_val_score(ens, pairs, y, cv=GroupKFold(3), groups=groups)
    assert s.shape == (3,) and np.isfinite(s).all()
