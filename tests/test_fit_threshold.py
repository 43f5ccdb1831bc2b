"""``threshold_`` after ``fit`` generalises when the training pairs are separable."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from crossmetric import CMML, LDML, PCCA, Euclidean
from crossmetric.datasets import load_digits_views
from crossmetric.learners._threshold import best_threshold
from crossmetric.pairs import make_pairs


def test_cmml_threshold_is_the_loss_threshold_and_generalises():
    """Kernel CMML separates digits instance pairs of 300 training objects; the mid-gap cut
    (the old rule) is far above 1 and loses held-out accuracy."""
    d = load_digits_views()
    X = d.X / d.X.sum(1, keepdims=True)
    Y = d.Y / d.Y.sum(1, keepdims=True)
    tr, te = np.arange(300), np.arange(300, 600)
    ptr, ytr = make_pairs(d.instance[tr], d.instance[tr], random_state=0)
    pte, yte = make_pairs(d.instance[te], d.instance[te], random_state=1)
    ptr, pte = np.c_[tr[ptr[:, 0]], tr[ptr[:, 1]]], np.c_[te[pte[:, 0]], te[pte[:, 1]]]
    m = CMML(20, kernel="chi2_rbf", random_state=0, early_stopping=False,
             preprocessor=(X, Y)).fit(ptr, ytr)
    dtr = m.pair_distance(ptr)
    assert dtr[ytr == 1].max() < dtr[ytr == -1].min()  # separable
    assert m.threshold_ == 1.0
    mid_gap = best_threshold(dtr, ytr, "accuracy")
    acc = np.mean(m.predict(pte) == yte)
    acc_mid = np.mean(np.where(m.pair_distance(pte) <= mid_gap, 1, -1) == yte)
    assert acc >= acc_mid + 0.01


def test_pcca_threshold_is_one(small_pairs):
    X, pairs, y = small_pairs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = PCCA(2, max_iter=20, random_state=0, preprocessor=X).fit(pairs, y)
    assert m.threshold_ == 1.0


def test_ldml_uses_its_bias_on_separable_pairs():
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(4), 6)
    X = np.eye(4)[labels] * 5 + 0.01 * rng.rand(24, 4)
    pairs, y = make_pairs(labels, random_state=0)
    m = LDML(2, preprocessor=X, random_state=0).fit(pairs, y)
    d = m.pair_distance(pairs)
    assert d[y == 1].max() <= m.bias_ < d[y == -1].min()
    assert m.threshold_ == pytest.approx(m.bias_)


def test_learners_without_own_threshold_keep_the_accuracy_cut(small_pairs):
    X, pairs, y = small_pairs
    m = Euclidean(preprocessor=X).fit(pairs, y)
    assert m.threshold_ == best_threshold(m.pair_distance(pairs), y, "accuracy")
