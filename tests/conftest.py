"""Shared fixtures: small real data (scikit-learn digits) and synthetic pairs."""

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from crossmetric.pairs import make_pairs

MFEAT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mfeat"


@pytest.fixture(scope="session", autouse=True)
def _single_threaded():
    """Tests use small matrices: one BLAS / OpenMP thread is faster and immune to a busy
    machine (no oversubscription)."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def digits():
    d = load_digits()
    return d.data / 16.0, d.target


@pytest.fixture(scope="session")
def digit_split(digits):
    """Disjoint train / test samples of digits and their pairs (index form)."""
    X, labels = digits
    rng = np.random.RandomState(0)
    perm = rng.permutation(len(X))
    tr, te = perm[:900], perm[900:]
    ptr, ytr = make_pairs(labels[tr], max_positives=1000, random_state=0)
    pte, yte = make_pairs(labels[te], max_positives=1000, random_state=1)
    return X, tr[ptr], ytr, te[pte], yte


@pytest.fixture
def small_pairs():
    """Tiny single-modal problem: 30 samples, 5 features, 3 classes."""
    rng = np.random.RandomState(42)
    labels = np.repeat(np.arange(3), 10)
    X = rng.rand(30, 5) + labels[:, None] * 0.3
    pairs, y = make_pairs(labels, max_positives=40, random_state=0)
    return X, pairs, y


@pytest.fixture(scope="module")
def data():
    """Cross-modal problem for every-learner tests: X (48 × 6), Y (48 × 5), 6 identities."""
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(6), 8)
    Z = rng.rand(6, 4)[labels]
    X = np.abs(Z @ rng.rand(4, 6) + 0.1 * rng.rand(48, 6))
    Y = np.abs(Z @ rng.rand(4, 5) + 0.1 * rng.rand(48, 5))
    pairs, y = make_pairs(labels, labels, max_positives=120, random_state=0)
    return X, Y, pairs, y


@pytest.fixture
def small_cross():
    """Tiny cross-modal problem: X (20 × 4), Y (20 × 6), 4 identities."""
    rng = np.random.RandomState(7)
    labels = np.repeat(np.arange(4), 5)
    Z = rng.rand(4, 3)[labels]
    X = np.abs(Z @ rng.rand(3, 4) + 0.05 * rng.rand(20, 4))
    Y = np.abs(Z @ rng.rand(3, 6) + 0.05 * rng.rand(20, 6))
    pairs, y = make_pairs(labels, labels, max_positives=40, random_state=0)
    return X, Y, pairs, y
