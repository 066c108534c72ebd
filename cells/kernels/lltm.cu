/* The LLTM's time step kernels (cells/kernels/kernels.cuh; include/cells/lltm_impl.h). */
#include "cells/lltm.h"

#define CELLS_KERNELS lltm
#define CELLS_GATES 3
#define CELLS_H_BLOCKS 3
#define CELLS_CELL_STATE 1
#define CELLS_AUX 0
#define CELLS_AUX_KEPT 0
#define CELLS_PARAM_BLOCKS 0
#define CELLS_KERNEL_FORWARD lltm_forward
#define CELLS_KERNEL_BACKWARD lltm_backward
#include "kernels.cuh"
