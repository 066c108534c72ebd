/* What a cell family gives the CPU time loop (cells/_time_loop.pyx): its steps.
 *
 * The time loop owns everything that is the same for every family (sequence lengths, direction,
 * padded steps, states, threads, the products); a family's step is the rest of one time step,
 * for one batch row and the n units [j0, j0 + n) that one thread owns. Every step has one of
 * two signatures, declared by CELLS_FORWARD_STEP and CELLS_BACKWARD_STEP below. Pointers are
 * offset to the row and to unit j0; block k of a gate row [G] (G = gates·nOut) starts at
 * k·nOut; NULL is an array that is not given.
 *
 * forward(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
 *   zx     [G]   x·op(Wx) + b at the row's time index (may be g: element j of g is written only
 *                after element j of zx is read)
 *   zh     [G]   the recurrent products: blocks k < h_blocks hold hPrev·op(Wh)_k; in a second
 *                phase the other blocks hold aux·op(Wh)_k (cells/families.h)
 *   hPrev, cPrev [nOut]  the state entering the step (cPrev: NULL without a cell state;
 *                hPrev: NULL when the output is projected, families.h's `projects`)
 *   hNext  [nOut]  out: the step's output (when projected: m, which the loop then projects)
 *   P      [param_blocks, nOut] or NULL: the family's own parameters
 *   g      [G]   out: the activated gates
 *   aux    [nOut]  out: the family's own per-step value, for families that have one
 *   cNext  [nOut]  out: the cell state leaving the step (hNext and cNext: by the last phase)
 *
 * backward(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
 *   dLdh   [nOut] or NULL: the gradient arriving at the step's output
 *   dLdg   [G] or NULL: the gradient arriving at its gates (the GRU block cell's outputs)
 *   g      [G]   in: the forward's gates; out (by the last phase): dL/dz, the gradient of the
 *                input-side pre-activation x·op(Wx) + b
 *   aux    [nOut]  in: the forward's aux, when kept; out: what the family's table row says
 *   daux   [nOut]  in a second phase: dL/daux = d[blocks >= h_blocks]·op(Wh)ᵀ
 *   hPrev, cPrev, c [nOut]  the state entering the step and the step's own cell state
 *                (hPrev NULL when the output is projected)
 *   d      [G]   out: dL/d(the recurrent pre-activation); the time loop then adds
 *                d[blocks < h_blocks]·op(Wh)ᵀ to dh
 *   dh     [nOut]  in: dL/dh carried from the later steps (when projected: dL/dm, and dLdh
 *                NULL); out: its part that does not go through op(Wh) (0 for most families)
 *   dc     [nOut]  in: dL/dc from the later steps; out: dL/dcPrev (families with c)
 *   dP     like P, or NULL: accumulates dL/dP
 */
#ifndef CELLS_STEP_H
#define CELLS_STEP_H

#include "cells/activations.h"

/* The options of a call that some family's step reads. */
typedef struct {
    double clip;                /* LSTM: the cell clip, +inf for none */
    int activation;             /* RNN: CELLS_ACT_TANH or CELLS_ACT_RELU (cells/activations.h) */
    cells_activation gate_act;  /* LSTM: the activations of i, f and o, */
    cells_activation cell_act;  /* of the candidate g, */
    cells_activation out_act;   /* and of c before the output gate */
} cells_step_options;

/* The declarations of a family's steps, inside its implementation header (REAL, FN). */
#define CELLS_FORWARD_STEP(name)                                                             \
    CELLS_ROW FN(name)(const cells_step_options *o, ptrdiff_t n, ptrdiff_t nOut,       \
                           const REAL *zx, REAL *zh, const REAL *hPrev, const REAL *cPrev,   \
                           const REAL *P, REAL *g, REAL *aux, REAL *hNext, REAL *cNext)
#define CELLS_BACKWARD_STEP(name)                                                            \
    CELLS_ROW FN(name)(const cells_step_options *o, ptrdiff_t n, ptrdiff_t nOut,       \
                           const REAL *dLdh, const REAL *dLdg, REAL *g, REAL *aux,           \
                           const REAL *daux, const REAL *hPrev, const REAL *cPrev,           \
                           const REAL *c, const REAL *P, REAL *d, REAL *dh, REAL *dc,        \
                           REAL *dP)

/* a + k, or NULL for an array that is not given */
#define CELLS_AT(a, k) ((a) ? (a) + (k) : 0)

#define CELLS_IMPL "cells/step_impl.h"
#include "cells/instantiate.h"

#endif
