/* haste's LayerNorm LSTM and LayerNorm GRU: the math of one batch row, every unit.
 *
 * Compiled for float and double by layer_norm.h through instantiate.h (REAL, and FN(name)
 * naming cells_layer_norm_*_f / cells_layer_norm_*_d). LN(v) normalises a whole row v [m]:
 *   LN(v) = (v - mean(v))·rstd,  rstd = 1/sqrt(var(v) + 1e-5),  var the biased variance,
 * and its backward, given dy = dL/dLN(v) and v̂ = LN(v):
 *   dL/dv = rstd·(dy - mean(dy) - v̂∘mean(dy∘v̂)).
 * A step therefore reads every unit of its row: the time loop gives it whole rows (the
 * table's row_reduction). Gate blocks are haste's, of n = nOut units each.
 *
 * LayerNorm LSTM (gates i, g, f, o; xW = x·Wx, hR = hPrev·Wh, without bias):
 *   v = γx∘LN(xW) + γh∘LN(hR) + b
 *   i = σ(v_i), g = tanh(v_g), f = σ(v_f), o = σ(v_o)
 *   c = f∘cPrev + i∘g,  h = o∘tanh(γc∘LN(c) + βc)   (the carried c is not normalised)
 * P [14, n]: b [4n], γx [4n], γh [4n], γc [n], βc [n] (haste's bias, gamma[0], gamma[1],
 * gamma_h, beta_h).
 *
 * LayerNorm GRU (gates z, r, h; linear-before-reset):
 *   vx = γx∘LN(xW) + bx,  vh = γh∘LN(hR) + bh
 *   z = σ(vx_z + vh_z), r = σ(vx_r + vh_r), g = tanh(vx_h + r∘vh_h)
 *   h = z∘hPrev + (1-z)∘g
 * P [12, n]: bx [3n], bh [3n], γx [3n], γh [3n] (haste's bias, recurrent_bias, gamma[0],
 * gamma[1]).
 *
 * Both keep aux [2G] per step: hR in blocks [0, G), xW in [G, 2G) (the raw products: the
 * backward recomputes their means and rstd), and the backward leaves dL/dhR in aux's first G
 * (the table's aux_grad_block 0), for dL/dWh.
 */

/* mean and rstd of v [m]; two passes (the mean first), as exact as the dtype allows. */
CELLS_INLINE void FN(layer_norm_moments)(ptrdiff_t m, const REAL *CELLS_RESTRICT v, REAL *mean,
                                         REAL *rstd) {
    REAL sum = 0, squares = 0;
    CELLS_SIMD_SUM(sum)
    for (ptrdiff_t j = 0; j < m; ++j)
        sum += v[j];
    REAL mu = sum / (REAL)m;
    CELLS_SIMD_SUM(squares)
    for (ptrdiff_t j = 0; j < m; ++j)
        squares += (v[j] - mu) * (v[j] - mu);
    *mean = mu;
    *rstd = (REAL)(1 / sqrt((double)(squares / (REAL)m) + CELLS_LAYER_NORM_EPS));
}

/* The LayerNorm backward of v [m] (its moments mean, rstd), through the gain γ [m]:
 * dv = LN's dL/dv given dv = dL/d(γ∘LN(v)) on entry; dγ += dL/d(γ∘LN(v))∘LN(v). dv may be
 * out (both [m]; element j of out is written after element j of dv and v are read). */
CELLS_INLINE void FN(layer_norm_bp)(ptrdiff_t m, const REAL *v, REAL mean, REAL rstd,
                                    const REAL *CELLS_RESTRICT gain, const REAL *dv,
                                    REAL *CELLS_RESTRICT dgain, REAL *out) {
    REAL sum = 0, dot = 0;
    CELLS_SIMD_SUM(sum, dot)
    for (ptrdiff_t j = 0; j < m; ++j) {
        REAL vhat = (v[j] - mean) * rstd, dy = dv[j] * gain[j];
        dgain[j] += dv[j] * vhat;
        sum += dy;
        dot += dy * vhat;
    }
    REAL mean_dy = sum / (REAL)m, mean_dy_vhat = dot / (REAL)m;
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < m; ++j) {
        REAL vhat = (v[j] - mean) * rstd;
        out[j] = rstd * (dv[j] * gain[j] - mean_dy - vhat * mean_dy_vhat);
    }
}

/* aux = [hR | xW] of a row (G each); zx may be g (the loop's training buffers), so it is
 * copied before any gate is written. */
CELLS_INLINE void FN(layer_norm_keep)(ptrdiff_t G, const REAL *zx, const REAL *CELLS_RESTRICT zh,
                                      REAL *CELLS_RESTRICT aux) {
    FN(copy_units)(G, zh, aux);
    FN(copy_units)(G, zx, aux + G);
}

/* ------------------------------------------------------------------------------------------
 * LayerNorm LSTM
 * ------------------------------------------------------------------------------------------ */

CELLS_ROW FN(layer_norm_lstm_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT P,     /* [14n] b, γx, γh, γc, βc */
        const REAL *CELLS_RESTRICT cPrev,
        REAL *CELLS_RESTRICT aux,         /* [8n] in: hR, xW */
        REAL *CELLS_RESTRICT g,           /* [4n] out: i, g, f, o */
        REAL *CELLS_RESTRICT c, REAL *CELLS_RESTRICT h) {
    const ptrdiff_t G = 4 * n;
    const REAL *b = P, *gx = P + G, *gh = P + 2 * G, *gc = P + 3 * G, *bc = gc + n;
    const REAL *hR = aux, *xW = aux + G;
    REAL mx, rx, mh, rh, mc, rc;
    FN(layer_norm_moments)(G, xW, &mx, &rx);
    FN(layer_norm_moments)(G, hR, &mh, &rh);
    CELLS_SIMD
    for (ptrdiff_t k = 0; k < G; ++k) {
        REAL v = gx[k] * (xW[k] - mx) * rx + gh[k] * (hR[k] - mh) * rh + b[k];
        g[k] = k >= n && k < 2 * n ? FN(tanh)(v) : FN(sigmoid)(v);
    }
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        c[j] = g[2 * n + j] * cPrev[j] + g[j] * g[n + j];
    FN(layer_norm_moments)(n, c, &mc, &rc);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        h[j] = g[3 * n + j] * FN(tanh)(gc[j] * (c[j] - mc) * rc + bc[j]);
}

/* dh: in, dL/dh from the later steps (dLdh, or NULL, is added); out, 0 (all of dL/dhPrev goes
 * through Wh). dc: in, dL/dc; out, dL/dcPrev. g: in, the gates; out, dL/dxW. d: out, dL/dhR,
 * also left in aux's first 4n. dP accumulates dL/dP. */
CELLS_ROW FN(layer_norm_lstm_bp_row)(
        ptrdiff_t n, const REAL *CELLS_RESTRICT dLdh, REAL *CELLS_RESTRICT g,
        REAL *CELLS_RESTRICT aux, const REAL *CELLS_RESTRICT cPrev,
        const REAL *CELLS_RESTRICT c, const REAL *CELLS_RESTRICT P, REAL *CELLS_RESTRICT d,
        REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT dc, REAL *CELLS_RESTRICT dP) {
    const ptrdiff_t G = 4 * n;
    const REAL *gx = P + G, *gh = P + 2 * G, *gc = P + 3 * G, *bc = gc + n;
    REAL *db = dP, *dgx = dP + G, *dgh = dP + 2 * G, *dgc = dP + 3 * G, *dbc = dgc + n;
    REAL *hR = aux, *xW = aux + G;
    REAL mc, rc, mx, rx, mh, rh;
    FN(layer_norm_moments)(n, c, &mc, &rc);
    /* Through h = o∘tanh(γc∘LN(c) + βc): dL/do's pre-activation into d's o block, and
     * dL/d(γc∘LN(c)) into d's i block for LN(c)'s backward. */
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL dhj = dh[j] + (dLdh ? dLdh[j] : 0), o = g[3 * n + j];
        REAL tau = FN(tanh)(gc[j] * (c[j] - mc) * rc + bc[j]);
        d[3 * n + j] = dhj * tau * o * (1 - o);
        d[j] = dhj * o * (1 - tau * tau);
        dbc[j] += d[j];
        dh[j] = 0;
    }
    /* dL/dc of this step's output, added to the carried dc */
    FN(layer_norm_bp)(n, c, mc, rc, gc, d, dgc, d + n);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL i = g[j], gg = g[n + j], f = g[2 * n + j], dcj = dc[j] + d[n + j];
        d[j] = dcj * gg * i * (1 - i);
        d[n + j] = dcj * i * (1 - gg * gg);
        d[2 * n + j] = dcj * cPrev[j] * f * (1 - f);
        dc[j] = dcj * f;
    }
    /* d = dL/dv: db, then both LayerNorms' backward (g, read no more, takes dL/dxW) */
    FN(add_units)(G, d, db);
    FN(layer_norm_moments)(G, xW, &mx, &rx);
    FN(layer_norm_moments)(G, hR, &mh, &rh);
    FN(layer_norm_bp)(G, xW, mx, rx, gx, d, dgx, g);
    FN(layer_norm_bp)(G, hR, mh, rh, gh, d, dgh, hR);
    FN(copy_units)(G, hR, d);
}

/* The time loop's steps (cells/step.h), on whole rows (n = nOut). */
CELLS_FORWARD_STEP(layer_norm_lstm_forward) {
    (void)o, (void)nOut, (void)hPrev;
    FN(layer_norm_keep)(4 * n, zx, zh, aux);
    FN(layer_norm_lstm_row)(n, P, cPrev, aux, g, cNext, hNext);
}

CELLS_BACKWARD_STEP(layer_norm_lstm_backward) {
    (void)o, (void)nOut, (void)dLdg, (void)daux, (void)hPrev;
    FN(layer_norm_lstm_bp_row)(n, dLdh, g, aux, cPrev, c, P, d, dh, dc, dP);
}

/* ------------------------------------------------------------------------------------------
 * LayerNorm GRU
 * ------------------------------------------------------------------------------------------ */

CELLS_ROW FN(layer_norm_gru_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT P,     /* [12n] bx, bh, γx, γh */
        const REAL *CELLS_RESTRICT hPrev,
        const REAL *CELLS_RESTRICT aux,   /* [6n] hR, xW */
        REAL *CELLS_RESTRICT g,           /* [3n] out: z, r, g */
        REAL *CELLS_RESTRICT h) {
    const ptrdiff_t G = 3 * n;
    const REAL *bx = P, *bh = P + G, *gx = P + 2 * G, *gh = P + 3 * G;
    const REAL *hR = aux, *xW = aux + G;
    REAL mx, rx, mh, rh;
    FN(layer_norm_moments)(G, xW, &mx, &rx);
    FN(layer_norm_moments)(G, hR, &mh, &rh);
    CELLS_SIMD
    for (ptrdiff_t k = 0; k < 2 * n; ++k)
        g[k] = FN(sigmoid)(gx[k] * (xW[k] - mx) * rx + bx[k]
                           + gh[k] * (hR[k] - mh) * rh + bh[k]);
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        ptrdiff_t k = 2 * n + j;
        REAL vh = gh[k] * (hR[k] - mh) * rh + bh[k];
        g[k] = FN(tanh)(gx[k] * (xW[k] - mx) * rx + bx[k] + g[n + j] * vh);
        h[j] = g[j] * hPrev[j] + (1 - g[j]) * g[k];
    }
}

/* dh: in, dL/dh from the later steps (dLdh, or NULL, is added); out, z∘dL/dh, the part of
 * dL/dhPrev that does not go through Wh. g: in, the gates; out, dL/dxW. d: out, dL/dhR, also
 * left in aux's first 3n. dP accumulates dL/dP. */
CELLS_ROW FN(layer_norm_gru_bp_row)(
        ptrdiff_t n, const REAL *CELLS_RESTRICT dLdh, REAL *CELLS_RESTRICT g,
        REAL *CELLS_RESTRICT aux, const REAL *CELLS_RESTRICT hPrev,
        const REAL *CELLS_RESTRICT P, REAL *CELLS_RESTRICT d, REAL *CELLS_RESTRICT dh,
        REAL *CELLS_RESTRICT dP) {
    const ptrdiff_t G = 3 * n;
    const REAL *bh = P + G, *gx = P + 2 * G, *gh = P + 3 * G;
    REAL *dbx = dP, *dbh = dP + G, *dgx = dP + 2 * G, *dgh = dP + 3 * G;
    REAL *hR = aux, *xW = aux + G;
    REAL mx, rx, mh, rh;
    FN(layer_norm_moments)(G, xW, &mx, &rx);
    FN(layer_norm_moments)(G, hR, &mh, &rh);
    /* d = dL/dvh; g's blocks take dL/dvx (z and r: the same as dL/dvh's) */
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL dhj = dh[j] + (dLdh ? dLdh[j] : 0), z = g[j], r = g[n + j], gg = g[2 * n + j];
        REAL vh = gh[2 * n + j] * (hR[2 * n + j] - mh) * rh + bh[2 * n + j];
        REAL dvg = dhj * (1 - z) * (1 - gg * gg);
        d[j] = dhj * (hPrev[j] - gg) * z * (1 - z);
        d[n + j] = dvg * vh * r * (1 - r);
        d[2 * n + j] = dvg * r;
        g[j] = d[j];
        g[n + j] = d[n + j];
        g[2 * n + j] = dvg;
        dh[j] = dhj * z;
    }
    FN(add_units)(G, g, dbx);
    FN(add_units)(G, d, dbh);
    FN(layer_norm_bp)(G, xW, mx, rx, gx, g, dgx, g);
    FN(layer_norm_bp)(G, hR, mh, rh, gh, d, dgh, hR);
    FN(copy_units)(G, hR, d);
}

CELLS_FORWARD_STEP(layer_norm_gru_forward) {
    (void)o, (void)nOut, (void)cPrev, (void)cNext;
    FN(layer_norm_keep)(3 * n, zx, zh, aux);
    FN(layer_norm_gru_row)(n, P, hPrev, aux, g, hNext);
}

CELLS_BACKWARD_STEP(layer_norm_gru_backward) {
    (void)o, (void)nOut, (void)dLdg, (void)daux, (void)cPrev, (void)c, (void)dc;
    FN(layer_norm_gru_bp_row)(n, dLdh, g, aux, hPrev, P, d, dh, dP);
}
