"""Independent float64 NumPy reference for the LLTM kernels in ``cells``.

Written for readability, not speed. The cell is PyTorch's C++-extension tutorial LLTM:

    X = [h, x] (h first),  z = X @ W.T + b   with W [3S, S+nIn], b [3S]
    i = sigmoid(z0),  o = sigmoid(z1),  n = elu(z2) (alpha = 1)
    c' = c + n*i,  h' = tanh(c')*o

The backward passes are derived by hand and proven against central finite differences in
``test_lltm_reference.py``. Sequences are run row by row (each batch row its own loop over
its valid steps), a formulation independent of the kernels' masked batch loop.
"""
import numpy as np

from gru_reference import as64, sigmoid


def elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))


def elu_grad(z):
    """PyTorch autograd's derivative: 1 for z > 0, alpha*exp(z) for z <= 0 (so 1 at z = 0)."""
    return np.where(z > 0, 1.0, np.exp(np.minimum(z, 0.0)))


# ----------------------------------------------------------------------------------------
# the cell
# ----------------------------------------------------------------------------------------
def lltm_cell_forward(x, W, b, h, c, product=None):
    """One step. Returns (new_h, new_cell, i, o, n, X, z) as the tutorial's lltm_forward. With
    product(a, w) (as in gru_reference.gru_cell_forward), z is the sum of the state's and the
    input's products, each by its block of Wᵀ."""
    x, W, b, h, c = map(as64, (x, W, b, h, c))
    S = h.shape[1]
    X = np.concatenate([h, x], axis=1)
    if product is None:
        z = X @ W.T + b
    else:
        z = product(h, W[:, :S].T) + product(x, W[:, S:].T) + b
    i = sigmoid(z[:, :S])
    o = sigmoid(z[:, S:2 * S])
    n = elu(z[:, 2 * S:])
    new_c = c + n * i
    new_h = np.tanh(new_c) * o
    return new_h, new_c, i, o, n, X, z


def lltm_cell_backward(x, W, b, h, c, grad_h, grad_cell):
    """Gradients of L = sum(grad_h*new_h) + sum(grad_cell*new_cell) w.r.t. (h, x, W, b, c), in
    the tutorial's order (d_old_h, d_input, d_weights, d_bias, d_old_cell).

    Derivation (g = grad_h, tc = tanh(c')):
        dL/dc'  = g*o*(1-tc^2) + grad_cell              (total; c' enters h' and L directly)
        dL/do   = g*tc           -> dz1 = g*tc*o*(1-o)
        dL/di   = dL/dc' * n     -> dz0 = dL/dc'*n*i*(1-i)
        dL/dn   = dL/dc' * i     -> dz2 = dL/dc'*i*elu'(z2)
        dL/dc   = dL/dc'         (c' = c + n*i)
        dz = [dz0 | dz1 | dz2];  dX = dz @ W -> (dh, dx);  dW = dz.T @ X;  db = sum_b dz
    """
    W = as64(W)
    g, gc = as64(grad_h), as64(grad_cell)
    S = np.shape(h)[1]
    _, new_c, i, o, n, X, z = lltm_cell_forward(x, W, b, h, c)
    tc = np.tanh(new_c)
    dct = g * o * (1.0 - tc * tc) + gc
    dz = np.concatenate([dct * n * i * (1.0 - i),
                         g * tc * o * (1.0 - o),
                         dct * i * elu_grad(z[:, 2 * S:])], axis=1)
    dX = dz @ W
    return dX[:, :S], dX[:, S:], dz.T @ X, dz.sum(axis=0), dct


# ----------------------------------------------------------------------------------------
# sequences (time-major x [sL, bS, nIn]), seq_len and direction
# ----------------------------------------------------------------------------------------
def _row_times(length, forward):
    """The time indices a row of `length` valid steps visits, in processing order."""
    return list(range(length)) if forward else list(range(length - 1, -1, -1))


def _lengths(seq_len, sL, bS):
    return [sL] * bS if seq_len is None else [int(v) for v in seq_len]


def lltm_seq_forward(x, W, b, hI, cI, seq_len=None, forward=True):
    """Returns (h [sL, bS, S], hL, cL [bS, S], gates [sL, bS, 3S] = (i, o, n), c [sL, bS, S],
    z [sL, bS, 3S] pre-activations); every per-step array is 0 at padded positions."""
    x, hI, cI = as64(x), as64(hI), as64(cI)
    sL, bS = x.shape[:2]
    S = hI.shape[1]
    hs, cs = np.zeros((sL, bS, S)), np.zeros((sL, bS, S))
    gates, zs = np.zeros((sL, bS, 3 * S)), np.zeros((sL, bS, 3 * S))
    hL, cL = hI.copy(), cI.copy()
    for r, length in enumerate(_lengths(seq_len, sL, bS)):
        h, c = hI[r:r + 1], cI[r:r + 1]
        for tau in _row_times(length, forward):
            h, c, i, o, n, _, z = lltm_cell_forward(x[tau, r:r + 1], W, b, h, c)
            hs[tau, r], cs[tau, r], zs[tau, r] = h[0], c[0], z[0]
            gates[tau, r] = np.concatenate([i[0], o[0], n[0]])
        hL[r], cL[r] = h[0], c[0]
    return hs, hL, cL, gates, cs, zs


def lltm_seq_backward(x, W, b, hI, cI, dLdh=None, dLdhL=None, dLdcL=None, seq_len=None,
                      forward=True):
    """BPTT for L = sum(dLdh*h) + sum(dLdhL*hL) + sum(dLdcL*cL); any gradient may be None.
    Returns (dLdx, dLdW, dLdb, dLdhI, dLdcI).

    Row by row: carry (gh, gc) = (dLdhL[r], dLdcL[r]); visit the row's valid time indices in
    reverse processing order, add dLdh[tau, r] to gh, run the cell backward from the state that
    entered tau, and carry its (d_old_h, d_old_cell). Padded steps get nothing."""
    x, W, hI, cI = as64(x), as64(W), as64(hI), as64(cI)
    sL, bS = x.shape[:2]
    S = hI.shape[1]
    hs, _, _, _, cs, _ = lltm_seq_forward(x, W, b, hI, cI, seq_len, forward)
    dLdh = np.zeros((sL, bS, S)) if dLdh is None else as64(dLdh)
    dLdhL = np.zeros((bS, S)) if dLdhL is None else as64(dLdhL)
    dLdcL = np.zeros((bS, S)) if dLdcL is None else as64(dLdcL)
    dx, dW, db = np.zeros(x.shape), np.zeros(W.shape), np.zeros(3 * S)
    dhI, dcI = np.zeros((bS, S)), np.zeros((bS, S))
    for r, length in enumerate(_lengths(seq_len, sL, bS)):
        order = _row_times(length, forward)
        gh, gc = dLdhL[r:r + 1].copy(), dLdcL[r:r + 1].copy()
        for k in reversed(range(length)):
            tau = order[k]
            h_prev = hI[r:r + 1] if k == 0 else hs[order[k - 1], r:r + 1]
            c_prev = cI[r:r + 1] if k == 0 else cs[order[k - 1], r:r + 1]
            gh = gh + dLdh[tau, r:r + 1]
            gh, dx_t, dW_t, db_t, gc = lltm_cell_backward(x[tau, r:r + 1], W, b, h_prev, c_prev,
                                                          gh, gc)
            dx[tau, r] = dx_t[0]
            dW += dW_t
            db += db_t
        dhI[r], dcI[r] = gh[0], gc[0]
    return dx, dW, db, dhI, dcI


# ----------------------------------------------------------------------------------------
# random problems
# ----------------------------------------------------------------------------------------
KINK_MARGIN = 1e-3  # finite-difference problems keep every candidate pre-activation this far
                    # from ELU's kink at 0


def make_lltm_problem(rng, sL, bS, n_in, S, scale=0.5):
    """Random float64 (x [sL, bS, nIn], W [3S, S+nIn], b [3S], hI, cI [bS, S], dLdh [sL, bS, S],
    dLdhL, dLdcL [bS, S]): weights ~0.5 so the gates are not saturated, non-zero states."""
    x = rng.normal(0.0, 1.0, (sL, bS, n_in))
    W = rng.normal(0.0, scale, (3 * S, S + n_in))
    b = rng.normal(0.0, scale, (3 * S,))
    hI = rng.uniform(-0.9, 0.9, (bS, S))
    cI = rng.normal(0.0, 1.0, (bS, S))
    dLdh = rng.normal(0.0, 1.0, (sL, bS, S))
    dLdhL = rng.normal(0.0, 1.0, (bS, S))
    dLdcL = rng.normal(0.0, 1.0, (bS, S))
    return x, W, b, hI, cI, dLdh, dLdhL, dLdcL


def make_fd_problem(seed, sL, bS, n_in, S, seq_len=None, forward=True):
    """make_lltm_problem from the first seed >= `seed` whose candidate pre-activations (at every
    valid step) all lie more than KINK_MARGIN from 0, so central differences never straddle
    ELU's kink (the first derivative is continuous there, the second is not)."""
    for s in range(seed, seed + 1000):
        p = make_lltm_problem(np.random.default_rng(s), sL, bS, n_in, S)
        z = lltm_seq_forward(*p[:5], seq_len, forward)[5]
        valid = np.arange(sL)[:, None] < np.array(_lengths(seq_len, sL, bS), int)[None, :]
        if np.all(np.abs(z[..., 2 * S:][valid]) > KINK_MARGIN):
            return p
    raise AssertionError("no problem away from the ELU kink")
