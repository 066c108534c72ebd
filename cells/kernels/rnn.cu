/* The vanilla RNN's time step kernels (cells/kernels/kernels.cuh; include/cells/rnn_impl.h; the
 * activation, tanh or relu, is the options' `activation`). */
#include "cells/rnn.h"

#define CELLS_FAMILY_ROW CELLS_FAMILY_RNN
#include "kernels.cuh"
