"""cells.convert without other frameworks: round trips (GRU, LSTM, RNN), the block cell,
folding a GRU bias, and bad arguments. The converters against the real frameworks are in
test_convert_torch.py, test_convert_onnx.py and test_convert_keras.py.

Round trips are exact (the maps only move values, or add a zero): compared with array_equal,
with the dtype kept, the outputs C-contiguous and sharing no memory with the inputs.
Where cells runs two layouts of one model, both sides do the same float operations but for the
folded bias (bx + bh added before the kernel instead of inside it), so F64_TOL / F32_FWD_TOL
(gru_reference.py) apply.
"""
import re

import numpy as np
import pytest

import cells
from cells import convert
from gru_reference import F32_FWD_TOL, F64_TOL, assert_close

N_IN, H = 4, 3  # nIn != nOut


def _normal(rng, dtype, *shape):
    return rng.normal(0.0, 0.5, shape).astype(dtype)


def _assert_same(actual, expected, inputs):
    """Exactly the expected arrays, of their dtype, as new C-contiguous arrays."""
    assert len(actual) == len(expected)
    for k, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            assert a is None, f"output {k}: expected None"
            continue
        assert isinstance(a, np.ndarray) and a.dtype == e.dtype, f"output {k}: {a.dtype}"
        assert a.shape == e.shape, f"output {k}: shape {a.shape} != {e.shape}"
        assert np.array_equal(a, e), f"output {k} differs"
        assert a.flags.c_contiguous, f"output {k} is not C-contiguous"
        assert not any(np.shares_memory(a, i) for i in inputs if i is not None), \
            f"output {k} shares memory with an input"


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

# target: (to, from, keeps both bias rows). A GRU bias [3H] comes back as [b, 0] where the
# target keeps two rows, and b [2, 3H] as b[0] + b[1] where it keeps one (reset-before only).
GRU_TRIPS = {
    "torch": (lambda *w: convert.gru_to_torch(*w, linear_before_reset=True),
              convert.gru_from_torch, True),
    "keras_reset_after": (lambda *w: convert.gru_to_keras(*w, linear_before_reset=True),
                          lambda *k: convert.gru_from_keras(*k, reset_after=True), True),
    "keras_reset_before": (lambda *w: convert.gru_to_keras(*w, linear_before_reset=False),
                           lambda *k: convert.gru_from_keras(*k, reset_after=False), False),
    "onnx": (convert.gru_to_onnx, convert.gru_from_onnx, True),
    "block": (lambda *w: convert.gru_to_block(*w, linear_before_reset=False),
              convert.gru_from_block, False),
}


@pytest.mark.parametrize("target", list(GRU_TRIPS))
@pytest.mark.parametrize("two_rows", [False, True], ids=["b1", "b2"])
def test_gru_from_to_is_identity(target, two_rows, dtype):
    rng = np.random.default_rng(100 + two_rows)
    Wx, Wh = _normal(rng, dtype, N_IN, 3 * H), _normal(rng, dtype, H, 3 * H)
    b = _normal(rng, dtype, *((2, 3 * H) if two_rows else (3 * H,)))
    to, back, keeps_rows = GRU_TRIPS[target]
    converted = to(Wx, Wh, b)
    if keeps_rows:
        b_back = b if two_rows else np.stack([b, np.zeros_like(b)])
    else:
        b_back = b[0] + b[1] if two_rows else b
    _assert_same(back(*converted), (Wx, Wh, b_back), (Wx, Wh, b) + tuple(converted))


def _gru_framework_arrays(target, rng, dtype):
    """Random weights in the target's own layout (ONNX: two directions)."""
    shapes = {
        "torch": [(3 * H, N_IN), (3 * H, H), (3 * H,), (3 * H,)],
        "keras_reset_after": [(N_IN, 3 * H), (H, 3 * H), (2, 3 * H)],
        "keras_reset_before": [(N_IN, 3 * H), (H, 3 * H), (3 * H,)],
        "onnx": [(2, 3 * H, N_IN), (2, 3 * H, H), (2, 6 * H)],
        "block": [(N_IN + H, 2 * H), (N_IN + H, H), (2 * H,), (H,)],
    }[target]
    return tuple(_normal(rng, dtype, *s) for s in shapes)


@pytest.mark.parametrize("target", list(GRU_TRIPS))
def test_gru_to_from_is_identity(target, dtype):
    """Every GRU layout is a bijection with cells' (ONNX: per direction)."""
    arrays = _gru_framework_arrays(target, np.random.default_rng(200), dtype)
    to, back, _ = GRU_TRIPS[target]
    if target == "onnx":
        for d in (0, 1):
            converted = back(*arrays, direction=d)
            _assert_same(to(*converted), tuple(a[d:d + 1] for a in arrays), converted)
    else:
        converted = back(*arrays)
        _assert_same(to(*converted), arrays, arrays + tuple(converted))


@pytest.mark.parametrize("target", ["torch", "keras", "onnx"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_b", "b"])
def test_lstm_from_to_is_identity(target, with_bias, dtype):
    rng = np.random.default_rng(300 + with_bias)
    Wx, Wr = _normal(rng, dtype, N_IN, 4 * H), _normal(rng, dtype, H, 4 * H)
    b = _normal(rng, dtype, 4 * H) if with_bias else None
    b_back = b if with_bias else np.zeros(4 * H, dtype)
    inputs = (Wx, Wr, b)
    if target == "torch":
        converted = convert.lstm_to_torch(Wx, Wr, b)
        _assert_same(convert.lstm_from_torch(*converted), (Wx, Wr, b_back), inputs + converted)
    elif target == "keras":
        converted = convert.lstm_to_keras(Wx, Wr, b)
        _assert_same(convert.lstm_from_keras(*converted), (Wx, Wr, b_back), inputs + converted)
    else:
        Wp = _normal(rng, dtype, 3 * H)
        converted = convert.lstm_to_onnx(Wx, Wr, b, Wp)
        _assert_same(convert.lstm_from_onnx(*converted), (Wx, Wr, b_back, Wp),
                     inputs + (Wp,) + converted)
        W, R, B, P = convert.lstm_to_onnx(Wx, Wr, b)
        assert P is None and convert.lstm_from_onnx(W, R, B)[3] is None


@pytest.mark.parametrize("target", ["torch", "onnx"])
@pytest.mark.parametrize("two_rows", [False, True], ids=["b1", "b2"])
def test_rnn_from_to_is_identity(target, two_rows, dtype):
    """An RNN's b [H] comes back as [b, 0], b [2, H] as it is."""
    rng = np.random.default_rng(350 + two_rows)
    Wx, Wh = _normal(rng, dtype, N_IN, H), _normal(rng, dtype, H, H)
    b = _normal(rng, dtype, *((2, H) if two_rows else (H,)))
    b_back = b if two_rows else np.stack([b, np.zeros_like(b)])
    to, back = {"torch": (convert.rnn_to_torch, convert.rnn_from_torch),
                "onnx": (convert.rnn_to_onnx, convert.rnn_from_onnx)}[target]
    converted = to(Wx, Wh, b)
    _assert_same(back(*converted), (Wx, Wh, b_back), (Wx, Wh, b) + tuple(converted))


def test_rnn_to_from_is_identity(dtype):
    """PyTorch's and ONNX's (per direction) RNN layouts are bijections with cells'."""
    rng = np.random.default_rng(360)
    torch_arrays = (_normal(rng, dtype, H, N_IN), _normal(rng, dtype, H, H),
                    _normal(rng, dtype, H), _normal(rng, dtype, H))
    converted = convert.rnn_from_torch(*torch_arrays)
    _assert_same(convert.rnn_to_torch(*converted), torch_arrays, torch_arrays + converted)
    onnx_arrays = (_normal(rng, dtype, 2, H, N_IN), _normal(rng, dtype, 2, H, H),
                   _normal(rng, dtype, 2, 2 * H))
    for d in (0, 1):
        converted = convert.rnn_from_onnx(*onnx_arrays, direction=d)
        _assert_same(convert.rnn_to_onnx(*converted), tuple(a[d:d + 1] for a in onnx_arrays),
                     onnx_arrays + converted)


def test_lstm_to_from_keeps_weights_and_sums_biases(dtype):
    """PyTorch's and ONNX's two biases come back summed into the first, the second zero; Keras's
    layout and every weight matrix and peephole come back exactly."""
    rng = np.random.default_rng(400)
    w_ih, w_hh = _normal(rng, dtype, 4 * H, N_IN), _normal(rng, dtype, 4 * H, H)
    b_ih, b_hh = _normal(rng, dtype, 4 * H), _normal(rng, dtype, 4 * H)
    zeros = np.zeros(4 * H, dtype)
    converted = convert.lstm_from_torch(w_ih, w_hh, b_ih, b_hh)
    _assert_same(convert.lstm_to_torch(*converted), (w_ih, w_hh, b_ih + b_hh, zeros), converted)

    kernel, rec, bias = _normal(rng, dtype, N_IN, 4 * H), _normal(rng, dtype, H, 4 * H), b_ih
    converted = convert.lstm_from_keras(kernel, rec, bias)
    _assert_same(convert.lstm_to_keras(*converted), (kernel, rec, bias), converted)

    W, R = _normal(rng, dtype, 2, 4 * H, N_IN), _normal(rng, dtype, 2, 4 * H, H)
    B, P = _normal(rng, dtype, 2, 8 * H), _normal(rng, dtype, 2, 3 * H)
    for d in (0, 1):
        converted = convert.lstm_from_onnx(W, R, B, P, direction=d)
        summed = np.concatenate([B[d, :4 * H] + B[d, 4 * H:], zeros])
        _assert_same(convert.lstm_to_onnx(*converted),
                     (W[d:d + 1], R[d:d + 1], summed[None], P[d:d + 1]), converted)


def test_missing_biases_are_zeros(dtype):
    rng = np.random.default_rng(500)
    w_ih, w_hh = _normal(rng, dtype, 3 * H, N_IN), _normal(rng, dtype, 3 * H, H)
    b = convert.gru_from_torch(w_ih, w_hh)[2]
    assert b.shape == (2, 3 * H) and b.dtype == dtype and not b.any()
    b = convert.gru_from_keras(w_ih.T, w_hh.T, reset_after=False)[2]
    assert b.shape == (3 * H,) and b.dtype == dtype and not b.any()
    W, R = _normal(rng, dtype, 1, 4 * H, N_IN), _normal(rng, dtype, 1, 4 * H, H)
    b = convert.lstm_from_onnx(W, R)[2]
    assert b.shape == (4 * H,) and b.dtype == dtype and not b.any()
    b = convert.rnn_from_torch(w_ih[:H], w_hh[:H])[2]
    assert b.shape == (2, H) and b.dtype == dtype and not b.any()
    b = convert.rnn_from_onnx(W[:, :H], R[:, :H])[2]
    assert b.shape == (2, H) and b.dtype == dtype and not b.any()


def test_array_likes_and_memory_orders():
    """Lists (float64), Fortran-ordered and strided arrays give the same C-contiguous results."""
    rng = np.random.default_rng(600)
    Wx, Wh = _normal(rng, np.float32, N_IN, 3 * H), _normal(rng, np.float32, H, 3 * H)
    b = _normal(rng, np.float32, 2, 3 * H)
    expected = convert.gru_to_onnx(Wx, Wh, b)
    strided = np.zeros((H, 6 * H), np.float32)[:, ::2]
    strided[...] = Wh
    args = (np.asfortranarray(Wx), strided, np.asfortranarray(b))
    _assert_same(convert.gru_to_onnx(*args), expected, args)
    from_lists = convert.gru_to_onnx(Wx.tolist(), Wh.tolist(), b.tolist())
    assert all(a.dtype == np.float64 for a in from_lists)
    assert all(np.array_equal(a, e) for a, e in zip(from_lists, expected))


# ---------------------------------------------------------------------------------------------
# One bias for a GRU, and the block cell
# ---------------------------------------------------------------------------------------------

def _gru_problem(rng, dtype, bS=3, sL=4):
    x, hI = _normal(rng, dtype, sL, bS, N_IN), rng.uniform(-0.9, 0.9, (bS, H)).astype(dtype)
    Wx, Wh, b = (_normal(rng, dtype, *s) for s in ((N_IN, 3 * H), (H, 3 * H), (2, 3 * H)))
    return x, hI, Wx, Wh, b


def _tol(dtype):
    return F64_TOL if dtype == np.float64 else F32_FWD_TOL


@pytest.mark.parametrize("lbr", [False, True], ids=["reset_before", "lbr"])
def test_fold_bias_is_the_same_model(lbr, dtype):
    """gru_fold_bias(b) runs as b does (with linear_before_reset, once b[1, 2H:] = 0), and
    the folded bias's gradient is dL/db[0], not the sum of dL/db's rows."""
    rng = np.random.default_rng(700 + lbr)
    x, hI, Wx, Wh, b = _gru_problem(rng, dtype)
    if lbr:
        b[1, 2 * H:] = 0
    folded = convert.gru_fold_bias(b, linear_before_reset=lbr)
    assert folded.shape == (3 * H,) and folded.dtype == dtype
    assert_close(cells.gruTimeLoop(x, hI, Wx, Wh, folded, linear_before_reset=lbr),
                 cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr), _tol(dtype), "h")
    dLdh = _normal(rng, dtype, *x.shape[:2], H)
    db2 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)[4]
    db1 = cells.gruTimeLoopBp(x, hI, Wx, Wh, folded, dLdh, linear_before_reset=lbr)[4]
    assert_close(db1, db2[0], _tol(dtype), "dL/d(folded b) = dL/db[0]")
    summed = convert.gru_fold_bias(db2, linear_before_reset=False)
    assert np.max(np.abs(summed - db1)) > 1e-3  # folding the gradient itself is wrong


def test_fold_bias_refuses_a_recurrent_candidate_bias_with_lbr():
    b = np.random.default_rng(800).normal(size=(2, 3 * H))
    with pytest.raises(ValueError, match=re.escape("b[1, 2*nOut:]") + ".*cannot be folded"):
        convert.gru_fold_bias(b, linear_before_reset=True)
    # the same bias where both rows are kept, and reset-before where the sum is the model
    assert convert.gru_to_keras(np.zeros((N_IN, 3 * H)), np.zeros((H, 3 * H)), b,
                                linear_before_reset=True)[2].shape == (2, 3 * H)
    assert np.array_equal(convert.gru_fold_bias(b, linear_before_reset=False), b[0] + b[1])
    assert np.array_equal(convert.gru_fold_bias(b[0], linear_before_reset=True), b[0])


def test_gru_from_block_matches_gruBlockCell(dtype):
    """The block cell is gruCell (reset-before) on gru_from_block's weights; its gradients are
    gruCellBp's converted with gru_to_block, and back with gru_from_block."""
    rng = np.random.default_rng(900)
    bS = 3
    x, hLast = _normal(rng, dtype, bS, N_IN), rng.uniform(-0.9, 0.9, (bS, H)).astype(dtype)
    block = (_normal(rng, dtype, N_IN + H, 2 * H), _normal(rng, dtype, N_IN + H, H),
             _normal(rng, dtype, 2 * H), _normal(rng, dtype, H))
    dLdh = _normal(rng, dtype, bS, H)
    r, u, c, h = cells.gruBlockCell(x, hLast, *block)
    Wx, Wh, b = convert.gru_from_block(*block)
    gates, h_cells = cells.gruCell(x, hLast, Wx, Wh, b, linear_before_reset=False)
    assert_close(h_cells, h, _tol(dtype), "h", dtype)
    assert_close(gates, np.concatenate([r, u, c], axis=1), _tol(dtype), "gates", dtype)

    block_grads = cells.gruBlockCellBp(x, hLast, *block, None, None, None, dLdh)[2:]
    cells_grads = cells.gruCellBp(x, hLast, Wx, Wh, b, dLdh, linear_before_reset=False)[2:]
    for name, g, e in zip(("dLdWru", "dLdWc", "dLdbru", "dLdbc"), block_grads,
                          convert.gru_to_block(*cells_grads, linear_before_reset=False)):
        assert_close(g, e, _tol(dtype), name, dtype)
    for name, g, e in zip(("dLdWx", "dLdWh", "dLdb"), cells_grads,
                          convert.gru_from_block(*block_grads)):
        assert_close(g, e, _tol(dtype), name, dtype)


def test_gru_to_block_matches_cells(dtype):
    """A reset-before cells GRU with b [2, 3H] in the block cell: the same h, and the block's
    bias gradients are dL/db[0] (the folded bias's gradient rule)."""
    rng = np.random.default_rng(1000)
    x, hI, Wx, Wh, b = _gru_problem(rng, dtype, sL=1)
    x, dLdh = x[0], _normal(rng, dtype, x.shape[1], H)
    block = convert.gru_to_block(Wx, Wh, b, linear_before_reset=False)
    _, h = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=False)
    assert_close(cells.gruBlockCell(x, hI, *block)[3], h, _tol(dtype), "h", dtype)
    dLdbru, dLdbc = cells.gruBlockCellBp(x, hI, *block, None, None, None, dLdh)[4:]
    dLdb = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=False)[4]
    assert_close(np.concatenate([dLdbru, dLdbc]), dLdb[0], _tol(dtype), "dL/db[0]", dtype)


# ---------------------------------------------------------------------------------------------
# What cannot be represented, and bad arguments
# ---------------------------------------------------------------------------------------------

def test_reset_before_gru_into_torch_is_an_error():
    Wx, Wh, b = np.zeros((N_IN, 3 * H)), np.zeros((H, 3 * H)), np.zeros(3 * H)
    with pytest.raises(ValueError, match="PyTorch's GRU is linear-before-reset only"):
        convert.gru_to_torch(Wx, Wh, b, linear_before_reset=False)
    with pytest.raises(TypeError, match="linear_before_reset"):
        convert.gru_to_torch(Wx, Wh, b)  # the variant must be said
    with pytest.raises(TypeError, match="linear_before_reset: expected True or False"):
        convert.gru_to_torch(Wx, Wh, b, linear_before_reset=1)


def test_linear_before_reset_gru_into_the_block_cell_is_an_error():
    Wx, Wh, b = np.zeros((N_IN, 3 * H)), np.zeros((H, 3 * H)), np.zeros(3 * H)
    with pytest.raises(ValueError, match="the block cell .* is reset-before only"):
        convert.gru_to_block(Wx, Wh, b, linear_before_reset=True)
    for f in (convert.gru_to_block, convert.gru_to_keras, convert.gru_fold_bias):
        with pytest.raises(TypeError, match="linear_before_reset"):
            f(Wx, Wh, b) if f is not convert.gru_fold_bias else f(b)


def _z(*shape):
    return np.zeros(shape)


BAD_SHAPES = [  # (function, arguments, the message's start, the given shape)
    (convert.gru_from_torch, (_z(9, 4), _z(9, 2)), "weight_hh: expected shape (6, 2)", (9, 2)),
    (convert.gru_from_torch, (_z(8, 4), _z(9, 3)), "weight_ih: expected shape (9, 4)", (8, 4)),
    (convert.gru_from_torch, (_z(9), _z(9, 3)), "weight_ih: expected a 2-d array", (9,)),
    (convert.gru_from_torch, (_z(9, 4), _z(9, 3), _z(8)), "bias_ih: expected shape (9,)", (8,)),
    (convert.lstm_from_torch, (_z(12, 4), _z(12, 4)), "weight_hh: expected shape (16, 4)",
     (12, 4)),
    (lambda *a: convert.gru_to_torch(*a, linear_before_reset=True),
     (_z(4, 9), _z(3, 9), _z(3, 9)), "b: expected shape (9,)", (3, 9)),
    (convert.gru_to_onnx, (_z(4, 8), _z(3, 9), _z(9)), "Wx: expected shape (4, 9)", (4, 8)),
    (convert.gru_to_onnx, (_z(4, 9), _z(3, 8), _z(9)), "Wh: expected shape (3, 9)", (3, 8)),
    (convert.gru_from_onnx, (_z(1, 9, 4), _z(2, 9, 3)), "W: expected shape (2, 9, 4)",
     (1, 9, 4)),
    (convert.gru_from_onnx, (_z(1, 9, 4), _z(1, 9, 3), _z(1, 12)), "B: expected shape (1, 18)",
     (1, 12)),
    (convert.gru_from_onnx, (_z(9, 4), _z(1, 9, 3)), "W: expected a 3-d array", (9, 4)),
    (convert.gru_from_keras, (_z(4, 9), _z(3, 9), _z(9)), "bias: expected shape (2, 9)", (9,)),
    (lambda *a: convert.gru_from_keras(*a, reset_after=False), (_z(4, 9), _z(3, 9), _z(2, 9)),
     "bias: expected shape (9,)", (2, 9)),
    (convert.gru_from_keras, (_z(4, 9), _z(3, 6)), "recurrent_kernel: expected shape (3, 9)",
     (3, 6)),
    (convert.gru_from_block, (_z(7, 6), _z(7, 3), _z(6), _z(2)), "bc: expected shape (3,)",
     (2,)),
    (convert.gru_from_block, (_z(7, 5), _z(7, 3), _z(6), _z(3)), "Wru: expected shape (7, 6)",
     (7, 5)),
    (convert.gru_from_block, (_z(7, 6), _z(2, 3), _z(6), _z(3)), "Wc: expected shape", (2, 3)),
    (lambda *a: convert.gru_to_block(*a, linear_before_reset=False),
     (_z(4, 9), _z(3, 9), _z(2, 6)), "b: expected shape (9,)", (2, 6)),
    (lambda b: convert.gru_fold_bias(b, linear_before_reset=False), (_z(3, 9),),
     "b: expected shape", (3, 9)),
    (convert.lstm_to_torch, (_z(4, 12), _z(3, 12), _z(9)), "b: expected shape (12,)", (9,)),
    (convert.lstm_to_keras, (_z(4, 12), _z(3, 9)), "Wr: expected shape (3, 12)", (3, 9)),
    (convert.lstm_from_keras, (_z(4, 12), _z(3, 12), _z(9)), "bias: expected shape (12,)",
     (9,)),
    (convert.lstm_to_onnx, (_z(4, 12), _z(3, 12), None, _z(12)), "Wp: expected shape (9,)",
     (12,)),
    (convert.lstm_from_onnx, (_z(1, 12, 4), _z(1, 12, 3), None, _z(1, 12)),
     "P: expected shape (1, 9)", (1, 12)),
    (convert.lstm_from_onnx, (_z(1, 12, 4), _z(1, 12, 3), _z(1, 12)),
     "B: expected shape (1, 24)", (1, 12)),
    (convert.rnn_from_torch, (_z(3, 4), _z(3, 2)),
     "weight_hh: expected shape (2, 2) = [hidden_size, hidden_size]", (3, 2)),
    (convert.rnn_from_torch, (_z(2, 4), _z(3, 3)),
     "weight_ih: expected shape (3, 4) = [hidden_size, input_size]", (2, 4)),
    (convert.rnn_from_torch, (_z(3, 4), _z(3, 3), None, _z(9)),
     "bias_hh: expected shape (3,) = [hidden_size]", (9,)),
    (convert.rnn_to_torch, (_z(4, 3), _z(3, 3), _z(3, 3)),
     "b: expected shape (3,) = [nOut] or (2, 3) = [2, nOut] (rows bx, bh)", (3, 3)),
    (convert.rnn_to_torch, (_z(4, 3), _z(3, 9), _z(3)), "Wh: expected shape (3, 3) = [nOut, nOut]",
     (3, 9)),
    (convert.rnn_to_onnx, (_z(4, 2), _z(3, 3), _z(3)),
     "Wx: expected shape (4, 3) = [nIn, nOut] (nOut from Wh)", (4, 2)),
    (convert.rnn_from_onnx, (_z(1, 3, 4), _z(1, 9, 3)),
     "R: expected shape (1, 3, 3) = [num_directions, hidden_size, hidden_size]", (1, 9, 3)),
    (convert.rnn_from_onnx, (_z(1, 3, 4), _z(1, 3, 3), _z(1, 3)),
     "B: expected shape (1, 6) = [num_directions, 2*hidden_size]", (1, 3)),
    (convert.rnn_from_onnx, (_z(3, 4), _z(1, 3, 3)), "W: expected a 3-d array", (3, 4)),
]


@pytest.mark.parametrize("function,args,message,given", BAD_SHAPES)
def test_bad_shapes(function, args, message, given):
    with pytest.raises(ValueError, match="^" + re.escape(message)) as error:
        function(*args)
    assert str(given) in str(error.value)


NOT_REAL = "expected dtype float32 or float64, got"


@pytest.mark.parametrize("args,message", [
    ((_z(4, 9).astype(np.int64), _z(3, 9), _z(9)), f"Wx: {NOT_REAL} int64"),
    ((_z(4, 9), _z(3, 9), _z(9).astype(np.complex128)), f"b: {NOT_REAL} complex128"),
    ((_z(4, 9), _z(3, 9), _z(9).astype(np.float16)), f"b: {NOT_REAL} float16"),
    (([[0, 1, 2]] * 4, _z(3, 9), _z(9)), f"Wx: {NOT_REAL} int64"),
    ((_z(4, 9).astype(np.float32), _z(3, 9), _z(9)),
     "Wh: expected dtype float32 (the dtype of Wx), got float64"),
    ((_z(4, 9), _z(3, 9), None), "b: expected a numpy.ndarray, got NoneType"),
])
def test_bad_dtypes(args, message):
    with pytest.raises(TypeError, match="^" + re.escape(message)):
        convert.gru_to_onnx(*args)


def test_rnn_bad_dtypes():
    with pytest.raises(TypeError, match="^" + re.escape(f"b: {NOT_REAL} int64")):
        convert.rnn_to_onnx(_z(4, 3), _z(3, 3), np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="^" + re.escape(
            "weight_hh: expected dtype float64 (the dtype of weight_ih), got float32")):
        convert.rnn_from_torch(_z(3, 4), _z(3, 3).astype(np.float32))


def test_bad_direction():
    W, R = _z(2, 9, 4), _z(2, 9, 3)
    with pytest.raises(ValueError, match=re.escape("direction: expected an index in [0, 2)")):
        convert.gru_from_onnx(W, R, direction=2)
    with pytest.raises(ValueError, match=re.escape("direction: expected an index in [0, 1)")):
        convert.lstm_from_onnx(_z(1, 12, 4), _z(1, 12, 3), direction=-1)
    for bad in (True, 1.0, "1"):
        with pytest.raises(TypeError, match="direction: expected an int"):
            convert.gru_from_onnx(W, R, direction=bad)
    with pytest.raises(ValueError, match=re.escape("direction: expected an index in [0, 2)")):
        convert.rnn_from_onnx(_z(2, 3, 4), _z(2, 3, 3), direction=2)
    assert convert.gru_from_onnx(W, R, direction=np.int64(1))[0].shape == (4, 9)


def test_module_import_does_not_import_torch(tmp_path):
    import subprocess
    import sys
    code = "import sys, cells.convert; print('torch' in sys.modules)"
    # run outside the source tree: `python -c` puts its working directory on sys.path
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path)
    assert out.stdout.strip() == "False"
