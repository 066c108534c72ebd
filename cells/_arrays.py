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


def torch_layout(Wx, Wh):
    """Whether the weights Wx [nIn, G] and Wh [nState, G] are both in PyTorch's layout,
    transposed: F-ordered (each the transpose of a C-ordered array, as weight_ih.T) and not both
    C-ordered as well. The CPU's time loop reads such weights where they are, and every backend
    returns their gradients F-ordered, like them."""
    return (Wx is not None and Wh is not None and Wx.flags.f_contiguous and Wh.flags.f_contiguous
            and not (Wx.flags.c_contiguous and Wh.flags.c_contiguous))


def consume_workspace(*buffers):
    """Mark buffers the backward pass has overwritten with gradients read-only."""
    for a in buffers:
        if a is not None:
            a.flags.writeable = False
