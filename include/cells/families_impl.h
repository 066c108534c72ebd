/* The dispatch from a family to its steps, for float (cells_*_step_f) and double
 * (cells_*_step_d); see families.h. `second_phase`: the step after the barrier, for families
 * with blocks that multiply aux (h_blocks < gates). */

CELLS_FN void FN(forward_step)(int family, int second_phase, const cells_step_options *o,
                               ptrdiff_t n, ptrdiff_t nOut, const REAL *zx, REAL *zh,
                               const REAL *hPrev, const REAL *cPrev, const REAL *P, REAL *g,
                               REAL *aux, REAL *hNext, REAL *cNext) {
    switch (family) {
    case CELLS_GRU_RESET_BEFORE:
        if (second_phase)
            FN(gru_rb_forward_b)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        else
            FN(gru_rb_forward)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        break;
    case CELLS_GRU_LINEAR_BEFORE_RESET:
        FN(gru_lbr_forward)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        break;
    case CELLS_LSTM:
        FN(lstm_forward)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        break;
    case CELLS_LLTM:
        FN(lltm_forward)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        break;
    case CELLS_RNN:
        FN(rnn_forward)(o, n, nOut, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext);
        break;
    }
}

CELLS_FN void FN(backward_step)(int family, int second_phase, const cells_step_options *o,
                                ptrdiff_t n, ptrdiff_t nOut, const REAL *dLdh,
                                const REAL *dLdg, REAL *g, REAL *aux, const REAL *daux,
                                const REAL *hPrev, const REAL *cPrev, const REAL *c,
                                const REAL *P, REAL *d, REAL *dh, REAL *dc, REAL *dP) {
    switch (family) {
    case CELLS_GRU_RESET_BEFORE:
        if (second_phase)
            FN(gru_rb_backward_b)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d,
                                  dh, dc, dP);
        else
            FN(gru_rb_backward)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d,
                                dh, dc, dP);
        break;
    case CELLS_GRU_LINEAR_BEFORE_RESET:
        FN(gru_lbr_backward)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh,
                             dc, dP);
        break;
    case CELLS_LSTM:
        FN(lstm_backward)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc,
                          dP);
        break;
    case CELLS_LLTM:
        FN(lltm_backward)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc,
                          dP);
        break;
    case CELLS_RNN:
        FN(rnn_backward)(o, n, nOut, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc,
                         dP);
        break;
    }
}
