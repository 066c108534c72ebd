"""The CPU backend: runs the one time loop (cells/_time_loop.pyx) on NumPy arrays.

cells._backend chooses a backend from a call's arrays; every backend module has these functions:

    empty(shape, dtype), zeros(shape, dtype)       new C-ordered arrays of the backend's kind
    gru_forward, gru_backward                      one per family and direction,
    lstm_forward, lstm_backward                    with the arguments and results documented
    lltm_forward, lltm_backward                    on each function here
    rnn_forward, rnn_backward

The contract of the family functions:
  - the face (cells.gru, cells.lstm, cells.lltm, cells.rnn) has validated every argument: arrays
    of the backend's kind and of one real dtype (in any memory order), shapes consistent with
    `dims` = (sL, bS, nIn, nOut) (sL = 1 for a cell: x is then [1, bS, nIn]), flags as bools,
    seq_len None or int64 [bS] in [0, sL], n_threads a positive int (resolved), a workspace made
    by this forward with this call's options and not used by a backward yet;
  - they return new C-ordered arrays of the inputs' dtype, plain (no NamedTuple): the face
    builds its results and workspaces from them;
  - a forward with keep=True also returns every step's saved arrays, in the field order of the
    family's workspace (GruWorkspace: h, gates, hc; LstmWorkspace: h, c, gates; LltmWorkspace:
    h, gates, c; RnnWorkspace: h, gates); without keep those are None;
  - a backward takes those saved arrays as `saved` (None: it runs the forward first), overwrites
    the ones the workspace check calls consumed with gradients and leaves them read-only; with
    input_grad=False it skips dL/dx and returns None for it.

Every family goes through the same two functions, `_forward` and `_backward`: they own the
buffers of a call (cells/_loop.pxd documents each one) and hold BLAS at one thread meanwhile.
"""
import numpy as np

from cells import _time_loop
from cells import _validate as check
from cells._params import (
    RNN_ACTIVATIONS, gru_bias_grad, gru_family, initial_state, kernel_clip, rnn_bias,
    rnn_bias_grad, split_gru_bias,
)
from cells._threads import sequential_blas


def empty(shape, dtype):
    """A new uninitialised C-ordered array."""
    return np.empty(shape, dtype)


def zeros(shape, dtype):
    """A new C-ordered array of zeros."""
    return np.zeros(shape, dtype)


def _c_order(a):
    """An array argument in C order (a copy only when it is not: the time loop reads C-contiguous
    arrays); None stays None."""
    return None if a is None else np.ascontiguousarray(a)


# ---------------------------------------------------------------------------------------------
# The time loop's buffers, for every family
# ---------------------------------------------------------------------------------------------

def _forward(family, dims, x, hI, keep, n_threads, seq_len, fwd, *, cI=None, Wx=None, Wh=None,
             W=None, b=None, P=None, Wproj=None, clip=np.inf, activation=0,
             lstm_acts=_time_loop.LSTM_ACTIVATIONS, gh=None):
    """Run the forward time loop of `family` (a key of _time_loop.FAMILIES) with its weights
    (Wx and Wh, or W in PyTorch's layout), b, P, Wproj, clip and activation as
    _time_loop.forward takes them. The state h has nState columns: nOut, or nProj with Wproj
    [nOut, nProj]. Returns (h [sL, bS, nState], hL [bS, nState], cL [bS, nOut] (None without a
    cell state), gates, c, aux, m): with keep, every step's gates [sL, bS, G], c [sL, bS, nOut]
    (families with a cell state), aux [sL, bS, nOut] (families that keep it) and m
    [sL, bS, nOut] (the unprojected output, with Wproj), else None. `gh` [bS, G], when given,
    keeps the last step's recurrent products (the LLTM: its pre-activations)."""
    sL, bS, nIn, nOut = dims
    fam = _time_loop.family(family)
    n_gates, cell_state, has_aux, aux_kept = fam.gates, fam.cell_state, fam.aux, fam.aux_kept
    G, dtype, steps = n_gates * nOut, x.dtype, (sL if keep else 1)
    nState = nOut if Wproj is None else Wproj.shape[1]
    gates = np.empty((steps, bS, G), dtype)
    c = np.empty((sL, bS, nOut), dtype) if keep and cell_state else None
    aux = np.empty(((steps if aux_kept else 1), bS, nOut), dtype) if has_aux else None
    m = np.empty((sL, bS, nOut), dtype) if keep and Wproj is not None else None
    h = np.empty((sL, bS, nState), dtype)
    hL = np.empty((bS, nState), dtype)
    cL = np.empty((bS, nOut), dtype) if cell_state else None
    with sequential_blas():
        _time_loop.forward(
            family, sL, bS, nIn, nOut, seq_len=seq_len, forward=fwd, keep=keep,
            n_threads=n_threads, x=_c_order(x), hI=_c_order(hI), cI=_c_order(cI),
            Wx=_c_order(Wx), Wh=_c_order(Wh), W=_c_order(W), b=_c_order(b), P=_c_order(P),
            Wproj=_c_order(Wproj), nProj=nState, clip=clip, activation=activation,
            lstm_acts=lstm_acts,
            # Training: every step's gates overwrite their own input projection.
            gx=gates if keep else np.empty((sL, bS, G), dtype),
            gh=np.empty((bS, G), dtype) if gh is None else gh,
            hs=np.empty((2, bS, nState), dtype),
            cs=np.empty((2, bS, nOut), dtype) if cell_state else None,
            ms=np.empty((bS, nOut), dtype) if Wproj is not None else None,
            gates=gates, c=c, aux=aux, m=m, h=h, hL=hL, cL=cL)
    if not keep:
        return h, hL, cL, None, None, None, None
    return h, hL, cL, gates, c, (aux if aux_kept else None), m


def _backward(family, dims, x, hI, saved, n_threads, seq_len, fwd, *, cI=None, dLdh=None,
              dLdhL=None, dLdcL=None, dLdgates=None, Wx=None, Wh=None, W=None, P=None,
              Wproj=None, clip=np.inf, activation=0, lstm_acts=_time_loop.LSTM_ACTIVATIONS,
              input_grad=True):
    """Run the backward time loop of `family` on `saved` = (h, gates, c, aux, m) of its forward
    with keep (c, aux, m None where the family has none, does not keep it or has no Wproj).
    Returns (dLdx [sL, bS, nIn] (None without input_grad: not computed), dLdhI [bS, nState],
    dLdcI [bS, nOut] or None, dLdWx, dLdWh (with W: dLdW, None), dLdb [G], dLdP like P or
    None, dLdWproj like Wproj or None); gates and a kept aux are consumed."""
    sL, bS, nIn, nOut = dims
    fam = _time_loop.family(family)
    n_gates, cell_state, has_aux, aux_kept = fam.gates, fam.cell_state, fam.aux, fam.aux_kept
    two_phases = fam.h_blocks < fam.gates
    G, dtype = n_gates * nOut, x.dtype
    nState = nOut if Wproj is None else Wproj.shape[1]
    projected = Wproj is not None
    h, gates, c, aux, m = saved
    gates = _c_order(gates)   # a copy only for a cell's gates put together by its face
    if has_aux and not aux_kept:
        aux = np.empty((sL, bS, nOut), dtype)
    dLdx = np.empty((sL, bS, nIn), dtype) if input_grad else None
    dLdhI = np.empty((bS, nState), dtype)
    dLdcI = np.empty((bS, nOut), dtype) if cell_state else None
    dLdb = np.empty(G, dtype)
    dLdP = None if P is None else np.empty(P.shape, dtype)
    dLdW = None if W is None else np.empty((G, nOut + nIn), dtype)
    dLdWx = None if W is not None else np.empty((nIn, G), dtype)
    dLdWh = None if W is not None else np.empty((nState, G), dtype)
    dLdWproj = np.empty((nOut, nState), dtype) if projected else None
    with sequential_blas():
        _time_loop.backward(
            family, sL, bS, nIn, nOut, seq_len=seq_len, forward=fwd, n_threads=n_threads,
            x=_c_order(x), hI=_c_order(hI), cI=_c_order(cI), Wx=_c_order(Wx), Wh=_c_order(Wh),
            W=_c_order(W), P=_c_order(P), Wproj=_c_order(Wproj), nProj=nState, clip=clip,
            activation=activation, lstm_acts=lstm_acts, h=_c_order(h), c=_c_order(c),
            gates=gates, aux=aux, m=_c_order(m), dLdh=_c_order(dLdh), dLdhL=_c_order(dLdhL),
            dLdcL=_c_order(dLdcL), dLdgates=_c_order(dLdgates), d=np.empty((2, bS, G), dtype),
            daux=np.empty((bS, nOut), dtype) if two_phases else None,
            ms=np.empty((bS, nOut), dtype) if projected else None,
            dh_step=np.empty((bS, nState), dtype) if projected else None,
            dh_steps=np.empty((sL, bS, nState), dtype) if projected else None,
            dLdx=dLdx, dLdhI=dLdhI, dLdcI=dLdcI, dLdWx=dLdWx, dLdWh=dLdWh, dLdW=dLdW,
            dLdb=dLdb, dLdP=dLdP, dLdWproj=dLdWproj)
    check.consume_workspace(gates, aux if aux_kept else None)
    if W is not None:
        dLdWx, dLdWh = dLdW, None
    return dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, dLdWproj


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------

def gru_forward(dims, x, hI, Wx, Wh, b, lbr, keep, n_threads, seq_len=None, fwd=True):
    """Run the GRU forward (linear_before_reset `lbr`); return (h [sL, bS, nOut], gates
    [sL, bS, 3nOut], hc [sL, bS, nOut]): with keep, gates and hc are every step's (hc None
    without lbr); without, both are None. h is 0 at padded steps."""
    bx, bhc = split_gru_bias(np, b, dims[3], lbr)
    h, _, _, gates, _, hc, _ = _forward(gru_family(lbr), dims, x, hI, keep, n_threads,
                                        seq_len, fwd, Wx=Wx, Wh=Wh, b=bx, P=bhc)
    return h, gates, hc


def gru_backward(dims, x, hI, Wx, Wh, b, lbr, saved, dLdh, dLdhLast, dLdgates, n_threads,
                 seq_len=None, fwd=True, input_grad=True):
    """Run the GRU backward on `saved` = (h, gates, hc) from gru_forward with keep (None: run
    it first); dLdh [sL, bS, nOut], dLdhLast [bS, nOut] and dLdgates [sL, bS, 3nOut] (the
    gradients arriving at the activated gates) may each be None. Return (dLdx [sL, bS, nIn],
    dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb in b's layout); gates and
    hc are consumed."""
    if saved is None:
        saved = gru_forward(dims, x, hI, Wx, Wh, b, lbr, True, n_threads, seq_len, fwd)
    h, gates, hc = saved
    _, bhc = split_gru_bias(np, b, dims[3], lbr)
    dLdx, dLdhI, _, dLdWx, dLdWh, dLdbx, dLdbhc, _ = _backward(
        gru_family(lbr), dims, x, hI, (h, gates, None, hc, None), n_threads, seq_len, fwd,
        dLdh=dLdh, dLdhL=dLdhLast, dLdgates=dLdgates, Wx=Wx, Wh=Wh, P=bhc,
        input_grad=input_grad)
    return dLdx, dLdhI, dLdWx, dLdWh, gru_bias_grad(np, b, dLdbx, dLdbhc, lbr)


# ---------------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------------

def lstm_forward(dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, keep, n_threads,
                 acts=_time_loop.LSTM_ACTIVATIONS):
    """Run the LSTM forward (b, hI, cI, Wp, Wproj may be None; clip is cell_clip, 0: none; acts
    the (code, alpha, beta) of the gate, cell and output activations); nState = nOut, or nProj
    with Wproj [nOut, nProj]. Return (h [sL, bS, nState], hL [bS, nState], cL [bS, nOut],
    c [sL, bS, nOut], gates [sL, bS, 4nOut], m [sL, bS, nOut]): with keep, c, gates and (with
    Wproj) m are every step's; without, all three are None."""
    _, bS, _, nOut = dims
    nState = nOut if Wproj is None else Wproj.shape[1]
    h, hL, cL, gates, c, _, m = _forward(
        "lstm", dims, x, initial_state(np, hI, bS, nState, x.dtype), keep, n_threads, lengths, fwd,
        cI=initial_state(np, cI, bS, nOut, x.dtype), Wx=Wx, Wh=Wr, b=b, P=Wp, Wproj=Wproj,
        clip=kernel_clip(clip), lstm_acts=acts)
    return h, hL, cL, c, gates, m


def lstm_backward(dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, saved, dLdh,
                  dLdhL, dLdcL, n_threads, acts=_time_loop.LSTM_ACTIVATIONS, input_grad=True):
    """Run the LSTM backward on `saved` = (h, c, gates, m) from lstm_forward with keep and the
    same acts (None: run it first); dLdh [sL, bS, nState], dLdhL [bS, nState] and dLdcL
    [bS, nOut] may each be None. Return (dLdx [sL, bS, nIn], dLdWx [nIn, 4nOut], dLdWr
    [nState, 4nOut], dLdb [4nOut] (None when b is None), dLdhI [bS, nState], dLdcI [bS, nOut],
    dLdWp [3nOut] (None when Wp is None), dLdWproj [nOut, nProj] (None when Wproj is None));
    gates are consumed."""
    _, bS, _, nOut = dims
    nState = nOut if Wproj is None else Wproj.shape[1]
    if saved is None:
        h, _, _, c, gates, m = lstm_forward(dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths,
                                            fwd, True, n_threads, acts)
    else:
        h, c, gates, m = saved
    dLdx, dLdhI, dLdcI, dLdWx, dLdWr, dLdb, dLdWp, dLdWproj = _backward(
        "lstm", dims, x, initial_state(np, hI, bS, nState, x.dtype), (h, gates, c, None, m),
        n_threads, lengths, fwd, cI=initial_state(np, cI, bS, nOut, x.dtype), dLdh=dLdh,
        dLdhL=dLdhL, dLdcL=dLdcL, Wx=Wx, Wh=Wr, P=Wp, Wproj=Wproj, clip=kernel_clip(clip),
        lstm_acts=acts, input_grad=input_grad)
    return dLdx, dLdWx, dLdWr, None if b is None else dLdb, dLdhI, dLdcI, dLdWp, dLdWproj


# ---------------------------------------------------------------------------------------------
# LLTM (its weights W [3S, S + nIn] in PyTorch's layout, columns h then x)
# ---------------------------------------------------------------------------------------------

def lltm_forward(dims, x, W, b, hI, cI, lens, fwd, keep, n_threads, z=None):
    """Run the LLTM forward; return (h [sL, bS, S], hL, cL [bS, S], gates [sL, bS, 3S],
    c [sL, bS, S]): with keep, gates and c are every step's; without, both are None. z, when
    given, is a [bS, 3S] array that receives the pre-activations of the last step (all rows
    active)."""
    h, hL, cL, gates, c, _, _ = _forward("lltm", dims, x, hI, keep, n_threads, lens, fwd,
                                         cI=cI, gh=z, W=W, b=b)
    return h, hL, cL, gates, c


def lltm_backward(dims, x, W, hI, cI, fwd, saved, dLdh, dLdhL, dLdcL, n_threads, b=None,
                  lens=None, input_grad=True):
    """Run the LLTM backward on `saved` = (h, gates, c) from lltm_forward with keep (None: run
    it first, on b and cI); dLdh [sL, bS, S], dLdhL and dLdcL [bS, S] may each be None. Return
    (dLdx [sL, bS, nIn], dLdW [3S, S+nIn], dLdb [3S], dLdhI, dLdcI [bS, S]); gates are
    consumed."""
    if saved is None:
        h, _, _, gates, c = lltm_forward(dims, x, W, b, hI, cI, lens, fwd, True, n_threads)
    else:
        h, gates, c = saved
    # The LLTM's backward does not read the initial cell state (c = cPrev + n∘i): the cell's
    # backward (lltm_backward) has none to give.
    _, bS, _, S = dims
    dLdx, dLdhI, dLdcI, dLdW, _, dLdb, _, _ = _backward(
        "lltm", dims, x, hI, (h, gates, c, None, None), n_threads, lens, fwd,
        cI=initial_state(np, cI, bS, S, x.dtype), dLdh=dLdh, dLdhL=dLdhL, dLdcL=dLdcL, W=W,
        input_grad=input_grad)
    return dLdx, dLdW, dLdb, dLdhI, dLdcI


# ---------------------------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------------------------

def rnn_forward(dims, x, hI, Wx, Wh, b, activation, keep, n_threads, seq_len=None, fwd=True):
    """Run the RNN forward (activation "tanh" or "relu"); return (h [sL, bS, nOut], hL
    [bS, nOut], gates [sL, bS, nOut]): gates, every step's act(z), with keep, else None."""
    h, hL, _, gates, _, _, _ = _forward(
        "rnn", dims, x, hI, keep, n_threads, seq_len, fwd, Wx=Wx, Wh=Wh, b=rnn_bias(b),
        activation=RNN_ACTIVATIONS[activation])
    return h, hL, gates


def rnn_backward(dims, x, hI, Wx, Wh, b, activation, saved, dLdh, dLdhLast, n_threads,
                 seq_len=None, fwd=True, input_grad=True):
    """Run the RNN backward on `saved` = (h, gates) from rnn_forward with keep (None: run it
    first); dLdh [sL, bS, nOut] and dLdhLast [bS, nOut] may each be None. Return (dLdx
    [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, nOut], dLdWh [nOut, nOut], dLdb in b's
    layout); gates are consumed."""
    if saved is None:
        h, _, gates = rnn_forward(dims, x, hI, Wx, Wh, b, activation, True, n_threads, seq_len,
                                  fwd)
    else:
        h, gates = saved
    dLdx, dLdhI, _, dLdWx, dLdWh, dLdb, _, _ = _backward(
        "rnn", dims, x, hI, (h, gates, None, None, None), n_threads, seq_len, fwd, dLdh=dLdh,
        dLdhL=dLdhLast, Wx=Wx, Wh=Wh, activation=RNN_ACTIVATIONS[activation],
        input_grad=input_grad)
    return dLdx, dLdhI, dLdWx, dLdWh, rnn_bias_grad(np, b, dLdb)
