"""cells.torch's inference path: under torch.no_grad() or torch.inference_mode() (or with no
tensor that needs a gradient) a module runs on prepared nets kept on it, prepared again when a
weight changes; its results are torch's module's and those of the autograd path.

Tolerances: float64 to 1e-12 and float32 to 1e-5. The prepared nets, the time loop operators
and torch's kernels compute the same math in different summation orders: rounding of ~1e-16
(float64) or 6e-8 (float32) per operation, over sums of nIn + H <= 8 terms of size ~1 and
sequences of 5 steps; the largest differences of the stacks here are 6e-16 and 2e-7.
"""
import copy
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")

from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence  # noqa: E402

import cells  # noqa: E402
from cells._prepared import PreparedNet  # noqa: E402
from cells._threads import max_threads  # noqa: E402
from cells.torch import _modules as modules  # noqa: E402

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}
TORCH_CLASSES = {ct.GRU: torch.nn.GRU, ct.LSTM: torch.nn.LSTM, ct.RNN: torch.nn.RNN,
                 ct.GRUCell: torch.nn.GRUCell, ct.LSTMCell: torch.nn.LSTMCell,
                 ct.RNNCell: torch.nn.RNNCell}
FAMILIES = {ct.GRU: "gru", ct.LSTM: "lstm", ct.RNN: "rnn", ct.GRUCell: "gru",
            ct.LSTMCell: "lstm", ct.RNNCell: "rnn"}
NO_GRAD = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}
sL, bS, nIn, H = 5, 3, 4, 3
LENGTHS = [5, 2, 4]


def pair(cells_class, *args, dtype=torch.float64, **kwargs):
    """A torch module (seed 0) and the cells.torch one with its state_dict."""
    torch.manual_seed(0)
    reference = TORCH_CLASSES[cells_class](*args, dtype=dtype, **kwargs)
    module = cells_class(*args, dtype=dtype, **kwargs)
    module.load_state_dict(reference.state_dict())
    return reference, module


def flat(result):
    """The tensors of a module's result: output (a PackedSequence's data) and the states."""
    out = []
    for r in (result if isinstance(result, tuple) else (result,)):
        if isinstance(r, PackedSequence):
            out.append(r.data)
        elif isinstance(r, tuple):
            out.extend(r)
        else:
            out.append(r)
    return out


def assert_same(result, expected, dtype):
    tol = TOLERANCE[dtype]
    result, expected = flat(result), flat(expected)
    assert len(result) == len(expected)
    for a, b in zip(result, expected):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.fixture
def prepared(monkeypatch):
    """{family: the number of calls of cells.<family>.prepare}, counted from now."""
    calls = {}
    for family in ("gru", "lstm", "rnn", "lltm"):
        module = getattr(cells, family)

        def counting(*args, _prepare=module.prepare, _family=family, **kwargs):
            calls[_family] = calls.get(_family, 0) + 1
            return _prepare(*args, **kwargs)

        monkeypatch.setattr(module, "prepare", counting)
    return calls


@pytest.fixture
def torch_threads():
    """torch.set_num_threads, restored after the test."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


# (class, kwargs, input kind, initial states given, dtype)
STACK_CASES = [
    (ct.GRU, dict(num_layers=2, bidirectional=True), "padded", True, torch.float64),
    (ct.GRU, dict(num_layers=2, batch_first=True), "padded", False, torch.float32),
    (ct.GRU, dict(num_layers=2, bidirectional=True, bias=False), "packed_unsorted", True,
     torch.float64),
    (ct.LSTM, dict(num_layers=2, bidirectional=True, batch_first=True), "padded", True,
     torch.float64),
    (ct.LSTM, dict(num_layers=2, bidirectional=True), "padded", False, torch.float32),
    (ct.LSTM, dict(num_layers=2, proj_size=2, bidirectional=True), "padded", True,
     torch.float64),
    (ct.LSTM, dict(num_layers=2, proj_size=2, bidirectional=True, batch_first=True),
     "packed_unsorted", True, torch.float64),
    (ct.LSTM, dict(num_layers=2, bias=False), "packed_sorted", False, torch.float64),
    (ct.LSTM, dict(num_layers=1, bidirectional=True), "unbatched", True, torch.float64),
    (ct.RNN, dict(num_layers=2, bidirectional=True), "padded", True, torch.float64),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu", batch_first=True), "padded", True,
     torch.float32),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu", bidirectional=True), "packed_unsorted",
     False, torch.float64),
]


def stack_call(cells_class, kwargs, kind, given, dtype):
    """(input, hx or None) of a stack case."""
    batch_first = kwargs.get("batch_first", False)
    dirs = 2 if kwargs.get("bidirectional") else 1
    sizes = (kwargs.get("proj_size") or H, H) if cells_class is ct.LSTM else (H,)
    torch.manual_seed(2)
    batch = () if kind == "unbatched" else (bS,)
    x = torch.randn(*((bS, sL) if batch_first and batch else (sL, *batch)), nIn, dtype=dtype)
    states = [torch.randn(kwargs["num_layers"] * dirs, *batch, size, dtype=dtype)
              for size in sizes] if given else []
    if kind.startswith("packed"):
        lengths = sorted(LENGTHS, reverse=True) if kind == "packed_sorted" else LENGTHS
        x = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first,
                                 enforce_sorted=kind == "packed_sorted")
    hx = (tuple(states) if cells_class is ct.LSTM else states[0]) if given else None
    return x, hx


@pytest.mark.parametrize("mode", NO_GRAD)
@pytest.mark.parametrize("cells_class, kwargs, kind, given, dtype", STACK_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_stack_on_prepared_nets(prepared, cells_class, kwargs, kind, given, dtype, mode):
    reference, module = pair(cells_class, nIn, H, **kwargs, dtype=dtype)
    x, hx = stack_call(cells_class, kwargs, kind, given, dtype)
    args = (x,) if hx is None else (x, hx)
    autograd = module(*args)   # the parameters need gradients: the time loop operators
    assert prepared == {}
    with NO_GRAD[mode]():
        result = module(*args)
        expected = reference(*args)
    dirs = 2 if kwargs.get("bidirectional") else 1
    assert prepared == {FAMILIES[cells_class]: kwargs["num_layers"] * dirs}
    assert not any(t.requires_grad for t in flat(result))
    assert_same(result, expected, dtype)
    assert_same(result, autograd, dtype)


CELL_CASES = [
    (ct.GRUCell, dict(), True, torch.float64),
    (ct.GRUCell, dict(bias=False), False, torch.float32),
    (ct.LSTMCell, dict(), True, torch.float64),
    (ct.LSTMCell, dict(bias=False), False, torch.float64),
    (ct.RNNCell, dict(nonlinearity="relu"), True, torch.float32),
    (ct.RNNCell, dict(), False, torch.float64),
]


@pytest.mark.parametrize("mode", NO_GRAD)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("cells_class, kwargs, given, dtype", CELL_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_cell_on_prepared_nets(prepared, cells_class, kwargs, given, dtype, batched, mode):
    reference, module = pair(cells_class, nIn, H, **kwargs, dtype=dtype)
    torch.manual_seed(2)
    batch = (bS,) if batched else ()
    args = [torch.randn(*batch, nIn, dtype=dtype)]
    if given:
        states = [torch.randn(*batch, H, dtype=dtype)
                  for _ in range(2 if cells_class is ct.LSTMCell else 1)]
        args.append(tuple(states) if cells_class is ct.LSTMCell else states[0])
    autograd = module(*args)
    with NO_GRAD[mode]():
        result = module(*args)
        expected = reference(*args)
    assert prepared == {FAMILIES[cells_class]: 1}
    assert_same(result, expected, dtype)
    assert_same(result, autograd, dtype)


@pytest.mark.parametrize("mode", NO_GRAD)
def test_lltm_on_a_prepared_net(prepared, mode):
    torch.manual_seed(0)
    module = ct.LLTM(nIn, H).double()
    args = (torch.randn(bS, nIn, dtype=torch.float64),
            (torch.randn(bS, H, dtype=torch.float64), torch.randn(bS, H, dtype=torch.float64)))
    autograd = module(*args)
    with NO_GRAD[mode]():
        result = module(*args)
    assert prepared == {"lltm": 1}
    assert_same(result, autograd, torch.float64)


def test_no_parameter_needs_a_gradient(prepared):
    """Grad mode on, but nothing requires grad: the prepared nets run too."""
    reference, module = pair(ct.GRU, nIn, H, num_layers=2)
    module.requires_grad_(False)
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    assert_same(module(x), reference(x), torch.float64)
    assert prepared == {"gru": 2}
    assert_same(module(x.requires_grad_()), reference(x), torch.float64)
    assert prepared == {"gru": 2}   # an input that needs a gradient: the time loop operators


# ---------------------------------------------------------------------------------------------
# The nets kept on the module, and prepared again when a weight changes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cells_class", [ct.GRU, ct.LSTM, ct.RNN])
def test_prepared_once_then_again_after_a_write(prepared, cells_class):
    reference, module = pair(cells_class, nIn, H, num_layers=2, bidirectional=True)
    family = FAMILIES[cells_class]
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    with torch.inference_mode():
        first = module(x)
        assert_same(module(x), first, torch.float64)
    assert prepared == {family: 4}
    with torch.no_grad():
        module.weight_hh_l0.add_(1e-3)
        reference.weight_hh_l0.add_(1e-3)
    with torch.inference_mode():
        changed = module(x)
        assert_same(changed, reference(x), torch.float64)
    assert prepared == {family: 5}   # layer 0's forward direction alone
    assert not torch.allclose(changed[0], first[0], rtol=0, atol=1e-6)


def test_load_state_dict_and_dtype_moves_are_seen(prepared):
    _, module = pair(ct.LSTM, nIn, H, num_layers=2)
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    with torch.no_grad():
        module(x)
        torch.manual_seed(7)
        other = torch.nn.LSTM(nIn, H, num_layers=2, dtype=torch.float64)
        module.load_state_dict(other.state_dict())
        assert_same(module(x), other(x), torch.float64)
        assert prepared == {"lstm": 4}
        module.float()
        assert_same(module(x.float()), other.float()(x.float()), torch.float32)
        assert prepared == {"lstm": 6}
        module.weight_ih_l1 = torch.nn.Parameter(torch.zeros_like(module.weight_ih_l1))
        other.weight_ih_l1 = torch.nn.Parameter(torch.zeros_like(other.weight_ih_l1))
        assert_same(module(x.float()), other(x.float()), torch.float32)
        assert prepared == {"lstm": 7}


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
def test_inference_after_training_steps(optimizer):
    torch.manual_seed(0)
    module = ct.LSTM(nIn, H, num_layers=2, bidirectional=True, dtype=torch.float64)
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    with torch.inference_mode():
        before = module(x)[0]
    step = optimizer(module.parameters(), lr=0.1)
    for _ in range(2):
        step.zero_grad()
        module(x)[0].square().sum().backward()
        step.step()
    reference = torch.nn.LSTM(nIn, H, num_layers=2, bidirectional=True, dtype=torch.float64)
    reference.load_state_dict(module.state_dict())
    with torch.inference_mode():
        after = module(x)
        assert_same(after, reference(x), torch.float64)
    assert not torch.allclose(after[0], before, rtol=0, atol=1e-6)


def test_copies_prepare_their_own(prepared):
    """pickle and deepcopy leave the nets behind; the copies prepare their own."""
    _, module = pair(ct.GRU, nIn, H, bidirectional=True)
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    size = len(pickle.dumps(module))
    with torch.no_grad():
        expected = module(x)
    assert "_prepared_nets" in module.__dict__
    assert len(pickle.dumps(module)) == size
    for other in (pickle.loads(pickle.dumps(module)), copy.deepcopy(module)):
        assert "_prepared_nets" not in other.__dict__
        with torch.no_grad():
            assert_same(other(x), expected, torch.float64)
    assert prepared == {"gru": 6}


def test_inference_tensor_weights_run_on_the_operators(prepared):
    """A module made under inference_mode has inference tensors for weights, which have no
    version counter: it runs on the time loop operators."""
    torch.manual_seed(0)
    with torch.inference_mode():
        module = ct.GRU(nIn, H, dtype=torch.float64)
    reference = torch.nn.GRU(nIn, H, dtype=torch.float64)
    reference.load_state_dict(module.state_dict())
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    with torch.inference_mode():
        assert_same(module(x), reference(x), torch.float64)
    assert prepared == {}


def test_dropout_in_training_mode_without_gradients():
    """Training mode under no_grad: the same dropout masks as the autograd path draws."""
    torch.manual_seed(0)
    module = ct.LSTM(nIn, H, num_layers=3, dropout=0.5, dtype=torch.float64)
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    torch.manual_seed(5)
    autograd = module(x)
    torch.manual_seed(5)
    with torch.no_grad():
        result = module(x)
    assert_same(result, autograd, torch.float64)


# ---------------------------------------------------------------------------------------------
# Threads: torch.get_num_threads() is a ceiling
# ---------------------------------------------------------------------------------------------

def recording(monkeypatch, owner, name):
    """The n_threads of every call of owner.name, from now."""
    seen = []
    function = getattr(owner, name)

    def record(*args, **kwargs):
        seen.append(kwargs["n_threads"])
        return function(*args, **kwargs)

    monkeypatch.setattr(owner, name, record)
    return seen


def test_a_small_inference_call_runs_on_one_thread(monkeypatch, torch_threads):
    small, large = ct.LSTM(32, 32, num_layers=2), ct.LSTM(128, 128)
    seen = recording(monkeypatch, PreparedNet, "__call__")
    torch_threads(2)
    with torch.inference_mode():
        small(torch.randn(10, 1, 32))     # B=1, H=32: one thread per layer
        large(torch.randn(2, 64, 128))    # B=64, H=128: work for more threads than torch's 2
        torch_threads(1)
        large(torch.randn(2, 64, 128))
    assert seen == [1, 1, 2, 1]


def test_torch_threads_bound_the_time_loops(monkeypatch, torch_threads):
    """The autograd path: cells' own choice (the work of a step), at most torch's."""
    seen = recording(monkeypatch, cells, "gruTimeLoop")
    x = torch.randn(sL, 8, 64)
    torch_threads(2)
    ct.GRU(64, 16)(x)            # 16 units: one thread
    ct.GRU(64, 64)(x)            # 8·3·64·128 multiply-adds a step: 3 threads, torch's 2 allow 2
    ct.GRU(64, 64)(x[:, :1])     # a row: one thread
    torch_threads(1)
    ct.GRU(64, 64)(x)
    assert seen == [1, min(2, max_threads()), 1, 1]


# ---------------------------------------------------------------------------------------------
# The common call (_served): the bare net's bits, checked in a few comparisons, torch's errors
# ---------------------------------------------------------------------------------------------

def bare_net(module):
    """The prepared net of a one-layer module's weights, prepared as the module prepares its
    own: the bits its call must give."""
    if isinstance(module, ct.LLTM):
        return cells.lltm.prepare(module.weights.detach().numpy(), module.bias.detach().numpy())
    suffix = "_l0" if isinstance(module, modules.Stack) else ""
    weight_ih, weight_hh, bias_ih, bias_hh = (
        getattr(module, name + suffix).detach().numpy()
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    if isinstance(module, modules.LstmFamily):
        return cells.lstm.prepare(weight_ih.T, weight_hh.T, bias_ih + bias_hh)
    b = np.stack([bias_ih, bias_hh])
    if isinstance(module, modules.GruFamily):
        return cells.gru.prepare(weight_ih.T, weight_hh.T, b, linear_before_reset=True)
    return cells.rnn.prepare(weight_ih.T, weight_hh.T, b, activation=module.nonlinearity)


@pytest.fixture
def full_checks(monkeypatch):
    """A list that records each call that goes through forward's full checks (the input's
    check_tensor, which every module's full path makes first), from now."""
    calls = []

    def recording(name, t, _check=modules.check_tensor):
        calls.append(name)
        return _check(name, t)

    monkeypatch.setattr(modules, "check_tensor", recording)
    return calls


def without_served(monkeypatch):
    """Every module's forward through its full checks, from now."""
    for owner in (modules.Stack, modules.Cell, ct.LLTM):
        monkeypatch.setattr(owner, "_served", lambda self, *args: None)


def one_step(cells_class, B, batch_first, dtype, steps=1):
    """A one-layer module (seed 0; a cell or the LLTM for cells_class), an input and initial
    states, random: for a stack x [steps, B, nIn] ([B, steps, nIn] with batch_first) and states
    [1, B, H]; for a cell x [B, nIn] and states [B, H]."""
    torch.manual_seed(0)
    if cells_class is ct.LLTM:
        module = ct.LLTM(nIn, H).to(dtype)
    elif issubclass(cells_class, modules.Stack):
        module = cells_class(nIn, H, batch_first=batch_first, dtype=dtype)
    else:
        module = cells_class(nIn, H, dtype=dtype)
    batch = (1, B) if isinstance(module, modules.Stack) else (B,)
    x = torch.randn(*((steps, B) if len(batch) == 2 else batch), nIn, dtype=dtype)
    states = [torch.randn(*batch, H, dtype=dtype)
              for _ in range(2 if cells_class in (ct.LSTM, ct.LSTMCell, ct.LLTM) else 1)]
    if batch_first:
        x = x.transpose(0, 1).contiguous()
    return module, x, states


def as_hx(module, states):
    """The states as forward takes them: a tuple for the LSTM and the LLTM, else a tensor."""
    return tuple(states) if len(states) == 2 else states[0]


def carried_calls(module, x, hx, calls=2):
    """`calls` calls of the module on x, each from the states the previous one returned (hx
    None: the first from zeros). Returns every call's result, as flat tensors."""
    results = []
    for _ in range(calls):
        result = module(x) if hx is None else module(x, hx)
        hx = result[1] if isinstance(module, modules.Stack) else result
        results.append(flat(result))
    return results


def net_calls(net, x, states, stack, batch_first, calls=2):
    """What carried_calls gives, from the bare net: h and the states of each call, as arrays
    shaped as the module's results (an LLTM and a cell return their states alone)."""
    a = x.detach().numpy()
    if batch_first:
        a = a.swapaxes(0, 1)
    state = None if states is None else net.State(*[s.numpy()[0] if stack else s.numpy()
                                                    for s in states])
    results = []
    for _ in range(calls):
        h, state = net(a, state)
        if stack:
            results.append([h.swapaxes(0, 1) if batch_first else h,
                            *(s[None] for s in state)])
        else:
            results.append(list(state))
    return results


# (class, B, batch_first, steps, hx given): one step at B = 1 and 3, batch_first, a chunk of
# 4 steps, each with hx and without (the LLTM's forward takes its states)
SERVED_CASES = [(cls, *case, given) for cls in (ct.LSTM, ct.GRU, ct.RNN)
                for case in ((1, False, 1), (3, False, 1), (3, True, 1), (3, True, 4))
                for given in (True, False)]
SERVED_CASES += [(cls, B, False, 1, given) for cls in (ct.LSTMCell, ct.GRUCell, ct.RNNCell)
                 for B in (1, 3) for given in (True, False)]
SERVED_CASES += [(ct.LLTM, B, False, 1, True) for B in (1, 3)]


@pytest.mark.parametrize("mode", NO_GRAD)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cells_class, B, batch_first, steps, given", SERVED_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_the_common_call_gives_the_bare_nets_bits(monkeypatch, full_checks, cells_class, B,
                                                  batch_first, steps, given, dtype, mode):
    """The common serving call, the state carried from call to call, takes the short path (no
    full checks) and gives the bits of the bare net prepared from the module's weights, and of
    the full path."""
    module, x, states = one_step(cells_class, B, batch_first, dtype, steps)
    hx = as_hx(module, states) if given else None
    stack = isinstance(module, modules.Stack)
    with NO_GRAD[mode]():
        served = carried_calls(module, x, hx)
        assert full_checks == []
        without_served(monkeypatch)
        checked = carried_calls(module, x, hx)
        assert full_checks
    expected = net_calls(bare_net(module), x, states if given else None, stack, batch_first)
    for result, full, bits in zip(served, checked, expected):
        assert len(result) == len(full) == len(bits)
        for a, b, c in zip(result, full, bits):
            assert a.dtype == dtype and a.shape == c.shape and a.stride() == b.stride()
            assert torch.equal(a, b) and np.array_equal(a.numpy(), c)


@pytest.mark.parametrize("cells_class", [ct.LSTM, ct.GRUCell, ct.LLTM])
def test_tensors_that_require_grad_take_the_common_call_under_no_grad(full_checks,
                                                                     cells_class):
    """Under no_grad, an input and states that require grad take the short path too (.numpy()
    takes them without a detach); nothing returned requires grad."""
    module, x, states = one_step(cells_class, 2, False, torch.float64)
    hx = as_hx(module, states)
    with torch.no_grad():
        expected = carried_calls(module, x, hx, calls=1)
        x.requires_grad_()
        for s in states:
            s.requires_grad_()
        result = carried_calls(module, x, as_hx(module, states), calls=1)
    assert full_checks == []
    for a, b in zip(result[0], expected[0]):
        assert torch.equal(a, b) and not a.requires_grad


@pytest.mark.parametrize("mode", NO_GRAD)
def test_a_stack_of_layers_takes_the_common_call(full_checks, mode):
    """Two layers, both directions: the short path's checks, then every layer's nets."""
    reference, module = pair(ct.LSTM, nIn, H, num_layers=2, bidirectional=True,
                             batch_first=True)
    x, hx = stack_call(ct.LSTM, dict(num_layers=2, bidirectional=True, batch_first=True),
                       "padded", True, torch.float64)
    with NO_GRAD[mode]():
        assert_same(module(x, hx), reference(x, hx), torch.float64)
    assert full_checks == []


def error(module, *args):
    """(type, message) of what module(*args) raises."""
    with pytest.raises(Exception) as info:
        module(*args)
    return info.type, str(info.value)


def stack_errors(cells_class):
    """{what is wrong: forward's arguments} for a one-layer stack (nIn, H) in float64."""
    def random(*shape, dtype=torch.float64):
        return torch.randn(*shape, dtype=dtype)

    n = 2 if cells_class is ct.LSTM else 1

    def hx(*states):
        return tuple(states) if n == 2 else states[0]

    good = [random(1, bS, H) for _ in range(n)]
    return {
        "input_size": (random(1, bS, nIn + 1), hx(*good)),
        "hx_batch": (random(1, bS, nIn), hx(*[random(1, bS + 1, H)] * n)),
        "last_hx_batch": (random(1, bS, nIn), hx(*good[:-1], random(1, bS + 1, H))),
        "hx_layers": (random(1, bS, nIn), hx(*[random(2, bS, H)] * n)),
        "hx_size": (random(1, bS, nIn), hx(*[random(1, bS, H + 1)] * n)),
        "hx_rank": (random(1, bS, nIn), hx(*[random(bS, H)] * n)),
        "input_rank": (random(1, bS, nIn, 1), hx(*good)),
        "input_1d": (random(nIn), hx(*good)),
        "unbatched_3d_hx": (random(1, nIn), hx(*good)),
        "zero_length": (random(0, bS, nIn), hx(*good)),
        "input_dtype": (random(1, bS, nIn, dtype=torch.float32), hx(*good)),
        "hx_dtype": (random(1, bS, nIn), hx(*[s.float() for s in good])),
        "input_float16": (random(1, bS, nIn, dtype=torch.float16), hx(*good)),
        "hx_not_a_tensor": (random(1, bS, nIn), hx(*[s.tolist() for s in good])),
    }


def cell_errors(cells_class):
    """{what is wrong: forward's arguments} for a cell (nIn, H) in float64."""
    def random(*shape, dtype=torch.float64):
        return torch.randn(*shape, dtype=dtype)

    n = 2 if cells_class is ct.LSTMCell else 1

    def hx(*states):
        return tuple(states) if n == 2 else states[0]

    good = [random(bS, H) for _ in range(n)]
    return {
        "input_size": (random(bS, nIn + 1), hx(*good)),
        "hx_batch": (random(bS, nIn), hx(*[random(bS + 1, H)] * n)),
        "last_hx_batch": (random(bS, nIn), hx(*good[:-1], random(bS + 1, H))),
        "hx_size": (random(bS, nIn), hx(*[random(bS, H + 1)] * n)),
        "hx_rank": (random(bS, nIn), hx(*[random(1, bS, H)] * n)),
        "input_rank": (random(1, bS, nIn), hx(*good)),
        "unbatched_2d_hx": (random(nIn), hx(*good)),
        "input_dtype": (random(bS, nIn, dtype=torch.float32), hx(*good)),
        "hx_dtype": (random(bS, nIn), hx(*[s.float() for s in good])),
        "input_float16": (random(bS, nIn, dtype=torch.float16), hx(*good)),
    }


# Where cells.torch's full checks raise another type than torch's module: a float16 input (a
# TypeError, documented); hx not tensors. A cell's unbatched input with batched states: torch's
# GRUCell and RNNCell raise a RuntimeError, cells.torch's full checks let the 3-D states reach
# the kernel (a ValueError), and torch's LSTMCell crashes the process (torch 2.13).
NOT_TORCHS = ("input_float16", "hx_not_a_tensor", "unbatched_2d_hx")
ERROR_CASES = [(cls, what) for cls in (ct.GRU, ct.LSTM, ct.RNN) for what in stack_errors(cls)]
ERROR_CASES += [(cls, what) for cls in (ct.GRUCell, ct.LSTMCell, ct.RNNCell)
                for what in cell_errors(cls)]


@pytest.mark.parametrize("mode", NO_GRAD)
@pytest.mark.parametrize("cells_class, what", ERROR_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_what_the_common_call_rejects_raises_as_before(monkeypatch, cells_class, what, mode):
    """Where the short path would run (no gradient needed), a wrong argument raises what the
    full checks raise, type and message, and the type torch's own module raises."""
    reference, module = pair(cells_class, nIn, H)
    torch.manual_seed(3)
    errors = stack_errors if issubclass(cells_class, modules.Stack) else cell_errors
    args = errors(cells_class)[what]
    with NO_GRAD[mode]():
        raised = error(module, *args)
        without_served(monkeypatch)
        assert raised == error(module, *args)
        if what not in NOT_TORCHS:
            assert raised[0] is error(reference, *args)[0]


@pytest.mark.parametrize("mode", NO_GRAD)
@pytest.mark.parametrize("what", ["input_size", "batch", "state_size", "rank", "dtype",
                                  "state_dtype", "device"])
def test_what_the_lltms_common_call_rejects_raises_as_before(monkeypatch, what, mode):
    """As for the stacks and the cells: the LLTM's full checks raise, type and message."""
    module = ct.LLTM(nIn, H).double()

    def random(*shape, dtype=torch.float64, device="cpu"):
        return torch.randn(*shape, dtype=dtype, device=device)

    x, h, c = random(bS, nIn), random(bS, H), random(bS, H)
    args = {"input_size": (random(bS, nIn + 1), (h, c)),
            "batch": (x, (h, random(bS + 1, H))),
            "state_size": (x, (random(bS, H + 1), c)),
            "rank": (random(1, bS, nIn), (h, c)),
            "dtype": (x.float(), (h, c)),
            "state_dtype": (x, (h, c.float())),
            "device": (x, (h, torch.zeros(bS, H, dtype=torch.float64, device="meta")))}[what]
    with NO_GRAD[mode]():
        raised = error(module, *args)
        without_served(monkeypatch)
        assert raised == error(module, *args)
