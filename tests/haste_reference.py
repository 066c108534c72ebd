"""Independent references of haste's layers (lmnt-com/haste, frameworks/pytorch/*.py: the
plain-torch ``*Script`` functions, haste's CPU path), on cells' argument order and shapes:
x [T, N, I], states [N, H], haste's parameters as they are (kernel = Wx [I, G·H],
recurrent_kernel = Wh [H, G·H], haste's gate order).

Two of each: a NumPy float64 forward written for reading (``layer_norm_lstm``, ...), and a
PyTorch step loop (``torch_layer_norm_lstm``, ...: nn.functional.layer_norm and matrix
products, one Python iteration per step), differentiable by autograd, the tests' gradient
reference.

The details, each from haste's sources:
- LayerNorm (layer_norm_lstm.py, layer_norm_gru.py: F.layer_norm with its default eps):
  (v - mean) / sqrt(var + 1e-5) over the whole row (4H or 3H values; H for the LSTM's c), the
  biased variance; the products' LayerNorms have a gain (gamma[0] on x·kernel, gamma[1] on
  h·recurrent_kernel) and no bias, the LSTM's bias is added after them; only the LSTM's
  LayerNorm of c has a bias (beta_h), and the c it carries is not normalised.
- LayerNorm GRU: bias after LN(x·kernel), recurrent_bias after LN(h·recurrent_kernel); the
  reset gate multiplies the recurrent side of the candidate (linear-before-reset).
- Zoneout (every *Script): on h only; training h = (h_new - h_prev)∘mask + h_prev, eval
  h = p·h_prev + (1 - p)·h_new. `zoneout` here: None, p (eval) or the mask [T, N, H]
  (training).
"""
import numpy as np


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _layer_norm(v, gain, bias=0.0):
    """gain∘(v - mean) / sqrt(var + 1e-5) + bias over the last axis, var biased."""
    mean = v.mean(-1, keepdims=True)
    var = ((v - mean) ** 2).mean(-1, keepdims=True)
    return gain * (v - mean) / np.sqrt(var + 1e-5) + bias


def _zoned(h_new, h_prev, zoneout, t):
    """h after zoneout at step t."""
    if zoneout is None:
        return h_new
    if isinstance(zoneout, float):
        return zoneout * h_prev + (1 - zoneout) * h_new
    return (h_new - h_prev) * zoneout[t] + h_prev


def _chunks(v, n):
    return np.split(v, n, axis=-1)


def layer_norm_lstm(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI, zoneout=None):
    """haste's LayerNormLSTM: (h [T, N, H], c [T, N, H]), every step's."""
    h, c, hs, cs = hI, cI, [], []
    for t in range(x.shape[0]):
        v = _layer_norm(h @ Wh, gamma[1]) + _layer_norm(x[t] @ Wx, gamma[0]) + b
        i, g, f, o = _chunks(v, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _zoned(_sigmoid(o) * np.tanh(_layer_norm(c, gamma_h, beta_h)), h, zoneout, t)
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)


def layer_norm_gru(x, Wx, Wh, b, rb, gamma, hI, zoneout=None):
    """haste's LayerNormGRU: h [T, N, H], every step's."""
    h, hs = hI, []
    for t in range(x.shape[0]):
        vx = _chunks(_layer_norm(x[t] @ Wx, gamma[0]) + b, 3)
        vh = _chunks(_layer_norm(h @ Wh, gamma[1]) + rb, 3)
        z = _sigmoid(vx[0] + vh[0])
        r = _sigmoid(vx[1] + vh[1])
        g = np.tanh(vx[2] + r * vh[2])
        h = _zoned(z * h + (1 - z) * g, h, zoneout, t)
        hs.append(h)
    return np.stack(hs)


def lstm(x, Wx, Wh, b, hI, cI, zoneout=None):
    """haste's LSTM (gates i, g, f, o, one bias): (h, c) [T, N, H], every step's."""
    h, c, hs, cs = hI, cI, [], []
    for t in range(x.shape[0]):
        i, g, f, o = _chunks(h @ Wh + x[t] @ Wx + b, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _zoned(_sigmoid(o) * np.tanh(c), h, zoneout, t)
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)


def gru(x, Wx, Wh, b, rb, hI, zoneout=None):
    """haste's GRU (gates z, r, h; bias and recurrent_bias): h [T, N, H], every step's."""
    h, hs = hI, []
    for t in range(x.shape[0]):
        vx, vh = _chunks(x[t] @ Wx + b, 3), _chunks(h @ Wh + rb, 3)
        z = _sigmoid(vx[0] + vh[0])
        r = _sigmoid(vx[1] + vh[1])
        h = _zoned(z * h + (1 - z) * np.tanh(vx[2] + r * vh[2]), h, zoneout, t)
        hs.append(h)
    return np.stack(hs)


def indrnn(x, Wx, u, b, hI, zoneout=None):
    """haste's IndRNN, h = tanh(x·Wx + b + u∘hPrev): h [T, N, H], every step's."""
    h, hs = hI, []
    for t in range(x.shape[0]):
        h = _zoned(np.tanh(x[t] @ Wx + b + h * u), h, zoneout, t)
        hs.append(h)
    return np.stack(hs)


# ---------------------------------------------------------------------------------------------
# PyTorch step loops (autograd's reference; benchmarks/haste.py times one of its own)
# ---------------------------------------------------------------------------------------------

def _torch_zoned(h_new, h_prev, zoneout, t):
    if zoneout is None:
        return h_new
    if isinstance(zoneout, float):
        return zoneout * h_prev + (1 - zoneout) * h_new
    return (h_new - h_prev) * zoneout[t] + h_prev


def torch_layer_norm_lstm(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI, zoneout=None):
    """layer_norm_lstm in torch: (h, c) [T, N, H]."""
    import torch
    from torch.nn import functional as F
    G, H = Wh.shape[1], Wh.shape[0]
    h, c, hs, cs = hI, cI, [], []
    for t in range(x.shape[0]):
        v = (F.layer_norm(h @ Wh, (G,), weight=gamma[1])
             + F.layer_norm(x[t] @ Wx, (G,), weight=gamma[0]) + b)
        i, g, f, o = v.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(F.layer_norm(c, (H,), weight=gamma_h, bias=beta_h))
        h = _torch_zoned(h_new, h, zoneout, t)
        hs.append(h)
        cs.append(c)
    return torch.stack(hs), torch.stack(cs)


def torch_layer_norm_gru(x, Wx, Wh, b, rb, gamma, hI, zoneout=None):
    """layer_norm_gru in torch: h [T, N, H]."""
    import torch
    from torch.nn import functional as F
    G = Wh.shape[1]
    h, hs = hI, []
    for t in range(x.shape[0]):
        vx = (F.layer_norm(x[t] @ Wx, (G,), weight=gamma[0]) + b).chunk(3, 1)
        vh = (F.layer_norm(h @ Wh, (G,), weight=gamma[1]) + rb).chunk(3, 1)
        z = torch.sigmoid(vx[0] + vh[0])
        r = torch.sigmoid(vx[1] + vh[1])
        h = _torch_zoned(z * h + (1 - z) * torch.tanh(vx[2] + r * vh[2]), h, zoneout, t)
        hs.append(h)
    return torch.stack(hs)


def torch_indrnn(x, Wx, u, b, hI, zoneout=None):
    """indrnn in torch: h [T, N, H]."""
    import torch
    h, hs = hI, []
    for t in range(x.shape[0]):
        h = _torch_zoned(torch.tanh(x[t] @ Wx + b + h * u), h, zoneout, t)
        hs.append(h)
    return torch.stack(hs)
