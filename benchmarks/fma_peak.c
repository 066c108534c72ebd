/* The machine's FMA peak: GF/s of independent fused multiply-adds on the vectors of one
 * instruction set, float and double, on 1 to N threads (OpenMP). VECTOR_BYTES is that set's
 * register width: 64 for AVX-512 (-march=x86-64-v4), 32 for AVX2 (-march=x86-64-v3), 16 for
 * the x86-64 baseline (SSE2, which has no FMA: a multiply and an add, the same 2 FLOPs a lane).
 *
 *     cc -O2 -march=x86-64-v3 -mtune=native -DVECTOR_BYTES=32 -fopenmp fma_peak.c -o fma_peak
 *     ./fma_peak 2
 *
 * prints one line per dtype and thread count: "float32 <threads> <GF/s>". Each thread runs
 * ACCUMULATORS (12) independent chains a = a·x + y (more than an FMA's latency times the FMA
 * ports, 4 cycles × 2 on Zen 3 to 5), each in one register (12 + x and y fit AVX2's 16), so
 * nothing but the FMA units limits it; 2 FLOPs per lane. benchmarks/peak.py builds and runs it.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define ACCUMULATORS 12
#ifndef VECTOR_BYTES
#define VECTOR_BYTES 64
#endif
#define ITERATIONS 20000000L

typedef float vfloat __attribute__((vector_size(VECTOR_BYTES)));
typedef double vdouble __attribute__((vector_size(VECTOR_BYTES)));

/* Defines chains_<T>(iterations): ACCUMULATORS chains in registers (a0 ... a11), the sum of
 * their lanes returned so that no chain is optimised away. The empty asm after each round says
 * the registers may have changed: the compiler can neither fold the chains nor keep them in
 * memory ("v": any vector register). */
#define CHAINS(T, V)                                                                     \
    static T chains_##T(long iterations) {                                              \
        V x, y, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;                        \
        for (unsigned e = 0; e < VECTOR_BYTES / sizeof(T); ++e) {                        \
            x[e] = (T)0.999999;                                                          \
            y[e] = (T)1e-6;                                                              \
        }                                                                                \
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = y;                 \
        for (long i = 0; i < iterations; ++i) {                                          \
            a0 = a0 * x + y; a1 = a1 * x + y; a2 = a2 * x + y; a3 = a3 * x + y;          \
            a4 = a4 * x + y; a5 = a5 * x + y; a6 = a6 * x + y; a7 = a7 * x + y;          \
            a8 = a8 * x + y; a9 = a9 * x + y; a10 = a10 * x + y; a11 = a11 * x + y;      \
            __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4),      \
                             "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), \
                             "+v"(a11));                                                 \
        }                                                                                \
        V all = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;             \
        T sum = 0;                                                                       \
        for (unsigned e = 0; e < VECTOR_BYTES / sizeof(T); ++e)                          \
            sum += all[e];                                                               \
        return sum;                                                                      \
    }

CHAINS(float, vfloat)
CHAINS(double, vdouble)

/* GF/s of `threads` threads each running `chains` for ITERATIONS iterations (the best of 3). */
#define MEASURE(T)                                                                       \
    static double measure_##T(int threads) {                                             \
        double best = 0;                                                                 \
        for (int round = 0; round < 3; ++round) {                                        \
            T sum = 0;                                                                   \
            double t0 = omp_get_wtime();                                                 \
            _Pragma("omp parallel num_threads(threads) reduction(+ : sum)")              \
            sum += chains_##T(ITERATIONS);                                               \
            double seconds = omp_get_wtime() - t0;                                       \
            if (sum == (T)-1) /* never: keeps the sum, hence the chains, alive */        \
                puts("");                                                                \
            double flops = 2.0 * threads * ITERATIONS * ACCUMULATORS *                   \
                           (VECTOR_BYTES / sizeof(T));                                   \
            if (flops / seconds / 1e9 > best)                                            \
                best = flops / seconds / 1e9;                                            \
        }                                                                                \
        return best;                                                                     \
    }

MEASURE(float)
MEASURE(double)

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    for (int threads = 1; threads <= max_threads; ++threads) {
        printf("float32 %d %.1f\n", threads, measure_float(threads));
        printf("float64 %d %.1f\n", threads, measure_double(threads));
        fflush(stdout);
    }
    return 0;
}
