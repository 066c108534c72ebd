/* GRU point functions: the math of one (batch row, hidden unit) element.
 *
 * Included twice by gru.h, with REAL = float / double and FN(name) naming the two versions
 * (cells_gru_*_f / cells_gru_*_d). Gate blocks are (r, u, c) = reset, update, candidate.
 * Pre-activations already hold every bias that is a plain sum:
 *   zr = x·Wx_r + bx_r + hPrev·Wh_r + bh_r,   zu likewise,
 * and the two variants differ only in where the recurrent candidate term enters:
 *   reset-before (linear_before_reset=False): c = tanh(x·Wx_c + bx_c + bh_c + (r∘hPrev)·Wh_c)
 *   linear-before-reset (True):               c = tanh(x·Wx_c + bx_c + r∘(hPrev·Wh_c + bh_c))
 *   h = (1-u)∘c + u∘hPrev
 */

/* h = (1-u)∘c + u∘hPrev */
CELLS_FN REAL FN(gru_state)(REAL u, REAL c, REAL hPrev) { return c + u * (hPrev - c); }

/* Reset-before, first half of a step: the gates r, u and the reset state r∘hPrev that enters
 * the candidate's recurrent product. */
CELLS_FN void FN(gru_rb_gates)(REAL zr, REAL zu, REAL hPrev, REAL *r, REAL *u, REAL *rh) {
    *r = SIGMOID(zr);
    *u = SIGMOID(zu);
    *rh = *r * hPrev;
}

/* Reset-before, second half: zc = x·Wx_c + bx_c + bh_c + (r∘hPrev)·Wh_c. */
CELLS_FN void FN(gru_rb_state)(REAL zc, REAL u, REAL hPrev, REAL *c, REAL *h) {
    *c = TANH(zc);
    *h = FN(gru_state)(u, *c, hPrev);
}

/* Linear-before-reset, a whole step: xc = x·Wx_c + bx_c, hc = hPrev·Wh_c + bh_c. */
CELLS_FN void FN(gru_lbr_step)(REAL zr, REAL zu, REAL xc, REAL hc, REAL hPrev,
                               REAL *r, REAL *u, REAL *c, REAL *h) {
    *r = SIGMOID(zr);
    *u = SIGMOID(zu);
    *c = TANH(xc + *r * hc);
    *h = FN(gru_state)(*u, *c, hPrev);
}

/* Backward of h = (1-u)∘c + u∘hPrev through c = tanh(zc) and u = σ(zu), given g = dL/dh and
 * the gradients dLdu, dLdc that reach u and c directly (0 unless the gates are outputs too):
 *   dzc = (g∘(1-u) + dLdc)∘(1-c²),  dzu = (g∘(hPrev-c) + dLdu)∘u∘(1-u),
 * and the direct part of dL/dhPrev, g∘u. */
CELLS_FN void FN(gru_bp_state)(REAL g, REAL dLdu, REAL dLdc, REAL u, REAL c, REAL hPrev,
                               REAL *dzu, REAL *dzc, REAL *dhPrev) {
    *dzc = (g * (1 - u) + dLdc) * (1 - c * c);
    *dzu = (g * (hPrev - c) + dLdu) * u * (1 - u);
    *dhPrev = g * u;
}

/* Reset-before: given a = dL/d(r∘hPrev) = dzc·Wh_cᵀ and dLdr reaching r directly,
 *   dzr = (a∘hPrev + dLdr)∘r∘(1-r),  and a∘r is added to dL/dhPrev. */
CELLS_FN void FN(gru_rb_bp_reset)(REAL a, REAL dLdr, REAL r, REAL hPrev,
                                  REAL *dzr, REAL *dhPrev) {
    *dzr = (a * hPrev + dLdr) * r * (1 - r);
    *dhPrev += a * r;
}

/* Linear-before-reset: c = tanh(xc + r∘hc), so
 *   dL/dhc = dzc∘r,  dzr = (dzc∘hc + dLdr)∘r∘(1-r). */
CELLS_FN void FN(gru_lbr_bp_reset)(REAL dzc, REAL dLdr, REAL r, REAL hc, REAL *dzr, REAL *dhc) {
    *dhc = dzc * r;
    *dzr = (dzc * hc + dLdr) * r * (1 - r);
}
