"""``reproduce pku-sketch`` with the papers' model selection: selection on training
persons only, descriptors, settings, parallel splits."""

import numpy as np
import pytest

import crossmetric.protocols.model_selection as ms
from crossmetric.reproduce import pku as P


def _toy(n_persons=40, d=48, seed=0):
    """Features of ``n_persons`` persons: 1 sketch and 2 photos each, sketch = photo + shift."""
    rng = np.random.RandomState(seed)
    latent = rng.normal(size=(n_persons, d))
    ids = np.r_[np.arange(n_persons), np.repeat(np.arange(n_persons), 2)] + 1
    dom = np.array(["sketch"] * n_persons + ["photo"] * (2 * n_persons))
    H = latent[ids - 1] + 0.5 * rng.normal(size=(ids.size, d))
    H[dom == "sketch"] = H[dom == "sketch"] @ rng.normal(size=(d, d)) / np.sqrt(d) + 3.0
    images = rng.randint(0, 256, (ids.size, 8, 4, 3), dtype=np.uint8)
    return {"H": H, "ids": ids, "domains": dom, "images": images}


def test_selection_never_reads_a_test_person(monkeypatch):
    from crossmetric.registry import make_estimator

    data = _toy()
    H, ids, dom = data["H"].copy(), data["ids"], data["domains"]
    test = np.array([1, 2, 3, 4, 5, 6])
    sk, ph = np.flatnonzero(dom == "sketch"), np.flatnonzero(dom == "photo")
    tr_sk, tr_ph = sk[~np.isin(ids[sk], test)], ph[~np.isin(ids[ph], test)]
    H[np.isin(ids, test)] = np.nan       # any read of a test person breaks every fit
    seen = []
    real = ms.search_stages

    def spy(est, stages, X, Y, labels, **kw):
        seen.append((np.asarray(labels).copy(), X.copy(), Y.copy()))
        return real(est, stages, X, Y, labels, **kw)

    monkeypatch.setattr(ms, "search_stages", spy)
    found = P.pku_select("cca", make_estimator("cca"), H, ids, tr_sk, tr_ph, n_components=40,
                         center=True, n_negatives=1, random_state=0)
    assert found is not None and set(found.best_params) == {"n_components", "reg"}
    labels, X, Y = seen[0]
    assert not np.isin(labels, test).any() and np.isfinite(X).all() and np.isfinite(Y).all()
    # every training photo is an object, with its person's sketch on the X side
    assert sorted(labels) == sorted(ids[tr_ph])
    # a method without a grid: nothing to select
    assert P.pku_select("euclidean", None, H, ids, tr_sk, tr_ph, n_components=40,
                        center=True, n_negatives=1, random_state=0) is None


def test_space_centres_each_modality_and_caps_the_dimension():
    rng = np.random.RandomState(0)
    A, B = rng.normal(size=(5, 12)) + 4.0, rng.normal(size=(6, 12)) - 2.0
    project = P.pku_space(A, B, n_components=64, center=True)
    Za, Zb = project(A, "sketch"), project(B, "photo")
    assert Za.shape == (5, 10) and Zb.shape == (6, 10)   # capped at 11 images - 1
    np.testing.assert_allclose(Za.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Zb.mean(0), 0.0, atol=1e-12)
    plain = P.pku_space(A, B, n_components=3, center=False)
    assert abs(plain(A, "sketch").mean(0)).max() > 0.1   # not centred per modality


def _tiny_run(monkeypatch, n_splits, **kw):
    data = _toy()
    monkeypatch.setattr(P, "pku_features", lambda home, descriptor="hog": data)
    return P.reproduce_pku_sketch("unused", n_splits=n_splits, n_test=8, n_components=40,
                                  n_negatives=2, verbose=False,
                                  methods=("euclidean", "euclidean-desc", "cca"),
                                  **kw)


def test_tiny_run_selects_per_split(monkeypatch):
    res = _tiny_run(monkeypatch, 1)
    per = res.extra["per_split"]
    assert set(per) == {"Euclidean (ltp, centred PCA-40)", "Euclidean (ltp, no PCA)", "CCA"}
    chosen = res.extra["chosen"]["CCA"]
    assert len(chosen) == 1 and set(chosen[0]) == {"n_components", "reg"}
    assert res.extra["setting"]["tune"] and res.extra["setting"]["n_negatives"] == 2
    assert P.PKU_SETTINGS["paper"]["n_negatives"] == 10
    # the toy sketches are a linear map of the photos: CCA learns it, Euclidean cannot
    r1 = {r["method"]: r["ours"] for r in res.rows if r["measure"] == "r1"}
    assert r1["CCA"] > r1["Euclidean (ltp, no PCA)"]


@pytest.mark.slow
def test_tiny_run_parallel_splits_give_the_same(monkeypatch):
    data = _toy()
    monkeypatch.setattr(P, "pku_features", lambda home, descriptor="hog": data)
    kw = dict(n_splits=2, n_test=8, n_negatives=2, n_components=40, verbose=False,
              methods=("euclidean", "euclidean-desc", "cca"))
    res = P.reproduce_pku_sketch("unused", **kw)
    assert all(len(v["r1"]) == 2 for v in res.extra["per_split"].values())
    assert len(res.extra["chosen"]["CCA"]) == 2
    par = P.reproduce_pku_sketch("unused", n_jobs=2, **kw)
    def scores(r):
        return {m: {k: v for k, v in d.items() if k != "seconds"}
                for m, d in r.extra["per_split"].items()}

    assert scores(par) == scores(res) and par.extra["chosen"] == res.extra["chosen"]


def test_settings_and_descriptor_options(monkeypatch):
    data = _toy()
    monkeypatch.setattr(P, "pku_features", lambda home, descriptor="hog": data)
    legacy = P.reproduce_pku_sketch("unused", n_splits=1, n_test=8, setting="legacy",
                                    methods=("euclidean", "cca"), verbose=False)
    assert set(legacy.extra["per_split"]) == {"Euclidean (HOG)", "CCA"}
    assert "chosen" not in legacy.extra and not legacy.extra["setting"]["tune"]
    with pytest.raises(ValueError, match="setting must be one of"):
        P.reproduce_pku_sketch("unused", setting="nope")
    with pytest.raises(ValueError, match="descriptor must be one of"):
        P.reproduce_pku_sketch("unused", descriptor="sift2")
    with pytest.raises(ValueError, match="descriptor must be one of"):
        P.pku_descriptor(data["images"], "nope")
    assert set(P.PKU_LEGACY_METHODS) <= set(P.PKU_METHODS)
    assert {"pcca", "cmml", "cmlauc", "cmlpauc", "gsm", "clml"} <= set(P.PKU_METHODS)


def test_descriptors_give_finite_features_of_the_documented_size():
    pytest.importorskip("skimage", reason="the descriptors need scikit-image ([images])")
    pytest.importorskip("cv2", reason="dense SIFT needs OpenCV (the [images] extra)")
    imgs = np.random.RandomState(0).randint(0, 256, (2, 160, 64, 3), dtype=np.uint8)
    sizes = {"hog": 4788, "dense-sift": 20480, "lbp": 4720, "ltp": 9440}
    for name, n in sizes.items():
        F = P.pku_descriptor(imgs, name)
        assert F.shape == (2, n) and np.isfinite(F).all(), name
        if name != "hog":
            assert F.min() >= 0.0    # square-rooted histograms
    assert P.pku_descriptor(imgs, "hog+ltp").shape == (2, 4788 + 9440)


def test_cca_default_ridge_scales_with_the_data():
    """The default ridge (0.1) is relative to each covariance's mean eigenvalue: the
    same on any feature scale, and it shrinks the canonical correlations of a clean problem."""
    from crossmetric import CCA, make_pairs

    rng = np.random.RandomState(0)
    Z = rng.randn(60, 3)
    X, Y = Z @ rng.randn(3, 8), Z @ rng.randn(3, 5) + 0.1 * rng.randn(60, 5)
    pairs, y = make_pairs(np.arange(60), np.arange(60), random_state=0)
    assert CCA().reg == 0.1
    a = CCA(3, scale=False, preprocessor=(X, Y)).fit(pairs, y)
    b = CCA(3, scale=False, preprocessor=(1000.0 * X, 0.001 * Y)).fit(pairs, y)
    np.testing.assert_allclose(a.correlations_, b.correlations_, rtol=1e-8)
    weak = CCA(3, reg=1e-3, scale=False, preprocessor=(X, Y)).fit(pairs, y)
    assert (a.correlations_ < weak.correlations_).all()
