"""The CPU backend: runs the one time loop (cells/_time_loop.pyx) on NumPy arrays.

cells._backend chooses a backend from a call's arrays; every backend module has its two loops,
which the families' mappings (cells/_families/) call with each family's arrays and options:

    forward(family, dims, x, hI, keep, n_threads, seq_len, fwd, **arrays and options)
        -> (h, hL, cL, gates, c, aux, m)
    backward(family, dims, x, hI, saved, n_threads, seq_len, fwd, **arrays and options)
        -> (dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, dLdWproj)

`family` is a row of the C table (cells._family_table.FAMILIES); forward's and backward's
docstrings below say what each array and option is. The contract:
  - the face (cells.gru, cells.lstm, ...) has validated every argument: arrays of the
    backend's kind and of one real dtype (in any memory order), shapes consistent with
    `dims` = (sL, bS, nIn, nOut) (sL = 1 for a cell: x is then [1, bS, nIn]), flags as bools,
    seq_len None or int64 [bS] in [0, sL], n_threads None (cells._threads.time_loop_threads
    chooses) or a positive int, a workspace made by this forward with this call's options and
    not used by a backward yet;
  - they return new C-ordered arrays of the inputs' dtype, plain (no NamedTuple): the face
    builds its results and workspaces from them. One exception: where Wx and Wh are in
    PyTorch's layout (cells._arrays.torch_layout: both F-ordered), dL/dWx and dL/dWh are
    F-ordered too (this loop reads such weights where they are: weights_as_read);
  - a forward with keep=True also returns every step's saved arrays; without keep those are
    None;
  - a backward takes those saved arrays as `saved`, overwrites gates (and a kept aux) with
    gradients and leaves them read-only; with input_grad=False it skips dL/dx and returns None
    for it.

Both loops own the buffers of a call (cells/_loop_call.pxd documents each one); a backward that may
run BLAS (for a large weight gradient) holds it at one thread meanwhile.
"""
import contextlib

import numpy as np

from cells import _arrays, _family_table, _time_loop
from cells._family_table import LSTM_ACTIVATIONS
from cells._threads import openmp_pool, sequential_blas, time_loop_threads


def _c_order(a):
    """An array argument in C order (a copy only when it is not: the time loop reads C-contiguous
    arrays); None stays None."""
    return None if a is None else np.ascontiguousarray(a)


def weights_as_read(Wx, Wh):
    """(transposed, Wx, Wh) as the time loop reads the weights Wx [nIn, G] and Wh [nState, G]
    (None for the LLTM's W): in PyTorch's layout (torch_layout), their C-ordered transposes,
    read where they are; else in C order (a copy of one that is not)."""
    if _arrays.torch_layout(Wx, Wh):
        return True, Wx.T, Wh.T
    return False, _c_order(Wx), _c_order(Wh)


def _loop_order(a, transposed):
    """A weight's gradient as the loop writes it: its transpose where the weights are read
    transposed; None stays None."""
    return a.T if transposed and a is not None else a


def _weight_gradient(allocate, shape, dtype, transposed):
    """A new array (from `allocate`: _allocator's) for a weight's gradient [K, G]: F-ordered
    where the weights are read transposed (the loop then writes its C-ordered transpose)."""
    return allocate(shape[::-1], dtype).T if transposed else allocate(shape, dtype)


def _allocator(n_threads):
    """How a call on n_threads allocates the arrays its loop writes: on more than one thread,
    starting on a cache line (_time_loop.line_aligned_empty), so that the threads' blocks of the
    units share no line; on one, np.empty, as no other thread writes beside it."""
    return _time_loop.line_aligned_empty if n_threads > 1 else np.empty


def _threads(fam, dims, nState):
    """The threads of a call of family row `fam` on dims without n_threads: time_loop_threads."""
    _, bS, nIn, nOut = dims
    return time_loop_threads(bS, nOut, fam.gates, nIn + (nState if fam.recurrent_product else 0))


# ---------------------------------------------------------------------------------------------
# The time loop's buffers, for every family
# ---------------------------------------------------------------------------------------------

def forward(family, dims, x, hI, keep, n_threads, seq_len, fwd, *, cI=None, Wx=None, Wh=None,
            W=None, b=None, P=None, Wproj=None, clip=np.inf, activation=0,
            lstm_acts=LSTM_ACTIVATIONS, z=None, zoneout=None, c_steps=False):
    """Run the forward time loop of `family` (a key of cells._family_table.FAMILIES) with its
    weights (Wx and Wh, or W in PyTorch's layout), b, P, Wproj, clip and activation as
    _time_loop.forward takes them. The state h has nState columns: nOut, or nProj with Wproj
    [nOut, nProj]. Returns (h [sL, bS, nState], hL [bS, nState], cL [bS, nOut] (None without a
    cell state), gates, c, aux, m): with keep, every step's gates [sL, bS, G], c [sL, bS, nOut]
    (families with a cell state), aux [sL, bS, aux·nOut] (families that keep it) and m
    [sL, bS, nOut] (the unprojected output, with Wproj), else None. `z` [bS, G], when given,
    keeps the last step's recurrent products (the LLTM: its pre-activations). zoneout: None, or
    zoneout's share of the new state as _time_loop.forward takes it ([1] or [sL, bS, nOut]);
    c_steps: return every step's c without keep too."""
    sL, bS, nIn, nOut = dims
    fam = _family_table.family(family)
    n_gates, cell_state, has_aux, aux_kept = fam.gates, fam.cell_state, fam.aux, fam.aux_kept
    G, dtype, steps = n_gates * nOut, x.dtype, (sL if keep else 1)
    nState = nOut if Wproj is None else Wproj.shape[1]
    if n_threads is None:
        n_threads = _threads(fam, dims, nState)
    allocate = _allocator(n_threads)
    transposed, Wx, Wh = weights_as_read(Wx, Wh)
    gates = allocate((steps, bS, G), dtype)
    c = allocate((sL, bS, nOut), dtype) if (keep or c_steps) and cell_state else None
    aux = allocate(((steps if aux_kept else 1), bS, has_aux * nOut), dtype) if has_aux else None
    m = allocate((sL, bS, nOut), dtype) if keep and Wproj is not None else None
    h = allocate((sL, bS, nState), dtype)
    hL = allocate((bS, nState), dtype)
    cL = allocate((bS, nOut), dtype) if cell_state else None
    _time_loop.forward(
        family, sL, bS, nIn, nOut, seq_len=seq_len, forward=fwd, keep=keep,
        n_threads=n_threads, x=_c_order(x), hI=_c_order(hI), cI=_c_order(cI),
        Wx=Wx, Wh=Wh, W=_c_order(W), weights_transposed=transposed, b=_c_order(b),
        P=_c_order(P), Wproj=_c_order(Wproj), nProj=nState, clip=clip, activation=activation,
        lstm_acts=lstm_acts, zoneout=_c_order(zoneout), openmp=openmp_pool(),
        # Training: every step's gates overwrite their own input projection; inference
        # projects a chunk of steps at a time into one chunk's gx.
        gx=gates if keep else allocate((_time_loop.projection_chunk_steps(
            sL, bS, G, dtype.itemsize, not fwd and seq_len is not None), bS, G), dtype),
        gh=allocate((bS, G), dtype) if z is None else z,
        hs=allocate((2, bS, nState), dtype),
        cs=allocate((2, bS, nOut), dtype) if cell_state else None,
        ms=allocate((bS, nOut), dtype) if Wproj is not None else None,
        gates=gates, c=c, aux=aux, m=m, h=h, hL=hL, cL=cL)
    if not keep:
        return h, hL, cL, None, c, None, None
    return h, hL, cL, gates, c, (aux if aux_kept else None), m


def backward(family, dims, x, hI, saved, n_threads, seq_len, fwd, *, cI=None, dLdh=None,
             dLdhL=None, dLdcL=None, dLdgates=None, Wx=None, Wh=None, W=None, P=None,
             Wproj=None, clip=np.inf, activation=0, lstm_acts=LSTM_ACTIVATIONS,
             input_grad=True, bias=True, dLdc=None, zoneout=None):
    """Run the backward time loop of `family` on `saved` = (h, gates, c, aux, m) of its forward
    with keep (c, aux, m None where the family has none, does not keep it or has no Wproj).
    Returns (dLdx [sL, bS, nIn] (None without input_grad: not computed), dLdhI [bS, nState],
    dLdcI [bS, nOut] or None, dLdWx, dLdWh (with W: dLdW, None), dLdb [G], dLdP like P or
    None, dLdWproj like Wproj or None); gates and a kept aux are consumed. dLdWh is None for a
    family with no recurrent product, dLdb without `bias` (a family whose bias is in P). dLdc
    [sL, bS, nOut]: the gradient arriving at every step's c; zoneout as forward took it."""
    sL, bS, nIn, nOut = dims
    fam = _family_table.family(family)
    n_gates, cell_state, has_aux, aux_kept = fam.gates, fam.cell_state, fam.aux, fam.aux_kept
    G, dtype = n_gates * nOut, x.dtype
    nState = nOut if Wproj is None else Wproj.shape[1]
    projected = Wproj is not None
    if n_threads is None:
        n_threads = _threads(fam, dims, nState)
    allocate = _allocator(n_threads)
    h, gates, c, aux, m = saved
    transposed, Wx, Wh = weights_as_read(Wx, Wh)
    gates = _c_order(gates)   # a copy only for a cell's gates put together by its face
    if has_aux and not aux_kept:
        aux = allocate((sL, bS, has_aux * nOut), dtype)
    dLdx = allocate((sL, bS, nIn), dtype) if input_grad else None
    dLdhI = allocate((bS, nState), dtype)
    dLdcI = allocate((bS, nOut), dtype) if cell_state else None
    dLdb = allocate(G, dtype) if bias else None
    dLdP = None if P is None else allocate(P.shape, dtype)
    dLdW = None if W is None else allocate((G, nOut + nIn), dtype)
    dLdWx = None if W is not None else _weight_gradient(allocate, (nIn, G), dtype, transposed)
    dLdWh = (None if W is not None or not fam.recurrent_product
             else _weight_gradient(allocate, (nState, G), dtype, transposed))
    dLdWproj = allocate((nOut, nState), dtype) if projected else None
    calls_blas = _time_loop.backward_calls_blas(nIn, nState, G, dtype.itemsize)
    with sequential_blas() if calls_blas else contextlib.nullcontext():
        _time_loop.backward(
            family, sL, bS, nIn, nOut, seq_len=seq_len, forward=fwd, n_threads=n_threads,
            x=_c_order(x), hI=_c_order(hI), cI=_c_order(cI), Wx=Wx, Wh=Wh, W=_c_order(W),
            weights_transposed=transposed, P=_c_order(P), Wproj=_c_order(Wproj), nProj=nState,
            clip=clip, activation=activation, lstm_acts=lstm_acts, h=_c_order(h),
            c=_c_order(c), gates=gates, aux=aux, m=_c_order(m), dLdh=_c_order(dLdh),
            dLdhL=_c_order(dLdhL), dLdcL=_c_order(dLdcL), dLdgates=_c_order(dLdgates),
            dLdc=_c_order(dLdc), zoneout=_c_order(zoneout), d=allocate((2, bS, G), dtype),
            dzone=allocate((bS, nOut), dtype) if zoneout is not None else None,
            daux=allocate((bS, nOut), dtype) if fam.phases == 2 else None,
            ms=allocate((bS, nOut), dtype) if projected else None,
            dh_step=allocate((bS, nState), dtype) if projected else None,
            dh_steps=allocate((sL, bS, nState), dtype) if projected else None,
            dLdx=dLdx, dLdhI=dLdhI, dLdcI=dLdcI, dLdWx=_loop_order(dLdWx, transposed),
            dLdWh=_loop_order(dLdWh, transposed), dLdW=dLdW, dLdb=dLdb, dLdP=dLdP,
            dLdWproj=dLdWproj, openmp=openmp_pool(),
            part_sums=allocate((n_threads, (n_gates + fam.param_blocks) * nOut), dtype))
    _arrays.consume_workspace(gates, aux if aux_kept else None)
    if W is not None:
        dLdWx, dLdWh = dLdW, None
    return dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, dLdWproj
