"""A stand-in for CuPy on the CPU: what cells does with CuPy arrays, tested without a GPU.

`fake_cupy.ndarray` is NumPy memory that behaves like a cupy.ndarray wherever cells could tell
the difference:
  - its type's module starts with "cupy", so cells._arrays takes it for a CuPy array;
  - it refuses NumPy arrays as operands, indices and assigned values (CuPy never moves data
    between host and device implicitly) and is not made from one by NumPy's own functions:
    np.ascontiguousarray(a), np.full(...) give NumPy arrays, which the next operation refuses;
  - its flags have no `writeable` (CuPy arrays cannot be made read-only);
  - .get() copies it to a NumPy array.
The module has CuPy's functions (NumPy's, on and returning fake arrays), asarray / asnumpy /
from_dlpack for the transfers, and a `cuda` with a no-op Device and Stream.from_external.

With cells.cuda.import_cupy returning this module and cells.cuda.device_launcher returning the
CPU launcher (the kernels compiled by g++ with the shim), cells' public functions run their GPU
path on these arrays (tests/test_gpu_faces.py). What this cannot catch: an operation CuPy lacks
or spells differently, and `isinstance(a, numpy.ndarray)` (true here, false for CuPy).
"""
import contextlib
import types

import numpy as np


def _is_host(a):
    return isinstance(a, np.ndarray) and not isinstance(a, ndarray)


def _refuse_host(what, values):
    """A TypeError for a NumPy array among values (nested in tuples, lists and dicts)."""
    for v in values.values() if isinstance(values, dict) else values:
        if isinstance(v, (tuple, list, dict)):
            _refuse_host(what, v)
        elif _is_host(v):
            raise TypeError(f"fake_cupy: a numpy.ndarray as {what} of a CuPy array operation "
                            f"(CuPy does not convert host arrays implicitly)")


def _device(result):
    """NumPy results (nested in tuples and lists) as fake arrays."""
    if isinstance(result, np.ndarray):
        return result.view(ndarray)
    if isinstance(result, (tuple, list)):
        return type(result)(_device(r) for r in result)
    return result


def _host(value):
    """Fake arrays (nested in tuples, lists and dicts) as NumPy views."""
    if isinstance(value, ndarray):
        return value.view(np.ndarray)
    if isinstance(value, (tuple, list)):
        return type(value)(_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    return value


class Flags:
    """cupy's flags: contiguity and ownership, no writeable."""

    def __init__(self, a):
        self.c_contiguous = a.c_contiguous
        self.f_contiguous = a.f_contiguous
        self.owndata = a.owndata


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    __module__ = "cupy_fake"

    @property
    def flags(self):
        return Flags(self.view(np.ndarray).flags)

    def get(self):
        return np.array(self.view(np.ndarray))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host("an operand", inputs + tuple(kwargs.get("out", ())))
        if "out" in kwargs:
            kwargs["out"] = _host(kwargs["out"])
        return _device(getattr(ufunc, method)(*_host(inputs), **kwargs))

    def __array_function__(self, func, types_, args, kwargs):
        if any(issubclass(t, np.ndarray) and not issubclass(t, ndarray) for t in types_):
            raise TypeError(f"fake_cupy: {func.__name__} on CuPy and NumPy arrays")
        return _device(func(*_host(args), **_host(kwargs)))

    def __getitem__(self, index):
        _refuse_host("an index", index if isinstance(index, tuple) else (index,))
        return super().__getitem__(_host(index))

    def __setitem__(self, index, value):
        _refuse_host("an index", index if isinstance(index, tuple) else (index,))
        _refuse_host("an assigned value", (value,))
        super().__setitem__(_host(index), _host(value))


def asarray(a, dtype=None):
    """A host array (or a fake one) on the "device": a copy of a NumPy array, as CuPy's."""
    if isinstance(a, ndarray):
        return a if dtype is None else a.astype(dtype, copy=False)
    return np.array(a, dtype=dtype).view(ndarray)


def array(a, dtype=None, copy=True, order="K"):
    """A new "device" array from a host or fake one, as cupy.array."""
    return np.array(_host(a), dtype=dtype, copy=copy, order=order).view(ndarray)


def asnumpy(a):
    return a.get() if isinstance(a, ndarray) else np.asarray(a)


def from_dlpack(t):
    return np.from_dlpack(t).view(ndarray)


class _Device:
    def __init__(self, device_id=0):
        self.id = device_id

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _stream_from_external(stream):
    return contextlib.nullcontext()


cuda = types.SimpleNamespace(Device=_Device,
                             Stream=types.SimpleNamespace(from_external=_stream_from_external))

__version__ = "fake"


def __getattr__(name):
    """Every other name: NumPy's function, on and returning fake arrays."""
    function = getattr(np, name)
    if not callable(function) or isinstance(function, type):
        return function

    def on_device(*args, **kwargs):
        _refuse_host("an argument", args)
        _refuse_host("an argument", kwargs)
        return _device(function(*_host(args), **_host(kwargs)))
    on_device.__name__ = name
    return on_device

