/* Packed-panel gemm: C[M, n] = A[M, K]·op(B) + beta·C for a B that is used many times.
 *
 * Compiled for float and double by panel.h through instantiate.h (REAL, and FN(name) naming
 * cells_*_f / cells_*_d). All matrices are row-major.
 *
 * op(B) [K, n] is packed once into panels of NR = CELLS_PANEL_BYTES / sizeof(REAL) columns
 * (64 floats, 32 doubles): panel p holds columns [p·NR, p·NR + NR) of op(B), k-major,
 *   P[p·K·NR + k·NR + j] = op(B)[k, p·NR + j],   zero where p·NR + j >= n,
 * so the micro-kernel streams a panel with unit stride whatever B's layout was. Each tile of C,
 * a few rows by one panel, is accumulated in registers over the whole of K: every element of
 * the A rows is broadcast against the NR-wide row of the panel. A is read in place.
 *
 * Panels are independent: columns from a panel boundary on are computed by passing
 * P + p·K·NR and C + p·NR (and packed by passing B's columns from p·NR on: B + p·NR, or
 * B + p·NR·ldb when transB), so threads can share one packed copy, each taking whole panels.
 *
 * P is read with unaligned vector loads; aligning it to 64 bytes (a cache line) keeps each
 * vector on one line rather than two (every panel starts at a multiple of K·NR elements =
 * K·256 bytes, so one aligned P aligns them all).
 */

/* Panel width in elements: 64 (float) or 32 (double), whatever CPU runs the code. */
CELLS_FN ptrdiff_t FN(panel_width)(void) { return CELLS_PANEL_BYTES / (ptrdiff_t)sizeof(REAL); }

/* Elements of the packed copy of a [K, n] matrix: K · roundup(n, NR). */
CELLS_FN size_t FN(panel_len)(ptrdiff_t K, ptrdiff_t n) {
    const ptrdiff_t nr = FN(panel_width)();
    return (size_t)K * (size_t)((n + nr - 1) / nr * nr);
}

/* P = op(B) [K, n] in panels (see the top of this file); P holds FN(panel_len)(K, n) elements.
 *   transB = 0: B is [K, ldb >= n], op(B) = B.
 *   transB = 1: B is [n, ldb >= K], op(B) = Bᵀ (row j of B is column j of op(B)); this is what
 *               a backward pass needs for dz·Whᵀ with Wh stored [H, G].
 * Reads only the K·n elements of op(B). Cost: one pass over B (a few µs per 10^5 elements). */
CELLS_FN void FN(pack_panels)(ptrdiff_t K, ptrdiff_t n, const REAL *CELLS_RESTRICT B,
                              ptrdiff_t ldb, int transB, REAL *CELLS_RESTRICT P) {
    const ptrdiff_t NR = FN(panel_width)();
    for (ptrdiff_t j0 = 0; j0 < n; j0 += NR) {
        const ptrdiff_t w = n - j0 < NR ? n - j0 : NR;
        REAL *Pp = P + j0 * K; /* panel j0 / NR starts at (j0 / NR)·K·NR */
        if (!transB) {
            for (ptrdiff_t k = 0; k < K; ++k) {
                const REAL *b = B + k * ldb + j0;
                REAL *p = Pp + k * NR;
                for (ptrdiff_t j = 0; j < w; ++j)
                    p[j] = b[j];
                for (ptrdiff_t j = w; j < NR; ++j)
                    p[j] = 0;
            }
        } else {
            /* Transpose blocks of 8 k's by the panel's columns: B's rows are read 8 elements
             * (a half or whole cache line) at a time, and the 8 panel rows written stay in L1. */
            for (ptrdiff_t k0 = 0; k0 < K; k0 += 8) {
                const ptrdiff_t kb = K - k0 < 8 ? K - k0 : 8;
                REAL *p = Pp + k0 * NR;
                for (ptrdiff_t j = 0; j < w; ++j) {
                    const REAL *b = B + (j0 + j) * ldb + k0;
                    for (ptrdiff_t k = 0; k < kb; ++k)
                        p[k * NR + j] = b[k];
                }
                for (ptrdiff_t k = 0; k < kb; ++k)
                    for (ptrdiff_t j = w; j < NR; ++j)
                        p[k * NR + j] = 0;
            }
        }
    }
}

/* One vector of the micro-kernel (CELLS_PANEL_VBYTES bytes), loaded and stored unaligned, and
 * its operations. They take pointers: a 64-byte vector passed by value would change the ABI
 * where AVX-512 is off (GCC's -Wpsabi); always inlined, the pointers vanish. With vector
 * extensions c + a·b contracts to an FMA where the instruction set has one (GCC's default
 * -ffp-contract=fast; an ISO -std=c99 build turns that off). */
#if CELLS_PANEL_VECTOR
typedef REAL FN(panel_vec)
        __attribute__((vector_size(CELLS_PANEL_VBYTES), aligned(sizeof(REAL)), may_alias));

CELLS_PANEL_INLINE void FN(panel_zero)(FN(panel_vec) *x) { *x = (FN(panel_vec)){0}; }
CELLS_PANEL_INLINE void FN(panel_load)(FN(panel_vec) *x, const REAL *p) {
    *x = *(const FN(panel_vec) *)p;
}
CELLS_PANEL_INLINE void FN(panel_store)(REAL *p, const FN(panel_vec) *x) {
    *(FN(panel_vec) *)p = *x;
}
/* c += a·b, a broadcast */
CELLS_PANEL_INLINE void FN(panel_fma)(FN(panel_vec) *c, REAL a, const FN(panel_vec) *b) {
    *c += a * *b;
}
CELLS_PANEL_INLINE void FN(panel_add)(FN(panel_vec) *x, const FN(panel_vec) *y) { *x += *y; }
#else
#define CELLS_PANEL_VL (CELLS_PANEL_VBYTES / (int)sizeof(REAL))
typedef struct { REAL v[CELLS_PANEL_VBYTES / sizeof(REAL)]; } FN(panel_vec);

CELLS_PANEL_INLINE void FN(panel_zero)(FN(panel_vec) *x) {
    for (int l = 0; l < CELLS_PANEL_VL; ++l) x->v[l] = 0;
}
CELLS_PANEL_INLINE void FN(panel_load)(FN(panel_vec) *x, const REAL *p) {
    for (int l = 0; l < CELLS_PANEL_VL; ++l) x->v[l] = p[l];
}
CELLS_PANEL_INLINE void FN(panel_store)(REAL *p, const FN(panel_vec) *x) {
    for (int l = 0; l < CELLS_PANEL_VL; ++l) p[l] = x->v[l];
}
CELLS_PANEL_INLINE void FN(panel_fma)(FN(panel_vec) *c, REAL a, const FN(panel_vec) *b) {
    for (int l = 0; l < CELLS_PANEL_VL; ++l) c->v[l] += a * b->v[l];
}
CELLS_PANEL_INLINE void FN(panel_add)(FN(panel_vec) *x, const FN(panel_vec) *y) {
    for (int l = 0; l < CELLS_PANEL_VL; ++l) x->v[l] += y->v[l];
}
#undef CELLS_PANEL_VL
#endif

/* Register blocking for instruction set `isa` (see panel.h); constants once inlined.
 * A tile is m <= mr rows of C by nv <= nvt vectors of one panel; its m·nv vector accumulators,
 * times ku, stay in registers, with the panel row's nv vectors and one broadcast A element:
 *   isa 4 (32 zmm, a vector in 1): 6 rows × the whole panel (4 vectors): 24 + 4 + 1 registers;
 *   isa 3 (16 ymm, a vector in 2): 6 rows × 1 vector: 12 + 2 + 1;
 *   isa 0 (16 xmm, a vector in 4): 2 rows × 1 vector: 8 + 4 + 1 (+1 for the product, no FMA). */
CELLS_PANEL_INLINE int FN(panel_mr)(int isa) { return isa == 4 ? 6 : isa == 3 ? 6 : 2; }
CELLS_PANEL_INLINE int FN(panel_nvt)(int isa) { return isa == 4 ? CELLS_PANEL_NV : 1; }

/* Independent accumulator sets for an m × nv tile. The FMAs into one accumulator form a chain,
 * so latency × issue width (4 cycles × 2 FMA units, on recent x86) registers' worth must be in
 * flight: ku sets over alternate k's (set u takes k % ku == u), added at the end. */
CELLS_PANEL_INLINE int FN(panel_ku)(int isa, int m, int nv) {
    const int regs = m * nv * (isa == 4 ? 1 : isa == 3 ? 2 : 4); /* per set */
    const int ku = 8 / regs;
    return ku < 1 ? 1 : ku > CELLS_PANEL_KU_MAX ? CELLS_PANEL_KU_MAX : ku;
}

/* The micro-kernel: C[m, w] = A[m, K]·Pv[K, 0..w) + beta·C, for m, nv, ku constants (once
 * inlined), m <= CELLS_PANEL_MR_MAX, nv <= CELLS_PANEL_NV, ku <= CELLS_PANEL_KU_MAX.
 *   A:  [m, lda >= K], read only in its K columns
 *   Pv: nv vectors of each of the K rows of a panel ([K, NR] from the panel's start; Pv may
 *       start at one of its vectors), so Pv[k·NR + j], j < nv·VL
 *   C:  [m, ldc >= w], w <= nv·VL; with beta = 0 only written, never read
 * The ku sets change the order of the sum (not its error bound). */
CELLS_PANEL_INLINE void FN(panel_tile)(const int m, const int nv, const int ku, ptrdiff_t K,
                                       const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                       const REAL *CELLS_RESTRICT Pv, REAL beta,
                                       REAL *CELLS_RESTRICT C, ptrdiff_t ldc, ptrdiff_t w) {
    enum { NR = CELLS_PANEL_BYTES / sizeof(REAL), VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    FN(panel_vec) acc[CELLS_PANEL_KU_MAX][CELLS_PANEL_MR_MAX][CELLS_PANEL_NV];
    CELLS_PANEL_UNROLL
    for (int u = 0; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_zero)(&acc[u][r][v]);

    ptrdiff_t k = 0;
    for (; k + ku <= K; k += ku) {
        CELLS_PANEL_UNROLL
        for (int u = 0; u < ku; ++u) {
            const REAL *p = Pv + (k + u) * NR;
            FN(panel_vec) b[CELLS_PANEL_NV];
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_load)(&b[v], p + v * VL);
            CELLS_PANEL_BARRIER();
            CELLS_PANEL_UNROLL
            for (int r = 0; r < m; ++r) {
                const REAL a = A[r * lda + k + u];
                CELLS_PANEL_UNROLL
                for (int v = 0; v < nv; ++v)
                    FN(panel_fma)(&acc[u][r][v], a, &b[v]);
                CELLS_PANEL_BARRIER();
            }
        }
    }
    for (; k < K; ++k) { /* the last K % ku k's */
        const REAL *p = Pv + k * NR;
        FN(panel_vec) b[CELLS_PANEL_NV];
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v)
            FN(panel_load)(&b[v], p + v * VL);
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r) {
            const REAL a = A[r * lda + k];
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_fma)(&acc[0][r][v], a, &b[v]);
        }
    }
    CELLS_PANEL_UNROLL
    for (int u = 1; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_add)(&acc[0][r][v], &acc[u][r][v]);

    if (w == nv * VL) {
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v) {
                REAL *c = C + r * ldc + v * VL;
                if (beta != 0) {
                    FN(panel_vec) c0;
                    FN(panel_load)(&c0, c);
                    FN(panel_fma)(&acc[0][r][v], beta, &c0);
                }
                FN(panel_store)(c, &acc[0][r][v]);
            }
    } else { /* a partial last panel: through a tile on the stack, so that C's columns from w
              * on are neither read nor written */
        REAL t[CELLS_PANEL_MR_MAX][NR];
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_store)(t[r] + v * VL, &acc[0][r][v]);
        for (int r = 0; r < m; ++r) {
            REAL *c = C + r * ldc;
            if (beta != 0)
                for (ptrdiff_t j = 0; j < w; ++j)
                    c[j] = t[r][j] + beta * c[j];
            else
                for (ptrdiff_t j = 0; j < w; ++j)
                    c[j] = t[r][j];
        }
    }
}

/* One tile of m rows and nv vectors, m and nv run-time values: each (m, nv) case the blocking
 * of `isa` can produce is its own register-blocked kernel. */
CELLS_PANEL_INLINE void FN(panel_tile_any)(const int isa, int m, int nv, ptrdiff_t K,
                                           const REAL *A, ptrdiff_t lda, const REAL *Pv,
                                           REAL beta, REAL *C, ptrdiff_t ldc, ptrdiff_t w) {
    const int mr = FN(panel_mr)(isa), nvt = FN(panel_nvt)(isa);
#define CELLS_PANEL_CASE_NV(c, v)                                                            \
    case v:                                                                                  \
        if (v <= nvt)                                                                        \
            FN(panel_tile)(c, v, FN(panel_ku)(isa, c, v), K, A, lda, Pv, beta, C, ldc, w);   \
        break;
#define CELLS_PANEL_CASE(c)                                                                  \
    case c:                                                                                  \
        if (c <= mr)                                                                         \
            switch (nv) {                                                                    \
                CELLS_PANEL_CASE_NV(c, 1)                                                    \
                CELLS_PANEL_CASE_NV(c, 2)                                                    \
                CELLS_PANEL_CASE_NV(c, 4)                                                    \
            default:                                                                         \
                break;                                                                       \
            }                                                                                \
        break;
    switch (m) {
        CELLS_PANEL_CASE(1)
        CELLS_PANEL_CASE(2)
        CELLS_PANEL_CASE(3)
        CELLS_PANEL_CASE(4)
        CELLS_PANEL_CASE(5)
        CELLS_PANEL_CASE(6)
    default:
        break;
    }
#undef CELLS_PANEL_CASE
#undef CELLS_PANEL_CASE_NV
}

/* gemm_panels for one instruction set (isa a constant once inlined).
 * Rows: ceil(M / mr) tiles of as equal a height as possible (M = 8: 4 + 4, not 6 + 2), since a
 * tile of few rows runs far below the FMA rate. Columns: panel by panel, each in tiles of nvt
 * vectors; in a partial last panel only the vectors holding its w columns are computed (a
 * count of 3 rounds up to 4, the padding being zeros). Panels outer, rows inner: a panel is
 * read from L2 once and by the following row tiles from L1 where it fits (K·256 bytes). No
 * blocking of K: for K up to 2048 blocks of 192-512 measured no faster. */
CELLS_PANEL_INLINE void FN(panel_gemm)(const int isa, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                       const REAL *A, ptrdiff_t lda, const REAL *P, REAL beta,
                                       REAL *C, ptrdiff_t ldc) {
    enum { NR = CELLS_PANEL_BYTES / sizeof(REAL), VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    const int mr = FN(panel_mr)(isa), nvt = FN(panel_nvt)(isa);
    if (M <= 0)
        return;
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += NR) {
        const ptrdiff_t wp = n - j0 < NR ? n - j0 : NR;  /* columns of this panel */
        const int nvp = (int)((wp + VL - 1) / VL);         /* vectors holding them */
        const REAL *Pp = P + j0 * K;                       /* panel j0 / NR */
        for (int v0 = 0; v0 < nvp; v0 += nvt) {
            int nv = nvp - v0 < nvt ? nvp - v0 : nvt;
            nv = nv == 3 ? 4 : nv;
            const ptrdiff_t w = wp - v0 * VL < nv * VL ? wp - v0 * VL : nv * VL;
            ptrdiff_t i = 0;
            for (ptrdiff_t t = 0; t < tiles; ++t) {
                const int m = (int)(rows + (t < taller));
                FN(panel_tile_any)(isa, m, nv, K, A + i * lda, lda, Pp + v0 * VL, beta,
                                   C + i * ldc + j0 + v0 * VL, ldc, w);
                i += m;
            }
        }
    }
}

/* The AVX-512 and AVX2 builds of panel_gemm, where the compiler's flags do not already give
 * them (the base build is in gemm_panels itself). */
#if CELLS_PANEL_X86 && CELLS_PANEL_BASE_ISA < 4
CELLS_PANEL_V4 FN(gemm_panels_v4)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                  const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                  const REAL *CELLS_RESTRICT P, REAL beta,
                                  REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    FN(panel_gemm)(4, M, n, K, A, lda, P, beta, C, ldc);
}
#endif
#if CELLS_PANEL_X86 && CELLS_PANEL_BASE_ISA < 3
CELLS_PANEL_V3 FN(gemm_panels_v3)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                  const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                  const REAL *CELLS_RESTRICT P, REAL beta,
                                  REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    FN(panel_gemm)(3, M, n, K, A, lda, P, beta, C, ldc);
}
#endif

/* C = A·op(B) + beta·C, op(B) [K, n] packed in P by FN(pack_panels).
 *   A: [M, lda >= K], read only in its M rows × K columns
 *   P: FN(panel_len)(K, n) elements (see the top of this file)
 *   C: [M, ldc >= n], written only in its M rows × n columns; with beta = 0 never read (it may
 *      hold NaN), otherwise C = A·op(B) + beta·C (beta = 1 accumulates exactly)
 * M = 0 or n = 0 does nothing; K = 0 sets C = beta·C. Single-threaded: threads each call it on
 * their own panels (see the top of this file). Runs the AVX-512, AVX2 or baseline build, the
 * best the CPU has (cells_panel_isa). */
CELLS_FN void FN(gemm_panels)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                              const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                              const REAL *CELLS_RESTRICT P, REAL beta,
                              REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
#if CELLS_PANEL_X86 && CELLS_PANEL_BASE_ISA < 4
    const int isa = cells_panel_isa();
    if (isa == 4) {
        FN(gemm_panels_v4)(M, n, K, A, lda, P, beta, C, ldc);
        return;
    }
#if CELLS_PANEL_BASE_ISA < 3
    if (isa == 3) {
        FN(gemm_panels_v3)(M, n, K, A, lda, P, beta, C, ldc);
        return;
    }
#endif
#endif
    FN(panel_gemm)(CELLS_PANEL_BASE_ISA, M, n, K, A, lda, P, beta, C, ldc);
}
