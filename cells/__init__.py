"""cells: fast, exact recurrent-cell kernels for NumPy, mirroring libnd4j's helpers.

    gruCell, gruCellBp                  one GRU step and its gradients
    gruTimeLoop, gruTimeLoopBp          a GRU over a sequence [sL, bS, nIn], and backpropagation
    gruBlockCell, gruBlockCellBp        libnd4j's block cell (TensorFlow's GRUBlockCell)
    lstmLayerCell, lstmLayerCellBp      libnd4j's lstmLayer cell (peepholes, cell clipping)
    lstmLayerTimeLoop, lstmLayerTimeLoopBp
    lstmLayer, lstmLayer_bp             libnd4j's lstmLayer op whole (data formats, directions,
                                        activations, its quirks): cells.lstm_layer
    lltm_forward, lltm_backward         PyTorch's LLTM extension
    lltmTimeLoop, lltmTimeLoopBp
    rnnCell, rnnCellBp                  the vanilla RNN (PyTorch nn.RNN, ONNX RNN): tanh or relu
    rnnTimeLoop, rnnTimeLoopBp
    layerNormLstmTimeLoop, ...Bp        haste's LayerNorm LSTM, LayerNorm GRU and IndRNN, with
    layerNormGruTimeLoop, ...Bp         zoneout (cells.haste: haste's PyTorch layers, drop-in)
    indRnnTimeLoop, indRnnTimeLoopBp

    cells.gru.prepare, cells.lstm.prepare,  a PreparedNet: weights packed once for serving,
    cells.rnn.prepare, cells.lltm.prepare   called a step or a chunk at a time with the state
                                            carried (GruState, LstmState, ...)

The time loops take seq_len (variable lengths) and forward=False (reverse direction). See
cells.gru, cells.lstm, cells.lltm and cells.rnn for the math, the shapes and the threading contract.
Several outputs come as a NamedTuple (GruGrads, LstmCellResult, ...): a tuple in the order the
docstrings give, whose fields carry those names.

    cells.convert                       weight layouts of PyTorch, Keras, ONNX, the block GRU cell
    cells.onnx                          ONNX's GRU, LSTM and RNN operators, and their gradients

    cells.instruction_set()             the CPU kernels' path: "avx512", "avx2" or "generic" (the
                                        best the CPU has, or the one CELLS_ISA names)
    cells.cpu_count()                   the CPUs this process may use (affinity, cgroup quota)
"""
from cells import convert as convert  # the submodules, as attributes of cells
from cells import onnx as onnx
from cells._cpus import cpu_count
from cells._isa import instruction_set
from cells._prepared import (
    GruState,
    LltmState,
    LstmState,
    NetResult,
    PreparedNet,
    RnnState,
)
from cells.gru import (
    GruBlockCellResult,
    GruBlockGrads,
    GruCellResult,
    GruGrads,
    GruTimeLoopWithWorkspace,
    GruWorkspace,
    gruBlockCell,
    gruBlockCellBp,
    gruCell,
    gruCellBp,
    gruTimeLoop,
    gruTimeLoopBp,
)
from cells.lltm import (
    LltmCellGrads,
    LltmCellResult,
    LltmGrads,
    LltmTimeLoopResult,
    LltmTimeLoopWithWorkspace,
    LltmWorkspace,
    lltm_backward,
    lltm_forward,
    lltmTimeLoop,
    lltmTimeLoopBp,
)
from cells.lstm import (
    LstmCellResult,
    LstmGrads,
    LstmGradsWithProjection,
    LstmTimeLoopResult,
    LstmTimeLoopWithWorkspace,
    LstmWorkspace,
    lstmLayerCell,
    lstmLayerCellBp,
    lstmLayerTimeLoop,
    lstmLayerTimeLoopBp,
)
from cells.indrnn import (
    IndRnnGrads,
    IndRnnTimeLoopWithWorkspace,
    IndRnnWorkspace,
    indRnnTimeLoop,
    indRnnTimeLoopBp,
)
from cells.layer_norm_gru import (
    LayerNormGruGrads,
    LayerNormGruTimeLoopWithWorkspace,
    LayerNormGruWorkspace,
    layerNormGruTimeLoop,
    layerNormGruTimeLoopBp,
)
from cells.layer_norm_lstm import (
    LayerNormLstmGrads,
    LayerNormLstmResult,
    LayerNormLstmResultWithWorkspace,
    LayerNormLstmWorkspace,
    layerNormLstmTimeLoop,
    layerNormLstmTimeLoopBp,
)
from cells.lstm_layer import LstmLayerGrads, lstmLayer, lstmLayer_bp
from cells.rnn import (
    RnnGrads,
    RnnTimeLoopWithWorkspace,
    RnnWorkspace,
    rnnCell,
    rnnCellBp,
    rnnTimeLoop,
    rnnTimeLoopBp,
)

__version__ = "0.1.0"

__all__ = [
    "instruction_set",
    "cpu_count",
    "PreparedNet",
    "NetResult",
    "GruState",
    "LstmState",
    "RnnState",
    "LltmState",
    "RnnGrads",
    "RnnTimeLoopWithWorkspace",
    "RnnWorkspace",
    "rnnCell",
    "rnnCellBp",
    "rnnTimeLoop",
    "rnnTimeLoopBp",
    "LstmCellResult",
    "LstmGrads",
    "LstmGradsWithProjection",
    "LstmTimeLoopResult",
    "LstmTimeLoopWithWorkspace",
    "LstmWorkspace",
    "lstmLayerCell",
    "lstmLayerCellBp",
    "lstmLayerTimeLoop",
    "lstmLayerTimeLoopBp",
    "LstmLayerGrads",
    "lstmLayer",
    "lstmLayer_bp",
    "GruBlockCellResult",
    "GruBlockGrads",
    "GruCellResult",
    "GruGrads",
    "GruTimeLoopWithWorkspace",
    "GruWorkspace",
    "gruBlockCell",
    "gruBlockCellBp",
    "gruCell",
    "gruCellBp",
    "gruTimeLoop",
    "gruTimeLoopBp",
    "LltmCellGrads",
    "LltmCellResult",
    "LltmGrads",
    "LltmTimeLoopResult",
    "LltmTimeLoopWithWorkspace",
    "LltmWorkspace",
    "lltm_backward",
    "lltm_forward",
    "lltmTimeLoop",
    "lltmTimeLoopBp",
    "LayerNormLstmGrads",
    "LayerNormLstmResult",
    "LayerNormLstmResultWithWorkspace",
    "LayerNormLstmWorkspace",
    "layerNormLstmTimeLoop",
    "layerNormLstmTimeLoopBp",
    "LayerNormGruGrads",
    "LayerNormGruTimeLoopWithWorkspace",
    "LayerNormGruWorkspace",
    "layerNormGruTimeLoop",
    "layerNormGruTimeLoopBp",
    "IndRnnGrads",
    "IndRnnTimeLoopWithWorkspace",
    "IndRnnWorkspace",
    "indRnnTimeLoop",
    "indRnnTimeLoopBp",
]
