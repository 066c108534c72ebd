"""GRU kernels: the forward and backward time loops, for float and double.

Everything else in cells' GRU API (gruCell, gruCellBp, the block cell) is one of these two loops
with sL = 1 or re-laid weights; the Python face (cells/gru.py) validates and allocates.

Notation (libnd4j's): sL steps, bS batch rows, nIn inputs, nOut units, G = 3·nOut gate columns in
blocks (r, u, c). Every array is C-contiguous; shapes are given at each pointer.

Threads: one OpenMP region per call. Thread p owns the units [j0, j1) (its block of each of the
r, u, c column blocks) and runs a single-threaded BLAS product for just those columns, then the
point functions of include/cells/gru.h for just those elements. Threads meet at a barrier only
where a product needs columns that other threads wrote.
"""
from cython.parallel cimport parallel

from cells._blas cimport real, gemm, gemm_part
from cells._openmp cimport cells_barrier, cells_num_threads, cells_thread_num, part_start
from cells._gru_gates cimport (
    bp_state_row, lbr_bp_reset_row, lbr_row, rb_bp_reset_row, rb_gates_row, rb_state_row,
)

cdef enum:
    UNIT_ALIGN = 8  # units per thread block are a multiple of this (vector-aligned rows)


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef inline void forward_step_lbr(
        Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t j0, Py_ssize_t j1,
        const real *gx,     # [bS, G]     x·Wx + bx (+ bh_r, bh_u) of this step
        const real *hPrev,  # [bS, nOut]  the state entering this step
        const real *Wh,     # [nOut, G]
        const real *bhc,    # [nOut]      bh_c, the recurrent candidate bias
        real *gh,           # [bS, G]     scratch: hPrev·Wh
        real *gates,        # [bS, G]     out: r, u, c
        real *hc,           # [bS, nOut]  out: hPrev·Wh_c + bh_c
        real *h,            # [bS, nOut]  out: the new state
        ) noexcept nogil:
    """Linear-before-reset, units [j0, j1):
    r = σ(zr), u = σ(zu), hc = hPrev·Wh_c + bh_c, c = tanh(xc + r∘hc), h = (1-u)∘c + u∘hPrev."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, k, b
    cdef const real *zx
    cdef real *zh
    cdef real *g
    for k in range(3):
        gemm(False, False, bS, n, nOut, 1, hPrev, nOut, Wh + k * nOut + j0, G,
             0, gh + k * nOut + j0, G)
    for b in range(bS):
        zx, zh, g = gx + b * G + j0, gh + b * G + j0, gates + b * G + j0
        lbr_row(n, zx, zx + nOut, zx + 2 * nOut, zh, zh + nOut, zh + 2 * nOut, bhc + j0,
                hPrev + b * nOut + j0, g, g + nOut, g + 2 * nOut, hc + b * nOut + j0,
                h + b * nOut + j0)


cdef inline void forward_step_rb(
        Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t j0, Py_ssize_t j1,
        const real *gx,     # [bS, G]     x·Wx + bx + bh of this step
        const real *hPrev,  # [bS, nOut]
        const real *Wh,     # [nOut, G]
        real *gh,           # [bS, G]     scratch: hPrev·Wh_ru, then (r∘hPrev)·Wh_c
        real *rh,           # [bS, nOut]  scratch: r∘hPrev, shared by all threads
        real *gates,        # [bS, G]     out: r, u, c
        real *h,            # [bS, nOut]  out
        ) noexcept nogil:
    """Reset-before, units [j0, j1): r, u = σ(zr), σ(zu); then, once every thread has written its
    part of r∘hPrev, c = tanh(zc + (r∘hPrev)·Wh_c) and h = (1-u)∘c + u∘hPrev."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, k, b
    cdef const real *zx
    cdef real *zh
    cdef real *g
    for k in range(2):
        gemm(False, False, bS, n, nOut, 1, hPrev, nOut, Wh + k * nOut + j0, G,
             0, gh + k * nOut + j0, G)
    for b in range(bS):
        zx, zh, g = gx + b * G + j0, gh + b * G + j0, gates + b * G + j0
        rb_gates_row(n, zx, zx + nOut, zh, zh + nOut, hPrev + b * nOut + j0,
                     g, g + nOut, rh + b * nOut + j0)
    cells_barrier()
    gemm(False, False, bS, n, nOut, 1, rh, nOut, Wh + 2 * nOut + j0, G, 0, gh + 2 * nOut + j0, G)
    for b in range(bS):
        zx, zh, g = gx + b * G + j0, gh + b * G + j0, gates + b * G + j0
        rb_state_row(n, zx + 2 * nOut, zh + 2 * nOut, g + nOut, hPrev + b * nOut + j0,
                     g + 2 * nOut, h + b * nOut + j0)


cdef void forward(
        bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,      # [sL, bS, nIn]
        const real *hI,     # [bS, nOut]
        const real *Wx,     # [nIn, G]
        const real *Wh,     # [nOut, G]
        const real *bx,     # [G]         every bias that is a plain sum (see cells/gru.py)
        const real *bhc,    # [nOut]      lbr: bh_c; unused for reset-before
        real *gx,           # [sL, bS, G] scratch: x·Wx + bx for all steps
        real *gh,           # [bS, G]     scratch
        real *rh,           # [bS, nOut]  scratch (reset-before)
        real *gates,        # [sL, bS, G] out when ws_t = 1, else [bS, G] scratch: r, u, c
        real *hc,           # [sL, bS, nOut] out when ws_t = 1, else [bS, nOut] scratch (lbr)
        Py_ssize_t ws_t,    # 1 keeps every step's gates and hc (training), 0 overwrites them
        real *h,            # [sL, bS, nOut] out: the state after every step
        int n_threads) noexcept nogil:
    cdef Py_ssize_t G = 3 * nOut, j0, j1, k, i, j, t
    cdef const real *hPrev
    cdef int part, nparts
    with parallel(num_threads=n_threads):
        part = cells_thread_num()
        nparts = cells_num_threads()
        j0 = part_start(nOut, part, nparts, UNIT_ALIGN)
        j1 = part_start(nOut, part + 1, nparts, UNIT_ALIGN)
        # The input projection of every step at once: gx = x·Wx + bx, this thread's columns.
        for k in range(3):
            gemm(False, False, sL * bS, j1 - j0, nIn, 1, x, nIn, Wx + k * nOut + j0, G,
                 0, gx + k * nOut + j0, G)
        for i in range(sL * bS):
            for k in range(3):
                for j in range(k * nOut + j0, k * nOut + j1):
                    gx[i * G + j] += bx[j]
        for t in range(sL):
            hPrev = hI if t == 0 else <const real *>(h + (t - 1) * bS * nOut)
            if lbr:
                forward_step_lbr(bS, nOut, j0, j1, gx + t * bS * G, hPrev, Wh, bhc, gh,
                                 gates + ws_t * t * bS * G, hc + ws_t * t * bS * nOut,
                                 h + t * bS * nOut)
            else:
                forward_step_rb(bS, nOut, j0, j1, gx + t * bS * G, hPrev, Wh, gh, rh,
                                gates + ws_t * t * bS * G, h + t * bS * nOut)
            cells_barrier()  # the new state is complete before any thread multiplies it


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef inline void backward_step_lbr(
        Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t j0, Py_ssize_t j1,
        const real *dLdh,   # [bS, nOut]  gradient arriving at this step's output, or NULL
        const real *dLdg,   # [bS, G]     gradient arriving at the gates r, u, c, or NULL
        const real *hPrev,  # [bS, nOut]
        const real *gates,  # [bS, G]     r, u, c of this step
        const real *hc,     # [bS, nOut]  hPrev·Wh_c + bh_c of this step
        const real *Wh,     # [nOut, G]
        real *dz,           # [bS, G]     out: dL/d(zr, zu, zc)
        real *dhc,          # [bS, nOut]  out: dL/dhc
        real *dh,           # [bS, nOut]  in: dL/dh from the later steps; out: dL/dhPrev
        ) noexcept nogil:
    """Linear-before-reset, units [j0, j1), given g = dh + dLdh:
    dzc, dzu, dzr and dhc = dzc∘r; then dL/dhPrev = g∘u + [dzr | dzu | dhc]·Whᵀ."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, b, e
    cdef const real *g
    cdef real *d
    for b in range(bS):
        e, g, d = b * nOut + j0, gates + b * G + j0, dz + b * G + j0
        bp_state_row(n, dLdh + e if dLdh != NULL else NULL,
                     dLdg + b * G + j0 + nOut if dLdg != NULL else NULL,
                     dLdg + b * G + j0 + 2 * nOut if dLdg != NULL else NULL,
                     g + nOut, g + 2 * nOut, hPrev + e, d + nOut, d + 2 * nOut, dh + e)
        lbr_bp_reset_row(n, d + 2 * nOut, dLdg + b * G + j0 if dLdg != NULL else NULL,
                         g, hc + e, d, dhc + e)
    cells_barrier()  # every thread's dzr, dzu, dhc are in place
    gemm(False, True, bS, n, 2 * nOut, 1, dz, G, Wh + j0 * G, G, 1, dh + j0, nOut)
    gemm(False, True, bS, n, nOut, 1, dhc, nOut, Wh + j0 * G + 2 * nOut, G, 1, dh + j0, nOut)


cdef inline void backward_step_rb(
        Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t j0, Py_ssize_t j1,
        const real *dLdh,   # [bS, nOut]  or NULL
        const real *dLdg,   # [bS, G]     or NULL
        const real *hPrev,  # [bS, nOut]
        const real *gates,  # [bS, G]     r, u, c of this step
        const real *Wh,     # [nOut, G]
        real *dz,           # [bS, G]     out: dL/d(zr, zu, zc)
        real *rh,           # [bS, nOut]  out: r∘hPrev (for dL/dWh_c after the loop)
        real *a,            # [bS, nOut]  scratch: dL/d(r∘hPrev)
        real *dh,           # [bS, nOut]  in: dL/dh from the later steps; out: dL/dhPrev
        ) noexcept nogil:
    """Reset-before, units [j0, j1), given g = dh + dLdh: dzc, dzu; a = dzc·Wh_cᵀ;
    dzr = a∘hPrev∘r∘(1-r); dL/dhPrev = g∘u + a∘r + [dzr | dzu]·Wh_ruᵀ."""
    cdef Py_ssize_t G = 3 * nOut, n = j1 - j0, b, e
    cdef const real *g
    cdef real *d
    for b in range(bS):
        e, g, d = b * nOut + j0, gates + b * G + j0, dz + b * G + j0
        bp_state_row(n, dLdh + e if dLdh != NULL else NULL,
                     dLdg + b * G + j0 + nOut if dLdg != NULL else NULL,
                     dLdg + b * G + j0 + 2 * nOut if dLdg != NULL else NULL,
                     g + nOut, g + 2 * nOut, hPrev + e, d + nOut, d + 2 * nOut, dh + e)
    cells_barrier()  # every thread's dzc is in place
    gemm(False, True, bS, n, nOut, 1, dz + 2 * nOut, G, Wh + j0 * G + 2 * nOut, G, 0, a + j0, nOut)
    for b in range(bS):
        e, g, d = b * nOut + j0, gates + b * G + j0, dz + b * G + j0
        rb_bp_reset_row(n, a + e, dLdg + b * G + j0 if dLdg != NULL else NULL, g, hPrev + e,
                        d, dh + e, rh + e)
    cells_barrier()  # every thread's dzr is in place
    gemm(False, True, bS, n, 2 * nOut, 1, dz, G, Wh + j0 * G, G, 1, dh + j0, nOut)


cdef inline void sum_hprev_products(
        Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t n,
        const real *hI,     # [bS, nOut]
        const real *h,      # [sL, bS, nOut]
        const real *D,      # [sL, bS, ldd] (n columns used)
        Py_ssize_t ldd,
        real *C,            # [nOut, ldc]   out (n columns)
        Py_ssize_t ldc) noexcept nogil:
    """C = Σ_t hPrev_tᵀ·D_t with hPrev_0 = hI, hPrev_t = h[t-1]: two gemms over all steps."""
    gemm(True, False, nOut, n, bS if sL > 0 else 0, 1, hI, nOut, D, ldd, 0, C, ldc)
    gemm(True, False, nOut, n, (sL - 1) * bS if sL > 1 else 0, 1, h, nOut, D + bS * ldd, ldd,
         1, C, ldc)


cdef inline void sum_rows(Py_ssize_t rows, Py_ssize_t n,
                          const real *A,  # [rows, lda] (n columns used)
                          Py_ssize_t lda,
                          real *s,        # [n] out: Σ over rows
                          ) noexcept nogil:
    cdef Py_ssize_t i, j
    for j in range(n):
        s[j] = 0
    for i in range(rows):
        for j in range(n):
            s[j] += A[i * lda + j]


cdef void backward(
        bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
        const real *x,         # [sL, bS, nIn]
        const real *hI,        # [bS, nOut]
        const real *Wx,        # [nIn, G]
        const real *Wh,        # [nOut, G]
        const real *h,         # [sL, bS, nOut]  forward states
        const real *gates,     # [sL, bS, G]     forward r, u, c
        const real *hc,        # [sL, bS, nOut]  forward hPrev·Wh_c + bh_c (lbr)
        const real *dLdh,      # [sL, bS, nOut]  or NULL
        const real *dLdhLast,  # [bS, nOut]      or NULL
        const real *dLdgates,  # [sL, bS, G]     or NULL: gradient arriving at the gates
        real *dz,              # [sL, bS, G]     scratch: dL/d(zr, zu, zc) of every step
        real *aux,             # [sL, bS, nOut]  scratch: lbr dL/dhc, reset-before r∘hPrev
        real *a,               # [bS, nOut]      scratch (reset-before)
        real *dLdx,            # [sL, bS, nIn]   out
        real *dLdhI,           # [bS, nOut]      out; the running dL/dh during the loop
        real *dLdWx,           # [nIn, G]        out
        real *dLdWh,           # [nOut, G]       out
        real *dLdbx,           # [G]             out: Σ dz
        real *dLdbhc,          # [nOut]          out (lbr): Σ dL/dhc
        int n_threads) noexcept nogil:
    """Backpropagation through time. Only the dL/dh recurrence runs step by step; dL/dx and the
    weight and bias gradients are products over all steps after the loop."""
    cdef Py_ssize_t G = 3 * nOut, SB = sL * bS, j0, j1, k, i, j, t, e
    cdef const real *hPrev
    cdef int part, nparts
    with parallel(num_threads=n_threads):
        part = cells_thread_num()
        nparts = cells_num_threads()
        j0 = part_start(nOut, part, nparts, UNIT_ALIGN)
        j1 = part_start(nOut, part + 1, nparts, UNIT_ALIGN)
        for i in range(bS):
            for j in range(j0, j1):
                e = i * nOut + j
                dLdhI[e] = dLdhLast[e] if dLdhLast != NULL else 0
        for t in range(sL - 1, -1, -1):
            hPrev = hI if t == 0 else h + (t - 1) * bS * nOut
            if lbr:
                backward_step_lbr(bS, nOut, j0, j1,
                                  dLdh + t * bS * nOut if dLdh != NULL else NULL,
                                  dLdgates + t * bS * G if dLdgates != NULL else NULL, hPrev,
                                  gates + t * bS * G, hc + t * bS * nOut, Wh,
                                  dz + t * bS * G, aux + t * bS * nOut, dLdhI)
            else:
                backward_step_rb(bS, nOut, j0, j1,
                                 dLdh + t * bS * nOut if dLdh != NULL else NULL,
                                 dLdgates + t * bS * G if dLdgates != NULL else NULL, hPrev,
                                 gates + t * bS * G, Wh,
                                 dz + t * bS * G, aux + t * bS * nOut, a, dLdhI)
        cells_barrier()  # dz and aux of every step are complete

        # dL/dx = dz·Wxᵀ, split by input columns.
        gemm_part(part, nparts, False, True, SB, nIn, G, 1, dz, G, Wx, G, 0, dLdx, nIn)
        # The weight and bias gradients, this thread's unit columns of each gate block.
        for k in range(3):
            gemm(True, False, nIn, j1 - j0, SB, 1, x, nIn, dz + k * nOut + j0, G,
                 0, dLdWx + k * nOut + j0, G)
            sum_rows(SB, j1 - j0, dz + k * nOut + j0, G, dLdbx + k * nOut + j0)
        for k in range(2):
            sum_hprev_products(sL, bS, nOut, j1 - j0, hI, h, dz + k * nOut + j0, G,
                               dLdWh + k * nOut + j0, G)
        if lbr:
            sum_hprev_products(sL, bS, nOut, j1 - j0, hI, h, aux + j0, nOut,
                               dLdWh + 2 * nOut + j0, G)
            sum_rows(SB, j1 - j0, aux + j0, nOut, dLdbhc + j0)
        else:
            gemm(True, False, nOut, j1 - j0, SB, 1, aux, nOut, dz + 2 * nOut + j0, G,
                 0, dLdWh + 2 * nOut + j0, G)


# ---------------------------------------------------------------------------------------------
# Entry points for cells/gru.py, which has validated every shape and dtype. Arrays arrive as flat
# C-contiguous views; their sizes are checked once more here so that no caller can make the
# kernels read or write out of bounds.
# ---------------------------------------------------------------------------------------------

cdef inline real *ptr(const real[::1] a) noexcept nogil:
    """The data of a flat view; NULL for None (an array the variant does not use) or empty."""
    return <real *>&a[0] if a is not None and a.shape[0] > 0 else NULL


def _check_sizes(**arrays_and_sizes):
    for name, (a, size) in arrays_and_sizes.items():
        if a is not None and a.shape[0] != size:
            raise ValueError(f"internal: {name} has {a.shape[0]} elements, expected {size}")


def gru_forward(bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                const real[::1] x, const real[::1] hI, const real[::1] Wx, const real[::1] Wh,
                const real[::1] bx, const real[::1] bhc,
                real[::1] gx, real[::1] gh, real[::1] rh, real[::1] gates, real[::1] hc,
                bint keep, real[::1] h, int n_threads):
    """Run the forward loop. keep=True writes every step's gates [sL, bS, 3nOut] and (lbr) hc
    [sL, bS, nOut]; keep=False uses them as one step's scratch ([bS, 3nOut], [bS, nOut])."""
    cdef Py_ssize_t G = 3 * nOut, steps = sL if keep else 1
    _check_sizes(x=(x, sL * bS * nIn), hI=(hI, bS * nOut), Wx=(Wx, nIn * G), Wh=(Wh, nOut * G),
                 bx=(bx, G), bhc=(bhc, nOut), gx=(gx, sL * bS * G), gh=(gh, bS * G),
                 rh=(rh, bS * nOut), gates=(gates, steps * bS * G), hc=(hc, steps * bS * nOut),
                 h=(h, sL * bS * nOut))
    with nogil:
        forward(lbr, sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(Wx), ptr(Wh), ptr(bx), ptr(bhc),
                ptr(gx), ptr(gh), ptr(rh), ptr(gates), ptr(hc), keep, ptr(h), n_threads)


def gru_backward(bint lbr, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut,
                 const real[::1] x, const real[::1] hI, const real[::1] Wx, const real[::1] Wh,
                 const real[::1] h, const real[::1] gates, const real[::1] hc,
                 const real[::1] dLdh, const real[::1] dLdhLast, const real[::1] dLdgates,
                 real[::1] dz, real[::1] aux, real[::1] a,
                 real[::1] dLdx, real[::1] dLdhI, real[::1] dLdWx, real[::1] dLdWh,
                 real[::1] dLdbx, real[::1] dLdbhc, int n_threads):
    """Run the backward loop. dLdh, dLdhLast and dLdgates may be None (no gradient arrives
    there)."""
    cdef Py_ssize_t G = 3 * nOut
    _check_sizes(x=(x, sL * bS * nIn), hI=(hI, bS * nOut), Wx=(Wx, nIn * G), Wh=(Wh, nOut * G),
                 h=(h, sL * bS * nOut), gates=(gates, sL * bS * G), hc=(hc, sL * bS * nOut),
                 dLdh=(dLdh, sL * bS * nOut), dLdhLast=(dLdhLast, bS * nOut),
                 dLdgates=(dLdgates, sL * bS * G),
                 dz=(dz, sL * bS * G), aux=(aux, sL * bS * nOut), a=(a, bS * nOut),
                 dLdx=(dLdx, sL * bS * nIn), dLdhI=(dLdhI, bS * nOut), dLdWx=(dLdWx, nIn * G),
                 dLdWh=(dLdWh, nOut * G), dLdbx=(dLdbx, G), dLdbhc=(dLdbhc, nOut))
    with nogil:
        backward(lbr, sL, bS, nIn, nOut, ptr(x), ptr(hI), ptr(Wx), ptr(Wh), ptr(h), ptr(gates),
                 ptr(hc), ptr(dLdh), ptr(dLdhLast), ptr(dLdgates), ptr(dz), ptr(aux), ptr(a), ptr(dLdx), ptr(dLdhI),
                 ptr(dLdWx), ptr(dLdWh), ptr(dLdbx), ptr(dLdbhc), n_threads)
