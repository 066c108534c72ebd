# Small loops shared by the kernels of every cell family (GRU, LSTM, LLTM).
from libc.stdint cimport int64_t

from cells._blas cimport real


cdef inline Py_ssize_t row_len(const int64_t *seq_len, Py_ssize_t b,
                               Py_ssize_t sL) noexcept nogil:
    """How many steps row b runs: seq_len[b], or every step when seq_len is NULL."""
    return sL if seq_len == NULL else seq_len[b]


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


cdef inline void add_gate_bias(Py_ssize_t rows, Py_ssize_t nOut, Py_ssize_t ngates,
                               Py_ssize_t j0, Py_ssize_t j1,
                               const real *b,  # [ngates·nOut]
                               real *A,        # [rows, ngates·nOut]
                               ) noexcept nogil:
    """A[i, k·nOut + j] += b[k·nOut + j] for every row i, gate block k and unit j in [j0, j1):
    the bias of one thread's columns of an input projection."""
    cdef Py_ssize_t G = ngates * nOut, i, k, j
    for i in range(rows):
        for k in range(ngates):
            for j in range(k * nOut + j0, k * nOut + j1):
                A[i * G + j] += b[j]
