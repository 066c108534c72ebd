"""cells: fast, exact recurrent-cell kernels for NumPy, mirroring libnd4j's helpers.

    gruCell, gruCellBp                  one GRU step and its gradients
    gruTimeLoop, gruTimeLoopBp          a GRU over a sequence [sL, bS, nIn], and backpropagation
    gruBlockCell, gruBlockCellBp        libnd4j's block cell (TensorFlow's GRUBlockCell)
    lstmLayerCell, lstmLayerCellBp      libnd4j's lstmLayer cell (peepholes, cell clipping)
    lstmLayerTimeLoop, lstmLayerTimeLoopBp
    lltm_forward, lltm_backward         PyTorch's LLTM extension
    lltmTimeLoop, lltmTimeLoopBp

The time loops take seq_len (variable lengths) and forward=False (reverse direction). See
cells.gru, cells.lstm and cells.lltm for the math, the shapes and the threading contract.

    cells.convert                       weight layouts of PyTorch, Keras, ONNX, the block GRU cell
    cells.onnx                          ONNX's GRU and LSTM operators, and their gradients
"""
from cells import convert, onnx
from cells.gru import (
    GruWorkspace,
    gruBlockCell,
    gruBlockCellBp,
    gruCell,
    gruCellBp,
    gruTimeLoop,
    gruTimeLoopBp,
)
from cells.lltm import (
    LltmWorkspace,
    lltm_backward,
    lltm_forward,
    lltmTimeLoop,
    lltmTimeLoopBp,
)

from cells.lstm import (
    LstmWorkspace,
    lstmLayerCell,
    lstmLayerCellBp,
    lstmLayerTimeLoop,
    lstmLayerTimeLoopBp,
)

__version__ = "0.1.0"

__all__ = [
    "LstmWorkspace",
    "lstmLayerCell",
    "lstmLayerCellBp",
    "lstmLayerTimeLoop",
    "lstmLayerTimeLoopBp",
    "GruWorkspace",
    "gruBlockCell",
    "gruBlockCellBp",
    "gruCell",
    "gruCellBp",
    "gruTimeLoop",
    "gruTimeLoopBp",
    "LltmWorkspace",
    "lltm_backward",
    "lltm_forward",
    "lltmTimeLoop",
    "lltmTimeLoopBp",
]
