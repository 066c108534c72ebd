"""cells.lltmTimeLoop / cells.lltmTimeLoopBp: sequences with seq_len masks in both directions,
against the finite-difference-proven reference (which runs each row on its own), finite
differences of cells itself, torch autograd of the same masked loop, and cells' own cell."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, central_diff_grad, round32,
)
from lltm_reference import (
    lltm_seq_backward, lltm_seq_forward, make_fd_problem, make_lltm_problem,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


GRAD_NAMES = ("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI")
# (sL, bS, nIn, S): sL = 1, bS = 1, nIn != S both ways, S = 1, and S = 24 (two threads split).
SHAPES = [(1, 3, 4, 2), (4, 1, 2, 5), (3, 4, 6, 3), (5, 3, 2, 1), (7, 5, 13, 24)]
# Tolerances: gru_reference.py's, justified there for the same kind of computation (dots of
# S + nIn <= 37 terms, <= 7 steps, weight sums over <= 35 rows). The LLTM cell state is not
# bounded by 1 (c' = c + n∘i), which the comparison's scale max(1, max|expected|) absorbs.
# Measured (sL=7, bS=5, nIn=13, S=24, seq_len [7,0,3,1,6], both directions, 10 seeds): float32
# forward <= 8.2e-7 and gradients <= 7.4e-7 relative to scale (>= 12x and 40x margins);
# float64 <= 2.5e-15.


def _problem(seed, sL, bS, n_in, S, dtype=np.float64):
    p = make_lltm_problem(np.random.default_rng(seed), sL, bS, n_in, S)
    return round32(p) if dtype == np.float32 else p


def _tols(dtype):
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_SEQ_GRAD_TOL)


def _lens(kind, sL, bS, seed=0):
    """seq_len variants: None, all full, and a mix of 0, sL and lengths in between."""
    if kind is None:
        return None
    if kind == "full":
        return np.full(bS, sL, np.int64)
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, sL + 1, bS)
    lens[:3] = [0, sL, max(sL // 2, 1)][:min(3, bS)]
    return lens


@pytest.mark.parametrize("sL,bS,n_in,S", SHAPES)
@pytest.mark.parametrize("lens_kind", [None, "mixed"])
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
def test_lltm_time_loop_vs_reference(dtype, sL, bS, n_in, S, lens_kind, forward):
    seed = 300 + 31 * sL + 7 * bS + 3 * n_in + S
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(seed, sL, bS, n_in, S, dtype)
    seq_len = _lens(lens_kind, sL, bS, seed)
    fwd_tol, grad_tol = _tols(dtype)
    h_ref, hL_ref, cL_ref, gates_ref, c_ref, _ = lltm_seq_forward(x, W, b, hI, cI, seq_len,
                                                                  forward)
    h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len, forward=forward,
                                       return_workspace=True)
    for name, a, r in (("h", h, h_ref), ("hL", hL, hL_ref), ("cL", cL, cL_ref),
                       ("ws.gates", ws.gates, gates_ref), ("ws.c", ws.c, c_ref)):
        assert_close(a, r, fwd_tol, name, dtype)
    assert ws.h is h
    if seq_len is not None:  # padded outputs are exactly 0
        assert np.all(h[np.arange(sL)[:, None] >= seq_len[None, :]] == 0)

    ref = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL, seq_len, forward)
    for use_ws in (False, True):
        grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                     seq_len=seq_len, forward=forward,
                                     workspace=ws if use_ws else None)
        assert len(grads) == 5
        for name, g, r in zip(GRAD_NAMES, grads, ref):
            assert_close(g, r, grad_tol, name, dtype)
    assert_new_arrays((h, hL, cL) + tuple(grads), (x, W, b, hI, cI, dLdh, dLdhL, dLdcL))


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("lens", [None, (3, 0, 1, 2)])
def test_lltm_time_loop_gradients_vs_finite_differences_of_cells(forward, lens):
    sL, bS, n_in, S = 3, 4, 2, 3
    seq_len = None if lens is None else np.array(lens)
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = make_fd_problem(400, sL, bS, n_in, S, seq_len, forward)

    def loss(x, W, b, hI, cI):
        h, hL, cL = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len, forward=forward,
                                       n_threads=1)
        return float(np.sum(dLdh * h) + np.sum(dLdhL * hL) + np.sum(dLdcL * cL))

    fd = central_diff_grad(loss, (x, W, b, hI, cI), FD_EPS)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                 seq_len=seq_len, forward=forward)
    for name, g, f in zip(GRAD_NAMES, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


@pytest.mark.parametrize("given", ["dLdh", "dLdhL", "dLdcL", "none"])
def test_lltm_time_loop_none_upstream_gradients(dtype, given):
    sL, bS, n_in, S = 3, 3, 2, 4
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(410, sL, bS, n_in, S, dtype)
    seq_len = np.array([3, 1, 0])
    ups = {"dLdh": dLdh, "dLdhL": dLdhL, "dLdcL": dLdcL}
    ups = {k: (v if k == given else None) for k, v in ups.items()}
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, ups["dLdh"], dLdhL=ups["dLdhL"],
                                 dLdcL=ups["dLdcL"], seq_len=seq_len)
    ref = lltm_seq_backward(x, W, b, hI, cI, **ups, seq_len=seq_len)
    for name, g, r in zip(GRAD_NAMES, grads, ref):
        assert_close(g, r, _tols(dtype)[1], name, dtype)
    if given == "none":
        assert all(np.all(g == 0) for g in grads)
    zeros = {k: (np.zeros_like(a) if ups[k] is None else ups[k])
             for k, a in (("dLdh", dLdh), ("dLdhL", dLdhL), ("dLdcL", dLdcL))}
    g0 = cells.lltmTimeLoopBp(x, W, b, hI, cI, zeros["dLdh"], dLdhL=zeros["dLdhL"],
                              dLdcL=zeros["dLdcL"], seq_len=seq_len)
    for name, g, z in zip(GRAD_NAMES, grads, g0):
        assert_close(g, z, SAME_GRAD_TOL[dtype], name, dtype)


def test_lltm_time_loop_workspace(dtype):
    sL, bS, n_in, S = 4, 3, 5, 6
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(420, sL, bS, n_in, S, dtype)
    h0, hL0, cL0 = cells.lltmTimeLoop(x, W, b, hI, cI)
    h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, return_workspace=True)
    assert isinstance(ws, cells.LltmWorkspace)
    assert ws._fields == ("h", "gates", "c", "seq_len", "forward")
    assert ws.gates.shape == (sL, bS, 3 * S) and ws.c.shape == (sL, bS, S)
    assert ws.gates.dtype == dtype and ws.c.dtype == dtype
    for a, r in ((h, h0), (hL, hL0), (cL, cL0)):
        assert_close(a, r, SAME_TOL[dtype], "", dtype)
    # the workspace is really used: one from a different run (same shapes) changes the grads
    g0 = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, workspace=ws)
    other = cells.lltmTimeLoop(x[::-1].copy(), W, b, hI, cI, return_workspace=True)[3]
    g1 = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, workspace=other)
    assert np.max(np.abs(g1[1].astype(float) - g0[1].astype(float))) > 1e-4


def test_lltm_time_loop_workspace_mismatch(dtype):
    sL, bS, n_in, S = 3, 2, 3, 4
    x, W, b, hI, cI, dLdh = _problem(430, sL, bS, n_in, S, dtype)[:6]
    for xs, hs in ((_problem(431, sL + 1, bS, n_in, S, dtype)[0], hI),
                   (_problem(432, sL, bS + 1, n_in, S, dtype)[0],
                    np.zeros((bS + 1, S), dtype))):
        ws = cells.lltmTimeLoop(xs, W, b, hs, np.zeros_like(hs), return_workspace=True)[3]
        with pytest.raises(ValueError, match="workspace"):
            cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, workspace=ws)
    ws = cells.lltmTimeLoop(x, W, b, hI, cI, return_workspace=True)[3]
    with pytest.raises(ValueError, match=r"workspace\.gates.*\(3, 2, 11\)"):
        cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, workspace=ws._replace(gates=ws.gates[..., 1:]))
    with pytest.raises(TypeError, match="workspace"):
        cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, workspace=tuple(ws))
    other = np.float32 if dtype == np.float64 else np.float64
    with pytest.raises(TypeError, match="workspace"):
        cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, workspace=ws._replace(c=ws.c.astype(other)))


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
def test_lltm_time_loop_threads_agree(dtype, forward):
    sL, bS, n_in, S = 7, 5, 13, 24
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(440, sL, bS, n_in, S, dtype)
    seq_len = np.array([7, 0, 3, 1, 6])
    res = {}
    for nt in (1, 2):
        h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len, forward=forward,
                                           return_workspace=True, n_threads=nt)
        g = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                 seq_len=seq_len, forward=forward, workspace=ws, n_threads=nt)
        res[nt] = (h, hL, cL, ws.gates, ws.c) + tuple(g)
    for k in range(len(res[1])):
        tol = (SAME_TOL if k < 5 else SAME_GRAD_TOL)[dtype]
        assert_close(res[2][k], res[1][k], tol, str(k), dtype)
    ref = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL, seq_len, forward)
    for name, g, r in zip(GRAD_NAMES, res[2][5:], ref):
        assert_close(g, r, _tols(dtype)[1], name, dtype)


@pytest.mark.parametrize("sL,bS,n_in", [(0, 3, 4), (3, 0, 4), (3, 2, 0), (0, 0, 0)])
def test_lltm_time_loop_empty_dims(dtype, sL, bS, n_in):
    S = 3
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(450, sL, bS, n_in, S, dtype)
    seq_len = np.full(bS, sL, np.int64)
    h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len, return_workspace=True)
    assert h.shape == (sL, bS, S) and hL.shape == cL.shape == (bS, S) and h.dtype == dtype
    ref_f = lltm_seq_forward(x, W, b, hI, cI)
    for name, a, r in zip(("h", "hL", "cL"), (h, hL, cL), ref_f):
        assert_close(a, r, _tols(dtype)[0], name, dtype)
    ref = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL)
    for kw in ({}, {"workspace": ws}):
        grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                     seq_len=seq_len, **kw)
        assert [g.shape for g in grads] == [x.shape, W.shape, b.shape, hI.shape, cI.shape]
        for name, g, r in zip(GRAD_NAMES, grads, ref):
            assert_close(g, r, _tols(dtype)[1], name, dtype)
        if sL == 0:  # nothing runs: the final-state gradients pass straight through
            np.testing.assert_array_equal(grads[3], dLdhL)
            np.testing.assert_array_equal(grads[4], dLdcL)
        if sL == 0 or bS == 0:
            assert np.all(grads[1] == 0) and np.all(grads[2] == 0)


def test_lltm_time_loop_all_rows_empty_keep_initial_state(dtype):
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(455, 3, 2, 4, 5, dtype)
    seq_len = np.zeros(2, np.int64)
    h, hL, cL = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len)
    assert np.all(h == 0)
    np.testing.assert_array_equal(hL, hI)
    np.testing.assert_array_equal(cL, cI)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, seq_len=seq_len)
    assert np.all(grads[0] == 0) and np.all(grads[1] == 0) and np.all(grads[2] == 0)
    np.testing.assert_array_equal(grads[3], dLdhL)
    np.testing.assert_array_equal(grads[4], dLdcL)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_lltm_time_loop_noncontiguous_and_readonly_inputs(layout, dtype):
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(460, 3, 4, 4, 3, dtype)
    seq_len = np.array([3, 0, 2, 1])
    kw = dict(seq_len=seq_len, forward=False)
    f0 = cells.lltmTimeLoop(x, W, b, hI, cI, **kw)
    g0 = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, **kw)
    f = LAYOUTS[layout]
    args = [f(a) for a in (x, W, b, hI, cI, dLdh, dLdhL, dLdcL)]
    lens = f(seq_len)
    if layout != "readonly":
        assert not all(a.flags.c_contiguous for a in args)
    copies = [a.copy() for a in args]
    kw = dict(seq_len=lens, forward=False)
    f1 = cells.lltmTimeLoop(*args[:5], **kw)
    g1 = cells.lltmTimeLoopBp(*args[:6], dLdhL=args[6], dLdcL=args[7], **kw)
    for a, r in zip(f1, f0):
        assert_close(a, r, SAME_TOL[dtype], "forward", dtype)
    for name, a, r in zip(GRAD_NAMES, g1, g0):
        assert_close(a, r, SAME_GRAD_TOL[dtype], name, dtype)
    for a, cp in zip(args, copies):
        np.testing.assert_array_equal(a, cp)
    assert_close(f1[0], lltm_seq_forward(x, W, b, hI, cI, seq_len, False)[0],
                 _tols(dtype)[0], "h", dtype)


def test_lltm_time_loop_step_by_step_equals_cells_cell():
    x, W, b, hI, cI = _problem(470, 4, 3, 2, 5)[:5]
    h, hL, cL = cells.lltmTimeLoop(x, W, b, hI, cI)
    hp, cp = hI, cI
    for t in range(x.shape[0]):
        hp, cp = cells.lltm_forward(x[t], W, b, hp, cp)[:2]
        assert_close(h[t], hp, F64_TOL, f"h[{t}]")
    assert_close(hL, hp, F64_TOL, "hL")
    assert_close(cL, cp, F64_TOL, "cL")


def test_lltm_time_loop_float32_saturated_gates():
    """Weights of scale 2: pre-activations of about ±15, many gates saturated and candidates
    deep in ELU's negative branch; float32 still matches the float64 reference."""
    rng = np.random.default_rng(480)
    p = round32(make_lltm_problem(rng, 6, 4, 13, 10, scale=2.0))
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = p
    fwd_tol, grad_tol = _tols(np.float32)
    h_ref, hL_ref, cL_ref, gates_ref, _, z_ref = lltm_seq_forward(x, W, b, hI, cI)
    assert np.mean(np.abs(z_ref[..., :20]) > 8) > 0.1 and np.mean(z_ref[..., 20:] < -5) > 0.1
    h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, return_workspace=True)
    for name, a, r in (("h", h, h_ref), ("hL", hL, hL_ref), ("cL", cL, cL_ref),
                       ("gates", ws.gates, gates_ref)):
        assert_close(a, r, fwd_tol, name, np.float32)
    ref = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, workspace=ws)
    for name, g, r in zip(GRAD_NAMES, grads, ref):
        assert_close(g, r, grad_tol, name, np.float32)


# ---------------------------------------------------------------------------------------------
# torch autograd of the same masked loop
# ---------------------------------------------------------------------------------------------
def _torch_loop(torch, x, W, b, hI, cI, seq_len, forward):
    """The LLTM over a sequence in torch, by the sequence rule: at loop step t row r runs iff
    t < len_r, at time index t (forward) or len_r-1-t (reverse); inactive rows keep their state;
    outputs at padded positions are 0."""
    F = torch.nn.functional
    sL, bS, _ = x.shape
    S = hI.shape[1]
    lens = torch.full((bS,), sL) if seq_len is None else torch.from_numpy(np.asarray(seq_len))
    rows = torch.arange(bS)
    h, c = hI, cI
    out = torch.zeros(sL, bS, S, dtype=x.dtype)
    for t in range(sL):
        active = t < lens
        tau = torch.full((bS,), t) if forward else torch.clamp(lens - 1 - t, min=0)
        z = torch.cat([h, x[tau, rows]], dim=1) @ W.t() + b
        i, o = torch.sigmoid(z[:, :S]), torch.sigmoid(z[:, S:2 * S])
        n = F.elu(z[:, 2 * S:], alpha=1.0)
        new_c = c + n * i
        new_h = torch.tanh(new_c) * o
        m = active[:, None]
        h, c = torch.where(m, new_h, h), torch.where(m, new_c, c)
        out = out.index_put((tau[active], rows[active]), new_h[active])
    return out, h, c


@pytest.mark.parametrize("sL,bS,n_in,S", [(5, 4, 3, 6), (1, 2, 3, 2), (7, 5, 13, 24)])
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("zero_weights", [False, True], ids=["random", "zeroW"])
def test_lltm_time_loop_vs_torch_autograd(sL, bS, n_in, S, forward, zero_weights):
    """zeroW: zero weights and bias make every pre-activation exactly 0, ELU's kink, where
    torch autograd's elu'(0) = 1 must be matched."""
    torch = pytest.importorskip("torch")
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = _problem(490 + sL + bS + S, sL, bS, n_in, S)
    if zero_weights:
        W, b = np.zeros_like(W), np.zeros_like(b)
    seq_len = _lens("mixed", sL, bS, 491)
    leaves = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, W, b, hI, cI)]
    t_h, t_hL, t_cL = _torch_loop(torch, *leaves, seq_len, forward)
    loss = ((t_h * torch.from_numpy(dLdh)).sum() + (t_hL * torch.from_numpy(dLdhL)).sum()
            + (t_cL * torch.from_numpy(dLdcL)).sum())
    loss.backward()
    # torch evaluates the same float64 formulas: agreement to rounding, so F64_TOL.
    out = cells.lltmTimeLoop(x, W, b, hI, cI, seq_len=seq_len, forward=forward)
    for name, a, t in zip(("h", "hL", "cL"), out, (t_h, t_hL, t_cL)):
        assert_close(a, t.detach().numpy(), F64_TOL, name)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                 seq_len=seq_len, forward=forward)
    for name, g, leaf in zip(GRAD_NAMES, grads, leaves):
        assert_close(g, leaf.grad.numpy(), F64_TOL, name)
