/* Low-precision packed-panel products for prepared nets (host only): int8 and bfloat16 weights.
 *
 * C[M, n] = A[M, K]·W[K, n] (+ bias) (+ C), W packed once, A (float32 rows: an input x_t or a
 * state h) converted at every step. Both kinds pack W in panels of CELLS_PANEL_WIDTH_F = 64
 * columns, as gemm_panels does for float32, so that a prepared net splits its work by the same
 * whole panels: panel p holds columns [64p, 64p + 64), zero where 64p + j >= n.
 *
 * Numeric model, int8 (every step exact integer arithmetic; every instruction set gives the same
 * bits). fl32(x) is x rounded to float32, to nearest even; rint rounds half to even.
 *   Weights, per column j:   s_w[j] = fl32(max_k |W[k,j]| / 127)   (1 where that is 0)
 *                            q[k,j] = clamp(rint(fl32(W[k,j] / s_w[j])), -127, 127)   (int8)
 *                            colsum[j] = Σ_k q[k,j]   (int32)
 *   Activations, per row i:  lo = min(0, min_k A[i,k]), hi = max(0, max_k A[i,k])
 *                            s_a[i] = fl32(fl32(hi - lo) / 127)   (1 where that is 0)
 *                            zp[i] = clamp(rint(fl32(-lo / s_a[i])), 0, 127)
 *                            qa[i,k] = clamp(rint(fl32(A[i,k] / s_a[i])) + zp[i], 0, 127)  (uint8)
 *     (the rule of ONNX Runtime's DynamicQuantizeLinear, per row and with 7 bits: zero is
 *     exact, and so is every element of a row that is all zero. 7 bits, not 8, so that the
 *     AVX2 and AVX-512 products without AVX512_VNNI multiply with vpmaddubsw, whose int16 sum
 *     of two products saturates above 2^15 - 1: 2·127·127 = 32258 never does, 2·255·127 can.
 *     The same rule on every path keeps every path's bits the same.)
 *   Product:                 acc[i,j] = Σ_k qa[i,k]·q[k,j] − zp[i]·colsum[j]   (int32, exact
 *                            for K <= CELLS_LOWP_Q8_K_MAX: either sum is at most 127·127·K
 *                            < 2^31 in magnitude)
 *                            v = fl32(fl32(s_a[i]·s_w[j])·fl32(acc[i,j]))
 *                            with a bias: v = fl32(v + bias[j]); with CELLS_LOWP_ADD:
 *                            C[i,j] = fl32(C[i,j] + v), else C[i,j] = v.
 *   Sums of integers are exact in any order, so the kernels sum in whatever order is fastest.
 *   Weights quantized elsewhere (cells_lowp_q8_pack_quantized: an ONNX Runtime model's) are
 *   packed as given, q in [-127, 127] and s_w[j] any scale; colsum is computed from q.
 *
 * Numeric model, bfloat16: bf16(x) is x rounded to bfloat16 to nearest even (an overflow
 * giving an infinity), an x below FLT_MIN in magnitude becoming a zero of its sign: no bfloat16
 * here is ever denormal, so the DAZ of vdpbf16ps never applies; NaN stays NaN.
 *   Weights: w[k,j] = bf16(W[k,j]);  activations: a[i,k] = bf16(A[i,k]).
 *   Product: each element runs one chain over the pairs of k, in increasing order, the odd k
 *   of each pair first (K padded to even with zeros):
 *       s = 0;  for t = 0, 1, ...:  s = ftz(fma(a[2t+1]·w[2t+1] + s));
 *                                    s = ftz(fma(a[2t]·w[2t] + s))
 *   where fma rounds the exact a·w + s once to float32 (a product of two bfloat16 is exact in
 *   float32's precision), and ftz(x) replaces a result whose magnitude, rounded to float32's
 *   precision with an unbounded exponent, is below FLT_MIN by a zero of its sign (the results
 *   are never denormal). This is what vdpbf16ps (AVX512_BF16) computes, measured on AMD Zen 5
 *   (and what Intel's SDM specifies: DAZ, FTZ, round to nearest even, MXCSR neither read nor
 *   written); the other paths compute the same with float32 FMAs under MXCSR's FTZ and DAZ
 *   (x86 FMA, whose flush rule is the same), or fmaf and an explicit flush (the baseline).
 *   The chain depends on K alone: never on M, on the tile, or on which panels a call
 *   multiplies, so a row gives the same bits alone or in any batch, on any thread's share.
 *   Then v = s; with a bias v = fl32(v + bias[j]); with CELLS_LOWP_ADD C[i,j] = fl32(C[i,j] + v),
 *   else C[i,j] = v (ordinary float32 additions, denormals kept).
 *
 * Layouts (all row-major; K4 = K rounded up to a multiple of 4, K2 to a multiple of 2,
 * n64 = n rounded up to a multiple of 64):
 *   int8 weights P8 [n64 / 64 panels][K4 / 4 groups][64 columns][4 k's]:
 *       P8[p·K4·64 + g·256 + j·4 + t] = q[4g + t, 64p + j], zero where 4g + t >= K or
 *       64p + j >= n: one group row of a panel is the 256 bytes vpdpbusd multiplies by 4
 *       activations of a row (4 k's of 16 columns per 64-byte vector).
 *   int8 activations QA [M, ldq >= K4] (uint8): qa, then zeros up to K4. The weights' padding
 *       rows are zero, so the padding contributes nothing to acc (and colsum runs over k < K).
 *   bfloat16 weights PB [n64 / 64][K2 / 2][64][2] (uint16 bit patterns):
 *       PB[p·K2·64 + t·128 + j·2 + e] = w[2t + e, 64p + j], zero where padded.
 *   bfloat16 activations AB [M, ldb >= K2] (uint16): a, then a zero if K is odd.
 * Threads: a call may multiply any run of whole panels, p0 .. p1-1: pass n = the columns from
 * 64·p0 on that it computes (64·(p1 - p0), or fewer in the last panel), and P8 + p0·K4·64,
 * s_w + 64·p0, colsum + 64·p0 (or PB + p0·K2·64), bias + 64·p0, C + 64·p0. A column's result
 * never depends on the share. Every function here is single-threaded, allocates nothing and
 * takes no lock.
 *
 * Instruction sets (CELLS_LOWP_ISA_*): those of cells_isa() (cells/isa.h: the CPU's best, or
 * the lower path the process chose) are the products' (cells_lowp_isa_q8, cells_lowp_isa_bf16:
 * on AVX-512 the dot-product extension where the CPU has it); the *_isa entry points take one
 * explicitly, so that tests run every path on one machine. The AVX-512 and AVX2 kernels are
 * compiled, with GCC target attributes, on x86-64 Linux with GCC (as panel.h's); elsewhere only
 * the baseline.
 */
#ifndef CELLS_LOWP_H
#define CELLS_LOWP_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#error "cells/lowp.h is host-only"
#endif

#include <float.h>
#include <stdint.h>

#include "cells/panel.h"

/* Panel width in columns (the float32 panels'), and the bytes of one packed vector: 16 columns
 * of 4 int8 or of 2 bfloat16 (CELLS_LOWP_VL columns per vector, CELLS_LOWP_NV vectors a panel). */
#define CELLS_LOWP_NR CELLS_PANEL_WIDTH_F
#define CELLS_LOWP_VL 16
#define CELLS_LOWP_NV (CELLS_LOWP_NR / CELLS_LOWP_VL)
#define CELLS_LOWP_Q8_GROUP 4  /* k's per int32 lane of vpdpbusd */
#define CELLS_LOWP_BF16_PAIR 2 /* k's per float lane of vdpbf16ps */

/* The largest K for which acc is exact in int32: 127·127·K <= 2^31 - 1. */
#define CELLS_LOWP_Q8_K_MAX 133144
#define CELLS_LOWP_Q8_QMAX 127  /* weights in [-127, 127]: symmetric, no -128 */
#define CELLS_LOWP_Q8_AMAX 127  /* activations in [0, 127]: 7 bits (see the model above) */

/* Flags of the products: add to C instead of overwriting it. */
#define CELLS_LOWP_ADD 1

/* Instruction sets: the baseline (C), AVX2 (x86-64-v3), AVX-512 (x86-64-v4, F/BW/DQ/VL), and
 * AVX-512 with the low-precision dot products (AVX512_VNNI for int8, AVX512_BF16 for
 * bfloat16). */
#define CELLS_LOWP_ISA_BASE 0
#define CELLS_LOWP_ISA_AVX2 3
#define CELLS_LOWP_ISA_AVX512 4
#define CELLS_LOWP_ISA_DOT 5

/* Prefetch distance of the weight streams, in group rows (256 bytes each) ahead: the weights of
 * a prepared net come from L3 or memory at every step, and a tile reads up to 4 panels at once,
 * 4 streams, each of which the hardware prefetchers stop following at every 4 KB page. */
#define CELLS_LOWP_PREFETCH_ROWS 16

#include "cells/lowp_impl.h"

#endif
