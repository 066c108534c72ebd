# The LSTM's step of the time loop (cells/_families.pxd says what a step is): the row functions
# of include/cells/lstm.h (one batch row, n units, each gate block its own pointer; their math is
# documented there), dispatched on the fused type `real`.
from cells._blas cimport real
from cells._loop cimport Loop
from cells._loops cimport copy_units

cdef extern from "cells/lstm.h" nogil:
    void cells_lstm_row_f(Py_ssize_t n, const float *xi, const float *xf, const float *xg,
                          const float *xo, const float *hi, const float *hf, const float *hg,
                          const float *ho, const float *wpi, const float *wpf, const float *wpo,
                          float clip, const float *cPrev, float *i, float *f, float *g,
                          float *o, float *c, float *h)
    void cells_lstm_row_d(Py_ssize_t n, const double *xi, const double *xf, const double *xg,
                          const double *xo, const double *hi, const double *hf,
                          const double *hg, const double *ho, const double *wpi,
                          const double *wpf, const double *wpo, double clip,
                          const double *cPrev, double *i, double *f, double *g, double *o,
                          double *c, double *h)
    void cells_lstm_bp_row_f(Py_ssize_t n, const float *dLdh, const float *i, const float *f,
                             const float *g, const float *o, const float *c,
                             const float *cPrev, const float *wpi, const float *wpf,
                             const float *wpo, float clip, float *dzi, float *dzf, float *dzg,
                             float *dzo, float *dh, float *dc, float *dwpi, float *dwpf,
                             float *dwpo)
    void cells_lstm_bp_row_d(Py_ssize_t n, const double *dLdh, const double *i,
                             const double *f, const double *g, const double *o,
                             const double *c, const double *cPrev, const double *wpi,
                             const double *wpf, const double *wpo, double clip, double *dzi,
                             double *dzf, double *dzg, double *dzo, double *dh, double *dc,
                             double *dwpi, double *dwpf, double *dwpo)


cdef inline void lstm_row(Py_ssize_t n, const real *xi, const real *xf, const real *xg,
                          const real *xo, const real *hi, const real *hf, const real *hg,
                          const real *ho, const real *wpi, const real *wpf, const real *wpo,
                          real clip, const real *cPrev, real *i, real *f, real *g, real *o,
                          real *c, real *h) noexcept nogil:
    if real is float:
        cells_lstm_row_f(n, xi, xf, xg, xo, hi, hf, hg, ho, wpi, wpf, wpo, clip, cPrev,
                         i, f, g, o, c, h)
    else:
        cells_lstm_row_d(n, xi, xf, xg, xo, hi, hf, hg, ho, wpi, wpf, wpo, clip, cPrev,
                         i, f, g, o, c, h)


cdef inline void lstm_bp_row(Py_ssize_t n, const real *dLdh, const real *i, const real *f,
                             const real *g, const real *o, const real *c, const real *cPrev,
                             const real *wpi, const real *wpf, const real *wpo, real clip,
                             real *dzi, real *dzf, real *dzg, real *dzo, real *dh, real *dc,
                             real *dwpi, real *dwpf, real *dwpo) noexcept nogil:
    if real is float:
        cells_lstm_bp_row_f(n, dLdh, i, f, g, o, c, cPrev, wpi, wpf, wpo, clip,
                            dzi, dzf, dzg, dzo, dh, dc, dwpi, dwpf, dwpo)
    else:
        cells_lstm_bp_row_d(n, dLdh, i, f, g, o, c, cPrev, wpi, wpf, wpo, clip,
                            dzi, dzf, dzg, dzo, dh, dc, dwpi, dwpf, dwpo)


# Gates (i, f, g, o) and the cell state; P = the peepholes Wp [3, nOut] (i, f, o) or NULL.

cdef inline void lstm_forward(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                              const real *hPrev, const real *cPrev, const real *P, real *g,
                              real *aux, real *hNext, real *cNext) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    lstm_row(n, zx, zx + H, zx + 2 * H, zx + 3 * H, zh, zh + H, zh + 2 * H, zh + 3 * H,
             P, P + H if P != NULL else NULL, P + 2 * H if P != NULL else NULL, <real>L.clip,
             cPrev, g, g + H, g + 2 * H, g + 3 * H, cNext, hNext)


cdef inline void lstm_backward(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                               real *g, real *aux, const real *daux, const real *hPrev,
                               const real *cPrev, const real *c, const real *P, real *d,
                               real *dh, real *dc, real *dP) noexcept nogil:
    cdef Py_ssize_t H = L.nOut, k
    lstm_bp_row(n, dLdh, g, g + H, g + 2 * H, g + 3 * H, c, cPrev,
                P, P + H if P != NULL else NULL, P + 2 * H if P != NULL else NULL, <real>L.clip,
                d, d + H, d + 2 * H, d + 3 * H, dh, dc,
                dP, dP + H if dP != NULL else NULL, dP + 2 * H if dP != NULL else NULL)
    for k in range(4):
        copy_units(n, d + k * H, g + k * H)
