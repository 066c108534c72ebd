"""cells.gruCell / cells.gruCellBp against the (finite-difference-proven) reference."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, central_diff_grad, gru_cell_backward, gru_cell_forward,
    make_cell_problem, round32, sigmoid,
)

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")
# (bS, nIn, nOut): bS = 1, nIn != nOut both ways, one nOut = 1 case, a moderately large case.
SHAPES = [(1, 3, 2), (4, 5, 3), (3, 2, 6), (2, 4, 1), (5, 13, 24)]


def _problem(seed, bS, n_in, n_out, two_biases, dtype):
    rng = np.random.default_rng(seed)
    arrays = make_cell_problem(rng, bS, n_in, n_out, two_biases)
    if dtype == np.float32:
        arrays = round32(arrays)  # the reference then runs in float64 on these rounded values
    return arrays


@pytest.mark.parametrize("bS,n_in,n_out", SHAPES)
def test_gru_cell_vs_reference(lbr, two_biases, dtype, bS, n_in, n_out):
    x, hI, Wx, Wh, b, dLdh = _problem(1000 + bS * 31 + n_in * 7 + n_out, bS, n_in, n_out,
                                      two_biases, dtype)
    gates_ref, h_ref = gru_cell_forward(x, hI, Wx, Wh, b, lbr)
    grads_ref = gru_cell_backward(x, hI, Wx, Wh, b, dLdh, lbr)

    gates, h = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    fwd_tol = F64_TOL if dtype == np.float64 else F32_FWD_TOL
    assert_close(gates, gates_ref, fwd_tol, "gates", dtype)
    assert_close(h, h_ref, fwd_tol, "h", dtype)

    grads = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)
    assert len(grads) == 5
    grad_tol = F64_TOL if dtype == np.float64 else F32_CELL_GRAD_TOL
    for name, g, gr in zip(NAMES5, grads, grads_ref):
        assert_close(g, gr, grad_tol, name, dtype)
    assert grads[4].shape == b.shape
    assert_new_arrays((gates, h) + tuple(grads), (x, hI, Wx, Wh, b, dLdh))


def test_gru_cell_gradients_vs_finite_differences_of_cells(lbr, two_biases):
    """Every gradient output of gruCellBp against central differences of cells' own float64
    forward (independent of the reference)."""
    x, hI, Wx, Wh, b, dLdh = _problem(77, 2, 3, 4, two_biases, np.float64)

    def loss(x, hI, Wx, Wh, b):
        h = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr, n_threads=1)[1]
        return float(np.sum(dLdh * h))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    grads = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)
    for name, g, f in zip(NAMES5, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_gru_cell_noncontiguous_and_readonly_inputs(layout, lbr, dtype):
    x, hI, Wx, Wh, b, dLdh = _problem(79, 3, 4, 5, True, dtype)
    ref_fwd = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    ref_bp = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)
    f = LAYOUTS[layout]
    args = [f(a) for a in (x, hI, Wx, Wh, b, dLdh)]
    if layout != "readonly":
        assert not all(a.flags.c_contiguous for a in args)
    copies = [a.copy() for a in args]
    fwd = cells.gruCell(*args[:5], linear_before_reset=lbr)
    bp = cells.gruCellBp(*args, linear_before_reset=lbr)
    for name, a, c in zip(("gates", "h"), fwd, ref_fwd):
        assert_close(a, c, SAME_TOL[dtype], name, dtype)
    for name, a, c in zip(NAMES5, bp, ref_bp):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    for a, c in zip(args, copies):  # inputs untouched
        np.testing.assert_array_equal(a, c)
    # the values are the right ones, not merely self-consistent
    assert_close(fwd[1], gru_cell_forward(x, hI, Wx, Wh, b, lbr)[1],
                 F64_TOL if dtype == np.float64 else F32_FWD_TOL, "h", dtype)


def test_gru_cell_threads_agree(lbr, two_biases, dtype):
    x, hI, Wx, Wh, b, dLdh = _problem(80, 5, 13, 24, two_biases, dtype)
    out = {}
    for nt in (1, 2):
        out[nt] = (cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr, n_threads=nt)
                   + cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr, n_threads=nt))
    names = ("gates", "h") + NAMES5
    for k, name in enumerate(names):
        tol = (SAME_TOL if k < 2 else SAME_GRAD_TOL)[dtype]
        assert_close(out[2][k], out[1][k], tol, name, dtype)
    h_ref = gru_cell_forward(x, hI, Wx, Wh, b, lbr)[1]
    assert_close(out[2][1], h_ref, F64_TOL if dtype == np.float64 else F32_FWD_TOL, "h", dtype)


def test_gru_cell_libnd4j_parity():
    """What libnd4j's fused gruCell computes (single input-side bias b [3nOut]):
    r,u = sigmoid(x.Wx_ru + b_ru + hI.Wh_ru); c = tanh(x.Wx_c + b_c + r*(hI.Wh_c)).
    cells reproduces it with linear_before_reset=True and a [3nOut] bias."""
    rng = np.random.default_rng(81)
    bS, n_in, H = 4, 3, 5
    x, hI, Wx, Wh, b, _ = make_cell_problem(rng, bS, n_in, H, False)
    zru = x @ Wx[:, :2 * H] + b[:2 * H] + hI @ Wh[:, :2 * H]
    r, u = sigmoid(zru[:, :H]), sigmoid(zru[:, H:])
    c = np.tanh(x @ Wx[:, 2 * H:] + b[2 * H:] + r * (hI @ Wh[:, 2 * H:]))
    h = (1 - u) * c + u * hI
    gates, h_cells = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=True)
    assert_close(h_cells, h, F64_TOL, "h", np.float64)
    assert_close(gates, np.concatenate([r, u, c], axis=1), F64_TOL, "gates", np.float64)
    # and the reset-before variant is a different function on the same data
    h_rb = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=False)[1]
    assert np.max(np.abs(h_rb - h)) > 1e-3


def test_gru_cell_single_bias_equals_two_biases_with_zero_bh(lbr, dtype):
    x, hI, Wx, Wh, b, dLdh = _problem(82, 3, 4, 3, False, dtype)
    b2 = np.stack([b, np.zeros_like(b)])
    g1, h1 = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    g2, h2 = cells.gruCell(x, hI, Wx, Wh, b2, linear_before_reset=lbr)
    assert_close(h1, h2, SAME_TOL[dtype], "h", dtype)
    d1 = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)
    d2 = cells.gruCellBp(x, hI, Wx, Wh, b2, dLdh, linear_before_reset=lbr)
    assert d1[4].shape == b.shape and d2[4].shape == b2.shape
    assert_close(d1[4], d2[4][0], SAME_GRAD_TOL[dtype], "dLdb", dtype)


def test_gru_cell_default_is_reset_before():
    x, hI, Wx, Wh, b, dLdh = _problem(83, 2, 3, 4, True, np.float64)
    h = cells.gruCell(x, hI, Wx, Wh, b)[1]
    assert_close(h, gru_cell_forward(x, hI, Wx, Wh, b, False)[1], F64_TOL, "h")
    d = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh)
    assert_close(d[3], gru_cell_backward(x, hI, Wx, Wh, b, dLdh, False)[3], F64_TOL, "dLdWh")


@pytest.mark.parametrize("bS,n_in", [(0, 3), (3, 0), (0, 0)])
def test_gru_cell_empty_dims(lbr, two_biases, dtype, bS, n_in):
    n_out = 4
    x, hI, Wx, Wh, b, dLdh = _problem(84, bS, n_in, n_out, two_biases, dtype)
    gates, h = cells.gruCell(x, hI, Wx, Wh, b, linear_before_reset=lbr)
    assert gates.shape == (bS, 3 * n_out) and h.shape == (bS, n_out)
    assert gates.dtype == dtype and h.dtype == dtype
    grads = cells.gruCellBp(x, hI, Wx, Wh, b, dLdh, linear_before_reset=lbr)
    ref = gru_cell_backward(x, hI, Wx, Wh, b, dLdh, lbr)
    tol = F64_TOL if dtype == np.float64 else F32_CELL_GRAD_TOL
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, tol, name, dtype)
    assert_close(h, gru_cell_forward(x, hI, Wx, Wh, b, lbr)[1],
                 F64_TOL if dtype == np.float64 else F32_FWD_TOL, "h", dtype)
    if bS == 0:
        for g in grads[2:]:
            assert np.all(g == 0)
