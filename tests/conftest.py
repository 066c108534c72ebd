import os
import sys

import numpy as np
import pytest

from cells import _isa

# Make the helper module tests/gru_reference.py importable as `gru_reference`.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=[False, True], ids=["reset_before", "lbr"])
def lbr(request):
    """linear_before_reset."""
    return request.param


@pytest.fixture(params=[False, True], ids=["b1", "b2"])
def two_biases(request):
    """False: b [3nOut] (input-side only); True: b [2, 3nOut]."""
    return request.param


@pytest.fixture(params=[np.float64, np.float32], ids=["f64", "f32"])
def dtype(request):
    return np.dtype(request.param)


@pytest.fixture
def weights_read(monkeypatch):
    """A list that records, for every pass of the CPU time loop from here on, (whether it reads
    Wx and Wh transposed, the address of Wx's data, of Wh's): a weight read where it is has the
    caller's address."""
    from cells import _time_loop
    passes = []
    for name in ("forward", "backward"):
        def record(*args, _run=getattr(_time_loop, name), **kwargs):
            passes.append((kwargs["weights_transposed"], kwargs["Wx"].ctypes.data,
                           kwargs["Wh"].ctypes.data))
            return _run(*args, **kwargs)
        monkeypatch.setattr(_time_loop, name, record)
    return passes


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module's tests (restored afterwards): for tiny shapes (bS <= 5,
    H <= 10), where synchronising threads at every step costs more than the work."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=_isa.available())
def each_instruction_set(request):
    """Runs the test once on each instruction set this CPU runs (cells.instruction_set's
    paths: an AVX-512 machine runs its AVX2 and baseline kernels too)."""
    with _isa.forced(request.param):
        yield request.param
