"""cells against other frameworks' GRUs (skipped cleanly where a framework is not installed).

Mapping (docs/guide/weights.md): PyTorch gate order r, z, n = cells' (r, u, c), always
linear-before-reset, weight_ih = Wx.T, weight_hh = Wh.T, bias_ih = b[0], bias_hh = b[1].
ONNX gate order z, r, h: W = Wx[:, perm].T with perm = (u block, r block, c block).
"""
import numpy as np
import pytest

import cells
from gru_reference import F32_FWD_TOL, F64_TOL, assert_close, make_seq_problem

# torch's float64 CPU GRU evaluates the same formulas in float64: agreement to ~1e-16 was
# measured, so the float64 cells-vs-reference tolerance applies.
TORCH_TOL = F64_TOL


def _torch_params(torch, module, Wx, Wh, b, suffix=""):
    with torch.no_grad():
        getattr(module, "weight_ih" + suffix).copy_(torch.from_numpy(Wx.T.copy()))
        getattr(module, "weight_hh" + suffix).copy_(torch.from_numpy(Wh.T.copy()))
        getattr(module, "bias_ih" + suffix).copy_(torch.from_numpy(b[0].copy()))
        getattr(module, "bias_hh" + suffix).copy_(torch.from_numpy(b[1].copy()))
    return [getattr(module, n + suffix) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


@pytest.mark.parametrize("bS,n_in,H", [(3, 4, 5), (1, 6, 2), (4, 2, 3)])
def test_torch_gru_cell(bS, n_in, H):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4000 + bS + n_in + H)
    x, hI, Wx, Wh, b, dLdh, _ = make_seq_problem(rng, 1, bS, n_in, H, True)
    x, dLdh = x[0], dLdh[0]
    cell = torch.nn.GRUCell(n_in, H, bias=True, dtype=torch.float64)
    params = _torch_params(torch, cell, Wx, Wh, b)
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI.copy()).requires_grad_(True)
    out = cell(tx, th)
    (out * torch.from_numpy(dLdh)).sum().backward()

    gates, h = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=True)
    assert_close(h, out.detach().numpy(), TORCH_TOL, "h")
    dx, dhI, dWx, dWh, db = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=True)
    assert_close(dx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(dhI, th.grad.numpy(), TORCH_TOL, "dLdhI")
    assert_close(dWx, params[0].grad.numpy().T, TORCH_TOL, "dLdWx")
    assert_close(dWh, params[1].grad.numpy().T, TORCH_TOL, "dLdWh")
    assert_close(db[0], params[2].grad.numpy(), TORCH_TOL, "dLdb[0]")
    assert_close(db[1], params[3].grad.numpy(), TORCH_TOL, "dLdb[1]")


@pytest.mark.parametrize("sL,bS,n_in,H", [(5, 3, 4, 6), (1, 2, 3, 2), (7, 1, 13, 24)])
@pytest.mark.parametrize("use_ws", [False, True])
def test_torch_gru_sequence(sL, bS, n_in, H, use_ws):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4100 + sL + bS + n_in + H)
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_seq_problem(rng, sL, bS, n_in, H, True)
    gru = torch.nn.GRU(n_in, H, num_layers=1, bias=True, batch_first=False, dtype=torch.float64)
    params = _torch_params(torch, gru, Wx, Wh, b, suffix="_l0")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(hI[None].copy()).requires_grad_(True)
    out, hn = gru(tx, th)
    loss = (out * torch.from_numpy(dLdh)).sum() + (hn[0] * torch.from_numpy(dLdhLast)).sum()
    loss.backward()

    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=True, return_workspace=True)
    assert_close(h, out.detach().numpy(), TORCH_TOL, "h")
    assert_close(h[-1], hn.detach().numpy()[0], TORCH_TOL, "h_last")
    kw = {"workspace": ws} if use_ws else {}
    dx, dhI, dWx, dWh, db = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                                linear_before_reset=True, **kw)
    assert_close(dx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(dhI, th.grad.numpy()[0], TORCH_TOL, "dLdhI")
    assert_close(dWx, params[0].grad.numpy().T, TORCH_TOL, "dLdWx")
    assert_close(dWh, params[1].grad.numpy().T, TORCH_TOL, "dLdWh")
    assert_close(db[0], params[2].grad.numpy(), TORCH_TOL, "dLdb[0]")
    assert_close(db[1], params[3].grad.numpy(), TORCH_TOL, "dLdb[1]")


# ---------------------------------------------------------------------------------------------
# ONNX
# ---------------------------------------------------------------------------------------------
def _onnx_perm(H):
    """Column indices that reorder cells' (r, u, c) blocks into ONNX's (z, r, h) = (u, r, c)."""
    return np.concatenate([np.arange(H, 2 * H), np.arange(0, H), np.arange(2 * H, 3 * H)])


def _build(lbr, sL, bS, n_in, H, dtype, direction="forward", with_lens=False):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    et = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    node = helper.make_node(
        "GRU", inputs=["X", "W", "R", "B", "sequence_lens" if with_lens else "", "initial_h"],
        outputs=["Y", "Y_h"], hidden_size=H, direction=direction, layout=0,
        linear_before_reset=int(lbr))
    lens = [helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [bS])]
    graph = helper.make_graph(
        [node], "gru",
        [helper.make_tensor_value_info("X", et, [sL, bS, n_in]),
         helper.make_tensor_value_info("W", et, [1, 3 * H, n_in]),
         helper.make_tensor_value_info("R", et, [1, 3 * H, H]),
         helper.make_tensor_value_info("B", et, [1, 6 * H])]
        + (lens if with_lens else [])
        + [helper.make_tensor_value_info("initial_h", et, [1, bS, H])],
        [helper.make_tensor_value_info("Y", et, [sL, 1, bS, H]),
         helper.make_tensor_value_info("Y_h", et, [1, bS, H])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _onnx_feeds(x, hI, Wx, Wh, b, dtype):
    H = hI.shape[1]
    p = _onnx_perm(H)
    return {
        "X": x.astype(dtype),
        "W": Wx[:, p].T[None].astype(dtype),
        "R": Wh[:, p].T[None].astype(dtype),
        "B": np.concatenate([b[0][p], b[1][p]])[None].astype(dtype),
        "initial_h": hI[None].astype(dtype),
    }


ONNX_SHAPES = [(5, 3, 4, 6), (1, 1, 3, 2), (4, 2, 7, 3)]


@pytest.mark.parametrize("sL,bS,n_in,H", ONNX_SHAPES)
@pytest.mark.parametrize("lbr", [False, True], ids=["lbr0", "lbr1"])
def test_onnxruntime_gru_float32(lbr, sL, bS, n_in, H):
    """ORT has no float64 GRU: float32 on both sides, from the same float32 values. Both sides
    err by a few float32 ulps per step relative to exact arithmetic, so 1e-5 (as for float32
    cells vs the float64 reference) bounds their difference."""
    ort = pytest.importorskip("onnxruntime")
    model = _build(lbr, sL, bS, n_in, H, np.float32)
    rng = np.random.default_rng(4200 + sL + bS + n_in + H + int(lbr))
    x, hI, Wx, Wh, b, _, _ = (a.astype(np.float32) for a in
                              make_seq_problem(rng, sL, bS, n_in, H, True))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    Y, Y_h = sess.run(None, _onnx_feeds(x, hI, Wx, Wh, b, np.float32))
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    assert Y.shape == (sL, 1, bS, H)
    assert_close(h, Y[:, 0], F32_FWD_TOL, "Y", np.float32)
    assert_close(h[-1], Y_h[0], F32_FWD_TOL, "Y_h", np.float32)
    # the comparison discriminates the variants
    h_other = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=not lbr)
    assert np.max(np.abs(h_other - Y[:, 0])) > 1e-3


@pytest.mark.parametrize("sL,bS,n_in,H", ONNX_SHAPES)
@pytest.mark.parametrize("lbr", [False, True], ids=["lbr0", "lbr1"])
def test_onnx_reference_gru_float64(lbr, sL, bS, n_in, H):
    """onnx.reference evaluates the ONNX GRU spec in float64 (measured ~2e-16 vs the math in
    docs/guide/families.md): an independent float64 check of both variants' forward."""
    pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator
    model = _build(lbr, sL, bS, n_in, H, np.float64)
    rng = np.random.default_rng(4300 + sL + bS + n_in + H + int(lbr))
    x, hI, Wx, Wh, b, _, _ = make_seq_problem(rng, sL, bS, n_in, H, True)
    Y, Y_h = ReferenceEvaluator(model).run(None, _onnx_feeds(x, hI, Wx, Wh, b, np.float64))
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    assert_close(h, Y[:, 0], F64_TOL, "Y", np.float64)
    assert_close(h[-1], Y_h[0], F64_TOL, "Y_h", np.float64)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("lbr", [False, True], ids=["lbr0", "lbr1"])
def test_onnxruntime_gru_sequence_lens(lbr, direction):
    """ONNX GRU with sequence_lens and direction against cells' seq_len and forward (float32,
    tolerance as above). ONNX Runtime returns Y_h = 0 for a row of length 0 where cells returns
    the initial state (docs/guide/onnx.md): Y_h is compared on the other rows."""
    ort = pytest.importorskip("onnxruntime")
    sL, H, n_in = 6, 5, 4
    lengths = np.array([6, 0, 3, 1, 5], dtype=np.int32)
    bS = lengths.size
    model = _build(lbr, sL, bS, n_in, H, np.float32, direction, with_lens=True)
    rng = np.random.default_rng(4400 + int(lbr) + 2 * (direction == "reverse"))
    x, hI, Wx, Wh, b, _, _ = (a.astype(np.float32) for a in
                              make_seq_problem(rng, sL, bS, n_in, H, True))
    feeds = _onnx_feeds(x, hI, Wx, Wh, b, np.float32)
    feeds["sequence_lens"] = lengths
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    Y, Y_h = sess.run(None, feeds)
    forward = direction == "forward"
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=lengths,
                          forward=forward)
    assert_close(h, Y[:, 0], F32_FWD_TOL, "Y", np.float32)
    rows = np.flatnonzero(lengths)
    last = np.where(forward, lengths - 1, 0)[rows]
    assert_close(h[last, rows], Y_h[0, rows], F32_FWD_TOL, "Y_h", np.float32)


@pytest.mark.parametrize("use_ws", [False, True])
def test_torch_bidirectional_packed_gru(use_ws):
    """torch.nn.GRU(bidirectional=True) on a packed batch of different lengths (torch rejects
    length 0): its forward half is cells with seq_len, its reverse half cells with seq_len and
    forward=False (weights *_l0_reverse). Outputs, final states and every autograd gradient,
    float64."""
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    sL, n_in, H = 6, 4, 5
    lengths = np.array([6, 2, 4, 1])
    bS = lengths.size
    rng = np.random.default_rng(4500)
    fwd_problem = make_seq_problem(rng, sL, bS, n_in, H, True)
    x, hI_f, Wx_f, Wh_f, b_f, dLdh_f, dLdhLast_f = fwd_problem
    _, hI_r, Wx_r, Wh_r, b_r, dLdh_r, dLdhLast_r = make_seq_problem(rng, sL, bS, n_in, H, True)
    for row, length in enumerate(lengths):  # gradients at padded outputs go nowhere in torch
        dLdh_f[length:, row] = 0
        dLdh_r[length:, row] = 0

    gru = torch.nn.GRU(n_in, H, bidirectional=True, dtype=torch.float64)
    params_f = _torch_params(torch, gru, Wx_f, Wh_f, b_f, suffix="_l0")
    params_r = _torch_params(torch, gru, Wx_r, Wh_r, b_r, suffix="_l0_reverse")
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    th = torch.from_numpy(np.stack([hI_f, hI_r])).requires_grad_(True)
    packed = pack_padded_sequence(tx, torch.from_numpy(lengths), enforce_sorted=False)
    out_packed, hn = gru(packed, th)
    out, _ = pad_packed_sequence(out_packed, total_length=sL)
    loss = ((out * torch.from_numpy(np.concatenate([dLdh_f, dLdh_r], axis=2))).sum()
            + (hn * torch.from_numpy(np.stack([dLdhLast_f, dLdhLast_r]))).sum())
    loss.backward()

    dx_total = np.zeros_like(x)
    for half, forward, hI, Wx, Wh, b, dLdh, dLdhLast, params in (
            (0, True, hI_f, Wx_f, Wh_f, b_f, dLdh_f, dLdhLast_f, params_f),
            (1, False, hI_r, Wx_r, Wh_r, b_r, dLdh_r, dLdhLast_r, params_r)):
        h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=True, seq_len=lengths,
                                  forward=forward, return_workspace=True)
        assert_close(h, out.detach().numpy()[..., half * H:(half + 1) * H], TORCH_TOL, "h")
        last = lengths - 1 if forward else np.zeros_like(lengths)
        assert_close(h[last, np.arange(bS)], hn.detach().numpy()[half], TORCH_TOL, "h_last")
        dx, dhI, dWx, dWh, db = cells.gruTimeLoopBp(
            x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=True,
            seq_len=lengths, forward=forward, workspace=ws if use_ws else None)
        assert_close(dhI, th.grad.numpy()[half], TORCH_TOL, "dLdhI")
        assert_close(dWx, params[0].grad.numpy().T, TORCH_TOL, "dLdWx")
        assert_close(dWh, params[1].grad.numpy().T, TORCH_TOL, "dLdWh")
        assert_close(db[0], params[2].grad.numpy(), TORCH_TOL, "dLdb[0]")
        assert_close(db[1], params[3].grad.numpy(), TORCH_TOL, "dLdb[1]")
        dx_total = dx_total + dx  # x feeds both directions
    assert_close(dx_total, tx.grad.numpy(), TORCH_TOL, "dLdx")
