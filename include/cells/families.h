/* The cell families of the CPU time loop (cells/_time_loop.pyx): what each one is (its row of
 * the table below) and which steps it runs (cells/step.h says what a step is).
 *
 * Adding a family: a header with its point functions, row loops and steps (as cells/rnn.h), its
 * row in cells/family_rows.h, a line in the enum and in the table, and a case in each dispatch
 * of families_impl.h (and, for the GPU, a kernel source in cells/kernels/).
 * CPU only (the steps call row loops compiled for the host's instruction sets).
 */
#ifndef CELLS_FAMILIES_H
#define CELLS_FAMILIES_H

#include "cells/family_rows.h"
#include "cells/gru.h"
#include "cells/lltm.h"
#include "cells/lstm.h"
#include "cells/rnn.h"

enum cells_family {
    CELLS_GRU_RESET_BEFORE,
    CELLS_GRU_LINEAR_BEFORE_RESET,
    CELLS_LSTM,
    CELLS_LLTM,
    CELLS_RNN,
    CELLS_FAMILIES
};

typedef struct {
    ptrdiff_t gates;           /* gate blocks of nOut columns: G = gates·nOut */
    int cell_state;            /* carries c as well as h */
    ptrdiff_t h_blocks;        /* blocks [0, h_blocks) multiply hPrev; the others multiply aux,
                                  in a second phase of the step, after a barrier */
    int aux;                   /* has a per-row value aux [nOut] of its own */
    int aux_kept;              /* the forward keeps aux of every step (else it is scratch, and
                                  the backward recomputes it) */
    ptrdiff_t aux_grad_block;  /* -1, or the block whose recurrent-side gradient the backward
                                  keeps in aux (the gates keep the input side's) */
    ptrdiff_t param_blocks;    /* blocks of nOut in P */
    int projects;              /* its output may be projected, h = m·Wproj with m the step's
                                  output [nOut] (PyTorch's LSTM proj_size): the step reads no
                                  hPrev, so the state may be narrower than the units */
} cells_family_info;

/* In the order of enum cells_family; the rows are cells/family_rows.h's. */
static const cells_family_info cells_families[CELLS_FAMILIES] = {
    {CELLS_FAMILY_GRU_RESET_BEFORE},
    {CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET},
    {CELLS_FAMILY_LSTM},
    {CELLS_FAMILY_LLTM},
    {CELLS_FAMILY_RNN},
};

#define CELLS_IMPL "cells/families_impl.h"
#include "cells/instantiate.h"

#endif
