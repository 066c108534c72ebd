/* LSTM point functions: the math of one (batch row, hidden unit) element.
 *
 * Compiled for float and double by lstm.h through instantiate.h (REAL, and FN(name) naming
 * cells_lstm_*_f / cells_lstm_*_d). Gate blocks are (i, f, g, o) = input, forget, cell
 * candidate, output (libnd4j lstmLayer, PyTorch). Optional peephole weights wp = (wp_i, wp_f,
 * wp_o) and a cell clip `clip` (+infinity: no clipping):
 *   zi = x·Wx_i + hPrev·Wr_i + b_i + wp_i∘cPrev     i = σ(zi)
 *   zf = x·Wx_f + hPrev·Wr_f + b_f + wp_f∘cPrev     f = σ(zf)
 *   zg = x·Wx_g + hPrev·Wr_g + b_g                  g = tanh(zg)
 *   c  = clip(f∘cPrev + i∘g)                        clip(v) = min(max(v, -clip), clip)
 *   zo = x·Wx_o + hPrev·Wr_o + b_o + wp_o∘c         o = σ(zo)   (the new, clipped c)
 *   h  = o∘tanh(c)
 * σ, tanh and tanh are the default activations (libnd4j's gateAct, cellAct, outAct: i, f and o
 * share gateAct): lstm_step and its loops. Any other choice (cells/activations.h) runs the row
 * loops lstm_act_row and lstm_act_bp_row, which apply each activation in a pass over the row.
 */

/* v limited to [-clip, clip]; NaN stays NaN. */
CELLS_INLINE REAL FN(lstm_clip)(REAL v, REAL clip) {
    v = v < -clip ? -clip : v;
    return v > clip ? clip : v;
}

/* One step of one unit. zi, zf, zg, zo hold everything but the peephole terms. */
CELLS_INLINE void FN(lstm_step)(REAL zi, REAL zf, REAL zg, REAL zo, REAL wpi, REAL wpf, REAL wpo,
                                REAL clip, REAL cPrev,
                                REAL *i, REAL *f, REAL *g, REAL *o, REAL *c, REAL *h) {
    *i = FN(sigmoid)(zi + wpi * cPrev);
    *f = FN(sigmoid)(zf + wpf * cPrev);
    *g = FN(tanh)(zg);
    *c = FN(lstm_clip)(*f * cPrev + *i * *g, clip);
    *o = FN(sigmoid)(zo + wpo * *c);
    *h = *o * FN(tanh)(*c);
}

/* Backward of one step of one unit, given dh = dL/dh and dc = dL/dc arriving at its outputs
 * (from the later steps and the step's own output):
 *   τ = tanh(c),  dzo = dh∘τ∘o(1-o)
 *   dĉ = dc + dh∘o∘(1-τ²) + dzo∘wp_o          (the whole adjoint of the clipped c)
 *   dĉr = dĉ where |c| < clip, else 0          (through the clip; an element at the bound is
 *                                               taken as clipped)
 *   dzi = dĉr∘g∘i(1-i),  dzf = dĉr∘cPrev∘f(1-f),  dzg = dĉr∘i∘(1-g²)
 *   dcPrev = dĉr∘f + dzi∘wp_i + dzf∘wp_f
 * (dL/dhPrev = dz·Wrᵀ is a product over all units: the caller's.) */
CELLS_INLINE void FN(lstm_bp_step)(REAL dh, REAL dc, REAL i, REAL f, REAL g, REAL o, REAL c,
                                   REAL cPrev, REAL wpi, REAL wpf, REAL wpo, REAL clip,
                                   REAL *dzi, REAL *dzf, REAL *dzg, REAL *dzo, REAL *dcPrev) {
    REAL tau = FN(tanh)(c);
    *dzo = dh * tau * o * (1 - o);
    REAL dcTotal = dc + dh * o * (1 - tau * tau) + *dzo * wpo;
    REAL dcRaw = c >= clip || c <= -clip ? 0 : dcTotal;
    *dzi = dcRaw * g * i * (1 - i);
    *dzf = dcRaw * cPrev * f * (1 - f);
    *dzg = dcRaw * i * (1 - g * g);
    *dcPrev = dcRaw * f + *dzi * wpi + *dzf * wpf;
}

/* Row loops: one batch row, n units, for the steps at the end of this file. Each gate block is
 * its own pointer, already offset to the first unit; no two overlap, so the loops vectorise.
 * Pointers marked "or NULL" mean zero peephole weights or gradients. */

CELLS_ROW FN(lstm_row)(
        ptrdiff_t n,
        const REAL *xi, const REAL *xf,
        const REAL *xg, const REAL *xo,                                 /* x·Wx + b */
        const REAL *CELLS_RESTRICT hi, const REAL *CELLS_RESTRICT hf,
        const REAL *CELLS_RESTRICT hg, const REAL *CELLS_RESTRICT ho,  /* hPrev·Wr */
        const REAL *CELLS_RESTRICT wpi, const REAL *CELLS_RESTRICT wpf,
        const REAL *CELLS_RESTRICT wpo,                                 /* or NULL */
        REAL clip, const REAL *CELLS_RESTRICT cPrev,
        REAL *i, REAL *f, REAL *g, REAL *o,    /* may be xi, xf, xg, xo (element j is read
                                                  before it is written: not restrict) */
        REAL *CELLS_RESTRICT c, REAL *CELLS_RESTRICT h) {
    /* Two loops, with and without peepholes: a NULL test inside one loop costs every element. */
    if (wpi) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            FN(lstm_step)(xi[j] + hi[j], xf[j] + hf[j], xg[j] + hg[j], xo[j] + ho[j],
                          wpi[j], wpf[j], wpo[j], clip, cPrev[j],
                          &i[j], &f[j], &g[j], &o[j], &c[j], &h[j]);
    } else {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            FN(lstm_step)(xi[j] + hi[j], xf[j] + hf[j], xg[j] + hg[j], xo[j] + ho[j],
                          0, 0, 0, clip, cPrev[j], &i[j], &f[j], &g[j], &o[j], &c[j], &h[j]);
    }
}

/* dh: in, dL/dh from the later steps (dLdh, the gradient at this step's output, is added);
 * out, 0: dL/dhPrev is dz·Wrᵀ, which the caller adds. dc: in, dL/dc from the later steps; out,
 * dL/dcPrev. With peepholes (wpi, wpf, wpo not NULL), dwpi, dwpf, dwpo accumulate their
 * gradients dzi∘cPrev, dzf∘cPrev, dzo∘c; without, they are not used. */
CELLS_ROW FN(lstm_bp_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT dLdh,                                /* or NULL */
        const REAL *CELLS_RESTRICT i, const REAL *CELLS_RESTRICT f,
        const REAL *CELLS_RESTRICT g, const REAL *CELLS_RESTRICT o,
        const REAL *CELLS_RESTRICT c, const REAL *CELLS_RESTRICT cPrev,
        const REAL *CELLS_RESTRICT wpi, const REAL *CELLS_RESTRICT wpf,
        const REAL *CELLS_RESTRICT wpo,                                 /* or NULL */
        REAL clip,
        REAL *CELLS_RESTRICT dzi, REAL *CELLS_RESTRICT dzf, REAL *CELLS_RESTRICT dzg,
        REAL *CELLS_RESTRICT dzo, REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT dc,
        REAL *CELLS_RESTRICT dwpi, REAL *CELLS_RESTRICT dwpf,
        REAL *CELLS_RESTRICT dwpo) {                                    /* or NULL */
    /* Two loops, with and without peepholes (see lstm_row). */
    if (wpi) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j) {
            FN(lstm_bp_step)(dh[j] + (dLdh ? dLdh[j] : 0), dc[j], i[j], f[j], g[j], o[j], c[j],
                             cPrev[j], wpi[j], wpf[j], wpo[j], clip,
                             &dzi[j], &dzf[j], &dzg[j], &dzo[j], &dc[j]);
            dh[j] = 0;
            dwpi[j] += dzi[j] * cPrev[j];
            dwpf[j] += dzf[j] * cPrev[j];
            dwpo[j] += dzo[j] * c[j];
        }
    } else {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j) {
            FN(lstm_bp_step)(dh[j] + (dLdh ? dLdh[j] : 0), dc[j], i[j], f[j], g[j], o[j], c[j],
                             cPrev[j], 0, 0, 0, clip, &dzi[j], &dzf[j], &dzg[j], &dzo[j], &dc[j]);
            dh[j] = 0;
        }
    }
}

/* Row loops for any activations: the math of lstm_row and lstm_bp_row with o's gate_act,
 * cell_act and out_act, in passes over the row (each activation one loop chosen by one switch;
 * cells/activations_impl.h). The gates keep, per activation, the activated value or the
 * pre-activation (cells_act_keeps_output): the backward recomputes the activated value from
 * a pre-activation, and computes out_act's value and derivative from c. */

/* As lstm_row; c and h are scratch until their last pass. */
CELLS_ROW FN(lstm_act_row)(
        const cells_step_options *opt, ptrdiff_t n,
        const REAL *xi, const REAL *xf, const REAL *xg, const REAL *xo,
        const REAL *CELLS_RESTRICT hi, const REAL *CELLS_RESTRICT hf,
        const REAL *CELLS_RESTRICT hg, const REAL *CELLS_RESTRICT ho,
        const REAL *CELLS_RESTRICT wpi, const REAL *CELLS_RESTRICT wpf,
        const REAL *CELLS_RESTRICT wpo,                                 /* or NULL */
        REAL clip, const REAL *CELLS_RESTRICT cPrev,
        REAL *i, REAL *f, REAL *g, REAL *o,                             /* may be xi, ... */
        REAL *CELLS_RESTRICT c, REAL *CELLS_RESTRICT h) {
    const cells_activation *gate = &opt->gate_act;
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        i[j] = xi[j] + hi[j];
        f[j] = xf[j] + hf[j];
        g[j] = xg[j] + hg[j];
        o[j] = xo[j] + ho[j];
    }
    if (wpi) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j) {
            i[j] += wpi[j] * cPrev[j];
            f[j] += wpf[j] * cPrev[j];
        }
    }
    const REAL *ag = FN(act_forward)(&opt->cell_act, n, g, h);
    const REAL *ai = FN(act_forward)(gate, n, i, c);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        c[j] = ai[j] * ag[j];
    const REAL *af = FN(act_forward)(gate, n, f, h);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        c[j] = FN(lstm_clip)(af[j] * cPrev[j] + c[j], clip);
    if (wpo) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            o[j] += wpo[j] * c[j];
    }
    FN(act_row)(&opt->out_act, n, c, h);
    if (cells_act_keeps_output(gate->code)) {
        FN(act_row)(gate, n, o, o);
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            h[j] *= o[j];
    } else {
        FN(act_mul_row)(gate, n, o, h);
    }
}

/* As lstm_bp_row, on the gates lstm_act_row kept; dzi, dzf, dzg and dh are scratch until their
 * last pass. */
CELLS_ROW FN(lstm_act_bp_row)(
        const cells_step_options *opt, ptrdiff_t n,
        const REAL *CELLS_RESTRICT dLdh,                                /* or NULL */
        const REAL *CELLS_RESTRICT i, const REAL *CELLS_RESTRICT f,
        const REAL *CELLS_RESTRICT g, const REAL *CELLS_RESTRICT o,
        const REAL *CELLS_RESTRICT c, const REAL *CELLS_RESTRICT cPrev,
        const REAL *CELLS_RESTRICT wpi, const REAL *CELLS_RESTRICT wpf,
        const REAL *CELLS_RESTRICT wpo,                                 /* or NULL */
        REAL clip,
        REAL *CELLS_RESTRICT dzi, REAL *CELLS_RESTRICT dzf, REAL *CELLS_RESTRICT dzg,
        REAL *CELLS_RESTRICT dzo, REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT dc,
        REAL *CELLS_RESTRICT dwpi, REAL *CELLS_RESTRICT dwpf,
        REAL *CELLS_RESTRICT dwpo) {                                    /* or NULL */
    const cells_activation *gate = &opt->gate_act, *cell = &opt->cell_act, *out = &opt->out_act;
    if (dLdh) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            dh[j] += dLdh[j];
    }
    /* τ = out_act(c) in dzi, τ' in dzg, o in dzf (when o keeps zo), o' in dzo */
    FN(act_row)(out, n, c, dzi);
    FN(act_grad_row)(out, n, cells_act_keeps_output(out->code) ? dzi : c, dzg);
    const REAL *ao = FN(act_values)(gate, n, o, dzf);
    FN(act_grad_row)(gate, n, o, dzo);
    /* dzo = dh∘τ∘o', and dc becomes dĉr: the adjoint of c through the clip */
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        dzo[j] *= dh[j] * dzi[j];
        dc[j] += dh[j] * ao[j] * dzg[j];
    }
    if (wpo) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j)
            dc[j] += dzo[j] * wpo[j];
    }
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        dc[j] = c[j] >= clip || c[j] <= -clip ? 0 : dc[j];
    /* dzi = dĉr∘g∘i', dzg = dĉr∘i∘g', dzf = dĉr∘cPrev∘f' (dh holds the activated values) */
    FN(act_grad_row)(gate, n, i, dzi);
    const REAL *ag = FN(act_values)(cell, n, g, dh);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        dzi[j] *= dc[j] * ag[j];
    FN(act_grad_row)(cell, n, g, dzg);
    const REAL *ai = FN(act_values)(gate, n, i, dh);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        dzg[j] *= dc[j] * ai[j];
    FN(act_grad_row)(gate, n, f, dzf);
    const REAL *af = FN(act_values)(gate, n, f, dh);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        dzf[j] *= dc[j] * cPrev[j];
        dc[j] *= af[j];
        dh[j] = 0;
    }
    if (wpi) {
        CELLS_SIMD
        for (ptrdiff_t j = 0; j < n; ++j) {
            dc[j] += dzi[j] * wpi[j] + dzf[j] * wpf[j];
            dwpi[j] += dzi[j] * cPrev[j];
            dwpf[j] += dzf[j] * cPrev[j];
            dwpo[j] += dzo[j] * c[j];
        }
    }
}

/* The time loop's steps (cells/step.h): gates (i, f, g, o), the cell state, and P = the
 * peepholes Wp [3, nOut] (i, f, o) or NULL; o's activations choose the row loops. */
CELLS_FORWARD_STEP(lstm_forward) {
    (void)hPrev, (void)aux;
    if (cells_lstm_default_activations(o))
        FN(lstm_row)(n, zx, zx + nOut, zx + 2 * nOut, zx + 3 * nOut, zh, zh + nOut,
                     zh + 2 * nOut, zh + 3 * nOut, P, CELLS_AT(P, nOut), CELLS_AT(P, 2 * nOut),
                     (REAL)o->clip, cPrev, g, g + nOut, g + 2 * nOut, g + 3 * nOut, cNext,
                     hNext);
    else
        FN(lstm_act_row)(o, n, zx, zx + nOut, zx + 2 * nOut, zx + 3 * nOut, zh, zh + nOut,
                         zh + 2 * nOut, zh + 3 * nOut, P, CELLS_AT(P, nOut),
                         CELLS_AT(P, 2 * nOut), (REAL)o->clip, cPrev, g, g + nOut,
                         g + 2 * nOut, g + 3 * nOut, cNext, hNext);
}

CELLS_BACKWARD_STEP(lstm_backward) {
    (void)dLdg, (void)aux, (void)daux, (void)hPrev;
    if (cells_lstm_default_activations(o))
        FN(lstm_bp_row)(n, dLdh, g, g + nOut, g + 2 * nOut, g + 3 * nOut, c, cPrev, P,
                        CELLS_AT(P, nOut), CELLS_AT(P, 2 * nOut), (REAL)o->clip, d, d + nOut,
                        d + 2 * nOut, d + 3 * nOut, dh, dc, dP, CELLS_AT(dP, nOut),
                        CELLS_AT(dP, 2 * nOut));
    else
        FN(lstm_act_bp_row)(o, n, dLdh, g, g + nOut, g + 2 * nOut, g + 3 * nOut, c, cPrev, P,
                            CELLS_AT(P, nOut), CELLS_AT(P, 2 * nOut), (REAL)o->clip, d,
                            d + nOut, d + 2 * nOut, d + 3 * nOut, dh, dc, dP,
                            CELLS_AT(dP, nOut), CELLS_AT(dP, 2 * nOut));
    for (int k = 0; k < 4; ++k)
        FN(copy_units)(n, d + k * nOut, g + k * nOut);
}
