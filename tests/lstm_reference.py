"""Independent float64 NumPy reference for the LSTM kernels in ``cells``.

Written for readability, not speed. The cell backward is derived by hand (chain rule on the
forward below); sequences are handled one batch row at a time: a row's valid steps are cut out,
reversed for forward=False, run through the cells, and the outputs put back at their time
indices (the kernels instead mask a whole batch per step). Everything here is proven against
central finite differences in ``test_lstm_reference.py``.

Conventions (same as the package): row vectors, ``z = x @ W``; gate blocks (i, f, g, o);
peepholes Wp in blocks (i, f, o); b, hI, cI, Wp may be None (zeros). With a projection Wproj
[nOut, nProj] (PyTorch's proj_size) the output is h = m @ Wproj, m = o*tanh(c), and the state h
(hI, Wr's rows) has nProj columns; the backward functions then also return dWproj.
"""
import numpy as np

from gru_reference import as64, matmul, sigmoid


def blocks(a, n_out, k=4):
    """Split the last axis of a [..., k*nOut] into its k blocks."""
    return tuple(a[..., j * n_out:(j + 1) * n_out] for j in range(k))


def _defaults(x, Wr, b, hI, cI, Wp):
    """float64 arrays, with zeros for the optional ones."""
    n_state, n_out = np.shape(Wr)[0], np.shape(Wr)[1] // 4
    bS = np.shape(x)[-2]
    b = np.zeros(4 * n_out) if b is None else as64(b)
    hI = np.zeros((bS, n_state)) if hI is None else as64(hI)
    cI = np.zeros((bS, n_out)) if cI is None else as64(cI)
    Wp = np.zeros(3 * n_out) if Wp is None else as64(Wp)
    return b, hI, cI, Wp


# ----------------------------------------------------------------------------------------
# LSTM cell
# ----------------------------------------------------------------------------------------
def lstm_cell_forward(x, Wx, Wr, b, hI, cI, Wp=None, cell_clip=0.0, return_cache=False,
                      Wproj=None, product=matmul):
    """One LSTM step. Returns (h, c) [bS, nOut] each (h [bS, nProj] with Wproj); with
    return_cache also a dict holding the gates i, f, g, o, c_raw (the cell state before
    clipping) and m (the output before the projection). product(a, w) as in
    gru_reference.gru_cell_forward."""
    x, Wx, Wr = as64(x), as64(Wx), as64(Wr)
    n_out = Wr.shape[1] // 4
    b, hI, cI, Wp = _defaults(x, Wr, b, hI, cI, Wp)
    zi, zf, zg, zo = blocks(product(x, Wx) + product(hI, Wr) + b, n_out)
    wpi, wpf, wpo = blocks(Wp, n_out, 3)
    i = sigmoid(zi + wpi * cI)
    f = sigmoid(zf + wpf * cI)
    g = np.tanh(zg)
    c_raw = f * cI + i * g
    c = np.clip(c_raw, -cell_clip, cell_clip) if cell_clip > 0 else c_raw
    o = sigmoid(zo + wpo * c)
    m = o * np.tanh(c)
    h = m if Wproj is None else product(m, as64(Wproj))
    if return_cache:
        return h, c, dict(i=i, f=f, g=g, o=o, c_raw=c_raw, m=m)
    return h, c


def lstm_cell_backward(x, Wx, Wr, b, hI, cI, dLdh=None, dLdc=None, Wp=None, cell_clip=0.0,
                       Wproj=None):
    """Gradients of L = sum(dLdh * h) + sum(dLdc * c) w.r.t. (x, Wx, Wr, b, hI, cI, Wp), and
    Wproj when given.

    Returns (dx, dWx, dWr, db, dhI, dcI, dWp), all arrays (for b, hI, cI, Wp given as None: the
    gradient w.r.t. their zeros), and dWproj last with Wproj.

    With Wproj, h = m @ Wproj: dL/dm = dLdh @ Wproj^T and dWproj = m^T @ dLdh; the derivation
    below then runs with dL/dm in place of dLdh (it is the gradient at o*tanh(c)).

    Derivation, with c the clipped cell state and c_raw = f*cI + i*g:
        h = o*tanh(c):       dL/do = dLdh*tanh(c)  -> dzo = dL/do * o*(1-o)
        total dL/dc  = dLdc + dLdh*o*(1-tanh(c)^2) + dzo*wp_o      (zo = ... + wp_o*c)
        dL/dc_raw    = dL/dc where |c_raw| < cell_clip (or no clipping), else 0
        c_raw = f*cI + i*g:  dzi = dL/dc_raw*g*i*(1-i),  dzf = dL/dc_raw*cI*f*(1-f),
                             dzg = dL/dc_raw*i*(1-g^2)
        dcI = dL/dc_raw*f + dzi*wp_i + dzf*wp_f                     (zi, zf see wp*cI)
        dz = [dzi | dzf | dzg | dzo]:  dx = dz.Wx^T, dhI = dz.Wr^T, dWx = x^T.dz,
                                       dWr = hI^T.dz, db = sum_b dz
        dWp = sum_b [dzi*cI | dzf*cI | dzo*c]
    """
    x, Wx, Wr = as64(x), as64(Wx), as64(Wr)
    n_out = Wr.shape[1] // 4
    b, hI, cI, Wp = _defaults(x, Wr, b, hI, cI, Wp)
    dLdh = np.zeros(hI.shape) if dLdh is None else as64(dLdh)
    dLdc = np.zeros(cI.shape) if dLdc is None else as64(dLdc)
    _, c, k = lstm_cell_forward(x, Wx, Wr, b, hI, cI, Wp, cell_clip, return_cache=True,
                                Wproj=Wproj)
    i, f, g, o = k["i"], k["f"], k["g"], k["o"]
    dLdh_out = dLdh
    if Wproj is not None:
        dLdh = dLdh_out @ as64(Wproj).T
    wpi, wpf, wpo = blocks(Wp, n_out, 3)

    tc = np.tanh(c)
    dzo = dLdh * tc * o * (1.0 - o)
    dc = dLdc + dLdh * o * (1.0 - tc * tc) + dzo * wpo
    if cell_clip > 0:
        dc = np.where(np.abs(k["c_raw"]) < cell_clip, dc, 0.0)
    dzi = dc * g * i * (1.0 - i)
    dzf = dc * cI * f * (1.0 - f)
    dzg = dc * i * (1.0 - g * g)
    dcI = dc * f + dzi * wpi + dzf * wpf
    dz = np.concatenate([dzi, dzf, dzg, dzo], axis=1)
    dx = dz @ Wx.T
    dhI = dz @ Wr.T
    dWx = x.T @ dz
    dWr = hI.T @ dz
    db = dz.sum(axis=0)
    dWp = np.concatenate([(dzi * cI).sum(0), (dzf * cI).sum(0), (dzo * c).sum(0)])
    if Wproj is not None:
        return dx, dWx, dWr, db, dhI, dcI, dWp, k["m"].T @ dLdh_out
    return dx, dWx, dWr, db, dhI, dcI, dWp


# ----------------------------------------------------------------------------------------
# sequences (time-major x [sL, bS, nIn]), one batch row at a time
# ----------------------------------------------------------------------------------------
def _row_times(length, forward):
    """The time indices a row of `length` valid steps visits, in processing order."""
    ts = list(range(length))
    return ts if forward else ts[::-1]


def lstm_time_loop_forward(x, Wx, Wr, b, hI, cI, Wp=None, seq_len=None, cell_clip=0.0,
                           forward=True, return_cache=False, Wproj=None):
    """Returns (h [sL, bS, nOut], hL, cL [bS, nOut]) (h, hL [..., nProj] with Wproj); with
    return_cache also a dict of [sL, bS, ...] arrays: c (clipped cell states), gates
    [sL, bS, 4nOut] (i, f, g, o), c_raw and m, all 0 at padded steps."""
    x = as64(x)
    sL, bS = x.shape[0], x.shape[1]
    n_state, n_out = np.shape(Wr)[0], np.shape(Wr)[1] // 4
    b, hI, cI, Wp = _defaults(x, Wr, b, hI, cI, Wp)
    lengths = [sL] * bS if seq_len is None else [int(v) for v in seq_len]
    hs = np.zeros((sL, bS, n_state))
    cs = np.zeros((sL, bS, n_out))
    gates = np.zeros((sL, bS, 4 * n_out))
    c_raw = np.zeros((sL, bS, n_out))
    ms = np.zeros((sL, bS, n_out))
    hL, cL = hI.copy(), cI.copy()
    for r in range(bS):
        h, c = hI[r:r + 1], cI[r:r + 1]
        for t in _row_times(lengths[r], forward):
            h, c, k = lstm_cell_forward(x[t, r:r + 1], Wx, Wr, b, h, c, Wp, cell_clip,
                                        return_cache=True, Wproj=Wproj)
            hs[t, r], cs[t, r] = h[0], c[0]
            gates[t, r] = np.concatenate([k["i"], k["f"], k["g"], k["o"]], axis=1)[0]
            c_raw[t, r], ms[t, r] = k["c_raw"][0], k["m"][0]
        hL[r], cL[r] = h[0], c[0]
    if return_cache:
        return hs, hL, cL, dict(c=cs, gates=gates, c_raw=c_raw, m=ms)
    return hs, hL, cL


def lstm_time_loop_backward(x, Wx, Wr, b, hI, cI, dLdh=None, dLdhL=None, dLdcL=None, Wp=None,
                            seq_len=None, cell_clip=0.0, forward=True, Wproj=None):
    """BPTT for L = sum(dLdh * h) + sum(dLdhL * hL) + sum(dLdcL * cL).

    Per row: carry (gh, gc) = (dLdhL, dLdcL) of the row; walk its valid steps backwards in
    processing order, adding the step's own dLdh to gh and running the cell backward from the
    state that entered that step. Weight gradients are summed over rows and steps.
    Returns (dx, dWx, dWr, db, dhI, dcI, dWp) as lstm_cell_backward (and dWproj with Wproj).
    """
    x, Wx, Wr = as64(x), as64(Wx), as64(Wr)
    sL, bS = x.shape[0], x.shape[1]
    n_state, n_out = Wr.shape[0], Wr.shape[1] // 4
    b, hI, cI, Wp = _defaults(x, Wr, b, hI, cI, Wp)
    lengths = [sL] * bS if seq_len is None else [int(v) for v in seq_len]
    hs, _, _, k = lstm_time_loop_forward(x, Wx, Wr, b, hI, cI, Wp, seq_len, cell_clip, forward,
                                         return_cache=True, Wproj=Wproj)
    dLdh = np.zeros((sL, bS, n_state)) if dLdh is None else as64(dLdh)
    dLdhL = np.zeros((bS, n_state)) if dLdhL is None else as64(dLdhL)
    dLdcL = np.zeros((bS, n_out)) if dLdcL is None else as64(dLdcL)

    dx = np.zeros(x.shape)
    dWx, dWr = np.zeros(Wx.shape), np.zeros(Wr.shape)
    db, dWp = np.zeros(4 * n_out), np.zeros(3 * n_out)
    dWproj = None if Wproj is None else np.zeros(np.shape(Wproj))
    dhI, dcI = np.zeros((bS, n_state)), np.zeros((bS, n_out))
    for r in range(bS):
        times = _row_times(lengths[r], forward)
        gh, gc = dLdhL[r:r + 1], dLdcL[r:r + 1]
        for n in reversed(range(len(times))):
            t = times[n]
            if n == 0:
                h_prev, c_prev = hI[r:r + 1], cI[r:r + 1]
            else:
                h_prev, c_prev = hs[times[n - 1], r:r + 1], k["c"][times[n - 1], r:r + 1]
            gh = gh + dLdh[t, r:r + 1]
            dx_t, dWx_t, dWr_t, db_t, gh, gc, dWp_t, *dWproj_t = lstm_cell_backward(
                x[t, r:r + 1], Wx, Wr, b, h_prev, c_prev, gh, gc, Wp, cell_clip, Wproj)
            dx[t, r] = dx_t[0]
            dWx += dWx_t
            dWr += dWr_t
            db += db_t
            dWp += dWp_t
            if Wproj is not None:
                dWproj += dWproj_t[0]
        dhI[r], dcI[r] = gh[0], gc[0]
    if Wproj is not None:
        return dx, dWx, dWr, db, dhI, dcI, dWp, dWproj
    return dx, dWx, dWr, db, dhI, dcI, dWp


# ----------------------------------------------------------------------------------------
# random problems
# ----------------------------------------------------------------------------------------
def make_lstm_problem(rng, sL, bS, n_in, n_out, peepholes=True, scale=0.5, n_proj=None):
    """Random float64 inputs and upstream gradients for a sequence:
    dict(x, Wx, Wr, b, hI, cI, Wp (None without peepholes), Wproj (None without n_proj), dLdh,
    dLdhL, dLdcL). Weights ~scale so gates are not saturated; non-zero initial states. With
    n_proj the state h (hI, Wr's rows, dLdh, dLdhL) has n_proj columns."""
    n_state = n_out if n_proj is None else n_proj
    return dict(
        x=rng.normal(0.0, 1.0, (sL, bS, n_in)),
        Wx=rng.normal(0.0, scale, (n_in, 4 * n_out)),
        Wr=rng.normal(0.0, scale, (n_state, 4 * n_out)),
        b=rng.normal(0.0, scale, (4 * n_out,)),
        hI=rng.uniform(-0.9, 0.9, (bS, n_state)),
        cI=rng.uniform(-1.5, 1.5, (bS, n_out)),
        Wp=rng.normal(0.0, scale, (3 * n_out,)) if peepholes else None,
        Wproj=None if n_proj is None else rng.normal(0.0, 2 * scale, (n_out, n_proj)),
        dLdh=rng.normal(0.0, 1.0, (sL, bS, n_state)),
        dLdhL=rng.normal(0.0, 1.0, (bS, n_state)),
        dLdcL=rng.normal(0.0, 1.0, (bS, n_out)),
    )


# Clipping cases keep every |c_raw| at least this far from the clip bound, so that central
# differences (which move c_raw by ~1e-6) never cross it.
CLIP_MARGIN = 1e-3


def pick_cell_clip(p, seq_len=None, forward=True):
    """A cell_clip for problem p that clips some elements of c_raw and leaves every |c_raw| more
    than CLIP_MARGIN from the bound (checked on the clipped run itself, whose states differ).
    Candidates are the midpoints of the widest gaps between the unclipped |c_raw| values."""
    def c_raw(clip):
        k = lstm_time_loop_forward(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], p["Wp"],
                                   seq_len, clip, forward, return_cache=True,
                                   Wproj=p.get("Wproj"))[3]
        return k["c_raw"][k["c_raw"] != 0]  # 0 only at padded steps

    mags = np.sort(np.abs(c_raw(0.0)))
    lo, hi = max(int(0.3 * len(mags)), 1), int(0.9 * len(mags))
    by_width = sorted(range(1, len(mags)), key=lambda j: mags[j - 1] - mags[j])
    # prefer gaps in the middle of the distribution (many elements clipped), then any gap
    for j in [j for j in by_width if lo <= j < hi][:10] + by_width[:10]:
        clip = 0.5 * (mags[j - 1] + mags[j])
        raw = np.abs(c_raw(clip))
        if np.min(np.abs(raw - clip)) > CLIP_MARGIN and np.any(raw > clip):
            return float(clip)
    raise AssertionError("no cell_clip with a safe margin for this problem: change the seed")
