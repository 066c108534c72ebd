# Row-major BLAS for float and double, over scipy.linalg.cython_blas (see _blas.pyx).
ctypedef fused real:
    float
    double

# gemm's transA / transB: op(A) = A or Aᵀ.
cdef enum:
    AS_IS = 0
    TRANSPOSED = 1

# beta: C = A·B overwrites C (which is then not read), or C += A·B accumulates into it.
cdef enum:
    OVERWRITE = 0
    ACCUMULATE = 1

cdef void gemm(bint transA, bint transB, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
               real alpha, const real *A, Py_ssize_t lda, const real *B, Py_ssize_t ldb,
               real beta, real *C, Py_ssize_t ldc) noexcept nogil

