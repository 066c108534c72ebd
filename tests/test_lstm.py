"""cells' LSTM (lstmLayerCell, lstmLayerCellBp, lstmLayerTimeLoop, lstmLayerTimeLoopBp) against
the finite-difference-proven reference (lstm_reference.py), and its own contracts: workspace,
sequence masks, threads, memory layouts, empty dimensions."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS,
    SAME_GRAD_TOL, SAME_TOL, assert_close, assert_new_arrays, central_diff_grad,
)
from lstm_reference import (
    lstm_cell_backward, lstm_cell_forward, lstm_time_loop_backward, lstm_time_loop_forward,
    make_lstm_problem, pick_cell_clip,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


NAMES7 = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp")
INPUTS = ("x", "Wx", "Wr", "b", "hI", "cI", "Wp")
# (sL, bS, nIn, nOut, seq_len): sL = 1, bS = 1, nIn != nOut both ways, nOut = 1, lengths 0 and sL
# and in between, and a case where two threads split the units (nOut = 24).
SHAPES = [
    (1, 3, 4, 2, None),
    (4, 1, 2, 5, None),
    (3, 2, 6, 3, [3, 0]),
    (5, 3, 2, 1, [5, 2, 0]),
    (5, 4, 3, 4, [1, 5, 0, 3]),
    (7, 5, 13, 24, [7, 0, 3, 7, 1]),
]


def _problem(seed, sL, bS, n_in, n_out, peepholes=True, dtype=np.float64, scale=0.5):
    p = make_lstm_problem(np.random.default_rng(seed), sL, bS, n_in, n_out, peepholes, scale)
    return {k: None if v is None else np.asarray(v, dtype) for k, v in p.items()}


def _tols(dtype, seq=True):
    if dtype == np.float64:
        return F64_TOL, F64_TOL
    return F32_FWD_TOL, (F32_SEQ_GRAD_TOL if seq else F32_CELL_GRAD_TOL)


def _args(p):
    return tuple(p[n] for n in ("x", "Wx", "Wr", "b", "hI", "cI"))


def _ref_forward(p, seq_len=None, cell_clip=0.0, forward=True, cache=False):
    return lstm_time_loop_forward(*_args(p), p["Wp"], seq_len, cell_clip, forward, cache)


def _ref_backward(p, seq_len=None, cell_clip=0.0, forward=True, dLdh=True, dLdhL=True,
                  dLdcL=True):
    return lstm_time_loop_backward(*_args(p), p["dLdh"] if dLdh else None,
                                   p["dLdhL"] if dLdhL else None, p["dLdcL"] if dLdcL else None,
                                   p["Wp"], seq_len, cell_clip, forward)


def _bp(p, **kw):
    kw.setdefault("dLdhL", p["dLdhL"])
    kw.setdefault("dLdcL", p["dLdcL"])
    kw.setdefault("Wp", p["Wp"])
    return cells.lstmLayerTimeLoopBp(*_args(p), kw.pop("dLdh", p["dLdh"]), **kw)


def _assert_grads(grads, ref, tol, dtype, p, suffix=""):
    assert len(grads) == 7
    for name, g, r in zip(NAMES7, grads, ref):
        if (name == "dLdb" and p["b"] is None) or (name == "dLdWp" and p["Wp"] is None):
            assert g is None, name
        else:
            assert_close(g, r, tol, name + suffix, dtype)


# ---------------------------------------------------------------------------------------------
# the time loop against the reference
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("clipping", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "peep"])
@pytest.mark.parametrize("sL,bS,n_in,n_out,seq_len", SHAPES)
def test_time_loop_vs_reference(dtype, peepholes, clipping, forward, sL, bS, n_in, n_out,
                                seq_len):
    p = _problem(8000 + 97 * sL + 31 * bS + 7 * n_in + n_out, sL, bS, n_in, n_out, peepholes,
                 dtype)
    lengths = None if seq_len is None else np.array(seq_len)
    clip = pick_cell_clip(p, lengths, forward) if clipping else 0.0
    fwd_tol, grad_tol = _tols(dtype)
    opts = dict(Wp=p["Wp"], seq_len=lengths, cell_clip=clip, forward=forward)
    out = cells.lstmLayerTimeLoop(*_args(p), **opts)
    ref = _ref_forward(p, lengths, clip, forward)
    assert isinstance(out, tuple) and len(out) == 3
    for name, a, r in zip(("h", "hL", "cL"), out, ref):
        assert_close(a, r, fwd_tol, name, dtype)
    grads = _bp(p, **opts)
    _assert_grads(grads, _ref_backward(p, lengths, clip, forward), grad_tol, dtype, p)
    arrays = [a for a in p.values() if a is not None]
    assert_new_arrays(list(out) + [g for g in grads if g is not None], arrays)


@pytest.mark.parametrize("peepholes,clipping,forward,seq_len", [
    (False, False, True, None),
    (True, False, False, [3, 1]),
    (True, True, True, [2, 3]),
    (True, True, False, None),
    (False, True, False, [3, 0]),
])
def test_time_loop_gradients_vs_finite_differences_of_cells(peepholes, clipping, forward,
                                                             seq_len):
    p = _problem(8100, 3, 2, 3, 2, peepholes)
    lengths = None if seq_len is None else np.array(seq_len)
    clip = pick_cell_clip(p, lengths, forward) if clipping else 0.0
    opts = dict(seq_len=lengths, cell_clip=clip, forward=forward, n_threads=1)
    names = [n for n in INPUTS if p[n] is not None]

    def loss(*arrays):
        a = dict(p, **dict(zip(names, arrays)))
        h, hL, cL = cells.lstmLayerTimeLoop(*_args(a), Wp=a["Wp"], **opts)
        return float(np.sum(p["dLdh"] * h) + np.sum(p["dLdhL"] * hL) + np.sum(p["dLdcL"] * cL))

    fd = central_diff_grad(loss, [p[n] for n in names], FD_EPS)
    grads = _bp(p, **opts)
    for name, f in zip(names, fd):
        g = grads[INPUTS.index(name)]
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


# ---------------------------------------------------------------------------------------------
# the cell
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("clipping", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "peep"])
@pytest.mark.parametrize("bS,n_in,n_out", [(3, 4, 5), (1, 6, 2), (4, 2, 3), (2, 5, 24)])
def test_cell_vs_reference(dtype, peepholes, clipping, bS, n_in, n_out):
    p = _problem(8200 + bS + n_in + n_out, 1, bS, n_in, n_out, peepholes, dtype)
    clip = pick_cell_clip(p) if clipping else 0.0
    fwd_tol, grad_tol = _tols(dtype, seq=False)
    x, Wx, Wr, b, hI, cI = _args(p)
    x, dLdh = x[0], p["dLdh"][0]
    h, c = cells.lstmLayerCell(x, Wx, Wr, b, hI, cI, Wp=p["Wp"], cell_clip=clip)
    h_ref, c_ref = lstm_cell_forward(x, Wx, Wr, b, hI, cI, p["Wp"], clip)
    assert_close(h, h_ref, fwd_tol, "h", dtype)
    assert_close(c, c_ref, fwd_tol, "c", dtype)
    if clipping:
        assert np.any(np.abs(c_ref) == clip)
    grads = cells.lstmLayerCellBp(x, Wx, Wr, b, hI, cI, dLdh, p["dLdcL"], Wp=p["Wp"],
                                  cell_clip=clip)
    ref = lstm_cell_backward(x, Wx, Wr, b, hI, cI, dLdh, p["dLdcL"], p["Wp"], clip)
    _assert_grads(grads, ref, grad_tol, dtype, p)
    assert_new_arrays([h, c] + [g for g in grads if g is not None],
                      [a for a in p.values() if a is not None])


@pytest.mark.parametrize("peepholes,clipping", [(False, False), (True, True)])
def test_cell_gradients_vs_finite_differences_of_cells(peepholes, clipping):
    p = _problem(8300, 1, 3, 2, 4, peepholes)
    clip = pick_cell_clip(p) if clipping else 0.0
    x, dLdh, dLdc = p["x"][0], p["dLdh"][0], p["dLdcL"]
    cell = dict(p, x=x)
    names = [n for n in INPUTS if p[n] is not None]

    def loss(*arrays):
        a = dict(cell, **dict(zip(names, arrays)))
        h, c = cells.lstmLayerCell(*_args(a), Wp=a["Wp"], cell_clip=clip, n_threads=1)
        return float(np.sum(dLdh * h) + np.sum(dLdc * c))

    fd = central_diff_grad(loss, [cell[n] for n in names], FD_EPS)
    grads = cells.lstmLayerCellBp(*_args(cell), dLdh, dLdc, Wp=p["Wp"], cell_clip=clip)
    for name, f in zip(names, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(grads[INPUTS.index(name)], f, FD_TOL, name, np.float64)


def test_cell_is_the_time_loop_with_one_step(dtype):
    p = _problem(8350, 1, 3, 4, 5, True, dtype)
    clip = pick_cell_clip(p)
    h, c = cells.lstmLayerCell(p["x"][0], *_args(p)[1:], Wp=p["Wp"], cell_clip=clip)
    hs, hL, cL = cells.lstmLayerTimeLoop(*_args(p), Wp=p["Wp"], cell_clip=clip)
    assert_close(h, hs[0], 0.0, "h", dtype)
    assert_close(c, cL, 0.0, "c", dtype)
    g = cells.lstmLayerCellBp(p["x"][0], *_args(p)[1:], p["dLdh"][0], p["dLdcL"], Wp=p["Wp"],
                              cell_clip=clip)
    gs = _bp(p, dLdhL=None, cell_clip=clip)
    for name, a, s in zip(NAMES7, g, gs):
        assert_close(a, s[0] if name == "dLdx" else s, 0.0, name, dtype)


def test_time_loop_step_by_step_equals_cells_cell(dtype):
    """Without masks, the sequence is the composition of cells' own cell."""
    p = _problem(8360, 4, 3, 2, 5, True, dtype)
    hs, hL, cL = cells.lstmLayerTimeLoop(*_args(p), Wp=p["Wp"], cell_clip=0.9)
    h, c = p["hI"], p["cI"]
    for t in range(4):
        h, c = cells.lstmLayerCell(p["x"][t], p["Wx"], p["Wr"], p["b"], h, c, Wp=p["Wp"],
                                   cell_clip=0.9)
        assert_close(hs[t], h, SAME_TOL[dtype], f"h[{t}]", dtype)
    assert_close(hL, h, SAME_TOL[dtype], "hL", dtype)
    assert_close(cL, c, SAME_TOL[dtype], "cL", dtype)


# ---------------------------------------------------------------------------------------------
# optional arguments
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop", ["b", "hI", "cI", "Wp", "all"])
def test_optional_arrays_are_zeros(dtype, drop):
    """b, hI, cI, Wp = None behave as zeros; dLdb / dLdWp are None exactly when b / Wp are."""
    p = _problem(8400, 3, 2, 3, 4, True, dtype)
    dropped = ("b", "hI", "cI", "Wp") if drop == "all" else (drop,)
    zeros = dict(p, **{n: np.zeros_like(p[n]) for n in dropped})
    nones = dict(p, **{n: None for n in dropped})
    out_z = cells.lstmLayerTimeLoop(*_args(zeros), Wp=zeros["Wp"])
    out_n = cells.lstmLayerTimeLoop(*_args(nones), Wp=nones["Wp"])
    for name, a, z in zip(("h", "hL", "cL"), out_n, out_z):
        assert_close(a, z, 0.0, name, dtype)
    g_z = _bp(zeros)
    g_n = _bp(nones)
    for name, a, z in zip(NAMES7, g_n, g_z):
        if (name == "dLdb" and "b" in dropped) or (name == "dLdWp" and "Wp" in dropped):
            assert a is None
        else:
            assert_close(a, z, 0.0, name, dtype)
    _assert_grads(g_n, _ref_backward(nones), _tols(dtype)[1], dtype, nones)
    h, c = cells.lstmLayerCell(p["x"][0], *_args(nones)[1:], Wp=nones["Wp"])
    assert_close(h, lstm_cell_forward(p["x"][0], *_args(nones)[1:], nones["Wp"])[0],
                 _tols(dtype)[0], "h", dtype)


@pytest.mark.parametrize("give", ["dLdh", "dLdhL", "dLdcL", "none"])
def test_time_loop_none_upstream_gradients(dtype, give):
    p = _problem(8500, 3, 2, 3, 4, True, dtype)
    lengths = np.array([3, 1])
    kw = {k: (p[k] if k == give else None) for k in ("dLdh", "dLdhL", "dLdcL")}
    grads = _bp(p, seq_len=lengths, **kw)
    ref = _ref_backward(p, lengths, **{k: v is not None for k, v in kw.items()})
    _assert_grads(grads, ref, _tols(dtype)[1], dtype, p)
    if give == "none":
        for g in grads:
            assert np.all(g == 0)
    zeros = {k: np.zeros_like(p[k]) if v is None else v for k, v in kw.items()}
    for name, g, z in zip(NAMES7, grads, _bp(p, seq_len=lengths, **zeros)):
        assert_close(g, z, 0.0, name, dtype)
    # the cell: dLdh and dLdc may each be None
    x = p["x"][0]
    for dh, dc in ((p["dLdhL"], None), (None, p["dLdcL"]), (None, None)):
        g = cells.lstmLayerCellBp(x, *_args(p)[1:], dh, dc, Wp=p["Wp"])
        r = lstm_cell_backward(x, *_args(p)[1:], dh, dc, p["Wp"])
        _assert_grads(g, r, _tols(dtype, seq=False)[1], dtype, p)


# ---------------------------------------------------------------------------------------------
# sequences: seq_len and direction
# ---------------------------------------------------------------------------------------------
def test_seq_len_semantics(dtype):
    sL, bS, H = 4, 4, 3
    p = _problem(8600, sL, bS, 2, H, True, dtype)
    lengths = np.array([0, 4, 2, 1])
    for forward in (True, False):
        opts = dict(Wp=p["Wp"], forward=forward, cell_clip=1.1)
        h, hL, cL = cells.lstmLayerTimeLoop(*_args(p), seq_len=lengths, **opts)
        # padded outputs are 0; a length-0 row keeps its initial state
        for r, n in enumerate(lengths):
            assert np.all(h[n:, r] == 0)
        assert_close(hL[0], p["hI"][0], 0.0, "hL[0]", dtype)
        assert_close(cL[0], p["cI"][0], 0.0, "cL[0]", dtype)
        # each row is the unmasked run on its own valid steps (reversed for forward=False)
        for r, n in enumerate(lengths[1:], start=1):
            xr = p["x"][:n, r:r + 1]
            hr, hLr, cLr = cells.lstmLayerTimeLoop(
                xr if forward else xr[::-1], p["Wx"], p["Wr"], p["b"], p["hI"][r:r + 1],
                p["cI"][r:r + 1], **dict(opts, forward=True))
            assert_close(h[:n, r], (hr if forward else hr[::-1])[:, 0], SAME_TOL[dtype], "h",
                         dtype)
            assert_close(hL[r], hLr[0], SAME_TOL[dtype], "hL", dtype)
            assert_close(cL[r], cLr[0], SAME_TOL[dtype], "cL", dtype)
        # seq_len = sL everywhere is no mask at all
        full = cells.lstmLayerTimeLoop(*_args(p), seq_len=np.full(bS, sL, np.int32), **opts)
        none = cells.lstmLayerTimeLoop(*_args(p), **opts)
        for a, b in zip(full, none):
            assert_close(a, b, 0.0, "full", dtype)
        # nothing flows through padded steps: their upstream gradient is ignored, and a
        # length-0 row passes its final-state gradients straight to the initial state
        g = _bp(p, seq_len=lengths, **opts)
        noisy = p["dLdh"].copy()
        for r, n in enumerate(lengths):
            noisy[n:, r] = np.nan
        for name, a, b in zip(NAMES7, _bp(p, seq_len=lengths, dLdh=noisy, **opts), g):
            assert_close(a, b, 0.0, name, dtype)
        assert_close(g[4][0], p["dLdhL"][0], 0.0, "dLdhI[0]", dtype)
        assert_close(g[5][0], p["dLdcL"][0], 0.0, "dLdcI[0]", dtype)
        assert np.all(g[0][:, 0] == 0)


def test_reverse_is_forward_on_reversed_time(dtype):
    p = _problem(8650, 5, 3, 4, 3, True, dtype)
    opts = dict(Wp=p["Wp"], cell_clip=1.0)
    h, hL, cL = cells.lstmLayerTimeLoop(*_args(p), forward=False, **opts)
    rev = dict(p, x=p["x"][::-1], dLdh=p["dLdh"][::-1])
    hr, hLr, cLr = cells.lstmLayerTimeLoop(*_args(rev), **opts)
    assert_close(h, hr[::-1], SAME_TOL[dtype], "h", dtype)
    assert_close(hL, hLr, SAME_TOL[dtype], "hL", dtype)
    assert_close(cL, cLr, SAME_TOL[dtype], "cL", dtype)
    g = _bp(p, forward=False, **opts)
    gr = _bp(rev, **opts)
    for name, a, b in zip(NAMES7, g, gr):
        assert_close(a, b[::-1] if name == "dLdx" else b, SAME_GRAD_TOL[dtype], name, dtype)


# ---------------------------------------------------------------------------------------------
# workspace
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("sL,bS,n_in,seq_len", [(4, 3, 5, [4, 0, 2]), (4, 3, 5, None),
                                                (0, 3, 5, [0, 0, 0]), (3, 0, 2, None)])
def test_workspace_layout_and_use(dtype, forward, sL, bS, n_in, seq_len):
    """LstmWorkspace(h, c, gates, m, seq_len, forward, cell_clip, peepholes, projected,
    activations): h the returned outputs, c the (clipped) cell states, gates (i, f, g, o), all
    tau-indexed with zeros at padded steps; the backward from it equals the one that recomputes
    the forward."""
    H = 6
    p = _problem(8700 + sL, sL, bS, n_in, H, True, dtype)
    lengths = None if seq_len is None else np.array(seq_len)
    opts = dict(Wp=p["Wp"], seq_len=lengths, cell_clip=0.8, forward=forward)
    out = cells.lstmLayerTimeLoop(*_args(p), return_workspace=True, **opts)
    assert isinstance(out, tuple) and len(out) == 4
    h, hL, cL, ws = out
    assert isinstance(ws, cells.LstmWorkspace)
    assert ws._fields == ("h", "c", "gates", "m", "seq_len", "forward", "cell_clip",
                          "peepholes", "projected", "activations")
    assert ws.m is None and ws.projected is False
    np.testing.assert_array_equal(ws.h, h)
    plain = cells.lstmLayerTimeLoop(*_args(p), **opts)
    for a, b in zip((h, hL, cL), plain):
        assert_close(a, b, 0.0, "same", dtype)
    fwd_tol, grad_tol = _tols(dtype)
    _, _, _, k = _ref_forward(p, lengths, 0.8, forward, cache=True)
    assert ws.c.shape == (sL, bS, H) and ws.c.dtype == dtype
    assert ws.gates.shape == (sL, bS, 4 * H) and ws.gates.dtype == dtype
    assert_close(ws.c, k["c"], fwd_tol, "ws.c", dtype)
    assert_close(ws.gates, k["gates"], fwd_tol, "ws.gates", dtype)
    assert (ws.forward, ws.cell_clip, ws.peepholes) == (forward, 0.8, True)
    g0 = _bp(p, **opts)
    g1 = _bp(p, workspace=ws, **opts)
    for name, a, b in zip(NAMES7, g1, g0):
        assert_close(a, b, 0.0, name, dtype)
    _assert_grads(g1, _ref_backward(p, lengths, 0.8, forward), grad_tol, dtype, p, "(ws)")


def test_workspace_is_used(dtype):
    p = _problem(8750, 4, 3, 5, 6, True, dtype)
    g0 = _bp(p)
    other = dict(p, x=p["x"][::-1].copy())
    *_, ws_other = cells.lstmLayerTimeLoop(*_args(other), Wp=p["Wp"], return_workspace=True)
    g2 = _bp(p, workspace=ws_other)
    assert np.max(np.abs(g2[1].astype(float) - g0[1].astype(float))) > 1e-4


def test_workspace_mismatch_is_value_error(dtype):
    p = _problem(8800, 3, 2, 3, 4, True, dtype)
    base = dict(Wp=p["Wp"], seq_len=np.array([3, 1]), cell_clip=0.5, forward=True)
    *_, ws = cells.lstmLayerTimeLoop(*_args(p), return_workspace=True, **base)
    _bp(p, workspace=ws, **base)  # the matching configuration works
    for change in (dict(seq_len=None), dict(seq_len=np.array([3, 2])), dict(forward=False),
                   dict(cell_clip=0.0), dict(cell_clip=0.6), dict(Wp=None)):
        with pytest.raises(ValueError, match="workspace"):
            _bp(p, workspace=ws, **dict(base, **change))
    # a workspace of other shapes (longer sequence, other batch, other nOut)
    for sL, bS, H in ((4, 2, 4), (3, 3, 4), (3, 2, 5)):
        q = _problem(8801, sL, bS, 3, H, True, dtype)
        *_, wq = cells.lstmLayerTimeLoop(*_args(q), Wp=q["Wp"], return_workspace=True)
        with pytest.raises(ValueError, match="workspace"):
            _bp(p, workspace=wq, Wp=p["Wp"])
    with pytest.raises(TypeError, match="workspace"):
        _bp(p, workspace=tuple(ws), **base)
    other = np.float32 if dtype == np.float64 else np.float64
    ws_other = ws._replace(c=ws.c.astype(other))
    with pytest.raises(TypeError, match="workspace"):
        _bp(p, workspace=ws_other, **base)


# ---------------------------------------------------------------------------------------------
# layouts, threads, empty dimensions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_noncontiguous_and_readonly_inputs(layout, dtype):
    p = _problem(8900, 3, 2, 4, 3, True, dtype)
    opts = dict(seq_len=np.array([3, 2]), cell_clip=0.7, forward=False)
    out0 = cells.lstmLayerTimeLoop(*_args(p), Wp=p["Wp"], **opts)
    g0 = _bp(p, **opts)
    f = LAYOUTS[layout]
    q = {k: f(v) for k, v in p.items()}
    if layout != "readonly":
        assert not all(a.flags.c_contiguous for a in q.values() if a.ndim > 1)
    copies = {k: v.copy() for k, v in q.items()}
    out1 = cells.lstmLayerTimeLoop(*_args(q), Wp=q["Wp"], **dict(opts, seq_len=f(opts["seq_len"])))
    for a, b in zip(out1, out0):
        assert_close(a, b, SAME_TOL[dtype], "out", dtype)
    *_, ws = cells.lstmLayerTimeLoop(*_args(q), Wp=q["Wp"], return_workspace=True, **opts)
    for use_ws in (None, ws):
        g1 = _bp(q, workspace=use_ws, **opts)
        for name, a, b in zip(NAMES7, g1, g0):
            assert_close(a, b, SAME_GRAD_TOL[dtype], name, dtype)
    x = q["x"][0]
    h, c = cells.lstmLayerCell(x, *_args(q)[1:], Wp=q["Wp"])
    assert_close(h, lstm_cell_forward(p["x"][0], *_args(p)[1:], p["Wp"])[0], _tols(dtype)[0],
                 "h", dtype)
    cells.lstmLayerCellBp(x, *_args(q)[1:], q["dLdhL"], q["dLdcL"], Wp=q["Wp"])
    for k, v in q.items():
        np.testing.assert_array_equal(v, copies[k])


@pytest.mark.parametrize("n_out", [24, 37])
def test_threads_agree(dtype, n_out):
    p = _problem(9000 + n_out, 7, 5, 13, n_out, True, dtype)
    lengths = np.array([7, 0, 3, 7, 1])
    res = {}
    for nt in (1, 2):
        for forward in (True, False):
            opts = dict(Wp=p["Wp"], seq_len=lengths, cell_clip=1.2, forward=forward, n_threads=nt)
            h, hL, cL, ws = cells.lstmLayerTimeLoop(*_args(p), return_workspace=True, **opts)
            g = _bp(p, **opts)
            gw = _bp(p, workspace=ws, **opts)
            res[nt, forward] = (h, hL, cL, ws.c, ws.gates) + tuple(g) + tuple(gw)
    fwd_tol, grad_tol = _tols(dtype)
    for forward in (True, False):
        for k, (a, b) in enumerate(zip(res[2, forward], res[1, forward])):
            assert_close(a, b, (SAME_TOL if k < 5 else SAME_GRAD_TOL)[dtype], f"output {k}", dtype)
        _assert_grads(res[2, forward][5:12], _ref_backward(p, lengths, 1.2, forward), grad_tol,
                      dtype, p)
        assert_close(res[2, forward][0], _ref_forward(p, lengths, 1.2, forward)[0], fwd_tol, "h",
                     dtype)


@pytest.mark.parametrize("sL,bS,n_in", [(0, 3, 4), (3, 0, 4), (3, 2, 0), (0, 0, 0)])
def test_empty_dims(dtype, sL, bS, n_in):
    H = 3
    p = _problem(9100, sL, bS, n_in, H, True, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    for lengths in (None, np.zeros(bS, np.int64)):
        opts = dict(Wp=p["Wp"], seq_len=lengths, cell_clip=0.5)
        h, hL, cL, ws = cells.lstmLayerTimeLoop(*_args(p), return_workspace=True, **opts)
        assert h.shape == (sL, bS, H) and h.dtype == dtype
        assert hL.shape == cL.shape == (bS, H)
        for a, r in zip((h, hL, cL), _ref_forward(p, lengths, 0.5)):
            assert_close(a, r, fwd_tol, "out", dtype)
        ref = _ref_backward(p, lengths, 0.5)
        for use_ws in (None, ws):
            grads = _bp(p, workspace=use_ws, **opts)
            _assert_grads(grads, ref, grad_tol, dtype, p)
            if sL == 0 or bS == 0 or lengths is not None:
                # nothing runs: the final-state gradients pass straight to the initial state
                assert_close(grads[4], p["dLdhL"], 0.0, "dLdhI", dtype)
                assert_close(grads[5], p["dLdcL"], 0.0, "dLdcI", dtype)
                for g in grads[:4] + grads[6:]:
                    assert np.all(g == 0)
        grads = _bp(p, dLdh=None, dLdhL=None, dLdcL=None, **opts)
        assert grads[0].shape == (sL, bS, n_in)
        for g in grads:
            assert np.all(g == 0)
    h, c = cells.lstmLayerCell(np.zeros((bS, n_in), dtype), *_args(p)[1:], Wp=p["Wp"])
    assert h.shape == c.shape == (bS, H)


def test_zero_units(dtype):
    """nOut = 0: every result has its (empty) shape."""
    p = _problem(9150, 3, 2, 4, 0, True, dtype)
    h, hL, cL = cells.lstmLayerTimeLoop(*_args(p), Wp=p["Wp"])
    assert h.shape == (3, 2, 0) and hL.shape == cL.shape == (2, 0)
    grads = _bp(p)
    assert [g.shape for g in grads] == [(3, 2, 4), (4, 0), (0, 0), (0,), (2, 0), (2, 0), (0,)]
    assert np.all(grads[0] == 0)


def test_float32_saturated_gates():
    """With weights of scale 2 the pre-activations span about ±15 and many gates saturate:
    values and gradients still match the float64 reference to the float32 tolerances."""
    p = _problem(9200, 6, 4, 13, 10, True, np.float32, scale=2.0)
    lengths = np.array([6, 3, 0, 5])
    fwd_tol, grad_tol = _tols(np.float32)
    out = cells.lstmLayerTimeLoop(*_args(p), Wp=p["Wp"], seq_len=lengths, cell_clip=2.5)
    _, _, _, k = ref = _ref_forward(p, lengths, 2.5, cache=True)
    for name, a, r in zip(("h", "hL", "cL"), out, ref):
        assert_close(a, r, fwd_tol, name, np.float32)
    g = k["gates"][:, :, :20]
    assert np.mean(np.abs(2 * g[g != 0] - 1) > 1 - 1e-4) > 0.05  # i, f near 0 or 1
    _assert_grads(_bp(p, seq_len=lengths, cell_clip=2.5), _ref_backward(p, lengths, 2.5),
                  grad_tol, np.float32, p)


# ---------------------------------------------------------------------------------------------
# activations other than the default (the op's tests, tests/test_lstm_layer_op.py, check every
# code against a reference; these check the helpers' own contracts with them)
# ---------------------------------------------------------------------------------------------
# hard sigmoid gates (the workspace keeps their pre-activations), a scaled tanh candidate (also),
# a softsign output (computed from c)
ACTS = dict(gate_act=7, cell_act=6, cell_alpha=1.5, cell_beta=0.7, out_act=9)


def test_activations_workspace_cell_and_options(dtype):
    p = _problem(9300, 4, 3, 2, 3, True, dtype)
    lengths = np.array([4, 0, 2])
    opts = dict(Wp=p["Wp"], seq_len=lengths, cell_clip=0.8, **ACTS)
    h, hL, cL, ws = cells.lstmLayerTimeLoop(*_args(p), return_workspace=True, **opts)
    assert ws.activations == ((7, 0.0, 0.0), (6, 1.5, 0.7), (9, 0.0, 0.0))
    # the gates keep the pre-activations of hard sigmoid and scaled tanh: at the first step,
    # x·Wx + hI·Wr + b (+ the peepholes of i, f on cI)
    H = 3
    z = p["x"][0] @ p["Wx"] + p["hI"] @ p["Wr"] + p["b"]
    z[:, :2 * H] += p["Wp"][:2 * H] * np.tile(p["cI"], 2)
    rows = [0, 2]  # the rows that run
    assert_close(ws.gates[0, rows, :3 * H], z[rows, :3 * H], SAME_TOL[dtype], "gates", dtype)
    ref = _bp(p, **opts)
    for name, a, b in zip(NAMES7, _bp(p, workspace=ws, **opts), ref):
        assert_close(a, b, SAME_GRAD_TOL[dtype], name, dtype)
    with pytest.raises(ValueError, match="workspace: it was made with activations="):
        _bp(p, workspace=cells.lstmLayerTimeLoop(*_args(p), return_workspace=True,
                                                 **opts).workspace,
            **dict(opts, out_act=0))
    # the cell is the time loop's first step
    hc, cc = cells.lstmLayerCell(p["x"][0], *_args(p)[1:], Wp=p["Wp"], cell_clip=0.8, **ACTS)
    one = cells.lstmLayerTimeLoop(p["x"][:1], *_args(p)[1:], Wp=p["Wp"], cell_clip=0.8, **ACTS)
    assert_close(hc, one.h[0], SAME_TOL[dtype], "h", dtype)
    assert_close(cc, one.cL, SAME_TOL[dtype], "c", dtype)
    cg = cells.lstmLayerCellBp(p["x"][0], *_args(p)[1:], p["dLdh"][0], p["dLdcL"], Wp=p["Wp"],
                               cell_clip=0.8, **ACTS)
    tg = cells.lstmLayerTimeLoopBp(p["x"][:1], *_args(p)[1:], p["dLdh"][:1], dLdcL=p["dLdcL"],
                                   Wp=p["Wp"], cell_clip=0.8, **ACTS)
    for name, a, b in zip(NAMES7, cg, tg):
        assert_close(a, b[0] if name == "dLdx" else b, SAME_GRAD_TOL[dtype], name, dtype)
