/* GRU point functions: the math of one (batch row, hidden unit) element.
 *
 * Compiled for float and double by gru.h through instantiate.h (REAL, and FN(name) naming
 * cells_gru_*_f / cells_gru_*_d). Gate blocks are (r, u, c) = reset, update, candidate.
 * Pre-activations already hold every bias that is a plain sum:
 *   zr = x·Wx_r + bx_r + hPrev·Wh_r + bh_r,   zu likewise,
 * and the two variants differ only in where the recurrent candidate term enters:
 *   reset-before (linear_before_reset=False): c = tanh(x·Wx_c + bx_c + bh_c + (r∘hPrev)·Wh_c)
 *   linear-before-reset (True):               c = tanh(x·Wx_c + bx_c + r∘(hPrev·Wh_c + bh_c))
 *   h = (1-u)∘c + u∘hPrev
 */

/* h = (1-u)∘c + u∘hPrev */
CELLS_INLINE REAL FN(gru_state)(REAL u, REAL c, REAL hPrev) { return c + u * (hPrev - c); }

/* Reset-before, first half of a step: the gates r, u and the reset state r∘hPrev that enters
 * the candidate's recurrent product. */
CELLS_INLINE void FN(gru_rb_gates)(REAL zr, REAL zu, REAL hPrev, REAL *r, REAL *u, REAL *rh) {
    *r = FN(sigmoid)(zr);
    *u = FN(sigmoid)(zu);
    *rh = *r * hPrev;
}

/* Reset-before, second half: zc = x·Wx_c + bx_c + bh_c + (r∘hPrev)·Wh_c. */
CELLS_INLINE void FN(gru_rb_state)(REAL zc, REAL u, REAL hPrev, REAL *c, REAL *h) {
    *c = FN(tanh)(zc);
    *h = FN(gru_state)(u, *c, hPrev);
}

/* Linear-before-reset, a whole step: xc = x·Wx_c + bx_c, hc = hPrev·Wh_c + bh_c. */
CELLS_INLINE void FN(gru_lbr_step)(REAL zr, REAL zu, REAL xc, REAL hc, REAL hPrev,
                                   REAL *r, REAL *u, REAL *c, REAL *h) {
    *r = FN(sigmoid)(zr);
    *u = FN(sigmoid)(zu);
    *c = FN(tanh)(xc + *r * hc);
    *h = FN(gru_state)(*u, *c, hPrev);
}

/* Backward of h = (1-u)∘c + u∘hPrev through c = tanh(zc) and u = σ(zu), given g = dL/dh and
 * the gradients dLdu, dLdc that reach u and c directly (0 unless the gates are outputs too):
 *   dzc = (g∘(1-u) + dLdc)∘(1-c²),  dzu = (g∘(hPrev-c) + dLdu)∘u∘(1-u),
 * and the direct part of dL/dhPrev, g∘u. */
CELLS_INLINE void FN(gru_bp_state)(REAL g, REAL dLdu, REAL dLdc, REAL u, REAL c, REAL hPrev,
                                   REAL *dzu, REAL *dzc, REAL *dhPrev) {
    *dzc = (g * (1 - u) + dLdc) * (1 - c * c);
    *dzu = (g * (hPrev - c) + dLdu) * u * (1 - u);
    *dhPrev = g * u;
}

/* Reset-before: given a = dL/d(r∘hPrev) = dzc·Wh_cᵀ and dLdr reaching r directly,
 *   dzr = (a∘hPrev + dLdr)∘r∘(1-r),  and a∘r is added to dL/dhPrev. */
CELLS_INLINE void FN(gru_rb_bp_reset)(REAL a, REAL dLdr, REAL r, REAL hPrev,
                                      REAL *dzr, REAL *dhPrev) {
    *dzr = (a * hPrev + dLdr) * r * (1 - r);
    *dhPrev += a * r;
}

/* Linear-before-reset: c = tanh(xc + r∘hc), so
 *   dL/dhc = dzc∘r,  dzr = (dzc∘hc + dLdr)∘r∘(1-r). */
CELLS_INLINE void FN(gru_lbr_bp_reset)(REAL dzc, REAL dLdr, REAL r, REAL hc, REAL *dzr, REAL *dhc) {
    *dhc = dzc * r;
    *dzr = (dzc * hc + dLdr) * r * (1 - r);
}

/* Row loops: one batch row, n units, for the steps at the end of this file. Each gate block is
 * its own pointer, already offset to the first unit. Pointers marked "or NULL" mean a zero
 * gradient. No two pointers overlap (restrict), except that a gate may be written over its own
 * pre-activation (r over xr, ...: element j is read before it is written, in every iteration
 * alone); those pointers are not restrict, and `omp simd` vectorises the loops all the same. */

CELLS_ROW FN(gru_lbr_row)(
        ptrdiff_t n,
        const REAL *xr, const REAL *xu,
        const REAL *xc,                  /* x·Wx + bx (+ bh_r, bh_u) */
        const REAL *CELLS_RESTRICT hr, const REAL *CELLS_RESTRICT hu,
        const REAL *CELLS_RESTRICT hh,   /* hPrev·Wh */
        const REAL *CELLS_RESTRICT bhc, const REAL *CELLS_RESTRICT hPrev,
        REAL *r, REAL *u, REAL *c,       /* may be xr, xu, xc */
        REAL *CELLS_RESTRICT hc, REAL *CELLS_RESTRICT h) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        hc[j] = hh[j] + bhc[j];
        FN(gru_lbr_step)(xr[j] + hr[j], xu[j] + hu[j], xc[j], hc[j], hPrev[j],
                         &r[j], &u[j], &c[j], &h[j]);
    }
}

CELLS_ROW FN(gru_rb_gates_row)(
        ptrdiff_t n,
        const REAL *xr, const REAL *xu,
        const REAL *CELLS_RESTRICT hr, const REAL *CELLS_RESTRICT hu,
        const REAL *CELLS_RESTRICT hPrev,
        REAL *r, REAL *u,                /* may be xr, xu */
        REAL *CELLS_RESTRICT rh) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        FN(gru_rb_gates)(xr[j] + hr[j], xu[j] + hu[j], hPrev[j], &r[j], &u[j], &rh[j]);
}

CELLS_ROW FN(gru_rb_state_row)(
        ptrdiff_t n,
        const REAL *xc,                  /* x·Wx_c + b */
        const REAL *CELLS_RESTRICT hh,   /* (r∘hPrev)·Wh_c */
        const REAL *CELLS_RESTRICT u, const REAL *CELLS_RESTRICT hPrev,
        REAL *c,                         /* may be xc */
        REAL *CELLS_RESTRICT h) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        FN(gru_rb_state)(xc[j] + hh[j], u[j], hPrev[j], &c[j], &h[j]);
}

/* dh: in, dL/dh from the later steps; out, the direct part g∘u of dL/dhPrev. */
CELLS_ROW FN(gru_bp_state_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT dLdh,                                /* or NULL */
        const REAL *CELLS_RESTRICT dLdu, const REAL *CELLS_RESTRICT dLdc, /* or NULL */
        const REAL *CELLS_RESTRICT u, const REAL *CELLS_RESTRICT c,
        const REAL *CELLS_RESTRICT hPrev,
        REAL *CELLS_RESTRICT dzu, REAL *CELLS_RESTRICT dzc, REAL *CELLS_RESTRICT dh) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        FN(gru_bp_state)(dh[j] + (dLdh ? dLdh[j] : 0), dLdu ? dLdu[j] : 0, dLdc ? dLdc[j] : 0,
                         u[j], c[j], hPrev[j], &dzu[j], &dzc[j], &dh[j]);
}

/* Reset-before: a = dL/d(r∘hPrev); also keeps rh = r∘hPrev for dL/dWh_c. */
CELLS_ROW FN(gru_rb_bp_reset_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT a, const REAL *CELLS_RESTRICT dLdr, /* dLdr or NULL */
        const REAL *CELLS_RESTRICT r, const REAL *CELLS_RESTRICT hPrev,
        REAL *CELLS_RESTRICT dzr, REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT rh) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        FN(gru_rb_bp_reset)(a[j], dLdr ? dLdr[j] : 0, r[j], hPrev[j], &dzr[j], &dh[j]);
        rh[j] = r[j] * hPrev[j];
    }
}

CELLS_ROW FN(gru_lbr_bp_reset_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT dzc, const REAL *CELLS_RESTRICT dLdr, /* dLdr or NULL */
        const REAL *CELLS_RESTRICT r, const REAL *CELLS_RESTRICT hc,
        REAL *CELLS_RESTRICT dzr, REAL *CELLS_RESTRICT dhc) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j)
        FN(gru_lbr_bp_reset)(dzc[j], dLdr ? dLdr[j] : 0, r[j], hc[j], &dzr[j], &dhc[j]);
}

/* The time loop's steps (cells/step.h): gates (r, u, c), and aux [nOut] per row and step. */

/* Linear-before-reset: aux = hc = hPrev·Wh_c + bh_c, kept (the backward reads it); P = bh_c.
 * The recurrent-side gradient d is [dzr | dzu | dL/dhc], dL/dhc = dzc∘r: aux keeps dL/dhc for
 * dL/dWh_c, and dP accumulates it (dL/dbh_c). */
CELLS_FORWARD_STEP(gru_lbr_forward) {
    (void)o, (void)cPrev, (void)cNext;
    FN(gru_lbr_row)(n, zx, zx + nOut, zx + 2 * nOut, zh, zh + nOut, zh + 2 * nOut, P, hPrev,
                    g, g + nOut, g + 2 * nOut, aux, hNext);
}

CELLS_BACKWARD_STEP(gru_lbr_backward) {
    (void)o, (void)daux, (void)cPrev, (void)c, (void)dc;
    FN(gru_bp_state_row)(n, dLdh, CELLS_AT(dLdg, nOut), CELLS_AT(dLdg, 2 * nOut), g + nOut,
                         g + 2 * nOut, hPrev, d + nOut, d + 2 * nOut, dh);
    FN(copy_units)(n, d + 2 * nOut, g + 2 * nOut);    /* dzc: c is read no more */
    FN(gru_lbr_bp_reset_row)(n, g + 2 * nOut, dLdg, g, aux, d, d + 2 * nOut);
    FN(copy_units)(n, d, g);                          /* dzr */
    FN(copy_units)(n, d + nOut, g + nOut);            /* dzu */
    FN(copy_units)(n, d + 2 * nOut, aux);             /* dL/dhc */
    FN(add_units)(n, d + 2 * nOut, dP);
}

/* Reset-before: aux = r∘hPrev, the input of the candidate's recurrent product, which the time
 * loop multiplies in a second phase; the backward recomputes and keeps it for dL/dWh_c. */
CELLS_FORWARD_STEP(gru_rb_forward) {
    (void)o, (void)cPrev, (void)P, (void)hNext, (void)cNext;
    FN(gru_rb_gates_row)(n, zx, zx + nOut, zh, zh + nOut, hPrev, g, g + nOut, aux);
}

/* The second phase: zh + 2nOut holds (r∘hPrev)·Wh_c. */
CELLS_FORWARD_STEP(gru_rb_forward_b) {
    (void)o, (void)zh, (void)cPrev, (void)P, (void)aux, (void)cNext;
    FN(gru_rb_state_row)(n, zx + 2 * nOut, zh + 2 * nOut, g + nOut, hPrev, g + 2 * nOut,
                         hNext);
}

CELLS_BACKWARD_STEP(gru_rb_backward) {
    (void)o, (void)aux, (void)daux, (void)cPrev, (void)c, (void)P, (void)dc, (void)dP;
    FN(gru_bp_state_row)(n, dLdh, CELLS_AT(dLdg, nOut), CELLS_AT(dLdg, 2 * nOut), g + nOut,
                         g + 2 * nOut, hPrev, d + nOut, d + 2 * nOut, dh);
}

/* The second phase: daux = dL/d(r∘hPrev) = dzc·Wh_cᵀ. */
CELLS_BACKWARD_STEP(gru_rb_backward_b) {
    (void)o, (void)dLdh, (void)cPrev, (void)c, (void)P, (void)dc, (void)dP;
    FN(gru_rb_bp_reset_row)(n, daux, dLdg, g, hPrev, d, dh, aux);
    for (int k = 0; k < 3; ++k)
        FN(copy_units)(n, d + k * nOut, g + k * nOut);
}
