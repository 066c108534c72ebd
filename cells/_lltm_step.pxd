# The LLTM's step of the time loop (cells/_families.pxd says what a step is): the row functions
# of include/cells/lltm.h (one batch row, n units, each gate block its own pointer; their math is
# documented there), dispatched on the fused type `real`.
from cells._blas cimport real
from cells._loop cimport Loop
from cells._loops cimport copy_units

cdef extern from "cells/lltm.h" nogil:
    void cells_lltm_row_f(Py_ssize_t n, const float *zx0, const float *zx1, const float *zx2,
                          float *z0, float *z1, float *z2, const float *cPrev, float *i,
                          float *o, float *cand, float *c, float *h)
    void cells_lltm_row_d(Py_ssize_t n, const double *zx0, const double *zx1, const double *zx2,
                          double *z0, double *z1, double *z2, const double *cPrev, double *i,
                          double *o, double *cand, double *c, double *h)
    void cells_lltm_bp_row_f(Py_ssize_t n, const float *dLdh, float *dh, float *dc,
                             const float *i, const float *o, const float *cand, const float *c,
                             float *dz0, float *dz1, float *dz2)
    void cells_lltm_bp_row_d(Py_ssize_t n, const double *dLdh, double *dh, double *dc,
                             const double *i, const double *o, const double *cand,
                             const double *c, double *dz0, double *dz1, double *dz2)


cdef inline void lltm_row(Py_ssize_t n, const real *zx0, const real *zx1, const real *zx2,
                          real *z0, real *z1, real *z2, const real *cPrev, real *i, real *o,
                          real *cand, real *c, real *h) noexcept nogil:
    if real is float:
        cells_lltm_row_f(n, zx0, zx1, zx2, z0, z1, z2, cPrev, i, o, cand, c, h)
    else:
        cells_lltm_row_d(n, zx0, zx1, zx2, z0, z1, z2, cPrev, i, o, cand, c, h)


cdef inline void lltm_bp_row(Py_ssize_t n, const real *dLdh, real *dh, real *dc, const real *i,
                             const real *o, const real *cand, const real *c, real *dz0,
                             real *dz1, real *dz2) noexcept nogil:
    if real is float:
        cells_lltm_bp_row_f(n, dLdh, dh, dc, i, o, cand, c, dz0, dz1, dz2)
    else:
        cells_lltm_bp_row_d(n, dLdh, dh, dc, i, o, cand, c, dz0, dz1, dz2)


# Gates (input, output, candidate) and the cell state.

cdef inline void lltm_forward(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                              const real *hPrev, const real *cPrev, const real *P, real *g,
                              real *aux, real *hNext, real *cNext) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    lltm_row(n, zx, zx + H, zx + 2 * H, zh, zh + H, zh + 2 * H, cPrev, g, g + H, g + 2 * H,
             cNext, hNext)


cdef inline void lltm_backward(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                               real *g, real *aux, const real *daux, const real *hPrev,
                               const real *cPrev, const real *c, const real *P, real *d,
                               real *dh, real *dc, real *dP) noexcept nogil:
    cdef Py_ssize_t H = L.nOut, k
    lltm_bp_row(n, dLdh, dh, dc, g, g + H, g + 2 * H, c, d, d + H, d + 2 * H)
    for k in range(3):
        copy_units(n, d + k * H, g + k * H)
