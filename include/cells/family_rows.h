/* The cell families, declared once: one row each, a macro CELLS_FAMILY_<TAG>, and a line
 * X(<TAG>) in CELLS_FAMILY_LIST. Everything else is generated from them: the enum, the table,
 * the names and the step dispatch of the CPU time loop (cells/families.h), Python's view of
 * them (cells/_family_table.pyx: FAMILIES, family(); cells/cuda.py: KERNEL_SOURCES,
 * KERNEL_PHASES), and the preprocessor constants of the GPU kernels (cells/kernels/<source>.cu,
 * which read their row's fields with CELLS_FAMILY_<FIELD>(row)).
 *
 * A row's fields, in order, each written as (field, value):
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

/* The rows: each field a pair (field, value), in the order above. A field's accessor below
 * checks its name: a value in another field's place does not compile (an undefined
 * CELLS_FAMILY_FIELD_<expected>_<given>). */
#define CELLS_FAMILY_GRU_RESET_BEFORE                                                         \
    (name, gru_reset_before), (steps, gru_rb), (source, gru), (gates, 3), (cell_state, 0),   \
    (h_blocks, 2), (phases, 2), (aux, 1), (aux_kept, 0), (aux_grad_block, -1),              \
    (param_blocks, 0), (param_grad, NONE), (projects, 0), (row_reduction, 0),                \
    (recurrent_product, 1)
#define CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET                                                  \
    (name, gru_linear_before_reset), (steps, gru_lbr), (source, gru), (gates, 3),           \
    (cell_state, 0), (h_blocks, 3), (phases, 1), (aux, 1), (aux_kept, 1),                    \
    (aux_grad_block, 2), (param_blocks, 1), (param_grad, AUX), (projects, 0),                \
    (row_reduction, 0), (recurrent_product, 1)
#define CELLS_FAMILY_LSTM                                                                     \
    (name, lstm), (steps, lstm), (source, lstm), (gates, 4), (cell_state, 1), (h_blocks, 4), \
    (phases, 1), (aux, 0), (aux_kept, 0), (aux_grad_block, -1), (param_blocks, 3),          \
    (param_grad, PEEPHOLES), (projects, 1), (row_reduction, 0), (recurrent_product, 1)
#define CELLS_FAMILY_LLTM                                                                     \
    (name, lltm), (steps, lltm), (source, lltm), (gates, 3), (cell_state, 1), (h_blocks, 3), \
    (phases, 1), (aux, 0), (aux_kept, 0), (aux_grad_block, -1), (param_blocks, 0),          \
    (param_grad, NONE), (projects, 0), (row_reduction, 0), (recurrent_product, 1)
#define CELLS_FAMILY_RNN                                                                      \
    (name, rnn), (steps, rnn), (source, rnn), (gates, 1), (cell_state, 0), (h_blocks, 1),    \
    (phases, 1), (aux, 0), (aux_kept, 0), (aux_grad_block, -1), (param_blocks, 0),          \
    (param_grad, NONE), (projects, 0), (row_reduction, 0), (recurrent_product, 1)
#define CELLS_FAMILY_LAYER_NORM_LSTM                                                          \
    (name, layer_norm_lstm), (steps, layer_norm_lstm), (source, layer_norm), (gates, 4),    \
    (cell_state, 1), (h_blocks, 4), (phases, 1), (aux, 8), (aux_kept, 1),                    \
    (aux_grad_block, 0), (param_blocks, 14), (param_grad, STEPS), (projects, 0),             \
    (row_reduction, 1), (recurrent_product, 1)
#define CELLS_FAMILY_LAYER_NORM_GRU                                                           \
    (name, layer_norm_gru), (steps, layer_norm_gru), (source, layer_norm), (gates, 3),      \
    (cell_state, 0), (h_blocks, 3), (phases, 1), (aux, 6), (aux_kept, 1),                    \
    (aux_grad_block, 0), (param_blocks, 12), (param_grad, STEPS), (projects, 0),             \
    (row_reduction, 1), (recurrent_product, 1)
#define CELLS_FAMILY_INDRNN                                                                   \
    (name, indrnn), (steps, indrnn), (source, indrnn), (gates, 1), (cell_state, 0),          \
    (h_blocks, 1), (phases, 1), (aux, 0), (aux_kept, 0), (aux_grad_block, -1),              \
    (param_blocks, 1), (param_grad, STEPS), (projects, 0), (row_reduction, 0),               \
    (recurrent_product, 0)

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

/* One field of a row: CELLS_FAMILY_GATES(CELLS_FAMILY_LSTM) is 4 (the row, or its fields:
 * the accessors take either). CELLS_FAMILY_APPLY(M, row) is M(the row's fields). A field's
 * accessor takes the pair in its place and keeps its value where the pair names the field,
 * CELLS_FAMILY_FIELD_<field>_<field>(value); any other name leaves an undefined
 * CELLS_FAMILY_FIELD_<field>_<other>(value), which does not compile. */
#define CELLS_FAMILY_APPLY(M, ...) M(__VA_ARGS__)
#define CELLS_FAMILY_UNPAREN_(...) __VA_ARGS__
#define CELLS_FAMILY_CHECKED_(expected, given, value) CELLS_FAMILY_FIELD_##expected##_##given(value)
#define CELLS_FAMILY_FIELD_(expected, pair)                                                   \
    CELLS_FAMILY_APPLY(CELLS_FAMILY_CHECKED_, expected, CELLS_FAMILY_UNPAREN_ pair)
#define CELLS_FAMILY_AT_(k, field, ...)                                                       \
    CELLS_FAMILY_FIELD_(field, CELLS_FAMILY_ARG_##k##_(__VA_ARGS__))
#define CELLS_FAMILY_NAME(...) CELLS_FAMILY_AT_(0, name, __VA_ARGS__)
#define CELLS_FAMILY_STEPS(...) CELLS_FAMILY_AT_(1, steps, __VA_ARGS__)
#define CELLS_FAMILY_SOURCE(...) CELLS_FAMILY_AT_(2, source, __VA_ARGS__)
#define CELLS_FAMILY_GATES(...) CELLS_FAMILY_AT_(3, gates, __VA_ARGS__)
#define CELLS_FAMILY_CELL_STATE(...) CELLS_FAMILY_AT_(4, cell_state, __VA_ARGS__)
#define CELLS_FAMILY_H_BLOCKS(...) CELLS_FAMILY_AT_(5, h_blocks, __VA_ARGS__)
#define CELLS_FAMILY_PHASES(...) CELLS_FAMILY_AT_(6, phases, __VA_ARGS__)
#define CELLS_FAMILY_AUX(...) CELLS_FAMILY_AT_(7, aux, __VA_ARGS__)
#define CELLS_FAMILY_AUX_KEPT(...) CELLS_FAMILY_AT_(8, aux_kept, __VA_ARGS__)
#define CELLS_FAMILY_AUX_GRAD_BLOCK(...) CELLS_FAMILY_AT_(9, aux_grad_block, __VA_ARGS__)
#define CELLS_FAMILY_PARAM_BLOCKS(...) CELLS_FAMILY_AT_(10, param_blocks, __VA_ARGS__)
#define CELLS_FAMILY_PARAM_GRAD(...) CELLS_FAMILY_AT_(11, param_grad, __VA_ARGS__)
#define CELLS_FAMILY_PROJECTS(...) CELLS_FAMILY_AT_(12, projects, __VA_ARGS__)
#define CELLS_FAMILY_ROW_REDUCTION(...) CELLS_FAMILY_AT_(13, row_reduction, __VA_ARGS__)
#define CELLS_FAMILY_RECURRENT_PRODUCT(...) CELLS_FAMILY_AT_(14, recurrent_product, __VA_ARGS__)
#define CELLS_FAMILY_FIELD_name_name(value) value
#define CELLS_FAMILY_FIELD_steps_steps(value) value
#define CELLS_FAMILY_FIELD_source_source(value) value
#define CELLS_FAMILY_FIELD_gates_gates(value) value
#define CELLS_FAMILY_FIELD_cell_state_cell_state(value) value
#define CELLS_FAMILY_FIELD_h_blocks_h_blocks(value) value
#define CELLS_FAMILY_FIELD_phases_phases(value) value
#define CELLS_FAMILY_FIELD_aux_aux(value) value
#define CELLS_FAMILY_FIELD_aux_kept_aux_kept(value) value
#define CELLS_FAMILY_FIELD_aux_grad_block_aux_grad_block(value) value
#define CELLS_FAMILY_FIELD_param_blocks_param_blocks(value) value
#define CELLS_FAMILY_FIELD_param_grad_param_grad(value) value
#define CELLS_FAMILY_FIELD_projects_projects(value) value
#define CELLS_FAMILY_FIELD_row_reduction_row_reduction(value) value
#define CELLS_FAMILY_FIELD_recurrent_product_recurrent_product(value) value
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
