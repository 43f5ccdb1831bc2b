"""Tests of crossmetric.protocols.model_selection and the benchmark's tuning."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from crossmetric._base import CrossModalMixin
from crossmetric.pairs import make_pairs
from crossmetric.protocols import run_protocols, verification_splits
from crossmetric.protocols.model_selection import (
    describe_choices,
    inner_pair_splits,
    object_folds,
    search_params,
    search_stages,
)


def make_data(n_ids=30, per_id=4, dx=5, dy=3, seed=0):
    rng = np.random.RandomState(seed)
    labels = np.repeat(np.arange(n_ids), per_id)
    centers = rng.randn(n_ids, 2) * 3
    H = centers[labels] + 0.5 * rng.randn(labels.size, 2)
    X = H @ rng.randn(2, dx) + 0.2 * rng.randn(labels.size, dx)
    Y = H @ rng.randn(2, dy) + 0.2 * rng.randn(labels.size, dy)
    return X, Y, labels


class SpyLearner(CrossModalMixin, BaseEstimator):
    """A cross-modal learner that records every sample row it is fitted on.

    ``scale`` multiplies the y-side; the score is best at ``scale == 1`` on ``make_data``-like
    data with X = Y, so the search has a known right answer.
    """

    seen: list = []

    def __init__(self, scale=1.0, preprocessor=None, random_state=None):
        self.scale = scale
        self.preprocessor = preprocessor
        self.random_state = random_state

    def _fit(self, data, y):
        used_x = np.unique(data.ix)
        used_y = np.unique(data.iy)
        SpyLearner.seen.append((data.X[used_x].copy(), data.Y[used_y].copy(), data.X.copy()))

    def _embed_x(self, X):
        return X

    def _embed_y(self, Y):
        return self.scale * Y


def test_object_folds_grouped_by_identity():
    labels = np.repeat(np.arange(12), 3)
    folds = object_folds(labels, 3, group="identity", random_state=0)
    assert len(folds) == 3
    covered = np.sort(np.concatenate([va for _, va in folds]))
    np.testing.assert_array_equal(covered, np.arange(labels.size))
    for tr, va in folds:
        assert not set(labels[tr]) & set(labels[va])


def test_object_folds_sample_mode_is_stratified_and_disjoint():
    labels = np.repeat(np.arange(4), 9)
    for tr, va in object_folds(labels, 3, group="sample", random_state=0):
        assert not set(tr) & set(va)
        assert set(labels[va]) == set(range(4))     # every class in every fold
    with pytest.raises(ValueError, match="group"):
        object_folds(labels, 3, group="pairs")
    with pytest.raises(ValueError, match="identities"):
        object_folds(np.repeat([0, 1], 5), 3, group="identity")


def test_inner_pairs_do_not_share_objects_or_identities():
    labels = np.repeat(np.arange(20), 3)
    for tr_p, tr_y, va_p, va_y in inner_pair_splits(labels, 4, group="identity",
                                                    random_state=0):
        assert not set(tr_p.ravel()) & set(va_p.ravel())
        assert not set(labels[tr_p.ravel()]) & set(labels[va_p.ravel()])
        assert set(np.unique(tr_y)) == set(np.unique(va_y)) == {-1, 1}
        # positives join objects of one identity
        assert np.all(labels[tr_p[tr_y == 1, 0]] == labels[tr_p[tr_y == 1, 1]])


def test_search_finds_the_known_best_and_reports_every_candidate():
    X, _, labels = make_data()
    res = search_params(SpyLearner(), {"scale": [3.0, 1.0, 0.2]}, X, X, labels, n_splits=3,
                        random_state=0)
    assert res.best_params == {"scale": 1.0}
    assert [c["params"]["scale"] for c in res.candidates] == [3.0, 1.0, 0.2]
    assert res.best_score == max(c["mean_auc"] for c in res.candidates)
    assert "scale=1.0" in describe_choices([res.best_params, res.best_params])


def test_search_reports_failing_candidates_and_rejects_empty_grid():
    from crossmetric.learners.baselines import CCA

    X, Y, labels = make_data()
    res = search_params(CCA(2), {"reg": [0.1, -1.0]}, X, Y, labels, random_state=0)
    assert res.best_params == {"reg": 0.1}
    assert res.candidates[1]["n_failed"] == 3
    # a dimension above the fold's views is capped, not a failure
    res = search_params(CCA(), {"n_components": [2, 50]}, X, Y, labels, random_state=0)
    assert res.candidates[1]["n_failed"] == 0
    with pytest.raises(ValueError, match="empty"):
        search_params(CCA(), [], X, Y, labels)


@pytest.mark.parametrize("scoring", ["rank1", "map"])
def test_identification_scoring_is_the_validation_identities_rank_measure(scoring):
    """rank1 / mAP: every validation object's X row against all validation objects' Y rows,
    computed here directly from the same folds."""
    from crossmetric.metrics import mean_average_precision, rank_accuracy

    X, Y, labels = make_data(n_ids=24, per_id=2, dy=5)
    res = search_params(SpyLearner(), {"scale": [0.2, 1.0]}, X, X + 0.3 * Y, labels,
                        n_splits=3, scoring=scoring, random_state=0)
    folds = inner_pair_splits(labels, 3, random_state=np.random.RandomState(0))
    for cand in res.candidates:
        scale = cand["params"]["scale"]
        expected = []
        for _, _, va_p, _ in folds:
            rows = np.unique(va_p)
            D = ((X[rows, None, :] - scale * (X + 0.3 * Y)[None, rows, :]) ** 2).sum(-1)
            lab = labels[rows]
            expected.append(rank_accuracy(D, lab, lab) if scoring == "rank1"
                            else mean_average_precision(D, lab, lab))
        assert cand["mean_score"] == pytest.approx(np.mean(expected), abs=1e-12)
        assert "mean_auc" not in cand
    assert res.scoring == scoring
    assert res.best_params == {"scale": 1.0}
    with pytest.raises(ValueError, match="scoring must be one of auc, rank1, map"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, X, labels, scoring="accuracy")


def test_single_modal_rank1_scoring_never_counts_the_probe_itself():
    """Single-modal validation: a probe is in its own gallery; finding itself is no hit."""
    X, _, labels = make_data(n_ids=24, per_id=2)
    res = search_params(SpyLearner(), {"scale": [1.0]}, X, X, labels, n_splits=3,
                        cross_modal=False, scoring="rank1", random_state=0)
    assert 0.0 < res.best_score < 1.0      # each object finding itself would give exactly 1


def test_search_stages_fixes_each_winner_for_the_next_stage():
    from crossmetric.learners.baselines import CCA

    X, Y, labels = make_data(n_ids=24, per_id=3, dy=5)
    stages = [{"n_components": [1, 2]}, {"reg": [1e-3, 10.0]}]
    res = search_stages(CCA(), stages, X, Y, labels, scoring="rank1", random_state=0)
    seed = int(np.random.RandomState(0).randint(2**31 - 1))
    first = search_params(CCA(), stages[0], X, Y, labels, scoring="rank1", random_state=seed)
    second = search_params(CCA(**first.best_params), stages[1], X, Y, labels,
                           scoring="rank1", random_state=seed)
    assert res.best_params == {**first.best_params, **second.best_params}
    assert res.best_score == second.best_score
    assert [c["stage"] for c in res.candidates] == [0, 0, 1, 1]
    assert [c["mean_score"] for c in res.candidates] == [
        c["mean_score"] for c in first.candidates + second.candidates]
    # stage 1's candidates carry stage 0's winner
    assert all(c["params"]["n_components"] == first.best_params["n_components"]
               for c in res.candidates[2:])
    with pytest.raises(ValueError, match="stages is empty"):
        search_stages(CCA(), [], X, Y, labels)


def test_search_stages_does_not_refit_a_candidate_an_earlier_stage_scored():
    """The stages share their folds: a later stage's candidate whose learner was scored before
    (the choice so far, or any earlier candidate) is recorded from that score, with no fit
    and times of 0; the result equals the stages searched one by one."""
    X, Y, labels = make_data(n_ids=18, per_id=3, dy=5)
    Y = X.copy()
    stages = [{"scale": [2.0, 1.0]}, {"scale": [3.0, 1.0, 2.0]}]
    SpyLearner.seen = []
    res = search_stages(SpyLearner(), stages, X, Y, labels, scoring="rank1", random_state=0)
    assert len(SpyLearner.seen) == 3 * 3  # 2 + 1 new candidates, 3 folds each
    seed = int(np.random.RandomState(0).randint(2**31 - 1))
    first = search_params(SpyLearner(), stages[0], X, Y, labels, scoring="rank1",
                          random_state=seed)
    second = search_params(SpyLearner(**first.best_params), stages[1], X, Y, labels,
                           scoring="rank1", random_state=seed)
    np.testing.assert_array_equal(res.fold_scores,
                                  np.vstack([first.fold_scores, second.fold_scores]))
    assert res.best_params == second.best_params == {"scale": 1.0}
    np.testing.assert_array_equal(res.fit_times[3:], 0.0)  # stage 1's scale 1 and 2: reused
    assert (res.fit_times[2] > 0).all()
    assert [c["params"]["scale"] for c in res.candidates] == [2.0, 1.0, 3.0, 1.0, 2.0]


def test_an_iteration_stage_scores_larger_caps_from_a_fit_that_stopped_before_them(
        monkeypatch):
    """A learner whose ``max_iter`` only caps its iterations: on each fold, a candidate whose
    ``max_iter`` exceeds the iterations of an earlier fit that stopped on its own (the
    guarded fit's stop) is scored from that fit without fitting -- with the same scores as
    fitting it (the slow, obvious search with the shortcut switched off)."""
    from crossmetric import CMML

    X, Y, labels = make_data(n_ids=40, per_id=2, dx=6, dy=6, seed=3)
    stages = [{"init": ["identity"]}, {"max_iter": [2, 1000, 300, 5]}]
    est = CMML(n_components=4, early_stopping=True, n_iter_no_change=3)
    fast = search_stages(est, stages, X, Y, labels, scoring="rank1", random_state=0)
    monkeypatch.setattr(CMML, "_max_iter_only_caps", False)
    slow = search_stages(est, stages, X, Y, labels, scoring="rank1", random_state=0)
    np.testing.assert_array_equal(fast.fold_scores, slow.fold_scores)
    assert fast.best_params == slow.best_params
    # stage 1 (rows 1-4): max_iter 1000 is stage 0's fit (the memo); 300 stops where that
    # fit stopped: not fitted; 2 and 5, below its iterations, are fitted
    assert (slow.fit_times[3] > 0).all() and (fast.fit_times[3] == 0).all()
    assert (fast.fit_times[[1, 4]] > 0).all() and (fast.fit_times[2] == 0).all()


def test_keep_current_puts_the_current_settings_first_once_and_ties_keep_them():
    X, Y, labels = make_data(n_ids=18, per_id=3, dy=5)
    Y = X.copy()
    # scale 1 is the current setting and the best; 3 is not; the grid lists 1 as well
    stages = [{"scale": [3.0, 1.0]}, {"scale": [2.0]}]
    SpyLearner.seen = []
    res = search_stages(SpyLearner(), stages, X, Y, labels, scoring="rank1", random_state=0,
                        keep_current=True)
    assert [c["params"]["scale"] for c in res.candidates] == [1.0, 3.0, 1.0, 2.0]
    assert [c["stage"] for c in res.candidates] == [0, 0, 1, 1]
    assert res.best_params == {"scale": 1.0}
    assert len(SpyLearner.seen) == 3 * 3  # 1 and 3 in stage 0, 2 in stage 1 (1 reused)
    # without it, the same stages as given
    plain = search_stages(SpyLearner(), stages, X, Y, labels, scoring="rank1", random_state=0)
    assert [c["params"]["scale"] for c in plain.candidates] == [3.0, 1.0, 2.0]
    # a tie between the current setting and another keeps the current one
    tie = search_stages(SpyLearner(scale=1.0), [{"random_state": [7]}], X, Y, labels,
                        scoring="rank1", random_state=0, keep_current=True)
    assert tie.best_params == {"random_state": None}


@pytest.mark.parametrize("rows, chosen", [
    ([[0.50, 0.40, 0.60], [0.52, 0.38, 0.63]], 1.0),   # +0.01 on the mean, one fold worse
    ([[0.50, 0.40, 0.60], [0.53, 0.42, 0.64]], 3.0),   # +0.03, better on every fold
    ([[0.50, np.nan, 0.60], [0.52, 0.38, 0.63]], 3.0),  # the current failed: the best mean
])
def test_keep_current_leaves_the_current_setting_only_beyond_the_folds_noise(
        monkeypatch, rows, chosen):
    """With ``keep_current`` a stage keeps the current setting unless its best candidate beats
    it by more than the standard error of the fold-by-fold differences."""
    from crossmetric.protocols import model_selection as ms

    X, Y, labels = make_data(n_ids=18, per_id=3, dy=5)
    rows = np.asarray(rows)

    def scored(est, grid, *a, **k):
        from sklearn.model_selection import ParameterGrid

        values = [c["scale"] for c in ParameterGrid(grid)]  # keep_current: the current first
        cands = [{"params": {"scale": v}, "mean_score": float(r.mean()), "std_score": 0.0}
                 for v, r in zip(values, rows, strict=True)]
        means = np.array([c["mean_score"] for c in cands])
        best = int(np.nanargmax(means))
        return ms.SearchResult(dict(cands[best]["params"]), cands[best]["mean_score"], cands,
                               "rank1", rows, np.zeros_like(rows), np.zeros_like(rows))

    monkeypatch.setattr(ms, "search_params", scored)
    res = ms.search_stages(SpyLearner(scale=1.0), [{"scale": [3.0]}], X, Y, labels,
                           scoring="rank1", random_state=0, keep_current=True)
    assert res.best_params == {"scale": chosen}
    # the plain search (no current setting first) takes the best mean
    plain = ms.search_stages(SpyLearner(scale=1.0), [{"scale": [1.0, 3.0]}], X, Y, labels,
                             scoring="rank1", random_state=0)
    assert plain.best_params == {"scale": 3.0}


def test_candidate_keys_describe_the_fitted_learner_and_refuse_objects():
    from crossmetric import CCA
    from crossmetric.protocols.model_selection import candidate_key

    assert candidate_key(CCA(reg=0.1), {}) == candidate_key(CCA(), {"reg": 0.1})
    assert candidate_key(CCA(), {"reg": 1.0}) != candidate_key(CCA(), {"reg": 0.1})
    assert candidate_key(SpyLearner(), {}) != candidate_key(CCA(), {})
    assert candidate_key(CCA(), {"preprocessor": (np.zeros((2, 2)), None)}) is None
    assert candidate_key(CCA(), {"n_components": [1, 2]}) == candidate_key(
        CCA(), {"n_components": (1, 2)})


@pytest.mark.parametrize("scoring", ["auc", "rank1", "cmc20"])
def test_benchmark_tuning_never_sees_a_test_object(scoring):
    """Leak test: every row the tuned learner is fitted on -- in the search and in the final
    fit -- belongs to the split's training objects."""
    X, Y, labels = make_data(n_ids=40, per_id=3, dy=5)
    # tag every object with its row number in an extra column, to recognise it later
    Xt = np.c_[X, np.arange(labels.size)]
    Yt = np.c_[Y, np.arange(labels.size)]
    SpyLearner.seen = []
    res = run_protocols({"spy": SpyLearner()}, {"X": Xt, "Y": Yt, "labels": labels},
                        protocols=("verification",), n_folds=4, random_state=0,
                        param_grids={"spy": {"scale": [0.5, 1.0]}}, tune_folds=3,
                        tune_scoring=scoring)
    splits = verification_splits(labels, 4, random_state=np.random.RandomState(0))
    tuned = res.info["tuned"]["spy"]
    assert len(tuned) == 4 and all(t["params"]["scale"] in (0.5, 1.0) for t in tuned)
    assert res.info["tuning"]["group"] == "identity"
    assert res.info["tuning"]["scoring"] == scoring
    assert all(t["scoring"] == scoring for t in tuned)
    # 4 outer splits x (3 inner folds x 2 candidates + 1 final fit)
    assert len(SpyLearner.seen) == 4 * (3 * 2 + 1)
    per_split = len(SpyLearner.seen) // 4
    for k, sp in enumerate(splits):
        test_rows = set(sp.probe_rows.tolist())
        for Xa, Ya, _ in SpyLearner.seen[k * per_split:(k + 1) * per_split]:
            seen_rows = set(Xa[:, -1].astype(int)) | set(Ya[:, -1].astype(int))
            assert not seen_rows & test_rows
        # the inner fits are handed the training objects only, not just pairs among them
        for _, _, Xall in SpyLearner.seen[k * per_split:(k + 1) * per_split - 1]:
            assert not set(Xall[:, -1].astype(int)) & test_rows


def test_benchmark_tuning_groups_inner_folds_by_identity(monkeypatch):
    """The inner folds of the benchmark's search never share an identity."""
    import crossmetric.protocols.model_selection as ms

    calls = []
    original = ms.inner_pair_splits

    def recording(labels, *args, **kwargs):
        out = original(labels, *args, **kwargs)
        calls.append((np.asarray(labels), kwargs["group"], out))
        return out

    monkeypatch.setattr(ms, "inner_pair_splits", recording)
    X, Y, labels = make_data(n_ids=40, per_id=3, dy=5)
    run_protocols({"spy": SpyLearner()}, {"X": X, "Y": Y, "labels": labels},
                  protocols=("verification",), n_folds=4, random_state=0,
                  param_grids={"spy": {"scale": [1.0]}})
    assert len(calls) == 4
    for lab, group, folds in calls:
        assert group == "identity"
        for tr_p, _, va_p, _ in folds:
            assert not set(lab[tr_p.ravel()]) & set(lab[va_p.ravel()])


def test_run_protocols_rejects_unknown_grid_names():
    X, Y, labels = make_data(dy=5)
    with pytest.raises(ValueError, match="param_grids"):
        run_protocols({"spy": SpyLearner()}, {"X": X, "Y": Y, "labels": labels},
                      protocols=("verification",), n_folds=3,
                      param_grids={"other": {"scale": [1.0]}})


def test_cli_benchmark_tune_reports_choices(tmp_path, capsys):
    import json

    from crossmetric.cli import main

    rc = main(["benchmark", "--methods", "euclidean,cca", "--folds", "2", "--repeats", "1",
               "--tune", "--tune-folds", "2", "--out", str(tmp_path), "--no-progress",
               "--n-jobs", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "hyper-parameters chosen" in out and "CCA: n_components=" in out
    info = json.loads((tmp_path / "results.json").read_text())["info"]
    assert len(info["tuned"]["CCA"]) == 3             # 2 folds + 1 repeat
    assert info["tuning"]["grids"] == {"CCA": {"n_components": [5, 10, 20]}}
    assert "Euclidean-C" not in info["tuned"]
    assert main(["benchmark", "--tune-folds", "1"]) == 2
    assert "--tune-folds must be >= 2" in capsys.readouterr().err


def test_cli_benchmark_tune_paper_runs_the_paper_stages(tmp_path, capsys):
    """``--tune paper`` searches the registry's paper grid stage by stage, here CML-AUC's
    γ-then-μ selection (§V-B), scored by rank-1 on the validation identities."""
    import json

    from crossmetric.cli import main
    from crossmetric.registry import AUC_START_STAGE, CMLAUC_PAPER_GRID, METHODS

    # the start first (ours), then the paper's selection; the reproductions take the latter
    assert METHODS["cmlauc"].search_grid("paper") == [AUC_START_STAGE, *CMLAUC_PAPER_GRID]
    assert METHODS["cmlauc"].search_grid("paper", with_start=False) == list(CMLAUC_PAPER_GRID)
    assert AUC_START_STAGE == {"init": ["auto", "identity", "cca", "kissme", "pca"]}
    # γ with μ = 1e-7 under both preconditionings (ours: whitened, and the paper's scale),
    # then μ
    first, second = CMLAUC_PAPER_GRID
    assert [g.get("standardize", ["default"]) for g in first] == [["default"], ["scale"]]
    assert all(g["gamma"] == [0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0] and g["mu"] == [1e-7]
               for g in first)
    assert second == {"mu": [1e-3, 1e-4, 1e-5, 1e-6, 1e-7]}
    assert METHODS["euclidean"].search_grid("paper") == {}
    with pytest.raises(ValueError, match="which must be"):
        METHODS["cca"].search_grid("large")
    rc = main(["benchmark", "--methods", "cca", "--protocol", "identification",
               "--repeats", "1", "--tune", "paper", "--tune-scoring", "rank1",
               "--tune-folds", "2", "--out", str(tmp_path), "--no-progress", "--n-jobs", "1"])
    assert rc == 0
    info = json.loads((tmp_path / "results.json").read_text())["info"]
    assert info["tuning"]["scoring"] == "rank1"
    assert info["tuning"]["grids"]["CCA"] == [
        {"n_components": [10, 20, 32, 64], "reg": [1e-3, 1e-2, 1e-1]}]
    (run,) = info["tuned"]["CCA"]
    assert run["scoring"] == "rank1" and 0.0 <= run["cv_score"] <= 1.0
    # every candidate's inner score is recorded; the chosen one has the best of them
    cands = run["candidates"]
    assert len(cands) == 13 and {c["stage"] for c in cands} == {0}
    # the benchmark's own settings first (keep_current): the choice can be the defaults'
    assert cands[0]["params"] == {"n_components": "auto", "reg": 0.1}
    assert max(c["mean_score"] for c in cands) == run["cv_score"]
    assert [c["params"] for c in cands if c["mean_score"] == run["cv_score"]][0] == \
        run["params"]
    assert set(run["params"]) == {"n_components", "reg"}
    assert main(["benchmark", "--tune", "huge"]) == 2


# ------------------------------------------- one selection routine: new options
def _slow_mean_cmc(D, probe_labels, gallery_labels, *, exclude_self=False, max_rank=20):
    """Mean over ranks 1..min(max_rank, gallery) of the fraction of probes whose first true
    match sorts within that rank (no ties in continuous data)."""
    n_gallery = D.shape[1] - (1 if exclude_self else 0)
    ranks = []
    for i in range(D.shape[0]):
        order = [j for j in np.argsort(D[i]) if not (exclude_self and j == i)]
        hits = [k for k, j in enumerate(order) if gallery_labels[j] == probe_labels[i]]
        ranks.append(hits[0] + 1 if hits else np.inf)
    ranks = np.array(ranks)
    return float(np.mean([np.mean(ranks <= r) for r in range(1, min(max_rank, n_gallery) + 1)]))


def _spy_distance(A, B, scale):
    return ((A[:, None, :] - scale * B[None, :, :]) ** 2).sum(-1)


@pytest.mark.parametrize("cross_modal", [True, False])
def test_cmc20_scoring_is_the_slow_mean_cmc_of_the_validation_objects(cross_modal):
    X, Y, labels = make_data(n_ids=30, per_id=3, dy=5)
    Y = X + 0.5 * Y if cross_modal else X
    res = search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, Y, labels, n_splits=3,
                        cross_modal=cross_modal, scoring="cmc20", random_state=0)
    folds = inner_pair_splits(labels, 3, cross_modal=cross_modal,
                              random_state=np.random.RandomState(0))
    for cand, fold_scores in zip(res.candidates, res.fold_scores, strict=True):
        expected = []
        for _, _, va_p, _ in folds:
            rows = np.unique(va_p)
            D = _spy_distance(X[rows], Y[rows], cand["params"]["scale"])
            expected.append(_slow_mean_cmc(D, labels[rows], labels[rows],
                                           exclude_self=not cross_modal))
        np.testing.assert_allclose(fold_scores, expected, atol=1e-12)
        assert cand["mean_score"] == pytest.approx(np.mean(expected), abs=1e-12)
    assert res.scoring == "cmc20"
    assert res.best_params == res.candidates[int(np.argmax(res.fold_scores.mean(1)))]["params"]


def test_identification_split_folds_rank_their_probes_against_their_gallery():
    """A Split hold-out (probe / gallery rows) is validated on exactly those rows, with its
    own seed handed to the candidate; the gallery may be smaller than rank 20."""
    from crossmetric.protocols import Split

    X, Y, labels = make_data(n_ids=30, per_id=2, dy=5)
    Y = X + 0.5 * Y
    rng = np.random.RandomState(1)
    folds = []
    for k in range(2):
        ids = rng.permutation(30)
        val, tr = ids[:12], ids[12:]
        rows = np.flatnonzero(np.isin(labels, tr))
        pairs, y = make_pairs(labels[rows], labels[rows], random_state=k)
        probe = np.flatnonzero(np.isin(labels, val))[::2]       # one object per identity
        gallery = np.flatnonzero(np.isin(labels, val))[1::2]
        folds.append(Split("identification", k, rows[pairs], y, probe_rows=probe,
                           gallery_rows=gallery, seed=100 + k))
    SpyLearner.seen = []
    for scoring in ("cmc20", "rank1"):
        res = search_params(SpyLearner(), {"scale": [0.3, 1.0]}, X, Y, labels, folds=folds,
                            scoring=scoring)
        for cand, fold_scores in zip(res.candidates, res.fold_scores, strict=True):
            for f, fold in enumerate(folds):
                p, g = fold.probe_rows, fold.gallery_rows
                D = _spy_distance(X[p], Y[g], cand["params"]["scale"])
                want = (_slow_mean_cmc(D, labels[p], labels[g]) if scoring == "cmc20"
                        else np.mean(labels[g][np.argmin(D, axis=1)] == labels[p]))
                assert fold_scores[f] == pytest.approx(want, abs=1e-12)
    # fits fold by fold, candidate by candidate: never on a validation object of the fold
    assert len(SpyLearner.seen) == 2 * 2 * 2
    for i, (Xa, Ya, _) in enumerate(SpyLearner.seen):
        fold = folds[(i // 2) % 2]
        held_out = np.r_[fold.probe_rows, fold.gallery_rows]
        assert not (Xa[:, None, :] == X[held_out][None]).all(-1).any()
        assert not (Ya[:, None, :] == Y[held_out][None]).all(-1).any()
    with pytest.raises(ValueError, match="identification fold"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, Y, labels, folds=folds)


def test_precomputed_tuple_folds_give_the_drawn_search():
    X, Y, labels = make_data(dy=5)
    drawn = search_params(SpyLearner(), {"scale": [0.2, 1.0, 3.0]}, X, X + 0.3 * Y, labels,
                          random_state=0)
    folds = inner_pair_splits(labels, 3, random_state=np.random.RandomState(0))
    given = search_params(SpyLearner(), {"scale": [0.2, 1.0, 3.0]}, X, X + 0.3 * Y, None,
                          folds=folds)
    assert given.candidates == drawn.candidates
    np.testing.assert_array_equal(given.fold_scores, drawn.fold_scores)
    with pytest.raises(ValueError, match="folds is empty"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, X, labels, folds=[])
    with pytest.raises(ValueError, match=r"folds\[0\] is int"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, X, labels, folds=[3])
    with pytest.raises(ValueError, match="labels must be given"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, X, None)
    with pytest.raises(ValueError, match="labels must be given"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, X, None, folds=folds, scoring="map")


def _slow_patience_scan(values, patience):
    """The scan select_max_iter always did: the first best wins (NaN = failed, never best),
    stop after ``patience`` candidates in a row that do not beat it once there is a best."""
    best, worse, seen = None, 0, []
    for k, v in enumerate(values):
        seen.append(k)
        if v == v and (best is None or v > values[best]):
            best, worse = k, 0
        elif best is not None:
            worse += 1
            if worse >= patience:
                break
    return best, seen


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("patience", [1, 2, 3])
def test_patience_scan_matches_the_slow_scan(seed, patience):
    """Scores drawn from a small set (so ties occur), some candidates failing (NaN)."""
    rng = np.random.RandomState(seed)
    values = rng.choice([0.1, 0.2, 0.3, 0.4], size=8).tolist()
    values[rng.randint(8)] = float("nan")
    if seed == 0:
        values[:2] = [float("nan")] * 2      # failures before the first score do not count
    calls = []

    def scorer(est, pairs, y):
        calls.append(est.scale)
        v = values[int(est.scale)]
        if v != v:
            raise ValueError("this candidate fails")
        return v

    X, Y, labels = make_data(n_ids=12, per_id=3)
    folds = inner_pair_splits(labels, 2, random_state=0)
    res = search_params(SpyLearner(), {"scale": list(range(8))}, X, X, labels, folds=folds,
                        scoring=scorer, patience=patience)
    best, seen = _slow_patience_scan(values, patience)
    assert best is not None
    assert [c["params"]["scale"] for c in res.candidates] == seen
    assert res.best_params == {"scale": best}
    assert res.fold_scores.shape == (len(seen), 2)
    assert calls == [s for s in seen for _ in range(2)]   # each seen candidate on each fold
    full = search_params(SpyLearner(), {"scale": list(range(8))}, X, X, labels, folds=folds,
                         scoring=scorer)
    assert len(full.candidates) == 8
    with pytest.raises(ValueError, match="patience"):
        search_params(SpyLearner(), {"scale": [1]}, X, X, labels, folds=folds, patience=0)
    with pytest.raises(ValueError, match="this candidate fails"):
        search_params(SpyLearner(), {"scale": list(range(8))}, X, X, labels, folds=folds,
                      scoring=scorer, on_error="raise")
    with pytest.raises(ValueError, match="on_error"):
        search_params(SpyLearner(), {"scale": [1]}, X, X, labels, on_error="ignore")


# a fixed budget of 20 iterations on both sides: the comparison, not convergence
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_callable_scorer_search_equals_gridsearchcv():
    """Precomputed folds of a fixed pair set + a scikit-learn scorer: the scores, their
    mean / std and the choice of GridSearchCV on the same folds."""
    from sklearn.metrics import get_scorer
    from sklearn.model_selection import GridSearchCV

    from crossmetric import PCCA
    from crossmetric.pairs import group_pair_folds

    X, _, labels = make_data(n_ids=20, per_id=4, dx=6)
    pairs, y = make_pairs(labels, random_state=0)
    cv = group_pair_folds(pairs[:, 0], pairs[:, 1], 3, random_state=0, y=y)
    base = PCCA(n_components=2, max_iter=20, random_state=0, preprocessor=X)
    grid = [{"beta": [0.5, 3.0], "n_components": [1, 2]}, {"beta": [1.0]}]   # one masked
    gs = GridSearchCV(base, grid, cv=cv, scoring="roc_auc", refit=False,
                      error_score="raise").fit(pairs, y)
    folds = [(pairs[tr], y[tr], pairs[va], y[va]) for tr, va in cv]
    res = search_params(base, grid, X, None, None, folds=folds, cross_modal=False,
                        scoring=get_scorer("roc_auc"), on_error="raise")
    for f in range(3):
        np.testing.assert_array_equal(res.fold_scores[:, f], gs.cv_results_[f"split{f}_test_score"])
    np.testing.assert_array_equal([c["mean_score"] for c in res.candidates],
                                  gs.cv_results_["mean_test_score"])
    assert [c["params"] for c in res.candidates] == gs.cv_results_["params"]
    assert res.best_params == gs.best_params_
    ours = res.cv_results()
    assert list(ours) == list(gs.cv_results_)             # the same keys in the same order
    for key, want in gs.cv_results_.items():
        got = ours.pop(key)
        if "time" in key:                                 # measured: shape and sign only
            assert got.shape == want.shape and (got >= 0).all()
            continue
        if key.startswith("param_"):
            assert got.dtype == want.dtype and got.tolist() == want.tolist()
            np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
        elif key != "params":
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
    assert not ours                       # no key GridSearchCV lacks


def test_evaluate_hook_replaces_fit_and_measure_and_n_jobs_changes_nothing():
    from joblib import parallel_config

    X, Y, labels = make_data(dy=5)
    folds = inner_pair_splits(labels, 3, random_state=0)
    got = []

    def evaluate(est, fold):
        assert not hasattr(est, "n_features_in_")        # an unfitted candidate
        got.append((est.scale, fold.index))
        return -abs(est.scale - 1.0) + 0.01 * fold.index

    res = search_params(SpyLearner(), {"scale": [0.5, 1.0, 2.0]}, X, Y, None, folds=folds,
                        evaluate=evaluate)
    assert got == [(s, f) for f in range(3) for s in (0.5, 1.0, 2.0)]   # fold by fold
    assert res.best_params == {"scale": 1.0}
    assert res.best_score == pytest.approx(0.01)
    with pytest.raises(ValueError, match="prepare and evaluate"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, Y, None, folds=folds,
                      evaluate=evaluate, prepare=lambda *a: a[:2])
    serial = search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, X + 0.3 * Y, labels,
                           scoring="map", random_state=0)
    with parallel_config(backend="threading"):
        threaded = search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, X + 0.3 * Y, labels,
                                 scoring="map", random_state=0, n_jobs=2)
        scan = search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, X + 0.3 * Y, labels,
                             scoring="map", random_state=0, n_jobs=2, patience=5)
    assert threaded.candidates == serial.candidates == scan.candidates


def test_builtin_cmc20_on_the_reid_hold_out_equals_select_max_iter():
    """select_max_iter measures through evaluate_reid; the routine's own scoring="cmc20" on
    the same hold-out gives bit-identical scores and the same choice."""
    import warnings

    from crossmetric import PCCA
    from crossmetric.protocols.splits import reid_splits
    from crossmetric.reproduce import select_max_iter
    from tests.test_reid import _two_cameras

    ids, cams = _two_cameras(50)
    X = np.random.RandomState(0).rand(50, 8)[ids - 100] + 0.2 * np.random.RandomState(1).rand(
        100, 8)
    split = reid_splits(ids, cams, 10, n_negatives=2, n_splits=1, random_state=0)[0]
    est = PCCA(n_components=4)
    m, scores = select_max_iter(est, X, ids, cams, split, n_negatives=2, grid=(1, 2, 4, 8, 16),
                                random_state=3)
    # the same hold-out, drawn as select_max_iter draws it
    rows = np.unique(split.train_pairs)
    inner = reid_splits(ids[rows], cams[rows], int(round(0.25 * 40)), n_negatives=2,
                        n_splits=1, random_state=3)[0]
    inner.train_pairs = rows[inner.train_pairs]
    inner.probe_rows, inner.gallery_rows = rows[inner.probe_rows], rows[inner.gallery_rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = search_params(est, {"max_iter": [1, 2, 4, 8, 16]}, X, None, ids, folds=[inner],
                            cross_modal=False, scoring="cmc20", patience=2)
    assert {c["params"]["max_iter"]: c["mean_score"] for c in res.candidates} == scores
    assert res.best_params == {"max_iter": m}


# ------------------------------------------------------- review of the selection refactor
def test_search_stages_cv_results_cover_every_stage():
    """search_stages stacks its stages' fold scores (shared folds); cv_results works."""
    from crossmetric import CCA
    from crossmetric.protocols.model_selection import SearchResult

    X, Y, labels = make_data(n_ids=12, per_id=3)
    stages = [{"n_components": [1, 2]}, {"reg": [1e-3, 1e-1, 1.0]}]
    res = search_stages(CCA(), stages, X, Y, labels, scoring="rank1", random_state=0)
    cv = res.cv_results()
    assert cv["params"] == [c["params"] for c in res.candidates]
    assert res.fold_scores.shape == (5, 3) == res.fit_times.shape == res.score_times.shape
    np.testing.assert_array_equal(cv["mean_test_score"],
                                  [c["mean_score"] for c in res.candidates])
    # the rows are the stages' own searches (one seed drawn as search_stages draws it)
    seed = int(np.random.RandomState(0).randint(2**31 - 1))
    first = search_params(CCA(), stages[0], X, Y, labels, scoring="rank1", random_state=seed)
    second = search_params(CCA(**first.best_params), stages[1], X, Y, labels,
                           scoring="rank1", random_state=seed)
    np.testing.assert_array_equal(res.fold_scores,
                                  np.vstack([first.fold_scores, second.fold_scores]))
    with pytest.raises(ValueError, match="fold_scores"):
        SearchResult({"reg": 1.0}, 0.5, res.candidates).cv_results()


def test_precomputed_folds_are_checked_against_the_objects():
    from crossmetric.protocols import Split

    X, Y, labels = make_data(n_ids=12, per_id=3)
    (tr_p, tr_y, va_p, va_y), = inner_pair_splits(labels, 2, random_state=0)[:1]
    n = len(X)

    def search(folds, **kw):
        return search_params(SpyLearner(), {"scale": [1.0]}, X, Y, labels, folds=folds, **kw)

    bad_neg = va_p.copy()
    bad_neg[0, 0] = -1                               # wrapped to the last row before
    with pytest.raises(ValueError, match=r"folds\[0\] validation pairs.*negative index -1"):
        search([(tr_p, tr_y, bad_neg, va_y)])
    bad_hi = tr_p.copy()
    bad_hi[3, 1] = n                                 # a bare IndexError before
    with pytest.raises(ValueError, match=rf"folds\[1\] training pairs.*index {n}"):
        search([(tr_p, tr_y, va_p, va_y), (bad_hi, tr_y, va_p, va_y)])
    with pytest.raises(ValueError, match=r"folds\[0\].*shape \(n_pairs, 2\)"):
        search([(tr_p[:, :1], tr_y, va_p, va_y)])
    with pytest.raises(ValueError, match=r"folds\[0\].*integer"):
        search([(tr_p.astype(float), tr_y, va_p, va_y)])
    probe = np.unique(va_p[:, 0])
    ident = Split("identification", 0, tr_p, tr_y, probe_rows=probe,
                  gallery_rows=np.r_[np.unique(va_p[:, 1]), n + 5], seed=1)
    with pytest.raises(ValueError, match=r"folds\[0\] gallery_rows.*index"):
        search([ident], scoring="rank1")
    # single-modal: the second column indexes X as well
    short = X[:n - 1]
    with pytest.raises(ValueError, match=r"folds\[0\].*column 1"):
        search_params(SpyLearner(), {"scale": [1.0]}, short, None, labels[:n - 1],
                      folds=[(tr_p, tr_y, np.array([[0, n - 1]]), np.array([1]))],
                      cross_modal=False)


def test_missing_y_for_cross_modal_pairs_is_named_upfront():
    X, _, labels = make_data(n_ids=12, per_id=3)
    with pytest.raises(ValueError, match="^Y must be given with cross_modal=True"):
        search_params(SpyLearner(), {"scale": [1.0]}, X, None, labels, random_state=0)


def test_split_folds_leave_the_global_random_state_alone():
    """Split folds bring their own seed: random_state=None draws nothing from NumPy's global
    generator; tuple folds of an unseeded candidate still draw their one seed."""
    from crossmetric.protocols import Split

    X, Y, labels = make_data(n_ids=12, per_id=3)
    tuples = inner_pair_splits(labels, 2, random_state=0)
    splits = [Split("verification", k, tp, ty, test_pairs=vp, test_y=vy, seed=5 + k)
              for k, (tp, ty, vp, vy) in enumerate(tuples)]
    np.random.seed(123)
    before = np.random.get_state()[1].copy(), np.random.get_state()[2]
    res = search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, X, labels, folds=splits)
    after = np.random.get_state()
    np.testing.assert_array_equal(after[1], before[0])
    assert after[2] == before[1]
    assert res.best_params == {"scale": 1.0}
    search_params(SpyLearner(), {"scale": [0.5, 1.0]}, X, X, labels, folds=tuples)
    assert np.random.get_state()[2] != before[1]       # the tuple folds' seed was drawn


# ------------------------------------------------------------- conditional stages (StageIf)
class GatedLearner(SpyLearner):
    """``boost`` acts only with ``gate`` set (as GSM's ``start_mu`` with ``start_from``)."""

    fits = 0

    def __init__(self, scale=1.0, gate=None, boost=1.0, preprocessor=None, random_state=None):
        super().__init__(scale=scale, preprocessor=preprocessor, random_state=random_state)
        self.gate = gate
        self.boost = boost

    def _fit(self, data, y):
        GatedLearner.fits += 1

    def _embed_y(self, Y):
        return self.scale * (self.boost if self.gate is not None else 1.0) * Y


def test_stage_if_is_skipped_without_its_parameter_and_gives_the_same_choice():
    from crossmetric.protocols.model_selection import StageIf

    X, Y, labels = make_data(n_ids=18, per_id=3, dy=5)
    X = Y.copy()
    gated = StageIf("gate", {"boost": [2.0, 1.0]})
    kw = dict(scoring="rank1", random_state=0)
    for gates, runs in (([None], False), (["on"], True)):
        stages = [{"gate": gates, "scale": [1.0, 3.0]}, gated]
        GatedLearner.fits = 0
        res = search_stages(GatedLearner(), stages, X, X, labels, **kw)
        assert [c["stage"] for c in res.candidates] == [0, 0] + ([1, 1] if runs else [])
        # run: boost=2 is new, boost=1 repeats stage 0's winner (not refitted)
        assert GatedLearner.fits == 3 * (3 if runs else 2)
        # the same choice and score as running the stage as a plain grid
        plain = search_stages(GatedLearner(), [stages[0], dict(gated)], X, X, labels, **kw)
        assert res.best_score == plain.best_score
        chosen = {**res.best_params}
        if not runs:  # the plain stage picks the first of its identical fits
            assert plain.best_params == {**chosen, "boost": 2.0}
            assert len({c["mean_score"] for c in plain.candidates[2:]}) == 1
        else:
            assert res.best_params == plain.best_params == {"gate": "on", "scale": 1.0,
                                                           "boost": 1.0}
    # set on the estimator itself (no earlier stage) counts too
    res = search_stages(GatedLearner(gate="on"), [gated], X, X, labels, **kw)
    assert res.best_params == {"boost": 1.0}
    with pytest.raises(ValueError, match="every stage needs a parameter that is not set"):
        search_stages(GatedLearner(), [gated], X, X, labels, **kw)
    with pytest.raises(ValueError, match="requires must be a parameter name"):
        StageIf("", {"boost": [1.0]})
    with pytest.raises(ValueError, match="grid must be a mapping"):
        StageIf("gate", [{"boost": [1.0]}])


def test_stage_if_survives_pickle_json_and_the_registry():
    import json
    import pickle

    from crossmetric.protocols.model_selection import StageIf
    from crossmetric.registry import METHODS, gsm_paper_grid

    stage = StageIf("start_from", {"start_mu": [None, 1.0]})
    back = pickle.loads(pickle.dumps(stage))
    assert isinstance(back, StageIf) and back.requires == "start_from" and back == stage
    assert json.loads(json.dumps(stage)) == {"start_mu": [None, 1.0]}
    last = METHODS["gsm"].search_grid("paper")[-1]
    assert isinstance(last, StageIf) and last.requires == "start_from"
    # the special cases have no start: their grid has no start_mu stage at all
    assert not any("start_mu" in s for s in gsm_paper_grid("euclidean") if isinstance(s, dict))


def test_cmml_start_stage_tries_its_kernel_form_and_can_take_it():
    """CMML's ``--tune paper`` start stage: the named starts of the linear towers and the
    paper's kernel form (RBF towers on Nyström features), all fitted and scored; on views
    related through a nonlinear map the kernel form is chosen."""
    from crossmetric import CMML
    from crossmetric.protocols.model_selection import search_stages
    from crossmetric.registry import CMML_TUNE_START_STAGE, METHODS, TOWER_START_STAGE

    assert METHODS["cmml"].search_grid("paper")[0] == CMML_TUNE_START_STAGE
    assert CMML_TUNE_START_STAGE[0] == TOWER_START_STAGE
    assert CMML_TUNE_START_STAGE not in METHODS["cmml"].search_grid("paper", with_start=False)
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(40), 2)
    Z = rng.uniform(-2, 2, size=(40, 2))[labels]
    X = np.c_[np.sin(2 * Z), np.cos(3 * Z)] + 0.05 * rng.normal(size=(80, 4))
    Y = np.c_[Z ** 2, Z[:, :1] * Z[:, 1:]] + 0.05 * rng.normal(size=(80, 3))
    res = search_stages(CMML(n_components=None, random_state=0), [CMML_TUNE_START_STAGE],
                        X, Y, labels, scoring="rank1", n_splits=2, random_state=0,
                        keep_current=True)
    kernels = [c["params"].get("kernel", "linear") for c in res.candidates]
    # current, identity, cca, kissme, random
    assert kernels.count("rbf") == 1 and len(kernels) == 6
    # KISSME's start needs views of one width (these have 4 and 3 features): refused there
    kissme = [c["params"].get("init") == "kissme" for c in res.candidates]
    assert np.isnan(res.fold_scores[kissme]).all()
    assert np.isfinite(res.fold_scores[~np.array(kissme)]).all()
    assert res.best_params["kernel"] == "rbf"
