# Recurrent weights packed once per call: the per-step products of every time loop.
#
# At every step a time loop multiplies the state (a few rows) by the same weight columns. A BLAS
# gemm re-packs those weights on every call and is slow for few rows (sgemm [1,128]x[128,384]
# ran at 2 GF/s); include/cells/panel.h multiplies a copy packed once, at the start of the call.
# Each thread packs its own columns (its gate blocks' units) into memory of its own, the gate
# blocks side by side where its share is narrower than a panel (pack_side_by_side). A call of
# one step (a cell) multiplies each weight once: it reads them in place (weights_in_place), as
# packing them would take longer than that product; so does a call whose copy could not be
# allocated. No product here calls BLAS.
from libc.stdint cimport int8_t, int32_t, uint8_t, uint16_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from cells._blas cimport OVERWRITE, real

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)

cdef extern from "cells/isa.h" nogil:
    # The kernels' instruction set, one of these values:
    enum: CELLS_ISA_AVX512
    enum: CELLS_ISA_AVX2
    enum: CELLS_ISA_GENERIC
    int cells_isa_cpu()             # the best this CPU runs
    int cells_isa()                 # the one in use
    void cells_isa_set(int isa)     # at most cells_isa_cpu()


cdef extern from "cells/caches.h" nogil:
    size_t cells_l2_bytes()         # a core's L2, read from the machine once


cdef extern from "cells/panel.h" nogil:
    size_t cells_panel_tn_c_bytes() # gemm_tn's largest C, in bytes (half a core's L2)
    enum: CELLS_PANEL_WIDTH_F      # a panel's columns: floats,
    enum: CELLS_PANEL_WIDTH_D      # doubles
    size_t cells_panel_len_f(Py_ssize_t K, Py_ssize_t n)
    size_t cells_panel_len_d(Py_ssize_t K, Py_ssize_t n)
    void cells_pack_panels_f(Py_ssize_t K, Py_ssize_t n, const float *B, Py_ssize_t ldb,
                             int transB, float *P)
    void cells_pack_panels_d(Py_ssize_t K, Py_ssize_t n, const double *B, Py_ssize_t ldb,
                             int transB, double *P)
    void cells_gemm_panels_f(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const float *A,
                             Py_ssize_t lda, const float *P, const float *bias, float beta,
                             float *C, Py_ssize_t ldc)
    void cells_gemm_panels_d(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const double *A,
                             Py_ssize_t lda, const double *P, const double *bias, double beta,
                             double *C, Py_ssize_t ldc)
    void cells_gemm_panels_fixed_f(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const float *A,
                                   Py_ssize_t lda, const float *P, const float *bias,
                                   float beta, float *C, Py_ssize_t ldc)
    void cells_gemm_panels_fixed_d(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const double *A,
                                   Py_ssize_t lda, const double *P, const double *bias,
                                   double beta, double *C, Py_ssize_t ldc)
    void cells_gemm_nn_f(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const float *A,
                         Py_ssize_t lda, const float *B, Py_ssize_t ldb, const float *bias,
                         float beta, float *C, Py_ssize_t ldc)
    void cells_gemm_nn_d(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const double *A,
                         Py_ssize_t lda, const double *B, Py_ssize_t ldb, const double *bias,
                         double beta, double *C, Py_ssize_t ldc)
    void cells_gemm_nt_f(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const float *A,
                         Py_ssize_t lda, const float *B, Py_ssize_t ldb, const float *bias,
                         float beta, float *C, Py_ssize_t ldc)
    void cells_gemm_nt_d(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const double *A,
                         Py_ssize_t lda, const double *B, Py_ssize_t ldb, const double *bias,
                         double beta, double *C, Py_ssize_t ldc)
    void cells_gemm_tn_f(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const float *A,
                         Py_ssize_t lda, const float *B, Py_ssize_t ldb, float beta, float *C,
                         Py_ssize_t ldc)
    void cells_gemm_tn_d(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const double *A,
                         Py_ssize_t lda, const double *B, Py_ssize_t ldb, double beta,
                         double *C, Py_ssize_t ldc)


cdef extern from "cells/lowp.h" nogil:
    # A prepared net's int8 and bfloat16 weights (its numeric model and layouts are there).
    enum: CELLS_LOWP_Q8_K_MAX      # the most inputs (K) an int8 product sums exactly
    enum: CELLS_LOWP_Q8_QMAX       # int8 weights lie in [-QMAX, QMAX]
    size_t cells_lowp_q8_len(Py_ssize_t K, Py_ssize_t n)
    size_t cells_lowp_bf16_len(Py_ssize_t K, Py_ssize_t n)
    Py_ssize_t cells_lowp_q8_row(Py_ssize_t K)
    Py_ssize_t cells_lowp_bf16_row(Py_ssize_t K)
    void cells_lowp_q8_pack(Py_ssize_t K, Py_ssize_t n, const float *W, Py_ssize_t ldw,
                            int transW, int8_t *P8, float *s_w, int32_t *colsum)
    void cells_lowp_q8_pack_quantized(Py_ssize_t K, Py_ssize_t n, const int8_t *Q,
                                      Py_ssize_t ldq, int transQ, const float *s, int8_t *P8,
                                      float *s_w, int32_t *colsum)
    void cells_lowp_bf16_pack(Py_ssize_t K, Py_ssize_t n, const float *W, Py_ssize_t ldw,
                              int transW, uint16_t *PB)
    void cells_lowp_q8_rows(Py_ssize_t M, Py_ssize_t K, const float *A, Py_ssize_t lda,
                            uint8_t *QA, Py_ssize_t ldq, float *s_a, int32_t *zp)
    void cells_lowp_bf16_rows(Py_ssize_t M, Py_ssize_t K, const float *A, Py_ssize_t lda,
                              uint16_t *AB, Py_ssize_t ldb)
    void cells_lowp_q8_gemm(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const uint8_t *QA,
                            Py_ssize_t ldq, const float *s_a, const int32_t *zp,
                            const int8_t *P8, const float *s_w, const int32_t *colsum,
                            const float *bias, int flags, float *C, Py_ssize_t ldc)
    void cells_lowp_bf16_gemm(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K, const uint16_t *AB,
                              Py_ssize_t ldb, const uint16_t *PB, const float *bias, int flags,
                              float *C, Py_ssize_t ldc)


# What a PackedWeights holds: panels of the loop's dtype (gemm_panels), or a prepared net's
# int8 or bfloat16 panels (lowp.h), which multiply float32 rows.
cdef enum:
    NATIVE_PANELS, INT8_PANELS, BF16_PANELS


# Rows of A per pass of project(): a multiple of the micro-kernel's 6 rows, 96 rows of up to
# 512 inputs (192 KiB) stay in L2.
cdef enum:
    PROJECT_ROWS = 96


cdef struct PackedWeights:
    # Blocks k = 0 .. blocks-1 of a weight matrix, each op(B_k) [K, n]: B_k = B + k·step is
    # [K, ldb] (transB false) or [n, ldb] read transposed (transB true).
    const void *B
    Py_ssize_t step, ldb, K, n, blocks
    bint transB
    void *P             # the blocks packed one after another, or NULL: read in place (gemm_nn,
                        # or gemm_nt with transB)
    size_t length       # elements from one packed block to the next (panel.h's panel_len of
                        # the packed width: the columns of a view, panel_columns, may be fewer)
    bint fixed_order    # multiplied in fixed order (gemm_panels_fixed: a prepared net's)
    int kind            # NATIVE_PANELS, or INT8_PANELS / BF16_PANELS: P then holds lowp.h's
                        # panels (length bytes or uint16 from block to block), and for int8
    float *s_w          # [blocks, n0] each column's scale, block k's from k·n0 (a view's
    int32_t *colsum     # [blocks, n0] columns from its first), and the sum of its int8 weights
    Py_ssize_t n0       # the columns packed (n of the whole, before any view)
    Py_ssize_t split    # side by side (pack_side_by_side): blocks [0, split) are the columns
                        # of one packed matrix, block k's n from column k·n, and blocks
                        # [split, blocks) those of a second, `length` elements after it; 0:
                        # every block packed on panels of its own
    void *out           # side by side: room for PROJECT_ROWS rows of a product (multiply)


# Rows of A converted for a product on int8 or bfloat16 panels (lowp.h): data [M, ld] of
# uint8 (int8: with each row's scale s_a and zero point zp) or of uint16 (bfloat16).
cdef struct Rows:
    int kind            # INT8_PANELS or BF16_PANELS
    void *data
    float *s_a
    int32_t *zp
    Py_ssize_t ld       # elements from one row to the next


# One part's room for the rows its products convert, and what it holds: the M rows of A as
# they were in phase `converted` of its call. A prepared net's parts convert the rows of a
# phase (the state, or an intermediate, that every task of the phase multiplies) once for all
# the tasks they run in it.
cdef struct RowScratch:
    Rows rows
    const void *A
    Py_ssize_t M
    long long converted
    long long phase     # the phase running now: set before its tasks


cdef inline size_t _panel_len(const real *tag, Py_ssize_t K, Py_ssize_t n) noexcept nogil:
    if real is float:
        return cells_panel_len_f(K, n)
    else:
        return cells_panel_len_d(K, n)


cdef inline PackedWeights weights_in_place(const real *B, Py_ssize_t step, Py_ssize_t blocks,
                                           Py_ssize_t K, Py_ssize_t n, Py_ssize_t ldb,
                                           bint transB) noexcept nogil:
    """The `blocks` blocks op(B + k·step) [K, n] of a weight matrix (rows ldb apart),
    multiplied where they are: for products that run once, which packing would slow down (a
    cell's; see gemm_nn and gemm_nt in include/cells/panel_impl.h). Nothing to free."""
    cdef PackedWeights w
    w.B, w.step, w.ldb, w.K, w.n, w.blocks, w.transB = B, step, ldb, K, n, blocks, transB
    w.P, w.length, w.fixed_order = NULL, 0, False
    w.kind, w.s_w, w.colsum, w.n0 = NATIVE_PANELS, NULL, NULL, n
    w.split, w.out = 0, NULL
    return w


cdef inline Py_ssize_t lowp_row_bytes(Py_ssize_t K) noexcept nogil:
    """The bytes a row of K inputs takes once converted for a low-precision product: int8's
    K4 bytes or bfloat16's K2 uint16, whichever is more (a RowScratch serves either)."""
    return max(cells_lowp_q8_row(K), 2 * cells_lowp_bf16_row(K))


cdef inline void convert_rows(Py_ssize_t M, Py_ssize_t K, const float *A, Py_ssize_t lda,
                              Rows *rows) noexcept nogil:
    """rows = A [M, K]'s rows converted as rows.kind says, into rows.data (room for M rows of
    lowp_row_bytes(K)), rows.ld elements apart."""
    if rows.kind == INT8_PANELS:
        rows.ld = cells_lowp_q8_row(K)
        cells_lowp_q8_rows(M, K, A, lda, <uint8_t *>rows.data, rows.ld, rows.s_a, rows.zp)
    else:
        rows.ld = cells_lowp_bf16_row(K)
        cells_lowp_bf16_rows(M, K, A, lda, <uint16_t *>rows.data, rows.ld)


cdef inline Rows rows_from(Rows rows, Py_ssize_t i) noexcept nogil:
    """The converted rows from row i on."""
    if rows.kind == INT8_PANELS:
        rows.data = <uint8_t *>rows.data + i * rows.ld
        rows.s_a, rows.zp = rows.s_a + i, rows.zp + i
    else:
        rows.data = <uint16_t *>rows.data + i * rows.ld
    return rows


cdef inline PackedWeights pack_lowp(PackedWeights w, int kind) noexcept nogil:
    """The float32 weights w (read in place: weights_in_place) packed into int8 or bfloat16
    panels (`kind`), every block with its scales and column sums after the panels in the one
    allocation (free it with free_packed()). Out of memory, P stays NULL."""
    cdef Py_ssize_t k
    cdef size_t length, panels_bytes
    if kind == INT8_PANELS:
        length = cells_lowp_q8_len(w.K, w.n)
        panels_bytes = w.blocks * length
    else:
        length = cells_lowp_bf16_len(w.K, w.n)
        panels_bytes = w.blocks * length * sizeof(uint16_t)
    panels_bytes = (panels_bytes + 63) // 64 * 64
    cdef size_t scales_bytes = (w.blocks * w.n * (sizeof(float) + sizeof(int32_t))
                                if kind == INT8_PANELS else 0)
    if posix_memalign(&w.P, 64, max(64, panels_bytes + scales_bytes)) != 0:
        w.P = NULL
        return w
    w.kind, w.length, w.fixed_order, w.n0 = kind, length, True, w.n
    if kind == INT8_PANELS:
        w.s_w = <float *>(<char *>w.P + panels_bytes)
        w.colsum = <int32_t *>(w.s_w + w.blocks * w.n)
    for k in range(w.blocks):
        if kind == INT8_PANELS:
            cells_lowp_q8_pack(w.K, w.n, <const float *>w.B + k * w.step, w.ldb, w.transB,
                               <int8_t *>w.P + k * length, w.s_w + k * w.n,
                               w.colsum + k * w.n)
        else:
            cells_lowp_bf16_pack(w.K, w.n, <const float *>w.B + k * w.step, w.ldb, w.transB,
                                 <uint16_t *>w.P + k * length)
    return w


cdef inline PackedWeights pack_weights(const real *B, Py_ssize_t step, Py_ssize_t blocks,
                                       Py_ssize_t K, Py_ssize_t n, Py_ssize_t ldb,
                                       bint transB) noexcept nogil:
    """The `blocks` blocks op(B + k·step) [K, n] of a weight matrix, packed into memory of this
    thread (free it with free_packed()). Out of memory, P stays NULL: the weights are then read
    in place."""
    cdef PackedWeights w = weights_in_place(B, step, blocks, K, n, ldb, transB)
    cdef Py_ssize_t k
    cdef size_t length = _panel_len(B, K, n)
    if length == 0 or posix_memalign(&w.P, 64, blocks * length * sizeof(real)) != 0:
        w.P = NULL
        return w
    w.length = length
    for k in range(blocks):
        if real is float:
            cells_pack_panels_f(K, n, B + k * step, ldb, transB, <float *>w.P + k * length)
        else:
            cells_pack_panels_d(K, n, B + k * step, ldb, transB, <double *>w.P + k * length)
    return w


cdef inline Py_ssize_t panel_width(const real *tag) noexcept nogil:
    """A panel's columns in the dtype of `tag`."""
    return CELLS_PANEL_WIDTH_F if real is float else CELLS_PANEL_WIDTH_D


cdef inline bint packs_side_by_side(Py_ssize_t width, Py_ssize_t blocks, Py_ssize_t split,
                                    Py_ssize_t n) noexcept nogil:
    """Whether a thread's `blocks` gate blocks of n columns are packed side by side, in the
    groups [0, split) and [split, blocks) (pack_side_by_side): where the kernels' tiles span a
    whole panel (AVX-512's; AVX2's and the baseline's span one vector of it) and side by side
    the blocks take fewer panels of `width` columns than each on panels of its own. A share
    narrower than a panel then runs on whole tiles: 16 units of an LSTM's four gates fill one
    panel side by side, and a quarter of each of four panels apart."""
    return (cells_isa() == CELLS_ISA_AVX512
            and ((split * n + width - 1) // width
                 + ((blocks - split) * n + width - 1) // width
                 < blocks * ((n + width - 1) // width)))


cdef inline void _place_columns(Py_ssize_t K, Py_ssize_t n, const real *src, real *dst,
                                Py_ssize_t c0) noexcept nogil:
    """The n columns of src, packed [K, n], as the columns [c0, c0 + n) of dst, packed: in runs
    that cross no panel's edge in either."""
    cdef Py_ssize_t width = panel_width(src), j = 0, c, run, k
    cdef const real *s
    cdef real *d
    while j < n:
        c = c0 + j
        run = min(width - c % width, width - j % width, n - j)
        s = src + (j // width) * K * width + j % width
        d = dst + (c // width) * K * width + c % width
        for k in range(K):
            memcpy(d + k * width, s + k * width, run * sizeof(real))
        j += run


cdef inline PackedWeights pack_side_by_side(const real *B, Py_ssize_t step, Py_ssize_t blocks,
                                            Py_ssize_t split, Py_ssize_t K, Py_ssize_t n,
                                            Py_ssize_t ldb, bint transB) noexcept nogil:
    """The blocks op(B + k·step) [K, n] of a weight matrix packed side by side: blocks
    [0, split) as the columns of one packed matrix [K, split·n], block k's from column k·n,
    blocks [split, blocks) as a second after it (a two-phase family's blocks that multiply
    aux), with room for PROJECT_ROWS rows of a product (multiply writes those there, then
    moves each block's columns to its place), in one allocation of this thread (free it with
    free_packed()). Out of memory, P stays NULL: the weights are then read in place."""
    cdef PackedWeights w = weights_in_place(B, step, blocks, K, n, ldb, transB)
    cdef size_t first = _panel_len(B, K, split * n)
    cdef size_t panels = first + _panel_len(B, K, (blocks - split) * n)
    cdef size_t room = max(_panel_len(B, K, n), <size_t>(PROJECT_ROWS * blocks * n))
    cdef Py_ssize_t k
    cdef real *block
    if panels == 0 or posix_memalign(&w.P, 64, (panels + room) * sizeof(real)) != 0:
        w.P = NULL
        return w
    memset(w.P, 0, panels * sizeof(real))  # the last panel's columns past the matrix's
    w.length, w.split, w.out = first, split, <real *>w.P + panels
    block = <real *>w.out  # each block packed on its own first, in the room
    for k in range(blocks):
        if real is float:
            cells_pack_panels_f(K, n, B + k * step, ldb, transB, block)
        else:
            cells_pack_panels_d(K, n, B + k * step, ldb, transB, block)
        if k < split:
            _place_columns(K, n, block, <real *>w.P, k * n)
        else:
            _place_columns(K, n, block, <real *>w.P + first, (k - split) * n)
    return w


cdef inline void gemm_packed(Py_ssize_t M, const real *A, Py_ssize_t lda, PackedWeights w,
                             Py_ssize_t k, real beta, real *C, Py_ssize_t ldc,
                             const real *bias=NULL) noexcept nogil:
    """C[M, n] = A[M, K]·op(B_k) (+ bias [n], to every row) + beta·C (beta 0: C is only
    written), block k of w."""
    cdef const real *B = <const real *>w.B + k * w.step
    if w.P != NULL and w.fixed_order:
        if real is float:
            cells_gemm_panels_fixed_f(M, w.n, w.K, A, lda, <const float *>w.P + k * w.length,
                                      bias, beta, C, ldc)
        else:
            cells_gemm_panels_fixed_d(M, w.n, w.K, A, lda, <const double *>w.P + k * w.length,
                                      bias, beta, C, ldc)
    elif w.P != NULL:
        if real is float:
            cells_gemm_panels_f(M, w.n, w.K, A, lda, <const float *>w.P + k * w.length, bias,
                                beta, C, ldc)
        else:
            cells_gemm_panels_d(M, w.n, w.K, A, lda, <const double *>w.P + k * w.length, bias,
                                beta, C, ldc)
    elif w.transB:
        if real is float:
            cells_gemm_nt_f(M, w.n, w.K, A, lda, B, w.ldb, bias, beta, C, ldc)
        else:
            cells_gemm_nt_d(M, w.n, w.K, A, lda, B, w.ldb, bias, beta, C, ldc)
    elif real is float:
        cells_gemm_nn_f(M, w.n, w.K, A, lda, B, w.ldb, bias, beta, C, ldc)
    else:
        cells_gemm_nn_d(M, w.n, w.K, A, lda, B, w.ldb, bias, beta, C, ldc)


cdef inline void multiply_rows(Py_ssize_t M, Rows rows, PackedWeights w, Py_ssize_t k0,
                               Py_ssize_t k1, Py_ssize_t step, const float *bias, float *C,
                               Py_ssize_t ldc) noexcept nogil:
    """C[:, k·step : k·step + n] = rows·op(B_k) (+ bias[k·step : k·step + n]) for the blocks
    k0 <= k < k1 of w's int8 or bfloat16 panels: M converted rows (rows.kind is w.kind)."""
    cdef Py_ssize_t k
    cdef const float *block_bias
    for k in range(k0, k1):
        block_bias = bias + k * step if bias != NULL else NULL
        if w.kind == INT8_PANELS:
            cells_lowp_q8_gemm(M, w.n, w.K, <const uint8_t *>rows.data, rows.ld, rows.s_a,
                               rows.zp, <const int8_t *>w.P + k * w.length, w.s_w + k * w.n0,
                               w.colsum + k * w.n0, block_bias, 0, C + k * step, ldc)
        else:
            cells_lowp_bf16_gemm(M, w.n, w.K, <const uint16_t *>rows.data, rows.ld,
                                 <const uint16_t *>w.P + k * w.length, block_bias, 0,
                                 C + k * step, ldc)


cdef inline void multiply_side_by_side(Py_ssize_t M, const real *A, Py_ssize_t lda,
                                       PackedWeights w, Py_ssize_t k0, Py_ssize_t k1,
                                       Py_ssize_t step, const real *bias, real *C,
                                       Py_ssize_t ldc) noexcept nogil:
    """multiply() of the blocks [k0, k1) of weights packed side by side, one of their groups
    ([0, w.split) or [w.split, w.blocks)): PROJECT_ROWS rows at a time, the product of all
    the group's columns into w.out, then each block's columns to C[:, k·step : k·step + n],
    with the bias added."""
    cdef Py_ssize_t columns = (k1 - k0) * w.n, chunk, i0, m, r, k, j
    cdef real *out = <real *>w.out
    cdef const real *src
    cdef const real *b
    cdef real *dst
    cdef PackedWeights group = w  # the group's panels as one block of `columns` columns
    group.P = <real *>w.P + (w.length if k0 > 0 else 0)
    group.n, group.blocks, group.split = columns, 1, 0
    for chunk in range((M + PROJECT_ROWS - 1) // PROJECT_ROWS):
        i0 = chunk * PROJECT_ROWS
        m = min(PROJECT_ROWS, M - i0)
        gemm_packed(m, A + i0 * lda, lda, group, 0, OVERWRITE, out, columns)
        for r in range(m):
            for k in range(k0, k1):
                src = out + r * columns + (k - k0) * w.n
                dst = C + (i0 + r) * ldc + k * step
                if bias == NULL:
                    memcpy(dst, src, w.n * sizeof(real))
                else:
                    b = bias + k * step
                    for j in range(w.n):
                        dst[j] = src[j] + b[j]


cdef inline void multiply(Py_ssize_t M, const real *A, Py_ssize_t lda, PackedWeights w,
                          Py_ssize_t k0, Py_ssize_t k1, Py_ssize_t step, const real *bias,
                          real *C, Py_ssize_t ldc, RowScratch *scratch) noexcept nogil:
    """C[:, k·step : k·step + n] = A[M, K]·op(B_k) (+ bias[k·step : k·step + n]) for the
    blocks k0 <= k < k1 of w. On int8 or bfloat16 panels (float32 only), A's rows are
    converted into `scratch` (room for M rows) once per phase: a part's later tasks of the
    phase find them there."""
    cdef Py_ssize_t k
    if w.split > 0:
        multiply_side_by_side(M, A, lda, w, k0, k1, step, bias, C, ldc)
        return
    if real is float and w.kind != NATIVE_PANELS:
        if not (scratch.A == A and scratch.M == M and scratch.converted == scratch.phase):
            scratch.rows.kind = w.kind
            convert_rows(M, w.K, A, lda, &scratch.rows)
            scratch.A, scratch.M, scratch.converted = A, M, scratch.phase
        multiply_rows(M, scratch.rows, w, k0, k1, step, bias, C, ldc)
        return
    for k in range(k0, k1):
        gemm_packed(M, A, lda, w, k, OVERWRITE, C + k * step, ldc,
                    bias + k * step if bias != NULL else NULL)


cdef inline void project(Py_ssize_t rows,
                         const real *A,      # [rows, lda]
                         Py_ssize_t lda, PackedWeights w,
                         const real *bias,   # [blocks·step] or NULL: block k's from k·step
                         real *C,            # [rows, ldc]: block k's n columns from k·step
                         Py_ssize_t ldc, Py_ssize_t step) noexcept nogil:
    """C[:, k·step : k·step + n] = A·op(B_k) (+ bias[k·step : k·step + n]) for every block k
    of w (panels of A's dtype): an input projection of many steps at once. It runs
    PROJECT_ROWS rows at a time through every block, so that those rows of A stay in cache
    while the blocks' panels pass over them."""
    cdef Py_ssize_t chunk, i0, m
    for chunk in range((rows + PROJECT_ROWS - 1) // PROJECT_ROWS):
        i0 = chunk * PROJECT_ROWS
        m = min(PROJECT_ROWS, rows - i0)
        multiply(m, A + i0 * lda, lda, w, 0, w.blocks, step, bias, C + i0 * ldc, ldc, NULL)


cdef inline void project_rows(Py_ssize_t M, Rows rows, PackedWeights w, const float *bias,
                              float *C, Py_ssize_t ldc, Py_ssize_t step) noexcept nogil:
    """project() of M rows already converted for w's int8 or bfloat16 panels."""
    cdef Py_ssize_t chunk, i0
    for chunk in range((M + PROJECT_ROWS - 1) // PROJECT_ROWS):
        i0 = chunk * PROJECT_ROWS
        multiply_rows(min(PROJECT_ROWS, M - i0), rows_from(rows, i0), w, 0, w.blocks, step,
                      bias, C + i0 * ldc, ldc)


cdef inline PackedWeights panel_columns(const real *tag, PackedWeights w, Py_ssize_t j0,
                                        Py_ssize_t n) noexcept nogil:
    """The columns [j0, j0 + n) of every block of w, packed (j0 a multiple of the panel width,
    panel.h's panel_width: whole panels): a view of w's copy, which threads share (`tag` picks
    the dtype). Nothing to free."""
    if w.kind == INT8_PANELS:
        w.P = <int8_t *>w.P + j0 * cells_lowp_q8_row(w.K)
        w.s_w, w.colsum = w.s_w + j0, w.colsum + j0
    elif w.kind == BF16_PANELS:
        w.P = <uint16_t *>w.P + j0 * cells_lowp_bf16_row(w.K)
    else:
        w.P = <real *>w.P + j0 * w.K
    w.n = n
    return w


cdef inline void free_packed(PackedWeights *w) noexcept nogil:
    free(w.P)
    w.P = NULL


cdef inline void gemm_tn(Py_ssize_t M, Py_ssize_t n, Py_ssize_t K,
                         const real *A,   # [K, lda] (M columns used)
                         Py_ssize_t lda,
                         const real *B,   # [K, ldb] (n columns used)
                         Py_ssize_t ldb, real beta,
                         real *C,         # [M, ldc] (n columns used)
                         Py_ssize_t ldc) noexcept nogil:
    """C = Aᵀ·B + beta·C, A and B read in place (include/cells/panel.h)."""
    if real is float:
        cells_gemm_tn_f(M, n, K, A, lda, B, ldb, beta, C, ldc)
    else:
        cells_gemm_tn_d(M, n, K, A, lda, B, ldb, beta, C, ldc)
