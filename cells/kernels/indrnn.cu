/* IndRNN's time step kernels (cells/kernels/kernels.cuh; include/cells/indrnn_impl.h; no
 * recurrent product: P = u [nOut], the elementwise recurrent scale). */
#include "cells/indrnn.h"

#define CELLS_FAMILY_ROW CELLS_FAMILY_INDRNN
#include "kernels.cuh"
