/* The vanilla RNN's time step kernels (cells/kernels/kernels.cuh; include/cells/rnn_impl.h; the
 * activation, tanh or relu, is the options' `activation`). */
#include "cells/rnn.h"

#define CELLS_KERNELS rnn
#define CELLS_GATES 1
#define CELLS_H_BLOCKS 1
#define CELLS_CELL_STATE 0
#define CELLS_AUX 0
#define CELLS_AUX_KEPT 0
#define CELLS_PARAM_BLOCKS 0
#define CELLS_KERNEL_FORWARD rnn_forward
#define CELLS_KERNEL_BACKWARD rnn_backward
#include "kernels.cuh"
