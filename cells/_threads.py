"""How many threads a call uses, and keeping BLAS out of the kernels' way.

The kernels parallelise with one OpenMP region per call and call BLAS from inside it, one
single-threaded gemm per thread. A threaded BLAS there would oversubscribe the cores (measured
5-18x slower), so every call holds the process's BLAS libraries at one thread while it runs:
once per call, through threadpoolctl's cached controllers (about 10 µs), never per step.

Fork: GCC's OpenMP runtime (libgomp) keeps the worker threads of its first parallel region, and
they do not survive fork(): a forked child that opens a region of more than one thread waits
for them forever. So once this process has run a call on more than one thread, every call in a
child forked from it (multiprocessing's default start method on Linux, DataLoader workers,
pre-fork servers) runs on one thread, whatever n_threads asks for: correct results, without
the parallelism. A child forked before any threaded call, and a spawn or forkserver child, keep
their threads.
"""
import operator
import os
from contextlib import contextmanager

import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS the kernels call, before the scan)
from threadpoolctl import ThreadpoolController

from cells._openmp import HAS_OPENMP, max_threads

_BLAS_LIBS = ThreadpoolController().select(user_api="blas").lib_controllers

# Whether this process has started OpenMP's worker threads (a call on more than one thread),
# and whether it is a child forked after they were started: then its calls run on one thread.
_threads_started = False
_forked_after_threads = False


def _after_fork_in_child():
    global _forked_after_threads
    _forked_after_threads = _forked_after_threads or _threads_started


os.register_at_fork(after_in_child=_after_fork_in_child)


# n_threads=None gives each thread at least this many hidden units. Measured on 2 cores
# (T=100, float32): with nOut = 16, 8 units per thread share the cache lines of every row and
# 2 threads ran 1.2-2.5x slower than 1 at any batch size; from nOut = 32 (LSTM) or 48 (GRU)
# on, 2 threads were as fast or faster.
MIN_UNITS_PER_THREAD = 16


def resolve_n_threads(n_threads, dims):
    """The thread count for a call of dims (sL, bS, nIn, nOut): `n_threads`, or when None all
    available threads, but no more than give each thread MIN_UNITS_PER_THREAD of the nOut
    hidden units.

    Available means OMP_NUM_THREADS when it is set, else every core this process may use.
    Without OpenMP (see setup.py), and in a child forked after a threaded call (the module
    docstring), every call runs on one thread.
    """
    global _threads_started
    n = _requested(n_threads)
    if n_threads is None:
        n = max(1, min(n, dims[3] // MIN_UNITS_PER_THREAD))
    if _forked_after_threads:
        return 1
    if n > 1:
        _threads_started = True
    return n


def _requested(n_threads):
    """n_threads checked, None resolved: the count the call asks for."""
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
