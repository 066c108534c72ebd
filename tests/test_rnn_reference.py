"""The vanilla-RNN reference (tests/rnn_reference.py) proven on its own: its backward against
central finite differences of its forward (cell and sequences with seq_len masks in both
directions), and forward and backward against torch.nn.RNNCell / nn.RNN autograd in float64
(plain, packed sequences of different lengths, bidirectional), for tanh and relu.

Tolerances: FD_EPS, FD_TOL as justified in gru_reference.py. torch's float64 CPU RNN evaluates
the same formulas in float64, only in another summation order: F64_TOL (1e-12 relative to the
scale, gru_reference.py) covers it.
"""
import numpy as np
import pytest

from gru_reference import F64_TOL, FD_EPS, FD_TOL, assert_close, central_diff_grad
from rnn_reference import (
    ACTIVATIONS, act, act_grad, make_fd_problem, rnn_cell_backward, rnn_cell_forward,
    rnn_seq_backward, rnn_seq_forward,
)
from rnn_torch import bidirectional_packed, set_torch

NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")
TORCH_TOL = F64_TOL


@pytest.fixture(params=ACTIVATIONS)
def activation(request):
    return request.param


def test_activations_and_their_derivatives():
    z = np.array([-3.0, -1e-3, 0.0, 1e-3, 2.0])
    np.testing.assert_array_equal(act(z, "relu"), [0.0, 0.0, 0.0, 1e-3, 2.0])
    np.testing.assert_array_equal(act_grad(z, act(z, "relu"), "relu"), [0, 0, 0, 1, 1])
    np.testing.assert_allclose(act(z, "tanh"), np.tanh(z), rtol=0, atol=0)
    # 1 - tanh² cancels where tanh is near ±1: a few ulps of 1 relative to 1/cosh² there
    np.testing.assert_allclose(act_grad(z, np.tanh(z), "tanh"), 1 / np.cosh(z) ** 2,
                               rtol=1e-13)


@pytest.mark.parametrize("bS,n_in,n_out", [(1, 3, 2), (3, 2, 4), (2, 0, 3), (4, 5, 5)])
def test_reference_cell_backward_vs_finite_differences(activation, two_biases, bS, n_in,
                                                       n_out):
    x, hI, Wx, Wh, b, dLdh, _ = make_fd_problem(10 + bS + n_in + n_out, 1, bS, n_in, n_out,
                                                two_biases, activation)
    x, dLdh = x[0], dLdh[0]

    def loss(x, hI, Wx, Wh, b):
        return float(np.sum(dLdh * rnn_cell_forward(x, hI, Wx, Wh, b, activation)[0]))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = rnn_cell_backward(x, hI, Wx, Wh, b, dLdh, activation)
    for name, g, f in zip(NAMES5, grads, fd):
        if f.size:
            assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name)
    assert grads[4].shape == b.shape


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("lens", [None, (3, 0, 1, 2)])
def test_reference_sequence_backward_vs_finite_differences(activation, two_biases, forward,
                                                           lens):
    sL, bS, n_in, n_out = 3, 4, 2, 3
    seq_len = None if lens is None else np.array(lens)
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(20, sL, bS, n_in, n_out, two_biases,
                                                       activation, seq_len, forward)

    def loss(x, hI, Wx, Wh, b):
        h, hLast, _ = rnn_seq_forward(x, hI, Wx, Wh, b, activation, seq_len, forward)
        return float(np.sum(dLdh * h) + np.sum(dLdhLast * hLast))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation, seq_len, forward)
    for name, g, f in zip(NAMES5, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name)


def test_reference_sequence_masks_and_direction(activation):
    """The sequence rule, spelled out: padded outputs are 0, a row of length 0 keeps its initial
    state, and reverse runs each row's valid prefix from its last index down to 0."""
    sL, bS, n_in, n_out = 4, 3, 2, 3
    x, hI, Wx, Wh, b = make_fd_problem(30, sL, bS, n_in, n_out, True, activation)[:5]
    seq_len = np.array([4, 0, 2])
    h, hLast, _ = rnn_seq_forward(x, hI, Wx, Wh, b, activation, seq_len, False)
    assert np.all(h[:, 1] == 0) and np.all(h[2:, 2] == 0)
    np.testing.assert_array_equal(hLast[1], hI[1])
    # row 2 reversed: time index 1 first, then 0, whose output is the final state
    h1 = rnn_cell_forward(x[1, 2:], hI[2:], Wx, Wh, b, activation)[0]
    h0 = rnn_cell_forward(x[0, 2:], h1, Wx, Wh, b, activation)[0]
    np.testing.assert_array_equal(h[1, 2], h1[0])
    np.testing.assert_array_equal(h[0, 2], h0[0])
    np.testing.assert_array_equal(hLast[2], h0[0])
    # the final-state gradient of a row of length 0 passes straight to hI
    dLdhLast = np.arange(bS * n_out, dtype=float).reshape(bS, n_out)
    dhI = rnn_seq_backward(x, hI, Wx, Wh, b, None, dLdhLast, activation, seq_len, False)[1]
    np.testing.assert_array_equal(dhI[1], dLdhLast[1])


# ---------------------------------------------------------------------------------------------
# torch (its nonlinearity names are cells' activations, "tanh" and "relu")
# ---------------------------------------------------------------------------------------------
def _assert_torch_grads(grads, tx_grad, th_grad, params, suffix=""):
    """The reference's (dx, dhI, dWx, dWh, db [2, nOut]) against torch's gradients."""
    dx, dhI, dWx, dWh, db = grads
    if tx_grad is not None:
        assert_close(dx, tx_grad, TORCH_TOL, "dLdx" + suffix)
    assert_close(dhI, th_grad, TORCH_TOL, "dLdhI" + suffix)
    for name, g, p in zip(("dLdWx", "dLdWh", "dLdb[0]", "dLdb[1]"),
                          (dWx, dWh, db[0], db[1]), params):
        g_torch = p.grad.numpy()
        assert_close(g, g_torch.T if g_torch.ndim == 2 else g_torch, TORCH_TOL, name + suffix)


@pytest.mark.parametrize("bS,n_in,n_out", [(3, 4, 5), (2, 6, 2)])
def test_reference_vs_torch_rnn_cell(activation, bS, n_in, n_out):
    torch = pytest.importorskip("torch")
    x, hI, Wx, Wh, b, dLdh, _ = make_fd_problem(40 + n_out, 1, bS, n_in, n_out, True,
                                                activation)
    x, dLdh = x[0], dLdh[0]
    cell = torch.nn.RNNCell(n_in, n_out, nonlinearity=activation,
                            dtype=torch.float64)
    params = set_torch(torch, cell, Wx, Wh, b)
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI.copy()).requires_grad_(True)
    out = cell(tx, th)
    (out * torch.from_numpy(dLdh)).sum().backward()
    assert_close(rnn_cell_forward(x, hI, Wx, Wh, b, activation)[0], out.detach().numpy(),
                 TORCH_TOL, "h")
    _assert_torch_grads(rnn_cell_backward(x, hI, Wx, Wh, b, dLdh, activation), tx.grad.numpy(),
                        th.grad.numpy(), params)


@pytest.mark.parametrize("sL,bS,n_in,n_out", [(5, 3, 4, 6), (1, 2, 3, 2)])
def test_reference_vs_torch_rnn(activation, sL, bS, n_in, n_out):
    torch = pytest.importorskip("torch")
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(50 + sL, sL, bS, n_in, n_out, True,
                                                       activation)
    rnn = torch.nn.RNN(n_in, n_out, nonlinearity=activation, dtype=torch.float64)
    params = set_torch(torch, rnn, Wx, Wh, b, "_l0")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI[None].copy()).requires_grad_(True)
    out, hn = rnn(tx, th)
    ((out * torch.from_numpy(dLdh)).sum() + (hn[0] * torch.from_numpy(dLdhLast)).sum()).backward()
    h, hLast, _ = rnn_seq_forward(x, hI, Wx, Wh, b, activation)
    assert_close(h, out.detach().numpy(), TORCH_TOL, "h")
    assert_close(hLast, hn.detach().numpy()[0], TORCH_TOL, "hLast")
    grads = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation)
    _assert_torch_grads(grads, tx.grad.numpy(), th.grad.numpy()[0], params)


def test_reference_vs_torch_bidirectional_packed(activation):
    """nn.RNN(bidirectional=True) on a packed batch (enforce_sorted=False; torch rejects length
    0): its forward half is the reference with seq_len, its reverse half the reference with
    seq_len and forward=False; dLdx is the sum of both halves' (x feeds both)."""
    torch = pytest.importorskip("torch")
    sL, n_in, n_out = 6, 4, 5
    lengths = np.array([6, 2, 4, 1])
    halves, out, hn, tx, th, params = bidirectional_packed(torch, activation, 60, lengths, sL,
                                                           n_in, n_out)
    x = halves[0][0]

    dx = 0
    for d, (_, hI, Wx, Wh, b, dLdh, dLdhLast) in enumerate(halves):
        forward = d == 0
        h, hLast, _ = rnn_seq_forward(x, hI, Wx, Wh, b, activation, lengths, forward)
        assert_close(h, out.detach().numpy()[..., d * n_out:(d + 1) * n_out], TORCH_TOL, "h")
        assert_close(hLast, hn.detach().numpy()[d], TORCH_TOL, "hLast")
        grads = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation, lengths, forward)
        _assert_torch_grads(grads, None, th.grad.numpy()[d], params[d], f"[{d}]")
        dx = dx + grads[0]
    assert_close(dx, tx.grad.numpy(), TORCH_TOL, "dLdx")


def test_reference_relu_derivative_at_zero_is_torchs():
    """Units whose weights and biases are all 0 have z = 0 exactly: torch autograd's relu'(0)
    is 0, and so is the reference's. Every gradient, including the zero ones, equals torch's."""
    torch = pytest.importorskip("torch")
    sL, bS, n_in, n_out = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(70, sL, bS, n_in, n_out, True, "relu")
    dead = [0, 2]
    Wx[:, dead], Wh[:, dead], b[:, dead] = 0.0, 0.0, 0.0
    rnn = torch.nn.RNN(n_in, n_out, nonlinearity="relu", dtype=torch.float64)
    params = set_torch(torch, rnn, Wx, Wh, b, "_l0")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI[None].copy()).requires_grad_(True)
    out, hn = rnn(tx, th)
    ((out * torch.from_numpy(dLdh)).sum() + (hn[0] * torch.from_numpy(dLdhLast)).sum()).backward()
    z = rnn_seq_forward(x, hI, Wx, Wh, b, "relu")[2]
    assert np.all(z[..., dead] == 0)
    grads = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, "relu")
    _assert_torch_grads(grads, tx.grad.numpy(), th.grad.numpy()[0], params)
    dWx, dWh, db = grads[2:]
    assert np.all(dWx[:, dead] == 0) and np.all(dWh[:, dead] == 0) and np.all(db[:, dead] == 0)
    assert np.all(dWx[:, [1, 3]] != 0)
