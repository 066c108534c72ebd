"""LLTM kernels: the forward and backward time loops, for float and double.

The LLTM of PyTorch's C++-extension tutorial, over a sequence. Everything in cells' LLTM API is
one of these two loops (lltm_forward / lltm_backward are the loops with sL = 1); the Python face
(cells/lltm.py) validates and allocates.

Notation (libnd4j's): sL steps, bS batch rows, nIn inputs, nOut = S units, G = 3·nOut gate
columns in blocks (input, output, candidate), K = nOut + nIn columns of X = [h, x]. The weights
are PyTorch's [G, K]: the recurrent product is hPrev·W_hᵀ with W_h = W[:, :nOut], the input one
x·W_xᵀ with W_x = W[:, nOut:], both gemms with transB on row blocks of W. Every array is
C-contiguous; shapes are given at each pointer.

Sequences (seq_len, direction): row b runs loop steps t < len_b, at time index
tau = step_time(t, len_b, forward); an inactive row keeps its state, its outputs at tau >= len_b
are 0. Everything kept per step (outputs, workspace, dz) is tau-indexed.

Threads: one OpenMP region per call. Thread p owns the units [j0, j1) (its rows of each of the
three gate blocks of W). At every step it multiplies the state by its gate columns of W_hᵀ,
packed once per call (cells/_panels.pxd), then runs the row functions of include/cells/lltm.h
for just those elements. The input projection of all steps runs on packed weights as well; the
backward's products over all steps (dL/dx, the weight gradients) are single-threaded BLAS gemms.
Threads meet at one barrier per step, where a product needs the state (forward) or dL/dz
(backward) that all threads wrote.
"""
from cython.parallel cimport parallel
from libc.stdint cimport int64_t

from cells._blas cimport real, gemm, gemm_part
from cells._entry cimport lengths_ptr, ptr
from cells._loops cimport (
    add_gate_bias, copy_units, prev_state_product, row_len, step_time, sum_rows, zero_units,
)
from cells._openmp cimport ThreadUnits, cells_barrier, thread_units
from cells._panels cimport Weights, pack, project, release, times
from cells._validate import kernel_arrays
from cells._lltm_gates cimport lltm_bp_row, lltm_row


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef inline void forward_step(
        bint fwd, Py_ssize_t t, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nOut,
        Py_ssize_t j0, Py_ssize_t j1,
        const int64_t *seq_len,  # [bS] or NULL
        const real *gx,     # [sL, bS, G]     x·W_xᵀ + b, tau-indexed
        Weights wh,         # block k: W_hᵀ's columns k·nOut + [j0, j1) (W's rows), packed
        real *z,            # [bS, G]         out: hC·W_hᵀ, then (active rows) the pre-activations
        const real *hC,     # [bS, nOut]      the states entering this step
        const real *cC,     # [bS, nOut]
        real *hN,           # [bS, nOut]      out: the states leaving it
        real *cN,           # [bS, nOut]
        real *gates,        # keep: [sL, bS, G] out (tau-indexed i, o, n); else [bS, G] scratch
        real *c,            # keep: [sL, bS, nOut] out (tau-indexed cell states); else unused
        bint keep,
        real *h,            # [sL, bS, nOut]  out (tau-indexed)
        ) noexcept nogil:
    """Units [j0, j1) of loop step t: z = zx + hC·W_hᵀ; i, o = σ(z0), σ(z1); n = elu(z2);
    c = cC + n∘i; h = tanh(c)∘o for the active rows; the others carry their state and get zeros
    at their padded time index t."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, k, bb, e, r, length, tau
    cdef const real *zx
    cdef real *zr
    cdef real *g
    for k in range(3):
        times(bS, hC, nOut, wh, k, 0, z + k * nOut + j0, G)
    for bb in range(bS):
        length = row_len(seq_len, bb, sL)
        e = bb * nOut + j0
        if t < length:
            tau = step_time(t, length, fwd)
            r = tau * bS + bb
            zx, zr = gx + r * G + j0, z + bb * G + j0
            g = (gates + r * G if keep else gates + bb * G) + j0
            lltm_row(n, zx, zx + nOut, zx + 2 * nOut, zr, zr + nOut, zr + 2 * nOut, cC + e,
                     g, g + nOut, g + 2 * nOut, cN + e, hN + e)
            copy_units(n, <const real *>(hN + e), h + r * nOut + j0)
            if keep:
                copy_units(n, <const real *>(cN + e), c + r * nOut + j0)
        else:
            copy_units(n, hC + e, hN + e)
            copy_units(n, cC + e, cN + e)
            r = t * bS + bb  # t >= len_b: a padded time index of this row
            zero_units(n, h + r * nOut + j0)
            if keep:
                for k in range(3):
                    zero_units(n, gates + r * G + k * nOut + j0)
                zero_units(n, c + r * nOut + j0)


cdef void forward_loop(
        bint fwd, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,      # [sL, bS, nIn]
        const real *W,      # [G, K]          PyTorch's layout: columns h then x
        const real *b,      # [G]
        const real *hI,     # [bS, nOut]
        const real *cI,     # [bS, nOut]
        const int64_t *seq_len,  # [bS] or NULL (every row runs sL steps)
        real *gx,           # [sL, bS, G]     scratch: x·W_xᵀ + b of every step; may be `gates`
                            #                 when keep (each step's gates overwrite their own)
        real *z,            # [bS, G]         scratch: the step's pre-activations (see above)
        real *hs,           # [2, bS, nOut]   scratch: the state, double-buffered
        real *cs,           # [2, bS, nOut]   scratch: the cell state, double-buffered
        real *gates,        # keep: [sL, bS, G] out; else [bS, G] scratch
        real *c,            # keep: [sL, bS, nOut] out; else NULL
        bint keep,          # keep every step's gates and cell state (training)
        real *h,            # [sL, bS, nOut]  out: every step's output
        real *hL,           # [bS, nOut]      out: the final states
        real *cL,           # [bS, nOut]
        int n_threads) noexcept nogil:
    cdef Py_ssize_t G = 3 * nOut, K = nOut + nIn, j0, j1, k, i, t, cur, nxt
    cdef ThreadUnits me
    cdef Weights wx, wh
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        wh = pack(W + j0 * K, nOut * K, 3, nOut, j1 - j0, K, True)
        # The input projection of every step at once: gx = x·W_xᵀ + b, this thread's columns.
        wx = pack(W + j0 * K + nOut, nOut * K, 3, nIn, j1 - j0, K, True)
        project(sL * bS, x, nIn, wx, gx + j0, G, nOut)
        release(&wx)
        add_gate_bias(sL * bS, nOut, 3, j0, j1, b, gx)
        for i in range(bS):
            copy_units(j1 - j0, hI + i * nOut + j0, hs + i * nOut + j0)
            copy_units(j1 - j0, cI + i * nOut + j0, cs + i * nOut + j0)
        cells_barrier()  # the initial state is complete before any thread multiplies it
        for t in range(sL):
            cur = (t % 2) * bS * nOut
            nxt = bS * nOut - cur
            forward_step(fwd, t, sL, bS, nOut, j0, j1, seq_len, gx, wh, z,
                         hs + cur, cs + cur, hs + nxt, cs + nxt, gates, c, keep, h)
            cells_barrier()  # the new state is complete before any thread multiplies it
        release(&wh)
        cur = (sL % 2) * bS * nOut
        for i in range(bS):
            copy_units(j1 - j0, <const real *>(hs + cur + i * nOut + j0), hL + i * nOut + j0)
            copy_units(j1 - j0, <const real *>(cs + cur + i * nOut + j0), cL + i * nOut + j0)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef inline void backward_step(
        bint fwd, Py_ssize_t t, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nOut,
        Py_ssize_t j0, Py_ssize_t j1,
        const int64_t *seq_len,  # [bS] or NULL
        Weights wh,         # W_h's columns [j0, j1), packed
        real *gates,        # [sL, bS, G]     in: forward i, o, n; out: dL/dz, tau-indexed
                            #                 (0 at padded positions)
        const real *c,      # [sL, bS, nOut]  forward cell states
        const real *dLdh,   # [sL, bS, nOut]  or NULL
        real *d,            # [bS, G]         out: this step's dL/dz in loop order (0: inactive)
        real *dh,           # [bS, nOut]      in: dL/dh from the later steps; out: dL/dhPrev
        real *dc,           # [bS, nOut]      in: dL/dc from the later steps; out: dL/dcPrev
        ) noexcept nogil:
    """Units [j0, j1) of loop step t, for the active rows: the row function (dz, which then
    overwrites the step's gates, and dL/dcPrev = dĉ); then, once all threads' dz are in place,
    dL/dhPrev = dz·W_h (an inactive row has dz = 0 and keeps its dh)."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, k, bb, e, r, length, tau
    cdef real *g
    cdef real *dr
    for bb in range(bS):
        length = row_len(seq_len, bb, sL)
        e, dr = bb * nOut + j0, d + bb * G + j0
        if t < length:
            tau = step_time(t, length, fwd)
            r = tau * bS + bb
            g = gates + r * G + j0
            lltm_bp_row(n, dLdh + r * nOut + j0 if dLdh != NULL else NULL, dh + e, dc + e,
                        g, g + nOut, g + 2 * nOut, c + r * nOut + j0,
                        dr, dr + nOut, dr + 2 * nOut)
            for k in range(3):
                copy_units(n, <const real *>(dr + k * nOut), g + k * nOut)
        else:
            r = t * bS + bb  # t >= len_b: a padded time index of this row
            for k in range(3):
                zero_units(n, dr + k * nOut)
                zero_units(n, gates + r * G + k * nOut + j0)
    cells_barrier()  # every thread's dz of this step is in place
    times(bS, d, G, wh, 0, 1, dh + j0, nOut)


cdef void backward_loop(
        bint fwd, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,      # [sL, bS, nIn]
        const real *W,      # [G, K]
        const real *hI,     # [bS, nOut]
        const int64_t *seq_len,  # [bS] or NULL
        const real *h,      # [sL, bS, nOut]  forward outputs (0 at padded steps)
        real *gates,        # [sL, bS, G]     in: forward i, o, n; out: dL/dz of every step
        const real *c,      # [sL, bS, nOut]  forward cell states
        const real *dLdh,   # [sL, bS, nOut]  or NULL: gradient arriving at every output
        const real *dLdhL,  # [bS, nOut]      or NULL: gradient arriving at the final states
        const real *dLdcL,  # [bS, nOut]      or NULL
        real *dzs,          # [2, bS, G]      scratch: the step's dL/dz in loop order, double-
                            #                 buffered so that one barrier per step suffices
        real *dLdx,         # [sL, bS, nIn]   out
        real *dLdW,         # [G, K]          out
        real *dLdb,         # [G]             out
        real *dLdhI,        # [bS, nOut]      out; the running dL/dh during the loop
        real *dLdcI,        # [bS, nOut]      out; the running dL/dc during the loop
        int n_threads) noexcept nogil:
    """Backpropagation through time. Only the dL/dh, dL/dc recurrence runs step by step; dL/dx
    and the weight and bias gradients are products over all steps after the loop:
    dL/dx = dz·W_x, dL/dW = dzᵀ·[hPrev, x], dL/db = Σ dz. Each step's dz overwrites its gates:
    no memory beyond the forward's workspace."""
    cdef Py_ssize_t G = 3 * nOut, K = nOut + nIn, SB = sL * bS, j0, j1, k, i, j, t, e, rows
    cdef ThreadUnits me
    cdef Weights wh
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        wh = pack(W + j0, 0, 1, G, j1 - j0, K, False)
        for i in range(bS):
            for j in range(j0, j1):
                e = i * nOut + j
                dLdhI[e] = dLdhL[e] if dLdhL != NULL else 0
                dLdcI[e] = dLdcL[e] if dLdcL != NULL else 0
        for t in range(sL - 1, -1, -1):
            backward_step(fwd, t, sL, bS, nOut, j0, j1, seq_len, wh, gates, c,
                          dLdh, dzs + (t % 2) * bS * G, dLdhI, dLdcI)
        cells_barrier()  # the dz of every step is complete
        release(&wh)

        # dL/dx = dz·W_x, split by input columns.
        gemm_part(me.part, me.nparts, False, False, SB, nIn, G, 1, gates, G, W + nOut, K,
                  0, dLdx, nIn)
        # The weight and bias gradients: this thread's rows of each gate block of dL/dW
        # (dzs, free now, holds each thread's rows of prev_state_product's first steps).
        for k in range(3):
            rows = k * nOut + j0
            prev_state_product(sL, bS, nOut, j1 - j0, seq_len, fwd, hI, h, gates + rows, G,
                               dzs + bS * j0, True, dLdW + rows * K, K)
            gemm(True, False, j1 - j0, nIn, SB, 1, gates + rows, G, x, nIn,
                 0, dLdW + rows * K + nOut, K)
            sum_rows(SB, j1 - j0, gates + rows, G, dLdb + rows)


# ---------------------------------------------------------------------------------------------
# Entry points for cells/lltm.py, which has validated every shape and dtype. Arrays arrive as
# flat C-contiguous views; their sizes (and seq_len's values) are checked once more here so that
# no caller can make the kernels read or write out of bounds.
# ---------------------------------------------------------------------------------------------

def lltm_forward(bint fwd, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                 const real[::1] x, const real[::1] W, const real[::1] b, const real[::1] hI,
                 const real[::1] cI, const int64_t[::1] seq_len,
                 real[::1] gx, real[::1] z, real[::1] hs, real[::1] cs,
                 real[::1] gates, real[::1] c, bint keep,
                 real[::1] h, real[::1] hL, real[::1] cL, int n_threads):
    """Run the forward loop. keep=True writes every step's gates [sL, bS, 3nOut] and cell states
    c [sL, bS, nOut]; keep=False uses gates as one step's scratch [bS, 3nOut] (c: None).
    z [bS, 3nOut] holds the last step's pre-activations of the rows active in it afterwards."""
    cdef Py_ssize_t G = 3 * nOut
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), W=(W, G * (nOut + nIn)), b=(b, G),
                  hI=(hI, bS * nOut), cI=(cI, bS * nOut), gx=(gx, sL * bS * G), z=(z, bS * G),
                  hs=(hs, 2 * bS * nOut), cs=(cs, 2 * bS * nOut),
                  gates=(gates, (sL if keep else 1) * bS * G), h=(h, sL * bS * nOut),
                  hL=(hL, bS * nOut), cL=(cL, bS * nOut))
    if keep:
        if c is None:
            raise ValueError("internal: keep=True needs c")
        kernel_arrays(sL, bS, None, c=(c, sL * bS * nOut))
    with nogil:
        forward_loop(fwd, sL, bS, nIn, nOut, ptr(x), ptr(W), ptr(b), ptr(hI), ptr(cI),
                     lengths_ptr(seq_len), ptr(gx), ptr(z), ptr(hs), ptr(cs), ptr(gates), ptr(c),
                     keep, ptr(h), ptr(hL), ptr(cL), n_threads)


def lltm_backward(bint fwd, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                  const real[::1] x, const real[::1] W, const real[::1] hI,
                  const int64_t[::1] seq_len, const real[::1] h, real[::1] gates,
                  const real[::1] c, const real[::1] dLdh, const real[::1] dLdhL,
                  const real[::1] dLdcL, real[::1] dzs,
                  real[::1] dLdx, real[::1] dLdW, real[::1] dLdb, real[::1] dLdhI,
                  real[::1] dLdcI, int n_threads):
    """Run the backward loop; it overwrites gates with dL/dz. dLdh, dLdhL and dLdcL may be None
    (no gradient arrives there).
    h is read only at steps after a row's first, so with sL = 1 any [bS, nOut] array will do."""
    cdef Py_ssize_t G = 3 * nOut
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), W=(W, G * (nOut + nIn)),
                  hI=(hI, bS * nOut), h=(h, sL * bS * nOut), gates=(gates, sL * bS * G),
                  c=(c, sL * bS * nOut), dLdh=(dLdh, sL * bS * nOut), dLdhL=(dLdhL, bS * nOut),
                  dLdcL=(dLdcL, bS * nOut), dzs=(dzs, 2 * bS * G), dLdx=(dLdx, sL * bS * nIn),
                  dLdW=(dLdW, G * (nOut + nIn)), dLdb=(dLdb, G), dLdhI=(dLdhI, bS * nOut),
                  dLdcI=(dLdcI, bS * nOut))
    with nogil:
        backward_loop(fwd, sL, bS, nIn, nOut, ptr(x), ptr(W), ptr(hI), lengths_ptr(seq_len),
                      ptr(h), ptr(gates), ptr(c), ptr(dLdh), ptr(dLdhL), ptr(dLdcL),
                      ptr(dzs), ptr(dLdx), ptr(dLdW), ptr(dLdb), ptr(dLdhI), ptr(dLdcI),
                      n_threads)
