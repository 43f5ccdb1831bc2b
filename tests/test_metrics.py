"""Every measure against a brute-force or scikit-learn reference on random data."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from crossmetric import metrics as M


def _pairs(rng, n=200, pos=0.4, sep=1.0, ties=False):
    y = np.where(rng.random(n) < pos, 1, -1)
    y[:2] = [1, -1]
    s = rng.standard_normal(n) + sep * (y == 1)
    if ties:
        s = np.round(s * 2) / 2
    return y, s


# ------------------------------------------------------------------------ verification
@pytest.mark.parametrize("ties", [False, True])
def test_roc_auc_matches_bruteforce(ties):
    rng = np.random.default_rng(0)
    y, s = _pairs(rng, ties=ties)
    sp, sn = s[y == 1], s[y == -1]
    brute = np.mean((sp[:, None] > sn[None]) + 0.5 * (sp[:, None] == sn[None]))
    assert M.roc_auc(y, s) == pytest.approx(brute)
    assert M.partial_auc(y, s, (0.0, 1.0)) == pytest.approx(brute)


def _pauc_eq4(y, s, a, b):
    """CML-AUC Eq. (4): positives against the negatives ranked in (a·n⁻, b·n⁻]."""
    sp, sn = s[y == 1], np.sort(s[y == -1])[::-1]  # hardest negatives first
    n_neg = sn.size
    ja, jb = int(round(a * n_neg)), int(round(b * n_neg))
    sn = sn[ja:jb]
    return np.mean((sp[:, None] > sn[None]) + 0.5 * (sp[:, None] == sn[None]))


@pytest.mark.parametrize("window", [(0.0, 0.1), (0.1, 0.3), (0.25, 1.0)])
def test_partial_auc_equals_eq4_on_a_window(window):
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(70, int), -np.ones(100, int)]  # 100 negatives: window bounds whole
    s = rng.standard_normal(170) + 0.8 * (y == 1)
    assert M.partial_auc(y, s, window) == pytest.approx(_pauc_eq4(y, s, *window))
    a, b = window
    raw = M.partial_auc(y, s, window, normalize="none")
    assert raw == pytest.approx(_pauc_eq4(y, s, a, b) * (b - a))


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n", [7, 60, 500])
def test_partial_auc_mcclish_matches_sklearn(n, ties):
    """McClish-standardised pAUC over [0, β] is scikit-learn's ``roc_auc_score(max_fpr=β)``,
    with tied scores, few negatives (partial ROC strips) and β = 1 (the plain AUC)."""
    rng = np.random.default_rng(2 + n)
    y, s = _pairs(rng, n=n, ties=ties)
    for beta in (0.01, 0.05, 0.1, 0.37, 0.5, 0.999, 1.0):
        ref = roc_auc_score(y, s, max_fpr=beta)
        got = M.partial_auc(y, s, (0.0, beta), normalize="mcclish")
        assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_partial_auc_bad_range():
    y, s = np.array([1, -1]), np.array([1.0, 0.0])
    for bad in [(0.2, 0.1), (-0.1, 0.5), (0.0, 1.5), 0.3]:
        with pytest.raises(ValueError, match="fpr_range"):
            M.partial_auc(y, s, bad)
    with pytest.raises(ValueError, match="normalize"):
        M.partial_auc(y, s, (0, 0.1), normalize="x")


def _eer_bruteforce(y, s):
    """Intersect every ROC segment with TPR = 1 - FPR by solving the 2x2 system."""
    sp, sn = s[y == 1], s[y == -1]
    thr = np.r_[np.inf, np.unique(s)[::-1]]
    pts = [(np.mean(sn >= t), np.mean(sp >= t)) for t in thr]
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:], strict=True):
        # point p(t) = (x0 + t dx, y0 + t dy), need x + y = 1
        denom = (x1 - x0) + (y1 - y0)
        if denom == 0:
            continue
        t = (1 - x0 - y0) / denom
        if 0 <= t <= 1:
            return x0 + t * (x1 - x0)
    raise AssertionError


@pytest.mark.parametrize("ties", [False, True])
def test_eer_interpolates_linearly(ties):
    rng = np.random.default_rng(3)
    for _ in range(5):
        y, s = _pairs(rng, n=60, ties=ties)
        assert M.eer(y, s) == pytest.approx(_eer_bruteforce(y, s))
        assert M.one_minus_eer(y, s) == pytest.approx(1 - _eer_bruteforce(y, s))


def test_eer_hand_example():
    # ROC points (0,0), (0,.5), (.5,.5), (.5,1), (1,1): crossing x+y=1 on (0,.5)-(.5,.5)
    y = np.array([1, -1, 1, -1])
    s = np.array([4.0, 3.0, 2.0, 1.0])
    assert M.eer(y, s) == pytest.approx(0.5)
    # perfect separation
    assert M.eer([1, 1, -1], [3.0, 2.0, 1.0]) == 0.0
    # all tied: the diagonal crosses at 0.5
    assert M.eer([1, -1, 1, -1], [1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.5)


def test_verification_rate_bruteforce():
    rng = np.random.default_rng(4)
    y, s = _pairs(rng, n=3000, ties=True)
    sp, sn = s[y == 1], s[y == -1]
    for target in (1e-3, 0.01, 0.1, 0.5):
        best = 0.0
        for t in np.r_[np.inf, np.unique(s)]:
            if np.mean(sn >= t) <= target:
                best = max(best, np.mean(sp >= t))
        assert M.verification_rate(y, s, target) == pytest.approx(best)
    with pytest.raises(ValueError, match="fpr"):
        M.verification_rate(y, s, 2.0)


def test_accuracy_at_median():
    rng = np.random.default_rng(5)
    y, s = _pairs(rng, n=101, pos=0.5)
    d = -s
    med = np.median(d)
    brute = np.mean([(0.5 if di == med else float((di < med) == (yi == 1)))
                     for di, yi in zip(d, y, strict=True)])
    assert M.accuracy_at_median(y, d) == pytest.approx(brute)
    assert M.accuracy_at_median([1, 1, -1, -1], [0.0, 1.0, 2.0, 3.0]) == 1.0
    assert M.accuracy_at_median([-1, -1, 1, 1], [0.0, 1.0, 2.0, 3.0]) == 0.0


def test_verification_input_errors():
    with pytest.raises(ValueError, match="both"):
        M.roc_auc([1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"\+1"):
        M.roc_auc([0, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        M.eer([1, -1], [np.nan, 0.2])
    with pytest.raises(ValueError, match="same length"):
        M.roc_auc([1, -1, 1], [0.1, 0.2])


def test_verification_report_keys():
    rng = np.random.default_rng(6)
    y, s = _pairs(rng)
    rep = M.verification_report(y, s)
    assert set(rep) == {"auc", "one_minus_eer", "vr", "pauc", "acc_median"}
    assert rep["auc"] == pytest.approx(roc_auc_score(y, s))


# ---------------------------------------------------------------------- identification
def _orders(d, rel, ties):
    """Every gallery order of one row that the tie convention allows (equal weight each)."""
    if ties == "optimistic":
        return [np.lexsort((~rel, d))]
    if ties == "pessimistic":
        return [np.lexsort((rel, d))]
    # every order of the items inside each group of equal distance (a uniform random order
    # of the tied items), groups in increasing distance
    groups = [np.flatnonzero(d == v) for v in np.unique(d)]
    return [np.concatenate(c) for c in itertools.product(
        *[[np.array(p) for p in itertools.permutations(g)] for g in groups])]


def _bruteforce_row(d, rel, ties, n_max):
    """Mean over the allowed orders of (hit at rank <= r for r = 1..n_max, AP, NN hit)."""
    hits, aps, nn = [], [], []
    for order in _orders(d, rel, ties):
        r = rel[order]
        first = int(np.argmax(r)) + 1 if r.any() else 10**9
        hits.append([first <= k for k in range(1, n_max + 1)])
        if r.any():
            aps.append(np.sum((np.cumsum(r) / np.arange(1, r.size + 1))[r]) / r.sum())
        nn.append(r[0])
    return np.mean(hits, axis=0), (np.mean(aps) if aps else np.nan), np.mean(nn)


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "optimistic"])
@pytest.mark.parametrize("block_rows", [None, 1, 7])
def test_rank_measures_with_ties_match_bruteforce_orders(ties, block_rows):
    rng = np.random.default_rng(7)
    D = rng.integers(0, 3, size=(25, 6)).astype(float)  # many ties; 6! orders per row
    pl = rng.integers(0, 4, 25)
    gl = rng.integers(0, 4, 6)
    rows = [_bruteforce_row(D[i], gl == pl[i], ties, 6) for i in range(25)]
    ref_cmc = np.mean([h for h, _, _ in rows], axis=0)
    curve = M.cmc(D, pl, gl, block_rows=block_rows, ties=ties)
    np.testing.assert_allclose(curve, ref_cmc, atol=1e-12)
    assert M.rank_accuracy(D, pl, gl, rank=3, block_rows=block_rows,
                           ties=ties) == pytest.approx(ref_cmc[2])
    assert M.cmc(D, pl, gl, max_rank=2, ties=ties) == pytest.approx(ref_cmc[:2])
    for n in (1, 2, 4):
        assert M.one_call_at_n(D, pl, gl, n, block_rows=block_rows,
                               ties=ties) == pytest.approx(ref_cmc[n - 1])
    ap = np.array([a for _, a, _ in rows])
    got = M.average_precision_per_query(D, pl, gl, block_rows=block_rows, ties=ties)
    np.testing.assert_allclose(got, ap, atol=1e-12)
    assert M.mean_average_precision(D, pl, gl, ties=ties) == pytest.approx(np.nanmean(ap))
    nn = np.mean([h for _, _, h in rows])
    assert M.nearest_neighbor_accuracy(D, pl, gl, block_rows=block_rows,
                                       ties=ties) == pytest.approx(nn)


def test_collapsed_model_scores_chance():
    """Issue 10 item 11: all distances equal -> chance, not 1.0 (ties used to count as wins)."""
    n = 50
    D = np.zeros((n, n))
    ids = np.arange(n)
    assert M.cmc(D, ids, ids)[0] == pytest.approx(1 / n)
    np.testing.assert_allclose(M.cmc(D, ids, ids), np.arange(1, n + 1) / n)
    assert M.rank_accuracy(D, ids, ids, rank=5) == pytest.approx(5 / n)
    assert M.one_call_at_n(D, ids, ids, 1) == pytest.approx(1 / n)
    assert M.nearest_neighbor_accuracy(D, ids, ids) == pytest.approx(1 / n)
    # one relevant item at a uniformly random place: E[AP] = mean of 1/k = H_n / n
    assert M.mean_average_precision(D, ids, ids) == pytest.approx(
        np.sum(1 / np.arange(1, n + 1)) / n)
    # class labels, 5 classes of 10: 1-call@1 = 1/5; pessimistic gives 0, optimistic 1
    lab = np.repeat(np.arange(5), 10)
    assert M.one_call_at_n(D, lab, lab, 1) == pytest.approx(0.2)
    assert M.one_call_at_n(D, lab, lab, 1, ties="pessimistic") == 0.0
    assert M.one_call_at_n(D, lab, lab, 1, ties="optimistic") == 1.0
    # leaving the query out: 9 relevant among 49
    assert M.one_call_at_n(D, lab, lab, 1, same_set=True) == pytest.approx(9 / 49)
    # identification_report on a collapsed embedding
    F = np.ones((n, 3))
    rep = M.identification_report(F, F, ids, ids, ranks=(1, 5))
    assert rep["rank1"] == pytest.approx(1 / n) and rep["rank5"] == pytest.approx(5 / n)
    assert rep["nn_accuracy"] == pytest.approx(1 / n)
    with pytest.raises(ValueError, match="ties"):
        M.cmc(D, ids, ids, ties="random")


def test_cmc_tie_convention_hand_example():
    # probe 0: true match tied with an impostor at distance 1
    D = np.array([[1.0, 1.0, 3.0]])
    assert M.cmc(D, [0], [1, 0, 2])[0] == 0.5
    assert M.cmc(D, [0], [1, 0, 2], ties="optimistic")[0] == 1.0
    assert M.cmc(D, [0], [1, 0, 2], ties="pessimistic")[0] == 0.0
    assert M.nearest_neighbor_accuracy(D, [0], [1, 0, 2]) == 0.5
    assert M.nearest_neighbor_accuracy(D, [1], [1, 0, 2], ties="pessimistic") == 0.0
    assert M.nearest_neighbor_accuracy(D, [1], [1, 0, 2], ties="optimistic") == 1.0


def test_cmc_large_tied_block_chunks():
    # the expected-rank histogram is built in chunks; compare with the closed form
    n = 3000
    D = np.zeros((4, n))
    lab = np.arange(n)
    curve = M.cmc(D, lab[:4], lab)
    np.testing.assert_allclose(curve, np.arange(1, n + 1) / n)


def test_nearest_neighbor_accuracy_bruteforce():
    rng = np.random.default_rng(8)
    D = rng.random((50, 20))
    pl, gl = rng.integers(0, 5, 50), rng.integers(0, 5, 20)
    ref = np.mean(gl[D.argmin(1)] == pl)
    assert M.nearest_neighbor_accuracy(D, pl, gl, block_rows=3) == pytest.approx(ref)


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "optimistic"])
def test_map_without_ties_equals_mean_of_sklearn_average_precision(ties):
    rng = np.random.default_rng(9)
    D = rng.random((30, 25))
    ql, dl = rng.integers(0, 4, 30), rng.integers(0, 4, 25)
    per = [average_precision_score(dl == ql[i], -D[i]) for i in range(30) if (dl == ql[i]).any()]
    assert M.mean_average_precision(D, ql, dl, block_rows=4,
                                    ties=ties) == pytest.approx(np.mean(per))


@pytest.mark.parametrize("ties", [False, True])
def test_map_same_set_excludes_the_query(ties):
    rng = np.random.default_rng(10)
    F = rng.standard_normal((9, 3))
    D = ((F[:, None] - F[None]) ** 2).sum(-1)
    if ties:
        D = np.round(D / 3)
    lab = rng.integers(0, 3, 9)
    per = []
    for i in range(9):
        keep = np.arange(9) != i
        rel = lab[keep] == lab[i]
        if rel.any():
            per.append(_bruteforce_row(D[i, keep], rel, "expected", 1)[1])
    assert M.mean_average_precision(D, lab, lab, same_set=True) == pytest.approx(np.mean(per))
    # without exclusion the query finds itself first: a higher score
    assert M.mean_average_precision(D, lab, lab) > np.mean(per)
    with pytest.raises(ValueError, match="square"):
        M.mean_average_precision(D[:, :5], lab, lab[:5], same_set=True)


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "optimistic"])
def test_one_call_at_n_same_set_bruteforce(ties):
    rng = np.random.default_rng(11)
    D = rng.integers(0, 3, (8, 8)).astype(float)
    lab = rng.integers(0, 3, 8)
    for n in (1, 3):
        hits = []
        for i in range(8):
            keep = np.arange(8) != i
            d, rel = D[i, keep], lab[keep] == lab[i]
            hits.append(_bruteforce_row(d, rel, ties, n)[0][n - 1])
        assert M.one_call_at_n(D, lab, lab, n, same_set=True,
                               ties=ties) == pytest.approx(np.mean(hits))


def test_identification_report_matches_matrix_functions():
    rng = np.random.default_rng(12)
    FX, FY = rng.standard_normal((60, 4)), rng.standard_normal((45, 4))
    pl, gl = rng.integers(0, 9, 60), rng.integers(0, 9, 45)
    D = ((FX[:, None] - FY[None]) ** 2).sum(-1)
    rep = M.identification_report(FX, FY, pl, gl, max_rank=10, ranks=(1, 5), block_rows=7)
    np.testing.assert_allclose(rep["cmc"], M.cmc(D, pl, gl, 10))
    assert rep["rank5"] == pytest.approx(M.rank_accuracy(D, pl, gl, 5))
    assert rep["map"] == pytest.approx(M.mean_average_precision(D, pl, gl))
    assert rep["nn_accuracy"] == pytest.approx(M.nearest_neighbor_accuracy(D, pl, gl))
    rep2 = M.identification_report(FX, FY, pl, gl, metric="neg_dot", max_rank=5)
    np.testing.assert_allclose(rep2["cmc"], M.cmc(-FX @ FY.T, pl, gl, 5))


def test_identification_input_errors():
    D = np.zeros((3, 4))
    with pytest.raises(ValueError, match="probe_labels"):
        M.cmc(D, [0, 1], [0, 1, 2, 3])
    with pytest.raises(ValueError, match="gallery_labels"):
        M.cmc(D, [0, 1, 2], [0, 1])
    with pytest.raises(ValueError, match="2-D"):
        M.cmc(np.zeros(3), [0, 1, 2], [0])
    with pytest.raises(ValueError, match="NaN"):
        M.cmc(np.full((1, 1), np.nan), [0], [0])
    with pytest.raises(ValueError, match="max_rank"):
        M.cmc(D, [0, 1, 2], [0, 1, 2, 3], max_rank=0)
    with pytest.raises(ValueError, match="relevant"):
        M.mean_average_precision(D, [0, 0, 0], [1, 1, 1, 1])


# ------------------------------------------------------------ accuracy calculator (issue 11)
def _knn_accuracy_slow(Q, R, ql, rl, same_set):
    """One query at a time, with the full distance row: the obvious version."""
    out = {"precision_at_1": [], "r_precision": [], "map_at_r": [], "mean_average_precision": []}
    for i in range(Q.shape[0]):
        d = ((R - Q[i]) ** 2).sum(1)
        idx = [j for j in np.argsort(d, kind="stable") if not (same_set and j == i)]
        rel = np.array([rl[j] == ql[i] for j in idx])
        n_rel = int(rel.sum())
        if n_rel == 0:
            continue
        prec = np.cumsum(rel) / np.arange(1, rel.size + 1)
        out["precision_at_1"].append(float(rel[0]))
        out["r_precision"].append(rel[:n_rel].mean())
        out["map_at_r"].append(float((prec[:n_rel] * rel[:n_rel]).sum() / n_rel))
        out["mean_average_precision"].append(float((prec * rel).sum() / n_rel))
    return {k: float(np.mean(v)) for k, v in out.items()}


@pytest.mark.parametrize("same_set", [False, True])
def test_knn_accuracy_matches_slow_version_blockwise(same_set):
    from crossmetric.metrics import knn_accuracy

    rng = np.random.default_rng(0)
    Q = rng.standard_normal((37, 3))
    ql = rng.integers(0, 5, 37)
    if same_set:
        R, rl = Q, ql
    else:
        R, rl = rng.standard_normal((41, 3)), rng.integers(0, 6, 41)
    want = _knn_accuracy_slow(Q, R, ql, rl, same_set)
    for block in (None, 1, 7):
        got = knn_accuracy(Q, R, ql, rl, same_set=same_set, block_rows=block)
        for k, v in want.items():
            assert got[k] == pytest.approx(v, rel=1e-12), (k, block)
    # agrees with the distance-matrix functions (continuous distances: no ties)
    D = ((Q[:, None, :] - R[None]) ** 2).sum(-1)
    got = knn_accuracy(Q, R, ql, rl, same_set=same_set)
    assert got["mean_average_precision"] == pytest.approx(
        M.mean_average_precision(D, ql, rl, same_set=same_set), rel=1e-12)
    if not same_set:
        keep = np.isin(ql, rl)
        assert got["precision_at_1"] == pytest.approx(
            M.nearest_neighbor_accuracy(D[keep], ql[keep], rl), rel=1e-12)


def test_knn_accuracy_errors():
    from crossmetric.metrics import knn_accuracy

    with pytest.raises(ValueError, match="columns"):
        knn_accuracy(np.zeros((2, 2)), np.zeros((2, 3)), [0, 1], [0, 1])
    with pytest.raises(ValueError, match="no query"):
        knn_accuracy(np.zeros((2, 2)), np.ones((2, 2)), [0, 1], [2, 3])
    with pytest.raises(ValueError, match="same_set"):
        knn_accuracy(np.zeros((2, 2)), np.ones((3, 2)), [0, 1], [0, 1, 1], same_set=True)
