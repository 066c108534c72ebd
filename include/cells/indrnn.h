/* IndRNN (haste's IndRNN; Li et al. 2018) point functions and row loops for float
 * (cells_indrnn_*_f) and double (cells_indrnn_*_d); see indrnn_impl.h. */
#ifndef CELLS_INDRNN_H
#define CELLS_INDRNN_H

#include "cells/step.h"

#define CELLS_IMPL "cells/indrnn_impl.h"
#include "cells/instantiate.h"

#endif
