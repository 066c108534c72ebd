"""torch's nn.RNN driven with the problems of rnn_reference.py, for the tests that compare the
reference (test_rnn_reference.py) and cells (test_rnn_cross_frameworks.py) with it."""
import numpy as np

from rnn_reference import make_fd_problem


def set_torch(torch, module, Wx, Wh, b, suffix=""):
    """Copy (Wx, Wh, b [2, nOut]) into a torch RNN's parameters (weight_ih = Wx^T, weight_hh =
    Wh^T, bias_ih = b[0], bias_hh = b[1]); returns the four parameters."""
    names = [n + suffix for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    with torch.no_grad():
        for name, a in zip(names, (Wx.T, Wh.T, b[0], b[1])):
            getattr(module, name).copy_(torch.from_numpy(np.ascontiguousarray(a)))
    return [getattr(module, n) for n in names]


def bidirectional_packed(torch, activation, seed, lengths, sL, n_in, n_out):
    """nn.RNN(bidirectional=True, float64) on a packed batch of `lengths` (enforce_sorted=False),
    with the weights, initial states and upstream gradients of two rnn_reference problems (seeds
    seed and seed + 1: the forward half, and the reverse half with forward=False), and a loss
    sum(dLdY·Y) + sum(dLdhN·hN) backpropagated. The upstream gradients at padded outputs are
    zeroed (they go nowhere in torch). Returns (halves, out [sL, bS, 2·n_out], hn [2, bS, n_out],
    tx, th, params): the problems, torch's outputs, its input and initial-state leaves (with
    .grad) and each half's four parameters."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    bS = lengths.size
    halves = [make_fd_problem(seed + d, sL, bS, n_in, n_out, True, activation, lengths, d == 0)
              for d in (0, 1)]
    for _, _, _, _, _, dLdh, _ in halves:
        for row, length in enumerate(lengths):
            dLdh[length:, row] = 0
    rnn = torch.nn.RNN(n_in, n_out, nonlinearity=activation, bidirectional=True,
                       dtype=torch.float64)
    params = [set_torch(torch, rnn, *halves[d][2:5], suffix)
              for d, suffix in enumerate(("_l0", "_l0_reverse"))]
    tx = torch.from_numpy(halves[0][0].copy()).requires_grad_(True)
    th = torch.from_numpy(np.stack([halves[0][1], halves[1][1]])).requires_grad_(True)
    packed = pack_padded_sequence(tx, torch.from_numpy(lengths), enforce_sorted=False)
    out_packed, hn = rnn(packed, th)
    out, _ = pad_packed_sequence(out_packed, total_length=sL)
    dLdY = np.concatenate([halves[0][5], halves[1][5]], axis=2)
    dLdhN = np.stack([halves[0][6], halves[1][6]])
    ((out * torch.from_numpy(dLdY)).sum() + (hn * torch.from_numpy(dLdhN)).sum()).backward()
    return halves, out, hn, tx, th, params
