/* The GRU's time step kernels, both variants (cells/kernels/kernels.cuh; include/cells/gru_impl.h
 * has the steps, include/cells/family_rows.h the table rows). */
#include "cells/gru.h"

/* Reset-before: aux = r∘hPrev is multiplied by Wh_c in a second phase. */
#define CELLS_KERNELS gru_reset_before
#define CELLS_FAMILY_ROW CELLS_FAMILY_GRU_RESET_BEFORE
#define CELLS_KERNEL_FORWARD gru_rb_forward
#define CELLS_KERNEL_FORWARD_B gru_rb_forward_b
#define CELLS_KERNEL_BACKWARD gru_rb_backward
#define CELLS_KERNEL_BACKWARD_B gru_rb_backward_b
#include "kernels.cuh"

/* Linear-before-reset: aux = hPrev·Wh_c + bh_c is kept; P = bh_c. */
#define CELLS_KERNELS gru_linear_before_reset
#define CELLS_FAMILY_ROW CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET
#define CELLS_KERNEL_FORWARD gru_lbr_forward
#define CELLS_KERNEL_BACKWARD gru_lbr_backward
#include "kernels.cuh"
