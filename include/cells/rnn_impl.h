/* Vanilla RNN point functions: the math of one (batch row, unit) element.
 *
 * Compiled for float and double by rnn.h through instantiate.h (REAL, and FN(name) naming
 * cells_rnn_*_f / cells_rnn_*_d). PyTorch's nn.RNN, ONNX's RNN, libnd4j's static_rnn:
 *   z = x·Wx + bx + hPrev·Wh + bh,   h = act(z),   act = tanh or relu (CELLS_ACT_TANH,
 *   CELLS_ACT_RELU of activations.h).
 */

/* act(z) */
CELLS_INLINE REAL FN(rnn_act)(int activation, REAL z) {
    return activation == CELLS_ACT_RELU ? (z > 0 ? z : 0) : FN(tanh)(z);
}

/* act'(z), given h = act(z): tanh 1 - h²; relu 1 where z > 0 (there h > 0), else 0 (at z = 0
 * too, PyTorch autograd's value). */
CELLS_INLINE REAL FN(rnn_act_grad)(int activation, REAL h) {
    return activation == CELLS_ACT_RELU ? (h > 0 ? 1 : 0) : 1 - h * h;
}

/* Row loops: one batch row, n units, for the steps below. */

/* g = h = act(zx + zh); g is the step's kept activation (the time loop's gates). */
CELLS_ROW FN(rnn_row)(
        ptrdiff_t n, int activation,
        const REAL *zx,                  /* x·Wx + b */
        const REAL *CELLS_RESTRICT zh,   /* hPrev·Wh */
        REAL *g,                         /* may be zx (element j is read before it is written) */
        REAL *CELLS_RESTRICT h) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL a = FN(rnn_act)(activation, zx[j] + zh[j]);
        g[j] = a;
        h[j] = a;
    }
}

/* dz = (dh + dLdh)∘act'(z), from the step's activation g = act(z). dh: in, dL/dh from the
 * later steps; out, 0, so that the recurrent product dz·Whᵀ then accumulates dL/dhPrev. */
CELLS_ROW FN(rnn_bp_row)(
        ptrdiff_t n, int activation,
        const REAL *CELLS_RESTRICT dLdh,  /* or NULL */
        const REAL *CELLS_RESTRICT g,
        REAL *CELLS_RESTRICT dz, REAL *CELLS_RESTRICT dh) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        dz[j] = (dh[j] + (dLdh ? dLdh[j] : 0)) * FN(rnn_act_grad)(activation, g[j]);
        dh[j] = 0;
    }
}

/* The time loop's steps (cells/step.h): one gate block, the activation itself. */
CELLS_FORWARD_STEP(rnn_forward) {
    (void)nOut, (void)hPrev, (void)cPrev, (void)P, (void)aux, (void)cNext;
    FN(rnn_row)(n, o->activation, zx, zh, g, hNext);
}

CELLS_BACKWARD_STEP(rnn_backward) {
    (void)nOut, (void)dLdg, (void)aux, (void)daux, (void)hPrev, (void)cPrev, (void)c, (void)P,
        (void)dc, (void)dP;
    FN(rnn_bp_row)(n, o->activation, dLdh, g, d, dh);
    FN(copy_units)(n, d, g);
}
