"""Early stopping on held-out pairs that share no sample with the training pairs."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from crossmetric import CLML, CMML, LDML, PCCA
from crossmetric._base import squared_euclidean_matrix
from crossmetric._solvers.early_stopping import EarlyStopping, validation_split
from crossmetric.pairs import make_pairs
from crossmetric.pairs._pair_data import PairData


@pytest.fixture(scope="module")
def class_data():
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(12), 10)
    centers = rng.rand(12, 6) * 3
    X = np.abs(centers[labels] + 0.5 * rng.randn(120, 6))
    Y = np.abs(centers[labels] @ rng.rand(6, 5) + 0.5 * rng.randn(120, 5))
    return X, Y, labels


def test_validation_split_shares_no_sample_and_keeps_identities(class_data):
    _, _, labels = class_data
    pairs, y = make_pairs(labels, n_negatives=5, random_state=0)
    train, val = validation_split(pairs[:, 0], pairs[:, 1], y, 120, 120, tied=True,
                                  fraction=0.2, random_state=0)
    assert not np.any(train & val)
    s_train = set(pairs[train].ravel())
    s_val = set(pairs[val].ravel())
    assert s_train.isdisjoint(s_val)
    # whole identities on one side
    assert set(labels[list(s_train)]).isdisjoint(labels[list(s_val)])
    assert set(y[val]) == {-1, 1} and set(y[train]) == {-1, 1}
    # about the asked share of the samples
    assert 0.15 <= len(s_val) / 120 <= 0.3
    # pairs across the two sides (negatives only) are dropped
    dropped = ~train & ~val
    assert np.all(y[dropped] == -1)
    # deterministic
    again = validation_split(pairs[:, 0], pairs[:, 1], y, 120, 120, tied=True, fraction=0.2,
                             random_state=0)
    np.testing.assert_array_equal(again[1], val)


def test_validation_split_cross_modal_nodes_are_distinct(class_data):
    _, _, labels = class_data
    pairs, y = make_pairs(labels, labels, n_negatives=5, random_state=0)
    train, val = validation_split(pairs[:, 0], pairs[:, 1], y, 120, 120, tied=False,
                                  fraction=0.2, random_state=1)
    for col in (0, 1):
        assert set(pairs[train, col]).isdisjoint(pairs[val, col])


def test_validation_split_without_negatives_on_one_side_is_an_error():
    pairs = np.array([[0, 1], [2, 3], [0, 2]])
    y = np.array([1, 1, -1])
    with pytest.raises(ValueError, match="no negative pairs"):
        validation_split(pairs[:, 0], pairs[:, 1], y, 4, 4, tied=True, fraction=0.5,
                         random_state=0)


def _validation(ids_x, ids_y, tied=False):
    from crossmetric._solvers.early_stopping import Validation

    return Validation(None, None, np.asarray(ids_x), np.asarray(ids_y), tied)


def test_monitor_keeps_the_best_score_and_waits_for_both_criteria():
    # eight held-out identities a side: D[a, b] between x-sample a and y-sample b
    n = 8
    val = _validation(np.arange(n), np.arange(n))
    wrong = np.ones((n, n))                                          # all tie: misses
    right = 1.0 - np.eye(n)                                          # every probe hits
    one_more = right.copy()
    one_more[0, 1] = -1.0                                            # one probe misses
    seq = iter([wrong, right, one_more])
    mon = EarlyStopping(lambda p: (next(seq), 1.0), val, n_iter_no_change=1, beta=3.0)
    assert not mon.update(0, np.zeros(1))
    assert not mon.update(1, np.ones(1))
    stop = mon.update(2, np.full(1, 2.0))
    assert mon.best_iteration == 1 and mon.scores[1] == 1.0 and mon.scores[0] == 0.0
    assert mon.scores[2] == 7 / 8
    np.testing.assert_array_equal(mon.best_params, np.ones(1))
    assert stop == (mon.losses[2] >= min(mon.losses[:2]))


def test_a_check_moves_away_from_the_start_only_beyond_the_held_out_noise():
    """Won probes must outnumber lost ones by 1.645 √(won + lost) (one-sided sign test) with an
    AUC no lower: one or two probes won and none lost is chance, three is not; with no probe
    changed the AUC decides."""
    n = 40
    val = _validation(np.arange(n), np.arange(n))
    mon = EarlyStopping(lambda p: (p, 1.0), val, 3)
    rng = np.random.RandomState(0)
    base = rng.rand(n, n) + 0.5
    start = base.copy()
    np.fill_diagonal(start, 0.0)
    start[:20, 20:] = 0.0  # the first 20 probes tie with a wrong match: misses
    np.fill_diagonal(start[:, 20:], 1.0)
    hits0 = mon.probe_hits(start)
    assert hits0.sum() == 20

    def fixed(k):
        D = start.copy()
        D[:k, 20:] = 2.0
        return D

    for k, expected in ((1, False), (2, False), (3, True)):
        s0, s1 = mon.score_matrix(start), mon.score_matrix(fixed(k))
        assert s1[0] > s0[0]
        assert mon.better(s1, mon.probe_hits(fixed(k)), s0, hits0) is expected
    # three probes won but the AUC lower: not better (the ranking of all held-out pairs)
    worse_auc = fixed(3)
    worse_auc[20:, :20] = 0.05                 # negatives of hitting probes moved near, not
    worse_auc[np.arange(20, n), np.arange(20, n)] = 0.01  # past, their matches
    assert mon.probe_hits(worse_auc).sum() == 23
    assert mon.score_matrix(worse_auc)[1] < mon.score_matrix(start)[1]
    assert not mon.better(mon.score_matrix(worse_auc), mon.probe_hits(worse_auc),
                          mon.score_matrix(start), hits0)
    # no probe changed: the AUC alone decides (matches pushed up, still nearest)
    duller = start.copy()
    duller[np.arange(20, n), np.arange(20, n)] = 0.4
    assert np.array_equal(mon.probe_hits(duller), hits0)
    s_start, s_dull = mon.score_matrix(start), mon.score_matrix(duller)
    assert s_dull[1] < s_start[1]
    assert mon.better(s_start, hits0, s_dull, hits0)
    assert not mon.better(s_dull, hits0, s_start, hits0)


def test_monitor_score_is_rank1_and_auc_of_all_cross_distances():
    """The score against a brute-force count: ties are misses, first-view probes."""
    from crossmetric.metrics import roc_auc

    rng = np.random.RandomState(0)
    ids_x, ids_y = np.array([0, 0, 1, 2, 3]), np.array([0, 1, 1, 2, 4])
    D = rng.rand(5, 5)
    D[3, 3] = D[3].min()  # a tie with another column counts as a miss
    D[3, 0] = D[3, 3]
    mon = EarlyStopping(lambda p: (D, 1.0), _validation(ids_x, ids_y), 3)

    def rank1(D, a, b):
        hits = [(D[i, b == a[i]].min() < D[i, b != a[i]].min()) for i in range(len(a))
                if np.any(b == a[i])]
        return np.mean(hits)

    same = ids_x[:, None] == ids_y[None, :]
    expected = (rank1(D, ids_x, ids_y), roc_auc(np.where(same, 1, -1).ravel(), -D.ravel()))
    assert mon.score_matrix(D) == pytest.approx(expected)
    # one set of samples: a sample never matches itself
    Dt = rng.rand(4, 4)
    Dt = Dt + Dt.T
    np.fill_diagonal(Dt, 0.0)
    ids = np.array([0, 0, 1, 1])
    tied = EarlyStopping(lambda p: (Dt, 1.0), _validation(ids, ids, tied=True), 3)
    off = ~np.eye(4, dtype=bool)
    hits = [Dt[i, (ids == ids[i]) & off[i]].min() < Dt[i, ids != ids[i]].min() for i in range(4)]
    auc = roc_auc(np.where(ids[:, None] == ids[None, :], 1, -1)[off], -Dt[off])
    assert tied.score_matrix(Dt) == pytest.approx((np.mean(hits), auc))


def test_choose_start_keeps_the_first_unless_another_is_better_beyond_noise():
    from crossmetric._solvers.early_stopping import choose_start

    n = 12
    val = _validation(np.arange(n), np.arange(n))
    good = 1.0 - np.eye(n)                      # 12 / 12
    bad = np.eye(n) + 0.5                       # 0 / 12
    almost = good.copy()
    almost[0, 1] = -1.0                         # 11 / 12
    mon = EarlyStopping(lambda p: (p, 1.0), val, 3)
    assert choose_start(mon, {"a": bad, "b": good, "c": good})[0] == "b"
    assert set(mon.start_scores) == {"a", "b", "c"}
    assert choose_start(None, {"a": bad, "b": good})[0] == "a"
    # one probe of twelve is no evidence: the first (preferred) start stays
    assert choose_start(mon, {"almost": almost, "good": good})[0] == "almost"


def test_choose_start_pools_the_probes_of_the_identity_folds():
    """Two starts the hold-out cannot tell apart (one probe of twelve) are told apart by the
    folds' probes of every other training identity; a start the folds did not score is
    compared on the hold-out alone."""
    from crossmetric._solvers.early_stopping import choose_start

    n = 12
    val = _validation(np.arange(n), np.arange(n))
    good = 1.0 - np.eye(n)                      # 12 / 12
    almost = good.copy()
    almost[0, 1] = -1.0                         # 11 / 12
    mon = EarlyStopping(lambda p: (p, 1.0), val, 3)
    folds = {"almost": (np.r_[np.ones(30), np.zeros(10)].astype(bool), [0.9] * 4),
             "good": (np.ones(40, dtype=bool), [0.95] * 4)}
    assert choose_start(mon, {"almost": almost, "good": good})[0] == "almost"
    assert choose_start(mon, {"almost": almost, "good": good}, folds=folds)[0] == "good"
    assert mon.start_scores["good"] == pytest.approx((1.0, 0.95 * 4 / 5 + 1.0 / 5))
    # "paper" has no fold scores: against the kept start on the hold-out's twelve probes
    assert choose_start(mon, {"almost": almost, "paper": good}, folds=folds)[0] == "almost"


def test_fold_start_hits_scores_every_training_identity_once():
    """Each identity of the pairs is held out by one fold; the untrained distance's hits are
    each probe's nearest gallery sample among its fold's held-out identities being its match
    (the slow, obvious count); pairs of a few classes, or one start, give no folds."""
    from crossmetric._solvers.early_stopping import START_FOLDS, fold_start_hits, identity_folds
    from crossmetric._solvers.starting import closed_start_distances

    rng = np.random.RandomState(0)
    n = 60
    Z = rng.randn(n, 5)
    X, Y = Z + 0.8 * rng.randn(n, 5), Z + 0.8 * rng.randn(n, 5)
    labels = np.arange(n)
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=0)
    data = PairData(X, Y, pairs[:, 0], pairs[:, 1])
    folds = fold_start_hits(data, y, ["identity", "kissme"],
                            lambda name, fold, rows: closed_start_distances(name, fold, 5),
                            tied=False, random_state=0)
    assert set(folds) == {"identity", "kissme"}
    assert folds["identity"][0].size == n and len(folds["identity"][1]) == START_FOLDS
    expected = []
    for _, _, val in identity_folds(data, y, tied=False, n_folds=START_FOLDS, random_state=0):
        D = squared_euclidean_matrix(val.data.X, val.data.Y)
        expected += [val.ids_y[np.argmin(D[a])] == val.ids_x[a] for a in range(len(D))]
    np.testing.assert_array_equal(folds["identity"][0], expected)
    # ``rows`` number the held-out samples in data.X / data.Y: the same distances from them
    by_rows = fold_start_hits(
        data, y, ["identity", "rows"],
        lambda name, fold, rows: (closed_start_distances(name, fold, 5) if name == "identity"
                                  else squared_euclidean_matrix(X[rows[0]], Y[rows[1]])),
        tied=False, random_state=0)
    np.testing.assert_array_equal(by_rows["rows"][0], expected)
    classes = np.arange(n) % 3
    cp, cy = make_pairs(classes, classes, max_positives=200, n_negatives=2, random_state=0)
    assert fold_start_hits(PairData(X, Y, cp[:, 0], cp[:, 1]), cy, ["identity", "kissme"],
                           lambda *a: None, tied=False) == {}
    assert fold_start_hits(data, y, ["identity"], lambda *a: None, tied=False) == {}


def test_closed_start_distances_are_kept_by_content_and_seed():
    """A closed-form start's fold distances are computed once per fold content, start, size
    and seed (the candidates of a selection that differ in what the start does not see), and
    equal a fresh computation; CCA's start without an integer seed is computed every time."""
    from crossmetric._solvers import starting
    from crossmetric._solvers.early_stopping import identity_folds

    rng = np.random.RandomState(1)
    n = 40
    Z = rng.randn(n, 6)
    X, Y = Z + 0.5 * rng.randn(n, 6), Z + 0.5 * rng.randn(n, 6)
    pairs, y = make_pairs(np.arange(n), np.arange(n), n_negatives=3, random_state=0)
    data = PairData(X, Y, pairs[:, 0], pairs[:, 1])
    train, y_train, val = identity_folds(data, y, tied=False, n_folds=4, random_state=0)[0]
    copy = (train._replace(X=train.X.copy(), Y=train.Y.copy()), y_train.copy(),
            val._replace(data=val.data._replace(X=val.data.X.copy(), Y=val.data.Y.copy())))
    starting._FOLD_DISTANCES.clear()
    for name, seed in (("kissme", None), ("cca(reg=0.1)", 3)):
        first = starting.closed_start_distances(name, (train, y_train, val), 4, seed)
        again = starting.closed_start_distances(name, copy, 4, seed)
        assert again is first and not first.flags.writeable
        fresh = starting._closed_start_distances(name, train, y_train, val.data, 4, seed)
        np.testing.assert_allclose(first, fresh)
        other = starting.closed_start_distances(name, (train, y_train, val), 3, seed)
        assert other is not first
    assert starting.closed_start_distances("cca(reg=0.1)", copy, 4, 4) is not \
        starting.closed_start_distances("cca(reg=0.1)", copy, 4, 3)
    n_kept = len(starting._FOLD_DISTANCES)
    starting.closed_start_distances("cca(reg=0.1)", copy, 4, np.random.RandomState(0))
    assert len(starting._FOLD_DISTANCES) == n_kept
    for k in range(starting._FOLD_DISTANCES.size + 5):  # bounded: the oldest are let go
        starting.closed_start_distances("cca(reg=0.1)", (train, y_train, val), 2, k)
    assert len(starting._FOLD_DISTANCES) == starting._FOLD_DISTANCES.size


def test_blas_limit_sets_and_restores_the_threads():
    from threadpoolctl import threadpool_info, threadpool_limits

    from crossmetric._utils.threads import blas_limit

    def threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    with threadpool_limits(limits=2, user_api="blas"):  # the tests run with one thread
        before = threads()
        with blas_limit(1):
            assert set(threads()) == {1}
        assert threads() == before
        with blas_limit(None):
            assert threads() == before


def _models(X, Y):
    return {
        "PCCA": (PCCA(3, kernel="rbf", max_iter=100, random_state=0, preprocessor=X), False),
        "PCCA-linear": (PCCA(3, max_iter=100, random_state=0, preprocessor=X), False),
        "CMML": (CMML(3, kernel="rbf", max_iter=100, random_state=0, preprocessor=(X, Y)),
                 True),
        "LDML": (LDML(3, max_iter=100, random_state=0, preprocessor=X), False),
        "CLML": (CLML(2, n_components=3, max_iter=100, random_state=0, preprocessor=X),
                 False),
    }


@pytest.mark.parametrize("name", ["PCCA", "PCCA-linear", "CMML", "LDML", "CLML"])
def test_early_stopping_records_and_keeps_the_best_iterate(name, class_data):
    X, Y, labels = class_data
    model, cross = _models(X, Y)[name]
    pairs, y = make_pairs(labels, labels if cross else None, n_negatives=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = clone(model).set_params(max_iter=3).fit(pairs, y)
        assert plain.validation_scores_ is None and plain.best_iteration_ is None
        model.set_params(early_stopping=True, validation_fraction=0.25, n_iter_no_change=3)
        model.fit(pairs, y)
        again = clone(model).fit(pairs, y)
    np.testing.assert_array_equal(again.pair_distance(pairs), model.pair_distance(pairs))
    scores = model.validation_scores_
    assert len(scores) == model.n_iter_ + 1 == len(model.validation_loss_curve_)
    # the kept check is the start or one better than it on the held-out identities
    assert scores[model.best_iteration_] >= scores[0]
    # stopped because neither criterion improved for 3 iterations, or on a plateau
    assert model.n_iter_ - model.best_iteration_ >= 3 or model.n_iter_ < 100
    # the kept model is the best iterate, not the last one
    assert model.best_iteration_ <= model.n_iter_


@pytest.mark.parametrize("params, match", [
    (dict(early_stopping="yes"), "early_stopping"),
    (dict(early_stopping=True, validation_fraction=1.0), "validation_fraction"),
    (dict(early_stopping=True, validation_fraction=0.0), "validation_fraction"),
    (dict(early_stopping=True, n_iter_no_change=0), "n_iter_no_change"),
])
def test_early_stopping_parameters_are_checked(params, match, class_data):
    X, _, labels = class_data
    pairs, y = make_pairs(labels, random_state=0)
    with pytest.raises(ValueError, match=match):
        PCCA(3, preprocessor=X, **params).fit(pairs, y)


def test_small_steps_that_add_up_beyond_noise_are_kept():
    """Each check fixes one more probe than the last (never significant step by step); the
    kept check is the best of those significantly better than the start."""
    n = 30
    val = _validation(np.arange(n), np.arange(n))
    start = np.ones((n, n))           # every probe ties: misses
    steps = []
    for k in range(1, 7):
        D = start.copy()
        D[np.arange(k), np.arange(k)] = 0.0  # the first k probes hit
        steps.append(D)
    seq = iter([start, *steps])
    mon = EarlyStopping(lambda p: (next(seq), 1.0), val, n_iter_no_change=10)
    for it in range(7):
        mon.update(it, np.full(1, float(it)))
    # 1 and 2 won, none lost: chance; 3 won: 3 > 1.645 √3, kept; then the best, 6
    assert mon.scores == [k / n for k in range(7)]
    assert mon.best_iteration == 6
    np.testing.assert_array_equal(mon.best_params, np.full(1, 6.0))
    seq = iter([start, *steps[:2]])
    mon = EarlyStopping(lambda p: (next(seq), 1.0), val, n_iter_no_change=10)
    for it in range(3):
        mon.update(it, np.full(1, float(it)))
    assert mon.best_iteration == 0  # two probes of thirty: the start stays


def test_two_stacked_domains_are_held_out_as_probes_against_a_gallery():
    """One sample set whose pairs join two disjoint parts (photos then sketches stacked, as the
    protocols give them to a single-modal learner) is scored first part against second, as
    the protocols score it; pairs within one set are scored all against all."""
    from crossmetric._base import PairData
    from crossmetric._solvers.early_stopping import split_pairs

    rng = np.random.RandomState(0)
    n = 60
    S = rng.randn(2 * n, 5)
    pairs, y = make_pairs(np.arange(n), np.arange(n), n_negatives=2, random_state=0)
    model = LDML(2, early_stopping=True, random_state=0)
    _, _, val = split_pairs(model, PairData(S, S, pairs[:, 0], pairs[:, 1] + n), y)
    assert not val.tied
    photos = {tuple(r) for r in np.round(S[:n], 12)}
    assert all(tuple(r) in photos for r in np.round(val.data.X, 12))
    assert not any(tuple(r) in photos for r in np.round(val.data.Y, 12))
    assert np.array_equal(np.sort(val.ids_x), np.sort(val.ids_y))
    labels = np.repeat(np.arange(n), 2)
    pairs, y = make_pairs(labels, n_negatives=2, random_state=0)
    _, _, val = split_pairs(model, PairData(S, S, pairs[:, 0], pairs[:, 1]), y)
    assert val.tied and val.data.X is val.data.Y
