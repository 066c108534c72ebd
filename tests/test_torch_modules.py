"""cells.torch's modules against torch's own: outputs, final states and the gradients of the
input, the initial states and every parameter, with copied state_dicts.

float64 to 1e-10: both sides compute the same math with different summation orders (rounding
~1e-16 per operation over sequences of a few steps). float32 to 2e-5: the same orders at
float32's eps 6e-8, over sums of at most nIn + H + a few time steps of terms of size ~1 and
gradients summed over sL * bS ~ 20 terms, stays below 1e-5 here; 2e-5 leaves room.
"""
import io
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")

from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence  # noqa: E402

TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5}
TORCH_CLASSES = {ct.GRU: torch.nn.GRU, ct.LSTM: torch.nn.LSTM, ct.RNN: torch.nn.RNN,
                 ct.GRUCell: torch.nn.GRUCell, ct.LSTMCell: torch.nn.LSTMCell,
                 ct.RNNCell: torch.nn.RNNCell}
sL, bS, nIn, H = 5, 3, 4, 3
LENGTHS = [5, 2, 4]


def pair(cells_class, *args, dtype=torch.float64, **kwargs):
    """A torch module and the cells.torch one with its state_dict."""
    torch.manual_seed(0)
    reference = TORCH_CLASSES[cells_class](*args, dtype=dtype, **kwargs)
    module = cells_class(*args, dtype=dtype, **kwargs)
    module.load_state_dict(reference.state_dict())
    return reference, module


def leaves(tensors):
    """Copies of the tensors that require grad (the inputs of each module's run)."""
    return [t.detach().clone().requires_grad_() for t in tensors]


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


def compare(reference, module, make_input, states, dtype):
    """Run both modules on equal copies of the input and states, backpropagate the same random
    linear function of every result, compare results and all gradients."""
    tol = TOLERANCE[dtype]
    runs = []
    for m in (reference, module):
        x, *hx = leaves(states)
        args = (make_input(x), _hx(m, hx)) if hx else (make_input(x),)
        runs.append((m, x, hx, m(*args)))
    (_, x1, hx1, r1), (_, x2, hx2, r2) = runs
    outs1, outs2 = flat(r1), flat(r2)
    assert len(outs1) == len(outs2)
    torch.manual_seed(1)
    weights = [torch.randn_like(o) for o in outs1]
    for outs in (outs1, outs2):
        sum((w * o).sum() for w, o in zip(weights, outs)).backward()
    for a, b in zip(outs1, outs2):
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)
    for a, b in zip([x1, *hx1], [x2, *hx2]):
        torch.testing.assert_close(b.grad, a.grad, rtol=tol, atol=tol)
    for (name, p), q in zip(reference.named_parameters(), module.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=tol, atol=tol, msg=name)


def _hx(module, hx):
    """The states as the module's forward takes them: (h0, c0) for an LSTM, else h0."""
    return tuple(hx) if isinstance(module, (torch.nn.LSTM, torch.nn.LSTMCell)) else hx[0]


def random(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype)


# Each option at least twice: (class, kwargs, input kind, initial state given, dtype).
STACK_CASES = [
    (ct.GRU, dict(num_layers=1), "padded", True, torch.float64),
    (ct.GRU, dict(num_layers=2, bidirectional=True), "padded", False, torch.float64),
    (ct.GRU, dict(num_layers=2, bias=False, batch_first=True), "padded", True, torch.float64),
    (ct.GRU, dict(num_layers=2, bidirectional=True), "packed_unsorted", True, torch.float64),
    (ct.GRU, dict(num_layers=1, bidirectional=True), "unbatched", True, torch.float32),
    (ct.LSTM, dict(num_layers=1), "padded", True, torch.float32),
    (ct.LSTM, dict(num_layers=3, bidirectional=True, batch_first=True), "padded", True,
     torch.float64),
    (ct.LSTM, dict(num_layers=2, bias=False), "packed_sorted", True, torch.float64),
    (ct.LSTM, dict(num_layers=2, bidirectional=True), "packed_unsorted", False, torch.float64),
    (ct.LSTM, dict(num_layers=1, batch_first=True), "unbatched", False, torch.float64),
    (ct.LSTM, dict(num_layers=2, proj_size=2, bidirectional=True), "packed_unsorted", True,
     torch.float64),
    (ct.LSTM, dict(num_layers=3, proj_size=1, batch_first=True), "padded", True, torch.float32),
    (ct.LSTM, dict(num_layers=2, proj_size=2, bias=False), "packed_sorted", False,
     torch.float64),
    (ct.LSTM, dict(num_layers=1, proj_size=2, bidirectional=True), "unbatched", True,
     torch.float64),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu", bidirectional=True), "padded", True,
     torch.float64),
    (ct.RNN, dict(num_layers=1, bias=False, batch_first=True), "packed_unsorted", True,
     torch.float64),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu"), "packed_sorted", False, torch.float32),
    (ct.RNN, dict(num_layers=1, bidirectional=True), "unbatched", True, torch.float64),
]


@pytest.mark.parametrize("cells_class, kwargs, kind, given, dtype", STACK_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_stack_matches_torch(cells_class, kwargs, kind, given, dtype):
    reference, module = pair(cells_class, nIn, H, **kwargs, dtype=dtype)
    batch_first = kwargs.get("batch_first", False)
    dirs = 2 if kwargs.get("bidirectional") else 1
    # the last dimension of each initial state: h0 has proj_size columns with a projection
    sizes = (kwargs.get("proj_size") or H, H) if cells_class is ct.LSTM else (H,)
    torch.manual_seed(2)
    if kind == "unbatched":
        x = random(sL, nIn, dtype=dtype)
        batch = ()
    else:
        x = random(*((bS, sL) if batch_first else (sL, bS)), nIn, dtype=dtype)
        batch = (bS,)
    states = [x] + ([random(kwargs["num_layers"] * dirs, *batch, size, dtype=dtype)
                     for size in sizes] if given else [])
    lengths = sorted(LENGTHS, reverse=True) if kind == "packed_sorted" else LENGTHS

    def make_input(t):
        if kind.startswith("packed"):
            return pack_padded_sequence(t, torch.tensor(lengths), batch_first=batch_first,
                                        enforce_sorted=kind == "packed_sorted")
        return t

    compare(reference, module, make_input, states, dtype)


CELL_CASES = [
    (ct.GRUCell, dict(), True, True, torch.float64),
    (ct.GRUCell, dict(bias=False), False, False, torch.float32),
    (ct.GRUCell, dict(), False, True, torch.float64),
    (ct.LSTMCell, dict(), True, True, torch.float64),
    (ct.LSTMCell, dict(bias=False), True, False, torch.float64),
    (ct.LSTMCell, dict(), False, True, torch.float32),
    (ct.RNNCell, dict(nonlinearity="relu"), True, True, torch.float64),
    (ct.RNNCell, dict(bias=False), False, True, torch.float64),
    (ct.RNNCell, dict(nonlinearity="relu", bias=False), True, False, torch.float32),
]


@pytest.mark.parametrize("cells_class, kwargs, batched, given, dtype", CELL_CASES,
                         ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type)
                         else None)
def test_cell_matches_torch(cells_class, kwargs, batched, given, dtype):
    reference, module = pair(cells_class, nIn, H, **kwargs, dtype=dtype)
    n_states = 2 if cells_class is ct.LSTMCell else 1
    torch.manual_seed(2)
    batch = (bS,) if batched else ()
    states = [random(*batch, nIn, dtype=dtype)]
    if given:
        states += [random(*batch, H, dtype=dtype) for _ in range(n_states)]
    compare(reference, module, lambda t: t, states, dtype)


def lltm_reference(input, weights, bias, old_h, old_cell):
    """The LLTM tutorial's pure-PyTorch forward (autograd differentiates it)."""
    X = torch.cat([old_h, input], dim=1)
    gates = torch.addmm(bias, X, weights.t()).chunk(3, dim=1)
    input_gate = torch.sigmoid(gates[0])
    output_gate = torch.sigmoid(gates[1])
    candidate_cell = torch.nn.functional.elu(gates[2])
    new_cell = old_cell + candidate_cell * input_gate
    return torch.tanh(new_cell) * output_gate, new_cell


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_lltm_matches_the_tutorial(dtype):
    torch.manual_seed(0)
    module = ct.LLTM(nIn, H).to(dtype)
    assert module.weights.shape == (3 * H, nIn + H) and module.bias.shape == (3 * H,)
    tensors = [random(bS, nIn, dtype=dtype), random(bS, H, dtype=dtype),
               random(bS, H, dtype=dtype)]
    runs = []
    for run in (lambda x, h, c: module(x, (h, c)),
                lambda x, h, c: lltm_reference(x, module.weights, module.bias, h, c)):
        module.zero_grad()
        inputs = leaves(tensors)
        new_h, new_cell = run(*inputs)
        torch.manual_seed(1)
        (new_h * torch.randn_like(new_h) + new_cell * torch.randn_like(new_cell)).sum().backward()
        runs.append([new_h, new_cell] + [t.grad for t in inputs]
                    + [module.weights.grad.clone(), module.bias.grad.clone()])
    tol = TOLERANCE[dtype]
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------
# Dropout, threads
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cells_class", [ct.GRU, ct.LSTM])
def test_dropout_as_torch(cells_class):
    """torch's CPU stack draws one dropout mask per layer output but the last, as
    F.dropout does here: with the same seed the training outputs agree; eval mode and
    dropout=0 apply none."""
    reference, module = pair(cells_class, nIn, H, num_layers=3, dropout=0.5,
                             bidirectional=True)
    x = random(sL, bS, nIn)
    torch.manual_seed(5)
    y_ref = reference(x)[0]
    torch.manual_seed(5)
    y = module(x)[0]
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
    without = cells_class(nIn, H, num_layers=3, bidirectional=True, dtype=torch.float64)
    without.load_state_dict(module.state_dict())
    assert not torch.allclose(y, without(x)[0])
    module.eval()
    torch.testing.assert_close(module(x)[0], without(x)[0], rtol=0, atol=0)
    module.train()
    module.dropout = 0.0
    torch.testing.assert_close(module(x)[0], without(x)[0], rtol=0, atol=0)


def test_threads_from_torch():
    reference, module = pair(ct.GRU, nIn, H, num_layers=2)
    x = random(sL, bS, nIn)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = module(x)[0]
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(one, reference(x)[0], rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# nn.Module behaviour: state_dict, isinstance, repr, pickling, dtype moves, convert
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cells_class, kwargs", [
    (ct.GRU, dict(num_layers=2, bidirectional=True)), (ct.LSTM, dict(bias=False)),
    (ct.RNN, dict(nonlinearity="relu")), (ct.GRUCell, {}), (ct.LSTMCell, {}),
    (ct.RNNCell, dict(nonlinearity="relu"))])
def test_module_behaviour(cells_class, kwargs):
    reference, module = pair(cells_class, nIn, H, **kwargs)
    assert isinstance(module, TORCH_CLASSES[cells_class])
    assert repr(module) == repr(reference)
    assert [n for n, _ in module.named_parameters()] == [n for n, _ in
                                                        reference.named_parameters()]
    back = TORCH_CLASSES[cells_class](nIn, H, **kwargs, dtype=torch.float64)
    back.load_state_dict(module.state_dict())
    for a, b in zip(back.parameters(), reference.parameters()):
        assert torch.equal(a, b)
    x = random(sL, bS, nIn) if cells_class in (ct.GRU, ct.LSTM, ct.RNN) else random(bS, nIn)
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded) is cells_class
    for a, b in zip(flat(loaded(x)), flat(reference(x))):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert type(pickle.loads(pickle.dumps(module))) is cells_class
    single = module.float()
    assert single.weight_ih_l0.dtype == torch.float32 if hasattr(single, "weight_ih_l0") \
        else single.weight_ih.dtype == torch.float32
    for a, b in zip(flat(single(x.float())), flat(reference.float()(x.float()))):
        torch.testing.assert_close(a, b, rtol=2e-5, atol=2e-5)
    assert flat(single.double()(x))[0].dtype == torch.float64


def test_initialisation_is_torchs():
    torch.manual_seed(3)
    reference = torch.nn.LSTM(nIn, H, num_layers=2)
    torch.manual_seed(3)
    module = ct.LSTM(nIn, H, num_layers=2)
    for a, b in zip(module.parameters(), reference.parameters()):
        assert torch.equal(a, b)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(nIn, H, nonlinearity="relu", dtype=torch.float64)
        self.cell = torch.nn.GRUCell(H, H, dtype=torch.float64)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.cell(y[-1], h[0])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.stack = torch.nn.Sequential(torch.nn.Linear(H, nIn, dtype=torch.float64))
        self.lstm = torch.nn.LSTM(nIn, nIn, num_layers=2, dtype=torch.float64)
        self.again = self.lstm  # one module used twice

    def forward(self, x):
        y, _ = self.lstm(self.stack(self.encoder(x)).expand(sL, -1, -1))
        return self.again(y)[0]


def test_convert_a_model():
    torch.manual_seed(0)
    model = Model()
    x = random(sL, bS, nIn)
    expected = model(x)
    parameters = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert ct.convert(model) is model
    assert type(model.encoder.rnn) is ct.RNN and model.encoder.rnn.nonlinearity == "relu"
    assert type(model.encoder.cell) is ct.GRUCell and type(model.lstm) is ct.LSTM
    assert model.again is model.lstm
    assert type(model.stack[0]) is torch.nn.Linear
    for n, p in model.named_parameters():
        assert torch.equal(p, parameters[n])
    torch.testing.assert_close(model(x), expected, rtol=1e-10, atol=1e-10)


def test_convert_a_module_copies_it():
    reference = torch.nn.GRU(nIn, H, num_layers=2, batch_first=True)
    module = ct.convert(reference)
    assert type(module) is ct.GRU and type(reference) is torch.nn.GRU
    assert module.weight_ih_l1 is not reference.weight_ih_l1
    assert torch.equal(module.weight_ih_l1, reference.weight_ih_l1) and module.batch_first
    projected = ct.convert(torch.nn.LSTM(nIn, 4, proj_size=2))
    assert type(projected) is ct.LSTM and projected.weight_hr_l0.shape == (2, 4)


def test_import_cells_does_not_import_torch(tmp_path):
    code = "import cells, sys; assert 'torch' not in sys.modules"
    # run outside the source tree: `python -c` puts its working directory on sys.path
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


# ---------------------------------------------------------------------------------------------
# Errors: what torch rejects, with torch's exception type; what cells cannot run
# ---------------------------------------------------------------------------------------------

def raised(module, *args):
    with pytest.raises(Exception) as info:
        module(*args)
    return info.type


@pytest.mark.parametrize("args", [
    (random(sL, bS, nIn + 1),),                                  # wrong input size
    (random(sL, bS, nIn), random(1, bS + 1, H)),                 # wrong hx batch
    (random(sL, bS, nIn), random(2, bS, H)),                     # wrong hx layers
    (random(sL, bS, nIn), random(bS, H)),                        # 2-D hx for 3-D input
    (random(sL, bS, nIn, 1),),                                   # 4-D input
    (random(0, bS, nIn),),                                       # zero-length sequence
    (random(sL, bS, nIn).float(),),                              # input dtype != weights'
    (random(sL, bS, nIn), random(1, bS, H).float()),             # hx dtype != input's
], ids=["input_size", "hx_batch", "hx_layers", "hx_rank", "input_rank", "zero_length",
        "input_dtype", "hx_dtype"])
@pytest.mark.parametrize("cells_class", [ct.GRU, ct.RNN])
def test_stack_rejects_as_torch(cells_class, args):
    reference, module = pair(cells_class, nIn, H)
    assert raised(module, *args) is raised(reference, *args)


@pytest.mark.parametrize("args", [
    (random(sL, bS, nIn + 1),), (random(sL, bS, nIn), (random(1, bS, H), random(1, bS + 1, H))),
    (random(0, bS, nIn),)], ids=["input_size", "cx_batch", "zero_length"])
def test_lstm_rejects_as_torch(args):
    reference, module = pair(ct.LSTM, nIn, H)
    assert raised(module, *args) is raised(reference, *args)


@pytest.mark.parametrize("args", [
    (random(bS, nIn + 1),), (random(bS, nIn), random(bS + 1, H)), (random(bS, nIn),
                                                                   random(bS, H + 1)),
    (random(1, bS, nIn),), (random(bS, nIn), random(1, bS, H))],
    ids=["input_size", "hx_batch", "hx_size", "input_rank", "hx_rank"])
@pytest.mark.parametrize("cells_class", [ct.GRUCell, ct.RNNCell])
def test_cell_rejects_as_torch(cells_class, args):
    reference, module = pair(cells_class, nIn, H)
    assert raised(module, *args) is raised(reference, *args)


def test_unsupported_dtypes_and_devices():
    module = ct.GRU(nIn, H, dtype=torch.float16)
    with pytest.raises(TypeError, match="input: expected dtype torch.float32 or torch.float64"):
        module(torch.zeros(sL, bS, nIn, dtype=torch.float16))
    module = ct.GRU(nIn, H, device="meta")
    with pytest.raises(TypeError, match="input: expected a CPU or CUDA tensor, got device meta"):
        module(torch.zeros(sL, bS, nIn, device="meta"))
    cell = ct.LSTMCell(nIn, H)
    with pytest.raises(TypeError, match=r"hx\[1\]: expected a tensor on cpu \(the input's "
                                        r"device\), got meta"):
        cell(torch.zeros(bS, nIn), (torch.zeros(bS, H), torch.zeros(bS, H, device="meta")))
    with pytest.raises(TypeError, match="old_cell: expected dtype"):
        ct.LLTM(nIn, H)(torch.zeros(bS, nIn), (torch.zeros(bS, H),
                                               torch.zeros(bS, H, dtype=torch.int32)))
    with pytest.raises(ValueError, match=r"old_h: expected shape \[B, 3\]"):
        ct.LLTM(nIn, H)(torch.zeros(bS, nIn), (torch.zeros(bS, H + 1), torch.zeros(bS, H)))
