"""The cell families the benchmarks know: for each, how to make its inputs, which NumPy cell
(numpy_cells.py) and which cells functions run it, how PyTorch and ONNX Runtime run it and which
outputs are compared. FAMILIES holds them by name; everything else in the benchmarks is written
once for all families.

What cells declares of a family (cells/_families/: its time loop's arguments and shapes,
results, variants, gate blocks) is read from the declaration; this module adds what only the
benchmarks know (the NumPy, PyTorch and ONNX versions). The cells functions of a family are
looked up by name when they are first used, so that the benchmarks run on a cells from before
a family's functions existed (Family.available).
"""
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import cells
import numpy_cells
from cells import _families


@dataclass(frozen=True)
class TorchModel:
    """A PyTorch version of one problem: forward(x, *initial states) -> h [T,B,H] (a tensor),
    its parameters (their .grad is reset before every training step) and recurrent_grad(), the
    gradient of the family's recurrent weight after backward, in cells' layout."""
    forward: Callable
    parameters: tuple
    recurrent_grad: Callable


@dataclass(frozen=True)
class Family:
    """What the generic code needs to know about one cell type.

    arg_specs(shape) -> {name: (kind, dims)}: the kernel's positional inputs in cells' order,
      kind "input", "state" or "weight" choosing the random distribution (harness.make_inputs);
    variants: variant name -> keyword options passed to the NumPy and cells functions;
    numpy_forward, numpy_backward: the family's NumPy cell (numpy_cells.py);
    cells_forward, cells_backward: names of the time loop and its backward in `cells`;
    outputs: names of the forward's outputs; grads: names of the backward's outputs (a trailing
      extra output of cells, LSTM's dLdWp, is dropped); state_names: the initial states (the
      PyTorch models take them after x);
    recurrent_grad: the gradient compared for a training step, with h;
    torch_model(torch, inp, **variant options) -> TorchModel, or None where PyTorch has no
      equivalent; torch_name: what it runs, for the documentation;
    onnx_model(inp, **variant options) -> (ONNX model, feeds) of ONNX Runtime's float32
      inference, or None where ONNX has no operator for the family;
    gate_blocks: how many blocks of H columns the weights have (GRU and LLTM 3, LSTM 4, RNN 1).

    A new family is one more declared() below: its NumPy cell (numpy_cells.py), its PyTorch
    and ONNX versions where they exist."""
    name: str
    arg_specs: Callable
    variants: dict
    numpy_forward: Callable
    numpy_backward: Callable
    cells_forward: str
    cells_backward: str
    outputs: tuple
    grads: tuple
    state_names: tuple
    recurrent_grad: str
    torch_model: Callable
    torch_name: str
    onnx_model: Callable
    gate_blocks: int

    def default_variant(self):
        return next(iter(self.variants))

    def kernels(self):
        """(forward, backward) functions of cells; AttributeError while they do not exist."""
        return getattr(cells, self.cells_forward), getattr(cells, self.cells_backward)

    def available(self):
        """Whether the imported cells has the family's time loops (a checkout from before the
        family was added has not)."""
        return all(hasattr(cells, n) for n in (self.cells_forward, self.cells_backward))

    def gemm_flops(self, shape, training):
        """The floating-point operations of the gemms any implementation must do (elementwise
        gate math not counted): inference multiplies [x, h] [T·B, I+H] by the weights
        [I+H, blocks·H]; a training step adds the three products of the same size of the backward
        (dL/d[x, h], dL/dWx and dL/dWh)."""
        forward = 2 * shape.T * shape.B * (shape.I + shape.H) * self.gate_blocks * shape.H
        return 3 * forward if training else forward


# ----------------------------------------------------------------------------------------------
# PyTorch
# ----------------------------------------------------------------------------------------------

def _torch_dtype(torch, a):
    return torch.float64 if a.dtype == np.float64 else torch.float32


def _torch_gru(torch, inp, *, linear_before_reset):
    """torch.nn.GRU with cells' weights (transposed; same gate order r, u/z, c/n); PyTorch's GRU
    is always linear_before_reset, so None for reset-before."""
    if not linear_before_reset:
        return None
    gru = torch.nn.GRU(inp.x.shape[2], inp["hI"].shape[1], dtype=_torch_dtype(torch, inp.x))
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(inp["Wx"].T))
        gru.weight_hh_l0.copy_(torch.from_numpy(inp["Wh"].T))
        gru.bias_ih_l0.copy_(torch.from_numpy(inp["b"][0]))
        gru.bias_hh_l0.copy_(torch.from_numpy(inp["b"][1]))
    return TorchModel(lambda x, h0: gru(x, h0[None])[0], tuple(gru.parameters()),
                      lambda: gru.weight_hh_l0.grad.T)


def _torch_lstm(torch, inp):
    """torch.nn.LSTM with cells' weights (transposed; same gate order i, f, g, o), bias_ih = b,
    bias_hh = 0."""
    lstm = torch.nn.LSTM(inp.x.shape[2], inp["hI"].shape[1], dtype=_torch_dtype(torch, inp.x))
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(inp["Wx"].T))
        lstm.weight_hh_l0.copy_(torch.from_numpy(inp["Wr"].T))
        lstm.bias_ih_l0.copy_(torch.from_numpy(inp["b"]))
        lstm.bias_hh_l0.zero_()
    return TorchModel(lambda x, h0, c0: lstm(x, (h0[None], c0[None]))[0],
                      tuple(lstm.parameters()), lambda: lstm.weight_hh_l0.grad.T)


def _torch_lltm(torch, inp):
    """The PyTorch C++-extension tutorial's pure-PyTorch LLTM step (addmm on cat([h, x]),
    sigmoid, elu, tanh) in a Python loop over time; autograd for training."""
    F = torch.nn.functional
    W = torch.nn.Parameter(torch.from_numpy(inp["W"].copy()))
    b = torch.nn.Parameter(torch.from_numpy(inp["b"].copy()))

    def forward(x, h, c):
        out = []
        for t in range(x.shape[0]):
            gates = torch.addmm(b, torch.cat([h, x[t]], dim=1), W.t()).chunk(3, dim=1)
            input_gate = torch.sigmoid(gates[0])
            output_gate = torch.sigmoid(gates[1])
            candidate_cell = F.elu(gates[2])
            c = c + candidate_cell * input_gate
            h = torch.tanh(c) * output_gate
            out.append(h)
        return torch.stack(out)

    return TorchModel(forward, (W, b), lambda: W.grad)


def _torch_rnn(torch, inp, *, activation):
    """torch.nn.RNN (nonlinearity tanh or relu) with cells' weights (transposed), biases b[0],
    b[1]."""
    rnn = torch.nn.RNN(inp.x.shape[2], inp["hI"].shape[1], nonlinearity=activation,
                       dtype=_torch_dtype(torch, inp.x))
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.from_numpy(inp["Wx"].T))
        rnn.weight_hh_l0.copy_(torch.from_numpy(inp["Wh"].T))
        rnn.bias_ih_l0.copy_(torch.from_numpy(inp["b"][0]))
        rnn.bias_hh_l0.copy_(torch.from_numpy(inp["b"][1]))
    return TorchModel(lambda x, h0: rnn(x, h0[None])[0], tuple(rnn.parameters()),
                      lambda: rnn.weight_hh_l0.grad.T)


# ----------------------------------------------------------------------------------------------
# ONNX (opset 14, direction forward, layout 0, float32)
# ----------------------------------------------------------------------------------------------

def _blocks(H, order):
    """Column indices that put gate blocks of width H in `order` (source block per target)."""
    return np.concatenate([np.arange(k * H, (k + 1) * H) for k in order])


def _onnx_recurrent(op, inp, weights, states, **attributes):
    """A single-node ONNX GRU, LSTM or RNN holding the weights (W, R, B) as initializers; X and
    the initial states are graph inputs. Returns (model, feeds)."""
    from onnx import TensorProto, helper, numpy_helper

    T, B, I = inp.x.shape
    H = inp["hI"].shape[1]
    state_names = ("initial_h", "initial_c")[:len(states)]
    node = helper.make_node(op, ["X", "W", "R", "B", "", *state_names], ["Y"], hidden_size=H,
                            **attributes)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, B, H]) for n in state_names],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, B, H])],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(a), name)
                     for name, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, {"X": inp.x, **{n: s[None] for n, s in zip(state_names, states)}}


def _onnx_gru(inp, *, linear_before_reset):
    """ONNX GRU: gates (z, r, h) = cells' (u, r, c), W [1,3H,I], R [1,3H,H], B [1,6H] = [Wb, Rb]."""
    H = inp["hI"].shape[1]
    zrh = _blocks(H, (1, 0, 2))
    b = inp["b"]
    return _onnx_recurrent(
        "GRU", inp, {"W": inp["Wx"][:, zrh].T[None], "R": inp["Wh"][:, zrh].T[None],
                     "B": np.concatenate([b[0, zrh], b[1, zrh]])[None]},
        [inp["hI"]], linear_before_reset=int(linear_before_reset))


def _onnx_lstm(inp):
    """ONNX LSTM: gates (i, o, f, c) = cells' blocks (0, 3, 1, 2), W [1,4H,I], R [1,4H,H],
    B [1,8H] = [Wb, Rb] with Wb = b, Rb = 0; no peepholes."""
    H = inp["hI"].shape[1]
    iofc = _blocks(H, (0, 3, 1, 2))
    b = inp["b"]
    return _onnx_recurrent("LSTM", inp, {"W": inp["Wx"][:, iofc].T[None],
                                         "R": inp["Wr"][:, iofc].T[None],
                                         "B": np.concatenate([b[iofc], np.zeros_like(b)])[None]},
                           [inp["hI"], inp["cI"]])


def _onnx_rnn(inp, *, activation):
    """ONNX RNN: W [1,H,I] = Wxᵀ, R [1,H,H] = Whᵀ, B [1,2H] = [bx, bh], activations Tanh or
    Relu."""
    return _onnx_recurrent("RNN", inp, {"W": inp["Wx"].T[None], "R": inp["Wh"].T[None],
                                        "B": inp["b"].reshape(1, -1)},
                           [inp["hI"]], activations=[activation.capitalize()])


# ----------------------------------------------------------------------------------------------
# The families
# ----------------------------------------------------------------------------------------------

def declared(name, **benchmarks):
    """The Family of cells' declared family `name` (cells/_families/), with the fields only
    the benchmarks know (`benchmarks`)."""
    family = _families.FAMILIES[name]
    return Family(
        name=name,
        arg_specs=lambda s: {a.name: (a.kind, a.shape(_families.Dims(s.T, s.B, s.I, s.H)))
                             for a in family.arguments},
        variants={variant: options for variant, (_, options) in family.variants.items()},
        cells_forward=family.time_loop, cells_backward=family.time_loop_bp,
        outputs=family.outputs, grads=family.grads,
        state_names=tuple(a.name for a in family.arguments if a.kind == "state"),
        gate_blocks=family.gates, **benchmarks)


GRU = declared(
    "gru", numpy_forward=numpy_cells.numpy_gru, numpy_backward=numpy_cells.numpy_gru_bp,
    recurrent_grad="dLdWh", torch_model=_torch_gru,
    torch_name="torch.nn.GRU (linear_before_reset only)", onnx_model=_onnx_gru)
LSTM = declared(
    "lstm", numpy_forward=numpy_cells.numpy_lstm, numpy_backward=numpy_cells.numpy_lstm_bp,
    recurrent_grad="dLdWr", torch_model=_torch_lstm, torch_name="torch.nn.LSTM",
    onnx_model=_onnx_lstm)
LLTM = declared(
    "lltm", numpy_forward=numpy_cells.numpy_lltm, numpy_backward=numpy_cells.numpy_lltm_bp,
    recurrent_grad="dLdW", torch_model=_torch_lltm,
    torch_name="the tutorial's pure-PyTorch LLTM step, looped", onnx_model=None)
RNN = declared(
    "rnn", numpy_forward=numpy_cells.numpy_rnn, numpy_backward=numpy_cells.numpy_rnn_bp,
    recurrent_grad="dLdWh", torch_model=_torch_rnn, torch_name="torch.nn.RNN",
    onnx_model=_onnx_rnn)

FAMILIES = {f.name: f for f in (GRU, LSTM, LLTM, RNN)}


def get_family(family):
    """A Family from itself or its name."""
    return family if isinstance(family, Family) else FAMILIES[family]
