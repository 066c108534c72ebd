/* Small loops over a thread's units for the families' steps (cells/step.h), for float
 * (cells_*_units_f) and double (cells_*_units_d). */

CELLS_INLINE void FN(copy_units)(ptrdiff_t n, const REAL *CELLS_RESTRICT src,
                                 REAL *CELLS_RESTRICT dst) {
    for (ptrdiff_t j = 0; j < n; ++j)
        dst[j] = src[j];
}

CELLS_INLINE void FN(add_units)(ptrdiff_t n, const REAL *CELLS_RESTRICT src,
                                REAL *CELLS_RESTRICT dst) {
    for (ptrdiff_t j = 0; j < n; ++j)
        dst[j] += src[j];
}
