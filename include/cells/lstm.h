/* LSTM point functions for float (cells_lstm_*_f) and double (cells_lstm_*_d); see lstm_impl.h. */
#ifndef CELLS_LSTM_H
#define CELLS_LSTM_H

#include "cells/common.h"

#define REAL float
#define FN(name) cells_##name##_f
#define SIGMOID cells_sigmoid_f
#define TANH cells_tanh_f
#include "cells/lstm_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH

#define REAL double
#define FN(name) cells_##name##_d
#define SIGMOID cells_sigmoid_d
#define TANH cells_tanh_d
#include "cells/lstm_impl.h"
#undef REAL
#undef FN
#undef SIGMOID
#undef TANH

#endif
