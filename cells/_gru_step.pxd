# The GRU's step of the time loop (cells/_families.pxd says what a step is): the row functions
# of include/cells/gru.h (one batch row, n units, each gate block its own pointer; their math is
# documented there), dispatched on the fused type `real`, and the two variants' steps.
from cells._blas cimport real
from cells._loop cimport Loop
from cells._loops cimport add_units, copy_units

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


# Linear-before-reset: gates (r, u, c); aux = hc = hPrev·Wh_c + bh_c (kept: the backward needs
# it); P = bh_c. Its recurrent-side gradient is [dzr | dzu | dL/dhc] (dL/dhc = dzc∘r, kept in aux
# for dL/dWh_c and accumulated into dL/dbh_c).

cdef inline void lbr_forward(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                             const real *hPrev, const real *cPrev, const real *P, real *g,
                             real *aux, real *hNext, real *cNext) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    lbr_row(n, zx, zx + H, zx + 2 * H, zh, zh + H, zh + 2 * H, P, hPrev, g, g + H, g + 2 * H,
            aux, hNext)


cdef inline void lbr_backward(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                              real *g, real *aux, const real *daux, const real *hPrev,
                              const real *cPrev, const real *c, const real *P, real *d,
                              real *dh, real *dc, real *dP) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    bp_state_row(n, dLdh, dLdg + H if dLdg != NULL else NULL,
                 dLdg + 2 * H if dLdg != NULL else NULL, g + H, g + 2 * H, hPrev,
                 d + H, d + 2 * H, dh)
    copy_units(n, d + 2 * H, g + 2 * H)    # dzc (c is read no more)
    lbr_bp_reset_row(n, g + 2 * H, dLdg, g, aux, d, d + 2 * H)
    copy_units(n, d, g)                    # dzr
    copy_units(n, d + H, g + H)            # dzu
    copy_units(n, d + 2 * H, aux)          # dL/dhc
    add_units(n, d + 2 * H, dP)            # dL/dbh_c = Σ dL/dhc


# Reset-before: gates (r, u, c); aux = r∘hPrev, the input of the candidate's recurrent product,
# which runs in a second phase (after every thread's part of aux is in place).

cdef inline void rb_forward(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                            const real *hPrev, const real *cPrev, const real *P, real *g,
                            real *aux, real *hNext, real *cNext) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    rb_gates_row(n, zx, zx + H, zh, zh + H, hPrev, g, g + H, aux)


cdef inline void rb_forward_b(const Loop *L, Py_ssize_t n, const real *zx, real *zh,
                              const real *hPrev, const real *cPrev, const real *P, real *g,
                              real *aux, real *hNext, real *cNext) noexcept nogil:
    """zh + 2nOut holds (r∘hPrev)·Wh_c."""
    cdef Py_ssize_t H = L.nOut
    rb_state_row(n, zx + 2 * H, zh + 2 * H, g + H, hPrev, g + 2 * H, hNext)


cdef inline void rb_backward(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                             real *g, real *aux, const real *daux, const real *hPrev,
                             const real *cPrev, const real *c, const real *P, real *d,
                             real *dh, real *dc, real *dP) noexcept nogil:
    cdef Py_ssize_t H = L.nOut
    bp_state_row(n, dLdh, dLdg + H if dLdg != NULL else NULL,
                 dLdg + 2 * H if dLdg != NULL else NULL, g + H, g + 2 * H, hPrev,
                 d + H, d + 2 * H, dh)


cdef inline void rb_backward_b(const Loop *L, Py_ssize_t n, const real *dLdh, const real *dLdg,
                               real *g, real *aux, const real *daux, const real *hPrev,
                               const real *cPrev, const real *c, const real *P, real *d,
                               real *dh, real *dc, real *dP) noexcept nogil:
    """daux = dL/d(r∘hPrev) = dzc·Wh_cᵀ; keeps aux = r∘hPrev for dL/dWh_c."""
    cdef Py_ssize_t H = L.nOut, k
    rb_bp_reset_row(n, daux, dLdg, g, hPrev, d, dh, aux)
    for k in range(3):
        copy_units(n, d + k * H, g + k * H)
