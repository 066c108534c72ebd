"""cells.torch's modules: the six drop-in torch.nn recurrent modules and the LLTM, and what
they share: the prepared nets a call that needs no gradient runs on (PreparedNets), each
family's states and layer (GruFamily, LstmFamily, RnnFamily), and torch's forward for a stack
of layers (Stack) and for one step (Cell), which cells.torch's quantized modules reuse.
"""
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

import cells
from cells._prepared import PreparedNet, call_together
from cells.torch._operators import REAL_DTYPES, check_tensor, keep_workspace


# ---------------------------------------------------------------------------------------------
# Prepared nets: the calls that need no gradient
# ---------------------------------------------------------------------------------------------

class _LayerNet(NamedTuple):
    """The prepared net of one layer and direction, with what it was prepared from: its
    weights' stamps (_stamps), and the weights' tensors, held so that their memory is not freed
    and reused at the same address (which would make a new tensor look like the old one) while
    the net is kept."""

    stamps: list
    weights: list
    net: PreparedNet


class _KeptNets(NamedTuple):
    """A module's prepared nets (index layer * num_directions + direction), kept for the calls
    on tensors of `dtype` while every parameter's stamp is in `stamps`."""

    stamps: list
    dtype: torch.dtype
    layers: list
    nets: list


def _stamps(tensors):
    """Each tensor's (version counter, data pointer), None skipped: a stamp changes with every
    in-place write autograd tracks, and when a parameter becomes another tensor. A RuntimeError
    for an inference tensor, which has no version counter."""
    return [(t._version, t.data_ptr()) for t in tensors if t is not None]


class _PreparedNets:
    """Inference on prepared nets, for every module: a call that needs no gradient runs on
    cells' PreparedNet of each layer and direction, kept on the module and prepared again when
    one of its weights changed. A subclass lists its weights, _layer_weights() -> [one tuple of
    tensors (or None) per layer and direction], and says how one tuple becomes a net:
    _prepare(weights) -> PreparedNet.

    A weight has changed when its stamp (_stamps) has: an in-place write autograd tracks (an
    optimizer step, load_state_dict, a write under torch.no_grad()) or a new tensor (.to(),
    .double(), ``param.data = t``). A write through ``.data`` (``param.data.copy_(t)``) is one
    autograd does not track, and is not seen either. One list of stamps over all the module's
    parameters keeps the common call cheap; when it differs, each layer's own stamps say which
    nets to prepare again.

    The nets read the tensors through .numpy(), without a detach: where _nets gives nets,
    grad mode is off (where .numpy() takes a tensor that requires grad) or no tensor requires
    grad.
    """

    def _nets(self, x, *states):
        """The prepared nets of a call on x from the initial states (tensors), in index order;
        or None where the call runs on the time loop operators: when autograd records it (a
        tensor needs a gradient), under torch.compile (which traces the operators), for a
        tensor off the CPU, or for weights a net cannot be prepared from (not CPU tensors of
        x's dtype, or inference tensors: a module made under torch.inference_mode)."""
        if not x.is_cpu or torch.compiler.is_compiling():
            return None
        parameters = self._parameters.values()
        if torch.is_grad_enabled() and (
                any(t.requires_grad for t in (x, *states))
                or any(p is not None and p.requires_grad for p in parameters)):
            return None
        try:
            stamps = _stamps(parameters)
        except RuntimeError:
            return None
        kept = self.__dict__.get("_prepared_nets")
        if kept is not None and kept.stamps == stamps and kept.dtype == x.dtype:
            return kept.nets
        weights = self._layer_weights()
        if not all(w.is_cpu and w.dtype == x.dtype for layer in weights for w in layer
                   if w is not None):
            return None
        layers = [self._layer_net(index, layer, kept) for index, layer in enumerate(weights)]
        kept = _KeptNets(stamps, x.dtype, layers, [layer.net for layer in layers])
        self.__dict__["_prepared_nets"] = kept
        return kept.nets

    def _layer_net(self, index, weights, kept):
        """The _LayerNet of one layer and direction: the kept one while its weights' stamps
        are the same, else prepared now."""
        stamps = _stamps(weights)
        if (kept is not None and index < len(kept.layers)
                and kept.layers[index].stamps == stamps):
            return kept.layers[index]
        return _LayerNet(stamps, [w.detach() for w in weights if w is not None],
                         self._prepare(weights))

    def __getstate__(self):
        """The module's attributes but its prepared nets: a copy or an unpickled module
        prepares its own."""
        state = super().__getstate__()
        state.pop("_prepared_nets", None)
        return state


def call_net(net, x, state, seq_len=None):
    """net(x, state, seq_len=seq_len) on the threads cells chooses for the call, at most
    torch.get_num_threads() (which the net asks only for a call large enough to use two);
    x [sL, bS, nIn] or [bS, nIn], NumPy."""
    n_threads = net._default_threads(x.shape[-2], torch.get_num_threads)
    return net(x, state, seq_len=seq_len, n_threads=n_threads)


def _net_step(net, x, states):
    """One step of a prepared net on x [bS, nIn] from the initial states (tensors; None:
    zeros). Returns the states after it, as tensors."""
    start = None if states is None else net.State(*[s.numpy() for s in states])
    _, state = call_net(net, x.numpy(), start)
    return tuple([torch.from_numpy(s) for s in state])


def time_reversed(a, lengths):
    """a [sL, bS, n] with each row's first lengths[b] steps in reverse order (lengths None: all
    sL), the steps after them in place: the reverse direction's inputs in the order a net runs
    them, and its own inverse, which puts the net's outputs back at their time steps."""
    if lengths is None:
        return a[::-1]
    t = np.arange(a.shape[0])[:, None]
    return a[np.where(t < lengths, lengths - 1 - t, t), np.arange(a.shape[1])]


def _numpy(tensors):
    """Tensors (None: absent) as NumPy arrays sharing their memory (on the prepared nets' path:
    .numpy() needs no detach there)."""
    return tuple(None if t is None else t.numpy() for t in tensors)


def _stacked(arrays):
    """Arrays of one shape stacked along a new first dimension (one array: a view of it)."""
    return arrays[0][None] if len(arrays) == 1 else np.stack(arrays)


def _gru_rnn_weights(weights):
    """(Wx, Wh, b) of a GRU's or RNN's torch weights, as NumPy arrays: weight_ih and
    weight_hh transposed (F-ordered views, which a net reads without a copy), and b the rows
    [bias_ih, bias_hh] (zeros without bias)."""
    weight_ih, weight_hh, bias_ih, bias_hh, _ = _numpy(weights)
    if bias_ih is None:
        return weight_ih.T, weight_hh.T, np.zeros(weight_ih.shape[0], weight_ih.dtype)
    return weight_ih.T, weight_hh.T, np.stack([bias_ih, bias_hh])


# ---------------------------------------------------------------------------------------------
# One layer and direction of each family, on torch's parameters
# ---------------------------------------------------------------------------------------------

def _final_state(h, lengths, forward):
    """A GRU's or RNN's final state [bS, nOut] from its outputs h [sL, bS, nOut]: each row's
    state after its last step (time lengths-1 going forward, 0 in reverse; every length >= 1)."""
    if not forward:
        return h[0]
    if lengths is None:
        return h[-1]
    return h[lengths - 1, torch.arange(h.shape[1])]


class _Family(_PreparedNets):
    """What a family's modules (the stack and the cell) share: its states, as a tuple (hx,) or
    (h0, c0), their sizes, how one layer and direction runs on cells' time loop:
    _run(x [sL, bS, nIn], states, (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr), lengths,
    forward) -> (h [sL, bS, H], final states), and how its weights become a prepared net:
    _prepare(weights, kind=None) -> PreparedNet (kind: prepare's `weights`, "int8" or
    "bfloat16" for cells.torch.quantize_dynamic's modules). The weights are torch's (bias None
    without bias, weight_hr None but for an LSTM with proj_size > 0); cells' layout is their
    transpose (torch's gate order is cells')."""

    _state_names = ("hx",)
    _cell_state_names = ("hidden",)   # what torch's cells call it in their messages

    def _states(self, hx):
        return (hx,)

    def _hx(self, states):
        return states[0]

    def _state_sizes(self):
        """The last dimension of each state."""
        return (self.hidden_size,)


class GruFamily(_Family):
    def _run(self, x, states, weights, lengths, forward):
        (hI,), (weight_ih, weight_hh, bias_ih, bias_hh, _) = states, weights
        b = x.new_zeros(weight_ih.shape[0]) if bias_ih is None else torch.stack([bias_ih, bias_hh])
        Wx, Wh = weight_ih.t(), weight_hh.t()
        h, _, _ = torch.ops.cells.gru_time_loop(x, hI, Wx, Wh, b, lengths, forward,
                                                keep_workspace(x, hI, Wx, Wh, b))
        return h, (_final_state(h, lengths, forward),)

    def _prepare(self, weights, kind=None):
        return cells.gru.prepare(*_gru_rnn_weights(weights), linear_before_reset=True,
                                 weights=kind)


class LstmFamily(_Family):
    _state_names = _cell_state_names = ("hx[0]", "hx[1]")

    def _states(self, hx):
        h0, c0 = hx
        return h0, c0

    def _hx(self, states):
        return tuple(states)

    def _state_sizes(self):
        """h0 has proj_size columns with a projection (torch.nn.LSTM's real hidden size)."""
        return (getattr(self, "proj_size", 0) or self.hidden_size, self.hidden_size)

    def _run(self, x, states, weights, lengths, forward):
        (hI, cI), (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr) = states, weights
        b = x.new_zeros(weight_ih.shape[0]) if bias_ih is None else bias_ih + bias_hh
        Wx, Wr = weight_ih.t(), weight_hh.t()
        Wproj = None if weight_hr is None else weight_hr.t()
        h, hL, cL, _, _, _ = torch.ops.cells.lstm_time_loop(
            x, Wx, Wr, b, hI, cI, Wproj, lengths, forward,
            keep_workspace(x, Wx, Wr, b, hI, cI, Wproj))
        return h, (hL, cL)

    def _prepare(self, weights, kind=None):
        weight_ih, weight_hh, bias_ih, bias_hh, weight_hr = _numpy(weights)
        return cells.lstm.prepare(weight_ih.T, weight_hh.T,
                                  None if bias_ih is None else bias_ih + bias_hh,
                                  Wproj=None if weight_hr is None else weight_hr.T,
                                  weights=kind)


class RnnFamily(_Family):
    def _run(self, x, states, weights, lengths, forward):
        (hI,), (weight_ih, weight_hh, bias_ih, bias_hh, _) = states, weights
        b = x.new_zeros(weight_ih.shape[0]) if bias_ih is None else torch.stack([bias_ih, bias_hh])
        Wx, Wh = weight_ih.t(), weight_hh.t()
        h, _ = torch.ops.cells.rnn_time_loop(x, hI, Wx, Wh, b, self.nonlinearity, lengths,
                                             forward, keep_workspace(x, hI, Wx, Wh, b))
        return h, (_final_state(h, lengths, forward),)

    def _prepare(self, weights, kind=None):
        return cells.rnn.prepare(*_gru_rnn_weights(weights), activation=self.nonlinearity,
                                 weights=kind)


def _check_states(names, states, like):
    """The initial states: float32 or float64 tensors on the device of the input `like` (a
    TypeError for another), of its dtype (a RuntimeError for another float dtype, as torch's)."""
    dtype = like.dtype
    for name, s in zip(names, states):
        if s.device != like.device:
            raise TypeError(f"{name}: expected a tensor on {like.device} (the input's device), "
                            f"got {s.device}")
        if s.dtype != dtype:
            check_tensor(name, s)   # a dtype cells does not run: a TypeError, as for the input
            raise RuntimeError(f"{name}: expected dtype {dtype} (the input's), got {s.dtype}")


# ---------------------------------------------------------------------------------------------
# GRU, LSTM, RNN
# ---------------------------------------------------------------------------------------------

# A stack's weights of one layer and direction: these names followed by "_l{layer}", and
# "_reverse" for the reverse direction.
_WEIGHT_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


class Stack:
    """forward() of torch.nn.GRU, LSTM and RNN on cells' time loops, layer by layer."""

    def forward(self, input, hx=None):
        states = None if hx is None else self._states(hx)
        served = self._served(input, states)
        if served is not None:
            return served
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            check_tensor("input", data)
            if states is not None and sorted_indices is not None:
                states = tuple(s.index_select(1, sorted_indices) for s in states)
            self._check_args(data, states, batch_sizes)
            # time-major and in the packed (sorted) batch order, as the packed states
            x, lengths = pad_packed_sequence(PackedSequence(data, batch_sizes))
            y, hidden = self._layers(x, states, lengths)
            output = PackedSequence(pack_padded_sequence(y, lengths).data, batch_sizes,
                                    sorted_indices, unsorted_indices)
            return output, self.permute_hidden(self._hx(hidden), unsorted_indices)

        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}D instead")
        check_tensor("input", input)
        batched = input.dim() == 3
        if states is not None:
            rank = 3 if batched else 2
            if any(s.dim() != rank for s in states):
                raise RuntimeError(
                    f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, "
                    f"{' and '.join(self._state_names)} should also be {rank}-D but got "
                    f"{', '.join(f'{s.dim()}-D' for s in states)} tensors")
            if not batched:
                states = tuple(s.unsqueeze(1) for s in states)
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        x = input.transpose(0, 1) if self.batch_first else input
        self._check_args(input, states, None)
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        y, hidden = self._layers(x, states, None)
        if not batched:
            return y.squeeze(1), self._hx(tuple(s.squeeze(1) for s in hidden))
        return (y.transpose(0, 1) if self.batch_first else y), self._hx(hidden)

    def _served(self, input, states):
        """forward of the common inference call, checked in a few comparisons, or None for any
        other call. The common call: input a batched 3-D float32 or float64 CPU tensor with
        input_size features and at least one step, the initial states None or CPU tensors of
        the input's dtype and of the shapes torch expects, and prepared nets for it (_nets: no
        gradient needed, weights of the input's dtype). It passes every check of forward's;
        any other call goes through them all, which raise torch's errors. batch_first is a
        NumPy view each way."""
        if type(input) is not Tensor or input.dim() != 3:
            return None
        dtype = input.dtype
        if self.batch_first:
            bS, sL, nIn = input.shape
        else:
            sL, bS, nIn = input.shape
        if nIn != self.input_size or sL == 0 or dtype not in REAL_DTYPES:
            return None
        if states is not None:
            layers = self.num_layers * (2 if self.bidirectional else 1)
            for s, size in zip(states, self._state_sizes()):
                if (type(s) is not Tensor or s.shape != (layers, bS, size) or s.dtype != dtype
                        or not s.is_cpu):
                    return None
        nets = self._nets(input, *(states or ()))
        if nets is None:
            return None
        a = input.numpy()
        y, hidden = self._net_layers(nets, a.swapaxes(0, 1) if self.batch_first else a, states,
                                     None)
        return torch.from_numpy(y.swapaxes(0, 1) if self.batch_first else y), self._hx(hidden)

    def _check_args(self, input, states, batch_sizes):
        """torch's checks of the input (a PackedSequence's data with its batch_sizes) and of
        the initial states (None: zeros, nothing to check)."""
        if states is None:
            self.check_input(input, batch_sizes)
        else:
            self.check_forward_args(input, self._hx(states), batch_sizes)
            _check_states(self._state_names, states, input)

    def _initial_states(self, states, input, batch):
        """The given states, or zeros [num_layers * num_directions, batch, size] (sizes from
        _state_sizes)."""
        if states is not None:
            return states
        layers = self.num_layers * (2 if self.bidirectional else 1)
        return tuple(input.new_zeros((layers, batch, size)) for size in self._state_sizes())

    def _layer_weights(self):
        """Each layer and direction's weights (weight_ih, weight_hh, bias_ih, bias_hh,
        weight_hr; None where absent), index layer * dirs + direction."""
        directions = ("", "_reverse") if self.bidirectional else ("",)
        return [tuple(getattr(self, f"{name}_l{layer}{direction}", None)
                      for name in _WEIGHT_NAMES)
                for layer in range(self.num_layers) for direction in directions]

    def _layers(self, x, states, lengths):
        """Run every layer and direction on x [sL, bS, nIn] (time-major) from the initial
        states [num_layers * dirs, bS, H] (index layer * dirs + direction; None: zeros) and
        lengths [bS] (or None): on the prepared nets where no gradient is needed, else on the
        time loop operators. Returns (the last layer's outputs [sL, bS, dirs * H], the final
        states)."""
        nets = self._nets(x, *(states or ()))
        if nets is not None:
            y, hidden = self._net_layers(nets, x.numpy(), states, lengths)
            return torch.from_numpy(y), hidden
        return self._op_layers(x, self._initial_states(states, x, x.shape[1]), lengths)

    def _op_layers(self, x, states, lengths):
        """_layers on the time loop operators, from the given states."""
        weights = self._layer_weights()
        dirs = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)
            outputs = []
            for d in range(dirs):
                index = layer * dirs + d
                y, final = self._run(x, tuple(s[index] for s in states), weights[index],
                                     lengths, forward=d == 0)
                outputs.append(y)
                finals.append(final)
            x = outputs[0] if dirs == 1 else torch.cat(outputs, 2)
        return x, tuple(torch.stack(layer_states) for layer_states in zip(*finals))

    def _net_layers(self, nets, a, states, lengths):
        """_layers on the prepared nets, in NumPy: a is x [sL, bS, nIn] as an array. Returns
        (the last layer's outputs, an array; the final states, tensors). A reverse direction
        runs forward over each row's steps reversed (time_reversed)."""
        seq_len = None if lengths is None else lengths.numpy()
        if len(nets) == 1:   # one layer, one direction: its net's call alone
            net = nets[0]
            start = None if states is None else net.State(*[s.numpy()[0] for s in states])
            h, final = call_net(net, a, start, seq_len=seq_len)
            return h, tuple([torch.from_numpy(f[None]) for f in final])
        dirs = 2 if self.bidirectional else 1
        a = np.ascontiguousarray(a)
        starts = None if states is None else [s.numpy() for s in states]
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                a = F.dropout(torch.from_numpy(a), self.dropout, training=True).numpy()
            calls = []
            for d in range(dirs):
                index, net = layer * dirs + d, nets[layer * dirs + d]
                start = None if starts is None else net.State(*[s[index] for s in starts])
                calls.append((net, a if d == 0 else time_reversed(a, seq_len), start))
            # The directions at once, each on its share of torch's threads.
            outputs = []
            for d, (h, final) in enumerate(call_together(calls, seq_len,
                                                         torch.get_num_threads)):
                outputs.append(h if d == 0 else time_reversed(h, seq_len))
                finals.append(final)
            a = outputs[0] if dirs == 1 else np.concatenate(outputs, axis=2)
        return a, tuple([torch.from_numpy(_stacked(f)) for f in zip(*finals)])


class GRU(GruFamily, Stack, torch.nn.GRU):
    """``torch.nn.GRU`` on cells' GRU time loop (linear_before_reset=True).

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.GRU's; only forward runs on cells' kernels.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.GRU.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.GRU, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> gru = ct.GRU(4, 8, num_layers=2, batch_first=True)
    >>> y, h = gru(torch.randn(3, 5, 4))
    >>> y.shape, h.shape
    (torch.Size([3, 5, 8]), torch.Size([2, 3, 8]))
    """


class LSTM(LstmFamily, Stack, torch.nn.LSTM):
    """``torch.nn.LSTM`` on cells' LSTM time loop.

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.LSTM's; only forward runs on cells' kernels. b = bias_ih
    + bias_hh; with proj_size > 0, Wproj = weight_hrᵀ.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.LSTM.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.LSTM, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> lstm = ct.LSTM(4, 8, bidirectional=True)
    >>> y, (h, c) = lstm(torch.randn(5, 3, 4))
    >>> y.shape
    torch.Size([5, 3, 16])
    """


class RNN(RnnFamily, Stack, torch.nn.RNN):
    """``torch.nn.RNN`` on cells' RNN time loop.

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.RNN's; only forward runs on cells' kernels. The
    nonlinearity is cells' activation.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.RNN.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.RNN, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> rnn = ct.RNN(4, 8, nonlinearity="relu")
    >>> y, h = rnn(torch.randn(5, 3, 4))
    >>> h.shape
    torch.Size([1, 3, 8])
    """


# ---------------------------------------------------------------------------------------------
# GRUCell, LSTMCell, RNNCell: one step of the time loop
# ---------------------------------------------------------------------------------------------

class Cell:
    """forward() of torch.nn.GRUCell, LSTMCell and RNNCell: a time loop of one step."""

    def forward(self, input, hx=None):
        served = self._served(input, hx)
        if served is not None:
            return served
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        check_tensor("input", input)
        states = None if hx is None else self._states(hx)
        if states is not None:
            for state_name, s in zip(self._cell_state_names, states):
                if s.dim() not in (1, 2):
                    raise ValueError(f"{name}: Expected {state_name} to be 1D or 2D, got "
                                     f"{s.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            states = None if states is None else tuple(s.unsqueeze(0) for s in states)
        self._check_sizes(input, states or ())
        nets = self._nets(input, *(states or ()))
        if nets is not None:
            hidden = _net_step(nets[0], input, states)
        else:
            if states is None:
                states = tuple(input.new_zeros((input.shape[0], size))
                               for size in self._state_sizes())
            _, hidden = self._run(input[None], states, self._layer_weights()[0], None, True)
        if not batched:
            hidden = tuple(s.squeeze(0) for s in hidden)
        return self._hx(hidden)

    def _served(self, input, hx):
        """forward of the common inference call, checked in a few comparisons, or None for any
        other call. The common call: input a batched 2-D float32 or float64 CPU tensor with
        input_size features, the states None or CPU tensors of the input's dtype and shape
        [bS, hidden_size], and a prepared net for it (_nets: no gradient needed, weights of the
        input's dtype). It passes every check of forward's; any other call goes through them
        all, which raise torch's errors."""
        if (type(input) is not Tensor or input.dim() != 2 or input.dtype not in REAL_DTYPES
                or not input.is_cpu):
            return None
        # forward checks these properties of the input first, then unpacks hx as here
        states = None if hx is None else self._states(hx)
        bS, nIn = input.shape
        if nIn != self.input_size:
            return None
        if states is not None:
            for s in states:
                if (type(s) is not Tensor or s.shape != (bS, self.hidden_size)
                        or s.dtype != input.dtype or not s.is_cpu):
                    return None
        nets = self._nets(input, *(states or ()))
        if nets is None:
            return None
        return self._hx(_net_step(nets[0], input, states))

    def _layer_weights(self):
        """The cell's weights, as one layer's: (weight_ih, weight_hh, bias_ih, bias_hh, None)."""
        return [(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, None)]

    def _weights_dtype(self):
        """The dtype the cell's input and states must have: its weights'."""
        return self.weight_ih.dtype

    def _check_sizes(self, input, states):
        """torch's checks of a cell's arguments (states: those given), in its order (sizes, then
        dtypes), with its exception types and messages."""
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        for k, s in enumerate(states):
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} "
                                   f"batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
        dtype = self._weights_dtype()
        if input.dtype != dtype:
            raise RuntimeError(f"input: expected dtype {dtype} (the weights'), "
                               f"got {input.dtype}")
        _check_states(self._state_names, states, input)


class GRUCell(GruFamily, Cell, torch.nn.GRUCell):
    """``torch.nn.GRUCell`` on cells' GRU time loop (one step, linear_before_reset=True).

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.GRUCell's; only forward runs on cells' kernels.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.GRUCell.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.GRUCell, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> cell = ct.GRUCell(4, 8)
    >>> cell(torch.randn(3, 4)).shape
    torch.Size([3, 8])
    """


class LSTMCell(LstmFamily, Cell, torch.nn.LSTMCell):
    """``torch.nn.LSTMCell`` on cells' LSTM time loop (one step).

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.LSTMCell's; only forward runs on cells' kernels.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.LSTMCell.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.LSTMCell, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> h, c = ct.LSTMCell(4, 8)(torch.randn(3, 4))
    >>> c.shape
    torch.Size([3, 8])
    """


class RNNCell(RnnFamily, Cell, torch.nn.RNNCell):
    """``torch.nn.RNNCell`` on cells' RNN time loop (one step).

    The constructor, the parameters (names, shapes, initialisation), the state_dict, forward's
    arguments and results are torch.nn.RNNCell's; only forward runs on cells' kernels.

    Parameters
    ----------
    *args, **kwargs
        As torch.nn.RNNCell.

    Raises
    ------
    TypeError
        A tensor of another dtype than float32 or float64, or on another device than the input.

    See Also
    --------
    torch.nn.RNNCell, convert

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> ct.RNNCell(4, 8)(torch.randn(3, 4)).shape
    torch.Size([3, 8])
    """


# ---------------------------------------------------------------------------------------------
# LLTM
# ---------------------------------------------------------------------------------------------

class LLTM(_PreparedNets, torch.nn.Module):
    """The LLTM of PyTorch's C++-extension tutorial on cells' LLTM time loop (one step).

    The parameters are the tutorial's: ``weights`` [3S, nIn + S] (columns old_h, then input;
    rows the input gate, output gate and candidate blocks) and ``bias`` [3S], S = state_size,
    initialised uniform in ±1/sqrt(S). ``forward(input [B, nIn], (old_h [B, S], old_cell [B,
    S]))`` returns ``(new_h, new_cell)``, each [B, S].

    Parameters
    ----------
    input_features : int
        nIn.
    state_size : int
        S.

    Raises
    ------
    TypeError
        A tensor of another dtype, or on another device than the input.
    ValueError
        A tensor of the wrong shape.

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> lltm = ct.LLTM(4, 8)
    >>> h, c = lltm(torch.randn(3, 4), (torch.zeros(3, 8), torch.zeros(3, 8)))
    >>> h.shape
    torch.Size([3, 8])
    """

    def __init__(self, input_features, state_size):
        super().__init__()
        self.input_features = input_features
        self.state_size = state_size
        self.weights = torch.nn.Parameter(torch.empty(3 * state_size,
                                                      input_features + state_size))
        self.bias = torch.nn.Parameter(torch.empty(3 * state_size))
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.state_size)
        for weight in self.parameters():
            torch.nn.init.uniform_(weight, -stdv, stdv)

    def forward(self, input, state):
        old_h, old_cell = state
        served = self._served(input, old_h, old_cell)
        if served is not None:
            return served
        for name, t, size in (("input", input, self.input_features),
                              ("old_h", old_h, self.state_size),
                              ("old_cell", old_cell, self.state_size)):
            if t.device != input.device:
                raise TypeError(f"{name}: expected a tensor on {input.device} (the input's "
                                f"device), got {t.device}")
            check_tensor(name, t)
            if t.dim() != 2 or t.shape[1] != size or t.shape[0] != input.shape[0]:
                raise ValueError(f"{name}: expected shape [B, {size}] (B from input), got "
                                 f"{list(t.shape)}")
        nets = self._nets(input, old_h, old_cell)
        if nets is not None:
            return _net_step(nets[0], input, (old_h, old_cell))
        _, new_h, new_cell, _, _ = torch.ops.cells.lltm_time_loop(
            input[None], self.weights, self.bias, old_h, old_cell, None, True,
            keep_workspace(input, self.weights, self.bias, old_h, old_cell))
        return new_h, new_cell

    def _served(self, input, old_h, old_cell):
        """forward of the common inference call, checked in a few comparisons, or None for any
        other call. The common call: CPU tensors of one dtype, float32 or float64, input
        [B, input_features] and the states [B, state_size], and a prepared net for it (_nets:
        no gradient needed, weights of the input's dtype). It passes every check of
        forward's; any other call goes through them all, which raise their errors."""
        if type(input) is not Tensor or input.dim() != 2 or input.dtype not in REAL_DTYPES:
            return None
        B, nIn = input.shape
        if nIn != self.input_features:
            return None
        for s in (old_h, old_cell):
            if (type(s) is not Tensor or s.shape != (B, self.state_size)
                    or s.dtype != input.dtype or not s.is_cpu):
                return None
        nets = self._nets(input, old_h, old_cell)
        if nets is None:
            return None
        return _net_step(nets[0], input, (old_h, old_cell))

    def _layer_weights(self):
        return [(self.weights, self.bias)]

    def _prepare(self, weights):
        return cells.lltm.prepare(*_numpy(weights))

    def extra_repr(self):
        return f"{self.input_features}, {self.state_size}"

