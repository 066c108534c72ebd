"""cells.gruBlockCell / cells.gruBlockCellBp (libnd4j block cell = TF GRUBlockCell)."""
import itertools

import numpy as np
import pytest

import cells
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, block_to_canonical, central_diff_grad,
    gru_block_cell_backward, gru_block_cell_forward, make_block_problem, round32,
)

OUT4 = ("r", "u", "c", "h")
NAMES6 = ("dLdx", "dLdhLast", "dLdWru", "dLdWc", "dLdbru", "dLdbc")
SHAPES = [(1, 3, 2), (4, 2, 5), (3, 6, 1), (5, 13, 24)]


def _problem(seed, bS, n_in, n_out, dtype):
    rng = np.random.default_rng(seed)
    inputs, ups = make_block_problem(rng, bS, n_in, n_out)
    if dtype == np.float32:
        inputs, ups = round32(inputs), round32(ups)
    return inputs, ups


def _tols(dtype):
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_CELL_GRAD_TOL)


@pytest.mark.parametrize("bS,n_in,n_out", SHAPES)
def test_gru_block_cell_vs_reference(dtype, bS, n_in, n_out):
    inputs, ups = _problem(3000 + 31 * bS + 7 * n_in + n_out, bS, n_in, n_out, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    outs = cells.gruBlockCell(*inputs)
    assert len(outs) == 4
    for name, o, r in zip(OUT4, outs, gru_block_cell_forward(*inputs)):
        assert_close(o, r, fwd_tol, name, dtype)
    grads = cells.gruBlockCellBp(*inputs, *ups)
    assert len(grads) == 6
    for name, g, r in zip(NAMES6, grads, gru_block_cell_backward(*inputs, *ups)):
        assert_close(g, r, grad_tol, name, dtype)
    assert_new_arrays(tuple(outs) + tuple(grads), tuple(inputs) + tuple(ups))


@pytest.mark.parametrize("mask", list(itertools.product((0, 1), repeat=4)))
def test_gru_block_cell_bp_none_combinations(mask):
    """Each of dLdr, dLdu, dLdc, dLdh may be None (= zero); each is chained separately (a
    wrong chaining of any one of them shows up in the single-gradient cases)."""
    inputs, ups = _problem(3100, 3, 4, 3, np.float64)
    given = tuple(g if m else None for g, m in zip(ups, mask))
    grads = cells.gruBlockCellBp(*inputs, *given)
    ref = gru_block_cell_backward(*inputs, *given)
    for name, g, r in zip(NAMES6, grads, ref):
        assert_close(g, r, F64_TOL, name, np.float64)
    if not any(mask):
        for g in grads:
            assert np.all(g == 0)
    # keywords work too, and explicit zeros equal None
    zeros = tuple(g if m else np.zeros_like(g) for g, m in zip(ups, mask))
    kw = dict(zip(("dLdr", "dLdu", "dLdc", "dLdh"), zeros))
    for name, g, r in zip(NAMES6, cells.gruBlockCellBp(*inputs, **kw), ref):
        assert_close(g, r, F64_TOL, name, np.float64)


def test_gru_block_cell_gradients_vs_finite_differences_of_cells():
    inputs, ups = _problem(3200, 2, 3, 4, np.float64)

    def loss(*args):
        outs = cells.gruBlockCell(*args, n_threads=1)
        return float(sum(np.sum(g * o) for g, o in zip(ups, outs)))

    fd = central_diff_grad(loss, inputs, FD_EPS)
    for name, g, f in zip(NAMES6, cells.gruBlockCellBp(*inputs, *ups), fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


def test_gru_block_cell_equals_reset_before_gru_cell(dtype):
    """The block cell is cells.gruCell(reset-before) with Wx = [Wru[:nIn] | Wc[:nIn]],
    Wh = [Wru[nIn:] | Wc[nIn:]], b = [bru | bc]: forward and (dLdh-only) gradients."""
    n_in, H = 4, 3
    (x, hLast, Wru, Wc, bru, bc), (_, _, _, dLdh) = _problem(3300, 3, n_in, H, dtype)
    Wx, Wh, b = (np.asarray(a, dtype) for a in block_to_canonical(Wru, Wc, bru, bc, n_in))
    r, u, c, h = cells.gruBlockCell(x, hLast, Wru, Wc, bru, bc)
    gates, h2 = cells.gruCell(x, hLast, Wx, Wh, b, linear_before_reset=False)
    fwd_tol, grad_tol = _tols(dtype)
    assert_close(h, h2, fwd_tol, "h", dtype)
    assert_close(np.concatenate([r, u, c], axis=1), gates, fwd_tol, "gates", dtype)
    dx, dh, dWru, dWc, dbru, dbc = cells.gruBlockCellBp(x, hLast, Wru, Wc, bru, bc,
                                                         None, None, None, dLdh)
    ex, eh, eWx, eWh, eb = cells.gruCellBp(x, hLast, Wx, Wh, b, dLdh, linear_before_reset=False)
    assert_close(dx, ex, grad_tol, "dLdx", dtype)
    assert_close(dh, eh, grad_tol, "dLdhLast", dtype)
    got = block_to_canonical(dWru.astype(float), dWc.astype(float), dbru.astype(float),
                             dbc.astype(float), n_in)
    for name, g, e in zip(("dLdWx", "dLdWh", "dLdb"), got, (eWx, eWh, eb)):
        assert_close(g, e.astype(float), grad_tol, name)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_gru_block_cell_noncontiguous_and_readonly(layout, dtype):
    inputs, ups = _problem(3400, 3, 4, 5, dtype)
    o0 = cells.gruBlockCell(*inputs)
    g0 = cells.gruBlockCellBp(*inputs, *ups)
    f = LAYOUTS[layout]
    a_in = [f(a) for a in inputs]
    a_up = [f(a) for a in ups]
    copies = [a.copy() for a in a_in + a_up]
    o1 = cells.gruBlockCell(*a_in)
    g1 = cells.gruBlockCellBp(*a_in, *a_up)
    for name, a, c in zip(OUT4, o1, o0):
        assert_close(a, c, SAME_TOL[dtype], name, dtype)
    for name, a, c in zip(NAMES6, g1, g0):
        assert_close(a, c, SAME_GRAD_TOL[dtype], name, dtype)
    for a, c in zip(a_in + a_up, copies):
        np.testing.assert_array_equal(a, c)
    assert_close(o1[3], gru_block_cell_forward(*inputs)[3], _tols(dtype)[0], "h", dtype)


def test_gru_block_cell_threads_agree(dtype):
    inputs, ups = _problem(3500, 5, 13, 24, dtype)
    res = {nt: tuple(cells.gruBlockCell(*inputs, n_threads=nt))
           + tuple(cells.gruBlockCellBp(*inputs, *ups, n_threads=nt)) for nt in (1, 2)}
    for k, name in enumerate(OUT4 + NAMES6):
        tol = (SAME_TOL if k < 4 else SAME_GRAD_TOL)[dtype]
        assert_close(res[2][k], res[1][k], tol, name, dtype)


@pytest.mark.parametrize("bS,n_in", [(0, 3), (3, 0), (0, 0)])
def test_gru_block_cell_empty_dims(dtype, bS, n_in):
    H = 4
    inputs, ups = _problem(3600, bS, n_in, H, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    outs = cells.gruBlockCell(*inputs)
    for name, o, r in zip(OUT4, outs, gru_block_cell_forward(*inputs)):
        assert_close(o, r, fwd_tol, name, dtype)
    grads = cells.gruBlockCellBp(*inputs, *ups)
    for name, g, r in zip(NAMES6, grads, gru_block_cell_backward(*inputs, *ups)):
        assert_close(g, r, grad_tol, name, dtype)
    if bS == 0:
        for g in grads[2:]:
            assert np.all(g == 0)
