/* The LSTM's time step kernels (cells/kernels/kernels.cuh; include/cells/lstm_impl.h has the
 * step, every activation code included; P = the peepholes Wp [3, nOut] or NULL). */
#include "cells/lstm.h"

#define CELLS_KERNELS lstm
#define CELLS_GATES 4
#define CELLS_H_BLOCKS 4
#define CELLS_CELL_STATE 1
#define CELLS_AUX 0
#define CELLS_AUX_KEPT 0
#define CELLS_PARAM_BLOCKS 3
#define CELLS_KERNEL_FORWARD lstm_forward
#define CELLS_KERNEL_BACKWARD lstm_backward
#include "kernels.cuh"
