"""What kind of array a value is: a NumPy or a CuPy array, told without importing CuPy (so
that `import cells` never needs it), and its array module, type name and marking.

The lowest layer of cells' Python: it imports nothing of cells but cells.cuda, and that only
to import CuPy for a CuPy array's module.
"""
import numpy as np


def on_gpu(a):
    """Whether `a` is a CuPy array (told by its type's module: CuPy need not be importable)."""
    return type(a) is not np.ndarray and type(a).__module__.startswith("cupy")


def array_module(a):
    """The array module of `a`'s kind: numpy, or cupy for a CuPy array (imported then, with an
    ImportError saying what to install where it is missing)."""
    if on_gpu(a):
        from cells import cuda
        return cuda.import_cupy()
    return np


def type_name(a):
    """numpy.ndarray, cupy.ndarray, list, ...: the type's top-level package and name."""
    kind = type(a)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__.partition('.')[0]}.{kind.__qualname__}"


def consume_workspace(*buffers):
    """Mark buffers the backward pass has overwritten with gradients read-only."""
    for a in buffers:
        if a is not None:
            a.flags.writeable = False
