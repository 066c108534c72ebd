/* The cell families of the CPU time loop (cells/_time_loop.pyx): the table of what each one is,
 * its name, and the dispatch to its steps (cells/step.h says what a step is), all generated from
 * the rows of cells/family_rows.h, which says what each field means. cells/_family_table.pyx
 * reads the table for Python.
 *
 * Adding a family: a header with its point functions, row loops and steps (as cells/rnn.h),
 * included below; its row and its line in cells/family_rows.h; its GPU kernels in
 * cells/kernels/<source>.cu (as cells/kernels/rnn.cu).
 * The steps run on the CPU here (they call row loops compiled for the host's instruction sets).
 */
#ifndef CELLS_FAMILIES_H
#define CELLS_FAMILIES_H

#include "cells/family_rows.h"
#include "cells/gru.h"
#include "cells/indrnn.h"
#include "cells/isa.h"
#include "cells/layer_norm.h"
#include "cells/lltm.h"
#include "cells/lstm.h"
#include "cells/rnn.h"

#define CELLS_FAMILY_ENUM_(TAG) CELLS_##TAG,
enum cells_family { CELLS_FAMILY_LIST(CELLS_FAMILY_ENUM_) CELLS_FAMILIES };
#undef CELLS_FAMILY_ENUM_

/* What dL/dP sums over the steps: family_rows.h's param_grad. */
enum cells_param_grad {
    CELLS_PARAM_GRAD_NONE,
    CELLS_PARAM_GRAD_AUX,
    CELLS_PARAM_GRAD_PEEPHOLES,
    CELLS_PARAM_GRAD_STEPS
};

/* A row of family_rows.h as the loop reads it (its fields mean what they mean there). */
typedef struct {
    ptrdiff_t gates;
    int cell_state;
    ptrdiff_t h_blocks;
    int phases;
    ptrdiff_t aux;
    int aux_kept;
    ptrdiff_t aux_grad_block;
    ptrdiff_t param_blocks;
    int param_grad;  /* an enum cells_param_grad */
    int projects;
    int row_reduction;
    int recurrent_product;
} cells_family_info;

/* CELLS_PARAM_GRAD_<the row's param_grad> */
#define CELLS_FAMILY_PARAM_GRAD_OF_(value) CELLS_PARAM_GRAD_##value
#define CELLS_FAMILY_INFO_(row)                                                               \
    {CELLS_FAMILY_GATES(row), CELLS_FAMILY_CELL_STATE(row), CELLS_FAMILY_H_BLOCKS(row),      \
     CELLS_FAMILY_PHASES(row), CELLS_FAMILY_AUX(row), CELLS_FAMILY_AUX_KEPT(row),            \
     CELLS_FAMILY_AUX_GRAD_BLOCK(row), CELLS_FAMILY_PARAM_BLOCKS(row),                       \
     CELLS_FAMILY_APPLY(CELLS_FAMILY_PARAM_GRAD_OF_, CELLS_FAMILY_PARAM_GRAD(row)),          \
     CELLS_FAMILY_PROJECTS(row), CELLS_FAMILY_ROW_REDUCTION(row),                            \
     CELLS_FAMILY_RECURRENT_PRODUCT(row)},
#define CELLS_FAMILY_TABLE_ROW_(TAG) CELLS_FAMILY_INFO_(CELLS_FAMILY_##TAG)
static const cells_family_info cells_families[CELLS_FAMILIES] = {
    CELLS_FAMILY_LIST(CELLS_FAMILY_TABLE_ROW_)};
#undef CELLS_FAMILY_TABLE_ROW_
#undef CELLS_FAMILY_INFO_
#undef CELLS_FAMILY_PARAM_GRAD_OF_

/* Each family's name in Python and the source of its steps and kernels (cells/<source>.h,
 * cells/kernels/<source>.cu). */
#define CELLS_STRING_(token) #token
#define CELLS_STRING(token) CELLS_STRING_(token)
#define CELLS_FAMILY_NAME_ROW_(TAG) CELLS_STRING(CELLS_FAMILY_NAME(CELLS_FAMILY_##TAG)),
#define CELLS_FAMILY_SOURCE_ROW_(TAG) CELLS_STRING(CELLS_FAMILY_SOURCE(CELLS_FAMILY_##TAG)),
static const char *const cells_family_names[CELLS_FAMILIES] = {
    CELLS_FAMILY_LIST(CELLS_FAMILY_NAME_ROW_)};
static const char *const cells_family_sources[CELLS_FAMILIES] = {
    CELLS_FAMILY_LIST(CELLS_FAMILY_SOURCE_ROW_)};
#undef CELLS_FAMILY_NAME_ROW_
#undef CELLS_FAMILY_SOURCE_ROW_

/* A row's phases follow from its blocks: two where some multiply aux. */
#define CELLS_FAMILY_CHECK_(TAG)                                                              \
    typedef char cells_phases_of_##TAG[CELLS_FAMILY_PHASES(CELLS_FAMILY_##TAG)                \
                                       == (CELLS_FAMILY_H_BLOCKS(CELLS_FAMILY_##TAG)          \
                                           < CELLS_FAMILY_GATES(CELLS_FAMILY_##TAG) ? 2 : 1)  \
                                       ? 1 : -1];
CELLS_FAMILY_LIST(CELLS_FAMILY_CHECK_)
#undef CELLS_FAMILY_CHECK_

#define CELLS_IMPL "cells/families_impl.h"
#include "cells/instantiate.h"

#endif
