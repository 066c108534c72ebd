"""The CPU backend: runs the kernels of cells/_gru.pyx, _lstm.pyx and _lltm.pyx on NumPy arrays.

cells._backend chooses a backend from a call's arrays; every backend module has these functions:

    empty(shape, dtype), zeros(shape, dtype)       new C-ordered arrays of the backend's kind
    gru_forward, gru_backward                      one per family and direction,
    lstm_forward, lstm_backward                    with the arguments and results documented
    lltm_forward, lltm_backward                    on each function here

The contract of the family functions:
  - the face (cells.gru, cells.lstm, cells.lltm) has validated every argument: arrays of the
    backend's kind and of one real dtype (in any memory order), shapes consistent with `dims`
    = (sL, bS, nIn, nOut) (sL = 1 for a cell: x is then [1, bS, nIn]), flags as bools, seq_len
    None or int64 [bS] in [0, sL], n_threads a positive int (resolved), a workspace made by this
    forward with this call's options and not used by a backward yet;
  - they return new C-ordered arrays of the inputs' dtype, plain (no NamedTuple): the face
    builds its results and workspaces from them;
  - a forward with keep=True also returns every step's saved arrays, in the field order of the
    family's workspace (GruWorkspace: h, gates, hc; LstmWorkspace: h, c, gates; LltmWorkspace:
    h, gates, c); without keep those are None;
  - a backward takes those saved arrays as `saved` (None: it runs the forward first); it
    overwrites the gates (and the GRU's hc) with gradients and leaves them read-only
    (cells._validate.consume_workspace), so that a workspace serves one backward pass only.

Each kernel is called from exactly one function here.
"""
import numpy as np

from cells import _gru, _lltm, _lstm
from cells import _validate as check
from cells._threads import sequential_blas


def empty(shape, dtype):
    """A new uninitialised C-ordered array."""
    return np.empty(shape, dtype)


def zeros(shape, dtype):
    """A new C-ordered array of zeros."""
    return np.zeros(shape, dtype)


# ---------------------------------------------------------------------------------------------
# GRU (cells/_gru.pyx)
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


def gru_forward(dims, x, hI, Wx, Wh, b, lbr, keep, n_threads, seq_len=None, fwd=True):
    """Run the GRU forward kernel; return (h [sL, bS, nOut], gates [sL, bS, 3nOut],
    hc [sL, bS, nOut]): with keep, gates and hc are every step's (hc None without
    linear_before_reset `lbr`); without, both are None. h is 0 at padded steps."""
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
    return (h, gates, hc) if keep else (h, None, None)


def gru_backward(dims, x, hI, Wx, Wh, b, lbr, saved, dLdh, dLdhLast, dLdgates, n_threads,
                 seq_len=None, fwd=True):
    """Run the GRU backward kernel on `saved` = (h, gates, hc) from gru_forward with keep (None:
    run it first); dLdh [sL, bS, nOut], dLdhLast [bS, nOut] and dLdgates [sL, bS, 3nOut] (the
    gradients arriving at the activated gates) may each be None. Return (dLdx [sL, bS, nIn],
    dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb in b's layout); gates and
    hc are consumed."""
    sL, bS, nIn, nOut = dims
    G, dtype = 3 * nOut, x.dtype
    if saved is None:
        saved = gru_forward(dims, x, hI, Wx, Wh, b, lbr, True, n_threads, seq_len, fwd)
    h, gates, hc = saved
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
            f(h), f(gates), f(hc), f(dLdh), f(dLdhLast), f(dLdgates),
            np.empty(2 * bS * G, dtype), np.empty(2 * bS * nOut, dtype),
            np.empty(bS * nOut, dtype), rh,
            f(dLdx), f(dLdhI), f(dLdWx), f(dLdWh), dLdbx, dLdbhc, n_threads)
    check.consume_workspace(gates, hc)
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


# ---------------------------------------------------------------------------------------------
# LSTM (cells/_lstm.pyx)
# ---------------------------------------------------------------------------------------------

def _state(a, bS, nOut, dtype):
    """An initial state: `a`, or zeros when it is None."""
    return np.zeros((bS, nOut), dtype) if a is None else a


def _kernel_clip(clip):
    """The kernels' clip bound: +inf stands for no clipping (cell_clip = 0)."""
    return clip if clip > 0 else np.inf


def lstm_forward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, keep, n_threads):
    """Run the LSTM forward kernel (b, hI, cI, Wp may be None; clip is cell_clip, 0: none);
    return (h [sL, bS, nOut], hL, cL [bS, nOut], c [sL, bS, nOut], gates [sL, bS, 4nOut]):
    with keep, c and gates are every step's; without, both are None."""
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
    return (h, hL, cL, c, gates) if keep else (h, hL, cL, None, None)


def lstm_backward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd, saved, dLdh, dLdhL, dLdcL,
                  n_threads):
    """Run the LSTM backward kernel on `saved` = (h, c, gates) from lstm_forward with keep
    (None: run it first); dLdh [sL, bS, nOut], dLdhL and dLdcL [bS, nOut] may each be None.
    Return (dLdx [sL, bS, nIn], dLdWx [nIn, 4nOut], dLdWr [nOut, 4nOut], dLdb [4nOut] (None
    when b is None), dLdhI, dLdcI [bS, nOut], dLdWp [3nOut] (None when Wp is None)); gates are
    consumed."""
    sL, bS, nIn, nOut = dims
    G, dtype = 4 * nOut, x.dtype
    if saved is None:
        h, _, _, c, gates = lstm_forward(dims, x, Wx, Wr, b, hI, cI, Wp, clip, lengths, fwd,
                                         True, n_threads)
    else:
        h, c, gates = saved
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
            fwd, f(h), f(c), f(gates), f(dLdh), f(dLdhL), f(dLdcL),
            np.empty(2 * bS * G, dtype),
            f(dLdx), f(dLdhI), f(dLdcI), f(dLdWx), f(dLdWr), dLdb, dLdWp, n_threads)
    check.consume_workspace(gates)
    return dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp


# ---------------------------------------------------------------------------------------------
# LLTM (cells/_lltm.pyx)
# ---------------------------------------------------------------------------------------------

def lltm_forward(dims, x, W, b, hI, cI, lens, fwd, keep, n_threads, z=None):
    """Run the LLTM forward kernel; return (h [sL, bS, S], hL, cL [bS, S], gates [sL, bS, 3S],
    c [sL, bS, S]): with keep, gates and c are every step's; without, both are None. z, when
    given, is a [bS, 3S] array that receives the pre-activations of the last step (all rows
    active)."""
    sL, bS, nIn, S = dims
    G, dtype = 3 * S, x.dtype
    gates = np.empty((sL if keep else 1, bS, G), dtype)
    c = np.empty((sL, bS, S), dtype) if keep else None
    h = np.empty((sL, bS, S), dtype)
    hL = np.empty((bS, S), dtype)
    cL = np.empty((bS, S), dtype)
    z = np.empty((bS, G), dtype) if z is None else z
    f = check.flat
    # Training: every step's gates overwrite its own input projection, so gx needs no memory.
    gx = f(gates) if keep else np.empty(sL * bS * G, dtype)
    with sequential_blas():
        _lltm.lltm_forward(
            fwd, sL, bS, nIn, S, f(x), f(W), f(b), f(hI), f(cI), lens, gx, f(z),
            np.empty(2 * bS * S, dtype), np.empty(2 * bS * S, dtype), f(gates), f(c), keep,
            f(h), f(hL), f(cL), n_threads)
    return (h, hL, cL, gates, c) if keep else (h, hL, cL, None, None)


def lltm_backward(dims, x, W, hI, cI, fwd, saved, dLdh, dLdhL, dLdcL, n_threads, b=None,
                  lens=None):
    """Run the LLTM backward kernel on `saved` = (h, gates, c) from lltm_forward with keep
    (None: run it first, on b and cI); dLdh [sL, bS, S], dLdhL and dLdcL [bS, S] may each be
    None. Return (dLdx [sL, bS, nIn], dLdW [3S, S+nIn], dLdb [3S], dLdhI, dLdcI [bS, S]); gates
    are consumed."""
    sL, bS, nIn, S = dims
    G, dtype = 3 * S, x.dtype
    if saved is None:
        h, _, _, gates, c = lltm_forward(dims, x, W, b, hI, cI, lens, fwd, True, n_threads)
    else:
        h, gates, c = saved
    dLdx = np.empty((sL, bS, nIn), dtype)
    dLdW = np.empty((G, S + nIn), dtype)
    dLdb = np.empty(G, dtype)
    dLdhI = np.empty((bS, S), dtype)
    dLdcI = np.empty((bS, S), dtype)
    f = check.flat
    with sequential_blas():
        _lltm.lltm_backward(
            fwd, sL, bS, nIn, S, f(x), f(W), f(hI), lens, f(h), f(gates), f(c),
            f(dLdh), f(dLdhL), f(dLdcL), np.empty(2 * bS * G, dtype),
            f(dLdx), f(dLdW), dLdb, f(dLdhI), f(dLdcI), n_threads)
    check.consume_workspace(gates)
    return dLdx, dLdW, dLdb, dLdhI, dLdcI
