# The LSTM row functions of include/cells/lstm.h (one batch row, n units, each gate block its
# own pointer), dispatched on the fused type `real`. Their math is documented there.
from cells._blas cimport real

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
