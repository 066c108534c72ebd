"""Checks of the arguments of every public function, done before any compiled code runs.

Errors name the argument, say what was expected and what was given: a TypeError for a wrong
kind of object or dtype, a ValueError for a wrong shape or value.
"""
import functools
import numbers
from typing import NamedTuple

import numpy as np

from cells import _arrays
from cells._families._declaration import Dims

REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# scipy's BLAS takes 32-bit int sizes: every matrix dimension handed to it must fit.
MAX_GEMM_DIM = 2**31 - 1


def real_arrays(optional=(), **arrays):
    """Check that every argument is a float32 or float64 array, all of one dtype and one kind
    (NumPy or CuPy); the names in `optional` may also be None.

    No array is converted: a list, None for a required array, an integer array, a mix of
    float32 and float64 is a TypeError naming the argument; so is, after those checks, the
    first argument that is a CuPy array where the first array is not, or the other way round
    (one call takes NumPy arrays or CuPy arrays).
    """
    first = mixed = None
    for name, a in arrays.items():
        if a is None and name in optional:
            continue
        gpu = type(a) is not np.ndarray and _arrays.on_gpu(a)
        if not (gpu or isinstance(a, np.ndarray)):
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
        if a.dtype not in REAL_DTYPES:
            raise TypeError(f"{name}: expected dtype float32 or float64, got {a.dtype}")
        if first is None:
            first, first_gpu = (name, a), gpu
        elif a.dtype != first[1].dtype:
            raise TypeError(f"{name}: expected dtype {first[1].dtype} (the dtype of {first[0]}), "
                            f"got {a.dtype}")
        elif mixed is None and gpu != first_gpu:
            mixed = name, a
    if mixed is not None:
        raise TypeError(f"{mixed[0]}: expected a {_arrays.type_name(first[1])} as {first[0]} "
                        f"(one call takes NumPy arrays or CuPy arrays, not both), got "
                        f"{_arrays.type_name(mixed[1])}")


def shape(name, a, expected, meaning):
    """Check that a.shape == expected; `meaning` spells the shape in libnd4j's names."""
    if a.shape != tuple(expected):
        raise ValueError(f"{name}: expected shape {tuple(expected)} = {meaning}, got {a.shape}")


def ndim(name, a, n, meaning):
    """Check a's rank before its sizes are read."""
    if a.ndim != n:
        raise ValueError(f"{name}: expected a {n}-d array {meaning}, got shape {a.shape}")


def flag(name, value):
    """A bool option: True or False, nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def gemm_dims(**dims):
    """Check that sizes handed to BLAS fit its 32-bit ints."""
    for name, n in dims.items():
        if n > MAX_GEMM_DIM:
            raise ValueError(f"{name} = {n} is larger than BLAS's 32-bit limit {MAX_GEMM_DIM}")


def arguments(declared, x_ndim=3, optional=(), **arrays):
    """The checks of a call of the family `declared` (a cells/_families/ declaration): its
    arguments (by their declared names) and the gradients among `arrays` are arrays of the
    first one's dtype and kind (those named in `optional` may be None: real_arrays), x is
    [sL, bS, nIn] (a cell's [bS, nIn] when x_ndim = 2) and the first state [bS, nOut]; then
    each state and each weight has its declared shape (a weight with rows may leave its first
    dimension out), and the products' sizes fit BLAS. Returns Dims(sL, bS, nIn, nOut), sL = 1
    for a cell."""
    plan = _plan(declared)
    real_arrays(optional=optional, **arrays)
    x, first = arrays["x"], plan.states[0]
    ndim("x", x, x_ndim, "[sL, bS, nIn]" if x_ndim == 3 else "[bS, nIn]")
    ndim(first.name, arrays[first.name], 2, first.meaning())
    sL, bS, nIn = x.shape if x_ndim == 3 else (1,) + x.shape
    nOut = arrays[first.name].shape[1]
    states, weights = _expected_shapes(declared.name, bS, nIn, nOut)
    for a, expected in zip(plan.states, states):
        if arrays[a.name].shape != expected:
            origin = " (bS from x)" if a is first else ""
            shape(a.name, arrays[a.name], expected, a.meaning() + origin)
    for a, expected in zip(plan.weights, weights):
        given = arrays[a.name].shape
        if given != expected and not (a.rows and given == expected[1:]):
            _wrong_weight(a, given, expected)
    if max(sL * bS, nIn, plan.gates * nOut) > MAX_GEMM_DIM:
        gemm_dims(**{"sL*bS": sL * bS, "nIn": nIn, plan.columns: plan.gates * nOut})
    return Dims(sL, bS, nIn, nOut)


class _Plan(NamedTuple):
    """What arguments() reads of a declaration, once per family: its states and its weights
    (Arguments, in order), its gate blocks and their columns' name ("3*nOut")."""
    states: tuple
    weights: tuple
    gates: int
    columns: str


_PLANS = {}


def _plan(declared):
    """The _Plan of a declaration, made on its first call."""
    plan = _PLANS.get(declared.name)
    if plan is None:
        plan = _PLANS[declared.name] = _Plan(
            tuple(a for a in declared.arguments if a.kind == "state"),
            tuple(a for a in declared.arguments if a.kind == "weight"),
            declared.gates, times(declared.gates, "nOut"))
    return plan


@functools.lru_cache(maxsize=256)
def _expected_shapes(name, bS, nIn, nOut):
    """The shapes of family `name`'s states and weights (in its _Plan's order) for a call of bS
    rows, nIn inputs and nOut units: worked out once for each size a program calls."""
    plan, dims = _PLANS[name], Dims(0, bS, nIn, nOut)
    return (tuple(a.shape(dims) for a in plan.states),
            tuple(a.shape(dims) for a in plan.weights))


def _wrong_weight(declared, given, expected):
    """The ValueError of a weight of shape `given` where its declaration expects `expected`."""
    if not declared.rows:
        raise ValueError(f"{declared.name}: expected shape {expected} = {declared.meaning()}, "
                         f"got {given}")
    raise ValueError(f"{declared.name}: expected shape {expected[1:]} = "
                     f"[{', '.join(declared.sizes[1:])}] or {expected} = "
                     f"{declared.meaning()} ({declared.rows}), got {given}")


def output_grads(sL, bS, nOut, dLdh, width="nOut", **final_state_grads):
    """Shapes of the gradients arriving at a time loop's outputs, each None or right: dLdh
    [sL, bS, nOut] at every step's output, the others [bS, nOut] at the final states (`width`
    names nOut in the messages)."""
    if dLdh is not None:
        shape("dLdh", dLdh, (sL, bS, nOut), f"[sL, bS, {width}]")
    for name, g in final_state_grads.items():
        if g is not None:
            shape(name, g, (bS, nOut), f"[bS, {width}]")


def seq_len(lengths, sL, bS, like, names=("seq_len", "sL", "bS"), outside=""):
    """Check a `seq_len` argument: None (every row runs all sL steps) or integers [bS] in
    [0, sL], a NumPy array, or a CuPy array in a call on CuPy arrays (`like`: the call's x).
    Returns None or the lengths as a C-contiguous int64 NumPy array: the loops read them on the
    host (a CuPy array is copied there). `names`: what the messages call the argument, sL and
    bS (ONNX: sequence_lens, ...); `outside`: what the range error adds about values outside
    [0, sL]."""
    name, steps, batch = names
    if lengths is None:
        return None
    gpu = _arrays.on_gpu(like)
    expected = (f"{name}: expected None or an integer array [{batch}] (a numpy.ndarray"
                f"{', or a cupy.ndarray' if gpu else ''})")
    on_device = _arrays.on_gpu(lengths)
    if on_device and not gpu or not (on_device or isinstance(lengths, np.ndarray)):
        raise TypeError(f"{expected}, got {_arrays.type_name(lengths)}")
    if lengths.dtype.kind not in "iu":
        raise TypeError(f"{expected}, got dtype {lengths.dtype}")
    shape(name, lengths, (bS,), f"[{batch}]")
    if on_device:
        lengths = lengths.get()
    if bS and (lengths.min() < 0 or lengths.max() > sL):
        raise ValueError(f"{name}: expected values in [0, {steps}={sL}]{outside}, "
                         f"got values from {lengths.min()} to {lengths.max()}")
    return np.ascontiguousarray(lengths, dtype=np.int64)


def workspace(ws, kind, backward, x, shapes_of, arrays, consumed, **options):
    """Check the workspace `ws` a time loop's backward pass (named `backward`, its forward being
    the same name without "Bp") was given, before any kernel runs:
      - it is a `kind` (GruWorkspace, ...);
      - it was made with this call's options: each keyword names a field of ws (seq_len,
        forward, ...) and gives this call's value; None matches only None;
      - its `arrays` (name -> expected shape, from this call's `shapes_of` arrays) are arrays of
        the kind (NumPy or CuPy) and dtype of this call's x, with this call's shapes;
      - the NumPy buffers named in `consumed` (fields that may be None), which the CPU backward
        overwrites with gradients, have not been used by one already (the first leaves them
        read-only: cells._arrays.consume_workspace). The GPU backward leaves its workspace
        intact (CuPy arrays cannot be made read-only)."""
    if not isinstance(ws, kind):
        raise TypeError(f"workspace: expected the {kind.__name__} returned by "
                        f"{backward[:-2]}, got {type(ws).__name__}")
    for name, value in options.items():
        made = getattr(ws, name)
        if (made is None) != (value is None) or (made is not None
                                                 and not np.array_equal(made, value)):
            raise ValueError(f"workspace: it was made with {name}={made}, this call has "
                             f"{name}={value}")
    expected_kind = _arrays.type_name(x)
    for name, expected in arrays.items():
        a = getattr(ws, name)
        if _arrays.type_name(a) != expected_kind or a.dtype != x.dtype:
            got = f"{getattr(a, 'dtype', '')} {_arrays.type_name(a)}".strip()
            raise TypeError(f"workspace.{name}: expected a {x.dtype} {expected_kind} (as x), "
                            f"got {got}")
        shape(f"workspace.{name}", a, expected, f"(the shapes of this call's {shapes_of})")
    for name in consumed:
        a = getattr(ws, name)
        if a is None or _arrays.on_gpu(a):
            continue
        if not a.flags.writeable:
            raise ValueError(f"workspace.{name} is read-only: this workspace was used by "
                             f"{backward} already, which overwrites it with gradients; run the "
                             f"forward pass again with return_workspace=True")
        if not a.flags.c_contiguous:
            raise ValueError(f"workspace.{name}: expected the C-contiguous array the forward "
                             f"pass returned")


def numpy_weights(**arrays):
    """prepare's first check: every array is a float32 or float64 NumPy array, all of one
    dtype (prepared nets run on the CPU; a CuPy array is a TypeError)."""
    for name, a in arrays.items():
        if _arrays.on_gpu(a):
            raise TypeError(f"{name}: expected a numpy.ndarray (prepared nets run on the CPU), "
                            f"got {_arrays.type_name(a)}")
    real_arrays(optional=tuple(arrays), **arrays)


def no_inputs(dtype, nIn, *state_widths):
    """Empty stand-ins for a call's x [0, 0, nIn] and states [0, n] (one per width), so that
    prepare checks the weights with the time loop's own checks: they are consistent with the
    weights by construction, and only the weights' errors can show."""
    return (np.empty((0, 0, nIn), dtype),) + tuple(np.empty((0, n), dtype) for n in state_widths)


def zoneout_probability(value):
    """A prepared net's `zoneout` (haste's eval mode): None or a probability in [0, 1], as a
    float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (float, int, np.floating, np.integer)):
        raise TypeError(f"zoneout: expected None or a probability, got {type(value).__name__}")
    if not 0 <= value <= 1:
        raise ValueError(f"zoneout: expected a probability in [0, 1], got {value}")
    return float(value)


def zoneout(value, sL, bS, nOut, like):
    """Check a `zoneout` argument (haste's zoneout): None (none); a probability p in [0, 1]
    (eval: h = p·hPrev + (1 - p)·hNew); or a mask [sL, bS, nOut] of x's kind and dtype
    (training: h = hPrev + mask∘(hNew - hPrev)). Returns None or the time loop's share of the
    new state: [1] holding 1 - p, or the mask."""
    if value is None:
        return None
    if isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, bool):
        if not 0 <= value <= 1:
            raise ValueError(f"zoneout: expected a probability in [0, 1], got {value}")
        xp = _arrays.array_module(like)
        return xp.full(1, 1 - float(value), like.dtype)
    if not (isinstance(value, np.ndarray) or _arrays.on_gpu(value)):
        raise TypeError(f"zoneout: expected None, a probability or a mask array "
                        f"[sL, bS, nOut], got {type(value).__name__}")
    if _arrays.type_name(value) != _arrays.type_name(like) or value.dtype != like.dtype:
        raise TypeError(f"zoneout: expected a mask of x's dtype {like.dtype} "
                        f"({_arrays.type_name(like)}), got {value.dtype} "
                        f"{_arrays.type_name(value)}")
    shape("zoneout", value, (sL, bS, nOut), "[sL, bS, nOut]")
    return value


def cell_clip(value, name="cell_clip"):
    """The cell clip argument `name`: a real number >= 0 (0: no clipping)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float >= 0, got {value!r}")
    if not float(value) >= 0:
        raise ValueError(f"{name}: expected a float >= 0 (0: no clipping), got {value!r}")
    return float(value)


def times(n, size):
    """The name of n*size in a shape: "3*nOut", or "nOut" for n = 1."""
    return size if n == 1 else f"{n}*{size}"
