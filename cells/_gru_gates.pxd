# The GRU row functions of include/cells/gru.h (one batch row, n units, each gate block its
# own pointer), dispatched on the fused type `real`. Their math is documented there.
from cells._blas cimport real

cdef extern from "cells/gru.h" nogil:
    void cells_gru_lbr_row_f(Py_ssize_t n, const float *xr, const float *xu, const float *xc,
                             const float *hr, const float *hu, const float *hh, const float *bhc,
                             const float *hPrev, float *r, float *u, float *c, float *hc, float *h)
    void cells_gru_lbr_row_d(Py_ssize_t n, const double *xr, const double *xu, const double *xc,
                             const double *hr, const double *hu, const double *hh,
                             const double *bhc, const double *hPrev, double *r, double *u,
                             double *c, double *hc, double *h)
    void cells_gru_rb_gates_row_f(Py_ssize_t n, const float *xr, const float *xu, const float *hr,
                                  const float *hu, const float *hPrev, float *r, float *u,
                                  float *rh)
    void cells_gru_rb_gates_row_d(Py_ssize_t n, const double *xr, const double *xu,
                                  const double *hr, const double *hu, const double *hPrev,
                                  double *r, double *u, double *rh)
    void cells_gru_rb_state_row_f(Py_ssize_t n, const float *xc, const float *hh, const float *u,
                                  const float *hPrev, float *c, float *h)
    void cells_gru_rb_state_row_d(Py_ssize_t n, const double *xc, const double *hh,
                                  const double *u, const double *hPrev, double *c, double *h)
    void cells_gru_bp_state_row_f(Py_ssize_t n, const float *dLdh, const float *dLdu,
                                  const float *dLdc, const float *u, const float *c,
                                  const float *hPrev, float *dzu, float *dzc, float *dh)
    void cells_gru_bp_state_row_d(Py_ssize_t n, const double *dLdh, const double *dLdu,
                                  const double *dLdc, const double *u, const double *c,
                                  const double *hPrev, double *dzu, double *dzc, double *dh)
    void cells_gru_rb_bp_reset_row_f(Py_ssize_t n, const float *a, const float *dLdr,
                                     const float *r, const float *hPrev, float *dzr, float *dh,
                                     float *rh)
    void cells_gru_rb_bp_reset_row_d(Py_ssize_t n, const double *a, const double *dLdr,
                                     const double *r, const double *hPrev, double *dzr, double *dh,
                                     double *rh)
    void cells_gru_lbr_bp_reset_row_f(Py_ssize_t n, const float *dzc, const float *dLdr,
                                      const float *r, const float *hc, float *dzr, float *dhc)
    void cells_gru_lbr_bp_reset_row_d(Py_ssize_t n, const double *dzc, const double *dLdr,
                                      const double *r, const double *hc, double *dzr, double *dhc)


cdef inline void lbr_row(Py_ssize_t n, const real *xr, const real *xu, const real *xc,
                         const real *hr, const real *hu, const real *hh, const real *bhc,
                         const real *hPrev, real *r, real *u, real *c, real *hc,
                         real *h) noexcept nogil:
    if real is float:
        cells_gru_lbr_row_f(n, xr, xu, xc, hr, hu, hh, bhc, hPrev, r, u, c, hc, h)
    else:
        cells_gru_lbr_row_d(n, xr, xu, xc, hr, hu, hh, bhc, hPrev, r, u, c, hc, h)


cdef inline void rb_gates_row(Py_ssize_t n, const real *xr, const real *xu, const real *hr,
                              const real *hu, const real *hPrev, real *r, real *u,
                              real *rh) noexcept nogil:
    if real is float:
        cells_gru_rb_gates_row_f(n, xr, xu, hr, hu, hPrev, r, u, rh)
    else:
        cells_gru_rb_gates_row_d(n, xr, xu, hr, hu, hPrev, r, u, rh)


cdef inline void rb_state_row(Py_ssize_t n, const real *xc, const real *hh, const real *u,
                              const real *hPrev, real *c, real *h) noexcept nogil:
    if real is float:
        cells_gru_rb_state_row_f(n, xc, hh, u, hPrev, c, h)
    else:
        cells_gru_rb_state_row_d(n, xc, hh, u, hPrev, c, h)


cdef inline void bp_state_row(Py_ssize_t n, const real *dLdh, const real *dLdu, const real *dLdc,
                              const real *u, const real *c, const real *hPrev, real *dzu,
                              real *dzc, real *dh) noexcept nogil:
    if real is float:
        cells_gru_bp_state_row_f(n, dLdh, dLdu, dLdc, u, c, hPrev, dzu, dzc, dh)
    else:
        cells_gru_bp_state_row_d(n, dLdh, dLdu, dLdc, u, c, hPrev, dzu, dzc, dh)


cdef inline void rb_bp_reset_row(Py_ssize_t n, const real *a, const real *dLdr, const real *r,
                                 const real *hPrev, real *dzr, real *dh, real *rh) noexcept nogil:
    if real is float:
        cells_gru_rb_bp_reset_row_f(n, a, dLdr, r, hPrev, dzr, dh, rh)
    else:
        cells_gru_rb_bp_reset_row_d(n, a, dLdr, r, hPrev, dzr, dh, rh)


cdef inline void lbr_bp_reset_row(Py_ssize_t n, const real *dzc, const real *dLdr, const real *r,
                                  const real *hc, real *dzr, real *dhc) noexcept nogil:
    if real is float:
        cells_gru_lbr_bp_reset_row_f(n, dzc, dLdr, r, hc, dzr, dhc)
    else:
        cells_gru_lbr_bp_reset_row_d(n, dzc, dLdr, r, hc, dzr, dhc)
