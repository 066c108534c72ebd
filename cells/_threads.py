"""How many threads a call uses, and keeping BLAS out of the kernels' way.

A call's passes run on the threads of include/cells/team.h (OpenMP's pool, or in a forked child
cells' own team) and multiply on cells' own kernels (include/cells/panel.h). A thread calls BLAS
only in a backward pass, for a weight gradient too large for cells' gemm_tn
(cells/_small_loops.pxd, weight_grad), a gemm per thread: a threaded BLAS there would
oversubscribe the cores, so such a call (backward_calls_blas in cells/_time_loop.pyx) holds the
process's BLAS libraries at one thread while it runs: once per call, through threadpoolctl's
cached controllers (about 5 µs), never per step. A call that runs no BLAS leaves them alone.

A time loop call runs on cells' team of threads, whose waits yield the core to a thread queued
behind them and which never waits for a thread that has not joined it (a busy process beside
it costs no time slice per call). cells.torch's operators run theirs on OpenMP's pool instead
(on_openmp_pool), the pool torch's own operators run on: the two libraries' calls take turns
on one pool, where a team beside it would take turns with the pool's spinning idle threads for
the cores.

Fork: a child made by fork() (multiprocessing's default start method on Linux, DataLoader
workers, pre-fork servers) runs on as many threads as it asks for, from cells' team: GCC's
OpenMP runtime does not survive fork (team.h says how).
"""
import operator
import os
from contextlib import contextmanager
from contextvars import ContextVar

import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS the kernels call, before the scan)
from threadpoolctl import ThreadpoolController

from cells._cpus import thread_cores
from cells._time_loop import MAX_THREADS

_BLAS_LIBS = ThreadpoolController().select(user_api="blas").lib_controllers

# n_threads=None gives a time loop's thread at least this many multiply-adds of a step (its
# input projection and recurrent product): with fewer, the threads' meeting at each step costs
# more than a second thread gains (benchmarks/threads_default.py, the Performance page).
TIME_LOOP_WORK_PER_THREAD = 64 * 1024

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


def threads_for_work(work, per_thread, ceiling):
    """The threads of a call whose every step does `work` multiply-adds: one thread below
    2·per_thread, else work // per_thread, at most ceiling() (a callable: max_threads reads the
    environment, so only a call that could use two threads asks it)."""
    if work < 2 * per_thread:
        return 1
    return max(1, min(ceiling(), work // per_thread))


def time_loop_threads(bS, nOut, gates, inputs, ceiling=max_threads):
    """The threads of a time loop call without n_threads, on bS rows of `gates` blocks of nOut
    units, each summing over `inputs` values a step (nIn + nState, or nIn for a family without a
    recurrent product): TIME_LOOP_WORK_PER_THREAD multiply-adds a step each, at most
    ceiling() and no more than leave each thread MIN_UNITS_PER_THREAD units."""
    by_work = threads_for_work(bS * gates * nOut * inputs, TIME_LOOP_WORK_PER_THREAD, ceiling)
    return max(1, min(by_work, nOut // MIN_UNITS_PER_THREAD))


def check_n_threads(n_threads):
    """n_threads as a call takes it: None (the backend chooses, time_loop_threads) or an int in
    [1, MAX_THREADS]."""
    if n_threads is None:
        return None
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


# Whether the time loop calls of this context run on OpenMP's pool (on_openmp_pool).
_ON_OPENMP_POOL = ContextVar("cells_on_openmp_pool", default=False)


@contextmanager
def on_openmp_pool():
    """Run the time loop calls inside on OpenMP's pool (cells/_time_loop.pyx: openmp), where
    the process has one (not in a forked child): cells.torch's operators, beside torch's."""
    token = _ON_OPENMP_POOL.set(True)
    try:
        yield
    finally:
        _ON_OPENMP_POOL.reset(token)


def openmp_pool():
    """Whether this context's time loop calls run on OpenMP's pool (on_openmp_pool)."""
    return _ON_OPENMP_POOL.get()


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
