/* LLTM point functions: the math of one (batch row, unit) element.
 *
 * Compiled for float and double by lltm.h through instantiate.h (REAL, and FN(name) naming
 * cells_lltm_*_f / cells_lltm_*_d). The LLTM of PyTorch's C++-extension tutorial: on
 * X = [hPrev, x] (h first) with W [3S, S+nIn] and b [3S] (PyTorch's Linear layout), the
 * pre-activations z = X·Wᵀ + b in gate blocks (input, output, candidate), and
 *   i = σ(z0),  o = σ(z1),  n = elu(z2) (α = 1),  c = cPrev + n∘i,  h = tanh(c)∘o.
 */

/* One step forward. */
CELLS_INLINE void FN(lltm_step)(REAL z0, REAL z1, REAL z2, REAL cPrev,
                                REAL *i, REAL *o, REAL *n, REAL *c, REAL *h) {
    *i = FN(sigmoid)(z0);
    *o = FN(sigmoid)(z1);
    *n = FN(elu)(z2);
    *c = cPrev + *n * *i;
    *h = FN(tanh)(*c) * *o;
}

/* One step backward, given g = dL/dh and dc = dL/dc (the gradients reaching h and c from
 * outside the step), the step's gates i, o, n and its new cell state c:
 *   dĉ = g∘o∘(1 - tanh²c) + dc                  (the total dL/dc)
 *   dz0 = dĉ∘n∘i(1-i),  dz1 = g∘tanh(c)∘o(1-o),  dz2 = dĉ∘i∘elu'(z2),
 * and dL/dcPrev = dĉ (c = cPrev + n∘i). elu'(z2) is taken from n = elu(z2): see common.h. */
CELLS_INLINE void FN(lltm_bp_step)(REAL g, REAL dc, REAL i, REAL o, REAL n, REAL c,
                                   REAL *dz0, REAL *dz1, REAL *dz2, REAL *dcPrev) {
    REAL tc = FN(tanh)(c);
    REAL dct = g * o * (1 - tc * tc) + dc;
    *dz0 = dct * n * i * (1 - i);
    *dz1 = g * tc * o * (1 - o);
    *dz2 = dct * i * FN(elu_grad)(n);
    *dcPrev = dct;
}

/* Row loops: one batch row, n units, for the steps at the end of this file. Each gate block is
 * its own pointer, already offset to the first unit; no two overlap, so the loops vectorise.
 * Pointers marked "or NULL" mean a zero gradient. */

/* z: in, the recurrent part hPrev·W_hᵀ; out, the whole pre-activation z = zx + hPrev·W_hᵀ. */
CELLS_ROW FN(lltm_row)(
        ptrdiff_t n,
        const REAL *zx0, const REAL *zx1,
        const REAL *zx2,                 /* x·W_xᵀ + b */
        REAL *CELLS_RESTRICT z0, REAL *CELLS_RESTRICT z1, REAL *CELLS_RESTRICT z2,
        const REAL *CELLS_RESTRICT cPrev,
        REAL *i, REAL *o, REAL *cand,    /* may be zx0, zx1, zx2 (element j is read before it
                                            is written: not restrict) */
        REAL *CELLS_RESTRICT c, REAL *CELLS_RESTRICT h) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        z0[j] += zx0[j];
        z1[j] += zx1[j];
        z2[j] += zx2[j];
        FN(lltm_step)(z0[j], z1[j], z2[j], cPrev[j], &i[j], &o[j], &cand[j], &c[j], &h[j]);
    }
}

/* dh: in, dL/dh carried from the later steps (to which dLdh, the gradient arriving at this
 * step's output, is added); out, 0, so that the recurrent product dz·W_h then accumulates
 * dL/dhPrev into it. dc: in, dL/dc from the later steps; out, dL/dcPrev. */
CELLS_ROW FN(lltm_bp_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT dLdh,  /* or NULL */
        REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT dc,
        const REAL *CELLS_RESTRICT i, const REAL *CELLS_RESTRICT o,
        const REAL *CELLS_RESTRICT cand, const REAL *CELLS_RESTRICT c,
        REAL *CELLS_RESTRICT dz0, REAL *CELLS_RESTRICT dz1, REAL *CELLS_RESTRICT dz2) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        FN(lltm_bp_step)(dh[j] + (dLdh ? dLdh[j] : 0), dc[j], i[j], o[j], cand[j], c[j],
                         &dz0[j], &dz1[j], &dz2[j], &dc[j]);
        dh[j] = 0;
    }
}

/* The time loop's steps (cells/step.h): gates (input, output, candidate) and the cell state. */
CELLS_FORWARD_STEP(lltm_forward) {
    (void)o, (void)hPrev, (void)P, (void)aux;
    FN(lltm_row)(n, zx, zx + nOut, zx + 2 * nOut, zh, zh + nOut, zh + 2 * nOut, cPrev, g,
                 g + nOut, g + 2 * nOut, cNext, hNext);
}

CELLS_BACKWARD_STEP(lltm_backward) {
    (void)o, (void)dLdg, (void)aux, (void)daux, (void)hPrev, (void)cPrev, (void)P, (void)dP;
    FN(lltm_bp_row)(n, dLdh, dh, dc, g, g + nOut, g + 2 * nOut, c, d, d + nOut, d + 2 * nOut);
    for (int k = 0; k < 3; ++k)
        FN(copy_units)(n, d + k * nOut, g + k * nOut);
}
