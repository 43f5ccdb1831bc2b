"""Mini-batch solvers: same optimum as the full-batch ones on small data, memory-mapped input
read in blocks, errors."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric._solvers.stochastic import PairBlocks
from crossmetric.learners.cmml import CMML
from crossmetric.learners.ldml import LDML
from crossmetric.learners.pcca import PCCA
from crossmetric.pairs import make_pairs


@pytest.fixture(scope="module")
def digits():
    X, lab = load_digits(return_X_y=True)
    X = X / 16.0
    tr, te = np.arange(400), np.arange(1000, 1400)
    p, y = make_pairs(lab[tr], max_positives=800, random_state=0)
    pt, yt = make_pairs(lab[te], max_positives=800, random_state=1)
    return X[tr], X[te], p, y, pt, yt


def _objective(model, X, p, y, beta=3.0):
    Z = model.transform(X)
    return PairLogisticObjective(p[:, 0], p[:, 1], y, beta, len(X), len(X)).loss(Z, Z)


def _fit(model, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(*args)


def test_pcca_minibatch_reaches_the_full_batch_optimum(digits):
    X, Xt, p, y, pt, yt = digits
    full = PCCA(8, solver="lbfgs", tol=1e-9, max_iter=2000, random_state=0,
                preprocessor=X).fit(p, y)
    # plain SGD gets within 13 % in 300 epochs, Adam ("minibatch") within 1-2 % in ~50
    for solver, lr, within in (("minibatch", 1.0, 1.015), ("sgd", 0.1, 1.2)):
        mb = _fit(PCCA(8, solver=solver, batch_size=400, learning_rate=lr, max_iter=300,
                       random_state=0, preprocessor=X), p, y)
        e_full, e_mb = _objective(full, X, p, y), _objective(mb, X, p, y)
        assert e_mb < e_full * within, (solver, e_mb, e_full)
        # training AUC (held-out AUC differs more: the full-batch run at tol=1e-9 overfits)
        a_full, a_mb = full.score(p, y), mb.score(p, y)
        assert abs(a_mb - a_full) < 0.01, (solver, a_mb, a_full)
        assert len(mb.loss_curve_) == mb.n_iter_


def test_cmml_and_ldml_minibatch_match_full_batch(digits):
    X, Xt, p, y, pt, yt = digits
    V = X[:, ::2] ** 2  # a second "modality"
    kw = dict(random_state=0, preprocessor=(X, V))
    full = _fit(CMML(6, solver="lbfgs", tol=1e-8, max_iter=2000, **kw), p, y)
    mb = _fit(CMML(6, solver="minibatch", batch_size=400, max_iter=300, **kw), p, y)
    obj = PairLogisticObjective(p[:, 0], p[:, 1], y, 3.0, len(X), len(X))
    e_full = obj.loss(full.transform_x(X), full.transform_y(V))
    e_mb = obj.loss(mb.transform_x(X), mb.transform_y(V))
    # CMML's optimum is approached slowly (L-BFGS needs ~1,500 iterations here); mini-batches
    # stop 12 % above it
    assert e_mb < e_full * 1.15, (e_mb, e_full)
    assert abs(full.score(p, y) - mb.score(p, y)) < 0.01
    # alpha=1e-2: a well-defined optimum (at 1e-4 the training pairs are nearly separable and
    # the optimum lies far out along a ray, which relative Adam steps reach slowly)
    full_l = _fit(LDML(8, alpha=1e-2, max_iter=2000, tol=1e-9, random_state=0,
                       preprocessor=X), p, y)
    mb_l = _fit(LDML(8, alpha=1e-2, solver="minibatch", batch_size=400, learning_rate=1.0,
                     max_iter=300, random_state=0, preprocessor=X), p, y)
    theta = [np.r_[m.components_.ravel(), m.bias_] for m in (full_l, mb_l)]
    i, j = p[:, 0], p[:, 1]
    losses = [full_l._loss_grad(t, X, PairLogisticObjective(i, j, y, 1.0, len(X), len(X)), 8)[0]
              for t in theta]
    assert losses[1] < losses[0] * 1.03, losses
    a = [m.score(p, y) for m in (full_l, mb_l)]
    assert abs(a[0] - a[1]) < 0.005, a


def test_memmap_input_gives_the_same_model(digits, tmp_path):
    X, Xt, p, y, pt, yt = digits
    np.save(tmp_path / "X.npy", X.astype(np.float32))
    np.save(tmp_path / "p.npy", p)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    pm = np.load(tmp_path / "p.npy", mmap_mode="r")
    kw = dict(solver="minibatch", batch_size=300, max_iter=3, random_state=0)
    a = _fit(PCCA(4, **kw, preprocessor=Xm), pm, y)
    b = _fit(PCCA(4, **kw, preprocessor=np.array(Xm)), np.array(pm), y)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert isinstance(a.preprocessor, np.memmap)  # stored as given, not copied


def test_blocks_read_only_the_rows_their_pairs_use():
    rng = np.random.RandomState(0)
    X, Y = rng.randn(50, 3), rng.randn(40, 2)
    ix, iy = rng.randint(0, 50, 30), rng.randint(0, 40, 30)
    yy = np.where(rng.rand(30) < 0.5, 1, -1)
    idx = np.array([1, 4, 5, 20])
    (Xb, Yb), il, jl, yb = PairBlocks(X, Y, ix, iy, yy, tied=False).gather(idx)
    np.testing.assert_array_equal(Xb[il], X[ix[idx]])
    np.testing.assert_array_equal(Yb[jl], Y[iy[idx]])
    assert Xb.shape[0] == np.unique(ix[idx]).size and np.array_equal(yb, yy[idx])
    (Z,), il, jl, _ = PairBlocks(X, X, ix, iy, yy, tied=True).gather(idx)
    np.testing.assert_array_equal(Z[il], X[ix[idx]])
    np.testing.assert_array_equal(Z[jl], X[iy[idx]])
    assert Z.shape[0] == np.unique(np.r_[ix[idx], iy[idx]]).size
    (Z,), il, jl, _ = PairBlocks(X[:, :2], Y, ix, iy, yy, tied=True).gather(idx)
    np.testing.assert_array_equal(Z[jl], Y[iy[idx]])


def test_nystroem_and_errors(digits):
    X, Xt, p, y, pt, yt = digits
    m = _fit(PCCA(4, kernel="rbf", kernel_approximation="nystroem", n_landmarks=50,
                  solver="minibatch", max_iter=2, random_state=0, preprocessor=X), p, y)
    assert m.feature_components_.shape == (4, 50)
    with pytest.raises(ValueError, match="kernel_approximation='nystroem'"):
        PCCA(4, kernel="rbf", solver="minibatch", preprocessor=X).fit(p, y)
    with pytest.raises(ValueError, match="batch_size"):
        PCCA(4, solver="sgd", batch_size=0, preprocessor=X).fit(p, y)
    with pytest.raises(ValueError, match="learning_rate"):
        LDML(4, solver="minibatch", learning_rate=-1.0, preprocessor=X).fit(p, y)
    with pytest.raises(ValueError, match="solver"):
        LDML(4, solver="adam", preprocessor=X).fit(p, y)
    with pytest.warns(ConvergenceWarning, match="epochs"):
        PCCA(4, solver="minibatch", max_iter=1, preprocessor=X).fit(p, y)


def test_clml_minibatch_matches_full_batch(digits):
    from crossmetric.learners.clml import CLML

    X, Xt, p, y, pt, yt = digits
    kw = dict(n_clusters=2, n_components=6, alpha=1e-2, random_state=0, preprocessor=X)
    full = _fit(CLML(**kw, max_iter=2000, tol=1e-9), p, y)
    mb = _fit(CLML(**kw, solver="minibatch", batch_size=400, learning_rate=1.0,
                   max_iter=300), p, y)
    assert mb.local_components_.shape == full.local_components_.shape == (2, 6, 64)
    obj = PairLogisticObjective(p[:, 0], p[:, 1], y, 1.0, len(X), len(X))
    # each fits its mixture on the same 400 samples, in another order (the full-batch fit sorts
    # them), so the two objectives differ by the clustering: compare each at its own optimum
    losses = [m._loss_grad(np.r_[m.local_components_.ravel(), m.local_offsets_.ravel(),
                                 m.bias_], X, m._posteriors(X, True), obj, 2, 6)[0]
              for m in (full, mb)]
    assert losses[1] < losses[0] * 1.05, losses
    assert abs(full.score(p, y) - mb.score(p, y)) < 0.01


@pytest.mark.parametrize("name", ["PCCA", "CMML", "LDML", "CLML"])
def test_early_stopping_with_a_stochastic_solver_is_refused(name):
    import crossmetric

    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(4), 5)
    X = rng.rand(20, 4) + labels[:, None]
    pairs, y = make_pairs(labels, labels, random_state=0)
    prep = (X, X) if name == "CMML" else X
    kw = {"n_clusters": 2, "n_components": 2} if name == "CLML" else {"n_components": 2}
    model = getattr(crossmetric, name)(solver="minibatch", early_stopping=True,
                                       preprocessor=prep, **kw)
    with pytest.raises(ValueError, match="early_stopping"):
        model.fit(pairs, y)
