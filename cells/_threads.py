"""How many threads a call uses, and keeping BLAS out of the kernels' way.

The kernels parallelise with one OpenMP region per call and call BLAS from inside it, one
single-threaded gemm per thread. A threaded BLAS there would oversubscribe the cores (measured
5-18x slower), so every call holds the process's BLAS libraries at one thread while it runs:
once per call, through threadpoolctl's cached controllers (about 10 µs), never per step.
"""
import operator
from contextlib import contextmanager

import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS the kernels call, before the scan)
from threadpoolctl import ThreadpoolController

from cells._openmp import HAS_OPENMP, max_threads

_BLAS_LIBS = ThreadpoolController().select(user_api="blas").lib_controllers


def resolve_n_threads(n_threads):
    """The thread count for a call: `n_threads`, or all available threads when None.

    None means OMP_NUM_THREADS when it is set, else every core this process may use. Without
    OpenMP (see setup.py) every call runs on one thread.
    """
    if n_threads is None:
        return max_threads()
    if isinstance(n_threads, bool):
        raise TypeError(f"n_threads: expected None or a positive int, got {n_threads!r}")
    try:
        n = operator.index(n_threads)
    except TypeError:
        raise TypeError(
            f"n_threads: expected None or a positive int, got {type(n_threads).__name__}"
        ) from None
    if n < 1:
        raise ValueError(f"n_threads: expected None or a positive int, got {n}")
    return n if HAS_OPENMP else 1


@contextmanager
def sequential_blas():
    """Hold every BLAS library loaded in the process at one thread, then restore them."""
    before = [lib.num_threads for lib in _BLAS_LIBS]
    for lib in _BLAS_LIBS:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, n in zip(_BLAS_LIBS, before):
            lib.set_num_threads(n)
