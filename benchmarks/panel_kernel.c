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
 * backward's dz·Whᵀ [B, G]·[G, H].
 */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>

#include "c_timing.h"
#include "cells/panel.h"

enum { SAMPLES = 21, MIN_SAMPLE_NS = 20000000, WARM = 3 };

typedef struct {
    const char *what;
    int M, K, n;
} shape;

static const shape SHAPES[] = {
    {"lstm h·Wh B=64 H=256", 64, 256, 1024},   {"lstm x·Wx 8 steps B=64", 512, 256, 1024},
    {"lstm dz·Whᵀ B=64 H=256", 64, 1024, 256}, {"gru h·Wh B=64 H=256", 64, 256, 768},
    {"lstm h·Wh B=16 H=256", 16, 256, 1024},   {"lstm h·Wh B=128 H=512", 128, 512, 2048},
    {"lstm dz·Whᵀ B=128 H=512", 128, 2048, 512},
};

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
    printf("%-26s %5s %5s %5s", "product", "M", "K", "n");
    for (int p = 0; p < np; ++p)
        printf("  %8s GF/s", paths[p] == CELLS_ISA_AVX512 ? "avx512" : "avx2");
    printf("\n");
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; ++s) {
        const shape sh = SHAPES[s];
        float *A = aligned(sizeof(float) * (size_t)sh.M * sh.K);
        float *B = aligned(sizeof(float) * (size_t)sh.K * sh.n);
        float *P = aligned(sizeof(float) * cells_panel_len_f(sh.K, sh.n));
        float *C = aligned(sizeof(float) * (size_t)sh.M * sh.n);
        for (size_t i = 0; i < (size_t)sh.M * sh.K; ++i)
            A[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < (size_t)sh.K * sh.n; ++i)
            B[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        cells_pack_panels_f(sh.K, sh.n, B, sh.n, 0, P);
        const double flops = 2.0 * sh.M * sh.K * sh.n;
        double rates[2][SAMPLES];
        for (int sample = 0; sample < SAMPLES; ++sample)
            for (int p = 0; p < np; ++p) {
                for (int w = 0; w < WARM; ++w)
                    cells_panel_gemm_f(paths[p], 0, sh.M, sh.n, sh.K, A, sh.K, P, 0, 0, C, sh.n);
                long calls = 0;
                const double t0 = now_ns();
                double t1;
                do {
                    cells_panel_gemm_f(paths[p], 0, sh.M, sh.n, sh.K, A, sh.K, P, 0, 0, C, sh.n);
                    ++calls;
                } while ((t1 = now_ns()) - t0 < MIN_SAMPLE_NS);
                rates[p][sample] = flops * calls / (t1 - t0);
            }
        printf("%-26s %5d %5d %5d", sh.what, sh.M, sh.K, sh.n);
        for (int p = 0; p < np; ++p) {
            qsort(rates[p], SAMPLES, sizeof(double), compare);
            printf("  %13.1f", rates[p][SAMPLES / 2]);
        }
        printf("\n");
        free(A), free(B), free(P), free(C);
    }
    return 0;
}
