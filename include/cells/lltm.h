/* LLTM point functions and row loops for float (cells_lltm_*_f) and double (cells_lltm_*_d);
 * see lltm_impl.h. */
#ifndef CELLS_LLTM_H
#define CELLS_LLTM_H

#include "cells/step.h"

#define CELLS_IMPL "cells/lltm_impl.h"
#include "cells/instantiate.h"

#endif
