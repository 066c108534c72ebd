"""Passes that split the batch rows between the threads (cells/_time_loop.pyx, splits_rows):
each thread runs every unit of its own rows, forward and backward, and the backward adds up the
threads' sums of dL/dP (the GRU's bh_c, the LSTM's peepholes) after the loop.

Every family (the GRU's two variants, one of them two-phase; the LSTM plain, with peepholes and
projected; the LLTM, in PyTorch's weight layout; the RNN), at batch sizes that split (16 rows:
8 + 8, the smallest; 37: 18 + 19; 25 on 3 threads: 8 + 8 + 9), forward and reverse, with
and without seq_len, in float64 and float32, against the float64 references: h, the final
states and every gradient; and sequences of one step, whose weights are read in place (on both
sides of the rows from which the ones read transposed are packed). The other tests run batches
too small to split, except tests/test_projection_chunks.py.

The weights in PyTorch's layout too: Wx and Wh F-ordered (weight_ih.T, weight_hh.T), which the
loop reads where they are, writing their gradients F-ordered; with the units and the rows
split, and in calls of one step on both sides of the in-place edge."""
import numpy as np
import pytest

import cells
from cells import _time_loop
from gru_reference import (
    F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, assert_close, gru_masked_backward, gru_masked_forward,
    make_seq_problem, to_dtype,
)
from lltm_reference import lltm_seq_backward, lltm_seq_forward, make_lltm_problem
from lstm_reference import lstm_time_loop_backward, lstm_time_loop_forward, make_lstm_problem
from rnn_reference import make_rnn_problem, rnn_seq_backward, rnn_seq_forward

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


sL, nIn, nOut = 5, 6, 16
# (bS, n_threads): batches that split, the first at the smallest size that does.
SPLITS = [(16, 2), (37, 2), (25, 3)]
GATES = {"gru": 3, "lstm": 4, "lltm": 3, "rnn": 1}


def _seq_len(T, bS, with_lengths):
    """None, or lengths 0 .. T over the rows (every thread gets full, empty and partial rows)."""
    return np.arange(bS, dtype=np.int64) % (T + 1) if with_lengths else None


def _full(seq_len, T, bS):
    return np.full(bS, T) if seq_len is None else seq_len


# float32 against the float64 reference of the same float32 inputs: gru_reference.py's
# tolerances, justified there for weight sums of up to 35 terms; here they sum up to sL·bS = 185.
# Measured over every case here (deterministic: fixed seeds, a fixed split): forward <= 1.1e-6
# (9x under F32_FWD_TOL), gradients <= 6.9e-6 relative to their scale (4x under
# F32_SEQ_GRAD_TOL).
TOLERANCES = {np.float64: (F64_TOL, F64_TOL), np.float32: (F32_FWD_TOL, F32_SEQ_GRAD_TOL)}


def _check(results, references, names, dtype, gradients):
    tol = TOLERANCES[dtype][1 if gradients else 0]
    for name, got, expected in zip(names, results, references):
        assert_close(got, expected, tol, name, dtype)


def _in_order(order, *weights):
    """The weights in memory order `order`: "C", or "F" (PyTorch's weight_ih.T, weight_hh.T)."""
    return tuple(np.asarray(w, order=order) for w in weights)


def _check_gradient_order(order, *gradients):
    """A weight's gradient comes back in the weight's memory order."""
    for g in gradients:
        assert g.flags[f"{order}_CONTIGUOUS"], g.strides


def run_gru(rng, T, bS, seq_len, forward, n_threads, dtype, lbr, order="C", size=(nIn, nOut)):
    """The GRU against the reference, `size` = (nIn, nOut); the weights in memory order `order`:
    returns them."""
    x, hI, Wx, Wh, b, dLdh, dLdhL = to_dtype(make_seq_problem(rng, T, bS, *size,
                                                              two_biases=True), dtype)
    Wx, Wh = _in_order(order, Wx, Wh)
    lengths = _full(seq_len, T, bS)
    kwargs = dict(linear_before_reset=lbr, seq_len=seq_len, forward=forward, n_threads=n_threads)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **kwargs)
    _check([h], gru_masked_forward(x, hI, Wx, Wh, b, lengths, forward, lbr), ["h"], dtype,
           False)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhL, workspace=ws, **kwargs)
    _check(grads, gru_masked_backward(x, hI, Wx, Wh, b, lengths, dLdh, dLdhL, forward, lbr),
           ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), dtype, True)
    _check_gradient_order(order, grads.dLdWx, grads.dLdWh)
    return Wx, Wh


def run_lstm(rng, T, bS, seq_len, forward, n_threads, dtype, peepholes, n_proj, order="C",
             size=(nIn, nOut)):
    """The LSTM against the reference, `size` = (nIn, nOut); Wx and Wr in memory order `order`:
    returns them."""
    p = make_lstm_problem(rng, T, bS, *size, peepholes=peepholes, n_proj=n_proj)
    p = dict(zip(p, to_dtype(p.values(), dtype)))
    p["Wx"], p["Wr"] = _in_order(order, p["Wx"], p["Wr"])
    weights = (p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"])
    kwargs = dict(Wp=p["Wp"], Wproj=p["Wproj"], seq_len=seq_len, forward=forward,
                  n_threads=n_threads)
    h, hL, cL, ws = cells.lstmLayerTimeLoop(*weights, return_workspace=True, **kwargs)
    _check((h, hL, cL), lstm_time_loop_forward(*weights, p["Wp"], seq_len, forward=forward,
                                               Wproj=p["Wproj"]), ("h", "hL", "cL"), dtype, False)
    grads = cells.lstmLayerTimeLoopBp(*weights, p["dLdh"], dLdhL=p["dLdhL"], dLdcL=p["dLdcL"],
                                      workspace=ws, **kwargs)
    ref = lstm_time_loop_backward(*weights, p["dLdh"], p["dLdhL"], p["dLdcL"], p["Wp"],
                                  seq_len, forward=forward, Wproj=p["Wproj"])
    names = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp", "dLdWproj")
    assert len(grads) == len(ref) == (8 if n_proj else 7)
    if not peepholes:  # no dL/dWp (the reference's is that of zero peepholes)
        assert grads.dLdWp is None
        names, grads, ref = (list(a[:6]) + list(a[7:]) for a in (names, grads, ref))
    _check(grads, ref, names, dtype, True)
    _check_gradient_order(order, grads[1], grads[2])
    return p["Wx"], p["Wr"]


def run_lltm(rng, T, bS, seq_len, forward, n_threads, dtype, size=(nIn, nOut)):
    """The LLTM against the reference, `size` = (nIn, nOut)."""
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = to_dtype(make_lltm_problem(rng, T, bS, *size), dtype)
    kwargs = dict(seq_len=seq_len, forward=forward, n_threads=n_threads)
    h, hL, cL, ws = cells.lltmTimeLoop(x, W, b, hI, cI, return_workspace=True, **kwargs)
    _check((h, hL, cL), lltm_seq_forward(x, W, b, hI, cI, seq_len, forward), ("h", "hL", "cL"),
           dtype, False)
    grads = cells.lltmTimeLoopBp(x, W, b, hI, cI, dLdh, dLdhL=dLdhL, dLdcL=dLdcL,
                                 workspace=ws, **kwargs)
    _check(grads, lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL, seq_len, forward),
           ("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"), dtype, True)


def run_rnn(rng, T, bS, seq_len, forward, n_threads, dtype, order="C", size=(nIn, nOut)):
    """The RNN against the reference, `size` = (nIn, nOut); the weights in memory order
    `order`: returns them."""
    x, hI, Wx, Wh, b, dLdh, dLdhL = to_dtype(make_rnn_problem(rng, T, bS, *size,
                                                              two_biases=True), dtype)
    Wx, Wh = _in_order(order, Wx, Wh)
    kwargs = dict(seq_len=seq_len, forward=forward, n_threads=n_threads)
    h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **kwargs)
    _check([h], rnn_seq_forward(x, hI, Wx, Wh, b, "tanh", seq_len, forward), ["h"], dtype,
           False)
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhL, workspace=ws, **kwargs)
    _check(grads, rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhL, "tanh", seq_len, forward),
           ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), dtype, True)
    _check_gradient_order(order, grads.dLdWx, grads.dLdWh)
    return Wx, Wh


CASES = {
    "gru_reset_before": ("gru", lambda *a, **k: run_gru(*a, lbr=False, **k)),
    "gru_linear_before_reset": ("gru", lambda *a, **k: run_gru(*a, lbr=True, **k)),
    "lstm": ("lstm", lambda *a, **k: run_lstm(*a, peepholes=False, n_proj=None, **k)),
    "lstm_peepholes": ("lstm", lambda *a, **k: run_lstm(*a, peepholes=True, n_proj=None, **k)),
    "lstm_projected": ("lstm", lambda *a, **k: run_lstm(*a, peepholes=True, n_proj=8, **k)),
    "lltm": ("lltm", run_lltm),
    "rnn": ("rnn", run_rnn),
}
# The cases with separate Wx and Wh (the LLTM's one W is in PyTorch's layout already).
SEPARATE_WEIGHTS = [case for case in CASES if case != "lltm"]


def _assert_rows_split(case, bS, n_threads, dtype, n_out=nOut):
    """The case at bS rows on n_threads (and n_out units) splits the rows."""
    nState = 8 if case == "lstm_projected" else n_out
    assert _time_loop.splits_rows(n_threads, bS, n_out, nState, GATES[CASES[case][0]],
                                  case == "lstm_projected", np.dtype(dtype).itemsize)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "seq_len"])
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("bS,n_threads", SPLITS)
@pytest.mark.parametrize("case", CASES)
def test_rows_split_against_the_reference(case, bS, n_threads, forward, with_lengths, dtype):
    _assert_rows_split(case, bS, n_threads, dtype)
    run = CASES[case][1]
    run(np.random.default_rng(bS + 7 * n_threads), sL, bS, _seq_len(sL, bS, with_lengths),
        forward, n_threads, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "seq_len"])
@pytest.mark.parametrize("case", CASES)
def test_one_step_with_the_rows_split(case, with_lengths, dtype):
    """Sequences of one step, which multiply their weights where they are (cells/_time_loop.pyx,
    reads_weights_in_place); with the rows split, and lengths 0 and 1."""
    bS, n_threads = SPLITS[0]
    _assert_rows_split(case, bS, n_threads, dtype)
    run = CASES[case][1]
    run(np.random.default_rng(bS + 11), 1, bS, _seq_len(1, bS, with_lengths), True,
        n_threads, dtype)


# (bS, n_threads): one-step calls on both sides of K / 16 rows, where a product that reads its
# weights transposed stops reading them in place, at nIn = nOut = 24 (IN_PLACE_SIZE; K = 24 to
# 96: x's or h's columns, gate blocks, all G = gates·nOut, the LLTM's nOut + nIn): 1 row, every
# one in place; 2, 4 and 6 rows, some in place and some packed; 64 rows, and the rows split (8
# and 64 rows a thread), all packed.
IN_PLACE_SIZE = (24, 24)
IN_PLACE_EDGES = [(1, 1), (2, 1), (4, 1), (6, 1), (64, 1), (16, 2), (128, 2)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("bS,n_threads", IN_PLACE_EDGES)
@pytest.mark.parametrize("case", CASES)
def test_one_step_in_place_and_packed(case, bS, n_threads, dtype):
    """Sequences of one step on both sides of the rows from which the weights a product reads
    transposed (libnd4j's layout in the backward, the LLTM's PyTorch layout in the forward) are
    packed instead of read in place (cells/_time_loop.pyx, reads_weights_in_place)."""
    if n_threads > 1:
        _assert_rows_split(case, bS, n_threads, dtype, IN_PLACE_SIZE[1])
    CASES[case][1](np.random.default_rng(bS), 1, bS, _seq_len(1, bS, True), True, n_threads,
                   dtype, size=IN_PLACE_SIZE)


def test_which_calls_read_weights_in_place():
    """Calls of one step read their weights in place: always where they need no transposing,
    where they do for fewer than K / 16 rows in the product (K: its inner dimension).
    Longer calls pack them. Arguments: sL, rows, K, transposed."""
    in_place = _time_loop.reads_weights_in_place
    assert in_place(1, 1, 6, False) and in_place(1, 4096, 6, False)
    assert in_place(1, 1, 17, True) and in_place(1, 31, 512, True)
    assert not in_place(1, 1, 16, True) and not in_place(1, 32, 512, True)
    assert not in_place(2, 1, 512, False) and not in_place(2, 1, 512, True)


def largest(fits):
    """The largest n >= 1 for which fits(n) holds (fits holds for 1 and is monotone)."""
    n = 1
    while fits(2 * n):
        n *= 2
    step = n // 2
    while step:
        n += step if fits(n + step) else 0
        step //= 2
    return n


def test_which_passes_split_rows():
    """More than one thread, at least 8 rows each, and every thread's copy of the recurrent
    weights (and Wproj) within a core's L2 (as the module read it from the machine: 1 MiB on
    AMD Zen 4 and 5, whose float32 LSTM splits up to H=256 and GRU up to H=295). Arguments:
    n_threads, bS, nOut, nState, gates, projected, itemsize."""
    splits = _time_loop.splits_rows
    limit = _time_loop.ROW_SPLIT_WEIGHT_BYTES
    assert limit == _time_loop.L2_BYTES
    lstm = largest(lambda H: H * 4 * H * 4 <= limit)    # float32 Wh [H, 4H] within the limit
    gru = largest(lambda H: H * 3 * H * 4 <= limit)
    assert splits(2, 16, lstm // 2, lstm // 2, 4, False, 4)
    assert not splits(2, 15, lstm // 2, lstm // 2, 4, False, 4)   # a thread would get 7 rows
    assert not splits(1, 64, lstm // 2, lstm // 2, 4, False, 4)   # one thread
    assert splits(3, 24, lstm, lstm, 4, False, 4)                 # the largest that splits
    assert not splits(3, 24, lstm + 1, lstm + 1, 4, False, 4)
    assert not splits(2, 64, lstm, lstm, 4, False, 8)             # double: twice the bytes
    # + Wproj [nOut, nState]: nState·4·nOut + nOut·nState elements
    projected = largest(lambda P: 5 * lstm * P * 4 <= limit)
    assert splits(2, 64, lstm, projected, 4, True, 4)
    assert not splits(2, 64, lstm, projected + 1, 4, True, 4)
    assert splits(2, 16, gru, gru, 3, False, 4)
    assert not splits(2, 16, gru + 1, gru + 1, 3, False, 4)


# (sL, bS, n_threads, size): the units split (3 rows on 2 threads), the rows split, and calls of
# one step on both sides of K / 16 rows (IN_PLACE_EDGES).
TORCH_LAYOUT_SHAPES = [(sL, 3, 2, (nIn, nOut)), (sL, 16, 2, (nIn, nOut))] + [
    (1, bS, n, IN_PLACE_SIZE) for bS, n in IN_PLACE_EDGES]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("T,bS,n_threads,size", TORCH_LAYOUT_SHAPES)
@pytest.mark.parametrize("case", SEPARATE_WEIGHTS)
def test_weights_in_torch_layout(weights_read, case, T, bS, n_threads, size, dtype):
    """Wx and Wh both F-ordered, as PyTorch's weight_ih.T and weight_hh.T: both passes read them
    where they are, transposed (no copy), against the reference, and write dL/dWx and dL/dWh
    F-ordered (in run_*), forward and in reverse with seq_len."""
    for forward in (True, False):
        Wx, Wh = CASES[case][1](np.random.default_rng(bS + T), T, bS, _seq_len(T, bS, True),
                                forward, n_threads, dtype, order="F", size=size)
        assert weights_read == [(True, Wx.ctypes.data, Wh.ctypes.data)] * 2
        weights_read.clear()


# Which of Wx and Wh the loop reads a C-ordered copy of, per memory order of the two.
COPIED = {"C": (False, False), "mixed": (True, False), "strided": (True, True)}


@pytest.mark.parametrize("order", COPIED)
def test_weights_not_both_f_ordered_are_read_in_c_order(weights_read, order):
    """C-ordered weights are read as they are; where only Wx is F-ordered ("mixed"), or neither
    is contiguous, the time loop reads C-ordered copies of those, and the gradients are
    C-ordered."""
    rng = np.random.default_rng(3)
    x, hI, Wx, Wh, b, dLdh, _ = make_seq_problem(rng, sL, 4, nIn, nOut, two_biases=True)
    if order == "mixed":
        Wx = np.asfortranarray(Wx)
    if order == "strided":  # every other column of arrays twice as wide
        Wx, Wh = (np.repeat(w, 2, axis=1)[:, ::2] for w in (Wx, Wh))
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws)
    _check([h], gru_masked_forward(x, hI, Wx, Wh, b, np.full(4, sL)), ["h"], np.float64,
           False)
    assert [(transposed, wx != Wx.ctypes.data, wh != Wh.ctypes.data)
            for transposed, wx, wh in weights_read] == [(False, *COPIED[order])] * 2
    _check_gradient_order("C", grads.dLdWx, grads.dLdWh)
