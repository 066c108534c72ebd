"""PyTorch modules on cells' kernels: drop-in torch.nn.GRU, LSTM, RNN, their cells, and the LLTM.

    GRU, LSTM, RNN                subclasses of torch.nn.GRU, LSTM, RNN
    GRUCell, LSTMCell, RNNCell    subclasses of torch.nn.GRUCell, LSTMCell, RNNCell
    LLTM(input_features, state_size)   the LLTM of PyTorch's C++-extension tutorial
    convert(module)               a torch.nn recurrent module (or every one inside a model) as
                                  the cells-backed class, with the same parameters
    quantize_dynamic(model, ...)  the recurrent modules of a model as inference modules on
                                  cells' int8 or bfloat16 prepared nets (torch.ao's
                                  quantize_dynamic for RNNs, proj_size included)

The modules keep torch's constructors, parameters (names, shapes, initialisation), state_dicts,
repr and pickling, and only replace forward: it takes and returns what torch's does (batched
[sL, bS, nIn] or batch_first [bS, sL, nIn], unbatched [sL, nIn], PackedSequence, optional hx)
and runs each layer and direction as one call of cells' time loop (the reverse direction with
forward=False, a packed batch with seq_len: no per-step or per-length Python), with torch's
dropout between layers in training mode. torch's GRU is cells' linear_before_reset GRU; the
RNN's nonlinearity is cells' activation, and the LSTM's proj_size > 0 is cells' projection
(Wproj = weight_hrᵀ).

Tensors are float32 or float64, on the CPU or on a CUDA device. On the CPU the kernels read
them as NumPy arrays sharing their memory (tensor.numpy(); a strided one is copied by the
kernel, except the transposes of torch's weight_ih and weight_hh, which the time loop reads
where they are, writing their gradients in torch's layout; weight_hr's is copied, and its
gradient copied back into weight_hr's layout), their
results become tensors without a copy (torch.from_numpy), and every call runs on the threads
cells chooses for its size (n_threads=None), at most torch.get_num_threads(): torch's count is
a ceiling, not a demand that a call too small to gain from a second thread would pay for. The
time loops run on OpenMP's pool, which torch's own operators run on, so that the two take turns
on one pool (cells._threads.on_openmp_pool). CUDA
tensors run on cells' GPU backend (CuPy, cells[gpu]) as
CuPy arrays sharing their memory through DLPack, both ways, with CuPy's device and stream set to
the tensor's device and torch's current stream on it: cells' kernels and cuBLAS calls queue
behind and before torch's own work, as a torch operator's would. Another dtype or device, or a
call mixing CPU and CUDA tensors, is a TypeError naming the argument.

Inference. A CPU call that needs no gradient (under torch.no_grad() or torch.inference_mode(),
or with no tensor that requires grad) runs each layer and direction on a prepared net
(cells.gru.prepare, ...: the weights validated and packed once), kept on the module and
prepared again when one of its weights changed: its version counter moved (an optimizer step,
load_state_dict, an in-place write under no_grad) or it is another tensor (.to(), .double(),
a new Parameter, ``param.data = t``). A write through ``param.data`` is not seen (autograd does
not count it either): write under torch.no_grad() instead. A reverse direction runs forward on
each row's steps reversed (a packed batch's rows each over their own length), its outputs put
back in time order; a layer's two directions run at once, each on half of torch's threads
(cells._prepared.call_together). The nets are not pickled or copied with the module; weights
that are inference tensors (a module made under inference_mode: no version counter), CUDA
tensors and torch.compile run on the time loop operators below. The common call (a stack's
batched 3-D input, a cell's or the LLTM's 2-D one, hx None or CPU tensors of the input's dtype
and of the shapes torch expects) is checked in a few comparisons and runs straight on the nets;
any other goes through the full checks, which raise torch's errors.

Autograd and torch.compile. Each time loop is a custom operator (torch.library, namespace
"cells"), with a fake (meta) implementation and a backward formula, all generated from the
family's declaration (cells/_families.py: its arguments, outputs and workspace, and what the
operator adds, Family.torch):

    cells::gru_time_loop(x, hI, Wx, Wh, b, seq_len, forward, keep_workspace) -> (h, gates, hc)
    cells::lstm_time_loop(x, Wx, Wr, b, hI, cI, Wproj, seq_len, forward, keep_workspace)
        -> (h, hL, cL, c, gates, m)
    cells::lltm_time_loop(x, W, b, hI, cI, seq_len, forward, keep_workspace)
        -> (h, hL, cL, gates, c)
    cells::rnn_time_loop(x, hI, Wx, Wh, b, activation, seq_len, forward, keep_workspace)
        -> (h, gates)

Arguments and outputs are those of cells.gruTimeLoop (linear_before_reset=True), lstmLayerTimeLoop
(no peepholes, no clipping), lltmTimeLoop and rnnTimeLoop, in cells' layout (x time-major [sL, bS,
nIn], Wx [nIn, G·nOut], ...), followed by the training workspace (cells' GruWorkspace, ... arrays
as tensors; empty tensors with keep_workspace=False). The backward of each is the operator
cells::<family>_time_loop_backward, which runs cells' *TimeLoopBp on the saved workspace: the Bp
consumes (overwrites) the gates, so it gets a copy of them, and backward(retain_graph=True) can run
twice. Without a kept workspace it recomputes the forward pass. Its last argument, input_grad, is
whether x needs a gradient: without, dL/dx is not computed (an empty tensor). The modules call
these operators, so torch.compile(model, fullgraph=True) traces models that use them.

Double backward (backward(create_graph=True) or autograd.grad(create_graph=True), then a
derivative of the gradients: gradient penalties, Hessian-vector products, meta-learning). Each
backward operator has an autograd formula of its own, exact to rounding: it recomputes the time
loop in plain torch operations (cells/_torch_recompute.py, one Python iteration per step, in
cells' layout and with its seq_len and direction), takes its first derivatives with
create_graph=True and differentiates them by the incoming gradients. Its results are
differentiable in turn, to any order. It costs a forward and two backward passes of that Python
loop, far slower than the kernels, and only where a second derivative is taken: a plain backward
runs the backward operators with grad mode off, which records nothing for them.

torch._dynamo refuses to trace any instance of torch.nn.GRU, LSTM or RNN unless
torch._dynamo.config.allow_rnn is set; importing this module sets it (for torch's own RNN
modules too, which dynamo then traces instead of breaking the graph).
"""
import copy
import functools
import math
from typing import NamedTuple

import numpy as np
import torch
import torch._dynamo
from torch import Tensor
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

import cells
from cells import _arrays, _families, _torch_recompute, cuda
from cells._prepared import PreparedNet, call_together
from cells._threads import on_openmp_pool, time_loop_threads

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell", "LLTM", "convert"]

torch._dynamo.config.allow_rnn = True

_REAL_DTYPES = (torch.float32, torch.float64)


# ---------------------------------------------------------------------------------------------
# Tensors and arrays
# ---------------------------------------------------------------------------------------------

def _check_tensor(name, t):
    """A TypeError unless t is a float32 or float64 tensor on the CPU or a CUDA device."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if not (t.is_cpu or t.is_cuda):
        raise TypeError(f"{name}: expected a CPU or CUDA tensor, got device {t.device}")
    if t.dtype not in _REAL_DTYPES:
        raise TypeError(f"{name}: expected dtype torch.float32 or torch.float64, got {t.dtype}")


def _on_gpu(t):
    """Whether tensor t is one that cells' GPU backend runs: a CUDA tensor."""
    return t.is_cuda


def _array(name, t):
    """A checked tensor as an array sharing its memory (NumPy on the CPU, CuPy for a CUDA
    tensor, through DLPack); None stays None."""
    if t is None:
        return None
    _check_tensor(name, t)
    if _on_gpu(t):
        return cuda.import_cupy().from_dlpack(t.detach())
    return t.detach().numpy()


def _torch_stream(device):
    """torch's current stream on a CUDA device."""
    return torch.cuda.current_stream(device)


def _on_torch_stream(op):
    """A custom operator's body, run with CuPy's current device and stream set to those of its
    first argument x when x is a CUDA tensor (torch's current stream on x's device)."""
    @functools.wraps(op)
    def run(x, *args, **kwargs):
        if not (isinstance(x, Tensor) and _on_gpu(x)):
            return op(x, *args, **kwargs)
        cupy = cuda.import_cupy()
        with cupy.cuda.Device(x.device.index), \
                cupy.cuda.Stream.from_external(_torch_stream(x.device)):
            return op(x, *args, **kwargs)
    return run


def _lengths(seq_len):
    """seq_len (None or an integer CPU tensor [bS]) as the NumPy array cells takes."""
    if seq_len is None:
        return None
    if seq_len.device.type != "cpu" or seq_len.dtype.is_floating_point:
        raise TypeError(f"seq_len: expected None or an integer CPU tensor, got {seq_len.dtype} "
                        f"on {seq_len.device}")
    return seq_len.numpy()


def _tensor(a):
    """A result (a NumPy or CuPy array) as a tensor sharing its memory."""
    return torch.from_dlpack(a) if _arrays.on_gpu(a) else torch.from_numpy(a)


def _n_threads(declared, x, nOut):
    """The threads of a time loop call of family `declared` on x [sL, bS, nIn] with nOut units:
    those cells chooses for it (cells._threads.time_loop_threads), at most
    torch.get_num_threads(). torch's count is a ceiling, as for its own operators: a call too
    small to gain from a second thread runs on one."""
    _, bS, nIn = x.shape
    return time_loop_threads(bS, nOut, declared.gates, declared.product_inputs(nIn, nOut),
                             torch.get_num_threads)


def _consumable(name, t):
    """A saved workspace buffer that cells' backward consumes on the CPU: a copy, so that the
    saved tensor survives for another backward (retain_graph=True). The GPU backward leaves its
    workspace intact: a CUDA tensor's buffer is shared."""
    a = _array(name, t)
    return a if _arrays.on_gpu(a) else a.copy()


def _no_workspace(x):
    """A workspace output of a forward without keep_workspace: an empty 1-d tensor."""
    return x.new_empty(0)


def _kept(buffer):
    """Whether a forward kept its workspace: its buffers are [sL, bS, ...], not _no_workspace's."""
    return buffer.dim() == 3


def _grad_tensors(grads, x):
    """A backward pass's gradients as tensors, dL/dx first: one not computed (None, for
    input_grad=False) as an empty tensor."""
    dLdx, *others = grads
    return (_no_workspace(x) if dLdx is None else _tensor(dLdx), *(_tensor(g) for g in others))


def _gradient_like(weight, grad):
    """A weight's gradient with the weight's strides, as the backward operator's fake gives it
    (torch.empty_like(weight)): grad itself where they match, else a copy. On the CPU they match
    for torch's weights: the modules pass weight_ih.t() and weight_hh.t(), which cells reads
    where they are, writing their gradients in the same layout. The LSTM's Wproj =
    weight_hr.t() is the exception: cells copies it to read it and writes its gradient
    C-ordered, copied here into weight_hr's layout, in which torch's LSTM gives it."""
    if grad.stride() == weight.stride():
        return grad
    return torch.empty_like(weight).copy_(grad)


def _dLdx_like(x, input_grad):
    """The fake dL/dx of a backward operator: x's shape, or empty without input_grad."""
    return x.new_empty(x.shape) if input_grad else _no_workspace(x)


def _needed(grads, needs):
    """The gradients autograd asked for, None for the others."""
    return tuple(g if need else None for g, need in zip(grads, needs))


def _alias(t):
    """A tensor of a double backward's recomputation: a view of t where t requires grad (the
    result stays connected to t, for the next order), else a leaf that requires grad (what the
    derivatives are taken with respect to). Derivatives with respect to the view are those
    through this argument alone, not through another argument computed from t."""
    if t is None:
        return None
    return t.view_as(t) if t.requires_grad else t.detach().requires_grad_()


def _second_derivatives(recompute, params, grads, options, vs, needs):
    """The derivatives of a backward operator's results <vs, J(params)ᵀ grads> (J: the Jacobian
    of the time loop's differentiable outputs with respect to params) with respect to each
    of params and grads where needs says, None for the others.

    recompute(*params, *options) is the time loop in torch operations (cells._torch_recompute):
    its first derivatives are taken with create_graph=True and differentiated again, in a graph
    of their own, itself recorded when grad mode is on (create_graph=True): the results are
    differentiable again."""
    create_graph = torch.is_grad_enabled()
    wanted = [k for k, v in enumerate(vs) if v is not None]
    if not wanted:
        return (None,) * len(needs)
    with torch.enable_grad():
        tensors = [_alias(t) for t in (*params, *grads)]
        params, grads = tensors[:len(params)], tensors[len(params):]
        outputs = recompute(*params, *options)
        given = [(o, g) for o, g in zip(outputs, grads) if g is not None]
        firsts = torch.autograd.grad([o for o, _ in given], [params[k] for k in wanted],
                                     [g for _, g in given], create_graph=True,
                                     allow_unused=True)
        # None: a param the outputs do not depend on (x, where no row runs a step)
        terms = [(f, vs[k]) for f, k in zip(firsts, wanted) if f is not None]
        targets = [k for k, need in enumerate(needs) if need]
        if not terms or not targets:
            return (None,) * len(needs)
        seconds = torch.autograd.grad([f for f, _ in terms], [tensors[k] for k in targets],
                                      [v for _, v in terms], create_graph=create_graph,
                                      allow_unused=True)
    result = [None] * len(needs)
    for k, second in zip(targets, seconds):
        result[k] = second
    return tuple(result)


def _register_double_backward(op, recompute, n_params, n_grads, n_options):
    """Register the autograd formula of a backward operator: its arguments are the time loop's
    n_params differentiable inputs, the n_grads gradients of its differentiable outputs, then
    n_options that recompute(*params, *options) takes, then the workspace and input_grad; its
    results are the gradients of the params, in their order (dL/dx, the first, an empty tensor
    without input_grad: nothing depends on it).

    The formula is exact: it differentiates the recomputation twice (_second_derivatives), a
    Python loop over the time steps. It is recorded only where autograd records the backward
    operator, under backward(create_graph=True) or autograd.grad(create_graph=True): a plain
    backward runs with grad mode off and saves nothing for it."""
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*inputs[:n_params + n_grads])
        ctx.options = inputs[n_params + n_grads:n_params + n_grads + n_options]
        ctx.input_grad = inputs[-1]

    def backward(ctx, *vs):
        if not ctx.input_grad:
            vs = (None, *vs[1:])
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad
        seconds = _second_derivatives(recompute, saved[:n_params], saved[n_params:],
                                      ctx.options, vs, needs[:n_params + n_grads])
        return (*seconds, *(None for _ in needs[n_params + n_grads:]))

    op.register_autograd(backward, setup_context=setup_context)


# ---------------------------------------------------------------------------------------------
# The operators, generated from the families' declarations (cells/_families.py)
# ---------------------------------------------------------------------------------------------

class _Operator:
    """The time loop operator cells::<family>_time_loop of a declared family and its backward
    cells::<family>_time_loop_backward, their argument lists, bodies and fake implementations.

    The time loop takes the differentiable arrays (`params`: the declared arguments, then the
    operator's optional extra arrays), its options (`options`), seq_len, forward and
    keep_workspace; it returns the declared outputs, then the workspace's arrays other than h
    (empty tensors without keep_workspace). The backward takes the params, the gradients of the
    outputs (`grads`: dL/d<output>, each optional), the options, seq_len, forward, the
    workspace (h first) and input_grad; it returns the params' gradients in their order (dL/dx
    empty without input_grad; an absent extra array's empty)."""

    def __init__(self, declared):
        op = declared.torch
        self.declared, self.op = declared, op
        # the faces' workspace NamedTuple: cells.GruWorkspace, cells.LstmWorkspace, ...
        self.Workspace = getattr(cells, f"{declared.name.capitalize()}Workspace")
        self.arguments = [a.name for a in declared.arguments]
        self.params = [*self.arguments, *op.extra_params]
        self.weights = {a.name for a in declared.arguments if a.kind == "weight"}
        self.weights.update(op.extra_params)
        self.options = [name for name, _ in op.extra_options]
        self.grads = [f"dLd{name}" for name in declared.outputs]
        self.kept = [name for name in declared.workspace if name != "h"]

    def schemas(self):
        """The schemas of the time loop and of its backward."""
        params = [f"Tensor {n}" for n in self.arguments]
        params += [f"Tensor? {n}" for n in self.op.extra_params]
        options = [f"{kind} {name}" for name, kind in self.op.extra_options]
        call = [*options, "Tensor? seq_len", "bool forward"]
        results = len(self.declared.outputs) + len(self.kept)
        loop = (f"({', '.join([*params, *call, 'bool keep_workspace'])}) -> "
                f"({', '.join(['Tensor'] * results)})")
        grads = [f"Tensor? {g}" for g in self.grads]
        workspace = [f"Tensor {n}" for n in self.declared.workspace]
        backward = (f"({', '.join([*params, *grads, *call, *workspace, 'bool input_grad'])}) "
                    f"-> ({', '.join(['Tensor'] * len(self.params))})")
        return loop, backward

    def _call(self, named):
        """The time loop's keywords for an operator call's arguments `named`: the fixed and
        passed-through options, the extra arrays, seq_len, forward and n_threads."""
        x, units = named["x"], named[self.op.units].shape[1]
        extras = {n: _array(n, named[n]) for n in self.op.extra_params}
        return dict(self.op.options, **extras, **{n: named[n] for n in self.options},
                    seq_len=_lengths(named["seq_len"]), forward=named["forward"],
                    n_threads=_n_threads(self.declared, x, units))

    def _skipped(self, name, named):
        """Whether workspace array `name` is not kept for this call (an absent extra array)."""
        needed = self.op.optional_workspace.get(name)
        return needed is not None and named[needed] is None

    def run(self, *args):
        """The time loop operator's body."""
        named = dict(zip([*self.params, *self.options, "seq_len", "forward", "keep_workspace"],
                         args))
        x = named["x"]
        arrays = [_array(n, named[n]) for n in self.arguments]
        keep = named["keep_workspace"]
        time_loop = getattr(cells, self.declared.time_loop)   # looked up per call: patchable
        with on_openmp_pool():
            result = time_loop(*arrays, return_workspace=keep, **self._call(named))
        result = result if isinstance(result, tuple) else (result,)
        if not keep:
            return (*map(_tensor, result), *(_no_workspace(x) for _ in self.kept))
        *outputs, workspace = result
        kept = [getattr(workspace, n) for n in self.kept]
        return (*map(_tensor, outputs),
                *(_no_workspace(x) if a is None else _tensor(a) for a in kept))

    def fake(self, *args):
        """The time loop's fake: h [sL, bS, nState] (nState: hI's columns), each final state
        shaped as its initial one (hL as hI, cL as cI), the workspace's gates [sL, bS, G] and
        its other arrays [sL, bS, nOut]."""
        named = dict(zip([*self.params, *self.options, "seq_len", "forward", "keep_workspace"],
                         args))
        x, hI = named["x"], named["hI"]
        sL, bS, nOut = x.shape[0], x.shape[1], named[self.op.units].shape[1]
        outputs = [x.new_empty((sL, bS, hI.shape[1])) if n == "h"
                   else x.new_empty(named[n[:-1] + "I"].shape) for n in self.declared.outputs]
        if not named["keep_workspace"]:
            return (*outputs, *(_no_workspace(x) for _ in self.kept))
        G = self.declared.gates * nOut
        return (*outputs, *(_no_workspace(x) if self._skipped(n, named)
                            else x.new_empty((sL, bS, G if n == "gates" else nOut))
                            for n in self.kept))

    def _backward_names(self):
        return [*self.params, *self.grads, *self.options, "seq_len", "forward",
                *self.declared.workspace, "input_grad"]

    def run_backward(self, *args):
        """The backward operator's body: cells' Bp on the workspace (its consumed arrays
        copied: the saved tensors serve another backward), or recomputing the forward where
        none was kept."""
        named = dict(zip(self._backward_names(), args))
        x, call = named["x"], self._call(named)
        workspace = None
        if _kept(named["gates"]):
            arrays = {n: None if self._skipped(n, named)
                      else _consumable(n, named[n]) if n in self.declared.consumed
                      else _array(n, named[n]) for n in self.declared.workspace}
            workspace = self.Workspace(**arrays, seq_len=call["seq_len"],
                                       forward=call["forward"],
                                       **self.op.workspace_fields(named))
        dLdh, *others = (_array(g, named[g]) for g in self.grads)
        time_loop_bp = getattr(cells, self.declared.time_loop_bp)
        with on_openmp_pool():
            grads = time_loop_bp(*(_array(n, named[n]) for n in self.arguments), dLdh,
                                 **dict(zip(self.grads[1:], others)), workspace=workspace,
                                 input_grad=named["input_grad"], **call)
        dLdx, *declared = _grad_tensors(grads[:len(self.arguments)], x)
        # absent extra arrays have no field (LstmGrads has no dLdWproj)
        extras = [getattr(grads, f"dLd{n}", None) for n in self.op.extra_params]
        results = [dLdx, *declared, *(None if g is None else _tensor(g) for g in extras)]
        return tuple(_no_workspace(x) if g is None
                     else _gradient_like(named[n], g) if n in self.weights else g
                     for n, g in zip(self.params, results))

    def fake_backward(self, *args):
        """The backward's fake: each param's gradient shaped (a weight's: strided) as it."""
        named = dict(zip(self._backward_names(), args))
        x = named["x"]
        return (_dLdx_like(x, named["input_grad"]),
                *(_no_workspace(x) if named[n] is None
                  else torch.empty_like(named[n]) if n in self.weights
                  else named[n].new_empty(named[n].shape) for n in self.params[1:]))

    def setup_context(self, ctx, inputs, output):
        n = len(self.params)
        named = dict(zip([*self.params, *self.options, "seq_len", "forward", "keep_workspace"],
                         inputs))
        kept = output[len(self.declared.outputs):]
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*kept)
        ctx.save_for_backward(*inputs[:n], named["seq_len"], output[0], *kept)
        ctx.call = tuple(named[o] for o in self.options) + (named["forward"],)

    def backward(self, ctx, *output_grads):
        n, n_inputs = len(self.params), len(self.params) + len(self.options) + 3
        needs = ctx.needs_input_grad[:n]
        grads = output_grads[:len(self.grads)]
        if not any(needs) or all(g is None for g in grads):
            return (None,) * n_inputs
        *params, seq_len, h = ctx.saved_tensors[:n + 2]
        kept = ctx.saved_tensors[n + 2:]
        *options, forward = ctx.call
        results = self.backward_op(*params, *grads, *options, seq_len, forward, h, *kept,
                                   needs[0])
        return (*_needed(results, needs), *(None for _ in range(n_inputs - n)))

    def register(self):
        """Define both operators, their fakes and their autograd formulas."""
        name = self.declared.name
        loop_schema, backward_schema = self.schemas()
        loop = torch.library.custom_op(f"cells::{name}_time_loop", _on_torch_stream(self.run),
                                       mutates_args=(), schema=loop_schema)
        self.backward_op = torch.library.custom_op(
            f"cells::{name}_time_loop_backward", _on_torch_stream(self.run_backward),
            mutates_args=(), schema=backward_schema)
        loop.register_fake(self.fake)
        self.backward_op.register_fake(self.fake_backward)
        loop.register_autograd(self.backward, setup_context=self.setup_context)
        _register_double_backward(self.backward_op, getattr(_torch_recompute, name),
                                  len(self.params), len(self.grads), len(self.options) + 2)


def _register_operators():
    """Every declared family's operators (those with a cells.torch operator)."""
    for declared in _families.FAMILIES.values():
        if declared.torch is not None:
            _Operator(declared).register()


_register_operators()


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


def _call(net, x, state, seq_len=None):
    """net(x, state, seq_len=seq_len) on the threads cells chooses for the call, at most
    torch.get_num_threads() (which the net asks only for a call large enough to use two);
    x [sL, bS, nIn] or [bS, nIn], NumPy."""
    n_threads = net._default_threads(x.shape[-2], torch.get_num_threads)
    return net(x, state, seq_len=seq_len, n_threads=n_threads)


def _net_step(net, x, states):
    """One step of a prepared net on x [bS, nIn] from the initial states (tensors; None:
    zeros). Returns the states after it, as tensors."""
    start = None if states is None else net.State(*[s.numpy() for s in states])
    _, state = _call(net, x.numpy(), start)
    return tuple([torch.from_numpy(s) for s in state])


def _time_reversed(a, lengths):
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

def _keep_workspace(*tensors):
    """Whether autograd records a call on these tensors (None: not given): then the forward
    keeps its workspace."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


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


class _GruFamily(_Family):
    def _run(self, x, states, weights, lengths, forward):
        (hI,), (weight_ih, weight_hh, bias_ih, bias_hh, _) = states, weights
        b = x.new_zeros(weight_ih.shape[0]) if bias_ih is None else torch.stack([bias_ih, bias_hh])
        Wx, Wh = weight_ih.t(), weight_hh.t()
        h, _, _ = torch.ops.cells.gru_time_loop(x, hI, Wx, Wh, b, lengths, forward,
                                                _keep_workspace(x, hI, Wx, Wh, b))
        return h, (_final_state(h, lengths, forward),)

    def _prepare(self, weights, kind=None):
        return cells.gru.prepare(*_gru_rnn_weights(weights), linear_before_reset=True,
                                 weights=kind)


class _LstmFamily(_Family):
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
            _keep_workspace(x, Wx, Wr, b, hI, cI, Wproj))
        return h, (hL, cL)

    def _prepare(self, weights, kind=None):
        weight_ih, weight_hh, bias_ih, bias_hh, weight_hr = _numpy(weights)
        return cells.lstm.prepare(weight_ih.T, weight_hh.T,
                                  None if bias_ih is None else bias_ih + bias_hh,
                                  Wproj=None if weight_hr is None else weight_hr.T,
                                  weights=kind)


class _RnnFamily(_Family):
    def _run(self, x, states, weights, lengths, forward):
        (hI,), (weight_ih, weight_hh, bias_ih, bias_hh, _) = states, weights
        b = x.new_zeros(weight_ih.shape[0]) if bias_ih is None else torch.stack([bias_ih, bias_hh])
        Wx, Wh = weight_ih.t(), weight_hh.t()
        h, _ = torch.ops.cells.rnn_time_loop(x, hI, Wx, Wh, b, self.nonlinearity, lengths,
                                             forward, _keep_workspace(x, hI, Wx, Wh, b))
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
            _check_tensor(name, s)   # a dtype cells does not run: a TypeError, as for the input
            raise RuntimeError(f"{name}: expected dtype {dtype} (the input's), got {s.dtype}")


# ---------------------------------------------------------------------------------------------
# GRU, LSTM, RNN
# ---------------------------------------------------------------------------------------------

# A stack's weights of one layer and direction: these names followed by "_l{layer}", and
# "_reverse" for the reverse direction.
_WEIGHT_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


class _Stack:
    """forward() of torch.nn.GRU, LSTM and RNN on cells' time loops, layer by layer."""

    def forward(self, input, hx=None):
        states = None if hx is None else self._states(hx)
        served = self._served(input, states)
        if served is not None:
            return served
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            _check_tensor("input", data)
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
        _check_tensor("input", input)
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
        if nIn != self.input_size or sL == 0 or dtype not in _REAL_DTYPES:
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
        runs forward over each row's steps reversed (_time_reversed)."""
        seq_len = None if lengths is None else lengths.numpy()
        if len(nets) == 1:   # one layer, one direction: its net's call alone
            net = nets[0]
            start = None if states is None else net.State(*[s.numpy()[0] for s in states])
            h, final = _call(net, a, start, seq_len=seq_len)
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
                calls.append((net, a if d == 0 else _time_reversed(a, seq_len), start))
            # The directions at once, each on its share of torch's threads.
            outputs = []
            for d, (h, final) in enumerate(call_together(calls, seq_len,
                                                         torch.get_num_threads)):
                outputs.append(h if d == 0 else _time_reversed(h, seq_len))
                finals.append(final)
            a = outputs[0] if dirs == 1 else np.concatenate(outputs, axis=2)
        return a, tuple([torch.from_numpy(_stacked(f)) for f in zip(*finals)])


class GRU(_GruFamily, _Stack, torch.nn.GRU):
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


class LSTM(_LstmFamily, _Stack, torch.nn.LSTM):
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


class RNN(_RnnFamily, _Stack, torch.nn.RNN):
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

class _Cell:
    """forward() of torch.nn.GRUCell, LSTMCell and RNNCell: a time loop of one step."""

    def forward(self, input, hx=None):
        served = self._served(input, hx)
        if served is not None:
            return served
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        _check_tensor("input", input)
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
        if (type(input) is not Tensor or input.dim() != 2 or input.dtype not in _REAL_DTYPES
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


class GRUCell(_GruFamily, _Cell, torch.nn.GRUCell):
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


class LSTMCell(_LstmFamily, _Cell, torch.nn.LSTMCell):
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


class RNNCell(_RnnFamily, _Cell, torch.nn.RNNCell):
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
            _check_tensor(name, t)
            if t.dim() != 2 or t.shape[1] != size or t.shape[0] != input.shape[0]:
                raise ValueError(f"{name}: expected shape [B, {size}] (B from input), got "
                                 f"{list(t.shape)}")
        nets = self._nets(input, old_h, old_cell)
        if nets is not None:
            return _net_step(nets[0], input, (old_h, old_cell))
        _, new_h, new_cell, _, _ = torch.ops.cells.lltm_time_loop(
            input[None], self.weights, self.bias, old_h, old_cell, None, True,
            _keep_workspace(input, self.weights, self.bias, old_h, old_cell))
        return new_h, new_cell

    def _served(self, input, old_h, old_cell):
        """forward of the common inference call, checked in a few comparisons, or None for any
        other call. The common call: CPU tensors of one dtype, float32 or float64, input
        [B, input_features] and the states [B, state_size], and a prepared net for it (_nets:
        no gradient needed, weights of the input's dtype). It passes every check of
        forward's; any other call goes through them all, which raise their errors."""
        if type(input) is not Tensor or input.dim() != 2 or input.dtype not in _REAL_DTYPES:
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


# ---------------------------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------------------------

_CELLS_CLASSES = {torch.nn.GRU: GRU, torch.nn.LSTM: LSTM, torch.nn.RNN: RNN,
                  torch.nn.GRUCell: GRUCell, torch.nn.LSTMCell: LSTMCell,
                  torch.nn.RNNCell: RNNCell}


def convert(module: torch.nn.Module) -> torch.nn.Module:
    """The cells-backed version of torch.nn recurrent modules.

    Parameters of a converted submodule are new tensors: create the optimizer after convert().

    Parameters
    ----------
    module : torch.nn.Module
        A torch.nn.GRU, LSTM, RNN, GRUCell, LSTMCell or RNNCell (exactly that class, not a
        subclass), or any other module.

    Returns
    -------
    torch.nn.Module
        For one of those six classes: a copy of it as cells.torch's class, with equal parameters
        (its own tensors), hooks and mode. For any other module: the module itself, every such
        submodule, at any depth, replaced in place by its copy (a submodule used at several
        places by one copy).

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    >>> model.rnn = torch.nn.GRU(4, 8)
    >>> type(ct.convert(model).rnn).__module__
    'cells.torch'
    """
    return _convert(module, {})


def _convert(module, converted):
    if id(module) in converted:
        return converted[id(module)]
    cells_class = _CELLS_CLASSES.get(type(module))
    if cells_class is not None:
        result = copy.deepcopy(module)
        result.__class__ = cells_class
    else:
        # every name of every child (named_children() skips a second name of one module)
        for name, child in list(module._modules.items()):
            if child is not None:
                setattr(module, name, _convert(child, converted))
        result = module
    converted[id(module)] = result
    return result


# ---------------------------------------------------------------------------------------------
# quantize_dynamic (cells/_torch_quantized.py: modules on int8 and bfloat16 prepared nets)
# ---------------------------------------------------------------------------------------------

from cells._torch_quantized import quantize_dynamic  # noqa: E402

__all__ += ["quantize_dynamic"]
