/* The activations of activations.h, compiled for float and double through instantiate.h (REAL,
 * FN(name) naming cells_act_*_f / cells_act_*_d).
 *
 * Per code: act_<name>(z, alpha, beta) = a, and act_<name>_grad(k, alpha, beta) = act'(z),
 * where k is what the forward keeps (cells_act_keeps_output): a itself, or z. The derivatives
 * are libnd4j's (helpers/impl/lstmLayer.cpp activationDeriv), its kinks included: relu 0 at
 * z = 0, leaky relu 1 at z = 0, thresholded relu 0 at z = alpha, hard sigmoid 0.2 at |z| = 2.5,
 * ELU 1 at z = 0. libnd4j computes the scaled tanh's and softplus' derivatives in float32 even
 * for double data, and its softplus as log(1 + e^z) (inf from z ~ 88.7 in float32, 709 in
 * double): here every value is in the call's dtype and softplus does not overflow.
 */

CELLS_INLINE REAL FN(act_tanh)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return FN(tanh)(z);
}
CELLS_INLINE REAL FN(act_tanh_grad)(REAL a, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return 1 - a * a;
}

CELLS_INLINE REAL FN(act_relu)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return z < 0 ? 0 : z;
}
/* z > 0 exactly where a > 0 */
CELLS_INLINE REAL FN(act_relu_grad)(REAL a, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return a > 0 ? 1 : 0;
}

CELLS_INLINE REAL FN(act_sigmoid)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return FN(sigmoid)(z);
}
CELLS_INLINE REAL FN(act_sigmoid_grad)(REAL a, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return a * (1 - a);
}

CELLS_INLINE REAL FN(act_affine)(REAL z, REAL alpha, REAL beta) { return alpha * z + beta; }
CELLS_INLINE REAL FN(act_affine_grad)(REAL a, REAL alpha, REAL beta) {
    (void)a, (void)beta;
    return alpha;
}

CELLS_INLINE REAL FN(act_leaky_relu)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z < 0 ? alpha * z : z;
}
CELLS_INLINE REAL FN(act_leaky_relu_grad)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z >= 0 ? 1 : alpha;
}

CELLS_INLINE REAL FN(act_thresholded_relu)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z > alpha ? z : 0;
}
CELLS_INLINE REAL FN(act_thresholded_relu_grad)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z > alpha ? 1 : 0;
}

CELLS_INLINE REAL FN(act_scaled_tanh)(REAL z, REAL alpha, REAL beta) {
    return alpha * FN(tanh)(beta * z);
}
CELLS_INLINE REAL FN(act_scaled_tanh_grad)(REAL z, REAL alpha, REAL beta) {
    REAL t = FN(tanh)(beta * z);
    return alpha * beta * (1 - t * t);
}

/* libnd4j's float literals 0.2f and 0.5f, also in double (0.2f = 0.20000000298...). */
CELLS_INLINE REAL FN(act_hard_sigmoid)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    REAL v = (REAL)0.2f * z + (REAL)0.5f;
    v = v < 0 ? 0 : v;
    return v > 1 ? 1 : v;
}
CELLS_INLINE REAL FN(act_hard_sigmoid_grad)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return z < (REAL)-2.5f || z > (REAL)2.5f ? 0 : (REAL)0.2f;
}

CELLS_INLINE REAL FN(act_elu)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z >= 0 ? z : alpha * FN(expm1)(z);
}
CELLS_INLINE REAL FN(act_elu_grad)(REAL z, REAL alpha, REAL beta) {
    (void)beta;
    return z >= 0 ? 1 : alpha * FN(exp)(z);
}

CELLS_INLINE REAL FN(act_softsign)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return z / (1 + (z < 0 ? -z : z));
}
/* 1 / (1 + |z|)² = (1 - |a|)² */
CELLS_INLINE REAL FN(act_softsign_grad)(REAL a, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    REAL s = 1 - (a < 0 ? -a : a);
    return s * s;
}

/* log(1 + e^z) = max(z, 0) + log(1 + e^-|z|) */
CELLS_INLINE REAL FN(act_softplus)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return (z > 0 ? z : 0) + FN(log1p)(FN(exp)(z > 0 ? -z : z));
}
CELLS_INLINE REAL FN(act_softplus_grad)(REAL z, REAL alpha, REAL beta) {
    (void)alpha, (void)beta;
    return FN(sigmoid)(z);
}

/* Row loops over n units, one switch on the code each. `out` may be `z` (element j is read
 * before it is written). */

/* out = act(z) */
CELLS_ROW FN(act_row)(const cells_activation *act, ptrdiff_t n, const REAL *z, REAL *out) {
    REAL alpha = (REAL)act->alpha, beta = (REAL)act->beta;
#define CELLS_ACT_LOOP(point)                                                                \
    CELLS_SIMD                                                                               \
    for (ptrdiff_t j = 0; j < n; ++j)                                                        \
        out[j] = FN(point)(z[j], alpha, beta)
    CELLS_ACT_SWITCH(act->code, CELLS_ACT_LOOP)
#undef CELLS_ACT_LOOP
}

/* out *= act(z) */
CELLS_ROW FN(act_mul_row)(const cells_activation *act, ptrdiff_t n, const REAL *z, REAL *out) {
    REAL alpha = (REAL)act->alpha, beta = (REAL)act->beta;
#define CELLS_ACT_LOOP(point)                                                                \
    CELLS_SIMD                                                                               \
    for (ptrdiff_t j = 0; j < n; ++j)                                                        \
        out[j] *= FN(point)(z[j], alpha, beta)
    CELLS_ACT_SWITCH(act->code, CELLS_ACT_LOOP)
#undef CELLS_ACT_LOOP
}

/* out = act'(z), from `kept` = what the forward keeps (a or z: cells_act_keeps_output) */
CELLS_ROW FN(act_grad_row)(const cells_activation *act, ptrdiff_t n, const REAL *kept,
                           REAL *out) {
    REAL alpha = (REAL)act->alpha, beta = (REAL)act->beta;
#define CELLS_ACT_LOOP(point)                                                                \
    CELLS_SIMD                                                                               \
    for (ptrdiff_t j = 0; j < n; ++j)                                                        \
        out[j] = FN(point##_grad)(kept[j], alpha, beta)
    CELLS_ACT_SWITCH(act->code, CELLS_ACT_LOOP)
#undef CELLS_ACT_LOOP
}

/* The activated values from what the forward kept: `kept` itself when that is a, else
 * act(kept) written to `tmp` [n]. */
CELLS_INLINE const REAL *FN(act_values)(const cells_activation *act, ptrdiff_t n,
                                        const REAL *kept, REAL *tmp) {
    if (cells_act_keeps_output(act->code))
        return kept;
    FN(act_row)(act, n, kept, tmp);
    return tmp;
}

/* The forward of one activation over a row of pre-activations z, leaving in z what the
 * backward needs (cells_act_keeps_output): the activated values in place, or z itself and the
 * activated values in `tmp` [n]. Returns where the activated values are. */
CELLS_INLINE const REAL *FN(act_forward)(const cells_activation *act, ptrdiff_t n, REAL *z,
                                         REAL *tmp) {
    REAL *out = cells_act_keeps_output(act->code) ? z : tmp;
    FN(act_row)(act, n, z, out);
    return out;
}
