"""The GPU backend's orchestration (cells/_gpu.py), run on the CPU: its CUDA kernels compiled by
g++ with the shim (cells/kernels/shim.h) and NumPy standing in for CuPy, against the CPU backend
(cells/_cpu.py, itself checked against float64 references and finite differences) for every
family, direction, seq_len and dtype, forward and backward.

What this covers: the GPU path's logic (the buffers, the products and their order, sequence
lengths, padded steps, the direction, workspaces, the reductions after the loop) and the
kernels' source. What it does not: the device itself (NVRTC's code generation, CuPy's gemms,
the launch configuration on a GPU): benchmarks/gpu_check.py checks that on a machine with one.
What the public functions do with CuPy arrays: tests/test_gpu_faces.py.
"""
import shutil

import numpy as np
import pytest

from cells import _cpu, _gpu
from cells._families import gru, lltm, lstm, rnn
from gru_reference import F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, assert_close

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")

sL, bS, nIn, nOut = 4, 3, 3, 2
LENGTHS = {"all": None, "mixed": np.array([4, 0, 2], np.int64)}
DTYPES = [np.float64, np.float32]
LSTM_GRADS = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp", "dLdWproj")


def tolerances(dtype):
    """(forward, gradient) tolerances: F64_TOL for float64; the CPU tests' float32 ones (both
    backends run the same point functions in float32; only the products' summation orders
    differ)."""
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_SEQ_GRAD_TOL)


def arrays(seed, dtype, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.6, s).astype(dtype) for s in shapes]


def compare(gpu, cpu, names, tol):
    assert len(gpu) == len(cpu)
    for name, g, c in zip(names, gpu, cpu):
        if c is None:
            assert g is None, name
            continue
        assert_close(g, c, tol, name, c.dtype)


def compare_runs(out, outputs, grads, ftol, gtol):
    """out[backend] = (forward outputs, gradients, ...more gradients): every part of the GPU
    backend's against the CPU's, the outputs named `outputs` within ftol, the gradients named
    `grads` within gtol."""
    compare(out["gpu"][0], out["cpu"][0], outputs, ftol)
    for gpu, cpu in zip(out["gpu"][1:], out["cpu"][1:]):
        compare(gpu, cpu, grads, gtol)


def copies(saved):
    """A workspace's arrays, copied: each backend's backward consumes its own."""
    return tuple(None if a is None else a.copy() for a in saved)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=list(LENGTHS))
@pytest.mark.parametrize("fwd", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("lbr", [False, True], ids=["reset_before", "linear_before_reset"])
@pytest.mark.parametrize("two_biases", [False, True], ids=["b", "b2"])
def test_gru(dtype, lengths, fwd, lbr, two_biases):
    seq = LENGTHS[lengths]
    x, hI, Wx, Wh, b, dLdh, dLdhL = arrays(
        1, dtype, (sL, bS, nIn), (bS, nOut), (nIn, 3 * nOut), (nOut, 3 * nOut),
        (2, 3 * nOut) if two_biases else (3 * nOut,), (sL, bS, nOut), (bS, nOut))
    dims = (sL, bS, nIn, nOut)
    ftol, gtol = tolerances(dtype)
    out = {}
    for name, backend in (("gpu", _gpu), ("cpu", _cpu)):
        h, gates, hc = gru.forward(backend, dims, x, hI, Wx, Wh, b, lbr, True, 1, seq, fwd)
        h_only, _, _ = gru.forward(backend, dims, x, hI, Wx, Wh, b, lbr, False, 1, seq, fwd)
        grads = gru.backward(backend, dims, x, hI, Wx, Wh, b, lbr, copies((h, gates, hc)), dLdh,
                             dLdhL, None, 1, seq, fwd)
        recomputed = gru.backward(backend, dims, x, hI, Wx, Wh, b, lbr, None, None, dLdhL, None,
                                  1, seq, fwd, input_grad=False)
        out[name] = (h, gates, hc, h_only), grads, recomputed
    compare_runs(out, ("h", "gates", "hc", "h (no workspace)"),
                 ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), ftol, gtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lbr", [False, True], ids=["reset_before", "linear_before_reset"])
def test_gru_gradients_arriving_at_the_gates(dtype, lbr):
    """The GRU block cell's path: dL/dgates as well as dL/dh, one step."""
    x, hI, Wx, Wh, b, dLdh, dLdg = arrays(2, dtype, (1, bS, nIn), (bS, nOut), (nIn, 3 * nOut),
                                          (nOut, 3 * nOut), (3 * nOut,), (1, bS, nOut),
                                          (1, bS, 3 * nOut))
    dims = (1, bS, nIn, nOut)
    gpu = gru.backward(_gpu, dims, x, hI, Wx, Wh, b, lbr, None, dLdh, None, dLdg, 1)
    cpu = gru.backward(_cpu, dims, x, hI, Wx, Wh, b, lbr, None, dLdh, None, dLdg, 1)
    compare(gpu, cpu, ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), tolerances(dtype)[1])


LSTM_CASES = {
    "plain": dict(),
    "peepholes_clip": dict(peepholes=True, clip=0.5),
    "activations": dict(peepholes=True, acts=((7, 0.0, 0.0), (6, 1.5, 0.7), (9, 0.0, 0.0))),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=list(LENGTHS))
@pytest.mark.parametrize("fwd", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("case", LSTM_CASES)
def test_lstm(dtype, lengths, fwd, case):
    options = LSTM_CASES[case]
    seq = LENGTHS[lengths]
    x, Wx, Wr, b, hI, cI, Wp, dLdh, dLdhL, dLdcL = arrays(
        3, dtype, (sL, bS, nIn), (nIn, 4 * nOut), (nOut, 4 * nOut), (4 * nOut,), (bS, nOut),
        (bS, nOut), (3 * nOut,), (sL, bS, nOut), (bS, nOut), (bS, nOut))
    Wp = Wp if options.get("peepholes") else None
    clip, acts = options.get("clip", 0.0), options.get("acts", _gpu.LSTM_ACTIVATIONS)
    dims = (sL, bS, nIn, nOut)
    ftol, gtol = tolerances(dtype)
    out = {}
    for name, backend in (("gpu", _gpu), ("cpu", _cpu)):
        h, hL, cL, c, gates, m = lstm.forward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, None, clip,
                                              seq, fwd, True, 1, acts)
        grads = lstm.backward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, None, clip, seq, fwd,
                              copies((h, c, gates, m)), dLdh, dLdhL, dLdcL, 1, acts)
        # No initial states, no bias, the forward recomputed, no dL/dx.
        zero_states = lstm.backward(backend, dims, x, Wx, Wr, None, None, None, Wp, None, clip,
                                    seq, fwd, None, dLdh, None, dLdcL, 1, acts,
                                    input_grad=False)
        out[name] = (h, hL, cL, c, gates), grads, zero_states
    compare_runs(out, ("h", "hL", "cL", "c", "gates"), LSTM_GRADS, ftol, gtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=list(LENGTHS))
@pytest.mark.parametrize("fwd", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("case", ["plain", "activations"])
def test_lstm_projection(dtype, lengths, fwd, case):
    """Wproj [nOut, nProj]: the state m·Wproj is nProj = 2 wide (the kernels' outputs m stay
    nOut wide)."""
    options, seq, nProj = LSTM_CASES[case], LENGTHS[lengths], 2
    x, Wx, Wr, b, hI, cI, Wp, Wproj, dLdh, dLdhL, dLdcL = arrays(
        4, dtype, (sL, bS, nIn), (nIn, 4 * nOut), (nProj, 4 * nOut), (4 * nOut,), (bS, nProj),
        (bS, nOut), (3 * nOut,), (nOut, nProj), (sL, bS, nProj), (bS, nProj), (bS, nOut))
    Wp = Wp if options.get("peepholes") else None
    acts = options.get("acts", _gpu.LSTM_ACTIVATIONS)
    dims = (sL, bS, nIn, nOut)
    ftol, gtol = tolerances(dtype)
    out = {}
    for name, backend in (("gpu", _gpu), ("cpu", _cpu)):
        forward = lstm.forward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, 0.0, seq, fwd,
                               True, 1, acts)
        h, hL, cL, c, gates, m = forward
        grads = lstm.backward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, 0.0, seq, fwd,
                              copies((h, c, gates, m)), dLdh, dLdhL, dLdcL, 1, acts)
        recomputed = lstm.backward(backend, dims, x, Wx, Wr, b, None, None, Wp, Wproj, 0.0, seq,
                                   fwd, None, dLdh, None, dLdcL, 1, acts)
        out[name] = forward, grads, recomputed
    compare_runs(out, ("h", "hL", "cL", "c", "gates", "m"), LSTM_GRADS, ftol, gtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=list(LENGTHS))
@pytest.mark.parametrize("fwd", [True, False], ids=["forward", "reverse"])
def test_lltm(dtype, lengths, fwd):
    seq = LENGTHS[lengths]
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = arrays(
        5, dtype, (sL, bS, nIn), (3 * nOut, nOut + nIn), (3 * nOut,), (bS, nOut), (bS, nOut),
        (sL, bS, nOut), (bS, nOut), (bS, nOut))
    dims = (sL, bS, nIn, nOut)
    ftol, gtol = tolerances(dtype)
    out = {}
    for name, backend in (("gpu", _gpu), ("cpu", _cpu)):
        h, hL, cL, gates, c = lltm.forward(backend, dims, x, W, b, hI, cI, seq, fwd, True, 1)
        grads = lltm.backward(backend, dims, x, W, hI, cI, fwd, copies((h, gates, c)), dLdh,
                              dLdhL, dLdcL, 1, lens=seq)
        out[name] = (h, hL, cL, gates, c), grads
    compare_runs(out, ("h", "hL", "cL", "gates", "c"), ("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"),
                 ftol, gtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_lltm_cell_pre_activations(dtype):
    """The tutorial cell's gate_weights: the last step's pre-activations, through z."""
    x, W, b, hI, cI = arrays(6, dtype, (1, bS, nIn), (3 * nOut, nOut + nIn), (3 * nOut,),
                             (bS, nOut), (bS, nOut))
    dims = (1, bS, nIn, nOut)
    z = {name: np.empty((bS, 3 * nOut), dtype) for name in ("gpu", "cpu")}
    lltm.forward(_gpu, dims, x, W, b, hI, cI, None, True, True, 1, z=z["gpu"])
    lltm.forward(_cpu, dims, x, W, b, hI, cI, None, True, True, 1, z=z["cpu"])
    assert_close(z["gpu"], z["cpu"], tolerances(dtype)[0], "z", dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=list(LENGTHS))
@pytest.mark.parametrize("fwd", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_rnn(dtype, lengths, fwd, activation):
    seq = LENGTHS[lengths]
    x, hI, Wx, Wh, b, dLdh, dLdhL = arrays(
        7, dtype, (sL, bS, nIn), (bS, nOut), (nIn, nOut), (nOut, nOut), (2, nOut),
        (sL, bS, nOut), (bS, nOut))
    dims = (sL, bS, nIn, nOut)
    ftol, gtol = tolerances(dtype)
    out = {}
    for name, backend in (("gpu", _gpu), ("cpu", _cpu)):
        h, hL, gates = rnn.forward(backend, dims, x, hI, Wx, Wh, b, activation, True, 1, seq, fwd)
        grads = rnn.backward(backend, dims, x, hI, Wx, Wh, b, activation, copies((h, gates)),
                             dLdh, dLdhL, 1, seq, fwd)
        out[name] = (h, hL, gates), grads
    compare_runs(out, ("h", "hL", "gates"), ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), ftol,
                 gtol)


@pytest.mark.parametrize("shape", [(0, bS), (sL, 0)], ids=["sL=0", "bS=0"])
def test_empty_problems(shape):
    steps, rows = shape
    x, hI, Wx, Wh, b = arrays(8, np.float64, (steps, rows, nIn), (rows, nOut), (nIn, 3 * nOut),
                              (nOut, 3 * nOut), (3 * nOut,))
    dims = (steps, rows, nIn, nOut)
    for lbr in (False, True):
        gpu = gru.backward(_gpu, dims, x, hI, Wx, Wh, b, lbr, None, None, None, None, 1)
        cpu = gru.backward(_cpu, dims, x, hI, Wx, Wh, b, lbr, None, None, None, None, 1)
        compare(gpu, cpu, ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), F64_TOL)
