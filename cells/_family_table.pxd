# The cell families' table and the dispatch to their steps (include/cells/families.h, generated
# from the rows of include/cells/family_rows.h: what each family is, its name, and the dispatch
# to its steps, whose signature include/cells/step.h documents), with the step functions
# dispatched on the fused type `real`. cells/_family_table.pyx reads the table for Python; the
# time loop (cells/_time_loop.pyx) reads it and runs the steps.
from cells._blas cimport real

cdef extern from "cells/families.h" nogil:
    enum:
        CELLS_ACTIVATIONS

    ctypedef struct cells_activation:
        int code
        double alpha
        double beta

    ctypedef struct cells_step_options:
        double clip
        int activation
        cells_activation gate_act
        cells_activation cell_act
        cells_activation out_act

    # The families (generated from include/cells/family_rows.h): CELLS_FAMILIES of them, each
    # an index into the table and the names.
    enum:
        CELLS_FAMILIES

    enum cells_param_grad:
        CELLS_PARAM_GRAD_NONE
        CELLS_PARAM_GRAD_AUX
        CELLS_PARAM_GRAD_PEEPHOLES
        CELLS_PARAM_GRAD_STEPS

    ctypedef struct cells_family_info:
        Py_ssize_t gates
        bint cell_state
        Py_ssize_t h_blocks
        int phases
        Py_ssize_t aux
        bint aux_kept
        Py_ssize_t aux_grad_block
        Py_ssize_t param_blocks
        int param_grad
        bint projects
        bint row_reduction
        bint recurrent_product

    const cells_family_info *cells_families
    const char * const *cells_family_names
    const char * const *cells_family_sources

    void cells_forward_step_f(int family, bint second_phase, const cells_step_options *o,
                              Py_ssize_t n, Py_ssize_t nOut, const float *zx, float *zh,
                              const float *hPrev, const float *cPrev, const float *P, float *g,
                              float *aux, float *hNext, float *cNext)
    void cells_forward_step_d(int family, bint second_phase, const cells_step_options *o,
                              Py_ssize_t n, Py_ssize_t nOut, const double *zx, double *zh,
                              const double *hPrev, const double *cPrev, const double *P,
                              double *g, double *aux, double *hNext, double *cNext)
    void cells_backward_step_f(int family, bint second_phase, const cells_step_options *o,
                               Py_ssize_t n, Py_ssize_t nOut, const float *dLdh,
                               const float *dLdg, float *g, float *aux, const float *daux,
                               const float *hPrev, const float *cPrev, const float *c,
                               const float *P, float *d, float *dh, float *dc, float *dP)
    void cells_backward_step_d(int family, bint second_phase, const cells_step_options *o,
                               Py_ssize_t n, Py_ssize_t nOut, const double *dLdh,
                               const double *dLdg, double *g, double *aux, const double *daux,
                               const double *hPrev, const double *cPrev, const double *c,
                               const double *P, double *d, double *dh, double *dc, double *dP)


cdef inline void forward_step(int family, bint second_phase, const cells_step_options *o,
                              Py_ssize_t n, Py_ssize_t nOut, const real *zx, real *zh,
                              const real *hPrev, const real *cPrev, const real *P, real *g,
                              real *aux, real *hNext, real *cNext) noexcept nogil:
    if real is float:
        cells_forward_step_f(family, second_phase, o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux,
                             hNext, cNext)
    else:
        cells_forward_step_d(family, second_phase, o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux,
                             hNext, cNext)


cdef inline void backward_step(int family, bint second_phase, const cells_step_options *o,
                               Py_ssize_t n, Py_ssize_t nOut, const real *dLdh,
                               const real *dLdg, real *g, real *aux, const real *daux,
                               const real *hPrev, const real *cPrev, const real *c,
                               const real *P, real *d, real *dh, real *dc,
                               real *dP) noexcept nogil:
    if real is float:
        cells_backward_step_f(family, second_phase, o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev,
                              cPrev, c, P, d, dh, dc, dP)
    else:
        cells_backward_step_d(family, second_phase, o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev,
                              cPrev, c, P, d, dh, dc, dP)
