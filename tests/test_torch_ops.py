"""cells.torch's custom operators: gradcheck (central differences, float64), torch.library's
opcheck, torch.compile(fullgraph=True), retain_graph (double backward:
tests/test_torch_gradgrad.py)."""
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")

sL, bS, nIn, H = 4, 3, 3, 2
P = 3   # the LSTM's projection (lstmp): more columns than H, so that no shape is H by accident
LENGTHS = torch.tensor([4, 1, 3])


def random(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def weight(K, G, grad, layout):
    """A weight [K, G] in cells' layout: C-ordered, or in "torch" layout the transpose of a
    C-ordered [G, K] (what the modules pass: weight_ih.t()), a leaf with those strides."""
    if layout == "cells":
        return random(K, G, grad=grad)
    return random(G, K, grad=False).t().requires_grad_(grad)


def op_inputs(family, grad=True, layout="cells"):
    """(op, differentiable tensor inputs, the options after them, the outputs to check)
    of one family, small random shapes; the weights in `layout` (weight's)."""
    torch.manual_seed(0)
    x, hI, cI = random(sL, bS, nIn, grad=grad), random(bS, H, grad=grad), random(bS, H, grad=grad)
    if family == "gru":
        return (torch.ops.cells.gru_time_loop,
                (x, hI, weight(nIn, 3 * H, grad, layout), weight(H, 3 * H, grad, layout),
                 random(2, 3 * H, grad=grad)), (), 1)
    if family == "lstm":  # Wproj None: no projection
        return (torch.ops.cells.lstm_time_loop,
                (x, weight(nIn, 4 * H, grad, layout), weight(H, 4 * H, grad, layout),
                 random(4 * H, grad=grad), hI, cI, None), (), 3)
    if family == "lstmp":
        return (torch.ops.cells.lstm_time_loop,
                (x, weight(nIn, 4 * H, grad, layout), weight(P, 4 * H, grad, layout),
                 random(4 * H, grad=grad), random(bS, P, grad=grad), cI,
                 weight(H, P, grad, layout)), (), 3)
    if family == "lltm":  # W is in PyTorch's layout either way
        return (torch.ops.cells.lltm_time_loop,
                (x, random(3 * H, H + nIn, grad=grad), random(3 * H, grad=grad), hI, cI), (), 3)
    return (torch.ops.cells.rnn_time_loop,
            (x, hI, weight(nIn, H, grad, layout), weight(H, H, grad, layout),
             random(2, H, grad=grad)), ("relu" if family == "relu" else "tanh",), 1)


FAMILIES = ["gru", "lstm", "lstmp", "lltm", "tanh", "relu"]
# The weights of every family but the LLTM in cells' layout, or as the modules pass them.
LAYOUTS = ["cells", "torch"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("lengths, forward, keep", [(None, True, True), (LENGTHS, False, True),
                                                    (LENGTHS, True, False)],
                         ids=["forward", "reverse_lengths", "recomputed"])
def test_gradcheck(family, lengths, forward, keep, layout):
    """keep=False: the backward recomputes the forward pass (no workspace)."""
    op, tensors, options, n_outputs = op_inputs(family, layout=layout)
    if family == "relu":  # keep pre-activations away from relu's kink for finite differences
        with torch.no_grad():
            tensors[0].mul_(3)

    def outputs(*ts):
        return op(*ts, *options, lengths, forward, keep)[:n_outputs]

    assert torch.autograd.gradcheck(outputs, tensors)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_opcheck(family, layout):
    """In torch's layout, the backward's weight gradients have the weights' strides, as the
    fake's (opcheck compares them)."""
    op, tensors, options, n_outputs = op_inputs(family, layout=layout)
    for lengths, forward, keep in ((None, True, True), (LENGTHS, False, True),
                                   (LENGTHS, True, False)):
        torch.library.opcheck(op, (*tensors, *options, lengths, forward, keep))
    # the backward operator, on a forward's workspace (with requires_grad, in
    # tests/test_torch_gradgrad.py)
    backward = getattr(torch.ops.cells, op._qualified_op_name.split("::")[1] + "_backward")
    _, plain, _, _ = op_inputs(family, grad=False, layout=layout)
    for lengths, forward, input_grad in ((None, True, True), (LENGTHS, False, False)):
        out = op(*plain, *options, lengths, forward, True)
        grads = tuple(torch.randn_like(o) for o in out[:n_outputs])
        # the workspace: the outputs h and those after the differentiable ones
        torch.library.opcheck(backward, (*plain, *grads, *options, lengths, forward, out[0],
                                         *out[n_outputs:], input_grad))


def test_modules_read_torch_weights_where_they_are(weights_read):
    """The GRU, LSTM and RNN modules hand weight_ih.t() and weight_hh.t() to the CPU time loop,
    which reads them where they are in both passes; their gradients reach .grad in the
    parameters' own layout (values: tests/test_torch_modules.py)."""
    torch.manual_seed(0)
    x = torch.randn(sL, bS, nIn)
    for module in (ct.GRU(nIn, H), ct.LSTM(nIn, H), ct.RNN(nIn, H)):
        module(x)[0].pow(2).sum().backward()
        Wx, Wh = module.weight_ih_l0, module.weight_hh_l0
        assert weights_read == [(True, Wx.data_ptr(), Wh.data_ptr())] * 2
        assert Wx.grad.is_contiguous() and Wh.grad.is_contiguous()
        weights_read.clear()


def test_retain_graph_twice():
    """The backward consumes a copy of the workspace: a second backward of the same graph
    gives the same gradients."""
    torch.manual_seed(0)
    for module, x in ((ct.GRU(nIn, H, num_layers=2, bidirectional=True), torch.randn(sL, bS, nIn)),
                      (ct.LSTM(nIn, H), torch.randn(sL, bS, nIn)),
                      (ct.LSTM(nIn, P, proj_size=H), torch.randn(sL, bS, nIn)),
                      (ct.RNN(nIn, H, nonlinearity="relu"), torch.randn(sL, bS, nIn))):
        loss = module(x)[0].pow(2).sum()
        loss.backward(retain_graph=True)
        first = [p.grad.clone() for p in module.parameters()]
        loss.backward()
        for g, p in zip(first, module.parameters()):
            torch.testing.assert_close(p.grad, 2 * g, rtol=1e-6, atol=1e-6)
    lltm = ct.LLTM(nIn, H)
    state = (torch.randn(bS, H), torch.randn(bS, H))
    loss = lltm(torch.randn(bS, nIn), state)[1].pow(2).sum()
    loss.backward(retain_graph=True)
    first = lltm.weights.grad.clone()
    loss.backward()
    torch.testing.assert_close(lltm.weights.grad, 2 * first, rtol=1e-6, atol=1e-6)


def test_only_what_requires_grad():
    """Frozen parameters get no gradient; without grad mode the workspace is not kept."""
    module = ct.LSTM(nIn, H, num_layers=2, dtype=torch.float64).requires_grad_(False)
    x = random(sL, bS, nIn)
    module(x)[0].sum().backward()
    assert x.grad is not None and all(p.grad is None for p in module.parameters())
    _, tensors, _, _ = op_inputs("lstm")
    with torch.no_grad():
        *_, c, gates, m = torch.ops.cells.lstm_time_loop(*tensors, None, True, False)
    assert c.numel() == gates.numel() == m.numel() == 0


@pytest.fixture(autouse=True)
def fresh_inductor_cache(tmp_path, monkeypatch):
    """Compile into an empty cache: inductor's caches key a compiled graph on the forward graph,
    not on the custom operators' backward formulas, so a cache left by another version of cells
    can serve a backward that calls an operator with its old signature."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def compiled_against_eager(module, x):
    """torch.compile(fullgraph=True) of a small model on `module`: its loss and every gradient
    against eager mode."""
    torch.manual_seed(0)
    width = getattr(module, "proj_size", 0) or module.hidden_size
    head = torch.nn.Linear(width * (2 if module.bidirectional else 1), 1,
                           dtype=torch.float64)

    def loss(x):
        y, _ = module(x)
        return head(y).pow(2).sum()

    results = []
    for run in (torch.compile(loss, fullgraph=True), loss):
        for p in (*module.parameters(), *head.parameters()):
            p.grad = None
        xi = x.detach().clone().requires_grad_()
        value = run(xi)
        value.backward()
        results.append([value, xi.grad] + [p.grad for p in (*module.parameters(),
                                                             *head.parameters())])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


# torch.compile's inductor compiles the graphs it makes with the machine's C++ compiler; a
# machine without one (where a repaired wheel runs) skips these.
needs_a_compiler = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                      reason="torch.compile needs a C++ compiler")


@needs_a_compiler
def test_compile_gru():
    torch._dynamo.reset()
    compiled_against_eager(ct.GRU(nIn, H, num_layers=2, bidirectional=True, batch_first=True,
                                  dtype=torch.float64), torch.randn(bS, sL, nIn,
                                                                    dtype=torch.float64))


@needs_a_compiler
@pytest.mark.parametrize("proj_size", [0, 2])
def test_compile_lstm(proj_size):
    torch._dynamo.reset()
    compiled_against_eager(ct.LSTM(nIn, P, num_layers=2, proj_size=proj_size,
                                   dtype=torch.float64),
                           torch.randn(sL, bS, nIn, dtype=torch.float64))


def test_op_argument_errors():
    _, (x, hI, Wx, Wh, b), _, _ = op_inputs("gru", grad=False)
    with pytest.raises(TypeError, match="Wx: expected dtype torch.float32 or torch.float64"):
        torch.ops.cells.gru_time_loop(x, hI, Wx.int(), Wh, b, None, True, False)
    with pytest.raises(TypeError, match="seq_len: expected None or an integer CPU tensor"):
        torch.ops.cells.gru_time_loop(x, hI, Wx, Wh, b, LENGTHS.double(), True, False)
    with pytest.raises(ValueError, match="hI"):
        torch.ops.cells.gru_time_loop(x, hI[:2], Wx, Wh, b, None, True, False)
