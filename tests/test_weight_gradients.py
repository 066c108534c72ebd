"""The backward's weight gradients (cells/_small_loops.pxd, weight_grad): each thread's gradient
of a weight is one product over every step, on cells' gemm_tn (include/cells/panel.h) where it holds
at most TN_C_BYTES, on BLAS above. The other tests' weights are small enough for gemm_tn alone;
here nIn is large enough that dL/dWx goes to BLAS while dL/dWh stays on gemm_tn, in one call:
the LSTM (weights [nIn, G] C-ordered, or F-ordered: PyTorch's layout, read transposed) and the LLTM
(PyTorch's layout, W [G, nOut + nIn], read transposed), on 1 and 2 threads, forward and reverse
with seq_len, in float64 against the references; and which calls hold BLAS at one thread (the
backward passes that may call it)."""
import contextlib

import numpy as np
import pytest

import cells
from cells import _cpu, _time_loop
from gru_reference import F64_TOL, assert_close
from lltm_reference import lltm_seq_backward, make_lltm_problem
from lstm_reference import lstm_time_loop_backward, make_lstm_problem

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


sL, bS, nOut = 3, 5, 40
SEQ_LEN = np.array([3, 0, 2, 3, 1])


def _n_in_past_gemm_tn(gates, n_threads):
    """An nIn whose dL/dWx is over gemm_tn's limit in float64 in every thread (a thread's
    columns are the G / n_threads, rounded to 16), while dL/dWh ([nOut, G]) is far under it."""
    cols = gates * nOut // n_threads - (16 if n_threads > 1 else 0)
    assert nOut * gates * nOut * 8 < _time_loop.TN_C_BYTES
    return _time_loop.TN_C_BYTES // (8 * cols) + 1


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_lstm_weight_gradients_on_both_sides_of_gemm_tn(n_threads, forward, order):
    nIn = _n_in_past_gemm_tn(4, n_threads)
    p = make_lstm_problem(np.random.default_rng(41), sL, bS, nIn, nOut, scale=0.05)
    Wx, Wr = (np.asarray(p[name], order=order) for name in ("Wx", "Wr"))
    weights = (p["x"], Wx, Wr, p["b"], p["hI"], p["cI"])
    kwargs = dict(Wp=p["Wp"], seq_len=SEQ_LEN, forward=forward, n_threads=n_threads)
    *_, ws = cells.lstmLayerTimeLoop(*weights, return_workspace=True, **kwargs)
    grads = cells.lstmLayerTimeLoopBp(*weights, p["dLdh"], dLdhL=p["dLdhL"], dLdcL=p["dLdcL"],
                                      workspace=ws, **kwargs)
    ref = lstm_time_loop_backward(*weights, p["dLdh"], p["dLdhL"], p["dLdcL"], p["Wp"],
                                  SEQ_LEN, forward=forward)
    for name, g, r in zip(("dLdx", "dLdWx", "dLdWr", "dLdb"), grads, ref):
        assert_close(g, r, F64_TOL, name, np.float64)
    assert grads.dLdWx.flags[f"{order}_CONTIGUOUS"] and grads.dLdWr.flags[f"{order}_CONTIGUOUS"]


@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_lltm_weight_gradients_on_both_sides_of_gemm_tn(n_threads, forward):
    nIn = _n_in_past_gemm_tn(3, n_threads)
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = make_lltm_problem(np.random.default_rng(42), sL, bS,
                                                            nIn, nOut, scale=0.05)
    kwargs = dict(seq_len=SEQ_LEN, forward=forward, n_threads=n_threads)
    *_, ws = cells.lltmTimeLoop(x, W, b, hI, cI, return_workspace=True, **kwargs)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                 workspace=ws, **kwargs)
    ref = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL, SEQ_LEN, forward)
    for name, g, r in zip(("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"), grads, ref):
        assert_close(g, r, F64_TOL, name, np.float64)



def test_which_backward_passes_call_blas():
    """A backward may multiply on BLAS only where a whole weight gradient holds more than
    TN_C_BYTES (a thread's part of it, at most all of it, goes to BLAS past that). Arguments:
    nIn, nState, G, itemsize."""
    calls = _time_loop.backward_calls_blas
    limit = _time_loop.TN_C_BYTES
    assert not calls(128, 128, 512, 4)                 # LSTM H = 128, float: 256 KiB each
    assert not calls(limit // (8 * 512), 128, 512, 8)  # dL/dWx at the limit, in double
    assert calls(limit // (8 * 512) + 1, 128, 512, 8)  # one input more
    assert calls(16, limit // (4 * 64) + 1, 64, 4)     # dL/dWh past it


@pytest.mark.parametrize("n_threads", [1, 2])
def test_only_a_backward_that_can_call_blas_holds_it(monkeypatch, n_threads):
    """BLAS is held at one thread (cells._threads.sequential_blas) by the backward passes that
    may call it, and by no other call: the forward and the backward of small weights run on
    cells' kernels alone."""
    held = []

    @contextlib.contextmanager
    def recorded():
        held.append(True)
        yield

    monkeypatch.setattr(_cpu, "sequential_blas", recorded)
    for nIn, expected in ((8, []), (_n_in_past_gemm_tn(4, n_threads), [True])):
        p = make_lstm_problem(np.random.default_rng(43), sL, bS, nIn, nOut, scale=0.05)
        weights = (p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"])
        *_, ws = cells.lstmLayerTimeLoop(*weights, return_workspace=True, n_threads=n_threads)
        assert held == []
        cells.lstmLayerTimeLoopBp(*weights, p["dLdh"], workspace=ws, n_threads=n_threads)
        assert held == expected
        held.clear()
