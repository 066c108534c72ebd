"""cells.haste: haste_pytorch's five layers on cells' kernels, against haste's own CPU path.

The reference is haste's plain-torch ``*Script`` functions and BaseRNN (lmnt-com/haste,
frameworks/pytorch/*.py), transcribed below: the step loop of each layer, zoneout (the mask
drawn as haste draws it, from the same seed), DropConnect (F.dropout of recurrent_kernel drawn
after the mask from the same seed), the final state of ``_get_final_state`` (lengths,
return_state_sequence, batch_first). autograd differentiates it; the modules' gradients come
from cells' kernels. In float64 both are the same math in other orders: agreement to 1e-10
(rounding ~1e-16 per operation, over a few dozen operations and T <= 5 steps).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
haste = pytest.importorskip("cells.haste")

from torch.nn import functional as F  # noqa: E402

from cells import _cpu  # noqa: E402

T, N, I, H = 5, 3, 3, 4

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny shapes (conftest.py)


# ---------------------------------------------------------------------------------------------
# haste's CPU path (its *Script functions), one step at a time
# ---------------------------------------------------------------------------------------------

def lstm_step(x, h, c, p):
    i, g, f, o = torch.chunk(h @ p["recurrent_kernel"] + x @ p["kernel"] + p["bias"], 4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_step(x, h, p):
    vx = torch.chunk(x @ p["kernel"] + p["bias"], 3, 1)
    vh = torch.chunk(h @ p["recurrent_kernel"] + p["recurrent_bias"], 3, 1)
    z = torch.sigmoid(vx[0] + vh[0])
    r = torch.sigmoid(vx[1] + vh[1])
    return (z * h + (1 - z) * torch.tanh(vx[2] + r * vh[2]),)


def layer_norm_lstm_step(x, h, c, p):
    G = 4 * H
    v = (F.layer_norm(h @ p["recurrent_kernel"], (G,), weight=p["gamma"][1])
         + F.layer_norm(x @ p["kernel"], (G,), weight=p["gamma"][0]) + p["bias"])
    i, g, f, o = torch.chunk(v, 4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    ln = F.layer_norm(c, (H,), weight=p["gamma_h"], bias=p["beta_h"])
    return torch.sigmoid(o) * torch.tanh(ln), c


def layer_norm_gru_step(x, h, p):
    G = 3 * H
    vx = torch.chunk(F.layer_norm(x @ p["kernel"], (G,), weight=p["gamma"][0]) + p["bias"], 3, 1)
    vh = torch.chunk(F.layer_norm(h @ p["recurrent_kernel"], (G,), weight=p["gamma"][1])
                     + p["recurrent_bias"], 3, 1)
    z = torch.sigmoid(vx[0] + vh[0])
    r = torch.sigmoid(vx[1] + vh[1])
    return (z * h + (1 - z) * torch.tanh(vx[2] + r * vh[2]),)


def indrnn_step(x, h, p):
    return (torch.tanh(x @ p["kernel"] + p["bias"] + h * p["recurrent_scale"]),)


LAYERS = {
    "LSTM": (haste.LSTM, lstm_step),
    "GRU": (haste.GRU, gru_step),
    "LayerNormLSTM": (haste.LayerNormLSTM, layer_norm_lstm_step),
    "LayerNormGRU": (haste.LayerNormGRU, layer_norm_gru_step),
    "IndRNN": (haste.IndRNN, indrnn_step),
}
CELL_STATE = {"LSTM", "LayerNormLSTM"}


def reference(name, module, params, x, state, lengths, seed):
    """haste's forward of `module`'s configuration on `params` (tensors by name), its random
    draws from `seed`: (output, state)."""
    step = LAYERS[name][1]
    p = dict(params)
    torch.manual_seed(seed)
    x = x.permute(1, 0, 2) if module.batch_first else x
    zoneout = module.zoneout
    mask = x.new_empty(x.shape[0], x.shape[1], H).bernoulli_(1 - zoneout) if zoneout else None
    if "recurrent_kernel" in p:
        p["recurrent_kernel"] = F.dropout(p["recurrent_kernel"], module.dropout,
                                          module.training)
    states = [s[0] for s in state]
    sequences = [[s] for s in states]
    for t in range(x.shape[0]):
        new = list(step(x[t], *states, p))
        if zoneout:
            if module.training:
                new[0] = (new[0] - states[0]) * mask[t] + states[0]
            else:
                new[0] = zoneout * states[0] + (1 - zoneout) * new[0]
        for sequence, s in zip(sequences, new):
            sequence.append(s)
        states = new
    finals = []
    for sequence in sequences:
        s = torch.stack(sequence)
        if module.return_state_sequence:
            s = s[1:].permute(1, 0, 2) if module.batch_first else s[1:]
            finals.append(s.unsqueeze(0))
        elif lengths is not None:
            finals.append(s[lengths, torch.arange(s.shape[1])].unsqueeze(0))
        else:
            finals.append(s[-1].unsqueeze(0))
    output = torch.stack(sequences[0][1:])
    output = output.permute(1, 0, 2) if module.batch_first else output
    return output, tuple(finals) if name in CELL_STATE else finals[0]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def make(name, dtype=torch.float64, seed=0, **options):
    """A layer with random parameters of every kind (biases and gains away from their
    initial values), and its inputs: x, a random non-zero state."""
    torch.manual_seed(seed)
    module = LAYERS[name][0](I, H, **options).to(dtype)
    with torch.no_grad():
        for pname, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1 if "gamma" in pname else 0))
    batch_first = options.get("batch_first", False)
    x = torch.randn((N, T, I) if batch_first else (T, N, I), dtype=dtype)
    state = tuple(torch.randn(1, N, H, dtype=dtype) for _ in range(2 if name in CELL_STATE
                                                                 else 1))
    return module, x, state


def as_state(name, state):
    """A tuple of states as forward takes them."""
    return state if name in CELL_STATE else state[0]


def flat(out):
    """(output, state) as a flat tuple of tensors."""
    output, state = out
    return (output, *(state if isinstance(state, tuple) else (state,)))


def loss_weights(outs, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in outs]


def gradients(outs, weights, leaves):
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    return torch.autograd.grad(loss, leaves, allow_unused=True)


def run_both(name, module, x, state, lengths=None, seed=7):
    """The module's and the reference's outputs and gradients (every input, state and
    parameter), each forward run from `seed`."""
    leaves_x = x.clone().requires_grad_()
    leaves_s = tuple(s.clone().requires_grad_() for s in state)
    torch.manual_seed(seed)
    got = flat(module(leaves_x, as_state(name, leaves_s), lengths))
    names = [n for n, _ in module.named_parameters()]
    params = {n: p.detach().clone().requires_grad_() for n, p in module.named_parameters()}
    rx = x.clone().requires_grad_()
    rs = tuple(s.clone().requires_grad_() for s in state)
    want = flat(reference(name, module, params, rx, rs, lengths, seed))
    weights = loss_weights(got)
    got_grads = gradients(got, weights, [leaves_x, *leaves_s, *module.parameters()])
    want_grads = gradients(want, weights, [rx, *rs, *(params[n] for n in names)])
    return got, want, got_grads, want_grads, ["x", *(f"state{k}" for k in range(len(state))),
                                               *names]


def assert_close(got, want, labels, **tol):
    for g, w, label in zip(got, want, labels):
        torch.testing.assert_close(g, w, msg=lambda m, label=label: f"{label}: {m}", **tol)


# ---------------------------------------------------------------------------------------------
# Forward and gradients against haste's CPU path
# ---------------------------------------------------------------------------------------------

OPTIONS = {
    "plain": ({}, None),
    "lengths": ({}, [5, 0, 3]),
    "state_sequence": ({"return_state_sequence": True}, None),
    "batch_first": ({"batch_first": True}, [2, 5, 1]),
    "batch_first_state_sequence": ({"batch_first": True, "return_state_sequence": True},
                                   None),
}


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("mode", ["train", "eval", "none"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_matches_haste(name, mode, option):
    """train: zoneout's mask and DropConnect drawn from one seed; eval: zoneout p (haste's
    eval formula, the mask drawn and unused); none: neither."""
    options, lengths = OPTIONS[option]
    if mode != "none":
        options = dict(options, zoneout=0.3)
        if name != "IndRNN":
            options["dropout"] = 0.25
    module, x, state = make(name, **options)
    module.train(mode == "train")
    if lengths is not None:
        lengths = torch.tensor(lengths)
    got, want, got_grads, want_grads, labels = run_both(name, module, x, state, lengths)
    assert_close(got, want, ["output", "h", "c"], rtol=1e-10, atol=1e-12)
    assert_close(got_grads, want_grads, labels, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(LAYERS))
def test_random_draws_as_haste(name):
    """The module draws as much as haste does (test_matches_haste checks the order): the
    generator ends where the reference's does, in training and in eval mode (where the zoneout
    mask is drawn and unused)."""
    options = {"zoneout": 0.5} if name == "IndRNN" else {"zoneout": 0.5, "dropout": 0.5}
    module, x, state = make(name, **options)
    for training in (True, False):
        module.train(training)
        torch.manual_seed(3)
        module(x, as_state(name, state))
        after = torch.rand(1)
        params = dict(module.named_parameters())
        reference(name, module, params, x, state, None, 3)
        assert torch.equal(torch.rand(1), after)


@pytest.mark.parametrize("name", list(LAYERS))
def test_float32(name):
    """float32 against the float64 reference on the same (float32) values: the kernels round
    every operation to float32 (unit roundoff 6e-8), a few dozen per step over T = 5 steps of
    values ~1 (LayerNorm divides by standard deviations ~1); the outputs differ by ~2e-7, well
    within 16 ulps (1e-6)."""
    module, x, state = make(name, dtype=torch.float32, zoneout=0.3)
    module.eval()
    with torch.no_grad():
        got = flat(module(x, as_state(name, state)))
        params = {n: p.double() for n, p in module.named_parameters()}
        want = flat(reference(name, module, params, x.double(),
                              tuple(s.double() for s in state), None, 0))
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(LAYERS))
def test_empty_sequence(name):
    """T = 0: an empty output and the initial state, as haste's loop of no steps, and their
    gradients: the state's passes through, the parameters' are zeros (or None: haste's, where
    the final state is the initial one itself)."""
    module, _, state = make(name)
    x = torch.randn(0, N, I, dtype=torch.float64, requires_grad=True)
    state = tuple(s.requires_grad_() for s in state)
    output, final = module(x, as_state(name, state))
    finals = final if name in CELL_STATE else (final,)
    assert output.shape == (0, N, H)
    for f, s in zip(finals, state):
        torch.testing.assert_close(f, s, rtol=0, atol=0)
    sum(f.sum() for f in finals).backward()
    for s in state:
        assert torch.equal(s.grad, torch.ones_like(s))
    for p in module.parameters():
        assert p.grad is None or torch.equal(p.grad, torch.zeros_like(p))


# ---------------------------------------------------------------------------------------------
# The backward: the forward's workspace, eval mode, retain_graph
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_backward_reads_the_workspace(name, monkeypatch):
    """In training the forward keeps its workspace and the backward runs no forward kernel;
    backward(retain_graph=True) twice gives the same gradients (the consumed arrays are
    copies)."""
    module, x, state = make(name, zoneout=0.2)
    x.requires_grad_()
    output, _ = module(x, as_state(name, state), lengths=[5, 1, 2])
    forwards = []
    def counted(*args, _run=_cpu.forward, **kwargs):
        forwards.append(args[0])
        return _run(*args, **kwargs)
    monkeypatch.setattr(_cpu, "forward", counted)
    output.sum().backward(retain_graph=True)
    first = [x.grad.clone(), *(p.grad.clone() for p in module.parameters())]
    module.zero_grad()
    x.grad = None
    output.sum().backward()
    assert forwards == []
    assert_close([x.grad, *(p.grad for p in module.parameters())], first,
                 ["x", *(n for n, _ in module.named_parameters())], rtol=0, atol=0)


@pytest.mark.parametrize("name", list(LAYERS))
def test_parameters_alone(name):
    """x and the state without gradients (the backward skips dL/dx): the parameters' gradients
    are those of a call where every input has one."""
    module, x, state = make(name)
    _, _, all_grads, _, _ = run_both(name, module, x, state)
    out = flat(module(x, as_state(name, state)))
    got = gradients(out, loss_weights(out), list(module.parameters()))
    assert_close(got, all_grads[1 + len(state):], [n for n, _ in module.named_parameters()],
                 rtol=0, atol=0)


@pytest.mark.parametrize("name", list(LAYERS))
def test_no_workspace_without_grad(name):
    """Without a gradient to take, the forward keeps no workspace, and gives the same
    outputs."""
    module, x, state = make(name)
    with torch.no_grad():
        plain = flat(module(x, as_state(name, state)))
    tracked = flat(module(x, as_state(name, state)))
    assert_close(tracked, plain, ["output", "h", "c"], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Parameters: haste's names, shapes and initialisation
# ---------------------------------------------------------------------------------------------

HASTE_SHAPES = {
    "LSTM": {"kernel": (I, 4 * H), "recurrent_kernel": (H, 4 * H), "bias": (4 * H,)},
    "GRU": {"kernel": (I, 3 * H), "recurrent_kernel": (H, 3 * H), "bias": (3 * H,),
            "recurrent_bias": (3 * H,)},
    "LayerNormLSTM": {"kernel": (I, 4 * H), "recurrent_kernel": (H, 4 * H), "bias": (4 * H,),
                      "gamma": (2, 4 * H), "gamma_h": (H,), "beta_h": (H,)},
    "LayerNormGRU": {"kernel": (I, 3 * H), "recurrent_kernel": (H, 3 * H), "bias": (3 * H,),
                     "recurrent_bias": (3 * H,), "gamma": (2, 3 * H)},
    "IndRNN": {"kernel": (I, H), "recurrent_scale": (H,), "bias": (H,)},
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_haste_state_dict_loads(name):
    """A state_dict with haste's names and shapes, built by hand, loads strictly, as it is."""
    shapes = HASTE_SHAPES[name]
    state_dict = {n: torch.randn(shape) for n, shape in shapes.items()}
    module = LAYERS[name][0](I, H)
    module.load_state_dict(state_dict, strict=True)
    assert {n: tuple(p.shape) for n, p in module.named_parameters()} == shapes
    for n, p in module.named_parameters():
        assert torch.equal(p.detach(), state_dict[n])


@pytest.mark.parametrize("name", list(LAYERS))
def test_initialisation(name):
    """haste's reset_parameters: per gate block, kernel Xavier-uniform (within its bound) and
    recurrent_kernel orthogonal; biases zeros but the LSTMs' forget block; gains ones;
    recurrent_scale uniform in [-0.5, 0.5]."""
    hidden = 8
    options = {"forget_bias": 2.5} if name in CELL_STATE else {}
    module = LAYERS[name][0](6, hidden, **options)
    p = dict(module.named_parameters())
    gates = p["kernel"].shape[1] // hidden
    bound = np.sqrt(6 / (6 + hidden))
    assert p["kernel"].abs().max() <= bound
    assert p["kernel"].std() > bound / 3
    if name == "IndRNN":
        assert p["recurrent_scale"].abs().max() <= 0.5
        assert p["recurrent_scale"].std() > 0.1
        assert torch.equal(p["bias"], torch.zeros(hidden))
        return
    for k in range(gates):
        block = p["recurrent_kernel"][:, k * hidden:(k + 1) * hidden].detach()
        torch.testing.assert_close(block.T @ block, torch.eye(hidden), rtol=0, atol=1e-5)
    bias = torch.zeros(gates * hidden)
    if name in CELL_STATE:
        bias[2 * hidden:3 * hidden] = 2.5
    assert torch.equal(p["bias"], bias)
    for n in ("recurrent_bias", "beta_h"):
        if n in p:
            assert torch.equal(p[n], torch.zeros_like(p[n]))
    for n in ("gamma", "gamma_h"):
        if n in p:
            assert torch.equal(p[n], torch.ones_like(p[n]))


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_native_weights(name):
    """to_native_weights gives torch.nn's layer the same function; from_native_weights takes
    it back (haste's methods)."""
    module, x, state = make(name)
    native = (torch.nn.LSTM if name == "LSTM" else torch.nn.GRU)(I, H).double()
    with torch.no_grad():
        for p, w in zip(native.parameters(), module.to_native_weights()):
            p.copy_(w)
        want = flat(native(x, as_state(name, state)))
        got = flat(module(x, as_state(name, state)))
        assert_close(got, want, ["output", "h", "c"], rtol=1e-12, atol=1e-12)
        back = LAYERS[name][0](I, H).double()
        back.from_native_weights(*native.parameters())
        for (n, p), q in zip(back.named_parameters(), module.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-15, atol=1e-15, msg=n)


# ---------------------------------------------------------------------------------------------
# torch.compile, the operators, double backward
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_compile(name):
    """torch.compile(fullgraph=True) traces the operators (their fakes) and the random draws:
    forward and backward equal eager's, in training with zoneout, DropConnect and lengths."""
    torch._dynamo.reset()
    options = {"zoneout": 0.3} if name == "IndRNN" else {"zoneout": 0.3, "dropout": 0.2}
    module, x, state = make(name, **options)
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    lengths = torch.tensor([5, 0, 3])
    results = []
    for run in (module, compiled):
        xs = x.clone().requires_grad_()
        torch.manual_seed(5)
        outs = flat(run(xs, as_state(name, state), lengths))
        grads = gradients(outs, loss_weights(outs), [xs, *module.parameters()])
        results.append((*outs, *grads))
    assert_close(results[1], results[0], [str(k) for k in range(len(results[0]))], rtol=0,
                 atol=0)


def op_arguments(name, keep):
    """The operator's arguments for a small call, zoneout's mask given."""
    module, x, state = make(name, zoneout=0.3)
    params = [x, *(s[0] for s in state), *module._weights()]
    mask = x.new_empty(T, N, H).bernoulli_(0.7)
    flags = [True, keep] if name in CELL_STATE else [keep]
    return module._op, [t.detach().requires_grad_() for t in params], [mask, 0.3, *flags]


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "recomputed"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_opcheck(name, keep):
    """The operators' schemas, fakes and autograd registrations (torch.library.opcheck), the
    backward reading the workspace or recomputing the forward pass."""
    op, params, options = op_arguments(name, keep)
    torch.library.opcheck(op, (*params, *options))


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_gradgradcheck(name, mode):
    """Second derivatives through the module (the backward operator's formula differentiates
    the plain-torch recomputation) against central differences of the first (the kernels),
    with zoneout (its mask drawn from one seed on every call) and lengths."""
    options = {"zoneout": 0.3} if name == "IndRNN" else {"zoneout": 0.3, "dropout": 0.2}
    module, _, _ = make(name, **options)
    module.train(mode == "train")
    names = [n for n, _ in module.named_parameters()]
    x = torch.randn(2, 2, I, dtype=torch.float64, requires_grad=True)
    states = [torch.randn(1, 2, H, dtype=torch.float64, requires_grad=True)
              for _ in range(2 if name in CELL_STATE else 1)]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]

    def f(x, *tensors):
        states, params = tensors[:len(tensors) - len(names)], tensors[-len(names):]
        torch.manual_seed(0)
        out = torch.func.functional_call(module, dict(zip(names, params)),
                                         (x, as_state(name, tuple(states)), [2, 1]))
        return flat(out)

    assert torch.autograd.gradgradcheck(f, (x, *states, *params), fast_mode=True)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_rates_out_of_range(name):
    """haste's ValueErrors, its messages."""
    cls = LAYERS[name][0]
    with pytest.raises(ValueError, match=f"^{name}: zoneout must be in"):
        cls(I, H, zoneout=1.5)
    if name != "IndRNN":
        with pytest.raises(ValueError, match=f"^{name}: dropout must be in"):
            cls(I, H, dropout=-0.1)


@pytest.mark.parametrize("name", list(LAYERS))
def test_state_errors(name):
    """haste's checks of the state (ValueError, its messages), then the tensors'."""
    module, x, state = make(name)
    n = len(state)
    bad_size = tuple(torch.zeros(1, N + 1, H, dtype=torch.float64) for _ in range(n))
    with pytest.raises(ValueError, match="RNN state size mismatch on dim 1; expected 3 got 4"):
        module(x, as_state(name, bad_size))
    bad_dims = tuple(torch.zeros(N, H, dtype=torch.float64) for _ in range(n))
    with pytest.raises(ValueError, match="RNN state dimension mismatch; expected 3 got 2"):
        module(x, as_state(name, bad_dims))
    wrong = state[0] if name in CELL_STATE else state
    with pytest.raises(ValueError, match="RNN state has invalid structure"):
        module(x, wrong)
    with pytest.raises(TypeError, match=r"^state(\[0\])?: expected the input's dtype"):
        module(x, as_state(name, tuple(s.float() for s in state)))


@pytest.mark.parametrize("name", list(LAYERS))
def test_tensor_errors(name):
    """TypeErrors naming the argument: another device, another dtype, dtypes that differ;
    ValueErrors for the shapes of input and lengths."""
    module, x, state = make(name)
    with pytest.raises(TypeError, match="^input: expected a CPU tensor, got device meta"):
        module(x.to("meta"))
    with pytest.raises(TypeError, match="^input: expected dtype torch.float32 or "
                                        "torch.float64, got torch.float16"):
        module(x.half())
    with pytest.raises(TypeError, match="^input: expected the parameters' dtype "
                                        "torch.float64, got torch.float32"):
        module(x.float())
    with pytest.raises(TypeError, match="^kernel: expected dtype"):
        module.to(torch.bfloat16)(x)
    module.double()
    with pytest.raises(ValueError, match=r"^input: expected shape \[T, N, input_size\]"):
        module(x[..., :2])
    with pytest.raises(ValueError, match=r"^lengths: expected shape \[3\]"):
        module(x, lengths=[1, 2])
    with pytest.raises(TypeError, match="^lengths: expected integers"):
        module(x, lengths=torch.tensor([1.0, 2.0, 3.0]))
