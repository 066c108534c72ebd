/* Implementation of cells/lowp.h (included by it alone): the conversions, the packing, the
 * kernels of each instruction set, and the products that run them. See lowp.h for the numeric
 * model and the layouts. */

/* The arithmetic here is written in the order the model states, one rounding per operation:
 * contracting x·y + z into one FMA (GCC's default outside ISO C modes) would change bits, and
 * differently on each instruction set. */
#if defined(__GNUC__) && !defined(__clang__)
#define CELLS_LOWP_EXACT __attribute__((optimize("fp-contract=off")))
#else
#define CELLS_LOWP_EXACT
#endif

#if CELLS_ISA_X86
#define CELLS_LOWP_X86 1
#include <immintrin.h>
#else
#define CELLS_LOWP_X86 0
#endif

/* ------------------------------------------------------------------------------------------ */
/* Instruction sets */

/* The int8 / bfloat16 instruction set of cells_isa() (cells/isa.h: the CPU's best, or the
 * lower path the process chose): on AVX-512, the dot-product extension where the CPU has it
 * (CELLS_LOWP_ISA_*). */
static inline int cells_lowp_isa_of(int isa, int has_dot) {
    return isa == CELLS_ISA_AVX512 ? (has_dot ? CELLS_LOWP_ISA_DOT : CELLS_LOWP_ISA_AVX512)
           : isa == CELLS_ISA_AVX2 ? CELLS_LOWP_ISA_AVX2
                                   : CELLS_LOWP_ISA_BASE;
}
static inline int cells_lowp_isa_q8(void) {
#if CELLS_LOWP_X86
    __builtin_cpu_init();
    return cells_lowp_isa_of(cells_isa(), __builtin_cpu_supports("avx512vnni"));
#else
    return CELLS_LOWP_ISA_BASE;
#endif
}
static inline int cells_lowp_isa_bf16(void) {
#if CELLS_LOWP_X86
    __builtin_cpu_init();
    return cells_lowp_isa_of(cells_isa(), __builtin_cpu_supports("avx512bf16"));
#else
    return CELLS_LOWP_ISA_BASE;
#endif
}

/* The instruction set a product runs for a requested `isa`: the highest this build has that
 * does not exceed it (every x86 one on x86-64 Linux with GCC; the baseline elsewhere). */
static inline int cells_lowp_kernel_isa(int isa) {
#if CELLS_LOWP_X86
    return isa >= CELLS_LOWP_ISA_DOT      ? CELLS_LOWP_ISA_DOT
           : isa >= CELLS_LOWP_ISA_AVX512 ? CELLS_LOWP_ISA_AVX512
           : isa >= CELLS_LOWP_ISA_AVX2   ? CELLS_LOWP_ISA_AVX2
                                          : CELLS_LOWP_ISA_BASE;
#else
    (void)isa;
    return CELLS_LOWP_ISA_BASE;
#endif
}

/* ------------------------------------------------------------------------------------------ */
/* Sizes */

static inline ptrdiff_t cells_lowp_roundup(ptrdiff_t x, ptrdiff_t to) {
    return (x + to - 1) / to * to;
}

/* Bytes of the packed int8 weights of a [K, n] matrix: K4 · n64. */
static inline size_t cells_lowp_q8_len(ptrdiff_t K, ptrdiff_t n) {
    return (size_t)cells_lowp_roundup(K, CELLS_LOWP_Q8_GROUP)
           * (size_t)cells_lowp_roundup(n, CELLS_LOWP_NR);
}
/* uint16 elements of the packed bfloat16 weights of a [K, n] matrix: K2 · n64. */
static inline size_t cells_lowp_bf16_len(ptrdiff_t K, ptrdiff_t n) {
    return (size_t)cells_lowp_roundup(K, CELLS_LOWP_BF16_PAIR)
           * (size_t)cells_lowp_roundup(n, CELLS_LOWP_NR);
}
/* The row length (elements) a converted activation row needs at least: K4 (int8), K2 (bf16). */
static inline ptrdiff_t cells_lowp_q8_row(ptrdiff_t K) {
    return cells_lowp_roundup(K, CELLS_LOWP_Q8_GROUP);
}
static inline ptrdiff_t cells_lowp_bf16_row(ptrdiff_t K) {
    return cells_lowp_roundup(K, CELLS_LOWP_BF16_PAIR);
}

/* ------------------------------------------------------------------------------------------ */
/* Conversions */

/* x clamped to [lo, hi], NaN to lo: defined for any input, so that the integer conversion that
 * follows never sees a value out of range (inputs are documented finite; a NaN or an infinity
 * gives a meaningless but defined result). */
static inline float cells_lowp_clamp(float x, float lo, float hi) {
    x = x >= lo ? x : lo;
    return x <= hi ? x : hi;
}

/* The int8 weights of op(W) [K, n] (op(W) = W [K, ldw >= n], or with transW W [n, ldw >= K],
 * row j of W being column j of op(W)): s_w [n], colsum [n] and the packed P8
 * [cells_lowp_q8_len(K, n) bytes] (layouts and formulas in lowp.h). Writes every byte of P8. */
static inline CELLS_LOWP_EXACT void cells_lowp_q8_pack(ptrdiff_t K, ptrdiff_t n, const float *W,
                                                ptrdiff_t ldw, int transW, int8_t *P8,
                                                float *s_w, int32_t *colsum) {
    enum { NR = CELLS_LOWP_NR, GR = CELLS_LOWP_Q8_GROUP };
    const ptrdiff_t K4 = cells_lowp_q8_row(K), n64 = cells_lowp_roundup(n, NR);
    const ptrdiff_t wk = transW ? 1 : ldw, wj = transW ? ldw : 1; /* W's element (k, j) */
    for (ptrdiff_t j = 0; j < n64; ++j) {
        int8_t *p = P8 + (j / NR) * K4 * NR + (j % NR) * GR; /* (k = 0, column j) */
        float s = 0;
        for (ptrdiff_t k = 0; j < n && k < K; ++k) {
            const float a = fabsf(W[k * wk + j * wj]);
            s = a > s ? a : s;
        }
        s = s / (float)CELLS_LOWP_Q8_QMAX;
        s = s > 0 ? s : 1.0f;
        int32_t sum = 0;
        for (ptrdiff_t k = 0; k < K4; ++k) {
            int8_t q = 0;
            if (j < n && k < K)
                q = (int8_t)cells_lowp_clamp(rintf(W[k * wk + j * wj] / s),
                                             -(float)CELLS_LOWP_Q8_QMAX, (float)CELLS_LOWP_Q8_QMAX);
            p[(k / GR) * NR * GR + k % GR] = q;
            sum += q;
        }
        if (j < n)
            s_w[j] = s, colsum[j] = sum;
    }
}

/* Weights already quantized: op(Q) [K, n] of int8 (op and ldq as W's in cells_lowp_q8_pack),
 * each in [-CELLS_LOWP_Q8_QMAX, CELLS_LOWP_Q8_QMAX] (the caller checks), with their column
 * scales s [n], packed as cells_lowp_q8_pack packs the ones it computes: P8 the same layout,
 * s_w[j] = s[j], colsum[j] = the sum of column j of op(Q). Given the q and s_w that
 * cells_lowp_q8_pack computes from W, it writes the same bytes. */
static inline void cells_lowp_q8_pack_quantized(ptrdiff_t K, ptrdiff_t n, const int8_t *Q,
                                                ptrdiff_t ldq, int transQ, const float *s,
                                                int8_t *P8, float *s_w, int32_t *colsum) {
    enum { NR = CELLS_LOWP_NR, GR = CELLS_LOWP_Q8_GROUP };
    const ptrdiff_t K4 = cells_lowp_q8_row(K), n64 = cells_lowp_roundup(n, NR);
    const ptrdiff_t qk = transQ ? 1 : ldq, qj = transQ ? ldq : 1; /* Q's element (k, j) */
    for (ptrdiff_t j = 0; j < n64; ++j) {
        int8_t *p = P8 + (j / NR) * K4 * NR + (j % NR) * GR; /* (k = 0, column j) */
        int32_t sum = 0;
        for (ptrdiff_t k = 0; k < K4; ++k) {
            const int8_t q = (j < n && k < K) ? Q[k * qk + j * qj] : 0;
            p[(k / GR) * NR * GR + k % GR] = q;
            sum += q;
        }
        if (j < n)
            s_w[j] = s[j], colsum[j] = sum;
    }
}

/* The activation range of a row a [K]: lo = min(0, min_k a[k]), hi = max(0, max_k a[k]), a NaN
 * leaving both as they are (each comparison with it is false). */
static inline void cells_lowp_q8_range(ptrdiff_t K, const float *a, float *lo, float *hi) {
    float l = 0, h = 0;
    for (ptrdiff_t k = 0; k < K; ++k) {
        l = a[k] < l ? a[k] : l;
        h = a[k] > h ? a[k] : h;
    }
    *lo = l, *hi = h;
}

/* A row's scale s_a and zero point z (as a float, an integer in [0, 255]) from its range. */
static inline CELLS_LOWP_EXACT void cells_lowp_q8_scale(float lo, float hi, float *s, float *z) {
    const float amax = (float)CELLS_LOWP_Q8_AMAX;
    float t = (hi - lo) / amax;
    t = t > 0 ? t : 1.0f; /* a row of zeros (or of a range below 255 denormals' worth) */
    *s = t;
    *z = cells_lowp_clamp(rintf(-lo / t), 0, amax);
}

/* One activation quantized: clamp(rint(a / s) + z, 0, 255). */
static inline CELLS_LOWP_EXACT uint8_t cells_lowp_q8_quantize(float a, float s, float z) {
    return (uint8_t)cells_lowp_clamp(rintf(a / s) + z, 0, (float)CELLS_LOWP_Q8_AMAX);
}

/* bf16(x): x rounded to bfloat16, to nearest even, as a bit pattern; an x below FLT_MIN in
 * magnitude (a float32 denormal) becomes a zero of its sign, so that no result is a bfloat16
 * denormal (rounding a normal float32 never gives one); NaN becomes a quiet NaN. */
#define CELLS_LOWP_F32_MAG 0x7fffffff   /* a float's bits but its sign */
#define CELLS_LOWP_F32_INF 0x7f800000   /* the infinity's (above it: NaN) */
#define CELLS_LOWP_F32_MIN 0x00800000   /* FLT_MIN's (below it: zero and denormals) */
#define CELLS_LOWP_BF16_ROUND 0x7fff    /* added, with the kept bits' last one, to round */
#define CELLS_LOWP_BF16_QUIET 0x40      /* the quiet bit of a bfloat16 NaN */
#define CELLS_LOWP_BF16_SIGN 0x8000     /* the sign bit of a bfloat16 */
static inline uint16_t cells_lowp_bf16(float x) {
    enum { SHIFT = 16 };
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t mag = u & CELLS_LOWP_F32_MAG;
    if (mag > CELLS_LOWP_F32_INF)
        return (uint16_t)((u >> SHIFT) | CELLS_LOWP_BF16_QUIET);
    if (mag < CELLS_LOWP_F32_MIN)
        return (uint16_t)((u >> SHIFT) & CELLS_LOWP_BF16_SIGN);
    u += CELLS_LOWP_BF16_ROUND + ((u >> SHIFT) & 1);
    return (uint16_t)(u >> SHIFT);
}

/* The float32 value of a bfloat16 bit pattern. */
static inline float cells_lowp_bf16_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The bfloat16 weights of op(W) [K, n] (transW as for cells_lowp_q8_pack): PB
 * [cells_lowp_bf16_len(K, n)], every element written (layout in lowp.h). */
static inline void cells_lowp_bf16_pack(ptrdiff_t K, ptrdiff_t n, const float *W, ptrdiff_t ldw,
                                        int transW, uint16_t *PB) {
    enum { NR = CELLS_LOWP_NR, PR = CELLS_LOWP_BF16_PAIR };
    const ptrdiff_t K2 = cells_lowp_bf16_row(K), n64 = cells_lowp_roundup(n, NR);
    const ptrdiff_t wk = transW ? 1 : ldw, wj = transW ? ldw : 1;
    for (ptrdiff_t j = 0; j < n64; ++j) {
        uint16_t *p = PB + (j / NR) * K2 * NR + (j % NR) * PR;
        for (ptrdiff_t k = 0; k < K2; ++k)
            p[(k / PR) * NR * PR + k % PR] =
                j < n && k < K ? cells_lowp_bf16(W[k * wk + j * wj]) : 0;
    }
}

/* fma(a·b + s) with the flush of the bfloat16 model: a and b are bfloat16 values (not denormal)
 * and s a float32 that is not denormal. fmaf rounds once (to float32's denormals where the
 * result is below FLT_MIN); a result at or below FLT_MIN is redone scaled by 2^24, where no
 * denormal occurs, to learn what it rounds to with an unbounded exponent: below FLT_MIN (2^24
 * FLT_MIN scaled), it flushes to a zero of its sign. The smaller of a, b takes the scale, and s
 * is below 2^104 wherever the sum can be that small, so nothing overflows. */
#if defined(__GNUC__)
__attribute__((noinline)) /* called per element by the baseline alone: kept out of its tiles */
#endif
static CELLS_LOWP_EXACT float cells_lowp_fma_ftz(float a, float b, float s) {
    const float scale = 0x1p24f;
    float r = fmaf(a, b, s);
    if (fabsf(r) <= FLT_MIN) {
        const int a_small = fabsf(a) <= fabsf(b);
        const float r2 = fmaf((a_small ? a : b) * scale, a_small ? b : a, s * scale);
        if (fabsf(r2) < FLT_MIN * scale)
            r = copysignf(0.0f, r2);
    }
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Kernels */

/* The registers of one packed vector (16 columns), by instruction set (see lowp_kernels.h):
 * int8 accumulators (z: isa 5, 4; y: isa 3; e: isa 0), int8 weights loaded (z, y; read in
 * place: p), a row's 4 activations broadcast. */
typedef union {
#if CELLS_LOWP_X86
    __m512i z;
    __m256i y[2];
#endif
    int32_t e[CELLS_LOWP_VL];
} cells_lowp_q8_acc;
typedef union {
#if CELLS_LOWP_X86
    __m512i z;
    __m256i y[2];
#endif
    const int8_t *p;
} cells_lowp_q8_w;
typedef union {
#if CELLS_LOWP_X86
    __m512i z;
    __m256i y;
#endif
    const uint8_t *p;
} cells_lowp_q8_a;
/* bfloat16 accumulators (z: isa 5, 4; y: isa 3; e: isa 0), weights loaded (d: as they are, f
 * and h: the odd k's and the even k's as floats; p: read in place), a row's pair of activations
 * broadcast (pair: as it is; f, h, s: as floats). */
typedef union {
#if CELLS_LOWP_X86
    __m512 z;
    __m256 y[2];
#endif
    float e[CELLS_LOWP_VL];
} cells_lowp_bf16_acc;
typedef union {
#if CELLS_LOWP_X86
    struct { __m512i z; } d;
    struct { __m512 o, e; } f;
    struct { __m256 o[2], e[2]; } h;
#endif
    const uint16_t *p;
} cells_lowp_bf16_w;
typedef union {
#if CELLS_LOWP_X86
    __m512i pair;
    struct { __m512 o, e; } f;
    struct { __m256 o, e; } h;
#endif
    struct { float o, e; } s;
} cells_lowp_bf16_a;
/* A pair of bfloat16 in a 32-bit lane: the odd k is the high half (the lane with its low half
 * cleared is its float), the even k the low half (shifted up). */
#define CELLS_LOWP_BF16_HIGH ((int)0xffff0000u)
#define CELLS_LOWP_BF16_SHIFT 16

#if CELLS_LOWP_X86
/* MXCSR's flush-to-zero and denormals-are-zero bits, under which the FMAs of isa 4 and 3 flush
 * as vdpbf16ps does (the same rule: tininess after rounding, a zero of the result's sign). */
#define CELLS_LOWP_MXCSR_FTZ_DAZ 0x8040u
static inline unsigned cells_lowp_mxcsr_ftz(void) {
    unsigned old, ftz;
    __asm__ volatile("stmxcsr %0" : "=m"(old));
    ftz = old | CELLS_LOWP_MXCSR_FTZ_DAZ;
    __asm__ volatile("ldmxcsr %0" : : "m"(ftz));
    return old;
}
static inline void cells_lowp_mxcsr_restore(unsigned old) {
    __asm__ volatile("ldmxcsr %0" : : "m"(old));
}
#endif

/* Register blocking, by instruction set: tiles of at most mr rows; int8 tiles span nvt vectors
 * of one panel (the whole panel on AVX-512: 4 accumulator zmm a row), with ku accumulator sets
 * over alternate groups where a tile has too few to hide vpdpbusd's latency. Beside the m·nvt
 * accumulators, isa 4 and 3 hold the weights, the ones of vpmaddwd and the pair sums: 4 rows
 * on both (isa 4: 16 + 4 broadcasts + 3 of 32 zmm; isa 3: 8 + 2 + 2 of 16 ymm, with room for
 * some of the 4 broadcasts, the others read again from memory, which costs no more);
 * bfloat16 tiles span nv vectors of up to 4 consecutive panels: every element is one chain of
 * dependent vdpbf16ps (or FMAs), so the chains in flight come from columns, up to 16 a tile. */
#define CELLS_LOWP_MR_MAX 6
#define CELLS_LOWP_KU_MAX 4
#define CELLS_LOWP_TILE_NV_MAX (4 * CELLS_LOWP_NV)
#define CELLS_LOWP_CHAINS 16 /* accumulator vectors in flight a tile aims at */
static inline int cells_lowp_q8_mr(int isa) { return isa == 5 ? 6 : isa >= 3 ? 4 : 2; }
static inline int cells_lowp_q8_nvt(int isa) { return isa >= 4 ? CELLS_LOWP_NV : 1; }
static inline int cells_lowp_q8_ku(int isa, int m) {
    const int sets = isa == 5             ? CELLS_LOWP_CHAINS / (m * CELLS_LOWP_NV)
                     : isa == 3 && m == 1 ? 2
                                          : 1;
    return sets < 1 ? 1 : sets > CELLS_LOWP_KU_MAX ? CELLS_LOWP_KU_MAX : sets;
}
static inline int cells_lowp_bf16_mr(int isa) { return isa == 5 ? 6 : isa == 4 ? 4 : 2; }
/* vectors of a bfloat16 tile of m rows: CELLS_LOWP_CHAINS / m in whole panels on AVX-512
 * (at least one panel), else one vector */
static inline int cells_lowp_bf16_nvt(int isa, int m) {
    if (isa < 4)
        return 1;
    const int nv = CELLS_LOWP_CHAINS / m / CELLS_LOWP_NV * CELLS_LOWP_NV;
    return nv < CELLS_LOWP_NV ? CELLS_LOWP_NV : nv;
}

/* The kernels of each instruction set, compiled for it (lowp_kernels.h), with no contraction
 * of a·b + c into an FMA (see CELLS_LOWP_EXACT). The int8 and bfloat16 kernels of isa 5 share
 * one target with both extensions: each runs only where the CPU has its own (cells_lowp_isa_*)
 * and uses no instruction of the other. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
#if CELLS_LOWP_X86
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,avx512vnni,avx512bf16")
#define CELLS_LOWP_KISA 5
#include "cells/lowp_kernels.h"
#undef CELLS_LOWP_KISA
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define CELLS_LOWP_KISA 4
#include "cells/lowp_kernels.h"
#undef CELLS_LOWP_KISA
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define CELLS_LOWP_KISA 3
#include "cells/lowp_kernels.h"
#undef CELLS_LOWP_KISA
#pragma GCC pop_options
#endif
#define CELLS_LOWP_KISA 0
#include "cells/lowp_kernels.h"
#undef CELLS_LOWP_KISA
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

typedef void (*cells_lowp_q8_kernel)(int m, ptrdiff_t G, const uint8_t *QA, ptrdiff_t ldq,
                                     const int8_t *Pv, const float *s_a, const int32_t *zp,
                                     const float *s_w, const int32_t *colsum, const float *bias,
                                     int flags, float *C, ptrdiff_t ldc, ptrdiff_t w);
typedef void (*cells_lowp_bf16_kernel)(int m, int nv, ptrdiff_t T, const uint16_t *AB,
                                       ptrdiff_t ldb, const uint16_t *Pv, ptrdiff_t pstride,
                                       const float *bias, int flags, float *C, ptrdiff_t ldc,
                                       ptrdiff_t w);

/* ------------------------------------------------------------------------------------------ */
/* Row conversions */

/* The uint8 activations of A [M, lda >= K] with instruction set `isa` (CELLS_LOWP_ISA_*;
 * cells_lowp_kernel_isa(isa) runs; every one gives the same bits): QA [M, ldq >= K4], s_a [M],
 * zp [M] (formulas in lowp.h); QA's columns K .. K4-1 are set to 0 (the weights' padding rows
 * are zero, so they add nothing), those beyond K4 are not written. */
static inline void cells_lowp_q8_rows_isa(int isa, ptrdiff_t M, ptrdiff_t K, const float *A,
                                          ptrdiff_t lda, uint8_t *QA, ptrdiff_t ldq, float *s_a,
                                          int32_t *zp) {
    isa = cells_lowp_kernel_isa(isa);
#if CELLS_LOWP_X86
    if (isa >= CELLS_LOWP_ISA_AVX512) /* the int8 rows need no VNNI: isa 5 runs isa 4's */
        cells_lowp_q8_rows_4(M, K, A, lda, QA, ldq, s_a, zp);
    else if (isa == CELLS_LOWP_ISA_AVX2)
        cells_lowp_q8_rows_3(M, K, A, lda, QA, ldq, s_a, zp);
    else
#endif
        cells_lowp_q8_rows_0(M, K, A, lda, QA, ldq, s_a, zp);
}

/* cells_lowp_q8_rows_isa on the best instruction set of this CPU (cells_lowp_isa_q8). */
static inline void cells_lowp_q8_rows(ptrdiff_t M, ptrdiff_t K, const float *A, ptrdiff_t lda,
                                      uint8_t *QA, ptrdiff_t ldq, float *s_a, int32_t *zp) {
    cells_lowp_q8_rows_isa(cells_lowp_isa_q8(), M, K, A, lda, QA, ldq, s_a, zp);
}

/* The bfloat16 activations of A [M, lda >= K] with instruction set `isa` (as for
 * cells_lowp_q8_rows_isa): AB [M, ldb >= K2], a zero after an odd K; columns beyond K2 are not
 * written. */
static inline void cells_lowp_bf16_rows_isa(int isa, ptrdiff_t M, ptrdiff_t K, const float *A,
                                            ptrdiff_t lda, uint16_t *AB, ptrdiff_t ldb) {
    isa = cells_lowp_kernel_isa(isa);
#if CELLS_LOWP_X86
    if (isa == CELLS_LOWP_ISA_DOT)
        cells_lowp_bf16_rows_5(M, K, A, lda, AB, ldb);
    else if (isa == CELLS_LOWP_ISA_AVX512)
        cells_lowp_bf16_rows_4(M, K, A, lda, AB, ldb);
    else if (isa == CELLS_LOWP_ISA_AVX2)
        cells_lowp_bf16_rows_3(M, K, A, lda, AB, ldb);
    else
#endif
        cells_lowp_bf16_rows_0(M, K, A, lda, AB, ldb);
}

/* cells_lowp_bf16_rows_isa on the best instruction set of this CPU (cells_lowp_isa_bf16). */
static inline void cells_lowp_bf16_rows(ptrdiff_t M, ptrdiff_t K, const float *A, ptrdiff_t lda,
                                        uint16_t *AB, ptrdiff_t ldb) {
    cells_lowp_bf16_rows_isa(cells_lowp_isa_bf16(), M, K, A, lda, AB, ldb);
}

/* ------------------------------------------------------------------------------------------ */
/* Products */

/* C = the int8 product of QA (cells_lowp_q8_rows) and P8 (cells_lowp_q8_pack), with
 * instruction set `isa` (CELLS_LOWP_ISA_*; cells_lowp_kernel_isa(isa) runs):
 *   QA [M, ldq >= K4], s_a [M], zp [M]
 *   P8 [cells_lowp_q8_len(K, n) bytes] from its first panel; s_w [n], colsum [n]
 *   bias [n] or NULL; flags: CELLS_LOWP_ADD or 0
 *   C [M, ldc >= n]: only its M rows × n columns written; read only with CELLS_LOWP_ADD (with 0
 *     it may hold NaN)
 * M = 0 or n = 0 does nothing; K = 0 gives C = 0 (+ bias) (+ C). Needs K <= CELLS_LOWP_Q8_K_MAX.
 * Rows in tiles of as equal a height as possible; panels outer, so that a panel's weights are
 * read from memory once per call and from cache by the row tiles after the first. */
static inline void cells_lowp_q8_gemm_isa(int isa, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                          const uint8_t *QA, ptrdiff_t ldq, const float *s_a,
                                          const int32_t *zp, const int8_t *P8, const float *s_w,
                                          const int32_t *colsum, const float *bias, int flags,
                                          float *C, ptrdiff_t ldc) {
    enum { NR = CELLS_LOWP_NR, VL = CELLS_LOWP_VL };
    isa = cells_lowp_kernel_isa(isa);
    cells_lowp_q8_kernel kernel = cells_lowp_q8_kernel_0;
#if CELLS_LOWP_X86
    kernel = isa == 5   ? cells_lowp_q8_kernel_5
             : isa == 4 ? cells_lowp_q8_kernel_4
             : isa == 3 ? cells_lowp_q8_kernel_3
                        : kernel;
#endif
    if (M <= 0 || n <= 0)
        return;
    const ptrdiff_t G = cells_lowp_q8_row(K) / CELLS_LOWP_Q8_GROUP;
    const int mr = cells_lowp_q8_mr(isa), nvt = cells_lowp_q8_nvt(isa);
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += NR) {
        const ptrdiff_t wp = n - j0 < NR ? n - j0 : NR;
        const int8_t *Pp = P8 + j0 * G * CELLS_LOWP_Q8_GROUP;
        for (ptrdiff_t v0 = 0; v0 * VL < wp; v0 += nvt) {
            const ptrdiff_t jt = j0 + v0 * VL, w = n - jt < nvt * VL ? n - jt : nvt * VL;
            ptrdiff_t i = 0;
            for (ptrdiff_t t = 0; t < tiles; ++t) {
                const int m = (int)(rows + (t < taller));
                kernel(m, G, QA + i * ldq, ldq, Pp + v0 * VL * CELLS_LOWP_Q8_GROUP,
                       s_a + i, zp + i, s_w + jt, colsum + jt, bias ? bias + jt : 0, flags,
                       C + i * ldc + jt, ldc, w);
                i += m;
            }
        }
    }
}

/* cells_lowp_q8_gemm_isa on the best instruction set of this CPU (cells_lowp_isa_q8). */
static inline void cells_lowp_q8_gemm(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, const uint8_t *QA,
                                      ptrdiff_t ldq, const float *s_a, const int32_t *zp,
                                      const int8_t *P8, const float *s_w, const int32_t *colsum,
                                      const float *bias, int flags, float *C, ptrdiff_t ldc) {
    cells_lowp_q8_gemm_isa(cells_lowp_isa_q8(), M, n, K, QA, ldq, s_a, zp, P8, s_w, colsum,
                           bias, flags, C, ldc);
}

/* C = the bfloat16 product of AB (cells_lowp_bf16_rows) and PB (cells_lowp_bf16_pack), with
 * instruction set `isa` (cells_lowp_kernel_isa(isa) runs); every path gives the same bits:
 *   AB [M, ldb >= K2]; PB [cells_lowp_bf16_len(K, n)] from its first panel
 *   bias [n] or NULL; flags: CELLS_LOWP_ADD or 0
 *   C [M, ldc >= n] as for cells_lowp_q8_gemm_isa
 * M = 0 or n = 0 does nothing; K = 0 gives C = 0 (+ bias) (+ C). A tile takes up to 4 panels
 * (on AVX-512, 16 / m vectors: the chains of a row in flight), rows as for the int8 product. */
static inline void cells_lowp_bf16_gemm_isa(int isa, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                            const uint16_t *AB, ptrdiff_t ldb,
                                            const uint16_t *PB, const float *bias, int flags,
                                            float *C, ptrdiff_t ldc) {
    enum { NR = CELLS_LOWP_NR, VL = CELLS_LOWP_VL, NV = CELLS_LOWP_NV };
    isa = cells_lowp_kernel_isa(isa);
    cells_lowp_bf16_kernel kernel = cells_lowp_bf16_kernel_0;
#if CELLS_LOWP_X86
    kernel = isa == 5   ? cells_lowp_bf16_kernel_5
             : isa == 4 ? cells_lowp_bf16_kernel_4
             : isa == 3 ? cells_lowp_bf16_kernel_3
                        : kernel;
#endif
    if (M <= 0 || n <= 0)
        return;
    const ptrdiff_t T = cells_lowp_bf16_row(K) / CELLS_LOWP_BF16_PAIR;
    const ptrdiff_t pstride = T * CELLS_LOWP_BF16_PAIR * NR; /* elements of a panel */
    const int mr = cells_lowp_bf16_mr(isa);
    const ptrdiff_t tiles = (M + mr - 1) / mr, rows = M / tiles, taller = M % tiles;
    const int nvt = cells_lowp_bf16_nvt(isa, (int)(rows + (taller > 0)));
    const ptrdiff_t vectors = (n + VL - 1) / VL;
    for (ptrdiff_t v0 = 0; v0 < vectors; v0 += nvt) {
        /* whole panels on AVX-512 (the padding columns are zero), single vectors below */
        const ptrdiff_t left = nvt >= NV ? (vectors - v0 + NV - 1) / NV * NV : vectors - v0;
        const int nv = (int)(left < nvt ? left : nvt);
        const ptrdiff_t j0 = v0 * VL, w = n - j0 < nv * VL ? n - j0 : nv * VL;
        const uint16_t *Pv = PB + (j0 / NR) * pstride + (j0 % NR) * CELLS_LOWP_BF16_PAIR;
        ptrdiff_t i = 0;
        for (ptrdiff_t t = 0; t < tiles; ++t) {
            const int m = (int)(rows + (t < taller));
            kernel(m, nv, T, AB + i * ldb, ldb, Pv, pstride, bias ? bias + j0 : 0, flags,
                   C + i * ldc + j0, ldc, w);
            i += m;
        }
    }
}

/* cells_lowp_bf16_gemm_isa on the best instruction set of this CPU (cells_lowp_isa_bf16). */
static inline void cells_lowp_bf16_gemm(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,
                                        const uint16_t *AB, ptrdiff_t ldb, const uint16_t *PB,
                                        const float *bias, int flags, float *C, ptrdiff_t ldc) {
    cells_lowp_bf16_gemm_isa(cells_lowp_isa_bf16(), M, n, K, AB, ldb, PB, bias, flags, C, ldc);
}
