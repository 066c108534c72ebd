/* What the C benchmarks beside this file share (panel_kernel.c, lowp_kernels.c): a monotonic
 * clock, buffers aligned as cells' packed panels want them, and the order of doubles for
 * qsort (their medians). Needs _POSIX_C_SOURCE >= 200112L, defined before any include. */
#ifndef CELLS_BENCHMARKS_C_TIMING_H
#define CELLS_BENCHMARKS_C_TIMING_H

#include <stdlib.h>
#include <time.h>

#include "cells/panel.h"

/* Nanoseconds on the monotonic clock. */
static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* `bytes` (at least 1) on a CELLS_PANEL_ALIGN boundary; aborts when memory runs out. */
static void *aligned(size_t bytes) {
    void *p = 0;
    if (posix_memalign(&p, CELLS_PANEL_ALIGN, bytes ? bytes : 1))
        abort();
    return p;
}

/* qsort's comparison of doubles, ascending. */
static int compare(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
