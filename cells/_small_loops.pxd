# Small loops of the time loop (cells/_time_loop.pyx): a row's steps and their time indices,
# sums and copies over units, zoneout, and the products of the weight gradients.
from libc.stdint cimport int64_t

from cells._blas cimport ACCUMULATE, AS_IS, OVERWRITE, TRANSPOSED, gemm, real
from cells._panels cimport cells_panel_tn_c_bytes, gemm_tn


cdef inline Py_ssize_t row_len(const int64_t *seq_len, Py_ssize_t row,
                               Py_ssize_t sL) noexcept nogil:
    """How many steps a batch row runs: seq_len[row], or every step when seq_len is NULL."""
    return sL if seq_len == NULL else seq_len[row]


cdef inline Py_ssize_t step_time(Py_ssize_t t, Py_ssize_t length, bint forward) noexcept nogil:
    """The time index a row of `length` valid steps processes at loop step t < length:
    t going forward, length-1-t in reverse (ONNX direction="reverse"): each row's valid prefix
    runs backwards and every output stays at its own time index."""
    return t if forward else length - 1 - t


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


cdef inline void zero_units(Py_ssize_t n, real *dst) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        dst[j] = 0


cdef inline void copy_units(Py_ssize_t n, const real *src, real *dst) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        dst[j] = src[j]


cdef inline void add_units(Py_ssize_t n, const real *src, real *dst) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        dst[j] += src[j]


cdef inline void weight_grad(bint transposed, Py_ssize_t m, Py_ssize_t n, Py_ssize_t rows,
                             const real *A,   # [rows, lda] (m columns used)
                             Py_ssize_t lda,
                             const real *D,   # [rows, ldd] (n columns used)
                             Py_ssize_t ldd, real beta,
                             real *W,         # [m, ldw], or [n, ldw] when transposed
                             Py_ssize_t ldw) noexcept nogil:
    """W = Aᵀ·D + beta·W (a weight's gradient: Σ over rows of inputᵀ·gradient), or,
    transposed, its transpose Dᵀ·A + beta·W (a weight in PyTorch's [gates, inputs] layout).
    On cells' gemm_tn, which reads A and D in place, where W's m·n elements stay in L2
    (cells_panel_tn_c_bytes); a larger one on BLAS, whose blocking is faster there."""
    if transposed:  # Dᵀ·A: the same product with the operands swapped
        m, n, A, lda, D, ldd = n, m, D, ldd, A, lda
    if m * n * sizeof(real) > cells_panel_tn_c_bytes():
        gemm(TRANSPOSED, AS_IS, m, n, rows, 1, A, lda, D, ldd, beta, W, ldw)
    else:
        gemm_tn(m, n, rows, A, lda, D, ldd, beta, W, ldw)


cdef inline void prev_state_product(
        Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nState, Py_ssize_t n,
        const int64_t *seq_len,  # [bS] or NULL
        bint forward,
        const real *hI,          # [bS, nState]      the initial state
        const real *h,           # [sL, bS, nState]  every output, tau-indexed, 0 at padded steps
        const real *D,           # [sL, bS, ldd]     n columns of a gradient, 0 at padded steps
        Py_ssize_t ldd,
        real *first,             # [bS, n]           scratch
        bint transposed,
        real *W,                 # [nState, ldw] out: n columns; [n, ldw] when transposed
        Py_ssize_t ldw) noexcept nogil:
    """W = Σ over every step (tau, row) of hPrev(tau, row)ᵀ·D(tau, row) (or, transposed, its
    transpose: a weight in PyTorch's [gates, inputs] layout): a recurrent weight's gradient,
    hPrev being the state that entered the step, without a copy of every step's hPrev.

    Forward, hPrev(tau) is h[tau-1], and hI at tau = 0. In reverse it is h[tau+1], and hI at a
    row's first step tau = len_b-1, where h[len_b] is a padded 0: the product with h shifted
    by one step covers every step but the first ones, which `first` gathers (D at tau = 0
    forward, at len_b-1 in reverse, 0 for an empty row) for a product with hI."""
    cdef Py_ssize_t row, len_b
    if sL == 0:
        weight_grad(transposed, nState, n, 0, hI, nState, D, ldd, OVERWRITE, W, ldw)   # zeros
        return
    if forward:
        weight_grad(transposed, nState, n, bS, hI, nState, D, ldd, OVERWRITE, W, ldw)
        weight_grad(transposed, nState, n, (sL - 1) * bS, h, nState, D + bS * ldd, ldd,
                    ACCUMULATE, W, ldw)
        return
    for row in range(bS):
        len_b = row_len(seq_len, row, sL)
        if len_b > 0:
            copy_units(n, D + ((len_b - 1) * bS + row) * ldd, first + row * n)
        else:
            zero_units(n, first + row * n)
    weight_grad(transposed, nState, n, bS, hI, nState, first, n, OVERWRITE, W, ldw)
    weight_grad(transposed, nState, n, (sL - 1) * bS, h + bS * nState, nState, D, ldd,
                ACCUMULATE, W, ldw)


cdef inline void zoneout_units(Py_ssize_t n, const real *zone, bint per_unit,
                               const real *hPrev, real *h) noexcept nogil:
    """Zoneout: h = hPrev + zone∘(h - hPrev), zone [n] (or one value for all n where not
    per_unit)."""
    cdef Py_ssize_t j
    cdef real z = zone[0]
    if per_unit:
        for j in range(n):
            h[j] = hPrev[j] + zone[j] * (h[j] - hPrev[j])
    else:
        for j in range(n):
            h[j] = hPrev[j] + z * (h[j] - hPrev[j])


cdef inline void zoneout_grad_units(Py_ssize_t n, const real *zone, bint per_unit,
                                    const real *dLdh, real *dh, real *direct) noexcept nogil:
    """Zoneout's backward: given dh = dL/dh (plus dLdh, or NULL), dh becomes zone∘dL/dh, the
    gradient at the step's new state, and direct (1 - zone)∘dL/dh, the part that goes to hPrev
    unchanged."""
    cdef Py_ssize_t j
    cdef real z
    if dLdh != NULL:
        for j in range(n):
            dh[j] += dLdh[j]
    for j in range(n):
        z = zone[j if per_unit else 0]
        direct[j] = dh[j] - z * dh[j]
        dh[j] = z * dh[j]
