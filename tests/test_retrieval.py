"""retrieval.Index: exact search equals cross_distance, ivf(nprobe=nlist) equals flat, gmm equals
a slow multiple-assignment search, save/load round trip, cross-modal models, errors."""

import os
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError

pytest.importorskip("faiss")

from crossmetric._base import CrossModalMixin  # noqa: E402
from crossmetric.learners.clml import CLML  # noqa: E402
from crossmetric.learners.ldml import LDML  # noqa: E402
from crossmetric.metrics._faiss_tools import default_nlist  # noqa: E402
from crossmetric.metrics._faiss_tools import first_distinct as _first_distinct  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402
from crossmetric.retrieval import Index, set_num_threads  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def digits():
    X, lab = load_digits(return_X_y=True)
    X, lab = X[:600] / 16.0, lab[:600]
    pairs, y = make_pairs(lab[:400], max_positives=600, random_state=0)
    return X, lab, pairs, y


@pytest.fixture(scope="module")
def ldml(digits):
    X, lab, pairs, y = digits
    return LDML(8, preprocessor=X[:400], random_state=0).fit(pairs, y)


@pytest.fixture(scope="module")
def clml(digits):
    X, lab, pairs, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CLML(4, n_components=8, preprocessor=X[:400], random_state=0,
                    max_iter=100).fit(pairs, y)


def _exact(dist, k):
    ids = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(dist, ids, axis=1), ids


def test_flat_equals_cross_distance(digits, ldml):
    X = digits[0]
    db, q = X[:500], X[500:]
    D, I = Index(ldml).add(db).search(q, 10)
    Dx, Ix = _exact(ldml.cross_distance(q, db), 10)
    np.testing.assert_array_equal(I, Ix)
    np.testing.assert_allclose(D, Dx, rtol=1e-4, atol=1e-4)
    assert D.shape == I.shape == (100, 10)


def test_raw_vectors_and_batches():
    rng = np.random.RandomState(0)
    db, q = rng.randn(300, 6), rng.randn(37, 6)
    index = Index(batch_size=10).add(db[:100]).add(db[100:])
    assert len(index) == 300 and index.d == 6
    D, I = index.search(q, 5)
    Dx, Ix = _exact(((q[:, None] - db[None]) ** 2).sum(-1), 5)
    np.testing.assert_array_equal(I, Ix)
    np.testing.assert_allclose(D, Dx, rtol=1e-4, atol=1e-5)


def test_ivf_full_probe_equals_flat(digits, ldml):
    X = digits[0]
    db, q = X[:500], X[500:]
    flat = Index(ldml).add(db).search(q, 7)
    ivf = Index(ldml, "ivf", nlist=8, random_state=0).add(db)
    ivf.nprobe = 8
    D, I = ivf.search(q, 7)
    np.testing.assert_array_equal(I, flat[1])
    np.testing.assert_allclose(D, flat[0], rtol=1e-4, atol=1e-4)
    # one list probed: a subset search, still sorted and from the database
    ivf.nprobe = 1
    D1, I1 = ivf.search(q, 7)
    assert np.all(np.diff(D1, axis=1) >= 0)
    assert np.isin(I1[I1 >= 0], np.arange(500)).all()


def test_ivfpq_recall():
    rng = np.random.RandomState(1)
    centers = rng.randn(20, 16) * 4
    db = centers[rng.randint(0, 20, 3000)] + rng.randn(3000, 16)
    q = centers[rng.randint(0, 20, 50)] + rng.randn(50, 16)
    _, Ix = Index().add(db).search(q, 10)
    index = Index(kind="ivfpq", nlist=16, nprobe=16, m=8, nbits=6, random_state=0).add(db)
    _, I = index.search(q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(I, Ix, strict=True)])
    assert recall > 0.5
    with pytest.raises(ValueError, match="m=5"):
        Index(kind="ivfpq", nlist=4, m=5).add(db)


def test_gmm_equals_slow_multiple_assignment(digits, clml):
    X = digits[0]
    db, q = X[:500], X[500:]
    k = 6
    Zdb, Zq = clml.transform(db), clml.transform(q)
    Pdb, Pq = clml.cluster_posteriors(db), clml.cluster_posteriors(q)
    for w, nprobe in [(1, 1), (2, 1), (2, 2), (1, 3)]:
        index = Index(clml, "gmm", w=w, nprobe=nprobe).add(db)
        D, I = index.search(q, k)
        lists_db = np.argsort(-Pdb, axis=1, kind="stable")[:, :w]
        lists_q = np.argsort(-Pq, axis=1, kind="stable")[:, :nprobe]
        for r in range(q.shape[0]):
            cand = np.flatnonzero(np.isin(lists_db, lists_q[r]).any(axis=1))
            d = ((Zdb[cand] - Zq[r]) ** 2).sum(1)
            o = np.argsort(d, kind="stable")[:k]
            expect = np.full(k, -1)
            expect[: o.size] = cand[o]
            assert len(set(I[r][I[r] >= 0])) == np.count_nonzero(I[r] >= 0)  # no repeats
            np.testing.assert_array_equal(I[r], expect)
    # every component stored and probed: exact search
    D, I = Index(clml, "gmm", w=4).add(db).search(q, k)
    _, Ix = _exact(clml.cross_distance(q, db), k)
    np.testing.assert_array_equal(I, Ix)


def test_first_distinct_against_loop():
    rng = np.random.RandomState(2)
    I = rng.randint(-1, 6, size=(50, 9))
    D = np.sort(rng.rand(50, 9), axis=1)
    Dk, Ik = _first_distinct(D, I, 4)
    for r in range(50):
        seen, got = set(), []
        for dd, ii in zip(D[r], I[r], strict=True):
            if ii >= 0 and ii in seen:
                continue
            seen.add(ii)
            got.append((dd, ii))
        got = (got + [(np.inf, -1)] * 4)[:4]
        np.testing.assert_array_equal(Ik[r], [g[1] for g in got])
        np.testing.assert_array_equal(Dk[r], [g[0] for g in got])


@pytest.mark.parametrize("kind", ["flat", "ivf", "ivfpq", "gmm"])
def test_save_load_round_trip(digits, clml, kind, tmp_path):
    X = digits[0]
    db, q = X[:500], X[500:]
    kw = {"ivf": dict(nlist=4, nprobe=2), "ivfpq": dict(nlist=2, nprobe=2, m=4, nbits=4),
          "gmm": dict(w=2)}.get(kind, {})
    index = Index(clml, kind, random_state=0, **kw).add(db, ids=np.arange(500) * 3 + 1)
    D, I = index.search(q, 5)
    assert np.isin(I[I >= 0] % 3, [1]).all()  # custom ids come back
    index.save(tmp_path / "idx.joblib")
    loaded = Index.load(tmp_path / "idx.joblib")
    D2, I2 = loaded.search(q, 5)
    np.testing.assert_array_equal(I, I2)
    np.testing.assert_array_equal(D, D2)
    assert loaded.ntotal == 500 and repr(loaded).startswith("Index(model=CLML")
    loaded.add(q)  # still usable
    assert len(loaded) == 600


class _TwoTowers(CrossModalMixin, BaseEstimator):
    """A tiny cross-modal model: fixed random towers of different input sizes."""

    def __init__(self, seed=0, *, preprocessor=None):
        self.seed = seed
        self.preprocessor = preprocessor

    def _fit(self, data, y):
        rng = np.random.RandomState(self.seed)
        self.Wx_ = rng.randn(data.X.shape[1], 3)
        self.Wy_ = rng.randn(data.Y.shape[1], 3)

    def _embed_x(self, X):
        return X @ self.Wx_

    def _embed_y(self, Y):
        return Y @ self.Wy_


class _Quadratic(_TwoTowers):
    def _rowwise_distance(self, FX, FY):
        return -np.einsum("ij,ij->i", FX, FY)

    def _matrix_distance(self, FX, FY):
        return -FX @ FY.T


def test_cross_modal_model():
    rng = np.random.RandomState(3)
    X, Y = rng.randn(40, 5), rng.randn(60, 7)
    pairs = np.c_[rng.randint(0, 40, 30), rng.randint(0, 60, 30)]
    y = np.where(np.arange(30) % 2, 1, -1)
    model = _TwoTowers(preprocessor=(X, Y)).fit(pairs, y)
    D, I = Index(model).add(Y).search(X, 4)  # queries in modality x, database in modality y
    np.testing.assert_array_equal(I, _exact(model.cross_distance(X, Y), 4)[1])
    with pytest.raises(ValueError, match="features"):
        Index(model).add(X)  # database must be modality y
    quad = _Quadratic(preprocessor=(X, Y)).fit(pairs, y)
    with pytest.raises(ValueError, match="squared Euclidean"):
        Index(quad)


def test_errors(digits, ldml):
    X = digits[0]
    with pytest.raises(ValueError, match="kind"):
        Index(kind="nonsense")
    with pytest.raises(ValueError, match="metric"):
        Index(metric="hamming")
    with pytest.raises(ValueError, match="gmm"):
        Index(ldml, "gmm")
    with pytest.raises(NotFittedError):
        Index(LDML(2))
    with pytest.raises(NotFittedError, match="empty"):
        Index(ldml).search(X[:3], 2)
    index = Index().add(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="dimensions"):
        index.search(np.zeros((2, 4)), 1)
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.zeros((2, 3)), 0)
    with pytest.raises(ValueError, match="ids"):
        Index().add(np.zeros((5, 3)), ids=np.arange(4))
    with pytest.raises(ValueError, match="NaN"):
        Index().add(np.full((5, 3), np.nan))
    # more neighbours than vectors: k columns, the missing ones -1 / FLT_MAX as in faiss
    D, I = index.search(np.zeros((1, 3)), 8)
    assert I.shape == D.shape == (1, 8) and sorted(I[0, :5]) == list(range(5))
    assert (I[0, 5:] == -1).all() and (D[0, 5:] == np.finfo(np.float32).max).all()
    Dc, Ic = index.search(np.zeros((1, 3)), 8, clamp=True)
    assert Ic.shape == Dc.shape == (1, 5)
    np.testing.assert_array_equal(Ic, I[:, :5])


def test_ids_validated():
    X = np.random.RandomState(0).randn(6, 3)
    with pytest.raises(ValueError, match="at most 2\\*\\*63"):
        Index().add(X[:2], ids=np.array([1, 2**63], dtype=np.uint64))  # would wrap to < 0
    with pytest.raises(ValueError, match=">= 0"):
        Index().add(X[:2], ids=np.array([0, -1]))
    with pytest.raises(ValueError, match="unique"):
        Index().add(X[:2], ids=np.array([4, 4]))
    index = Index().add(X[:3], ids=np.array([2**62, 7, 9], dtype=np.uint64))
    with pytest.raises(ValueError, match="already in the index"):
        index.add(X[3:5], ids=[1, 7])
    index.add(X[3:])  # default ids continue after the largest one
    _, I = index.search(X[:1], 1)
    assert I[0, 0] == 2**62 and index.ntotal == 6
    _, I = index.search(X[5:], 1)
    assert I[0, 0] == 2**62 + 3


def test_empty_inputs():
    index = Index().add(np.ones((4, 3)))
    with pytest.raises(ValueError, match="no rows"):
        index.add(np.zeros((0, 3)))
    D, I = index.search(np.zeros((0, 3)), 2)
    assert D.shape == I.shape == (0, 2)
    lims, d, ids = index.range_search(np.zeros((0, 3)), 1.0)
    assert lims.tolist() == [0] and d.size == ids.size == 0


def test_save_leaves_training_data_out(digits, ldml, tmp_path):
    X = digits[0]
    Index(ldml, "ivf", nlist=4, min_train_size=100).add(X[:500]).save(tmp_path / "i.idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.idx"]  # one file, no .faiss part
    loaded = Index.load(tmp_path / "i.idx")
    assert loaded.model.preprocessor is None and loaded.ntotal == 500
    assert ldml.preprocessor is not None  # the fitted model itself is untouched
    assert (tmp_path / "i.idx").stat().st_size < X[:400].nbytes / 4
    np.testing.assert_array_equal(loaded.search(X[500:], 3)[1],
                                  Index.load(tmp_path / "i.idx").search(X[500:], 3)[1])
    # a model file is not an index file, and the reverse
    from crossmetric.persistence import load_model, save_model

    save_model(tmp_path / "m.model", ldml)
    with pytest.raises(ValueError, match=r"m.model: a crossmetric model file, expected an "
                                         r"index file"):
        Index.load(tmp_path / "m.model")
    with pytest.raises(ValueError, match=r"i.idx: a crossmetric index file, expected a "
                                         r"model file"):
        load_model(tmp_path / "i.idx")


def test_training_is_deferred_until_enough_vectors():
    rng = np.random.RandomState(4)
    db, q = rng.randn(3000, 8).astype(np.float32), rng.randn(20, 8)
    exact = Index().add(db).search(q, 5)
    index = Index(kind="ivf", min_train_size=2000, random_state=0).add(db[:50])
    assert not index.is_trained  # a small first add is stored exactly, not trained on
    np.testing.assert_array_equal(index.search(q, 5)[1], Index().add(db[:50]).search(q, 5)[1])
    index.add(db[50:1500])
    assert not index.is_trained
    index.add(db[1500:])  # 3000 >= 2000: trains on everything held, nlist from 3000 vectors
    assert index.is_trained and index.nlist_ == default_nlist(3000) > 1
    D, I = index.search(q, 5, nprobe=index.nlist_)
    np.testing.assert_array_equal(I, exact[1])
    assert index.ntotal == 3000
    # explicit training, refused once it holds vectors, allowed again after reset
    index2 = Index(kind="ivf", nlist=8, random_state=0).train(db).add(db[:100])
    assert index2.is_trained and index2.nlist_ == 8
    with pytest.raises(ValueError, match="reset"):
        index2.train(db)
    index2.reset().train(db[:500]).add(db, ids=np.arange(3000))
    np.testing.assert_array_equal(index2.search(q, 5, nprobe=8)[1], exact[1])


def test_remove_ids_and_reset():
    rng = np.random.RandomState(5)
    db, q = rng.randn(400, 6), rng.randn(10, 6)
    for kind, kw in [("flat", {}), ("ivf", dict(nlist=4, nprobe=4, min_train_size=100))]:
        index = Index(kind=kind, random_state=0, **kw).add(db)
        assert index.remove_ids(np.arange(0, 400, 2)) == 200
        assert index.ntotal == 200
        _, I = index.search(q, 5)
        _, Ix = Index().add(db[1::2], ids=np.arange(1, 400, 2)).search(q, 5)
        np.testing.assert_array_equal(I, Ix)
        index.add(db[:1], ids=[0])  # a removed id may come back
        assert index.reset().ntotal == 0
        with pytest.raises(NotFittedError, match="empty"):
            index.search(q, 1)
    hnsw = Index(kind="hnsw").add(db)
    with pytest.raises(ValueError, match="remove_ids"):
        hnsw.remove_ids([1])


def test_range_search_with_model_threshold(digits, ldml):
    X = digits[0]
    db, q = X[:500], X[500:]
    lims, D, I = Index(ldml).add(db).range_search(q)
    dist = ldml.cross_distance(q, db)
    for r in range(q.shape[0]):
        hit = np.flatnonzero(dist[r] < ldml.threshold_)
        got = I[lims[r]:lims[r + 1]]
        assert set(got) == set(hit)
        assert np.all(np.diff(D[lims[r]:lims[r + 1]]) >= 0)
    with pytest.raises(ValueError, match="radius"):
        Index().add(db).range_search(q)
    with pytest.raises(ValueError, match="finite"):
        Index(ldml).add(db).range_search(q, float("nan"))


def test_inner_product_cosine_hnsw_factory():
    rng = np.random.RandomState(6)
    db, q = rng.randn(600, 8), rng.randn(15, 8)
    S = q @ db.T
    D, I = Index(metric="ip").add(db).search(q, 4)
    np.testing.assert_array_equal(I, np.argsort(-S, axis=1, kind="stable")[:, :4])
    nd = db / np.linalg.norm(db, axis=1, keepdims=True)
    nq = q / np.linalg.norm(q, axis=1, keepdims=True)
    D, I = Index(metric="cosine").add(db).search(q, 4)
    np.testing.assert_allclose(D, np.sort(nq @ nd.T, axis=1)[:, ::-1][:, :4], rtol=1e-5)
    exact = Index().add(db).search(q, 5)[1]
    _, I = Index(kind="hnsw", nprobe=200).add(db).search(q, 5)
    assert np.mean([len(set(a) & set(b)) / 5 for a, b in zip(I, exact, strict=True)]) > 0.9
    fac = Index(kind="IVF8,Flat", min_train_size=300, random_state=0).add(db)
    assert fac.is_trained
    _, I = fac.search(q, 5, nprobe=8)
    np.testing.assert_array_equal(I, exact)
    with pytest.raises(ValueError, match="faiss could not build"):
        Index(kind="IVF8,Bogus").add(db)


def test_threads_and_gpu_flag():
    import faiss

    before = set_num_threads(1)
    assert faiss.omp_get_max_threads() == 1
    set_num_threads(before)
    if faiss.get_num_gpus() == 0:
        with pytest.raises(ValueError, match="GPU"):
            Index(device="gpu").add(np.ones((3, 2)))


@pytest.mark.parametrize("metric", ["l2", "ip"])
@pytest.mark.parametrize("k", [1, 4, 7, 12])
def test_search_shape_and_sentinel_as_faiss(metric, k):
    """(n_queries, k) whatever k; ids and distances equal faiss's own flat index, sentinels
    included."""
    faiss = pytest.importorskip("faiss")
    rng = np.random.RandomState(4)
    db, q = rng.randn(7, 3).astype(np.float32), rng.randn(5, 3).astype(np.float32)
    D, I = Index(metric=metric).add(db).search(q, k)
    ref = (faiss.IndexFlatL2 if metric == "l2" else faiss.IndexFlatIP)(3)
    ref.add(db)
    Dr, Ir = ref.search(q, k)
    assert D.shape == I.shape == (5, k)
    np.testing.assert_array_equal(I, Ir)
    np.testing.assert_allclose(D, Dr, rtol=1e-5, atol=1e-5)
    Dc, Ic = Index(metric=metric).add(db).search(q, k, clamp=True)
    assert Ic.shape == (5, min(k, 7))
    np.testing.assert_array_equal(Ic, Ir[:, :min(k, 7)])


def test_works_after_faiss_torch_utils_is_imported():
    """pytorch-metric-learning imports faiss.contrib.torch_utils, which makes faiss methods
    return torch tensors unless given NumPy buffers; the deferred training reads the stored
    vectors back and must still get NumPy."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    code = (
        "import numpy as np, faiss, faiss.contrib.torch_utils\n"
        "from crossmetric.retrieval import Index\n"
        "db = np.random.RandomState(0).randn(600, 4).astype(np.float32)\n"
        "index = Index(kind='ivf', min_train_size=500, random_state=0).add(db[:100])\n"
        "index.add(db[100:])\n"
        "assert index.is_trained\n"
        "D, I = index.search(db[:3], 2)\n"
        "assert isinstance(I, np.ndarray) and I.shape == (3, 2)\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
