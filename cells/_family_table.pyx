"""The cell families' table, as Python reads it: each family's name, its index and its row of
include/cells/family_rows.h, read from the table that include/cells/families.h compiles
(cells/_family_table.pxd declares it), and the LSTM's default activation codes.

Both backends read it: the CPU backend (cells/_cpu.py, and the time loop, cells/_time_loop.pyx,
which takes a family by name) and the GPU backend (cells/_gpu.py, and cells/cuda.py, which finds
each family's kernels here), as do the families' Python declarations (cells/_families/). It
holds nothing but the table, so that the GPU backend reads it without loading the CPU time loop,
its threads or BLAS.
"""
from cells._family_table cimport (
    CELLS_FAMILIES, CELLS_PARAM_GRAD_AUX, CELLS_PARAM_GRAD_NONE, CELLS_PARAM_GRAD_PEEPHOLES,
    CELLS_PARAM_GRAD_STEPS, cells_families, cells_family_info, cells_family_names,
    cells_family_sources,
)

from typing import NamedTuple

# The families by the names the Python faces use: their indices in the compiled table
# (include/cells/family_rows.h declares them).
FAMILIES = {cells_family_names[i].decode(): i for i in range(CELLS_FAMILIES)}

# The LSTM's default activations, (code, alpha, beta) of the gates i, f, o, of the candidate
# and of the output (libnd4j's codes, include/cells/activations.h): σ, tanh, tanh.
LSTM_ACTIVATIONS = ((2, 0.0, 0.0), (0, 0.0, 0.0), (0, 0.0, 0.0))

# What dL/dP sums over the steps (family_rows.h's param_grad), as FamilyRow.param_grad says it.
PARAM_GRADS = {CELLS_PARAM_GRAD_NONE: None, CELLS_PARAM_GRAD_AUX: "aux",
               CELLS_PARAM_GRAD_PEEPHOLES: "peepholes", CELLS_PARAM_GRAD_STEPS: "steps"}


class FamilyRow(NamedTuple):
    """A family's row of include/cells/family_rows.h (its fields say what they mean there),
    for the backends that allocate its buffers and the GPU kernels' launches. phases: 1, or 2
    where h_blocks < gates; source: its kernels' cells/kernels/<source>.cu; param_grad: None,
    "aux", "peepholes" or "steps" (PARAM_GRADS)."""

    gates: int
    cell_state: bool
    h_blocks: int
    aux: int
    aux_kept: bool
    aux_grad_block: int
    param_blocks: int
    projects: bool
    phases: int
    source: str
    param_grad: object
    row_reduction: bool
    recurrent_product: bool


def _read_family(int i):
    """Row i of the compiled table as a FamilyRow."""
    cdef cells_family_info fam = cells_families[i]
    return FamilyRow(fam.gates, fam.cell_state, fam.h_blocks, fam.aux, fam.aux_kept,
                  fam.aux_grad_block, fam.param_blocks, fam.projects, fam.phases,
                  cells_family_sources[i].decode(), PARAM_GRADS[fam.param_grad],
                  fam.row_reduction, fam.recurrent_product)


# Every family's row, read once (the backends read one on every call).
_TABLE = {name: _read_family(i) for name, i in FAMILIES.items()}


def family(str name):
    """The FamilyRow of `name` (a key of FAMILIES), read from the compiled table."""
    return _TABLE[name]
