"""gruTimeLoop / gruTimeLoopBp with seq_len and forward=False (reverse direction).

The reference (gru_reference.gru_masked_*) runs every row as its own unmasked sequence over its
valid steps, in processing order, and puts the outputs back at their own time indices: it is built
only from the unmasked reference, which test_reference.py proves against finite differences.
"""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, FD_EPS, FD_TOL, assert_close, central_diff_grad,
    gru_masked_backward, gru_masked_forward, make_seq_problem, round32,
)

NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")
LENGTH_CASES = {
    "mixed": (6, [6, 0, 3, 1, 5]),        # full, empty, in between
    "all-full": (4, [4, 4, 4]),
    "all-empty": (3, [0, 0]),
    "one-row": (5, [2]),
    "wide": (7, [7, 2, 5, 0, 1, 6, 3]),   # nOut = 24 below: two threads split the units
}


def _problem(seed, sL, lengths, n_in, n_out, two_biases, dtype):
    arrays = make_seq_problem(np.random.default_rng(seed), sL, len(lengths), n_in, n_out,
                              two_biases)
    return round32(arrays) if dtype == np.float32 else arrays


def _tols(dtype):
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_SEQ_GRAD_TOL)


@pytest.mark.parametrize("case", sorted(LENGTH_CASES))
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_masked_sequences_vs_reference(case, forward, n_threads, lbr, two_biases, dtype):
    sL, lengths = LENGTH_CASES[case]
    n_out = 24 if case == "wide" else 5
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(3000 + sL + len(lengths), sL, lengths, 4, n_out,
                                                two_biases, dtype)
    seq_len = np.array(lengths)
    fwd_tol, grad_tol = _tols(dtype)
    h_ref, h_last_ref = gru_masked_forward(x, hI, Wx, Wh, b, seq_len, forward, lbr)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=seq_len,
                              forward=forward, return_workspace=True, n_threads=n_threads)
    assert_close(h, h_ref, fwd_tol, "h", dtype)
    for row, length in enumerate(lengths):
        assert np.all(h[length:, row] == 0), "padded outputs must be exactly 0"

    ref = gru_masked_backward(x, hI, Wx, Wh, b, seq_len, dLdh, dLdhLast, forward, lbr)
    for workspace in (None, ws):
        grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                    linear_before_reset=lbr, seq_len=seq_len, forward=forward,
                                    workspace=workspace, n_threads=n_threads)
        for name, g, r in zip(NAMES5, grads, ref):
            assert_close(g, r, grad_tol, name, dtype)
        for row, length in enumerate(lengths):
            assert np.all(grads[0][length:, row] == 0), "dLdx at padded steps must be exactly 0"


def test_full_lengths_equal_no_seq_len(lbr, dtype):
    """seq_len = sL for every row is the unmasked loop, bit for bit."""
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(3100, 5, [5] * 3, 4, 6, True, dtype)
    full = np.full(3, 5)
    h0 = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    h1 = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=full)
    np.testing.assert_array_equal(h0, h1)
    g0 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=lbr)
    g1 = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, linear_before_reset=lbr,
                             seq_len=full)
    for a, c in zip(g0, g1):
        np.testing.assert_array_equal(a, c)


def test_reverse_is_the_forward_loop_on_flipped_time(lbr):
    """With full lengths, reverse direction = forward direction on x[::-1], outputs flipped."""
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(3200, 6, [6] * 4, 3, 5, True, np.float64)
    h_rev = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, forward=False)
    h_flip = cells.gruTimeLoop(x[::-1], hI, Wx, Wh, b, linear_before_reset=lbr)
    assert_close(h_rev, h_flip[::-1], F64_TOL, "h")


@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
def test_masked_gradients_vs_finite_differences(forward, lbr, two_biases):
    """Every gradient of cells against central differences of cells' own float64 forward, with
    a loss on every output and on each row's final state (read at its last valid index)."""
    lengths = np.array([4, 0, 2, 3])
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(3300, 4, lengths, 3, 4, two_biases, np.float64)
    last = [(length - 1 if forward else 0) for length in lengths]

    def loss(x, hI, Wx, Wh, b):
        h = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=lengths,
                              forward=forward)
        h_last = np.array([h[t, row] if length else hI[row]
                           for row, (t, length) in enumerate(zip(last, lengths))])
        return np.sum(dLdh * h) + np.sum(dLdhLast * h_last)

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                linear_before_reset=lbr, seq_len=lengths, forward=forward)
    for name, g, f in zip(NAMES5, grads, fd):
        assert_close(g, f, FD_TOL, name, np.float64)


@pytest.mark.parametrize("bad, error, match", [
    (np.array([1, 2]), ValueError, r"seq_len.*\(2,\)"),
    (np.array([1, 2, 7]), ValueError, r"seq_len.*\[0, sL=5\].*7"),
    (np.array([1, -1, 2]), ValueError, r"seq_len.*-1"),
    (np.array([1.0, 2.0, 3.0]), TypeError, r"seq_len.*float64"),
    ([1, 2, 3], TypeError, r"seq_len.*list"),
])
def test_bad_seq_len(bad, error, match):
    x, hI, Wx, Wh, b, dLdh, _ = _problem(3400, 5, [5] * 3, 2, 3, False, np.float64)
    with pytest.raises(error, match=match):
        cells.gruTimeLoop(x, hI, Wx, Wh, b, seq_len=bad)
    with pytest.raises(error, match=match):
        cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, seq_len=bad)


def test_bad_forward_flag():
    x, hI, Wx, Wh, b, _, _ = _problem(3500, 2, [2], 2, 3, False, np.float64)
    with pytest.raises(TypeError, match="forward"):
        cells.gruTimeLoop(x, hI, Wx, Wh, b, forward="reverse")
