# The GRU point functions of include/cells/gru.h, dispatched on the fused type `real`.
from cells._blas cimport real

cdef extern from "cells/gru.h" nogil:
    void cells_gru_rb_gates_f(float zr, float zu, float hPrev, float *r, float *u, float *rh)
    void cells_gru_rb_gates_d(double zr, double zu, double hPrev, double *r, double *u, double *rh)
    void cells_gru_rb_state_f(float zc, float u, float hPrev, float *c, float *h)
    void cells_gru_rb_state_d(double zc, double u, double hPrev, double *c, double *h)
    void cells_gru_lbr_step_f(float zr, float zu, float xc, float hc, float hPrev,
                              float *r, float *u, float *c, float *h)
    void cells_gru_lbr_step_d(double zr, double zu, double xc, double hc, double hPrev,
                              double *r, double *u, double *c, double *h)
    void cells_gru_bp_state_f(float g, float dLdu, float dLdc, float u, float c, float hPrev,
                              float *dzu, float *dzc, float *dhPrev)
    void cells_gru_bp_state_d(double g, double dLdu, double dLdc, double u, double c, double hPrev,
                              double *dzu, double *dzc, double *dhPrev)
    void cells_gru_rb_bp_reset_f(float a, float dLdr, float r, float hPrev, float *dzr, float *dhPrev)
    void cells_gru_rb_bp_reset_d(double a, double dLdr, double r, double hPrev, double *dzr, double *dhPrev)
    void cells_gru_lbr_bp_reset_f(float dzc, float dLdr, float r, float hc, float *dzr, float *dhc)
    void cells_gru_lbr_bp_reset_d(double dzc, double dLdr, double r, double hc, double *dzr, double *dhc)


cdef inline void rb_gates(real zr, real zu, real hPrev, real *r, real *u, real *rh) noexcept nogil:
    if real is float:
        cells_gru_rb_gates_f(zr, zu, hPrev, r, u, rh)
    else:
        cells_gru_rb_gates_d(zr, zu, hPrev, r, u, rh)


cdef inline void rb_state(real zc, real u, real hPrev, real *c, real *h) noexcept nogil:
    if real is float:
        cells_gru_rb_state_f(zc, u, hPrev, c, h)
    else:
        cells_gru_rb_state_d(zc, u, hPrev, c, h)


cdef inline void lbr_step(real zr, real zu, real xc, real hc, real hPrev,
                          real *r, real *u, real *c, real *h) noexcept nogil:
    if real is float:
        cells_gru_lbr_step_f(zr, zu, xc, hc, hPrev, r, u, c, h)
    else:
        cells_gru_lbr_step_d(zr, zu, xc, hc, hPrev, r, u, c, h)


cdef inline void bp_state(real g, real dLdu, real dLdc, real u, real c, real hPrev,
                          real *dzu, real *dzc, real *dhPrev) noexcept nogil:
    if real is float:
        cells_gru_bp_state_f(g, dLdu, dLdc, u, c, hPrev, dzu, dzc, dhPrev)
    else:
        cells_gru_bp_state_d(g, dLdu, dLdc, u, c, hPrev, dzu, dzc, dhPrev)


cdef inline void rb_bp_reset(real a, real dLdr, real r, real hPrev,
                             real *dzr, real *dhPrev) noexcept nogil:
    if real is float:
        cells_gru_rb_bp_reset_f(a, dLdr, r, hPrev, dzr, dhPrev)
    else:
        cells_gru_rb_bp_reset_d(a, dLdr, r, hPrev, dzr, dhPrev)


cdef inline void lbr_bp_reset(real dzc, real dLdr, real r, real hc,
                              real *dzr, real *dhc) noexcept nogil:
    if real is float:
        cells_gru_lbr_bp_reset_f(dzc, dLdr, r, hc, dzr, dhc)
    else:
        cells_gru_lbr_bp_reset_d(dzc, dLdr, r, hc, dzr, dhc)
