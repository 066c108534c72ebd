"""LSTM: libnd4j's lstmLayerCell, lstmLayerCellBp and the lstmLayer time loop with its backward.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Gate blocks
are ordered (i, f, g, o) = input, forget, cell candidate, output (libnd4j lstmLayer, PyTorch),
products are row-vector (z = x·W), and the optional peephole weights Wp [3nOut] are in blocks
(i, f, o):

    i = σ(x·Wx_i + hI·Wr_i + Wp_i∘cI + b_i)
    f = σ(x·Wx_f + hI·Wr_f + Wp_f∘cI + b_f)
    g = tanh(x·Wx_g + hI·Wr_g + b_g)
    c = clip(f∘cI + i∘g)                       clip to [-cell_clip, cell_clip] when cell_clip > 0
    o = σ(x·Wx_o + hI·Wr_o + Wp_o∘c + b_o)     (the output peephole sees the new, clipped c)
    h = o∘tanh(c)

Wx [nIn, 4nOut], Wr [nOut, 4nOut], b [4nOut] or None (no bias), hI and cI [bS, nOut] or None
(zeros). Clipping passes no gradient to the elements it clips (|f∘cI + i∘g| >= cell_clip).

Sequences are time-major, x [sL, bS, nIn]. With seq_len [bS] (integers in [0, sL]) row b runs
only its first seq_len[b] time steps; its outputs after them are 0 and its final state is the
state after its last valid step (hI, cI when seq_len[b] = 0). forward=False runs each row's
valid steps from the last to the first (ONNX direction="reverse"); every output stays at its
own time index.

Every function takes float32 or float64 arrays of one dtype, in any memory order, and returns new
C-ordered arrays of that dtype. `n_threads` (None = OMP_NUM_THREADS if set, else all cores) is
the number of OpenMP threads; BLAS is held at one thread meanwhile.
"""
import numbers
from typing import NamedTuple, Optional

import numpy as np

from cells import _lstm
from cells import _validate as check
from cells._threads import resolve_n_threads, sequential_blas


class LstmWorkspace(NamedTuple):
    """What lstmLayerTimeLoop(..., return_workspace=True) keeps for lstmLayerTimeLoopBp.

    Per step it holds 6nOut values per batch row, indexed by time (0 at a row's padded steps):
      h     [sL, bS, nOut]   the outputs (the array lstmLayerTimeLoop returns)
      c     [sL, bS, nOut]   the cell states (after clipping)
      gates [sL, bS, 4nOut]  the activated i, f, g, o
    and the configuration it was made with, which lstmLayerTimeLoopBp checks against its own:
      seq_len    int64 [bS] or None
      forward    bool
      cell_clip  float
      peepholes  bool (whether Wp was given)

    lstmLayerTimeLoopBp consumes it: to keep a training step's memory at the workspace, it
    overwrites gates with gradients and leaves them read-only. A second backward pass needs a new
    forward pass (as PyTorch frees a graph's saved tensors in backward()).
    """

    h: np.ndarray
    c: np.ndarray
    gates: np.ndarray
    seq_len: Optional[np.ndarray]
    forward: bool
    cell_clip: float
    peepholes: bool


def lstmLayerCell(x, Wx, Wr, b, hI, cI, *, Wp=None, cell_clip=0.0, n_threads=None):
    """One LSTM step.

    x [bS, nIn], Wx [nIn, 4nOut], Wr [nOut, 4nOut], b [4nOut] or None, hI and cI [bS, nOut] or
    None (zeros), Wp [3nOut] or None. Returns (h, c), each [bS, nOut].
    """
    clip = _cell_clip(cell_clip)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, x_ndim=2)
    _, hL, cL, _ = _forward(dims, x[None], Wx, Wr, b, hI, cI, Wp, clip, None, True, False,
                            resolve_n_threads(n_threads))
    return hL, cL


def lstmLayerCellBp(x, Wx, Wr, b, hI, cI, dLdh, dLdc, *, Wp=None, cell_clip=0.0,
                    n_threads=None):
    """Gradients of one LSTM step (the forward is recomputed).

    dLdh and dLdc [bS, nOut] are the gradients arriving at the outputs h and c (either may be
    None: no gradient). Returns (dLdx [bS, nIn], dLdWx [nIn, 4nOut], dLdWr [nOut, 4nOut],
    dLdb [4nOut] (None when b is None), dLdhI [bS, nOut], dLdcI [bS, nOut], dLdWp [3nOut] (None
    when Wp is None)); dLdhI and dLdcI are returned even when hI, cI are None (zeros).
    """
    clip = _cell_clip(cell_clip)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, x_ndim=2, dLdh=dLdh, dLdc=dLdc)
    _, bS, _, nOut = dims
    for name, g in (("dLdh", dLdh), ("dLdc", dLdc)):
        if g is not None:
            check.shape(name, g, (bS, nOut), "[bS, nOut]")
    dLdx, *grads = _backward(dims, x[None], Wx, Wr, b, hI, cI, Wp, clip, None, True, None,
                             None, dLdh, dLdc, resolve_n_threads(n_threads))
    return (dLdx[0], *grads)


def lstmLayerTimeLoop(x, Wx, Wr, b, hI, cI, *, Wp=None, seq_len=None, cell_clip=0.0,
                      forward=True, return_workspace=False, n_threads=None):
    """LSTM over a sequence.

    x [sL, bS, nIn] (time-major, as libnd4j), the rest as lstmLayerCell; seq_len [bS] or None
    and forward as in the module docstring. Returns (h, hL, cL): h [sL, bS, nOut] the output of
    every step, hL and cL [bS, nOut] the final states. With return_workspace=True returns
    (h, hL, cL, workspace), the LstmWorkspace that lets lstmLayerTimeLoopBp skip recomputing
    this forward pass.
    """
    clip = _cell_clip(cell_clip)
    fwd = check.flag("forward", forward)
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, x_ndim=3)
    lengths = check.seq_len(seq_len, dims[0], dims[1])
    h, hL, cL, ws = _forward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, keep,
                             resolve_n_threads(n_threads))
    return (h, hL, cL, ws) if keep else (h, hL, cL)


def lstmLayerTimeLoopBp(x, Wx, Wr, b, hI, cI, dLdh, *, dLdhL=None, dLdcL=None, Wp=None,
                        seq_len=None, cell_clip=0.0, forward=True, workspace=None,
                        n_threads=None):
    """Backpropagation through time for lstmLayerTimeLoop.

    dLdh [sL, bS, nOut] is the gradient arriving at every step's output, dLdhL and dLdcL
    [bS, nOut] the ones arriving at the final states (each may be None: no gradient). `workspace`,
    from lstmLayerTimeLoop(..., return_workspace=True) on the same inputs and options, skips
    recomputing the forward. Returns (dLdx [sL, bS, nIn], dLdWx [nIn, 4nOut], dLdWr
    [nOut, 4nOut], dLdb [4nOut] or None, dLdhI [bS, nOut], dLdcI [bS, nOut], dLdWp [3nOut] or
    None), as lstmLayerCellBp; the weight gradients are summed over time.
    """
    clip = _cell_clip(cell_clip)
    fwd = check.flag("forward", forward)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, x_ndim=3, dLdh=dLdh, dLdhL=dLdhL, dLdcL=dLdcL)
    sL, bS, _, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhL=dLdhL, dLdcL=dLdcL)
    lengths = check.seq_len(seq_len, sL, bS)
    if workspace is not None:
        _check_workspace(workspace, dims, x.dtype, lengths, fwd, clip, Wp is not None)
    return _backward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, workspace, dLdh,
                     dLdhL, dLdcL, resolve_n_threads(n_threads))


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def _cell_clip(value):
    """cell_clip: a real number >= 0 (0: no clipping)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"cell_clip: expected a float >= 0, got {value!r}")
    if not float(value) >= 0:
        raise ValueError(f"cell_clip: expected a float >= 0, got {value!r}")
    return float(value)


def _check_lstm(x, Wx, Wr, b, hI, cI, Wp, x_ndim, **grads):
    """Check every array against x [sL, bS, nIn] (or [bS, nIn]) and Wr [nOut, 4nOut]; return
    (sL, bS, nIn, nOut), with sL = 1 for a cell."""
    check.real_arrays(optional=("b", "hI", "cI", "Wp", *grads), x=x, Wx=Wx, Wr=Wr, b=b, hI=hI,
                      cI=cI, Wp=Wp, **grads)
    check.ndim("x", x, x_ndim, "[sL, bS, nIn]" if x_ndim == 3 else "[bS, nIn]")
    check.ndim("Wr", Wr, 2, "[nOut, 4*nOut]")
    sL, bS, nIn = x.shape if x_ndim == 3 else (1,) + x.shape
    nOut = Wr.shape[0]
    check.shape("Wr", Wr, (nOut, 4 * nOut), "[nOut, 4*nOut]")
    check.shape("Wx", Wx, (nIn, 4 * nOut), "[nIn, 4*nOut] (nIn from x, nOut from Wr)")
    if b is not None:
        check.shape("b", b, (4 * nOut,), "[4*nOut] (nOut from Wr)")
    for name, a in (("hI", hI), ("cI", cI)):
        if a is not None:
            check.shape(name, a, (bS, nOut), "[bS, nOut] (bS from x, nOut from Wr)")
    if Wp is not None:
        check.shape("Wp", Wp, (3 * nOut,), "[3*nOut] (nOut from Wr)")
    check.gemm_dims(**{"sL*bS": sL * bS, "nIn": nIn, "4*nOut": 4 * nOut})
    return sL, bS, nIn, nOut


def _check_workspace(ws, dims, dtype, lengths, fwd, clip, peepholes):
    sL, bS, _, nOut = dims
    check.workspace(ws, LstmWorkspace, "lstmLayerTimeLoopBp", dtype, "x and Wr",
                    {"h": (sL, bS, nOut), "c": (sL, bS, nOut), "gates": (sL, bS, 4 * nOut)},
                    ("gates",), seq_len=lengths, forward=fwd, cell_clip=clip,
                    peepholes=peepholes)


# ---------------------------------------------------------------------------------------------
# Calls into the kernels (cells/_lstm.pyx)
# ---------------------------------------------------------------------------------------------

def _state(a, bS, nOut, dtype):
    """An initial state: `a`, or zeros when it is None."""
    return np.zeros((bS, nOut), dtype) if a is None else a


def _kernel_clip(clip):
    """The kernels' clip bound: +inf stands for no clipping (cell_clip = 0)."""
    return clip if clip > 0 else np.inf


def _forward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, keep, n_threads):
    """Run the forward kernel; return (h, hL, cL, LstmWorkspace or None)."""
    sL, bS, nIn, nOut = dims
    G, steps, dtype = 4 * nOut, (sL if keep else 1), x.dtype
    gates = np.empty((steps, bS, G), dtype)
    c = np.empty((sL, bS, nOut), dtype) if keep else None
    h = np.empty((sL, bS, nOut), dtype)
    hL = np.empty((bS, nOut), dtype)
    cL = np.empty((bS, nOut), dtype)
    f = check.flat
    # Training: every step's gates overwrite its own input projection, so gx needs no memory.
    gx = f(gates) if keep else np.empty(sL * bS * G, dtype)
    with sequential_blas():
        _lstm.lstm_forward(
            sL, bS, nIn, nOut, f(x), f(_state(hI, bS, nOut, dtype)),
            f(_state(cI, bS, nOut, dtype)), f(Wx), f(Wr), f(b), f(Wp), _kernel_clip(clip),
            lengths, fwd, gx, np.empty(bS * G, dtype),
            np.empty(2 * bS * nOut, dtype), np.empty(2 * bS * nOut, dtype),
            f(gates), f(c), keep, f(h), f(hL), f(cL), n_threads)
    ws = None
    if keep:
        ws = LstmWorkspace(h, c, gates, None if lengths is None else lengths.copy(), fwd, clip,
                           Wp is not None)
    return h, hL, cL, ws


def _backward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, ws, dLdh, dLdhL, dLdcL,
              n_threads):
    """Run the backward kernel (after the forward one when `ws` is None); return
    (dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp)."""
    sL, bS, nIn, nOut = dims
    G, dtype = 4 * nOut, x.dtype
    if ws is None:
        *_, ws = _forward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, True, n_threads)
    dLdx = np.empty((sL, bS, nIn), dtype)
    dLdhI = np.empty((bS, nOut), dtype)
    dLdcI = np.empty((bS, nOut), dtype)
    dLdWx = np.empty((nIn, G), dtype)
    dLdWr = np.empty((nOut, G), dtype)
    dLdb = None if b is None else np.empty(G, dtype)
    dLdWp = None if Wp is None else np.empty(3 * nOut, dtype)
    f = check.flat
    with sequential_blas():
        _lstm.lstm_backward(
            sL, bS, nIn, nOut, f(x), f(_state(hI, bS, nOut, dtype)),
            f(_state(cI, bS, nOut, dtype)), f(Wx), f(Wr), f(Wp), _kernel_clip(clip), lengths,
            fwd, f(ws.h), f(ws.c), f(ws.gates), f(dLdh), f(dLdhL), f(dLdcL),
            np.empty(2 * bS * G, dtype),
            f(dLdx), f(dLdhI), f(dLdcI), f(dLdWx), f(dLdWr), dLdb, dLdWp, n_threads)
    check.consume_workspace(ws.gates)
    return dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp
