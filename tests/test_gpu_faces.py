"""What cells' public functions do with CuPy arrays, run without a GPU: tests/fake_cupy.py
stands in for CuPy (NumPy memory behaving like CuPy arrays wherever cells could tell), and the
GPU kernels run compiled by g++ with the shim (cells/kernels/shim.h), against the CPU path.

This covers the faces' device-generic code (checks, allocations, layouts, workspaces, seq_len)
on the GPU backend, and cells.torch's glue for CUDA tensors (DLPack both ways, the stream
context), with CPU tensors standing in for CUDA ones. It does not cover the device itself:
benchmarks/gpu_check.py runs the same cases on a GPU.
"""
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

import cells
import fake_cupy
from cells import cuda
from gru_reference import F32_SEQ_GRAD_TOL, F64_TOL, assert_close

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")


@pytest.fixture
def fake_gpu(monkeypatch):
    """cells' GPU backend on fake_cupy and the shim's kernels."""
    monkeypatch.setattr(cuda, "import_cupy", lambda: fake_cupy)
    monkeypatch.setattr(cuda, "device_launcher", cuda.cpu_launcher)
    return fake_cupy


def load_gpu_check():
    """benchmarks/gpu_check.py as a module (a script, not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_checks_correctness_part_passes(fake_gpu, capsys):
    """benchmarks/gpu_check.py's correctness part, every public function on (fake) CuPy
    arrays against the same call on NumPy arrays, float64 and float32: results are CuPy arrays
    of the expected values."""
    failures = load_gpu_check().check_correctness(fake_gpu)
    report = capsys.readouterr().out
    assert failures == 0, report
    assert report.count("PASS") == 2 * len(load_gpu_check().cases(np.float64))


def rand(rng, *shape):
    return rng.normal(0, 0.5, shape)


def gru_inputs(dtype, seed=3):
    rng = np.random.default_rng(seed)
    sL, bS, nIn, nOut = 4, 3, 3, 2
    return [rand(rng, *s).astype(dtype) for s in
            ((sL, bS, nIn), (bS, nOut), (nIn, 3 * nOut), (nOut, 3 * nOut), (2, 3 * nOut),
             (sL, bS, nOut))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_a_gpu_workspace_serves_two_backward_passes(fake_gpu, dtype):
    """The GPU backward leaves its workspace intact (CuPy arrays cannot be made read-only to
    guard it): a second backward on it gives the same gradients, those of the CPU path."""
    x, hI, Wx, Wh, b, dLdh = gru_inputs(dtype)
    lengths = np.array([4, 0, 2])
    opts = dict(linear_before_reset=True, seq_len=lengths, forward=False)
    _, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **opts)
    expected = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws, **opts)
    on_gpu = [fake_gpu.asarray(a) for a in (x, hI, Wx, Wh, b, dLdh)]
    _, ws = cells.gruTimeLoop(*on_gpu[:5], return_workspace=True, **opts)
    tol = F64_TOL if dtype == np.float64 else F32_SEQ_GRAD_TOL
    for _ in range(2):
        grads = cells.gruTimeLoopBp(*on_gpu, workspace=ws, **opts)
        for name, g, e in zip(grads._fields, grads, expected):
            assert isinstance(g, fake_gpu.ndarray), name
            assert_close(g.get(), e, tol, name, dtype)


def test_gpu_weight_gradients_in_torch_layout_are_f_ordered(fake_gpu):
    """Wx and Wh (the LSTM's Wr) both F-ordered, PyTorch's layout: the GPU backward returns
    their gradients F-ordered, as the CPU's, with the CPU's values."""
    x, hI, Wx, Wh, b, dLdh = gru_inputs(np.float64)
    rng = np.random.default_rng(4)
    nIn, nOut = Wx.shape[0], hI.shape[1]
    Wx4, Wr4 = rand(rng, nIn, 4 * nOut), rand(rng, nOut, 4 * nOut)
    b4, cI = rand(rng, 4 * nOut), rand(rng, *hI.shape)
    Wx, Wh, Wx4, Wr4 = (np.asfortranarray(w) for w in (Wx, Wh, Wx4, Wr4))
    calls = [
        (lambda *a: cells.gruTimeLoopBp(*a, linear_before_reset=True), (x, hI, Wx, Wh, b, dLdh),
         ("dLdWx", "dLdWh")),
        (cells.lstmLayerTimeLoopBp, (x, Wx4, Wr4, b4, hI, cI, dLdh), ("dLdWx", "dLdWr")),
    ]
    for bp, arrays, names in calls:
        expected = bp(*arrays)
        grads = bp(*(fake_gpu.asarray(a) for a in arrays))  # in the same memory order
        for name in names:
            g, e = getattr(grads, name), getattr(expected, name)
            assert e.flags.f_contiguous and g.flags.f_contiguous, name
            assert_close(g.get(), e, F64_TOL, name, np.float64)


def test_seq_len_may_be_on_the_device_in_a_gpu_call(fake_gpu):
    x, hI, Wx, Wh, b, _ = gru_inputs(np.float64)
    lengths = np.array([4, 0, 2])
    on_gpu = [fake_gpu.asarray(a) for a in (x, hI, Wx, Wh, b)]
    from_host = cells.gruTimeLoop(*on_gpu, seq_len=lengths)
    from_device = cells.gruTimeLoop(*on_gpu, seq_len=fake_gpu.asarray(lengths))
    assert np.array_equal(from_host.get(), from_device.get())
    with pytest.raises(TypeError, match=r"seq_len: expected None or an integer array \[bS\] "
                                        r"\(a numpy.ndarray\), got cupy_fake.ndarray"):
        cells.gruTimeLoop(x, hI, Wx, Wh, b, seq_len=fake_gpu.asarray(lengths))
    with pytest.raises(TypeError, match="seqLen: expected None or a numpy.ndarray or "
                                        "cupy.ndarray"):
        cells.lstmLayer(on_gpu[0], fake_gpu.zeros((3, 8)), fake_gpu.zeros((2, 8)),
                        seqLen=[4, 0, 2])


def test_a_workspace_of_the_other_kind_is_a_type_error(fake_gpu):
    x, hI, Wx, Wh, b, dLdh = gru_inputs(np.float64)
    _, host_ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True)
    on_gpu = [fake_gpu.asarray(a) for a in (x, hI, Wx, Wh, b, dLdh)]
    with pytest.raises(TypeError, match=r"workspace.h: expected a float64 cupy_fake.ndarray "
                                        r"\(as x\), got float64 numpy.ndarray"):
        cells.gruTimeLoopBp(*on_gpu, workspace=host_ws)


def test_converters_keep_cupy_arrays_on_the_device(fake_gpu):
    rng = np.random.default_rng(5)
    W, R, B = rand(rng, 1, 8, 3), rand(rng, 1, 8, 2), rand(rng, 1, 16)
    expected = cells.convert.lstm_from_onnx(W, R, B)
    got = cells.convert.lstm_from_onnx(*(fake_gpu.asarray(a) for a in (W, R, B)))
    for g, e in zip(got, expected):
        if e is None:
            assert g is None
            continue
        assert isinstance(g, fake_gpu.ndarray)
        assert np.array_equal(g.get(), e)
    with pytest.raises(TypeError, match="R: expected a cupy_fake.ndarray as W"):
        cells.convert.lstm_from_onnx(fake_gpu.asarray(W), R, B)


class CountingLauncher:
    """The shim's launcher, counting the kernels it runs."""

    def __init__(self):
        self.launches = 0

    def launch(self, *args):
        self.launches += 1
        cuda.cpu_launcher().launch(*args)


def test_cells_torch_runs_cuda_tensors_on_the_gpu_backend(fake_gpu, monkeypatch):
    """cells.torch's glue for CUDA tensors, with CPU tensors standing in for CUDA ones (the
    glue's _on_gpu says yes, torch's stream is not asked for): the tensors reach the GPU
    backend as (fake) CuPy arrays through DLPack, the results come back the same way, and the
    outputs and every gradient are the CPU path's."""
    torch = pytest.importorskip("torch")
    import cells.torch as ct
    from cells.torch import _operators
    gpu_check = load_gpu_check()
    for name, module, inputs in gpu_check.torch_models(torch, ct):
        expected = gpu_check.outputs_and_grads(torch, module, inputs)
        launcher = CountingLauncher()
        with monkeypatch.context() as patch:
            patch.setattr(_operators, "_on_gpu", lambda t: True)
            patch.setattr(_operators, "_torch_stream", lambda device: None)
            patch.setattr(cuda, "device_launcher", lambda: launcher)
            got = gpu_check.outputs_and_grads(torch, module, inputs)
        assert launcher.launches > 0, name
        assert len(got) == len(expected), name
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, F64_TOL, f"{name}: output or gradient {k}", np.float64)
