/* The instruction set of the host's kernels: one value per process, which every kernel that
 * has versions for several instruction sets reads (the packed-panel gemm, cells/panel.h; the
 * int8 and bfloat16 products, cells/lowp.h; the families' steps, cells/families_impl.h).
 *
 *   CELLS_ISA_AVX512  x86-64-v4: AVX-512 F/BW/CD/DQ/VL, 32 zmm registers
 *   CELLS_ISA_AVX2    x86-64-v3: AVX2 and FMA, 16 ymm registers
 *   CELLS_ISA_GENERIC the x86-64 baseline (SSE2), or any other platform
 *
 * cells_isa() is the best this CPU runs, unless cells_isa_set lowered it: cells does that once,
 * at import, from the environment variable CELLS_ISA (cells/_isa.py checks the value against
 * the CPU first). Packed weights do not depend on it: a copy packed on one path is read by
 * every other.
 *
 * CELLS_ISA_VERSIONS(name, body, params, args) defines the void function `name` params as a
 * dispatch on cells_isa() to one copy of `body` args per instruction set, each compiled for it:
 * the always-inlined row loops (CELLS_ROW, cells/common.h) inside `body` are compiled, and
 * vectorised, once per instruction set. (GCC's target_clones would do the same, but it picks
 * by the CPU alone, when the library loads, so a process could not choose a lower path.)
 */
#ifndef CELLS_ISA_H
#define CELLS_ISA_H

#include "cells/common.h"

#define CELLS_ISA_GENERIC 0
#define CELLS_ISA_AVX2 3
#define CELLS_ISA_AVX512 4

/* Where GCC compiles for several x86 instruction sets in one file (x86-64 Linux). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define CELLS_ISA_X86 1
#else
#define CELLS_ISA_X86 0
#endif

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__) /* the choice is the host's */
/* The best instruction set this CPU runs. */
static inline int cells_isa_cpu(void) {
#if CELLS_ISA_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4")   ? CELLS_ISA_AVX512
           : __builtin_cpu_supports("x86-64-v3") ? CELLS_ISA_AVX2
                                                 : CELLS_ISA_GENERIC;
#else
    return CELLS_ISA_GENERIC;
#endif
}

/* The process's choice (one per extension module: each includes this header once), -1 until
 * the first cells_isa() or cells_isa_set. */
static inline int *cells_isa_choice(void) {
    static int choice = -1;
    return &choice;
}

/* The instruction set the kernels run: the CPU's best, or the lower one cells_isa_set chose. */
static inline int cells_isa(void) {
    int *choice = cells_isa_choice();
    if (*choice < 0)
        *choice = cells_isa_cpu();
    return *choice;
}

/* Runs the kernels on `isa` (a CELLS_ISA_* value at most cells_isa_cpu(); the caller checks). */
static inline void cells_isa_set(int isa) { *cells_isa_choice() = isa; }
#endif

#if CELLS_ISA_X86
#define CELLS_ISA_VERSIONS_(name, body, params, args)                                         \
    static __attribute__((noinline, target("arch=x86-64-v4"))) void name##_avx512 params {   \
        body args;                                                                            \
    }                                                                                         \
    static __attribute__((noinline, target("arch=x86-64-v3"))) void name##_avx2 params {     \
        body args;                                                                            \
    }                                                                                         \
    static __attribute__((noinline)) void name##_generic params { body args; }                \
    static inline void name params {                                                          \
        switch (cells_isa()) {                                                                \
        case CELLS_ISA_AVX512:                                                                \
            name##_avx512 args;                                                               \
            break;                                                                            \
        case CELLS_ISA_AVX2:                                                                  \
            name##_avx2 args;                                                                 \
            break;                                                                            \
        default:                                                                              \
            name##_generic args;                                                              \
        }                                                                                     \
    }
#else /* one version (and on a GPU, a host and device function) */
#define CELLS_ISA_VERSIONS_(name, body, params, args) \
    CELLS_FN void name params { body args; }
#endif
/* (One level more, so that a name written FN(...) is expanded before it is pasted.) */
#define CELLS_ISA_VERSIONS(name, body, params, args) CELLS_ISA_VERSIONS_(name, body, params, args)

#endif
