/* Packed-panel gemm for float (cells_*_f) and double (cells_*_d); see panel_impl.h.
 *
 * A time loop multiplies the state by the same weights at every step. Packing the weights once
 * per call (pack_panels) and multiplying the packed copy at every step (gemm_panels) saves what
 * a BLAS gemm redoes on every call (packing the weights) and its slow small-M paths. The same
 * kernels multiply matrices read in place where a product runs once: a cell's (gemm_nn, C =
 * A·B) and a weight gradient (gemm_tn, C = Aᵀ·B); a cell's product with weights it reads
 * transposed is a tile of dot products instead (gemm_nt, C = A·Bᵀ).
 */
#ifndef CELLS_PANEL_H
#define CELLS_PANEL_H

#include "cells/common.h"
#include "cells/isa.h"
#if !defined(__CUDACC_RTC__)
#include <stdint.h>
#endif
#include "cells/caches.h"

/* Width of one panel in bytes: 64 floats or 32 doubles, four AVX-512 vectors. Fixed, not one
 * per instruction set, so that a copy packed by one build is read by any other (and can be
 * shared by threads). A tile of C as wide as a panel loads one panel row and broadcasts one A
 * element per row of the tile: the wider the panel, the fewer loads per FMA (6 rows × 256
 * bytes: 10 loads for 24 FMAs; 8 × 128: 10 for 16; 16 × 64: 17 for 16). On AVX-512, 256-byte
 * panels are the fastest of 64, 128 and 256. */
#define CELLS_PANEL_BYTES 256
#define CELLS_PANEL_WIDTH_F 64 /* = CELLS_PANEL_BYTES / sizeof(float) */
#define CELLS_PANEL_WIDTH_D 32 /* = CELLS_PANEL_BYTES / sizeof(double) */

/* The packed copy should start on a CELLS_PANEL_ALIGN-byte boundary: misaligned by one
 * element, gemm_panels ran up to 2× slower (each vector load then spans two cache lines). */
#define CELLS_PANEL_ALIGN 64

/* The micro-kernel works on vectors of CELLS_PANEL_VBYTES bytes, CELLS_PANEL_NV per panel row:
 * with GCC/Clang vector extensions, one zmm register each in the AVX-512 kernels, two ymm in
 * the AVX2 kernels, four xmm in the baseline ones; elsewhere a plain array. */
#define CELLS_PANEL_VBYTES 64
#define CELLS_PANEL_NV (CELLS_PANEL_BYTES / CELLS_PANEL_VBYTES)

/* Register blocking, per instruction set in panel_impl.h (FN(panel_mr), FN(panel_nvt),
 * FN(panel_ku)); these bound them all: at most MR_MAX rows of C per tile, and KU_MAX
 * independent sets of accumulators where a tile is too small to hide the FMA latency. */
#define CELLS_PANEL_MR_MAX 6
#define CELLS_PANEL_KU_MAX 4

/* Flags of the kernels: add to C (beta = 1) rather than overwrite it; prefetch the panel
 * CELLS_PANEL_PREFETCH_ROWS rows ahead, for a packed matrix of cells_panel_prefetch_bytes() or
 * more: it pays where the panels come from L3, and costs load slots where they sit in L2.
 * (The hardware prefetchers stop at each 4 KB page: 16 panel rows of floats.) CELLS_PANEL_IN_PLACE: B is a matrix read in place, not packed (gemm_tn, gemm_nn);
 * CELLS_PANEL_TN: with it, the layout of gemm_tn (C = Aᵀ·B). CELLS_PANEL_BIAS: add a bias row
 * to the product as it is stored. */
#define CELLS_PANEL_ADD 1
#define CELLS_PANEL_PREFETCH 2
#define CELLS_PANEL_TN 4
#define CELLS_PANEL_BIAS 8
#define CELLS_PANEL_IN_PLACE 16
/* CELLS_PANEL_FIXED_ORDER: every element of C is summed over K in one order, whatever the
 * tile it falls in (a prepared net's products; see gemm_panels_fixed). */
#define CELLS_PANEL_FIXED_ORDER 32
#define CELLS_PANEL_PREFETCH_ROWS 16

/* A quarter of a core's L2 (cells/caches.h): a smaller packed matrix stays in L2 beside the
 * rows it multiplies and what it writes. */
static inline size_t cells_panel_prefetch_bytes(void) { return cells_l2_bytes() / 4; }

/* gemm_tn (C = Aᵀ·B, A [K, M] and B [K, n] read in place), and gemm_nn (C = A·B) the same way:
 * K in blocks of CELLS_PANEL_TN_ROWS rows, whose vectors of B stay in L1 while they pass over
 * every row of C (128 rows of 4 vectors: 32 KiB). gemm_tn is for a C of up to
 * cells_panel_tn_c_bytes(), half a core's L2, which stays in L2 over the whole of K beside the
 * rows of A and B passing through: there it is faster than a BLAS gemm, which copies both
 * operands; a larger C is read and written once per row block, and BLAS's blocking is as fast
 * or faster, so those go to BLAS. */
#define CELLS_PANEL_TN_ROWS 128
static inline size_t cells_panel_tn_c_bytes(void) { return cells_l2_bytes() / 2; }

#if defined(__GNUC__) && !defined(__CUDACC__)
#define CELLS_PANEL_VECTOR 1 /* GCC/Clang vector extensions */
#define CELLS_PANEL_INLINE static inline __attribute__((always_inline))
#define CELLS_PANEL_PRAGMA(x) _Pragma(#x)
/* After the panel row is loaded: memory "changes" here, so the compiler cannot re-read the row
 * from memory at each use instead of keeping it in registers. GCC (12) otherwise folds the
 * loads into the FMAs of tiles of 1-3 rows, loading every panel vector once per row: those
 * tiles ran at a third of the FMA rate, and at 60-90% with the barrier. It emits nothing. */
#define CELLS_PANEL_BARRIER() __asm__ volatile("" ::: "memory")
#define CELLS_PANEL_PREFETCH_ROW(p) __builtin_prefetch(p)
#else
#define CELLS_PANEL_VECTOR 0
#define CELLS_PANEL_INLINE static inline
#define CELLS_PANEL_PRAGMA(x)
#define CELLS_PANEL_BARRIER()
#define CELLS_PANEL_PREFETCH_ROW(p) ((void)(p))
#endif
/* The AVX2 tile of 6 rows by one 64-byte vector of a packed panel (isa 3's tile at full height,
 * the one that runs nearly all of a large product) is inline assembly where GCC-style asm
 * targets x86-64. Its 12 ymm accumulators, the vector's 2 ymm and a broadcast fill 15 of the
 * 16 registers, which GCC's register allocator does not manage from panel_tile's C: it moves
 * 3 accumulators between registers at every k, and spills them without CELLS_PANEL_BARRIER.
 * The assembly's k loop runs 4 k's a pass with no branch inside and sums as panel_tile does (k
 * in increasing order, one FMA chain an element): the same bits. */
#if CELLS_PANEL_VECTOR && defined(__GNUC__) && defined(__x86_64__)
#define CELLS_PANEL_ASM_AVX2 1
/* Its registers: row r's accumulators in ymm(2r) and ymm(2r+1), the panel row's vector in
 * ymm12 and ymm13, the broadcast A element in ymm14. One k: the vector at byte P of %[p], times
 * each row's element at byte E of its row (rows 0-2 from %[a0], 3-5 from %[a1], %[ld] bytes
 * apart). PF is CELLS_PANEL_ASM_PREFETCH or CELLS_PANEL_ASM_NO_PREFETCH. */
#define CELLS_PANEL_ASM_ROW(ROW, E, BCAST, FMA, C0, C1)                                     \
    BCAST " " #E ROW ", %%ymm14\n\t" FMA " %%ymm12, %%ymm14, %%" C0 "\n\t"                  \
    FMA " %%ymm13, %%ymm14, %%" C1 "\n\t"
#define CELLS_PANEL_ASM_K(PF, P, E, BCAST, FMA)                                               \
    PF(P) "vmovups " #P "(%[p]), %%ymm12\n\t"                                               \
    "vmovups " #P "+32(%[p]), %%ymm13\n\t"                                                  \
    CELLS_PANEL_ASM_ROW("(%[a0])", E, BCAST, FMA, "ymm0", "ymm1")                            \
    CELLS_PANEL_ASM_ROW("(%[a0],%[ld])", E, BCAST, FMA, "ymm2", "ymm3")                      \
    CELLS_PANEL_ASM_ROW("(%[a0],%[ld],2)", E, BCAST, FMA, "ymm4", "ymm5")                    \
    CELLS_PANEL_ASM_ROW("(%[a1])", E, BCAST, FMA, "ymm6", "ymm7")                            \
    CELLS_PANEL_ASM_ROW("(%[a1],%[ld])", E, BCAST, FMA, "ymm8", "ymm9")                      \
    CELLS_PANEL_ASM_ROW("(%[a1],%[ld],2)", E, BCAST, FMA, "ymm10", "ymm11")
/* The panel row CELLS_PANEL_PREFETCH_ROWS (16) rows ahead: 16 × 256 bytes. */
#define CELLS_PANEL_ASM_PREFETCH(P) "prefetcht0 " #P "+4096(%[p])\n\t"
#define CELLS_PANEL_ASM_NO_PREFETCH(P) ""
/* The whole tile: the accumulators zeroed, %[n4] passes of 4 k's, %[n1] of one, and row r's
 * two accumulators stored at byte 256·r of %[acc] (panel_tile's acc[r][0], vectors of 64
 * bytes, CELLS_PANEL_NV a row). E1 .. E4: 1 .. 4 elements of A in bytes. */
#define CELLS_PANEL_ASM_STORE(R, C0, C1)                                                      \
    "vmovups %%" C0 ", " #R "*256(%[acc])\n\t"                                               \
    "vmovups %%" C1 ", " #R "*256+32(%[acc])\n\t"
#define CELLS_PANEL_ASM_TILE(PF, BCAST, FMA, E1, E2, E3, E4)                                  \
    "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"                                                      \
    "vmovaps %%ymm0, %%ymm1\n\tvmovaps %%ymm0, %%ymm2\n\tvmovaps %%ymm0, %%ymm3\n\t"       \
    "vmovaps %%ymm0, %%ymm4\n\tvmovaps %%ymm0, %%ymm5\n\tvmovaps %%ymm0, %%ymm6\n\t"       \
    "vmovaps %%ymm0, %%ymm7\n\tvmovaps %%ymm0, %%ymm8\n\tvmovaps %%ymm0, %%ymm9\n\t"       \
    "vmovaps %%ymm0, %%ymm10\n\tvmovaps %%ymm0, %%ymm11\n\t"                                \
    "test %[n4], %[n4]\n\t"                                                                 \
    "jz 2f\n"                                                                                \
    "1:\n\t"                                                                                \
    CELLS_PANEL_ASM_K(PF, 0, 0, BCAST, FMA)                                                  \
    CELLS_PANEL_ASM_K(PF, 256, E1, BCAST, FMA)                                               \
    CELLS_PANEL_ASM_K(PF, 512, E2, BCAST, FMA)                                               \
    CELLS_PANEL_ASM_K(PF, 768, E3, BCAST, FMA)                                               \
    "add $1024, %[p]\n\t"                                                                   \
    "add $" #E4 ", %[a0]\n\t"                                                               \
    "add $" #E4 ", %[a1]\n\t"                                                               \
    "dec %[n4]\n\t"                                                                         \
    "jnz 1b\n"                                                                               \
    "2:\n\t"                                                                                \
    "test %[n1], %[n1]\n\t"                                                                 \
    "jz 4f\n"                                                                                \
    "3:\n\t"                                                                                \
    CELLS_PANEL_ASM_K(PF, 0, 0, BCAST, FMA)                                                  \
    "add $256, %[p]\n\t"                                                                    \
    "add $" #E1 ", %[a0]\n\t"                                                               \
    "add $" #E1 ", %[a1]\n\t"                                                               \
    "dec %[n1]\n\t"                                                                         \
    "jnz 3b\n"                                                                               \
    "4:\n\t"                                                                                \
    CELLS_PANEL_ASM_STORE(0, "ymm0", "ymm1") CELLS_PANEL_ASM_STORE(1, "ymm2", "ymm3")        \
    CELLS_PANEL_ASM_STORE(2, "ymm4", "ymm5") CELLS_PANEL_ASM_STORE(3, "ymm6", "ymm7")        \
    CELLS_PANEL_ASM_STORE(4, "ymm8", "ymm9") CELLS_PANEL_ASM_STORE(5, "ymm10", "ymm11")
/* The operands and clobbers of the tile's asm statement. */
#define CELLS_PANEL_ASM_OPERANDS(p, a0, a1, n4, n1, ld, acc)                                  \
    : [p] "+r"(p), [a0] "+r"(a0), [a1] "+r"(a1), [n4] "+r"(n4), [n1] "+r"(n1)               \
    : [ld] "r"(ld), [acc] "r"(acc)                                                           \
    : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",        \
      "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14"
typedef char cells_panel_asm_offsets[CELLS_PANEL_BYTES == 256 && CELLS_PANEL_PREFETCH_ROWS == 16
                                     && CELLS_PANEL_NV * CELLS_PANEL_VBYTES == 256
                                         ? 1 : -1]; /* the byte offsets written above */
#else
#define CELLS_PANEL_ASM_AVX2 0
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define CELLS_PANEL_UNROLL CELLS_PANEL_PRAGMA(GCC unroll 16)
#elif defined(__clang__)
#define CELLS_PANEL_UNROLL CELLS_PANEL_PRAGMA(unroll)
#else
#define CELLS_PANEL_UNROLL
#endif

/* Register blockings, by instruction set (cells/isa.h's values):
 *   4: x86-64-v4 (AVX-512, 32 zmm registers),  3: x86-64-v3 (AVX2 + FMA, 16 ymm),
 *   0: anything else (the x86-64 baseline, SSE2 with 16 xmm; other platforms).
 * Each blocking is compiled into one function holding all its tile kernels (panel_kernels_4,
 * _3, _0 in panel_impl.h), the only code that depends on the instruction set; gemm_panels
 * picks one per call, by cells_isa(). CELLS_PANEL_BASE_ISA is the blocking the compiler's own
 * flags allow (4 in a -march=native build on an AVX-512 machine). Above it, where GCC compiles
 * for other instruction sets in the same file (CELLS_ISA_X86), the AVX-512 and AVX2 kernels
 * are built too. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512CD__) \
    && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define CELLS_PANEL_BASE_ISA 4
#elif defined(__AVX2__) && defined(__FMA__)
#define CELLS_PANEL_BASE_ISA 3
#else
#define CELLS_PANEL_BASE_ISA 0
#endif

/* CELLS_PANEL_KERNELS_<isa> starts the definition of blocking <isa>'s kernel function, where
 * this build has one. noinline: compiled apart from the loops around them, the kernels keep
 * their accumulators in registers (inlined into those loops, GCC spilled one of the 6 × 4
 * tile's). fp-contract=fast (GCC): c + a·b is an FMA even under -std=c99, where GCC turns
 * contraction off; these kernels are FMA-bound. (Clang contracts within a statement anyway.) */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define CELLS_PANEL_KERNELS(...) \
    static __attribute__((noinline, optimize("fp-contract=fast") __VA_ARGS__)) void
#elif defined(__GNUC__) && !defined(__CUDACC__)
#define CELLS_PANEL_KERNELS(...) static __attribute__((noinline __VA_ARGS__)) void
#else
#define CELLS_PANEL_KERNELS(...) static void
#endif
#if CELLS_PANEL_BASE_ISA == 4
#define CELLS_PANEL_KERNELS_4 CELLS_PANEL_KERNELS()
#elif CELLS_ISA_X86
#define CELLS_PANEL_KERNELS_4 CELLS_PANEL_KERNELS(, target("arch=x86-64-v4"))
#endif
#if CELLS_PANEL_BASE_ISA == 3
#define CELLS_PANEL_KERNELS_3 CELLS_PANEL_KERNELS()
#elif CELLS_ISA_X86 && CELLS_PANEL_BASE_ISA < 3
#define CELLS_PANEL_KERNELS_3 CELLS_PANEL_KERNELS(, target("arch=x86-64-v3"))
#endif
#if CELLS_PANEL_BASE_ISA == 0
#define CELLS_PANEL_KERNELS_0 CELLS_PANEL_KERNELS()
#endif

/* The transposing copy of one block of 32 bytes by 32 (8 × 8 floats, 4 × 4 doubles),
 *   dst[k·ldd + j] = src[j·lds + k]   for j, k < 32 / sizeof(element),
 * in vectors of 32 bytes (one ymm register on AVX2 and AVX-512, two xmm on the baseline): each
 * row is loaded once, and pairs of vectors are interleaved in log2(block) rounds of shuffles.
 * pack_panels' transposes run on it: inlined into that row loop, compiled for each instruction
 * set. Without vector extensions, or with Clang (whose shuffle builtin is spelled differently),
 * pack_panels copies element by element. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define CELLS_PANEL_TRANSPOSE 1
typedef float cells_panel_v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int cells_panel_v8i __attribute__((vector_size(32)));
typedef double cells_panel_v4d __attribute__((vector_size(32), aligned(8), may_alias));
typedef long long cells_panel_v4l __attribute__((vector_size(32)));

CELLS_PANEL_INLINE void cells_panel_transpose_f(const float *src, ptrdiff_t lds, float *dst,
                                                ptrdiff_t ldd) {
    cells_panel_v8f r[8], t[8], u[8];
    for (int j = 0; j < 8; ++j)
        r[j] = *(const cells_panel_v8f *)(src + j * lds);
    /* t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, elements 0 1 4 5 and 2 3 6 7 of each */
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = __builtin_shuffle(r[2 * i], r[2 * i + 1],
                                     (cells_panel_v8i){0, 8, 1, 9, 4, 12, 5, 13});
        t[2 * i + 1] = __builtin_shuffle(r[2 * i], r[2 * i + 1],
                                         (cells_panel_v8i){2, 10, 3, 11, 6, 14, 7, 15});
    }
    /* u[4h + c], c < 4: columns c and c + 4 of rows 4h .. 4h + 3 */
    for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) {
            const cells_panel_v8f a = t[4 * h + c], b = t[4 * h + 2 + c];
            u[4 * h + 2 * c] = __builtin_shuffle(a, b, (cells_panel_v8i){0, 1, 8, 9, 4, 5, 12, 13});
            u[4 * h + 2 * c + 1] =
                __builtin_shuffle(a, b, (cells_panel_v8i){2, 3, 10, 11, 6, 7, 14, 15});
        }
    for (int c = 0; c < 4; ++c) {
        *(cells_panel_v8f *)(dst + c * ldd) =
            __builtin_shuffle(u[c], u[4 + c], (cells_panel_v8i){0, 1, 2, 3, 8, 9, 10, 11});
        *(cells_panel_v8f *)(dst + (c + 4) * ldd) =
            __builtin_shuffle(u[c], u[4 + c], (cells_panel_v8i){4, 5, 6, 7, 12, 13, 14, 15});
    }
}

CELLS_PANEL_INLINE void cells_panel_transpose_d(const double *src, ptrdiff_t lds, double *dst,
                                                ptrdiff_t ldd) {
    cells_panel_v4d r[4], t[4];
    for (int j = 0; j < 4; ++j)
        r[j] = *(const cells_panel_v4d *)(src + j * lds);
    /* t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, elements 0 2 and 1 3 of each */
    for (int i = 0; i < 2; ++i) {
        t[2 * i] = __builtin_shuffle(r[2 * i], r[2 * i + 1], (cells_panel_v4l){0, 4, 2, 6});
        t[2 * i + 1] = __builtin_shuffle(r[2 * i], r[2 * i + 1], (cells_panel_v4l){1, 5, 3, 7});
    }
    for (int c = 0; c < 2; ++c) {
        *(cells_panel_v4d *)(dst + c * ldd) =
            __builtin_shuffle(t[c], t[2 + c], (cells_panel_v4l){0, 1, 4, 5});
        *(cells_panel_v4d *)(dst + (c + 2) * ldd) =
            __builtin_shuffle(t[c], t[2 + c], (cells_panel_v4l){2, 3, 6, 7});
    }
}
#else
#define CELLS_PANEL_TRANSPOSE 0
#endif

#define CELLS_IMPL "cells/panel_impl.h"
#include "cells/instantiate.h"

#endif
