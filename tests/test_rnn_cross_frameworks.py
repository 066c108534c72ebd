"""cells' vanilla RNN against torch.nn.RNNCell / nn.RNN (float64 forward and autograd), tanh and
relu: one step, a sequence, packed sequences of different lengths (enforce_sorted=False) and a
bidirectional module (its reverse half is cells with seq_len and forward=False).

Mapping (docs/guide/weights.md): weight_ih = Wx.T, weight_hh = Wh.T, bias_ih = b[0], bias_hh = b[1];
torch's nonlinearity is cells' activation. torch's float64 CPU RNN evaluates the same formulas
in float64 (~1e-16): F64_TOL (gru_reference.py) applies. Torch is imported lazily (skipped
cleanly when it is not installed).
"""
import numpy as np
import pytest

import cells
from gru_reference import F64_TOL, assert_close
from rnn_reference import ACTIVATIONS, make_fd_problem
from rnn_torch import bidirectional_packed, set_torch

TORCH_TOL = F64_TOL


@pytest.fixture(params=ACTIVATIONS)
def activation(request):
    return request.param


def _assert_weight_grads(grads, params, suffix=""):
    """cells' dLdWx, dLdWh, dLdb [2, nOut] against the torch parameters' .grad."""
    for name, g, p in zip(("dLdWx", "dLdWh", "dLdb[0]", "dLdb[1]"),
                          (grads.dLdWx, grads.dLdWh, grads.dLdb[0], grads.dLdb[1]), params):
        g_torch = p.grad.numpy()
        assert_close(g, g_torch.T if g_torch.ndim == 2 else g_torch, TORCH_TOL, name + suffix)


@pytest.mark.parametrize("bS,n_in,n_out", [(3, 4, 5), (1, 6, 2)])
def test_torch_rnn_cell(activation, bS, n_in, n_out):
    torch = pytest.importorskip("torch")
    x, hI, Wx, Wh, b, dLdh, _ = make_fd_problem(1100 + bS, 1, bS, n_in, n_out, True, activation)
    x, dLdh = x[0], dLdh[0]
    cell = torch.nn.RNNCell(n_in, n_out, nonlinearity=activation, dtype=torch.float64)
    params = set_torch(torch, cell, Wx, Wh, b)
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI.copy()).requires_grad_(True)
    out = cell(tx, th)
    (out * torch.from_numpy(dLdh)).sum().backward()

    assert_close(cells.rnnCell(x, hI, Wx, Wh, b, activation=activation), out.detach().numpy(),
                 TORCH_TOL, "h")
    grads = cells.rnnCellBp(x, hI, Wx, Wh, b, dLdh, activation=activation)
    assert_close(grads.dLdx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(grads.dLdhI, th.grad.numpy(), TORCH_TOL, "dLdhI")
    _assert_weight_grads(grads, params)


@pytest.mark.parametrize("use_ws", [False, True])
@pytest.mark.parametrize("sL,bS,n_in,n_out", [(5, 3, 4, 6), (7, 2, 13, 24)])
def test_torch_rnn_sequence(activation, use_ws, sL, bS, n_in, n_out):
    torch = pytest.importorskip("torch")
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(1200 + sL, sL, bS, n_in, n_out, True,
                                                       activation)
    rnn = torch.nn.RNN(n_in, n_out, nonlinearity=activation, dtype=torch.float64)
    params = set_torch(torch, rnn, Wx, Wh, b, "_l0")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI[None].copy()).requires_grad_(True)
    out, hn = rnn(tx, th)
    ((out * torch.from_numpy(dLdh)).sum() + (hn[0] * torch.from_numpy(dLdhLast)).sum()).backward()

    h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation, return_workspace=True)
    assert_close(h, out.detach().numpy(), TORCH_TOL, "h")
    assert_close(h[-1], hn.detach().numpy()[0], TORCH_TOL, "h_last")
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                workspace=ws if use_ws else None, activation=activation)
    assert_close(grads.dLdx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(grads.dLdhI, th.grad.numpy()[0], TORCH_TOL, "dLdhI")
    _assert_weight_grads(grads, params)


@pytest.mark.parametrize("use_ws", [False, True])
def test_torch_bidirectional_packed_rnn(activation, use_ws):
    """nn.RNN(bidirectional=True) on a packed batch of different lengths, enforce_sorted=False
    (torch rejects length 0; a full-length row is included): its forward half is cells with
    seq_len, its reverse half cells with seq_len and forward=False (weights *_l0_reverse).
    Outputs, final states and every autograd gradient; dLdx sums both halves'."""
    torch = pytest.importorskip("torch")
    sL, n_in, n_out = 6, 4, 5
    lengths = np.array([2, 6, 4, 1])
    bS = lengths.size
    halves, out, hn, tx, th, params = bidirectional_packed(torch, activation, 1300, lengths, sL,
                                                           n_in, n_out)
    x = halves[0][0]

    dx = 0
    for d, (_, hI, Wx, Wh, b, dLdh, dLdhLast) in enumerate(halves):
        kw = {"activation": activation, "seq_len": lengths, "forward": d == 0}
        h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **kw)
        assert_close(h, out.detach().numpy()[..., d * n_out:(d + 1) * n_out], TORCH_TOL, "h")
        last = lengths - 1 if d == 0 else np.zeros_like(lengths)
        assert_close(h[last, np.arange(bS)], hn.detach().numpy()[d], TORCH_TOL, "h_last")
        grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                    workspace=ws if use_ws else None, **kw)
        assert_close(grads.dLdhI, th.grad.numpy()[d], TORCH_TOL, f"dLdhI[{d}]")
        _assert_weight_grads(grads, params[d], f"[{d}]")
        dx = dx + grads.dLdx  # x feeds both directions
    assert_close(dx, tx.grad.numpy(), TORCH_TOL, "dLdx")


def test_torch_relu_derivative_at_zero():
    """Units with all-zero weights and biases have z = 0 exactly: cells' relu'(0) = 0 gives
    torch autograd's gradients, the zeros included."""
    torch = pytest.importorskip("torch")
    sL, bS, n_in, n_out = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(1400, sL, bS, n_in, n_out, True, "relu")
    dead = [0, 2]
    Wx[:, dead], Wh[:, dead], b[:, dead] = 0.0, 0.0, 0.0
    rnn = torch.nn.RNN(n_in, n_out, nonlinearity="relu", dtype=torch.float64)
    params = set_torch(torch, rnn, Wx, Wh, b, "_l0")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI[None].copy()).requires_grad_(True)
    out, hn = rnn(tx, th)
    ((out * torch.from_numpy(dLdh)).sum() + (hn[0] * torch.from_numpy(dLdhLast)).sum()).backward()
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, activation="relu")
    assert_close(grads.dLdx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(grads.dLdhI, th.grad.numpy()[0], TORCH_TOL, "dLdhI")
    _assert_weight_grads(grads, params)
    assert np.all(grads.dLdWx[:, dead] == 0) and np.all(params[0].grad.numpy()[dead] == 0)
