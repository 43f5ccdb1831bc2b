"""Protocols: folds, repeated splits, the shared CCA step and the runner (local, joblib, Dask)."""

import json
import os

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from crossmetric import CMML, Euclidean
from crossmetric._base import CrossModalMixin
from crossmetric.datasets import make_cross_modal
from crossmetric.protocols import (
    CCAProjection,
    identification_splits,
    kfold_pairs,
    run_protocols,
    verification_splits,
)


@pytest.fixture(scope="module")
def data():
    return make_cross_modal(240, n_classes=24, n_latent=4, n_features_x=12, n_features_y=9,
                            random_state=0)


# ---------------------------------------------------------------------------- splits
def test_kfold_pairs_disjoint_cover_stratified():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(103) < 0.3, 1, -1)
    folds = kfold_pairs(y, 5, random_state=1)
    tests = [te for _, te in folds]
    allt = np.concatenate(tests)
    assert np.array_equal(np.sort(allt), np.arange(103))  # disjoint + cover
    for tr, te in folds:
        assert np.intersect1d(tr, te).size == 0 and tr.size + te.size == 103
        assert set(y[te]) == {-1, 1}
    again = kfold_pairs(y, 5, random_state=1)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))


def test_kfold_pairs_predefined_lfw_folds():
    y = np.tile(np.r_[np.ones(3, int), -np.ones(3, int)], 4)
    fold = np.repeat(np.arange(4), 6)
    folds = kfold_pairs(y, folds=fold)
    assert len(folds) == 4
    for f, (tr, te) in enumerate(folds):
        assert np.array_equal(te, np.arange(6 * f, 6 * f + 6))
        assert np.array_equal(np.sort(np.r_[tr, te]), np.arange(24))
    with pytest.raises(ValueError, match="folds"):
        kfold_pairs(y, folds=fold[:5])


@pytest.mark.parametrize("split", ["identity", "sample"])
def test_verification_splits_disjoint_and_cover(data, split):
    labels = data.labels
    splits = verification_splits(labels, 4, split=split, random_state=3)
    test_rows = [np.unique(s.test_pairs) for s in splits]
    # the rows used by test pairs of different folds never overlap
    for a in range(4):
        for b in range(a + 1, 4):
            assert np.intersect1d(test_rows[a], test_rows[b]).size == 0
    # the folds' row sets (probe_rows) partition all rows
    parts = np.concatenate([s.probe_rows for s in splits])
    assert np.array_equal(np.sort(parts), np.arange(labels.size))
    for s in splits:
        assert np.intersect1d(np.unique(s.train_pairs), s.probe_rows).size == 0
        # labels agree with identities
        same = labels[s.test_pairs[:, 0]] == labels[s.test_pairs[:, 1]]
        assert np.array_equal(same, s.test_y == 1)
        same = labels[s.train_pairs[:, 0]] == labels[s.train_pairs[:, 1]]
        assert np.array_equal(same, s.train_y == 1)
        if split == "identity":
            assert np.intersect1d(labels[s.probe_rows], labels[np.unique(s.train_pairs)]).size == 0


def test_splits_are_reproducible_with_a_seed(data):
    a = verification_splits(data.labels, 3, random_state=7)
    b = verification_splits(data.labels, 3, random_state=7)
    c = verification_splits(data.labels, 3, random_state=8)
    for sa, sb in zip(a, b, strict=True):
        assert np.array_equal(sa.train_pairs, sb.train_pairs)
        assert np.array_equal(sa.test_pairs, sb.test_pairs) and sa.seed == sb.seed
    assert not all(np.array_equal(sa.test_pairs, sc.test_pairs) for sa, sc in zip(a, c,
                                                                                 strict=True))
    i1 = identification_splits(data.labels, 3, test_size=6, random_state=5)
    i2 = identification_splits(data.labels, 3, test_size=6, random_state=5)
    for sa, sb in zip(i1, i2, strict=True):
        assert np.array_equal(sa.probe_rows, sb.probe_rows)
        assert np.array_equal(sa.train_pairs, sb.train_pairs)


def test_identification_splits_p_identities(data):
    labels = data.labels
    for s in identification_splits(labels, 4, test_size=6, random_state=0):
        test_ids = np.unique(labels[s.probe_rows])
        assert test_ids.size == 6
        assert np.array_equal(s.probe_rows, s.gallery_rows)
        assert np.intersect1d(test_ids, labels[np.unique(s.train_pairs)]).size == 0
    with pytest.raises(ValueError, match="test_size"):
        identification_splits(labels, 2, test_size=1)
    # few identities -> stratified sample split, every identity in the test set
    few = np.repeat(np.arange(5), 20)
    for s in identification_splits(few, 2, test_size=0.25, random_state=0):
        assert np.array_equal(np.bincount(few[s.probe_rows]), np.full(5, 5))


def test_split_errors():
    with pytest.raises(ValueError, match="split"):
        verification_splits(np.repeat(np.arange(30), 2), 3, split="bogus")
    with pytest.raises(ValueError, match="identities per fold"):
        verification_splits(np.repeat(np.arange(5), 4), 3, split="identity")


# ------------------------------------------------------------------------------- CCA
def test_cca_projection_matches_sklearn_first_component():
    from sklearn.cross_decomposition import CCA

    d = make_cross_modal(300, n_classes=10, n_latent=2, n_features_x=5, n_features_y=4,
                         random_state=1)
    proj = CCAProjection(2, reg=0.0).fit(d.X, d.Y)
    u, v = proj.transform(d.X, d.Y)
    ours = np.corrcoef(u[:, 0], v[:, 0])[0, 1]
    assert ours == pytest.approx(proj.correlations_[0], rel=1e-6)
    a, b = CCA(n_components=1, max_iter=5000, tol=1e-10).fit(d.X, d.Y).transform(d.X, d.Y)
    ref = abs(np.corrcoef(a[:, 0], b[:, 0])[0, 1])
    assert ours == pytest.approx(ref, abs=1e-4)
    # canonical variates are uncorrelated within a view
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 1e-6


# ------------------------------------------------------------------------------ runner
def _run(data, **kw):
    est = {"euclid": Euclidean(), "cmml": CMML(n_components=3, max_iter=30)}
    kw.setdefault("n_folds", 3)
    kw.setdefault("n_repeats", 2)
    kw.setdefault("random_state", 0)
    return run_protocols(est, data, **kw)


def _summary(res):
    return [(r["method"], r["measure"], r["mean"], r["std"]) for r in res.summary
            if r["measure"] != "fit_seconds"]


def test_runner_table_and_cca_variant(data, tmp_path):
    res = _run(data)
    assert res.methods == ["euclid-C", "cmml"]
    assert not res.errors and not res.skipped
    for meth in res.methods:
        for meas in ("auc", "one_minus_eer", "vr", "rank1", "map", "nn_accuracy"):
            assert 0.0 <= res.value(meth, meas) <= 1.0
        assert res.value(meth, "auc", "n") == 3
        assert res.value(meth, "rank1", "n") == 2
    # a learned cross-modal metric beats chance on this easy synthetic task
    assert res.value("cmml", "auc") > 0.7
    text = res.table()
    assert "euclid-C" in text and "AUC" in text and "±" in text
    res.to_csv(tmp_path / "r.csv")
    res.to_json(tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["methods"] == res.methods
    assert set(res.curves["cmml"]) == {"roc", "cmc", "roc_std", "cmc_std"}
    # CMML with max_iter=30 stops early: recorded per fit, not printed
    assert res.warnings["cmml"]["ConvergenceWarning"] == 5
    skip = _run(data, unequal_dims="skip")
    assert "euclid" in skip.skipped and skip.methods == ["cmml"]


def test_runner_reproducible_and_seed_sensitive(data):
    a, b = _run(data), _run(data)
    assert _summary(a) == _summary(b)
    c = _run(data, random_state=1)
    assert _summary(a) != _summary(c)


def test_runner_joblib_workers_identical(data):
    assert _summary(_run(data, n_jobs=2)) == _summary(_run(data, n_jobs=1))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_runner_dask_backend_identical(data):
    # in-process Dask workers are threads: the runner's warning filter is process-wide state
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config

    local = _run(data)
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1,
                            dashboard_address=None):
        with parallel_config(backend="dask"):
            remote = _run(data)
    assert _summary(local) == _summary(remote)


class _Broken(CrossModalMixin, BaseEstimator):
    def __init__(self, *, preprocessor=None):
        self.preprocessor = preprocessor

    def _fit(self, data, y):
        raise ArithmeticError("boom")


class _ImageLearner(_Broken):
    _sample_ndim = 2


def test_runner_records_errors_and_skips_image_learners(data):
    est = {"broken": _Broken(), "img": _ImageLearner(), "euclid": Euclidean()}
    res = run_protocols(est, data, n_folds=2, n_repeats=1, on_error="record")
    assert "boom" in res.errors["broken"]
    assert "images" in res.skipped["img"]
    assert res.methods == ["broken", "euclid-C"]
    assert all(r["method"] == "euclid-C" for r in res.summary)
    with pytest.raises(ArithmeticError):
        run_protocols({"broken": _Broken()}, data, n_folds=2, n_repeats=1)


def test_runner_input_errors(data):
    with pytest.raises(ValueError, match="protocols"):
        run_protocols({"e": Euclidean()}, data, protocols=("speed",))
    with pytest.raises(ValueError, match="estimators"):
        run_protocols({}, data)
    with pytest.raises(ValueError, match="'X'"):
        run_protocols({"e": Euclidean()}, {"Y": data.X, "labels": data.labels})
    bad = dict(data)
    bad["labels"] = data.labels[:-1]
    with pytest.raises(ValueError, match="same number of rows"):
        run_protocols({"e": Euclidean()}, bad)


def test_runner_pca_step(data):
    from crossmetric.protocols.views import _pca_views

    split = verification_splits(data.labels, 3, random_state=0)[0]
    Xp, Yp = _pca_views(data.X, data.Y, split, 4)
    assert Xp.shape == (data.X.shape[0], 4) and Yp.shape == (data.Y.shape[0], 4)
    # fitted on the training rows only: those rows are centred, the held-out ones are not
    rows = np.unique(split.train_pairs[:, 0])
    np.testing.assert_allclose(Xp[rows].mean(0), 0, atol=1e-10)
    assert np.abs(Xp[split.probe_rows].mean(0)).max() > 1e-6
    plain = _run(data)
    reduced = _run(data, pca_components={"cmml": 3})
    assert reduced.info["pca"] == {"cmml": 3}
    assert reduced.value("cmml", "auc") != plain.value("cmml", "auc")
    assert reduced.value("euclid-C", "auc") == plain.value("euclid-C", "auc")
    with pytest.raises(ValueError, match="pca_components"):
        _run(data, pca_components=0)


def test_run_pair_folds_lfw_style(data):
    from crossmetric.pairs import make_pairs
    from crossmetric.protocols import run_pair_folds

    # single-modal data with fixed pairs and predefined folds (LFW's restricted setting)
    pairs, y = make_pairs(data.labels, random_state=0)
    fold = np.arange(y.size) % 4
    res = run_pair_folds({"euclid": Euclidean()}, data.X, pairs=pairs, y=y, folds=fold)
    assert res.methods == ["euclid"] and res.value("euclid", "auc", "n") == 4
    # fold by fold the same numbers as fitting by hand
    from crossmetric.metrics import roc_auc

    manual = []
    for f in range(4):
        est = Euclidean(preprocessor=data.X).fit(pairs[fold != f], y[fold != f])
        manual.append(roc_auc(y[fold == f], est.pair_score(pairs[fold == f])))
    assert res.value("euclid", "auc") == pytest.approx(np.mean(manual))
    assert res.value("euclid", "auc", "sem") == pytest.approx(
        np.std(manual, ddof=1) / 2.0)
    # cross-modal pairs with random stratified folds
    cp, cy = make_pairs(data.labels, data.labels, random_state=0)
    res = run_pair_folds({"cmml": CMML(n_components=3, max_iter=30)}, data.X, data.Y,
                         pairs=cp, y=cy, n_folds=3)
    assert res.value("cmml", "auc", "n") == 3 and res.value("cmml", "auc") > 0.6
    with pytest.raises(ValueError, match="index rows"):
        run_pair_folds({"e": Euclidean()}, data.X[:5], pairs=pairs, y=y)


def test_runner_instance_level(data):
    # identity = the object: photo i matches only sketch i (CUFSF style)
    res = run_protocols({"cmml": CMML(n_components=3, max_iter=30)}, data, level="instance",
                        n_folds=3, n_repeats=2, test_size=40)
    assert res.info["level"] == "instance"
    assert 0.0 < res.value("cmml", "rank1") < 1.0
    curve = res.curves["cmml"]["cmc"]
    assert curve.shape == (20,) and np.all(np.diff(curve) >= 0) and curve[-1] <= 1.0
    with pytest.raises(ValueError, match="instance"):
        run_protocols({"c": CMML()}, {"X": data.X, "Y": data.Y, "labels": data.labels},
                      level="instance")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_runner_on_a_local_cluster_of_processes_identical(data):
    # worker *processes* (dask.distributed.LocalCluster(processes=True)): every split is
    # pickled, sent to another interpreter and fitted there
    pytest.importorskip("distributed")
    from crossmetric.cluster import dask_backend

    local = _run(data)
    with dask_backend(n_workers=2, threads_per_worker=1) as client:
        remote = _run(data)
        pids = client.run(lambda: __import__("os").getpid())
        files = client.run(lambda: __import__("crossmetric").__file__)
    # this checkout's code (real paths: a benchmark module imported earlier in the session may
    # have put "benchmarks/.." on sys.path, which the workers inherit)
    here = os.path.realpath(__import__("crossmetric").__file__)
    assert {os.path.realpath(f) for f in files.values()} == {here}
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
    assert _summary(local) == _summary(remote)


def test_single_modal_dataset_without_y():
    """No Y: pairs within X (no self pairs), single-shot gallery disjoint from the probes."""
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import identification_splits, verification_splits

    d = make_cross_modal(200, n_classes=20, random_state=0)
    for sp in verification_splits(d.labels, 3, cross_modal=False, random_state=0):
        assert np.all(sp.train_pairs[:, 0] != sp.train_pairs[:, 1])
        assert np.all(sp.test_pairs[:, 0] != sp.test_pairs[:, 1])
    for sp in identification_splits(d.labels, 2, cross_modal=False, random_state=0):
        assert not np.intersect1d(sp.probe_rows, sp.gallery_rows).size
        # one gallery sample per test identity, every probe identity in the gallery
        g = d.labels[sp.gallery_rows]
        assert np.unique(g).size == g.size
        assert np.isin(d.labels[sp.probe_rows], g).all()
    res = run_protocols({"Euclidean": Euclidean()}, {"X": d.X, "labels": d.labels},
                        n_folds=3, n_repeats=2, n_jobs=1)
    assert res.info["cross_modal"] is False
    assert 0.5 < res.value("Euclidean", "auc") <= 1.0
    assert 0.0 < res.value("Euclidean", "rank1") <= 1.0


def test_benchmark_result_save_load_markdown_latex(tmp_path):
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import BenchmarkResult

    d = make_cross_modal(150, n_classes=15, random_state=1)
    res = run_protocols({"Eu_clid": Euclidean()}, {"X": d.X, "Y": d.X + 0.1, "labels": d.labels},
                        n_folds=2, n_repeats=1, n_jobs=1)
    res.save(tmp_path / "r.json")
    back = BenchmarkResult.load(tmp_path / "r.json")
    assert back.methods == res.methods and back.summary == res.summary
    assert back.records == res.records and back.info == res.info
    np.testing.assert_allclose(back.curves["Eu_clid"]["roc"][1], res.curves["Eu_clid"]["roc"][1])
    np.testing.assert_allclose(back.curves["Eu_clid"]["cmc"], res.curves["Eu_clid"]["cmc"])
    assert back.table() == res.table()
    md = res.to_markdown().splitlines()
    assert md[0].startswith("| Method | AUC |") and md[2].startswith("| Eu_clid | **")
    tex = res.to_latex(caption="digits 10%")
    assert r"Eu\_clid" in tex and r"$\pm$" in tex and r"\toprule" in tex
    assert r"10\%" in tex and tex.count(r"\\") == 2  # header + one method row
    with pytest.raises(ValueError, match="BenchmarkResult"):
        (tmp_path / "bad.json").write_text("{not json")
        BenchmarkResult.load(tmp_path / "bad.json")


def test_progress_bar_names_the_method_being_fitted(monkeypatch):
    import tqdm.auto

    from crossmetric.protocols.runner import _with_progress

    seen = []

    class _Bar:
        def __init__(self, total, **kw):
            self.total = total

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def set_postfix_str(self, text, refresh=True):
            self.text = text

        def update(self, n):
            seen.append(self.text)

    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    names = ["A", "A", "B", "C"]
    outputs = list(_with_progress(iter(range(4)), names))
    assert outputs == [0, 1, 2, 3]
    # after unit i finishes the bar names the method of unit i + 1 (the one now running)
    assert seen == ["A", "B", "C", "C"]


# ---------------------------------------------------- honest verification
def test_lfw_accuracy_uses_the_training_folds_threshold():
    """The headline accuracy must not set its threshold on the test distances."""
    from crossmetric.protocols import run_pair_folds
    from crossmetric.protocols.results import TABLE_MEASURES

    # 1-D points; fold 0: positives at distance 1, negatives at 3; fold 1: 5 and 7. A threshold
    # learnt on one fold is wrong for the other (accuracy 0.5); the test median is always right.
    X = np.arange(0.0, 400.0, 1.0)[:, None]
    pairs, y, fold = [], [], []
    for f, (dp, dn) in enumerate(((1, 3), (5, 7))):
        for k in range(20):
            a = 200 * f + 10 * k
            pairs += [(a, a + dp), (a, a + dn)]
            y += [1, -1]
            fold += [f, f]
    pairs, y, fold = np.array(pairs), np.array(y), np.array(fold)
    res = run_pair_folds({"e": Euclidean()}, X, pairs=pairs, y=y, folds=fold)
    assert res.value("e", "acc_median") == 1.0
    assert res.value("e", "accuracy_at_threshold") == 0.5
    assert res.value("e", "accuracy") == 0.5  # the former name still reads
    assert "accuracy_at_threshold" in TABLE_MEASURES and "Acc(%)" in res.table()


def test_protocol_accuracy_equals_predict_with_train_threshold(data):
    from crossmetric.learners._threshold import best_threshold
    from crossmetric.protocols.runner import _run_split

    sp = verification_splits(data.labels, 3, random_state=0)[0]
    out = _run_split("e", Euclidean(), data.X[:, :9], data.Y, sp,
                     {"fpr": 1e-3, "fpr_range": (0, 0.1), "labels": data.labels,
                      "max_rank": 5})
    est = Euclidean(preprocessor=(data.X[:, :9], data.Y)).fit(sp.train_pairs, sp.train_y)
    thr = best_threshold(est.pair_distance(sp.train_pairs), sp.train_y, "accuracy")
    pred = np.where(est.pair_distance(sp.test_pairs) <= thr, 1, -1)
    assert out["measures"]["accuracy_at_threshold"] == pytest.approx(np.mean(pred == sp.test_y))


def test_vr_uses_every_cross_pair_of_the_test_fold():
    from crossmetric.metrics import verification_rate
    from crossmetric.protocols.runner import _run_split

    # instance-level identities: few sampled negatives per fold, but n² − n cross pairs
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((300, 5))
    X, Y = Z + 0.3 * rng.standard_normal(Z.shape), Z + 0.3 * rng.standard_normal(Z.shape)
    lab = np.arange(300)
    sp = verification_splits(lab, 3, split="identity", random_state=0)[0]
    assert np.sum(sp.test_y == -1) <= 100
    out = _run_split("e", Euclidean(), X, Y, sp, {"fpr": 1e-3, "fpr_range": (0, 0.1),
                                                 "labels": lab, "max_rank": 5})
    rows = sp.probe_rows
    D = ((X[rows][:, None] - Y[rows][None]) ** 2).sum(-1)
    same = np.where(lab[rows][:, None] == lab[rows][None, :], 1, -1)
    full = verification_rate(same.ravel(), -D.ravel(), 1e-3)
    sampled = verification_rate(sp.test_y, -((X[sp.test_pairs[:, 0]]
                                             - Y[sp.test_pairs[:, 1]]) ** 2).sum(-1), 1e-3)
    assert out["measures"]["vr"] == pytest.approx(full)
    assert abs(full - sampled) > 0.02  # the sampled pairs would have given another number


def test_learners_that_take_identity_groups_get_the_labels():
    """DeepGSM-like learners (fit(pairs, y, groups=...)) receive the rows' identities, so that
    sampled class-level pairs are not split into connected-component fragments."""
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols.runner import _identity_groups

    seen = []

    class GroupAware(Euclidean):
        def fit(self, pairs, y, groups=None):
            seen.append(groups)
            return super().fit(pairs, y)

    d = make_cross_modal(60, n_classes=6, random_state=0)
    run_protocols({"G": GroupAware()}, {"X": d.X, "Y": d.X, "labels": d.labels},
                  n_folds=2, n_repeats=1, n_jobs=1, protocols=("verification",))
    assert len(seen) == 2 and all(g is not None for g in seen)
    np.testing.assert_array_equal(seen[0][0], d.labels)
    assert _identity_groups(Euclidean(), {"labels": d.labels}) == {}


def test_identification_pair_measures_score_every_probe_gallery_pair():
    """pair_measures: the verification measures of all probe x gallery pairs of each
    identification split (CML-AUC §IV-A reports AUC, 1-EER, VR and rank-1 on one split)."""
    from sklearn.metrics import roc_auc_score

    from crossmetric import Euclidean
    from crossmetric.protocols import identification_splits, run_protocols

    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(30), 2)
    Z = rng.normal(size=(30, 4))[labels]
    X, Y = Z + 0.5 * rng.normal(size=Z.shape), Z + 0.5 * rng.normal(size=Z.shape)
    res = run_protocols({"E": Euclidean()}, {"X": X, "Y": Y, "labels": labels},
                        protocols=("identification",), n_repeats=2, test_size=10,
                        random_state=0, pair_measures=True)
    splits = identification_splits(labels, 2, test_size=10,
                                   random_state=np.random.RandomState(0))
    aucs = []
    for sp in splits:
        D = ((X[sp.probe_rows, None, :] - Y[None, sp.gallery_rows, :]) ** 2).sum(-1)
        same = labels[sp.probe_rows][:, None] == labels[sp.gallery_rows][None, :]
        aucs.append(roc_auc_score(same.ravel(), -D.ravel()))
    assert res.value("E", "auc") == pytest.approx(np.mean(aucs), abs=1e-12)
    assert {"one_minus_eer", "vr", "rank1"} <= {r["measure"] for r in res.records}
    with pytest.raises(ValueError, match="pair_measures gives identification"):
        run_protocols({"E": Euclidean()}, {"X": X, "Y": Y, "labels": labels},
                      pair_measures=True)


def test_joint_pca_fits_one_basis_on_both_views_training_rows():
    """pca_joint: sketch and photo of one descriptor keep comparable coordinates; the
    Euclidean rank-1 equals one computed on a PCA of both views' training rows."""
    from sklearn.decomposition import PCA

    from crossmetric import metrics as M
    from crossmetric.protocols import identification_splits, run_protocols

    rng = np.random.RandomState(1)
    labels = np.repeat(np.arange(40), 1)
    Z = rng.normal(size=(40, 6)) @ rng.normal(size=(6, 12))
    X, Y = Z + 0.3 * rng.normal(size=Z.shape), Z + 0.3 * rng.normal(size=Z.shape)
    data = {"X": X, "Y": Y, "labels": labels}
    res = run_protocols({"E": Euclidean()}, data, protocols=("identification",),
                        n_repeats=1, test_size=15, pca_components=4, pca_joint=True,
                        random_state=0)
    (sp,) = identification_splits(labels, 1, test_size=15,
                                  random_state=np.random.RandomState(0))
    rx, ry = np.unique(sp.train_pairs[:, 0]), np.unique(sp.train_pairs[:, 1])
    pca = PCA(4, random_state=0).fit(np.vstack([X[rx], Y[ry]]))
    A, B = pca.transform(X[sp.probe_rows]), pca.transform(Y[sp.gallery_rows])
    D = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    expected = M.rank_accuracy(D, labels[sp.probe_rows], labels[sp.gallery_rows])
    assert res.value("E", "rank1") == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="pca_joint needs views of equal width"):
        run_protocols({"E": Euclidean()}, {"X": X, "Y": Y[:, :5], "labels": labels},
                      pca_components=4, pca_joint=True)
