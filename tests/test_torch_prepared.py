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

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")

from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence  # noqa: E402

import cells  # noqa: E402
from cells._prepared import PreparedNet  # noqa: E402
from cells._threads import max_threads  # noqa: E402

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
    """The autograd path: cells' own choice (hidden units per thread), at most torch's."""
    seen = recording(monkeypatch, cells, "gruTimeLoop")
    x = torch.randn(sL, 1, 64)
    torch_threads(2)
    ct.GRU(64, 16)(x)            # 16 units: one thread
    ct.GRU(64, 64)(x)            # 64 units: up to 4 threads, as many as torch's 2 allow
    torch_threads(1)
    ct.GRU(64, 64)(x)
    assert seen == [1, min(2, max_threads()), 1]
