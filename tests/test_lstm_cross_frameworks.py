"""cells' LSTM against PyTorch and ONNX Runtime (skipped cleanly where one is not installed).

Mapping (docs/guide/weights.md): PyTorch gate order i, f, g, o = cells', weight_ih = Wx.T,
weight_hh = Wr.T, bias_ih + bias_hh = b (b goes into bias_ih, zeros into bias_hh; both get the
gradient dL/db); no peepholes, no clipping. ONNX gate order i, o, f, c: W = Wx[:, perm].T,
R = Wr[:, perm].T, B = [b[perm] | 0], peepholes P in order (i, o, f) = Wp's blocks (0, 2, 1).
"""
import numpy as np
import pytest

import cells
from gru_reference import F32_FWD_TOL, F64_TOL, assert_close
from lstm_reference import make_lstm_problem

# torch's float64 CPU LSTM evaluates the same formulas in float64 (agreement ~1e-16 measured),
# so the float64 cells-vs-reference tolerance applies.
TORCH_TOL = F64_TOL


def _torch_params(torch, module, Wx, Wr, b, suffix=""):
    with torch.no_grad():
        getattr(module, "weight_ih" + suffix).copy_(torch.from_numpy(Wx.T.copy()))
        getattr(module, "weight_hh" + suffix).copy_(torch.from_numpy(Wr.T.copy()))
        getattr(module, "bias_ih" + suffix).copy_(torch.from_numpy(b.copy()))
        getattr(module, "bias_hh" + suffix).zero_()
    return [getattr(module, n + suffix) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def _leaf(torch, a):
    return torch.from_numpy(np.ascontiguousarray(a)).requires_grad_(True)


def _compare_torch_grads(grads, tx, th, tc, params):
    dx, dWx, dWr, db, dhI, dcI, dWp = grads
    assert dWp is None
    assert_close(dx, tx.grad.numpy(), TORCH_TOL, "dLdx")
    assert_close(dhI, th.grad.numpy().reshape(dhI.shape), TORCH_TOL, "dLdhI")
    assert_close(dcI, tc.grad.numpy().reshape(dcI.shape), TORCH_TOL, "dLdcI")
    assert_close(dWx, params[0].grad.numpy().T, TORCH_TOL, "dLdWx")
    assert_close(dWr, params[1].grad.numpy().T, TORCH_TOL, "dLdWr")
    assert_close(db, params[2].grad.numpy(), TORCH_TOL, "dLdb (bias_ih)")
    assert_close(db, params[3].grad.numpy(), TORCH_TOL, "dLdb (bias_hh)")


@pytest.mark.parametrize("bS,n_in,H", [(3, 4, 5), (1, 6, 2), (4, 2, 3)])
def test_torch_lstm_cell(bS, n_in, H):
    torch = pytest.importorskip("torch")
    p = make_lstm_problem(np.random.default_rng(9500 + bS + n_in + H), 1, bS, n_in, H, False)
    x, dLdh, dLdc = p["x"][0], p["dLdh"][0], p["dLdcL"]
    cell = torch.nn.LSTMCell(n_in, H, bias=True, dtype=torch.float64)
    params = _torch_params(torch, cell, p["Wx"], p["Wr"], p["b"])
    tx, th, tc = _leaf(torch, x), _leaf(torch, p["hI"]), _leaf(torch, p["cI"])
    h_t, c_t = cell(tx, (th, tc))
    ((h_t * torch.from_numpy(dLdh)).sum() + (c_t * torch.from_numpy(dLdc)).sum()).backward()

    h, c = cells.lstmLayerCell(x, p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"])
    assert_close(h, h_t.detach().numpy(), TORCH_TOL, "h")
    assert_close(c, c_t.detach().numpy(), TORCH_TOL, "c")
    grads = cells.lstmLayerCellBp(x, p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], dLdh, dLdc)
    _compare_torch_grads(grads, tx, th, tc, params)


@pytest.mark.parametrize("sL,bS,n_in,H,lengths", [
    (5, 3, 4, 6, None),
    (1, 2, 3, 2, None),
    (7, 1, 13, 24, None),
    (5, 4, 3, 5, [5, 1, 3, 5]),
    (6, 3, 2, 4, [2, 6, 1]),
])
@pytest.mark.parametrize("use_ws", [False, True])
def test_torch_lstm_sequence(sL, bS, n_in, H, lengths, use_ws):
    """nn.LSTM, and packed sequences (pack_padded_sequence, enforce_sorted=False) for seq_len:
    torch returns the final states of each sequence at its own length and pads outputs with 0."""
    torch = pytest.importorskip("torch")
    p = make_lstm_problem(np.random.default_rng(9600 + sL + bS + n_in + H), sL, bS, n_in, H,
                          False)
    lstm = torch.nn.LSTM(n_in, H, num_layers=1, bias=True, batch_first=False,
                         dtype=torch.float64)
    params = _torch_params(torch, lstm, p["Wx"], p["Wr"], p["b"], suffix="_l0")
    tx, th, tc = _leaf(torch, p["x"]), _leaf(torch, p["hI"][None]), _leaf(torch, p["cI"][None])
    if lengths is None:
        out, (hn, cn) = lstm(tx, (th, tc))
    else:
        packed = torch.nn.utils.rnn.pack_padded_sequence(tx, torch.tensor(lengths),
                                                         enforce_sorted=False)
        out, (hn, cn) = lstm(packed, (th, tc))
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=sL)
    loss = ((out * torch.from_numpy(p["dLdh"])).sum() + (hn[0] * torch.from_numpy(p["dLdhL"])).sum()
            + (cn[0] * torch.from_numpy(p["dLdcL"])).sum())
    loss.backward()

    seq_len = None if lengths is None else np.array(lengths)
    args = (p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"])
    h, hL, cL, ws = cells.lstmLayerTimeLoop(*args, seq_len=seq_len, return_workspace=True)
    assert_close(h, out.detach().numpy(), TORCH_TOL, "h")
    assert_close(hL, hn.detach().numpy()[0], TORCH_TOL, "hL")
    assert_close(cL, cn.detach().numpy()[0], TORCH_TOL, "cL")
    grads = cells.lstmLayerTimeLoopBp(*args, p["dLdh"], dLdhL=p["dLdhL"], dLdcL=p["dLdcL"],
                                      seq_len=seq_len, workspace=ws if use_ws else None)
    _compare_torch_grads(grads, tx, th, tc, params)


# ---------------------------------------------------------------------------------------------
# ONNX Runtime
# ---------------------------------------------------------------------------------------------
def _onnx_perm(H):
    """Column indices that reorder cells' (i, f, g, o) blocks into ONNX's (i, o, f, c)."""
    return np.concatenate([np.arange(0, H), np.arange(3 * H, 4 * H), np.arange(H, 2 * H),
                           np.arange(2 * H, 3 * H)])


def _build(direction, peepholes, sL, bS, n_in, H):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    et = TensorProto.FLOAT
    inputs = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c"]
    infos = [helper.make_tensor_value_info("X", et, [sL, bS, n_in]),
             helper.make_tensor_value_info("W", et, [1, 4 * H, n_in]),
             helper.make_tensor_value_info("R", et, [1, 4 * H, H]),
             helper.make_tensor_value_info("B", et, [1, 8 * H]),
             helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [bS]),
             helper.make_tensor_value_info("initial_h", et, [1, bS, H]),
             helper.make_tensor_value_info("initial_c", et, [1, bS, H])]
    if peepholes:
        inputs.append("P")
        infos.append(helper.make_tensor_value_info("P", et, [1, 3 * H]))
    node = helper.make_node("LSTM", inputs=inputs, outputs=["Y", "Y_h", "Y_c"], hidden_size=H,
                            direction=direction, layout=0)
    graph = helper.make_graph(
        [node], "lstm", infos,
        [helper.make_tensor_value_info("Y", et, [sL, 1, bS, H]),
         helper.make_tensor_value_info("Y_h", et, [1, bS, H]),
         helper.make_tensor_value_info("Y_c", et, [1, bS, H])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _onnx_feeds(p, lengths, peepholes):
    H = p["hI"].shape[1]
    perm = _onnx_perm(H)
    feeds = {
        "X": p["x"],
        "W": p["Wx"][:, perm].T[None],
        "R": p["Wr"][:, perm].T[None],
        "B": np.concatenate([p["b"][perm], np.zeros(4 * H, np.float32)])[None],
        "sequence_lens": lengths.astype(np.int32),
        "initial_h": p["hI"][None],
        "initial_c": p["cI"][None],
    }
    if peepholes:
        wp = p["Wp"]
        feeds["P"] = np.concatenate([wp[:H], wp[2 * H:], wp[H:2 * H]])[None]
    return {k: np.ascontiguousarray(v, dtype=v.dtype) for k, v in feeds.items()}


@pytest.mark.parametrize("sL,bS,n_in,H,lengths", [
    (5, 3, 4, 6, [5, 5, 5]),
    (1, 1, 3, 2, [1]),
    (6, 4, 7, 3, [6, 0, 2, 4]),
    (4, 3, 2, 24, [1, 4, 0]),
])
@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "peep"])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_onnxruntime_lstm_float32(direction, peepholes, sL, bS, n_in, H, lengths):
    """ORT has no float64 LSTM: float32 on both sides, from the same float32 values. Both sides
    err by a few float32 ulps per step relative to exact arithmetic, so 1e-5 (as for float32
    cells vs the float64 reference) bounds their difference. ORT returns Y_h = Y_c = 0 for a row
    of length 0 (not its initial state): those rows are compared on Y only."""
    ort = pytest.importorskip("onnxruntime")
    model = _build(direction, peepholes, sL, bS, n_in, H)
    rng = np.random.default_rng(9700 + sL + bS + n_in + H + 2 * peepholes)
    p = {k: None if v is None else v.astype(np.float32)
         for k, v in make_lstm_problem(rng, sL, bS, n_in, H, peepholes).items()}
    lengths = np.array(lengths)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    Y, Y_h, Y_c = sess.run(None, _onnx_feeds(p, lengths, peepholes))
    h, hL, cL = cells.lstmLayerTimeLoop(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"],
                                        Wp=p["Wp"], seq_len=lengths,
                                        forward=direction == "forward")
    assert Y.shape == (sL, 1, bS, H)
    assert_close(h, Y[:, 0], F32_FWD_TOL, "Y", np.float32)
    ran = lengths > 0
    assert_close(hL[ran], Y_h[0][ran], F32_FWD_TOL, "Y_h", np.float32)
    assert_close(cL[ran], Y_c[0][ran], F32_FWD_TOL, "Y_c", np.float32)
    # the comparison discriminates the direction and the peepholes
    other = cells.lstmLayerTimeLoop(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"],
                                    Wp=None if peepholes else np.ones(3 * H, np.float32),
                                    seq_len=lengths, forward=direction != "forward")
    assert np.max(np.abs(other[0] - Y[:, 0])) > 1e-3
