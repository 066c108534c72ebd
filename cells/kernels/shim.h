/* The CPU shim: compiles the CUDA kernels of cells/kernels/*.cu with a C++ compiler (g++
 * -include shim.h), so that the GPU backend's orchestration (cells/_gpu.py) runs on the CPU
 * with NumPy standing in for CuPy (tests/test_gpu_*.py).
 *
 * The headers are compiled as nvcc's host pass compiles them (__CUDACC__: CELLS_FN inline,
 * restrict spelled __restrict__, no target clones); __global__, __device__ and __host__ mean
 * nothing; blockIdx, threadIdx, blockDim and gridDim are globals that the launch wrapper of
 * each kernel, <kernel>_launch(grid, block, args), sets while it calls the kernel once per
 * block and thread, in order. `args` is CUDA's kernelParams: one pointer to each argument's
 * value. The kernels use no shared memory and no synchronisation, so this order is one of the
 * orders a device may run them in.
 */
#ifndef CELLS_SHIM_H
#define CELLS_SHIM_H

/* The C and C++ headers, before __CUDACC__ is defined (they test it). */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <utility>

#define __CUDACC__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

static dim3 blockIdx, threadIdx, blockDim, gridDim;

namespace cells_shim {

template <class... A, size_t... I>
void call(void (*kernel)(A...), void **args, std::index_sequence<I...>) {
    kernel(*static_cast<A *>(args[I])...);
}

template <class... A>
void launch(void (*kernel)(A...), unsigned grid, unsigned block, void **args) {
    gridDim.x = grid;
    blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b)
        for (unsigned t = 0; t < block; ++t) {
            blockIdx.x = b;
            threadIdx.x = t;
            call(kernel, args, std::index_sequence_for<A...>{});
        }
}

}  // namespace cells_shim

#define CELLS_SHIM_EXPORT(kernel)                                                            \
    extern "C" void kernel##_launch(unsigned grid, unsigned block, void **args) {            \
        cells_shim::launch(kernel, grid, block, args);                                       \
    }

#endif
