/* Shared by every cell family: the inline-function macro and the activations.
 *
 * The headers under include/cells are plain C99 so that the CPU extensions and (later) NVRTC
 * compile the same formulas: no libc include under NVRTC, and a host/device inline macro.
 */
#ifndef CELLS_COMMON_H
#define CELLS_COMMON_H

#if !defined(__CUDACC_RTC__)
#include <math.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CELLS_FN static __host__ __device__ __forceinline__
#else
#define CELLS_FN static inline
#endif

/* σ(z) = 1 / (1 + e^-z) */
CELLS_FN float cells_sigmoid_f(float z) { return 1.0f / (1.0f + expf(-z)); }
CELLS_FN double cells_sigmoid_d(double z) { return 1.0 / (1.0 + exp(-z)); }

CELLS_FN float cells_tanh_f(float z) { return tanhf(z); }
CELLS_FN double cells_tanh_d(double z) { return tanh(z); }

#endif
