"""The GPU backend: the CPU time loop's algorithm on CuPy arrays, with cuBLAS products and the
families' steps as CUDA kernels (cells/cuda.py, cells/kernels/).

It has the loops of cells._cpu with their contract (see its docstring); n_threads is
accepted and not used. Per call: the input projection of all steps is one gemm; per step, the
recurrent gemm into a preallocated buffer and one elementwise kernel (two of each for the
reset-before GRU, whose candidate multiplies r∘hPrev); the backward carries only the state
gradients step by step, and dL/dx, the weight gradients (gemms) and the bias and parameter
gradients (reductions) are computed over all steps after the loop. Sequence lengths, the
direction, padded steps, zoneout, every step's c and dL/dc, and workspaces are the CPU loop's
(cells/_time_loop.pyx), buffer for buffer where the kernels read them
(cells/kernels/kernels_impl.cuh).

The kernels come in two shapes (cells/kernels/kernels.cuh): one thread per (row, unit) element,
and, for a family whose step reduces across a row's units (row_reduction: haste's LayerNorm
cells), one thread per batch row. A family with no recurrent product (IndRNN) runs no
recurrent gemm and has no dL/dWh; a family whose dL/dP only its steps sum (param_grad "steps")
gets a per-row accumulator of it, summed over the rows after the loop.

The orchestration is written once against an array module `xp` and a kernel launcher: CuPy and
NVRTC's kernels for CuPy arrays; NumPy and the kernels compiled for the CPU with the shim for
NumPy arrays, which is how the tests run this module without a GPU (cells._backend sends NumPy
arrays to cells._cpu, never here).

"""
import numpy as np

from cells import _arrays, _family_table, cuda
from cells._family_table import LSTM_ACTIVATIONS


# Each family's row of include/cells/families.h's table, as cells._family_table compiled it.
FAMILIES = {name: _family_table.family(name) for name in _family_table.FAMILIES}


def _runtime(a):
    """(xp, launcher) for array `a`: CuPy and the device's kernels for a CuPy array, NumPy and
    the shim's kernels otherwise."""
    if _arrays.on_gpu(a):
        return cuda.import_cupy(), cuda.device_launcher()
    return np, cuda.cpu_launcher()


def _c_order(xp, a):
    """An array argument in C order (a copy only when it is not); None stays None."""
    return None if a is None else xp.ascontiguousarray(a)


def _options(clip, activation, acts):
    """The kernels' option parameters (kernels.cuh's CELLS_OPTION_PARAMS)."""
    args = [np.float64(clip), np.int32(activation)]
    for code, alpha, beta in acts:
        args += [np.int32(code), np.float64(alpha), np.float64(beta)]
    return args


def _weights(xp, fam, nOut, Wx, Wh, W):
    """(op(Wx) [nIn, G], op(Wh)'s columns of the blocks that multiply hPrev [nOut, NH] (None
    without a recurrent product), those of the blocks that multiply aux [nOut, G - NH] or
    None): W [G, nOut + nIn] in PyTorch's layout
    (columns h then x) stands for Wx = W[:, nOut:]ᵀ and Wh = W[:, :nOut]ᵀ. The per-step operands
    are C-contiguous copies, made once per call."""
    if W is not None:
        Wx, Wh = W[:, nOut:].T, W[:, :nOut].T
    if not fam.recurrent_product:
        return Wx, None, None
    NH = fam.h_blocks * nOut
    Wh_x = xp.ascontiguousarray(Wh[:, NH:]) if fam.phases == 2 else None
    return Wx, xp.ascontiguousarray(Wh[:, :NH]), Wh_x


def _zone(xp, zoneout, dtype, projected):
    """The kernels' (zone, zone_per_step) from zoneout (None, [1] or [sL, bS, nOut]: the time
    loop's share of the new state), as the CPU loop's set_zoneout."""
    if zoneout is None:
        return None, np.int32(0)
    if projected:
        raise ValueError("internal: zoneout on a projected output")
    zone = xp.ascontiguousarray(xp.asarray(zoneout, dtype=dtype))
    return zone, np.int32(zone.size != 1)


def _threads(fam, bS, nOut):
    """The threads of a step's kernel: one per (row, unit) element, or per batch row for a
    family whose step reduces across a row (row_reduction; none where rows are empty)."""
    if fam.row_reduction:
        return bS if nOut else 0
    return bS * nOut


def forward(family, dims, x, hI, keep, n_threads, seq_len, fwd, *, cI=None, Wx=None, Wh=None,
            W=None, b=None, P=None, Wproj=None, clip=np.inf, activation=0,
            lstm_acts=LSTM_ACTIVATIONS, z=None, zoneout=None, c_steps=False):
    """The forward time loop of `family` on the GPU (cells._cpu.forward's arguments and
    results: (h, hL, cL, gates, c, aux, m), the last four every step's with keep, else None;
    c every step's with c_steps too). z [bS, G], when given, receives the pre-activations of
    the last step (all rows active). zoneout: None, [1] or [sL, bS, nOut], the share of the new
    state (the kernels apply it after each step).

    With Wproj [nOut, nProj] the kernels write the step's output m = o∘tanh(c) (into ms, and
    at its time index into m), which this loop projects: the state is m·Wproj, nProj wide."""
    xp, launcher = _runtime(x)
    fam = FAMILIES[family]
    sL, bS, nIn, nOut = dims
    G, NH, A, dtype = fam.gates * nOut, fam.h_blocks * nOut, fam.aux * nOut, x.dtype
    two_phases = fam.phases == 2
    x, hI, cI, b, P, Wproj = (_c_order(xp, a) for a in (x, hI, cI, b, P, Wproj))
    projected = Wproj is not None
    nState = Wproj.shape[1] if projected else nOut
    Wx, Wh_h, Wh_x = _weights(xp, fam, nOut, Wx, Wh, W)
    zone, zone_per_step = _zone(xp, zoneout, dtype, projected)
    # Training: every step's gates overwrite their own input projection.
    gates = xp.empty((sL if keep else 1, bS, G), dtype)
    gx = gates if keep else xp.empty((sL, bS, G), dtype)
    xp.matmul(x.reshape(sL * bS, nIn), Wx, out=gx.reshape(sL * bS, G))
    if b is not None:
        gx += b
    aux = None
    if fam.aux:
        aux = xp.empty((sL if keep and fam.aux_kept else 1, bS, A), dtype)
    c = xp.empty((sL, bS, nOut), dtype) if (keep or c_steps) and fam.cell_state else None
    h = xp.empty((sL, bS, nOut), dtype)   # the kernels' outputs: m when projected
    hs = xp.empty((2, bS, nState), dtype)
    cs = xp.empty((2, bS, nOut), dtype) if fam.cell_state else None
    if projected:
        ms = xp.empty((bS, nOut), dtype)
        unread = xp.zeros((bS, nOut), dtype)   # the kernels' hPrev, which projecting steps ignore
        states = xp.zeros((sL, bS, nState), dtype)
        projected_state = xp.empty((bS, nState), dtype)
        placed = xp.empty((bS, nState), dtype)
    gh_h = xp.empty((bS, NH), dtype) if fam.recurrent_product else None
    gh_x = xp.empty((bS, G - NH), dtype) if two_phases else None
    lengths = None if seq_len is None else xp.asarray(seq_len, dtype=np.int64)
    steps = _loop_steps(xp, sL, bS, lengths, fwd) if projected else None
    options = _options(clip, activation, lstm_acts)
    threads = _threads(fam, bS, nOut)
    for t in range(sL):
        hcur = hI if t == 0 else hs[t % 2]
        ccur = cI if t == 0 or cs is None else cs[t % 2]
        hnxt = hs[(t + 1) % 2]
        cnxt = None if cs is None else cs[(t + 1) % 2]
        if gh_h is not None:
            xp.matmul(hcur, Wh_h, out=gh_h)
        if z is not None and t == sL - 1:
            xp.add(gx[sL - 1 if fwd else 0], gh_h, out=z)
        args = [np.int64(bS), np.int64(nOut), np.int64(sL), np.int64(t), np.int32(fwd),
                np.int32(keep), lengths, *options, gx, gh_h, gh_x,
                unread if projected else hcur, ccur, P, gates, aux,
                ms if projected else hnxt, cnxt, h, c, zone, zone_per_step]
        launcher.launch(family, "forward", dtype, threads, args)
        if two_phases:
            xp.matmul(aux[0], Wh_x, out=gh_x)
            launcher.launch(family, "forward_b", dtype, threads, args)
        if projected:
            xp.matmul(ms, Wproj, out=projected_state)
            _place_states(xp, steps, t, projected_state, hcur, hnxt, states, placed)
    hL = (hI if sL == 0 else hs[sL % 2]).copy()
    cL = None
    if fam.cell_state:
        cL = (cI if sL == 0 else cs[sL % 2]).copy()
    m, h = (h, states) if projected else (None, h)
    if not keep:
        return h, hL, cL, None, c, None, None
    return h, hL, cL, gates, c, (aux if fam.aux_kept else None), m


def _loop_steps(xp, sL, bS, lengths, fwd):
    """For every loop step t, which rows run it, running [sL, bS, 1], and the slot tau·bS + row
    of the time index each row processes, slots [sL, bS] (a row past its end: its own padded
    slot t·bS + row), computed once per call (cells/_small_loops.pxd's row_len and step_time)."""
    t = xp.arange(sL)[:, None]
    length = xp.full((1, bS), sL, np.int64) if lengths is None else lengths[None, :]
    running = t < length
    tau = xp.where(running, t if fwd else length - 1 - t, t)
    return running[:, :, None], tau * bS + xp.arange(bS)[None, :]


def _place_states(xp, steps, t, new, hcur, hnxt, h, placed):
    """The states leaving loop step t: hnxt = new [bS, n] for the rows that run the step, hcur
    for the rows past their end; h [sL, bS, n] gets new at each running row's time index and
    0 at a padded one. `placed` [bS, n] is scratch (new may be garbage in padded rows)."""
    running, slots = steps
    xp.copyto(hnxt, hcur)
    xp.copyto(hnxt, new, where=running[t])
    placed.fill(0)
    xp.copyto(placed, new, where=running[t])
    h.reshape(-1, h.shape[2])[slots[t]] = placed


def _prev_state_pairs(xp, sL, bS, seq_len, fwd, init, states, D):
    """The pairs (A, B) of [rows, ...] arrays whose row-wise products, summed over the rows of
    every pair, are Σ over every step (tau, row) of prev(tau, row) and D(tau, row): prev the
    value of `states` [sL, bS, n] that entered the step, `init` [bS, n] at a row's first step
    (cells/_small_loops.pxd's prev_state_product: forward, states shifted by one step and init at
    tau = 0; in reverse, shifted the other way and init at tau = len-1). D [sL, bS, m] is 0 at
    padded steps. sL > 0."""
    n, m = states.shape[2], D.shape[2]
    if fwd:
        return [(init, D[0]),
                (states[:-1].reshape(-1, n), D[1:].reshape(-1, m))]
    if seq_len is None:
        first = D[sL - 1]
    else:
        lengths = xp.asarray(seq_len, dtype=np.int64)
        first = D[xp.maximum(lengths - 1, 0), xp.arange(bS)]
        first = xp.where((lengths > 0)[:, None], first, 0).astype(D.dtype, copy=False)
    return [(init, first),
            (states[1:].reshape(-1, n), D[:-1].reshape(-1, m))]


def _prev_state_product(xp, sL, bS, seq_len, fwd, init, states, D):
    """Σ prevᵀ·D over every step ([n, m]): a recurrent weight's gradient."""
    if sL == 0:
        return xp.zeros((states.shape[2], D.shape[2]), D.dtype)
    pairs = _prev_state_pairs(xp, sL, bS, seq_len, fwd, init, states, D)
    return sum(A.T @ B for A, B in pairs)


def _prev_state_sum(xp, sL, bS, seq_len, fwd, init, states, D):
    """Σ prev∘D over every step and row ([n]): a peephole's gradient."""
    if sL == 0:
        return xp.zeros(D.shape[2], D.dtype)
    pairs = _prev_state_pairs(xp, sL, bS, seq_len, fwd, init, states, D)
    return sum((A * B).sum(axis=0) for A, B in pairs)


def backward(family, dims, x, hI, saved, n_threads, seq_len, fwd, *, cI=None, dLdh=None,
             dLdhL=None, dLdcL=None, dLdgates=None, Wx=None, Wh=None, W=None, P=None,
             Wproj=None, clip=np.inf, activation=0, lstm_acts=LSTM_ACTIVATIONS,
             input_grad=True, bias=True, dLdc=None, zoneout=None):
    """The backward time loop of `family` on the GPU, on `saved` = (h, gates, c, aux, m) of its
    forward with keep (cells._cpu.backward's arguments and results: (dLdx, dLdhI, dLdcI, dLdWx,
    dLdWh (with W: dLdW, None), dLdb, dLdP, dLdWproj)). Unlike the CPU's, it leaves `saved`
    intact, so that a workspace can serve another backward (CuPy arrays cannot be made
    read-only to guard it): the kernels overwrite copies of gates and a kept aux with
    gradients (dL/dz, and the lbr GRU's dL/dhc), one gates-sized buffer more than the CPU's.

    With Wproj, each step starts the kernels from dL/dm = dL/dh·Wprojᵀ (dL/dh: the carried
    gradient of the state plus dLdh at the step), and dL/dWproj = Σ mᵀ·dL/dh after the loop.

    dLdc [sL, bS, nOut] or None: the gradient arriving at every step's c; zoneout as forward
    took it; without `bias` (a family whose bias is in P), dLdb is None, as is dLdWh for a
    family with no recurrent product."""
    xp, launcher = _runtime(x)
    fam = FAMILIES[family]
    sL, bS, nIn, nOut = dims
    G, NH, dtype, SB = fam.gates * nOut, fam.h_blocks * nOut, x.dtype, sL * bS
    A = fam.aux * nOut
    two_phases = fam.phases == 2
    x, hI, cI, P, dLdh, dLdgates, Wproj, dLdc = (
        _c_order(xp, a) for a in (x, hI, cI, P, dLdh, dLdgates, Wproj, dLdc))
    projected = Wproj is not None
    nState = Wproj.shape[1] if projected else nOut
    h, gates, c, aux, m = saved
    h, c, m = _c_order(xp, h), _c_order(xp, c), _c_order(xp, m)
    gates = xp.array(gates, order="C")   # copies, which become the gradients
    if fam.aux and not fam.aux_kept:
        aux = xp.empty((sL, bS, A), dtype)
    elif fam.aux:
        aux = xp.array(aux, order="C")
    Wx_op, Wh_h, Wh_x = _weights(xp, fam, nOut, Wx, Wh, W)
    zone, zone_per_step = _zone(xp, zoneout, dtype, projected)
    dzone = xp.empty((bS, nOut), dtype) if zone is not None else None
    # A family whose steps sum dL/dP: each row's own accumulator, summed after the loop.
    dP_rows = None
    if fam.param_grad == "steps":
        dP_rows = xp.zeros((bS, fam.param_blocks * nOut), dtype)
    dh = xp.zeros((bS, nState), dtype) if dLdhL is None else xp.array(dLdhL, dtype, order="C")
    dhr = xp.zeros((bS, nOut), dtype)
    if projected:
        # The kernels' dh is dL/dm (dhr stays 0); dh is the state's carried gradient here.
        dm = xp.empty((bS, nOut), dtype)
        unread = xp.zeros((bS, nOut), dtype)   # the kernels' hI, which projecting steps ignore
        dh_steps = xp.zeros((sL, bS, nState), dtype)
        dh_step = xp.empty((bS, nState), dtype)
        arriving = xp.empty((bS, nState), dtype)
        dh_prev = xp.empty((bS, nState), dtype)
    dc = None
    if fam.cell_state:
        dc = xp.zeros((bS, nOut), dtype) if dLdcL is None else xp.array(dLdcL, dtype, order="C")
    d_h = xp.empty((bS, NH), dtype) if fam.recurrent_product else None
    d_x = xp.empty((bS, G - NH), dtype) if two_phases else None
    daux = xp.empty((bS, nOut), dtype) if two_phases else None
    lengths = None if seq_len is None else xp.asarray(seq_len, dtype=np.int64)
    steps = _loop_steps(xp, sL, bS, lengths, fwd) if projected else None
    options = _options(clip, activation, lstm_acts)
    threads = _threads(fam, bS, nOut)
    more = [dLdc, zone, zone_per_step, dzone, dP_rows]
    for t in range(sL - 1, -1, -1):
        if projected:
            _step_state_grads(xp, steps, t, dLdh, dh, dh_steps, dh_step, arriving)
            xp.matmul(dh_step, Wproj.T, out=dm)
            args = [np.int64(bS), np.int64(nOut), np.int64(sL), np.int64(t), np.int32(fwd),
                    lengths, *options, None, dLdgates, gates, aux, daux, unread, m, cI, c, P,
                    dm, dhr, dc, d_h, d_x, *more]
        else:
            args = [np.int64(bS), np.int64(nOut), np.int64(sL), np.int64(t), np.int32(fwd),
                    lengths, *options, dLdh, dLdgates, gates, aux, daux, hI, h, cI, c, P, dh,
                    dhr, dc, d_h, d_x, *more]
        launcher.launch(family, "backward", dtype, threads, args)
        if two_phases:
            xp.matmul(d_x, Wh_x.T, out=daux)
            launcher.launch(family, "backward_b", dtype, threads, args)
        if d_h is None:  # no recurrent product: the step's dh is all of dL/dhPrev
            continue
        if projected:  # dL/dhPrev = d·Whᵀ joins the state's carried gradient
            xp.matmul(d_h, Wh_h.T, out=dh_prev)
            dh += dh_prev
        else:          # dL/dhPrev's product: the next (earlier) step's kernel adds it to dh
            xp.matmul(d_h, Wh_h.T, out=dhr)
    dLdhI = dh if projected else dh + dhr

    dz = gates.reshape(SB, G)
    dLdx = (dz @ Wx_op.T).reshape(sL, bS, nIn) if input_grad else None
    dLdWx = x.reshape(SB, nIn).T @ dz
    dLdb = dz.sum(axis=0) if bias else None
    dLdWh = None
    if fam.recurrent_product:
        dLdWh = _recurrent_weight_grad(xp, fam, dims, seq_len, fwd, hI, h, nState, gates, aux)
    dLdP = None
    if dP_rows is not None:
        dLdP = dP_rows.sum(axis=0).reshape(P.shape)
    elif P is not None:
        dLdP = _param_grad(xp, fam, dims, seq_len, fwd, gates, aux, cI, c)
    dLdWproj = None
    if projected:
        dLdWproj = m.reshape(SB, nOut).T @ dh_steps.reshape(SB, nState)
    if W is not None:
        dLdW = xp.concatenate([dLdWh.T, dLdWx.T], axis=1)
        return dLdx, dLdhI, dc, dLdW, None, dLdb, dLdP, dLdWproj
    if _arrays.torch_layout(Wx, Wh):  # the gradients in the weights' layout, as the CPU's
        dLdWx, dLdWh = xp.asfortranarray(dLdWx), xp.asfortranarray(dLdWh)
    return dLdx, dLdhI, dc, dLdWx, dLdWh, dLdb, dLdP, dLdWproj


def _recurrent_weight_grad(xp, fam, dims, seq_len, fwd, hI, h, nState, dz, aux):
    """dL/dWh [nState, G] after the loop: Σ hPrevᵀ·D over the blocks that multiply hPrev, D
    each block's recurrent-side gradient (dz, but aux's first blocks for the blocks
    [aux_grad_block, h_blocks), where the family's backward keeps them: the lbr GRU's
    candidate, every gate of the LayerNorm cells), then Σ auxᵀ·dz for the blocks that multiply
    aux (the reset-before GRU's candidate)."""
    sL, bS, _, nOut = dims
    NH = fam.h_blocks * nOut
    D = dz[:, :, :NH]
    k = fam.aux_grad_block
    if k == 0:
        D = xp.ascontiguousarray(aux[:, :, :NH])
    elif k > 0:
        D = D.copy()
        D[:, :, k * nOut:] = aux[:, :, :NH - k * nOut]
    dLdWh = _prev_state_product(xp, sL, bS, seq_len, fwd, hI, h.reshape(sL, bS, nState), D)
    if fam.phases == 2:  # the blocks that multiply aux: Σ auxᵀ·dz
        dz_aux = dz.reshape(sL * bS, fam.gates * nOut)[:, NH:]
        dLdWh = xp.concatenate([dLdWh, aux.reshape(sL * bS, nOut).T @ dz_aux], axis=1)
    return dLdWh


def _step_state_grads(xp, steps, t, dLdh, carried, dh_steps, dh_step, arriving):
    """dh_step [bS, n] = the whole dL/dh of loop step t: the carried gradient plus dLdh at the
    time index of the rows that run the step, 0 for the rows past their end (whose dLdh is
    never read); also kept in dh_steps [sL, bS, n] at that index. The carried gradient restarts
    at 0 for the running rows. `arriving` [bS, n] is scratch."""
    running, slots = steps
    if dLdh is None:
        arriving[...] = carried
    else:
        xp.take(dLdh.reshape(-1, dLdh.shape[2]), slots[t], axis=0, out=arriving)
        arriving += carried
    dh_step.fill(0)
    xp.copyto(dh_step, arriving, where=running[t])
    dh_steps.reshape(-1, dh_steps.shape[2])[slots[t]] = dh_step
    xp.copyto(carried, 0, where=running[t])


def _param_grad(xp, fam, dims, seq_len, fwd, dz, aux, cI, c):
    """dL/dP, the family's own parameters, as the reductions over every step that its
    declared param_grad names (include/cells/family_rows.h): "aux", Σ aux (the lbr GRU's bh_c,
    whose gradient dL/dhc aux holds); "peepholes", the LSTM's (p_i, p_f, p_o): Σ dz_i∘cPrev,
    Σ dz_f∘cPrev, Σ dz_o∘c. The CPU loop's steps add dL/dP up as they run; here every kernel
    thread would need a row of its own, hence the reductions after the loop (which "steps"
    families, whose dL/dP only their steps compute, do have: backward's dP_rows)."""
    sL, bS, _, nOut = dims
    if fam.param_grad == "aux":
        return aux.reshape(sL * bS, nOut).sum(axis=0)
    dzi, dzf, dzo = dz[:, :, :nOut], dz[:, :, nOut:2 * nOut], dz[:, :, 3 * nOut:]
    return xp.concatenate([
        _prev_state_sum(xp, sL, bS, seq_len, fwd, cI, c, dzi),
        _prev_state_sum(xp, sL, bS, seq_len, fwd, cI, c, dzf),
        (dzo * c).reshape(sL * bS, nOut).sum(axis=0)])
