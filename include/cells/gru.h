/* GRU point functions for float (cells_gru_*_f) and double (cells_gru_*_d); see gru_impl.h. */
#ifndef CELLS_GRU_H
#define CELLS_GRU_H

#include "cells/step.h"

#define CELLS_IMPL "cells/gru_impl.h"
#include "cells/instantiate.h"

#endif
