"""How many threads a call uses, and keeping BLAS out of the kernels' way.

A call's passes run on the threads of include/cells/team.h (OpenMP's pool, or in a forked child
cells' own team) and multiply on cells' own kernels (include/cells/panel.h). A thread calls BLAS
only in a backward pass, for a weight gradient too large for cells' gemm_tn (cells/_loops.pxd,
weight_grad), a gemm per thread: a threaded BLAS there would oversubscribe the cores, so such a
call (backward_calls_blas in cells/_time_loop.pyx) holds the process's BLAS libraries at one thread
while it runs: once per call, through threadpoolctl's cached controllers (about 5 µs), never per
step. A call that runs no BLAS leaves them alone.

Fork: a child made by fork() (multiprocessing's default start method on Linux, DataLoader
workers, pre-fork servers) runs on as many threads as it asks for, from cells' team: GCC's
OpenMP runtime does not survive fork (team.h says how).
"""
import operator
import os
from contextlib import contextmanager

import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS the kernels call, before the scan)
from threadpoolctl import ThreadpoolController

from cells._cpus import thread_cores
from cells._time_loop import MAX_THREADS

_BLAS_LIBS = ThreadpoolController().select(user_api="blas").lib_controllers

# n_threads=None gives each thread at least this many hidden units: with fewer, the threads share
# the cache lines of every row and 2 threads run slower than 1 (the Performance page's records).
MIN_UNITS_PER_THREAD = 16


def max_threads():
    """The threads a call may use by default: the first value of OMP_NUM_THREADS when it is set
    to a positive int (the variable every threaded numeric library reads), else the CPUs this
    process may use (its affinity mask and cgroup quota), counting the SMT siblings of a core
    once (two threads on one core share its FMA units, which the kernels keep busy): thread_cores;
    at most MAX_THREADS."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return min(int(first), MAX_THREADS)
    return min(thread_cores(), MAX_THREADS)


def resolve_n_threads(n_threads, dims):
    """The thread count for a call of dims (sL, bS, nIn, nOut): `n_threads`, or when None
    max_threads(), but no more than give each thread MIN_UNITS_PER_THREAD of the nOut hidden
    units."""
    if n_threads is None:
        return max(1, min(max_threads(), dims[3] // MIN_UNITS_PER_THREAD))
    if isinstance(n_threads, bool):
        raise TypeError(f"n_threads: expected None or a positive int, got {n_threads!r}")
    try:
        n = operator.index(n_threads)
    except TypeError:
        raise TypeError(
            f"n_threads: expected None or a positive int, got {type(n_threads).__name__}"
        ) from None
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"n_threads: expected None or an int in [1, {MAX_THREADS}], got {n}")
    return n


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
