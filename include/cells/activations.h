/* libnd4j's activation codes (its lstmLayer's gateAct, cellAct, outAct; the RNN's tanh and
 * relu are codes 0 and 1), their forward and the derivatives libnd4j's backward uses, for float
 * (cells_act_*_f) and double (cells_act_*_d); see activations_impl.h.
 *
 * An activation is a code with two parameters alpha and beta (cells_activation); the ones that
 * have none ignore them. Point functions act(z) and a row loop over n units per code, chosen by
 * one switch per row: the loops vectorise, and no element pays for a switch.
 */
#ifndef CELLS_ACTIVATIONS_H
#define CELLS_ACTIVATIONS_H

#include "cells/common.h"

/* The codes, as libnd4j's (and its Java LSTMActivations' ordinals). */
enum {
    CELLS_ACT_TANH = 0,              /* tanh(z) */
    CELLS_ACT_RELU = 1,              /* z < 0 ? 0 : z */
    CELLS_ACT_SIGMOID = 2,           /* 1 / (1 + e^-z) */
    CELLS_ACT_AFFINE = 3,            /* alpha·z + beta */
    CELLS_ACT_LEAKY_RELU = 4,        /* z < 0 ? alpha·z : z */
    CELLS_ACT_THRESHOLDED_RELU = 5,  /* z > alpha ? z : 0 */
    CELLS_ACT_SCALED_TANH = 6,       /* alpha·tanh(beta·z) */
    CELLS_ACT_HARD_SIGMOID = 7,      /* min(1, max(0, 0.2f·z + 0.5f)) */
    CELLS_ACT_ELU = 8,               /* z >= 0 ? z : alpha·(e^z - 1) */
    CELLS_ACT_SOFTSIGN = 9,          /* z / (1 + |z|) */
    CELLS_ACT_SOFTPLUS = 10,         /* log(1 + e^z) */
    CELLS_ACTIVATIONS
};

/* An activation and its parameters. */
typedef struct {
    int code;      /* CELLS_ACT_* */
    double alpha;
    double beta;
} cells_activation;

/* Whether the backward computes act'(z) from the activation a = act(z) itself (tanh, relu,
 * sigmoid, affine, softsign: the forward keeps a), or needs the pre-activation z (the others:
 * their derivative is not a function of a for every alpha, or loses precision from it; the
 * forward keeps z, and the backward recomputes a from it). */
CELLS_FN int cells_act_keeps_output(int code) {
    return code == CELLS_ACT_TANH || code == CELLS_ACT_RELU || code == CELLS_ACT_SIGMOID
        || code == CELLS_ACT_AFFINE || code == CELLS_ACT_SOFTSIGN;
}

/* The helpers FN(expm1) and FN(log1p) that common.h does not have: e^z - 1 as common.h's
 * cells_exp_f / cells_exp_d minus 1 (absolute error about 1e-7 / 2e-16, as the ELU's); libm's
 * log1p (softplus is the one activation that needs a logarithm). */
CELLS_INLINE float cells_expm1_f(float z) { return cells_exp_f(z) - 1.0f; }
CELLS_INLINE double cells_expm1_d(double z) { return cells_exp_d(z) - 1.0; }
CELLS_FN float cells_log1p_f(float z) { return log1pf(z); }
CELLS_FN double cells_log1p_d(double z) { return log1p(z); }

/* `LOOP(point)` for the code's point function (activations_impl.h names them act_<name>; LOOP
 * appends _grad for the derivative): the one switch of a row loop. */
#define CELLS_ACT_SWITCH(code, LOOP)                                                          \
    switch (code) {                                                                           \
    case CELLS_ACT_TANH: LOOP(act_tanh); break;                                               \
    case CELLS_ACT_RELU: LOOP(act_relu); break;                                               \
    case CELLS_ACT_SIGMOID: LOOP(act_sigmoid); break;                                         \
    case CELLS_ACT_AFFINE: LOOP(act_affine); break;                                           \
    case CELLS_ACT_LEAKY_RELU: LOOP(act_leaky_relu); break;                                   \
    case CELLS_ACT_THRESHOLDED_RELU: LOOP(act_thresholded_relu); break;                       \
    case CELLS_ACT_SCALED_TANH: LOOP(act_scaled_tanh); break;                                 \
    case CELLS_ACT_HARD_SIGMOID: LOOP(act_hard_sigmoid); break;                               \
    case CELLS_ACT_ELU: LOOP(act_elu); break;                                                 \
    case CELLS_ACT_SOFTSIGN: LOOP(act_softsign); break;                                       \
    case CELLS_ACT_SOFTPLUS: LOOP(act_softplus); break;                                       \
    }

#define CELLS_IMPL "cells/activations_impl.h"
#include "cells/instantiate.h"

#endif
