/* The kernels of kernels.cuh for one dtype (REAL, CELLS_SUFFIX): included twice by it. */

#define CELLS_STEP(name) CELLS_CAT(CELLS_CAT(cells_, name), CELLS_SUFFIX)
#define CELLS_KNAME(name) \
    CELLS_CAT(CELLS_CAT(CELLS_CAT(cells_kernel_, CELLS_KERNELS), name), CELLS_SUFFIX)

#define CELLS_FORWARD_PARAMS                                                                 \
    long long bS, long long nOut, long long sL, long long t, int forward, int keep,          \
        const long long *seq_len, CELLS_OPTION_PARAMS, const REAL *gx, const REAL *gh_h,     \
        const REAL *gh_x, const REAL *hcur, const REAL *ccur, const REAL *P, REAL *gates,    \
        REAL *aux, REAL *hnxt, REAL *cnxt, REAL *h, REAL *c, const REAL *zone,             \
        int zone_per_step
#define CELLS_FORWARD_ARGS                                                                   \
    bS, nOut, sL, t, forward, keep, seq_len, clip, activation, gate_code, gate_alpha,        \
        gate_beta, cell_code, cell_alpha, cell_beta, out_code, out_alpha, out_beta, gx, gh_h, \
        gh_x, hcur, ccur, P, gates, aux, hnxt, cnxt, h, c, zone, zone_per_step
#define CELLS_BACKWARD_PARAMS                                                                \
    long long bS, long long nOut, long long sL, long long t, int forward,                    \
        const long long *seq_len, CELLS_OPTION_PARAMS, const REAL *dLdh,                     \
        const REAL *dLdgates, REAL *gates, REAL *aux, const REAL *daux, const REAL *hI,      \
        const REAL *h, const REAL *cI, const REAL *c, const REAL *P, REAL *dh,               \
        const REAL *dhr, REAL *dc, REAL *d_h, REAL *d_x, const REAL *dLdc,                 \
        const REAL *zone, int zone_per_step, REAL *dzone, REAL *dP
#define CELLS_BACKWARD_ARGS                                                                  \
    bS, nOut, sL, t, forward, seq_len, clip, activation, gate_code, gate_alpha, gate_beta,   \
        cell_code, cell_alpha, cell_beta, out_code, out_alpha, out_beta, dLdh, dLdgates,     \
        gates, aux, daux, hI, h, cI, c, P, dh, dhr, dc, d_h, d_x, dLdc, zone, zone_per_step, \
        dzone, dP

/* Zoneout's share of the new state for element j of `slot` (tau·bS + row): one value for all,
 * or every step's [sL, bS, nOut] (cells/_time_loop.pyx's zone_at). */
#define CELLS_ZONE(slot, j) zone[zone_per_step ? (slot) * nOut + (j) : 0]

#if !CELLS_ROW_REDUCTION

/* Phase `phase` of forward loop step t, for the thread's element (row, j). Its values of gate
 * block k: gx, gates [.., G] at k·nOut + j; gh_h [bS, h_blocks·nOut] and gh_x
 * [bS, (gates - h_blocks)·nOut] hold the recurrent products of the blocks that multiply hPrev
 * and aux (neither read by a family without a recurrent product). gates and aux are every
 * step's with keep (aux when the family keeps it), else one step's scratch [bS, ...]; c
 * [sL, bS, nOut], when given (keep, or every step's c asked for), gets every step's c. The
 * last phase writes the state and the outputs, h after zoneout where zone is given. */
static __device__ __forceinline__ void CELLS_KNAME(_forward_phase)(int phase,
                                                                   CELLS_FORWARD_PARAMS) {
    long long row, j;
    if (!cells_element(bS, nOut, &row, &j))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, e = row * nOut + j;
    const long long A = CELLS_AUX * nOut;
    const long long length = cells_row_len(seq_len, row, sL);
    const int last = phase == CELLS_PHASES - 1;
    (void)A, (void)NH, (void)gh_h, (void)gh_x;
    if (t >= length) {
        /* Past the row's end: its state is frozen, and time index t is padding. */
        if (!last)
            return;
        const long long slot = t * bS + row;
        hnxt[e] = hcur[e];
        h[slot * nOut + j] = 0;
#if CELLS_CELL_STATE
        cnxt[e] = ccur[e];
        if (c)
            c[slot * nOut + j] = 0;
#endif
        if (keep) {
            for (int k = 0; k < CELLS_GATES; ++k)
                gates[slot * G + k * nOut + j] = 0;
#if CELLS_AUX_KEPT
            for (int k = 0; k < CELLS_AUX; ++k)
                aux[slot * A + k * nOut + j] = 0;
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
#if CELLS_RECURRENT_PRODUCT
        zh[k] = k < CELLS_H_BLOCKS ? gh_h[row * NH + k * nOut + j]
                                   : gh_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j];
#else
        zh[k] = 0;
#endif
    }
    for (int k = 0; k < CELLS_PARAM_BLOCKS; ++k)
        p[k] = P ? P[k * nOut + j] : 0;
#if CELLS_AUX
    REAL *aux_at = aux + (keep && CELLS_AUX_KEPT ? slot : row) * A + j;
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
    if (zone)  /* the CPU loop's end_step: h = hPrev + zone∘(hNew - hPrev) */
        hNext = hPrev + CELLS_ZONE(slot, j) * (hNext - hPrev);
    hnxt[e] = hNext;
    h[slot * nOut + j] = hNext;
#if CELLS_CELL_STATE
    cnxt[e] = cNext;
    if (c)
        c[slot * nOut + j] = cNext;
#endif
}

/* Phase `phase` of backward loop step t, for the thread's element (row, j): gates (every
 * step's, overwritten with dL/dz) and aux [sL, bS, nOut] as the CPU loop's; dLdh [sL, bS, nOut]
 * and dLdgates [sL, bS, G] or NULL; daux [bS, nOut] the second phase's d_x·op(Wh_x)ᵀ. dh
 * [bS, nOut] is the carried dL/dh without its recurrent product dhr = d_h·op(Wh_h)ᵀ of the
 * later step (the first phase adds it), dc the carried dL/dc, to which the first phase adds
 * dLdc [sL, bS, nOut] (or NULL) at the step's time index; d_h [bS, h_blocks·nOut] and d_x
 * [bS, (gates - h_blocks)·nOut] receive the recurrent-side gradient d of the step (no d_h
 * without a recurrent product). With zone, the first phase splits dL/dh (dh + dLdh) into
 * zone∘dL/dh for the step and (1 - zone)∘dL/dh, kept in dzone [bS, nOut] and added to dL/dhPrev
 * after the last phase. dP, or NULL: the per-row accumulator [bS, param_blocks·nOut] of dL/dP
 * (param_grad STEPS). */
static __device__ __forceinline__ void CELLS_KNAME(_backward_phase)(int phase,
                                                                    CELLS_BACKWARD_PARAMS) {
    long long row, j;
    if (!cells_element(bS, nOut, &row, &j))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, e = row * nOut + j;
    const long long A = CELLS_AUX * nOut, PB = CELLS_PARAM_BLOCKS * nOut;
    const long long length = cells_row_len(seq_len, row, sL);
    (void)A, (void)NH, (void)d_h, (void)d_x;
    if (t >= length) {
        /* Nothing flows through a padded step: its dz, d (and aux) are 0, and the carried
         * gradient passes on unchanged (dhr is 0 in this row: the backward runs a row's
         * padded steps first, and their d is 0). */
        if (phase != 0)
            return;
        const long long slot = t * bS + row;
        for (int k = 0; k < CELLS_GATES; ++k) {
            gates[slot * G + k * nOut + j] = 0;
#if CELLS_RECURRENT_PRODUCT
            if (k < CELLS_H_BLOCKS)
                d_h[row * NH + k * nOut + j] = 0;
            else
                d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j] = 0;
#endif
        }
        for (int k = 0; k < CELLS_AUX; ++k)
            aux[slot * A + k * nOut + j] = 0;
        return;
    }
    const long long tau = forward ? t : length - 1 - t, slot = tau * bS + row;
    /* The state entering the step: the initial one at the row's first step. */
    const long long prev = ((forward ? tau - 1 : tau + 1) * bS + row) * nOut + j;
    REAL g[CELLS_GATES], d[CELLS_GATES], dLdg[CELLS_GATES];
    REAL p[CELLS_PARAM_BLOCKS + 1], dp[CELLS_PARAM_BLOCKS + 1];
    REAL hPrev = t > 0 ? h[prev] : hI[e], cPrev = 0, cStep = 0, dcv = 0, a = 0, da = 0;
    REAL dLdhv = dLdh ? dLdh[slot * nOut + j] : 0;
    REAL dhv = phase == 0 ? dh[e] + dhr[e] : dh[e];
    const REAL *dLdh_step = dLdh ? &dLdhv : 0;
    for (int k = 0; k < CELLS_GATES; ++k) {
        g[k] = gates[slot * G + k * nOut + j];
#if CELLS_RECURRENT_PRODUCT
        d[k] = k < CELLS_H_BLOCKS ? d_h[row * NH + k * nOut + j]
                                  : d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j];
#else
        d[k] = 0;
#endif
        dLdg[k] = dLdgates ? dLdgates[slot * G + k * nOut + j] : 0;
    }
    for (int k = 0; k < CELLS_PARAM_BLOCKS + 1; ++k) {
        p[k] = P && k < CELLS_PARAM_BLOCKS ? P[k * nOut + j] : 0;
        dp[k] = dP && k < CELLS_PARAM_BLOCKS ? dP[row * PB + k * nOut + j] : 0;
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
    if (phase == 0 && dLdc)
        dcv += dLdc[slot * nOut + j];
#endif
    if (phase == 0 && zone) {  /* the step's share of dL/dh, and hPrev's */
        REAL z = CELLS_ZONE(slot, j);
        dhv += dLdhv;
        dzone[e] = dhv - z * dhv;
        dhv = z * dhv;
        dLdh_step = 0;
    }
    const cells_step_options o = CELLS_OPTIONS;
#if CELLS_PHASES == 2
    if (phase == 1)
        CELLS_STEP(CELLS_KERNEL_BACKWARD_B)(&o, 1, 1, dLdh_step, dLdgates ? dLdg : 0, g, &a,
                                          &da, &hPrev, CELLS_CELL_STATE ? &cPrev : 0,
                                          CELLS_CELL_STATE ? &cStep : 0, P ? p : 0, d, &dhv,
                                          CELLS_CELL_STATE ? &dcv : 0, dp);
    else
#endif
        CELLS_STEP(CELLS_KERNEL_BACKWARD)(&o, 1, 1, dLdh_step, dLdgates ? dLdg : 0, g, &a, &da,
                                        &hPrev, CELLS_CELL_STATE ? &cPrev : 0,
                                        CELLS_CELL_STATE ? &cStep : 0, P ? p : 0, d, &dhv,
                                        CELLS_CELL_STATE ? &dcv : 0, dp);
    for (int k = 0; k < CELLS_GATES; ++k) {
        gates[slot * G + k * nOut + j] = g[k];
#if CELLS_RECURRENT_PRODUCT
        if (k < CELLS_H_BLOCKS)
            d_h[row * NH + k * nOut + j] = d[k];
        else
            d_x[row * (G - NH) + (k - CELLS_H_BLOCKS) * nOut + j] = d[k];
#endif
    }
    if (dP)
        for (int k = 0; k < CELLS_PARAM_BLOCKS; ++k)
            dP[row * PB + k * nOut + j] = dp[k];
#if CELLS_AUX
    aux[slot * nOut + j] = a;
#endif
    if (phase == CELLS_PHASES - 1 && zone)
        dhv += dzone[e];
    dh[e] = dhv;
#if CELLS_CELL_STATE
    dc[e] = dcv;
#endif
}

#else /* CELLS_ROW_REDUCTION */

/* The per-row shape: loop step t for the thread's batch row, every unit, the step called with
 * n = nOut on the row's arrays (the buffers and their meaning as the per-element kernels'
 * above; gh_h holds every gate block's recurrent product, h_blocks = gates; aux has
 * aux·nOut values per row). One phase. */
static __device__ __forceinline__ void CELLS_KNAME(_forward_phase)(int phase,
                                                                   CELLS_FORWARD_PARAMS) {
    long long row;
    (void)phase, (void)gh_x;
    if (!cells_row_thread(bS, &row))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, A = CELLS_AUX * nOut;
    const long long at = row * nOut, length = cells_row_len(seq_len, row, sL);
    (void)A, (void)NH;
    if (t >= length) {
        /* Past the row's end: its state is frozen, and time index t is padding. */
        const long long slot = t * bS + row;
        for (long long j = 0; j < nOut; ++j) {
            hnxt[at + j] = hcur[at + j];
            h[slot * nOut + j] = 0;
#if CELLS_CELL_STATE
            cnxt[at + j] = ccur[at + j];
            if (c)
                c[slot * nOut + j] = 0;
#endif
        }
        if (keep) {
            for (long long k = 0; k < G; ++k)
                gates[slot * G + k] = 0;
#if CELLS_AUX_KEPT
            for (long long k = 0; k < A; ++k)
                aux[slot * A + k] = 0;
#endif
        }
        return;
    }
    const long long tau = forward ? t : length - 1 - t, slot = tau * bS + row;
    const long long gslot = keep ? slot : row;
    const cells_step_options o = CELLS_OPTIONS;
#if CELLS_RECURRENT_PRODUCT
    REAL *zh = (REAL *)gh_h + row * NH;
#else
    REAL *zh = 0;
#endif
    CELLS_STEP(CELLS_KERNEL_FORWARD)(
        &o, nOut, nOut, gx + slot * G, zh, hcur + at, CELLS_CELL_STATE ? ccur + at : 0, P,
        gates + gslot * G, CELLS_AUX ? aux + (keep && CELLS_AUX_KEPT ? slot : row) * A : 0,
        hnxt + at, CELLS_CELL_STATE ? cnxt + at : 0);
    for (long long j = 0; j < nOut; ++j) {
        if (zone)  /* the CPU loop's end_step: h = hPrev + zone∘(hNew - hPrev) */
            hnxt[at + j] = hcur[at + j] + CELLS_ZONE(slot, j) * (hnxt[at + j] - hcur[at + j]);
        h[slot * nOut + j] = hnxt[at + j];
#if CELLS_CELL_STATE
        if (c)
            c[slot * nOut + j] = cnxt[at + j];
#endif
    }
}

/* The per-row shape of the backward step (buffers as the per-element kernel's above; dP, the
 * row's accumulator of dL/dP, is required: the steps add into it). */
static __device__ __forceinline__ void CELLS_KNAME(_backward_phase)(int phase,
                                                                    CELLS_BACKWARD_PARAMS) {
    long long row;
    (void)phase, (void)d_x;
    if (!cells_row_thread(bS, &row))
        return;
    const long long G = CELLS_GATES * nOut, NH = CELLS_H_BLOCKS * nOut, A = CELLS_AUX * nOut;
    const long long at = row * nOut, length = cells_row_len(seq_len, row, sL);
    (void)A, (void)NH;
    if (t >= length) {
        /* Nothing flows through a padded step (as the per-element kernel's). */
        const long long slot = t * bS + row;
        for (long long k = 0; k < G; ++k)
            gates[slot * G + k] = 0;
#if CELLS_RECURRENT_PRODUCT
        for (long long k = 0; k < NH; ++k)
            d_h[row * NH + k] = 0;
#endif
        for (long long k = 0; k < A; ++k)
            aux[slot * A + k] = 0;
        return;
    }
    const long long tau = forward ? t : length - 1 - t, slot = tau * bS + row;
    const long long prev = ((forward ? tau - 1 : tau + 1) * bS + row) * nOut;
    const REAL *dLdh_step = dLdh ? dLdh + slot * nOut : 0;
    for (long long j = 0; j < nOut; ++j) {
        REAL dhv = dh[at + j] + dhr[at + j];
#if CELLS_CELL_STATE
        if (dLdc)
            dc[at + j] += dLdc[slot * nOut + j];
#endif
        if (zone) {  /* the step's share of dL/dh, and hPrev's */
            REAL z = CELLS_ZONE(slot, j);
            dhv += dLdh ? dLdh[slot * nOut + j] : 0;
            dzone[at + j] = dhv - z * dhv;
            dhv = z * dhv;
        }
        dh[at + j] = dhv;
    }
    if (zone)
        dLdh_step = 0;
    const cells_step_options o = CELLS_OPTIONS;
#if CELLS_RECURRENT_PRODUCT
    REAL *d = d_h + row * NH;
#else
    REAL *d = 0;
#endif
    CELLS_STEP(CELLS_KERNEL_BACKWARD)(
        &o, nOut, nOut, dLdh_step, dLdgates ? dLdgates + slot * G : 0, gates + slot * G,
        CELLS_AUX ? aux + slot * A : 0, daux ? daux + at : 0, t > 0 ? h + prev : hI + at,
        CELLS_CELL_STATE ? (t > 0 ? c + prev : cI + at) : 0,
        CELLS_CELL_STATE ? c + slot * nOut : 0, P, d, dh + at, CELLS_CELL_STATE ? dc + at : 0,
        dP + row * CELLS_PARAM_BLOCKS * nOut);
    if (zone)
        for (long long j = 0; j < nOut; ++j)
            dh[at + j] += dzone[at + j];
}

#endif /* CELLS_ROW_REDUCTION */

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

#undef CELLS_ZONE
#undef CELLS_STEP
#undef CELLS_KNAME
#undef CELLS_FORWARD_PARAMS
#undef CELLS_FORWARD_ARGS
#undef CELLS_BACKWARD_PARAMS
#undef CELLS_BACKWARD_ARGS
