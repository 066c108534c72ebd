/* haste's LayerNorm LSTM and LayerNorm GRU (lmnt-com/haste's LayerNormLSTM, LayerNormGRU):
 * point functions, row loops and steps for float (cells_layer_norm_*_f) and double
 * (cells_layer_norm_*_d); see layer_norm_impl.h. */
#ifndef CELLS_LAYER_NORM_H
#define CELLS_LAYER_NORM_H

#include "cells/step.h"

/* haste's (and torch.nn.functional.layer_norm's default) epsilon, inside the square root. */
#define CELLS_LAYER_NORM_EPS 1e-5

/* Before a loop that sums into `var` (a reduction across a row's units): vectorise it, summing
 * in the vector's lanes first (the order of the sum then depends on the vector width the
 * loader picks, but never on threads, rows or calls). */
#if defined(_OPENMP) && !defined(__CUDACC__)
#define CELLS_SIMD_SUM(...) _Pragma(CELLS_STRINGIFY_(omp simd reduction(+ : __VA_ARGS__)))
#define CELLS_STRINGIFY_(...) #__VA_ARGS__
#else
#define CELLS_SIMD_SUM(...)
#endif

#define CELLS_IMPL "cells/layer_norm_impl.h"
#include "cells/instantiate.h"

#endif
