"""cells.torch.quantize_dynamic: torch's recurrent modules swapped for inference modules on
cells' int8 or bfloat16 prepared nets.

The quantized modules add no numerics: their outputs and final states are bit for bit those of
the same prepared nets run here layer by layer (the reverse direction on each row's steps
reversed), whatever the options and the input's form.

Tolerances against the float module (torch's initialisation, uniform in ±1/sqrt(H), inputs
N(0, 1), the shapes below): int8 quantizes each weight column to 127 steps of its largest value
and each product's rows to 127 steps of their range (7 bits), a relative error of about 0.4%
and 0.8% per term, bfloat16 rounds weights and rows to 8 bits of mantissa (0.2-0.4% per term,
without the rows' range). Over sums of nIn + H <= 32 terms of size <= 0.25, 6 steps and 2
layers, the largest differences of the cases here are 2.8e-2 (int8, the bidirectional RNN) and
3.9e-3 (bfloat16); the tests allow 6e-2 and 1e-2. On larger shapes (I = H = 256, 100 steps, 4
rows) the measured differences are 1.6e-2 (LSTM), 2.5e-2 (GRU) and 3.7e-2 (RNN) for int8, and
at most 7e-3 for bfloat16. torch's qint8 modules quantize each weight matrix with one scale and
the activations to 7 bits (reduce_range): further from the float module than cells' (2.1e-2
against 1.6e-2 for that LSTM, 3.1e-2 against 2.5e-2 for the GRU); here cells' and torch's
differ by at most 1.5e-2, and the test allows 3e-2.
"""
import copy
import pickle
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")

from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence  # noqa: E402

import cells  # noqa: E402
from cells.torch._quantized import (  # noqa: E402
    _FLOAT_CLASS, QuantizedGRU, QuantizedGRUCell, QuantizedLSTM, QuantizedLSTMCell, QuantizedRNN,
    QuantizedRNNCell)

DTYPES = {"int8": torch.qint8, "bfloat16": torch.bfloat16}
FLOAT_TOLERANCE = {"int8": 6e-2, "bfloat16": 1e-2}
TORCH_QINT8_TOLERANCE = 3e-2
sL, bS, nIn, H = 6, 3, 8, 16
LENGTHS = [6, 2, 4]
# torch's float LSTM with proj_size, on oneDNN's CPUs
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")
QUANTIZED = {torch.nn.GRU: QuantizedGRU, torch.nn.LSTM: QuantizedLSTM, torch.nn.RNN: QuantizedRNN,
             torch.nn.GRUCell: QuantizedGRUCell, torch.nn.LSTMCell: QuantizedLSTMCell,
             torch.nn.RNNCell: QuantizedRNNCell}


# ---------------------------------------------------------------------------------------------
# The reference: the prepared nets, run here layer by layer
# ---------------------------------------------------------------------------------------------

def numpy(t):
    return None if t is None else t.detach().numpy()


def prepare(module, suffix, kind):
    """The prepared net of one layer and direction of a float torch module (or cell: suffix
    ""), from its parameters as cells' functions take them."""
    w_ih, w_hh, b_ih, b_hh, w_hr = (numpy(getattr(module, f"{name}{suffix}", None))
                                    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                                 "weight_hr"))
    if isinstance(module, (torch.nn.LSTM, torch.nn.LSTMCell)):
        return cells.lstm.prepare(w_ih.T, w_hh.T, None if b_ih is None else b_ih + b_hh,
                                  Wproj=None if w_hr is None else w_hr.T, weights=kind)
    b = np.zeros(w_ih.shape[0], np.float32) if b_ih is None else np.stack([b_ih, b_hh])
    if isinstance(module, (torch.nn.GRU, torch.nn.GRUCell)):
        return cells.gru.prepare(w_ih.T, w_hh.T, b, linear_before_reset=True, weights=kind)
    return cells.rnn.prepare(w_ih.T, w_hh.T, b, activation=module.nonlinearity, weights=kind)


def reversed_rows(a, lengths):
    """a [sL, bS, n] with each row's first lengths[b] steps reversed (lengths None: all)."""
    out = a.copy()
    for b in range(a.shape[1]):
        n = a.shape[0] if lengths is None else lengths[b]
        out[:n, b] = a[:n, b][::-1]
    return out


def reference_stack(module, kind, x, states, lengths):
    """(outputs [sL, bS, dirs * H], final states [layers * dirs, bS, size]) of the float
    module's nets on x [sL, bS, nIn] (time-major, NumPy) from states (a list of arrays or
    None), each row over its lengths (None: all)."""
    dirs = 2 if module.bidirectional else 1
    finals = []
    for layer in range(module.num_layers):
        outputs = []
        for d in range(dirs):
            index = layer * dirs + d
            net = prepare(module, f"_l{layer}{'_reverse' if d else ''}", kind)
            start = None if states is None else net.State(*(s[index] for s in states))
            a = x if d == 0 else reversed_rows(x, lengths)
            h, state = net(np.ascontiguousarray(a), start, seq_len=lengths)
            outputs.append(h if d == 0 else reversed_rows(h, lengths))
            finals.append(state)
        x = np.concatenate(outputs, axis=2)
    return x, [np.stack(s) for s in zip(*finals)]


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

# (class, kwargs, input kind, initial states given)
STACK_CASES = [
    (torch.nn.GRU, dict(num_layers=2, bidirectional=True), "padded", True),
    (torch.nn.GRU, dict(num_layers=2, batch_first=True), "padded", False),
    (torch.nn.GRU, dict(num_layers=2, bidirectional=True, bias=False), "packed_unsorted", True),
    (torch.nn.GRU, dict(), "unbatched", False),
    (torch.nn.LSTM, dict(num_layers=2, bidirectional=True, batch_first=True), "padded", True),
    (torch.nn.LSTM, dict(num_layers=2, bidirectional=True, dropout=0.5), "padded", False),
    (torch.nn.LSTM, dict(num_layers=2, proj_size=5, bidirectional=True), "padded", True),
    (torch.nn.LSTM, dict(num_layers=2, proj_size=5, bidirectional=True, batch_first=True),
     "packed_unsorted", True),
    (torch.nn.LSTM, dict(num_layers=2, bias=False), "packed_sorted", False),
    (torch.nn.LSTM, dict(bidirectional=True, proj_size=4), "unbatched", True),
    (ct.LSTM, dict(num_layers=2, bidirectional=True), "packed_unsorted", True),
    (torch.nn.RNN, dict(num_layers=2, bidirectional=True), "padded", True),
    (torch.nn.RNN, dict(num_layers=2, nonlinearity="relu", batch_first=True, bias=False),
     "padded", True),
    (ct.RNN, dict(num_layers=2, nonlinearity="relu", bidirectional=True), "packed_unsorted",
     False),
]


def ids(v):
    return v.__name__ if isinstance(v, type) else None


def float_module(cls, *args, **kwargs):
    torch.manual_seed(0)
    return cls(*args, **kwargs).eval()


def lstm_like(module):
    return isinstance(module, (torch.nn.LSTM, torch.nn.LSTMCell))


def stack_call(module, kind, given):
    """(input, hx or None) of a stack case, and the reference's (x time-major, states,
    lengths) in NumPy."""
    batch_first, dirs = module.batch_first, 2 if module.bidirectional else 1
    sizes = (module.proj_size or H, H) if lstm_like(module) else (H,)
    torch.manual_seed(2)
    batch = () if kind == "unbatched" else (bS,)
    x = torch.randn(*((bS, sL) if batch_first and batch else (sL, *batch)), nIn)
    states = [torch.randn(module.num_layers * dirs, *batch, size) for size in sizes]
    time_major = x.transpose(0, 1) if batch_first and batch else x
    lengths = None
    if kind == "unbatched":
        time_major, ref_states = time_major[:, None], [s[:, None] for s in states]
    else:
        ref_states = states
    if kind.startswith("packed"):
        lengths = sorted(LENGTHS, reverse=True) if kind == "packed_sorted" else LENGTHS
        x = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first,
                                 enforce_sorted=kind == "packed_sorted")
        lengths = np.array(lengths)
    hx = (tuple(states) if lstm_like(module) else states[0]) if given else None
    reference = (time_major.numpy(), [s.numpy() for s in ref_states] if given else None, lengths)
    return x, hx, reference


def results(result, batch_first=False):
    """A stack's or cell's result as a list of tensors: the outputs (a PackedSequence padded,
    time-major), then the states."""
    out = []
    for r in (result if isinstance(result, tuple) else (result,)):
        if isinstance(r, PackedSequence):
            out.append(pad_packed_sequence(r)[0])
        elif isinstance(r, tuple):
            out.extend(r)
        else:
            out.append(r)
    return out


def stack_results(module, result, kind):
    """A stack's results in the reference's form: outputs [sL, bS, n], states [L, bS, n]."""
    y, *states = results(result)
    if kind == "unbatched":
        return [y[:, None], *(s[:, None] for s in states)]
    if module.batch_first and not kind.startswith("packed"):
        y = y.transpose(0, 1)
    return [y, *states]


def assert_bits(result, expected):
    assert len(result) == len(expected)
    for a, b in zip(result, expected):
        assert a.dtype == torch.float32
        b = torch.from_numpy(np.asarray(b))
        assert torch.equal(a, b), (a - b).abs().max()


def max_difference(result, expected):
    return max((a - b).abs().max().item() for a, b in zip(result, expected))


# ---------------------------------------------------------------------------------------------
# The quantized modules run their nets, bit for bit
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", DTYPES)
@pytest.mark.parametrize("cls, kwargs, input_kind, given", STACK_CASES, ids=ids)
def test_stack_runs_its_nets(cls, kwargs, input_kind, given, kind):
    module = float_module(cls, nIn, H, **kwargs)
    quantized = ct.quantize_dynamic(module, dtype=DTYPES[kind])
    assert type(quantized) is QUANTIZED[_FLOAT_CLASS[cls]]
    x, hx, (rx, rstates, lengths) = stack_call(module, input_kind, given)
    with torch.no_grad():
        result = quantized(x, hx)
    y, states = reference_stack(module, kind, rx, rstates, lengths)
    assert_bits(stack_results(module, result, input_kind), [y, *states])
    assert isinstance(result[0], PackedSequence) == input_kind.startswith("packed")


@pytest.mark.parametrize("kind", DTYPES)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given", [True, False])
@pytest.mark.parametrize("cls, kwargs", [
    (torch.nn.GRUCell, {}), (torch.nn.GRUCell, dict(bias=False)), (torch.nn.LSTMCell, {}),
    (ct.LSTMCell, dict(bias=False)), (torch.nn.RNNCell, dict(nonlinearity="relu")),
    (ct.RNNCell, {})], ids=ids)
def test_cell_runs_its_net(cls, kwargs, given, batched, kind):
    module = float_module(cls, nIn, H, **kwargs)
    quantized = ct.quantize_dynamic(module, dtype=DTYPES[kind])
    torch.manual_seed(3)
    x = torch.randn(bS, nIn)
    states = [torch.randn(bS, H) for _ in range(2 if lstm_like(module) else 1)]
    hx = (tuple(states) if lstm_like(module) else states[0]) if given else None
    net = prepare(module, "", kind)
    _, expected = net(x.numpy(), net.State(*(s.numpy() for s in states)) if given else None)
    if not batched:
        x, hx = x[0], None if hx is None else (
            tuple(s[0] for s in hx) if lstm_like(module) else hx[0])
        expected = [s[:1] for s in expected]
    with torch.no_grad():
        result = results(quantized(x, hx))
    assert_bits([r if batched else r[None] for r in result], expected)


def test_a_test_fails_on_a_wrong_net():
    """The bit-identity check sees a difference: the reference prepared from weights with one
    element moved by 0.05 (25 int8 steps of its column) does not match."""
    module = float_module(torch.nn.LSTM, nIn, H, num_layers=2, bidirectional=True)
    quantized = ct.quantize_dynamic(module)
    x, hx, (rx, rstates, lengths) = stack_call(module, "padded", True)
    with torch.no_grad():
        result = stack_results(module, quantized(x, hx), "padded")
        module.weight_hh_l1_reverse[0, 0] += 0.05
    y, states = reference_stack(module, "int8", rx, rstates, lengths)
    with pytest.raises(AssertionError):
        assert_bits(result, [y, *states])


# ---------------------------------------------------------------------------------------------
# Close to the float module, and to torch's qint8 modules
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", DTYPES)
@pytest.mark.parametrize("cls, kwargs, input_kind, given", STACK_CASES, ids=ids)
def test_stack_is_close_to_the_float_module(cls, kwargs, input_kind, given, kind):
    module = float_module(cls, nIn, H, **kwargs)
    quantized = ct.quantize_dynamic(module, dtype=DTYPES[kind])
    x, hx, _ = stack_call(module, input_kind, given)
    with torch.no_grad():
        difference = max_difference(results(quantized(x, hx)), results(module(x, hx)))
    assert 0 < difference < FLOAT_TOLERANCE[kind]


@pytest.mark.parametrize("kind", DTYPES)
@pytest.mark.parametrize("cls", [torch.nn.GRUCell, torch.nn.LSTMCell, torch.nn.RNNCell], ids=ids)
def test_cell_is_close_to_the_float_module(cls, kind):
    module = float_module(cls, nIn, H)
    quantized = ct.quantize_dynamic(module, dtype=DTYPES[kind])
    x = torch.randn(bS, nIn)
    with torch.no_grad():
        difference = max_difference(results(quantized(x)), results(module(x)))
    assert 0 < difference < FLOAT_TOLERANCE[kind] / 3   # one step


@pytest.mark.parametrize("cls, kwargs", [
    (torch.nn.LSTM, dict(num_layers=2, bidirectional=True)),
    (torch.nn.LSTM, dict(batch_first=True)),
    (torch.nn.GRU, dict(num_layers=2, bidirectional=True)),
    (torch.nn.GRU, dict(batch_first=True)),   # torch's qint8 modules need bias=True
    (torch.nn.LSTMCell, {}), (torch.nn.GRUCell, {})], ids=ids)
def test_close_to_torchs_quantize_dynamic(cls, kwargs):
    model = torch.nn.Sequential(float_module(cls, nIn, H, **kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch.ao.quantization's deprecation
        theirs = torch.ao.quantization.quantize_dynamic(model, {cls}, dtype=torch.qint8)
    ours = ct.quantize_dynamic(model, {cls}, dtype=torch.qint8)
    assert theirs[0]._get_name() == f"DynamicQuantized{cls.__name__}"
    x = torch.randn(bS, nIn) if "Cell" in cls.__name__ else torch.randn(sL, bS, nIn)
    with torch.no_grad():
        difference = max_difference(results(ours(x)), results(theirs(x)))
    assert difference < TORCH_QINT8_TOLERANCE


# ---------------------------------------------------------------------------------------------
# What is swapped, and how
# ---------------------------------------------------------------------------------------------

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(nIn, nIn)
        self.encoder = torch.nn.Sequential(torch.nn.LSTM(nIn, H), torch.nn.GRU(H, H))
        self.decoder = torch.nn.ModuleDict({"cell": torch.nn.GRUCell(H, H),
                                            "rnn": ct.RNN(H, H), "lstm": torch.nn.LSTMCell(H, H)})
        self.head = torch.nn.Linear(H, 2)


def kinds(model):
    return {name: type(m).__name__ for name, m in model.named_modules() if name}


def test_every_recurrent_module_of_a_nested_model_is_swapped():
    model = Model()
    quantized = ct.quantize_dynamic(model)
    assert kinds(quantized) == {
        "embed": "Linear", "encoder": "Sequential", "encoder.0": "QuantizedLSTM",
        "encoder.1": "QuantizedGRU", "decoder": "ModuleDict", "decoder.cell": "QuantizedGRUCell",
        "decoder.rnn": "QuantizedRNN", "decoder.lstm": "QuantizedLSTMCell", "head": "Linear"}
    assert list(quantized.parameters()) != []   # the Linears keep theirs (copies)
    assert not any(isinstance(m, torch.nn.RNNBase) for m in quantized.modules())


@pytest.mark.parametrize("spec, swapped", [
    ({torch.nn.LSTM}, {"encoder.0"}),
    ({ct.LSTM, torch.nn.GRUCell}, {"encoder.0", "decoder.cell"}),
    ({torch.nn.RNN}, {"decoder.rnn"}),   # a cells.torch module matches torch's class
    ({"decoder"}, {"decoder.cell", "decoder.rnn", "decoder.lstm"}),
    (["encoder.1", torch.nn.LSTMCell], {"encoder.1", "decoder.lstm"}),
    (frozenset({""}), {"encoder.0", "encoder.1", "decoder.cell", "decoder.rnn", "decoder.lstm"}),
])
def test_qconfig_spec_selects(spec, swapped):
    quantized = ct.quantize_dynamic(Model(), spec)
    assert {name for name, kind in kinds(quantized).items()
            if kind.startswith("Quantized")} == swapped


def test_not_inplace_leaves_the_model_as_it_was():
    model = Model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    names = kinds(model)
    quantized = ct.quantize_dynamic(model, inplace=False)
    assert quantized is not model and kinds(model) == names
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert quantized.head.weight is not model.head.weight
    assert torch.equal(quantized.head.weight, model.head.weight)


def test_inplace_swaps_in_the_model():
    model = Model()
    head = model.head
    assert ct.quantize_dynamic(model, inplace=True) is model
    assert model.head is head
    assert type(model.encoder[0]) is QuantizedLSTM


@pytest.mark.parametrize("inplace", [False, True])
def test_a_recurrent_model_is_swapped_itself(inplace):
    model = torch.nn.GRU(nIn, H)
    quantized = ct.quantize_dynamic(model, inplace=inplace)
    assert type(quantized) is QuantizedGRU and type(model) is torch.nn.GRU


@pytest.mark.parametrize("inplace", [False, True])
def test_a_shared_module_stays_shared_and_keeps_hooks_and_mode(inplace):
    lstm = torch.nn.LSTM(nIn, H)
    calls = []
    lstm.register_forward_hook(lambda module, args, output: calls.append(type(module).__name__))
    model = torch.nn.Sequential(lstm)
    model.again = lstm
    model.train()
    quantized = ct.quantize_dynamic(model, inplace=inplace)
    assert quantized[0] is quantized.again and type(quantized.again) is QuantizedLSTM
    assert quantized.again.training
    with torch.no_grad():
        quantized[0](torch.randn(sL, bS, nIn))
    assert calls == ["QuantizedLSTM"]


def test_dropout_acts_in_training_mode_only():
    module = float_module(torch.nn.LSTM, nIn, H, num_layers=2, dropout=0.5)
    quantized = ct.quantize_dynamic(module)
    x = torch.randn(sL, bS, nIn)
    with torch.no_grad():
        evaluated = quantized(x)[0]
        assert torch.equal(quantized(x)[0], evaluated)
        quantized.train()
        torch.manual_seed(0)
        assert not torch.equal(quantized(x)[0], evaluated)


# ---------------------------------------------------------------------------------------------
# The quantized module: what it holds, repr, pickling, grad modes
# ---------------------------------------------------------------------------------------------

def test_holds_its_nets_and_no_parameter():
    module = float_module(torch.nn.LSTM, nIn, H, num_layers=2, bidirectional=True, proj_size=5)
    quantized = ct.quantize_dynamic(module)
    assert list(quantized.parameters()) == [] and list(quantized.buffers()) == []
    assert quantized.state_dict() == {}
    assert len(quantized.nets) == 4
    assert [net.weights for net in quantized.nets] == ["int8"] * 4
    assert [(net.nIn, net.nOut, net.nState) for net in quantized.nets] == [
        (nIn, H, 5), (nIn, H, 5), (10, H, 5), (10, H, 5)]
    assert quantized.nbytes == sum(net.nbytes for net in quantized.nets) > 0
    bf16 = ct.quantize_dynamic(module, dtype=torch.bfloat16)
    assert [net.weights for net in bf16.nets] == ["bfloat16"] * 4


def test_repr_shows_the_dtype():
    model = torch.nn.Sequential(torch.nn.LSTM(4, 8, num_layers=2, bidirectional=True),
                                torch.nn.RNN(4, 8, nonlinearity="relu", batch_first=True),
                                torch.nn.GRUCell(4, 8, bias=False))
    assert [repr(m) for m in ct.quantize_dynamic(model, dtype=torch.bfloat16)] == [
        "QuantizedLSTM(4, 8, num_layers=2, bidirectional=True, dtype=torch.bfloat16)",
        "QuantizedRNN(4, 8, batch_first=True, nonlinearity=relu, dtype=torch.bfloat16)",
        "QuantizedGRUCell(4, 8, bias=False, dtype=torch.bfloat16)"]


@pytest.mark.parametrize("kind", DTYPES)
def test_pickle_and_deepcopy(kind):
    model = ct.quantize_dynamic(Model(), dtype=DTYPES[kind])
    x = torch.randn(sL, bS, nIn)
    h = torch.randn(bS, H)

    def run(m):
        with torch.no_grad():
            y, _ = m.encoder[0](x)
            y, _ = m.encoder[1](y)
            return [y, m.decoder.cell(h), m.decoder.rnn(y)[0], *m.decoder.lstm(h)]

    expected = run(model)
    for other in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert other.encoder[0].nets[0] is not model.encoder[0].nets[0]
        assert other.encoder[0].nets[0].weights == kind
        assert_bits(run(other), [e.numpy() for e in expected])


@pytest.mark.parametrize("cls", [torch.nn.GRU, torch.nn.LSTMCell], ids=ids)
def test_inference_mode_no_grad_and_grad_mode(cls):
    quantized = ct.quantize_dynamic(float_module(cls, nIn, H))
    x = torch.randn(bS, nIn) if "Cell" in cls.__name__ else torch.randn(sL, bS, nIn)
    with torch.no_grad():
        expected = results(quantized(x))
    with torch.inference_mode():
        assert_bits(results(quantized(torch.randn(x.shape).copy_(x))),
                    [e.numpy() for e in expected])
    got = results(quantized(x))   # grad mode, nothing requires grad
    assert_bits(got, [e.numpy() for e in expected])
    assert not any(t.requires_grad for t in got)
    x.requires_grad_()
    with torch.no_grad():
        assert_bits(results(quantized(x)), [e.numpy() for e in expected])
    with pytest.raises(RuntimeError, match="inference-only"):
        quantized(x)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_errors():
    model = Model()
    with pytest.raises(ValueError, match="dtype"):
        ct.quantize_dynamic(model, dtype=torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        ct.quantize_dynamic(model, dtype=torch.quint8)
    with pytest.raises(TypeError, match="float32"):
        ct.quantize_dynamic(Model().double())
    with pytest.raises(NotImplementedError, match="mapping"):
        ct.quantize_dynamic(model, mapping={torch.nn.LSTM: QuantizedLSTM})
    with pytest.raises(TypeError, match="set"):
        ct.quantize_dynamic(model, {torch.nn.LSTM: torch.ao.quantization.default_dynamic_qconfig})
    with pytest.raises(ValueError, match="Linear"):
        ct.quantize_dynamic(model, {torch.nn.LSTM, torch.nn.Linear})
    assert kinds(model) == kinds(Model())   # nothing swapped by a failed call
    # a float64 model whose recurrent modules are not selected is fine
    assert type(ct.quantize_dynamic(Model().double(), {"head"}).head) is torch.nn.Linear


def test_call_errors():
    lstm = ct.quantize_dynamic(torch.nn.LSTM(nIn, H))
    cell = ct.quantize_dynamic(torch.nn.GRUCell(nIn, H))
    with torch.no_grad():
        with pytest.raises(ValueError, match="float32"):
            lstm(torch.randn(sL, bS, nIn, dtype=torch.float64))
        with pytest.raises(RuntimeError, match="input_size"):
            lstm(torch.randn(sL, bS, nIn + 1))
        with pytest.raises(RuntimeError, match="Expected hidden\\[0\\] size"):
            lstm(torch.randn(sL, bS, nIn), (torch.zeros(1, bS, H + 1), torch.zeros(1, bS, H)))
        with pytest.raises(RuntimeError, match="float32"):
            cell(torch.randn(bS, nIn, dtype=torch.float64))
        with pytest.raises(RuntimeError, match="inconsistent input_size"):
            cell(torch.randn(bS, nIn + 1))
        with pytest.raises(RuntimeError, match="dtype"):
            cell(torch.randn(bS, nIn), torch.zeros(bS, H, dtype=torch.float64))
