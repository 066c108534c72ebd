"""The GPU backend's kernels and its contract on machines without a GPU: NVRTC compiles every
kernel (cells.cuda.compile_kernels, no device needed), a header edit changes what CuPy's cache
is keyed on, `import cells` never imports CuPy, CuPy arrays select cells._gpu, and a GPU call
without CuPy is an ImportError saying what to install."""
import subprocess
import sys

import numpy as np
import pytest

import cells
from cells import _backend, _gpu, cuda


class CupyArray:
    """Stands in for a cupy.ndarray: cells tells CuPy arrays by their type's module alone."""

    __module__ = "cupy"

    def __init__(self, a):
        self.dtype, self.shape, self.ndim = a.dtype, a.shape, a.ndim


def nvrtc():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.nvrtc.getVersion()
    except Exception as e:   # CuPy without its NVRTC library (pip package nvidia-cuda-nvrtc)
        pytest.skip(f"NVRTC is not loadable: {e}")
    return cupy.cuda.nvrtc


# Per family its phases (the reset-before GRU has two), for float and double.
EXPECTED_KERNELS = 2 * sum(len(phases) for phases in cuda.KERNEL_PHASES.values())


def test_nvrtc_compiles_every_kernel_without_warnings():
    nvrtc()
    names = cuda.compile_kernels("sm_90")
    assert len(names) == len(set(names)) == EXPECTED_KERNELS == 36
    assert "cells_kernel_gru_reset_before_backward_b_d" in names
    assert "cells_kernel_lstm_forward_f" in names


def test_nvrtc_errors_carry_the_log(monkeypatch, tmp_path):
    nvrtc()
    broken = tmp_path / "kernels"
    broken.mkdir()
    for path in cuda.KERNELS_DIR.iterdir():
        (broken / path.name).write_text(path.read_text())
    (broken / "gru.cu").write_text((broken / "gru.cu").read_text() + "\nint missing_semicolon\n")
    monkeypatch.setattr(cuda, "KERNELS_DIR", broken)
    with pytest.raises(RuntimeError, match=r"NVRTC failed on cells/kernels/gru.cu \(sm_90\)"
                                           r"(.|\n)*error"):
        cuda.compile_kernels()


def test_the_source_carries_a_hash_of_the_headers(monkeypatch, tmp_path):
    """CuPy keys its cache on the source: an edited header changes it."""
    before = cuda.kernel_source("gru")
    assert before.startswith(f"// cells headers {cuda.headers_hash()}\n")
    copy = tmp_path / "include"
    (copy / "cells").mkdir(parents=True)
    for path in (cuda.include_dir() / "cells").glob("*.h"):
        (copy / "cells" / path.name).write_text(path.read_text())
    monkeypatch.setattr(cuda, "include_dir", lambda: copy)
    assert cuda.kernel_source("gru") == before
    common = copy / "cells" / "common.h"
    common.write_text(common.read_text() + "\n/* edited */\n")
    assert cuda.kernel_source("gru") != before


def test_import_cells_does_not_import_cupy(tmp_path):
    code = "import sys, cells, cells.cuda, cells._gpu; assert 'cupy' not in sys.modules"
    # run outside the source tree: `python -c` puts its working directory on sys.path
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=tmp_path)


def test_cupy_arrays_select_the_gpu_backend():
    a = CupyArray(np.zeros(2))
    assert _backend.of(a) is _gpu


def test_a_gpu_call_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` raises ImportError
    args = [CupyArray(np.zeros(s)) for s in ((3, 2, 4), (2, 3), (4, 9), (3, 9), (9,))]
    with pytest.raises(ImportError, match=r'needs CuPy: pip install "cells-rnn\[gpu\]"'):
        cells.gruTimeLoop(*args)


def test_mixing_numpy_and_cupy_is_a_type_error():
    x = CupyArray(np.zeros((3, 2, 4)))
    with pytest.raises(TypeError, match=r"^hI: expected a cupy.CupyArray as x"):
        cells.gruTimeLoop(x, np.zeros((2, 3)), CupyArray(np.zeros((4, 9))),
                          CupyArray(np.zeros((3, 9))), CupyArray(np.zeros(9)))
