"""The solver layer: one Adam, one epoch loop, one pairs → samples step, and
the old module paths kept as aliases."""


import numpy as np
import pytest

from crossmetric._solvers.early_stopping import split_pairs
from crossmetric._solvers.epochs import run_epochs
from crossmetric._solvers.optim import Adam, ScaledSGD
from crossmetric._solvers.stopping import EpochPlateau
from crossmetric.pairs._pair_data import PairData, canonical_pairs, used_pairs


def _adam_reference(theta, grads, lr, eps_on, b1=0.9, b2=0.999, eps=1e-8):
    """Kingma & Ba written out step by step: the moments, then the update of each form."""
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    theta = theta.copy()
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        if eps_on == "v_hat":  # Algorithm 1
            theta = theta - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        else:  # §2: α_t = α √(1 − β₂ᵗ) / (1 − β₁ᵗ), ε on √v
            theta = theta - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    return theta


@pytest.mark.parametrize("eps_on", ["v_hat", "v"])
def test_adam_matches_the_paper_on_lists_and_dicts(eps_on):
    rng = np.random.RandomState(0)
    theta0 = rng.normal(size=(3, 4))
    grads = [rng.normal(size=(3, 4)) * 10.0 ** -k for k in range(6)]  # tiny ones: ε matters
    ref = _adam_reference(theta0, grads, 0.01, eps_on)
    as_list, as_dict = [theta0.copy()], {"w": theta0.copy()}
    opt_l, opt_d = Adam([0.01], eps_on=eps_on), Adam(0.01, eps_on=eps_on)
    for g in grads:
        opt_l.step(as_list, [g])
        opt_d.step(as_dict, {"w": g})
    np.testing.assert_allclose(as_list[0], ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(as_dict["w"], as_list[0])
    # the two forms differ (only in the scale of ε), so the option is not a no-op
    other = _adam_reference(theta0, grads, 0.01, "v" if eps_on == "v_hat" else "v_hat")
    assert not np.allclose(ref, other, rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="eps_on"):
        Adam(0.1, eps_on="m")


def test_scaled_sgd_first_step_moves_by_lr_of_the_norm():
    theta = [np.array([3.0, 4.0]), np.zeros(2)]
    g = [np.array([1.0, 0.0]), np.array([0.0, 2.0])]
    ScaledSGD(0.1).step(theta, g, scale=1.0)
    assert np.linalg.norm(theta[0] - [3.0, 4.0]) == pytest.approx(0.1 * 5.0)
    np.testing.assert_allclose(theta[1], [0.0, -0.2])  # θ₀ = 0: the step is lr · g


def test_epoch_plateau_relative_decay_and_absolute_patience():
    rule = EpochPlateau(0.1, 2, relative=True, decay=5.0, min_rate=0.03)
    # an epoch improves when below best − 0.1 · |best|: 8.0 does (< 9), 7.5 does not (> 7.2)
    stops = [rule.update(v) for v in (10.0, 8.0, 7.5, 7.4)]
    assert stops == [False] * 4 and rule.rate == pytest.approx(0.2) and rule.best == 7.4
    stops = [rule.update(v) for v in (7.3, 7.2, 7.1, 7.0)]  # two decays: 0.04, then 0.008
    assert stops == [False, False, False, True] and rule.rate == pytest.approx(0.008)
    rule = EpochPlateau(0.5, 2, relative=False)
    assert [rule.update(v) for v in (3.0, 2.0, 1.8, 1.7)] == [False, False, False, True]


def test_run_epochs_keeps_the_monitors_best_check():
    params = {"w": np.zeros(1)}
    scores = iter([0.5, 0.2, 0.9, 0.4, 0.3, 0.1])

    class Monitor:  # the EarlyStopping protocol: update() says stop, best_params is kept
        losses, best_params, best = [], None, -1.0

        def update(self, it, prm):
            score = next(scores)
            self.losses.append(-score)
            if score > self.best:
                self.best, self.best_params, self.at = score, {"w": prm["w"].copy()}, it
            return it - self.at >= 2

    def epoch():
        params["w"] += 1.0
        return float(params["w"][0])

    mon = Monitor()
    mon.update(0, params)  # the start: check 0
    run = run_epochs(epoch, EpochPlateau(0.0, 2, relative=False), 10, monitor=mon,
                     params=params)
    assert run.converged and run.n_epochs == 4 and run.val_curve == [-0.2, -0.9, -0.4, -0.3]
    assert run.best_params["w"][0] == 2.0  # the parameters after epoch 2, copied
    run = run_epochs(lambda: 1.0, EpochPlateau(0.0, 5, relative=False), 3)
    assert not run.converged and run.curve == [1.0, 1.0, 1.0] and run.best_params is None


def test_used_pairs_drops_unused_rows_and_keeps_a_shared_sample_set():
    X = np.arange(12.0).reshape(6, 2)
    tied = used_pairs(PairData(X, X, np.array([4, 1]), np.array([1, 5])), tied=True)
    assert tied.X is tied.Y
    np.testing.assert_array_equal(tied.X, X[[1, 4, 5]])
    np.testing.assert_array_equal(tied.X[tied.ix], X[[4, 1]])
    np.testing.assert_array_equal(tied.X[tied.iy], X[[1, 5]])
    cross = used_pairs(PairData(X, X[:3], np.array([5, 0]), np.array([2, 2])), tied=False)
    np.testing.assert_array_equal(cross.X, X[[0, 5]])
    np.testing.assert_array_equal(cross.Y, X[[2]])
    # the canonical pairs of the base use every row already: nothing to drop
    canon = canonical_pairs(PairData(X, X, np.array([4, 1]), np.array([1, 5])), tied=True)
    again = used_pairs(canon, tied=True)
    assert again.X is canon.X
    np.testing.assert_array_equal(again.ix, canon.ix)


def test_the_early_stopping_split_holds_only_the_samples_of_its_pairs():
    from crossmetric import PCCA
    from crossmetric.pairs import make_pairs

    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(10), 6)
    X = rng.normal(size=(60, 3))
    pairs, y = make_pairs(labels, n_negatives=3, random_state=0)
    data = canonical_pairs(PairData(X, X, pairs[:, 0], pairs[:, 1]), tied=True)
    model = PCCA(early_stopping=True, validation_fraction=0.3, random_state=0)
    train, y_train, validation = split_pairs(model, data, y)
    val = validation.data
    for part in (train, val):
        assert part.X is part.Y
    assert np.array_equal(np.unique(np.r_[train.ix, train.iy]), np.arange(len(train.X)))
    # no sample on both sides; every held-out sample has its identity
    rows = {tuple(r) for r in train.X} & {tuple(r) for r in val.X}
    assert not rows and len(y_train) == len(train.ix)
    assert validation.tied and len(validation.ids_x) == len(val.X)


def test_identity_start_is_the_first_coordinates_and_refuses_kernel_towers():
    from crossmetric._solvers.starting import initial_weights

    rng = np.random.RandomState(0)
    Phi = rng.randn(20, 5)
    np.testing.assert_array_equal(initial_weights(Phi, 3, "identity", rng, False), np.eye(3, 5))
    W = initial_weights(Phi, 7, "identity", rng, False)   # more rows than features
    np.testing.assert_array_equal(W[:5], np.eye(5))
    assert np.abs(W[5:]).max() < 1e-2
    with pytest.raises(ValueError, match="init='identity' needs linear towers"):
        initial_weights(Phi @ Phi.T, 3, "identity", rng, True)


def test_cmml_identity_start_is_the_first_coordinates_of_both_views(monkeypatch):
    import warnings

    from crossmetric import CMML, make_pairs
    from crossmetric._solvers import towers
    from crossmetric.datasets import make_cross_modal

    b = make_cross_modal(n_samples=120, n_classes=60, n_features_x=10, n_features_y=10,
                         random_state=0)
    pairs, y = make_pairs(b.labels, b.labels, n_negatives=3, random_state=0)
    seen, real = {}, towers.solve

    def spy(problem, W0, **kw):
        seen["W0"] = [w.copy() for w in W0]
        return real(problem, W0, **kw)

    monkeypatch.setattr(towers, "solve", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        CMML(n_components=4, init="identity", max_iter=2, random_state=0,
             preprocessor=(b.X, b.Y)).fit(pairs, y)
    for W in seen["W0"]:   # each tower a positive multiple of the first 4 coordinates
        assert W[0, 0] > 0
        np.testing.assert_allclose(W / W[0, 0], np.eye(4, 10), atol=1e-12)
    with pytest.raises(ValueError, match="init='identity' needs linear towers"):
        CMML(n_components=4, kernel="rbf", init="identity",
             preprocessor=(b.X, b.Y)).fit(pairs, y)
