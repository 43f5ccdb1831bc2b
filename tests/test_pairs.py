import numpy as np
import pytest

from crossmetric.pairs import make_pairs


def test_single_modal_all_positives_and_balanced_negatives():
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    pairs, y = make_pairs(labels, n_negatives=2, random_state=0)
    pos = pairs[y == 1]
    # all i<j same-label pairs: 3 + 1 + 6
    assert len(pos) == 10
    assert np.all(labels[pos[:, 0]] == labels[pos[:, 1]])
    assert np.all(pos[:, 0] != pos[:, 1])
    neg = pairs[y == -1]
    assert len(neg) == 20
    assert np.all(labels[neg[:, 0]] != labels[neg[:, 1]])
    key = np.sort(pairs, axis=1)
    assert len(np.unique(key, axis=0)) == len(pairs)  # no duplicates, also (i,j)~(j,i)


def test_cross_modal_positives_include_same_row_and_cap():
    lx = np.array([0, 1, 2, 0])
    ly = np.array([0, 1, 2, 2, 1])
    pairs, y = make_pairs(lx, ly, random_state=0)
    pos = {tuple(p) for p in pairs[y == 1]}
    assert pos == {(0, 0), (3, 0), (1, 1), (1, 4), (2, 2), (2, 3)}
    assert np.all(lx[pairs[y == -1, 0]] != ly[pairs[y == -1, 1]])
    capped, yc = make_pairs(lx, ly, max_positives=3, random_state=0)
    assert (yc == 1).sum() == 3 and (yc == -1).sum() == 3


def test_deterministic_and_seed_dependent():
    labels = np.repeat(np.arange(5), 8)
    a = make_pairs(labels, n_negatives=3, random_state=1)
    b = make_pairs(labels, n_negatives=3, random_state=1)
    c = make_pairs(labels, n_negatives=3, random_state=2)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_negatives_anchor_on_positive_first_sample():
    labels = np.repeat(np.arange(20), 2)
    pairs, y = make_pairs(labels, n_negatives=1, random_state=0)
    assert set(pairs[y == -1, 0]) <= set(np.arange(40))
    assert (y == -1).sum() == (y == 1).sum() == 20


@pytest.mark.parametrize("kwargs, match", [
    (dict(labels_x=np.arange(5)), "no positive pair"),
    (dict(labels_x=np.zeros((3, 2))), "labels_x must be a 1-D"),
    (dict(labels_x=np.array([0, 0, 1]), n_negatives=5), "distinct negative pairs"),
    (dict(labels_x=np.array([0, 0, 1]), n_negatives=-1), "n_negatives"),
])
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_pairs(**kwargs)
