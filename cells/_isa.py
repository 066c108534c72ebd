"""The instruction set of cells' CPU kernels: the best the CPU runs, or the path CELLS_ISA names.

CELLS_ISA=avx512|avx2|generic, read once when cells is imported, runs every CPU kernel (the
packed-panel products, the gate math, the int8 and bfloat16 products) on that path; unset (or
empty), the kernels run on the best path the CPU has. A value the CPU cannot run is a
ValueError at import that names the paths it can. include/cells/isa.h holds the choice.
"""
import os
from contextlib import contextmanager

from cells import _time_loop

# The paths by name, best first, with include/cells/isa.h's values, and what each needs.
PATHS = _time_loop.INSTRUCTION_SETS
NEEDS = {"avx512": "AVX-512 F/BW/CD/DQ/VL (x86-64-v4)", "avx2": "AVX2 and FMA (x86-64-v3)",
         "generic": "nothing beyond x86-64"}
NAMES = {code: name for name, code in PATHS.items()}


def available():
    """The paths this CPU runs, best first.

    Returns
    -------
    tuple of str
        ``("avx512", "avx2", "generic")`` on an AVX-512 CPU, ``("avx2", "generic")`` on an
        AVX2 one, ``("generic",)`` elsewhere.
    """
    best = _time_loop.cpu_instruction_set()
    return tuple(name for name, code in PATHS.items() if code <= best)


def instruction_set():
    """The instruction set cells' CPU kernels run on.

    The best the CPU has, unless the environment variable ``CELLS_ISA`` chose a lower one when
    cells was imported.

    Returns
    -------
    str
        ``"avx512"`` (AVX-512, x86-64-v4), ``"avx2"`` (AVX2 and FMA, x86-64-v3) or
        ``"generic"`` (the x86-64 baseline, or another platform).

    Examples
    --------
    >>> import cells
    >>> cells.instruction_set() in ("avx512", "avx2", "generic")
    True
    """
    return NAMES[_time_loop.instruction_set()]


def check(name, source):
    """`name`'s value in include/cells/isa.h, after checking that this CPU runs it; `source`
    names where the value came from, for the error."""
    if name not in PATHS:
        raise ValueError(f"{source}: expected one of 'avx512', 'avx2', 'generic', got {name!r}")
    runs = available()
    if name not in runs:
        raise ValueError(f"{source}={name!r}: this CPU has no {NEEDS[name]}; it runs "
                         + " and ".join(repr(r) for r in runs))
    return PATHS[name]


@contextmanager
def forced(name):
    """Runs cells' kernels on the path `name` inside the block, for the tests and benchmarks
    that run every path this machine has in one process. Not for use while other threads call
    cells: the choice is the process's."""
    before = _time_loop.instruction_set()
    _time_loop.set_instruction_set(check(name, "isa"))
    try:
        yield
    finally:
        _time_loop.set_instruction_set(before)


def _from_environment():
    value = os.environ.get("CELLS_ISA", "")
    if value:
        _time_loop.set_instruction_set(check(value, "CELLS_ISA"))


_from_environment()
