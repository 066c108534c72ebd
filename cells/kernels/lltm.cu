/* The LLTM's time step kernels (cells/kernels/kernels.cuh; include/cells/lltm_impl.h). */
#include "cells/lltm.h"

#define CELLS_FAMILY_ROW CELLS_FAMILY_LLTM
#include "kernels.cuh"
