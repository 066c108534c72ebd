/* haste's LayerNorm LSTM and LayerNorm GRU time step kernels, per batch row (row_reduction:
 * cells/kernels/kernels.cuh; include/cells/layer_norm_impl.h has the steps). */
#include "cells/layer_norm.h"

/* P [14, nOut]: b, γx, γh, γc, βc; aux [8, nOut] per row: hR and xW, kept. */
#define CELLS_FAMILY_ROW CELLS_FAMILY_LAYER_NORM_LSTM
#include "kernels.cuh"

/* P [12, nOut]: bx, bh, γx, γh; aux [6, nOut] per row: hR and xW, kept. */
#define CELLS_FAMILY_ROW CELLS_FAMILY_LAYER_NORM_GRU
#include "kernels.cuh"
