# The vanilla RNN's step of the time loop (cells/_families.pxd says what a step is): the row
# functions of include/cells/rnn.h, dispatched on the fused type `real`. One gate block: the
# activation h = act(z) itself.
from cells._blas cimport real
from cells._loop cimport Loop
from cells._loops cimport copy_units

cdef extern from "cells/rnn.h" nogil:
    void cells_rnn_row_f(Py_ssize_t n, int activation, const float *zx, const float *zh,
                         float *g, float *h)
    void cells_rnn_row_d(Py_ssize_t n, int activation, const double *zx, const double *zh,
                         double *g, double *h)
    void cells_rnn_bp_row_f(Py_ssize_t n, int activation, const float *dLdh, const float *g,
                            float *dz, float *dh)
    void cells_rnn_bp_row_d(Py_ssize_t n, int activation, const double *dLdh, const double *g,
                            double *dz, double *dh)


cdef inline void rnn_forward(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                             const real *hPrev, const real *cPrev, const real *P, real *g,
                             real *aux, real *hNext, real *cNext) noexcept nogil:
    if real is float:
        cells_rnn_row_f(n, L.activation, zx, zh, g, hNext)
    else:
        cells_rnn_row_d(n, L.activation, zx, zh, g, hNext)


cdef inline void rnn_backward(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                              real *g, real *aux, const real *daux, const real *hPrev,
                              const real *cPrev, const real *c, const real *P, real *d,
                              real *dh, real *dc, real *dP) noexcept nogil:
    if real is float:
        cells_rnn_bp_row_f(n, L.activation, dLdh, g, d, dh)
    else:
        cells_rnn_bp_row_d(n, L.activation, dLdh, g, d, dh)
    copy_units(n, d, g)
