/* The time step kernels of one cell family, included by its source (cells/kernels/<source>.cu)
 * after it has defined CELLS_FAMILY_ROW, the family's row (include/cells/family_rows.h:
 * CELLS_FAMILY_LSTM), and included the header of its steps. The row's fields become
 * CELLS_GATES, CELLS_H_BLOCKS, CELLS_PHASES, CELLS_CELL_STATE, CELLS_AUX, CELLS_AUX_KEPT and
 * CELLS_PARAM_BLOCKS here; its name and steps name the kernels and the steps they call.
 * It defines, for float (suffix _f) and double (_d), the kernels
 *   cells_kernel_<name>_forward_<dtype>, cells_kernel_<name>_backward_<dtype> and, for a
 *   family with two phases, cells_kernel_<name>_forward_b_<dtype>, ..._backward_b_<dtype>:
 * one phase of one loop step t for every (batch row, unit) element, one thread each (bS·nOut
 * threads; no shared memory, no synchronisation). cells/_gpu.py runs the products between them
 * and documents every buffer; the indexing is that of the CPU time loop (cells/_time_loop.pyx,
 * cells/_loop.pxd). A thread gathers its element's values of every gate block, calls the
 * family's step for one unit (n = nOut = 1: the gate blocks of its local arrays are one apart)
 * and scatters the results, so that the buffers are laid out for the products rather than for
 * the steps, and so that no two threads add into one element (the steps' dP is local and
 * discarded: cells/_gpu.py computes the parameter gradients as reductions after the loop).
 */
#ifndef CELLS_KERNELS_ONCE
#define CELLS_KERNELS_ONCE

#include "cells/family_rows.h"
#include "cells/step.h"

/* The CPU shim (cells/kernels/shim.h) exports a launch wrapper per kernel; NVRTC has none. */
#ifndef CELLS_SHIM_EXPORT
#define CELLS_SHIM_EXPORT(kernel)
#endif

#define CELLS_CAT_(a, b) a##b
#define CELLS_CAT(a, b) CELLS_CAT_(a, b)

/* A kernel's declaration, (the shim's wrapper) and the head of its definition. */
#define CELLS_KERNEL(name, params)                                                           \
    extern "C" __global__ void name params;                                                  \
    CELLS_SHIM_EXPORT(name)                                                                  \
    extern "C" __global__ void name params

/* The call's options (include/cells/step.h's cells_step_options), as scalar parameters. */
#define CELLS_OPTION_PARAMS                                                                  \
    double clip, int activation, int gate_code, double gate_alpha, double gate_beta,         \
        int cell_code, double cell_alpha, double cell_beta, int out_code, double out_alpha,  \
        double out_beta
#define CELLS_OPTIONS                                                                        \
    {clip, activation, {gate_code, gate_alpha, gate_beta}, {cell_code, cell_alpha, cell_beta}, \
     {out_code, out_alpha, out_beta}}

/* The (row, unit) element of the calling thread; false for the threads past bS·nOut. */
static __device__ __forceinline__ bool cells_element(long long bS, long long nOut,
                                                     long long *row, long long *j) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    *row = nOut ? e / nOut : 0;
    *j = nOut ? e % nOut : 0;
    return e < bS * nOut;
}

/* How many steps a batch row runs (cells/_loops.pxd's row_len). */
static __device__ __forceinline__ long long cells_row_len(const long long *seq_len,
                                                          long long row, long long sL) {
    return seq_len ? seq_len[row] : sL;
}

#endif

#define CELLS_KERNELS CELLS_FAMILY_NAME(CELLS_FAMILY_ROW)
#define CELLS_GATES CELLS_FAMILY_GATES(CELLS_FAMILY_ROW)
#define CELLS_H_BLOCKS CELLS_FAMILY_H_BLOCKS(CELLS_FAMILY_ROW)
#define CELLS_PHASES CELLS_FAMILY_PHASES(CELLS_FAMILY_ROW)
#define CELLS_CELL_STATE CELLS_FAMILY_CELL_STATE(CELLS_FAMILY_ROW)
#define CELLS_AUX CELLS_FAMILY_AUX(CELLS_FAMILY_ROW)
#define CELLS_AUX_KEPT CELLS_FAMILY_AUX_KEPT(CELLS_FAMILY_ROW)
#define CELLS_PARAM_BLOCKS CELLS_FAMILY_PARAM_BLOCKS(CELLS_FAMILY_ROW)
#define CELLS_KERNEL_FORWARD CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _forward)
#define CELLS_KERNEL_BACKWARD CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _backward)
#define CELLS_KERNEL_FORWARD_B CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _forward_b)
#define CELLS_KERNEL_BACKWARD_B CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _backward_b)

/* The kernels run a step on one unit: a step that reduces across a row's units, or a
 * recurrence without a product by Wh, needs kernels of another shape (family_rows.h). */
#if CELLS_FAMILY_ROW_REDUCTION(CELLS_FAMILY_ROW) \
    || !CELLS_FAMILY_RECURRENT_PRODUCT(CELLS_FAMILY_ROW)
#error "the GPU kernels support neither row_reduction nor a family without recurrent_product"
#endif

#define REAL float
#define CELLS_SUFFIX _f
#include "kernels_impl.cuh"
#undef REAL
#undef CELLS_SUFFIX

#define REAL double
#define CELLS_SUFFIX _d
#include "kernels_impl.cuh"
#undef REAL
#undef CELLS_SUFFIX

#undef CELLS_PHASES
#undef CELLS_KERNELS
#undef CELLS_FAMILY_ROW
#undef CELLS_GATES
#undef CELLS_H_BLOCKS
#undef CELLS_CELL_STATE
#undef CELLS_AUX
#undef CELLS_AUX_KEPT
#undef CELLS_PARAM_BLOCKS
#undef CELLS_KERNEL_FORWARD
#undef CELLS_KERNEL_BACKWARD
#undef CELLS_KERNEL_FORWARD_B
#undef CELLS_KERNEL_BACKWARD_B
