"""Plain NumPy cells: one per family, the baseline contender of benchmarks/bench.py and, in
float64, the reference every contender is compared with.

Every forward takes the kernel's positional arguments (and variant options) and returns
(outputs, cache): outputs as cells returns them, in a tuple ((h,) for the GRU and the RNN,
(h, hL, cL) for LSTM and LLTM), cache what its backward needs. Every backward takes the same
arguments, then dLdh, the forward's outputs and cache and, as keywords named as in cells, the
gradients arriving at the final states; it returns the gradients in cells' order. One gemm
projects the inputs of all steps, a per-step loop carries the recurrence, and the weight
gradients are one gemm each over all steps: what you would write yourself. In float64 they
agree with torch autograd to about 1e-15, every output and gradient.
"""
import numpy as np


def _sigmoid(z):
    """Logistic function without exp overflow."""
    return 0.5 + 0.5 * np.tanh(0.5 * z)


def _prev_states(first, seq):
    """[first, seq[0], ..., seq[T-2]] reshaped to [T*B, H]: the state entering every step."""
    return np.concatenate([first[None], seq[:-1]]).reshape(-1, first.shape[1])


def numpy_gru(x, hI, Wx, Wh, b, *, linear_before_reset=False):
    """GRU forward over a time-major sequence; gates (r, u, c); b = [input bias, recurrent bias].

    Returns ((h [T,B,H],), cache) where cache = (gates, hc) holds per step the activated r, u, c
    [T,B,3H] and hc [T,B,H]: h·Wh_c + bh_c for linear_before_reset, r∘h for reset-before."""
    T, B, _ = x.shape
    H = hI.shape[1]
    bx, bh = b
    Wh_ru, Wh_c = np.ascontiguousarray(Wh[:, :2 * H]), np.ascontiguousarray(Wh[:, 2 * H:])
    gx = (x.reshape(T * B, -1) @ Wx + bx).reshape(T, B, 3 * H)
    h = np.empty((T, B, H), x.dtype)
    gates = np.empty((T, B, 3 * H), x.dtype)
    hc = np.empty((T, B, H), x.dtype)
    h_prev = hI
    for t in range(T):
        if linear_before_reset:
            gh = h_prev @ Wh + bh
            ru = _sigmoid(gx[t, :, :2 * H] + gh[:, :2 * H])
            hc[t] = gh[:, 2 * H:]
            c = np.tanh(gx[t, :, 2 * H:] + ru[:, :H] * hc[t])
        else:
            ru = _sigmoid(gx[t, :, :2 * H] + h_prev @ Wh_ru + bh[:2 * H])
            hc[t] = ru[:, :H] * h_prev
            c = np.tanh(gx[t, :, 2 * H:] + hc[t] @ Wh_c + bh[2 * H:])
        u = ru[:, H:]
        h[t] = (1 - u) * c + u * h_prev
        h_prev = h[t]
        gates[t, :, :2 * H] = ru
        gates[t, :, 2 * H:] = c
    return (h,), (gates, hc)


def numpy_gru_bp(x, hI, Wx, Wh, b, dLdh, outputs, cache, *, dLdhLast=None,
                 linear_before_reset=False):
    """Backpropagation through time for numpy_gru.

    Returns (dLdx, dLdhI, dLdWx, dLdWh, dLdb) shaped like (x, hI, Wx, Wh, b)."""
    (h,), (gates, hc) = outputs, cache
    T, B, _ = x.shape
    H = hI.shape[1]
    Wh_ru_T, Wh_c_T = Wh[:, :2 * H].T.copy(), Wh[:, 2 * H:].T.copy()
    dg = np.empty((T, B, 3 * H), x.dtype)   # dL/d(pre-activation) of r, u, c
    dgh_c = np.empty((T, B, H), x.dtype)    # dL/d(the recurrent c term's gemm output)
    dh_carry = np.zeros_like(hI) if dLdhLast is None else dLdhLast.copy()
    for t in reversed(range(T)):
        h_prev = h[t - 1] if t else hI
        r, u, c = gates[t, :, :H], gates[t, :, H:2 * H], gates[t, :, 2 * H:]
        dh = dLdh[t] + dh_carry
        dc = dh * (1 - u) * (1 - c * c)
        du = dh * (h_prev - c) * u * (1 - u)
        dh_carry = dh * u
        if linear_before_reset:
            dr = dc * hc[t] * r * (1 - r)
            dgh_c[t] = dc * r
            dh_carry += dgh_c[t] @ Wh_c_T
        else:
            d_rh = dc @ Wh_c_T
            dr = d_rh * h_prev * r * (1 - r)
            dgh_c[t] = dc
            dh_carry += d_rh * r
        dg[t, :, :H], dg[t, :, H:2 * H], dg[t, :, 2 * H:] = dr, du, dc
        dh_carry += dg[t, :, :2 * H] @ Wh_ru_T

    dg2 = dg.reshape(T * B, 3 * H)
    h_prev_all = _prev_states(hI, h)
    c_input = h_prev_all if linear_before_reset else hc.reshape(T * B, H)
    dLdWh = np.empty_like(Wh)
    dLdWh[:, :2 * H] = h_prev_all.T @ dg2[:, :2 * H]
    dLdWh[:, 2 * H:] = c_input.T @ dgh_c.reshape(T * B, H)
    dLdb = np.stack([dg2.sum(0), np.concatenate([dg2[:, :2 * H].sum(0), dgh_c.sum((0, 1))])])
    dLdx = (dg2 @ Wx.T).reshape(x.shape)
    dLdWx = x.reshape(T * B, -1).T @ dg2
    return dLdx, dh_carry, dLdWx, dLdWh, dLdb


def numpy_lstm(x, Wx, Wr, b, hI, cI):
    """LSTM forward (no peepholes, no clipping); gate blocks (i, f, g, o), one bias b [4H]:
    z = x·Wx + h·Wr + b; i, f, o = σ(z); g = tanh(z_g); c' = f∘c + i∘g; h' = o∘tanh(c').

    Returns ((h [T,B,H], hL, cL), cache) where cache = (gates, c, tanh_c) holds per step the
    activated i, f, g, o [T,B,4H], the cell state and its tanh [T,B,H]."""
    T, B, _ = x.shape
    H = hI.shape[1]
    gx = (x.reshape(T * B, -1) @ Wx + b).reshape(T, B, 4 * H)
    h = np.empty((T, B, H), x.dtype)
    c = np.empty((T, B, H), x.dtype)
    tanh_c = np.empty((T, B, H), x.dtype)
    gates = np.empty((T, B, 4 * H), x.dtype)
    h_prev, c_prev = hI, cI
    for t in range(T):
        z = gx[t] + h_prev @ Wr
        gates[t] = _sigmoid(z)
        gates[t, :, 2 * H:3 * H] = np.tanh(z[:, 2 * H:3 * H])
        i, f, g, o = (gates[t, :, k * H:(k + 1) * H] for k in range(4))
        c[t] = f * c_prev + i * g
        tanh_c[t] = np.tanh(c[t])
        h[t] = o * tanh_c[t]
        h_prev, c_prev = h[t], c[t]
    return (h, h[-1].copy(), c[-1].copy()), (gates, c, tanh_c)


def numpy_lstm_bp(x, Wx, Wr, b, hI, cI, dLdh, outputs, cache, *, dLdhL=None, dLdcL=None):
    """Backpropagation through time for numpy_lstm (docs/guide/families.md).

    Returns (dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI) as lstmLayerTimeLoopBp (without dLdWp)."""
    h = outputs[0]
    gates, c, tanh_c = cache
    T, B, _ = x.shape
    H = hI.shape[1]
    Wr_T = Wr.T.copy()
    dz = np.empty((T, B, 4 * H), x.dtype)   # dL/d(pre-activation) of i, f, g, o
    dh_carry = np.zeros_like(hI) if dLdhL is None else dLdhL.copy()
    dc_carry = np.zeros_like(cI) if dLdcL is None else dLdcL.copy()
    for t in reversed(range(T)):
        c_prev = c[t - 1] if t else cI
        i, f, g, o = (gates[t, :, k * H:(k + 1) * H] for k in range(4))
        tau = tanh_c[t]
        dh = dLdh[t] + dh_carry
        dc = dc_carry + dh * o * (1 - tau * tau)   # total adjoint of c_t
        dz[t, :, :H] = dc * g * i * (1 - i)
        dz[t, :, H:2 * H] = dc * c_prev * f * (1 - f)
        dz[t, :, 2 * H:3 * H] = dc * i * (1 - g * g)
        dz[t, :, 3 * H:] = dh * tau * o * (1 - o)
        dc_carry = dc * f
        dh_carry = dz[t] @ Wr_T

    dz2 = dz.reshape(T * B, 4 * H)
    dLdx = (dz2 @ Wx.T).reshape(x.shape)
    dLdWx = x.reshape(T * B, -1).T @ dz2
    dLdWr = _prev_states(hI, h).T @ dz2
    return dLdx, dLdWx, dLdWr, dz2.sum(0), dh_carry, dc_carry


def _elu(z):
    """ELU with α = 1."""
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def numpy_lltm(x, W, b, hI, cI):
    """LLTM forward (docs/guide/families.md): W [3S, S+I] on X = [h, x], blocks input, output,
    candidate: G = X·Wᵀ + b; i, o = σ(G0, G1); n = elu(G2); c' = c + n∘i; h' = tanh(c')∘o.

    Returns ((h [T,B,S], hL, cL), cache) where cache = (gates, c, tanh_c) holds per step the
    activated i, o, n [T,B,3S], the cell state and its tanh [T,B,S]."""
    T, B, _ = x.shape
    S = hI.shape[1]
    Wh_T, Wx_T = W[:, :S].T.copy(), W[:, S:].T.copy()
    gx = (x.reshape(T * B, -1) @ Wx_T + b).reshape(T, B, 3 * S)
    h = np.empty((T, B, S), x.dtype)
    c = np.empty((T, B, S), x.dtype)
    tanh_c = np.empty((T, B, S), x.dtype)
    gates = np.empty((T, B, 3 * S), x.dtype)
    h_prev, c_prev = hI, cI
    for t in range(T):
        G = gx[t] + h_prev @ Wh_T
        gates[t, :, :2 * S] = _sigmoid(G[:, :2 * S])
        gates[t, :, 2 * S:] = _elu(G[:, 2 * S:])
        i, o, n = gates[t, :, :S], gates[t, :, S:2 * S], gates[t, :, 2 * S:]
        c[t] = c_prev + n * i
        tanh_c[t] = np.tanh(c[t])
        h[t] = tanh_c[t] * o
        h_prev, c_prev = h[t], c[t]
    return (h, h[-1].copy(), c[-1].copy()), (gates, c, tanh_c)


def numpy_lltm_bp(x, W, b, hI, cI, dLdh, outputs, cache, *, dLdhL=None, dLdcL=None):
    """Backpropagation through time for numpy_lltm; elu'(z) = 1 for z > 0, e^z = n + 1 for
    z <= 0 (1 at z = 0, as PyTorch autograd).

    Returns (dLdx, dLdW, dLdb, dLdhI, dLdcI) as lltmTimeLoopBp."""
    h = outputs[0]
    gates, _, tanh_c = cache
    T, B, I = x.shape
    S = hI.shape[1]
    W_h = W[:, :S].copy()
    dG = np.empty((T, B, 3 * S), x.dtype)   # dL/d(pre-activation) of i, o, n
    dh_carry = np.zeros_like(hI) if dLdhL is None else dLdhL.copy()
    dc_carry = np.zeros_like(cI) if dLdcL is None else dLdcL.copy()
    for t in reversed(range(T)):
        i, o, n = gates[t, :, :S], gates[t, :, S:2 * S], gates[t, :, 2 * S:]
        tau = tanh_c[t]
        dh = dLdh[t] + dh_carry
        dc = dc_carry + dh * o * (1 - tau * tau)   # total adjoint of c_t (= dL/dc_{t-1})
        dG[t, :, :S] = dc * n * i * (1 - i)
        dG[t, :, S:2 * S] = dh * tau * o * (1 - o)
        dG[t, :, 2 * S:] = dc * i * np.where(n > 0, 1, n + 1)
        dc_carry = dc
        dh_carry = dG[t] @ W_h

    dG2 = dG.reshape(T * B, 3 * S)
    dLdW = np.empty_like(W)
    dLdW[:, :S] = dG2.T @ _prev_states(hI, h)
    dLdW[:, S:] = dG2.T @ x.reshape(T * B, I)
    dLdx = (dG2 @ W[:, S:]).reshape(x.shape)
    return dLdx, dLdW, dG2.sum(0), dh_carry, dc_carry


ACTIVATIONS = {
    # name: (activation, its derivative as a function of the activated value a)
    "tanh": (np.tanh, lambda a: 1 - a * a),
    "relu": (lambda z: np.maximum(z, 0), lambda a: (a > 0).astype(a.dtype)),
}


def numpy_rnn(x, hI, Wx, Wh, b, *, activation="tanh"):
    """Vanilla RNN forward: h = act(x·Wx + bx + hPrev·Wh + bh), b = [bx, bh] [2, H].

    Returns ((h [T,B,H],), None): the backward needs only h."""
    T, B, _ = x.shape
    act = ACTIVATIONS[activation][0]
    gx = (x.reshape(T * B, -1) @ Wx + b[0] + b[1]).reshape(T, B, -1)
    h = np.empty_like(gx)
    h_prev = hI
    for t in range(T):
        h[t] = act(gx[t] + h_prev @ Wh)
        h_prev = h[t]
    return (h,), None


def numpy_rnn_bp(x, hI, Wx, Wh, b, dLdh, outputs, cache, *, dLdhLast=None, activation="tanh"):
    """Backpropagation through time for numpy_rnn.

    Returns (dLdx, dLdhI, dLdWx, dLdWh, dLdb) shaped like (x, hI, Wx, Wh, b)."""
    (h,) = outputs
    T, B, _ = x.shape
    H = hI.shape[1]
    grad = ACTIVATIONS[activation][1]
    Wh_T = Wh.T.copy()
    dz = np.empty((T, B, H), x.dtype)   # dL/d(pre-activation)
    dh_carry = np.zeros_like(hI) if dLdhLast is None else dLdhLast.copy()
    for t in reversed(range(T)):
        dz[t] = (dLdh[t] + dh_carry) * grad(h[t])
        dh_carry = dz[t] @ Wh_T
    dz2 = dz.reshape(T * B, H)
    db = dz2.sum(0)
    return ((dz2 @ Wx.T).reshape(x.shape), dh_carry, x.reshape(T * B, -1).T @ dz2,
            _prev_states(hI, h).T @ dz2, np.stack([db, db]))
