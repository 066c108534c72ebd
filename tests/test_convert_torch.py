"""cells.convert's PyTorch converters against torch.nn.GRU / LSTM / RNN / GRUCell / LSTMCell /
RNNCell (float64; the RNNs with either nonlinearity).

Each module has random weights; from_torch_module converts them, cells runs every layer and
direction (reverse: forward=False; layer l > 0 on the concatenated outputs of layer l-1), and
must give the module's outputs and final states. cells' own gradients, mapped to PyTorch's
layout by the rule in cells.convert's docstring, must equal torch autograd's, and torch's,
mapped back, must equal cells'. The rule's traps are asserted too (the zeros lstm_to_torch and
gru_to_torch put where a gradient needs a copy or a second bias row).

Tolerance: torch's float64 CPU RNNs evaluate the same formulas in float64 (agreement ~1e-16);
the conversions themselves are exact. F64_TOL (1e-12 relative to the scale, see
gru_reference.py) covers the summation-order differences over <= 2 layers of <= 5 steps.
"""
import numpy as np
import pytest

import cells
from cells import convert
from gru_reference import F64_TOL, assert_close

torch = pytest.importorskip("torch")

TORCH_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
# The modules of each family: (torch.nn class name, its options).
MODULES = {"gru": ("GRU", {}), "lstm": ("LSTM", {}),
           "rnn_tanh": ("RNN", {"nonlinearity": "tanh"}),
           "rnn_relu": ("RNN", {"nonlinearity": "relu"})}


def _random_module(kind, n_in, H, seed, **options):
    """torch.nn.<kind>(n_in, H, **options) in float64 with every parameter ~ N(0, 0.5²)."""
    torch.manual_seed(seed)
    module = getattr(torch.nn, kind)(n_in, H, dtype=torch.float64, **options).eval()
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.5)
    return module


def _leaf(a):
    return torch.from_numpy(np.ascontiguousarray(a)).requires_grad_(True)


def _h_loops(rnn):
    """cells' time loop, its backward and their options for a converted GRU or RNN (whose only
    state is h)."""
    if rnn.family == "gru":
        return cells.gruTimeLoop, cells.gruTimeLoopBp, {"linear_before_reset": True}
    return cells.rnnTimeLoop, cells.rnnTimeLoopBp, {"activation": rnn.activation}


def _cells_stack(rnn, x, h0, c0, dLdY, dLdhN, dLdcN):
    """Run the converted module `rnn` (a TorchRNN) in cells on time-major x [sL, bS, nIn] with
    initial states [layers*dirs, bS, H], then backpropagate dLdY [sL, bS, dirs*H] and dLdhN,
    dLdcN [layers*dirs, bS, H]. Returns (Y, hN, cN (None for a GRU or RNN), dLdx, grads) where
    grads[l][d] = cells' weight gradients (dLdWx, dLdWh or dLdWr, dLdb)."""
    dirs = len(rnn.layers[0])
    lstm = rnn.family == "lstm"
    if not lstm:
        loop, loop_bp, options = _h_loops(rnn)
    inputs, hN, cN = [x], [], []
    for layer, directions in enumerate(rnn.layers):
        outs = []
        for d, weights in enumerate(directions):
            k, forward = layer * dirs + d, d == 0
            if not lstm:
                h = loop(inputs[-1], h0[k], *weights, forward=forward, **options)
                hL, cL = (h[-1] if forward else h[0]), None
            else:
                h, hL, cL = cells.lstmLayerTimeLoop(inputs[-1], *weights, h0[k], c0[k],
                                                    forward=forward)
            outs.append(h)
            hN.append(hL)
            cN.append(cL)
        inputs.append(np.concatenate(outs, axis=2))

    grads = [None] * len(rnn.layers)
    H = h0.shape[2]
    dLdout = dLdY
    for layer in reversed(range(len(rnn.layers))):
        dLdin, grads[layer] = 0, []
        for d, weights in enumerate(rnn.layers[layer]):
            k, forward, dLdh = layer * dirs + d, d == 0, dLdout[..., d * H:(d + 1) * H]
            if not lstm:
                dx, _, *g = loop_bp(inputs[layer], h0[k], *weights, dLdh, dLdhLast=dLdhN[k],
                                    forward=forward, **options)
            else:
                dx, *g, _, _, _ = cells.lstmLayerTimeLoopBp(
                    inputs[layer], *weights, h0[k], c0[k], dLdh, dLdhL=dLdhN[k],
                    dLdcL=dLdcN[k], forward=forward)
            dLdin = dLdin + dx
            grads[layer].append(tuple(g))
        dLdout = dLdin
    return inputs[-1], np.stack(hN), np.stack(cN) if lstm else None, dLdout, grads


def _assert_grads_follow_the_rule(family, cells_grads, torch_grads, has_bias):
    """The gradient rule of cells.convert, both ways, for one layer and direction.
    torch_grads: the autograd gradients of (weight_ih, weight_hh, bias_ih, bias_hh)."""
    g_ih, g_hh, g_bih, g_bhh = torch_grads
    if family in ("gru", "rnn"):
        if family == "gru":
            mapped = convert.gru_to_torch(*cells_grads, linear_before_reset=True)
            back = convert.gru_from_torch(g_ih, g_hh, g_bih, g_bhh)
        else:  # the two biases are summands: both rows of dLdb are torch's two bias gradients
            mapped = convert.rnn_to_torch(*cells_grads)
            back = convert.rnn_from_torch(g_ih, g_hh, g_bih, g_bhh)
        expected = torch_grads if has_bias else torch_grads[:2]
        for name, m, t in zip(TORCH_NAMES, mapped, expected):
            assert_close(m, t, F64_TOL, "d" + name)
        n_back = 3 if has_bias else 2  # without torch biases there is no bias gradient to map
        for name, c, t in zip(("dLdWx", "dLdWh", "dLdb"), cells_grads[:n_back], back):
            assert_close(c, t, F64_TOL, name)
        return
    mapped = convert.lstm_to_torch(*cells_grads)
    for name, m, t in zip(TORCH_NAMES[:2], mapped, torch_grads):
        assert_close(m, t, F64_TOL, "d" + name)
    back = convert.lstm_from_torch(g_ih, g_hh, g_bih)  # only one of the two bias gradients
    assert_close(cells_grads[0], back[0], F64_TOL, "dLdWx")
    assert_close(cells_grads[1], back[1], F64_TOL, "dLdWr")
    if not has_bias:
        return
    assert_close(mapped[2], g_bih, F64_TOL, "dbias_ih")
    # the summed biases: bias_hh's gradient is a copy of bias_ih's, not the zeros returned
    assert_close(mapped[2], g_bhh, F64_TOL, "dbias_hh = copy of dbias_ih")
    assert np.all(mapped[3] == 0) and np.max(np.abs(g_bhh)) > 1e-3
    assert_close(cells_grads[2], back[2], F64_TOL, "dLdb from dbias_ih")
    both = convert.lstm_from_torch(g_ih, g_hh, g_bih, g_bhh)[2]
    assert_close(cells_grads[2], both / 2, F64_TOL, "dLdb = half of what both give")
    # ONNX's B = [Wb | Rb] holds PyTorch's bias_ih and bias_hh, each in ONNX's gate order
    n = g_bih.size

    def onnx_order(bias):
        return convert.lstm_to_onnx(g_ih.T, g_hh.T, bias)[2][0, :n]

    dB = np.concatenate([onnx_order(g_bih), onnx_order(g_bhh)])[None]
    mapped = convert.lstm_to_onnx(*cells_grads)[2]
    assert_close(mapped[:, :n], dB[:, :n], F64_TOL, "dWb")
    assert np.all(mapped[:, n:] == 0)
    assert_close(np.concatenate([mapped[:, :n]] * 2, axis=1), dB, F64_TOL, "dB = [dWb | dWb]")
    W, R = convert.lstm_to_onnx(g_ih.T, g_hh.T)[:2]
    assert_close(cells_grads[2], convert.lstm_from_onnx(W, R, dB)[2] / 2, F64_TOL,
                 "dLdb = half of lstm_from_onnx(dB)")


@pytest.mark.parametrize("module_name", list(MODULES))
@pytest.mark.parametrize("num_layers,bidirectional,batch_first,bias", [
    (1, False, False, True),
    (2, True, True, True),
    (2, True, False, False),
    (3, False, True, True),
])
def test_from_torch_module_matches_torch(module_name, num_layers, bidirectional, batch_first,
                                         bias):
    sL, bS, n_in, H = 5, 3, 4, 3
    dirs = 2 if bidirectional else 1
    kind, options = MODULES[module_name]
    family = kind.lower()
    module = _random_module(kind, n_in, H, 100 + num_layers + 2 * dirs, bias=bias,
                            num_layers=num_layers, bidirectional=bidirectional,
                            batch_first=batch_first, dropout=0.25 if num_layers > 1 else 0.0,
                            **options)
    rng = np.random.default_rng(8000 + num_layers + 2 * dirs + 4 * batch_first + 8 * bias)
    x = rng.normal(0.0, 1.0, (sL, bS, n_in))
    h0 = rng.uniform(-0.9, 0.9, (num_layers * dirs, bS, H))
    c0 = rng.uniform(-1.5, 1.5, (num_layers * dirs, bS, H))
    dLdY = rng.normal(0.0, 1.0, (sL, bS, dirs * H))
    dLdhN, dLdcN = (rng.normal(0.0, 1.0, h0.shape) for _ in range(2))

    tx, th, tc = _leaf(x.transpose(1, 0, 2) if batch_first else x), _leaf(h0), _leaf(c0)
    if family != "lstm":
        out, hn = module(tx, th)
        loss = (hn * torch.from_numpy(dLdhN)).sum()
    else:
        out, (hn, cn) = module(tx, (th, tc))
        loss = (hn * torch.from_numpy(dLdhN)).sum() + (cn * torch.from_numpy(dLdcN)).sum()
    dLdout = dLdY.transpose(1, 0, 2) if batch_first else dLdY
    (loss + (out * torch.from_numpy(np.ascontiguousarray(dLdout))).sum()).backward()

    rnn = convert.from_torch_module(module)
    assert (rnn.family, rnn.cell, rnn.batch_first) == (family, False, batch_first)
    assert rnn.linear_before_reset is (True if family == "gru" else None)
    assert rnn.activation == options.get("nonlinearity")
    assert rnn.dropout == module.dropout
    assert [len(directions) for directions in rnn.layers] == [dirs] * num_layers
    Y, hN, cN, dLdx, grads = _cells_stack(rnn, x, h0, c0, dLdY, dLdhN, dLdcN)
    out = out.detach().numpy()
    assert_close(Y, out.transpose(1, 0, 2) if batch_first else out, F64_TOL, "output")
    assert_close(hN, hn.detach().numpy(), F64_TOL, "h_n")
    if family == "lstm":
        assert_close(cN, cn.detach().numpy(), F64_TOL, "c_n")
    tdx = tx.grad.numpy()
    assert_close(dLdx, tdx.transpose(1, 0, 2) if batch_first else tdx, F64_TOL, "dLdx")
    for layer in range(num_layers):
        for d, suffix in enumerate(("", "_reverse")[:dirs]):
            params = [getattr(module, f"{n}_l{layer}{suffix}", None) for n in TORCH_NAMES]
            torch_grads = [None if p is None else p.grad.numpy() for p in params]
            _assert_grads_follow_the_rule(family, grads[layer][d], torch_grads, bias)


@pytest.mark.parametrize("module_name", list(MODULES))
def test_from_torch_module_cells_match_torch(module_name):
    """nn.GRUCell / nn.LSTMCell / nn.RNNCell: one step in cells.gruCell / lstmLayerCell /
    rnnCell, and its gradients."""
    bS, n_in, H = 3, 5, 2
    kind, options = MODULES[module_name]
    family = kind.lower()
    module = _random_module(kind + "Cell", n_in, H, 7, **options)
    rng = np.random.default_rng(8100)
    x, h0, c0 = (rng.normal(0.0, 1.0, (bS, n_in)), rng.uniform(-0.9, 0.9, (bS, H)),
                 rng.uniform(-1.5, 1.5, (bS, H)))
    dLdh, dLdc = rng.normal(0.0, 1.0, (bS, H)), rng.normal(0.0, 1.0, (bS, H))
    tx, th, tc = _leaf(x), _leaf(h0), _leaf(c0)
    rnn = convert.from_torch_module(module)
    assert (rnn.family, rnn.cell, rnn.batch_first, len(rnn.layers)) == (family, True, False, 1)
    assert rnn.activation == options.get("nonlinearity")
    weights = rnn.layers[0][0]
    if family == "gru":
        h_t = module(tx, th)
        (h_t * torch.from_numpy(dLdh)).sum().backward()
        _, h = cells.gruCell(x, h0, *weights, linear_before_reset=True)
        dx, dh0, *g = cells.gruCellBp(x, h0, *weights, dLdh, linear_before_reset=True)
    elif family == "rnn":
        h_t = module(tx, th)
        (h_t * torch.from_numpy(dLdh)).sum().backward()
        h = cells.rnnCell(x, h0, *weights, activation=rnn.activation)
        dx, dh0, *g = cells.rnnCellBp(x, h0, *weights, dLdh, activation=rnn.activation)
    else:
        h_t, c_t = module(tx, (th, tc))
        ((h_t * torch.from_numpy(dLdh)).sum() + (c_t * torch.from_numpy(dLdc)).sum()).backward()
        h, c = cells.lstmLayerCell(x, *weights, h0, c0)
        assert_close(c, c_t.detach().numpy(), F64_TOL, "c")
        dx, *g, dh0, _, _ = cells.lstmLayerCellBp(x, *weights, h0, c0, dLdh, dLdc)
    assert_close(h, h_t.detach().numpy(), F64_TOL, "h")
    assert_close(dx, tx.grad.numpy(), F64_TOL, "dLdx")
    assert_close(dh0, th.grad.numpy(), F64_TOL, "dLdh0")
    torch_grads = [getattr(module, n).grad.numpy() for n in TORCH_NAMES]
    _assert_grads_follow_the_rule(family, tuple(g), torch_grads, True)


def test_gru_bias_without_recurrent_row_has_no_recurrent_gradient():
    """A GRU run in cells with b [3H] has no bh: gru_to_torch maps it with bias_hh = 0 (the
    same model), but the gradient it maps for bias_hh is 0 where torch's is not. Run with
    np.stack([b, 0*b]) instead and every gradient maps (the rule's last item)."""
    sL, bS, n_in, H = 4, 2, 3, 2
    rng = np.random.default_rng(8200)
    x, h0 = rng.normal(0.0, 1.0, (sL, bS, n_in)), rng.uniform(-0.9, 0.9, (bS, H))
    Wx, Wh, b = (rng.normal(0.0, 0.5, s) for s in ((n_in, 3 * H), (H, 3 * H), (3 * H,)))
    dLdh = rng.normal(0.0, 1.0, (sL, bS, H))
    gru = torch.nn.GRU(n_in, H, dtype=torch.float64)
    with torch.no_grad():
        for name, a in zip(TORCH_NAMES, convert.gru_to_torch(Wx, Wh, b, linear_before_reset=True)):
            getattr(gru, name + "_l0").copy_(torch.from_numpy(a))
    out, _ = gru(torch.from_numpy(x), torch.from_numpy(h0[None]))
    (out * torch.from_numpy(dLdh)).sum().backward()
    g_bhh = gru.bias_hh_l0.grad.numpy()
    assert_close(cells.gruTimeLoop(x, h0, Wx, Wh, b, linear_before_reset=True),
                 out.detach().numpy(), F64_TOL, "output")

    one_row = cells.gruTimeLoopBp(x, h0, Wx, Wh, b, dLdh, linear_before_reset=True)[2:]
    assert np.all(convert.gru_to_torch(*one_row, linear_before_reset=True)[3] == 0)
    assert np.max(np.abs(g_bhh)) > 1e-3
    b2 = np.stack([b, 0 * b])
    two_rows = cells.gruTimeLoopBp(x, h0, Wx, Wh, b2, dLdh, linear_before_reset=True)[2:]
    mapped = convert.gru_to_torch(*two_rows, linear_before_reset=True)
    assert_close(mapped[3], g_bhh, F64_TOL, "dbias_hh")
    assert_close(mapped[2], gru.bias_ih_l0.grad.numpy(), F64_TOL, "dbias_ih")


def test_torch_tensors_in_float32_stay_float32():
    """Parameters (requires_grad) go in as they are: detached, float32 kept, values exact."""
    module = torch.nn.LSTM(3, 2, num_layers=1, bidirectional=True)  # float32 by default
    rnn = convert.from_torch_module(module)
    Wx, Wr, b = rnn.layers[0][1]
    assert Wx.dtype == Wr.dtype == b.dtype == np.float32
    assert np.array_equal(Wx, module.weight_ih_l0_reverse.detach().numpy().T)
    assert np.array_equal(b, (module.bias_ih_l0_reverse + module.bias_hh_l0_reverse).detach())
    assert Wx.flags.c_contiguous and Wr.flags.c_contiguous


@pytest.mark.parametrize("module,error,words", [
    (lambda: torch.nn.LSTM(3, 4, proj_size=2), ValueError, "proj_size=2"),
    (lambda: torch.nn.RNNBase("GRU", 3, 4), TypeError, "got RNNBase"),
    (lambda: torch.nn.Linear(3, 4), TypeError, "got Linear"),
    (lambda: torch.nn.RNNCellBase(3, 4, True, 1), TypeError, "got RNNCellBase"),
])
def test_from_torch_module_rejects(module, error, words):
    with pytest.raises(error, match=words):
        convert.from_torch_module(module())


def test_half_precision_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="weight_ih: expected dtype float32 or float64"):
        convert.from_torch_module(torch.nn.GRU(3, 2, dtype=torch.float16))
    with pytest.raises(TypeError, match="weight_ih: expected dtype float32 or float64"):
        convert.from_torch_module(torch.nn.RNN(3, 2, dtype=torch.float16))


def test_rnn_module_in_float32_and_without_bias():
    """A float32 nn.RNN (relu, bias=False, bidirectional) converts exactly, float32 kept, with
    zero biases in cells' b [2, H]."""
    module = torch.nn.RNN(3, 2, nonlinearity="relu", bias=False, bidirectional=True)
    rnn = convert.from_torch_module(module)
    assert (rnn.family, rnn.activation, rnn.linear_before_reset) == ("rnn", "relu", None)
    for d, suffix in enumerate(("", "_reverse")):
        Wx, Wh, b = rnn.layers[0][d]
        assert Wx.dtype == Wh.dtype == b.dtype == np.float32
        assert np.array_equal(Wx, getattr(module, "weight_ih_l0" + suffix).detach().numpy().T)
        assert np.array_equal(Wh, getattr(module, "weight_hh_l0" + suffix).detach().numpy().T)
        assert b.shape == (2, 2) and not b.any()
