/* Correctness test of cells/lowp.h: the int8 and bfloat16 conversions, packings and products,
 * bit for bit against scalar references written here from the formulas of lowp.h's header
 * comment (none of them calls the code under test).
 *
 *   gcc -O3 -fno-wrapv -fno-trapping-math -pthread -I include tests/c/test_lowp.c -o test_lowp -lm
 *   ./test_lowp                           (tests/test_lowp_kernels.py does this)
 * Every buffer is its own malloc of exactly the size the API asks for, so that a build with
 * -fsanitize=address,undefined sees any access outside.
 *
 *  - int8: s_w, q (through the packed layout, padding included), colsum, s_a, zp and qa (its
 *    padding included) against the formulas; the product against Σ qa·q − zp·colsum in 64-bit
 *    integers and the float32 epilogue in the stated order; at the extremes (every pair of
 *    products at its largest, K up to CELLS_LOWP_Q8_K_MAX);
 *  - bfloat16: the rounding against frexp/rint; the product against a chain of fma and flush
 *    steps computed in __float128 (exact for these operands) and rounded here;
 *  - every instruction set the CPU runs (the baseline, AVX2, AVX-512, and AVX512_VNNI /
 *    AVX512_BF16) and the public entry, for M in 0..7 and 16, n and K in the lists below, with
 *    and without a bias and CELLS_LOWP_ADD; C's gaps (ldc > n) hold a sentinel that must
 *    survive; a run of panels multiplied on its own gives the same bits as in the whole;
 *  - where the CPU has AVX512_BF16, the reference step itself against vdpbf16ps on random and
 *    adversarial operands (cancellation, far-apart exponents, sums near FLT_MIN).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cells/lowp.h"

/* The references round once per operation, as the model says. */
#pragma GCC optimize("fp-contract=off")

static long failures, checks;
static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0 * 2 - 1; }
static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static void check(int ok, const char *what, long a, long b, long c) {
    ++checks;
    if (!ok && failures++ < 20)
        printf("FAIL %s (%ld %ld %ld)\n", what, a, b, c);
}

static void *alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }

/* ---- references ---- */

static float ref_rint_clamp(float x, float lo, float hi) {
    x = nearbyintf(x);
    return x < lo ? lo : x > hi ? hi : x;
}

static void ref_q8_weights(int K, int n, const float *W, int8_t *q, float *sw, int32_t *colsum) {
    for (int j = 0; j < n; ++j) {
        float m = 0;
        for (int k = 0; k < K; ++k)
            m = fmaxf(m, fabsf(W[k * n + j]));
        float s = m / 127.0f;
        if (s == 0)
            s = 1;
        int32_t sum = 0;
        for (int k = 0; k < K; ++k) {
            q[k * n + j] = (int8_t)ref_rint_clamp(W[k * n + j] / s, -127, 127);
            sum += q[k * n + j];
        }
        sw[j] = s, colsum[j] = sum;
    }
}

/* The activations' levels, 0 .. Q8_ALEVELS: 7 bits (lowp.h). */
enum { Q8_ALEVELS = 127 };

static void ref_q8_rows(int M, int K, const float *A, uint8_t *qa, float *sa, int32_t *zp) {
    for (int i = 0; i < M; ++i) {
        float lo = 0, hi = 0;
        for (int k = 0; k < K; ++k)
            lo = fminf(lo, A[i * K + k]), hi = fmaxf(hi, A[i * K + k]);
        float range = hi - lo;
        float s = range / (float)Q8_ALEVELS;
        if (s == 0)
            s = 1;
        const float z = ref_rint_clamp(-lo / s, 0, Q8_ALEVELS);
        for (int k = 0; k < K; ++k) {
            float t = nearbyintf(A[i * K + k] / s) + z;
            qa[i * K + k] = (uint8_t)(t < 0 ? 0 : t > Q8_ALEVELS ? Q8_ALEVELS : t);
        }
        sa[i] = s, zp[i] = (int32_t)z;
    }
}

static float ref_bf16(float x) {
    if (fabsf(x) < FLT_MIN)
        return copysignf(0.0f, x);
    int e;
    const double m = frexp(x, &e); /* x = m·2^e, 0.5 <= |m| < 1: bfloat16 keeps 8 bits of m */
    return (float)ldexp(nearbyint(m * 256) / 256, e);
}

/* s = ftz(fma(a·b + s)): exact in __float128 for these operands, rounded to float32 once; the
 * flush decided by the rounding of the value scaled by 2^64 (no denormal there). */
static float ref_step(float a, float b, float s) {
    const __float128 exact = (__float128)a * b + s;
    const float r = (float)exact;
    const float scaled = (float)(exact * 18446744073709551616.0Q);
    if (fabsf(scaled) < FLT_MIN * 18446744073709551616.0f)
        return copysignf(0.0f, scaled);
    return r;
}

/* ---- the int8 test of one shape ---- */

enum { NSIZES_M = 9, NSIZES_N = 7, NSIZES_K = 10 };
static const int sizes_m[NSIZES_M] = {0, 1, 2, 3, 4, 5, 6, 7, 16};
static const int sizes_n[NSIZES_N] = {1, 5, 63, 64, 65, 130, 257};
static const int sizes_k[NSIZES_K] = {0, 1, 2, 3, 4, 5, 17, 64, 129, 300};
static const int isas[] = {CELLS_LOWP_ISA_BASE, CELLS_LOWP_ISA_AVX2, CELLS_LOWP_ISA_AVX512,
                           CELLS_LOWP_ISA_DOT};
enum { NISAS = 4, GAP = 3 };
static const float SENTINEL = 12345.0f;

/* A [rows, cols] of values of a random magnitude, with rows of zeros, rows of one sign and a
 * column of zeros among them. */
static void fill(float *X, int rows, int cols, int zero_col) {
    static const double magnitudes[] = {1e-3, 1, 50, 3e4};
    const double mag = magnitudes[next() % 4];
    for (int i = 0; i < rows; ++i) {
        const int kind = (int)(next() % 6); /* 0: zeros, 1: positive, 2: negative, else mixed */
        for (int k = 0; k < cols; ++k) {
            double v = uniform() * mag;
            v = kind == 0 ? 0 : kind == 1 ? fabs(v) : kind == 2 ? -fabs(v) : v;
            X[i * cols + k] = k == zero_col ? 0.0f : (float)v;
        }
    }
}

/* Fills C [M, ldc] with its start values (for CELLS_LOWP_ADD) in the n columns, the sentinel in
 * the gaps. */
static void fill_c(float *C, const float *C0, int M, int n, int ldc) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < ldc; ++j)
            C[i * ldc + j] = j < n ? C0[i * n + j] : SENTINEL;
}

static int isa_runs(int isa, int have) { return isa <= have || isa == CELLS_LOWP_ISA_BASE; }

/* Runs `isa` (or the public entry, isa < 0) on C for every flag variant, checks against
 * expect (raw products, [M, n]) and C0, and returns nothing. */
static void check_c(const float *C, int M, int n, int ldc, const float *expect, const char *what,
                    int isa, int K) {
    int ok = 1;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < ldc; ++j) {
            const float want = j < n ? expect[i * n + j] : SENTINEL;
            if (bits(C[i * ldc + j]) != bits(want)) {
                if (ok && failures < 20)
                    printf("  %s isa %d M %d n %d K %d: C[%d,%d] = %a, want %a\n", what, isa, M,
                           n, K, i, j, C[i * ldc + j], want);
                ok = 0;
            }
        }
    check(ok, what, M, n, K);
}

static void test_q8(int M, int n, int K, int have) {
    const int K4 = (int)cells_lowp_q8_row(K), ldc = n + GAP, n64 = (n + 63) / 64 * 64;
    float *W = alloc(sizeof(float) * K * n), *A = alloc(sizeof(float) * M * K);
    fill(W, K, n, (int)(next() % (n + 1)));
    fill(A, M, K, -1);
    /* references */
    int8_t *q = alloc((size_t)K * n);
    uint8_t *qa = alloc((size_t)M * K);
    float *sw = alloc(sizeof(float) * n), *sa = alloc(sizeof(float) * M);
    int32_t *colsum = alloc(sizeof(int32_t) * n), *zp = alloc(sizeof(int32_t) * M);
    ref_q8_weights(K, n, W, q, sw, colsum);
    ref_q8_rows(M, K, A, qa, sa, zp);
    /* under test */
    int8_t *P8 = alloc(cells_lowp_q8_len(K, n));
    float *tsw = alloc(sizeof(float) * n), *tsa = alloc(sizeof(float) * M);
    int32_t *tcol = alloc(sizeof(int32_t) * n), *tzp = alloc(sizeof(int32_t) * M);
    uint8_t *QA = alloc((size_t)M * (K4 + GAP));
    memset(QA, 0xAB, (size_t)M * (K4 + GAP));
    cells_lowp_q8_pack(K, n, W, n, 0, P8, tsw, tcol);
    cells_lowp_q8_rows(M, K, A, K, QA, K4 + GAP, tsa, tzp);
    int ok = 1;
    for (int j = 0; j < n64; ++j)
        for (int k = 0; k < K4; ++k) {
            const int8_t want = j < n && k < K ? q[k * n + j] : 0;
            ok &= P8[(j / 64) * K4 * 64 + (k / 4) * 256 + (j % 64) * 4 + k % 4] == want;
        }
    for (int j = 0; j < n; ++j)
        ok &= bits(tsw[j]) == bits(sw[j]) && tcol[j] == colsum[j];
    check(ok, "int8 weights", n, K, 0);
    ok = 1;
    for (int i = 0; i < M; ++i) {
        ok &= bits(tsa[i]) == bits(sa[i]) && tzp[i] == zp[i];
        for (int k = 0; k < K4 + GAP; ++k)
            ok &= QA[i * (K4 + GAP) + k] == (k < K ? qa[i * K + k] : k < K4 ? 0 : 0xAB);
    }
    check(ok, "int8 activations", M, K, 0);
    if (!ok || M == 0) {
        free(W), free(A), free(q), free(qa), free(sw), free(sa), free(colsum), free(zp);
        free(P8), free(tsw), free(tsa), free(tcol), free(tzp), free(QA);
        return;
    }

    float *bias = alloc(sizeof(float) * n), *C0 = alloc(sizeof(float) * M * n);
    float *expect = alloc(sizeof(float) * M * n), *C = alloc(sizeof(float) * M * ldc);
    float *whole = alloc(sizeof(float) * M * ldc);
    fill(bias, 1, n, -1);
    fill(C0, M, n, -1);
    for (int variant = 0; variant < 4; ++variant) {
        const int use_bias = variant & 1, flags = variant & 2 ? CELLS_LOWP_ADD : 0;
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < n; ++j) {
                long long acc = 0;
                for (int k = 0; k < K; ++k)
                    acc += (long long)qa[i * K + k] * q[k * n + j];
                acc -= (long long)zp[i] * colsum[j];
                const float scale = sa[i] * sw[j];
                float v = scale * (float)acc;
                if (use_bias)
                    v = v + bias[j];
                expect[i * n + j] = flags ? C0[i * n + j] + v : v;
            }
        for (int t = -1; t < NISAS; ++t) {
            const int isa = t < 0 ? -1 : isas[t];
            if (t >= 0 && !isa_runs(isa, have))
                continue;
            fill_c(C, C0, M, n, ldc);
            if (isa < 0)
                cells_lowp_q8_gemm(M, n, K, QA, K4 + GAP, tsa, tzp, P8, tsw, tcol,
                                   use_bias ? bias : 0, flags, C, ldc);
            else
                cells_lowp_q8_gemm_isa(isa, M, n, K, QA, K4 + GAP, tsa, tzp, P8, tsw, tcol,
                                       use_bias ? bias : 0, flags, C, ldc);
            check_c(C, M, n, ldc, expect, "int8 product", isa, K);
            if (n > 64) { /* panels 1 .. end alone, then panel 0 alone, over the same C */
                memcpy(whole, C, sizeof(float) * M * ldc);
                fill_c(C, C0, M, n, ldc);
                const int G = K4 / 4;
                cells_lowp_q8_gemm_isa(isa < 0 ? cells_lowp_isa_q8() : isa, M, n - 64, K, QA,
                                       K4 + GAP, tsa, tzp, P8 + 64 * 4 * G, tsw + 64, tcol + 64,
                                       use_bias ? bias + 64 : 0, flags, C + 64, ldc);
                cells_lowp_q8_gemm_isa(isa < 0 ? cells_lowp_isa_q8() : isa, M, 64, K, QA,
                                       K4 + GAP, tsa, tzp, P8, tsw, tcol, use_bias ? bias : 0,
                                       flags, C, ldc);
                check(!memcmp(whole, C, sizeof(float) * M * ldc), "int8 panels alone", M, n, K);
            }
        }
    }
    free(W), free(A), free(q), free(qa), free(sw), free(sa), free(colsum), free(zp);
    free(P8), free(tsw), free(tsa), free(tcol), free(tzp), free(QA);
    free(bias), free(C0), free(expect), free(C), free(whole);
}

/* ---- the bfloat16 test of one shape ---- */

/* Operands whose chains pass near FLT_MIN: products of magnitude about 2^-126 that cancel. */
static void fill_tiny(float *X, int rows, int cols) {
    for (int i = 0; i < rows * cols; ++i)
        X[i] = (float)(uniform() * 0x1p-62);
}

static void test_bf16(int M, int n, int K, int have, int tiny) {
    const int K2 = (int)cells_lowp_bf16_row(K), ldc = n + GAP, ldb = K2 + GAP;
    const int n64 = (n + 63) / 64 * 64;
    float *W = alloc(sizeof(float) * K * n), *A = alloc(sizeof(float) * M * K);
    if (tiny)
        fill_tiny(W, K, n), fill_tiny(A, M, K);
    else
        fill(W, K, n, (int)(next() % (n + 1))), fill(A, M, K, -1);
    uint16_t *PB = alloc(sizeof(uint16_t) * cells_lowp_bf16_len(K, n));
    uint16_t *AB = alloc(sizeof(uint16_t) * M * ldb);
    for (int e = 0; e < M * ldb; ++e)
        AB[e] = 0xABCD;
    cells_lowp_bf16_pack(K, n, W, n, 0, PB);
    cells_lowp_bf16_rows(M, K, A, K, AB, ldb);
    int ok = 1;
    for (int j = 0; j < n64; ++j)
        for (int k = 0; k < K2; ++k) {
            const float want = j < n && k < K ? ref_bf16(W[k * n + j]) : 0.0f;
            const uint16_t got = PB[(j / 64) * K2 * 64 + (k / 2) * 128 + (j % 64) * 2 + k % 2];
            ok &= ((uint32_t)got << 16) == bits(want);
        }
    check(ok, "bf16 weights", n, K, 0);
    ok = 1;
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < ldb; ++k) {
            const uint32_t want = k < K ? bits(ref_bf16(A[i * K + k])) >> 16 : k < K2 ? 0 : 0xABCD;
            ok &= AB[i * ldb + k] == want;
        }
    check(ok, "bf16 activations", M, K, 0);
    if (M == 0) {
        free(W), free(A), free(PB), free(AB);
        return;
    }

    float *bias = alloc(sizeof(float) * n), *C0 = alloc(sizeof(float) * M * n);
    float *raw = alloc(sizeof(float) * M * n), *expect = alloc(sizeof(float) * M * n);
    float *C = alloc(sizeof(float) * M * ldc), *whole = alloc(sizeof(float) * M * ldc);
    fill(bias, 1, n, -1);
    fill(C0, M, n, -1);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < n; ++j) {
            float s = 0;
            for (int k = 0; k < K2; k += 2) {
                const float a0 = ref_bf16(A[i * K + k]), w0 = ref_bf16(W[k * n + j]);
                const float a1 = k + 1 < K ? ref_bf16(A[i * K + k + 1]) : 0.0f;
                const float w1 = k + 1 < K ? ref_bf16(W[(k + 1) * n + j]) : 0.0f;
                s = ref_step(a1, w1, s);
                s = ref_step(a0, w0, s);
            }
            raw[i * n + j] = s;
        }
    for (int variant = 0; variant < 4; ++variant) {
        const int use_bias = variant & 1, flags = variant & 2 ? CELLS_LOWP_ADD : 0;
        for (int e = 0; e < M * n; ++e) {
            float v = raw[e];
            if (use_bias)
                v = v + bias[e % n];
            expect[e] = flags ? C0[e] + v : v;
        }
        for (int t = -1; t < NISAS; ++t) {
            const int isa = t < 0 ? -1 : isas[t];
            if (t >= 0 && !isa_runs(isa, have))
                continue;
            fill_c(C, C0, M, n, ldc);
            if (isa < 0)
                cells_lowp_bf16_gemm(M, n, K, AB, ldb, PB, use_bias ? bias : 0, flags, C, ldc);
            else
                cells_lowp_bf16_gemm_isa(isa, M, n, K, AB, ldb, PB, use_bias ? bias : 0, flags,
                                         C, ldc);
            check_c(C, M, n, ldc, expect, tiny ? "bf16 product near FLT_MIN" : "bf16 product",
                    isa, K);
            if (n > 64) {
                memcpy(whole, C, sizeof(float) * M * ldc);
                fill_c(C, C0, M, n, ldc);
                const int use = isa < 0 ? cells_lowp_isa_bf16() : isa;
                cells_lowp_bf16_gemm_isa(use, M, n - 64, K, AB, ldb, PB + 64 * K2,
                                         use_bias ? bias + 64 : 0, flags, C + 64, ldc);
                cells_lowp_bf16_gemm_isa(use, M, 64, K, AB, ldb, PB, use_bias ? bias : 0, flags,
                                         C, ldc);
                check(!memcmp(whole, C, sizeof(float) * M * ldc), "bf16 panels alone", M, n, K);
            }
        }
    }
    free(W), free(A), free(PB), free(AB), free(bias), free(C0), free(raw), free(expect);
    free(C), free(whole);
}

/* ---- the row conversions of every instruction set ---- */

enum { ROW_KINDS = 6, ROWS = 3, ROW_GAP = 5 };
static const int row_sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 255, 1000};

/* A row of kind `kind`: 0 zeros; 1, 2 random values of a random magnitude (one sign, mixed);
 * 3 ties: with s = 2^e exactly, lo = -(z + 0.5)·s and hi = (Q8_ALEVELS - 0.5 - z)·s (a range of
 * Q8_ALEVELS·s, so that the scale is s), elements (m + 0.5)·s
 * and m·s, whose quotients by s are halves or integers (the zero point itself a tie);
 * 4 random bit patterns (NaN, infinities and denormals among them); 5 special values. */
static void fill_row(float *a, int K, int kind) {
    static const double magnitudes[] = {1e-30, 1e-3, 1, 50, 3e4, 1e30};
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x007fffffu, 0x00800000u,
        0x80800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u,
        0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff80ffffu, 0x3f808000u, 0x3f818000u,
        0x3f807fffu, 0x3f808001u, 0x3f7fffffu, 0x0080ffffu, 0x00817fffu, 0x3effffffu};
    const double mag = magnitudes[next() % 6];
    const int e = (int)(next() % 24) - 16, zt = (int)(next() % Q8_ALEVELS);
    const float s = ldexpf(1.0f, e);
    for (int k = 0; k < K; ++k) {
        const int m = (int)(next() % (Q8_ALEVELS + 1)) - zt - 1; /* (m + 0.5)·s in [lo, hi] */
        switch (kind) {
        case 0: a[k] = 0; break;
        case 1: a[k] = (float)(fabs(uniform()) * mag); break;
        case 2: a[k] = (float)(uniform() * mag); break;
        case 3:
            a[k] = k == 0   ? -((float)zt + 0.5f) * s
                   : k == 1 ? ((float)Q8_ALEVELS - 0.5f - (float)zt) * s
                   : next() % 2 ? ((float)m + 0.5f) * s : (float)(m + 1) * s;
            break;
        case 4: a[k] = from_bits((uint32_t)next()); break;
        default: a[k] = from_bits(specials[next() % (sizeof specials / sizeof specials[0])]);
        }
    }
}

/* Every instruction set's q8_rows and bf16_rows against the references (rows of finite values)
 * and against the baseline's (rows with NaN or infinities, whose results lowp.h leaves
 * undocumented but defined), columns past K4 / K2 left alone. */
static void test_rows(int have_q8, int have_bf16) {
    for (size_t c = 0; c < sizeof row_sizes / sizeof row_sizes[0]; ++c)
        for (int kind = 0; kind < ROW_KINDS; ++kind)
            for (int rep = 0; rep < 4; ++rep) {
                const int K = row_sizes[c], lda = K + ROW_GAP;
                const int K4 = (int)cells_lowp_q8_row(K), K2 = (int)cells_lowp_bf16_row(K);
                const int ldq = K4 + ROW_GAP, ldb = K2 + ROW_GAP;
                float *A = alloc(sizeof(float) * ROWS * lda), *Ap = alloc(sizeof(float) * ROWS * K);
                int finite = 1;
                for (int i = 0; i < ROWS; ++i) {
                    fill_row(A + i * lda, K, i == 0 ? kind : (int)(next() % ROW_KINDS));
                    for (int k = 0; k < K; ++k) {
                        Ap[i * K + k] = A[i * lda + k];
                        finite &= isfinite(A[i * lda + k]) != 0;
                    }
                }
                /* references: the formulas where finite (int8), the baseline otherwise */
                uint8_t *qa = alloc((size_t)ROWS * K), *QA0 = alloc((size_t)ROWS * ldq);
                uint8_t *QA = alloc((size_t)ROWS * ldq);
                float sa[ROWS], sa0[ROWS], tsa[ROWS];
                int32_t zp[ROWS], zp0[ROWS], tzp[ROWS];
                uint16_t *AB = alloc(sizeof(uint16_t) * ROWS * ldb);
                ref_q8_rows(ROWS, K, Ap, qa, sa, zp);
                memset(QA0, 0xAB, (size_t)ROWS * ldq);
                cells_lowp_q8_rows_isa(CELLS_LOWP_ISA_BASE, ROWS, K, A, lda, QA0, ldq, sa0, zp0);
                for (int t = 0; t < NISAS + 1; ++t) {
                    const int isa = t < NISAS ? isas[t] : -1; /* -1: the public entry */
                    if (isa >= 0 && !isa_runs(isa, have_q8))
                        continue;
                    memset(QA, 0xAB, (size_t)ROWS * ldq);
                    if (isa < 0)
                        cells_lowp_q8_rows(ROWS, K, A, lda, QA, ldq, tsa, tzp);
                    else
                        cells_lowp_q8_rows_isa(isa, ROWS, K, A, lda, QA, ldq, tsa, tzp);
                    int ok = !memcmp(QA, QA0, (size_t)ROWS * ldq);
                    for (int i = 0; i < ROWS; ++i) {
                        ok &= bits(tsa[i]) == bits(sa0[i]) && tzp[i] == zp0[i];
                        if (!finite)
                            continue;
                        ok &= bits(tsa[i]) == bits(sa[i]) && tzp[i] == zp[i];
                        for (int k = 0; k < ldq; ++k)
                            ok &= QA[i * ldq + k] == (k < K ? qa[i * K + k] : k < K4 ? 0 : 0xAB);
                    }
                    check(ok, finite ? "int8 rows" : "int8 rows (not finite)", isa, K, kind);
                }
                for (int t = 0; t < NISAS + 1; ++t) {
                    const int isa = t < NISAS ? isas[t] : -1;
                    if (isa >= 0 && !isa_runs(isa, have_bf16))
                        continue;
                    for (int e = 0; e < ROWS * ldb; ++e)
                        AB[e] = 0xABCD;
                    if (isa < 0)
                        cells_lowp_bf16_rows(ROWS, K, A, lda, AB, ldb);
                    else
                        cells_lowp_bf16_rows_isa(isa, ROWS, K, A, lda, AB, ldb);
                    int ok = 1;
                    for (int i = 0; i < ROWS; ++i)
                        for (int k = 0; k < ldb; ++k) {
                            const float x = k < K ? A[i * lda + k] : 0;
                            /* a NaN: its top half with the quiet bit set */
                            const uint32_t want = k >= K2    ? 0xABCD
                                                  : isnan(x) ? (bits(x) >> 16) | 0x40
                                                             : bits(ref_bf16(x)) >> 16;
                            ok &= AB[i * ldb + k] == want;
                        }
                    check(ok, "bf16 rows", isa, K, kind);
                }
                free(A), free(Ap), free(qa), free(QA0), free(QA), free(AB);
            }
}

/* ---- the reference step against vdpbf16ps ---- */

#if CELLS_LOWP_X86
__attribute__((target("arch=x86-64-v4,avx512bf16"))) static void
dpbf16(const float acc[16], const uint16_t a[32], const uint16_t b[32], float out[16]) {
    const __m512 c = _mm512_loadu_ps(acc);
    const __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(c, (__m512bh)va, (__m512bh)vb));
}

/* A normal bfloat16 of exponent e in [lo, hi) (biased), random sign and mantissa. */
static uint16_t random_bf16(int lo, int hi) {
    const int e = lo + (int)(next() % (unsigned)(hi - lo));
    return (uint16_t)((next() & 1 ? 0x8000 : 0) | e << 7 | (next() & 0x7f));
}

static void test_model_against_hardware(void) {
    long lanes = 0, bad = 0;
    for (int it = 0; it < 20000; ++it) {
        const int mode = it % 3; /* moderate exponents, the whole range, near FLT_MIN */
        const int lo = mode == 0 ? 117 : mode == 1 ? 1 : 60;
        const int hi = mode == 0 ? 138 : mode == 1 ? 255 : 68;
        float acc[16], out[16];
        uint16_t a[32], b[32];
        for (int l = 0; l < 32; ++l)
            a[l] = random_bf16(lo, hi), b[l] = random_bf16(lo, hi);
        for (int l = 0; l < 16; ++l) {
            const float p = from_bits((uint32_t)a[2 * l + 1] << 16)
                            * from_bits((uint32_t)b[2 * l + 1] << 16);
            switch (next() % 4) {
            case 0: acc[l] = 0; break;
            case 1: acc[l] = -p * (1 + (float)(next() % 16) * 0x1p-20f); break; /* cancels */
            case 2: acc[l] = from_bits((uint32_t)(next() & 0x80ffffffu) | 0x00800000u); break;
            default: acc[l] = (float)uniform() * 0x1p-100f; break;
            }
            if (!isfinite(acc[l]) || fabsf(acc[l]) < FLT_MIN)
                acc[l] = 0; /* the kernels' accumulators are never denormal */
        }
        dpbf16(acc, a, b, out);
        for (int l = 0; l < 16; ++l) {
            const float a0 = from_bits((uint32_t)a[2 * l] << 16);
            const float b0 = from_bits((uint32_t)b[2 * l] << 16);
            const float a1 = from_bits((uint32_t)a[2 * l + 1] << 16);
            const float b1 = from_bits((uint32_t)b[2 * l + 1] << 16);
            if (!isfinite(out[l]))
                continue;
            const float want = ref_step(a0, b0, ref_step(a1, b1, acc[l]));
            ++lanes;
            if (bits(out[l]) != bits(want) && bad++ < 5)
                printf("  vdpbf16ps: acc %a, %a·%a, %a·%a = %a, model %a\n", acc[l], a1, b1,
                       a0, b0, out[l], want);
        }
    }
    check(bad == 0, "the bf16 model against vdpbf16ps", lanes, bad, 0);
    printf("the bf16 model against vdpbf16ps: %ld lanes, %ld differ\n", lanes, bad);
}
#endif

/* The int8 products at their extremes, on every instruction set: every activation at the top
 * level (Q8_ALEVELS) and every weight at +127 or -127, so that every pair of products reaches
 * its largest magnitude (where vpmaddubsw saturates unless the activations have 7 bits), for K
 * up to CELLS_LOWP_Q8_K_MAX (where the int32 sums are largest); zp = 0 and unit scales, so the
 * result is Σ qa·q itself, Q8_ALEVELS·(±127)·K, exact in float32 only where representable:
 * compared as the float32 of the exact integer. */
static void test_q8_extremes(int have) {
    static const int Ks[] = {8, 1000, CELLS_LOWP_Q8_K_MAX};
    enum { M = 5, N = 64 };
    for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; ++c)
        for (int sign = -1; sign <= 1; sign += 2) {
            const int K = Ks[c], K4 = (int)cells_lowp_q8_row(K);
            int8_t *Q = alloc((size_t)K * N), *P8 = alloc(cells_lowp_q8_len(K, N));
            uint8_t *QA = alloc((size_t)M * K4);
            float *ones = alloc(sizeof(float) * N), *sw = alloc(sizeof(float) * N);
            float *sa = alloc(sizeof(float) * M), *C = alloc(sizeof(float) * M * N);
            float *expect = alloc(sizeof(float) * M * N);
            int32_t *colsum = alloc(sizeof(int32_t) * N), *zp = alloc(sizeof(int32_t) * M);
            memset(Q, sign * 127, (size_t)K * N);
            memset(QA, 0, (size_t)M * K4);
            for (int i = 0; i < M; ++i) {
                memset(QA + (size_t)i * K4, Q8_ALEVELS, (size_t)K);
                sa[i] = 1, zp[i] = 0;
            }
            for (int j = 0; j < N; ++j)
                ones[j] = 1;
            cells_lowp_q8_pack_quantized(K, N, Q, N, 0, ones, P8, sw, colsum);
            for (int e = 0; e < M * N; ++e)
                expect[e] = (float)((long long)Q8_ALEVELS * sign * 127 * K);
            for (int t = 0; t < NISAS; ++t) {
                if (!isa_runs(isas[t], have))
                    continue;
                cells_lowp_q8_gemm_isa(isas[t], M, N, K, QA, K4, sa, zp, P8, sw, colsum, 0, 0,
                                       C, N);
                check_c(C, M, N, N, expect, "int8 product at the extremes", isas[t], K);
            }
            free(Q), free(P8), free(QA), free(ones), free(sw), free(sa), free(C), free(expect);
            free(colsum), free(zp);
        }
}

int main(void) {
    const int have_q8 = cells_lowp_isa_q8(), have_bf16 = cells_lowp_isa_bf16();
    printf("instruction sets: int8 %d, bf16 %d\n", have_q8, have_bf16);
    test_rows(have_q8, have_bf16);
    test_q8_extremes(have_q8);
    for (int a = 0; a < NSIZES_M; ++a)
        for (int b = 0; b < NSIZES_N; ++b)
            for (int c = 0; c < NSIZES_K; ++c) {
                test_q8(sizes_m[a], sizes_n[b], sizes_k[c], have_q8);
                test_bf16(sizes_m[a], sizes_n[b], sizes_k[c], have_bf16, 0);
                if (c % 3 == 0)
                    test_bf16(sizes_m[a], sizes_n[b], sizes_k[c], have_bf16, 1);
            }
#if CELLS_LOWP_X86
    if (have_bf16 >= CELLS_LOWP_ISA_DOT)
        test_model_against_hardware();
#endif
    printf("%ld checks, %ld failures\n", checks, failures);
    return failures != 0;
}
