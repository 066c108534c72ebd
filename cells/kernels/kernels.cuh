/* The time step kernels of one cell family, included by its source (cells/kernels/<source>.cu)
 * after it has defined CELLS_FAMILY_ROW, the family's row (include/cells/family_rows.h:
 * CELLS_FAMILY_LSTM), and included the header of its steps. The row's fields become
 * CELLS_GATES, CELLS_H_BLOCKS, CELLS_PHASES, CELLS_CELL_STATE, CELLS_AUX, CELLS_AUX_KEPT,
 * CELLS_PARAM_BLOCKS, CELLS_ROW_REDUCTION and CELLS_RECURRENT_PRODUCT here; its name and steps
 * name the kernels and the steps they call.
 * It defines, for float (suffix _f) and double (_d), the kernels
 *   cells_kernel_<name>_forward_<dtype>, cells_kernel_<name>_backward_<dtype> and, for a
 *   family with two phases, cells_kernel_<name>_forward_b_<dtype>, ..._backward_b_<dtype>:
 * one phase of one loop step t, in one of two shapes (no shared memory, no synchronisation).
 * cells/_gpu.py runs the products between them and documents every buffer; the indexing is
 * that of the CPU time loop (cells/_time_loop.pyx, cells/_loop_call.pxd).
 *
 *  - Per element (most families): one thread per (batch row, unit) element, bS·nOut threads.
 *    A thread gathers its element's values of every gate block, calls the family's step for
 *    one unit (n = nOut = 1: the gate blocks of its local arrays are one apart) and scatters
 *    the results, so that the buffers are laid out for the products rather than for the
 *    steps, and so that no two threads add into one element. The steps' dP is local and
 *    discarded (cells/_gpu.py computes those parameter gradients as reductions after the
 *    loop), except for a family whose param_grad is STEPS (IndRNN): there each thread adds its
 *    element's dL/dP into its own elements of a per-row accumulator dP [bS, param_blocks·nOut].
 *  - Per row (row_reduction: the LayerNorm cells, whose steps reduce across a row's units):
 *    one thread per batch row, bS threads, calling the step with n = nOut on pointers into the
 *    row's arrays (the buffers hold a row's gate blocks side by side, as the steps read them),
 *    and adding dL/dP into the row's own accumulator dP [bS, param_blocks·nOut]. Simple and
 *    correct, not fast: a thread walks 4·nOut values several times per step. The fast shape
 *    would be a block of threads per row, the means and variances reduced in shared memory.
 *
 * Both run zoneout (zone: NULL, one share for all elements, or one per element and step) after
 * a step's last phase, and the backward adds dLdc (every step's dL/dc) to the carried dc.
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

/* The batch row of the calling thread (one thread per row); false for the threads past bS. */
static __device__ __forceinline__ bool cells_row_thread(long long bS, long long *row) {
    *row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    return *row < bS;
}

/* How many steps a batch row runs (cells/_small_loops.pxd's row_len). */
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
#define CELLS_ROW_REDUCTION CELLS_FAMILY_ROW_REDUCTION(CELLS_FAMILY_ROW)
#define CELLS_RECURRENT_PRODUCT CELLS_FAMILY_RECURRENT_PRODUCT(CELLS_FAMILY_ROW)
#define CELLS_KERNEL_FORWARD CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _forward)
#define CELLS_KERNEL_BACKWARD CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _backward)
#define CELLS_KERNEL_FORWARD_B CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _forward_b)
#define CELLS_KERNEL_BACKWARD_B CELLS_CAT(CELLS_FAMILY_STEPS(CELLS_FAMILY_ROW), _backward_b)

/* The per-element kernels hold one unit's aux (a value, not blocks of them); the per-row
 * kernels run one phase. */
#if !CELLS_ROW_REDUCTION && CELLS_AUX > 1
#error "the per-element GPU kernels hold at most one block of aux"
#endif
#if CELLS_ROW_REDUCTION && CELLS_PHASES != 1
#error "the per-row GPU kernels run a family of one phase"
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
#undef CELLS_ROW_REDUCTION
#undef CELLS_RECURRENT_PRODUCT
#undef CELLS_KERNEL_FORWARD
#undef CELLS_KERNEL_BACKWARD
#undef CELLS_KERNEL_FORWARD_B
#undef CELLS_KERNEL_BACKWARD_B
