/* Shared by every cell family: the inline-function macro and the activations.
 *
 * The headers under include/cells are plain C99 so that the CPU extensions and (later) NVRTC
 * compile the same formulas: no libc include under NVRTC, and a host/device inline macro.
 */
#ifndef CELLS_COMMON_H
#define CELLS_COMMON_H

#if !defined(__CUDACC_RTC__)
#include <math.h>
#include <stddef.h>
#include <string.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CELLS_FN static __host__ __device__ __forceinline__
#define CELLS_RESTRICT __restrict__
#else
#define CELLS_FN static inline
#define CELLS_RESTRICT restrict
#endif

/* A row loop, a step made of them, or (CELLS_INLINE) a function that calls one. On the host
 * with GCC it is always inlined, into the dispatch that cells/isa.h's CELLS_ISA_VERSIONS
 * compiles once per instruction set (AVX-512, AVX2, the baseline): so each loop is vectorised
 * for each, and the path is chosen at run time (-march=native is not needed, and a wheel built
 * on one x86-64 machine runs on any other). The gate math (the activations here, the families'
 * point functions) is CELLS_INLINE too: a plain inline function could be left out of line,
 * compiled for the baseline alone, and its loop left scalar. */
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define CELLS_INLINE static inline __attribute__((always_inline))
#else
#define CELLS_INLINE CELLS_FN
#endif
#define CELLS_ROW CELLS_INLINE void

/* Before a loop over units whose arrays never overlap: vectorise it without run-time alias
 * checks (restrict alone does not survive inlining into the Cython loops). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define CELLS_SIMD _Pragma("GCC ivdep")
#else
#define CELLS_SIMD
#endif


/* The float whose IEEE-754 bits are `bits`: the device intrinsic in device code (nvcc's device
 * pass and NVRTC both define __CUDA_ARCH__), memcpy on the host (nvcc's host pass, C compilers). */
CELLS_FN float cells_float_from_bits(int bits) {
#if defined(__CUDA_ARCH__)
    return __int_as_float(bits);
#else
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

/* e^x in float32 without a libm call, so that loops over it vectorise (libm's expf and tanhf
 * are scalar calls, which keep the gate loops from vectorising). Cephes' expf: x = n·ln2
 * + r with |r| <= ln2/2 (ln2 split in two for an exact n·ln2), a degree-6 polynomial for e^r,
 * and 2^n built in the exponent bits. Relative error about 1 ulp (2e-7) for |x| <= 87; inputs
 * are clamped to where neither e^x nor 2^n overflow or go subnormal. */
CELLS_INLINE float cells_exp_f(float x) {
    const float round_magic = 12582912.0f; /* 1.5·2^23: adding and subtracting it rounds */
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = (x * 1.44269504088896341f + round_magic) - round_magic;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    return p * cells_float_from_bits(((int)n + 127) << 23);
}

/* The double whose IEEE-754 bits are `bits` (as cells_float_from_bits). */
CELLS_FN double cells_double_from_bits(long long bits) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(bits);
#else
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
#endif
}

/* e^x in float64 without a libm call, so that loops over it vectorise (libm's exp and tanh per
 * element took a third of a float64 LSTM step). Cephes' exp: x = n·ln2 + r with |r| <= ln2/2
 * (ln2 split in two for an exact n·ln2), e^r = 1 + 2r·P(r²) / (Q(r²) - r·P(r²)), and 2^n
 * built in the exponent bits (n fits an int: the vectors convert it without AVX-512).
 * Relative error about 1 ulp (2e-16) for |x| <= 708; inputs are clamped to [-708, 709], where
 * neither e^x nor 2^n overflow or go subnormal. */
CELLS_INLINE double cells_exp_d(double x) {
    const double round_magic = 6755399441055744.0; /* 1.5·2^52: adding and subtracting it rounds */
    x = x < -708.0 ? -708.0 : x;
    x = x > 709.0 ? 709.0 : x;
    double n = (x * 1.4426950408889634074 + round_magic) - round_magic;
    double r = x - n * 6.93145751953125e-1 - n * 1.42860682030941723212e-6;
    double rr = r * r;
    double p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr
                    + 9.99999999999999999910e-1);
    double q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr
                + 2.27265548208155028766e-1) * rr + 2.00000000000000000009e0;
    double er = 1.0 + 2.0 * p / (q - p);
    return er * cells_double_from_bits((long long)((int)n + 1023) << 52);
}

/* σ(z) = 1 / (1 + e^-z) */
CELLS_INLINE float cells_sigmoid_f(float z) { return 1.0f / (1.0f + cells_exp_f(-z)); }
CELLS_INLINE double cells_sigmoid_d(double z) { return 1.0 / (1.0 + cells_exp_d(-z)); }

/* tanh(z) = 1 - 2 / (1 + e^2z): absolute error about 2e-7 in float32 and 4e-16 in float64
 * (its relative error near 0 is larger, which no gate sees: c enters h, and 1 - c², as an
 * absolute quantity). */
CELLS_INLINE float cells_tanh_f(float z) { return 1.0f - 2.0f / (1.0f + cells_exp_f(2.0f * z)); }
CELLS_INLINE double cells_tanh_d(double z) { return 1.0 - 2.0 / (1.0 + cells_exp_d(2.0 * z)); }

/* elu(z) = z (z > 0), α·(e^z - 1) (z <= 0), with α = 1 (the LLTM candidate): e^z - 1 with
 * cells_exp_f / cells_exp_d (absolute error about 1e-7 / 2e-16 near 0, which no gate sees: the
 * candidate enters the cell state as an absolute quantity). */
CELLS_INLINE float cells_elu_f(float z) { return z > 0.0f ? z : cells_exp_f(z) - 1.0f; }
CELLS_INLINE double cells_elu_d(double z) { return z > 0.0 ? z : cells_exp_d(z) - 1.0; }

/* elu'(z), given e = elu(z) (α = 1): 1 where z > 0 (there e > 0), else α·e^z = e + α. At the
 * kink z = 0 (e = 0) that is α·e^0 = 1, the value PyTorch autograd uses. */
CELLS_INLINE float cells_elu_grad_f(float e) { return e > 0.0f ? 1.0f : e + 1.0f; }
CELLS_INLINE double cells_elu_grad_d(double e) { return e > 0.0 ? 1.0 : e + 1.0; }

#endif
