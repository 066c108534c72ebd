/* IndRNN: an elementwise recurrence, with no recurrent product (the table's
 * recurrent_product 0: no Wh).
 *
 * Compiled for float and double by indrnn.h through instantiate.h (REAL, and FN(name) naming
 * cells_indrnn_*_f / cells_indrnn_*_d):
 *   h = tanh(x·Wx + b + u∘hPrev),   u = P [nOut] (haste's recurrent_scale).
 */

/* g = h = tanh(zx + u∘hPrev); g is the step's kept activation (the time loop's gates). */
CELLS_ROW FN(indrnn_row)(
        ptrdiff_t n,
        const REAL *zx,                   /* x·Wx + b */
        const REAL *CELLS_RESTRICT u, const REAL *CELLS_RESTRICT hPrev,
        REAL *g,                          /* may be zx (element j is read before it is written) */
        REAL *CELLS_RESTRICT h) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL a = FN(tanh)(zx[j] + u[j] * hPrev[j]);
        g[j] = a;
        h[j] = a;
    }
}

/* dz = (dh + dLdh)∘(1 - h²) into g (which holds h); dh: in, dL/dh from the later steps; out,
 * dL/dhPrev = dz∘u (all of it: there is no product). du accumulates dz∘hPrev. */
CELLS_ROW FN(indrnn_bp_row)(
        ptrdiff_t n,
        const REAL *CELLS_RESTRICT dLdh,  /* or NULL */
        const REAL *CELLS_RESTRICT u, const REAL *CELLS_RESTRICT hPrev,
        REAL *CELLS_RESTRICT g, REAL *CELLS_RESTRICT dh, REAL *CELLS_RESTRICT du) {
    CELLS_SIMD
    for (ptrdiff_t j = 0; j < n; ++j) {
        REAL dz = (dh[j] + (dLdh ? dLdh[j] : 0)) * (1 - g[j] * g[j]);
        g[j] = dz;
        dh[j] = dz * u[j];
        du[j] += dz * hPrev[j];
    }
}

/* The time loop's steps (cells/step.h): one gate block; zh and d are not used (no product). */
CELLS_FORWARD_STEP(indrnn_forward) {
    (void)o, (void)nOut, (void)zh, (void)cPrev, (void)aux, (void)cNext;
    FN(indrnn_row)(n, zx, P, hPrev, g, hNext);
}

CELLS_BACKWARD_STEP(indrnn_backward) {
    (void)o, (void)nOut, (void)dLdg, (void)aux, (void)daux, (void)cPrev, (void)c, (void)d,
        (void)dc;
    FN(indrnn_bp_row)(n, dLdh, P, hPrev, g, dh, dP);
}
