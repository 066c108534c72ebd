"""GRU: libnd4j's gruCell, gruCellBp, gruTimeLoop, gruTimeLoopBp and its block cell.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Gate blocks
are ordered (r, u, c) = reset, update, candidate, and products are row-vector (z = x·W):

    r = σ(x·Wx_r + bx_r + hI·Wh_r + bh_r)
    u = σ(x·Wx_u + bx_u + hI·Wh_u + bh_u)
    c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c)     linear_before_reset=False
    c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c))     linear_before_reset=True
    h = (1-u)∘c + u∘hI

b is [3nOut] (bx alone, bh = 0, as libnd4j) or [2, 3nOut] (rows bx, bh: Keras reset_after,
cuDNN, PyTorch, ONNX). Every function takes float32 or float64 arrays of one dtype, in any
memory order, and returns new C-ordered arrays of that dtype. `n_threads` (None = OMP_NUM_THREADS
if set, else all cores) is the number of OpenMP threads; BLAS is held at one thread meanwhile.
"""
from typing import NamedTuple, Optional

import numpy as np

from cells import _gru
from cells import _validate as check
from cells._threads import resolve_n_threads, sequential_blas
from cells.convert import gru_from_block


class GruWorkspace(NamedTuple):
    """What gruTimeLoop(..., return_workspace=True) keeps for gruTimeLoopBp.

    Per step it holds (5nOut values per batch row with linear_before_reset, 4nOut without):
      h     [sL, bS, nOut]   the states (the array gruTimeLoop returns)
      gates [sL, bS, 3nOut]  the activated r, u, c
      hc    [sL, bS, nOut]   hPrev·Wh_c + bh_c, with linear_before_reset only (else None)
    and the options it was made with, which gruTimeLoopBp checks against its own: seq_len
    (int64 [bS] or None) and forward.

    gruTimeLoopBp consumes it: to keep a training step's memory at the workspace, it overwrites
    gates and hc with gradients and leaves them read-only. A second backward pass needs a new
    forward pass (as PyTorch frees a graph's saved tensors in backward()).
    """

    h: np.ndarray
    gates: np.ndarray
    hc: Optional[np.ndarray]
    seq_len: Optional[np.ndarray]
    forward: bool

    @property
    def linear_before_reset(self):
        """Which GRU made it: linear-before-reset ones keep hc."""
        return self.hc is not None


def gruCell(x, hI, Wx, Wh, b, *, linear_before_reset=False, n_threads=None):
    """One GRU step.

    x [bS, nIn], hI [bS, nOut], Wx [nIn, 3nOut], Wh [nOut, 3nOut], b [3nOut] or [2, 3nOut].
    Returns (gates, h): gates [bS, 3nOut] holds the activated r, u, c; h [bS, nOut].
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    _check_ranks(x, hI, x_ndim=2)
    dims = _check_gru(x[None], hI, Wx, Wh, b)
    h, ws = _forward(dims, x[None], hI, Wx, Wh, b, lbr, True, resolve_n_threads(n_threads))
    return ws.gates[0], h[0]


def gruCellBp(x, hI, Wx, Wh, b, dLdh, *, linear_before_reset=False, n_threads=None):
    """Gradients of one GRU step, given dLdh = dL/dh [bS, nOut] (the forward is recomputed).

    Returns (dLdx [bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut],
    dLdb with b's shape).
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    _check_ranks(x, hI, x_ndim=2)
    dims = _check_gru(x[None], hI, Wx, Wh, b)
    check.real_arrays(x=x, dLdh=dLdh)
    check.shape("dLdh", dLdh, hI.shape, "[bS, nOut]")
    dLdx, dLdhI, dLdWx, dLdWh, dLdb = _backward(
        dims, x[None], hI, Wx, Wh, b, lbr, None, dLdh[None], None, None,
        resolve_n_threads(n_threads))
    return dLdx[0], dLdhI, dLdWx, dLdWh, dLdb


def gruTimeLoop(x, hI, Wx, Wh, b, *, linear_before_reset=False, seq_len=None, forward=True,
                return_workspace=False, n_threads=None):
    """GRU over a sequence.

    x [sL, bS, nIn] (time-major, as libnd4j), hI [bS, nOut] the initial state, weights as gruCell.
    Returns h [sL, bS, nOut], the state after every step; with return_workspace=True returns
    (h, workspace), the GruWorkspace that lets gruTimeLoopBp skip recomputing this forward pass.

    seq_len [bS] (integers in [0, sL]; None: all sL): row b runs only its first seq_len[b] steps,
    and h is 0 after them (ONNX sequence_lens, PyTorch packed sequences). forward=False runs each
    row's valid steps in reverse time order, each output at its own time index (ONNX
    direction="reverse"). A row's final state is h[seq_len[b] - 1] going forward, h[0] in reverse
    (hI when seq_len[b] = 0).
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    _check_ranks(x, hI, x_ndim=3)
    dims = _check_gru(x, hI, Wx, Wh, b)
    lengths = check.seq_len(seq_len, dims[0], dims[1])
    h, ws = _forward(dims, x, hI, Wx, Wh, b, lbr, keep, resolve_n_threads(n_threads),
                     lengths, fwd)
    return (h, ws) if keep else h


def gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, *, dLdhLast=None, workspace=None,
                  linear_before_reset=False, seq_len=None, forward=True, n_threads=None):
    """Backpropagation through time for gruTimeLoop (with the same seq_len and forward).

    dLdh [sL, bS, nOut] is the gradient arriving at every step's output and dLdhLast [bS, nOut]
    the one arriving at each row's final state (each may be None: no gradient; dLdh at a row's
    padded steps is ignored). `workspace`, from gruTimeLoop(..., return_workspace=True) on the same
    inputs and options, skips recomputing the forward pass.
    Returns (dLdx [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut],
    dLdb with b's shape); the weight gradients are summed over time, and dLdx is 0 at padded
    steps.
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    fwd = check.flag("forward", forward)
    _check_ranks(x, hI, x_ndim=3)
    dims = _check_gru(x, hI, Wx, Wh, b, dLdh=dLdh, dLdhLast=dLdhLast)
    sL, bS, nIn, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS)
    if workspace is not None:
        _check_workspace(workspace, dims, x.dtype, lbr, lengths, fwd)
    return _backward(dims, x, hI, Wx, Wh, b, lbr, workspace, dLdh, dLdhLast, None,
                     resolve_n_threads(n_threads), lengths, fwd)


def gruBlockCell(x, hLast, Wru, Wc, bru, bc, *, n_threads=None):
    """libnd4j's block gruCell, TensorFlow's GRUBlockCell (reset-before):

        r, u = σ([x, hLast]·Wru + bru),  c = tanh([x, r∘hLast]·Wc + bc),  h = (1-u)∘c + u∘hLast

    x [bS, nIn], hLast [bS, nOut], Wru [nIn+nOut, 2nOut] (rows x then h, columns r then u),
    Wc [nIn+nOut, nOut], bru [2nOut], bc [nOut]. Returns (r, u, c, h), each [bS, nOut].
    """
    dims, Wx, Wh, b = _block_to_gru(x, hLast, Wru, Wc, bru, bc)
    h, ws = _forward(dims, x[None], hLast, Wx, Wh, b, False, True, resolve_n_threads(n_threads))
    r, u, c = np.split(ws.gates[0], 3, axis=1)
    return r.copy(), u.copy(), c.copy(), h[0]


def gruBlockCellBp(x, hLast, Wru, Wc, bru, bc, dLdr, dLdu, dLdc, dLdh, *, n_threads=None):
    """Gradients of gruBlockCell given dLdr, dLdu, dLdc, dLdh [bS, nOut]: the gradients arriving
    at its four outputs r, u, c, h (any may be None: no gradient). Unlike libnd4j's, they are
    plain output gradients; the chaining through h and c happens here.

    Returns (dLdx [bS, nIn], dLdhLast [bS, nOut], dLdWru [nIn+nOut, 2nOut], dLdWc [nIn+nOut, nOut],
    dLdbru [2nOut], dLdbc [nOut]).
    """
    dims, Wx, Wh, b = _block_to_gru(x, hLast, Wru, Wc, bru, bc,
                                    dLdr=dLdr, dLdu=dLdu, dLdc=dLdc, dLdh=dLdh)
    _, bS, nIn, nOut = dims
    for name, g in (("dLdr", dLdr), ("dLdu", dLdu), ("dLdc", dLdc), ("dLdh", dLdh)):
        if g is not None:
            check.shape(name, g, (bS, nOut), "[bS, nOut]")
    dLdgates = None
    if any(g is not None for g in (dLdr, dLdu, dLdc)):
        dLdgates = np.zeros((1, bS, 3 * nOut), dtype=x.dtype)
        for k, g in enumerate((dLdr, dLdu, dLdc)):
            if g is not None:
                dLdgates[0, :, k * nOut:(k + 1) * nOut] = g
    dLdx, dLdhLast, dLdWx, dLdWh, dLdb = _backward(
        dims, x[None], hLast, Wx, Wh, b, False, None,
        None if dLdh is None else dLdh[None], None, dLdgates, resolve_n_threads(n_threads))
    dLdWru = np.concatenate([dLdWx[:, :2 * nOut], dLdWh[:, :2 * nOut]])
    dLdWc = np.concatenate([dLdWx[:, 2 * nOut:], dLdWh[:, 2 * nOut:]])
    return dLdx[0], dLdhLast, dLdWru, dLdWc, dLdb[:2 * nOut].copy(), dLdb[2 * nOut:].copy()


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def _check_ranks(x, hI, x_ndim):
    """x and hI are real arrays of the right rank, so that their sizes can be read."""
    check.real_arrays(x=x, hI=hI)
    check.ndim("x", x, x_ndim, "[sL, bS, nIn]" if x_ndim == 3 else "[bS, nIn]")
    check.ndim("hI", hI, 2, "[bS, nOut]")


def _check_gru(x, hI, Wx, Wh, b, **grads):
    """Check the weights against x [sL, bS, nIn] and hI [bS, nOut]; return (sL, bS, nIn, nOut)."""
    check.real_arrays(optional=grads, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b, **grads)
    sL, bS, nIn = x.shape
    nOut = hI.shape[1]
    check.shape("hI", hI, (bS, nOut), "[bS, nOut] (bS from x)")
    check.shape("Wx", Wx, (nIn, 3 * nOut), "[nIn, 3*nOut]")
    check.shape("Wh", Wh, (nOut, 3 * nOut), "[nOut, 3*nOut]")
    if b.shape not in ((3 * nOut,), (2, 3 * nOut)):
        raise ValueError(f"b: expected shape {(3 * nOut,)} = [3*nOut] or {(2, 3 * nOut)} = "
                         f"[2, 3*nOut] (rows bx, bh), got {b.shape}")
    check.gemm_dims(**{"sL*bS": sL * bS, "nIn": nIn, "4*nOut": 4 * nOut})
    return sL, bS, nIn, nOut


def _check_workspace(ws, dims, dtype, lbr, lengths, fwd):
    sL, bS, _, nOut = dims
    arrays = {"h": (sL, bS, nOut), "gates": (sL, bS, 3 * nOut)}
    if lbr:
        arrays["hc"] = (sL, bS, nOut)
    check.workspace(ws, GruWorkspace, "gruTimeLoopBp", dtype, "x and hI", arrays,
                    ("gates", "hc"), linear_before_reset=lbr, seq_len=lengths, forward=fwd)


def _block_to_gru(x, hLast, Wru, Wc, bru, bc, **grads):
    """Validate the block cell's arguments and lay its weights out as gruCell's
    (reset-before, one bias; cells.convert.gru_from_block): Wx = [Wru | Wc] over the x rows,
    Wh likewise over the h rows."""
    check.real_arrays(optional=grads, x=x, hLast=hLast, Wru=Wru, Wc=Wc, bru=bru, bc=bc, **grads)
    check.ndim("x", x, 2, "[bS, nIn]")
    check.ndim("hLast", hLast, 2, "[bS, nOut]")
    (bS, nIn), nOut = x.shape, hLast.shape[1]
    check.shape("hLast", hLast, (bS, nOut), "[bS, nOut] (bS from x)")
    check.shape("Wru", Wru, (nIn + nOut, 2 * nOut), "[nIn+nOut, 2*nOut]")
    check.shape("Wc", Wc, (nIn + nOut, nOut), "[nIn+nOut, nOut]")
    check.shape("bru", bru, (2 * nOut,), "[2*nOut]")
    check.shape("bc", bc, (nOut,), "[nOut]")
    check.gemm_dims(**{"bS": bS, "nIn": nIn, "4*nOut": 4 * nOut})
    Wx, Wh, b = gru_from_block(Wru, Wc, bru, bc)
    return (1, bS, nIn, nOut), Wx, Wh, b


# ---------------------------------------------------------------------------------------------
# Calls into the kernels (cells/_gru.pyx)
# ---------------------------------------------------------------------------------------------

def _split_bias(b, nOut, lbr):
    """(bx, bhc): bx [3nOut] holds every bias that is a plain sum in the pre-activations
    (bh_r, bh_u always, bh_c too when reset-before); bhc [nOut] is the recurrent candidate bias
    that sits inside r∘(hPrev·Wh_c + bh_c) (linear_before_reset only, else None)."""
    if b.ndim == 1:
        return b, (np.zeros(nOut, b.dtype) if lbr else None)
    if not lbr:
        return b[0] + b[1], None
    bx = b[0].copy()
    bx[:2 * nOut] += b[1, :2 * nOut]
    return bx, b[1, 2 * nOut:]


def _forward(dims, x, hI, Wx, Wh, b, lbr, keep, n_threads, seq_len=None, fwd=True):
    """Run the forward kernel; return (h, GruWorkspace or None). seq_len is None or the
    validated int64 lengths."""
    sL, bS, nIn, nOut = dims
    G, steps, dtype = 3 * nOut, (sL if keep else 1), x.dtype
    bx, bhc = _split_bias(b, nOut, lbr)
    gates = np.empty((steps, bS, G), dtype)
    hc = np.empty((steps, bS, nOut), dtype) if lbr else None
    h = (np.empty if seq_len is None else np.zeros)((sL, bS, nOut), dtype)
    f = check.flat
    # Training: every step's gates overwrite its own input projection, so gx needs no memory.
    gx = f(gates) if keep else np.empty(sL * bS * G, dtype)
    with sequential_blas():
        _gru.gru_forward(
            lbr, sL, bS, nIn, nOut, f(x), f(hI), f(Wx), f(Wh), f(bx), f(bhc), seq_len, fwd,
            gx, np.empty(bS * G, dtype), np.zeros(bS * nOut, dtype),
            np.empty(2 * bS * nOut, dtype), keep, f(gates), f(hc), f(h), n_threads)
    if not keep:
        return h, None
    return h, GruWorkspace(h, gates, hc, None if seq_len is None else seq_len.copy(), fwd)


def _backward(dims, x, hI, Wx, Wh, b, lbr, ws, dLdh, dLdhLast, dLdgates, n_threads,
              seq_len=None, fwd=True):
    """Run the backward kernel (after the forward one when `ws` is None); return the gradients
    (dLdx, dLdhI, dLdWx, dLdWh, dLdb) with dLdb in b's layout."""
    sL, bS, nIn, nOut = dims
    G, dtype = 3 * nOut, x.dtype
    if ws is None:
        _, ws = _forward(dims, x, hI, Wx, Wh, b, lbr, True, n_threads, seq_len, fwd)
    dLdx = np.empty((sL, bS, nIn), dtype)
    dLdhI = np.empty((bS, nOut), dtype)
    dLdWx = np.empty((nIn, G), dtype)
    dLdWh = np.empty((nOut, G), dtype)
    dLdbx = np.empty(G, dtype)
    dLdbhc = np.empty(nOut, dtype) if lbr else None
    rh = None if lbr else np.empty(sL * bS * nOut, dtype)
    f = check.flat
    with sequential_blas():
        _gru.gru_backward(
            lbr, sL, bS, nIn, nOut, f(x), f(hI), f(Wx), f(Wh), seq_len, fwd,
            f(ws.h), f(ws.gates), f(ws.hc), f(dLdh), f(dLdhLast), f(dLdgates),
            np.empty(2 * bS * G, dtype), np.empty(2 * bS * nOut, dtype),
            np.empty(bS * nOut, dtype), rh,
            f(dLdx), f(dLdhI), f(dLdWx), f(dLdWh), dLdbx, dLdbhc, n_threads)
    check.consume_workspace(ws.gates, ws.hc)
    return dLdx, dLdhI, dLdWx, dLdWh, _bias_grad(b, dLdbx, dLdbhc, lbr)


def _bias_grad(b, dLdbx, dLdbhc, lbr):
    """dL/db in b's layout, from dLdbx = Σ dz and (lbr) dLdbhc = Σ dL/dhc. The recurrent biases
    bh_r, bh_u (and bh_c when reset-before) are plain sums with bx, so they share its gradient."""
    if b.ndim == 1:
        return dLdbx
    dLdb = np.stack([dLdbx, dLdbx])
    if lbr:
        dLdb[1, 2 * dLdbhc.shape[0]:] = dLdbhc
    return dLdb
