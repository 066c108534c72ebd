"""The time loop of every cell family: the forward and backward passes over a sequence, for float
and double.

Every public function of cells (a cell, a time loop, a backward pass, an ONNX operator) is one
call of `forward` or `backward` here, with sL = 1 for a cell. What a call computes is in
cells/_loop.pxd (the sizes, options and named buffers of one call: every array's shape is
documented there, once) and cells/_families.pxd (what a family is, and the signature of its
steps). This module owns what is the same for every family:

Sequences: row b runs its first len_b = seq_len[b] loop steps, at time index tau =
step_time(t, len_b, forward) (cells/_loops.pxd); past them its state is frozen and its outputs
(and, in the workspace, its gates, c and aux) at the padded time indices are 0; the backward
passes its carried gradient through them unchanged. At a row's first step the state is hI (and
cI); a row's final state is the state after its last valid step (hI, cI when len_b = 0).

Threads: one OpenMP region per call. Thread p owns the units [j0, j1) (its block of each gate
block). At every step it multiplies the state by its columns of op(Wh), packed once per call
(cells/_panels.pxd), then runs its family's step for just those elements. The input projection
of all steps runs on packed weights as well; the backward's products over all steps (dL/dx, the
weight gradients) are single-threaded BLAS gemms, each thread its own columns. Threads meet at a
barrier only where a product needs columns that other threads wrote: once per step, twice for a
family with a second phase (the reset-before GRU).

The backward: only the dL/dh (and dL/dc) recurrence runs step by step; dL/dx = dz·op(Wx)ᵀ,
dL/dWx = Σ xᵀ·dz, dL/dWh = Σ hPrevᵀ·d and dL/db = Σ dz are products over all steps after the loop.
Each step's dz overwrites its gates once the step has read them: a training step takes no memory
beyond the forward's workspace.
"""
cimport numpy as cnp
from cython.parallel cimport parallel
from libc.math cimport INFINITY
from libc.stdint cimport int64_t

from cells._blas cimport real, gemm_part
from cells._families cimport (
    GRU_LINEAR_BEFORE_RESET, GRU_RESET_BEFORE, LLTM, LSTM, RNN,
    FamilyInfo, backward_step, family_info, forward_step,
)
from cells._loop cimport Loop
from cells._loops cimport (
    add_gate_bias, copy_units, prev_state_product, row_len, step_time, sum_rows, weight_grad,
    zero_units,
)
from cells._openmp cimport ThreadUnits, cells_barrier, thread_units
from cells._panels cimport Weights, pack, project, release, times

import numpy as np

cnp.import_array()

# The families by the names the Python faces use.
FAMILIES = {
    "gru_reset_before": GRU_RESET_BEFORE,
    "gru_linear_before_reset": GRU_LINEAR_BEFORE_RESET,
    "lstm": LSTM,
    "lltm": LLTM,
    "rnn": RNN,
}


# ---------------------------------------------------------------------------------------------
# The weights, packed once per call
# ---------------------------------------------------------------------------------------------

cdef inline Weights pack_gate_columns(const Loop *L, const real *W, Py_ssize_t K,
                                      Py_ssize_t blocks, Py_ssize_t j0,
                                      Py_ssize_t n) noexcept nogil:
    """The columns k·nOut + [j0, j0 + n) of op(W) [K, G], for the blocks k < blocks: what a
    thread multiplies a row of K inputs (x or h) by."""
    if L.weights_transposed:
        return pack(W + j0 * L.ldw, L.nOut * L.ldw, blocks, K, n, L.ldw, True)
    return pack(W + j0, L.nOut, blocks, K, n, L.ldw, False)


cdef inline Weights pack_gate_rows(const Loop *L, const real *Wh, Py_ssize_t k0, Py_ssize_t k1,
                                   Py_ssize_t j0, Py_ssize_t n) noexcept nogil:
    """The columns [j0, j0 + n) of op(Wh)ᵀ over the gate blocks [k0, k1) ([(k1-k0)·nOut, n]):
    what a thread multiplies those blocks of a row's gradient by to get dL/d(its units)."""
    if L.weights_transposed:
        return pack(Wh + k0 * L.nOut * L.ldw + j0, 0, 1, (k1 - k0) * L.nOut, n, L.ldw, False)
    return pack(Wh + j0 * L.ldw + k0 * L.nOut, 0, 1, (k1 - k0) * L.nOut, n, L.ldw, True)


cdef inline real *gate_columns(const Loop *L, real *dW, Py_ssize_t col) noexcept nogil:
    """Where column `col` of op(dW) starts in dW (a row of dW when it is transposed)."""
    return dW + (col * L.ldw if L.weights_transposed else col)


cdef inline real *offset(const real *a, Py_ssize_t k) noexcept nogil:
    """a + k, or NULL for an array that is not given."""
    return <real *>a + k if a != NULL else NULL


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef void forward_loop(const Loop *L, real zero) noexcept nogil:
    """The forward pass of L (`zero`, 0 in the call's dtype, picks the instantiation)."""
    cdef FamilyInfo fam = family_info(L.family)
    cdef Py_ssize_t sL = L.sL, bS = L.bS, nOut = L.nOut, G = L.G, SB = L.sL * L.bS
    cdef const real *x = <const real *>L.x
    cdef const real *hI = <const real *>L.hI
    cdef const real *cI = <const real *>L.cI
    cdef const real *Wx = <const real *>L.Wx
    cdef const real *Wh = <const real *>L.Wh
    cdef const real *b = <const real *>L.b
    cdef const real *P = <const real *>L.P
    cdef real *gx = <real *>L.gx
    cdef real *gh = <real *>L.gh
    cdef real *hs = <real *>L.hs
    cdef real *cs = <real *>L.cs
    cdef real *gates = <real *>L.gates
    cdef real *c = <real *>L.c
    cdef real *aux = <real *>L.aux
    cdef real *h = <real *>L.h
    cdef real *hL = <real *>L.hL
    cdef real *cL = <real *>L.cL
    # Rows of the kept arrays between time indices: 0 where one step's scratch is reused.
    cdef Py_ssize_t gates_step = bS * G if L.keep else 0
    cdef Py_ssize_t aux_step = bS * nOut if L.keep and fam.aux_kept else 0
    cdef bint two_phases = fam.h_blocks < fam.gates
    cdef Py_ssize_t j0, j1, n, k, t, bb, tau, length, e, r
    cdef const real *hcur
    cdef const real *ccur
    cdef real *hnxt
    cdef real *cnxt
    cdef ThreadUnits me
    cdef Weights wx, wh
    with parallel(num_threads=L.n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        wh = pack_gate_columns(L, Wh, nOut, fam.gates, j0, n)
        # The input projection of every step at once: gx = x·op(Wx) + b, this thread's columns.
        wx = pack_gate_columns(L, Wx, L.nIn, fam.gates, j0, n)
        project(SB, x, L.nIn, wx, gx + j0, G, nOut)
        release(&wx)
        if b != NULL:
            add_gate_bias(SB, nOut, fam.gates, j0, j1, b, gx)

        for t in range(sL):
            hcur = hI if t == 0 else <const real *>(hs + (t % 2) * bS * nOut)
            hnxt = hs + ((t + 1) % 2) * bS * nOut
            ccur = cI if t == 0 else <const real *>offset(cs, (t % 2) * bS * nOut)
            cnxt = offset(cs, ((t + 1) % 2) * bS * nOut)
            for k in range(fam.h_blocks):
                times(bS, hcur, nOut, wh, k, 0, gh + k * nOut + j0, G)
            for bb in range(bS):
                length = row_len(L.seq_len, bb, sL)
                e = bb * nOut + j0
                if t < length:
                    tau = step_time(t, length, L.forward)
                    forward_step(L, False, n, gx + (tau * bS + bb) * G + j0, gh + bb * G + j0,
                                 hcur + e, offset(ccur, e), offset(P, j0),
                                 gates + tau * gates_step + bb * G + j0,
                                 offset(aux, tau * aux_step + e), hnxt + e, offset(cnxt, e))
                    continue
                # Past the row's end: its state is frozen, and time index t is padding.
                copy_units(n, hcur + e, hnxt + e)
                r = t * bS + bb
                zero_units(n, h + r * nOut + j0)
                if fam.cell_state:
                    copy_units(n, ccur + e, cnxt + e)
                if L.keep:
                    for k in range(fam.gates):
                        zero_units(n, gates + r * G + k * nOut + j0)
                    if fam.cell_state:
                        zero_units(n, c + r * nOut + j0)
                    if aux_step:
                        zero_units(n, aux + r * nOut + j0)
            if two_phases:
                cells_barrier()  # every thread's aux is in place
                for k in range(fam.h_blocks, fam.gates):
                    times(bS, aux, nOut, wh, k, 0, gh + k * nOut + j0, G)
                for bb in range(bS):
                    length = row_len(L.seq_len, bb, sL)
                    if t < length:
                        tau = step_time(t, length, L.forward)
                        e = bb * nOut + j0
                        forward_step(L, True, n, gx + (tau * bS + bb) * G + j0,
                                     gh + bb * G + j0, hcur + e, offset(ccur, e),
                                     offset(P, j0), gates + tau * gates_step + bb * G + j0,
                                     aux + e, hnxt + e, offset(cnxt, e))
            for bb in range(bS):
                length = row_len(L.seq_len, bb, sL)
                if t < length:
                    r = step_time(t, length, L.forward) * bS + bb
                    e = bb * nOut + j0
                    copy_units(n, hnxt + e, h + r * nOut + j0)
                    if L.keep and fam.cell_state:
                        copy_units(n, cnxt + e, c + r * nOut + j0)
            cells_barrier()  # the new state is complete before any thread multiplies it
        release(&wh)

        hcur = hI if sL == 0 else <const real *>(hs + (sL % 2) * bS * nOut)
        ccur = cI if sL == 0 else <const real *>offset(cs, (sL % 2) * bS * nOut)
        for bb in range(bS):
            e = bb * nOut + j0
            if hL != NULL:
                copy_units(n, hcur + e, hL + e)
            if cL != NULL:
                copy_units(n, ccur + e, cL + e)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef void backward_loop(const Loop *L, real zero) noexcept nogil:
    """The backward pass of L, on the workspace (h, c, gates, aux) of its forward pass."""
    cdef FamilyInfo fam = family_info(L.family)
    cdef Py_ssize_t sL = L.sL, bS = L.bS, nIn = L.nIn, nOut = L.nOut, G = L.G
    cdef Py_ssize_t SB = L.sL * L.bS
    cdef const real *x = <const real *>L.x
    cdef const real *hI = <const real *>L.hI
    cdef const real *cI = <const real *>L.cI
    cdef const real *Wx = <const real *>L.Wx
    cdef const real *Wh = <const real *>L.Wh
    cdef const real *P = <const real *>L.P
    cdef const real *h = <const real *>L.h
    cdef const real *c = <const real *>L.c
    cdef real *gates = <real *>L.gates
    cdef real *aux = <real *>L.aux
    cdef const real *dLdh = <const real *>L.dLdh
    cdef const real *dLdhL = <const real *>L.dLdhL
    cdef const real *dLdcL = <const real *>L.dLdcL
    cdef const real *dLdgates = <const real *>L.dLdgates
    cdef real *ds = <real *>L.d
    cdef real *daux = <real *>L.daux
    cdef real *dLdx = <real *>L.dLdx
    cdef real *dh = <real *>L.dLdhI
    cdef real *dc = <real *>L.dLdcI
    cdef real *dLdWx = <real *>L.dLdWx
    cdef real *dLdWh = <real *>L.dLdWh
    cdef real *dLdb = <real *>L.dLdb
    cdef real *dP = <real *>L.dLdP
    cdef bint two_phases = fam.h_blocks < fam.gates
    cdef Py_ssize_t j0, j1, n, k, t, bb, tau, length, e, r, col
    cdef const real *hprev
    cdef const real *cprev
    cdef const real *R
    cdef real *d
    cdef ThreadUnits me
    cdef Weights whT, wauxT
    with parallel(num_threads=L.n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        whT = pack_gate_rows(L, Wh, 0, fam.h_blocks, j0, n)
        if two_phases:
            wauxT = pack_gate_rows(L, Wh, fam.h_blocks, fam.gates, j0, n)
        if dP != NULL:
            for k in range(fam.param_blocks):
                zero_units(n, dP + k * nOut + j0)
        for bb in range(bS):
            e = bb * nOut + j0
            if dLdhL != NULL:
                copy_units(n, dLdhL + e, dh + e)
            else:
                zero_units(n, dh + e)
            if fam.cell_state:
                if dLdcL != NULL:
                    copy_units(n, dLdcL + e, dc + e)
                else:
                    zero_units(n, dc + e)

        for t in range(sL - 1, -1, -1):
            d = ds + (t % 2) * bS * G
            for bb in range(bS):
                length = row_len(L.seq_len, bb, sL)
                e = bb * nOut + j0
                if t >= length:
                    # Nothing flows through a padded step: its dz (and aux) are 0, and the
                    # carried gradient passes on unchanged.
                    r = t * bS + bb
                    for k in range(fam.gates):
                        zero_units(n, d + bb * G + k * nOut + j0)
                        zero_units(n, gates + r * G + k * nOut + j0)
                    if fam.aux:
                        zero_units(n, aux + r * nOut + j0)
                    continue
                tau = step_time(t, length, L.forward)
                r = tau * bS + bb
                # The state entering time index tau: the initial one at the row's first step,
                # else the one after the neighbouring time index in loop order.
                if t == 0:
                    hprev, cprev = hI + e, offset(cI, e)
                else:
                    k = (tau - 1 if L.forward else tau + 1) * bS + bb
                    hprev, cprev = h + k * nOut + j0, offset(c, k * nOut + j0)
                backward_step(L, False, n, offset(dLdh, r * nOut + j0),
                              offset(dLdgates, r * G + j0), gates + r * G + j0,
                              offset(aux, r * nOut + j0), offset(daux, e), hprev, cprev,
                              offset(c, r * nOut + j0), offset(P, j0), d + bb * G + j0,
                              dh + e, offset(dc, e), offset(dP, j0))
            cells_barrier()  # every thread's part of this step's d is in place
            if two_phases:
                times(bS, d + fam.h_blocks * nOut, G, wauxT, 0, 0, daux + j0, nOut)
                for bb in range(bS):
                    length = row_len(L.seq_len, bb, sL)
                    if t >= length:
                        continue
                    tau = step_time(t, length, L.forward)
                    r = tau * bS + bb
                    e = bb * nOut + j0
                    if t == 0:
                        hprev = hI + e
                    else:
                        hprev = h + ((tau - 1 if L.forward else tau + 1) * bS + bb) * nOut + j0
                    backward_step(L, True, n, offset(dLdh, r * nOut + j0),
                                  offset(dLdgates, r * G + j0), gates + r * G + j0,
                                  aux + r * nOut + j0, daux + e, hprev, NULL, NULL,
                                  offset(P, j0), d + bb * G + j0, dh + e, NULL,
                                  offset(dP, j0))
                cells_barrier()  # every thread's part of d is complete
            # dL/dhPrev += d·op(Wh)ᵀ over the blocks that multiply hPrev.
            times(bS, d, G, whT, 0, 1, dh + j0, nOut)
        cells_barrier()  # the dz (and aux) of every step are complete
        release(&whT)
        if two_phases:
            release(&wauxT)

        # dL/dx = dz·op(Wx)ᵀ, split by input columns.
        gemm_part(me.part, me.nparts, False, not L.weights_transposed, SB, nIn, G, 1, gates, G,
                  Wx, L.ldw, 0, dLdx, nIn)
        # The weight and bias gradients, this thread's unit columns of each gate block (ds,
        # free now, holds each thread's rows of prev_state_product's first steps).
        for k in range(fam.gates):
            col = k * nOut + j0
            weight_grad(L.weights_transposed, nIn, n, SB, x, nIn, gates + col, G,
                        0, gate_columns(L, dLdWx, col), L.ldw)
            if dLdb != NULL:
                sum_rows(SB, n, gates + col, G, dLdb + col)
            # The recurrent-side gradient of block k: d, which equals dz but where aux keeps it.
            R = aux + j0 if k == fam.aux_grad_block else gates + col
            if k < fam.h_blocks:
                prev_state_product(sL, bS, nOut, n, L.seq_len, L.forward, hI, h, R,
                                   nOut if k == fam.aux_grad_block else G, ds + bS * j0,
                                   L.weights_transposed, gate_columns(L, dLdWh, col), L.ldw)
            else:  # a block that multiplies aux: dL/dWh_k = Σ auxᵀ·dz_k
                weight_grad(L.weights_transposed, nOut, n, SB, aux, nOut, R, G,
                            0, gate_columns(L, dLdWh, col), L.ldw)


# ---------------------------------------------------------------------------------------------
# Entry points for the CPU backend (cells/_cpu.py), which has validated every shape and dtype.
# The sizes of the arrays are checked once more here, so that no caller can make the loop read
# or write out of bounds: a failure is a bug in cells (hence "internal").
# ---------------------------------------------------------------------------------------------

cdef void *data(dtype, str name, a, Py_ssize_t size, bint required=False,
               bint writes=False) except? NULL:
    """The data of array `a` (NULL for None: not given), checked to have the `size` elements of
    `dtype` that the loop indexes, C-contiguous (and writeable, for an array the loop `writes`)."""
    if a is None:
        if required and size > 0:
            raise ValueError(f"internal: {name} is required")
        return NULL
    if not isinstance(a, np.ndarray):
        raise TypeError(f"internal: {name} is a {type(a).__name__}, not an ndarray")
    cdef cnp.ndarray arr = a
    if arr.dtype != dtype or not arr.flags.c_contiguous or arr.size != size:
        raise ValueError(f"internal: {name} is {arr.dtype} {a.shape}, expected {size} "
                         f"C-contiguous {dtype} elements")
    if writes and not arr.flags.writeable:
        raise ValueError(f"internal: {name} is read-only")
    return cnp.PyArray_DATA(arr)


cdef FamilyInfo set_problem(Loop *L, str family, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn,
                            Py_ssize_t nOut, seq_len, bint forward, int n_threads, dtype, Wx,
                            Wh, W, P, double clip, int activation) except *:
    """Fill in L's sizes, options and weights; return the family's FamilyInfo."""
    L.family = FAMILIES[family]
    cdef FamilyInfo fam = family_info(L.family)
    L.sL, L.bS, L.nIn, L.nOut, L.G = sL, bS, nIn, nOut, fam.gates * nOut
    L.forward, L.n_threads, L.clip, L.activation = forward, n_threads, clip, activation
    L.seq_len = NULL
    if seq_len is not None:
        if (not isinstance(seq_len, np.ndarray) or seq_len.dtype != np.int64
                or not seq_len.flags.c_contiguous or seq_len.shape != (bS,)
                or (bS and not (0 <= seq_len.min() and seq_len.max() <= sL))):
            raise ValueError(f"internal: seq_len must be {bS} int64 lengths in [0, {sL}]")
        if bS:
            L.seq_len = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>seq_len)
    L.weights_transposed = W is not None
    if L.weights_transposed:
        # W [G, nOut + nIn] (PyTorch's layout), columns h then x: op(Wh) = W[:, :nOut]ᵀ.
        L.ldw = nOut + nIn
        L.Wh = data(dtype, "W", W, L.G * L.ldw, True)
        L.Wx = <const char *>L.Wh + nOut * <Py_ssize_t>dtype.itemsize
    else:
        L.ldw = L.G
        L.Wx = data(dtype, "Wx", Wx, nIn * L.G, True)
        L.Wh = data(dtype, "Wh", Wh, nOut * L.G, True)
    L.P = data(dtype, "P", P, fam.param_blocks * nOut)
    return fam


def forward(str family, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut, *,
            seq_len, bint forward, bint keep, int n_threads, x, hI, Wx=None, Wh=None, W=None,
            b=None, P=None, cI=None, gx, gh, hs, cs=None, gates, c=None, aux=None, h, hL=None,
            cL=None, double clip=INFINITY, int activation=0):
    """Run the forward pass of `family` (a key of FAMILIES) on the arrays that cells/_loop.pxd
    names (and shapes). W [G, nOut + nIn] in PyTorch's layout replaces Wx and Wh (the LLTM).
    With keep, gates, c and a kept aux are [sL, ...]; without, gates and aux are one step's
    scratch ([bS, ...]) and c is not given."""
    cdef Loop L
    dtype = x.dtype
    cdef FamilyInfo fam = set_problem(&L, family, sL, bS, nIn, nOut, seq_len, forward,
                                      n_threads, dtype, Wx, Wh, W, P, clip, activation)
    cdef Py_ssize_t G = L.G, S = bS * nOut, steps = sL if keep else 1
    L.keep = keep
    L.b = data(dtype, "b", b, G)
    L.x = data(dtype, "x", x, sL * bS * nIn, True)
    L.hI = data(dtype, "hI", hI, S, True)
    L.cI = data(dtype, "cI", cI, S, fam.cell_state)
    L.gx = data(dtype, "gx", gx, sL * bS * G, True, True)
    L.gh = data(dtype, "gh", gh, bS * G, True, True)
    L.hs = data(dtype, "hs", hs, 2 * S, True, True)
    L.cs = data(dtype, "cs", cs, 2 * S, fam.cell_state, True)
    L.gates = data(dtype, "gates", gates, steps * bS * G, True, True)
    L.c = data(dtype, "c", c, sL * S, keep and fam.cell_state, True)
    L.aux = data(dtype, "aux", aux, (steps if fam.aux_kept else 1) * S, fam.aux, True)
    L.h = data(dtype, "h", h, sL * S, True, True)
    L.hL = data(dtype, "hL", hL, S, False, True)
    L.cL = data(dtype, "cL", cL, S, False, True)
    cdef bint single = dtype == np.float32
    with nogil:
        if single:
            forward_loop(&L, <float>0)
        else:
            forward_loop(&L, <double>0)


def backward(str family, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut, *,
             seq_len, bint forward, int n_threads, x, hI, Wx=None, Wh=None, W=None, P=None,
             cI=None, h, c=None, gates, aux=None, dLdh=None, dLdhL=None, dLdcL=None,
             dLdgates=None, d, daux=None, dLdx, dLdhI, dLdcI=None, dLdWx=None, dLdWh=None,
             dLdW=None, dLdb=None, dLdP=None, double clip=INFINITY, int activation=0):
    """Run the backward pass of `family` on its forward's workspace (h, c, gates and aux of
    every step; aux is scratch when the forward does not keep it); it overwrites gates and aux
    with gradients. dLdW [G, nOut + nIn] goes with W."""
    cdef Loop L
    dtype = x.dtype
    cdef FamilyInfo fam = set_problem(&L, family, sL, bS, nIn, nOut, seq_len, forward,
                                      n_threads, dtype, Wx, Wh, W, P, clip, activation)
    cdef Py_ssize_t G = L.G, S = bS * nOut, SB = sL * bS
    cdef bint two_phases = fam.h_blocks < fam.gates
    L.keep = True
    L.x = data(dtype, "x", x, SB * nIn, True)
    L.hI = data(dtype, "hI", hI, S, True)
    L.cI = data(dtype, "cI", cI, S, fam.cell_state)
    L.h = data(dtype, "h", h, SB * nOut, True)
    L.c = data(dtype, "c", c, SB * nOut, fam.cell_state)
    L.gates = data(dtype, "gates", gates, SB * G, True, True)
    L.aux = data(dtype, "aux", aux, SB * nOut, fam.aux, True)
    L.dLdh = data(dtype, "dLdh", dLdh, SB * nOut)
    L.dLdhL = data(dtype, "dLdhL", dLdhL, S)
    L.dLdcL = data(dtype, "dLdcL", dLdcL, S)
    L.dLdgates = data(dtype, "dLdgates", dLdgates, SB * G)
    L.d = data(dtype, "d", d, 2 * bS * G, True, True)
    L.daux = data(dtype, "daux", daux, S, two_phases, True)
    L.dLdx = data(dtype, "dLdx", dLdx, SB * nIn, True, True)
    L.dLdhI = data(dtype, "dLdhI", dLdhI, S, True, True)
    L.dLdcI = data(dtype, "dLdcI", dLdcI, S, fam.cell_state, True)
    if L.weights_transposed:
        L.dLdWh = data(dtype, "dLdW", dLdW, G * L.ldw, True, True)
        L.dLdWx = <char *>L.dLdWh + nOut * <Py_ssize_t>dtype.itemsize
    else:
        L.dLdWx = data(dtype, "dLdWx", dLdWx, nIn * G, True, True)
        L.dLdWh = data(dtype, "dLdWh", dLdWh, nOut * G, True, True)
    L.dLdb = data(dtype, "dLdb", dLdb, G, False, True)
    L.dLdP = data(dtype, "dLdP", dLdP, fam.param_blocks * nOut, False, True)
    cdef bint single = dtype == np.float32
    with nogil:
        if single:
            backward_loop(&L, <float>0)
        else:
            backward_loop(&L, <double>0)


def family_buffers(str family):
    """What a family's time loop keeps and needs, for the backend that allocates its arrays:
    (gates, cell_state, aux, aux_kept, two_phases), as in cells/_families.pxd's FamilyInfo."""
    cdef FamilyInfo fam = family_info(FAMILIES[family])
    return fam.gates, fam.cell_state, fam.aux, fam.aux_kept, fam.h_blocks < fam.gates
