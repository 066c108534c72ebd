/* GRU point functions for float (cells_gru_*_f) and double (cells_gru_*_d); see gru_impl.h. */
#ifndef CELLS_GRU_H
#define CELLS_GRU_H

#include "cells/common.h"

#define REAL float
#define FN(name) cells_##name##_f
#define SIGMOID cells_sigmoid_f
#define TANH cells_tanh_f
#include "cells/gru_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH

#define REAL double
#define FN(name) cells_##name##_d
#define SIGMOID cells_sigmoid_d
#define TANH cells_tanh_d
#include "cells/gru_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH

#endif
