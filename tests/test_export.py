"""crossmetric.export: ONNX graphs and faiss indexes of every learner's towers, checked with
onnxruntime / faiss against transform_x / transform_y."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from crossmetric.datasets import make_cross_modal
from crossmetric.pairs import make_pairs
from crossmetric.registry import METHODS, make_estimator

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from crossmetric.export import to_faiss, to_onnx, tower_steps  # noqa: E402

#: learners whose towers have no graph form (none today); each would be skipped with its reason
NOT_EXPRESSIBLE: dict[str, str] = {}

#: small, fast settings: the export must reproduce the fitted model, not a converged one
_FAST = {"n_components": 3, "max_iter": 15, "random_state": 0, "n_clusters": 2,
         "max_triplets": 300, "n_landmarks": 25}


@pytest.fixture(scope="module")
def data():
    d = make_cross_modal(90, n_classes=6, n_features_x=6, n_features_y=5, nonnegative=True,
                         random_state=0)
    X, Y = d.X, d.Y
    X2 = make_cross_modal(90, n_classes=6, n_features_x=6, n_features_y=6, nonnegative=True,
                          random_state=0).Y  # single-modal learners: same width both sides
    cross = make_pairs(d.labels, d.labels, max_positives=150, random_state=0)
    single = make_pairs(d.labels, max_positives=150, random_state=0)
    rng = np.random.RandomState(1)
    test_x = np.abs(X[:30] + 0.1 * rng.rand(30, X.shape[1]))
    test_y = np.abs(Y[:30] + 0.1 * rng.rand(30, Y.shape[1]))
    return X, Y, X2, cross, single, test_x, test_y


def _fit(est, data):
    X, Y, X2, cross, single, _, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if est._cross_modal:
            return est.set_params(preprocessor=(X, Y)).fit(*cross)
        return est.set_params(preprocessor=X).fit(*single)


def _onnx_matches(model, tmp_path, test_x, test_y, sides=("x", "y")):
    for side, T in zip("xy", (test_x, test_y), strict=True):
        if side not in sides:
            continue
        if not model._cross_modal:
            T = test_x
        T32 = np.ascontiguousarray(T, dtype=np.float32)
        path = to_onnx(model, tmp_path / f"tower_{side}.onnx", modality=side)
        assert path == str(tmp_path / f"tower_{side}.onnx")
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (inp,) = sess.get_inputs()
        assert inp.name == side.upper()
        got = sess.run(None, {inp.name: T32})[0]
        want = getattr(model, f"transform_{side}")(T32)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        # one row at a time gives the same (the batch dimension is free)
        np.testing.assert_allclose(sess.run(None, {inp.name: T32[:1]})[0], want[:1],
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n == "deepgsm" else n for n in METHODS])
def test_onnx_equals_transform_for_every_registry_learner(name, data, tmp_path):
    if name in NOT_EXPRESSIBLE:
        pytest.skip(NOT_EXPRESSIBLE[name])
    if name == "deepgsm":
        _check_deepgsm(tmp_path)
        return
    est = make_estimator(name)
    params = est.get_params()
    est.set_params(**{k: v for k, v in _FAST.items() if k in params})
    if name in ("cmlauc", "cmlpauc", "mahaauc", "gsm"):
        est.set_params(max_iter=5)
    model = _fit(est, data)
    _onnx_matches(model, tmp_path, data[5], data[6])


KERNEL_VARIANTS = [
    ("PCCA", {"kernel": k, "kernel_approximation": a})
    for k in ("linear", "rbf", "chi2", "chi2_rbf") for a in (None, "nystroem")
] + [
    ("CMML", {"kernel": "chi2_rbf"}), ("CMML", {"kernel": "rbf", "kernel_approximation":
                                                "nystroem"}),
    ("CMML", {"kernel": "chi2", "kernel_approximation": "nystroem"}),
    ("KCCA", {"kernel": "chi2_rbf", "kernel_approximation": None}),
    ("KCCA", {"kernel": "rbf", "kernel_approximation": "nystroem", "distance": "euclidean"}),
    ("KPLS", {"kernel": "chi2"}), ("KCDFE", {"kernel": "linear"}),
    ("KCSR", {"kernel": "chi2_rbf", "distance": "euclidean"}),
    ("CCA", {"distance": "euclidean"}), ("PLS", {"scale": False}),
    ("CLML", {"covariance_type": "full", "max_assignments": None}),
    ("CLML", {"covariance_type": "tied", "min_assignment": 0.3, "max_assignments": 1}),
    ("CLML", {"covariance_type": "spherical", "n_clusters": 3, "gmm_pca_components": 2}),
    ("GSM", {"n_components": None, "whiten": True}), ("GSM", {"whiten": True}),
    ("GSM", {"n_components": None}),
    ("Euclidean", {"standardize": True}),
]


@pytest.mark.parametrize("cls, params", KERNEL_VARIANTS,
                         ids=[f"{c}-{'-'.join(map(str, p.values()))}" for c, p in
                              KERNEL_VARIANTS])
def test_onnx_kernel_nystroem_and_mixture_towers(cls, params, data, tmp_path):
    import crossmetric

    est = getattr(crossmetric, cls)()
    allowed = est.get_params()
    est.set_params(**{k: v for k, v in _FAST.items() if k in allowed})
    if cls == "GSM":
        est.set_params(max_iter=5)
    est.set_params(**params)
    model = _fit(est, data)
    _onnx_matches(model, tmp_path, data[5], data[6])
    kinds = [s[0] for s in tower_steps(model, "x")]
    if params.get("kernel") and params["kernel"] != "linear" or cls in ("KPLS", "KCDFE"):
        assert "kernel" in kinds  # support samples kept, the kernel computed in the graph


@pytest.mark.parametrize("name", ["cca", "mvda", "kcca"])
def test_a_closed_form_that_kept_the_untrained_distance_exports_it(name, tmp_path):
    """Wide views whose raw samples already match: the held-out choice keeps the untrained
    distance (the identity on the training span, the rest appended), no cosine."""
    rng = np.random.RandomState(5)
    Z = 3.0 * rng.randn(50, 150)  # wider than the 100 training samples
    X, Y = Z + 0.5 * rng.randn(50, 150), Z + 0.5 * rng.randn(50, 150)
    labels = np.arange(50)
    pairs, y = make_pairs(labels, labels, n_negatives=3, random_state=5)
    model = make_estimator(name).set_params(preprocessor=(X, Y)).fit(pairs, y)
    assert model.untrained_
    test = rng.randn(6, 150)
    _onnx_matches(model, tmp_path, test, test + 0.1)
    assert [s[0] for s in tower_steps(model, "x")] == ["affine", "complement"]
    pytest.importorskip("faiss")
    with pytest.raises(ValueError, match="not one matrix"):  # d × d would not fit: ONNX
        to_faiss(model, tmp_path / "t.faiss", modality="y")


def test_linear_towers_fold_to_one_matrix(data):
    model = _fit(make_estimator("cmlauc", max_iter=5, random_state=0), data)
    (step,) = tower_steps(model, "y")
    assert step[0] == "affine" and step[1].shape == (5, model.components_y_.shape[0])
    gsm = _fit(make_estimator("gsm", n_components=3, max_iter=3, random_state=0), data)
    assert [s[0] for s in tower_steps(gsm, "x")] == ["affine"]  # PCA, scale, tower: one map


def test_unexpressible_towers_and_bad_arguments_raise(data, tmp_path):
    import crossmetric

    class Squashed(crossmetric.LDML):
        def _embed_x(self, X):
            return np.tanh(super()._embed_x(X))

    model = _fit(Squashed(n_components=2), data)
    with pytest.raises(ValueError, match="Squashed.*cannot be exported"):
        to_onnx(model, tmp_path / "m.onnx")
    assert not os.listdir(tmp_path)  # nothing half-written
    ldml = _fit(crossmetric.LDML(n_components=2), data)
    with pytest.raises(ValueError, match="modality"):
        to_onnx(ldml, tmp_path / "m.onnx", modality="z")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        to_onnx(crossmetric.LDML(), tmp_path / "m.onnx")


def test_onnx_overwrites_atomically(data, tmp_path):
    import crossmetric

    ldml = _fit(crossmetric.LDML(n_components=2), data)
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    to_onnx(ldml, target)
    assert target.read_bytes() != b"old" and os.listdir(tmp_path) == ["m.onnx"]


def _check_deepgsm(tmp_path):
    """DeepGSM (the registry's settings, a tiny network and 2 rounds) through torch.onnx,
    with and without test-time flipping, grey first modality and colour second."""
    pytest.importorskip("torch")
    rng = np.random.RandomState(0)
    ix, iy = rng.rand(24, 16, 16), rng.rand(24, 16, 16, 3)
    labels = np.repeat(np.arange(6), 4)
    pairs, y = make_pairs(labels, labels, max_positives=40, random_state=0)
    model = make_estimator("deepgsm", hidden_units=8, n_identities=4, n_images_x=2,
                           n_images_y=2, max_iter=2, tol=None, random_state=0,
                           preprocessor=(ix, iy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(pairs, y)
    for flip in (False, True):
        model.test_flip = flip  # read at inference only
        for side, imgs in (("x", ix[:5]), ("y", iy[:5])):
            path = to_onnx(model, tmp_path / f"deep_{side}.onnx", modality=side)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            got = sess.run(None, {side.upper(): imgs.astype(np.float32)})[0]
            want = getattr(model, f"transform_{side}")(imgs.astype(np.float32))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    import importlib.util

    if importlib.util.find_spec("faiss") is not None:
        # DeepGSM scores pairs with S, not the distance of its embeddings: no L2 index
        with pytest.raises(ValueError, match="scores pairs with its own function"):
            to_faiss(model, tmp_path / "deep.faiss")


# -------------------------------------------------------------------------------- faiss
LINEAR = ["euclidean", "pcca", "cmml", "cmlauc", "mahaauc", "ldml", "cca", "pls",
          "cdfe", "kissme", "mvda", "csr", "dmleig", "itml", "nca", "lmnn", "mcc"]


@pytest.mark.parametrize("name", ["gsm", "prdc"])
def test_faiss_refuses_models_whose_distance_is_not_l2_of_the_embedding(name, data, tmp_path):
    """GSM's S and PRDC's score are not ‖f(x) − g(y)‖²: an L2 index would rank wrongly."""
    pytest.importorskip("faiss")
    est = make_estimator(name)
    params = est.get_params()
    est.set_params(**{k: v for k, v in _FAST.items() if k in params})
    if name == "gsm":
        est.set_params(max_iter=5)
    model = _fit(est, data)
    with pytest.raises(ValueError, match="scores pairs with its own function"):
        to_faiss(model, tmp_path / "t.faiss")
    assert not (tmp_path / "t.faiss").exists()


@pytest.mark.parametrize("name", LINEAR)
def test_faiss_pretransform_equals_flat_search_of_the_embedding(name, data, tmp_path):
    faiss = pytest.importorskip("faiss")
    est = make_estimator(name)
    params = est.get_params()
    est.set_params(**{k: v for k, v in _FAST.items() if k in params})
    if name in ("cmlauc", "mahaauc"):
        est.set_params(max_iter=5)
    model = _fit(est, data)
    X, Y = data[0], data[1]
    side = "y" if model._cross_modal else "x"
    gallery = (Y if model._cross_modal else X).astype(np.float32)
    queries = data[6 if model._cross_modal else 5].astype(np.float32)
    path = to_faiss(model, tmp_path / "t.faiss", modality=side)
    index = faiss.read_index(path)
    assert isinstance(faiss.downcast_index(index), faiss.IndexPreTransform)
    index.add(gallery)  # raw samples in: the index embeds them
    D, I = index.search(queries, 7)
    emb = getattr(model, f"transform_{side}")
    ref = faiss.IndexFlatL2(emb(gallery).shape[1])
    ref.add(np.ascontiguousarray(emb(gallery), dtype=np.float32))
    Dr, Ir = ref.search(np.ascontiguousarray(emb(queries), dtype=np.float32), 7)
    np.testing.assert_allclose(D, Dr, rtol=1e-4, atol=1e-4 * max(1.0, float(Dr.max())))
    assert np.mean(I == Ir) > 0.97  # float32 near-ties may swap
    same = np.isclose(D, Dr, rtol=1e-6)
    np.testing.assert_array_equal(I[same & (np.diff(np.c_[D, D[:, -1:] + 1]) > 1e-4)],
                                  Ir[same & (np.diff(np.c_[D, D[:, -1:] + 1]) > 1e-4)])


def test_faiss_cross_modal_gallery_and_cosine(data, tmp_path):
    faiss = pytest.importorskip("faiss")
    X, Y, _, cross, _, test_x, _ = data
    for distance in ("euclidean", "cosine"):
        model = make_estimator("cca", n_components=3, distance=distance,
                               preprocessor=(X, Y)).fit(*cross)
        path = to_faiss(model, tmp_path / "cca.faiss", modality="x", database=Y,
                        database_modality="y")
        index = faiss.read_index(path)
        assert index.ntotal == Y.shape[0]
        D, I = index.search(test_x.astype(np.float32), 5)
        d = model.cross_distance(test_x, Y) if distance == "euclidean" else (
            ((model.transform_x(test_x)[:, None] - model.transform_y(Y)[None]) ** 2).sum(-1))
        np.testing.assert_array_equal(I, np.argsort(d, axis=1, kind="stable")[:, :5])


def test_faiss_refuses_nonlinear_towers(data, tmp_path):
    pytest.importorskip("faiss")
    import crossmetric

    model = _fit(crossmetric.PCCA(n_components=2, kernel="rbf", max_iter=5), data)
    with pytest.raises(ValueError, match="linear tower"):
        to_faiss(model, tmp_path / "k.faiss")
    assert not os.listdir(tmp_path)


COMPLEMENT_LEARNERS = {
    "PCCA": {"n_components": None}, "CMML": {"n_components": None},
    "CMLAUC": {"reduce_to": 4}, "MahaAUC": {"n_components": 4, "reduce_to": 4},
    "LDML": {"n_components": 4}, "CLML": {"n_clusters": 2, "n_components": 4},
    "GSM": {"n_components": None},
}


@pytest.mark.parametrize("cls", sorted(COMPLEMENT_LEARNERS))
def test_onnx_keeps_the_untrained_distance_outside_the_basis(cls, tmp_path):
    """A model started from the identity on views wider than its training samples keeps the
    untrained distance outside its basis (``complement_scale_``): the graph appends those
    coordinates as transform does (GSM: after each ``L`` block), and faiss refuses it in one
    line rather than index ``components_`` alone."""
    import crossmetric

    rng = np.random.RandomState(0)
    Z = rng.randn(12, 30)
    X, Y = Z + 0.5 * rng.randn(12, 30), Z + 0.5 * rng.randn(12, 30)
    labels = np.arange(12)
    est = getattr(crossmetric, cls)(init="identity", early_stopping=False, max_iter=3,
                                     random_state=0, **COMPLEMENT_LEARNERS[cls])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if est._cross_modal:
            model = est.set_params(preprocessor=(X, Y)).fit(*make_pairs(labels, labels,
                                                                      random_state=0))
        else:
            S = np.vstack([X, Y])
            model = est.set_params(preprocessor=S).fit(*make_pairs(np.r_[labels, labels],
                                                                   random_state=0))
    assert model.complement_scale_ > 0
    assert tower_steps(model, "x")[-1][0] == "complement"
    T = rng.randn(5, 30)
    _onnx_matches(model, tmp_path, T, T)
    if cls != "GSM":
        pytest.importorskip("faiss")
        with pytest.raises(ValueError, match="not one matrix"):
            to_faiss(model, tmp_path / "i.faiss")
