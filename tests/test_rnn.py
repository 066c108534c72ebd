"""cells.rnnCell / rnnCellBp / rnnTimeLoop / rnnTimeLoopBp (the vanilla RNN, tanh and relu)
against the float64 reference tests/rnn_reference.py (proven against finite differences and
torch in test_rnn_reference.py), and against central differences of cells' own float64 forward.

Tolerances, relative to the scale max(1, max|expected|) (gru_reference.assert_close). float64:
F64_TOL = 1e-12 and SAME_TOL = SAME_GRAD_TOL = 1e-13 (gru_reference.py), where only the
summation order differs (measured: 1 vs 2 threads differ by <= 8e-15 on the largest case below).
float32 runs on float32-rounded inputs against the float64 reference on the same values. One
step errs as a GRU step at most (a dot of nIn + nOut <= 37 terms and one activation, relu
exact), so the cell keeps the GRU's F32_FWD_TOL = 1e-5 and F32_CELL_GRAD_TOL = 3e-5. A sequence
needs F32_RNN_TOL below.
"""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, central_diff_grad, round32,
)
from rnn_reference import (
    ACTIVATIONS, make_fd_problem, make_rnn_problem, rnn_cell_backward, rnn_cell_forward,
    rnn_seq_backward, rnn_seq_forward,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")

# float32 sequences. Nothing holds the vanilla recurrence back as a GRU's update gate does: with
# nOut = 24 and weights ~0.5, ‖Wh‖₂ ≈ 0.5·2√24 ≈ 5 > 1 (before act' shrinks it), so a step's
# rounding error grows over the following steps instead of dying out (measured: 8x over 7 steps,
# relu's states reach ~800). Over 20 seeds × both activations × both bias layouts × {unmasked
# forward, masked reverse} of (sL, bS, nIn, nOut) = (7, 5, 13, 24): h errs by <= 3.2e-6 and the
# gradients by <= 4.7e-6 relative to the scale, and 1 vs 2 threads (another summation order)
# differ by <= 2.4e-6 (h) and 5.4e-6 (gradients). The GRU's 1e-5 / 3e-5 / 2e-6 would leave
# 3x / 6x / less than 1x; 3e-5 for all of them leaves >= 5x.
F32_RNN_TOL = 3e-5


@pytest.fixture(params=ACTIVATIONS)
def activation(request):
    return request.param


def _problem(seed, sL, bS, n_in, n_out, two_biases, dtype):
    """make_rnn_problem's float64 arrays, rounded to float32 for dtype float32 (the reference
    then runs in float64 on the rounded values)."""
    arrays = make_rnn_problem(np.random.default_rng(seed), sL, bS, n_in, n_out, two_biases)
    return round32(arrays) if dtype == np.float32 else arrays


def _tol(dtype, cell_f32):
    """cells vs the reference: F64_TOL, or in float32 `cell_f32` for one step and F32_RNN_TOL
    for a sequence (cell_f32 = None)."""
    if dtype == np.float64:
        return F64_TOL
    return F32_RNN_TOL if cell_f32 is None else cell_f32


def _last(h, hI, lengths, forward):
    """Each row's final state: h at its last valid step (index 0 in reverse), hI at length 0."""
    return np.array([hI[r] if n == 0 else h[n - 1 if forward else 0, r]
                     for r, n in enumerate(lengths)])


# ---------------------------------------------------------------------------------------------
# The cell
# ---------------------------------------------------------------------------------------------
# (bS, nIn, nOut): bS = 1, nIn != nOut both ways, a moderately large case.
CELL_SHAPES = [(1, 3, 2), (4, 5, 3), (3, 2, 6), (5, 13, 24)]


@pytest.mark.parametrize("bS,n_in,n_out", CELL_SHAPES)
def test_rnn_cell_vs_reference(activation, two_biases, dtype, bS, n_in, n_out):
    x, hI, Wx, Wh, b, dLdh, _ = _problem(100 + 31 * bS + 7 * n_in + n_out, 1, bS, n_in, n_out,
                                         two_biases, dtype)
    x, dLdh = x[0], dLdh[0]
    h = cells.rnnCell(x, hI, Wx, Wh, b, activation=activation)
    assert_close(h, rnn_cell_forward(x, hI, Wx, Wh, b, activation)[0], _tol(dtype, F32_FWD_TOL),
                 "h", dtype)
    grads = cells.rnnCellBp(x, hI, Wx, Wh, b, dLdh, activation=activation)
    assert grads._fields == NAMES5
    for name, g, r in zip(NAMES5, grads, rnn_cell_backward(x, hI, Wx, Wh, b, dLdh, activation)):
        assert_close(g, r, _tol(dtype, F32_CELL_GRAD_TOL), name, dtype)
    assert grads.dLdb.shape == b.shape
    if two_biases:
        np.testing.assert_array_equal(grads.dLdb[0], grads.dLdb[1])
    assert_new_arrays((h,) + tuple(grads), (x, hI, Wx, Wh, b, dLdh))


def test_rnn_cell_gradients_vs_finite_differences_of_cells(activation, two_biases):
    """Every gradient of rnnCellBp against central differences of cells' own float64 rnnCell
    (independent of the reference); relu's pre-activations stay away from its kink."""
    x, hI, Wx, Wh, b, dLdh, _ = make_fd_problem(200, 1, 3, 4, 3, two_biases, activation)
    x, dLdh = x[0], dLdh[0]

    def loss(x, hI, Wx, Wh, b):
        return float(np.sum(dLdh * cells.rnnCell(x, hI, Wx, Wh, b, activation=activation,
                                                 n_threads=1)))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = cells.rnnCellBp(x, hI, Wx, Wh, b, dLdh, activation=activation)
    for name, g, f in zip(NAMES5, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


def test_rnn_cell_single_bias_equals_two_biases_with_zero_bh(activation, dtype):
    x, hI, Wx, Wh, b, dLdh, _ = _problem(300, 1, 3, 4, 3, False, dtype)
    x, dLdh = x[0], dLdh[0]
    b2 = np.stack([b, np.zeros_like(b)])
    assert_close(cells.rnnCell(x, hI, Wx, Wh, b, activation=activation),
                 cells.rnnCell(x, hI, Wx, Wh, b2, activation=activation), SAME_TOL[dtype], "h",
                 dtype)
    d1 = cells.rnnCellBp(x, hI, Wx, Wh, b, dLdh, activation=activation)
    d2 = cells.rnnCellBp(x, hI, Wx, Wh, b2, dLdh, activation=activation)
    assert d1.dLdb.shape == b.shape and d2.dLdb.shape == b2.shape
    assert_close(d1.dLdb, d2.dLdb[0], SAME_GRAD_TOL[dtype], "dLdb", dtype)


def test_rnn_default_activation_is_tanh():
    x, hI, Wx, Wh, b, dLdh, _ = _problem(310, 3, 2, 3, 4, True, np.float64)
    assert_close(cells.rnnCell(x[0], hI, Wx, Wh, b),
                 rnn_cell_forward(x[0], hI, Wx, Wh, b, "tanh")[0], F64_TOL, "h")
    assert_close(cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh).dLdWh,
                 rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, None, "tanh")[3], F64_TOL, "dLdWh")
    # and relu is a different function on the same data
    h_relu = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation="relu")
    assert np.max(np.abs(h_relu - cells.rnnTimeLoop(x, hI, Wx, Wh, b))) > 1e-2


def test_relu_derivative_at_zero_is_zero(two_biases, dtype):
    """Units whose columns of Wx, Wh and b are all 0 have z = 0 exactly at every step: relu'(0)
    is 0 (PyTorch's value), so no gradient flows through them, and the other units' gradients
    are the reference's."""
    sL, bS, n_in, n_out = 4, 3, 3, 5
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(320, sL, bS, n_in, n_out, two_biases, dtype)
    dead = [1, 3]
    Wx[:, dead], Wh[:, dead], b[..., dead] = 0, 0, 0
    h = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation="relu")
    assert np.all(h[..., dead] == 0)
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, activation="relu")
    ref = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, "relu")
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, _tol(dtype, None), name, dtype)
    assert np.all(grads.dLdWx[:, dead] == 0) and np.all(grads.dLdWh[:, dead] == 0)
    assert np.all(grads.dLdb[..., dead] == 0)
    assert np.any(grads.dLdWx[:, [0, 2, 4]] != 0)  # gradients do flow through the others
    cell = cells.rnnCellBp(x[0], hI, Wx, Wh, b, dLdh[0], activation="relu")
    assert np.all(cell.dLdWx[:, dead] == 0) and np.all(cell.dLdb[..., dead] == 0)


# ---------------------------------------------------------------------------------------------
# Sequences
# ---------------------------------------------------------------------------------------------
# (sL, bS, nIn, nOut): sL = 1, bS = 1, nIn != nOut both ways, a moderate case.
SEQ_SHAPES = [(1, 3, 4, 2), (4, 1, 2, 5), (3, 2, 6, 3), (7, 5, 13, 24)]


@pytest.mark.parametrize("sL,bS,n_in,n_out", SEQ_SHAPES)
def test_rnn_time_loop_vs_reference(activation, two_biases, dtype, sL, bS, n_in, n_out):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(400 + 97 * sL + 31 * bS + 7 * n_in + n_out, sL,
                                                bS, n_in, n_out, two_biases, dtype)
    h_ref = rnn_seq_forward(x, hI, Wx, Wh, b, activation)[0]
    h = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation)
    assert_close(h, h_ref, _tol(dtype, None), "h", dtype)
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, activation=activation)
    assert grads._fields == NAMES5
    ref = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation)
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, _tol(dtype, None), name, dtype)
    assert grads.dLdb.shape == b.shape
    assert_new_arrays((h,) + tuple(grads), (x, hI, Wx, Wh, b, dLdh, dLdhLast))


LENGTH_CASES = {
    "mixed": (6, [6, 0, 3, 1, 5]),        # full, empty, in between
    "all-full": (4, [4, 4, 4]),
    "all-empty": (3, [0, 0]),
    "wide": (7, [7, 2, 5, 0, 1, 6, 3]),   # nOut = 24 below: two threads split the units
}


@pytest.mark.parametrize("case", sorted(LENGTH_CASES))
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
def test_rnn_masked_sequences_vs_reference(case, forward, activation, two_biases, dtype):
    """seq_len and forward=False against the reference (every row its own loop over its valid
    steps), with the workspace and without; padded outputs and dLdx exactly 0."""
    sL, lengths = LENGTH_CASES[case]
    n_out = 24 if case == "wide" else 5
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(500 + sL + len(lengths), sL, len(lengths), 4,
                                                n_out, two_biases, dtype)
    seq_len = np.array(lengths)
    h_ref, h_last_ref, _ = rnn_seq_forward(x, hI, Wx, Wh, b, activation, seq_len, forward)
    h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation, seq_len=seq_len,
                              forward=forward, return_workspace=True)
    assert_close(h, h_ref, _tol(dtype, None), "h", dtype)
    assert_close(_last(h, hI, lengths, forward), h_last_ref, _tol(dtype, None), "hLast", dtype)
    for row, length in enumerate(lengths):
        assert np.all(h[length:, row] == 0), "padded outputs must be exactly 0"
    ref = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation, seq_len, forward)
    for workspace in (None, ws):
        grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                    workspace=workspace, activation=activation, seq_len=seq_len,
                                    forward=forward)
        for name, g, r in zip(NAMES5, grads, ref):
            assert_close(g, r, _tol(dtype, None), name, dtype)
        for row, length in enumerate(lengths):
            assert np.all(grads.dLdx[length:, row] == 0), "dLdx at padded steps must be 0"


@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
def test_rnn_masked_gradients_vs_finite_differences_of_cells(forward, activation, two_biases):
    """Every gradient of rnnTimeLoopBp against central differences of cells' own float64
    rnnTimeLoop, with a loss on every output and on each row's final state (lengths 0 and sL
    included); relu's pre-activations stay away from its kink."""
    lengths = np.array([4, 0, 2, 3])
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_fd_problem(600, 4, 4, 3, 3, two_biases, activation,
                                                       lengths, forward)

    def loss(x, hI, Wx, Wh, b):
        h = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation, seq_len=lengths,
                              forward=forward, n_threads=1)
        return float(np.sum(dLdh * h) + np.sum(dLdhLast * _last(h, hI, lengths, forward)))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, activation=activation,
                                seq_len=lengths, forward=forward)
    for name, g, f in zip(NAMES5, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


def test_rnn_full_lengths_equal_no_seq_len(activation, dtype):
    """seq_len = sL for every row is the unmasked loop, bit for bit."""
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(700, 5, 3, 4, 6, True, dtype)
    full = np.full(3, 5)
    kw = {"activation": activation}
    np.testing.assert_array_equal(cells.rnnTimeLoop(x, hI, Wx, Wh, b, **kw),
                                  cells.rnnTimeLoop(x, hI, Wx, Wh, b, seq_len=full, **kw))
    g0 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, **kw)
    g1 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, seq_len=full, **kw)
    for a, c in zip(g0, g1):
        np.testing.assert_array_equal(a, c)


def test_rnn_reverse_is_the_forward_loop_on_flipped_time(activation):
    x, hI, Wx, Wh, b, _, _ = _problem(710, 6, 4, 3, 5, True, np.float64)
    h_rev = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation, forward=False)
    h_flip = cells.rnnTimeLoop(x[::-1], hI, Wx, Wh, b, activation=activation)
    assert_close(h_rev, h_flip[::-1], F64_TOL, "h")


def test_rnn_step_by_step_equals_cells_cell(activation, two_biases):
    """The time loop is the composition of cells' own cell."""
    x, hI, Wx, Wh, b, _, _ = _problem(720, 4, 3, 2, 5, two_biases, np.float64)
    hs = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation)
    h = hI
    for t in range(x.shape[0]):
        h = cells.rnnCell(x[t], h, Wx, Wh, b, activation=activation)
        assert_close(hs[t], h, F64_TOL, f"h[{t}]")


@pytest.mark.parametrize("give_dLdh,give_last", [(True, False), (False, True), (False, False)])
def test_rnn_none_upstream_gradients(activation, dtype, give_dLdh, give_last):
    sL, bS, n_in, n_out = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(730, sL, bS, n_in, n_out, True, dtype)
    d = dLdh if give_dLdh else None
    dl = dLdhLast if give_last else None
    grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, d, dLdhLast=dl, activation=activation)
    for name, g, r in zip(NAMES5, grads, rnn_seq_backward(x, hI, Wx, Wh, b, d, dl, activation)):
        assert_close(g, r, _tol(dtype, None), name, dtype)
    if d is None and dl is None:
        assert all(np.all(g == 0) for g in grads)
    zeros = cells.rnnTimeLoopBp(
        x, hI, Wx, Wh, b, np.zeros((sL, bS, n_out), dtype) if d is None else d,
        dLdhLast=np.zeros((bS, n_out), dtype) if dl is None else dl, activation=activation)
    for name, g, z in zip(NAMES5, grads, zeros):
        assert_close(g, z, SAME_GRAD_TOL[dtype], name, dtype)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_rnn_noncontiguous_and_readonly_inputs(layout, activation, dtype):
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(740, 3, 2, 4, 3, True, dtype)
    kw = {"activation": activation, "seq_len": np.array([3, 1]), "forward": False}
    h0 = cells.rnnTimeLoop(x, hI, Wx, Wh, b, **kw)
    g0 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, **kw)
    args = [LAYOUTS[layout](a) for a in (x, hI, Wx, Wh, b, dLdh, dLdhLast)]
    copies = [a.copy() for a in args]
    assert_close(cells.rnnTimeLoop(*args[:5], **kw), h0, SAME_TOL[dtype], "h", dtype)
    for name, a, c in zip(NAMES5, cells.rnnTimeLoopBp(*args[:6], dLdhLast=args[6], **kw), g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    for a, c in zip(args, copies):  # inputs untouched
        np.testing.assert_array_equal(a, c)


# ---------------------------------------------------------------------------------------------
# The workspace
# ---------------------------------------------------------------------------------------------
def test_rnn_workspace_path_equals_recompute_path(activation, two_biases, dtype):
    sL, bS, n_in, n_out = 4, 3, 5, 6
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(800, sL, bS, n_in, n_out, two_biases, dtype)
    kw = {"activation": activation, "seq_len": np.array([4, 0, 2]), "forward": False}
    out = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **kw)
    assert isinstance(out, tuple) and len(out) == 2
    h, ws = out
    np.testing.assert_array_equal(h, cells.rnnTimeLoop(x, hI, Wx, Wh, b, **kw))
    g0 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, **kw)
    g1 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws, **kw)
    for name, a, c in zip(NAMES5, g1, g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    # the workspace is really used: one of another run (same shapes) changes the gradients
    _, ws_other = cells.rnnTimeLoop(x[::-1].copy(), hI, Wx, Wh, b, return_workspace=True, **kw)
    g2 = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws_other,
                             **kw)
    assert np.max(np.abs(g2.dLdWx.astype(float) - g0.dLdWx.astype(float))) > 1e-4


def test_rnn_workspace_is_consumed(activation):
    """The backward pass consumes its workspace (as the other families'): a second backward
    with it is a ValueError, not a wrong gradient."""
    x, hI, Wx, Wh, b, dLdh, _ = _problem(810, 4, 3, 5, 6, True, np.float64)
    kw = {"activation": activation, "seq_len": np.array([4, 0, 2])}
    _, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **kw)
    first = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws, **kw)
    for name, g, r in zip(NAMES5, first, cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, **kw)):
        assert_close(g, r, SAME_GRAD_TOL[np.dtype(np.float64)], name)
    with pytest.raises(ValueError, match=r"workspace.*used by rnnTimeLoopBp already"):
        cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws, **kw)


def test_rnn_workspace_of_other_options_or_shapes_is_refused(dtype):
    """A workspace made with another activation, seq_len, forward or other shapes is a
    ValueError naming the workspace (it would give wrong gradients)."""
    sL, bS, n_in, n_out = 3, 2, 3, 4
    x, hI, Wx, Wh, b, dLdh, _ = _problem(820, sL, bS, n_in, n_out, True, dtype)
    lengths = np.array([3, 1])
    for made, now in (({"activation": "tanh"}, {"activation": "relu"}),
                      ({"activation": "relu"}, {"activation": "tanh"}),
                      ({}, {"seq_len": lengths}),
                      ({"seq_len": lengths}, {"seq_len": lengths[::-1].copy()}),
                      ({}, {"forward": False})):
        _, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, **made)
        with pytest.raises(ValueError, match="workspace"):
            cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws, **now)
    for other_sL, other_bS in ((sL + 1, bS), (sL, bS + 1)):
        xo, hIo = _problem(821, other_sL, other_bS, n_in, n_out, True, dtype)[:2]
        _, ws = cells.rnnTimeLoop(xo, hIo, Wx, Wh, b, return_workspace=True)
        with pytest.raises(ValueError, match="workspace"):
            cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws)


# ---------------------------------------------------------------------------------------------
# Empty dimensions and threads
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sL,bS,n_in", [(0, 3, 4), (3, 0, 4), (3, 2, 0), (0, 0, 0)])
def test_rnn_empty_dims(activation, two_biases, dtype, sL, bS, n_in):
    n_out = 3
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(900, sL, bS, n_in, n_out, two_biases, dtype)
    h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, activation=activation, return_workspace=True)
    assert h.shape == (sL, bS, n_out) and h.dtype == dtype
    assert_close(h, rnn_seq_forward(x, hI, Wx, Wh, b, activation)[0], _tol(dtype, None), "h",
                 dtype)
    ref = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation)
    for workspace in (None, ws):
        grads = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast,
                                    workspace=workspace, activation=activation)
        for name, g, r, a in zip(NAMES5, grads, ref, (x, hI, Wx, Wh, b)):
            assert g.shape == a.shape and g.dtype == dtype, name
            assert_close(g, r, _tol(dtype, None), name, dtype)
        if sL == 0:  # nothing runs: the final-state gradient passes straight to hI
            np.testing.assert_array_equal(grads.dLdhI, dLdhLast)
        if sL == 0 or bS == 0:
            assert all(np.all(g == 0) for g in grads[2:])
    if sL:
        h1 = cells.rnnCell(x[0], hI, Wx, Wh, b, activation=activation)
        assert h1.shape == (bS, n_out) and h1.dtype == dtype
        cell = cells.rnnCellBp(x[0], hI, Wx, Wh, b, dLdh[0], activation=activation)
        for name, g, a in zip(NAMES5, cell, (x[0], hI, Wx, Wh, b)):
            assert g.shape == a.shape and g.dtype == dtype, name


def test_rnn_threads_agree(activation, two_biases, dtype):
    """n_threads 1 and 2 give the same values (at most another summation order), cell and time
    loop, with seq_len, recomputing and with the workspace; and the right ones."""
    x, hI, Wx, Wh, b, dLdh, dLdhLast = _problem(1000, 7, 5, 13, 24, two_biases, dtype)
    kw = {"activation": activation, "seq_len": np.array([7, 2, 0, 5, 1]), "forward": False}
    res = {}
    for nt in (1, 2):
        h, ws = cells.rnnTimeLoop(x, hI, Wx, Wh, b, return_workspace=True, n_threads=nt, **kw)
        g = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, n_threads=nt, **kw)
        gw = cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhLast, workspace=ws,
                                 n_threads=nt, **kw)
        cell = cells.rnnCellBp(x[0], hI, Wx, Wh, b, dLdh[0], activation=activation,
                               n_threads=nt)
        res[nt] = (h, cells.rnnCell(x[0], hI, Wx, Wh, b, activation=activation, n_threads=nt),
                   *g, *gw, *cell)
    names = ("h", "cell h") + NAMES5 + tuple(n + "(ws)" for n in NAMES5) + tuple(
        "cell " + n for n in NAMES5)
    for k, name in enumerate(names):
        if name.startswith("cell"):  # one step: a few ulps
            tol = (SAME_TOL if name == "cell h" else SAME_GRAD_TOL)[dtype]
        else:  # the recurrence amplifies another summation order's rounding (F32_RNN_TOL)
            tol = SAME_GRAD_TOL[dtype] if dtype == np.float64 else F32_RNN_TOL
        assert_close(res[2][k], res[1][k], tol, name, dtype)
    seq_len, forward = kw["seq_len"], kw["forward"]
    assert_close(res[2][0], rnn_seq_forward(x, hI, Wx, Wh, b, activation, seq_len, forward)[0],
                 _tol(dtype, None), "h", dtype)
    ref = rnn_seq_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, activation, seq_len, forward)
    for k, name in enumerate(NAMES5):
        assert_close(res[2][2 + k], ref[k], _tol(dtype, None), name, dtype)
