"""Independent float64 NumPy reference for the GRU kernels in ``cells``.

Written for readability, not speed: every formula is spelled out step by step.
The backward passes are derived by hand (chain rule on the forward below) and are
themselves proven against central finite differences in ``test_reference.py``.

Conventions (same as the package): row vectors, ``z = x @ W``; gate blocks are
ordered (r, u, c) = (reset, update, candidate); ``h' = (1-u)*c + u*h``.
"""
import numpy as np


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------
def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def as64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def split_bias(b, n_out):
    """Return (bx, bh) from b [3nOut] (bh = 0) or b [2, 3nOut]."""
    b = as64(b)
    if b.ndim == 1:
        return b, np.zeros(3 * n_out)
    return b[0], b[1]


def join_bias_grad(dbx, dbh, b):
    """Gradient with b's shape: b [3nOut] holds only bx, b [2, 3nOut] holds (bx, bh)."""
    if np.ndim(b) == 1:
        return dbx
    return np.stack([dbx, dbh])


def blocks(a, n_out):
    """Split the last axis of a [..., 3nOut] into its (r, u, c) blocks."""
    return a[..., :n_out], a[..., n_out:2 * n_out], a[..., 2 * n_out:3 * n_out]


# ----------------------------------------------------------------------------------------
# GRU cell
# ----------------------------------------------------------------------------------------
def matmul(a, w):
    """The product a @ w: the references' default `product`. A test of low-precision weights
    passes its own, which rounds or quantizes a and w as the kernels do."""
    return a @ w


def gru_cell_forward(x, hI, Wx, Wh, b, linear_before_reset=False, return_cache=False,
                     product=matmul):
    """One GRU step. Returns (gates [bS, 3nOut] = activated (r, u, c), h [bS, nOut]).
    product(a, w): every product of a row block a by a weight block w."""
    x, hI, Wx, Wh = as64(x), as64(hI), as64(Wx), as64(Wh)
    n_out = hI.shape[1]
    bx, bh = split_bias(b, n_out)
    Wx_r, Wx_u, Wx_c = blocks(Wx, n_out)
    Wh_r, Wh_u, Wh_c = blocks(Wh, n_out)
    bx_r, bx_u, bx_c = blocks(bx, n_out)
    bh_r, bh_u, bh_c = blocks(bh, n_out)

    r = sigmoid(product(x, Wx_r) + bx_r + product(hI, Wh_r) + bh_r)
    u = sigmoid(product(x, Wx_u) + bx_u + product(hI, Wh_u) + bh_u)
    hc = product(hI, Wh_c) + bh_c  # the candidate's recurrent part (linear-before-reset)
    if linear_before_reset:
        c = np.tanh(product(x, Wx_c) + bx_c + r * hc)
    else:
        c = np.tanh(product(x, Wx_c) + bx_c + product(r * hI, Wh_c) + bh_c)
    h = (1.0 - u) * c + u * hI
    gates = np.concatenate([r, u, c], axis=1)
    if return_cache:
        return gates, h, hc
    return gates, h


def gru_cell_backward(x, hI, Wx, Wh, b, dLdh, linear_before_reset=False):
    """Gradients of L = sum(dLdh * h) w.r.t. (x, hI, Wx, Wh, b); dLdb has b's shape.

    Derivation (g = dL/dh', with h' = (1-u)*c + u*hI):
        dL/dc  = g*(1-u)              -> dzc = g*(1-u)*(1-c^2)        (c = tanh(zc))
        dL/du  = g*(hI-c)             -> dzu = g*(hI-c)*u*(1-u)       (u = sigmoid(zu))
        direct = g*u                  (hI appears linearly in h')
      reset-before, zc = x.Wx_c + bx_c + (r*hI).Wh_c + bh_c:
        a = dL/d(r*hI) = dzc.Wh_c^T;  dL/dr = a*hI;  dzr = a*hI*r*(1-r)
        dL/dhI = g*u + a*r + dzr.Wh_r^T + dzu.Wh_u^T
        dWh = [hI^T.dzr | hI^T.dzu | (r*hI)^T.dzc],  dbh = sum_b [dzr | dzu | dzc]
      linear-before-reset, zc = x.Wx_c + bx_c + r*(hI.Wh_c + bh_c):
        dL/dr = dzc*hc;  dzr = dzc*hc*r*(1-r);  dL/dhc = dzc*r
        dgh = [dzr | dzu | dzc*r] = dL/d(hI.Wh + bh)
        dL/dhI = g*u + dgh.Wh^T,  dWh = hI^T.dgh,  dbh = sum_b dgh
      both: dz = [dzr | dzu | dzc] = dL/d(x.Wx + bx): dx = dz.Wx^T, dWx = x^T.dz, dbx = sum_b dz
    """
    x, hI, Wx, Wh, g = as64(x), as64(hI), as64(Wx), as64(Wh), as64(dLdh)
    n_out = hI.shape[1]
    gates, _, hc = gru_cell_forward(x, hI, Wx, Wh, b, linear_before_reset, return_cache=True)
    r, u, c = blocks(gates, n_out)
    Wh_r, Wh_u, Wh_c = blocks(Wh, n_out)

    dzc = g * (1.0 - u) * (1.0 - c * c)
    dzu = g * (hI - c) * u * (1.0 - u)
    if linear_before_reset:
        dzr = dzc * hc * r * (1.0 - r)
        dgh = np.concatenate([dzr, dzu, dzc * r], axis=1)
        dhI = g * u + dgh @ Wh.T
        dWh = hI.T @ dgh
        dbh = dgh.sum(axis=0)
    else:
        a = dzc @ Wh_c.T
        dzr = a * hI * r * (1.0 - r)
        dhI = g * u + a * r + dzr @ Wh_r.T + dzu @ Wh_u.T
        dWh = np.concatenate([hI.T @ dzr, hI.T @ dzu, (r * hI).T @ dzc], axis=1)
        dbh = np.concatenate([dzr, dzu, dzc], axis=1).sum(axis=0)
    dz = np.concatenate([dzr, dzu, dzc], axis=1)
    dx = dz @ Wx.T
    dWx = x.T @ dz
    dbx = dz.sum(axis=0)
    return dx, dhI, dWx, dWh, join_bias_grad(dbx, dbh, b)


# ----------------------------------------------------------------------------------------
# sequences (time-major x [sL, bS, nIn])
# ----------------------------------------------------------------------------------------
def gru_time_loop_forward(x, hI, Wx, Wh, b, linear_before_reset=False):
    """Returns (h [sL, bS, nOut] = state after every step, gates [sL, bS, 3nOut])."""
    x, hI = as64(x), as64(hI)
    sL, bS = x.shape[0], x.shape[1]
    n_out = hI.shape[1]
    hs = np.zeros((sL, bS, n_out))
    gs = np.zeros((sL, bS, 3 * n_out))
    h_prev = hI
    for t in range(sL):
        gs[t], hs[t] = gru_cell_forward(x[t], h_prev, Wx, Wh, b, linear_before_reset)
        h_prev = hs[t]
    return hs, gs


def gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh=None, dLdhLast=None,
                           linear_before_reset=False):
    """BPTT for L = sum(dLdh * h_all) + sum(dLdhLast * h_last).

    Carry g = dL/dh_t, starting from dLdhLast; at step t (from the end) add the step's own
    dLdh[t], run the cell backward from h_{t-1}, and carry its dL/dh_{t-1}. Weight
    gradients are summed over time.
    """
    x, hI, Wx, Wh = as64(x), as64(hI), as64(Wx), as64(Wh)
    sL, bS = x.shape[0], x.shape[1]
    n_out = hI.shape[1]
    hs, _ = gru_time_loop_forward(x, hI, Wx, Wh, b, linear_before_reset)
    dLdh = np.zeros((sL, bS, n_out)) if dLdh is None else as64(dLdh)
    g = np.zeros((bS, n_out)) if dLdhLast is None else as64(dLdhLast).copy()

    dx = np.zeros(x.shape)
    dWx = np.zeros(Wx.shape)
    dWh = np.zeros(Wh.shape)
    db = np.zeros(np.shape(b))
    for t in reversed(range(sL)):
        g = g + dLdh[t]
        h_prev = hI if t == 0 else hs[t - 1]
        dx[t], g, dWx_t, dWh_t, db_t = gru_cell_backward(
            x[t], h_prev, Wx, Wh, b, g, linear_before_reset)
        dWx += dWx_t
        dWh += dWh_t
        db += db_t
    return dx, g, dWx, dWh, db



def row_time_order(length, forward):
    """The time indices a row with `length` valid steps visits, in processing order."""
    order = np.arange(length)
    return order if forward else order[::-1]


def gru_masked_forward(x, hI, Wx, Wh, b, seq_len, forward=True, linear_before_reset=False):
    """Sequences of different lengths, one row at a time: row b runs the unmasked loop above on
    its own valid steps x[order, b] (order = 0..len-1, or len-1..0 in reverse), every output goes
    back to its own time index, padded outputs are 0. Returns (h [sL, bS, nOut], hLast [bS, nOut])
    with hLast the row's state after its last valid step (hI for length 0)."""
    x, hI = as64(x), as64(hI)
    sL, bS, n_out = x.shape[0], x.shape[1], hI.shape[1]
    hs = np.zeros((sL, bS, n_out))
    h_last = hI.copy()
    for row in range(bS):
        order = row_time_order(int(seq_len[row]), forward)
        if order.size:
            h_row, _ = gru_time_loop_forward(x[order, row:row + 1], hI[row:row + 1], Wx, Wh, b,
                                             linear_before_reset)
            hs[order, row] = h_row[:, 0]
            h_last[row] = h_row[-1, 0]
    return hs, h_last


def gru_masked_backward(x, hI, Wx, Wh, b, seq_len, dLdh=None, dLdhLast=None, forward=True,
                        linear_before_reset=False):
    """Gradients of L = sum(dLdh * h) + sum(dLdhLast * hLast) for gru_masked_forward: each row is
    its own unmasked sequence (the loop above), weight gradients summed over rows; nothing flows
    through padded steps."""
    x, hI = as64(x), as64(hI)
    sL, bS, n_out = x.shape[0], x.shape[1], hI.shape[1]
    dLdh = np.zeros((sL, bS, n_out)) if dLdh is None else as64(dLdh)
    dLdhLast = np.zeros((bS, n_out)) if dLdhLast is None else as64(dLdhLast)
    dx = np.zeros(x.shape)
    dhI = dLdhLast.copy()
    dWx, dWh, db = np.zeros(np.shape(Wx)), np.zeros(np.shape(Wh)), np.zeros(np.shape(b))
    for row in range(bS):
        order = row_time_order(int(seq_len[row]), forward)
        if not order.size:
            continue
        dx_row, dhI[row:row + 1], dWx_r, dWh_r, db_r = gru_time_loop_backward(
            x[order, row:row + 1], hI[row:row + 1], Wx, Wh, b, dLdh[order, row:row + 1],
            dLdhLast[row:row + 1], linear_before_reset)
        dx[order, row] = dx_row[:, 0]
        dWx += dWx_r
        dWh += dWh_r
        db += db_r
    return dx, dhI, dWx, dWh, db

# ----------------------------------------------------------------------------------------
# libnd4j block cell (= TF GRUBlockCell, reset-before)
# ----------------------------------------------------------------------------------------
def gru_block_cell_forward(x, hLast, Wru, Wc, bru, bc):
    """r, u = sigmoid([x, hLast].Wru + bru); c = tanh([x, r*hLast].Wc + bc);
    h = (1-u)*c + u*hLast. Returns (r, u, c, h)."""
    x, hLast, Wru, Wc, bru, bc = map(as64, (x, hLast, Wru, Wc, bru, bc))
    n_out = hLast.shape[1]
    zru = np.concatenate([x, hLast], axis=1) @ Wru + bru
    r = sigmoid(zru[:, :n_out])
    u = sigmoid(zru[:, n_out:])
    c = np.tanh(np.concatenate([x, r * hLast], axis=1) @ Wc + bc)
    h = (1.0 - u) * c + u * hLast
    return r, u, c, h


def gru_block_cell_backward(x, hLast, Wru, Wc, bru, bc, dLdr=None, dLdu=None, dLdc=None,
                            dLdh=None):
    """Gradients of L = sum(dLdr*r) + sum(dLdu*u) + sum(dLdc*c) + sum(dLdh*h) w.r.t.
    (x, hLast, Wru, Wc, bru, bc); any upstream gradient may be None (= 0).

    Derivation:
        total dL/dc = dLdc + dLdh*(1-u);   dzc = (dL/dc)*(1-c^2)
        total dL/du = dLdu + dLdh*(hLast-c);  dzu = (dL/du)*u*(1-u)
        [dx_c, dL/d(r*hLast)] = dzc.Wc^T;  dWc = [x, r*hLast]^T.dzc;  dbc = sum_b dzc
        total dL/dr = dLdr + dL/d(r*hLast)*hLast;  dzr = (dL/dr)*r*(1-r)
        [dx_ru, dh_ru] = [dzr, dzu].Wru^T;  dWru = [x, hLast]^T.[dzr, dzu];  dbru = sum_b [dzr, dzu]
        dx = dx_c + dx_ru;  dhLast = dh_ru + dL/d(r*hLast)*r + dLdh*u
    """
    x, hLast, Wru, Wc, bru, bc = map(as64, (x, hLast, Wru, Wc, bru, bc))
    n_in = x.shape[1]
    zero = np.zeros(hLast.shape)
    dLdr = zero if dLdr is None else as64(dLdr)
    dLdu = zero if dLdu is None else as64(dLdu)
    dLdc = zero if dLdc is None else as64(dLdc)
    dLdh = zero if dLdh is None else as64(dLdh)
    r, u, c, _ = gru_block_cell_forward(x, hLast, Wru, Wc, bru, bc)

    dc = dLdc + dLdh * (1.0 - u)
    du = dLdu + dLdh * (hLast - c)
    dzc = dc * (1.0 - c * c)
    xrh = np.concatenate([x, r * hLast], axis=1)
    dWc = xrh.T @ dzc
    dbc = dzc.sum(axis=0)
    dxrh = dzc @ Wc.T
    dx_c, drh = dxrh[:, :n_in], dxrh[:, n_in:]
    dr = dLdr + drh * hLast
    dzru = np.concatenate([dr * r * (1.0 - r), du * u * (1.0 - u)], axis=1)
    xh = np.concatenate([x, hLast], axis=1)
    dWru = xh.T @ dzru
    dbru = dzru.sum(axis=0)
    dxh = dzru @ Wru.T
    dx = dx_c + dxh[:, :n_in]
    dhLast = dxh[:, n_in:] + drh * r + dLdh * u
    return dx, dhLast, dWru, dWc, dbru, dbc


def block_to_canonical(Wru, Wc, bru, bc, n_in):
    """Block-cell weights -> canonical (Wx, Wh, b [3nOut]) of the reset-before gruCell."""
    Wx = np.concatenate([Wru[:n_in], Wc[:n_in]], axis=1)
    Wh = np.concatenate([Wru[n_in:], Wc[n_in:]], axis=1)
    b = np.concatenate([bru, bc])
    return Wx, Wh, b


# ----------------------------------------------------------------------------------------
# finite differences
# ----------------------------------------------------------------------------------------
def central_diff_grad(loss, arrays, eps=1e-6):
    """Central finite-difference gradient of scalar loss(*arrays) w.r.t. each array (float64)."""
    arrays = [np.array(a, dtype=np.float64, copy=True) for a in arrays]
    grads = []
    for k, a in enumerate(arrays):
        gk = np.zeros_like(a)
        flat, gflat = a.reshape(-1), gk.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            lp = loss(*arrays)
            flat[i] = old - eps
            lm = loss(*arrays)
            flat[i] = old
            gflat[i] = (lp - lm) / (2 * eps)
        grads.append(gk)
    return grads


# ----------------------------------------------------------------------------------------
# random problems
# ----------------------------------------------------------------------------------------
def make_bias(rng, n_out, two_biases, scale=0.5):
    shape = (2, 3 * n_out) if two_biases else (3 * n_out,)
    return rng.normal(0.0, scale, shape)


def make_cell_problem(rng, bS, n_in, n_out, two_biases, scale=0.5):
    """Random float64 (x, hI, Wx, Wh, b, dLdh) for one cell step; weights ~0.5 so gates
    are not saturated, and a non-zero initial state."""
    x = rng.normal(0.0, 1.0, (bS, n_in))
    hI = rng.uniform(-0.9, 0.9, (bS, n_out))
    Wx = rng.normal(0.0, scale, (n_in, 3 * n_out))
    Wh = rng.normal(0.0, scale, (n_out, 3 * n_out))
    b = make_bias(rng, n_out, two_biases, scale)
    dLdh = rng.normal(0.0, 1.0, (bS, n_out))
    return x, hI, Wx, Wh, b, dLdh


def make_seq_problem(rng, sL, bS, n_in, n_out, two_biases, scale=0.5):
    """Random float64 (x, hI, Wx, Wh, b, dLdh [sL,bS,nOut], dLdhLast [bS,nOut])."""
    x = rng.normal(0.0, 1.0, (sL, bS, n_in))
    hI = rng.uniform(-0.9, 0.9, (bS, n_out))
    Wx = rng.normal(0.0, scale, (n_in, 3 * n_out))
    Wh = rng.normal(0.0, scale, (n_out, 3 * n_out))
    b = make_bias(rng, n_out, two_biases, scale)
    dLdh = rng.normal(0.0, 1.0, (sL, bS, n_out))
    dLdhLast = rng.normal(0.0, 1.0, (bS, n_out))
    return x, hI, Wx, Wh, b, dLdh, dLdhLast


def make_block_problem(rng, bS, n_in, n_out, scale=0.5):
    """Random float64 (x, hLast, Wru, Wc, bru, bc) and upstream (dLdr, dLdu, dLdc, dLdh)."""
    x = rng.normal(0.0, 1.0, (bS, n_in))
    hLast = rng.uniform(-0.9, 0.9, (bS, n_out))
    Wru = rng.normal(0.0, scale, (n_in + n_out, 2 * n_out))
    Wc = rng.normal(0.0, scale, (n_in + n_out, n_out))
    bru = rng.normal(0.0, scale, (2 * n_out,))
    bc = rng.normal(0.0, scale, (n_out,))
    ups = tuple(rng.normal(0.0, 1.0, (bS, n_out)) for _ in range(4))
    return (x, hLast, Wru, Wc, bru, bc), ups


def round32(arrays):
    """Round float64 arrays to float32 (None passes through)."""
    return tuple(None if a is None else np.asarray(a, dtype=np.float32) for a in arrays)


# ----------------------------------------------------------------------------------------
# comparison
# ----------------------------------------------------------------------------------------
def assert_close(actual, expected, tol, name="", dtype=None):
    """max|actual - expected| <= tol * max(1, max|expected|), plus shape (and dtype) checks.

    The error is measured against the problem's scale (the largest magnitude of the
    expected array, at least 1), which is how rounding errors of sums and products grow.
    """
    expected = np.asarray(expected, dtype=np.float64)
    assert isinstance(actual, np.ndarray), f"{name}: expected ndarray, got {type(actual)}"
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    if dtype is not None:
        assert actual.dtype == dtype, f"{name}: dtype {actual.dtype} != {dtype}"
    if expected.size == 0:
        return
    a64 = actual.astype(np.float64)
    assert np.all(np.isfinite(a64)), f"{name}: non-finite values"
    scale = max(1.0, float(np.max(np.abs(expected))))
    err = float(np.max(np.abs(a64 - expected)))
    assert err <= tol * scale, f"{name}: max abs error {err:.3e} > {tol:.1e} * scale {scale:.3g}"


# ----------------------------------------------------------------------------------------
# tolerances (see the justification in each comment) and array-layout helpers for the tests
# ----------------------------------------------------------------------------------------
# Central differences with eps = 1e-6 in float64: truncation error ~ eps^2 * f''' ~ 1e-12 and
# cancellation error ~ 1e-16 * |L| / eps ~ 1e-9 for losses of size ~10, so 1e-7 (relative to the
# gradient's scale) leaves a 100x margin and still rejects any wrong term (errors of O(0.01-1)).
FD_EPS = 1e-6
FD_TOL = 1e-7
# float64 cells vs float64 reference: both evaluate the same formulas, only the summation
# order (BLAS blocking, fused vs. separate gemms) differs. Each dot product has at most
# nIn + nOut <= ~40 terms, so the rounding error is ~40 * 2.2e-16 ~ 1e-14 per step, and the GRU
# recurrence is contractive (u in (0,1), |dtanh| <= 1) so it does not blow up over <= 7 steps;
# sums of <= sL*bS = 35 terms in weight gradients add another factor ~35. 1e-12 relative to
# the scale is ~4500 ulp: far above rounding noise, far below any real error.
F64_TOL = 1e-12
# float32 cells vs float64 reference on the SAME float32-rounded inputs: only cells' float32
# arithmetic differs. eps32 = 6e-8; a dot of <= 40 terms of size ~1 errs by <= ~40*6e-8 ~ 2e-6
# worst case (typically ~sqrt(40)*6e-8 ~ 4e-7), plus the float32 exp/tanh (possibly a fast
# vectorised approximation of a few ulp) and the output rounding (3e-8). h and the gates are
# bounded by 1, so 1e-5 absolute is ~10x the worst expected error.
F32_FWD_TOL = 1e-5
# Gradients chain several products (each adds a few eps32 relative) and, for weights and biases,
# sum bS terms: 3e-5 relative to the gradient's scale.
F32_CELL_GRAD_TOL = 3e-5
# Sequence gradients additionally carry the error back through sL <= 7 steps and sum
# sL*bS <= 35 terms (random-walk growth ~sqrt(35) ~ 6): 3e-5 relative to scale as well.
# Measured on the largest case (sL=7, bS=5, nIn=13, nOut=24, 10 seeds, all variants): forward
# <= 8e-7 absolute, gradients <= 1.3e-6 relative to scale, i.e. >= 12x margin everywhere.
F32_SEQ_GRAD_TOL = 3e-5
# Two paths that must give the same values (gates= / workspace= vs recomputation, strided vs
# contiguous inputs, 1 vs 2 threads): at most a different summation order, so a few ulp.
SAME_TOL = {np.dtype(np.float64): 1e-13, np.dtype(np.float32): 2e-6}
SAME_GRAD_TOL = {np.dtype(np.float64): 1e-13, np.dtype(np.float32): 2e-5}


def fortran(a):
    return np.asfortranarray(a)


def strided(a):
    """A non-contiguous view of a copy of `a`: every other element along every axis."""
    a = np.asarray(a)
    big = np.zeros(tuple(2 * s for s in a.shape), dtype=a.dtype)
    sl = tuple(slice(None, None, 2) for _ in a.shape)
    big[sl] = a
    view = big[sl]
    return view


def reversed_view(a):
    """A view with negative strides holding the same values as `a`."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a.copy()
    rev = np.ascontiguousarray(a[::-1])
    return rev[::-1]


def transposed_view(a):
    """A transposed view (all axes reversed) of a copy, holding `a`'s values."""
    a = np.asarray(a)
    return np.ascontiguousarray(a.T).T


def readonly(a):
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


LAYOUTS = {
    "fortran": fortran,
    "strided": strided,
    "reversed": reversed_view,
    "transposed": transposed_view,
    "readonly": readonly,
}


def to_dtype(arrays, dtype):
    return tuple(None if a is None else np.asarray(a, dtype=dtype) for a in arrays)


def assert_new_arrays(outputs, inputs):
    """Every output must be a fresh array: no memory shared with any input."""
    for o in outputs:
        for i in inputs:
            if i is not None and isinstance(i, np.ndarray):
                assert not np.shares_memory(o, i), "an output shares memory with an input"
