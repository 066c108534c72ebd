/* Packed-panel gemm: C[M, n] = A[M, K]·op(B) (+ bias) + beta·C for a B used many times.
 *
 * Compiled for float and double by panel.h through instantiate.h (REAL, and FN(name) naming
 * cells_*_f / cells_*_d). All matrices are row-major.
 *
 * Use: once per call of a time loop, P = FN(pack_panels)(the weights); at every step,
 * FN(gemm_panels)(state, P). P holds op(B) [K, n] in panels of NR = CELLS_PANEL_BYTES /
 * sizeof(REAL) columns (64 floats, 32 doubles): panel p holds columns [p·NR, p·NR + NR),
 * k-major,
 *   P[p·K·NR + k·NR + j] = op(B)[k, p·NR + j],   zero where p·NR + j >= n,
 * so the kernels stream a panel with unit stride whatever B's layout was. A is read in place.
 * C is computed in tiles of up to 6 rows by one panel (AVX-512; by one 64-byte vector of it
 * with AVX2 or less), each accumulated in registers over the whole of K: every A element of
 * the tile's rows is broadcast against a row of the panel.
 *
 * Threads: each may pack and multiply its own columns (its own P), or share one P taking whole
 * panels: columns from p·NR on are computed by passing P + p·K·NR and C + p·NR, and packed by
 * passing B's columns from p·NR on (B + p·NR, or B + p·NR·ldb when transB) and P + p·K·NR.
 * Every function here is single-threaded, allocates nothing and takes no lock.
 *
 * P should start on a CELLS_PANEL_ALIGN (64) byte boundary (FN(panel_aligned)); every panel
 * then does, its length K·NR elements being a multiple of 64 bytes.
 */

/* Panel width NR in elements: 64 (float) or 32 (double), whatever CPU runs the code. */
CELLS_FN ptrdiff_t FN(panel_width)(void) { return CELLS_PANEL_BYTES / (ptrdiff_t)sizeof(REAL); }

/* Elements of the packed copy of a [K, n] matrix: K · roundup(n, NR). */
CELLS_FN size_t FN(panel_len)(ptrdiff_t K, ptrdiff_t n) {
    const ptrdiff_t nr = FN(panel_width)();
    return (size_t)K * (size_t)((n + nr - 1) / nr * nr);
}

/* The first CELLS_PANEL_ALIGN-byte boundary in buf (buf itself if aligned): a buffer of
 * FN(panel_len)(K, n) + CELLS_PANEL_ALIGN / sizeof(REAL) - 1 elements holds an aligned P. */
CELLS_FN REAL *FN(panel_aligned)(REAL *buf) {
    const uintptr_t mis = (uintptr_t)buf % CELLS_PANEL_ALIGN;
    return mis ? (REAL *)((char *)buf + (CELLS_PANEL_ALIGN - mis)) : buf;
}

/* P = op(B) [K, n] in panels (see the top of this file); P holds FN(panel_len)(K, n) elements.
 *   transB = 0: B is [K, ldb >= n], op(B) = B.
 *   transB = 1: B is [n, ldb >= K], op(B) = Bᵀ (row j of B is column j of op(B)); this is what
 *               a backward pass needs for dz·Whᵀ with Wh stored [H, G].
 * Reads only the K·n elements of op(B), writes all FN(panel_len)(K, n) of P; Bᵀ is
 * transposed in vectors where it can be (panel.h, CELLS_PANEL_TRANSPOSE), which runs at about
 * twice the rate of a copy element by element. */
CELLS_ROW FN(pack_panels_any)(ptrdiff_t K, ptrdiff_t n, const REAL *CELLS_RESTRICT B,
                              ptrdiff_t ldb, int transB, REAL *CELLS_RESTRICT P) {
    /* A row loop, compiled for each instruction set (FN(pack_panels) below). Compiled for the
     * baseline alone and inlined into the time loop, its copy becomes a memmove call or SSE2
     * moves, whichever the build chooses, and the calls that pack run slower. */
    enum { NR = CELLS_PANEL_BYTES / sizeof(REAL) };
    for (ptrdiff_t j0 = 0; j0 < n; j0 += NR) {
        const ptrdiff_t w = n - j0 < NR ? n - j0 : NR;
        REAL *Pp = P + j0 * K; /* panel j0 / NR starts at (j0 / NR)·K·NR */
        if (!transB) {
            for (ptrdiff_t k = 0; k < K; ++k) {
                const REAL *b = B + k * ldb + j0;
                REAL *p = Pp + k * NR;
                if (w == NR) { /* a whole panel row: a copy of constant length */
                    for (ptrdiff_t j = 0; j < NR; ++j)
                        p[j] = b[j];
                    continue;
                }
                for (ptrdiff_t j = 0; j < w; ++j)
                    p[j] = b[j];
                for (ptrdiff_t j = w; j < NR; ++j)
                    p[j] = 0;
            }
        } else {
            /* Transpose blocks of KB k's by the panel's columns: B's rows are read a cache line
             * (64 bytes) at a time, and the KB panel rows written (KB·256 bytes) stay in L1.
             * Within them, blocks of V by V (32 bytes by 32) are transposed in vectors
             * (panel.h, CELLS_PANEL_TRANSPOSE), and what they leave element by element. */
            enum { KB = 64 / sizeof(REAL), V = 32 / sizeof(REAL) };
            for (ptrdiff_t k0 = 0; k0 < K; k0 += KB) {
                const ptrdiff_t kb = K - k0 < KB ? K - k0 : KB;
                REAL *p = Pp + k0 * NR;
#if CELLS_PANEL_TRANSPOSE
                const ptrdiff_t kv = kb / V * V, jv = w / V * V;
                for (ptrdiff_t j = 0; j < jv; j += V)
                    for (ptrdiff_t k = 0; k < kv; k += V)
                        FN(panel_transpose)(B + (j0 + j) * ldb + k0 + k, ldb, p + k * NR + j, NR);
#else
                const ptrdiff_t kv = 0, jv = 0;
#endif
                for (ptrdiff_t j = 0; j < w; ++j) {
                    const REAL *b = B + (j0 + j) * ldb + k0;
                    for (ptrdiff_t k = j < jv ? kv : 0; k < kb; ++k)
                        p[k * NR + j] = b[k];
                }
                for (ptrdiff_t k = 0; k < kb; ++k)
                    for (ptrdiff_t j = w; j < NR; ++j)
                        p[k * NR + j] = 0;
            }
        }
    }
}
CELLS_ISA_VERSIONS(FN(pack_panels), FN(pack_panels_any),
                   (ptrdiff_t K, ptrdiff_t n, const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                    int transB, REAL *CELLS_RESTRICT P),
                   (K, n, B, ldb, transB, P))

/* One vector of the micro-kernel: CELLS_PANEL_VBYTES = 64 bytes, loaded and stored unaligned,
 * and its operations. With vector extensions it is held as what the instruction set `isa` (a
 * constant once inlined) has registers for: one 64-byte vector (isa 4: a zmm register), two of
 * 32 bytes (isa 3: ymm) or four of 16 (isa 0: xmm, or NEON's q registers). A 64-byte vector
 * type alone would do for all three in principle, but GCC (12) keeps one in memory wherever the
 * instruction set has no 64-byte registers: the AVX2 kernels then ran from the stack.
 * The operations take pointers, as a 64-byte vector passed by value changes the ABI where
 * AVX-512 is off (-Wpsabi); always inlined, the pointers vanish. c + a·b contracts to an FMA
 * where the instruction set has one (see CELLS_PANEL_KERNELS). */
#if CELLS_PANEL_VECTOR
typedef REAL FN(panel_v64) __attribute__((vector_size(64), aligned(sizeof(REAL)), may_alias));
typedef REAL FN(panel_v32) __attribute__((vector_size(32), aligned(sizeof(REAL)), may_alias));
typedef REAL FN(panel_v16) __attribute__((vector_size(16), aligned(sizeof(REAL)), may_alias));
typedef union {
    FN(panel_v64) z;    /* isa 4 */
    FN(panel_v32) y[2]; /* isa 3 */
    FN(panel_v16) x[4]; /* isa 0 */
} FN(panel_vec);

CELLS_PANEL_INLINE void FN(panel_zero)(const int isa, FN(panel_vec) *v) {
    if (isa == 4) {
        v->z = (FN(panel_v64)){0};
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) v->y[h] = (FN(panel_v32)){0};
    } else {
        for (int h = 0; h < 4; ++h) v->x[h] = (FN(panel_v16)){0};
    }
}
CELLS_PANEL_INLINE void FN(panel_load)(const int isa, FN(panel_vec) *v, const REAL *p) {
    if (isa == 4) {
        v->z = *(const FN(panel_v64) *)p;
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) v->y[h] = *(const FN(panel_v32) *)(p + h * 32 / sizeof(REAL));
    } else {
        for (int h = 0; h < 4; ++h) v->x[h] = *(const FN(panel_v16) *)(p + h * 16 / sizeof(REAL));
    }
}
CELLS_PANEL_INLINE void FN(panel_store)(const int isa, REAL *p, const FN(panel_vec) *v) {
    if (isa == 4) {
        *(FN(panel_v64) *)p = v->z;
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) *(FN(panel_v32) *)(p + h * 32 / sizeof(REAL)) = v->y[h];
    } else {
        for (int h = 0; h < 4; ++h) *(FN(panel_v16) *)(p + h * 16 / sizeof(REAL)) = v->x[h];
    }
}
/* c += a·b, a broadcast */
CELLS_PANEL_INLINE void FN(panel_fma)(const int isa, FN(panel_vec) *c, REAL a,
                                      const FN(panel_vec) *b) {
    if (isa == 4) {
        c->z += a * b->z;
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) c->y[h] += a * b->y[h];
    } else {
        for (int h = 0; h < 4; ++h) c->x[h] += a * b->x[h];
    }
}
CELLS_PANEL_INLINE void FN(panel_add)(const int isa, FN(panel_vec) *c, const FN(panel_vec) *b) {
    if (isa == 4) {
        c->z += b->z;
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) c->y[h] += b->y[h];
    } else {
        for (int h = 0; h < 4; ++h) c->x[h] += b->x[h];
    }
}
/* c += a·b, element by element */
CELLS_PANEL_INLINE void FN(panel_fmav)(const int isa, FN(panel_vec) *c, const FN(panel_vec) *a,
                                       const FN(panel_vec) *b) {
    if (isa == 4) {
        c->z += a->z * b->z;
    } else if (isa == 3) {
        for (int h = 0; h < 2; ++h) c->y[h] += a->y[h] * b->y[h];
    } else {
        for (int h = 0; h < 4; ++h) c->x[h] += a->x[h] * b->x[h];
    }
}
#else /* plain C: an array, for the compiler to vectorise if it can */
#define CELLS_PANEL_VL (CELLS_PANEL_VBYTES / (int)sizeof(REAL))
typedef struct { REAL e[CELLS_PANEL_VBYTES / sizeof(REAL)]; } FN(panel_vec);

CELLS_PANEL_INLINE void FN(panel_zero)(const int isa, FN(panel_vec) *v) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) v->e[l] = 0;
}
CELLS_PANEL_INLINE void FN(panel_load)(const int isa, FN(panel_vec) *v, const REAL *p) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) v->e[l] = p[l];
}
CELLS_PANEL_INLINE void FN(panel_store)(const int isa, REAL *p, const FN(panel_vec) *v) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) p[l] = v->e[l];
}
CELLS_PANEL_INLINE void FN(panel_fma)(const int isa, FN(panel_vec) *c, REAL a,
                                      const FN(panel_vec) *b) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) c->e[l] += a * b->e[l];
}
CELLS_PANEL_INLINE void FN(panel_add)(const int isa, FN(panel_vec) *c, const FN(panel_vec) *b) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) c->e[l] += b->e[l];
}
CELLS_PANEL_INLINE void FN(panel_fmav)(const int isa, FN(panel_vec) *c, const FN(panel_vec) *a,
                                       const FN(panel_vec) *b) {
    (void)isa;
    for (int l = 0; l < CELLS_PANEL_VL; ++l) c->e[l] += a->e[l] * b->e[l];
}
#undef CELLS_PANEL_VL
#endif

/* The sum of v's elements, halves added to halves. (Through a copy in memory: read in halves
 * where it is, v would be kept in memory, stored and reloaded around every CELLS_PANEL_BARRIER
 * of the loop that accumulates it.) */
CELLS_PANEL_INLINE REAL FN(panel_sum)(const int isa, const FN(panel_vec) *v) {
    enum { VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    REAL e[VL];
    FN(panel_store)(isa, e, v);
    CELLS_PANEL_UNROLL
    for (int half = VL / 2; half >= 1; half /= 2)
        CELLS_PANEL_UNROLL
        for (int l = 0; l < half; ++l)
            e[l] += e[l + half];
    return e[0];
}

/* Register blocking for instruction set `isa` (see panel.h); constants once inlined.
 * A tile is m <= mr rows of C by nv <= nvt vectors of one panel; its m·nv vector accumulators,
 * times ku, stay in registers, with the panel row's nv vectors and one broadcast A element:
 *   isa 4 (32 zmm, a vector in 1): 6 rows × the whole panel (4 vectors): 24 + 4 + 1 registers;
 *   isa 3 (16 ymm, a vector in 2): 6 rows × 1 vector: 12 + 2 + 1;
 *   isa 0 (16 xmm, a vector in 4): 2 rows × 1 vector: 8 + 4 + 1 (+1 for the product, no FMA). */
CELLS_PANEL_INLINE int FN(panel_mr)(int isa) { return isa == 4 ? 6 : isa == 3 ? 6 : 2; }
CELLS_PANEL_INLINE int FN(panel_nvt)(int isa) { return isa == 4 ? CELLS_PANEL_NV : 1; }

/* The blocking of the fixed-order products (CELLS_PANEL_FIXED_ORDER): ku = 2 sets in every
 * tile, whatever its rows, so that an element's sum over K runs in one order (the k's of each
 * parity, then the two sums added) in a tile of any height; hence tiles of at most 3 rows,
 * whose 3 × 4 × 2 zmm accumulators (isa 4) or 3 × 2 × 2 ymm (isa 3) fit the registers beside
 * the panel row. The baseline has no FMA and keeps one set. */
CELLS_PANEL_INLINE int FN(panel_fixed_ku)(int isa) { return isa == 0 ? 1 : 2; }
CELLS_PANEL_INLINE int FN(panel_fixed_mr)(int isa) { return isa == 0 ? 2 : 3; }

/* The dot-product tiles of gemm_nt: m <= dot_mr rows of A by q <= dot_qr rows of B, m·q vector
 * accumulators (times ku), with a vector of each of the m + q rows:
 *   isa 4: 4 × 4 (16 + 8 zmm);  isa 3: 2 × 2 (8 + 8 ymm);  isa 0: 1 × 1 (4 + 8 xmm). */
CELLS_PANEL_INLINE int FN(panel_dot_mr)(int isa) { return isa == 4 ? 4 : isa == 3 ? 2 : 1; }
CELLS_PANEL_INLINE int FN(panel_dot_qr)(int isa) { return isa == 4 ? 4 : isa == 3 ? 2 : 1; }

/* Independent accumulator sets for an m × nv tile. The FMAs into one accumulator form a chain,
 * so at least latency × issue width (4 cycles × 2 FMA units, on recent x86) registers' worth
 * must be in flight: ku sets over alternate k's (set u takes k % ku == u), added at the end,
 * up to 16 zmm (isa 4: more than the 8 the latency asks for, as fast or faster) or 8 ymm. */
CELLS_PANEL_INLINE int FN(panel_ku)(int isa, int m, int nv) {
    if (isa == 0) /* no FMA; and 2 sets of one 4-xmm row already spilled */
        return 1;
    const int regs = m * nv * (isa == 4 ? 1 : isa == 3 ? 2 : 4); /* per set */
    const int ku = (isa == 4 ? 16 : 8) / regs;
    return ku < 1 ? 1 : ku > CELLS_PANEL_KU_MAX ? CELLS_PANEL_KU_MAX : ku;
}

/* A tile's accumulators: ku sets (over alternate k's, or vectors of K) of up to
 * CELLS_PANEL_MR_MAX rows by CELLS_PANEL_NV vectors. A tile zeroes m rows by nv vectors of each
 * set before its products, and adds every set into set 0 after them. */
typedef FN(panel_vec) FN(panel_acc)[CELLS_PANEL_MR_MAX][CELLS_PANEL_NV];
CELLS_PANEL_INLINE void FN(panel_acc_zero)(const int isa, const int ku, const int m,
                                           const int nv, FN(panel_acc) *acc) {
    CELLS_PANEL_UNROLL
    for (int u = 0; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_zero)(isa, &acc[u][r][v]);
}
CELLS_PANEL_INLINE void FN(panel_acc_fold)(const int isa, const int ku, const int m,
                                           const int nv, FN(panel_acc) *acc) {
    CELLS_PANEL_UNROLL
    for (int u = 1; u < ku; ++u)
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_add)(isa, &acc[0][r][v], &acc[u][r][v]);
}

/* The products of a tile (panel_tile): adds to acc[u][r][v] (zeroed by the caller) the sum over
 * the k's of set u of A's element (r, k) (at A[r·ar + k·ak]) times vector v of Pv's row k (at
 * Pv + k·pk), for the m × nv tile of `isa` in ku sets; with pf, panel rows (and with tn, A's rows, lda apart) are
 * prefetched CELLS_PANEL_PREFETCH_ROWS ahead. Constants once inlined, but K and the strides. */
CELLS_PANEL_INLINE void FN(panel_products)(const int isa, const int m, const int nv,
                                           const int ku, ptrdiff_t K,
                                           const REAL *CELLS_RESTRICT A, ptrdiff_t ak,
                                           ptrdiff_t ar, const REAL *CELLS_RESTRICT Pv,
                                           ptrdiff_t pk, const int pf, const int tn,
                                           ptrdiff_t lda, FN(panel_acc) *acc) {
    enum { VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    ptrdiff_t k = 0;
    for (; k + ku <= K; k += ku) {
        CELLS_PANEL_UNROLL
        for (int u = 0; u < ku; ++u) {
            const REAL *p = Pv + (k + u) * pk;
            if (pf) {
                CELLS_PANEL_UNROLL
                for (int v = 0; v < nv; ++v)
                    CELLS_PANEL_PREFETCH_ROW(p + CELLS_PANEL_PREFETCH_ROWS * pk + v * VL);
                if (tn)
                    CELLS_PANEL_PREFETCH_ROW(A + (k + u + CELLS_PANEL_PREFETCH_ROWS) * lda);
            }
            FN(panel_vec) b[CELLS_PANEL_NV];
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_load)(isa, &b[v], p + v * VL);
            CELLS_PANEL_BARRIER();
            CELLS_PANEL_UNROLL
            for (int r = 0; r < m; ++r) {
                const REAL a = A[r * ar + (k + u) * ak];
                CELLS_PANEL_UNROLL
                for (int v = 0; v < nv; ++v)
                    FN(panel_fma)(isa, &acc[u][r][v], a, &b[v]);
                CELLS_PANEL_BARRIER();
            }
        }
    }
    for (; k < K; ++k) { /* the last K % ku k's */
        const REAL *p = Pv + k * pk;
        FN(panel_vec) b[CELLS_PANEL_NV];
        CELLS_PANEL_UNROLL
        for (int v = 0; v < nv; ++v)
            FN(panel_load)(isa, &b[v], p + v * VL);
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r) {
            const REAL a = A[r * ar + k * ak];
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_fma)(isa, &acc[0][r][v], a, &b[v]);
        }
    }
}

#if CELLS_PANEL_ASM_AVX2
/* panel_products for isa 3 at m = 6, nv = 1, ku = 1 on a packed panel, in assembly (see
 * CELLS_PANEL_ASM_AVX2 in panel.h): acc[r][0] = Σ_k A[r·lda + k]·Pv[k·NR .. k·NR + VL), k in
 * increasing order, one FMA a k and row, as the C does; with pf, panel rows prefetched.
 * Volatile: its only output is acc, written through a pointer. */
CELLS_PANEL_INLINE void FN(panel_avx2_6x1)(ptrdiff_t K, const REAL *CELLS_RESTRICT A,
                                           ptrdiff_t lda, const REAL *CELLS_RESTRICT Pv,
                                           const int pf, FN(panel_vec) acc[][CELLS_PANEL_NV]) {
    const REAL *p = Pv, *a0 = A, *a1 = A + 3 * lda;
    ptrdiff_t n4 = K / 4, n1 = K % 4;
    const ptrdiff_t ld = lda * (ptrdiff_t)sizeof(REAL);
    if (sizeof(REAL) == 4 && pf)
        __asm__ volatile(CELLS_PANEL_ASM_TILE(CELLS_PANEL_ASM_PREFETCH, "vbroadcastss",
                                              "vfmadd231ps", 4, 8, 12, 16)
                         CELLS_PANEL_ASM_OPERANDS(p, a0, a1, n4, n1, ld, acc));
    else if (sizeof(REAL) == 4)
        __asm__ volatile(CELLS_PANEL_ASM_TILE(CELLS_PANEL_ASM_NO_PREFETCH, "vbroadcastss",
                                              "vfmadd231ps", 4, 8, 12, 16)
                         CELLS_PANEL_ASM_OPERANDS(p, a0, a1, n4, n1, ld, acc));
    else if (pf)
        __asm__ volatile(CELLS_PANEL_ASM_TILE(CELLS_PANEL_ASM_PREFETCH, "vbroadcastsd",
                                              "vfmadd231pd", 8, 16, 24, 32)
                         CELLS_PANEL_ASM_OPERANDS(p, a0, a1, n4, n1, ld, acc));
    else
        __asm__ volatile(CELLS_PANEL_ASM_TILE(CELLS_PANEL_ASM_NO_PREFETCH, "vbroadcastsd",
                                              "vfmadd231pd", 8, 16, 24, 32)
                         CELLS_PANEL_ASM_OPERANDS(p, a0, a1, n4, n1, ld, acc));
}
#endif

/* The micro-kernel: C[m, w] = A[m, K]·Pv[K, 0..w), plus C with flag CELLS_PANEL_ADD, for isa,
 * m <= CELLS_PANEL_MR_MAX, nv <= CELLS_PANEL_NV, ku <= CELLS_PANEL_KU_MAX and in_place
 * constants once inlined.
 *   A:  [m, lda >= K], read only in its K columns; with in_place and flag CELLS_PANEL_TN, Aᵀ:
 *       A is [K, lda >= m] and the tile multiplies its m columns (element (r, k) at
 *       A[k·lda + r])
 *   Pv: nv vectors of each of the K rows of a panel ([K, NR] from the panel's start; Pv may
 *       start at one of its vectors), so Pv[k·NR + j], j < nv·VL; with in_place, any
 *       row-major matrix read in place, Pv[k·ldp + j] (its rows need not be padded: w = nv·VL,
 *       or Pv holds nv·VL readable columns). The panel's stride is a constant: a run-time one
 *       slows the packed tiles.
 *   bias: [w], added to every row of the product with CELLS_PANEL_BIAS (else not read)
 *   C:  [m, ldc >= w], w <= nv·VL; read only with CELLS_PANEL_ADD
 * With CELLS_PANEL_PREFETCH, tiles of 4 or more rows prefetch the panel rows (with
 * CELLS_PANEL_TN, A's rows too) CELLS_PANEL_PREFETCH_ROWS ahead (smaller ones have no load
 * slots to spare). The ku sets change the order of the sum (not its error bound). */
CELLS_PANEL_INLINE void FN(panel_tile)(const int isa, const int m, const int nv, const int ku,
                                       const int in_place, ptrdiff_t K,
                                       const REAL *CELLS_RESTRICT A,
                                       ptrdiff_t lda, const REAL *CELLS_RESTRICT Pv,
                                       ptrdiff_t ldp, const REAL *CELLS_RESTRICT bias,
                                       int flags, REAL *CELLS_RESTRICT C, ptrdiff_t ldc,
                                       ptrdiff_t w) {
    enum { NR = CELLS_PANEL_BYTES / sizeof(REAL), VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    const int pf = m >= 4 && (flags & CELLS_PANEL_PREFETCH);
    const int tn = in_place && (flags & CELLS_PANEL_TN);
    const ptrdiff_t pk = in_place ? ldp : NR; /* from one row of Pv to the next */
    const ptrdiff_t ak = tn ? lda : 1;        /* from A's element (r, k) to (r, k + 1) */
    const ptrdiff_t ar = tn ? 1 : lda;        /* ... to (r + 1, k) */
    FN(panel_acc) acc[CELLS_PANEL_KU_MAX];
    FN(panel_acc_zero)(isa, ku, m, nv, acc);

#if CELLS_PANEL_ASM_AVX2
    const int in_asm = isa == 3 && m == 6 && nv == 1 && ku == 1 && !in_place;
    if (in_asm)
        FN(panel_avx2_6x1)(K, A, lda, Pv, pf, acc[0]);
#else
    const int in_asm = 0;
#endif
    if (!in_asm)
        FN(panel_products)(isa, m, nv, ku, K, A, ak, ar, Pv, pk, pf, tn, lda, acc);
    FN(panel_acc_fold)(isa, ku, m, nv, acc);

    if (w == nv * VL) {
        if (flags & CELLS_PANEL_BIAS)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v) {
                FN(panel_vec) bv;
                FN(panel_load)(isa, &bv, bias + v * VL);
                CELLS_PANEL_UNROLL
                for (int r = 0; r < m; ++r)
                    FN(panel_add)(isa, &acc[0][r][v], &bv);
            }
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v) {
                REAL *c = C + r * ldc + v * VL;
                if (flags & CELLS_PANEL_ADD) {
                    FN(panel_vec) c0;
                    FN(panel_load)(isa, &c0, c);
                    FN(panel_add)(isa, &acc[0][r][v], &c0);
                }
                FN(panel_store)(isa, c, &acc[0][r][v]);
            }
    } else { /* a partial last panel: through a tile on the stack, so that C's columns from w
              * on are neither read nor written */
        REAL t[CELLS_PANEL_MR_MAX][NR];
        CELLS_PANEL_UNROLL
        for (int r = 0; r < m; ++r)
            CELLS_PANEL_UNROLL
            for (int v = 0; v < nv; ++v)
                FN(panel_store)(isa, t[r] + v * VL, &acc[0][r][v]);
        for (int r = 0; r < m; ++r) {
            REAL *c = C + r * ldc;
            if (flags & CELLS_PANEL_BIAS)
                for (ptrdiff_t j = 0; j < w; ++j)
                    t[r][j] += bias[j];
            if (flags & CELLS_PANEL_ADD)
                for (ptrdiff_t j = 0; j < w; ++j)
                    c[j] += t[r][j];
            else
                for (ptrdiff_t j = 0; j < w; ++j)
                    c[j] = t[r][j];
        }
    }
}

/* One vector of K in a dot-product tile: acc[r][c] += A[r, 0..VL)·B[c, 0..VL), element by
 * element (A [m, lda], B [q, ldb]); every vector is loaded once, before the m·q FMAs (see
 * CELLS_PANEL_BARRIER). */
CELLS_PANEL_INLINE void FN(panel_dot_vector)(const int isa, const int m, const int q,
                                             const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                             const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                                             FN(panel_vec) acc[][CELLS_PANEL_NV]) {
    FN(panel_vec) a[CELLS_PANEL_MR_MAX], b[CELLS_PANEL_NV];
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        FN(panel_load)(isa, &a[r], A + r * lda);
    CELLS_PANEL_UNROLL
    for (int c = 0; c < q; ++c)
        FN(panel_load)(isa, &b[c], B + c * ldb);
    CELLS_PANEL_BARRIER();
    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int c = 0; c < q; ++c)
            FN(panel_fmav)(isa, &acc[r][c], &a[r], &b[c]);
}

/* The dot-product tile of gemm_nt: C[m, q] = A[m, K]·B[q, K]ᵀ (+ bias) (+ C with
 * CELLS_PANEL_ADD), for isa, m <= CELLS_PANEL_MR_MAX, q <= CELLS_PANEL_NV and ku <=
 * CELLS_PANEL_KU_MAX constants once inlined. Each element of C is one dot product of a row of A
 * and a row of B, both read with unit stride: accumulated in vectors (ku sets over alternate
 * vectors of K), then summed across (panel_sum); the last K % VL terms are scalar.
 *   A: [m, lda >= K], B: [q, ldb >= K], each read only in its K columns
 *   bias: [q], added with CELLS_PANEL_BIAS (else not read)
 *   C: [m, ldc >= q]; read only with CELLS_PANEL_ADD */
CELLS_PANEL_INLINE void FN(panel_dot_tile)(const int isa, const int m, const int q,
                                           const int ku, ptrdiff_t K,
                                           const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                           const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                                           const REAL *CELLS_RESTRICT bias, int flags,
                                           REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    enum { VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    const ptrdiff_t Kv = K - K % VL; /* the vectors of K end here */
    FN(panel_acc) acc[CELLS_PANEL_KU_MAX];
    FN(panel_acc_zero)(isa, ku, m, q, acc);

    ptrdiff_t k = 0;
    for (; k + ku * VL <= Kv; k += ku * VL)
        CELLS_PANEL_UNROLL
        for (int u = 0; u < ku; ++u)
            FN(panel_dot_vector)(isa, m, q, A + k + u * VL, lda, B + k + u * VL, ldb, acc[u]);
    for (; k < Kv; k += VL) /* the last Kv / VL % ku vectors */
        FN(panel_dot_vector)(isa, m, q, A + k, lda, B + k, ldb, acc[0]);
    FN(panel_acc_fold)(isa, ku, m, q, acc);

    CELLS_PANEL_UNROLL
    for (int r = 0; r < m; ++r)
        CELLS_PANEL_UNROLL
        for (int c = 0; c < q; ++c) {
            REAL s = FN(panel_sum)(isa, &acc[0][r][c]);
            for (ptrdiff_t t = Kv; t < K; ++t)
                s += A[r * lda + t] * B[c * ldb + t];
            if (flags & CELLS_PANEL_BIAS)
                s += bias[c];
            REAL *out = C + r * ldc + c;
            *out = (flags & CELLS_PANEL_ADD) ? *out + s : s;
        }
}

/* One tile of m rows and nv vectors, m, nv and where B is (flag CELLS_PANEL_IN_PLACE) run-time
 * values: each case the blocking of `isa` can produce is its own register-blocked kernel (with
 * CELLS_PANEL_FIXED_ORDER, m <= panel_fixed_mr). */
CELLS_PANEL_INLINE void FN(panel_tile_any)(const int isa, int m, int nv, ptrdiff_t K,
                                           const REAL *A, ptrdiff_t lda, const REAL *Pv,
                                           ptrdiff_t ldp, const REAL *bias, int flags, REAL *C,
                                           ptrdiff_t ldc, ptrdiff_t w) {
    const int mr = FN(panel_mr)(isa), nvt = FN(panel_nvt)(isa);
    const int fixed_mr = FN(panel_fixed_mr)(isa);
#define CELLS_PANEL_CASE_NV(c, v)                                                            \
    case v:                                                                                  \
        if (v <= nvt && (flags & CELLS_PANEL_IN_PLACE))                                      \
            FN(panel_tile)(isa, c, v, FN(panel_ku)(isa, c, v), 1, K, A, lda, Pv, ldp, bias,  \
                           flags, C, ldc, w);                                                \
        else if (v <= nvt && (flags & CELLS_PANEL_FIXED_ORDER)) {                            \
            if (c <= fixed_mr)                                                               \
                FN(panel_tile)(isa, c, v, FN(panel_fixed_ku)(isa), 0, K, A, lda, Pv, ldp,    \
                               bias, flags, C, ldc, w);                                      \
        } else if (v <= nvt)                                                                 \
            FN(panel_tile)(isa, c, v, FN(panel_ku)(isa, c, v), 0, K, A, lda, Pv, ldp, bias,  \
                           flags, C, ldc, w);                                                \
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

/* One dot-product tile of m rows of A by q rows of B (gemm_nt), m and q run-time values: each
 * (m, q) the blocking of `isa` can produce is its own register-blocked kernel. */
CELLS_PANEL_INLINE void FN(panel_dot_tile_any)(const int isa, int m, int q, ptrdiff_t K,
                                               const REAL *A, ptrdiff_t lda, const REAL *B,
                                               ptrdiff_t ldb, const REAL *bias, int flags,
                                               REAL *C, ptrdiff_t ldc) {
    const int mr = FN(panel_dot_mr)(isa), qr = FN(panel_dot_qr)(isa);
#define CELLS_PANEL_DOT_Q(c, v)                                                              \
    case v:                                                                                  \
        if (v <= qr)                                                                         \
            FN(panel_dot_tile)(isa, c, v, FN(panel_ku)(isa, c, v), K, A, lda, B, ldb, bias,  \
                               flags, C, ldc);                                               \
        break;
#define CELLS_PANEL_DOT_CASE(c)                                                              \
    case c:                                                                                  \
        if (c <= mr)                                                                         \
            switch (q) {                                                                     \
                CELLS_PANEL_DOT_Q(c, 1)                                                      \
                CELLS_PANEL_DOT_Q(c, 2)                                                      \
                CELLS_PANEL_DOT_Q(c, 3)                                                      \
                CELLS_PANEL_DOT_Q(c, 4)                                                      \
            default:                                                                         \
                break;                                                                       \
            }                                                                                \
        break;
    switch (m) {
        CELLS_PANEL_DOT_CASE(1)
        CELLS_PANEL_DOT_CASE(2)
        CELLS_PANEL_DOT_CASE(3)
        CELLS_PANEL_DOT_CASE(4)
    default:
        break;
    }
#undef CELLS_PANEL_DOT_CASE
#undef CELLS_PANEL_DOT_Q
}

/* The kernels of each blocking this build has (see CELLS_PANEL_KERNELS_<isa> in panel.h), each
 * (m, nv) or (m, q) that blocking produces being its own register-blocked kernel:
 * FN(panel_kernels_<isa>), a tile of m rows and nv vectors of a panel, and
 * FN(panel_dot_kernels_<isa>), a dot-product tile of gemm_nt. The dot kernels are functions of
 * their own: compiled into the panel kernels' function, they make those run slower in some
 * processes of the same binary (and in none without them). */
typedef void (*FN(panel_kernels))(int m, int nv, ptrdiff_t K, const REAL *A, ptrdiff_t lda,
                                  const REAL *Pv, ptrdiff_t ldp, const REAL *bias, int flags,
                                  REAL *C, ptrdiff_t ldc, ptrdiff_t w);
typedef void (*FN(panel_dot_kernels))(int m, int q, ptrdiff_t K, const REAL *A, ptrdiff_t lda,
                                      const REAL *B, ptrdiff_t ldb, const REAL *bias, int flags,
                                      REAL *C, ptrdiff_t ldc);
typedef struct {
    FN(panel_kernels) tiles;
    FN(panel_dot_kernels) dots;
} FN(panel_kernel_set);

#define CELLS_PANEL_DEFINE_KERNELS(isa)                                                      \
    CELLS_PANEL_KERNELS_##isa FN(panel_kernels_##isa)(                                       \
        int m, int nv, ptrdiff_t K, const REAL *A, ptrdiff_t lda, const REAL *Pv,            \
        ptrdiff_t ldp, const REAL *bias, int flags, REAL *C, ptrdiff_t ldc, ptrdiff_t w) {   \
        FN(panel_tile_any)(isa, m, nv, K, A, lda, Pv, ldp, bias, flags, C, ldc, w);          \
    }                                                                                        \
    CELLS_PANEL_KERNELS_##isa FN(panel_dot_kernels_##isa)(                                   \
        int m, int q, ptrdiff_t K, const REAL *A, ptrdiff_t lda, const REAL *B,              \
        ptrdiff_t ldb, const REAL *bias, int flags, REAL *C, ptrdiff_t ldc) {                \
        FN(panel_dot_tile_any)(isa, m, q, K, A, lda, B, ldb, bias, flags, C, ldc);           \
    }
#ifdef CELLS_PANEL_KERNELS_4
CELLS_PANEL_DEFINE_KERNELS(4)
#endif
#ifdef CELLS_PANEL_KERNELS_3
CELLS_PANEL_DEFINE_KERNELS(3)
#endif
#ifdef CELLS_PANEL_KERNELS_0
CELLS_PANEL_DEFINE_KERNELS(0)
#endif
#undef CELLS_PANEL_DEFINE_KERNELS

/* The blocking gemm_panels uses for instruction set `isa` (4, 3 or 0): the best this build
 * has that does not exceed it, else its lowest (CELLS_PANEL_BASE_ISA). */
CELLS_FN int FN(panel_blocking)(int isa) {
#ifdef CELLS_PANEL_KERNELS_4
    if (isa >= 4)
        return 4;
#endif
#ifdef CELLS_PANEL_KERNELS_3
    if (isa >= 3)
        return 3;
#endif
    (void)isa;
    return CELLS_PANEL_BASE_ISA;
}

/* The kernels of blocking `isa` (a value FN(panel_blocking) returns). */
CELLS_FN FN(panel_kernel_set) FN(panel_kernels_of)(int isa) {
    FN(panel_kernel_set) set = {0, 0};
#ifdef CELLS_PANEL_KERNELS_4
    if (isa == 4)
        set.tiles = FN(panel_kernels_4), set.dots = FN(panel_dot_kernels_4);
#endif
#ifdef CELLS_PANEL_KERNELS_3
    if (isa == 3)
        set.tiles = FN(panel_kernels_3), set.dots = FN(panel_dot_kernels_3);
#endif
#ifdef CELLS_PANEL_KERNELS_0
    if (isa == 0)
        set.tiles = FN(panel_kernels_0), set.dots = FN(panel_dot_kernels_0);
#endif
    return set;
}

/* C[M, n] *= beta, for a beta other than 0 and 1 (never in a time loop): the products then add
 * to C. */
CELLS_FN void FN(panel_scale)(ptrdiff_t M, ptrdiff_t n, REAL beta, REAL *C, ptrdiff_t ldc) {
    for (ptrdiff_t i = 0; i < M; ++i)
        for (ptrdiff_t j = 0; j < n; ++j)
            C[i * ldc + j] *= beta;
}

/* gemm_panels with blocking FN(panel_blocking)(isa); `fixed`: in fixed order
 * (CELLS_PANEL_FIXED_ORDER, at most panel_fixed_mr rows a tile).
 * Rows: ceil(M / mr) tiles of as equal a height as possible (M = 8: 4 + 4, not 6 + 2), since a
 * tile of few rows runs far below the FMA rate. Columns: panel by panel, each in tiles of nvt
 * vectors; in a partial last panel only the vectors holding its columns are computed (a count
 * of 3 rounds up to 4, the padding being zeros). Panels outer, rows inner (rows outer is
 * slower for K >= 1024). K is not split in blocks: for K up to 2048, blocking gains nothing. */
CELLS_FN void FN(panel_gemm)(int isa, int fixed, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                             const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                             const REAL *CELLS_RESTRICT P, const REAL *CELLS_RESTRICT bias,
                             REAL beta, REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    enum { NR = CELLS_PANEL_BYTES / sizeof(REAL), VL = CELLS_PANEL_VBYTES / sizeof(REAL) };
    isa = FN(panel_blocking)(isa);
    const FN(panel_kernels) kernels = FN(panel_kernels_of)(isa).tiles;
    const int mr = fixed ? FN(panel_fixed_mr)(isa) : FN(panel_mr)(isa);
    const int nvt = FN(panel_nvt)(isa);
    if (M <= 0 || n <= 0)
        return;
    if (beta != 0 && beta != 1)
        FN(panel_scale)(M, n, beta, C, ldc);
    const int flags = (beta != 0 ? CELLS_PANEL_ADD : 0) | (bias ? CELLS_PANEL_BIAS : 0)
                      | ((size_t)K * (size_t)n * sizeof(REAL) >= cells_panel_prefetch_bytes()
                                 ? CELLS_PANEL_PREFETCH : 0)
                      | (fixed ? CELLS_PANEL_FIXED_ORDER : 0);
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += NR) {
        const ptrdiff_t wp = n - j0 < NR ? n - j0 : NR; /* columns of this panel */
        const int nvp = (int)((wp + VL - 1) / VL);        /* vectors holding them */
        const REAL *Pp = P + j0 * K;                      /* panel j0 / NR */
        for (int v0 = 0; v0 < nvp; v0 += nvt) {
            int nv = nvp - v0 < nvt ? nvp - v0 : nvt;
            nv = nv == 3 ? 4 : nv;
            const ptrdiff_t w = wp - v0 * VL < nv * VL ? wp - v0 * VL : nv * VL;
            ptrdiff_t i = 0;
            for (ptrdiff_t t = 0; t < tiles; ++t) {
                const int m = (int)(rows + (t < taller));
                kernels(m, nv, K, A + i * lda, lda, Pp + v0 * VL, NR,
                        bias ? bias + j0 + v0 * VL : 0, flags, C + i * ldc + j0 + v0 * VL, ldc,
                        w);
                i += m;
            }
        }
    }
}

/* C = A·op(B) + bias + beta·C, op(B) [K, n] packed in P by FN(pack_panels).
 *   A: [M, lda >= K], read only in its M rows × K columns
 *   P: FN(panel_len)(K, n) elements (see the top of this file)
 *   bias: [n], added to every row (an input projection's bias, added as the product is
 *      stored: no pass of its own over C), or NULL
 *   C: [M, ldc >= n], written only in its M rows × n columns; with beta = 0 never read (it may
 *      hold NaN), otherwise C = A·op(B) + bias + beta·C (beta = 1 accumulates exactly)
 * M = 0 or n = 0 does nothing; K = 0 sets C = bias + beta·C. Single-threaded: threads each call
 * it on their own panels (see the top of this file). Runs the AVX-512, AVX2 or baseline
 * kernels, the best the CPU has (cells_isa, cells/isa.h). */
CELLS_FN void FN(gemm_panels)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                              const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                              const REAL *CELLS_RESTRICT P, const REAL *CELLS_RESTRICT bias,
                              REAL beta, REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    FN(panel_gemm)(cells_isa(), 0, M, n, K, A, lda, P, bias, beta, C, ldc);
}

/* gemm_panels in fixed order: each element of C is Σ_k A[i, k]·op(B)[k, j] summed in one
 * order that depends on K alone (two partial sums over the even and the odd k's, the last
 * odd k added to the even sum, then the two added; the bias after), never on M, on the
 * element's place in its tile, or on which columns of P a call multiplies. So a row gives the
 * same bits alone or in any batch, and a thread the same bits for any share of whole panels:
 * what a prepared net's reproducibility rests on. Tiles of at most 3 rows (panel_fixed_mr). */
CELLS_FN void FN(gemm_panels_fixed)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                    const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                    const REAL *CELLS_RESTRICT P,
                                    const REAL *CELLS_RESTRICT bias, REAL beta,
                                    REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    FN(panel_gemm)(cells_isa(), 1, M, n, K, A, lda, P, bias, beta, C, ldc);
}

/* C = op(A)·B (+ bias) + beta·C with B [K, ldb] read in place (no packed copy), with blocking
 * FN(panel_blocking)(isa): op(A) = Aᵀ with tn (A [K, lda >= M]: gemm_tn), else A (A [M,
 * lda >= K]: gemm_nn). K in blocks of CELLS_PANEL_TN_ROWS rows: in a row block, every group of
 * up to nvt whole vectors of B's columns (its rows in L1) passes over every tile of C's rows;
 * the tiles are as in panel_gemm, and the bias is added with the first row block. C stays in
 * L2 over the whole of K when it fits (cells_panel_tn_c_bytes()). A last part vector of B's
 * columns is copied, row block by row block, into a zero-padded strip on the stack, so that
 * nothing is read beyond B's n columns. */
CELLS_FN void FN(panel_gemm_unpacked)(int isa, int tn, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                      const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                      const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                                      const REAL *CELLS_RESTRICT bias, REAL beta,
                                      REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    enum { VL = CELLS_PANEL_VBYTES / sizeof(REAL), KB = CELLS_PANEL_TN_ROWS };
    isa = FN(panel_blocking)(isa);
    const FN(panel_kernels) kernels = FN(panel_kernels_of)(isa).tiles;
    const int mr = FN(panel_mr)(isa), nvt = FN(panel_nvt)(isa);
    if (M <= 0 || n <= 0)
        return;
    if (K <= 0) { /* C = bias + beta·C */
        for (ptrdiff_t i = 0; i < M; ++i)
            for (ptrdiff_t j = 0; j < n; ++j)
                C[i * ldc + j] = (bias ? bias[j] : 0) + (beta == 0 ? 0 : beta * C[i * ldc + j]);
        return;
    }
    if (beta != 0 && beta != 1)
        FN(panel_scale)(M, n, beta, C, ldc);
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    const ptrdiff_t whole = n / VL * VL; /* the whole vectors of B's columns end here */
    const ptrdiff_t ak = tn ? lda : 1, ar = tn ? 1 : lda; /* A's element (i, k) at i·ar + k·ak */
    REAL strip[KB * VL]; /* [kb, VL]: the part vector's columns of a row block, zero-padded */
    for (ptrdiff_t k0 = 0; k0 < K; k0 += KB) {
        const ptrdiff_t kb = K - k0 < KB ? K - k0 : KB;
        const int flags = CELLS_PANEL_IN_PLACE | (tn ? CELLS_PANEL_TN : 0)
                          | CELLS_PANEL_PREFETCH | (k0 > 0 || beta != 0 ? CELLS_PANEL_ADD : 0)
                          | (k0 == 0 && bias ? CELLS_PANEL_BIAS : 0);
        const REAL *Ak = A + k0 * ak, *Bk = B + k0 * ldb;
        for (ptrdiff_t j = 0; j < n; ) {
            const REAL *Pv = Bk + j;
            ptrdiff_t ldp = ldb, w;
            int nv;
            if (j < whole) { /* 4, 2 or 1 whole vectors (the cases the kernels have) */
                const ptrdiff_t left = (whole - j) / VL;
                nv = left >= nvt ? nvt : left >= 2 ? 2 : 1;
                w = nv * VL;
            } else { /* the part vector */
                w = n - j;
                for (ptrdiff_t k = 0; k < kb; ++k)
                    for (ptrdiff_t l = 0; l < VL; ++l)
                        strip[k * VL + l] = l < w ? Bk[k * ldb + j + l] : 0;
                Pv = strip;
                ldp = VL;
                nv = 1;
            }
            ptrdiff_t i = 0;
            for (ptrdiff_t t = 0; t < tiles; ++t) {
                const int m = (int)(rows + (t < taller));
                kernels(m, nv, kb, Ak + i * ar, lda, Pv, ldp, bias ? bias + j : 0, flags,
                        C + i * ldc + j, ldc, w);
                i += m;
            }
            j += w;
        }
    }
}

/* C = Aᵀ·B + beta·C, both read in place: the gradient of a weight, Σ over K rows (steps ×
 * batch rows) of inputᵀ·gradient, without the copies of A and B a BLAS gemm makes. For a C of
 * up to cells_panel_tn_c_bytes(), which stays in L2 while A and B stream past once; a larger C is
 * read and written once per row block, and a BLAS gemm, which packs both operands in blocks,
 * is faster there.
 *   A: [K, lda >= M], read only in its K rows × M columns
 *   B: [K, ldb >= n], read only in its K rows × n columns
 *   C: [M, ldc >= n], written only in its M rows × n columns; with beta = 0 never read (it may
 *      hold NaN), otherwise C = Aᵀ·B + beta·C
 * M = 0 or n = 0 does nothing; K = 0 sets C = beta·C. Single-threaded; runs the kernels
 * gemm_panels does (cells_isa, cells/isa.h). */
CELLS_FN void FN(gemm_tn)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, const REAL *CELLS_RESTRICT A,
                          ptrdiff_t lda, const REAL *CELLS_RESTRICT B, ptrdiff_t ldb, REAL beta,
                          REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    FN(panel_gemm_unpacked)(cells_isa(), 1, M, n, K, A, lda, B, ldb, 0, beta, C, ldc);
}

/* C = A·B (+ bias) + beta·C, both read in place: a product that runs once, which packing B
 * would slow down (a cell's, one step: packing 256 KiB of weights took longer than multiplying
 * a row by them).
 *   A: [M, lda >= K], read only in its M rows × K columns
 *   B: [K, ldb >= n], read only in its K rows × n columns
 *   bias: [n], added to every row, or NULL
 *   C: [M, ldc >= n], written only in its M rows × n columns; with beta = 0 never read (it may
 *      hold NaN), otherwise C = A·B + bias + beta·C
 * M = 0 or n = 0 does nothing; K = 0 sets C = bias + beta·C. Single-threaded; runs the kernels
 * gemm_panels does (cells_isa, cells/isa.h). */
CELLS_FN void FN(gemm_nn)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, const REAL *CELLS_RESTRICT A,
                          ptrdiff_t lda, const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                          const REAL *CELLS_RESTRICT bias, REAL beta, REAL *CELLS_RESTRICT C,
                          ptrdiff_t ldc) {
    FN(panel_gemm_unpacked)(cells_isa(), 0, M, n, K, A, lda, B, ldb, bias, beta, C, ldc);
}

/* gemm_nt with blocking FN(panel_blocking)(isa): C in tiles of dot_mr rows (as equal in height
 * as possible, as in panel_gemm) by dot_qr columns; columns outer, so that a tile's dot_qr rows
 * of B (4 × K elements: in L1 for K up to 2048 floats) pass over every tile of A's rows. */
CELLS_FN void FN(panel_gemm_nt)(int isa, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                const REAL *CELLS_RESTRICT A, ptrdiff_t lda,
                                const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                                const REAL *CELLS_RESTRICT bias, REAL beta,
                                REAL *CELLS_RESTRICT C, ptrdiff_t ldc) {
    isa = FN(panel_blocking)(isa);
    const FN(panel_dot_kernels) kernels = FN(panel_kernels_of)(isa).dots;
    const int mr = FN(panel_dot_mr)(isa), qr = FN(panel_dot_qr)(isa);
    if (M <= 0 || n <= 0)
        return;
    if (beta != 0 && beta != 1)
        FN(panel_scale)(M, n, beta, C, ldc);
    const int flags = (beta != 0 ? CELLS_PANEL_ADD : 0) | (bias ? CELLS_PANEL_BIAS : 0);
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    for (ptrdiff_t j = 0; j < n; j += qr) {
        const int q = (int)(n - j < qr ? n - j : qr);
        ptrdiff_t i = 0;
        for (ptrdiff_t t = 0; t < tiles; ++t) {
            const int m = (int)(rows + (t < taller));
            kernels(m, q, K, A + i * lda, lda, B + j * ldb, ldb, bias ? bias + j : 0, flags,
                    C + i * ldc + j, ldc);
            i += m;
        }
    }
}

/* C = A·Bᵀ (+ bias) + beta·C, both read in place, B's rows being C's columns: a product that
 * runs once with weights stored transposed (dz·Whᵀ in a cell's backward, Wh [nOut, G] as
 * libnd4j stores it), where transposing them into panels took several times as long as the
 * product. Each element of C is a dot product of two rows read with unit stride.
 *   A: [M, lda >= K], read only in its M rows × K columns
 *   B: [n, ldb >= K], read only in its n rows × K columns
 *   bias: [n], added to every row, or NULL
 *   C: [M, ldc >= n], written only in its M rows × n columns; with beta = 0 never read (it may
 *      hold NaN), otherwise C = A·Bᵀ + bias + beta·C
 * M = 0 or n = 0 does nothing; K = 0 sets C = bias + beta·C. Single-threaded; runs the AVX-512,
 * AVX2 or baseline kernels, the best the CPU has (cells_isa, cells/isa.h). */
CELLS_FN void FN(gemm_nt)(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, const REAL *CELLS_RESTRICT A,
                          ptrdiff_t lda, const REAL *CELLS_RESTRICT B, ptrdiff_t ldb,
                          const REAL *CELLS_RESTRICT bias, REAL beta, REAL *CELLS_RESTRICT C,
                          ptrdiff_t ldc) {
    FN(panel_gemm_nt)(cells_isa(), M, n, K, A, lda, B, ldb, bias, beta, C, ldc);
}
