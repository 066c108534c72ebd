/* The tile kernels of cells/lowp.h for one instruction set, CELLS_LOWP_KISA: 5 (AVX512_VNNI
 * for int8, AVX512_BF16 for bfloat16), 4 (AVX-512 F/BW), 3 (AVX2 + FMA) or 0 (the baseline,
 * plain C). lowp_impl.h includes this file once per instruction set, inside a
 * `#pragma GCC target` region for it, so that the intrinsics inline into every function here
 * (a function without that target could not inline them); every name here ends in _<isa>
 * (CELLS_LOWP_K(name)). No include guard.
 *
 * Vectors: one packed vector is CELLS_LOWP_VL = 16 columns, 64 bytes of weights (16 × 4 int8,
 * or 16 × 2 bfloat16). The helpers below hold one in registers as the instruction set can:
 *   int8 accumulators: one int32 lane a column, 4 products added to it a group: isa 5, one
 *     zmm (vpdpbusd); isa 4, one zmm, and isa 3, two ymm (vpmaddubsw's int16 pair sums, exact
 *     for activations of 7 bits (lowp.h), added in pairs by vpmaddwd with ones); isa 0, 16
 *     int32.
 *   bfloat16 accumulators: isa 5 and 4, one zmm of 16 floats; isa 3, two ymm; isa 0, 16 floats.
 * They are always inlined, and take pointers (a 64-byte vector passed by value changes the ABI
 * where AVX-512 is off). */

#define CELLS_LOWP_K3(name, isa) cells_lowp_##name##_##isa
#define CELLS_LOWP_K2(name, isa) CELLS_LOWP_K3(name, isa)
#define CELLS_LOWP_K(name) CELLS_LOWP_K2(name, CELLS_LOWP_KISA)

/* ---- int8 ---- */

CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_zero)(cells_lowp_q8_acc *c) {
#if CELLS_LOWP_KISA >= 4
    c->z = _mm512_setzero_si512();
#elif CELLS_LOWP_KISA == 3
    c->y[0] = c->y[1] = _mm256_setzero_si256();
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        c->e[l] = 0;
#endif
}

/* The weights of one vector (64 bytes at p), loaded. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_load)(cells_lowp_q8_w *w, const int8_t *p) {
#if CELLS_LOWP_KISA >= 4
    w->z = _mm512_loadu_si512(p);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h)
        w->y[h] = _mm256_loadu_si256((const __m256i *)(p + 32 * h));
#else
    w->p = p;
#endif
}

/* A row's 4 activations of one group (at q), broadcast: 4 uint8 in every int32 lane. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_bcast)(cells_lowp_q8_a *a, const uint8_t *q) {
#if CELLS_LOWP_KISA >= 3
    uint32_t four;
    memcpy(&four, q, sizeof four);
#if CELLS_LOWP_KISA >= 4
    a->z = _mm512_set1_epi32((int)four);
#else
    a->y = _mm256_set1_epi32((int)four);
#endif
#else
    a->p = q;
#endif
}

/* c += the products of one group: column l gets Σ_t a[t]·w[4l + t]. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_step)(cells_lowp_q8_acc *c, const cells_lowp_q8_w *w,
                                              const cells_lowp_q8_a *a) {
#if CELLS_LOWP_KISA == 5
    c->z = _mm512_dpbusd_epi32(c->z, a->z, w->z);
#elif CELLS_LOWP_KISA == 4
    const __m512i pairs = _mm512_maddubs_epi16(a->z, w->z);
    c->z = _mm512_add_epi32(c->z, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h) {
        const __m256i pairs = _mm256_maddubs_epi16(a->y, w->y[h]);
        c->y[h] = _mm256_add_epi32(c->y[h], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        for (int t = 0; t < CELLS_LOWP_Q8_GROUP; ++t)
            c->e[l] += (int32_t)a->p[t] * w->p[CELLS_LOWP_Q8_GROUP * l + t];
#endif
}

CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_add)(cells_lowp_q8_acc *c, const cells_lowp_q8_acc *d) {
#if CELLS_LOWP_KISA >= 4
    c->z = _mm512_add_epi32(c->z, d->z);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h)
        c->y[h] = _mm256_add_epi32(c->y[h], d->y[h]);
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        c->e[l] += d->e[l];
#endif
}

/* The 16 column sums of c. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_sums)(const cells_lowp_q8_acc *c,
                                              int32_t s[CELLS_LOWP_VL]) {
#if CELLS_LOWP_KISA >= 4
    _mm512_storeu_si512(s, c->z);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256((__m256i *)(s + 8 * h), c->y[h]);
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        s[l] = c->e[l];
#endif
}

/* ---- bfloat16 ---- */

CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_zero)(cells_lowp_bf16_acc *c) {
#if CELLS_LOWP_KISA >= 4
    c->z = _mm512_setzero_ps();
#elif CELLS_LOWP_KISA == 3
    c->y[0] = c->y[1] = _mm256_setzero_ps();
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        c->e[l] = 0;
#endif
}

/* Pins c in its registers (isa 4, 3): the FMAs on it stay between the MXCSR writes around
 * them, which the compiler does not otherwise order them against. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_pin)(cells_lowp_bf16_acc *c) {
#if CELLS_LOWP_KISA == 4
    __asm__ volatile("" : "+v"(c->z));
#elif CELLS_LOWP_KISA == 3
    __asm__ volatile("" : "+x"(c->y[0]), "+x"(c->y[1]));
#else
    (void)c;
#endif
}

/* The weights of one vector (16 pairs at p), loaded: a pair (even k in the low half, odd k in
 * the high half of a 32-bit lane) becomes two floats on isa 4, 3, the odd k its high half with
 * the low half cleared, the even k its low half shifted up. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_load)(cells_lowp_bf16_w *w, const uint16_t *p) {
#if CELLS_LOWP_KISA == 5
    w->d.z = _mm512_loadu_si512(p);
#elif CELLS_LOWP_KISA == 4
    const __m512i v = _mm512_loadu_si512(p);
    w->f.o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(CELLS_LOWP_BF16_HIGH)));
    w->f.e = _mm512_castsi512_ps(_mm512_slli_epi32(v, CELLS_LOWP_BF16_SHIFT));
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 16 * h));
        w->h.o[h] =
            _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(CELLS_LOWP_BF16_HIGH)));
        w->h.e[h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, CELLS_LOWP_BF16_SHIFT));
    }
#else
    w->p = p;
#endif
}

/* A row's pair of activations (at q), broadcast: the pair in every lane (isa 5), the two as
 * floats (isa 4, 3, 0). */
CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_bcast)(cells_lowp_bf16_a *a, const uint16_t *q) {
#if CELLS_LOWP_KISA == 5
    uint32_t pair;
    memcpy(&pair, q, sizeof pair);
    a->pair = _mm512_set1_epi32((int)pair);
#elif CELLS_LOWP_KISA == 4
    a->f.o = _mm512_set1_ps(cells_lowp_bf16_float(q[1]));
    a->f.e = _mm512_set1_ps(cells_lowp_bf16_float(q[0]));
#elif CELLS_LOWP_KISA == 3
    a->h.o = _mm256_set1_ps(cells_lowp_bf16_float(q[1]));
    a->h.e = _mm256_set1_ps(cells_lowp_bf16_float(q[0]));
#else
    a->s.o = cells_lowp_bf16_float(q[1]);
    a->s.e = cells_lowp_bf16_float(q[0]);
#endif
}

/* c = ftz(fma(a_odd·w_odd + c)), then ftz(fma(a_even·w_even + c)): vdpbf16ps (isa 5), FMAs
 * under MXCSR's FTZ and DAZ (isa 4, 3: the tile sets them), fmaf and the explicit flush
 * (isa 0). */
CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_step)(cells_lowp_bf16_acc *c,
                                                const cells_lowp_bf16_w *w,
                                                const cells_lowp_bf16_a *a) {
#if CELLS_LOWP_KISA == 5
    c->z = _mm512_dpbf16_ps(c->z, (__m512bh)w->d.z, (__m512bh)a->pair);
#elif CELLS_LOWP_KISA == 4
    c->z = _mm512_fmadd_ps(w->f.o, a->f.o, c->z);
    c->z = _mm512_fmadd_ps(w->f.e, a->f.e, c->z);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h) {
        c->y[h] = _mm256_fmadd_ps(w->h.o[h], a->h.o, c->y[h]);
        c->y[h] = _mm256_fmadd_ps(w->h.e[h], a->h.e, c->y[h]);
    }
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l) {
        const float wo = cells_lowp_bf16_float(w->p[CELLS_LOWP_BF16_PAIR * l + 1]);
        const float we = cells_lowp_bf16_float(w->p[CELLS_LOWP_BF16_PAIR * l]);
        c->e[l] = cells_lowp_fma_ftz(a->s.o, wo, c->e[l]);
        c->e[l] = cells_lowp_fma_ftz(a->s.e, we, c->e[l]);
    }
#endif
}

CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_sums)(const cells_lowp_bf16_acc *c,
                                                float s[CELLS_LOWP_VL]) {
#if CELLS_LOWP_KISA >= 4
    _mm512_storeu_ps(s, c->z);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(s + 8 * h, c->y[h]);
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        s[l] = c->e[l];
#endif
}

/* ---- tiles ---- */

/* The int8 tile: C[m, w] from QA [m, ldq] (G groups of 4) and nv vectors of one panel, Pv the
 * first of them ([G][256 bytes] rows from there); s_a, zp [m]; s_w, colsum, bias [w] from the
 * tile's first column (bias read only if not NULL); C [m, ldc], only its w <= nv·16 columns
 * written (read with CELLS_LOWP_ADD). m, nv and ku (accumulator sets over alternate groups):
 * constants once inlined. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_tile)(const int m, const int nv, const int ku,
                                              ptrdiff_t G, const uint8_t *QA, ptrdiff_t ldq,
                                              const int8_t *Pv, const float *s_a,
                                              const int32_t *zp, const float *s_w,
                                              const int32_t *colsum, const float *bias,
                                              int flags, float *C, ptrdiff_t ldc, ptrdiff_t w) {
    enum { ROW = CELLS_LOWP_NR * CELLS_LOWP_Q8_GROUP, VB = CELLS_LOWP_VL * CELLS_LOWP_Q8_GROUP };
    cells_lowp_q8_acc acc[CELLS_LOWP_KU_MAX][CELLS_LOWP_MR_MAX][CELLS_LOWP_NV];
    CELLS_PANEL_UNROLL
    for (int u = 0; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                CELLS_LOWP_K(q8_zero)(&acc[u][r][v]);
    for (ptrdiff_t g = 0; g < G; g += ku) {
        const int us = G - g < ku ? (int)(G - g) : ku; /* ku but in the last round */
        CELLS_PANEL_UNROLL
        for (int u = 0; u < ku; ++u) {
            if (u >= us)
                break;
            const int8_t *p = Pv + (g + u) * ROW;
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                CELLS_PANEL_PREFETCH_ROW(p + CELLS_LOWP_PREFETCH_ROWS * ROW + v * VB);
            cells_lowp_q8_a a[CELLS_LOWP_MR_MAX];
            CELLS_PANEL_UNROLL
            for (int r = 0; r < m; ++r)
                CELLS_LOWP_K(q8_bcast)(&a[r], QA + r * ldq + (g + u) * CELLS_LOWP_Q8_GROUP);
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v) {
                cells_lowp_q8_w wv;
                CELLS_LOWP_K(q8_load)(&wv, p + v * VB);
                CELLS_PANEL_UNROLL
                for (int r = 0; r < m; ++r)
                    CELLS_LOWP_K(q8_step)(&acc[u][r][v], &wv, &a[r]);
            }
        }
    }
    CELLS_PANEL_UNROLL
    for (int u = 1; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                CELLS_LOWP_K(q8_add)(&acc[0][r][v], &acc[u][r][v]);

    int32_t sums[CELLS_LOWP_MR_MAX][CELLS_LOWP_NV * CELLS_LOWP_VL];
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v)
            CELLS_LOWP_K(q8_sums)(&acc[0][r][v], sums[r] + v * CELLS_LOWP_VL);
    for (int r = 0; r < m; ++r) { /* one loop, not unrolled: it runs once per tile */
        const float sa = s_a[r];
        const int32_t z = zp[r];
        float *c = C + r * ldc;
        for (ptrdiff_t j = 0; j < w; ++j) {
            const float scale = sa * s_w[j];
            float x = scale * (float)(sums[r][j] - z * colsum[j]);
            if (bias)
                x = x + bias[j];
            c[j] = (flags & CELLS_LOWP_ADD) ? c[j] + x : x;
        }
    }
}

/* The bfloat16 tile: C[m, w] from AB [m, ldb] (T pairs) and nv vectors of consecutive panels,
 * Pv the first (vector v in panel v / 4, pstride elements apart, [T][128] rows each); bias [w]
 * or NULL; C as for the int8 tile. m, nv: constants once inlined. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(bf16_tile)(const int m, const int nv, ptrdiff_t T,
                                                const uint16_t *AB, ptrdiff_t ldb,
                                                const uint16_t *Pv, ptrdiff_t pstride,
                                                const float *bias, int flags, float *C,
                                                ptrdiff_t ldc, ptrdiff_t w) {
    enum { ROW = CELLS_LOWP_NR * CELLS_LOWP_BF16_PAIR, VE = CELLS_LOWP_VL * CELLS_LOWP_BF16_PAIR,
           NV = CELLS_LOWP_NV };
    cells_lowp_bf16_acc acc[CELLS_LOWP_MR_MAX][CELLS_LOWP_TILE_NV_MAX];
#if CELLS_LOWP_KISA == 4 || CELLS_LOWP_KISA == 3
    const unsigned mxcsr = cells_lowp_mxcsr_ftz();
#endif
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v) {
            CELLS_LOWP_K(bf16_zero)(&acc[r][v]);
            CELLS_LOWP_K(bf16_pin)(&acc[r][v]);
        }
    for (ptrdiff_t t = 0; t < T; ++t) {
        cells_lowp_bf16_a a[CELLS_LOWP_MR_MAX];
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_LOWP_K(bf16_bcast)(&a[r], AB + r * ldb + t * CELLS_LOWP_BF16_PAIR);
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v) {
            const uint16_t *p = Pv + (v / NV) * pstride + t * ROW + (v % NV) * VE;
            CELLS_PANEL_PREFETCH_ROW(p + CELLS_LOWP_PREFETCH_ROWS * ROW);
            cells_lowp_bf16_w wv;
            CELLS_LOWP_K(bf16_load)(&wv, p);
            CELLS_PANEL_UNROLL
            for (int r = 0; r < m; ++r)
                CELLS_LOWP_K(bf16_step)(&acc[r][v], &wv, &a[r]);
        }
    }
#if CELLS_LOWP_KISA == 4 || CELLS_LOWP_KISA == 3
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v)
            CELLS_LOWP_K(bf16_pin)(&acc[r][v]);
    cells_lowp_mxcsr_restore(mxcsr);
#endif

    float sums[CELLS_LOWP_MR_MAX][CELLS_LOWP_TILE_NV_MAX * CELLS_LOWP_VL];
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v)
            CELLS_LOWP_K(bf16_sums)(&acc[r][v], sums[r] + v * CELLS_LOWP_VL);
    for (int r = 0; r < m; ++r) { /* one loop, not unrolled: it runs once per tile */
        float *c = C + r * ldc;
        for (ptrdiff_t j = 0; j < w; ++j) {
            float x = sums[r][j];
            if (bias)
                x = x + bias[j];
            c[j] = (flags & CELLS_LOWP_ADD) ? c[j] + x : x;
        }
    }
}

/* ---- the row conversions: one row at a time, 16 elements a vector (two ymm on isa 3), the
 * last partial vector under a mask (isa 5, 4) or in scalar C (isa 3); every element computed
 * by the same operations, rounded the same way, as the scalar code of isa 0 ---- */

#if CELLS_LOWP_KISA >= 4
/* The mask of the first `count` (< 16) lanes. */
CELLS_PANEL_INLINE __mmask16 CELLS_LOWP_K(lanes)(ptrdiff_t count) {
    return (__mmask16)((1u << count) - 1);
}
#endif

/* lo, hi of cells_lowp_q8_range. minps(x, m) is x < m ? x : m and maxps(x, m) is x > m ? x : m,
 * the scalar comparisons (a NaN x keeps m); the lanes hold +0 or values of one sign, so their
 * reduction has one result in any order; padding lanes load as 0, which changes nothing. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_range)(ptrdiff_t K, const float *a, float *lo,
                                               float *hi) {
#if CELLS_LOWP_KISA >= 4
    enum { VL = CELLS_LOWP_VL };
    __m512 l = _mm512_setzero_ps(), h = _mm512_setzero_ps();
    ptrdiff_t k = 0;
    for (; k + VL <= K; k += VL) {
        const __m512 x = _mm512_loadu_ps(a + k);
        l = _mm512_min_ps(x, l);
        h = _mm512_max_ps(x, h);
    }
    if (k < K) {
        const __m512 x = _mm512_maskz_loadu_ps(CELLS_LOWP_K(lanes)(K - k), a + k);
        l = _mm512_min_ps(x, l);
        h = _mm512_max_ps(x, h);
    }
    *lo = _mm512_reduce_min_ps(l);
    *hi = _mm512_reduce_max_ps(h);
#elif CELLS_LOWP_KISA == 3
    enum { VL = 8 };
    __m256 l = _mm256_setzero_ps(), h = _mm256_setzero_ps();
    ptrdiff_t k = 0;
    for (; k + VL <= K; k += VL) {
        const __m256 x = _mm256_loadu_ps(a + k);
        l = _mm256_min_ps(x, l);
        h = _mm256_max_ps(x, h);
    }
    float ls[VL], hs[VL];
    _mm256_storeu_ps(ls, l);
    _mm256_storeu_ps(hs, h);
    float lt, ht;
    cells_lowp_q8_range(K - k, a + k, &lt, &ht);
    for (int e = 0; e < VL; ++e) {
        lt = ls[e] < lt ? ls[e] : lt;
        ht = hs[e] > ht ? hs[e] : ht;
    }
    *lo = lt, *hi = ht;
#else
    cells_lowp_q8_range(K, a, lo, hi);
#endif
}

#if CELLS_LOWP_KISA >= 4
/* cells_lowp_q8_quantize of 16 floats, as int32: the IEEE division, rint under the current
 * rounding mode (vrndscaleps), the float addition of z, then the clamp: maxps(x, 0) is 0 for a
 * NaN, and differs from the scalar x >= 0 ? x : 0 only on -0, which converts to 0 as well. */
CELLS_PANEL_INLINE __m512i CELLS_LOWP_K(q8_quantize)(__m512 x, __m512 s, __m512 z) {
    x = _mm512_roundscale_ps(_mm512_div_ps(x, s), _MM_FROUND_CUR_DIRECTION);
    x = _mm512_max_ps(_mm512_add_ps(x, z), _mm512_setzero_ps());
    x = _mm512_min_ps(x, _mm512_set1_ps((float)CELLS_LOWP_Q8_AMAX));
    return _mm512_cvttps_epi32(x);
}
#elif CELLS_LOWP_KISA == 3
CELLS_PANEL_INLINE __m256i CELLS_LOWP_K(q8_quantize)(__m256 x, __m256 s, __m256 z) {
    x = _mm256_round_ps(_mm256_div_ps(x, s), _MM_FROUND_CUR_DIRECTION);
    x = _mm256_max_ps(_mm256_add_ps(x, z), _mm256_setzero_ps());
    x = _mm256_min_ps(x, _mm256_set1_ps((float)CELLS_LOWP_Q8_AMAX));
    return _mm256_cvttps_epi32(x);
}
#endif

#if CELLS_LOWP_KISA != 5 /* isa 5 runs isa 4's: the int8 rows need no VNNI */
/* cells_lowp_q8_rows on this instruction set. */
static __attribute__((noinline)) void CELLS_LOWP_K(q8_rows)(ptrdiff_t M, ptrdiff_t K,
                                                            const float *A, ptrdiff_t lda,
                                                            uint8_t *QA, ptrdiff_t ldq,
                                                            float *s_a, int32_t *zp) {
    const ptrdiff_t K4 = cells_lowp_q8_row(K);
    for (ptrdiff_t i = 0; i < M; ++i) {
        const float *a = A + i * lda;
        uint8_t *q = QA + i * ldq;
        float lo, hi, s, z;
        CELLS_LOWP_K(q8_range)(K, a, &lo, &hi);
        cells_lowp_q8_scale(lo, hi, &s, &z);
        ptrdiff_t k = 0;
#if CELLS_LOWP_KISA >= 4
        enum { VL = CELLS_LOWP_VL };
        const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z);
        for (; k + VL <= K; k += VL)
            _mm_storeu_si128((__m128i *)(q + k),
                             _mm512_cvtepi32_epi8(CELLS_LOWP_K(q8_quantize)(
                                 _mm512_loadu_ps(a + k), vs, vz)));
        if (k < K) {
            const __mmask16 live = CELLS_LOWP_K(lanes)(K - k);
            _mm512_mask_cvtepi32_storeu_epi8(
                q + k, live,
                CELLS_LOWP_K(q8_quantize)(_mm512_maskz_loadu_ps(live, a + k), vs, vz));
            k = K;
        }
#elif CELLS_LOWP_KISA == 3
        enum { VL = 16, HALF = 8, LANES_SWAP = 0xD8 }; /* 64-bit lanes 0, 2, 1, 3 */
        const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
        for (; k + VL <= K; k += VL) {
            const __m256i lo8 = CELLS_LOWP_K(q8_quantize)(_mm256_loadu_ps(a + k), vs, vz);
            const __m256i hi8 = CELLS_LOWP_K(q8_quantize)(_mm256_loadu_ps(a + k + HALF), vs, vz);
            /* packus works within 128-bit lanes: the 16-bit results come out as 0-3, 8-11,
             * 4-7, 12-15, which the permutation puts in order */
            const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo8, hi8), LANES_SWAP);
            _mm_storeu_si128((__m128i *)(q + k),
                             _mm_packus_epi16(_mm256_castsi256_si128(w16),
                                              _mm256_extracti128_si256(w16, 1)));
        }
#endif
        for (; k < K; ++k)
            q[k] = cells_lowp_q8_quantize(a[k], s, z);
        for (; k < K4; ++k)
            q[k] = 0;
        s_a[i] = s;
        zp[i] = (int32_t)z;
    }
}
#endif

#if CELLS_LOWP_KISA == 4
/* cells_lowp_bf16 of 16 floats, in the low halves of int32 lanes: the rounding of a normal
 * number (an infinity too), then a NaN's and a denormal's (or zero's) own results over it. */
CELLS_PANEL_INLINE __m512i CELLS_LOWP_K(bf16_round)(__m512i u) {
    const __m512i top = _mm512_srli_epi32(u, CELLS_LOWP_BF16_SHIFT);
    const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(CELLS_LOWP_F32_MAG));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(CELLS_LOWP_F32_INF));
    const __mmask16 tiny = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(CELLS_LOWP_F32_MIN));
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(CELLS_LOWP_BF16_ROUND),
                                          _mm512_and_si512(top, _mm512_set1_epi32(1)));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), CELLS_LOWP_BF16_SHIFT);
    r = _mm512_mask_or_epi32(r, nan, top, _mm512_set1_epi32(CELLS_LOWP_BF16_QUIET));
    return _mm512_mask_and_epi32(r, tiny, top, _mm512_set1_epi32(CELLS_LOWP_BF16_SIGN));
}
#elif CELLS_LOWP_KISA == 3
CELLS_PANEL_INLINE __m256i CELLS_LOWP_K(bf16_round)(__m256i u) {
    const __m256i top = _mm256_srli_epi32(u, CELLS_LOWP_BF16_SHIFT);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(CELLS_LOWP_F32_MAG));
    const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(CELLS_LOWP_F32_INF));
    const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(CELLS_LOWP_F32_MIN), mag);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(CELLS_LOWP_BF16_ROUND),
                                          _mm256_and_si256(top, _mm256_set1_epi32(1)));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), CELLS_LOWP_BF16_SHIFT);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(top, _mm256_set1_epi32(CELLS_LOWP_BF16_QUIET)), nan);
    return _mm256_blendv_epi8(r, _mm256_and_si256(top, _mm256_set1_epi32(CELLS_LOWP_BF16_SIGN)),
                              tiny);
}
#endif

/* cells_lowp_bf16_rows on this instruction set: vcvtneps2bf16 on isa 5 (which rounds exactly as
 * cells_lowp_bf16 does: to nearest even, denormals to a zero of their sign, NaN made quiet by
 * the same bit), integer arithmetic on isa 4 and 3. */
static __attribute__((noinline)) void CELLS_LOWP_K(bf16_rows)(ptrdiff_t M, ptrdiff_t K,
                                                              const float *A, ptrdiff_t lda,
                                                              uint16_t *AB, ptrdiff_t ldb) {
    const ptrdiff_t K2 = cells_lowp_bf16_row(K);
    for (ptrdiff_t i = 0; i < M; ++i) {
        const float *a = A + i * lda;
        uint16_t *b = AB + i * ldb;
        ptrdiff_t k = 0;
#if CELLS_LOWP_KISA >= 4
        enum { VL = CELLS_LOWP_VL };
#if CELLS_LOWP_KISA == 5
#define CELLS_LOWP_BF16_ROUND16(x) ((__m256i)_mm512_cvtneps_pbh(x))
#else
#define CELLS_LOWP_BF16_ROUND16(x) \
    _mm512_cvtepi32_epi16(CELLS_LOWP_K(bf16_round)(_mm512_castps_si512(x)))
#endif
        for (; k + VL <= K; k += VL)
            _mm256_storeu_si256((__m256i *)(b + k),
                                CELLS_LOWP_BF16_ROUND16(_mm512_loadu_ps(a + k)));
        if (k < K) {
            const __mmask16 live = CELLS_LOWP_K(lanes)(K - k);
            _mm256_mask_storeu_epi16(b + k, live,
                                     CELLS_LOWP_BF16_ROUND16(_mm512_maskz_loadu_ps(live, a + k)));
            k = K;
        }
#undef CELLS_LOWP_BF16_ROUND16
#elif CELLS_LOWP_KISA == 3
        enum { VL = 16, HALF = 8, LANES_SWAP = 0xD8 }; /* 64-bit lanes 0, 2, 1, 3 */
        for (; k + VL <= K; k += VL) {
            const __m256i lo =
                CELLS_LOWP_K(bf16_round)(_mm256_loadu_si256((const __m256i *)(a + k)));
            const __m256i hi =
                CELLS_LOWP_K(bf16_round)(_mm256_loadu_si256((const __m256i *)(a + k + HALF)));
            /* packus (within 128-bit lanes; every value fits 16 bits unsigned) gives 0-3, 8-11,
             * 4-7, 12-15 */
            _mm256_storeu_si256((__m256i *)(b + k),
                                _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), LANES_SWAP));
        }
#endif
        for (; k < K; ++k)
            b[k] = cells_lowp_bf16(a[k]);
        for (; k < K2; ++k)
            b[k] = 0;
    }
}

/* ---- the kernel functions: one tile of m rows by nv vectors, each (m, nv) the blocking of
 * this instruction set produces being its own register-blocked tile ---- */

#define CELLS_LOWP_Q8_CASE(c)                                                                \
    case c:                                                                                  \
        if (c <= cells_lowp_q8_mr(CELLS_LOWP_KISA))                                          \
            CELLS_LOWP_K(q8_tile)(c, cells_lowp_q8_nvt(CELLS_LOWP_KISA),                     \
                                  cells_lowp_q8_ku(CELLS_LOWP_KISA, c), G, QA, ldq, Pv, s_a, \
                                  zp, s_w, colsum, bias, flags, C, ldc, w);                  \
        break;
static __attribute__((noinline)) void CELLS_LOWP_K(q8_kernel)(
    int m, ptrdiff_t G, const uint8_t *QA, ptrdiff_t ldq, const int8_t *Pv, const float *s_a,
    const int32_t *zp, const float *s_w, const int32_t *colsum, const float *bias, int flags,
    float *C, ptrdiff_t ldc, ptrdiff_t w) {
    switch (m) {
        CELLS_LOWP_Q8_CASE(1)
        CELLS_LOWP_Q8_CASE(2)
        CELLS_LOWP_Q8_CASE(3)
        CELLS_LOWP_Q8_CASE(4)
        CELLS_LOWP_Q8_CASE(5)
        CELLS_LOWP_Q8_CASE(6)
    default:
        break;
    }
}
#undef CELLS_LOWP_Q8_CASE

#define CELLS_LOWP_BF16_NV(c, v)                                                             \
    case v:                                                                                  \
        if (v <= cells_lowp_bf16_nvt(CELLS_LOWP_KISA, c)                                     \
            && (CELLS_LOWP_KISA < 4 ? v == 1 : v >= CELLS_LOWP_NV))                          \
            CELLS_LOWP_K(bf16_tile)(c, v, T, AB, ldb, Pv, pstride, bias, flags, C, ldc, w);  \
        break;
#define CELLS_LOWP_BF16_CASE(c)                                                              \
    case c:                                                                                  \
        if (c <= cells_lowp_bf16_mr(CELLS_LOWP_KISA))                                        \
            switch (nv) {                                                                    \
                CELLS_LOWP_BF16_NV(c, 1)                                                     \
                CELLS_LOWP_BF16_NV(c, 4)                                                     \
                CELLS_LOWP_BF16_NV(c, 8)                                                     \
                CELLS_LOWP_BF16_NV(c, 12)                                                    \
                CELLS_LOWP_BF16_NV(c, 16)                                                    \
            default:                                                                         \
                break;                                                                       \
            }                                                                                \
        break;
static __attribute__((noinline)) void CELLS_LOWP_K(bf16_kernel)(
    int m, int nv, ptrdiff_t T, const uint16_t *AB, ptrdiff_t ldb, const uint16_t *Pv,
    ptrdiff_t pstride, const float *bias, int flags, float *C, ptrdiff_t ldc, ptrdiff_t w) {
    switch (m) {
        CELLS_LOWP_BF16_CASE(1)
        CELLS_LOWP_BF16_CASE(2)
        CELLS_LOWP_BF16_CASE(3)
        CELLS_LOWP_BF16_CASE(4)
        CELLS_LOWP_BF16_CASE(5)
        CELLS_LOWP_BF16_CASE(6)
    default:
        break;
    }
}
#undef CELLS_LOWP_BF16_CASE
#undef CELLS_LOWP_BF16_NV
#undef CELLS_LOWP_K
#undef CELLS_LOWP_K2
#undef CELLS_LOWP_K3
