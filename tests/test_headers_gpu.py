"""The cell headers compile as CUDA: every family header under include/cells (not panel.h, caches.h,
team.h, claims.h and the low-precision products' lowp*.h, which are CPU only) with nvcc,
whose point functions are then called from host and from device code, and with NVRTC
(through CuPy), which compiles device code only and has no libc headers.

Both only compile (`nvcc -c`, NVRTC to PTX): no GPU is needed. Each test is skipped where its
compiler is missing (nvcc not on PATH; CuPy not installed, or its NVRTC library not loadable).
"""
import shutil
import subprocess
from pathlib import Path

import pytest

INCLUDE = Path(__file__).resolve().parents[1] / "include"

# The headers a kernel includes: one per family (gru.h, lstm.h, ...); the *_impl.h files,
# instantiate.h and common.h come through them; panel.h, team.h, claims.h and lowp*.h are the
# CPU time loops' gemm, threads and int8/bfloat16 products.
CPU_ONLY = ("panel", "caches", "team", "claims", "lowp", "lowp_kernels")
FAMILY_HEADERS = sorted(
    p.name for p in (INCLUDE / "cells").glob("*.h")
    if not p.stem.endswith("_impl") and p.stem not in ("common", "instantiate", *CPU_ONLY))

# One point function of each family in float and double, callable from host and device code.
POINT_CALLS = "\n".join(f'#include "cells/{name}"' for name in FAMILY_HEADERS) + r"""

__host__ __device__ double cells_point_calls(const float *z, const double *zd) {
    float f[6];    /* gates and states of one unit, float */
    double d[6];   /* the same, double */
    cells_gru_lbr_step_f(z[0], z[1], z[2], z[3], z[4], &f[0], &f[1], &f[2], &f[3]);
    cells_gru_lbr_step_d(zd[0], zd[1], zd[2], zd[3], zd[4], &d[0], &d[1], &d[2], &d[3]);
    double sum = f[3] + d[3];
    cells_lstm_step_f(z[0], z[1], z[2], z[3], 0.1f, 0.2f, 0.3f, 0.0f, z[4],
                      &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]);
    cells_lstm_step_d(zd[0], zd[1], zd[2], zd[3], 0.1, 0.2, 0.3, 0.0, zd[4],
                      &d[0], &d[1], &d[2], &d[3], &d[4], &d[5]);
    sum += f[5] + d[5];
    cells_lltm_step_f(z[0], z[1], z[2], z[3], &f[0], &f[1], &f[2], &f[3], &f[4]);
    cells_lltm_step_d(zd[0], zd[1], zd[2], zd[3], &d[0], &d[1], &d[2], &d[3], &d[4]);
    return sum + f[4] + d[4];
}

extern "C" __global__ void cells_point_kernel(const float *z, const double *zd, double *out) {
    out[threadIdx.x] = cells_point_calls(z, zd);
}
"""

HOST_CALL = r"""
double cells_point_host(const float *z, const double *zd) { return cells_point_calls(z, zd); }
"""


def test_the_headers_compile_with_nvcc_for_host_and_device(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    source = tmp_path / "cells_headers.cu"
    source.write_text(POINT_CALLS + HOST_CALL)
    run = subprocess.run([nvcc, "-c", f"-I{INCLUDE}", str(source), "-o",
                          str(tmp_path / "cells_headers.o")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_the_headers_compile_with_nvrtc():
    cupy = pytest.importorskip("cupy")
    nvrtc = cupy.cuda.nvrtc
    try:
        nvrtc.getVersion()
    except Exception as e:   # CuPy without its NVRTC library (pip package nvidia-cuda-nvrtc)
        pytest.skip(f"NVRTC is not loadable: {e}")
    program = nvrtc.createProgram(POINT_CALLS, "cells_headers.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(program, (f"-I{INCLUDE}", "--gpu-architecture=compute_90"))
        except nvrtc.NVRTCError as e:
            pytest.fail(f"{e}\n{nvrtc.getProgramLog(program)}")
        assert b".entry cells_point_kernel" in nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
