/* The kernels of kernels.cuh for one dtype (REAL, CELLS_SUFFIX): included twice by it. */

#define CELLS_STEP(name) CELLS_CAT(CELLS_CAT(cells_, name), CELLS_SUFFIX)
#define CELLS_KNAME(name) \
    CELLS_CAT(CELLS_CAT(CELLS_CAT(cells_kernel_, CELLS_KERNELS), name), CELLS_SUFFIX)

#define CELLS_FORWARD_PARAMS                                                                 \
    long long bS, long long nOut, long long sL, long long t, int forward, int keep,          \
        const long long *seq_len, CELLS_OPTION_PARAMS, const REAL *gx, const REAL *gh_h,     \
        const REAL *gh_x, const REAL *hcur, const REAL *ccur, const REAL *P, REAL *gates,    \
        REAL *aux, REAL *hnxt, REAL *cnxt, REAL *h, REAL *c
#define CELLS_FORWARD_ARGS                                                                   \
    bS, nOut, sL, t, forward, keep, seq_len, clip, activation, gate_code, gate_alpha,        \
        gate_beta, cell_code, cell_alpha, cell_beta, out_code, out_alpha, out_beta, gx, gh_h, \
        gh_x, hcur, ccur, P, gates, aux, hnxt, cnxt, h, c
#define CELLS_BACKWARD_PARAMS                                                                \
    long long bS, long long nOut, long long sL, long long t, int forward,                    \
        const long long *seq_len, CELLS_OPTION_PARAMS, const REAL *dLdh,                     \
        const REAL *dLdgates, REAL *gates, REAL *aux, const REAL *daux, const REAL *hI,      \
        const REAL *h, const REAL *cI, const REAL *c, const REAL *P, REAL *dh,               \
        const REAL *dhr, REAL *dc, REAL *d_h, REAL *d_x
#define CELLS_BACKWARD_ARGS                                                                  \
    bS, nOut, sL, t, forward, seq_len, clip, activation, gate_code, gate_alpha, gate_beta,   \
        cell_code, cell_alpha, cell_beta, out_code, out_alpha, out_beta, dLdh, dLdgates,     \
        gates, aux, daux, hI, h, cI, c, P, dh, dhr, dc, d_h, d_x

/* Phase `phase` of forward loop step t, for the thread's element (row, j). Its values of gate
 * block k: gx, gates [.., G] at k·nOut + j; gh_h [bS, h_blocks·nOut] and gh_x
 * [bS, (gates - h_blocks)·nOut] hold the recurrent products of the blocks that multiply hPrev
 * and aux. gates and aux are every step's with keep (aux when the family keeps it), else one
 * step's scratch [bS, ...]. The last phase writes the state and the outputs. */
static __device__ __forceinline__ void CELLS_KNAME(_forward_phase)(int phase,
                                                                   CELLS_FORWARD_PARAMS) {
    long long row, j;
    if (!cells_element(bS, nOut, &row, &j))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, e = row * nOut + j;
    const long long length = cells_row_len(seq_len, row, sL);
    const int last = phase == CELLS_PHASES - 1;
    if (t >= length) {
        /* Past the row's end: its state is frozen, and time index t is padding. */
        if (!last)
            return;
        const long long slot = t * bS + row;
        hnxt[e] = hcur[e];
        h[slot * nOut + j] = 0;
#if CELLS_CELL_STATE
        cnxt[e] = ccur[e];
#endif
        if (keep) {
            for (int k = 0; k < CELLS_GATES; ++k)
                gates[slot * G + k * nOut + j] = 0;
#if CELLS_CELL_STATE
            c[slot * nOut + j] = 0;
#endif
#if CELLS_AUX_KEPT
            aux[slot * nOut + j] = 0;
#endif
        }
        return;
    }
    const long long tau = forward ? t : length - 1 - t, slot = tau * bS + row;
    const long long gslot = keep ? slot : row;
    REAL zx[CELLS_GATES], zh[CELLS_GATES], g[CELLS_GATES], p[CELLS_PARAM_BLOCKS + 1];
    REAL a = 0, hPrev = hcur[e], hNext = 0, cPrev = 0, cNext = 0;
    for (int k = 0; k < CELLS_GATES; ++k) {
        zx[k] = gx[slot * G + k * nOut + j];
        g[k] = gates[gslot * G + k * nOut + j];
        zh[k] = k < CELLS_H_BLOCKS ? gh_h[row * NH + k * nOut + j]
                                   : gh_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j];
    }
    for (int k = 0; k < CELLS_PARAM_BLOCKS; ++k)
        p[k] = P ? P[k * nOut + j] : 0;
#if CELLS_AUX
    REAL *aux_at = aux + (keep && CELLS_AUX_KEPT ? slot : row) * nOut + j;
    a = *aux_at;
#endif
#if CELLS_CELL_STATE
    cPrev = ccur[e];
#endif
    const cells_step_options o = CELLS_OPTIONS;
#if CELLS_PHASES == 2
    if (phase == 1)
        CELLS_STEP(CELLS_KERNEL_FORWARD_B)(&o, 1, 1, zx, zh, &hPrev,
                                         CELLS_CELL_STATE ? &cPrev : 0, P ? p : 0, g, &a,
                                         &hNext, &cNext);
    else
#endif
        CELLS_STEP(CELLS_KERNEL_FORWARD)(&o, 1, 1, zx, zh, &hPrev,
                                       CELLS_CELL_STATE ? &cPrev : 0, P ? p : 0, g, &a, &hNext,
                                       &cNext);
    for (int k = 0; k < CELLS_GATES; ++k)
        gates[gslot * G + k * nOut + j] = g[k];
#if CELLS_AUX
    *aux_at = a;
#endif
    if (!last)
        return;
    hnxt[e] = hNext;
    h[slot * nOut + j] = hNext;
#if CELLS_CELL_STATE
    cnxt[e] = cNext;
    if (keep)
        c[slot * nOut + j] = cNext;
#endif
}

/* Phase `phase` of backward loop step t, for the thread's element (row, j): gates (every
 * step's, overwritten with dL/dz) and aux [sL, bS, nOut] as the CPU loop's; dLdh [sL, bS, nOut]
 * and dLdgates [sL, bS, G] or NULL; daux [bS, nOut] the second phase's d_x·op(Wh_x)ᵀ. dh
 * [bS, nOut] is the carried dL/dh without its recurrent product dhr = d_h·op(Wh_h)ᵀ of the
 * later step (the first phase adds it), dc the carried dL/dc; d_h [bS, h_blocks·nOut] and d_x
 * [bS, (gates - h_blocks)·nOut] receive the recurrent-side gradient d of the step. */
static __device__ __forceinline__ void CELLS_KNAME(_backward_phase)(int phase,
                                                                    CELLS_BACKWARD_PARAMS) {
    long long row, j;
    if (!cells_element(bS, nOut, &row, &j))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, e = row * nOut + j;
    const long long length = cells_row_len(seq_len, row, sL);
    if (t >= length) {
        /* Nothing flows through a padded step: its dz, d (and aux) are 0, and the carried
         * gradient passes on unchanged (dhr is 0 in this row: the backward runs a row's
         * padded steps first, and their d is 0). */
        if (phase != 0)
            return;
        const long long slot = t * bS + row;
        for (int k = 0; k < CELLS_GATES; ++k) {
            gates[slot * G + k * nOut + j] = 0;
            if (k < CELLS_H_BLOCKS)
                d_h[row * NH + k * nOut + j] = 0;
            else
                d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j] = 0;
        }
#if CELLS_AUX
        aux[slot * nOut + j] = 0;
#endif
        return;
    }
    const long long tau = forward ? t : length - 1 - t, slot = tau * bS + row;
    /* The state entering the step: the initial one at the row's first step. */
    const long long prev = ((forward ? tau - 1 : tau + 1) * bS + row) * nOut + j;
    REAL g[CELLS_GATES], d[CELLS_GATES], dLdg[CELLS_GATES];
    REAL p[CELLS_PARAM_BLOCKS + 1], dP[CELLS_PARAM_BLOCKS + 1];
    REAL hPrev = t > 0 ? h[prev] : hI[e], cPrev = 0, cStep = 0, dcv = 0, a = 0, da = 0;
    REAL dLdhv = dLdh ? dLdh[slot * nOut + j] : 0;
    REAL dhv = phase == 0 ? dh[e] + dhr[e] : dh[e];
    for (int k = 0; k < CELLS_GATES; ++k) {
        g[k] = gates[slot * G + k * nOut + j];
        d[k] = k < CELLS_H_BLOCKS ? d_h[row * NH + k * nOut + j]
                                  : d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j];
        dLdg[k] = dLdgates ? dLdgates[slot * G + k * nOut + j] : 0;
    }
    for (int k = 0; k < CELLS_PARAM_BLOCKS + 1; ++k) {
        p[k] = P && k < CELLS_PARAM_BLOCKS ? P[k * nOut + j] : 0;
        dP[k] = 0;
    }
#if CELLS_AUX
    a = aux[slot * nOut + j];
#endif
    if (daux)
        da = daux[e];
#if CELLS_CELL_STATE
    cPrev = t > 0 ? c[prev] : cI[e];
    cStep = c[slot * nOut + j];
    dcv = dc[e];
#endif
    const cells_step_options o = CELLS_OPTIONS;
#if CELLS_PHASES == 2
    if (phase == 1)
        CELLS_STEP(CELLS_KERNEL_BACKWARD_B)(&o, 1, 1, dLdh ? &dLdhv : 0, dLdgates ? dLdg : 0, g,
                                          &a, &da, &hPrev, CELLS_CELL_STATE ? &cPrev : 0,
                                          CELLS_CELL_STATE ? &cStep : 0, P ? p : 0, d, &dhv,
                                          CELLS_CELL_STATE ? &dcv : 0, dP);
    else
#endif
        CELLS_STEP(CELLS_KERNEL_BACKWARD)(&o, 1, 1, dLdh ? &dLdhv : 0, dLdgates ? dLdg : 0, g,
                                        &a, &da, &hPrev, CELLS_CELL_STATE ? &cPrev : 0,
                                        CELLS_CELL_STATE ? &cStep : 0, P ? p : 0, d, &dhv,
                                        CELLS_CELL_STATE ? &dcv : 0, dP);
    for (int k = 0; k < CELLS_GATES; ++k) {
        gates[slot * G + k * nOut + j] = g[k];
        if (k < CELLS_H_BLOCKS)
            d_h[row * NH + k * nOut + j] = d[k];
        else
            d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j] = d[k];
    }
#if CELLS_AUX
    aux[slot * nOut + j] = a;
#endif
    dh[e] = dhv;
#if CELLS_CELL_STATE
    dc[e] = dcv;
#endif
}

CELLS_KERNEL(CELLS_KNAME(_forward), (CELLS_FORWARD_PARAMS)) {
    CELLS_KNAME(_forward_phase)(0, CELLS_FORWARD_ARGS);
}

CELLS_KERNEL(CELLS_KNAME(_backward), (CELLS_BACKWARD_PARAMS)) {
    CELLS_KNAME(_backward_phase)(0, CELLS_BACKWARD_ARGS);
}

#if CELLS_PHASES == 2
CELLS_KERNEL(CELLS_KNAME(_forward_b), (CELLS_FORWARD_PARAMS)) {
    CELLS_KNAME(_forward_phase)(1, CELLS_FORWARD_ARGS);
}

CELLS_KERNEL(CELLS_KNAME(_backward_b), (CELLS_BACKWARD_PARAMS)) {
    CELLS_KNAME(_backward_phase)(1, CELLS_BACKWARD_ARGS);
}
#endif

#undef CELLS_STEP
#undef CELLS_KNAME
#undef CELLS_FORWARD_PARAMS
#undef CELLS_FORWARD_ARGS
#undef CELLS_BACKWARD_PARAMS
#undef CELLS_BACKWARD_ARGS
