"""Prepared nets on int8 and bfloat16 weights (prepare(..., weights="int8" | "bfloat16")): every
family and option against the family's float64 reference whose products apply exactly the
documented rounding and quantization (lowp_reference.py), step by step from the net's own
state, to float32 precision; what the net reports and keeps; pickling; bad options.

The guarantees of one answer however a sequence is asked (chunks, rows, threads) are tested
for these weights with every other kind, in test_prepared.py."""
import pickle

import numpy as np
import pytest
from gru_reference import gru_cell_forward
from lltm_reference import lltm_cell_forward
from lowp_reference import PRODUCTS, bf16, int8_product, int8_rows, int8_weights, one_flip
from lstm_reference import lstm_cell_forward
from rnn_reference import rnn_cell_forward
from test_prepared import CASES, case_parameters, nIn, nOut, prepare_case, random_state

import cells

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


KINDS = ["int8", "bfloat16"]
# test_prepared's cases, and an LSTM with other activations than the default: hard sigmoid
# gates, a scaled tanh candidate (1.5·tanh(0.7·z)), a softsign output
LOWP_CASES = [*CASES, "lstm_activations"]
ACTIVATIONS = dict(gate_act=7, cell_act=6, cell_alpha=1.5, cell_beta=0.7, out_act=9)
sL, bS = 6, 5
# One step from the net's own state, with the products exact: what is left is the float32
# rounding of the gate math (pre-activations of size <= ~5, a few roundings of 6e-8 relative
# each, through activations of slope <= 1; the cell state <= ~3): 4e-6 absolute is a margin of
# about 5 over it, and far below any wrong product (one int8 level moves a pre-activation by
# about 1e-3, one bfloat16 rounding by about 1e-4).
TOL = 4e-6


def lowp_case(case, kind, seed=0):
    """(net, step): the net of `case` (test_prepared's CASES, or lstm_activations) on `kind`
    weights, and step(x [bS, nIn], state) -> (h, state arrays, allowances): the reference's
    step from that state with the kind's products, and how far one element of an intermediate
    product (computed in float32 by the net) may move each state array (h's is the first)."""
    product = PRODUCTS[kind]
    if case == "lstm_activations":
        p = dict(case_parameters("lstm", np.float32, seed), **ACTIVATIONS)
        Wx, Wr, b = p["Wx"], p["Wr"], p["b"]

        def hard_sigmoid(z):
            return np.clip(0.2 * z + 0.5, 0, 1)

        def step(x, state):
            z = product(x, Wx) + product(state.h, Wr) + b
            zi, zf, zg, zo = np.split(z, 4, axis=1)
            c = hard_sigmoid(zf) * state.c + hard_sigmoid(zi) * 1.5 * np.tanh(0.7 * zg)
            h = hard_sigmoid(zo) * c / (1 + np.abs(c))
            return h, (h, c), (0, 0)
        return prepare_case("lstm", p, kind), step
    p = case_parameters(case, np.float32, seed)
    net = prepare_case(case, p, kind)
    if case.startswith("gru"):
        Wx, Wh, b, lbr = p["Wx"], p["Wh"], p["b"], p["linear_before_reset"]

        def step(x, state):
            gates, h = gru_cell_forward(x, state.h, Wx, Wh, b, lbr, product=product)
            # reset-before multiplies r∘h, which the net computes in float32
            flip = 0 if lbr else one_flip(gates[:, :nOut] * state.h, Wh[:, 2 * nOut:], kind)
            return h, (h,), (flip,)
    elif case.startswith("lstm"):
        Wx, Wr, b, Wp, Wproj, clip = (p[k] for k in ("Wx", "Wr", "b", "Wp", "Wproj",
                                                     "cell_clip"))

        def step(x, state):
            h, c, cache = lstm_cell_forward(x, Wx, Wr, b, state.h, state.c, Wp, clip,
                                            return_cache=True, Wproj=Wproj, product=product)
            # the projection multiplies m, which the net computes in float32
            flip = 0 if Wproj is None else one_flip(cache["m"], Wproj, kind)
            return h, (h, c), (flip, 0)
    elif case.startswith("rnn"):
        Wx, Wh, b, act = p["Wx"], p["Wh"], p["b"], p["activation"]

        def step(x, state):
            h, _ = rnn_cell_forward(x, state.h, Wx, Wh, b, act, product=product)
            return h, (h,), (0,)
    else:
        W, b = p["W"], p["b"]

        def step(x, state):
            h, c, *_ = lltm_cell_forward(x, W, b, state.h, state.c, product=product)
            return h, (h, c), (0, 0)
    return net, step


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", LOWP_CASES)
def test_values_match_the_reference_with_the_documented_rounding(case, kind):
    """Each step from the net's state (one-step calls, which give the bits of one whole call:
    test_prepared.py), against the reference's step with the kind's exact products."""
    net, step = lowp_case(case, kind)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(sL, bS, nIn)).astype(np.float32)
    state = random_state(net, bS, rng)
    for t in range(sL):
        h, after = net(x[t], state)
        want_h, want_state, flips = step(x[t], state)
        assert h.dtype == np.float32
        assert np.all(np.abs(h - want_h) <= TOL + flips[0]), f"{case} {kind}: step {t}"
        for got, want, flip in zip(after, want_state, flips):
            assert np.all(np.abs(got - want) <= TOL + flip), f"{case} {kind}: step {t} state"
        state = after


@pytest.mark.parametrize("kind", KINDS)
def test_the_reference_products_are_not_the_float32_product(kind):
    """The exact-rounding products the tests hold the nets to differ from the float32 product
    by far more than TOL: a net that multiplied in float32 would fail them."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=(4, 50)).astype(np.float32)
    w = (rng.normal(size=(50, 30)) * 0.1).astype(np.float32)
    diff = np.abs(PRODUCTS[kind](a, w) - a.astype(np.float64) @ w).max()
    assert diff > 50 * TOL


def test_the_int8_reference_follows_the_formulas_on_known_values():
    """The reference's quantization on numbers worked out by hand: the column (0.5, -1.27, 0)
    has s_w = 0.01 and q = (50, -127, 0); the row (-1, 0, 0.27) has s_a = 1.27 / 127 = 0.01,
    zp = 100, qa = (0, 100, 127) (7 bits: 127 is the top level)."""
    q, s_w = int8_weights(np.array([[0.5], [-1.27], [0.0]], np.float32))
    assert s_w[0] == np.float32(np.float32(1.27) / np.float32(127))
    assert q[:, 0].tolist() == [50, -127, 0]
    a = np.array([[-1.0, 0.0, 0.27]], np.float32)
    qa, s_a, zp = int8_rows(a)
    assert s_a[0] == np.float32(np.float32(np.float32(0.27) + np.float32(1)) / np.float32(127))
    assert zp.tolist() == [100] and qa[0].tolist() == [0, 100, 127]
    w = np.array([[1.0], [2.0], [-0.5]], np.float32)
    # w's column has s_w = 2 / 127 and q = (64, 127, -32) (63.5 rounds to even), so the
    # product is ((0 - 100)·64 + 0·127 + (127 - 100)·(-32))·s_a·s_w = -7264·0.01·2 / 127
    # to within the scales' float32 rounding
    assert int8_weights(w)[0][:, 0].tolist() == [64, 127, -32]
    got = int8_product(a, w)[0, 0]
    assert abs(got - (-7264 * 0.01 * 2 / 127)) < 1e-6
    assert abs(got - (-1.0 * 1.0 + 0.0 + 0.27 * -0.5)) < 0.02
    assert bf16(np.float32(1 + 2 ** -8)) == 1.0          # a tie rounds to even
    assert bf16(np.float32(1 + 3 * 2 ** -8)) == 1 + 2 ** -6
    assert bf16(np.float32(1e-39)) == 0.0                 # below FLT_MIN: zero


@pytest.mark.parametrize("kind", KINDS)
def test_the_net_reports_what_it_holds(kind):
    rng = np.random.default_rng(3)
    Wx, Wr = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    Wx, Wr = Wx.astype(np.float32), Wr.astype(np.float32)
    b = np.zeros(4 * nOut, np.float32)
    plain = cells.lstm.prepare(Wx, Wr, b)
    net = cells.lstm.prepare(Wx, Wr, b, weights=kind)
    assert net.weights == kind and plain.weights == "float32"
    assert net.dtype == np.float32 and net.options["weights"] == kind
    assert f"weights='{kind}'" in repr(net)
    # int8: a byte a weight (and 8 bytes of scale and sum a column); bfloat16: two
    weight_bytes = net.nbytes - b.nbytes
    per_weight = 1 if kind == "int8" else 2
    assert per_weight * (nIn + nOut) * 4 * nOut < weight_bytes < plain.nbytes / (3 - per_weight)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", ["gru_reset_before", "lstm_projected", "lltm"])
def test_a_pickled_net_gives_the_same_bits(case, kind):
    net, _ = lowp_case(case, kind)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(sL, bS, nIn)).astype(np.float32)
    state = random_state(net, bS, rng)
    again = pickle.loads(pickle.dumps(net))
    assert again.weights == kind and again.nbytes == net.nbytes
    for got, want in zip(again(x, state), net(x, state)):
        for a, e in zip(np.atleast_1d(got) if isinstance(got, np.ndarray) else got,
                        np.atleast_1d(want) if isinstance(want, np.ndarray) else want):
            assert np.array_equal(a, e)


def test_bad_weights_options_are_named_errors():
    rng = np.random.default_rng(5)
    Wx, Wh = rng.normal(size=(3, 6)), rng.normal(size=(2, 6))
    b = np.zeros(6)
    for bad in ("int4", "float16", 8, np.float32):
        with pytest.raises(ValueError, match="weights: expected None"):
            cells.gru.prepare(Wx.astype(np.float32), Wh.astype(np.float32),
                              b.astype(np.float32), weights=bad)
    with pytest.raises(TypeError, match="weights='int8' packs float32 weights.*float64"):
        cells.gru.prepare(Wx, Wh, b, weights="int8")
    with pytest.raises(TypeError, match="weights='bfloat16' packs float32"):
        cells.rnn.prepare(Wx[:, :2], Wh[:, :2], b[:2], weights="bfloat16")
