/* gcc -O3 -fno-wrapv -fno-trapping-math -pthread -I include benchmarks/lowp_kernels.c -o /tmp/lowp_kernels -lm && /tmp/lowp_kernels
 *
 * One step of an LSTM's products on 1 thread, x [M, I]·Wx [I, 4H] + h [M, H]·Wh [H, 4H] (+ a
 * bias), as a prepared net runs them: float32 (cells_gemm_panels_fixed_f) against int8
 * (cells/lowp.h, activations quantized at every step) and bfloat16 (activations rounded at
 * every step), each low-precision product on every instruction set the CPU runs. Times are
 * medians over many samples, the contenders alternated sample by sample; a sample runs
 * WARM_STEPS steps untimed, then enough steps to last at least MIN_SAMPLE_NS. The contender
 * before it has evicted its weights from the caches, which a net stepping on its own does not;
 * and after a stream larger than L3 (the float32 weights at I=512 H=1024), one pass over the
 * weights leaves the next still reading most of them from memory: Zen's L3, filled by what L2
 * evicts, keeps a new stream's lines only after it has been read a few times. With one warm
 * step, the first contender on a set of weights ran at memory speed and the next one on the
 * same weights from L3, which made the faster kernel of the two look slower. Reported
 * per step: µs, the weights' bytes read per second (GB/s: what bounds a step at M = 1) and the
 * multiply-adds' rate (GF/s: 2·M·(I+H)·4H flops, what bounds it at large M).
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "c_timing.h"
#include "cells/lowp.h"

enum { SAMPLES = 41, MIN_SAMPLE_NS = 200000, WARM_STEPS = 4, GATES = 4 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

/* One LSTM shape's operands, in every format. */
typedef struct {
    int M, I, H, n;
    float *x, *h, *bias, *C;
    float *Px, *Ph;                     /* float32 panels */
    int8_t *Qx, *Qh;                    /* int8 panels */
    float *swx, *swh;
    int32_t *csx, *csh;
    uint8_t *qx, *qh;                   /* quantized rows */
    float *sax, *sah;
    int32_t *zpx, *zph;
    uint16_t *Bx, *Bh;                  /* bfloat16 panels */
    uint16_t *bx, *bh;                  /* rounded rows */
} shape;

static float *random_floats(size_t count, float scale) {
    float *p = aligned(sizeof(float) * count);
    for (size_t e = 0; e < count; ++e)
        p[e] = uniform() * scale;
    return p;
}

static void make(shape *s, int M, int I, int H) {
    s->M = M, s->I = I, s->H = H, s->n = GATES * H;
    const int n = s->n;
    float *Wx = random_floats((size_t)I * n, 0.1f), *Wh = random_floats((size_t)H * n, 0.1f);
    s->x = random_floats((size_t)M * I, 1), s->h = random_floats((size_t)M * H, 1);
    s->bias = random_floats(n, 0.1f);
    s->C = aligned(sizeof(float) * M * n);
    s->Px = aligned(sizeof(float) * cells_panel_len_f(I, n));
    s->Ph = aligned(sizeof(float) * cells_panel_len_f(H, n));
    cells_pack_panels_f(I, n, Wx, n, 0, s->Px);
    cells_pack_panels_f(H, n, Wh, n, 0, s->Ph);
    s->Qx = aligned(cells_lowp_q8_len(I, n)), s->Qh = aligned(cells_lowp_q8_len(H, n));
    s->swx = aligned(sizeof(float) * n), s->swh = aligned(sizeof(float) * n);
    s->csx = aligned(sizeof(int32_t) * n), s->csh = aligned(sizeof(int32_t) * n);
    cells_lowp_q8_pack(I, n, Wx, n, 0, s->Qx, s->swx, s->csx);
    cells_lowp_q8_pack(H, n, Wh, n, 0, s->Qh, s->swh, s->csh);
    s->qx = aligned((size_t)M * cells_lowp_q8_row(I));
    s->qh = aligned((size_t)M * cells_lowp_q8_row(H));
    s->sax = aligned(sizeof(float) * M), s->sah = aligned(sizeof(float) * M);
    s->zpx = aligned(sizeof(int32_t) * M), s->zph = aligned(sizeof(int32_t) * M);
    s->Bx = aligned(sizeof(uint16_t) * cells_lowp_bf16_len(I, n));
    s->Bh = aligned(sizeof(uint16_t) * cells_lowp_bf16_len(H, n));
    cells_lowp_bf16_pack(I, n, Wx, n, 0, s->Bx);
    cells_lowp_bf16_pack(H, n, Wh, n, 0, s->Bh);
    s->bx = aligned(sizeof(uint16_t) * M * cells_lowp_bf16_row(I));
    s->bh = aligned(sizeof(uint16_t) * M * cells_lowp_bf16_row(H));
    free(Wx), free(Wh);
}

/* The columns [j0, j0 + w) of one step of contender c: 0 float32, 1 int8, 2 bfloat16 (isa for
 * the low-precision ones), the rows already converted. */
static void columns(const shape *s, int c, int isa, int j0, int w) {
    const int M = s->M, I = s->I, H = s->H, n = s->n, NR = CELLS_LOWP_NR;
    float *C = s->C + j0, *bias = s->bias + j0;
    if (c == 0) {
        cells_gemm_panels_fixed_f(M, w, I, s->x, I, s->Px + (size_t)j0 * I, bias, 0, C, n);
        cells_gemm_panels_fixed_f(M, w, H, s->h, H, s->Ph + (size_t)j0 * H, 0, 1, C, n);
    } else if (c == 1) {
        const ptrdiff_t lx = cells_lowp_q8_row(I), lh = cells_lowp_q8_row(H);
        cells_lowp_q8_gemm_isa(isa, M, w, I, s->qx, lx, s->sax, s->zpx, s->Qx + (size_t)j0 * lx,
                               s->swx + j0, s->csx + j0, bias, 0, C, n);
        cells_lowp_q8_gemm_isa(isa, M, w, H, s->qh, lh, s->sah, s->zph, s->Qh + (size_t)j0 * lh,
                               s->swh + j0, s->csh + j0, 0, CELLS_LOWP_ADD, C, n);
    } else {
        const ptrdiff_t lx = cells_lowp_bf16_row(I), lh = cells_lowp_bf16_row(H);
        cells_lowp_bf16_gemm_isa(isa, M, w, I, s->bx, lx, s->Bx + (size_t)j0 * lx, bias, 0, C, n);
        cells_lowp_bf16_gemm_isa(isa, M, w, H, s->bh, lh, s->Bh + (size_t)j0 * lh, 0,
                                 CELLS_LOWP_ADD, C, n);
    }
    (void)NR;
}

/* One step of contender c: the rows converted, then the products, in one call each over all
 * 4H columns (by_panel 0) or as a prepared net's tasks run them (by_panel 1): for each of the
 * H / 64 panels of a gate block, the 64 columns of that panel in each of the 4 gate blocks,
 * one call each. */
static void step(const shape *s, int c, int isa, int by_panel) {
    const int M = s->M, I = s->I, H = s->H, n = s->n, NR = CELLS_LOWP_NR;
    if (c == 1) {
        cells_lowp_q8_rows_isa(isa, M, I, s->x, I, s->qx, cells_lowp_q8_row(I), s->sax, s->zpx);
        cells_lowp_q8_rows_isa(isa, M, H, s->h, H, s->qh, cells_lowp_q8_row(H), s->sah, s->zph);
    } else if (c == 2) {
        cells_lowp_bf16_rows_isa(isa, M, I, s->x, I, s->bx, cells_lowp_bf16_row(I));
        cells_lowp_bf16_rows_isa(isa, M, H, s->h, H, s->bh, cells_lowp_bf16_row(H));
    }
    if (!by_panel) {
        columns(s, c, isa, 0, n);
        return;
    }
    for (int p = 0; p < H; p += NR)
        for (int g = 0; g < GATES; ++g)
            columns(s, c, isa, g * H + p, H - p < NR ? H - p : NR);
}

typedef struct { int kind, isa; const char *name; } contender;
static const contender all[] = {
    {0, 0, "float32"},
    {1, CELLS_LOWP_ISA_DOT, "int8 vnni"},     {1, CELLS_LOWP_ISA_AVX512, "int8 avx512"},
    {1, CELLS_LOWP_ISA_AVX2, "int8 avx2"},    {1, CELLS_LOWP_ISA_BASE, "int8 base"},
    {2, CELLS_LOWP_ISA_DOT, "bf16 dpbf16"},   {2, CELLS_LOWP_ISA_AVX512, "bf16 avx512"},
    {2, CELLS_LOWP_ISA_AVX2, "bf16 avx2"},    {2, CELLS_LOWP_ISA_BASE, "bf16 base"}};
enum { NC = sizeof all / sizeof all[0], BASE_SAMPLES = 5 };

/* Whether contender c runs here and was asked for (only: a part of its name, or NULL). */
static int wanted(int c, const char *only) {
    const int have = all[c].kind == 1 ? cells_lowp_isa_q8() : cells_lowp_isa_bf16();
    if (all[c].kind && all[c].isa > have)
        return 0;
    return !only || all[c].kind == 0 || strstr(all[c].name, only);
}

/* The row conversions alone: ns per element of one row of K, each instruction set (the int8
 * rows of isa 5 are isa 4's; the baseline is the scalar code every path reproduces). */
static void bench_rows(const char *only) {
    static const int sizes[] = {128, 256, 512, 1024};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; ++t) {
        const int K = sizes[t];
        float *a = random_floats(K, 1), sa;
        uint8_t *q = aligned(cells_lowp_q8_row(K));
        uint16_t *b = aligned(sizeof(uint16_t) * cells_lowp_bf16_row(K));
        int32_t zp;
        double *times[NC];
        for (int c = 1; c < NC; ++c)
            times[c] = calloc(SAMPLES, sizeof(double));
        for (int r = 0; r < SAMPLES; ++r)
            for (int c = 1; c < NC; ++c) {
                if (!wanted(c, only) || (all[c].kind == 1 && all[c].isa == CELLS_LOWP_ISA_DOT))
                    continue;
                enum { REPS = 2000 };
                const double t0 = now_ns();
                for (int k = 0; k < REPS; ++k) {
                    if (all[c].kind == 1)
                        cells_lowp_q8_rows_isa(all[c].isa, 1, K, a, K, q, K, &sa, &zp);
                    else
                        cells_lowp_bf16_rows_isa(all[c].isa, 1, K, a, K, b, K);
                    __asm__ volatile("" ::: "memory"); /* every call's stores happen */
                }
                times[c][r] = (now_ns() - t0) / REPS / K;
            }
        printf("\nrow conversion, K=%d: ns per element\n", K);
        for (int c = 1; c < NC; ++c) {
            if (wanted(c, only) && !(all[c].kind == 1 && all[c].isa == CELLS_LOWP_ISA_DOT)) {
                qsort(times[c], SAMPLES, sizeof(double), compare);
                printf("  %-12s %7.3f ns\n", all[c].name, times[c][SAMPLES / 2]);
            }
            free(times[c]);
        }
        free(a), free(q), free(b);
    }
}

/* LSTM steps: by_panel as for step(). */
static void bench_steps(int M, int I, int H, int by_panel, const char *only) {
    shape s;
    make(&s, M, I, H);
    const double macs = (double)s.M * (s.I + s.H) * s.n;
    double *times[NC], reps[NC];
    for (int c = 0; c < NC; ++c) { /* calibrate: steps per sample */
        times[c] = calloc(SAMPLES, sizeof(double));
        if (!wanted(c, only))
            continue;
        step(&s, all[c].kind, all[c].isa, by_panel);
        const double t0 = now_ns();
        step(&s, all[c].kind, all[c].isa, by_panel);
        const double one = now_ns() - t0;
        reps[c] = one >= MIN_SAMPLE_NS ? 1 : (double)(int)(MIN_SAMPLE_NS / (one + 1) + 1);
    }
    for (int r = 0; r < SAMPLES; ++r)
        for (int c = 0; c < NC; ++c) {
            if (!wanted(c, only) || (all[c].isa == CELLS_LOWP_ISA_BASE && all[c].kind
                                     && r >= BASE_SAMPLES))
                continue; /* the baseline: 5 samples */
            for (int k = 0; k < WARM_STEPS; ++k) /* its weights back in the caches */
                step(&s, all[c].kind, all[c].isa, by_panel);
            const double t0 = now_ns();
            for (int k = 0; k < (int)reps[c]; ++k)
                step(&s, all[c].kind, all[c].isa, by_panel);
            times[c][r] = (now_ns() - t0) / reps[c];
        }
    printf("\nLSTM step I=%d H=%d M=%d%s (weights: float32 %.1f MB)\n", s.I, s.H, s.M,
           by_panel ? ", by panel tasks (n = 64 a call)" : "", 4.0 * (s.I + s.H) * s.n / 1e6);
    double base = 0;
    for (int c = 0; c < NC; ++c) {
        if (wanted(c, only)) {
            const int count = all[c].kind && all[c].isa == CELLS_LOWP_ISA_BASE ? BASE_SAMPLES
                                                                               : SAMPLES;
            qsort(times[c], count, sizeof(double), compare);
            const double med = times[c][count / 2];
            const double bytes =
                all[c].kind == 0   ? 4.0 * (s.I + s.H) * s.n
                : all[c].kind == 1 ? (double)(cells_lowp_q8_len(s.I, s.n)
                                              + cells_lowp_q8_len(s.H, s.n))
                                   : 2.0 * (double)(cells_lowp_bf16_len(s.I, s.n)
                                                    + cells_lowp_bf16_len(s.H, s.n));
            if (c == 0)
                base = med;
            printf("  %-12s %9.2f us  %7.1f GB/s  %7.1f GF/s  %5.2fx float32\n", all[c].name,
                   med / 1e3, bytes / med, 2 * macs / med, base / med);
        }
        free(times[c]);
    }
}

/* lowp_kernels [rows | steps [shape [contender]]]: everything by default; a shape's index in
 * the list below, and a part of a contender's name (float32 always runs), to time one alone. */
int main(int argc, char **argv) {
    static const int shapes[][4] = {{1, 512, 1024, 0}, {1, 512, 1024, 1}, {1, 128, 128, 0},
                                    {1, 256, 256, 0},  {1, 256, 256, 1},  {8, 256, 256, 0},
                                    {64, 256, 256, 0}}; /* M, I, H, by_panel */
    const char *mode = argc > 1 ? argv[1] : "all", *only = argc > 3 ? argv[3] : 0;
    const int pick = argc > 2 ? atoi(argv[2]) : -1;
    printf("instruction sets: int8 %d, bf16 %d; medians of %d samples\n", cells_lowp_isa_q8(),
           cells_lowp_isa_bf16(), SAMPLES);
    if (strcmp(mode, "steps"))
        bench_rows(only);
    if (strcmp(mode, "rows"))
        for (int t = 0; t < (int)(sizeof shapes / sizeof shapes[0]); ++t)
            if (pick < 0 || pick == t)
                bench_steps(shapes[t][0], shapes[t][1], shapes[t][2], shapes[t][3], only);
    return 0;
}
