"""LSTM kernels: the forward and backward time loops, for float and double.

Everything else in cells' LSTM API (lstmLayerCell, lstmLayerCellBp) is one of these two loops with
sL = 1; the Python face (cells/lstm.py) validates and allocates.

Notation (libnd4j's): sL steps, bS batch rows, nIn inputs, nOut units, G = 4·nOut gate columns in
blocks (i, f, g, o); optional peephole weights Wp [3nOut] in blocks (i, f, o). Every array is
C-contiguous; shapes are given at each pointer. The math is in include/cells/lstm_impl.h:

    z = x·Wx + hPrev·Wr + b (+ peepholes);  i, f, o = σ(..);  g = tanh(zg)
    c = clip(f∘cPrev + i∘g);  h = o∘tanh(c)

Sequences: row b runs the loop steps t < seq_len[b] (every step without seq_len), at time index
tau = t (forward) or seq_len[b]-1-t (reverse); its state is frozen afterwards and its outputs at
tau >= seq_len[b] are 0. Everything kept for the backward pass is tau-indexed.

Threads: one OpenMP region per call. Thread p owns the units [j0, j1) (its block of each of the
i, f, g, o column blocks). At every step it multiplies the state by its columns of Wr, packed once
per call (cells/_panels.pxd), then runs the row functions of include/cells/lstm.h for just those
elements. The input projection of all steps runs on packed weights as well; the backward's
products over all steps (dL/dx, the weight gradients) are single-threaded BLAS gemms. Threads
meet at a barrier only where a product needs columns that other threads wrote: once per step.
"""
from cython.parallel cimport parallel

from cells._blas cimport real, gemm, gemm_part
from cells._entry cimport lengths_ptr, ptr
from libc.stdint cimport int64_t

from cells._loops cimport (
    add_gate_bias, copy_units, prev_state_product, row_len, step_time, sum_rows, zero_units,
)
from cells._openmp cimport ThreadUnits, cells_barrier, thread_units
from cells._panels cimport Weights, pack, project, release, times
from cells._validate import kernel_arrays
from cells._lstm_gates cimport lstm_bp_row, lstm_row


cdef inline const real *offset(const real *a, Py_ssize_t k) noexcept nogil:
    """a + k, or NULL when a is NULL (an optional array)."""
    return a + k if a != NULL else NULL


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef void forward(
        Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,              # [sL, bS, nIn]
        const real *hI,             # [bS, nOut]
        const real *cI,             # [bS, nOut]
        const real *Wx,             # [nIn, G]
        const real *Wr,             # [nOut, G]
        const real *b,              # [G]             or NULL
        const real *Wp,             # [3nOut] (i, f, o) or NULL
        real clip,                  # the cell clip; +inf for none
        const int64_t *seq_len,   # [bS]            or NULL: every row runs sL steps
        bint fwd,                   # False: each row's valid steps run backwards in time
        real *gx,                   # [sL, bS, G]     scratch: x·Wx + b of every step; may be
                                    #                 `gates` when keep (each step's gates
                                    #                 overwrite their own pre-activations)
        real *gh,                   # [bS, G]         scratch: hPrev·Wr
        real *hs,                   # [2, bS, nOut]   scratch: the state h, double-buffered
        real *cs,                   # [2, bS, nOut]   scratch: the state c, double-buffered
        real *gates,                # [sL, bS, G] out when keep, else [bS, G] scratch: i, f, g, o
        real *c,                    # [sL, bS, nOut] out when keep (cell states), else NULL
        bint keep,                  # keep every step's gates and c (training)
        real *h,                    # [sL, bS, nOut]  out: every step's output
        real *hL,                   # [bS, nOut]      out: the final h of every row
        real *cL,                   # [bS, nOut]      out: the final c of every row
        int n_threads) noexcept nogil:
    cdef Py_ssize_t G = 4 * nOut, SB = sL * bS, j0, j1, n, k, t, bb, tau, e, len_b, zrow
    cdef const real *hcur
    cdef const real *ccur
    cdef const real *wpi
    cdef const real *wpf
    cdef const real *wpo
    cdef const real *zx
    cdef real *hnext
    cdef real *cnext
    cdef real *gt
    cdef ThreadUnits me
    cdef Weights wx, wr
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        wpi = offset(Wp, j0)
        wpf = offset(Wp, nOut + j0)
        wpo = offset(Wp, 2 * nOut + j0)
        wr = pack(Wr + j0, nOut, 4, nOut, n, G, False)   # block k: Wr's columns k·nOut + [j0, j1)
        # The input projection of every step at once: gx = x·Wx + b, this thread's columns.
        wx = pack(Wx + j0, nOut, 4, nIn, n, G, False)
        project(SB, x, nIn, wx, gx + j0, G, nOut)
        release(&wx)
        if b != NULL:
            add_gate_bias(SB, nOut, 4, j0, j1, b, gx)
        for t in range(sL):
            hcur = hI if t == 0 else <const real *>(hs + (t % 2) * bS * nOut)
            ccur = cI if t == 0 else <const real *>(cs + (t % 2) * bS * nOut)
            hnext = hs + ((t + 1) % 2) * bS * nOut
            cnext = cs + ((t + 1) % 2) * bS * nOut
            for k in range(4):
                times(bS, hcur, nOut, wr, k, 0, gh + k * nOut + j0, G)
            for bb in range(bS):
                e = bb * nOut + j0
                len_b = row_len(seq_len, bb, sL)
                if t < len_b:
                    tau = step_time(t, len_b, fwd)
                    zx = gx + (tau * bS + bb) * G + j0
                    gt = gates + ((tau * bS if keep else 0) + bb) * G + j0
                    lstm_row(n, zx, zx + nOut, zx + 2 * nOut, zx + 3 * nOut,
                             gh + bb * G + j0, gh + bb * G + nOut + j0,
                             gh + bb * G + 2 * nOut + j0, gh + bb * G + 3 * nOut + j0,
                             wpi, wpf, wpo, clip, ccur + e,
                             gt, gt + nOut, gt + 2 * nOut, gt + 3 * nOut, cnext + e, hnext + e)
                    copy_units(n, hnext + e, h + (tau * bS + bb) * nOut + j0)
                    if keep:
                        copy_units(n, cnext + e, c + (tau * bS + bb) * nOut + j0)
                else:
                    # Past the row's end: its state is frozen and time index t is padding.
                    copy_units(n, hcur + e, hnext + e)
                    copy_units(n, ccur + e, cnext + e)
                    zrow = t * bS + bb
                    zero_units(n, h + zrow * nOut + j0)
                    if keep:
                        zero_units(n, c + zrow * nOut + j0)
                        for k in range(4):
                            zero_units(n, gates + zrow * G + k * nOut + j0)
            cells_barrier()  # the new state is complete before any thread multiplies it
        release(&wr)
        hcur = hI if sL == 0 else <const real *>(hs + (sL % 2) * bS * nOut)
        ccur = cI if sL == 0 else <const real *>(cs + (sL % 2) * bS * nOut)
        for bb in range(bS):
            e = bb * nOut + j0
            copy_units(n, hcur + e, hL + e)
            copy_units(n, ccur + e, cL + e)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef void backward(
        Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,              # [sL, bS, nIn]
        const real *hI,             # [bS, nOut]
        const real *cI,             # [bS, nOut]
        const real *Wx,             # [nIn, G]
        const real *Wr,             # [nOut, G]
        const real *Wp,             # [3nOut]         or NULL
        real clip,                  # +inf for none
        const int64_t *seq_len,   # [bS]            or NULL
        bint fwd,
        const real *h,              # [sL, bS, nOut]  forward outputs
        const real *c,              # [sL, bS, nOut]  forward cell states
        real *gates,                # [sL, bS, G]     in: forward i, f, g, o; out: dL/dz
        const real *dLdh,           # [sL, bS, nOut]  or NULL: gradient at every output
        const real *dLdhL,          # [bS, nOut]      or NULL: gradient at the final h
        const real *dLdcL,          # [bS, nOut]      or NULL: gradient at the final c
        real *dzs,                  # [2, bS, G]      scratch: one step's dL/dz in loop order
        real *dLdx,                 # [sL, bS, nIn]   out
        real *dLdhI,                # [bS, nOut]      out; the running dL/dh during the loop
        real *dLdcI,                # [bS, nOut]      out; the running dL/dc during the loop
        real *dLdWx,                # [nIn, G]        out
        real *dLdWr,                # [nOut, G]       out
        real *dLdb,                 # [G]             out, or NULL
        real *dLdWp,                # [3nOut]         out, or NULL (with Wp)
        int n_threads) noexcept nogil:
    """Backpropagation through time. Only the (dL/dh, dL/dc) recurrence runs step by step:
    the row functions give dz and dL/dcPrev, then dL/dhPrev = dz·Wrᵀ. dL/dx and the weight and
    bias gradients are products over all steps after the loop; the peephole gradients are
    summed by each thread over its own units during the loop. Each step's dz overwrites its
    gates once the step has read them: no memory beyond the forward's workspace."""
    cdef Py_ssize_t G = 4 * nOut, SB = sL * bS, j0, j1, n, k, t, bb, tau, e, len_b, prev
    cdef const real *hprev
    cdef const real *cprev
    cdef real *gt
    cdef const real *wpi
    cdef const real *wpf
    cdef const real *wpo
    cdef real *d
    cdef real *dwpi
    cdef real *dwpf
    cdef real *dwpo
    cdef ThreadUnits me
    cdef Weights wrT
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        wrT = pack(Wr + j0 * G, 0, 1, G, n, G, True)     # Wrᵀ's columns [j0, j1): Wr's rows
        wpi = offset(Wp, j0)
        wpf = offset(Wp, nOut + j0)
        wpo = offset(Wp, 2 * nOut + j0)
        dwpi = <real *>offset(dLdWp, j0)
        dwpf = <real *>offset(dLdWp, nOut + j0)
        dwpo = <real *>offset(dLdWp, 2 * nOut + j0)
        if dLdWp != NULL:
            zero_units(n, dwpi)
            zero_units(n, dwpf)
            zero_units(n, dwpo)
        for bb in range(bS):
            e = bb * nOut + j0
            if dLdhL != NULL:
                copy_units(n, dLdhL + e, dLdhI + e)
            else:
                zero_units(n, dLdhI + e)
            if dLdcL != NULL:
                copy_units(n, dLdcL + e, dLdcI + e)
            else:
                zero_units(n, dLdcI + e)
        for t in range(sL - 1, -1, -1):
            d = dzs + (t % 2) * bS * G
            for bb in range(bS):
                e = bb * nOut + j0
                len_b = row_len(seq_len, bb, sL)
                if t < len_b:
                    tau = step_time(t, len_b, fwd)
                    # The state entering time index tau: the initial one at the row's first
                    # step, else the one after the neighbouring time index in loop order.
                    if tau == (0 if fwd else len_b - 1):
                        hprev, cprev = hI + e, cI + e
                    else:
                        prev = tau - 1 if fwd else tau + 1
                        hprev = h + (prev * bS + bb) * nOut + j0
                        cprev = c + (prev * bS + bb) * nOut + j0
                    gt = gates + (tau * bS + bb) * G + j0
                    lstm_bp_row(n, offset(dLdh, (tau * bS + bb) * nOut + j0),
                                gt, gt + nOut, gt + 2 * nOut, gt + 3 * nOut,
                                c + (tau * bS + bb) * nOut + j0, cprev, wpi, wpf, wpo, clip,
                                d + bb * G + j0, d + bb * G + nOut + j0,
                                d + bb * G + 2 * nOut + j0, d + bb * G + 3 * nOut + j0,
                                dLdhI + e, dLdcI + e, dwpi, dwpf, dwpo)
                    for k in range(4):
                        copy_units(n, d + bb * G + k * nOut + j0, gt + k * nOut)
                else:
                    # Nothing flows through a row's padded steps: zero dz (so the recurrent
                    # product leaves its carried gradient as it is), and time index t's dz.
                    for k in range(4):
                        zero_units(n, d + bb * G + k * nOut + j0)
                        zero_units(n, gates + (t * bS + bb) * G + k * nOut + j0)
            cells_barrier()  # every thread's dz of this step is in place
            times(bS, d, G, wrT, 0, 1, dLdhI + j0, nOut)
        cells_barrier()  # the dz of every step is complete
        release(&wrT)

        # dL/dx = dz·Wxᵀ, split by input columns.
        gemm_part(me.part, me.nparts, False, True, SB, nIn, G, 1, gates, G, Wx, G, 0, dLdx, nIn)
        # The weight and bias gradients, this thread's unit columns of each gate block
        # (dzs, free now, holds each thread's rows of prev_state_product's first steps).
        for k in range(4):
            gemm(True, False, nIn, n, SB, 1, x, nIn, gates + k * nOut + j0, G,
                 0, dLdWx + k * nOut + j0, G)
            prev_state_product(sL, bS, nOut, n, seq_len, fwd, hI, h, gates + k * nOut + j0, G,
                               dzs + bS * j0, False, dLdWr + k * nOut + j0, G)
            if dLdb != NULL:
                sum_rows(SB, n, gates + k * nOut + j0, G, dLdb + k * nOut + j0)


# ---------------------------------------------------------------------------------------------
# Entry points for cells/lstm.py, which has validated every shape and dtype. Arrays arrive as
# flat C-contiguous views; their sizes are checked once more here so that no caller can make the
# kernels read or write out of bounds.
# ---------------------------------------------------------------------------------------------

def lstm_forward(Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                 const real[::1] x, const real[::1] hI, const real[::1] cI,
                 const real[::1] Wx, const real[::1] Wr, const real[::1] b, const real[::1] Wp,
                 double clip, const int64_t[::1] seq_len, bint fwd,
                 real[::1] gx, real[::1] gh, real[::1] hs, real[::1] cs,
                 real[::1] gates, real[::1] c, bint keep,
                 real[::1] h, real[::1] hL, real[::1] cL, int n_threads):
    """Run the forward loop. keep=True writes every step's gates [sL, bS, 4nOut] and cell states
    c [sL, bS, nOut]; keep=False uses gates as one step's scratch [bS, 4nOut] and c is None.
    b, Wp and seq_len may be None; clip is +inf for no clipping."""
    cdef Py_ssize_t G = 4 * nOut, steps = sL if keep else 1
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), hI=(hI, bS * nOut), cI=(cI, bS * nOut),
                  Wx=(Wx, nIn * G), Wr=(Wr, nOut * G), b=(b, G), Wp=(Wp, 3 * nOut),
                  gx=(gx, sL * bS * G), gh=(gh, bS * G), hs=(hs, 2 * bS * nOut),
                  cs=(cs, 2 * bS * nOut), gates=(gates, steps * bS * G), h=(h, sL * bS * nOut),
                  hL=(hL, bS * nOut), cL=(cL, bS * nOut))
    if keep:
        kernel_arrays(sL, bS, None, c=(c, sL * bS * nOut))
        if c is None and sL * bS * nOut > 0:
            raise ValueError("internal: keep=True needs c")
    with nogil:
        forward(sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(cI), ptr(Wx), ptr(Wr), ptr(b), ptr(Wp),
                <real>clip, lengths_ptr(seq_len), fwd, ptr(gx), ptr(gh), ptr(hs), ptr(cs),
                ptr(gates), ptr(c) if keep else NULL, keep, ptr(h), ptr(hL), ptr(cL), n_threads)


def lstm_backward(Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                  const real[::1] x, const real[::1] hI, const real[::1] cI,
                  const real[::1] Wx, const real[::1] Wr, const real[::1] Wp,
                  double clip, const int64_t[::1] seq_len, bint fwd,
                  const real[::1] h, const real[::1] c, real[::1] gates,
                  const real[::1] dLdh, const real[::1] dLdhL, const real[::1] dLdcL,
                  real[::1] dzs,
                  real[::1] dLdx, real[::1] dLdhI, real[::1] dLdcI, real[::1] dLdWx,
                  real[::1] dLdWr, real[::1] dLdb, real[::1] dLdWp, int n_threads):
    """Run the backward loop; it overwrites gates with dL/dz. Wp, seq_len, dLdh, dLdhL, dLdcL,
    dLdb may be None; dLdWp is None exactly when Wp is."""
    cdef Py_ssize_t G = 4 * nOut
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), hI=(hI, bS * nOut), cI=(cI, bS * nOut),
                  Wx=(Wx, nIn * G), Wr=(Wr, nOut * G), Wp=(Wp, 3 * nOut), h=(h, sL * bS * nOut),
                  c=(c, sL * bS * nOut), gates=(gates, sL * bS * G), dLdh=(dLdh, sL * bS * nOut),
                  dLdhL=(dLdhL, bS * nOut), dLdcL=(dLdcL, bS * nOut),
                  dzs=(dzs, 2 * bS * G), dLdx=(dLdx, sL * bS * nIn),
                  dLdhI=(dLdhI, bS * nOut), dLdcI=(dLdcI, bS * nOut), dLdWx=(dLdWx, nIn * G),
                  dLdWr=(dLdWr, nOut * G), dLdb=(dLdb, G), dLdWp=(dLdWp, 3 * nOut))
    if (Wp is None) != (dLdWp is None):
        raise ValueError("internal: dLdWp must be given exactly when Wp is")
    with nogil:
        backward(sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(cI), ptr(Wx), ptr(Wr), ptr(Wp),
                 <real>clip, lengths_ptr(seq_len), fwd, ptr(h), ptr(c), ptr(gates), ptr(dLdh),
                 ptr(dLdhL), ptr(dLdcL), ptr(dzs), ptr(dLdx), ptr(dLdhI),
                 ptr(dLdcI), ptr(dLdWx), ptr(dLdWr), ptr(dLdb), ptr(dLdWp), n_threads)
