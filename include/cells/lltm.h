/* LLTM point functions and row loops for float (cells_lltm_*_f) and double (cells_lltm_*_d);
 * see lltm_impl.h. */
#ifndef CELLS_LLTM_H
#define CELLS_LLTM_H

#include "cells/common.h"

#define REAL float
#define FN(name) cells_##name##_f
#define SIGMOID cells_sigmoid_f
#define TANH cells_tanh_f
#define ELU cells_elu_f
#define ELU_GRAD cells_elu_grad_f
#include "cells/lltm_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH
#undef ELU
#undef ELU_GRAD

#define REAL double
#define FN(name) cells_##name##_d
#define SIGMOID cells_sigmoid_d
#define TANH cells_tanh_d
#define ELU cells_elu_d
#define ELU_GRAD cells_elu_grad_d
#include "cells/lltm_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH
#undef ELU
#undef ELU_GRAD

#endif
