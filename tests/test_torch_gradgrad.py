"""Second derivatives of cells.torch's operators and modules (double backward), float64.

torch.autograd.gradgradcheck compares the analytical second derivatives (the backward
operators' autograd formula: the plain-torch recomputation of cells/torch/_recompute.py) with
central differences of the first (cells' kernels), at gradgradcheck's own tolerances (eps 1e-6,
atol 1e-5, rtol 1e-3: differences of smooth functions of inputs ~1 in float64). For each
operator and option, every input and every incoming gradient, in full (every column of the
Jacobian); through the modules, with fast_mode (one random projection of it: a wrong entry
changes the projection with probability 1), where the full check would take minutes. Against
torch.nn's own modules (same state_dict), Hessian-vector products and a third derivative to
1e-10: the same math in other summation orders, rounding ~1e-16 relative per operation.

The relu RNN's inputs are scaled up to keep its pre-activations away from the kink, where
central differences are not derivatives.

Importing common_modules imports torch.testing._internal.common_utils, which calls
torch.backends.disable_global_flags() (see tests/test_torch_module_db.py).
"""
import functools

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")
pytest.importorskip("expecttest")  # common_utils needs it

from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence  # noqa: E402
from torch.testing._internal.common_modules import module_db  # noqa: E402

from test_torch_ops import LENGTHS, op_inputs  # noqa: E402

sL, bS, nIn, H = 3, 2, 2, 2


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny shapes (conftest.py)


def random(*shape):
    return torch.randn(*shape, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------
# The operators
# ---------------------------------------------------------------------------------------------

FAMILIES = ["gru", "lstm", "lstmp", "lltm", "tanh", "relu"]
# (seq_len, forward, keep_workspace, layout): the forward pass, the reverse direction over
# rows of their own lengths (a row of one step), and the backward recomputing the forward
# pass; the weights as the modules pass them (torch's layout) or C-ordered (cells')
OPTIONS = [(None, True, True, "torch"), (LENGTHS, False, True, "torch"),
           (LENGTHS, True, False, "cells")]


@pytest.mark.parametrize("lengths, forward, keep, layout", OPTIONS,
                         ids=["forward", "reverse_lengths", "recomputed"])
@pytest.mark.parametrize("family", FAMILIES)
def test_operator_gradgradcheck(family, lengths, forward, keep, layout):
    """Every differentiable input (x, the weights, the bias, hI and cI) and every output's
    incoming gradient (gradgradcheck's random grad_outputs require grad)."""
    op, tensors, options, n_outputs = op_inputs(family, layout=layout)
    if family == "relu":
        with torch.no_grad():
            tensors[0].mul_(3)
    given = [t for t in tensors if t is not None]   # the LSTM's Wproj None: no projection

    def outputs(*ts):
        args = (*ts, *tensors[len(ts):])
        return op(*args, *options, lengths, forward, keep)[:n_outputs]

    assert torch.autograd.gradgradcheck(outputs, given)


def test_third_order():
    """The second derivatives are differentiable: gradgradcheck of a function that is itself
    a gradient (an LSTM with projection over rows of their own lengths, in reverse)."""
    op, tensors, options, n_outputs = op_inputs("lstmp", layout="torch")
    weights = [random(*o.shape) for o in op(*tensors, *options, LENGTHS, False, True)[:3]]

    def gradient(*ts):
        outputs = op(*ts, *options, LENGTHS, False, True)[:n_outputs]
        loss = sum((w * o.tanh()).sum() for w, o in zip(weights, outputs))
        return torch.autograd.grad(loss, ts, create_graph=True)

    assert torch.autograd.gradgradcheck(gradient, tensors, fast_mode=True)


def test_backward_operator_opcheck():
    """torch.library's checks of a backward operator whose inputs require grad: its schema,
    fake and autograd registration (not test_aot_dispatch_dynamic, torch.compile's, which
    takes ten seconds here)."""
    op, tensors, options, n_outputs = op_inputs("lstmp", layout="torch")
    with torch.no_grad():
        out = op(*tensors, *options, LENGTHS, False, True)
    grads = tuple(torch.randn_like(o).requires_grad_() for o in out[:n_outputs])
    torch.library.opcheck(torch.ops.cells.lstm_time_loop_backward,
                          (*tensors, *grads, *options, LENGTHS, False, out[0], *out[n_outputs:],
                           True),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))


# ---------------------------------------------------------------------------------------------
# The modules
# ---------------------------------------------------------------------------------------------

def module_function(module, make_input, unpack):
    """A function of (input, initial states..., parameters...) -> the module's result tensors,
    and its parameters' names: gradgradcheck differentiates with respect to all of them."""
    names = [name for name, _ in module.named_parameters()]

    def run(x, *rest):
        states, params = rest[:len(rest) - len(names)], rest[len(rest) - len(names):]
        args = (make_input(x),) + ((unpack(states),) if states else ())
        result = torch.func.functional_call(module, dict(zip(names, params)), args)
        return tuple(flat(result))
    return run, [p.detach().clone().requires_grad_() for p in module.parameters()]


def flat(result):
    """The tensors of a module's result: the output (a PackedSequence's data), the states."""
    if isinstance(result, PackedSequence):
        return [result.data]
    if isinstance(result, tuple):
        return [t for r in result for t in flat(r)]
    return [result]


# (class, kwargs, input kind, initial states given)
STACK_CASES = [
    (ct.GRU, dict(num_layers=2, bidirectional=True), "padded", True),
    (ct.GRU, dict(bias=False, batch_first=True), "packed", False),
    (ct.LSTM, dict(num_layers=2, bidirectional=True, batch_first=True), "packed", True),
    (ct.LSTM, dict(num_layers=2, proj_size=1), "padded", True),
    (ct.LSTM, dict(proj_size=1, bidirectional=True), "packed", True),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu", bidirectional=True), "padded", True),
    (ct.RNN, dict(num_layers=2, batch_first=True), "packed", True),
]


@pytest.mark.parametrize("cells_class, kwargs, kind, given", STACK_CASES,
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_stack_gradgradcheck(cells_class, kwargs, kind, given):
    """num_layers=2, bidirectional, batch_first, proj_size, PackedSequence (rows of unsorted
    lengths), with and without initial states."""
    torch.manual_seed(0)
    module = cells_class(nIn, H, dtype=torch.float64, **kwargs)
    batch_first = kwargs.get("batch_first", False)
    x = random(*((bS, sL) if batch_first else (sL, bS)), nIn)
    if kwargs.get("nonlinearity") == "relu":
        x *= 3
    dirs = 2 if kwargs.get("bidirectional") else 1
    sizes = (kwargs.get("proj_size") or H, H) if cells_class is ct.LSTM else (H,)
    states = [random(kwargs.get("num_layers", 1) * dirs, bS, size) for size in sizes]

    def make_input(t):
        if kind == "packed":
            return pack_padded_sequence(t, torch.tensor([2, 3]), batch_first=batch_first,
                                        enforce_sorted=False)
        return t

    def unpack(s):
        return tuple(s) if cells_class is ct.LSTM else s[0]

    run, params = module_function(module, make_input, unpack)
    inputs = [x, *(states if given else []), *params]
    inputs = [t.detach().requires_grad_() for t in inputs]
    assert torch.autograd.gradgradcheck(run, inputs, fast_mode=True)


@pytest.mark.parametrize("cells_class, kwargs", [
    (ct.GRUCell, {}), (ct.LSTMCell, dict(bias=False)), (ct.RNNCell, dict(nonlinearity="relu")),
    (ct.RNNCell, {})], ids=["GRUCell", "LSTMCell", "RNNCell-relu", "RNNCell-tanh"])
def test_cell_gradgradcheck(cells_class, kwargs):
    torch.manual_seed(0)
    module = cells_class(nIn, H, dtype=torch.float64, **kwargs)
    x = random(bS, nIn) * (3 if kwargs.get("nonlinearity") == "relu" else 1)
    states = [random(bS, H) for _ in range(2 if cells_class is ct.LSTMCell else 1)]
    run, params = module_function(module, lambda t: t,
                                  lambda s: tuple(s) if cells_class is ct.LSTMCell else s[0])
    inputs = [t.requires_grad_() for t in (x, *states, *params)]
    assert torch.autograd.gradgradcheck(run, inputs, fast_mode=True)


def test_lltm_gradgradcheck():
    torch.manual_seed(0)
    module = ct.LLTM(nIn, H).double()
    run, params = module_function(module, lambda t: t, tuple)
    inputs = [t.requires_grad_() for t in (random(bS, nIn), random(bS, H), random(bS, H),
                                           *params)]
    assert torch.autograd.gradgradcheck(run, inputs, fast_mode=True)


# ---------------------------------------------------------------------------------------------
# torch's module_db inputs
# ---------------------------------------------------------------------------------------------

CELLS_CLASSES = {torch.nn.GRU: ct.GRU, torch.nn.LSTM: ct.LSTM, torch.nn.RNN: ct.RNN,
                 torch.nn.GRUCell: ct.GRUCell, torch.nn.LSTMCell: ct.LSTMCell,
                 torch.nn.RNNCell: ct.RNNCell}
MODULE_INFOS = {info.module_cls: info for info in module_db if info.module_cls in CELLS_CLASSES}


@functools.cache
def module_db_inputs(info):
    """The float64 ModuleInputs of torch's module_db entry (eval mode: no dropout), from a
    fixed seed."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return info.module_inputs_func(info, device="cpu", dtype=torch.float64,
                                       requires_grad=True, training=False,
                                       with_packed_sequence=True)


# Every third input of each entry (47 of 135): the full set takes a minute on one core. The
# generators vary the constructor options (and whether hx is given) in a fixed nested order,
# each between two values; a stride of 3, prime to 2, visits each value of every option.
MODULE_DB_CASES = [pytest.param(cls, index, id=f"{cls.__name__}-{index}")
                   for cls, info in MODULE_INFOS.items()
                   for index in range(0, len(module_db_inputs(info)), 3)]


@pytest.mark.parametrize("torch_class, index", MODULE_DB_CASES)
def test_module_db_gradgradcheck(torch_class, index):
    """torch's generators' inputs (make_tensor's, uniform in [-9, 9]: saturated gates, relu
    pre-activations far from 0), through the cells.torch class: gradgradcheck over the forward
    arguments that require grad and every parameter."""
    module_input = module_db_inputs(MODULE_INFOS[torch_class])[index]
    constructor = module_input.constructor_input
    torch.manual_seed(0)
    module = CELLS_CLASSES[torch_class](*constructor.args, **constructor.kwargs)
    module = module.to(torch.float64).eval()
    leaves = []

    def collect(value):
        """value with its tensors that require grad replaced by a placeholder index."""
        if isinstance(value, PackedSequence):
            return value._replace(data=collect(value.data))
        if isinstance(value, tuple):
            return tuple(collect(v) for v in value)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            leaves.append(value.detach().clone().requires_grad_())
            return len(leaves) - 1
        return value

    template = collect(module_input.forward_input.args)

    def fill(value, tensors):
        if isinstance(value, PackedSequence):
            return value._replace(data=fill(value.data, tensors))
        if isinstance(value, tuple):
            return tuple(fill(v, tensors) for v in value)
        return tensors[value] if isinstance(value, int) else value

    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]

    def run(*tensors):
        args = fill(template, tensors[:len(leaves)])
        result = torch.func.functional_call(module, dict(zip(names, tensors[len(leaves):])),
                                            args)
        return tuple(flat(result))

    assert torch.autograd.gradgradcheck(run, [*leaves, *params], fast_mode=True)


# ---------------------------------------------------------------------------------------------
# Against torch.nn's modules
# ---------------------------------------------------------------------------------------------

TORCH_CLASSES = {ct.GRU: torch.nn.GRU, ct.LSTM: torch.nn.LSTM, ct.RNN: torch.nn.RNN,
                 ct.GRUCell: torch.nn.GRUCell, ct.LSTMCell: torch.nn.LSTMCell,
                 ct.RNNCell: torch.nn.RNNCell}


@pytest.mark.parametrize("cells_class, kwargs", [
    (ct.GRU, dict(num_layers=2, bidirectional=True)),
    (ct.LSTM, dict(num_layers=2, proj_size=1, bidirectional=True)),
    (ct.RNN, dict(nonlinearity="relu", bidirectional=True)),
    (ct.RNN, dict(num_layers=2)),
    (ct.GRUCell, {}), (ct.LSTMCell, {}), (ct.RNNCell, {}),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_hessian_vector_product_matches_torch(cells_class, kwargs):
    """The Hessian-vector product of a scalar loss with respect to the input and every
    parameter, and the derivative of <H v, w> (third order), equal torch.nn's module's with
    the same state_dict; a stack runs on a PackedSequence (rows of their own lengths)."""
    torch.manual_seed(0)
    reference = TORCH_CLASSES[cells_class](nIn, H, dtype=torch.float64, **kwargs)
    module = cells_class(nIn, H, dtype=torch.float64, **kwargs)
    module.load_state_dict(reference.state_dict())
    stack = cells_class in (ct.GRU, ct.LSTM, ct.RNN)
    x = random(sL, bS, nIn) if stack else random(bS, nIn)
    results = []
    for m in (reference, module):
        xi = x.clone().requires_grad_()
        wrt = [xi, *m.parameters()]
        torch.manual_seed(1)
        v, w = [random(*t.shape) for t in wrt], [random(*t.shape) for t in wrt]
        arg = pack_padded_sequence(xi, torch.tensor([3, 2]), enforce_sorted=False) if stack \
            else xi
        loss = sum(t.sin().sum() for t in flat(m(arg)))
        grads = torch.autograd.grad(loss, wrt, create_graph=True)
        hv = torch.autograd.grad(grads, wrt, v, create_graph=True)
        third = torch.autograd.grad(hv, wrt, w)
        results.append([*grads, *hv, *third])
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
