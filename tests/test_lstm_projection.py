"""The LSTM's projection (lstmLayerTimeLoop's Wproj, PyTorch's proj_size): h = (o∘tanh(c))·Wproj,
whose nProj columns are the state that enters the next step.

The reference (lstm_reference.py with Wproj) is proven against central finite differences
first; cells' time loop is then checked against it, against finite differences of itself and
against torch.nn.LSTM(proj_size=...), whose implementation is independent of both."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, FD_EPS, FD_TOL, SAME_GRAD_TOL, SAME_TOL,
    assert_close, central_diff_grad,
)
from lstm_reference import (
    lstm_time_loop_backward, lstm_time_loop_forward, make_lstm_problem, pick_cell_clip,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


INPUTS = ("x", "Wx", "Wr", "b", "hI", "cI", "Wp", "Wproj")
NAMES = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp", "dLdWproj")
# (sL, bS, nIn, nOut, nProj, seq_len): nProj below and above nOut, sL = 1, lengths 0 and sL and
# in between. With 2 threads, nOut = 24 splits the units as [0, 8) and [8, 24) and nProj = 9
# the state columns as [0, 8) and [8, 9); nProj = 5 gives one thread no state column at all.
SHAPES = [
    (1, 3, 4, 3, 2, None),
    (4, 2, 3, 5, 2, [4, 1]),
    (5, 4, 3, 3, 4, [2, 5, 0, 3]),
    (6, 5, 7, 24, 9, [6, 0, 3, 6, 1]),
    (4, 3, 5, 24, 5, None),
]


def _problem(seed, sL, bS, n_in, n_out, n_proj, peepholes=True, dtype=np.float64):
    p = make_lstm_problem(np.random.default_rng(seed), sL, bS, n_in, n_out, peepholes,
                          n_proj=n_proj)
    return {k: None if v is None else np.asarray(v, dtype) for k, v in p.items()}


def _tols(dtype):
    """(forward, gradient) tolerances: the projection adds one product of nOut <= 40 terms per
    step to the LSTM's, within the bounds gru_reference.py derives for a sequence."""
    if dtype == np.float64:
        return F64_TOL, F64_TOL
    return F32_FWD_TOL, F32_SEQ_GRAD_TOL


def _loop_args(p):
    return tuple(p[n] for n in ("x", "Wx", "Wr", "b", "hI", "cI"))


def _cells_forward(p, **kw):
    return cells.lstmLayerTimeLoop(*_loop_args(p), Wp=p["Wp"], Wproj=p["Wproj"], **kw)


def _cells_backward(p, **kw):
    return cells.lstmLayerTimeLoopBp(*_loop_args(p), p["dLdh"], dLdhL=p["dLdhL"],
                                     dLdcL=p["dLdcL"], Wp=p["Wp"], Wproj=p["Wproj"], **kw)


def _ref_forward(p, seq_len, clip, forward, cache=False):
    return lstm_time_loop_forward(*_loop_args(p), p["Wp"], seq_len, clip, forward, cache,
                                  Wproj=p["Wproj"])


def _ref_backward(p, seq_len, clip, forward):
    return lstm_time_loop_backward(*_loop_args(p), p["dLdh"], p["dLdhL"], p["dLdcL"], p["Wp"],
                                   seq_len, clip, forward, Wproj=p["Wproj"])


def _loss(p, outputs):
    """The scalar whose gradients the backward passes compute: Σ dLdh·h + dLdhL·hL + dLdcL·cL."""
    h, hL, cL = outputs
    return float(np.sum(p["dLdh"] * h) + np.sum(p["dLdhL"] * hL) + np.sum(p["dLdcL"] * cL))


def _finite_differences(p, forward_of):
    """Central differences of _loss(forward_of(inputs)) w.r.t. every input that is given."""
    names = [n for n in INPUTS if p[n] is not None]

    def loss(*arrays):
        return _loss(p, forward_of(dict(p, **dict(zip(names, arrays)))))

    return dict(zip(names, central_diff_grad(loss, [p[n] for n in names], FD_EPS)))


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("clipping", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("sL,bS,n_in,n_out,n_proj,seq_len", SHAPES[:3])
def test_reference_vs_finite_differences(forward, clipping, sL, bS, n_in, n_out, n_proj,
                                         seq_len):
    p = _problem(6100 + sL * 10 + n_proj, sL, bS, n_in, n_out, n_proj)
    clip = pick_cell_clip(p, seq_len, forward) if clipping else 0.0
    fd = _finite_differences(p, lambda a: _ref_forward(a, seq_len, clip, forward))
    ana = dict(zip(INPUTS, _ref_backward(p, seq_len, clip, forward)))
    for name, f in fd.items():
        assert np.max(np.abs(f)) > 1e-3, f"{name}: degenerate test (gradient ~0)"
        assert_close(ana[name], f, FD_TOL, name)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("peepholes,clipping", [(False, False), (True, True)],
                         ids=["plain", "peep+clip"])
@pytest.mark.parametrize("sL,bS,n_in,n_out,n_proj,seq_len", SHAPES)
def test_time_loop_vs_reference(dtype, n_threads, forward, peepholes, clipping, sL, bS, n_in,
                                n_out, n_proj, seq_len):
    p = _problem(6200 + sL * 10 + n_proj, sL, bS, n_in, n_out, n_proj, peepholes, dtype)
    lengths = None if seq_len is None else np.array(seq_len)
    clip = pick_cell_clip(p, seq_len, forward) if clipping else 0.0
    opts = dict(seq_len=lengths, cell_clip=clip, forward=forward, n_threads=n_threads)
    fwd_tol, grad_tol = _tols(dtype)
    out = _cells_forward(p, **opts)
    for name, a, r in zip(("h", "hL", "cL"), out, _ref_forward(p, seq_len, clip, forward)):
        assert_close(a, r, fwd_tol, name, dtype)
    grads = _cells_backward(p, **opts)
    assert isinstance(grads, cells.LstmGradsWithProjection)
    for name, g, r in zip(NAMES, grads, _ref_backward(p, seq_len, clip, forward)):
        if name == "dLdWp" and not peepholes:
            assert g is None
        else:
            assert_close(g, r, grad_tol, name, dtype)


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
def test_time_loop_vs_finite_differences_of_cells(forward):
    """cells' own forward, differentiated numerically, against cells' backward (float64, both
    threads splitting the units and the state columns differently)."""
    sL, bS, n_in, n_out, n_proj, seq_len = 4, 3, 3, 16, 9, [4, 0, 2]
    p = _problem(6300, sL, bS, n_in, n_out, n_proj)
    opts = dict(seq_len=np.array(seq_len), forward=forward, n_threads=2)
    fd = _finite_differences(p, lambda a: _cells_forward(a, **opts))
    grads = dict(zip(INPUTS, _cells_backward(p, **opts)))
    for name, f in fd.items():
        assert_close(grads[name], f, FD_TOL, name)


def test_threads_agree():
    """1 and 2 threads (which split the units and the state columns differently) give the same
    float64 results up to summation order. (In float32 the last bits of the panel products
    differ with a thread's width and grow through the recurrence like any rounding: there both
    thread counts are held to the float64 reference in test_time_loop_vs_reference.)"""
    dtype = np.dtype(np.float64)
    p = _problem(6400, 5, 4, 6, 40, 17, True, dtype)
    opts = dict(seq_len=np.array([5, 2, 0, 4]), forward=False)
    one = _cells_forward(p, n_threads=1, **opts), _cells_backward(p, n_threads=1, **opts)
    two = _cells_forward(p, n_threads=2, **opts), _cells_backward(p, n_threads=2, **opts)
    for a, b in zip(one[0], two[0]):
        assert_close(a, b, SAME_TOL[dtype], "forward", dtype)
    for name, a, b in zip(NAMES, one[1], two[1]):
        assert_close(a, b, SAME_GRAD_TOL[dtype], name, dtype)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_matches_torch_lstm_with_proj_size(bidirectional):
    """torch.nn.LSTM(proj_size=P), float64, with its weights mapped to cells' layout:
    Wx = weight_ihᵀ, Wr = weight_hhᵀ [P, 4H], b = bias_ih + bias_hh, Wproj = weight_hrᵀ [H, P];
    the reverse direction of a bidirectional layer is cells' forward=False."""
    torch = pytest.importorskip("torch")
    sL, bS, n_in, H, P = 5, 3, 4, 6, 3
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(n_in, H, proj_size=P, bidirectional=bidirectional).double()
    rng = np.random.default_rng(6500)
    D = 2 if bidirectional else 1
    x = rng.normal(size=(sL, bS, n_in))
    h0, c0 = rng.uniform(-0.9, 0.9, (D, bS, P)), rng.uniform(-1.5, 1.5, (D, bS, H))
    dLdy, dLdhN, dLdcN = (rng.normal(size=s) for s in ((sL, bS, D * P), (D, bS, P), (D, bS, H)))
    tx, th0, tc0 = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    y, (hN, cN) = lstm(tx, (th0, tc0))
    (y * torch.tensor(dLdy)).sum().add((hN * torch.tensor(dLdhN)).sum()).add(
        (cN * torch.tensor(dLdcN)).sum()).backward()

    dLdx = np.zeros_like(x)
    for d, suffix in enumerate(["", "_reverse"][:D]):
        def weight(name):
            return getattr(lstm, name + suffix).detach().numpy()

        Wx, Wr, Wproj = weight("weight_ih_l0").T, weight("weight_hh_l0").T, weight("weight_hr_l0").T
        b = weight("bias_ih_l0") + weight("bias_hh_l0")
        opts = dict(Wproj=Wproj, forward=d == 0)
        h, hL, cL = cells.lstmLayerTimeLoop(x, Wx, Wr, b, h0[d], c0[d], **opts)
        assert_close(h, y.detach().numpy()[..., d * P:(d + 1) * P], F64_TOL, f"h{suffix}")
        assert_close(hL, hN.detach().numpy()[d], F64_TOL, f"hL{suffix}")
        assert_close(cL, cN.detach().numpy()[d], F64_TOL, f"cL{suffix}")
        g = cells.lstmLayerTimeLoopBp(x, Wx, Wr, b, h0[d], c0[d], dLdy[..., d * P:(d + 1) * P],
                                      dLdhL=dLdhN[d], dLdcL=dLdcN[d], **opts)
        dLdx += g.dLdx
        for name, cells_grad, torch_name in ((
                "dLdWx", g.dLdWx.T, "weight_ih_l0"), ("dLdWr", g.dLdWr.T, "weight_hh_l0"),
                ("dLdWproj", g.dLdWproj.T, "weight_hr_l0"), ("dLdb", g.dLdb, "bias_ih_l0"),
                ("dLdb", g.dLdb, "bias_hh_l0")):
            torch_grad = getattr(lstm, torch_name + suffix).grad.numpy()
            assert_close(cells_grad, torch_grad, F64_TOL, f"{name}{suffix}")
        assert_close(g.dLdhI, th0.grad.numpy()[d], F64_TOL, f"dLdhI{suffix}")
        assert_close(g.dLdcI, tc0.grad.numpy()[d], F64_TOL, f"dLdcI{suffix}")
    assert_close(dLdx, tx.grad.numpy(), F64_TOL, "dLdx")


def test_workspace(dtype):
    """The workspace keeps m = o∘tanh(c) (0 at padded steps); the backward from it equals the
    one that recomputes the forward; a workspace of the other kind is refused."""
    p = _problem(6600, 4, 3, 5, 6, 4, True, dtype)
    opts = dict(seq_len=np.array([4, 0, 2]), forward=False)
    h, hL, cL, ws = _cells_forward(p, return_workspace=True, **opts)
    assert ws.projected and ws.m.shape == (4, 3, 6) and ws.h.shape == (4, 3, 4)
    o = ws.gates[..., 18:]
    assert_close(ws.m, o * np.tanh(ws.c), SAME_TOL[dtype], "m", dtype)
    assert_close(ws.h, np.einsum("tbh,hp->tbp", ws.m, p["Wproj"]), SAME_TOL[dtype], "h", dtype)
    recomputed = _cells_backward(p, **opts)
    for name, a, b in zip(NAMES, _cells_backward(p, workspace=ws, **opts), recomputed):
        assert_close(a, b, 0.0, name, dtype)

    # A workspace made without the projection (nOut = 6 without Wproj), and the other way round.
    plain_ws = cells.lstmLayerTimeLoop(p["x"], p["Wx"], np.zeros((6, 24), dtype), p["b"], None,
                                       p["cI"], Wp=p["Wp"], return_workspace=True,
                                       **opts).workspace
    with pytest.raises(ValueError, match="projected=False"):
        _cells_backward(p, workspace=plain_ws, **opts)
    _, _, _, ws = _cells_forward(p, return_workspace=True, **opts)
    with pytest.raises(ValueError, match="projected=True"):
        cells.lstmLayerTimeLoopBp(p["x"], p["Wx"], np.zeros((6, 24), dtype), p["b"], None,
                                  p["cI"], None, Wp=p["Wp"], workspace=ws, **opts)


def test_bad_input_names_the_argument():
    p = _problem(6700, 3, 2, 4, 5, 3)
    args = _loop_args(p)
    x, Wx, Wr, b, hI, cI = args
    with pytest.raises(ValueError, match=r"Wproj: expected a 2-d array \[nOut, nProj\]"):
        cells.lstmLayerTimeLoop(*args, Wproj=p["Wproj"].ravel())
    with pytest.raises(ValueError, match=r"Wr: expected shape \(3, 20\).*nProj"):
        cells.lstmLayerTimeLoop(x, Wx, np.zeros((5, 20)), b, hI, cI, Wproj=p["Wproj"])
    with pytest.raises(ValueError, match=r"hI: expected shape \(2, 3\).*nProj"):
        cells.lstmLayerTimeLoop(x, Wx, Wr, b, np.zeros((2, 5)), cI, Wproj=p["Wproj"])
    with pytest.raises(ValueError, match=r"cI: expected shape \(2, 5\)"):
        cells.lstmLayerTimeLoop(x, Wx, Wr, b, hI, np.zeros((2, 3)), Wproj=p["Wproj"])
    with pytest.raises(TypeError, match="Wproj"):
        cells.lstmLayerTimeLoop(*args, Wproj=p["Wproj"].astype(np.float32))
    with pytest.raises(ValueError, match=r"dLdh: expected shape \(3, 2, 3\).*nProj"):
        cells.lstmLayerTimeLoopBp(*args, np.zeros((3, 2, 5)), Wproj=p["Wproj"])
    with pytest.raises(ValueError, match=r"dLdhL: expected shape \(2, 3\).*nProj"):
        cells.lstmLayerTimeLoopBp(*args, None, dLdhL=np.zeros((2, 5)), Wproj=p["Wproj"])
    with pytest.raises(ValueError, match=r"dLdcL: expected shape \(2, 5\)"):
        cells.lstmLayerTimeLoopBp(*args, None, dLdcL=np.zeros((2, 3)), Wproj=p["Wproj"])


@pytest.mark.parametrize("sL,bS", [(0, 3), (3, 0)])
def test_empty_dims(dtype, sL, bS):
    p = _problem(6800, sL, bS, 4, 5, 3, True, dtype)
    h, hL, cL = _cells_forward(p, seq_len=None)
    assert (h.shape, hL.shape, cL.shape) == ((sL, bS, 3), (bS, 3), (bS, 5))
    assert_close(hL, p["hI"], 0.0, "hL", dtype)
    grads = _cells_backward(p)
    shapes = [(sL, bS, 4), (4, 20), (3, 20), (20,), (bS, 3), (bS, 5), (15,), (5, 3)]
    assert [g.shape for g in grads] == shapes
    assert all(g.dtype == dtype for g in grads)
    assert_close(grads.dLdhI, p["dLdhL"], 0.0, "dLdhI", dtype)
    for name in ("dLdWx", "dLdWr", "dLdb", "dLdWp", "dLdWproj"):
        assert_close(getattr(grads, name), np.zeros(getattr(grads, name).shape), 0.0, name,
                     dtype)


def test_projection_with_other_activations_vs_finite_differences_of_cells():
    """The projection composes with libnd4j's activations (the step's output m is
    o∘outAct(c) whatever the codes): cells' backward against central differences of its own
    forward, smooth activations (softsign gates, softplus candidate, scaled tanh output)."""
    p = _problem(6900, 4, 3, 3, 16, 5)
    opts = dict(seq_len=np.array([4, 0, 3]), forward=False, n_threads=2, gate_act=9,
                cell_act=10, out_act=6, out_alpha=1.5, out_beta=0.7)
    fd = _finite_differences(p, lambda a: _cells_forward(a, **opts))
    grads = dict(zip(INPUTS, _cells_backward(p, **opts)))
    for name, f in fd.items():
        assert_close(grads[name], f, FD_TOL, name)
