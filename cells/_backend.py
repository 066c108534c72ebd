"""Which backend runs a call, chosen from the types of its arrays.

A backend is a module with the functions of cells._cpu, whose docstring states their contract.
NumPy arrays run on cells._cpu, CuPy arrays on cells._gpu. CuPy arrays are recognised without
importing CuPy, so that `import cells` never needs it and a call mixing them with NumPy arrays is
a clear TypeError; the GPU backend imports CuPy when it runs (an ImportError saying what to
install where it is missing).
"""
from cells._arrays import on_gpu, type_name


def select(**arrays):
    """The backend module for a call's arrays (name=array, None = not given): cells._cpu when all
    are NumPy arrays, cells._gpu when all are CuPy arrays.

    A TypeError names the first argument that is a CuPy array where the first array is not, or
    the other way round.
    """
    first = None
    for name, a in arrays.items():
        if a is None:
            continue
        if first is None:
            first = name, a
        elif on_gpu(a) != on_gpu(first[1]):
            raise TypeError(f"{name}: expected a {type_name(first[1])} as {first[0]} (one call "
                            f"takes NumPy arrays or CuPy arrays, not both), got {type_name(a)}")
    # Imported on first use: cells._gpu imports nothing of CuPy at import, but cells._cpu
    # loads the compiled kernels.
    if first is not None and on_gpu(first[1]):
        from cells import _gpu
        return _gpu
    from cells import _cpu
    return _cpu
