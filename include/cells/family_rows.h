/* The cell families, declared once: one row each, a macro CELLS_FAMILY_<TAG>, and a line
 * X(<TAG>) in CELLS_FAMILY_LIST. Everything else is generated from them: the enum, the table,
 * the names and the step dispatch of the CPU time loop (cells/families.h), Python's view of
 * them (cells/_time_loop.pyx: FAMILIES, family(); cells/cuda.py: KERNEL_SOURCES,
 * KERNEL_PHASES), and the preprocessor constants of the GPU kernels (cells/kernels/<source>.cu,
 * which read their row's fields with CELLS_FAMILY_<FIELD>(row)).
 *
 * A row's fields, in order:
 *   name            its name in Python (a token: "gru_reset_before" there; also the middle of
 *                   its GPU kernels' names, cells_kernel_<name>_forward_f)
 *   steps           the prefix of its steps (cells/step.h): cells_<steps>_forward_f, ..._d,
 *                   cells_<steps>_backward_f, ..._d and, with two phases, the second phase's
 *                   cells_<steps>_forward_b_f, cells_<steps>_backward_b_f, ...
 *   source          cells/<source>.h holds its steps, cells/kernels/<source>.cu its kernels
 *   gates           gate blocks of nOut columns: G = gates·nOut
 *   cell_state      carries c as well as h
 *   h_blocks        blocks [0, h_blocks) multiply hPrev; the others multiply aux, in a second
 *                   phase of the step, once every unit's first phase is done
 *   phases          1, or 2 where h_blocks < gates (checked in cells/families.h)
 *   aux             the blocks of nOut of a per-row value aux [aux·nOut] of its own (0: none)
 *   aux_kept        the forward keeps aux of every step (else it is scratch, and the backward
 *                   recomputes it)
 *   aux_grad_block  -1, or the first of the blocks [aux_grad_block, h_blocks) whose
 *                   recurrent-side gradient differs from the input side's (which the gates
 *                   keep): the backward keeps them in aux's first blocks, for dL/dWh
 *   param_blocks    blocks of nOut in P
 *   param_grad      what dL/dP sums over the steps (for backends that reduce it after the
 *                   loop rather than in the steps): NONE (no P); AUX (P is a bias inside the
 *                   recurrent side, whose gradient aux keeps: dL/dP = Σ aux); PEEPHOLES (the
 *                   LSTM's P = (p_i, p_f, p_o): Σ dz_i∘cPrev, Σ dz_f∘cPrev, Σ dz_o∘c); STEPS
 *                   (only the steps sum it, from values they recompute: P is required, and the
 *                   GPU backend's kernels add it into an accumulator per batch row)
 *   projects        its output may be projected, h = m·Wproj with m the step's output [nOut]
 *                   (PyTorch's LSTM proj_size): the step reads no hPrev, so the state may be
 *                   narrower than the units
 *   row_reduction   its step reduces across a row's units (LayerNorm cells): its steps get
 *                   whole rows, n = nOut (where the time loop's threads split the units for
 *                   the products, each runs the steps of a block of rows: L.row_steps)
 *   recurrent_product  the recurrence is a product by op(Wh); 0: an elementwise one with no
 *                   Wh (IndRNN): no product, no op(Wh) and no dL/dWh in either pass
 */
#ifndef CELLS_FAMILY_ROWS_H
#define CELLS_FAMILY_ROWS_H

/* The rows, their fields in the order above. */
#define CELLS_FAMILY_GRU_RESET_BEFORE \
    gru_reset_before,        gru_rb,  gru,  3, 0, 2, 2, 1, 0, -1, 0, NONE,      0, 0, 1
#define CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET \
    gru_linear_before_reset, gru_lbr, gru,  3, 0, 3, 1, 1, 1,  2, 1, AUX,       0, 0, 1
#define CELLS_FAMILY_LSTM \
    lstm,                    lstm,    lstm, 4, 1, 4, 1, 0, 0, -1, 3, PEEPHOLES, 1, 0, 1
#define CELLS_FAMILY_LLTM \
    lltm,                    lltm,    lltm, 3, 1, 3, 1, 0, 0, -1, 0, NONE,      0, 0, 1
#define CELLS_FAMILY_RNN \
    rnn,                     rnn,     rnn,  1, 0, 1, 1, 0, 0, -1, 0, NONE,      0, 0, 1
#define CELLS_FAMILY_LAYER_NORM_LSTM \
    layer_norm_lstm, layer_norm_lstm, layer_norm, 4, 1, 4, 1, 8, 1, 0, 14, STEPS, 0, 1, 1
#define CELLS_FAMILY_LAYER_NORM_GRU \
    layer_norm_gru,  layer_norm_gru,  layer_norm, 3, 0, 3, 1, 6, 1, 0, 12, STEPS, 0, 1, 1
#define CELLS_FAMILY_INDRNN \
    indrnn,          indrnn,          indrnn,     1, 0, 1, 1, 0, 0, -1, 1, STEPS, 0, 0, 0

/* Every family, in the order of enum cells_family: X(TAG) for the row CELLS_FAMILY_<TAG>. */
#define CELLS_FAMILY_LIST(X) \
    X(GRU_RESET_BEFORE)      \
    X(GRU_LINEAR_BEFORE_RESET) \
    X(LSTM)                  \
    X(LLTM)                  \
    X(RNN)                   \
    X(LAYER_NORM_LSTM)       \
    X(LAYER_NORM_GRU)        \
    X(INDRNN)

/* One field of a row: CELLS_FAMILY_GATES(CELLS_FAMILY_LSTM) is 4. CELLS_FAMILY_APPLY(M, row)
 * is M(the row's fields): the indirection expands the row into its fields first. */
#define CELLS_FAMILY_APPLY(M, ...) M(__VA_ARGS__)
#define CELLS_FAMILY_NAME(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_0_, row)
#define CELLS_FAMILY_STEPS(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_1_, row)
#define CELLS_FAMILY_SOURCE(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_2_, row)
#define CELLS_FAMILY_GATES(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_3_, row)
#define CELLS_FAMILY_CELL_STATE(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_4_, row)
#define CELLS_FAMILY_H_BLOCKS(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_5_, row)
#define CELLS_FAMILY_PHASES(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_6_, row)
#define CELLS_FAMILY_AUX(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_7_, row)
#define CELLS_FAMILY_AUX_KEPT(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_8_, row)
#define CELLS_FAMILY_AUX_GRAD_BLOCK(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_9_, row)
#define CELLS_FAMILY_PARAM_BLOCKS(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_10_, row)
#define CELLS_FAMILY_PARAM_GRAD(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_11_, row)
#define CELLS_FAMILY_PROJECTS(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_12_, row)
#define CELLS_FAMILY_ROW_REDUCTION(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_13_, row)
#define CELLS_FAMILY_RECURRENT_PRODUCT(row) CELLS_FAMILY_APPLY(CELLS_FAMILY_ARG_14_, row)
#define CELLS_FAMILY_ARG_0_(x, ...) x
#define CELLS_FAMILY_ARG_1_(_0, x, ...) x
#define CELLS_FAMILY_ARG_2_(_0, _1, x, ...) x
#define CELLS_FAMILY_ARG_3_(_0, _1, _2, x, ...) x
#define CELLS_FAMILY_ARG_4_(_0, _1, _2, _3, x, ...) x
#define CELLS_FAMILY_ARG_5_(_0, _1, _2, _3, _4, x, ...) x
#define CELLS_FAMILY_ARG_6_(_0, _1, _2, _3, _4, _5, x, ...) x
#define CELLS_FAMILY_ARG_7_(_0, _1, _2, _3, _4, _5, _6, x, ...) x
#define CELLS_FAMILY_ARG_8_(_0, _1, _2, _3, _4, _5, _6, _7, x, ...) x
#define CELLS_FAMILY_ARG_9_(_0, _1, _2, _3, _4, _5, _6, _7, _8, x, ...) x
#define CELLS_FAMILY_ARG_10_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, x, ...) x
#define CELLS_FAMILY_ARG_11_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, x, ...) x
#define CELLS_FAMILY_ARG_12_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, x, ...) x
#define CELLS_FAMILY_ARG_13_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, x, ...) x
#define CELLS_FAMILY_ARG_14_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, x) x

#endif
