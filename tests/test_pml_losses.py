"""PyTorch losses (crossmetric.deep.pml_losses) equal the NumPy objectives of the learners."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric._solvers.logistic import PairLogisticObjective  # noqa: E402
from crossmetric.auc import hinge_coefficients, pauc_window  # noqa: E402
from crossmetric.deep.pml_losses import (  # noqa: E402
    GeneralizedLogisticLoss,
    GSMHingeLoss,
    PAUCHingeLoss,
    pair_indices,
)
from crossmetric.gsm import gsm_loss_grad  # noqa: E402


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
    with pytest.raises(ValueError, match="ref_emb and ref_labels"):
        GeneralizedLogisticLoss()(emb, torch.zeros(3), ref_emb=emb)
    with pytest.raises(ValueError, match="2-D"):
        GeneralizedLogisticLoss()(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="beta"):
        GeneralizedLogisticLoss(beta=0)
