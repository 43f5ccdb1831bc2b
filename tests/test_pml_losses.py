"""PyTorch losses (crossmetric.deep.pml_losses) equal the NumPy objectives of the learners."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric._solvers.logistic import PairLogisticObjective  # noqa: E402
from crossmetric.deep.pml_losses import (  # noqa: E402
    GeneralizedLogisticLoss,
    GSMHingeLoss,
    PAUCHingeLoss,
    pair_indices,
)
from crossmetric.learners._gsm_measure import gsm_loss_grad  # noqa: E402
from crossmetric.learners.auc import hinge_coefficients, pauc_window  # noqa: E402


def _batch(seed=0, n=12, m=10, k=4):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, k, generator=g, dtype=torch.float64)
    ref = torch.randn(m, k, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (n,), generator=g)
    ref_labels = torch.randint(0, 4, (m,), generator=g)
    return emb, labels, ref, ref_labels


def test_pair_indices_forms():
    lab = torch.tensor([0, 0, 1])
    i, j, same = pair_indices(lab)
    assert i.tolist() == [0, 0, 1] and j.tolist() == [1, 2, 2]
    assert same.tolist() == [True, False, False]
    i, j, same = pair_indices(lab, torch.tensor([1, 0]))
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(0, 0), (0, 1), (1, 0), (1, 1),
                                                              (2, 0), (2, 1)]
    assert same.tolist() == [False, True, False, True, True, False]
    i, j, same = pair_indices(None, None, (torch.tensor([0]), torch.tensor([1]),
                                           torch.tensor([2]), torch.tensor([0])))
    assert i.tolist() == [0, 2] and j.tolist() == [1, 0] and same.tolist() == [True, False]


@pytest.mark.parametrize("cross", [False, True])
def test_generalized_logistic_equals_pcca_cmml_objective(cross):
    emb, labels, ref, ref_labels = _batch()
    emb.requires_grad_(True)
    ref.requires_grad_(True)
    loss_fn = GeneralizedLogisticLoss(beta=3.0).double()
    if cross:
        loss = loss_fn(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        i, j, same = pair_indices(labels, ref_labels)
        FY = ref.detach().numpy()
    else:
        loss = loss_fn(emb, labels)
        i, j, same = pair_indices(labels)
        FY = emb.detach().numpy()
    loss.backward()
    FX = emb.detach().numpy()
    y = np.where(same.numpy(), 1, -1)
    obj = PairLogisticObjective(i.numpy(), j.numpy(), y, 3.0, FX.shape[0], FY.shape[0])
    ref_loss, gX, gY = obj.loss_grad(FX, FY)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-12)
    if cross:
        np.testing.assert_allclose(emb.grad.numpy(), gX, atol=1e-12)
        np.testing.assert_allclose(ref.grad.numpy(), gY, atol=1e-12)
    else:  # one embedding on both sides: the two gradients add up
        np.testing.assert_allclose(emb.grad.numpy(), gX + gY, atol=1e-12)


def test_generalized_logistic_learned_threshold_and_indices_tuple():
    emb, labels, _, _ = _batch(1)
    loss_fn = GeneralizedLogisticLoss(beta=1.0, threshold=2.0, learn_threshold=True).double()
    tup = (torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4]), torch.tensor([5]))
    loss = loss_fn(emb, labels, indices_tuple=tup)
    loss.backward()
    d = ((emb[[0, 1, 4]] - emb[[2, 3, 5]]) ** 2).sum(1).detach().numpy()
    y = np.array([1.0, 1.0, -1.0])
    want = np.mean(np.logaddexp(0.0, y * (d - 2.0)))
    assert loss.item() == pytest.approx(want, rel=1e-12)
    # d loss / d b = mean(−y σ(y (d − b)))
    sig = 1.0 / (1.0 + np.exp(-y * (d - 2.0)))
    assert float(loss_fn.threshold.grad) == pytest.approx(np.mean(-y * sig), rel=1e-10)


@pytest.mark.parametrize("fpr_range", [(0.0, 1.0), (0.0, 0.3), (0.1, 0.5)])
def test_pauc_hinge_equals_cmlauc_hinge(fpr_range):
    emb, labels, ref, ref_labels = _batch(2, n=15, m=14)
    loss = PAUCHingeLoss(fpr_range)(emb, labels, ref_emb=ref, ref_labels=ref_labels)
    i, j, same = pair_indices(labels, ref_labels)
    d = ((emb[i] - ref[j]) ** 2).sum(1).numpy()
    d_pos, d_neg = d[same.numpy()], d[~same.numpy()]
    win = pauc_window(d_neg, fpr_range)
    _, _, want = hinge_coefficients(d_pos, d_neg[win])
    assert loss.item() == pytest.approx(want, rel=1e-12)
    # gradient: autograd against central differences
    e = emb.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda x: PAUCHingeLoss(fpr_range)(x, labels, ref_emb=ref, ref_labels=ref_labels),
        (e,), eps=1e-7, atol=1e-6)


@pytest.mark.parametrize("cross", [True, False])
def test_gsm_hinge_equals_gsm_objective(cross):
    torch.manual_seed(0)
    emb, labels, ref, ref_labels = _batch(3, k=5)
    r = 3
    loss_fn = GSMHingeLoss(5, n_components=r, cross_modal=cross, f=0.5).double()
    if cross:
        loss = loss_fn(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        i, j, same = pair_indices(labels, ref_labels)
        Y = ref.numpy()
    else:
        loss = loss_fn(emb, labels)
        i, j, same = pair_indices(labels)
        Y = emb.numpy()
    loss.backward()
    Wx = loss_fn.head_x.weight.detach().numpy()
    Wy = loss_fn.head_y.weight.detach().numpy()
    params = {"LA": Wx[:r], "LCx": Wx[r:2 * r], "d": Wx[2 * r], "LB": Wy[:r],
              "LCy": Wy[r:2 * r], "e": Wy[2 * r], "f": np.array(0.5)}
    ell = np.where(same.numpy(), -1.0, 1.0)
    n = ell.size
    want, grad = gsm_loss_grad(params, "generalized", 0.5, emb.numpy(), Y, i.numpy(),
                               j.numpy(), ell, np.full(n, 1.0 / n), 0.0)
    assert loss.item() == pytest.approx(want, rel=1e-12)
    gx = np.vstack([grad["LA"], grad["LCx"], grad["d"][None]])
    gy = np.vstack([grad["LB"], grad["LCy"], grad["e"][None]])
    if cross:
        np.testing.assert_allclose(loss_fn.head_x.weight.grad.numpy(), gx, atol=1e-12)
        np.testing.assert_allclose(loss_fn.head_y.weight.grad.numpy(), gy, atol=1e-12)
    else:
        np.testing.assert_allclose(loss_fn.head_x.weight.grad.numpy(), gx + gy, atol=1e-12)
    assert float(loss_fn.f.grad) == pytest.approx(float(grad["f"]), rel=1e-10)


def test_losses_train_an_embedding():
    """Drop-in use: a linear embedding trained with each loss separates two classes."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 6, generator=g)
    labels = torch.arange(60) % 3
    X[:, 0] += 3.0 * labels  # class signal in one noisy coordinate
    for loss_fn in (GeneralizedLogisticLoss(), PAUCHingeLoss((0.0, 0.3)), GSMHingeLoss(2, 2)):
        torch.manual_seed(0)
        net = torch.nn.Linear(6, 2)
        opt = torch.optim.Adam(list(net.parameters()) + list(loss_fn.parameters()), lr=0.05)
        first = None
        for _ in range(60):
            opt.zero_grad()
            loss = loss_fn(net(X), labels)
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
        assert loss.item() < 0.5 * first, type(loss_fn).__name__


def test_bad_arguments():
    emb = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="ref_labels was given without ref_emb"):
        GeneralizedLogisticLoss()(emb, torch.zeros(3), ref_labels=torch.zeros(3))
    with pytest.raises(ValueError, match="as many rows"):
        GeneralizedLogisticLoss()(emb, torch.zeros(3), ref_emb=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="labels is required"):
        GeneralizedLogisticLoss()(emb)
    with pytest.raises(ValueError, match="distance must be None"):
        GSMHingeLoss(2, 2, distance=lambda a, b: a @ b.T)
    with pytest.raises(ValueError, match="2-D"):
        GeneralizedLogisticLoss()(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="beta"):
        GeneralizedLogisticLoss(beta=0)


# ------------------------------------------------------- pytorch-metric-learning conventions
def _losses():
    return [GeneralizedLogisticLoss().double(), PAUCHingeLoss((0.0, 0.5)).double(),
            GSMHingeLoss(4, 3, cross_modal=False).double()]


def _all_pairs(labels, ref_labels=None):
    """PML's get_all_pairs_indices (ordered pairs, positives i == j dropped when the
    reference labels are the labels themselves)."""
    ref = labels if ref_labels is None else ref_labels
    eq = labels[:, None] == ref[None, :]
    if ref_labels is None:
        eq.fill_diagonal_(False)
    a1, p = torch.where(eq)
    a2, n = torch.where(labels[:, None] != ref[None, :])
    return a1, p, a2, n


@pytest.mark.parametrize("k", range(3))
def test_triplet_indices_tuple_becomes_pairs_as_pml(k):
    emb, labels, _, _ = _batch(seed=3)
    a, p, n = torch.tensor([0, 1, 2]), torch.tensor([4, 5, 6]), torch.tensor([7, 8, 9])
    loss_fn = _losses()[k]
    got = loss_fn(emb, labels, indices_tuple=(a, p, n))
    want = loss_fn(emb, labels, indices_tuple=(a, p, a, n))
    got, want = float(got.detach()), float(want.detach())
    assert np.isfinite(got) and got == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="triplet form"):
        loss_fn(emb, labels, indices_tuple=(a, p))


@pytest.mark.parametrize("k", range(3))
def test_a_miner_that_finds_nothing_gives_zero_not_nan(k):
    emb, labels, _, _ = _batch(seed=4)
    emb.requires_grad_(True)
    loss_fn = _losses()[k]
    empty = torch.empty(0, dtype=torch.long)
    for tup in ((empty, empty, empty), (empty, empty, empty, empty)):
        loss = loss_fn(emb, labels, indices_tuple=tup)
        if isinstance(loss_fn, GSMHingeLoss) and loss_fn.mu:
            continue
        assert float(loss.detach()) == 0.0
        loss.backward()  # still part of the graph, as PML's zero_loss
        assert emb.grad is not None and float(emb.grad.abs().sum()) == 0.0
    # labels may be left out when indices_tuple is given
    tup = (torch.tensor([0]), torch.tensor([1]), torch.tensor([2, 2]), torch.tensor([3, 4]))
    assert torch.isfinite(loss_fn(emb, None, indices_tuple=tup).detach())


@pytest.mark.parametrize("k", range(3))
def test_ref_emb_without_ref_labels_as_pml(k):
    emb, labels, _, _ = _batch(seed=5)
    ref = emb.flip(0) * 0.5 + 0.1
    loss_fn = _losses()[k]
    if isinstance(loss_fn, GSMHingeLoss):
        loss_fn = GSMHingeLoss(4, 3, cross_modal=True).double()
    got = loss_fn(emb, labels, ref_emb=ref)
    want = loss_fn(emb, labels, indices_tuple=_all_pairs(labels), ref_emb=ref)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    try:
        from pytorch_metric_learning.utils import loss_and_miner_utils as lmu
    except ImportError:
        return
    pml = lmu.get_all_pairs_indices(labels)
    assert all(torch.equal(x, y) for x, y in zip(pml, _all_pairs(labels), strict=True))


def test_distance_and_reducer_arguments():
    emb, labels, ref, ref_labels = _batch(seed=6)

    def sq(a, b):
        return torch.cdist(a, b) ** 2

    for cls, args in ((GeneralizedLogisticLoss, ()), (PAUCHingeLoss, ((0.0, 0.4),))):
        base = cls(*args)(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        via = cls(*args, distance=sq)(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        assert float(via) == pytest.approx(float(base), rel=1e-9)

    class Similarity:
        is_inverted = True

        def __call__(self, a, b):
            return a @ b.T

    i, j, same = pair_indices(labels, ref_labels)
    s = (emb[i] * ref[j]).sum(1)
    y = same.double() * 2 - 1
    m = y * (-s - 1.0)
    want = (torch.logaddexp(torch.zeros_like(m), 3.0 * m) / 3.0).mean()
    got = GeneralizedLogisticLoss(distance=Similarity())(emb, labels, ref_emb=ref,
                                                         ref_labels=ref_labels)
    assert float(got) == pytest.approx(float(want), rel=1e-12)

    class SumReducer(torch.nn.Module):  # PML's reducer call: (loss_dict, embeddings, labels)
        def forward(self, loss_dict, embeddings, labels):
            info = loss_dict["loss"]
            assert info["reduction_type"] == "element"
            assert info["indices"].shape == info["losses"].shape
            return info["losses"].sum()

    total = GeneralizedLogisticLoss(reducer=SumReducer())(emb, labels)
    mean = GeneralizedLogisticLoss()(emb, labels)
    n_pairs = labels.shape[0] * (labels.shape[0] - 1) // 2
    assert float(total) == pytest.approx(float(mean) * n_pairs, rel=1e-12)


def test_with_pml_distances_reducers_and_miners():
    pml = pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning import distances, miners, reducers

    assert pml.__version__
    emb, labels, ref, ref_labels = _batch(seed=7)
    lp = distances.LpDistance(power=2, normalize_embeddings=False)
    for loss_fn in (GeneralizedLogisticLoss, PAUCHingeLoss):
        a = loss_fn(distance=lp)(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        b = loss_fn()(emb, labels, ref_emb=ref, ref_labels=ref_labels)
        assert float(a) == pytest.approx(float(b), rel=1e-6)
        c = loss_fn(reducer=reducers.MeanReducer())(emb, labels)
        assert float(c) == pytest.approx(float(loss_fn()(emb, labels)), rel=1e-12)
    nz = PAUCHingeLoss((0.0, 1.0), reducer=reducers.AvgNonZeroReducer())(emb, labels)
    i, j, same = pair_indices(labels)
    d = ((emb[i] - emb[j]) ** 2).sum(1)
    h = torch.relu(1.0 + d[same][:, None] - d[~same][None, :])
    assert float(nz) == pytest.approx(float(h[h > 0].mean()), rel=1e-9)
    # a PML miner that finds nothing: zero loss
    far = torch.cat([torch.zeros(4, 4), torch.full((4, 4), 100.0)]).double()
    lab = torch.tensor([0] * 4 + [1] * 4)
    tup = miners.TripletMarginMiner(margin=0.1, type_of_triplets="semihard")(far, lab)
    assert tup[0].numel() == 0
    for loss_fn in _losses()[:2]:
        assert float(loss_fn(far, lab, tup)) == 0.0


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # PML's trainer
def test_losses_run_in_pml_trainers_and_testers():
    pytest.importorskip("pytorch_metric_learning")
    pytest.importorskip("faiss")  # PML's AccuracyCalculator searches with faiss
    from pytorch_metric_learning import miners, testers, trainers
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from sklearn.datasets import load_digits

    d = load_digits()
    X = torch.tensor(d.data[:600] / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target[:600])
    dataset = torch.utils.data.TensorDataset(X, y)
    torch.manual_seed(0)
    results = {}
    for loss_fn in (GeneralizedLogisticLoss(), PAUCHingeLoss((0.0, 0.3))):
        trunk = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 16))
        tester = testers.GlobalEmbeddingSpaceTester(
            dataloader_num_workers=0, data_device="cpu", batch_size=200,
            accuracy_calculator=AccuracyCalculator(include=("precision_at_1",), k=1))

        def p_at_1(tester, trunk):
            acc = tester.test({"val": dataset}, 0, trunk)
            return acc["val"]["precision_at_1_level0"]

        before = p_at_1(tester, trunk)
        trainer = trainers.MetricLossOnly(
            models={"trunk": trunk, "embedder": torch.nn.Identity()},
            optimizers={"trunk_optimizer": torch.optim.Adam(trunk.parameters(), lr=3e-3)},
            batch_size=64, loss_funcs={"metric_loss": loss_fn},
            mining_funcs={"tuple_miner": miners.MultiSimilarityMiner(0.1)},
            dataset=dataset, data_device="cpu", dataloader_num_workers=0)
        trainer.train(num_epochs=4)
        assert all(np.isfinite(v) for v in trainer.losses.values() if np.ndim(v) == 0)
        results[type(loss_fn).__name__] = (before, p_at_1(tester, trunk))
    for name, (before, after) in results.items():
        assert after > 0.9 and after > before, (name, before, after)
