/* Each cell family's row of the table in cells/families.h, once, as a macro: the CPU table is
 * initialised from these rows, and the GPU kernels (the sources in cells/kernels/, which need
 * the fields as preprocessor constants) read their family's fields with
 * CELLS_FAMILY_<FIELD>(row).
 * The fields are in cells_family_info's order (cells/families.h says what each one means). */
#ifndef CELLS_FAMILY_ROWS_H
#define CELLS_FAMILY_ROWS_H

/* gates, cell_state, h_blocks, aux, aux_kept, aux_grad_block, param_blocks, projects: */
#define CELLS_FAMILY_GRU_RESET_BEFORE         3,  0,  2,  1,  0, -1,  0,  0
#define CELLS_FAMILY_GRU_LINEAR_BEFORE_RESET  3,  0,  3,  1,  1,  2,  1,  0
#define CELLS_FAMILY_LSTM                     4,  1,  4,  0,  0, -1,  3,  1
#define CELLS_FAMILY_LLTM                     3,  1,  3,  0,  0, -1,  0,  0
#define CELLS_FAMILY_RNN                      1,  0,  1,  0,  0, -1,  0,  0

/* One field of a row (the indirection expands the row into its fields first). */
#define CELLS_FAMILY_GATES(row) CELLS_FAMILY_FIELD_0_(row)
#define CELLS_FAMILY_CELL_STATE(row) CELLS_FAMILY_FIELD_1_(row)
#define CELLS_FAMILY_H_BLOCKS(row) CELLS_FAMILY_FIELD_2_(row)
#define CELLS_FAMILY_AUX(row) CELLS_FAMILY_FIELD_3_(row)
#define CELLS_FAMILY_AUX_KEPT(row) CELLS_FAMILY_FIELD_4_(row)
#define CELLS_FAMILY_PARAM_BLOCKS(row) CELLS_FAMILY_FIELD_6_(row)
#define CELLS_FAMILY_FIELD_0_(f0, f1, f2, f3, f4, f5, f6, f7) f0
#define CELLS_FAMILY_FIELD_1_(f0, f1, f2, f3, f4, f5, f6, f7) f1
#define CELLS_FAMILY_FIELD_2_(f0, f1, f2, f3, f4, f5, f6, f7) f2
#define CELLS_FAMILY_FIELD_3_(f0, f1, f2, f3, f4, f5, f6, f7) f3
#define CELLS_FAMILY_FIELD_4_(f0, f1, f2, f3, f4, f5, f6, f7) f4
#define CELLS_FAMILY_FIELD_6_(f0, f1, f2, f3, f4, f5, f6, f7) f6

#endif
