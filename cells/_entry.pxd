# What the entry points of every kernel module share: flat views in, data pointers out.
from libc.stdint cimport int64_t

from cells._blas cimport real


cdef inline real *ptr(const real[::1] a) noexcept nogil:
    """The data of a flat view; NULL for None (an array the call does not use) or empty."""
    return <real *>&a[0] if a is not None and a.shape[0] > 0 else NULL


cdef inline const int64_t *lengths_ptr(const int64_t[::1] seq_len) noexcept nogil:
    """seq_len's data; NULL for None (every row runs every step) or an empty batch."""
    return &seq_len[0] if seq_len is not None and seq_len.shape[0] > 0 else NULL
