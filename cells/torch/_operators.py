"""cells.torch's custom operators: each declared family's time loop and its backward as
torch.library operators (cells::<family>_time_loop, cells::<family>_time_loop_backward), with
fake implementations and autograd formulas to any order, generated from the declarations
(cells/_families/); and the tensor helpers the modules and cells.haste share with them.

The operators are registered as this module is imported.
"""
import functools

import torch
from torch import Tensor

import cells
from cells import _arrays, cuda
from cells._families import FAMILIES
from cells._threads import on_openmp_pool, time_loop_threads
from cells.torch import _recompute

REAL_DTYPES = (torch.float32, torch.float64)


# ---------------------------------------------------------------------------------------------
# Tensors and arrays
# ---------------------------------------------------------------------------------------------

def check_tensor(name, t):
    """A TypeError unless t is a float32 or float64 tensor on the CPU or a CUDA device."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if not (t.is_cpu or t.is_cuda):
        raise TypeError(f"{name}: expected a CPU or CUDA tensor, got device {t.device}")
    if t.dtype not in REAL_DTYPES:
        raise TypeError(f"{name}: expected dtype torch.float32 or torch.float64, got {t.dtype}")


def _on_gpu(t):
    """Whether tensor t is one that cells' GPU backend runs: a CUDA tensor."""
    return t.is_cuda


def _array(name, t):
    """A checked tensor as an array sharing its memory (NumPy on the CPU, CuPy for a CUDA
    tensor, through DLPack); None stays None."""
    if t is None:
        return None
    check_tensor(name, t)
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


def call_threads(declared, x, nOut):
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


def keep_workspace(*tensors):
    """Whether autograd records a call on these tensors (None: not given): then the forward
    keeps its workspace."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def no_workspace(x):
    """A workspace output of a forward without keep_workspace: an empty 1-d tensor."""
    return x.new_empty(0)


def workspace_kept(buffer):
    """Whether a forward kept its workspace: its buffers are [sL, bS, ...], not no_workspace's."""
    return buffer.dim() == 3


def _grad_tensors(grads, x):
    """A backward pass's gradients as tensors, dL/dx first: one not computed (None, for
    input_grad=False) as an empty tensor."""
    dLdx, *others = grads
    return (no_workspace(x) if dLdx is None else _tensor(dLdx), *(_tensor(g) for g in others))


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


def dLdx_like(x, input_grad):
    """The fake dL/dx of a backward operator: x's shape, or empty without input_grad."""
    return x.new_empty(x.shape) if input_grad else no_workspace(x)


def needed(grads, needs):
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

    recompute(*params, *options) is the time loop in torch operations (cells.torch._recompute):
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


def register_double_backward(op, recompute, n_params, n_grads, n_options):
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
# The operators, generated from the families' declarations (cells/_families/)
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
                    n_threads=call_threads(self.declared, x, units))

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
            return (*map(_tensor, result), *(no_workspace(x) for _ in self.kept))
        *outputs, workspace = result
        kept = [getattr(workspace, n) for n in self.kept]
        return (*map(_tensor, outputs),
                *(no_workspace(x) if a is None else _tensor(a) for a in kept))

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
            return (*outputs, *(no_workspace(x) for _ in self.kept))
        G = self.declared.gates * nOut
        return (*outputs, *(no_workspace(x) if self._skipped(n, named)
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
        if workspace_kept(named["gates"]):
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
        return tuple(no_workspace(x) if g is None
                     else _gradient_like(named[n], g) if n in self.weights else g
                     for n, g in zip(self.params, results))

    def fake_backward(self, *args):
        """The backward's fake: each param's gradient shaped (a weight's: strided) as it."""
        named = dict(zip(self._backward_names(), args))
        x = named["x"]
        return (dLdx_like(x, named["input_grad"]),
                *(no_workspace(x) if named[n] is None
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
        return (*needed(results, needs), *(None for _ in range(n_inputs - n)))

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
        register_double_backward(self.backward_op, getattr(_recompute, name),
                                  len(self.params), len(self.grads), len(self.options) + 2)


def _register_operators():
    """Every declared family's operators (those with a cells.torch operator)."""
    for declared in FAMILIES.values():
        if declared.torch is not None:
            _Operator(declared).register()


_register_operators()
