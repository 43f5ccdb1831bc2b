"""retrieval.Index: exact search equals cross_distance, ivf(nprobe=nlist) equals flat, gmm equals
a slow multiple-assignment search, save/load round trip, cross-modal models, errors."""

import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError

pytest.importorskip("faiss")

from crossmetric._base import CrossModalMixin  # noqa: E402
from crossmetric.clml import CLML  # noqa: E402
from crossmetric.ldml import LDML  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402
from crossmetric.retrieval import Index, _first_distinct  # noqa: E402


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
        Index(kind="hnsw")
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
    # fewer vectors than k: missing results are -1 / inf
    D, I = index.search(np.zeros((1, 3)), 8)
    assert (I[0, 5:] == -1).all() and np.isinf(D[0, 5:]).all()
