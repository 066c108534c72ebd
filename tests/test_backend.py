"""The backend layer: the faces dispatch on their arrays' type, through cells._backend only."""
import ast
import inspect
import sys

import numpy as np
import pytest

import cells
from cells import _backend, _cpu, gru, lltm, lstm


class CupyArray:
    """Stands in for a cupy.ndarray: cells tells CuPy arrays by their type's module alone."""

    __module__ = "cupy"

    def __init__(self, a):
        self.dtype, self.shape, self.ndim = a.dtype, a.shape, a.ndim


sL, bS, nIn, nOut = 3, 2, 4, 3
rng = np.random.default_rng(3)


def r(*shape):
    return rng.standard_normal(shape)


# Per family, a time loop's arguments in order (x first) and the call.
CALLS = {
    "gru": ((r(sL, bS, nIn), r(bS, nOut), r(nIn, 3 * nOut), r(nOut, 3 * nOut), r(3 * nOut)),
            cells.gruTimeLoop),
    "lstm": ((r(sL, bS, nIn), r(nIn, 4 * nOut), r(nOut, 4 * nOut), None, r(bS, nOut), None),
             cells.lstmLayerTimeLoop),
    "lltm": ((r(sL, bS, nIn), r(3 * nOut, nOut + nIn), r(3 * nOut), r(bS, nOut), r(bS, nOut)),
             cells.lltmTimeLoop),
}
NAMES = {"gru": ("x", "hI", "Wx", "Wh", "b"), "lstm": ("x", "Wx", "Wr", "b", "hI", "cI"),
         "lltm": ("x", "W", "b", "hI", "cI")}


def on_gpu(args, *positions):
    """args with the arrays at `positions` (all when none are given) as CuPy stand-ins."""
    return tuple(CupyArray(a) if a is not None and (not positions or k in positions) else a
                 for k, a in enumerate(args))


@pytest.mark.parametrize("family", CALLS)
@pytest.mark.parametrize("gpu_first", [False, True], ids=["numpy_first", "cupy_first"])
def test_mixing_numpy_and_cupy_names_the_argument(family, gpu_first):
    """x on the GPU: the next argument is named; x on the CPU and only the last array on the GPU:
    that one, after every argument in between (None among them) passed."""
    args, call = CALLS[family]
    last = max(k for k, a in enumerate(args) if a is not None)
    if gpu_first:
        mixed, named, kinds = on_gpu(args, 0), 1, ("cupy.CupyArray", "numpy.ndarray")
    else:
        mixed, named, kinds = on_gpu(args, last), last, ("numpy.ndarray", "cupy.CupyArray")
    with pytest.raises(TypeError, match=rf"^{NAMES[family][named]}: expected a {kinds[0]} as x "
                                        rf"\(.*\), got {kinds[1]}$"):
        call(*mixed)


@pytest.mark.parametrize("family", CALLS)
def test_cupy_arrays_run_on_the_gpu_backend(family, monkeypatch):
    """CuPy arrays go to cells._gpu, which imports CuPy: without it, an ImportError."""
    args, call = CALLS[family]
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match="^cells' GPU backend needs CuPy: pip install"):
        call(*on_gpu(args))


def test_numpy_arrays_select_the_cpu_backend():
    assert _backend.of(np.zeros(2)) is _cpu


def test_dtype_checks_still_come_with_cupy_arrays():
    x, hI, Wx, Wh, b = on_gpu(CALLS["gru"][0])
    hI.dtype = np.dtype(np.float32)
    with pytest.raises(TypeError, match=r"^hI: expected dtype float64 \(the dtype of x\)"):
        cells.gruTimeLoop(x, hI, Wx, Wh, b)


@pytest.mark.parametrize("face", [gru, lstm, lltm], ids=lambda m: m.__name__)
def test_faces_reach_the_kernels_only_through_a_backend(face):
    """No kernel module is imported, and no array allocated, in cells.gru, lstm, lltm."""
    kernels = {"cells._gru", "cells._lstm", "cells._lltm"}
    tree = ast.parse(inspect.getsource(face))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    assert not imported & kernels
    assert not {getattr(v, "__name__", None) for v in vars(face).values()} & kernels
    allocations = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                   and isinstance(node.value, ast.Name) and node.value.id == "np"}
    assert not allocations & {"empty", "zeros", "ones", "full", "empty_like", "zeros_like"}
