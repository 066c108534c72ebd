"""cells.gruTimeLoop / cells.gruTimeLoopBp against the (finite-difference-proven) reference."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, central_diff_grad, gru_time_loop_backward,
    gru_time_loop_forward, make_seq_problem, round32, split_bias,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")
# (sL, bS, nIn, nOut): sL = 1, bS = 1, nIn != nOut both ways, one nOut = 1, a moderate case.
SHAPES = [(1, 3, 4, 2), (4, 1, 2, 5), (3, 2, 6, 3), (5, 3, 2, 1), (7, 5, 13, 24)]


def _problem(seed, sL, bS, n_in, n_out, two_biases, dtype):
    rng = np.random.default_rng(seed)
    arrays = make_seq_problem(rng, sL, bS, n_in, n_out, two_biases)
    if dtype == np.float32:
        arrays = round32(arrays)
    return arrays


def _tols(dtype):
    if dtype == np.float64:
        return F64_TOL, F64_TOL
    return F32_FWD_TOL, F32_SEQ_GRAD_TOL


def _ref_workspace(x, hI, Wx, Wh, b, lbr):
    """Expected (ws.gates, ws.hc): (r, u, c) per step, and hPrev.Wh_c + bh_c for
    linear-before-reset (None for reset-before)."""
    hs, gs = gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)
    if not lbr:
        return gs, None
    H = hI.shape[1]
    _, bh = split_bias(b, H)
    hprev = np.concatenate([np.asarray(hI, float)[None], hs[:-1]], axis=0)[:len(hs)]
    return gs, hprev @ np.asarray(Wh, float)[:, 2 * H:] + bh[2 * H:]


@pytest.mark.parametrize("sL,bS,n_in,n_out", SHAPES)
def test_gru_time_loop_vs_reference(lbr, two_biases, dtype, sL, bS, n_in, n_out):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2000 + 97 * sL + 31 * bS + 7 * n_in + n_out,
                                                sL, bS, n_in, n_out, two_biases, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    h_ref, _ = gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    assert_close(h, h_ref, fwd_tol, "h", dtype)

    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, lbr)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                linear_before_reset=lbr)
    assert len(grads) == 5
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, grad_tol, name, dtype)
    assert grads[4].shape == b.shape
    assert_new_arrays((h,) + tuple(grads), (x, hI, Wx, Wh, b, dLdh, dLdhLast))


def test_gru_time_loop_gradients_vs_finite_differences_of_cells(lbr, two_biases):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2100, 3, 2, 3, 2, two_biases, np.float64)

    def loss(x, hI, Wx, Wh, b):
        hs = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, n_threads=1)
        return float(np.sum(dLdh * hs) + np.sum(dLdhLast * hs[-1]))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                linear_before_reset=lbr)
    for name, g, f in zip(NAMES5, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


@pytest.mark.parametrize("give_dLdh,give_last", [(True, False), (False, True), (False, False)])
def test_gru_time_loop_none_upstream_gradients(lbr, two_biases, dtype, give_dLdh, give_last):
    sL, bS, n_in, n_out = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2200, sL, bS, n_in, n_out, two_biases, dtype)
    _, grad_tol = _tols(dtype)
    d = dLdh if give_dLdh else None
    dl = dLdhLast if give_last else None
    kwargs = {} if dl is None else {"dLdhLast": dl}
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, d, linear_before_reset=lbr, **kwargs)
    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, d, dl, lbr)
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, grad_tol, name, dtype)
    if not give_dLdh and not give_last:
        for g in grads:
            assert np.all(g == 0)
    # explicit zeros give the same as None
    zeros = cells.gruTimeLoopBp(
        x, hI, Wx, Wh, b, d if d is not None else np.zeros((sL, bS, n_out), dtype),
        dLdhLast=dl if dl is not None else np.zeros((bS, n_out), dtype), linear_before_reset=lbr)
    for name, g, z in zip(NAMES5, grads, zeros):
        assert_close(g, z, SAME_GRAD_TOL[dtype], name, dtype)


def test_gru_time_loop_dLdhLast_adds_to_last_step(lbr, dtype):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2300, 4, 3, 2, 3, True, dtype)
    a = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=lbr)
    d2 = dLdh.copy()
    d2[-1] += dLdhLast
    c = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, d2, linear_before_reset=lbr)
    for name, g, r in zip(NAMES5, a, c):
        assert_close(g, r, SAME_GRAD_TOL[dtype] * 10, name, dtype)


def test_gru_time_loop_workspace(lbr, two_biases, dtype):
    sL, bS, n_in, H = 4, 3, 5, 6
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2400, sL, bS, n_in, H, two_biases, dtype)
    fwd_tol, _ = _tols(dtype)
    h_plain = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    out = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, return_workspace=True)
    assert isinstance(out, tuple) and len(out) == 2
    h, ws = out
    assert isinstance(ws, cells.GruWorkspace)
    assert_close(h, h_plain, SAME_TOL[dtype], "h", dtype)
    np.testing.assert_array_equal(ws.h, h)
    assert_close(h, gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)[0], fwd_tol, "h", dtype)

    g0 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=lbr)
    g1 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws,
                             linear_before_reset=lbr)
    for name, a, c in zip(NAMES5, g1, g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)

    # the workspace is really used: a workspace of a different run (same shapes) changes grads
    _, ws_other = cells.gruTimeLoop(x[::-1].copy(), hI, Wx, Wh, b, linear_before_reset=lbr,
                                    return_workspace=True)
    g2 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws_other,
                             linear_before_reset=lbr)
    assert np.max(np.abs(g2[2].astype(float) - g0[2].astype(float))) > 1e-4


@pytest.mark.parametrize("sL,bS,n_in", [(4, 3, 5), (0, 3, 5), (3, 0, 2)])
def test_gru_time_loop_workspace_layout(lbr, two_biases, dtype, sL, bS, n_in):
    """The documented layout: GruWorkspace(h, gates, hc), gates [sL, bS, 3nOut] = (r, u, c);
    hc [sL, bS, nOut] = hPrev.Wh_c + bh_c for linear-before-reset, None for reset-before."""
    H = 6
    x, hI, Wx, Wh, b, _, _ = _problem(2450, sL, bS, n_in, H, two_biases, dtype)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, return_workspace=True)
    assert ws._fields == ("h", "gates", "hc", "seq_len", "forward")
    assert ws.seq_len is None and ws.forward is True
    np.testing.assert_array_equal(ws.h, h)
    gates_ref, hc_ref = _ref_workspace(x, hI, Wx, Wh, b, lbr)
    assert ws.gates.shape == (sL, bS, 3 * H)
    assert ws.gates.dtype == dtype
    assert_close(ws.gates, gates_ref, _tols(dtype)[0], "ws.gates", dtype)
    if lbr:
        assert ws.hc.shape == (sL, bS, H)
        assert ws.hc.dtype == dtype
        assert_close(ws.hc, hc_ref, _tols(dtype)[0], "ws.hc", dtype)
    else:
        assert ws.hc is None


def test_gru_time_loop_workspace_mismatch_is_value_error(dtype):
    sL, bS, n_in, H = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, _ = _problem(2500, sL, bS, n_in, H, True, dtype)
    for lbr in (False, True):
        _, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr,
                                  return_workspace=True)
        with pytest.raises(ValueError, match="workspace"):
            cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws,
                                linear_before_reset=not lbr)
    # workspace of other shapes (longer sequence, other batch)
    x5, hI5, _, _, _, dLdh5, _ = _problem(2501, sL + 1, bS, n_in, H, True, dtype)
    _, ws5 = cells.gruTimeLoop(x5, hI5, Wx, Wh, b, return_workspace=True)
    with pytest.raises(ValueError, match="workspace"):
        cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws5)
    xb, hIb, _, _, _, _, _ = _problem(2502, sL, bS + 1, n_in, H, True, dtype)
    _, wsb = cells.gruTimeLoop(xb, hIb, Wx, Wh, b, return_workspace=True)
    with pytest.raises(ValueError, match="workspace"):
        cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=wsb)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_gru_time_loop_noncontiguous_and_readonly_inputs(layout, lbr, dtype):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2600, 3, 2, 4, 3, True, dtype)
    h0 = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    g0 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=lbr)
    f = LAYOUTS[layout]
    args = [f(a) for a in (x, hI, Wx, Wh, b, dLdh, dLdhLast)]
    if layout != "readonly":
        assert not all(a.flags.c_contiguous for a in args)
    copies = [a.copy() for a in args]
    h1 = cells.gruTimeLoop(*args[:5], linear_before_reset=lbr)
    g1 = cells.gruTimeLoopBp(*args[:6], dLdhLast=args[6], linear_before_reset=lbr)
    assert_close(h1, h0, SAME_TOL[dtype], "h", dtype)
    for name, a, c in zip(NAMES5, g1, g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    for a, c in zip(args, copies):
        np.testing.assert_array_equal(a, c)
    # a workspace built from these views works too
    _, ws = cells.gruTimeLoop(*args[:5], linear_before_reset=lbr, return_workspace=True)
    g2 = cells.gruTimeLoopBp(*args[:6], dLdhLast=args[6], workspace=ws, linear_before_reset=lbr)
    for name, a, c in zip(NAMES5, g2, g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    fwd_tol, _ = _tols(dtype)
    assert_close(h1, gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)[0], fwd_tol, "h", dtype)


def test_gru_time_loop_threads_agree(lbr, two_biases, dtype):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2700, 7, 5, 13, 24, two_biases, dtype)
    res = {}
    for nt in (1, 2):
        h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr,
                                  return_workspace=True, n_threads=nt)
        g = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                linear_before_reset=lbr, n_threads=nt)
        gw = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws,
                                 linear_before_reset=lbr, n_threads=nt)
        res[nt] = (h,) + tuple(g) + tuple(gw)
        # layout checked in test_..._workspace; gates and hc hold dz and dL/dhc by now
        ws_arrays = [a for a in (ws.h, ws.gates, ws.hc) if a is not None]
        if nt == 1:
            ws1 = ws_arrays
    for a, c in zip(ws_arrays, ws1):
        assert_close(a, c, SAME_TOL[dtype], "workspace array", dtype)
    names = ("h",) + NAMES5 + tuple(n + "(ws)" for n in NAMES5)
    for k, name in enumerate(names):
        tol = (SAME_TOL if k < 1 else SAME_GRAD_TOL)[dtype]
        assert_close(res[2][k], res[1][k], tol, name, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    assert_close(res[2][0], gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)[0], fwd_tol, "h", dtype)
    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, lbr)
    for k, name in enumerate(NAMES5):
        assert_close(res[2][1 + k], ref[k], grad_tol, name, dtype)
        assert_close(res[2][6 + k], ref[k], grad_tol, name + "(ws)", dtype)


@pytest.mark.parametrize("sL,bS,n_in", [(0, 3, 4), (3, 0, 4), (3, 2, 0), (0, 0, 0)])
def test_gru_time_loop_empty_dims(lbr, two_biases, dtype, sL, bS, n_in):
    H = 3
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(2800, sL, bS, n_in, H, two_biases, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, return_workspace=True)
    assert h.shape == (sL, bS, H) and h.dtype == dtype
    assert_close(h, gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)[0], fwd_tol, "h", dtype)
    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, lbr)
    for use_ws in (False, True):
        kw = {"workspace": ws} if use_ws else {}
        grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                    linear_before_reset=lbr, **kw)
        for name, g, r in zip(NAMES5, grads, ref):
            assert_close(g, r, grad_tol, name, dtype)
        if sL == 0:
            # nothing to run: the final-state gradient passes straight to hI
            assert_close(grads[1], dLdhLast, 0.0, "dLdhI", dtype)
        if sL == 0 or bS == 0:
            for g in grads[2:]:
                assert np.all(g == 0)
    # and with no upstream gradient at all
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, None, linear_before_reset=lbr)
    assert grads[0].shape == x.shape and grads[1].shape == hI.shape
    for g in grads:
        assert np.all(g == 0)


def test_gru_time_loop_step_by_step_equals_cells_cell(lbr, two_biases):
    # The sequence kernel is the composition of cells' own cell kernel.
    x, hI, Wx, Wh, b, _, _ = _problem(2900, 4, 3, 2, 5, two_biases, np.float64)
    hs = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    h = hI
    for t in range(x.shape[0]):
        h = cells.gruCell(x[t], h, Wx, Wh, b, linear_before_reset=lbr)[1]
        assert_close(hs[t], h, F64_TOL, f"h[{t}]")



def test_gru_time_loop_float32_saturated_gates(lbr, two_biases):
    """float32 gates use cells' own exp (include/cells/common.h). With weights of scale 2 the
    pre-activations span about ±15, saturating many gates: values and gradients still match the
    float64 reference to the float32 tolerances."""
    rng = np.random.default_rng(2702)
    x, hI, Wx, Wh, b, dLdh, dLdhLast = round32(
        make_seq_problem(rng, 6, 4, 13, 10, two_biases, scale=2.0))
    fwd_tol, grad_tol = _tols(np.float32)
    h_ref, gates_ref = gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, return_workspace=True)
    assert_close(h, h_ref, fwd_tol, "h", np.float32)
    assert_close(ws.gates, gates_ref, fwd_tol, "gates", np.float32)
    assert np.mean(1 - np.abs(2 * gates_ref[..., :20] - 1) < 1e-4) > 0.05  # r, u near 0 or 1
    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, lbr)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws,
                                linear_before_reset=lbr)
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, grad_tol, name, np.float32)


def test_float32_activations_over_the_whole_range():
    """σ and tanh in float32, on pre-activations that are exact in float32 (x = 1, hI = 0, so
    z = Wx's entries), from 0 to far past where e^z overflows: within 3e-7 of the float64 values
    everywhere (cells' exp has about 1 ulp of relative error), and finite."""
    z = np.concatenate([np.linspace(-100, 100, 801), [-1e30, -1e4, -88.7, -87.5, 88.5, 89.0, 1e4,
                                                      1e30, 0.0, 1e-30]]).astype(np.float32)
    n = z.size
    x = np.ones((1, 1), np.float32)
    Wx = np.concatenate([z, z[::-1], z])[None, :]
    zero_h = np.zeros((1, n), np.float32)
    gates, _ = cells.gruCell(x, zero_h, Wx, np.zeros((n, 3 * n), np.float32),
                             np.zeros(3 * n, np.float32))
    z64 = z.astype(np.float64)
    with np.errstate(over="ignore"):
        sigma = 1 / (1 + np.exp(-z64))
    expected = np.concatenate([sigma, sigma[::-1], np.tanh(z64)])
    assert np.all(np.isfinite(gates))
    np.testing.assert_allclose(gates[0], expected, rtol=0, atol=3e-7)
