/* The dispatch from a family to its steps, for float (cells_*_step_f) and double
 * (cells_*_step_d), generated from cells/family_rows.h (see families.h): a case per family,
 * which calls cells_<steps>_forward (backward), or in the second phase of a two-phase family
 * (second_phase: the step once every unit's first phase is done) cells_<steps>_forward_b
 * (backward_b). A one-phase family names no second step. */

#define CELLS_FORWARD_ARGS_ o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext
#define CELLS_FORWARD_1_(steps) FN(steps##_forward)(CELLS_FORWARD_ARGS_)
#define CELLS_FORWARD_2_(steps)                                                               \
    if (second_phase)                                                                        \
        FN(steps##_forward_b)(CELLS_FORWARD_ARGS_);                                          \
    else                                                                                     \
        FN(steps##_forward)(CELLS_FORWARD_ARGS_)
#define CELLS_FORWARD_PHASES_(steps, phases) CELLS_FORWARD_##phases##_(steps)
#define CELLS_FORWARD_CASE_(TAG)                                                              \
    case CELLS_##TAG:                                                                        \
        CELLS_FORWARD_PHASES(CELLS_FAMILY_STEPS(CELLS_FAMILY_##TAG),                         \
                             CELLS_FAMILY_PHASES(CELLS_FAMILY_##TAG));                       \
        break;
#define CELLS_FORWARD_PHASES(steps, phases) CELLS_FORWARD_PHASES_(steps, phases)

CELLS_ROW FN(forward_step_any)(int family, int second_phase, const cells_step_options *o,
                               ptrdiff_t n, ptrdiff_t nOut, const REAL *zx, REAL *zh,
                               const REAL *hPrev, const REAL *cPrev, const REAL *P, REAL *g,
                               REAL *aux, REAL *hNext, REAL *cNext) {
    switch (family) {
        CELLS_FAMILY_LIST(CELLS_FORWARD_CASE_)
    }
}
/* FN(forward_step): the above, compiled for each instruction set (cells/isa.h). */
CELLS_ISA_VERSIONS(FN(forward_step), FN(forward_step_any),
                   (int family, int second_phase, const cells_step_options *o, ptrdiff_t n,
                    ptrdiff_t nOut, const REAL *zx, REAL *zh, const REAL *hPrev,
                    const REAL *cPrev, const REAL *P, REAL *g, REAL *aux, REAL *hNext,
                    REAL *cNext),
                   (family, second_phase, CELLS_FORWARD_ARGS_))

#define CELLS_BACKWARD_ARGS_ o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP
#define CELLS_BACKWARD_1_(steps) FN(steps##_backward)(CELLS_BACKWARD_ARGS_)
#define CELLS_BACKWARD_2_(steps)                                                              \
    if (second_phase)                                                                        \
        FN(steps##_backward_b)(CELLS_BACKWARD_ARGS_);                                        \
    else                                                                                     \
        FN(steps##_backward)(CELLS_BACKWARD_ARGS_)
#define CELLS_BACKWARD_PHASES_(steps, phases) CELLS_BACKWARD_##phases##_(steps)
#define CELLS_BACKWARD_PHASES(steps, phases) CELLS_BACKWARD_PHASES_(steps, phases)
#define CELLS_BACKWARD_CASE_(TAG)                                                             \
    case CELLS_##TAG:                                                                        \
        CELLS_BACKWARD_PHASES(CELLS_FAMILY_STEPS(CELLS_FAMILY_##TAG),                        \
                              CELLS_FAMILY_PHASES(CELLS_FAMILY_##TAG));                      \
        break;

CELLS_ROW FN(backward_step_any)(int family, int second_phase, const cells_step_options *o,
                                ptrdiff_t n, ptrdiff_t nOut, const REAL *dLdh,
                                const REAL *dLdg, REAL *g, REAL *aux, const REAL *daux,
                                const REAL *hPrev, const REAL *cPrev, const REAL *c,
                                const REAL *P, REAL *d, REAL *dh, REAL *dc, REAL *dP) {
    switch (family) {
        CELLS_FAMILY_LIST(CELLS_BACKWARD_CASE_)
    }
}
/* FN(backward_step): the above, compiled for each instruction set (cells/isa.h). */
CELLS_ISA_VERSIONS(FN(backward_step), FN(backward_step_any),
                   (int family, int second_phase, const cells_step_options *o, ptrdiff_t n,
                    ptrdiff_t nOut, const REAL *dLdh, const REAL *dLdg, REAL *g, REAL *aux,
                    const REAL *daux, const REAL *hPrev, const REAL *cPrev, const REAL *c,
                    const REAL *P, REAL *d, REAL *dh, REAL *dc, REAL *dP),
                   (family, second_phase, CELLS_BACKWARD_ARGS_))

#undef CELLS_FORWARD_ARGS_
#undef CELLS_FORWARD_1_
#undef CELLS_FORWARD_2_
#undef CELLS_FORWARD_PHASES_
#undef CELLS_FORWARD_PHASES
#undef CELLS_FORWARD_CASE_
#undef CELLS_BACKWARD_ARGS_
#undef CELLS_BACKWARD_1_
#undef CELLS_BACKWARD_2_
#undef CELLS_BACKWARD_PHASES_
#undef CELLS_BACKWARD_PHASES
#undef CELLS_BACKWARD_CASE_
