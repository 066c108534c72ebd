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
output first. time_loop runs one over a sequence; zoned_time_loop runs one as haste's layers do
(cells.haste: every step of every row, zoneout on the output state).
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


def layer_norm_lstm_step(x, h, c, Wx, Wh, b, gamma, gamma_h, beta_h):
    """One step of haste's LayerNorm LSTM (cells' layer_norm_lstm family).

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h, c : torch.Tensor, [bS, nOut]
        The states entering the step.
    Wx, Wh : torch.Tensor, [nIn, 4nOut] and [nOut, 4nOut]
        Gate blocks (i, g, f, o), haste's.
    b : torch.Tensor, [4nOut]
    gamma : torch.Tensor, [2, 4nOut]
        The gains of LN(x·Wx) and LN(h·Wh).
    gamma_h, beta_h : torch.Tensor, [nOut]
        The gain and bias of LN(c').

    Returns
    -------
    tuple of torch.Tensor
        (h', c'): v = gamma[0]∘LN(x·Wx) + gamma[1]∘LN(h·Wh) + b, c' = σ(f)∘c + σ(i)∘tanh(g),
        h' = σ(o)∘tanh(gamma_h∘LN(c') + beta_h); LN over the whole row, epsilon 1e-5.
    """
    G = Wh.shape[1]
    v = F.layer_norm(x @ Wx, (G,), gamma[0]) + F.layer_norm(h @ Wh, (G,), gamma[1]) + b
    i, g, f, o = v.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(F.layer_norm(c, (c.shape[1],), gamma_h, beta_h)), c


def layer_norm_gru_step(x, h, Wx, Wh, b, bh, gamma):
    """One step of haste's LayerNorm GRU (cells' layer_norm_gru family).

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h : torch.Tensor, [bS, nOut]
        The state entering the step.
    Wx, Wh : torch.Tensor, [nIn, 3nOut] and [nOut, 3nOut]
        Gate blocks (z, r, h), haste's.
    b, bh : torch.Tensor, [3nOut]
        The biases added after LN(x·Wx) and LN(h·Wh).
    gamma : torch.Tensor, [2, 3nOut]
        The gains of LN(x·Wx) and LN(h·Wh).

    Returns
    -------
    tuple of torch.Tensor
        (h',): h' = z∘h + (1 - z)∘tanh(vx_h + r∘vh_h), vx = gamma[0]∘LN(x·Wx) + b,
        vh = gamma[1]∘LN(h·Wh) + bh, z and r the sigmoids of vx + vh in their blocks.
    """
    G = Wh.shape[1]
    xz, xr, xh = (F.layer_norm(x @ Wx, (G,), gamma[0]) + b).chunk(3, 1)
    hz, hr, hh = (F.layer_norm(h @ Wh, (G,), gamma[1]) + bh).chunk(3, 1)
    z = torch.sigmoid(xz + hz)
    r = torch.sigmoid(xr + hr)
    return (z * h + (1 - z) * torch.tanh(xh + r * hh),)


def indrnn_step(x, h, Wx, u, b):
    """One step of the IndRNN (haste's; cells' indrnn family).

    Parameters
    ----------
    x : torch.Tensor, [bS, nIn]
    h : torch.Tensor, [bS, nOut]
        The state entering the step.
    Wx : torch.Tensor, [nIn, nOut]
    u, b : torch.Tensor, [nOut]
        Each unit's recurrent scale and bias.

    Returns
    -------
    tuple of torch.Tensor
        (h',): h' = tanh(x·Wx + b + u∘h).
    """
    return (torch.tanh(x @ Wx + b + u * h),)


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


def zoned_time_loop(step, x, states, zoneout):
    """A step function over a sequence as haste's layers run it: every row runs every step, in
    time order, and zoneout holds part of the output state (the first) at its previous value.

    Parameters
    ----------
    step : callable
        step(x [bS, nIn], *states) -> new states, the output first.
    x : torch.Tensor, [sL, bS, nIn]
    states : tuple of torch.Tensor
        The initial states, each [bS, n].
    zoneout : None, float or torch.Tensor [sL, bS, n]
        The share of the new output state at each step, z: h = hPrev + z∘(h' - hPrev), where
        step gives h'. None: all of it (no zoneout); a float, every step's (1 - p in haste's
        eval mode); a tensor, step t's is zoneout[t] (haste's training mask).

    Returns
    -------
    tuple of torch.Tensor
        Each state at every step, [sL + 1, bS, n], the initial state first.
    """
    sequences = [[s] for s in states]
    for t in range(x.shape[0]):
        new = step(x[t], *states)
        if zoneout is not None:
            share = zoneout[t] if isinstance(zoneout, torch.Tensor) else zoneout
            new = (states[0] + share * (new[0] - states[0]), *new[1:])
        for sequence, s in zip(sequences, new):
            sequence.append(s)
        states = new
    return tuple(torch.stack(sequence) for sequence in sequences)


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
