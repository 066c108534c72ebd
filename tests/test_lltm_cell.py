"""cells.lltm_forward / cells.lltm_backward (PyTorch's C++-extension tutorial LLTM) against the
finite-difference-proven reference, finite differences of cells itself, and torch autograd."""
import numpy as np
import pytest

import cells
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F64_TOL, FD_EPS, FD_TOL, LAYOUTS, SAME_GRAD_TOL, SAME_TOL,
    assert_close, assert_new_arrays, central_diff_grad, round32,
)
from lltm_reference import (
    lltm_cell_backward, lltm_cell_forward, make_fd_problem, make_lltm_problem,
)

FWD_NAMES = ("new_h", "new_cell", "input_gate", "output_gate", "candidate_cell", "X",
             "gate_weights")
BP_NAMES = ("d_old_h", "d_input", "d_weights", "d_bias", "d_old_cell")
# (B, nIn, S): B = 1, nIn != S both ways, S = 1, nIn = 0, and S = 24 (two threads split it).
SHAPES = [(1, 3, 2), (4, 5, 3), (3, 2, 6), (2, 4, 1), (3, 0, 2), (5, 13, 24)]

# Tolerances (gru_reference.py justifies them for the GRU; the LLTM cell is the same kind of
# computation: one dot product of S + nIn <= 37 terms per pre-activation, then σ, elu, tanh and
# a few products). float32: cells' exp-based σ/tanh/elu err by a few 1e-8 absolute (elu near 0:
# e^z - 1 about 1e-7 absolute); the cell state c' = c + n∘i is not bounded by 1, which the
# comparison's scale (max(1, max|expected|)) absorbs.


def _cell_problem(seed, B, n_in, S, dtype=np.float64):
    x, W, b, hI, cI, _, gh, gc = make_lltm_problem(np.random.default_rng(seed), 1, B, n_in, S)
    arrays = (x[0], W, b, hI, cI, gh, gc)
    return round32(arrays) if dtype == np.float32 else arrays


def _tols(dtype):
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_CELL_GRAD_TOL)


def _backward(fwd, W, gh, gc, **kw):
    new_h, new_c, i, o, n, X, z = fwd
    return cells.lltm_backward(gh, gc, new_c, i, o, n, X, z, W, **kw)


@pytest.mark.parametrize("B,n_in,S", SHAPES)
def test_lltm_cell_vs_reference(dtype, B, n_in, S):
    x, W, b, h, c, gh, gc = _cell_problem(100 + 7 * B + 3 * n_in + S, B, n_in, S, dtype)
    fwd_tol, grad_tol = _tols(dtype)
    out = cells.lltm_forward(x, W, b, h, c)
    assert len(out) == 7
    for name, a, r in zip(FWD_NAMES, out, lltm_cell_forward(x, W, b, h, c)):
        assert_close(a, r, fwd_tol, name, dtype)
    grads = _backward(out, W, gh, gc)
    assert len(grads) == 5
    for name, g, r in zip(BP_NAMES, grads, lltm_cell_backward(x, W, b, h, c, gh, gc)):
        assert_close(g, r, grad_tol, name, dtype)
    assert grads[3].shape == b.shape
    assert_new_arrays(out + grads, (x, W, b, h, c, gh, gc))


def test_lltm_cell_gradients_vs_finite_differences_of_cells():
    """Every gradient output of lltm_backward against central differences of cells' own float64
    lltm_forward, on a problem whose candidate pre-activations stay away from ELU's kink."""
    x, W, b, h, c, _, gh, gc = make_fd_problem(150, 1, 3, 4, 3)
    x = x[0]

    def loss(h, x, W, b, c):
        new_h, new_c = cells.lltm_forward(x, W, b, h, c, n_threads=1)[:2]
        return float(np.sum(gh * new_h) + np.sum(gc * new_c))

    fd = central_diff_grad(loss, (h, x, W, b, c), FD_EPS)
    grads = _backward(cells.lltm_forward(x, W, b, h, c), W, gh, gc)
    for name, g, f in zip(BP_NAMES, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name, np.float64)


def test_lltm_cell_d_old_cell_formula(dtype):
    """d_old_cell = grad_cell + grad_h∘o∘(1 - tanh²(new_cell)), as the brief states it."""
    x, W, b, h, c, gh, gc = _cell_problem(160, 3, 4, 5, dtype)
    out = cells.lltm_forward(x, W, b, h, c)
    new_c, o = out[1].astype(float), out[3].astype(float)
    expected = gc + gh * o * (1 - np.tanh(new_c) ** 2)
    assert_close(_backward(out, W, gh, gc)[4], expected, _tols(dtype)[1], "d_old_cell", dtype)


def _torch_lltm(torch, x, W, b, h, c):
    S = h.shape[1]
    X = torch.cat([h, x], dim=1)
    z = torch.addmm(b, X, W.t())
    i = torch.sigmoid(z[:, :S])
    o = torch.sigmoid(z[:, S:2 * S])
    n = torch.nn.functional.elu(z[:, 2 * S:], alpha=1.0)
    new_c = c + n * i
    return torch.tanh(new_c) * o, new_c, i, o, n, X, z


def _torch_cell_check(x, W, b, h, c, gh, gc, tol):
    torch = pytest.importorskip("torch")
    leaves = [torch.from_numpy(np.array(a, np.float64)).requires_grad_(True)
              for a in (x, W, b, h, c)]
    t_out = _torch_lltm(torch, *leaves)
    (t_out[0] * torch.from_numpy(gh) + t_out[1] * torch.from_numpy(gc)).sum().backward()
    out = cells.lltm_forward(x, W, b, h, c)
    for name, a, t in zip(FWD_NAMES, out, t_out):
        assert_close(a, t.detach().numpy(), tol, name)
    grads = _backward(out, W, gh, gc)
    tx, tW, tb, th, tc = (leaf.grad.numpy() for leaf in leaves)
    for name, g, t in zip(BP_NAMES, grads, (th, tx, tW, tb, tc)):
        assert_close(g, t, tol, name)
    return grads


@pytest.mark.parametrize("B,n_in,S", [(3, 4, 5), (1, 6, 2), (5, 13, 24)])
def test_lltm_cell_vs_torch_autograd(B, n_in, S):
    # torch evaluates the same float64 formulas: agreement to rounding, so F64_TOL.
    _torch_cell_check(*_cell_problem(170 + B + n_in + S, B, n_in, S), F64_TOL)


def test_lltm_cell_elu_kink_follows_torch_autograd():
    """Zero weights and bias: every pre-activation is exactly 0, where elu'(0) = α·e⁰ = 1 in
    PyTorch autograd (the tutorial's d_elu gives 0 there). i = o = 1/2, n = 0, so
    dz2 = dĉ·i·1 = dĉ/2 and d_bias's candidate block is Σ_b dĉ/2."""
    B, n_in, S = 3, 4, 5
    x, W, b, h, c, gh, gc = _cell_problem(180, B, n_in, S)
    W, b = np.zeros_like(W), np.zeros_like(b)
    grads = _torch_cell_check(x, W, b, h, c, gh, gc, F64_TOL)
    dct = gh * 0.5 * (1 - np.tanh(c) ** 2) + gc
    assert_close(grads[3][2 * S:], 0.5 * dct.sum(axis=0), F64_TOL, "d_bias (candidate)")
    assert np.all(np.abs(grads[3][2 * S:]) > 1e-6)
    # float32 too (its own ELU and derivative in include/cells/common.h)
    x32, h32, c32, gh32, gc32 = round32((x, h, c, gh, gc))
    out = cells.lltm_forward(x32, W.astype(np.float32), b.astype(np.float32), h32, c32)
    assert np.all(out[4] == 0) and np.all(out[6] == 0)
    g32 = _backward(out, W.astype(np.float32), gh32, gc32)
    dct32 = gh32 * 0.5 * (1 - np.tanh(c32.astype(float)) ** 2) + gc32
    assert_close(g32[3][2 * S:], 0.5 * dct32.sum(axis=0), F32_CELL_GRAD_TOL, "d_bias f32")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_lltm_cell_noncontiguous_and_readonly_inputs(layout, dtype):
    x, W, b, h, c, gh, gc = _cell_problem(190, 3, 4, 5, dtype)
    out0 = cells.lltm_forward(x, W, b, h, c)
    g0 = _backward(out0, W, gh, gc)
    f = LAYOUTS[layout]
    args = [f(a) for a in (x, W, b, h, c)]
    if layout != "readonly":
        assert not all(a.flags.c_contiguous for a in args)
    copies = [a.copy() for a in args]
    out1 = cells.lltm_forward(*args)
    for name, a, r in zip(FWD_NAMES, out1, out0):
        assert_close(a, r, SAME_TOL[dtype], name, dtype)
    bp_args = [f(a) for a in (gh, gc) + tuple(out0[1:]) + (W,)]
    g1 = cells.lltm_backward(*bp_args)
    for name, a, r in zip(BP_NAMES, g1, g0):
        assert_close(a, r, SAME_GRAD_TOL[dtype], name, dtype)
    for a, cp in zip(args, copies):
        np.testing.assert_array_equal(a, cp)
    assert_close(out1[0], lltm_cell_forward(x, W, b, h, c)[0], _tols(dtype)[0], "new_h", dtype)


def test_lltm_cell_threads_agree(dtype):
    x, W, b, h, c, gh, gc = _cell_problem(200, 5, 13, 24, dtype)
    res = {}
    for nt in (1, 2):
        out = cells.lltm_forward(x, W, b, h, c, n_threads=nt)
        res[nt] = out + _backward(out, W, gh, gc, n_threads=nt)
    for k, name in enumerate(FWD_NAMES + BP_NAMES):
        tol = (SAME_TOL if k < 7 else SAME_GRAD_TOL)[dtype]
        assert_close(res[2][k], res[1][k], tol, name, dtype)
    ref = lltm_cell_backward(x, W, b, h, c, gh, gc)
    for name, g, r in zip(BP_NAMES, res[2][7:], ref):
        assert_close(g, r, _tols(dtype)[1], name, dtype)


@pytest.mark.parametrize("B,n_in", [(0, 3), (2, 0), (0, 0)])
def test_lltm_cell_empty_dims(dtype, B, n_in):
    S = 3
    x, W, b, h, c, gh, gc = _cell_problem(210, B, n_in, S, dtype)
    out = cells.lltm_forward(x, W, b, h, c)
    shapes = [(B, S)] * 5 + [(B, S + n_in), (B, 3 * S)]
    assert [a.shape for a in out] == shapes and all(a.dtype == dtype for a in out)
    grads = _backward(out, W, gh, gc)
    assert [g.shape for g in grads] == [(B, S), (B, n_in), (3 * S, S + n_in), (3 * S,), (B, S)]
    for name, g, r in zip(BP_NAMES, grads, lltm_cell_backward(x, W, b, h, c, gh, gc)):
        assert_close(g, r, _tols(dtype)[1], name, dtype)
    if B == 0:
        assert np.all(grads[2] == 0) and np.all(grads[3] == 0)
