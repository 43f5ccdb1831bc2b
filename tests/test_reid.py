"""The VIPeR protocol of PCCA §4 (splits, CMC evaluation) and a quick reproduction on VIPeR."""

from pathlib import Path

import numpy as np
import pytest

from crossmetric.protocols.reid import evaluate_reid, reid_splits

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HAS_VIPER = (DATA / "viper" / "images").is_dir()


def _two_cameras(n_persons):
    ids = np.repeat(np.arange(n_persons) + 100, 2)
    cams = np.tile([1, 2], n_persons)
    return ids, cams


def test_splits_disjoint_persons_one_probe_per_person():
    ids, cams = _two_cameras(40)
    splits = reid_splits(ids, cams, 15, n_negatives=3, n_splits=5, random_state=0)
    assert len(splits) == 5
    probe_cams = []
    for s in splits:
        test_p = ids[s.probe_rows]
        assert np.array_equal(np.sort(test_p), np.unique(test_p)) and test_p.size == 15
        assert np.array_equal(test_p, ids[s.gallery_rows])  # same person order
        assert np.all(s.probe_rows != s.gallery_rows)
        assert np.all(cams[s.probe_rows] != cams[s.gallery_rows])
        train_p = np.unique(ids[s.train_pairs])
        assert np.intersect1d(train_p, test_p).size == 0  # disjoint persons
        assert train_p.size == 25
        pos = s.train_pairs[s.train_y == 1]
        neg = s.train_pairs[s.train_y == -1]
        # one positive per training person, from two cameras
        assert pos.shape[0] == 25 and np.unique(ids[pos[:, 0]]).size == 25
        assert np.all(ids[pos[:, 0]] == ids[pos[:, 1]])
        assert np.all(cams[pos[:, 0]] != cams[pos[:, 1]])
        # n⁻ negatives per person: the person's image first, another person's second
        assert neg.shape[0] == 75 and np.all(ids[neg[:, 0]] != ids[neg[:, 1]])
        assert np.all(np.bincount(np.searchsorted(train_p, ids[neg[:, 0]])) == 3)
        keys = {tuple(sorted(p)) for p in neg.tolist()}
        assert len(keys) == neg.shape[0]  # no duplicates
        probe_cams.append(cams[s.probe_rows])
    probe_cams = np.concatenate(probe_cams)
    assert 0.3 < np.mean(probe_cams == 1) < 0.7  # the probe camera is drawn per person
    # different splits differ; the same seed repeats
    assert not np.array_equal(splits[0].probe_rows, splits[1].probe_rows)
    again = reid_splits(ids, cams, 15, n_negatives=3, n_splits=5, random_state=0)
    for a, b in zip(splits, again, strict=True):
        np.testing.assert_array_equal(a.train_pairs, b.train_pairs)
        np.testing.assert_array_equal(a.probe_rows, b.probe_rows)


def test_splits_errors():
    ids, cams = _two_cameras(10)
    with pytest.raises(ValueError, match="n_test"):
        reid_splits(ids, cams, 9)
    with pytest.raises(ValueError, match="at least two images"):
        reid_splits(np.r_[ids, 999], np.r_[cams, 1], 3)
    with pytest.raises(ValueError, match="domains"):
        reid_splits(ids, cams[:-1], 3)
    with pytest.raises(ValueError, match="n_negatives"):
        reid_splits(ids, cams, 3, n_negatives=-1)


def test_evaluate_reid_euclidean_and_learner(small_pairs):
    from crossmetric import PCCA

    rng = np.random.RandomState(0)
    ids, cams = _two_cameras(30)
    centre = rng.rand(30, 6)
    X = centre[ids - 100] + 0.05 * rng.rand(60, 6)
    s = reid_splits(ids, cams, 10, n_negatives=2, n_splits=1, random_state=1)[0]
    eu = evaluate_reid(None, X, ids, s)
    assert eu["cmc"].shape == (10,) and eu["cmc"][-1] == 1.0
    assert eu["rank1"] == pytest.approx(eu["cmc"][0]) and eu["rank20"] == 1.0
    res = evaluate_reid(PCCA(n_components=3, max_iter=30), X, ids, s)
    assert res["model"].n_iter_ >= 1 and 0.0 <= res["rank1"] <= 1.0


@pytest.fixture(scope="module")
def viper_small():
    """VIPeR descriptors (whole vector to unit L1, as the reproduction uses them)."""
    from crossmetric.reproduce.viper import viper_features

    return viper_features(DATA)


@pytest.mark.skipif(not HAS_VIPER, reason="VIPeR data absent")
def test_quick_reproduction_subset_chi2rbf_beats_euclidean():
    """Default-run variant: persons 1-199 of VIPeR (loaded through a pattern), 99 test
    persons, 2 splits, n⁻ = 1: PCCA-χ²RBF above Euclidean at rank 1 and rank 20."""
    from crossmetric import PCCA
    from crossmetric.datasets import load_image_folder
    from crossmetric.features import StripHistograms

    b = load_image_folder(DATA / "viper",
                          r"images/(?P<id>0[01]\d\d)(?P<domain>\d{4})\.png")
    assert np.unique(b.ids).size == 199
    X = StripHistograms(normalize="vector").fit_transform(b.images)
    splits = reid_splits(b.ids, b.domains, 99, n_negatives=1, n_splits=2, random_state=0)
    pcca = PCCA(40, kernel="chi2_rbf", gamma=1.0, max_iter=40)
    eu = [evaluate_reid(None, X, b.ids, s) for s in splits]
    pc = [evaluate_reid(pcca, X, b.ids, s) for s in splits]
    for r in ("rank1", "rank20"):
        assert np.mean([x[r] for x in pc]) > np.mean([x[r] for x in eu]) + 0.05, r


@pytest.mark.slow
@pytest.mark.skipif(not HAS_VIPER, reason="VIPeR data absent")
def test_quick_reproduction_chi2rbf_beats_euclidean(viper_small):
    """2 splits, p = 316, n⁻ = 1: PCCA-χ²RBF (γ = 1 on the unit-L1 vector) well above
    Euclidean at rank 1 and rank 20 (a fixed 40-iteration budget keeps it quick)."""
    from crossmetric import PCCA

    X, ids, dom = viper_small["X"], viper_small["ids"], viper_small["domains"]
    splits = reid_splits(ids, dom, 316, n_negatives=1, n_splits=2, random_state=0)
    pcca = PCCA(40, kernel="chi2_rbf", gamma=1.0, max_iter=40)
    eu = [evaluate_reid(None, X, ids, s) for s in splits]
    pc = [evaluate_reid(pcca, X, ids, s) for s in splits]  # warnings recorded, not raised
    eu1, pc1 = np.mean([r["rank1"] for r in eu]), np.mean([r["rank1"] for r in pc])
    eu20, pc20 = np.mean([r["rank20"] for r in eu]), np.mean([r["rank20"] for r in pc])
    assert pc1 > eu1 + 0.05 and pc20 > eu20 + 0.2

