"""Which backend runs a call, chosen from the types of its arrays.

A backend is a module with the functions of cells._cpu, whose docstring states their contract.
NumPy arrays run on cells._cpu. CuPy arrays are recognised without importing CuPy, so that a call
mixing them with NumPy arrays is a clear TypeError; their GPU backend is not implemented yet and
will be chosen here.
"""


def on_gpu(a):
    """Whether `a` is a CuPy array (told by its type's module: CuPy need not be importable)."""
    return type(a).__module__.startswith("cupy")


def _type_name(a):
    """numpy.ndarray, cupy.ndarray, ...: the type's top-level package and name."""
    kind = type(a)
    return f"{kind.__module__.partition('.')[0]}.{kind.__qualname__}"


def select(**arrays):
    """The backend module for a call's arrays (name=array, None = not given): cells._cpu when all
    are NumPy arrays.

    A TypeError names the first argument that is a CuPy array where the first array is not, or
    the other way round; CuPy arrays are a NotImplementedError for now.
    """
    first = None
    for name, a in arrays.items():
        if a is None:
            continue
        if first is None:
            first = name, a
        elif on_gpu(a) != on_gpu(first[1]):
            raise TypeError(f"{name}: expected a {_type_name(first[1])} as {first[0]} (one call "
                            f"takes NumPy arrays or CuPy arrays, not both), got {_type_name(a)}")
    if first is not None and on_gpu(first[1]):
        raise NotImplementedError(f"{first[0]}: a {_type_name(first[1])}, but the GPU (CuPy) "
                                  f"backend is not implemented yet; pass numpy.ndarray arrays")
    # Imported on first use: cells._cpu imports the kernels, which import cells._validate, which
    # imports this module.
    from cells import _cpu
    return _cpu
