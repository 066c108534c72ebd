/* The GRU's time step kernels, both variants (cells/kernels/kernels.cuh; include/cells/gru_impl.h
 * has the steps, include/cells/family_rows.h the rows). */
#include "cells/gru.h"

/* Reset-before: aux = r∘hPrev is multiplied by Wh_c in a second phase. */
#define CELLS_FAMILY_ROW CELLS_FAMILY_GRU_RESET_BEFORE
#include "kernels.cuh"

/* Linear-before-reset: aux = hPrev·Wh_c + bh_c is kept; P = bh_c. */
#define CELLS_FAMILY_ROW CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET
#include "kernels.cuh"
