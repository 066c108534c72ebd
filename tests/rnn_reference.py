"""Independent float64 NumPy reference for the vanilla RNN kernels in ``cells``.

Written for readability, not speed. The cell (docs/guide/families.md; PyTorch nn.RNN,
ONNX RNN), in row vectors:

    z = x @ Wx + bx + hI @ Wh + bh,   h = act(z),   act = tanh or relu

with b [nOut] (bx alone, bh = 0) or b [2, nOut] (rows bx, bh). The backward pass is derived by
hand and proven against central finite differences and torch autograd in
``test_rnn_reference.py``. Sequences are run row by row (each batch row its own loop over its
valid steps, in processing order), a formulation independent of the kernels' masked batch loop.
"""
import numpy as np

from gru_reference import as64, matmul, row_time_order

ACTIVATIONS = ("tanh", "relu")


def act(z, activation):
    """tanh(z) or relu(z) = max(z, 0)."""
    if activation == "tanh":
        return np.tanh(z)
    return np.maximum(z, 0.0)


def act_grad(z, h, activation):
    """act'(z) from z and h = act(z): 1 - h^2 for tanh; for relu 1 where z > 0, else 0 (also
    at z = 0 exactly, PyTorch autograd's value)."""
    if activation == "tanh":
        return 1.0 - h * h
    return (z > 0).astype(np.float64)


def split_bias(b, n_out):
    """(bx, bh) from b [nOut] (bh = 0) or b [2, nOut]."""
    b = as64(b)
    if b.ndim == 1:
        return b, np.zeros(n_out)
    return b[0], b[1]


# ----------------------------------------------------------------------------------------
# the cell
# ----------------------------------------------------------------------------------------
def rnn_cell_forward(x, hI, Wx, Wh, b, activation="tanh", product=matmul):
    """One step. Returns (h [bS, nOut], z [bS, nOut] the pre-activation); product(a, w) as in
    gru_reference.gru_cell_forward."""
    x, hI, Wx, Wh = as64(x), as64(hI), as64(Wx), as64(Wh)
    bx, bh = split_bias(b, hI.shape[1])
    z = product(x, Wx) + bx + product(hI, Wh) + bh
    return act(z, activation), z


def rnn_cell_backward(x, hI, Wx, Wh, b, dLdh, activation="tanh"):
    """Gradients of L = sum(dLdh * h) w.r.t. (x, hI, Wx, Wh, b); dLdb has b's shape.

    Derivation (g = dL/dh, h = act(z)):
        dz = g * act'(z)
        z is linear in x, hI, Wx, Wh, bx, bh:
        dx = dz @ Wx^T,  dhI = dz @ Wh^T,  dWx = x^T @ dz,  dWh = hI^T @ dz,
        dbx = dbh = sum_b dz   (both biases are plain summands of z)
    """
    x, hI, Wx, Wh, g = as64(x), as64(hI), as64(Wx), as64(Wh), as64(dLdh)
    h, z = rnn_cell_forward(x, hI, Wx, Wh, b, activation)
    dz = g * act_grad(z, h, activation)
    db = dz.sum(axis=0)
    if np.ndim(b) == 2:
        db = np.stack([db, db])
    return dz @ Wx.T, dz @ Wh.T, x.T @ dz, hI.T @ dz, db


# ----------------------------------------------------------------------------------------
# sequences (time-major x [sL, bS, nIn]), seq_len and direction
# ----------------------------------------------------------------------------------------
def _lengths(seq_len, sL, bS):
    return [sL] * bS if seq_len is None else [int(v) for v in seq_len]


def rnn_seq_forward(x, hI, Wx, Wh, b, activation="tanh", seq_len=None, forward=True):
    """Returns (h [sL, bS, nOut], hLast [bS, nOut], z [sL, bS, nOut]).

    Row r runs its valid time indices (0 .. len-1, or len-1 .. 0 with forward=False) one after
    another from hI[r]; every output goes to its own time index, padded outputs (and z) are 0.
    hLast is the row's state after its last step, hI[r] for a row of length 0."""
    x, hI = as64(x), as64(hI)
    sL, bS = x.shape[:2]
    n_out = hI.shape[1]
    hs, zs = np.zeros((sL, bS, n_out)), np.zeros((sL, bS, n_out))
    h_last = hI.copy()
    for r, length in enumerate(_lengths(seq_len, sL, bS)):
        h = hI[r:r + 1]
        for t in row_time_order(length, forward):
            h, z = rnn_cell_forward(x[t, r:r + 1], h, Wx, Wh, b, activation)
            hs[t, r], zs[t, r] = h[0], z[0]
        h_last[r] = h[0]
    return hs, h_last, zs


def rnn_seq_backward(x, hI, Wx, Wh, b, dLdh=None, dLdhLast=None, activation="tanh",
                     seq_len=None, forward=True):
    """BPTT for L = sum(dLdh * h) + sum(dLdhLast * hLast) of rnn_seq_forward; either gradient
    may be None. Returns (dLdx, dLdhI, dLdWx, dLdWh, dLdb) with dLdb of b's shape.

    Row by row: carry g = dLdhLast[r]; visit the row's valid time indices in reverse
    processing order, add dLdh[t, r] to g, run the cell backward from the state that entered
    step t, and carry its dL/dhI. Padded steps get nothing; weight gradients are summed."""
    x, hI, Wx, Wh = as64(x), as64(hI), as64(Wx), as64(Wh)
    sL, bS = x.shape[:2]
    n_out = hI.shape[1]
    hs = rnn_seq_forward(x, hI, Wx, Wh, b, activation, seq_len, forward)[0]
    dLdh = np.zeros((sL, bS, n_out)) if dLdh is None else as64(dLdh)
    dLdhLast = np.zeros((bS, n_out)) if dLdhLast is None else as64(dLdhLast)
    dx, dhI = np.zeros(x.shape), dLdhLast.copy()
    dWx, dWh, db = np.zeros(Wx.shape), np.zeros(Wh.shape), np.zeros(np.shape(b))
    for r, length in enumerate(_lengths(seq_len, sL, bS)):
        order = row_time_order(length, forward)
        g = dLdhLast[r:r + 1]
        for k in reversed(range(length)):
            t = order[k]
            h_prev = hI[r:r + 1] if k == 0 else hs[order[k - 1], r:r + 1]
            dx_t, g, dWx_t, dWh_t, db_t = rnn_cell_backward(
                x[t, r:r + 1], h_prev, Wx, Wh, b, g + dLdh[t, r:r + 1], activation)
            dx[t, r] = dx_t[0]
            dWx += dWx_t
            dWh += dWh_t
            db += db_t
        dhI[r] = g[0]
    return dx, dhI, dWx, dWh, db


# ----------------------------------------------------------------------------------------
# random problems
# ----------------------------------------------------------------------------------------
KINK_MARGIN = 1e-3  # finite-difference problems keep every pre-activation of a relu RNN this
                    # far from the kink at 0 (central differences with eps = 1e-6 never cross it)


def make_rnn_problem(rng, sL, bS, n_in, n_out, two_biases, scale=0.5):
    """Random float64 (x [sL, bS, nIn], hI [bS, nOut], Wx [nIn, nOut], Wh [nOut, nOut],
    b [nOut] or [2, nOut], dLdh [sL, bS, nOut], dLdhLast [bS, nOut]): weights ~0.5 so tanh is
    not saturated and relu's state stays O(1) over a few steps; a non-zero initial state."""
    x = rng.normal(0.0, 1.0, (sL, bS, n_in))
    hI = rng.uniform(-0.9, 0.9, (bS, n_out))
    Wx = rng.normal(0.0, scale, (n_in, n_out))
    Wh = rng.normal(0.0, scale, (n_out, n_out))
    b = rng.normal(0.0, scale, (2, n_out) if two_biases else (n_out,))
    dLdh = rng.normal(0.0, 1.0, (sL, bS, n_out))
    dLdhLast = rng.normal(0.0, 1.0, (bS, n_out))
    return x, hI, Wx, Wh, b, dLdh, dLdhLast


def make_fd_problem(seed, sL, bS, n_in, n_out, two_biases, activation, seq_len=None,
                    forward=True):
    """make_rnn_problem from the first seed >= `seed` whose pre-activations (at every valid
    step) all lie more than KINK_MARGIN from 0 for a relu RNN (any problem for tanh), and
    where relu leaves at least a quarter of them active and a quarter inactive."""
    for s in range(seed, seed + 1000):
        p = make_rnn_problem(np.random.default_rng(s), sL, bS, n_in, n_out, two_biases)
        if activation == "tanh":
            return p
        z = rnn_seq_forward(*p[:5], activation, seq_len, forward)[2]
        valid = np.arange(sL)[:, None] < np.array(_lengths(seq_len, sL, bS), int)[None, :]
        zv = z[valid]
        if np.all(np.abs(zv) > KINK_MARGIN) and 0.25 <= np.mean(zv > 0) <= 0.75:
            return p
    raise AssertionError("no problem away from relu's kink")
