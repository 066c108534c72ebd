"""Which backend runs a call: cells._cpu for NumPy arrays, cells._gpu for CuPy arrays.

A backend is a module with the two loops of cells._cpu, whose docstring states their contract.
The faces have checked that a call's arrays are of one kind (cells._validate.real_arrays), so
one array tells the backend. CuPy arrays are recognised without importing CuPy, so that `import
cells` never needs it; the GPU backend imports CuPy when it runs (an ImportError saying what to
install where it is missing).
"""
from cells._arrays import on_gpu


def of(a):
    """The backend module for a call on array `a` (and arrays of its kind): cells._gpu for a
    CuPy array, cells._cpu otherwise."""
    # Imported on first use: cells._gpu imports nothing of CuPy at import, but cells._cpu
    # loads the compiled kernels.
    if on_gpu(a):
        from cells import _gpu
        return _gpu
    from cells import _cpu
    return _cpu
