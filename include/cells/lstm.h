/* LSTM point functions for float (cells_lstm_*_f) and double (cells_lstm_*_d); see lstm_impl.h. */
#ifndef CELLS_LSTM_H
#define CELLS_LSTM_H

#include "cells/step.h"

#define CELLS_IMPL "cells/lstm_impl.h"
#include "cells/instantiate.h"

#endif
