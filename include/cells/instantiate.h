/* Compiles the implementation header named by CELLS_IMPL twice: for float (REAL = float,
 * FN(name) = cells_<name>_f) and for double (cells_<name>_d). The activations of common.h follow
 * the same naming, so an implementation calls FN(sigmoid), FN(tanh), FN(elu).
 * No include guard: each family header defines CELLS_IMPL and includes this once. */
#define REAL float
#define FN(name) cells_##name##_f
#include CELLS_IMPL
#undef REAL
#undef FN

#define REAL double
#define FN(name) cells_##name##_d
#include CELLS_IMPL
#undef REAL
#undef FN

#undef CELLS_IMPL
