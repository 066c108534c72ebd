/* gcc -O3 -fno-wrapv -fno-trapping-math -pthread -I include benchmarks/panel_kernel.c -o /tmp/panel_kernel
 * python benchmarks/peak.py --isa avx2 && /tmp/panel_kernel && python benchmarks/peak.py --isa avx2
 *
 * The packed-panel gemm alone (cells/panel.h), on 1 thread, at the products a time loop runs:
 * C[M, n] = A[M, K]·P, P packed once, on every instruction-set path the CPU runs, the paths
 * alternated sample by sample. Each sample runs WARM calls untimed, then enough calls to last
 * at least MIN_SAMPLE_NS; the figure is the median over SAMPLES samples, in GF/s (2·M·K·n
 * flops a call). Compare it with the FMA peak of the same path (benchmarks/peak.py --isa),
 * measured just before and after, as above: a shared host moves both.
 *
 * The shapes are an LSTM's (G = 4H) and a GRU's (G = 3H) at I = H = 256 and 512: the step's
 * h·Wh [B, H]·[H, G], the input projection x·Wx over 8 steps' rows [8B, I]·[I, G], and the
 * backward's dz·Whᵀ [B, G]·[G, H]. Then one thread's share of h·Wh where 8 or 16 threads split
 * the units (32 or 16 of each gate block): its gate blocks multiplied each on panels of its
 * own ("separate", n columns each), and side by side on one packed matrix of blocks·n columns
 * (what the time loop packs for a share narrower than a panel, cells/_panels.pxd).
 */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>

#include "c_timing.h"
#include "cells/panel.h"

enum { SAMPLES = 21, MIN_SAMPLE_NS = 20000000, WARM = 3 };

/* C[M, blocks·n] = A[M, K]·B: `blocks` gate blocks of n columns, side by side or each on
 * panels of its own (blocks > 1: both are timed). */
typedef struct {
    const char *what;
    int M, K, n, blocks;
} shape;

static const shape SHAPES[] = {
    {"lstm h·Wh B=64 H=256", 64, 256, 1024, 1},   {"lstm x·Wx 8 steps B=64", 512, 256, 1024, 1},
    {"lstm dz·Whᵀ B=64 H=256", 64, 1024, 256, 1}, {"gru h·Wh B=64 H=256", 64, 256, 768, 1},
    {"lstm h·Wh B=16 H=256", 16, 256, 1024, 1},   {"lstm h·Wh B=128 H=512", 128, 512, 2048, 1},
    {"lstm dz·Whᵀ B=128 H=512", 128, 2048, 512, 1},
    {"lstm h·Wh B=64, 1/16 of H=256", 64, 256, 16, 4},
    {"lstm h·Wh B=64, 1/8 of H=256", 64, 256, 32, 4},
    {"gru h·Wh B=64, 1/16 of H=256", 64, 256, 16, 3},
    {"lstm h·Wh B=1, 1/16 of H=256", 1, 256, 16, 4},
};

/* One product of shape sh on path `path`: side by side (P packs B [K, blocks·n] whole), or
 * block by block (P packs block k's n columns from k·panel_len(K, n)). */
static void product(int path, const shape *sh, int side, const float *A, const float *P,
                    float *C) {
    const int cols = sh->n * sh->blocks;
    if (side) {
        cells_panel_gemm_f(path, 0, sh->M, cols, sh->K, A, sh->K, P, 0, 0, C, cols);
        return;
    }
    for (int k = 0; k < sh->blocks; ++k)
        cells_panel_gemm_f(path, 0, sh->M, sh->n, sh->K, A, sh->K,
                           P + k * cells_panel_len_f(sh->K, sh->n), 0, 0, C + k * sh->n, cols);
}

int main(void) {
    const int cpu = cells_isa_cpu();
    int paths[2], np = 0;
    if (cpu >= CELLS_ISA_AVX512)
        paths[np++] = CELLS_ISA_AVX512;
    if (cpu >= CELLS_ISA_AVX2)
        paths[np++] = CELLS_ISA_AVX2;
    if (!np) {
        printf("this CPU runs neither the AVX2 nor the AVX-512 kernels\n");
        return 0;
    }
    printf("%-30s %5s %5s %5s %-12s", "product", "M", "K", "n", "blocks");
    for (int p = 0; p < np; ++p)
        printf("  %8s GF/s", paths[p] == CELLS_ISA_AVX512 ? "avx512" : "avx2");
    printf("\n");
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; ++s) {
        const shape sh = SHAPES[s];
        const int cols = sh.n * sh.blocks;
        const size_t separate_len = (size_t)sh.blocks * cells_panel_len_f(sh.K, sh.n);
        const size_t side_len = cells_panel_len_f(sh.K, cols);
        float *A = aligned(sizeof(float) * (size_t)sh.M * sh.K);
        float *B = aligned(sizeof(float) * (size_t)sh.K * cols);
        float *P[2] = {aligned(sizeof(float) * separate_len), aligned(sizeof(float) * side_len)};
        float *C = aligned(sizeof(float) * (size_t)sh.M * cols);
        for (size_t i = 0; i < (size_t)sh.M * sh.K; ++i)
            A[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < (size_t)sh.K * cols; ++i)
            B[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        for (int k = 0; k < sh.blocks; ++k)
            cells_pack_panels_f(sh.K, sh.n, B + k * sh.n, cols, 0,
                                P[0] + k * cells_panel_len_f(sh.K, sh.n));
        cells_pack_panels_f(sh.K, cols, B, cols, 0, P[1]);
        const double flops = 2.0 * sh.M * sh.K * cols;
        for (int side = sh.blocks > 1 ? 0 : 1; side < 2; ++side) {
            double rates[2][SAMPLES];
            for (int sample = 0; sample < SAMPLES; ++sample)
                for (int p = 0; p < np; ++p) {
                    for (int w = 0; w < WARM; ++w)
                        product(paths[p], &sh, side, A, P[side], C);
                    long calls = 0;
                    const double t0 = now_ns();
                    double t1;
                    do {
                        product(paths[p], &sh, side, A, P[side], C);
                        ++calls;
                    } while ((t1 = now_ns()) - t0 < MIN_SAMPLE_NS);
                    rates[p][sample] = flops * calls / (t1 - t0);
                }
            char blocks[16];
            snprintf(blocks, sizeof blocks, sh.blocks == 1 ? "1" : side ? "%d side" : "%d apart",
                     sh.blocks);
            printf("%-30s %5d %5d %5d %-12s", sh.what, sh.M, sh.K, sh.n, blocks);
            for (int p = 0; p < np; ++p) {
                qsort(rates[p], SAMPLES, sizeof(double), compare);
                printf("  %13.1f", rates[p][SAMPLES / 2]);
            }
            printf("\n");
        }
        free(A), free(B), free(P[0]), free(P[1]), free(C);
    }
    return 0;
}
