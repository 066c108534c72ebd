"""cells.torch.quantize_dynamic: torch's recurrent modules as inference modules on cells' int8 or
bfloat16 prepared nets.

The quantized modules hold one PreparedNet per layer and direction (``nets``, index layer *
num_directions + direction), prepared once from the float module's weights, and no parameter.
They share the float modules' forward plumbing (cells/torch/_modules.py): Stack.forward and
Cell.forward with the family's states (GruFamily, LstmFamily, RnnFamily), torch's argument
checks, and Stack._net_layers / _net_step on the nets, which _nets below always returns.
So a quantized module runs exactly the prepared nets' numerics, layer by layer, with nothing of
its own.
"""
import copy

import torch

from cells.torch._modules import (
    GRU, LSTM, RNN, Cell, GRUCell, GruFamily, LSTMCell, LstmFamily, RNNCell, RnnFamily, Stack)

# torch's dtype argument -> prepare's weights=
_WEIGHT_KINDS = {torch.qint8: "int8", torch.bfloat16: "bfloat16"}


class _Quantized:
    """What the quantized modules share. A module holds ``nets``, one PreparedNet per layer and
    direction (index layer * num_directions + direction), packed once in __init__ from the
    float module's weights; the float module's options (input_size, hidden_size, ...) and
    ``dtype``; no parameter or buffer. ``nbytes`` is its memory. Calls are inference-only."""

    _options = ()   # the float module's attributes a quantized one keeps

    def __init__(self, module, dtype):
        super().__init__()
        for name in self._options:
            setattr(self, name, getattr(module, name, 0))
        self.dtype = dtype
        with torch.no_grad():   # the float weights are read as NumPy arrays (_numpy)
            self.nets = [self._prepare(weights, _WEIGHT_KINDS[dtype])
                         for weights in self._float_weights(module)]
        self.train(module.training)

    @property
    def nbytes(self):
        """The bytes the module holds: its nets' (packed weights, their scales, the biases)."""
        return sum(net.nbytes for net in self.nets)

    def _nets(self, x, *states):
        """The nets, for every float32 call (None for another dtype: the module's checks then
        raise torch's error): a TypeError for a tensor off the CPU, a RuntimeError where
        autograd would need a gradient through them."""
        if x.dtype != torch.float32:
            return None
        name = type(self).__name__
        if not x.is_cpu:
            raise TypeError(f"{name}: runs on the CPU, got the input on {x.device}")
        if torch.is_grad_enabled() and any(t.requires_grad for t in (x, *states)):
            raise RuntimeError(
                f"{name} is inference-only: no gradient flows through its quantized weights, "
                f"but a tensor of this call requires grad; call it under torch.no_grad() or "
                f"torch.inference_mode(), or on detached tensors")
        return self.nets

    def _layer_weights(self):
        raise RuntimeError(f"{type(self).__name__} holds prepared nets, not weights")


# ---------------------------------------------------------------------------------------------
# Stacks
# ---------------------------------------------------------------------------------------------

class _QuantizedStack(_Quantized):
    """Stack's forward on the nets, with torch.nn.RNNBase's argument checks (float32 input)."""

    _options = ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                "bidirectional", "proj_size")

    @staticmethod
    def _float_weights(module):
        return Stack._layer_weights(module)

    def check_input(self, input, batch_sizes):
        """torch.nn.RNNBase.check_input, the weights' dtype being float32."""
        if input.dtype != torch.float32:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match the quantized "
                             f"module's (torch.float32). Convert input: "
                             f"input.to(torch.float32)")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got "
                               f"{input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    get_expected_hidden_size = torch.nn.RNNBase.get_expected_hidden_size
    check_hidden_size = torch.nn.RNNBase.check_hidden_size
    check_forward_args = torch.nn.RNNBase.check_forward_args
    permute_hidden = torch.nn.RNNBase.permute_hidden

    def flatten_parameters(self):
        """Nothing to flatten (torch.nn.RNNBase's, which models often call in forward)."""

    def extra_repr(self):
        s = torch.nn.RNNBase.extra_repr(self)
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return f"{s}, dtype={self.dtype}"


class QuantizedGRU(_QuantizedStack, GruFamily, Stack, torch.nn.Module):
    """torch.nn.GRU for inference on cells' int8 or bfloat16 prepared nets (quantize_dynamic)."""



class QuantizedLSTM(_QuantizedStack, LstmFamily, Stack, torch.nn.Module):
    """torch.nn.LSTM for inference on cells' int8 or bfloat16 prepared nets (quantize_dynamic)."""

    check_forward_args = torch.nn.LSTM.check_forward_args
    get_expected_cell_size = torch.nn.LSTM.get_expected_cell_size
    permute_hidden = torch.nn.LSTM.permute_hidden


class QuantizedRNN(_QuantizedStack, RnnFamily, Stack, torch.nn.Module):
    """torch.nn.RNN for inference on cells' int8 or bfloat16 prepared nets (quantize_dynamic)."""

    _options = (*_QuantizedStack._options, "nonlinearity")


# ---------------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------------

class _QuantizedCell(_Quantized):
    """Cell's forward on the one net, with torch's checks of a cell's arguments."""

    _options = ("input_size", "hidden_size", "bias")

    @staticmethod
    def _float_weights(module):
        return Cell._layer_weights(module)

    def _weights_dtype(self):
        """float32: what the nets take (their weights are int8 or bfloat16)."""
        return torch.float32

    def extra_repr(self):
        return f"{torch.nn.RNNCellBase.extra_repr(self)}, dtype={self.dtype}"


class QuantizedGRUCell(_QuantizedCell, GruFamily, Cell, torch.nn.Module):
    """torch.nn.GRUCell for inference on a cells int8 or bfloat16 prepared net."""



class QuantizedLSTMCell(_QuantizedCell, LstmFamily, Cell, torch.nn.Module):
    """torch.nn.LSTMCell for inference on a cells int8 or bfloat16 prepared net."""



class QuantizedRNNCell(_QuantizedCell, RnnFamily, Cell, torch.nn.Module):
    """torch.nn.RNNCell for inference on a cells int8 or bfloat16 prepared net."""

    _options = (*_QuantizedCell._options, "nonlinearity")


# ---------------------------------------------------------------------------------------------
# quantize_dynamic
# ---------------------------------------------------------------------------------------------

# torch's float classes (and cells.torch's, which are the same modules) -> the quantized class
_QUANTIZED = {torch.nn.GRU: QuantizedGRU, torch.nn.LSTM: QuantizedLSTM,
              torch.nn.RNN: QuantizedRNN, torch.nn.GRUCell: QuantizedGRUCell,
              torch.nn.LSTMCell: QuantizedLSTMCell, torch.nn.RNNCell: QuantizedRNNCell}
_FLOAT_CLASS = {**{c: c for c in _QUANTIZED},
                GRU: torch.nn.GRU, LSTM: torch.nn.LSTM, RNN: torch.nn.RNN,
                GRUCell: torch.nn.GRUCell, LSTMCell: torch.nn.LSTMCell, RNNCell: torch.nn.RNNCell}


def quantize_dynamic(model: torch.nn.Module, qconfig_spec=None, dtype=torch.qint8,
                     mapping=None, inplace: bool = False) -> torch.nn.Module:
    """A model's recurrent modules as inference modules on cells' int8 or bfloat16 prepared nets.

    What ``torch.ao.quantization.quantize_dynamic`` does for torch's LSTM and GRU (and their
    cells), on cells' kernels, for every recurrent module and option: each ``torch.nn.LSTM``,
    ``GRU``, ``RNN``, ``LSTMCell``, ``GRUCell`` and ``RNNCell`` (exactly those classes, or
    cells.torch's of the same names) becomes a ``QuantizedLSTM``, ``QuantizedGRU``, ... that
    holds one prepared net per layer and direction (``cells.lstm.prepare(weight_ihᵀ,
    weight_hhᵀ, bias_ih + bias_hh, Wproj=weight_hrᵀ, weights="int8")`` and the like, made once
    here) and no parameter. Its forward takes and returns what the float module's does
    (num_layers, bidirectional, batch_first, bias=False, proj_size, a PackedSequence, unbatched
    input, hx or None) and runs each layer and direction on its net as cells.torch's modules do
    on theirs: the numerics are the prepared nets', nothing else (see the Serving guide, "Low
    precision"). Dropout acts between layers in training mode, as in torch's quantized modules.

    The quantized modules are for inference only: a call on a tensor that requires grad with
    grad mode on raises a RuntimeError (call under ``torch.no_grad()`` or
    ``torch.inference_mode()``). They run on CPU float32 tensors. A module's ``nets`` are its
    whole memory (``module.nbytes``, the sum of the nets' ``nbytes``: about a quarter of the
    float32 weights for int8, a half for bfloat16, plus float32 scales and biases); its
    ``state_dict`` is empty (save the float model's, or pickle the quantized model: the nets
    pickle their packed bytes, and ``copy.deepcopy`` copies them). The repr shows the dtype.

    Parameters
    ----------
    model : torch.nn.Module
        A recurrent module of those classes, or any module containing some (at any depth).
    qconfig_spec : set, optional
        Which modules to swap, as torch's set form: module types (of the six classes above,
        torch's or cells.torch's: either matches both) and qualified submodule names (a name
        swaps that submodule and those under it; "" the whole model). None: every recurrent
        module of those classes.
    dtype : torch.dtype
        ``torch.qint8`` (int8 weights, a scale per output column; each product's rows quantized
        per row to 7 bits at each call, exact int32 sums) or ``torch.bfloat16`` (bfloat16
        weights and rows, float32 sums).
    mapping : None
        torch's custom class mapping: not supported (only None).
    inplace : bool
        Swap the submodules in `model` itself (and return it) instead of in a copy. A model
        that is itself a recurrent module is replaced either way: use the returned module.

    Returns
    -------
    torch.nn.Module
        The model with its recurrent modules swapped (the quantized module itself when `model`
        is one). A module used at several places is swapped for one quantized module; its
        forward hooks and pre-hooks are kept, and its training flag.

    Raises
    ------
    ValueError
        Another dtype; a type in qconfig_spec that is not one of the six recurrent classes.
    TypeError
        A swapped module whose weights are not float32 CPU tensors (``model.float()`` first);
        a qconfig_spec that is not a set (torch's dict form of per-module qconfigs).
    NotImplementedError
        A mapping.

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> model = torch.nn.Sequential()
    >>> model.rnn = torch.nn.LSTM(4, 8, num_layers=2)
    >>> q = ct.quantize_dynamic(model, {torch.nn.LSTM}, dtype=torch.qint8)
    >>> q.rnn
    QuantizedLSTM(4, 8, num_layers=2, dtype=torch.qint8)
    >>> with torch.no_grad():
    ...     y, (h, c) = q.rnn(torch.randn(5, 3, 4))
    >>> y.shape, q.rnn.nets[0].weights
    (torch.Size([5, 3, 8]), 'int8')
    """
    if dtype not in _WEIGHT_KINDS:
        raise ValueError(f"dtype: expected torch.qint8 (int8 weights) or torch.bfloat16, got "
                         f"{dtype}")
    if mapping is not None:
        raise NotImplementedError("mapping: cells.torch.quantize_dynamic swaps torch's "
                                  "recurrent modules for its own quantized classes only; pass "
                                  "mapping=None")
    selected = _selection(qconfig_spec)
    targets = {}
    _find(model, "", selected, targets)
    swapped = {key: _quantized(module, dtype) for key, module in targets.items()}
    if not inplace:
        # the swapped modules are not copied: the copy takes their quantized versions
        return copy.deepcopy(model, dict(swapped))
    if id(model) in swapped:
        return swapped[id(model)]
    _swap(model, swapped, set())
    return model


quantize_dynamic.__module__ = "cells.torch"   # its public home (doctest, the API reference)


def _selection(qconfig_spec):
    """(float classes, names): a module of one of the classes, or named by (or under) one of
    the names, is swapped."""
    if qconfig_spec is None:
        return set(_QUANTIZED), set()
    if isinstance(qconfig_spec, dict) or not isinstance(qconfig_spec,
                                                        (set, frozenset, list, tuple)):
        raise TypeError(f"qconfig_spec: expected None or a set of module types and names "
                        f"(torch's set form), got {type(qconfig_spec).__name__}")
    classes, names = set(), set()
    for entry in qconfig_spec:
        if isinstance(entry, str):
            names.add(entry)
        elif isinstance(entry, type) and entry in _FLOAT_CLASS:
            classes.add(_FLOAT_CLASS[entry])
        else:
            raise ValueError(f"qconfig_spec: {entry!r} is not a recurrent module class "
                             f"(torch.nn.LSTM, GRU, RNN, LSTMCell, GRUCell, RNNCell) nor a "
                             f"submodule's name; cells.torch.quantize_dynamic swaps only those")
    return classes, names


def _find(module, name, selected, targets):
    """Record in targets (by id) every module under `module` (named `name`, "" for the model)
    to swap."""
    classes, names = selected
    float_class = _FLOAT_CLASS.get(type(module))
    if float_class is not None and (
            float_class in classes
            or any(s == "" or name == s or name.startswith(s + ".") for s in names)):
        targets[id(module)] = module
        return
    for child_name, child in module._modules.items():
        if child is not None:
            _find(child, f"{name}.{child_name}" if name else child_name, selected, targets)


def _quantized(module, dtype):
    """The quantized module of a float one, with its hooks."""
    for name, p in module.named_parameters():
        if p.dtype != torch.float32 or not p.is_cpu:
            raise TypeError(f"{type(module).__name__}: quantize_dynamic packs float32 CPU "
                            f"weights, got {name} of dtype {p.dtype} on {p.device}; convert "
                            f"the model first (model.float(), model.cpu())")
    q = _QUANTIZED[_FLOAT_CLASS[type(module)]](module, dtype)
    for hooks in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                  "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
        if hasattr(module, hooks):
            getattr(q, hooks).update(getattr(module, hooks))
    return q


def _swap(module, swapped, seen):
    """Replace in place every swapped submodule under module (each module visited once)."""
    if id(module) in seen:
        return
    seen.add(id(module))
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        if id(child) in swapped:
            module._modules[name] = swapped[id(child)]
        else:
            _swap(child, swapped, seen)
