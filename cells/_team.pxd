# The threads a call runs on (include/cells/team.h) for nogil Cython code, and how a call's
# parts split its work.
from libc.stdint cimport int64_t


cdef extern from "cells/team.h" nogil:
    int CELLS_MAX_THREADS

    ctypedef struct cells_part:
        int part         # this part, of
        int nparts       # the parts of the call
        int64_t spin_ns  # how long its waits spin before they sleep

    ctypedef void (*cells_part_fn)(void *arg, cells_part me) noexcept nogil

    # Run fn(arg, me) on up to nparts parts at once, a thread each, whose work is claimed
    # (claims.h): those that join in time run; the parts it ran. On cells' team, or
    # ..._with_openmp on OpenMP's pool (cells.torch's calls, beside torch's operators).
    int cells_run_parts(int nparts, cells_part_fn fn, void *arg) noexcept
    int cells_run_parts_with_openmp(int nparts, cells_part_fn fn, void *arg) noexcept
    # Around work without the GIL outside cells_run_parts that allocates: a fork waits for it.
    void cells_gate_enter() noexcept
    void cells_gate_leave() noexcept
    # Once, at import: a child made by fork() takes its threads from cells' team.
    void cells_team_register_fork_handler() noexcept


cdef inline Py_ssize_t part_start(Py_ssize_t n, int part, int nparts,
                                  Py_ssize_t align) noexcept nogil:
    """Where part `part` of range(n) starts when it is split into `nparts` nearly equal pieces
    whose boundaries are multiples of `align`; part `nparts` starts at n. Part p is
    [part_start(p), part_start(p + 1))."""
    cdef Py_ssize_t chunks = (n + align - 1) // align
    return min(n, (chunks * part // nparts) * align)


cdef struct Units:
    Py_ssize_t j0, j1   # a part's units: [j0, j1)


cdef inline Units part_units(cells_part me, Py_ssize_t nOut, Py_ssize_t align) noexcept nogil:
    """The block of the nOut hidden units that part `me` owns: nearly equal blocks starting at
    multiples of `align` (a time loop's: a cache line's elements; a prepared net's parts take
    whole panels of its packed weights)."""
    cdef Units mine
    mine.j0 = part_start(nOut, me.part, me.nparts, align)
    mine.j1 = part_start(nOut, me.part + 1, me.nparts, align)
    return mine


# Work that a call's parts claim task by task (include/cells/claims.h): every pass.
cdef extern from "cells/claims.h" nogil:
    ctypedef struct cells_claims:
        pass

    # homes: the parts asked for, each of which claims its own range of every phase first;
    # -1 where memory ran out.
    int cells_claims_init(cells_claims *c, int homes) noexcept
    void cells_claims_destroy(cells_claims *c) noexcept
    # The next task of phase g (`tasks` tasks) for part me: its home's, or one left in another
    # home; -1 once every task of the phase is finished.
    long cells_claim(cells_claims *c, long long g, long tasks, cells_part me) noexcept
    # Count a task that part me claimed finished.
    void cells_claim_finished(cells_claims *c, cells_part me) noexcept

    # Groups of homes: a call of independent pieces, each run by a group of parts (a part
    # runs every home it takes, its own first; part 0 takes those no part has).
    ctypedef void (*cells_group_fn)(void *arg, int group, cells_part home) noexcept nogil
    ctypedef struct cells_groups:
        pass
    int cells_groups_init(cells_groups *g, int groups, int size) noexcept
    void cells_groups_destroy(cells_groups *g) noexcept
    void cells_groups_run(cells_groups *g, cells_part me, cells_group_fn run,
                          void *arg) noexcept
