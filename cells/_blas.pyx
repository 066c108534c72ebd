"""Row-major gemm for float and double over scipy.linalg.cython_blas.

BLAS is column-major; a row-major matrix is its column-major transpose. So the row-major
product C = op(A)·op(B) is computed as the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e. the
same call with A and B swapped. This is the only module that knows about it.

Every function here runs single-threaded BLAS code (the callers hold scipy's BLAS at one thread,
see cells/_threads.py) and is safe to call from any of a call's threads.
"""
from scipy.linalg.cython_blas cimport sgemm, dgemm, sgemv, dgemv


cdef void gemm(bint transA, bint transB, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
               real alpha, const real *A, Py_ssize_t lda, const real *B, Py_ssize_t ldb,
               real beta, real *C, Py_ssize_t ldc) noexcept nogil:
    """C[M, N] = alpha·op(A)·op(B) + beta·C, all row-major.

    op(A) is [M, K]: A is [M, K] (lda >= K), or [K, M] when transA (lda >= M).
    op(B) is [K, N]: B is [K, N] (ldb >= N), or [N, K] when transB (ldb >= K).
    M = 1 goes to gemv, which OpenBLAS runs far faster than a one-row gemm.
    Callers guarantee that every size and leading dimension fits in a C int.
    """
    cdef Py_ssize_t i, j
    if M == 0 or N == 0:
        return
    if K == 0:  # op(A)·op(B) is all zeros; BLAS would reject the zero leading dimensions
        for i in range(M):
            for j in range(N):
                C[i * ldc + j] = 0 if beta == 0 else beta * C[i * ldc + j]
        return
    if M == 1:
        _gemv_row(transA, transB, N, K, alpha, A, lda, B, ldb, beta, C)
        return
    cdef char *ta = b'T' if transA else b'N'
    cdef char *tb = b'T' if transB else b'N'
    cdef int m = <int>M, n = <int>N, k = <int>K
    cdef int la = <int>lda, lb = <int>ldb, lc = <int>ldc
    if real is float:
        sgemm(tb, ta, &n, &m, &k, &alpha, <float *>B, &lb, <float *>A, &la, &beta, C, &lc)
    else:
        dgemm(tb, ta, &n, &m, &k, &alpha, <double *>B, &lb, <double *>A, &la, &beta, C, &lc)


cdef inline void _gemv_row(bint transA, bint transB, Py_ssize_t N, Py_ssize_t K,
                           real alpha, const real *A, Py_ssize_t lda,
                           const real *B, Py_ssize_t ldb, real beta, real *C) noexcept nogil:
    """The M = 1 case of gemm: the row c[N] = alpha·a[K]·op(B) + beta·c.

    a is A's only row (stride 1), or A's only column (stride lda) when transA. Read column-major,
    row-major B [K, N] is an [N, K] matrix, so c = B_cm·a ('N'); with transB, B [N, K] reads as
    [K, N] and c = B_cmᵀ·a ('T').
    """
    cdef char *trans = b'T' if transB else b'N'
    cdef int rows = <int>(K if transB else N), cols = <int>(N if transB else K)
    cdef int lb = <int>ldb, inca = <int>(lda if transA else 1), incc = 1
    if real is float:
        sgemv(trans, &rows, &cols, &alpha, <float *>B, &lb, <float *>A, &inca, &beta, C, &incc)
    else:
        dgemv(trans, &rows, &cols, &alpha, <double *>B, &lb, <double *>A, &inca, &beta, C, &incc)

