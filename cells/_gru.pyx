"""GRU kernels: the forward and backward time loops, for float and double.

Everything else in cells' GRU API (gruCell, gruCellBp, the block cell) is one of these two loops
with sL = 1 or re-laid weights; the Python face (cells/gru.py) validates and allocates.

Notation (libnd4j's): sL steps, bS batch rows, nIn inputs, nOut units, G = 3·nOut gate columns in
blocks (r, u, c). Every array is C-contiguous; shapes are given at each pointer.

Threads: one OpenMP region per call. Thread p owns the units [j0, j1) (its block of each of the
r, u, c column blocks). At every step it multiplies the state by its columns of Wh, packed once
per call (cells/_panels.pxd), then runs the row functions of include/cells/gru.h for just those
elements. The input projection of all steps runs on packed weights as well; the backward's
products over all steps (dL/dx, the weight gradients) are single-threaded BLAS gemms. Threads
meet at a barrier only where a product needs columns that other threads wrote.

Sequences: row b runs its first len_b = seq_len[b] steps (all sL without seq_len); at loop step t
it processes time index tau = step_time(t, len_b, forward) (cells/_loops.pxd). Arrays indexed by
time ([sL, bS, ...]) are tau-indexed; the per-step scratch ([2, bS, ...], double-buffered by the
parity of t, so that no thread overwrites what another still multiplies) is in loop order.
"""
from cython.parallel cimport parallel
from libc.stdint cimport int64_t

from cells._blas cimport real, gemm, gemm_part
from cells._entry cimport lengths_ptr, ptr
from cells._gru_gates cimport (
    bp_state_row, lbr_bp_reset_row, lbr_row, rb_bp_reset_row, rb_gates_row, rb_state_row,
)
from cells._loops cimport (
    add_gate_bias, copy_units, prev_state_product, row_len, step_time, sum_rows, zero_units,
)
from cells._openmp cimport ThreadUnits, cells_barrier, thread_units
from cells._panels cimport Weights, pack, project, release, times
from cells._validate import kernel_arrays


cdef inline const real *prev_state(Py_ssize_t t, Py_ssize_t b, Py_ssize_t length, bint forward,
                                   Py_ssize_t bS, Py_ssize_t nOut,
                                   const real *hI,    # [bS, nOut]
                                   const real *h,     # [sL, bS, nOut]  the outputs, tau-indexed
                                   ) noexcept nogil:
    """The state row b entered loop step t with: hI at its first step, else its output at the
    time index it processed one step earlier."""
    if t == 0:
        return hI + b * nOut
    return h + (step_time(t - 1, length, forward) * bS + b) * nOut


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef void forward(
        bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,          # [sL, bS, nIn]
        const real *hI,         # [bS, nOut]
        const real *Wx,         # [nIn, G]
        const real *Wh,         # [nOut, G]
        const real *bx,         # [G]         every bias that is a plain sum (see cells/gru.py)
        const real *bhc,        # [nOut]      lbr: bh_c; unused for reset-before
        const int64_t *seq_len,  # [bS]       or NULL: every row runs sL steps
        bint fwd,               # False: each row's valid steps run in reverse time order
        real *gx,               # [sL, bS, G] scratch: x·Wx + bx for all steps; may be `gates`
                                #             when ws_t = 1 (each step's gates overwrite its own)
        real *gh,               # [bS, G]     scratch: the step's recurrent products
        real *rh,               # [bS, nOut]  scratch (reset-before): r∘hPrev
        real *state,            # [2, bS, nOut] scratch: the state entering / leaving the step
        real *gates,            # [sL, bS, G] out when ws_t = 1, else [1, bS, G] scratch: r, u, c
        real *hc,               # [sL, bS, nOut] out when ws_t = 1, else [1, bS, nOut] (lbr)
        Py_ssize_t ws_t,        # 1 keeps every step's gates and hc (training), 0 overwrites them
        real *h,                # [sL, bS, nOut] out: every state, 0 after a row's last step
        int n_threads) noexcept nogil:
    cdef Py_ssize_t G = 3 * nOut, n, j0, j1, k, b, t, tau, length
    cdef real *cur
    cdef real *nxt
    cdef real *zh
    cdef real *g
    cdef const real *zx
    cdef ThreadUnits me
    cdef Weights wx, wh
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        wh = pack(Wh + j0, nOut, 3, nOut, n, G, False)   # block k: Wh's columns k·nOut + [j0, j1)
        # The input projection of every step at once: gx = x·Wx + bx, this thread's columns.
        wx = pack(Wx + j0, nOut, 3, nIn, n, G, False)
        project(sL * bS, x, nIn, wx, gx + j0, G, nOut)
        release(&wx)
        add_gate_bias(sL * bS, nOut, 3, j0, j1, bx, gx)
        for b in range(bS):
            copy_units(n, hI + b * nOut + j0, state + b * nOut + j0)
        cells_barrier()  # the initial state is complete before any thread multiplies it

        for t in range(sL):
            cur = state + (t % 2) * bS * nOut
            nxt = state + ((t + 1) % 2) * bS * nOut
            # gh = cur·Wh: r, u (and, linear-before-reset, c) columns of this thread.
            for k in range(3 if lbr else 2):
                times(bS, cur, nOut, wh, k, 0, gh + k * nOut + j0, G)
            for b in range(bS):
                length = row_len(seq_len, b, sL)
                if t >= length:
                    copy_units(n, cur + b * nOut + j0, nxt + b * nOut + j0)
                    continue
                tau = step_time(t, length, fwd)
                zx = gx + (tau * bS + b) * G + j0
                zh = gh + b * G + j0
                g = gates + (ws_t * tau * bS + b) * G + j0
                if lbr:
                    lbr_row(n, zx, zx + nOut, zx + 2 * nOut, zh, zh + nOut, zh + 2 * nOut,
                            bhc + j0, cur + b * nOut + j0, g, g + nOut, g + 2 * nOut,
                            hc + (ws_t * tau * bS + b) * nOut + j0, nxt + b * nOut + j0)
                else:
                    rb_gates_row(n, zx, zx + nOut, zh, zh + nOut, cur + b * nOut + j0,
                                 g, g + nOut, rh + b * nOut + j0)
            if not lbr:
                # c = tanh(zc + (r∘hPrev)·Wh_c), once every thread's part of r∘hPrev is in place.
                cells_barrier()
                times(bS, rh, nOut, wh, 2, 0, gh + 2 * nOut + j0, G)
                for b in range(bS):
                    length = row_len(seq_len, b, sL)
                    if t >= length:
                        continue
                    tau = step_time(t, length, fwd)
                    zx = gx + (tau * bS + b) * G + j0
                    g = gates + (ws_t * tau * bS + b) * G + j0
                    rb_state_row(n, zx + 2 * nOut, gh + b * G + 2 * nOut + j0, g + nOut,
                                 cur + b * nOut + j0, g + 2 * nOut, nxt + b * nOut + j0)
            for b in range(bS):
                length = row_len(seq_len, b, sL)
                if t < length:
                    copy_units(n, nxt + b * nOut + j0,
                               h + (step_time(t, length, fwd) * bS + b) * nOut + j0)
            cells_barrier()  # the new state is complete before any thread multiplies it
        release(&wh)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef void backward(
        bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,          # [sL, bS, nIn]
        const real *hI,         # [bS, nOut]
        const real *Wx,         # [nIn, G]
        const real *Wh,         # [nOut, G]
        const int64_t *seq_len,  # [bS]       or NULL
        bint fwd,
        const real *h,          # [sL, bS, nOut]  forward states (0 at padded steps)
        real *gates,            # [sL, bS, G]     in: forward r, u, c; out: dL/d(zr, zu, zc)
        real *hc,               # [sL, bS, nOut]  lbr, in: forward hPrev·Wh_c + bh_c;
                                #                 out: dL/dhc. Unused for reset-before
        const real *dLdh,       # [sL, bS, nOut]  or NULL: gradient arriving at the outputs
        const real *dLdhLast,   # [bS, nOut]      or NULL: gradient arriving at the final state
        const real *dLdgates,   # [sL, bS, G]     or NULL: gradient arriving at the gates
        real *dzs,              # [2, bS, G]      scratch: this step's dz, in loop order
        real *dhcs,             # [2, bS, nOut]   scratch (lbr): this step's dL/dhc, loop order
        real *a,                # [bS, nOut]      scratch (reset-before): dL/d(r∘hPrev)
        real *rh,               # [sL, bS, nOut]  scratch (reset-before): every step's r∘hPrev
        real *dLdx,             # [sL, bS, nIn]   out
        real *dLdhI,            # [bS, nOut]      out; the running dL/dh during the loop
        real *dLdWx,            # [nIn, G]        out
        real *dLdWh,            # [nOut, G]       out
        real *dLdbx,            # [G]             out: Σ dz
        real *dLdbhc,           # [nOut]          out (lbr): Σ dL/dhc
        int n_threads) noexcept nogil:
    """Backpropagation through time. Only the dL/dh recurrence runs step by step; dL/dx and the
    weight and bias gradients are products over all steps after the loop. Each step's dz
    overwrites its gates (and, lbr, dL/dhc its hc) once the step has read them, so the
    gradients of every step take no memory beyond the forward's workspace."""
    cdef Py_ssize_t G = 3 * nOut, SB = sL * bS, n, j0, j1, k, b, t, tau, length, e
    cdef const real *hPrev
    cdef real *g
    cdef real *d
    cdef real *ds
    cdef real *dhc
    cdef ThreadUnits me
    cdef Weights wru, wc
    with parallel(num_threads=n_threads):
        me = thread_units(nOut)
        j0, j1 = me.j0, me.j1
        n = j1 - j0
        # Wh_ruᵀ and Wh_cᵀ, this thread's columns (Wh's rows [j0, j1)).
        wru = pack(Wh + j0 * G, 0, 1, 2 * nOut, n, G, True)
        wc = pack(Wh + j0 * G + 2 * nOut, 0, 1, nOut, n, G, True)
        for b in range(bS):
            if dLdhLast != NULL:
                copy_units(n, dLdhLast + b * nOut + j0, dLdhI + b * nOut + j0)
            else:
                zero_units(n, dLdhI + b * nOut + j0)
            # Nothing flows through a row's padded steps: their dz and dL/dhc (or r∘hPrev) are 0.
            length = row_len(seq_len, b, sL)
            for tau in range(length, sL):
                e = tau * bS + b
                for k in range(3):
                    zero_units(n, gates + e * G + k * nOut + j0)
                zero_units(n, (hc if lbr else rh) + e * nOut + j0)

        for t in range(sL - 1, -1, -1):
            ds = dzs + (t % 2) * bS * G
            dhc = dhcs + (t % 2) * bS * nOut
            for b in range(bS):
                length = row_len(seq_len, b, sL)
                d = ds + b * G + j0
                if t >= length:  # no gradient through this step: the carried dL/dh passes on
                    for k in range(3):
                        zero_units(n, d + k * nOut)
                    if lbr:
                        zero_units(n, dhc + b * nOut + j0)
                    continue
                tau = step_time(t, length, fwd)
                e = tau * bS + b
                hPrev = prev_state(t, b, length, fwd, bS, nOut, hI, h) + j0
                g = gates + e * G + j0
                bp_state_row(n, dLdh + e * nOut + j0 if dLdh != NULL else NULL,
                             dLdgates + e * G + j0 + nOut if dLdgates != NULL else NULL,
                             dLdgates + e * G + j0 + 2 * nOut if dLdgates != NULL else NULL,
                             g + nOut, g + 2 * nOut, hPrev, d + nOut, d + 2 * nOut,
                             dLdhI + b * nOut + j0)
                if lbr:
                    lbr_bp_reset_row(n, d + 2 * nOut,
                                     dLdgates + e * G + j0 if dLdgates != NULL else NULL,
                                     g, hc + e * nOut + j0, d, dhc + b * nOut + j0)
                    copy_units(n, dhc + b * nOut + j0, hc + e * nOut + j0)
                    for k in range(3):
                        copy_units(n, d + k * nOut, g + k * nOut)
            cells_barrier()  # every thread's dz of this step is in place
            if not lbr:
                # a = dzc·Wh_cᵀ, then dzr = (a∘hPrev + dLdr)∘r∘(1-r) and dL/dhPrev += a∘r.
                times(bS, ds + 2 * nOut, G, wc, 0, 0, a + j0, nOut)
                for b in range(bS):
                    length = row_len(seq_len, b, sL)
                    if t >= length:
                        continue
                    tau = step_time(t, length, fwd)
                    e = tau * bS + b
                    d = ds + b * G + j0
                    g = gates + e * G + j0
                    rb_bp_reset_row(n, a + b * nOut + j0,
                                    dLdgates + e * G + j0 if dLdgates != NULL else NULL,
                                    g, prev_state(t, b, length, fwd, bS, nOut, hI, h) + j0, d,
                                    dLdhI + b * nOut + j0, rh + e * nOut + j0)
                    for k in range(3):
                        copy_units(n, d + k * nOut, g + k * nOut)
                cells_barrier()  # every thread's dzr is in place
            # dL/dhPrev += [dzr | dzu]·Wh_ruᵀ (+ dL/dhc·Wh_cᵀ, linear-before-reset).
            times(bS, ds, G, wru, 0, 1, dLdhI + j0, nOut)
            if lbr:
                times(bS, dhc, nOut, wc, 0, 1, dLdhI + j0, nOut)
        cells_barrier()  # the dz (and dL/dhc, r∘hPrev) of every step are complete
        release(&wru)
        release(&wc)

        # dL/dx = dz·Wxᵀ, split by input columns.
        gemm_part(me.part, me.nparts, False, True, SB, nIn, G, 1, gates, G, Wx, G, 0, dLdx, nIn)
        # The weight and bias gradients, this thread's unit columns of each gate block
        # (dzs, free now, holds each thread's rows of prev_state_product's first steps).
        for k in range(3):
            gemm(True, False, nIn, n, SB, 1, x, nIn, gates + k * nOut + j0, G,
                 0, dLdWx + k * nOut + j0, G)
            sum_rows(SB, n, gates + k * nOut + j0, G, dLdbx + k * nOut + j0)
        for k in range(2):
            prev_state_product(sL, bS, nOut, n, seq_len, fwd, hI, h, gates + k * nOut + j0, G,
                               dzs + bS * j0, False, dLdWh + k * nOut + j0, G)
        if lbr:  # dL/dWh_c = Σ hPrevᵀ·dL/dhc
            prev_state_product(sL, bS, nOut, n, seq_len, fwd, hI, h, hc + j0, nOut,
                               dzs + bS * j0, False, dLdWh + 2 * nOut + j0, G)
            sum_rows(SB, n, hc + j0, nOut, dLdbhc + j0)
        else:  # dL/dWh_c = Σ (r∘hPrev)ᵀ·dzc
            gemm(True, False, nOut, n, SB, 1, rh, nOut, gates + 2 * nOut + j0, G,
                 0, dLdWh + 2 * nOut + j0, G)


# ---------------------------------------------------------------------------------------------
# Entry points for cells/gru.py, which has validated every shape and dtype. Arrays arrive as flat
# C-contiguous views; their sizes are checked once more here so that no caller can make the
# kernels read or write out of bounds.
# ---------------------------------------------------------------------------------------------

def gru_forward(bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                const real[::1] x, const real[::1] hI, const real[::1] Wx, const real[::1] Wh,
                const real[::1] bx, const real[::1] bhc, const int64_t[::1] seq_len, bint fwd,
                real[::1] gx, real[::1] gh, real[::1] rh, real[::1] state,
                bint keep, real[::1] gates, real[::1] hc, real[::1] h, int n_threads):
    """Run the forward loop. keep=True writes every step's gates [sL, bS, 3nOut] and (lbr) hc
    [sL, bS, nOut]; keep=False uses them as one step's scratch ([bS, 3nOut], [bS, nOut]).
    h must be zero-filled when seq_len is given (its padded steps are not written)."""
    cdef Py_ssize_t G = 3 * nOut, steps = sL if keep else 1
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), hI=(hI, bS * nOut), Wx=(Wx, nIn * G),
                  Wh=(Wh, nOut * G), bx=(bx, G), bhc=(bhc, nOut), gx=(gx, sL * bS * G),
                  gh=(gh, bS * G), rh=(rh, bS * nOut), state=(state, 2 * bS * nOut),
                  gates=(gates, steps * bS * G), hc=(hc, steps * bS * nOut),
                  h=(h, sL * bS * nOut))
    with nogil:
        forward(lbr, sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(Wx), ptr(Wh), ptr(bx), ptr(bhc),
                lengths_ptr(seq_len), fwd, ptr(gx), ptr(gh), ptr(rh), ptr(state), ptr(gates),
                ptr(hc), keep, ptr(h), n_threads)


def gru_backward(bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                 const real[::1] x, const real[::1] hI, const real[::1] Wx, const real[::1] Wh,
                 const int64_t[::1] seq_len, bint fwd,
                 const real[::1] h, real[::1] gates, real[::1] hc,
                 const real[::1] dLdh, const real[::1] dLdhLast, const real[::1] dLdgates,
                 real[::1] dzs, real[::1] dhcs, real[::1] a, real[::1] rh,
                 real[::1] dLdx, real[::1] dLdhI, real[::1] dLdWx,
                 real[::1] dLdWh, real[::1] dLdbx, real[::1] dLdbhc, int n_threads):
    """Run the backward loop; it overwrites gates (and, lbr, hc) with gradients. dLdh, dLdhLast
    and dLdgates may be None (no gradient arrives there); hc is None for reset-before, rh for
    linear-before-reset."""
    cdef Py_ssize_t G = 3 * nOut
    kernel_arrays(sL, bS, seq_len, x=(x, sL * bS * nIn), hI=(hI, bS * nOut), Wx=(Wx, nIn * G),
                  Wh=(Wh, nOut * G), h=(h, sL * bS * nOut), gates=(gates, sL * bS * G),
                  dLdh=(dLdh, sL * bS * nOut), dLdhLast=(dLdhLast, bS * nOut),
                  dLdgates=(dLdgates, sL * bS * G), dzs=(dzs, 2 * bS * G),
                  dhcs=(dhcs, 2 * bS * nOut), a=(a, bS * nOut), dLdx=(dLdx, sL * bS * nIn),
                  dLdhI=(dLdhI, bS * nOut), dLdWx=(dLdWx, nIn * G), dLdWh=(dLdWh, nOut * G),
                  dLdbx=(dLdbx, G), dLdbhc=(dLdbhc, nOut))
    kernel_arrays(sL, bS, None, **({"hc": (hc, sL * bS * nOut)} if lbr
                                   else {"rh": (rh, sL * bS * nOut)}))
    if (hc if lbr else rh) is None and sL * bS * nOut > 0:
        raise ValueError("internal: lbr needs hc, reset-before rh")
    with nogil:
        backward(lbr, sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(Wx), ptr(Wh),
                 lengths_ptr(seq_len), fwd, ptr(h), ptr(gates), ptr(hc), ptr(dLdh),
                 ptr(dLdhLast), ptr(dLdgates), ptr(dzs), ptr(dhcs), ptr(a), ptr(rh),
                 ptr(dLdx), ptr(dLdhI), ptr(dLdWx), ptr(dLdWh), ptr(dLdbx), ptr(dLdbhc),
                 n_threads)
