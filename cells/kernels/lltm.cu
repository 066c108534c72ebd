/* The LLTM's time step kernels (cells/kernels/kernels.cuh; include/cells/lltm_impl.h). */
#include "cells/lltm.h"

#define CELLS_KERNELS lltm
#define CELLS_FAMILY_ROW CELLS_FAMILY_LLTM
#define CELLS_KERNEL_FORWARD lltm_forward
#define CELLS_KERNEL_BACKWARD lltm_backward
#include "kernels.cuh"
