"""DeepGSM on a CUDA device: the checks that need a GPU (skipped where none is present).

They run on a lent GPU machine (``python -m pytest tests/test_deep_cuda.py``); CI has no GPU,
so there they are skipped. What they pin: a CUDA fit gives what a CPU fit gives up to float32
summation order, mixed precision trains to finite embeddings, a model trained on the GPU is
used and saved from NumPy like a CPU one, and a checkpoint written on the GPU resumes on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crossmetric.deep import DeepGSM  # noqa: E402
from tests.test_deep_scale import rgb_people as _people  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SMALL = dict(hidden_units=16, n_identities=8, max_iter=6, tol=None, random_state=0)


@pytest.fixture
def no_tf32():
    """Full float32 on the GPU: TF32 convolutions and matrix products (PyTorch's default for
    cuDNN on Ampere and later) round inputs to 10 mantissa bits, which is not the CPU's sum."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def test_cuda_fit_matches_cpu_fit(no_tf32):
    """Same seed, same rounds: the CUDA fit follows the CPU fit up to float32 accumulation
    order. Measured on an H100 (TF32 off): the first round's loss agrees to 5e-6 relative,
    the sixth to 3.2e-4 (cuDNN and the CPU sum in other orders, and SGD carries it on)."""
    px, ix, sy, iy = _people()
    cpu = DeepGSM(**SMALL, device="cpu").fit_identities(px, ix, sy, iy)
    gpu = DeepGSM(**SMALL, device="cuda").fit_identities(px, ix, sy, iy)
    np.testing.assert_allclose(gpu.loss_curve_[0], cpu.loss_curve_[0], rtol=2e-5)
    np.testing.assert_allclose(gpu.loss_curve_, cpu.loss_curve_, rtol=1e-3, err_msg=(
        f"loss per round on CUDA {gpu.loss_curve_} and on the CPU {cpu.loss_curve_}"))
    assert gpu.device_.type == "cuda"
    d_cpu = cpu.cross_distance(px, sy)
    d_gpu = gpu.cross_distance(px, sy)
    assert isinstance(d_gpu, np.ndarray) and np.isfinite(d_gpu).all()
    np.testing.assert_allclose(d_gpu, d_cpu, rtol=1e-2, atol=1e-2 * np.abs(d_cpu).max())


def test_amp_on_cuda_trains_to_finite_embeddings():
    px, ix, sy, iy = _people()
    model = DeepGSM(**SMALL, device="cuda", amp=True).fit_identities(px, ix, sy, iy)
    zx, zy = model.transform_x(px), model.transform_y(sy)
    assert zx.dtype.kind == "f" and np.isfinite(zx).all() and np.isfinite(zy).all()
    assert np.isfinite(model.cross_distance(px, sy)).all()


def test_cuda_checkpoint_resumes_on_cpu(tmp_path):
    """A checkpoint written during a CUDA fit is read back on the CPU and training goes on."""
    px, ix, sy, iy = _people()
    path = str(tmp_path / "run.pt")
    gpu = DeepGSM(**SMALL, device="cuda", checkpoint_path=path,
                  checkpoint_every=1).fit_identities(px, ix, sy, iy)
    resumed = DeepGSM(**SMALL, device="cpu", checkpoint_path=path,
                      resume=True).fit_identities(px, ix, sy, iy)
    assert resumed.device_.type == "cpu"
    np.testing.assert_allclose(resumed.cross_distance(px, sy), gpu.cross_distance(px, sy),
                               rtol=1e-4, atol=1e-5)


def test_cuda_model_saves_and_loads_on_cpu(tmp_path):
    from crossmetric.persistence import load_model, save_model

    px, ix, sy, iy = _people()
    gpu = DeepGSM(**SMALL, device="cuda").fit_identities(px, ix, sy, iy)
    path = tmp_path / "deepgsm.cmx"
    save_model(path, gpu)
    back = load_model(path)
    np.testing.assert_allclose(back.cross_distance(px, sy), gpu.cross_distance(px, sy),
                               rtol=1e-5, atol=1e-5)
