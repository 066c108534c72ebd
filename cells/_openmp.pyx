"""Python view of the OpenMP runtime the kernels were built with."""

#: True when the extensions were compiled with OpenMP (see setup.py).
HAS_OPENMP = bool(CELLS_HAS_OPENMP)


def max_threads():
    """Threads an OpenMP region gets by default: OMP_NUM_THREADS if set, else the cores this
    process may run on; 1 when built without OpenMP."""
    return cells_max_threads()
