/* The tile kernels of cells/lowp.h for one instruction set, CELLS_LOWP_KISA: 5 (AVX512_VNNI
 * for int8, AVX512_BF16 for bfloat16), 4 (AVX-512 F/BW), 3 (AVX2 + FMA) or 0 (the baseline,
 * plain C). lowp_impl.h includes this file once per instruction set, inside a
 * `#pragma GCC target` region for it, so that the intrinsics inline into every function here
 * (a function without that target could not inline them); every name here ends in _<isa>
 * (CELLS_LOWP_K(name)). No include guard.
 *
 * Vectors: one packed vector is CELLS_LOWP_VL = 16 columns, 64 bytes of weights (16 × 4 int8,
 * or 16 × 2 bfloat16). The helpers below hold one in registers as the instruction set can:
 *   int8 accumulators: isa 5, one zmm of 16 column sums (vpdpbusd adds 4 products a lane);
 *     isa 4, two zmm of 8 columns × 2 lanes (vpmaddwd adds 2 products a lane, exactly: the
 *     int8 are widened to int16, not multiplied by the saturating vpmaddubsw); isa 3, four ymm
 *     of 4 columns × 2 lanes; isa 0, 16 int32.
 *   bfloat16 accumulators: isa 5 and 4, one zmm of 16 floats; isa 3, two ymm; isa 0, 16 floats.
 * They are always inlined, and take pointers (a 64-byte vector passed by value changes the ABI
 * where AVX-512 is off). */

#define CELLS_LOWP_K3(name, isa) cells_lowp_##name##_##isa
#define CELLS_LOWP_K2(name, isa) CELLS_LOWP_K3(name, isa)
#define CELLS_LOWP_K(name) CELLS_LOWP_K2(name, CELLS_LOWP_KISA)

/* ---- int8 ---- */

CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_zero)(cells_lowp_q8_acc *c) {
#if CELLS_LOWP_KISA >= 4
    c->z[0] = c->z[1] = _mm512_setzero_si512();
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 4; ++h)
        c->y[h] = _mm256_setzero_si256();
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        c->e[l] = 0;
#endif
}

/* The weights of one vector (64 bytes at p), loaded (and widened to int16 on isa 4, 3). */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_load)(cells_lowp_q8_w *w, const int8_t *p) {
#if CELLS_LOWP_KISA == 5
    w->z[0] = _mm512_loadu_si512(p);
#elif CELLS_LOWP_KISA == 4
    for (int h = 0; h < 2; ++h)
        w->z[h] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32 * h)));
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 4; ++h)
        w->y[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
#else
    w->p = p;
#endif
}

/* A row's 4 activations of one group (at q), broadcast: as 4 uint8 in every int32 lane (isa 5),
 * as 4 int16 in every 64-bit lane (isa 4, 3). */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_bcast)(cells_lowp_q8_a *a, const uint8_t *q) {
#if CELLS_LOWP_KISA >= 3
    uint32_t four;
    memcpy(&four, q, sizeof four);
#if CELLS_LOWP_KISA == 5
    a->z = _mm512_set1_epi32((int)four);
#else
    const __m128i wide = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)four));
#if CELLS_LOWP_KISA == 4
    a->z = _mm512_broadcastq_epi64(wide);
#else
    a->y = _mm256_broadcastq_epi64(wide);
#endif
#endif
#else
    a->p = q;
#endif
}

/* c += the products of one group: column l gets Σ_t a[t]·w[4l + t]. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_step)(cells_lowp_q8_acc *c, const cells_lowp_q8_w *w,
                                              const cells_lowp_q8_a *a) {
#if CELLS_LOWP_KISA == 5
    c->z[0] = _mm512_dpbusd_epi32(c->z[0], a->z, w->z[0]);
#elif CELLS_LOWP_KISA == 4
    for (int h = 0; h < 2; ++h)
        c->z[h] = _mm512_add_epi32(c->z[h], _mm512_madd_epi16(w->z[h], a->z));
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 4; ++h)
        c->y[h] = _mm256_add_epi32(c->y[h], _mm256_madd_epi16(w->y[h], a->y));
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        for (int t = 0; t < CELLS_LOWP_Q8_GROUP; ++t)
            c->e[l] += (int32_t)a->p[t] * w->p[CELLS_LOWP_Q8_GROUP * l + t];
#endif
}

CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_add)(cells_lowp_q8_acc *c, const cells_lowp_q8_acc *d) {
#if CELLS_LOWP_KISA >= 4
    for (int h = 0; h < 2; ++h)
        c->z[h] = _mm512_add_epi32(c->z[h], d->z[h]);
#elif CELLS_LOWP_KISA == 3
    for (int h = 0; h < 4; ++h)
        c->y[h] = _mm256_add_epi32(c->y[h], d->y[h]);
#else
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        c->e[l] += d->e[l];
#endif
}

/* The 16 column sums of c. */
CELLS_PANEL_INLINE void CELLS_LOWP_K(q8_sums)(const cells_lowp_q8_acc *c,
                                              int32_t s[CELLS_LOWP_VL]) {
#if CELLS_LOWP_KISA == 5
    _mm512_storeu_si512(s, c->z[0]);
#elif CELLS_LOWP_KISA == 4 || CELLS_LOWP_KISA == 3
    int32_t lanes[2 * CELLS_LOWP_VL]; /* 2 lanes a column, in column order */
#if CELLS_LOWP_KISA == 4
    for (int h = 0; h < 2; ++h)
        _mm512_storeu_si512(lanes + CELLS_LOWP_VL * h, c->z[h]);
#else
    for (int h = 0; h < 4; ++h)
        _mm256_storeu_si256((__m256i *)(lanes + 8 * h), c->y[h]);
#endif
    for (int l = 0; l < CELLS_LOWP_VL; ++l)
        s[l] = lanes[2 * l] + lanes[2 * l + 1];
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
