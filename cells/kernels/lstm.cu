/* The LSTM's time step kernels (cells/kernels/kernels.cuh; include/cells/lstm_impl.h has the
 * step, every activation code included; P = the peepholes Wp [3, nOut] or NULL). */
#include "cells/lstm.h"

#define CELLS_FAMILY_ROW CELLS_FAMILY_LSTM
#include "kernels.cuh"
