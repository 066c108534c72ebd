/* Correctness test of cells/panel.h: pack_panels, gemm_panels, gemm_tn, gemm_nn and gemm_nt
 * against a naive triple loop.
 *
 *   gcc -O3 -fno-wrapv -fno-trapping-math -I include tests/c/test_panel.c -o test_panel -lm
 *   ./test_panel                          (tests/test_panel.py does this)
 * With -O1 -g -fsanitize=address,undefined -DGUARD=0 every buffer is allocated at its exact
 * size, for AddressSanitizer (or valgrind) to see any access outside.
 *
 * For both types, both transB, beta 0 (C prefilled with NaN), 1 (and -0.5 on a third of the
 * sizes), with and without a bias, and every size in the lists below:
 *  - A, B and the gaps between their rows (lda > K, ldb > n or > K) are NaN everywhere outside
 *    the elements the product uses, so a read outside them poisons C;
 *  - C's gaps (ldc > n) and GUARD elements before and after it hold a sentinel that must
 *    survive; with GUARD = 0 every buffer is its own malloc of exactly the size the API allows,
 *    so that AddressSanitizer/valgrind see any access outside;
 *  - P is checked element by element against the layout the header documents (zero padding
 *    included), and the product is checked for every register blocking the CPU runs (4, 3, 0:
 *    called through cells_panel_gemm_*; where this build lacks one, the next lower it has) as
 *    well as through the public cells_gemm_panels_* (the one the CPU picks), with P misaligned
 *    too;
 *  - gemm_panels_fixed (every blocking in fixed order, and the public entry) gives the same
 *    bits for a row alone, in any block of rows and for any panel multiplied on its own;
 *  - gemm_tn (C = Aᵀ·B + beta·C, A [K, M] and B [K, n] read in place), gemm_nn (C = A·B
 *    (+ bias) + beta·C, A [M, K]) and gemm_nt (C = A·Bᵀ (+ bias) + beta·C, B [n, K]) the same
 *    way, on sizes that cross gemm_tn's and gemm_nn's row blocks (K > CELLS_PANEL_TN_ROWS),
 *    every part vector of B's columns (of K's vectors for gemm_nt) and every part tile;
 *  - the reference accumulates in long double; the error bound is the classical one for a dot
 *    product summed in any order, |ĉ - c| <= γ_{K+2}·(Σ|a||b| + |beta·c0|), γ_m = m·u/(1-m·u),
 *    u = eps/2 (K products and sums, plus the beta·c0 term and its sum); we allow (K+2)·eps,
 *    twice the first-order bound, plus the reference's own rounding.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cells/panel.h"

#ifndef GUARD
#define GUARD 16
#endif

static const double SENTINEL = 12345.0;
static long failures, checks;
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* What a product runs: gemm_panels on a packed B, or gemm_tn / gemm_nn / gemm_nt on B in
 * place. */
enum kind { GEMM_PANELS, GEMM_TN, GEMM_NN, GEMM_NT };

static double uniform(void) { /* in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

#define DEFINE_TEST(REAL, S, EPS)                                                              \
static REAL *alloc_##S(size_t n, size_t guard, REAL fill) {                                    \
    REAL *p = malloc((n + 2 * guard) * sizeof(REAL) + 1);                                      \
    for (size_t i = 0; i < n + 2 * guard; ++i) p[i] = fill;                                    \
    return p + guard;                                                                          \
}                                                                                              \
                                                                                               \
/* C [M, ldc] (lenC elements, GUARD sentinels each side) against ref and its error bound mag   \
 * ([M, n]); C0: C before the product. `what` and isa name the call in a failure. */           \
static void check_##S(const char *what, int isa, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,        \
                      REAL beta, const REAL *bias, const REAL *C, const REAL *C0, ptrdiff_t ldc, \
                      size_t lenC, const long double *ref, const long double *mag) {           \
    for (ptrdiff_t i = 0; i < M; ++i)                                                          \
        for (ptrdiff_t j = 0; j < ldc && i * ldc + j < (ptrdiff_t)lenC; ++j) {                 \
            const REAL got = C[i * ldc + j];                                                   \
            ++checks;                                                                          \
            if (j >= n) {                                                                      \
                if (got != (REAL)SENTINEL && ++failures < 20)                                  \
                    printf("FAIL %s %s isa=%d wrote C gap M=%td n=%td K=%td\n", #REAL, what,   \
                           isa, M, n, K);                                                      \
                continue;                                                                      \
            }                                                                                  \
            const long double err = fabsl((long double)got - ref[i * n + j]);                  \
            const long double tol = (long double)(K + 3) * EPS * mag[i * n + j]                \
                                    + 2 * EPS * fabsl(ref[i * n + j]);                         \
            if (!(err <= tol)) { /* also catches NaN */                                        \
                if (++failures < 20)                                                           \
                    printf("FAIL %s %s isa=%d M=%td n=%td K=%td beta=%g C[%td,%td] = %.9g, "   \
                           "want %.9Lg (err %.3Lg > tol %.3Lg)\n", #REAL, what, isa, M, n, K,  \
                           (double)beta, i, j, (double)got, ref[i * n + j], err, tol);         \
            }                                                                                  \
            const REAL c0 = beta != 0 ? beta * C0[i * ldc + j] : 0;                            \
            if (K == 0 && got != (bias ? c0 + bias[j] : c0) && ++failures < 20)                \
                printf("FAIL %s %s K=0 not bias + beta*C\n", #REAL, what);                     \
        }                                                                                      \
    for (ptrdiff_t g = 1; g <= GUARD; ++g)                                                     \
        if (C[-g] != (REAL)SENTINEL || C[lenC + g - 1] != (REAL)SENTINEL) {                    \
            ++failures;                                                                        \
            printf("FAIL %s %s isa=%d wrote outside C (M=%td n=%td K=%td)\n", #REAL, what, isa, \
                   M, n, K);                                                                   \
            break;                                                                             \
        }                                                                                      \
}                                                                                              \
                                                                                               \
/* C0 [M, ldc]: random where the product writes (NaN for beta = 0: it must not be read), the   \
 * sentinel in the gaps. */                                                                    \
static REAL *make_c0_##S(ptrdiff_t M, ptrdiff_t n, ptrdiff_t ldc, size_t lenC, REAL beta) {    \
    REAL *C0 = malloc((lenC + 1) * sizeof(REAL));                                              \
    for (size_t i = 0; i < lenC; ++i) C0[i] = (REAL)SENTINEL;                                  \
    for (ptrdiff_t i = 0; i < M; ++i)                                                          \
        for (ptrdiff_t j = 0; j < n; ++j)                                                      \
            C0[i * ldc + j] = beta != 0 ? (REAL)uniform() : (REAL)NAN;                         \
    return C0;                                                                                 \
}                                                                                              \
                                                                                               \
/* One product under test: C = op(A)·op(B) (+ bias) + beta·C of gemm_panels (B: the packed P),\
 * of gemm_tn (A [K, lda] read transposed, B [K, ldb]), of gemm_nn (A [M, lda], B [K, ldb]) or \
 * of gemm_nt (A [M, lda], B [n, ldb] read transposed).                                        \
 */                                                                                            \
typedef struct {                                                                               \
    enum kind kind;                                                                            \
    ptrdiff_t M, n, K;                                                                         \
    const REAL *A, *B, *bias;                                                                  \
    ptrdiff_t lda, ldb;                                                                        \
    REAL beta;                                                                                 \
} product_##S;                                                                                 \
                                                                                               \
/* The reference of g in long double: ref [M, n] and mag, the sum of the terms' magnitudes     \
 * (the error bound's scale). A's element (i, k) is at A[i·ars + k·aks], op(B)'s (k, j) at     \
 * B[k·bks + j·bjs]: g's own B for gemm_tn and gemm_nn, the unpacked one for gemm_panels. */   \
static void reference_##S(const product_##S *g, ptrdiff_t ars, ptrdiff_t aks,                  \
                          const REAL *B, ptrdiff_t bks, ptrdiff_t bjs, const REAL *C0,         \
                          ptrdiff_t ldc, long double *ref, long double *mag) {                 \
    for (ptrdiff_t i = 0; i < g->M; ++i)                                                       \
        for (ptrdiff_t j = 0; j < g->n; ++j) {                                                 \
            long double s = 0, m = 0;                                                          \
            for (ptrdiff_t k = 0; k < g->K; ++k) {                                             \
                const long double ab = (long double)g->A[i * ars + k * aks]                    \
                                       * B[k * bks + j * bjs];                                 \
                s += ab;                                                                       \
                m += fabsl(ab);                                                                \
            }                                                                                  \
            if (g->bias) {                                                                     \
                s += g->bias[j];                                                               \
                m += fabsl((long double)g->bias[j]);                                           \
            }                                                                                  \
            if (g->beta != 0) {                                                                \
                s += (long double)g->beta * C0[i * ldc + j];                                   \
                m += fabsl((long double)g->beta * C0[i * ldc + j]);                            \
            }                                                                                  \
            ref[i * g->n + j] = s;                                                             \
            mag[i * g->n + j] = m;                                                             \
        }                                                                                      \
}                                                                                              \
                                                                                               \
/* g with every blocking the CPU runs (4, 3, 0 through panel_gemm / panel_gemm_unpacked;      \
 * where this build lacks one, the next lower it has), then through the public entry (-1),    \
 * each on a copy of C0 checked against the reference. */                                      \
static void every_blocking_##S(const char *what, const product_##S *g, const REAL *C0,         \
                               ptrdiff_t ldc, size_t lenC, const long double *ref,             \
                               const long double *mag) {                                       \
    static const int isas[] = {4, 3, 0, -1};                                                   \
    for (int run = 0; run < (g->kind == GEMM_PANELS ? 8 : 4); ++run) {                         \
        const int t = run % 4, fixed = run >= 4; /* gemm_panels also in fixed order */         \
        if (isas[t] > cells_isa_cpu()) /* kernels this CPU cannot run */                     \
            continue;                                                                          \
        REAL *C = alloc_##S(lenC, GUARD, (REAL)SENTINEL);                                      \
        for (size_t i = 0; i < lenC; ++i) C[i] = C0[i];                                        \
        if (g->kind == GEMM_NT && isas[t] >= 0)                                                \
            cells_panel_gemm_nt_##S(isas[t], g->M, g->n, g->K, g->A, g->lda, g->B, g->ldb,     \
                                    g->bias, g->beta, C, ldc);                                 \
        else if (g->kind == GEMM_NT)                                                           \
            cells_gemm_nt_##S(g->M, g->n, g->K, g->A, g->lda, g->B, g->ldb, g->bias, g->beta,  \
                              C, ldc);                                                         \
        else if (g->kind != GEMM_PANELS && isas[t] >= 0)                                       \
            cells_panel_gemm_unpacked_##S(isas[t], g->kind == GEMM_TN, g->M, g->n, g->K, g->A, \
                                          g->lda, g->B, g->ldb, g->bias, g->beta, C, ldc);     \
        else if (g->kind == GEMM_TN)                                                           \
            cells_gemm_tn_##S(g->M, g->n, g->K, g->A, g->lda, g->B, g->ldb, g->beta, C, ldc);  \
        else if (g->kind == GEMM_NN)                                                           \
            cells_gemm_nn_##S(g->M, g->n, g->K, g->A, g->lda, g->B, g->ldb, g->bias, g->beta,  \
                              C, ldc);                                                         \
        else if (isas[t] >= 0)                                                                 \
            cells_panel_gemm_##S(isas[t], fixed, g->M, g->n, g->K, g->A, g->lda, g->B, g->bias,\
                                 g->beta, C, ldc);                                             \
        else if (fixed)                                                                        \
            cells_gemm_panels_fixed_##S(g->M, g->n, g->K, g->A, g->lda, g->B, g->bias, g->beta,\
                                        C, ldc);                                               \
        else                                                                                   \
            cells_gemm_panels_##S(g->M, g->n, g->K, g->A, g->lda, g->B, g->bias, g->beta, C,   \
                                  ldc);                                                        \
        check_##S(what, isas[t], g->M, g->n, g->K, g->beta, g->bias, C, C0, ldc, lenC, ref,    \
                  mag);                                                                        \
        free(C - GUARD);                                                                       \
    }                                                                                          \
}                                                                                              \
                                                                                               \
/* gemm_panels_fixed's promise: the same bits for every element of C whether its row is      \
 * multiplied with all M rows, alone, or in a block of rows starting anywhere, and whether its \
 * panel is multiplied with the others or on its own (how a thread takes whole panels). */     \
static void fixed_order_##S(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, const REAL *A,             \
                            ptrdiff_t lda, const REAL *P, const REAL *bias, REAL beta,         \
                            const REAL *C0, ptrdiff_t ldc, size_t lenC) {                      \
    const ptrdiff_t NR = cells_panel_width_##S();                                              \
    REAL *whole = malloc((lenC + 1) * sizeof(REAL)), *part = malloc((lenC + 1) * sizeof(REAL));\
    for (size_t i = 0; i < lenC; ++i) whole[i] = part[i] = C0[i];                              \
    cells_gemm_panels_fixed_##S(M, n, K, A, lda, P, bias, beta, whole, ldc);                   \
    /* blocks of 1, 2, 3, ... rows, each panel on its own */                                   \
    for (ptrdiff_t i0 = 0, rows = 1; i0 < M; i0 += rows, ++rows) {                            \
        const ptrdiff_t m = M - i0 < rows ? M - i0 : rows;                                     \
        for (ptrdiff_t j0 = 0; j0 < n; j0 += NR)                                               \
            cells_gemm_panels_fixed_##S(m, n - j0 < NR ? n - j0 : NR, K, A + i0 * lda, lda,    \
                                        P + j0 * K, bias ? bias + j0 : NULL, beta,             \
                                        part + i0 * ldc + j0, ldc);                            \
    }                                                                                          \
    for (ptrdiff_t i = 0; i < M; ++i)                                                          \
        for (ptrdiff_t j = 0; j < n; ++j) {                                                    \
            ++checks;                                                                          \
            if (memcmp(&whole[i * ldc + j], &part[i * ldc + j], sizeof(REAL)) != 0             \
                && ++failures < 20)                                                            \
                printf("FAIL %s fixed order M=%td n=%td K=%td C[%td,%td]: %a != %a\n", #REAL,   \
                       M, n, K, i, j, (double)whole[i * ldc + j], (double)part[i * ldc + j]);  \
        }                                                                                      \
    free(whole);                                                                               \
    free(part);                                                                                \
}                                                                                              \
                                                                                               \
/* One case of gemm_panels, with a bias when with_bias. misalign shifts P by one element. */   \
static void run_##S(ptrdiff_t M, ptrdiff_t n, ptrdiff_t K, int transB, REAL beta,              \
                    int with_bias, int misalign) {                                             \
    const ptrdiff_t NR = cells_panel_width_##S();                                              \
    const ptrdiff_t lda = K + 3, ldc = n + 5;                                                  \
    const ptrdiff_t ldb = transB ? K + 2 : n + 2;                                              \
    const ptrdiff_t brows = transB ? n : K;                                                    \
    /* exact extents: the last row need not be padded */                                       \
    const size_t lenA = M ? (size_t)((M - 1) * lda + K) : 0;                                   \
    const size_t lenB = brows ? (size_t)((brows - 1) * ldb + (transB ? K : n)) : 0;            \
    const size_t lenC = M ? (size_t)((M - 1) * ldc + n) : 0;                                   \
    const char *what = transB ? "gemm_panels transB=1" : "gemm_panels transB=0";               \
    REAL *A = alloc_##S(lenA, GUARD, (REAL)NAN), *B = alloc_##S(lenB, GUARD, (REAL)NAN);       \
    for (ptrdiff_t i = 0; i < M; ++i)                                                          \
        for (ptrdiff_t k = 0; k < K; ++k) A[i * lda + k] = (REAL)uniform();                    \
    for (ptrdiff_t r = 0; r < brows; ++r)                                                      \
        for (ptrdiff_t c = 0; c < (transB ? K : n); ++c) B[r * ldb + c] = (REAL)uniform();     \
    REAL *C0 = make_c0_##S(M, n, ldc, lenC, beta);                                             \
    REAL *bias_buf = alloc_##S((size_t)n, GUARD, (REAL)NAN);                                   \
    for (ptrdiff_t j = 0; j < n; ++j) bias_buf[j] = (REAL)uniform();                           \
    const REAL *bias = with_bias ? bias_buf : NULL;                                            \
                                                                                               \
    /* pack, and check the layout */                                                           \
    const size_t lenP = cells_panel_len_##S(K, n);                                             \
    if (lenP != (size_t)(K * ((n + NR - 1) / NR * NR))) {                                      \
        ++failures;                                                                            \
        printf("FAIL panel_len(%td, %td) = %zu\n", K, n, lenP);                                \
    }                                                                                          \
    REAL *Pbuf = alloc_##S(lenP + (size_t)misalign, GUARD, (REAL)SENTINEL);                    \
    REAL *P = Pbuf + misalign;                                                                 \
    cells_pack_panels_##S(K, n, B, ldb, transB, P);                                            \
    for (ptrdiff_t p = 0; p * NR < n; ++p)                                                     \
        for (ptrdiff_t k = 0; k < K; ++k)                                                      \
            for (ptrdiff_t j = 0; j < NR; ++j) {                                               \
                const ptrdiff_t col = p * NR + j;                                              \
                const REAL want = col >= n ? 0 : transB ? B[col * ldb + k] : B[k * ldb + col]; \
                ++checks;                                                                      \
                if (!(P[p * K * NR + k * NR + j] == want)) {                                   \
                    if (++failures < 20)                                                       \
                        printf("FAIL %s pack K=%td n=%td transB=%d P[%td][%td][%td]\n", #REAL, \
                               K, n, transB, p, k, j);                                         \
                }                                                                              \
            }                                                                                  \
    for (ptrdiff_t g = 1; g <= GUARD; ++g)                                                     \
        if (P[-g - misalign] != (REAL)SENTINEL || P[lenP + g - 1] != (REAL)SENTINEL) {         \
            ++failures;                                                                        \
            printf("FAIL %s pack wrote outside P (K=%td n=%td)\n", #REAL, K, n);               \
            break;                                                                             \
        }                                                                                      \
                                                                                               \
    const product_##S g = {GEMM_PANELS, M, n, K, A, P, bias, lda, 0, beta};                    \
    long double *ref = malloc((size_t)(M * n + 1) * sizeof(long double));                      \
    long double *mag = malloc((size_t)(M * n + 1) * sizeof(long double));                      \
    reference_##S(&g, lda, 1, B, transB ? 1 : ldb, transB ? ldb : 1, C0, ldc, ref, mag);       \
    every_blocking_##S(what, &g, C0, ldc, lenC, ref, mag);                                     \
                                                                                               \
    /* the panels from the second on, through offset pointers (how threads share P) */         \
    if (n > NR && M > 0) {                                                                     \
        REAL *C = alloc_##S(lenC, GUARD, (REAL)SENTINEL);                                      \
        for (size_t i = 0; i < lenC; ++i) C[i] = C0[i];                                        \
        cells_gemm_panels_##S(M, n - NR, K, A, lda, P + K * NR, bias ? bias + NR : NULL, beta, \
                              C + NR, ldc);                                                    \
        for (ptrdiff_t i = 0; i < M; ++i)                                                      \
            for (ptrdiff_t j = 0; j < n; ++j) {                                                \
                const REAL got = C[i * ldc + j];                                               \
                const int ok = j < NR ? (isnan(C0[i * ldc + j]) ? isnan(got)                   \
                                                                : got == C0[i * ldc + j])      \
                                      : fabsl((long double)got - ref[i * n + j])               \
                                            <= (long double)(K + 3) * EPS * mag[i * n + j]     \
                                                   + 2 * EPS * fabsl(ref[i * n + j]);          \
                ++checks;                                                                      \
                if (!ok && ++failures < 20)                                                    \
                    printf("FAIL %s panel offset M=%td n=%td K=%td C[%td,%td]\n", #REAL, M, n, \
                           K, i, j);                                                           \
            }                                                                                  \
        free(C - GUARD);                                                                       \
    }                                                                                          \
    fixed_order_##S(M, n, K, A, lda, P, bias, beta, C0, ldc, lenC);                            \
    free(ref);                                                                                 \
    free(mag);                                                                                 \
    free(C0);                                                                                  \
    free(bias_buf - GUARD);                                                                    \
    free(Pbuf - GUARD);                                                                        \
    free(A - GUARD);                                                                           \
    free(B - GUARD);                                                                           \
}                                                                                              \
                                                                                               \
/* One case of gemm_tn (kind GEMM_TN: C = Aᵀ·B + beta·C, A [K, lda], B [K, ldb]), gemm_nn     \
 * (GEMM_NN: C = A·B (+ bias, with with_bias) + beta·C, A [M, lda], B [K, ldb]) or gemm_nt     \
 * (GEMM_NT: C = A·Bᵀ (+ bias) + beta·C, A [M, lda], B [n, ldb]); NaN in their gaps. */       \
static void run_unpacked_##S(enum kind kind, ptrdiff_t M, ptrdiff_t n, ptrdiff_t K,          \
                             REAL beta, int with_bias) {                                       \
    const int tn = kind == GEMM_TN, nt = kind == GEMM_NT;                                      \
    const ptrdiff_t lda = tn ? M + 3 : K + 3, ldb = nt ? K + 2 : n + 2, ldc = n + 5;           \
    const ptrdiff_t arows = tn ? K : M, acols = tn ? M : K;                                    \
    const ptrdiff_t brows = nt ? n : K, bcols = nt ? K : n;                                    \
    const size_t lenA = arows ? (size_t)((arows - 1) * lda + acols) : 0;                       \
    const size_t lenB = brows ? (size_t)((brows - 1) * ldb + bcols) : 0;                       \
    const size_t lenC = M ? (size_t)((M - 1) * ldc + n) : 0;                                   \
    REAL *A = alloc_##S(lenA, GUARD, (REAL)NAN), *B = alloc_##S(lenB, GUARD, (REAL)NAN);       \
    for (ptrdiff_t r = 0; r < arows; ++r)                                                      \
        for (ptrdiff_t c = 0; c < acols; ++c) A[r * lda + c] = (REAL)uniform();                \
    for (ptrdiff_t r = 0; r < brows; ++r)                                                      \
        for (ptrdiff_t c = 0; c < bcols; ++c) B[r * ldb + c] = (REAL)uniform();                \
    REAL *C0 = make_c0_##S(M, n, ldc, lenC, beta);                                             \
    REAL *bias_buf = alloc_##S((size_t)n, GUARD, (REAL)NAN);                                   \
    for (ptrdiff_t j = 0; j < n; ++j) bias_buf[j] = (REAL)uniform();                           \
    const REAL *bias = with_bias && !tn ? bias_buf : NULL;                                     \
    const product_##S g = {kind, M, n, K, A, B, bias, lda, ldb, beta};                         \
    long double *ref = malloc((size_t)(M * n + 1) * sizeof(long double));                      \
    long double *mag = malloc((size_t)(M * n + 1) * sizeof(long double));                      \
    reference_##S(&g, tn ? 1 : lda, tn ? lda : 1, B, nt ? 1 : ldb, nt ? ldb : 1, C0, ldc, ref, \
                  mag);                                                                        \
    every_blocking_##S(tn ? "gemm_tn" : nt ? "gemm_nt" : "gemm_nn", &g, C0, ldc, lenC, ref,    \
                       mag);                                                                   \
    free(ref);                                                                                 \
    free(mag);                                                                                 \
    free(C0);                                                                                  \
    free(bias_buf - GUARD);                                                                    \
    free(A - GUARD);                                                                           \
    free(B - GUARD);                                                                           \
}                                                                                              \

DEFINE_TEST(float, f, (long double)FLT_EPSILON)
DEFINE_TEST(double, d, (long double)DBL_EPSILON)

int main(void) {
    const ptrdiff_t Ks[] = {0, 1, 7, 64, 129};
    const ptrdiff_t Mmax = 2 * CELLS_PANEL_MR_MAX + 3;
    long cases = 0;
    printf("cells_isa_cpu() = %d; blockings tested for isa 4, 3, 0: %d, %d, %d; "
           "panel width %td floats / %td doubles\n", cells_isa_cpu(), cells_panel_blocking_f(4),
           cells_panel_blocking_f(3), cells_panel_blocking_f(0), cells_panel_width_f(),
           cells_panel_width_d());
    for (int type = 0; type < 2; ++type) {
        const ptrdiff_t NR = type == 0 ? CELLS_PANEL_WIDTH_F : CELLS_PANEL_WIDTH_D;
        const ptrdiff_t VL = CELLS_PANEL_VBYTES / (type == 0 ? sizeof(float) : sizeof(double));
        /* whole and partial panels, and partial panels of 1, 2, 3 and 4 vectors */
        const ptrdiff_t ns[] = {0,      1,      VL - 1, VL,     VL + 1,     2 * VL + 3, 3 * VL,
                                NR - 1, NR,     NR + 1, NR + VL, 2 * NR + 5, 3 * NR};
        for (size_t ik = 0; ik < sizeof Ks / sizeof *Ks; ++ik)
            for (size_t in = 0; in < sizeof ns / sizeof *ns; ++in)
                for (ptrdiff_t M = 0; M <= Mmax; ++M)
                    for (int transB = 0; transB < 2; ++transB)
                        for (int b = 0; b < 3; ++b) {
                            /* beta 0, 1 and, for some sizes, any other */
                            const double beta = b == 2 ? -0.5 : b;
                            const int misalign = (int)((M + in) % 2);
                            if (b == 2 && (M + in + ik) % 3 != 0)
                                continue;
                            const int with_bias = (int)((M + ik) % 2);
                            if (type == 0)
                                run_f(M, ns[in], Ks[ik], transB, (float)beta, with_bias,
                                      misalign);
                            else
                                run_d(M, ns[in], Ks[ik], transB, beta, with_bias, misalign);
                            ++cases;
                        }
        /* gemm_tn, gemm_nn and gemm_nt: K across row blocks, and in whole vectors (VL·ku: gemm_nt's
         * every accumulator set) and parts of one */
        const ptrdiff_t Ktn[] = {0, 1, 7, 4 * VL, CELLS_PANEL_TN_ROWS + 1,
                                 2 * CELLS_PANEL_TN_ROWS + 45};
        for (int kind = GEMM_TN; kind <= GEMM_NT; ++kind)
            for (size_t ik = 0; ik < sizeof Ktn / sizeof *Ktn; ++ik)
                for (size_t in = 0; in < sizeof ns / sizeof *ns; ++in)
                    for (ptrdiff_t M = 0; M <= Mmax; M += 1 + (ik > 3))
                        for (int b = 0; b < 3; ++b) {
                            const double beta = b == 2 ? -0.5 : b;
                            const int with_bias = (int)((M + ik + in) % 2);
                            if (b == 2 && (M + in + ik) % 3 != 0)
                                continue;
                            if (type == 0)
                                run_unpacked_f(kind, M, ns[in], Ktn[ik], (float)beta, with_bias);
                            else
                                run_unpacked_d(kind, M, ns[in], Ktn[ik], beta, with_bias);
                            ++cases;
                        }
        /* many tiles of C's rows by many groups of vectors, a part vector at the end */
        for (int kind = GEMM_TN; kind <= GEMM_NT; ++kind)
            for (int b = 0; b < 2; ++b) {
                const ptrdiff_t M = 7 * CELLS_PANEL_MR_MAX + 5, n = 3 * NR + VL + 3;
                if (type == 0)
                    run_unpacked_f(kind, M, n, 2 * CELLS_PANEL_TN_ROWS + 45, (float)b, 1);
                else
                    run_unpacked_d(kind, M, n, 2 * CELLS_PANEL_TN_ROWS + 45, b, 1);
                ++cases;
            }
    }
    /* panel_aligned: the first 64-byte boundary, within the documented padding */
    static float fbuf[64 + CELLS_PANEL_ALIGN];
    for (int off = 0; off < 16; ++off) {
        float *p = cells_panel_aligned_f(fbuf + off);
        ++checks;
        if ((uintptr_t)p % CELLS_PANEL_ALIGN != 0 || p < fbuf + off
            || p > fbuf + off + CELLS_PANEL_ALIGN / sizeof(float) - 1) {
            ++failures;
            printf("FAIL panel_aligned(fbuf + %d)\n", off);
        }
    }
    printf("%ld cases, %ld checks, %ld failures\n", cases, checks, failures);
    return failures != 0;
}
