"""haste's PyTorch layers on cells' CPU kernels: drop-in replacements for haste_pytorch's
(lmnt-com/haste) LSTM, GRU, LayerNormLSTM, LayerNormGRU and IndRNN.

    import cells.haste as haste
    model.rnn = haste.LayerNormLSTM(input_size, hidden_size, zoneout=0.1, dropout=0.05)

Each module keeps haste's constructor (arguments, defaults and ValueErrors), its parameters
(names, shapes, gate layouts, initialisation: a haste state_dict loads as it is) and its
``forward(input, state=None, lengths=None)``; forward and backward run on cells' kernels, one
call of the time loop each, instead of haste's Python step loop. Where haste's CUDA and CPU
paths differ, these modules follow its CPU path (the plain-torch ``*Script`` functions): haste's
CUDA backward raises in eval mode, for one; here eval mode differentiates as training does.

What haste computes (products row-vector, x·W; kernel [I, G·H], recurrent_kernel [H, G·H]):

    LayerNormLSTM   gates i, g, f, o
                    v = gamma[0]∘LN(x·kernel) + gamma[1]∘LN(h·recurrent_kernel) + bias
                    c' = σ(v_f)∘c + σ(v_i)∘tanh(v_g),  h' = σ(v_o)∘tanh(gamma_h∘LN(c') + beta_h)
    LayerNormGRU    gates z, r, h
                    vx = gamma[0]∘LN(x·kernel) + bias
                    vh = gamma[1]∘LN(h·recurrent_kernel) + recurrent_bias
                    h' = z∘h + (1 - z)∘tanh(vx_h + r∘vh_h),  z, r = σ(vx + vh) in their blocks
    LSTM            gates i, g, f, o: torch.nn.LSTM's cell with one bias (cells' LSTM kernel)
    GRU             gates z, r, h, bias and recurrent_bias: torch.nn.GRU's cell, the reset gate
                    applied after the product (cells' GRU kernel, linear_before_reset)
    IndRNN          h' = tanh(x·kernel + bias + recurrent_scale∘h)

- LayerNorm is torch.nn.functional.layer_norm's over the whole row (4H values for the LSTM's
  two products, 3H for the GRU's, H for c): (v - mean) / sqrt(var + 1e-5), the biased variance,
  epsilon inside the square root. The products' LayerNorms have a gain (gamma's rows) and no
  bias of their own; only the LSTM's LayerNorm of c has one, beta_h. The c the LSTM carries and
  returns is not normalised.
- Zoneout (``zoneout`` = p) applies to h only, never c. Every forward call with p > 0 draws a
  mask ``input.new_empty(T, N, H).bernoulli_(1 - p)`` (time-major shape, unscaled), in eval mode
  too, where it is unused: the random generator advances as haste's. Training:
  h = h_prev + mask∘(h_new - h_prev); eval: h = p·h_prev + (1 - p)·h_new.
- DropConnect (``dropout``, not for the IndRNN): ``F.dropout(recurrent_kernel, dropout,
  training)`` in torch, once per forward call, after the zoneout mask is drawn (haste's order of
  the draws): one dropped kernel shared by every step and row, its gradient through autograd.
- ``lengths`` [N] masks nothing: every row runs every step and the output holds every step's
  h; the final state of row b is the state after lengths[b] steps (the state sequence
  [T + 1, N, H], h0 at 0, indexed at [lengths, arange(N)]), for the LSTMs c as well.
- ``return_state_sequence=True`` returns the state after every step, [1, T, N, H] ([1, N, T, H]
  with batch_first), for the LSTMs both h and c, instead of the final state; it overrides
  lengths.
- States are [1, N, H] (a tuple (h, c) for the LSTMs), checked as haste checks them
  (ValueError); None is zeros.
- LSTM and GRU keep haste's to_native_weights and from_native_weights (torch.nn.LSTM's and
  GRU's weights; cells.convert has the same conversions on arrays).

Tensors are float32 or float64 CPU tensors of one dtype (another dtype or device is a
TypeError naming the argument: CUDA tensors belong to haste itself). The kernels read them as
NumPy arrays sharing their memory, on the threads cells chooses for the call's size, at most
torch.get_num_threads() (a LayerNorm cell's thread runs whole batch rows: at most N).

Autograd and torch.compile. Each layer runs one custom operator (torch.library, namespace
"cells"), with a fake implementation and an autograd formula that calls a backward operator
(with a fake of its own):

    cells::haste_lstm(x, hI, cI, kernel, recurrent_kernel, bias, zoneout_mask, zoneout, c_steps,
                      keep_workspace) -> (h, cL, c, gates)
    cells::haste_gru(x, hI, kernel, recurrent_kernel, bias, recurrent_bias, zoneout_mask,
                     zoneout, keep_workspace) -> (h, gates, hc)
    cells::haste_layer_norm_lstm(x, hI, cI, kernel, recurrent_kernel, bias, gamma, gamma_h,
                                 beta_h, zoneout_mask, zoneout, c_steps, keep_workspace)
                                 -> (h, cL, c, gates, aux)
    cells::haste_layer_norm_gru(x, hI, kernel, recurrent_kernel, bias, recurrent_bias, gamma,
                                zoneout_mask, zoneout, keep_workspace) -> (h, gates, aux)
    cells::haste_indrnn(x, hI, kernel, recurrent_scale, bias, zoneout_mask, zoneout,
                        keep_workspace) -> (h, gates)

x is time-major [T, N, I], the states [N, H], the weights haste's parameters as they are
(recurrent_kernel after DropConnect); zoneout_mask is the training mask (None in eval mode) and
zoneout p, applied in eval mode (0: none). h [T, N, H] is every step's state, cL the final c,
c every step's c with c_steps or keep_workspace (else empty); the rest is the training
workspace (empty tensors without keep_workspace), which the backward operator
cells::haste_<layer>_backward reads (a copy of what it consumes: backward(retain_graph=True)
can run twice) instead of recomputing the forward pass. Double backward differentiates a
plain-torch recomputation of the time loop (cells/torch/_recompute.py), as cells.torch's
operators do: exact, and far slower than the kernels.
"""
import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from cells import _cpu, convert
from cells._families import FAMILIES, _haste, gru, layer_norm_gru, layer_norm_lstm, lstm
from cells._threads import on_openmp_pool
from cells.torch import _recompute as recompute
from cells.torch._operators import (
    REAL_DTYPES, call_threads, dLdx_like, keep_workspace, needed, no_workspace,
    register_double_backward, workspace_kept,
)

__all__ = ["LSTM", "GRU", "LayerNormLSTM", "LayerNormGRU", "IndRNN"]

# cells' gate blocks taken from haste's: LSTM (i, f, g, o) from (i, g, f, o), GRU (r, u, c)
# from (z, r, h) (haste's z is cells' u). Each swaps two blocks, so it is its own inverse.
_LSTM_BLOCKS = (0, 2, 1, 3)
_GRU_BLOCKS = (1, 0, 2)


# ---------------------------------------------------------------------------------------------
# Tensors and arrays
# ---------------------------------------------------------------------------------------------

def _check_tensor(name, t):
    """A TypeError unless t is a float32 or float64 CPU tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_cpu:
        raise TypeError(f"{name}: expected a CPU tensor, got device {t.device} (cells.haste "
                        f"runs on the CPU; haste_pytorch itself runs CUDA tensors)")
    if t.dtype not in REAL_DTYPES:
        raise TypeError(f"{name}: expected dtype torch.float32 or torch.float64, got {t.dtype}")


def _array(name, t):
    """A checked tensor as a NumPy array sharing its memory; None stays None."""
    if t is None:
        return None
    _check_tensor(name, t)
    return t.detach().numpy()


def _blocks(order, H):
    """The column index that takes gate blocks of H columns in `order`."""
    return np.concatenate([np.arange(k * H, (k + 1) * H) for k in order])


def _kernel_zoneout(zoneout_mask, zoneout, dtype):
    """The time loop's zoneout for an operator's: the training mask, else eval's share of the
    new state [1 - p] (None without zoneout)."""
    if zoneout_mask is not None:
        return zoneout_mask
    return np.full(1, 1 - zoneout, dtype) if zoneout else None


def _recompute_zoneout(zoneout_mask, zoneout):
    """recompute.zoned_time_loop's zoneout for an operator's: the mask, else 1 - p, or None."""
    if zoneout_mask is not None:
        return zoneout_mask
    return 1 - zoneout if zoneout else None


# ---------------------------------------------------------------------------------------------
# The operators: one class per layer says how its kernels run
# ---------------------------------------------------------------------------------------------

class _Operator:
    """The operators cells::haste_<name> and cells::haste_<name>_backward of one layer.

    A subclass names the differentiable arguments (`params`: x, the initial states, haste's
    parameters), whether the layer has a cell state and its workspace (name: width in units of
    H), and runs the kernels:

        _forward(a, dims, zone, keep, c_steps, n_threads) -> (h, [cL, c,] *workspace)
        _backward(a, dims, zone, saved, grads, input_grad, n_threads) -> params' gradients
        _recompute(*params, zoneout) -> the differentiable outputs, in plain torch

    a: the params as NumPy arrays by name; dims (T, N, I, H); zone the time loop's zoneout;
    saved (h, [c,] *workspace) or None (the kernel then runs the forward again); grads the
    outputs' gradients, each None or an array. The forward's workspace entries are None where
    not kept.
    """

    name = params = workspace = None
    cell_state = False

    def __init__(self):
        self.outputs = ("h", "cL", "c") if self.cell_state else ("h",)
        self.grads = tuple(f"dLd{n}" for n in self.outputs)
        self.flags = ("c_steps", "keep_workspace") if self.cell_state else ("keep_workspace",)
        self.options = ("zoneout_mask", "zoneout", *self.flags)
        self.saved = ("h", "c", *self.workspace) if self.cell_state else ("h", *self.workspace)

    def schemas(self):
        """The schemas of the operator and of its backward."""
        params = [f"Tensor {n}" for n in self.params]
        zoneout = ["Tensor? zoneout_mask", "float zoneout"]
        flags = [f"bool {n}" for n in self.flags]
        results = len(self.outputs) + len(self.workspace)
        forward = (f"({', '.join([*params, *zoneout, *flags])}) -> "
                   f"({', '.join(['Tensor'] * results)})")
        grads = [f"Tensor? {g}" for g in self.grads]
        saved = [f"Tensor {n}" for n in self.saved]
        backward = (f"({', '.join([*params, *grads, *zoneout, *saved, 'bool input_grad'])}) "
                    f"-> ({', '.join(['Tensor'] * len(self.params))})")
        return forward, backward

    def _inputs(self, named):
        """The params as arrays, dims, the time loop's zoneout and its threads."""
        a = {n: _array(n, named[n]) for n in self.params}
        x = named["x"]
        T, N, I = x.shape
        H = named["hI"].shape[1]
        zone = _kernel_zoneout(_array("zoneout_mask", named["zoneout_mask"]), named["zoneout"],
                               a["x"].dtype)
        return a, (T, N, I, H), zone, call_threads(FAMILIES[self.name], x, H)

    def run(self, *args):
        """The operator's body."""
        named = dict(zip([*self.params, *self.options], args))
        a, dims, zone, n_threads = self._inputs(named)
        keep = named["keep_workspace"]
        with on_openmp_pool():
            results = self._forward(a, dims, zone, keep, named.get("c_steps", False),
                                    n_threads)
        return tuple(no_workspace(named["x"]) if r is None else torch.from_numpy(r)
                     for r in results)

    def fake(self, *args):
        """The operator's fake: h [T, N, H], cL as cI, c [T, N, H] with c_steps or
        keep_workspace, the workspace [T, N, width·H] with keep_workspace; the others empty."""
        named = dict(zip([*self.params, *self.options], args))
        x, keep = named["x"], named["keep_workspace"]
        T, N, H = x.shape[0], x.shape[1], named["hI"].shape[1]
        outputs = [x.new_empty((T, N, H))]
        if self.cell_state:
            steps = named["c_steps"] or keep
            outputs += [x.new_empty((N, H)),
                        x.new_empty((T, N, H)) if steps else no_workspace(x)]
        return (*outputs, *(x.new_empty((T, N, width * H)) if keep else no_workspace(x)
                            for width in self.workspace.values()))

    def _backward_names(self):
        return [*self.params, *self.grads, "zoneout_mask", "zoneout", *self.saved, "input_grad"]

    def run_backward(self, *args):
        """The backward operator's body: the kernel's backward on the saved workspace (a copy of
        what it consumes), or recomputing the forward where none was kept."""
        named = dict(zip(self._backward_names(), args))
        a, dims, zone, n_threads = self._inputs(named)
        saved = None
        if workspace_kept(named[next(iter(self.workspace))]):
            saved = tuple(_array(n, named[n]).copy() if n in self.workspace
                          else _array(n, named[n]) for n in self.saved)
        grads = {g: _array(g, named[g]) for g in self.grads}
        with on_openmp_pool():
            results = self._backward(a, dims, zone, saved, grads, named["input_grad"],
                                     n_threads)
        return tuple(no_workspace(named["x"]) if g is None else torch.from_numpy(g)
                     for g in results)

    def fake_backward(self, *args):
        """The backward's fake: each param's gradient shaped as it (dL/dx empty without
        input_grad)."""
        named = dict(zip(self._backward_names(), args))
        x = named["x"]
        return (dLdx_like(x, named["input_grad"]),
                *(named[n].new_empty(named[n].shape) for n in self.params[1:]))

    def setup_context(self, ctx, inputs, output):
        """Save the params, the zoneout mask and what the backward reads (h, [c,] the
        workspace); the workspace is not differentiable."""
        n = len(self.params)
        named = dict(zip([*self.params, *self.options], inputs))
        results = dict(zip([*self.outputs, *self.workspace], output))
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*(results[w] for w in self.workspace))
        ctx.save_for_backward(*inputs[:n], named["zoneout_mask"],
                              *(results[s] for s in self.saved))
        ctx.zoneout = named["zoneout"]

    def backward(self, ctx, *output_grads):
        """The params' gradients from the outputs' (None where autograd needs none), by the
        backward operator."""
        n = len(self.params)
        n_inputs = n + len(self.options)
        needs = ctx.needs_input_grad[:n]
        grads = output_grads[:len(self.outputs)]
        if not any(needs) or all(g is None for g in grads):
            return (None,) * n_inputs
        params, (zoneout_mask, *saved) = ctx.saved_tensors[:n], ctx.saved_tensors[n:]
        results = self.backward_op(*params, *grads, zoneout_mask, ctx.zoneout, *saved, needs[0])
        return (*needed(results, needs), *(None for _ in self.options))

    def register(self):
        """Define both operators, their fakes and their autograd formulas."""
        forward_schema, backward_schema = self.schemas()
        op = torch.library.custom_op(f"cells::haste_{self.name}", self.run, mutates_args=(),
                                     schema=forward_schema)
        self.backward_op = torch.library.custom_op(
            f"cells::haste_{self.name}_backward", self.run_backward, mutates_args=(),
            schema=backward_schema)
        op.register_fake(self.fake)
        self.backward_op.register_fake(self.fake_backward)
        op.register_autograd(self.backward, setup_context=self.setup_context)
        register_double_backward(self.backward_op, self._recomputed, len(self.params),
                                  len(self.grads), 2)

    def _recomputed(self, *args):
        """The differentiable outputs recomputed in torch from the params and the operator's
        zoneout_mask and zoneout (the double backward's recomputation)."""
        *params, zoneout_mask, zoneout = args
        return self._recompute(*params, zoneout=_recompute_zoneout(zoneout_mask, zoneout))


class _LstmOperator(_Operator):
    """haste's LSTM on cells' LSTM kernel (its gate blocks reordered, both ways)."""

    name = "lstm"
    params = ("x", "hI", "cI", "kernel", "recurrent_kernel", "bias")
    cell_state = True
    workspace = {"gates": 4}

    def _weights(self, a, H):
        index = _blocks(_LSTM_BLOCKS, H)
        return index, a["kernel"][:, index], a["recurrent_kernel"][:, index], a["bias"][index]

    def _forward(self, a, dims, zone, keep, c_steps, n_threads):
        _, Wx, Wr, b = self._weights(a, dims[3])
        h, _, cL, c, gates, _ = lstm.forward(_cpu, dims, a["x"], Wx, Wr, b, a["hI"], a["cI"], None,
                                             None, 0, None, True, keep, n_threads, zoneout=zone,
                                             c_steps=c_steps)
        return h, cL, c, gates

    def _backward(self, a, dims, zone, saved, grads, input_grad, n_threads):
        index, Wx, Wr, b = self._weights(a, dims[3])
        dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, _, _ = lstm.backward(
            _cpu, dims, a["x"], Wx, Wr, b, a["hI"], a["cI"], None, None, 0, None, True,
            None if saved is None else (*saved, None), grads["dLdh"], None, grads["dLdcL"],
            n_threads, input_grad=input_grad, zoneout=zone, dLdc=grads["dLdc"])
        return dLdx, dLdhI, dLdcI, dLdWx[:, index], dLdWr[:, index], dLdb[index]

    def _recompute(self, x, hI, cI, kernel, recurrent_kernel, bias, zoneout):
        index = torch.from_numpy(_blocks(_LSTM_BLOCKS, hI.shape[1]))
        Wx, Wr, b = kernel[:, index], recurrent_kernel[:, index], bias[index]
        h, c = recompute.zoned_time_loop(
            lambda x, h, c: recompute.lstm_step(x, h, c, Wx, Wr, b, None), x, (hI, cI),
            zoneout)
        return h[1:], c[-1], c[1:]


class _GruOperator(_Operator):
    """haste's GRU on cells' GRU kernel with linear_before_reset (its gate blocks reordered,
    both ways; b the rows bias, recurrent_bias)."""

    name = "gru"
    params = ("x", "hI", "kernel", "recurrent_kernel", "bias", "recurrent_bias")
    workspace = {"gates": 3, "hc": 1}

    def _weights(self, a, H):
        index = _blocks(_GRU_BLOCKS, H)
        b = np.stack([a["bias"][index], a["recurrent_bias"][index]])
        return index, a["kernel"][:, index], a["recurrent_kernel"][:, index], b

    def _forward(self, a, dims, zone, keep, c_steps, n_threads):
        _, Wx, Wh, b = self._weights(a, dims[3])
        return gru.forward(_cpu, dims, a["x"], a["hI"], Wx, Wh, b, True, keep, n_threads,
                           zoneout=zone)

    def _backward(self, a, dims, zone, saved, grads, input_grad, n_threads):
        index, Wx, Wh, b = self._weights(a, dims[3])
        dLdx, dLdhI, dLdWx, dLdWh, dLdb = gru.backward(_cpu, dims, a["x"], a["hI"], Wx, Wh, b, True,
                                                       saved, grads["dLdh"], None, None, n_threads,
                                                       input_grad=input_grad, zoneout=zone)
        return (dLdx, dLdhI, dLdWx[:, index], dLdWh[:, index], dLdb[0, index],
                dLdb[1, index])

    def _recompute(self, x, hI, kernel, recurrent_kernel, bias, recurrent_bias, zoneout):
        index = torch.from_numpy(_blocks(_GRU_BLOCKS, hI.shape[1]))
        Wx, Wh = kernel[:, index], recurrent_kernel[:, index]
        b = torch.stack([bias[index], recurrent_bias[index]])
        h, = recompute.zoned_time_loop(lambda x, h: recompute.gru_step(x, h, Wx, Wh, b), x,
                                       (hI,), zoneout)
        return (h[1:],)


class _LayerNormLstmOperator(_Operator):
    """haste's LayerNormLSTM on cells' layer_norm_lstm kernel (haste's layout; P = bias,
    gamma's rows, gamma_h, beta_h)."""

    name = "layer_norm_lstm"
    params = ("x", "hI", "cI", "kernel", "recurrent_kernel", "bias", "gamma", "gamma_h",
              "beta_h")
    cell_state = True
    workspace = {"gates": 4, "aux": 8}

    @staticmethod
    def _P(a):
        return layer_norm_lstm.loop_params(a["bias"], a["gamma"], a["gamma_h"], a["beta_h"])

    def _forward(self, a, dims, zone, keep, c_steps, n_threads):
        h, _, cL, c, gates, aux = _haste.forward(_cpu, self.name, dims, a["x"], a["kernel"],
                                                 a["recurrent_kernel"], None, self._P(a), a["hI"],
                                                 a["cI"], keep, n_threads, zoneout=zone,
                                                 c_steps=c_steps)
        return h, cL, c, gates, aux

    def _backward(self, a, dims, zone, saved, grads, input_grad, n_threads):
        dLdx, dLdWx, dLdWh, _, dLdP, dLdhI, dLdcI = _haste.backward(
            _cpu, self.name, dims, a["x"], a["kernel"], a["recurrent_kernel"], None, self._P(a),
            a["hI"], a["cI"], saved, grads["dLdh"], grads["dLdc"], None, grads["dLdcL"], n_threads,
            zoneout=zone, input_grad=input_grad)
        return (dLdx, dLdhI, dLdcI, dLdWx, dLdWh,
                *layer_norm_lstm.param_grads(dLdP, dims[3]))

    def _recompute(self, x, hI, cI, kernel, recurrent_kernel, bias, gamma, gamma_h, beta_h,
                   zoneout):
        h, c = recompute.zoned_time_loop(
            lambda x, h, c: recompute.layer_norm_lstm_step(x, h, c, kernel, recurrent_kernel,
                                                           bias, gamma, gamma_h, beta_h),
            x, (hI, cI), zoneout)
        return h[1:], c[-1], c[1:]


class _LayerNormGruOperator(_Operator):
    """haste's LayerNormGRU on cells' layer_norm_gru kernel (haste's layout; P = bias,
    recurrent_bias, gamma's rows)."""

    name = "layer_norm_gru"
    params = ("x", "hI", "kernel", "recurrent_kernel", "bias", "recurrent_bias", "gamma")
    workspace = {"gates": 3, "aux": 6}

    @staticmethod
    def _P(a):
        return layer_norm_gru.loop_params(a["bias"], a["recurrent_bias"], a["gamma"])

    def _forward(self, a, dims, zone, keep, c_steps, n_threads):
        h, _, _, _, gates, aux = _haste.forward(_cpu, self.name, dims, a["x"], a["kernel"],
                                                a["recurrent_kernel"], None, self._P(a), a["hI"],
                                                None, keep, n_threads, zoneout=zone)
        return h, gates, aux

    def _backward(self, a, dims, zone, saved, grads, input_grad, n_threads):
        if saved is not None:
            h, gates, aux = saved
            saved = h, None, gates, aux
        dLdx, dLdWx, dLdWh, _, dLdP, dLdhI, _ = _haste.backward(
            _cpu, self.name, dims, a["x"], a["kernel"], a["recurrent_kernel"], None, self._P(a),
            a["hI"], None, saved, grads["dLdh"], None, None, None, n_threads, zoneout=zone,
            input_grad=input_grad)
        return dLdx, dLdhI, dLdWx, dLdWh, *layer_norm_gru.param_grads(dLdP, dims[3])

    def _recompute(self, x, hI, kernel, recurrent_kernel, bias, recurrent_bias, gamma,
                   zoneout):
        h, = recompute.zoned_time_loop(
            lambda x, h: recompute.layer_norm_gru_step(x, h, kernel, recurrent_kernel, bias,
                                                       recurrent_bias, gamma),
            x, (hI,), zoneout)
        return (h[1:],)


class _IndRnnOperator(_Operator):
    """haste's IndRNN on cells' indrnn kernel (P = recurrent_scale)."""

    name = "indrnn"
    params = ("x", "hI", "kernel", "recurrent_scale", "bias")
    workspace = {"gates": 1}

    def _forward(self, a, dims, zone, keep, c_steps, n_threads):
        h, _, _, _, gates, _ = _haste.forward(_cpu, self.name, dims, a["x"], a["kernel"], None,
                                              a["bias"], a["recurrent_scale"], a["hI"], None, keep,
                                              n_threads, zoneout=zone)
        return h, gates

    def _backward(self, a, dims, zone, saved, grads, input_grad, n_threads):
        if saved is not None:
            h, gates = saved
            saved = h, None, gates, None
        dLdx, dLdWx, _, dLdb, dLdu, dLdhI, _ = _haste.backward(
            _cpu, self.name, dims, a["x"], a["kernel"], None, a["bias"], a["recurrent_scale"],
            a["hI"], None, saved, grads["dLdh"], None, None, None, n_threads, zoneout=zone,
            input_grad=input_grad)
        return dLdx, dLdhI, dLdWx, dLdu, dLdb

    def _recompute(self, x, hI, kernel, recurrent_scale, bias, zoneout):
        h, = recompute.zoned_time_loop(
            lambda x, h: recompute.indrnn_step(x, h, kernel, recurrent_scale, bias), x, (hI,),
            zoneout)
        return (h[1:],)


for _operator in (_LstmOperator, _GruOperator, _LayerNormLstmOperator, _LayerNormGruOperator,
                  _IndRnnOperator):
    _operator().register()


# ---------------------------------------------------------------------------------------------
# The modules
# ---------------------------------------------------------------------------------------------

def _parameters(arrays):
    """New Parameters holding the arrays a converter returned."""
    return tuple(torch.nn.Parameter(torch.from_numpy(a)) for a in arrays)


def _validate_state(state, shape):
    """haste's check of one state tensor against shape [1, N, H], with its messages."""
    if state.dim() != len(shape):
        raise ValueError(f"RNN state dimension mismatch; expected {len(shape)} got "
                         f"{state.dim()}")
    for i, (d1, d2) in enumerate(zip(state.shape, shape)):
        if d1 != d2:
            raise ValueError(f"RNN state size mismatch on dim {i}; expected {d2} got {d1}")


_INDEX_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


class _HasteRNN(torch.nn.Module):
    """haste's BaseRNN and forward, on a layer's operator `_op`. A subclass gives its
    parameters as the operator takes them, `_weights()` (the recurrent kernel after
    DropConnect), and `_cell_state`: whether its state is (h, c)."""

    _cell_state = False

    def __init__(self, input_size, hidden_size, batch_first, zoneout, return_state_sequence):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.batch_first = batch_first
        self.zoneout = zoneout
        self.return_state_sequence = return_state_sequence

    def _check_rates(self, **rates):
        """haste's ValueErrors for dropout and zoneout out of [0, 1]."""
        for name, rate in rates.items():
            if rate < 0 or rate > 1:
                raise ValueError(f"{type(self).__name__}: {name} must be in [0.0, 1.0]")

    def forward(self, input, state=None, lengths=None):
        """Run the layer over a batch of sequences.

        Parameters
        ----------
        input : torch.Tensor, [T, N, input_size] ([N, T, input_size] with batch_first)
            float32 or float64, on the CPU, of the parameters' dtype.
        state : torch.Tensor [1, N, hidden_size], or a tuple (h, c) of them for the LSTMs
            The initial state; None: zeros.
        lengths : torch.Tensor or sequence of int, [N], optional
            Each row's length: its final state is the one after lengths[b] steps (an index
            into the state sequence [T + 1, N, H], as haste's). Nothing is masked: every row
            runs every step, and the output holds them all.

        Returns
        -------
        output : torch.Tensor, [T, N, hidden_size] ([N, T, hidden_size] with batch_first)
            h after every step.
        state : torch.Tensor [1, N, hidden_size], or a tuple (h, c) of them for the LSTMs
            The final state; with return_state_sequence, the state after every step, [1, T, N,
            hidden_size] ([1, N, T, hidden_size] with batch_first).

        Raises
        ------
        TypeError
            A tensor that is not a float32 or float64 CPU tensor, of another dtype than the
            parameters', or lengths not integers.
        ValueError
            input not [T, N, input_size], a state of the wrong structure or shape (haste's
            messages), lengths not [N].
        """
        self._check_input(input)
        input = self._permute(input)
        T, N = input.shape[:2]
        states = self._get_state(input, state)
        lengths = self._check_lengths(lengths, N)
        zoneout_mask = self._get_zoneout_mask(input)
        weights = self._weights()   # DropConnect draws after zoneout, in haste's order
        options = [zoneout_mask if self.training else None, float(self.zoneout)]
        if self._cell_state:
            options.append(lengths is not None or self.return_state_sequence)   # c_steps
        outputs = self._op(input, *(s[0] for s in states), *weights, *options,
                           keep_workspace(input, *states, *weights))
        h = outputs[0]
        finals = [(h, h[-1] if T else states[0][0])]
        if self._cell_state:
            finals.append((outputs[2], outputs[1]))
        final = tuple(self._get_final_state(initial, steps, last, lengths)
                      for initial, (steps, last) in zip(states, finals))
        return self._permute(h), final if self._cell_state else final[0]

    def _permute(self, x):
        return x.permute(1, 0, 2) if self.batch_first else x

    def _check_input(self, input):
        """The input's and the parameters' checks."""
        _check_tensor("input", input)
        if input.dim() != 3 or input.shape[2] != self.input_size:
            layout = "[N, T, input_size]" if self.batch_first else "[T, N, input_size]"
            raise ValueError(f"input: expected shape {layout} with input_size "
                             f"{self.input_size}, got {list(input.shape)}")
        for name, p in self.named_parameters():
            _check_tensor(name, p)
            if p.dtype != input.dtype:
                raise TypeError(f"input: expected the parameters' dtype {p.dtype}, got "
                                f"{input.dtype}")

    def _get_state(self, input, state):
        """The initial states, a tuple of [1, N, H] tensors: zeros for None, else `state`
        checked as haste checks it (its structure and shapes), and its tensors'."""
        shape = [1, input.shape[1], self.hidden_size]
        n = 2 if self._cell_state else 1
        if state is None:
            return tuple(input.new_zeros(shape) for _ in range(n))
        if self._cell_state:
            if not (isinstance(state, (tuple, list)) and len(state) == 2):
                raise ValueError(f"RNN state has invalid structure; expected {(shape, shape)}")
            states, names = tuple(state), ("state[0]", "state[1]")
        else:
            if isinstance(state, (tuple, list)):
                raise ValueError(f"RNN state has invalid structure; expected {shape}")
            states, names = (state,), ("state",)
        for name, s in zip(names, states):
            _check_tensor(name, s)
            _validate_state(s, shape)
            if s.dtype != input.dtype:
                raise TypeError(f"{name}: expected the input's dtype {input.dtype}, got "
                                f"{s.dtype}")
        return states

    @staticmethod
    def _check_lengths(lengths, N):
        """lengths as an integer CPU tensor [N] (None stays None)."""
        if lengths is None:
            return None
        lengths = torch.as_tensor(lengths)
        if lengths.dtype not in _INDEX_DTYPES or not lengths.is_cpu:
            raise TypeError(f"lengths: expected integers on the CPU, got {lengths.dtype} on "
                            f"{lengths.device}")
        if lengths.shape != (N,):
            raise ValueError(f"lengths: expected shape [{N}] (the batch size), got "
                             f"{list(lengths.shape)}")
        return lengths

    def _get_final_state(self, initial, steps, last, lengths):
        """haste's final state of one state from the initial one [1, N, H], every step's
        [T, N, H] and the last [N, H]."""
        if self.return_state_sequence:
            return self._permute(steps).unsqueeze(0)
        if lengths is not None:
            sequence = torch.cat([initial, steps])
            return sequence[lengths, torch.arange(sequence.shape[1])].unsqueeze(0)
        return last.unsqueeze(0)

    def _get_zoneout_mask(self, input):
        """haste's zoneout mask [T, N, H], drawn Bernoulli(1 - zoneout) on every call with
        zoneout (in eval mode too, where it is unused); None without zoneout."""
        if not self.zoneout:
            return None
        mask = input.new_empty(input.shape[0], input.shape[1], self.hidden_size)
        return mask.bernoulli_(1.0 - self.zoneout)

    def _dropped(self):
        """DropConnect: the recurrent kernel after haste's F.dropout."""
        return F.dropout(self.recurrent_kernel, self.dropout, self.training)

    def _init_gate_blocks(self, n_gates):
        """Xavier-uniform kernel and orthogonal recurrent kernel, gate block by gate block."""
        H = self.hidden_size
        for i in range(n_gates):
            torch.nn.init.xavier_uniform_(self.kernel[:, i * H:(i + 1) * H])
            torch.nn.init.orthogonal_(self.recurrent_kernel[:, i * H:(i + 1) * H])


class LSTM(_HasteRNN):
    """haste's LSTM (haste_pytorch.LSTM) on cells' LSTM kernel.

    Parameters
    ----------
    input_size, hidden_size : int
    batch_first : bool, default False
        Input and output [N, T, ...] instead of [T, N, ...].
    forget_bias : float, default 1.0
        The forget gate's initial bias.
    dropout : float in [0, 1], default 0
        DropConnect's rate on recurrent_kernel.
    zoneout : float in [0, 1], default 0
        Zoneout's rate on h.
    return_state_sequence : bool, default False
        forward returns the state after every step instead of the final state.

    Attributes
    ----------
    kernel : torch.nn.Parameter, [input_size, 4 hidden_size]
        Gate blocks i, g, f, o; Xavier-uniform per block.
    recurrent_kernel : torch.nn.Parameter, [hidden_size, 4 hidden_size]
        Gate blocks i, g, f, o; orthogonal per block.
    bias : torch.nn.Parameter, [4 hidden_size]
        Zeros, the f block forget_bias.

    Raises
    ------
    ValueError
        dropout or zoneout out of [0, 1].

    Examples
    --------
    >>> import torch
    >>> import cells.haste as haste
    >>> lstm = haste.LSTM(4, 8, zoneout=0.1)
    >>> y, (h, c) = lstm(torch.randn(5, 3, 4))
    >>> y.shape, c.shape
    (torch.Size([5, 3, 8]), torch.Size([1, 3, 8]))
    """

    _op = torch.ops.cells.haste_lstm
    _cell_state = True

    def __init__(self, input_size, hidden_size, batch_first=False, forget_bias=1.0,
                 dropout=0.0, zoneout=0.0, return_state_sequence=False):
        super().__init__(input_size, hidden_size, batch_first, zoneout, return_state_sequence)
        self._check_rates(dropout=dropout, zoneout=zoneout)
        self.forget_bias = forget_bias
        self.dropout = dropout
        self.kernel = torch.nn.Parameter(torch.empty(input_size, hidden_size * 4))
        self.recurrent_kernel = torch.nn.Parameter(torch.empty(hidden_size, hidden_size * 4))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size * 4))
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the parameters to their initial values (haste's initialisation)."""
        H = self.hidden_size
        self._init_gate_blocks(4)
        torch.nn.init.zeros_(self.bias)
        torch.nn.init.constant_(self.bias[H * 2:H * 3], self.forget_bias)

    def to_native_weights(self):
        """torch.nn.LSTM's weight_ih_l0, weight_hh_l0, bias_ih_l0 and bias_hh_l0 (each half of
        bias) of these weights, as new Parameters (haste's to_native_weights;
        cells.convert.haste_lstm_to_torch)."""
        return _parameters(convert.haste_lstm_to_torch(self.kernel, self.recurrent_kernel,
                                                       self.bias))

    def from_native_weights(self, weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0):
        """Take torch.nn.LSTM's weights as new Parameters (haste's from_native_weights;
        cells.convert.haste_lstm_from_torch)."""
        self.kernel, self.recurrent_kernel, self.bias = _parameters(
            convert.haste_lstm_from_torch(weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0))

    def _weights(self):
        return self.kernel, self._dropped(), self.bias


class GRU(_HasteRNN):
    """haste's GRU (haste_pytorch.GRU) on cells' GRU kernel (linear_before_reset).

    Parameters
    ----------
    input_size, hidden_size : int
    batch_first : bool, default False
        Input and output [N, T, ...] instead of [T, N, ...].
    dropout : float in [0, 1], default 0
        DropConnect's rate on recurrent_kernel.
    zoneout : float in [0, 1], default 0
        Zoneout's rate on h.
    return_state_sequence : bool, default False
        forward returns the state after every step instead of the final state.

    Attributes
    ----------
    kernel : torch.nn.Parameter, [input_size, 3 hidden_size]
        Gate blocks z, r, h; Xavier-uniform per block.
    recurrent_kernel : torch.nn.Parameter, [hidden_size, 3 hidden_size]
        Gate blocks z, r, h; orthogonal per block.
    bias, recurrent_bias : torch.nn.Parameter, [3 hidden_size]
        Zeros.

    Raises
    ------
    ValueError
        dropout or zoneout out of [0, 1].

    Examples
    --------
    >>> import torch
    >>> import cells.haste as haste
    >>> gru = haste.GRU(4, 8, batch_first=True)
    >>> y, h = gru(torch.randn(3, 5, 4))
    >>> y.shape, h.shape
    (torch.Size([3, 5, 8]), torch.Size([1, 3, 8]))
    """

    _op = torch.ops.cells.haste_gru

    def __init__(self, input_size, hidden_size, batch_first=False, dropout=0.0, zoneout=0.0,
                 return_state_sequence=False):
        super().__init__(input_size, hidden_size, batch_first, zoneout, return_state_sequence)
        self._check_rates(dropout=dropout, zoneout=zoneout)
        self.dropout = dropout
        self.kernel = torch.nn.Parameter(torch.empty(input_size, hidden_size * 3))
        self.recurrent_kernel = torch.nn.Parameter(torch.empty(hidden_size, hidden_size * 3))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size * 3))
        self.recurrent_bias = torch.nn.Parameter(torch.empty(hidden_size * 3))
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the parameters to their initial values (haste's initialisation)."""
        self._init_gate_blocks(3)
        torch.nn.init.zeros_(self.bias)
        torch.nn.init.zeros_(self.recurrent_bias)

    def to_native_weights(self):
        """torch.nn.GRU's weight_ih_l0, weight_hh_l0, bias_ih_l0 and bias_hh_l0 of these
        weights, as new Parameters (haste's to_native_weights;
        cells.convert.haste_gru_to_torch)."""
        return _parameters(convert.haste_gru_to_torch(self.kernel, self.recurrent_kernel,
                                                      self.bias, self.recurrent_bias))

    def from_native_weights(self, weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0):
        """Take torch.nn.GRU's weights as new Parameters (haste's from_native_weights;
        cells.convert.haste_gru_from_torch)."""
        self.kernel, self.recurrent_kernel, self.bias, self.recurrent_bias = _parameters(
            convert.haste_gru_from_torch(weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0))

    def _weights(self):
        return self.kernel, self._dropped(), self.bias, self.recurrent_bias


class LayerNormLSTM(_HasteRNN):
    """haste's LayerNormLSTM (haste_pytorch.LayerNormLSTM) on cells' layer_norm_lstm kernel.

    Parameters
    ----------
    input_size, hidden_size : int
    batch_first : bool, default False
        Input and output [N, T, ...] instead of [T, N, ...].
    forget_bias : float, default 1.0
        The forget gate's initial bias.
    dropout : float in [0, 1], default 0
        DropConnect's rate on recurrent_kernel.
    zoneout : float in [0, 1], default 0
        Zoneout's rate on h.
    return_state_sequence : bool, default False
        forward returns the state after every step instead of the final state.

    Attributes
    ----------
    kernel : torch.nn.Parameter, [input_size, 4 hidden_size]
        Gate blocks i, g, f, o; Xavier-uniform per block.
    recurrent_kernel : torch.nn.Parameter, [hidden_size, 4 hidden_size]
        Gate blocks i, g, f, o; orthogonal per block.
    bias : torch.nn.Parameter, [4 hidden_size]
        Zeros, the f block forget_bias.
    gamma : torch.nn.Parameter, [2, 4 hidden_size]
        The gains of the input's and the recurrent product's LayerNorms; ones.
    gamma_h, beta_h : torch.nn.Parameter, [hidden_size]
        The gain (ones) and bias (zeros) of c's LayerNorm.

    Raises
    ------
    ValueError
        dropout or zoneout out of [0, 1].

    Examples
    --------
    >>> import torch
    >>> import cells.haste as haste
    >>> lstm = haste.LayerNormLSTM(4, 8, dropout=0.1, return_state_sequence=True)
    >>> y, (h, c) = lstm(torch.randn(5, 3, 4))
    >>> h.shape
    torch.Size([1, 5, 3, 8])
    """

    _op = torch.ops.cells.haste_layer_norm_lstm
    _cell_state = True

    def __init__(self, input_size, hidden_size, batch_first=False, forget_bias=1.0,
                 dropout=0.0, zoneout=0.0, return_state_sequence=False):
        super().__init__(input_size, hidden_size, batch_first, zoneout, return_state_sequence)
        self._check_rates(dropout=dropout, zoneout=zoneout)
        self.forget_bias = forget_bias
        self.dropout = dropout
        self.kernel = torch.nn.Parameter(torch.empty(input_size, hidden_size * 4))
        self.recurrent_kernel = torch.nn.Parameter(torch.empty(hidden_size, hidden_size * 4))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size * 4))
        self.gamma = torch.nn.Parameter(torch.empty(2, hidden_size * 4))
        self.gamma_h = torch.nn.Parameter(torch.empty(hidden_size))
        self.beta_h = torch.nn.Parameter(torch.empty(hidden_size))
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the parameters to their initial values (haste's initialisation)."""
        H = self.hidden_size
        self._init_gate_blocks(4)
        torch.nn.init.zeros_(self.bias)
        torch.nn.init.constant_(self.bias[H * 2:H * 3], self.forget_bias)
        torch.nn.init.ones_(self.gamma)
        torch.nn.init.ones_(self.gamma_h)
        torch.nn.init.zeros_(self.beta_h)

    def _weights(self):
        return (self.kernel, self._dropped(), self.bias, self.gamma, self.gamma_h,
                self.beta_h)


class LayerNormGRU(_HasteRNN):
    """haste's LayerNormGRU (haste_pytorch.LayerNormGRU) on cells' layer_norm_gru kernel.

    Parameters
    ----------
    input_size, hidden_size : int
    batch_first : bool, default False
        Input and output [N, T, ...] instead of [T, N, ...].
    dropout : float in [0, 1], default 0
        DropConnect's rate on recurrent_kernel.
    zoneout : float in [0, 1], default 0
        Zoneout's rate on h.
    return_state_sequence : bool, default False
        forward returns the state after every step instead of the final state.

    Attributes
    ----------
    kernel : torch.nn.Parameter, [input_size, 3 hidden_size]
        Gate blocks z, r, h; Xavier-uniform per block.
    recurrent_kernel : torch.nn.Parameter, [hidden_size, 3 hidden_size]
        Gate blocks z, r, h; orthogonal per block.
    bias, recurrent_bias : torch.nn.Parameter, [3 hidden_size]
        Added after the input's and the recurrent product's LayerNorms; zeros.
    gamma : torch.nn.Parameter, [2, 3 hidden_size]
        The gains of those LayerNorms; ones.

    Raises
    ------
    ValueError
        dropout or zoneout out of [0, 1].

    Examples
    --------
    >>> import torch
    >>> import cells.haste as haste
    >>> gru = haste.LayerNormGRU(4, 8, zoneout=0.1)
    >>> y, h = gru(torch.randn(5, 3, 4), lengths=torch.tensor([5, 2, 4]))
    >>> torch.equal(h[0, 1], y[1, 1])
    True
    """

    _op = torch.ops.cells.haste_layer_norm_gru

    def __init__(self, input_size, hidden_size, batch_first=False, dropout=0.0, zoneout=0.0,
                 return_state_sequence=False):
        super().__init__(input_size, hidden_size, batch_first, zoneout, return_state_sequence)
        self._check_rates(dropout=dropout, zoneout=zoneout)
        self.dropout = dropout
        self.kernel = torch.nn.Parameter(torch.empty(input_size, hidden_size * 3))
        self.recurrent_kernel = torch.nn.Parameter(torch.empty(hidden_size, hidden_size * 3))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size * 3))
        self.recurrent_bias = torch.nn.Parameter(torch.empty(hidden_size * 3))
        self.gamma = torch.nn.Parameter(torch.empty(2, hidden_size * 3))
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the parameters to their initial values (haste's initialisation)."""
        self._init_gate_blocks(3)
        torch.nn.init.zeros_(self.bias)
        torch.nn.init.zeros_(self.recurrent_bias)
        torch.nn.init.ones_(self.gamma)

    def _weights(self):
        return (self.kernel, self._dropped(), self.bias, self.recurrent_bias, self.gamma)


class IndRNN(_HasteRNN):
    """haste's IndRNN (haste_pytorch.IndRNN) on cells' indrnn kernel.

    Parameters
    ----------
    input_size, hidden_size : int
    batch_first : bool, default False
        Input and output [N, T, ...] instead of [T, N, ...].
    zoneout : float in [0, 1], default 0
        Zoneout's rate on h.
    return_state_sequence : bool, default False
        forward returns the state after every step instead of the final state.

    Attributes
    ----------
    kernel : torch.nn.Parameter, [input_size, hidden_size]
        Xavier-uniform.
    recurrent_scale : torch.nn.Parameter, [hidden_size]
        Each unit's recurrent scale; uniform in [-0.5, 0.5] (haste's choice, not the IndRNN
        paper's).
    bias : torch.nn.Parameter, [hidden_size]
        Zeros.

    Raises
    ------
    ValueError
        zoneout out of [0, 1].

    Examples
    --------
    >>> import torch
    >>> import cells.haste as haste
    >>> rnn = haste.IndRNN(4, 8)
    >>> y, h = rnn(torch.randn(5, 3, 4), torch.zeros(1, 3, 8))
    >>> h.shape
    torch.Size([1, 3, 8])
    """

    _op = torch.ops.cells.haste_indrnn

    def __init__(self, input_size, hidden_size, batch_first=False, zoneout=0.0,
                 return_state_sequence=False):
        super().__init__(input_size, hidden_size, batch_first, zoneout, return_state_sequence)
        self._check_rates(zoneout=zoneout)
        self.kernel = torch.nn.Parameter(torch.empty(input_size, hidden_size))
        self.recurrent_scale = torch.nn.Parameter(torch.empty(hidden_size))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size))
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the parameters to their initial values (haste's initialisation)."""
        torch.nn.init.xavier_uniform_(self.kernel)
        torch.nn.init.uniform_(self.recurrent_scale, -0.5, 0.5)
        torch.nn.init.zeros_(self.bias)

    def _weights(self):
        return self.kernel, self.recurrent_scale, self.bias
