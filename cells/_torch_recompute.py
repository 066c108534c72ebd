"""The time loops of cells.torch's operators in plain torch: the slower but exact path of their
second derivatives.

cells.torch's backward operators (cells::<family>_time_loop_backward) run cells' kernels, which
autograd cannot see into. Their own derivatives (double backward: gradient penalties,
Hessian-vector products) differentiate this recomputation instead: the same time loop, written
in torch operations, one Python iteration per step. It computes what cells' kernels compute, in
their layout (x time-major [sL, bS, nIn], weights [K, G] with the gate blocks in cells' order),
with their seq_len and direction semantics, so that autograd's derivatives of it are those of the
operators, to every order.

A step function takes one step's input x [bS, nIn] and states and returns the new states, the
output first. time_loop runs one over a sequence.
"""
import torch
from torch.nn import functional as F


def gru_step(x, h, Wx, Wh, b):
    """One step of cells' GRU with linear_before_reset=True (PyTorch's).

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h : torch.Tensor, [bS, nOut]
        The state entering the step.
    Wx, Wh : torch.Tensor, [nIn, 3nOut] and [nOut, 3nOut]
        Gate blocks (r, u, c).
    b : torch.Tensor, [3nOut] or [2, 3nOut]
        bx alone (bh = 0), or the rows bx and bh.

    Returns
    -------
    tuple of torch.Tensor
        (h',): h' = (1 - u)∘c + u∘h, c = tanh(x·Wx_c + bx_c + r∘(h·Wh_c + bh_c)).
    """
    if b.dim() == 1:
        gx, gh = x @ Wx + b, h @ Wh
    else:
        gx, gh = x @ Wx + b[0], h @ Wh + b[1]
    xr, xu, xc = gx.chunk(3, 1)
    hr, hu, hc = gh.chunk(3, 1)
    r = torch.sigmoid(xr + hr)
    u = torch.sigmoid(xu + hu)
    c = torch.tanh(xc + r * hc)
    return ((1 - u) * c + u * h,)


def lstm_step(x, h, c, Wx, Wr, b, Wproj):
    """One step of cells' LSTM without peepholes or clipping (PyTorch's).

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h, c : torch.Tensor, [bS, nState] and [bS, nOut]
        The states entering the step (nState = nProj with Wproj, else nOut).
    Wx, Wr : torch.Tensor, [nIn, 4nOut] and [nState, 4nOut]
        Gate blocks (i, f, g, o).
    b : torch.Tensor, [4nOut]
    Wproj : torch.Tensor, [nOut, nProj], or None

    Returns
    -------
    tuple of torch.Tensor
        (h', c'): c' = σ(f)∘c + σ(i)∘tanh(g), h' = (σ(o)∘tanh(c'))·Wproj (without the product
        when Wproj is None).
    """
    i, f, g, o = (x @ Wx + h @ Wr + b).chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    m = torch.sigmoid(o) * torch.tanh(c)
    return (m if Wproj is None else m @ Wproj), c


def lltm_step(x, h, c, W, b):
    """One step of the LLTM of PyTorch's C++-extension tutorial.

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h, c : torch.Tensor, [bS, S]
        The states entering the step.
    W : torch.Tensor, [3S, S + nIn]
        Columns h then x; row blocks (i, o, n).
    b : torch.Tensor, [3S]

    Returns
    -------
    tuple of torch.Tensor
        (h', c'): c' = c + elu(n)∘σ(i), h' = tanh(c')∘σ(o).
    """
    i, o, n = (torch.cat([h, x], 1) @ W.t() + b).chunk(3, 1)
    c = c + F.elu(n) * torch.sigmoid(i)
    return torch.tanh(c) * torch.sigmoid(o), c


def rnn_step(x, h, Wx, Wh, b, activation):
    """One step of cells' RNN.

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h : torch.Tensor, [bS, nOut]
        The state entering the step.
    Wx, Wh : torch.Tensor, [nIn, nOut] and [nOut, nOut]
    b : torch.Tensor, [nOut] or [2, nOut]
        bx alone, or the rows bx and bh.
    activation : {"tanh", "relu"}

    Returns
    -------
    tuple of torch.Tensor
        (h',): h' = act(x·Wx + bx + h·Wh + bh); relu'(0) = 0.
    """
    z = x @ Wx + h @ Wh + (b if b.dim() == 1 else b[0] + b[1])
    return (torch.tanh(z) if activation == "tanh" else torch.relu(z),)


def time_loop(step, x, states, seq_len, forward):
    """A step function over a sequence, as cells' time loops run it.

    Row b runs its first seq_len[b] steps, in time order going forward, from step
    seq_len[b] - 1 down to 0 in reverse. Its outputs at the other steps are 0 and its states
    pass them unchanged, so that the final states are those after its last valid step.

    Parameters
    ----------
    step : callable
        step(x [bS, nIn], *states) -> new states, the output first.
    x : torch.Tensor, [sL, bS, nIn]
    states : tuple of torch.Tensor
        The initial states, each [bS, n].
    seq_len : torch.Tensor of int, [bS], or None
        None: every row runs sL steps.
    forward : bool

    Returns
    -------
    h : torch.Tensor, [sL, bS, n]
        The output of every step, at its time index.
    states : tuple of torch.Tensor
        The final states.
    """
    sL, bS = x.shape[:2]
    k = torch.arange(sL, device=x.device)[:, None]
    lengths = sL if seq_len is None else seq_len.to(x.device)
    valid = (k < lengths).expand(sL, bS)
    # the time index each row runs at processing step k; the reverse order is its own inverse,
    # so that the same index puts the outputs back at their time steps
    times = k.expand(sL, bS) if forward else torch.where(valid, lengths - 1 - k, k)
    rows = torch.arange(bS, device=x.device)
    xs = x[times, rows]
    outputs = []
    for t in range(sL):
        new = step(xs[t], *states)
        mask = valid[t, :, None]
        states = tuple(torch.where(mask, n, s) for n, s in zip(new, states))
        outputs.append(torch.where(mask, new[0], 0))
    return torch.stack(outputs)[times, rows], states


def gru(x, hI, Wx, Wh, b, seq_len, forward):
    """cells::gru_time_loop's differentiable output, (h,)."""
    h, _ = time_loop(lambda x, h: gru_step(x, h, Wx, Wh, b), x, (hI,), seq_len, forward)
    return (h,)


def lstm(x, Wx, Wr, b, hI, cI, Wproj, seq_len, forward):
    """cells::lstm_time_loop's differentiable outputs, (h, hL, cL)."""
    h, (hL, cL) = time_loop(lambda x, h, c: lstm_step(x, h, c, Wx, Wr, b, Wproj), x, (hI, cI),
                            seq_len, forward)
    return h, hL, cL


def lltm(x, W, b, hI, cI, seq_len, forward):
    """cells::lltm_time_loop's differentiable outputs, (h, hL, cL)."""
    h, (hL, cL) = time_loop(lambda x, h, c: lltm_step(x, h, c, W, b), x, (hI, cI), seq_len,
                            forward)
    return h, hL, cL


def rnn(x, hI, Wx, Wh, b, activation, seq_len, forward):
    """cells::rnn_time_loop's differentiable output, (h,)."""
    h, _ = time_loop(lambda x, h: rnn_step(x, h, Wx, Wh, b, activation), x, (hI,), seq_len,
                     forward)
    return (h,)
