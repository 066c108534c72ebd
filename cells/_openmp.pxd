# OpenMP helpers usable from nogil Cython code, with single-threaded stand-ins when the
# extension is built without OpenMP (Cython guards its own pragmas with #ifdef _OPENMP too).
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define CELLS_HAS_OPENMP 1
    static inline int cells_thread_num(void) { return omp_get_thread_num(); }
    static inline int cells_num_threads(void) { return omp_get_num_threads(); }
    static inline int cells_max_threads(void) { return omp_get_max_threads(); }
    static inline void cells_barrier(void) {
        _Pragma("omp barrier")
    }
    #else
    #define CELLS_HAS_OPENMP 0
    static inline int cells_thread_num(void) { return 0; }
    static inline int cells_num_threads(void) { return 1; }
    static inline int cells_max_threads(void) { return 1; }
    static inline void cells_barrier(void) {}
    #endif
    """
    bint CELLS_HAS_OPENMP
    int cells_thread_num() noexcept nogil
    int cells_num_threads() noexcept nogil
    int cells_max_threads() noexcept nogil
    void cells_barrier() noexcept nogil


cdef inline Py_ssize_t part_start(Py_ssize_t n, int part, int nparts,
                                  Py_ssize_t align) noexcept nogil:
    """Where part `part` of range(n) starts when it is split into `nparts` nearly equal pieces
    whose boundaries are multiples of `align`; part `nparts` starts at n. Part p is
    [part_start(p), part_start(p + 1)). (Inside a Cython parallel block, assign both ends from
    calls like this: a variable set through a pointer would be shared by all threads.)"""
    cdef Py_ssize_t chunks = (n + align - 1) // align
    return min(n, (chunks * part // nparts) * align)


cdef struct ThreadUnits:
    int part            # this thread, of
    int nparts          # the threads of the region
    Py_ssize_t j0, j1   # the units it owns: [j0, j1)


cdef inline ThreadUnits thread_units(Py_ssize_t nOut) noexcept nogil:
    """Inside a parallel region, the block of the nOut hidden units this thread owns: nearly
    equal blocks starting at multiples of 8, so that every thread's rows stay vector-aligned."""
    cdef ThreadUnits me
    me.part = cells_thread_num()
    me.nparts = cells_num_threads()
    me.j0 = part_start(nOut, me.part, me.nparts, 8)
    me.j1 = part_start(nOut, me.part + 1, me.nparts, 8)
    return me
