"""Every measure against a brute-force or scikit-learn reference on random data."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from crossmetric import metrics as M
from crossmetric.metrics import _counts


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


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n", [2, 7, 5000])
def test_roc_auc_equals_scikit_learn(n, ties):
    """The rank statistic is scikit-learn's trapezoidal area, ties and a large set included."""
    rng = np.random.default_rng(n)
    y, s = _pairs(rng, n=n, ties=ties)
    assert M.roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), rel=1e-12, abs=1e-15)
    assert M.roc_auc(y, np.zeros(n)) == 0.5


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
    """All distances equal -> chance, not 1.0 (ties used to count as wins)."""
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


# ------------------------------------------------------------ accuracy calculator
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
    from crossmetric.metrics.knn import knn_accuracy

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
    from crossmetric.metrics.knn import knn_accuracy

    with pytest.raises(ValueError, match="columns"):
        knn_accuracy(np.zeros((2, 2)), np.zeros((2, 3)), [0, 1], [0, 1])
    with pytest.raises(ValueError, match="no query"):
        knn_accuracy(np.zeros((2, 2)), np.ones((2, 2)), [0, 1], [2, 3])
    with pytest.raises(ValueError, match="same_set"):
        knn_accuracy(np.zeros((2, 2)), np.ones((3, 2)), [0, 1], [0, 1, 1], same_set=True)


# ------------------------------------------- counting fast path vs the sorting version
# The slow obvious version: the earlier implementation, copied verbatim (a boolean
# match matrix per block, a masked minimum for the ranks, one np.unique + two searchsorted per
# row for the average precision, a stable argsort of every row for knn_accuracy).
def _slow_rank_stats(D, pc, gc, self_cols):
    if not np.isfinite(D).all():
        raise ValueError("distance contains NaN or infinity.")
    D = D.astype(np.float64, copy=True) if self_cols is not None else D
    if self_cols is not None:
        D[np.arange(D.shape[0]), self_cols] = np.inf
    match = gc[None, :] == pc[:, None]
    if self_cols is not None:
        match[np.arange(D.shape[0]), self_cols] = False
    best = np.min(np.where(match, D, np.inf), axis=1)
    closer = np.count_nonzero(D < best[:, None], axis=1)
    at = D == best[:, None]
    m = np.count_nonzero(at & match, axis=1)
    t = np.count_nonzero(at, axis=1) - m
    return np.column_stack([closer, t, m]).astype(np.int64)


def _slow_average_precision(D, pc, gc, self_cols, ties):
    if not np.isfinite(D).all():
        raise ValueError("distance contains NaN or infinity.")
    out = np.full(D.shape[0], np.nan)
    match = gc[None, :] == pc[:, None]
    if self_cols is not None:
        match[np.arange(D.shape[0]), self_cols] = False
    for i in range(D.shape[0]):
        row = D[i]
        rel = row[match[i]]
        Mi = rel.size
        if Mi == 0:
            continue
        u, r = np.unique(rel, return_counts=True)
        n_le = np.cumsum(np.bincount(np.searchsorted(u, row, side="left"),
                                     minlength=u.size + 1)[: u.size])
        n_lt = np.cumsum(np.bincount(np.searchsorted(u, row, side="right"),
                                     minlength=u.size + 1)[: u.size])
        if self_cols is not None:
            q = row[self_cols[i]]
            n_le = n_le - (q <= u)
            n_lt = n_lt - (q < u)
        g = n_le - n_lt
        N = n_lt
        R = np.cumsum(r) - r
        if ties == "optimistic":
            s = r + (R - N) * _counts._harmonic_diff(N, N + r)
        elif ties == "pessimistic":
            B = N + g - r
            s = r + (R - B) * _counts._harmonic_diff(B, B + r)
        else:
            H = _counts._harmonic_diff(N, N + g)
            slope = np.where(g > 1, (r - 1) / np.maximum(g - 1, 1), 0.0)
            s = (r / g) * ((R + 1) * H + slope * (g - (N + 1) * H))
        out[i] = float(np.sum(s)) / Mi
    return out


def _slow_nn_hits(D, pc, gc, ties):
    at = D == D.min(axis=1, keepdims=True)
    good = np.count_nonzero(at & (gc[None, :] == pc[:, None]), axis=1)
    n_at = np.count_nonzero(at, axis=1)
    if ties == "optimistic":
        return (good > 0).astype(float)
    if ties == "pessimistic":
        return (good == n_at).astype(float)
    return good / n_at


def _slow_knn_accuracy(Q, Rf, qc, rc, same_set):
    counts = np.bincount(rc, minlength=int(max(qc.max(), rc.max())) + 1)
    D = (Q * Q).sum(1)[:, None] - 2.0 * Q @ Rf.T + (Rf * Rf).sum(1)[None, :]
    n_r = Rf.shape[0]
    if same_set:
        D[np.arange(Q.shape[0]), np.arange(Q.shape[0])] = np.inf
    order = np.argsort(D, axis=1, kind="stable")
    rel = rc[order] == qc[:, None]
    if same_set:
        rel[:, -1] = False
    R = counts[qc] - (1 if same_set else 0)
    ok = R > 0
    rel, R = rel[ok], R[ok]
    hits = np.cumsum(rel, axis=1)
    prec = hits / np.arange(1, n_r + 1)[None, :]
    within = np.arange(n_r)[None, :] < R[:, None]
    return {"precision_at_1": rel[:, 0].mean(),
            "r_precision": (hits[np.arange(R.size), R - 1] / R).mean(),
            "map_at_r": ((prec * rel * within).sum(axis=1) / R).mean(),
            "mean_average_precision": ((prec * rel).sum(axis=1) / R).mean(),
            "n_queries": int(R.size)}


def _case(rng, n_q, n_g, n_ids, tied, dtype=np.float64):
    """Labels and a distance matrix: few distinct values (ties everywhere) or continuous."""
    D = (rng.integers(0, 4, (n_q, n_g)) if tied else rng.random((n_q, n_g))).astype(dtype)
    return D, rng.integers(0, n_ids, n_q), rng.integers(0, n_ids, n_g)


# every path of the counting code: packed-byte counting on short rows, several chunks of
# non-consecutive rows, rows ranked by a sort instead of counts, and a mix of both
_PATHS = {
    "default": {},
    "lanes_small_chunks": {"_LANE_MIN_COLS": 8, "_CHUNK_BYTES": 600},
    "sorted_rows": {"_COUNT_MAX_RELEVANT": 0},
    "mixed": {"_COUNT_MAX_RELEVANT": 3, "_LANE_MIN_COLS": 8, "_CHUNK_BYTES": 2000},
}


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("same_set", [False, True])
def test_counting_path_matches_sorting_version(path, tied, same_set, monkeypatch):
    for name, value in _PATHS[path].items():
        monkeypatch.setattr(_counts, name, value)
    rng = np.random.default_rng(24)
    n = 41
    D, ql, dl = _case(rng, n, 45 if not same_set else n, 6, tied)
    if same_set:
        dl = ql
    self_cols = np.arange(n) if same_set else None
    qc, dc = _counts._label_codes(ql, dl, *D.shape)
    stats = _slow_rank_stats(D, qc, dc, self_cols)
    for block_rows in (None, 1, 6):
        got = _counts._rank_stats(D, ql, dl, same_set=same_set, block_rows=block_rows)
        np.testing.assert_array_equal(got, stats)
    for ties in _counts.TIES:
        ap = _slow_average_precision(D, qc, dc, self_cols, ties)
        for block_rows in (None, 5):
            got = M.average_precision_per_query(D, ql, dl, same_set=same_set, ties=ties,
                                                block_rows=block_rows)
            np.testing.assert_allclose(got, ap, rtol=1e-12, atol=1e-14)
        assert M.mean_average_precision(D, ql, dl, same_set=same_set,
                                        ties=ties) == pytest.approx(np.nanmean(ap), rel=1e-12)
        curve = _counts._cmc_from_stats(stats, D.shape[1], ties)
        np.testing.assert_allclose(M.cmc(D, ql, dl, ties=ties, block_rows=4) if not same_set
                                   else curve, curve, rtol=0, atol=1e-12)
        assert M.one_call_at_n(D, ql, dl, 3, same_set=same_set, ties=ties) == pytest.approx(
            float(np.mean(_counts._hit_probability(stats, 3, ties))), rel=1e-12)
        if not same_set:
            assert M.rank_accuracy(D, ql, dl, 2, ties=ties) == pytest.approx(curve[1])
            assert M.nearest_neighbor_accuracy(D, ql, dl, ties=ties, block_rows=7) == \
                pytest.approx(np.mean(_slow_nn_hits(D, qc, dc, ties)), rel=1e-12)


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("same_set", [False, True])
def test_identification_report_and_knn_accuracy_match_sorting_version(path, same_set,
                                                                      monkeypatch):
    for name, value in _PATHS[path].items():
        monkeypatch.setattr(_counts, name, value)
    rng = np.random.default_rng(25)
    # small integer embeddings: many exactly equal distances
    FX = rng.integers(0, 3, (38, 2)).astype(float)
    FY = FX if same_set else rng.integers(0, 3, (43, 2)).astype(float)
    pl = rng.integers(0, 5, 38)
    gl = pl if same_set else rng.integers(0, 5, 43)
    D = ((FX[:, None] - FY[None]) ** 2).sum(-1)
    pc, gc = _counts._label_codes(pl, gl, *D.shape)
    self_cols = np.arange(38) if same_set else None
    for ties in _counts.TIES:
        rep = M.identification_report(FX, FY, pl, gl, max_rank=6, ranks=(1, 4), block_rows=9,
                                      same_set=same_set, ties=ties)
        stats = _slow_rank_stats(D, pc, gc, self_cols)
        np.testing.assert_allclose(rep["cmc"], _counts._cmc_from_stats(stats, 6, ties), atol=1e-12)
        assert rep["map"] == pytest.approx(
            np.nanmean(_slow_average_precision(D, pc, gc, self_cols, ties)), rel=1e-12)
        if not same_set:
            assert rep["nn_accuracy"] == pytest.approx(
                np.mean(_slow_nn_hits(D, pc, gc, ties)), rel=1e-12)
    want = _slow_knn_accuracy(FX, FY, pc, gc, same_set)
    for block_rows in (None, 4):
        got = M.knn_accuracy(FX, FY, pl, gl, same_set=same_set, block_rows=block_rows)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-12), key
    del want["n_queries"]  # and the per-query version agrees with the blockwise one
    assert want == pytest.approx(_knn_accuracy_slow(FX, FY, pl, gl, same_set), rel=1e-12)


@pytest.mark.parametrize("path", sorted(_PATHS))
def test_counting_path_equals_sklearn_average_precision_without_ties(path, monkeypatch):
    for name, value in _PATHS[path].items():
        monkeypatch.setattr(_counts, name, value)
    rng = np.random.default_rng(26)
    D, ql, dl = _case(rng, 30, 2100, 40, tied=False)  # rows long enough for packed counting
    want = [average_precision_score(dl == ql[i], -D[i]) if (dl == ql[i]).any() else np.nan
            for i in range(30)]
    for ties in _counts.TIES:
        got = M.average_precision_per_query(D, ql, dl, ties=ties)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # float32 distances: the thresholds stay float32 (next float up in float32)
    D32 = D.astype(np.float32)
    want32 = [average_precision_score(dl == ql[i], -D32[i].astype(float))
              if (dl == ql[i]).any() else np.nan for i in range(30)]
    np.testing.assert_allclose(M.average_precision_per_query(D32, ql, dl), want32, rtol=1e-12)
    qc, dc = _counts._label_codes(ql, dl, *D32.shape)
    np.testing.assert_array_equal(_counts._rank_stats(D32, ql, dl),
                                  _slow_rank_stats(D32, qc, dc, None))


def test_count_flags_long_rows():
    rng = np.random.default_rng(27)
    for n in (8, 2040, 2048, 4096, 16392):
        flags = rng.random((3, 2, n)) < rng.random((3, 2, 1))
        np.testing.assert_array_equal(_counts._count_flags(flags), flags.sum(axis=2))
    flags = np.ones((1, 1, 2048 * 8), dtype=bool)  # every byte lane at its limit
    assert _counts._count_flags(flags)[0, 0] == 2048 * 8


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_counting_path_refuses_non_finite_in_any_row(path, bad, monkeypatch):
    for name, value in _PATHS[path].items():
        monkeypatch.setattr(_counts, name, value)
    D = np.random.default_rng(28).random((6, 9))
    pl = np.array([0, 0, 1, 1, 5, 5])  # label 5: rows without any relevant item
    gl = np.array([0, 0, 0, 0, 1, 1, 2, 2, 3])
    for row in (0, 2, 4):
        Db = D.copy()
        Db[row, 7] = bad
        for fn in (M.cmc, M.mean_average_precision, M.nearest_neighbor_accuracy):
            with pytest.raises(ValueError, match="NaN or infinity"):
                fn(Db, pl, gl)
