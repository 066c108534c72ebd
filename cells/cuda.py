"""The GPU backend's kernels: their sources, NVRTC compilation, and how they are launched.

One small CUDA source per family or two (cells/kernels/gru.cu, lstm.cu, lltm.cu, rnn.cu,
layer_norm.cu, indrnn.cu) defines the kernels of cells/kernels/kernels.cuh: one phase of one
time step for every (batch row, unit) element, or for every batch row where the family's step
reduces across a row (the LayerNorm cells), calling the family's step from include/cells/ (the
same code as the CPU time loop).
Each is compiled for float and double, and runs in one of two ways:

  - on a device, compiled by NVRTC through CuPy (`device_launcher`);
  - on the CPU, compiled by g++ with the shim cells/kernels/shim.h and loaded with ctypes
    (`cpu_launcher`): the GPU orchestration then runs with NumPy standing in for CuPy, which is
    how the tests check it on machines without a GPU.

`compile_kernels` compiles every kernel with NVRTC without a device. Importing this module does
not import CuPy; a GPU call without it is an ImportError saying what to install.
"""
import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType
from typing import List, Sequence

import numpy as np

from cells import _family_table

__all__ = [
    "compile_kernels",
    "include_dir",
    "headers_hash",
    "kernel_name",
    "kernel_source",
    "import_cupy",
    "device_launcher",
    "cpu_launcher",
    "DeviceLauncher",
    "CpuLauncher",
]

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"

# The families' kernels, from the compiled table (include/cells/family_rows.h): the source
# that defines them (cells/kernels/<source>.cu) and the kernels of each (kernels.cuh: "_b",
# the second phase of a family with two). Every family has them.
GPU_FAMILIES = list(_family_table.FAMILIES)
KERNEL_SOURCES = {name: _family_table.family(name).source for name in GPU_FAMILIES}
KERNEL_PHASES = {
    name: ("forward", "backward") + (("forward_b", "backward_b")
                                     if _family_table.family(name).phases == 2 else ())
    for name in GPU_FAMILIES}

DTYPE_SUFFIX = {np.dtype(np.float32): "f", np.dtype(np.float64): "d"}

INSTALL_HINT = ('pip install "cells-rnn[gpu]" (CuPy for CUDA 13, cupy-cuda13x, and its NVRTC, '
                'nvidia-cuda-nvrtc)')


def kernel_name(family: str, phase: str, dtype: np.dtype) -> str:
    """The name of a kernel: ``cells_kernel_<family>_<phase>_<f or d>``.

    Parameters
    ----------
    family : str
    phase : str
    dtype : numpy.dtype
        float32 (f) or float64 (d).

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np
    >>> from cells import cuda
    >>> cuda.kernel_name("lstm", "forward", np.dtype(np.float32))
    'cells_kernel_lstm_forward_f'
    """
    return f"cells_kernel_{family}_{phase}_{DTYPE_SUFFIX[np.dtype(dtype)]}"


def include_dir() -> Path:
    """The directory that holds the kernels' headers, ``cells/*.h``.

    Inside the installed package (cells/include), or the source tree's include/ (an in-place
    build).

    Returns
    -------
    pathlib.Path
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent / "include"):
        if (candidate / "cells" / "step.h").is_file():
            return candidate
    raise FileNotFoundError(f"cells' headers (cells/step.h) are neither in {here / 'include'} "
                            f"nor in {here.parent / 'include'}")


def headers_hash() -> str:
    """A hash of every header the kernels may include.

    include/cells/*.h, cells/kernels/*.cuh and shim.h: CuPy's kernel cache hashes the source and
    not the headers reached through -I, so the source carries this hash and an edited header is
    never served stale.

    Returns
    -------
    str
        A hex digest.
    """
    digest = hashlib.sha256()
    headers = sorted((include_dir() / "cells").glob("*.h")) + sorted(KERNELS_DIR.glob("*.cuh"))
    for path in headers + [KERNELS_DIR / "shim.h"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kernel_source(source: str) -> str:
    """The text of ``cells/kernels/<source>.cu``, headed by the headers' hash.

    Parameters
    ----------
    source : str
        "gru", "lstm", "lltm", "rnn", "layer_norm" or "indrnn".

    Returns
    -------
    str
    """
    text = (KERNELS_DIR / f"{source}.cu").read_text()
    return f"// cells headers {headers_hash()}\n{text}"


def _include_options():
    return (f"-I{include_dir()}", f"-I{KERNELS_DIR}")


def import_cupy() -> ModuleType:
    """CuPy, or an ImportError that says what to install.

    Returns
    -------
    module
        cupy.

    Raises
    ------
    ImportError
        CuPy is not installed (the message gives the pip command).
    """
    try:
        import cupy
    except ImportError as e:
        raise ImportError(f"cells' GPU backend needs CuPy: {INSTALL_HINT}") from e
    return cupy


def compile_kernels(arch: str = "sm_90") -> List[str]:
    """Compile every kernel of every family, float and double, with NVRTC; no device is needed.

    Parameters
    ----------
    arch : str, default "sm_90"
        sm_XX compiles a CUBIN, compute_XX PTX.

    Returns
    -------
    list of str
        The kernels' names.

    Raises
    ------
    RuntimeError
        With NVRTC's log, on any error or warning, or when a kernel is missing.
    ImportError
        Without CuPy and its NVRTC.
    """
    nvrtc = import_cupy().cuda.nvrtc
    names = []
    for source in sorted(set(KERNEL_SOURCES.values())):
        program = nvrtc.createProgram(kernel_source(source), f"{source}.cu", [], [])
        try:
            try:
                nvrtc.compileProgram(program, _include_options()
                                     + (f"--gpu-architecture={arch}",))
            except nvrtc.NVRTCError as e:
                raise RuntimeError(f"NVRTC failed on cells/kernels/{source}.cu ({arch}): {e}\n"
                                   f"{nvrtc.getProgramLog(program)}") from e
            log = nvrtc.getProgramLog(program).strip("\0\n ")
            if log:
                raise RuntimeError(f"NVRTC warned on cells/kernels/{source}.cu ({arch}):\n{log}")
            if arch.startswith("sm_"):
                binary = nvrtc.getCUBIN(program)
            else:
                binary = nvrtc.getPTX(program)
            binary = binary if isinstance(binary, bytes) else binary.encode()
        finally:
            nvrtc.destroyProgram(program)
        for family, src in KERNEL_SOURCES.items():
            if src != source:
                continue
            for phase in KERNEL_PHASES[family]:
                for dtype in DTYPE_SUFFIX:
                    name = kernel_name(family, phase, dtype)
                    if name.encode() + b"\0" not in binary and \
                            f".entry {name}(".encode() not in binary:
                        raise RuntimeError(f"{name} is not in NVRTC's output for "
                                           f"cells/kernels/{source}.cu")
                    names.append(name)
    return names


# ---------------------------------------------------------------------------------------------
# Launchers: launch(family, phase, dtype, n, args) runs a kernel on n threads (one per
# element, or per batch row for a row_reduction family: cells/_gpu.py's _threads). args are
# the kernel's parameters in order: arrays of the launcher's kind, None (NULL), and numpy
# scalars typed as the parameters (np.int64: long long, np.int32: int, np.float64: double).
# ---------------------------------------------------------------------------------------------

THREADS_PER_BLOCK = 256


def _blocks(n):
    return (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK


class DeviceLauncher:
    """Kernels compiled by NVRTC (``cupy.RawModule``, once per source and device), launched on
    CuPy's current stream.

    Raises
    ------
    ImportError
        Without CuPy.

    See Also
    --------
    device_launcher
    """

    def __init__(self):
        self.cupy = import_cupy()
        self._modules = {}

    def _function(self, source, name):
        key = source, self.cupy.cuda.Device().id
        module = self._modules.get(key)
        if module is None:
            module = self.cupy.RawModule(code=kernel_source(source), options=_include_options())
            self._modules[key] = module
        return module.get_function(name)

    def launch(self, family: str, phase: str, dtype: np.dtype, n: int, args: Sequence) -> None:
        """Run one phase of a family's kernel on n threads.

        Parameters
        ----------
        family : str
            A key of KERNEL_SOURCES ("gru_reset_before", "gru_linear_before_reset", "lstm", "lltm",
            "rnn", "layer_norm_lstm", "layer_norm_gru", "indrnn").
        phase : str
            A phase of KERNEL_PHASES[family] ("forward", "backward", and the reset-before GRU's
            "forward_b", "backward_b").
        dtype : numpy.dtype
            float32 or float64.
        n : int
            The threads: elements (batch rows × units), or batch rows for a row_reduction
            family; 0 launches nothing.
        args : sequence
            The kernel's arguments: arrays, NumPy scalars, or None for a null pointer.
        """
        if n == 0:
            return
        kernel = self._function(KERNEL_SOURCES[family], kernel_name(family, phase, dtype))
        null = np.uint64(0)
        kernel((_blocks(n),), (THREADS_PER_BLOCK,), tuple(null if a is None else a for a in args))


class CpuLauncher:
    """The kernels compiled for the CPU by g++ with the shim (cells/kernels/shim.h), loaded with
    ctypes.

    Each kernel runs its threads one after the other: the GPU orchestration then runs with NumPy
    standing in for CuPy, which is how the tests check it without a GPU.

    Raises
    ------
    RuntimeError
        Without g++ on PATH, or when g++ fails on a source.

    See Also
    --------
    cpu_launcher
    """

    _CTYPES = {np.dtype(np.int64): ctypes.c_longlong, np.dtype(np.int32): ctypes.c_int,
               np.dtype(np.float64): ctypes.c_double}

    def __init__(self):
        compiler = shutil.which("g++")
        if compiler is None:
            raise RuntimeError("the CPU shim of the GPU kernels needs g++ on PATH")
        self._libraries = {}
        self._compiler = compiler

    def _library(self, source):
        library = self._libraries.get(source)
        if library is None:
            # Loaded, the library stays mapped after its file is removed.
            with tempfile.TemporaryDirectory(prefix="cells-shim-") as tmp:
                cpp, so = Path(tmp) / f"{source}.cpp", Path(tmp) / f"{source}.so"
                cpp.write_text(kernel_source(source))
                run = subprocess.run(
                    [self._compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-include",
                     str(KERNELS_DIR / "shim.h"), *_include_options(), str(cpp), "-o", str(so)],
                    capture_output=True, text=True)
                if run.returncode != 0:
                    raise RuntimeError(f"g++ failed on cells/kernels/{source}.cu with the "
                                       f"shim:\n{run.stderr[-4000:]}")
                library = self._libraries[source] = ctypes.CDLL(str(so))
        return library

    def _value(self, a):
        if a is None:
            return ctypes.c_void_p(None)
        if isinstance(a, np.ndarray):
            return ctypes.c_void_p(a.ctypes.data)
        return self._CTYPES[a.dtype](a)

    def launch(self, family: str, phase: str, dtype: np.dtype, n: int, args: Sequence) -> None:
        """Run one phase of a family's kernel on n threads.

        Parameters
        ----------
        family : str
            A key of KERNEL_SOURCES ("gru_reset_before", "gru_linear_before_reset", "lstm", "lltm",
            "rnn", "layer_norm_lstm", "layer_norm_gru", "indrnn").
        phase : str
            A phase of KERNEL_PHASES[family] ("forward", "backward", and the reset-before GRU's
            "forward_b", "backward_b").
        dtype : numpy.dtype
            float32 or float64.
        n : int
            The threads: elements (batch rows × units), or batch rows for a row_reduction
            family; 0 launches nothing.
        args : sequence
            The kernel's arguments: arrays, NumPy scalars, or None for a null pointer.
        """
        if n == 0:
            return
        wrapper = getattr(self._library(KERNEL_SOURCES[family]),
                          kernel_name(family, phase, dtype) + "_launch")
        values = [self._value(a) for a in args]
        pointers = (ctypes.c_void_p * len(values))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        wrapper(ctypes.c_uint(_blocks(n)), ctypes.c_uint(THREADS_PER_BLOCK), pointers)


_launchers = {}


def device_launcher() -> "DeviceLauncher":
    """The launcher of the kernels on CuPy's current device (made once).

    Returns
    -------
    DeviceLauncher
    """
    if "device" not in _launchers:
        _launchers["device"] = DeviceLauncher()
    return _launchers["device"]


def cpu_launcher() -> "CpuLauncher":
    """The launcher of the kernels compiled for the CPU with the shim (made once).

    Returns
    -------
    CpuLauncher
    """
    if "cpu" not in _launchers:
        _launchers["cpu"] = CpuLauncher()
    return _launchers["cpu"]
