"""cells.onnx.dynamic_quantize_lstm: ONNX Runtime's com.microsoft.DynamicQuantizeLSTM on int8
prepared nets packed from the given int8 weights and scales.

Against the float LSTM of the dequantized weights in float64 (lstm_reference), to the tolerance
of an activation quantization, and against ONNX Runtime's operator itself (a node of domain
com.microsoft, and a model quantized by its own quantize_dynamic) as closely as ONNX Runtime is
accurate on the machine at hand (see assert_against_ort); against the float64 reference of
cells' documented int8 model with the given q and s_w (lowp_reference),
one step at a time from the same state, to float32 precision; the pack-from-quantized path
against weights="int8" packing (the same panels, the same bits); the reverse direction, layout 1
and rows alone against the forward direction, layout 0 and the whole batch, bit for bit; and
bad inputs as named errors before any kernel runs.
"""
import pickle

import numpy as np
import pytest
from lowp_reference import int8_product_quantized, int8_weights
from lstm_reference import lstm_cell_forward, lstm_time_loop_forward

import cells
from cells import onnx as co
from cells._prepared import prepare_lstm_quantized

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# One step from the same state, the products exact in the reference: what is left is the
# float32 rounding of the gate math, as in test_prepared_lowp.py (its TOL and its reasoning).
STEP_TOL = 4e-6

# Against ONNX Runtime. Both multiply the same int8 weights exactly (int32 sums) and differ only
# in how they quantize the float32 rows they multiply: cells per row to 127 levels (7 bits,
# include/cells/lowp.h), ONNX Runtime per tensor (all of X for the input product, the batch's h
# at each step) to 255. Rounding moves each element of a row by an error e uniform in
# [-s/2, s/2] (variance s²/12), s = the range quantized / its levels, and a tensor's range is at
# least any of its rows', so in column j the product's rounding error, Σ_k w_kj·e_k, has a
# standard deviation of at most ||w_j||₂·s_tensor/√12 with s_tensor = (the tensor's range) /
# levels: rounding_sigma(case, levels) adds the input and the recurrent product's (the worst
# column, h's range 2 at most). The two errors are independent, so cells - ONNX Runtime has at
# most sigma(case) = the two bounds' root sum of squares. That is one step's pre-activation
# error; the gates (slopes <= 1) carry it into c and h, and the forget gate (< 1) damps the
# older steps' ones. The worst case (every rounding error at its largest, aligned) is 10 to 40
# times larger and useless as a test. Measured over 5 seeds of every case below, max |cells -
# ORT| was 0.15 to 1.3 sigma; ORT_SIGMAS = 4 covers the tail of a maximum over a few thousand
# outputs. A wrong mapping (W's gate blocks o and f swapped) moves outputs by 8 to 23 sigma: the
# negative control below.
#
# Against the float LSTM of the dequantized weights q·s in float64 each has one rounding: cells
# is held to ORT_SIGMAS·sigma, ONNX Runtime's own bound is ORT_SIGMAS·rounding_sigma(case, 255).
# ONNX Runtime meets it only where its u8s8 products are exact: on a CPU without AVX512_VNNI
# they run on vpmaddubsw, whose int16 sums of two products of its 8-bit activations saturate,
# and its outputs there were 0.3 to 0.8 from the float LSTM (its error, not a rounding). So
# ONNX Runtime's own error is measured in each test, and cells is compared with ONNX Runtime
# only where that error is within its bound; elsewhere cells must be at least as close to the
# float LSTM as ONNX Runtime is.
CELLS_LEVELS, ORT_LEVELS = 127, 255
ORT_SIGMAS = 4.0

# ONNX's gate blocks (i, o, f, c) -> cells' (i, f, g, o), and peepholes (i, o, f) -> (i, f, o)
GATES_TO_CELLS = (0, 2, 3, 1)
PEEPHOLES_TO_CELLS = (0, 2, 1)


def blocks(a, order, H, axis=-1):
    index = np.concatenate([np.arange(H) + k * H for k in order])
    return np.take(a, index, axis=axis)


def quantize(w_float, per_column):
    """ONNX Runtime's symmetric int8 quantization of ONNX weights w_float [dirs, 4H, K]:
    (q [dirs, K, 4H] int8 (transposed, as DynamicQuantizeLSTM takes them), scale [dirs] or
    [dirs, 4H] float32), q = rint(w / s) in [-127, 127], s = max|w| / 127 per column or per
    direction's tensor."""
    w = np.swapaxes(w_float, 1, 2).astype(np.float32)
    amax = np.abs(w).max(axis=1) if per_column else np.abs(w).max(axis=(1, 2))
    s = (amax / np.float32(127)).astype(np.float32)
    q = np.clip(np.rint(w / (s[:, None, :] if per_column else s[:, None, None])), -127, 127)
    return q.astype(np.int8), s


def make_case(seed, T, bS, I, H, direction, per_column, lengths=False, states=False,
              peepholes=False, bias=True):
    """The inputs of a DynamicQuantizeLSTM call (a dict of its ONNX names)."""
    rng = np.random.default_rng(seed)
    n = 2 if direction == "bidirectional" else 1

    def r(*shape, scale=1.0):
        return (rng.normal(size=shape) * scale).astype(np.float32)

    W, W_scale = quantize(r(n, 4 * H, I, scale=0.3), per_column)
    R, R_scale = quantize(r(n, 4 * H, H, scale=0.3), per_column)
    case = dict(X=r(T, bS, I), W=W, R=R, W_scale=W_scale, R_scale=R_scale,
                W_zero_point=np.zeros(W_scale.shape, np.int8),
                R_zero_point=np.zeros(R_scale.shape, np.int8),
                B=r(n, 8 * H, scale=0.3) if bias else None,
                sequence_lens=(rng.integers(1, T + 1, size=bS).astype(np.int32)
                               if lengths else None),
                initial_h=r(n, bS, H, scale=0.5) if states else None,
                initial_c=r(n, bS, H, scale=0.5) if states else None,
                P=r(n, 3 * H, scale=0.3) if peepholes else None)
    if lengths:
        case["sequence_lens"][0] = T          # one row runs all steps
    return case


INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "W_scale",
          "W_zero_point", "R_scale", "R_zero_point")


def run_ort(case, direction, H):
    """ONNX Runtime's DynamicQuantizeLSTM on `case`: (Y, Y_h, Y_c)."""
    names = [name if case.get(name) is not None else "" for name in INPUTS]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h", "Y_c"],
                            domain="com.microsoft", hidden_size=H, direction=direction)
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(
        case[name].dtype), case[name].shape) for name in INPUTS if name and
        case.get(name) is not None]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
               for name in ("Y", "Y_h", "Y_c")]
    graph = helper.make_graph([node], "dqlstm", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                    helper.make_opsetid("com.microsoft", 1)])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = {name: case[name] for name in INPUTS if case.get(name) is not None}
    return session.run(None, feeds)


def run_cells(case, direction, **options):
    args = [case.get(name) for name in INPUTS]
    return co.dynamic_quantize_lstm(*args, direction=direction, **options)


def dequantized(q, s, d):
    """Direction d's weights q [dirs, K, 4H] as float64 values q·s [K, 4H]."""
    scale = s[d] if s.ndim == 2 else np.full(q.shape[2], s[d])
    return q[d].astype(np.float64) * scale.astype(np.float64)[None, :]


def rounding_sigma(case, levels):
    """The standard deviation bound of one step's pre-activation error from quantizing the rows
    to `levels` levels of their tensor's range (see ORT_SIGMAS): ||w_j||₂·s/√12 for the input
    product (s from all of X's range) and the recurrent one (s from h's range, within (-1, 1),
    or the initial state's), the largest over columns and directions."""
    X = case["X"].astype(np.float64)
    s_x = (max(X.max(), 0) - min(X.min(), 0)) / levels
    hs = [case["initial_h"]] if case.get("initial_h") is not None else []
    s_h = max([2.0] + [np.ptp(np.concatenate([h.ravel(), [0.0]])) for h in hs]) / levels
    dirs = case["W"].shape[0]

    def norm(q, s):
        return max(np.sqrt((dequantized(q, s, d) ** 2).sum(axis=0)).max() for d in range(dirs))
    return (norm(case["W"], case["W_scale"]) * s_x + norm(case["R"], case["R_scale"]) * s_h) \
        / np.sqrt(12)


def sigma(case):
    """The standard deviation bound of cells' pre-activations minus ONNX Runtime's."""
    return np.hypot(rounding_sigma(case, CELLS_LEVELS), rounding_sigma(case, ORT_LEVELS))


def float_reference(case, direction):
    """The float LSTM of the dequantized weights in float64, unquantized x and states, with
    ONNX's semantics (direction, sequence_lens, peepholes, zeros past a row's length):
    (Y [T, dirs, bS, H], Y_h [dirs, bS, H], Y_c [dirs, bS, H])."""
    T, bS = case["X"].shape[:2]
    dirs, H = case["R"].shape[0], case["R"].shape[1]
    Y, Y_h, Y_c = np.zeros((T, dirs, bS, H)), np.zeros((dirs, bS, H)), np.zeros((dirs, bS, H))
    for d in range(dirs):
        Wx = blocks(dequantized(case["W"], case["W_scale"], d), GATES_TO_CELLS, H)
        Wr = blocks(dequantized(case["R"], case["R_scale"], d), GATES_TO_CELLS, H)
        b = None if case.get("B") is None else blocks(
            case["B"][d, :4 * H].astype(np.float64) + case["B"][d, 4 * H:], GATES_TO_CELLS, H)
        Wp = None if case.get("P") is None else blocks(case["P"][d], PEEPHOLES_TO_CELLS, H)
        hI = None if case.get("initial_h") is None else case["initial_h"][d]
        cI = None if case.get("initial_c") is None else case["initial_c"][d]
        Y[:, d], Y_h[d], Y_c[d] = lstm_time_loop_forward(
            case["X"], Wx, Wr, b, hI, cI, Wp, seq_len=case.get("sequence_lens"),
            forward=direction == "forward" or (direction == "bidirectional" and d == 0))
    return Y, Y_h, Y_c


def assert_against_ort(name, got, want, exact, case):
    """cells' outputs `got` within tol = ORT_SIGMAS·sigma(case) of the float LSTM's `exact`.
    Where ONNX Runtime's `want` are within their own bound of `exact` (one rounding to 255
    levels), cells agrees with them within tol; elsewhere (saturated products) cells' largest
    error is at most ONNX Runtime's. The verdict is the case's, over its three outputs, so no
    output near the bound can flip it."""
    tol = ORT_SIGMAS * sigma(case)
    cells_errors = [np.abs(g - e).max() for g, e in zip(got, exact)]
    ort_errors = [np.abs(w - e).max() for w, e in zip(want, exact)]
    ort_accurate = max(ort_errors) <= ORT_SIGMAS * rounding_sigma(case, ORT_LEVELS)
    for label, g, w, cells_error, ort_error in zip(("Y", "Y_h", "Y_c"), got, want,
                                                   cells_errors, ort_errors):
        print(f"{name} {label}: max |cells - float64| = {cells_error:.2e}, "
              f"max |ORT - float64| = {ort_error:.2e}, tolerance {tol:.2e}")
        assert cells_error <= tol, f"{name} {label}: cells {cells_error} > {tol}"
        if ort_accurate:
            assert np.abs(g - w).max() <= tol, f"{name} {label}: |cells - ORT| > {tol}"
    assert ort_accurate or max(cells_errors) <= max(ort_errors), f"{name}: cells > ORT"


ORT_CASES = {
    # name: (T, bS, I, H, direction, per_column, lengths, states, peepholes)
    "forward_per_tensor": (5, 3, 6, 4, "forward", False, False, False, False),
    "forward_per_column": (5, 3, 6, 4, "forward", True, False, True, False),
    "reverse_per_column_lengths": (6, 4, 5, 8, "reverse", True, True, True, False),
    "bidirectional_per_tensor_lengths": (7, 5, 10, 16, "bidirectional", False, True, True,
                                         False),
    "bidirectional_per_column_peepholes": (4, 2, 3, 5, "bidirectional", True, False, True,
                                           True),
    "wide_per_column": (3, 6, 70, 66, "forward", True, True, False, False),
    "one_row": (6, 1, 7, 3, "reverse", False, False, False, False),
}


@pytest.mark.parametrize("name", list(ORT_CASES))
def test_matches_onnx_runtime(name):
    T, bS, I, H, direction, per_column, lengths, states, peepholes = ORT_CASES[name]
    case = make_case(1, T, bS, I, H, direction, per_column, lengths, states, peepholes)
    want = run_ort(case, direction, H)
    got = run_cells(case, direction)
    assert isinstance(got, co.LstmOutputs)
    for label, g, w in zip(("Y", "Y_h", "Y_c"), got, want):
        assert g.dtype == np.float32 and g.shape == w.shape, label
    exact = float_reference(case, direction)
    lens = case["sequence_lens"]
    assert_against_ort(name, got, want, exact, case)
    if direction == "bidirectional":
        # the negative control: W's gate blocks o and f swapped moves the outputs past tol
        W = case["W"][:, :, np.r_[0:H, 2 * H:3 * H, H:2 * H, 3 * H:4 * H]]
        wrong = run_cells(dict(case, W=W), direction)
        assert max(np.abs(g - e).max() for g, e in zip(wrong, exact)) > ORT_SIGMAS * sigma(case)
    if lens is not None:
        # after a row's length, Y is 0 in both
        Y = got[0]
        for b, n in enumerate(lens):
            assert not Y[n:, :, b].any()


def test_a_model_quantized_by_onnx_runtime(tmp_path):
    """An ONNX LSTM quantized by ONNX Runtime's own quantize_dynamic (per column, and per
    tensor): its DynamicQuantizeLSTM's initializers, run by cells, agree with the float LSTM
    of the dequantized weights, and with ONNX Runtime running the quantized model as closely
    as ONNX Runtime is accurate here (assert_against_ort)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(2)
    T, bS, I, H = 5, 3, 6, 8
    W = (rng.normal(size=(2, 4 * H, I)) * 0.3).astype(np.float32)
    R = (rng.normal(size=(2, 4 * H, H)) * 0.3).astype(np.float32)
    B = (rng.normal(size=(2, 8 * H)) * 0.3).astype(np.float32)
    X = rng.normal(size=(T, bS, I)).astype(np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=H,
                            direction="bidirectional")
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, bS, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.save(model, tmp_path / "float.onnx")
    for per_channel in (False, True):
        quantize_dynamic(tmp_path / "float.onnx", tmp_path / "q.onnx", per_channel=per_channel,
                         weight_type=QuantType.QInt8)
        quantized = onnx.load(tmp_path / "q.onnx")
        dq, = [n for n in quantized.graph.node if n.op_type == "DynamicQuantizeLSTM"]
        arrays = {t.name: numpy_helper.to_array(t) for t in quantized.graph.initializer}
        case = {name: (X if name == "X" else arrays.get(source))
                for name, source in zip(INPUTS, dq.input)}
        assert case["W"].dtype == np.int8 and not case["W_zero_point"].any()
        assert case["W_scale"].shape == ((2, 4 * H) if per_channel else (2,))
        want = ort.InferenceSession(quantized.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"X": X})
        got = run_cells(case, "bidirectional")
        assert_against_ort(f"per_channel={per_channel}", got, want,
                           float_reference(case, "bidirectional"), case)
        # and both are int8 approximations of the float LSTM
        exact = co.lstm(X, W, R, B, direction="bidirectional")
        assert np.abs(got[0] - exact[0]).max() < 0.05


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("peepholes", [False, True])
def test_each_step_matches_the_reference_of_cells_int8_model(per_column, peepholes):
    """One step at a time from the same state (a call of one step from the previous step's
    states, as the reference's): the products with the given q and s_w exactly as lowp.h
    states them, the rest to float32 precision."""
    T, bS, I, H = 5, 4, 7, 6
    case = make_case(3, T, bS, I, H, "forward", per_column, states=True, peepholes=peepholes)
    qx = blocks(case["W"][0], GATES_TO_CELLS, H)
    qr = blocks(case["R"][0], GATES_TO_CELLS, H)
    sx = blocks(np.broadcast_to(case["W_scale"][0], (4 * H,)), GATES_TO_CELLS, H)
    sr = blocks(np.broadcast_to(case["R_scale"][0], (4 * H,)), GATES_TO_CELLS, H)
    Bd = case["B"][0]
    b = blocks((Bd[:4 * H] + Bd[4 * H:]).astype(np.float32), GATES_TO_CELLS, H)
    Wp = None if case.get("P") is None else blocks(case["P"][0], PEEPHOLES_TO_CELLS, H)
    Wx_f, Wr_f = np.zeros((I, 4 * H)), np.zeros((H, 4 * H))   # shapes only: I != H

    def product(a, w):
        return int8_product_quantized(a, qx, sx) if w.shape[0] == I else \
            int8_product_quantized(a, qr, sr)

    h, c = case["initial_h"][0], case["initial_c"][0]
    for t in range(T):
        step = dict(case, X=case["X"][t:t + 1], initial_h=h[None], initial_c=c[None])
        Y, Y_h, Y_c = run_cells(step, "forward")
        want_h, want_c = lstm_cell_forward(case["X"][t], Wx_f, Wr_f, b, h, c, Wp,
                                           product=product)
        assert np.abs(Y[0, 0] - want_h).max() <= STEP_TOL, f"step {t}"
        assert np.array_equal(Y[0, 0], Y_h[0])
        assert np.abs(Y_c[0] - want_c).max() <= STEP_TOL, f"step {t}"
        h, c = Y_h[0], Y_c[0]


def test_whole_sequences_match_the_one_step_calls():
    """A call of T steps gives the bits of T calls of one step (prepared nets' guarantee)."""
    T, bS, I, H = 5, 3, 4, 5
    case = make_case(4, T, bS, I, H, "forward", True, states=True)
    whole = run_cells(case, "forward")
    h, c = case["initial_h"], case["initial_c"]
    for t in range(T):
        Y, h, c = run_cells(dict(case, X=case["X"][t:t + 1], initial_h=h, initial_c=c),
                            "forward")
        assert np.array_equal(Y[0], whole.Y[t])
    assert np.array_equal(h, whole.Y_h) and np.array_equal(c, whole.Y_c)


@pytest.mark.parametrize("nIn, nOut", [(5, 7), (9, 70)])
def test_packing_quantized_weights_gives_the_int8_packing(nIn, nOut):
    """Given the q and s_w that weights="int8" packing computes (lowp.h's formulas, as
    lowp_reference.int8_weights), the pack-from-quantized path packs the same bytes (panels,
    scales, column sums) and the nets give the same bits; a pickled one too."""
    rng = np.random.default_rng(5)
    Wx = (rng.normal(size=(nIn, 4 * nOut)) * 0.2).astype(np.float32)
    Wr = (rng.normal(size=(nOut, 4 * nOut)) * 0.2).astype(np.float32)
    b = (rng.normal(size=4 * nOut) * 0.2).astype(np.float32)
    Wp = (rng.normal(size=3 * nOut) * 0.2).astype(np.float32)
    packed = cells.lstm.prepare(Wx, Wr, b, Wp=Wp, weights="int8")
    qx, sx = int8_weights(Wx)
    qr, sr = int8_weights(Wr)
    given = prepare_lstm_quantized(qx.astype(np.int8), sx, qr.astype(np.int8), sr, b, Wp=Wp)
    assert given.weights == "int8" and given.nbytes == packed.nbytes
    assert given._weights.packed_state() == packed._weights.packed_state()
    x = rng.normal(size=(6, 3, nIn)).astype(np.float32)
    for net in (given, pickle.loads(pickle.dumps(given))):
        h, state = net(x)
        h0, state0 = packed(x)
        assert np.array_equal(h, h0) and np.array_equal(state.c, state0.c)


def test_reverse_is_forward_on_reversed_rows():
    """The reverse direction is the forward direction on each row's first sequence_lens steps
    reversed (bit for bit), and each row gives the bits it gives alone (cells quantizes each
    row by itself)."""
    T, bS, I, H = 6, 4, 5, 4
    case = make_case(6, T, bS, I, H, "reverse", True, lengths=True, states=True)
    rev = run_cells(case, "reverse")
    for b, n in enumerate(case["sequence_lens"]):
        row = dict(case, X=case["X"][:n, b:b + 1][::-1].copy(), sequence_lens=None,
                   initial_h=case["initial_h"][:, b:b + 1],
                   initial_c=case["initial_c"][:, b:b + 1])
        fwd = run_cells(row, "forward")
        assert np.array_equal(rev.Y[:n, 0, b], fwd.Y[::-1, 0, 0])
        assert np.array_equal(rev.Y_h[0, b], fwd.Y_h[0, 0])
        assert np.array_equal(rev.Y_c[0, b], fwd.Y_c[0, 0])
        alone = run_cells(dict(row, X=case["X"][:, b:b + 1], sequence_lens=np.array([n])),
                          "reverse")
        assert np.array_equal(alone.Y[:, 0, 0], rev.Y[:, 0, b])


def test_layout_1_is_layout_0_transposed():
    T, bS, I, H = 4, 3, 5, 6
    case = make_case(7, T, bS, I, H, "bidirectional", False, lengths=True, states=True)
    base = run_cells(case, "bidirectional")
    t = dict(case, X=case["X"].swapaxes(0, 1).copy(),
             initial_h=case["initial_h"].swapaxes(0, 1).copy(),
             initial_c=case["initial_c"].swapaxes(0, 1).copy())
    Y, Y_h, Y_c = run_cells(t, "bidirectional", layout=1)
    assert np.array_equal(Y, base.Y.transpose(2, 0, 1, 3))
    assert np.array_equal(Y_h, base.Y_h.swapaxes(0, 1))
    assert np.array_equal(Y_c, base.Y_c.swapaxes(0, 1))


def test_bad_inputs_are_named_errors():
    T, bS, I, H = 3, 2, 4, 5
    case = make_case(8, T, bS, I, H, "forward", True)

    def call(**changes):
        return run_cells(dict(case, **changes), "forward")

    with pytest.raises(TypeError, match="W: expected dtype int8, got float32"):
        call(W=case["W"].astype(np.float32))
    with pytest.raises(TypeError, match="R: uint8 weights are not supported"):
        call(R=case["R"].view(np.uint8))
    with pytest.raises(TypeError, match="X: expected dtype float32.*float64"):
        call(X=case["X"].astype(np.float64))
    with pytest.raises(TypeError, match="W_scale: required"):
        call(W_scale=None)
    with pytest.raises(TypeError, match="R_zero_point: expected dtype int8"):
        call(R_zero_point=case["R_zero_point"].astype(np.uint8))
    zp = case["W_zero_point"].copy()
    zp[0, 3] = 1
    with pytest.raises(ValueError, match="W_zero_point: expected zeros"):
        call(W_zero_point=zp)
    with pytest.raises(ValueError, match="R_zero_point: expected zeros"):
        call(R_zero_point=np.full(1, -3, np.int8))
    with pytest.raises(ValueError, match=r"W: expected shape \(1, 4, 20\)"):
        call(W=case["W"][:, :3])
    with pytest.raises(ValueError, match=r"R: expected shape \(1, 5, 20\)"):
        call(R=case["R"][:, :, :16])
    with pytest.raises(ValueError, match=r"W_scale: expected shape \(1,\) = \[num_directions"):
        call(W_scale=case["W_scale"][:, :8])
    with pytest.raises(ValueError, match="B: expected shape"):
        call(B=case["B"][:, :-1])
    with pytest.raises(ValueError, match="initial_h: expected shape"):
        call(initial_h=np.zeros((1, bS + 1, H), np.float32))
    with pytest.raises(ValueError, match="R_scale: expected finite scales > 0"):
        call(R_scale=np.zeros(1, np.float32))
    W = case["W"].copy()
    W[0, 0, 0] = -128
    with pytest.raises(ValueError, match="W: holds -128"):
        call(W=W)
    with pytest.raises(ValueError, match="sequence_lens"):
        call(sequence_lens=np.array([T + 1, 1]))
    with pytest.raises(ValueError, match="hidden_size: expected R's second dimension 5"):
        co.dynamic_quantize_lstm(*[case.get(n) for n in INPUTS], hidden_size=4)
    with pytest.raises(ValueError, match="direction"):
        run_cells(case, "both")
    with pytest.raises(NotImplementedError, match="clip"):
        co.dynamic_quantize_lstm(*[case.get(n) for n in INPUTS], clip=1.0)
    with pytest.raises(NotImplementedError, match="input_forget"):
        co.dynamic_quantize_lstm(*[case.get(n) for n in INPUTS], input_forget=1)
    with pytest.raises(ValueError, match="quantized: qx holds -128"):
        qx = np.full((I, 4 * H), -128, np.int8)
        prepare_lstm_quantized(qx, np.ones(4 * H, np.float32), np.zeros((H, 4 * H), np.int8),
                           np.ones(4 * H, np.float32), None)
