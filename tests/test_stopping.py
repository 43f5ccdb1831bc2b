"""The one module of plateau rules: CML-AUC's rule and the full-batch solvers'
are one class, checked against the rules as they were written out before."""

import numpy as np
import pytest

from crossmetric._solvers.stopping import BestPlateau


def _old_solver_rule(values, tol, window):
    """The former ``descent._Plateau``, written out: first update that stops, or None."""
    best = []
    for t, loss in enumerate(values):
        b = min(loss, best[-1]) if best else loss
        best.append(b)
        if len(best) > window and best[-1 - window] - b <= window * tol * max(abs(b), 1e-300):
            return t
    return None


def _old_auc_rule(objectives, tol, k):
    """CML-AUC's former inline rule on its evaluations (entry 0: the starting point): the
    best value kept by ``obj < best``, stop when it fell by less than ``tol · |best|`` over
    the last ``k`` evaluations. Returns the evaluation that stops, or None."""
    best_obj = objectives[0]
    best_curve = [best_obj]
    for t, obj in enumerate(objectives[1:], start=1):
        if obj < best_obj:
            best_obj = obj
        best_curve.append(best_obj)
        if len(best_curve) > k and best_curve[-k - 1] - best_obj <= tol * abs(best_obj):
            return t
    return None


def _auc_through_rule(objectives, tol, k):
    """The same loop as auc.py now runs it: its own best value, fed to BestPlateau."""
    best_obj = objectives[0]
    rule = BestPlateau(tol, k, per_update=False, floor=0.0)
    rule.update(best_obj)
    for t, obj in enumerate(objectives[1:], start=1):
        if obj < best_obj:
            best_obj = obj
        if rule.update(best_obj):
            return t
    return None


def _curves(rng):
    """Decreasing, noisy, flat, zero-crossing and NaN-holding objective curves."""
    yield 10.0 * 0.9 ** np.arange(80)
    yield 1.0 + 0.05 * rng.rand(60)
    yield np.r_[np.linspace(3, 1, 20), np.ones(20)]
    yield np.r_[np.linspace(1, 0, 15), np.zeros(10), -np.linspace(0, 1e-3, 10)]
    yield np.r_[5.0, 4.0, np.nan, 3.0, 2.9, np.nan, 2.89, 2.889, 2.8889, 2.8889, 2.8889]
    yield np.r_[np.nan, 1.0, 0.5, 0.5]
    yield np.round(np.cumsum(rng.randn(50)), 1)  # ties and rises


@pytest.mark.parametrize("tol, window", [(1e-3, 1), (1e-3, 3), (1e-2, 5), (0.0, 2)])
def test_best_plateau_is_the_former_rules(tol, window):
    rng = np.random.RandomState(0)
    for curve in _curves(rng):
        values = [float(v) for v in curve]
        rule = BestPlateau(tol, window)
        new = next((t for t, v in enumerate(values) if rule.update(v)), None)
        assert new == _old_solver_rule(values, tol, window)
        assert _auc_through_rule(values, tol, window) == _old_auc_rule(values, tol, window)


def test_the_window_and_the_floor_change_the_threshold():
    values = [1.0, 1.0, 1.0 - 1.5e-3]
    # per update: 1.5e-3 over 2 updates of the best is below 2 · 1e-3 -- stops
    rule = BestPlateau(1e-3, 2)
    assert [rule.update(v) for v in values] == [False, False, True]
    # over the window: 1.5e-3 is above 1e-3 · |best| -- goes on
    rule = BestPlateau(1e-3, 2, per_update=False)
    assert [rule.update(v) for v in values[:2]] == [False, False]
    assert not rule.update(values[2])
    # a zero best: the floor makes no difference unless the best stops falling
    for floor in (0.0, 1e-300):
        rule = BestPlateau(1e-3, 1, floor=floor)
        assert [rule.update(v) for v in (1.0, 0.0, 0.0)] == [False, False, True]


def test_cml_auc_stops_through_the_rule(monkeypatch):
    """CML-AUC's fit asks BestPlateau (over the window, no floor) whether to stop."""
    from crossmetric import CMLAUC, make_pairs
    from crossmetric.datasets import make_cross_modal
    from crossmetric.learners import auc

    made = []

    class Spy(BestPlateau):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(auc, "BestPlateau", Spy)
    d = make_cross_modal(80, n_classes=4, random_state=0)
    pairs, y = make_pairs(d.labels, d.labels, max_positives=100, random_state=0)
    m = CMLAUC(4, max_iter=200, tol=1e-3, n_iter_no_change=4, random_state=0,
               preprocessor=(d.X, d.Y)).fit(pairs, y)
    (rule,) = made
    assert (rule.window, rule.per_update, rule.floor) == (4, False, 0.0)
    assert len(rule.best) == len(m.loss_curve_) == m.n_iter_ + 1 < 201
    assert rule.best == list(np.minimum.accumulate(m.loss_curve_))
