/* LSTM point functions for float (cells_lstm_*_f) and double (cells_lstm_*_d); see lstm_impl.h. */
#ifndef CELLS_LSTM_H
#define CELLS_LSTM_H

#include "cells/step.h"

/* Whether a call's activations are the default ones, σ for the gates and tanh for the
 * candidate and the output (lstm_row's fused loops; any other choice runs lstm_act_row). */
CELLS_FN int cells_lstm_default_activations(const cells_step_options *o) {
    return o->gate_act.code == CELLS_ACT_SIGMOID && o->cell_act.code == CELLS_ACT_TANH
        && o->out_act.code == CELLS_ACT_TANH;
}

#define CELLS_IMPL "cells/lstm_impl.h"
#include "cells/instantiate.h"

#endif
