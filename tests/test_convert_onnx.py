"""cells.convert's ONNX converters against ONNX Runtime: single-node GRU / LSTM / RNN models
(opset 14, float32, ORT has no float64 RNNs) whose weights are initializers in ONNX's layout.

from_onnx: random ONNX weights of a bidirectional node; each direction, converted, runs in cells
(direction 1 with forward=False) and must give the node's Y and Y_h (Y_c). to_onnx: random
cells weights of two models, converted and stacked along the direction axis, must give a
bidirectional node the outputs of the two cells models.

Tolerance: both sides compute in float32 from the same float32 values and err by a few ulps per
step relative to exact arithmetic; F32_FWD_TOL = 1e-5 bounds their difference (as in
test_cross_frameworks.py).
"""
import numpy as np
import pytest

import cells
from cells import convert
from gru_reference import F32_FWD_TOL, assert_close

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SHAPES = [(5, 3, 4, 6), (3, 2, 7, 2)]  # sL, bS, nIn, nOut (nIn != nOut)
F32 = np.float32


def _run(op, inits, x, states, H, **attributes):
    """Run a single-node ONNX `op` ("GRU", "LSTM", "RNN") with the initializers `inits` (W, R, B
    and for an LSTM possibly P, float32 [dirs, ...]) on x [sL, bS, nIn] and the initial states
    (initial_h, and initial_c for an LSTM, [dirs, bS, H]); return its outputs; `attributes`
    are the node's (an RNN's activations, ...)."""
    sL, bS, n_in = x.shape
    dirs = inits["W"].shape[0]
    state_names = ["initial_h", "initial_c"][:len(states)]
    inputs = ["X", "W", "R", "B", ""] + state_names + (["P"] if "P" in inits else [])
    outputs = ["Y", "Y_h", "Y_c"][:1 + len(states)]
    node = helper.make_node(op, inputs, outputs, hidden_size=H, layout=0,
                            direction="bidirectional" if dirs == 2 else "forward", **attributes)
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node], op.lower(),
        [info("X", TensorProto.FLOAT, [sL, bS, n_in])]
        + [info(n, TensorProto.FLOAT, [dirs, bS, H]) for n in state_names],
        [info("Y", TensorProto.FLOAT, [sL, dirs, bS, H])]
        + [info(n, TensorProto.FLOAT, [dirs, bS, H]) for n in outputs[1:]],
        initializer=[numpy_helper.from_array(a, name) for name, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = dict(zip(["X"] + state_names, (x,) + tuple(states)))
    return session.run(None, feeds)


def _normal(rng, *shape):
    return rng.normal(0.0, 0.5, shape).astype(F32)


@pytest.mark.parametrize("sL,bS,n_in,H", SHAPES)
@pytest.mark.parametrize("lbr", [False, True], ids=["lbr0", "lbr1"])
def test_gru_from_onnx_matches_onnxruntime(lbr, sL, bS, n_in, H):
    rng = np.random.default_rng(7000 + sL + H + int(lbr))
    inits = {"W": _normal(rng, 2, 3 * H, n_in), "R": _normal(rng, 2, 3 * H, H),
             "B": _normal(rng, 2, 6 * H)}
    x, h0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H)
    Y, Y_h = _run("GRU", inits, x, [h0], H, linear_before_reset=int(lbr))
    for d in (0, 1):
        Wx, Wh, b = convert.gru_from_onnx(inits["W"], inits["R"], inits["B"], direction=d)
        assert b.shape == (2, 3 * H) and Wx.dtype == F32
        h = cells.gruTimeLoop(x, h0[d], Wx, Wh, b, linear_before_reset=lbr, forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)
        assert_close(h[-1] if d == 0 else h[0], Y_h[d], F32_FWD_TOL, f"Y_h[{d}]", F32)


@pytest.mark.parametrize("lbr", [False, True], ids=["lbr0", "lbr1"])
@pytest.mark.parametrize("two_rows", [False, True], ids=["b1", "b2"])
def test_gru_to_onnx_matches_onnxruntime(lbr, two_rows):
    sL, bS, n_in, H = 4, 3, 5, 3
    rng = np.random.default_rng(7100 + 2 * lbr + two_rows)
    models = [(_normal(rng, n_in, 3 * H), _normal(rng, H, 3 * H),
               _normal(rng, *((2, 3 * H) if two_rows else (3 * H,)))) for _ in range(2)]
    x, h0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H)
    W, R, B = (np.concatenate(parts) for parts in zip(*(convert.gru_to_onnx(*m) for m in models)))
    Y, Y_h = _run("GRU", {"W": W, "R": R, "B": B}, x, [h0], H, linear_before_reset=int(lbr))
    for d, (Wx, Wh, b) in enumerate(models):
        h = cells.gruTimeLoop(x, h0[d], Wx, Wh, b, linear_before_reset=lbr, forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)


@pytest.mark.parametrize("sL,bS,n_in,H", SHAPES)
@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "P"])
def test_lstm_from_onnx_matches_onnxruntime(peepholes, sL, bS, n_in, H):
    rng = np.random.default_rng(7200 + sL + H + int(peepholes))
    inits = {"W": _normal(rng, 2, 4 * H, n_in), "R": _normal(rng, 2, 4 * H, H),
             "B": _normal(rng, 2, 8 * H)}
    if peepholes:
        inits["P"] = _normal(rng, 2, 3 * H)
    x, h0, c0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H), _normal(rng, 2, bS, H)
    Y, Y_h, Y_c = _run("LSTM", inits, x, [h0, c0], H)
    for d in (0, 1):
        Wx, Wr, b, Wp = convert.lstm_from_onnx(inits["W"], inits["R"], inits["B"],
                                               inits.get("P"), direction=d)
        assert (Wp is None) == (not peepholes)
        h, hL, cL = cells.lstmLayerTimeLoop(x, Wx, Wr, b, h0[d], c0[d], Wp=Wp, forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)
        assert_close(hL, Y_h[d], F32_FWD_TOL, f"Y_h[{d}]", F32)
        assert_close(cL, Y_c[d], F32_FWD_TOL, f"Y_c[{d}]", F32)


@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "P"])
def test_lstm_to_onnx_matches_onnxruntime(peepholes):
    sL, bS, n_in, H = 4, 3, 5, 3
    rng = np.random.default_rng(7300 + peepholes)
    models = [(_normal(rng, n_in, 4 * H), _normal(rng, H, 4 * H), _normal(rng, 4 * H),
               _normal(rng, 3 * H) if peepholes else None) for _ in range(2)]
    x, h0, c0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H), _normal(rng, 2, bS, H)
    converted = [convert.lstm_to_onnx(*m) for m in models]
    inits = {name: np.concatenate([c[k] for c in converted])
             for k, name in enumerate(("W", "R", "B", "P")[:4 if peepholes else 3])}
    Y, Y_h, Y_c = _run("LSTM", inits, x, [h0, c0], H)
    for d, (Wx, Wr, b, Wp) in enumerate(models):
        h, hL, cL = cells.lstmLayerTimeLoop(x, Wx, Wr, b, h0[d], c0[d], Wp=Wp, forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)
        assert_close(cL, Y_c[d], F32_FWD_TOL, f"Y_c[{d}]", F32)


# A bidirectional RNN node's activations (one per direction) and cells' for each direction.
RNN_ACTIVATIONS = {"tanh": ["Tanh", "Tanh"], "relu": ["Relu", "Relu"],
                   "tanh_relu": ["Tanh", "Relu"]}


@pytest.mark.parametrize("sL,bS,n_in,H", SHAPES)
@pytest.mark.parametrize("activations", list(RNN_ACTIVATIONS))
def test_rnn_from_onnx_matches_onnxruntime(activations, sL, bS, n_in, H):
    rng = np.random.default_rng(7400 + sL + H + len(activations))
    inits = {"W": _normal(rng, 2, H, n_in), "R": _normal(rng, 2, H, H), "B": _normal(rng, 2, 2 * H)}
    x, h0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H)
    names = RNN_ACTIVATIONS[activations]
    Y, Y_h = _run("RNN", inits, x, [h0], H, activations=names)
    for d in (0, 1):
        Wx, Wh, b = convert.rnn_from_onnx(inits["W"], inits["R"], inits["B"], direction=d)
        assert b.shape == (2, H) and Wx.dtype == F32
        h = cells.rnnTimeLoop(x, h0[d], Wx, Wh, b, activation=names[d].lower(), forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)
        assert_close(h[-1] if d == 0 else h[0], Y_h[d], F32_FWD_TOL, f"Y_h[{d}]", F32)


@pytest.mark.parametrize("two_rows", [False, True], ids=["b1", "b2"])
def test_rnn_to_onnx_matches_onnxruntime(two_rows):
    sL, bS, n_in, H = 4, 3, 5, 3
    rng = np.random.default_rng(7500 + two_rows)
    models = [(_normal(rng, n_in, H), _normal(rng, H, H),
               _normal(rng, *((2, H) if two_rows else (H,)))) for _ in range(2)]
    x, h0 = _normal(rng, sL, bS, n_in), _normal(rng, 2, bS, H)
    W, R, B = (np.concatenate(parts) for parts in zip(*(convert.rnn_to_onnx(*m) for m in models)))
    names = RNN_ACTIVATIONS["tanh_relu"]
    Y, Y_h = _run("RNN", {"W": W, "R": R, "B": B}, x, [h0], H, activations=names)
    for d, (Wx, Wh, b) in enumerate(models):
        h = cells.rnnTimeLoop(x, h0[d], Wx, Wh, b, activation=names[d].lower(), forward=d == 0)
        assert_close(h, Y[:, d], F32_FWD_TOL, f"Y[:, {d}]", F32)
