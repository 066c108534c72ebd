/* Vanilla RNN point functions and row loops for float (cells_rnn_*_f) and double
 * (cells_rnn_*_d); see rnn_impl.h. */
#ifndef CELLS_RNN_H
#define CELLS_RNN_H

#include "cells/step.h"

#define CELLS_IMPL "cells/rnn_impl.h"
#include "cells/instantiate.h"

#endif
