"""Prove the float64 NumPy reference (gru_reference.py) before anything is compared to it.

Every analytic gradient of the reference is checked against central finite differences of the
reference's own forward, for both variants, both bias layouts, the sequence BPTT and the block
cell. The forward itself is checked against torch / ONNX in test_cross_frameworks.py.
"""
import numpy as np
import pytest

from gru_reference import (
    FD_EPS, FD_TOL, assert_close, block_to_canonical, central_diff_grad,
    gru_block_cell_backward, gru_block_cell_forward, gru_cell_backward, gru_cell_forward,
    gru_time_loop_backward, gru_time_loop_forward, make_block_problem, make_cell_problem,
    make_seq_problem, sigmoid,
)

NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")


@pytest.mark.parametrize("bS,n_in,n_out", [(2, 3, 4), (1, 2, 3), (3, 1, 1)])
def test_reference_cell_backward_vs_finite_differences(lbr, two_biases, bS, n_in, n_out):
    rng = np.random.default_rng(100 + 7 * bS + n_in + 3 * n_out)
    x, hI, Wx, Wh, b, dLdh = make_cell_problem(rng, bS, n_in, n_out, two_biases)

    def loss(x, hI, Wx, Wh, b):
        return float(np.sum(dLdh * gru_cell_forward(x, hI, Wx, Wh, b, lbr)[1]))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    ana = gru_cell_backward(x, hI, Wx, Wh, b, dLdh, lbr)
    for name, a, f in zip(NAMES5, ana, fd):
        assert np.max(np.abs(f)) > 1e-3, f"{name}: degenerate test (gradient ~0)"
        assert_close(a, f, FD_TOL, name)


def test_reference_reset_before_bias_gradients_coincide():
    # For reset-before, bh enters every pre-activation exactly like bx: dL/dbh == dL/dbx.
    rng = np.random.default_rng(5)
    x, hI, Wx, Wh, b, dLdh = make_cell_problem(rng, 3, 2, 4, True)
    db = gru_cell_backward(x, hI, Wx, Wh, b, dLdh, False)[4]
    np.testing.assert_allclose(db[0], db[1], rtol=1e-14, atol=1e-15)
    # ... but not for linear-before-reset (bh_c sits inside r*(...)).
    db = gru_cell_backward(x, hI, Wx, Wh, b, dLdh, True)[4]
    assert np.max(np.abs(db[0, 8:] - db[1, 8:])) > 1e-3


def test_reference_variants_differ():
    # Guards against the two variants silently computing the same thing.
    rng = np.random.default_rng(6)
    x, hI, Wx, Wh, b, _ = make_cell_problem(rng, 3, 2, 4, True)
    h0 = gru_cell_forward(x, hI, Wx, Wh, b, False)[1]
    h1 = gru_cell_forward(x, hI, Wx, Wh, b, True)[1]
    assert np.max(np.abs(h0 - h1)) > 1e-3


def test_reference_cell_forward_by_elementwise_loops():
    # A second, loop-per-element forward (no matrix products, no block slicing) agrees.
    rng = np.random.default_rng(8)
    bS, n_in, H = 2, 3, 3
    for two in (False, True):
        x, hI, Wx, Wh, b, _ = make_cell_problem(rng, bS, n_in, H, two)
        bx = b if b.ndim == 1 else b[0]
        bh = np.zeros(3 * H) if b.ndim == 1 else b[1]
        for lbr in (False, True):
            h_ref = gru_cell_forward(x, hI, Wx, Wh, b, lbr)[1]
            h = np.zeros((bS, H))
            for s in range(bS):
                r = [sigmoid(sum(x[s, i] * Wx[i, j] for i in range(n_in)) + bx[j]
                             + sum(hI[s, k] * Wh[k, j] for k in range(H)) + bh[j])
                     for j in range(H)]
                u = [sigmoid(sum(x[s, i] * Wx[i, H + j] for i in range(n_in)) + bx[H + j]
                             + sum(hI[s, k] * Wh[k, H + j] for k in range(H)) + bh[H + j])
                     for j in range(H)]
                for j in range(H):
                    xc = sum(x[s, i] * Wx[i, 2 * H + j] for i in range(n_in)) + bx[2 * H + j]
                    if lbr:
                        hc = sum(hI[s, k] * Wh[k, 2 * H + j] for k in range(H)) + bh[2 * H + j]
                        c = np.tanh(xc + r[j] * hc)
                    else:
                        hc = (sum(r[k] * hI[s, k] * Wh[k, 2 * H + j] for k in range(H))
                              + bh[2 * H + j])
                        c = np.tanh(xc + hc)
                    h[s, j] = (1 - u[j]) * c + u[j] * hI[s, j]
            np.testing.assert_allclose(h_ref, h, rtol=0, atol=1e-14)


@pytest.mark.parametrize("sL,bS,n_in,n_out", [(3, 2, 3, 2), (1, 1, 2, 3), (4, 1, 1, 2)])
def test_reference_time_loop_backward_vs_finite_differences(lbr, two_biases, sL, bS, n_in, n_out):
    rng = np.random.default_rng(200 + sL + 5 * bS + 11 * n_in + n_out)
    x, hI, Wx, Wh, b, dLdh, dLdhLast = make_seq_problem(rng, sL, bS, n_in, n_out, two_biases)

    def loss(x, hI, Wx, Wh, b):
        hs = gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)[0]
        return float(np.sum(dLdh * hs) + np.sum(dLdhLast * hs[-1]))

    fd = central_diff_grad(loss, (x, hI, Wx, Wh, b), FD_EPS)
    ana = gru_time_loop_backward(x, hI, Wx, Wh, b, dLdh, dLdhLast, lbr)
    for name, a, f in zip(NAMES5, ana, fd):
        assert np.max(np.abs(f)) > 1e-3, f"{name}: degenerate test"
        assert_close(a, f, FD_TOL, name)


def test_reference_time_loop_forward_is_a_chain_of_cells():
    rng = np.random.default_rng(9)
    x, hI, Wx, Wh, b, _, _ = make_seq_problem(rng, 3, 2, 3, 4, True)
    hs, gs = gru_time_loop_forward(x, hI, Wx, Wh, b, True)
    g1, h1 = gru_cell_forward(x[0], hI, Wx, Wh, b, True)
    g2, h2 = gru_cell_forward(x[1], h1, Wx, Wh, b, True)
    np.testing.assert_array_equal(hs[0], h1)
    np.testing.assert_array_equal(hs[1], h2)
    np.testing.assert_array_equal(gs[1], g2)


@pytest.mark.parametrize("bS,n_in,n_out", [(2, 3, 4), (1, 4, 2), (3, 2, 1)])
@pytest.mark.parametrize("which", ["all", "r", "u", "c", "h"])
def test_reference_block_cell_backward_vs_finite_differences(bS, n_in, n_out, which):
    rng = np.random.default_rng(300 + bS + 3 * n_in + 17 * n_out)
    inputs, ups = make_block_problem(rng, bS, n_in, n_out)
    keep = {"all": (1, 1, 1, 1), "r": (1, 0, 0, 0), "u": (0, 1, 0, 0),
            "c": (0, 0, 1, 0), "h": (0, 0, 0, 1)}[which]
    ups = tuple(g * k for g, k in zip(ups, keep))

    def loss(*args):
        outs = gru_block_cell_forward(*args)
        return float(sum(np.sum(g * o) for g, o in zip(ups, outs)))

    fd = central_diff_grad(loss, inputs, FD_EPS)
    ana = gru_block_cell_backward(*inputs, *ups)
    names = ("dLdx", "dLdhLast", "dLdWru", "dLdWc", "dLdbru", "dLdbc")
    for name, a, f in zip(names, ana, fd):
        assert_close(a, f, FD_TOL, name)


def test_reference_block_cell_equals_reset_before_cell():
    rng = np.random.default_rng(10)
    (x, hLast, Wru, Wc, bru, bc), _ = make_block_problem(rng, 3, 4, 5)
    r, u, c, h = gru_block_cell_forward(x, hLast, Wru, Wc, bru, bc)
    Wx, Wh, b = block_to_canonical(Wru, Wc, bru, bc, 4)
    gates, h2 = gru_cell_forward(x, hLast, Wx, Wh, b, False)
    np.testing.assert_allclose(h, h2, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.concatenate([r, u, c], axis=1), gates, rtol=0, atol=1e-15)
