"""cells: fast, exact recurrent-cell kernels (GRU) for NumPy, mirroring libnd4j's helpers.

    gruCell, gruCellBp            one step and its gradients
    gruTimeLoop, gruTimeLoopBp    a whole sequence [sL, bS, nIn] and backpropagation through time
    gruBlockCell, gruBlockCellBp  libnd4j's block cell (TensorFlow's GRUBlockCell)

See cells.gru for the math, the shapes and the threading contract.
"""
from cells.gru import (
    GruWorkspace,
    gruBlockCell,
    gruBlockCellBp,
    gruCell,
    gruCellBp,
    gruTimeLoop,
    gruTimeLoopBp,
)

__version__ = "0.1.0"

__all__ = [
    "GruWorkspace",
    "gruBlockCell",
    "gruBlockCellBp",
    "gruCell",
    "gruCellBp",
    "gruTimeLoop",
    "gruTimeLoopBp",
]
