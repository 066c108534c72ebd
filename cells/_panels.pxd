# Recurrent weights packed once per call: the per-step products of every time loop.
#
# At every step a time loop multiplies the state (a few rows) by the same weight columns. A BLAS
# gemm re-packs those weights on every call and is slow for few rows (sgemm [1,128]x[128,384]
# ran at 2 GF/s); include/cells/panel.h multiplies a copy packed once, at the start of the call.
# Each thread packs its own columns (its gate blocks' units) into memory of its own. A call of
# one step (a cell) multiplies each weight once: it reads them in place (weights_in_place), as
# packing them would take longer than that product; so does a call whose copy could not be
# allocated. No product here calls BLAS.
from libc.stdlib cimport free

from cells._blas cimport OVERWRITE, real

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)

cdef extern from "cells/panel.h" nogil:
    enum: CELLS_PANEL_TN_C_BYTES   # gemm_tn's largest C, in bytes
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


cdef inline void project(Py_ssize_t rows,
                         const real *A,      # [rows, lda]
                         Py_ssize_t lda, PackedWeights w,
                         const real *bias,   # [blocks·step] or NULL: block k's from k·step
                         real *C,            # [rows, ldc]: block k's n columns from k·step
                         Py_ssize_t ldc, Py_ssize_t step) noexcept nogil:
    """C[:, k·step : k·step + n] = A·op(B_k) (+ bias[k·step : k·step + n]) for every block k
    of w: an input projection of many steps at once. It runs PROJECT_ROWS rows at a time
    through every block, so that those rows of A stay in cache while the blocks' panels pass
    over them."""
    cdef Py_ssize_t chunk, i0, k, m
    for chunk in range((rows + PROJECT_ROWS - 1) // PROJECT_ROWS):
        i0 = chunk * PROJECT_ROWS
        m = min(PROJECT_ROWS, rows - i0)
        for k in range(w.blocks):
            gemm_packed(m, A + i0 * lda, lda, w, k, OVERWRITE, C + i0 * ldc + k * step, ldc,
                        bias + k * step if bias != NULL else NULL)


cdef inline PackedWeights panel_columns(const real *tag, PackedWeights w, Py_ssize_t j0,
                                        Py_ssize_t n) noexcept nogil:
    """The columns [j0, j0 + n) of every block of w, packed (j0 a multiple of the panel width,
    panel.h's panel_width: whole panels): a view of w's copy, which threads share (`tag` picks
    the dtype). Nothing to free."""
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
