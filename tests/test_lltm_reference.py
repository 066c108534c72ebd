"""The LLTM reference (tests/lltm_reference.py) proven against central finite differences of its
own forward pass: the cell, and sequences with seq_len masks in both directions."""
import numpy as np
import pytest

from gru_reference import FD_EPS, FD_TOL, assert_close, central_diff_grad
from lltm_reference import (
    elu, elu_grad, lltm_cell_backward, lltm_cell_forward, lltm_seq_backward, lltm_seq_forward,
    make_fd_problem,
)

CELL_NAMES = ("d_old_h", "d_input", "d_weights", "d_bias", "d_old_cell")
SEQ_NAMES = ("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI")


def test_elu_and_its_derivative():
    z = np.array([-30.0, -1.0, -1e-3, 0.0, 1e-3, 2.0])
    np.testing.assert_allclose(elu(z), [np.expm1(-30.0), np.expm1(-1.0), np.expm1(-1e-3), 0.0,
                                        1e-3, 2.0], rtol=1e-15)
    # PyTorch autograd's value at the kink is alpha * e^0 = 1
    np.testing.assert_allclose(elu_grad(z), [np.exp(-30.0), np.exp(-1.0), np.exp(-1e-3), 1.0,
                                             1.0, 1.0], rtol=1e-15)


@pytest.mark.parametrize("bS,n_in,S", [(1, 3, 2), (3, 2, 4), (2, 0, 3)])
def test_reference_cell_backward_vs_finite_differences(bS, n_in, S):
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = make_fd_problem(10 + bS + n_in + S, 1, bS, n_in, S)
    x = x[0]

    def loss(h, x, W, b, c):
        new_h, new_c = lltm_cell_forward(x, W, b, h, c)[:2]
        return float(np.sum(dLdhL * new_h) + np.sum(dLdcL * new_c))

    fd = central_diff_grad(loss, (hI, x, W, b, cI), FD_EPS)
    grads = lltm_cell_backward(x, W, b, hI, cI, dLdhL, dLdcL)
    for name, g, f in zip(CELL_NAMES, grads, fd):
        assert_close(g, f, FD_TOL, name)


@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("lens", [None, (3, 0, 1, 2)])
def test_reference_sequence_backward_vs_finite_differences(forward, lens):
    sL, bS, n_in, S = 3, 4, 2, 3
    seq_len = None if lens is None else np.array(lens)
    x, W, b, hI, cI, dLdh, dLdhL, dLdcL = make_fd_problem(20, sL, bS, n_in, S, seq_len, forward)

    def loss(x, W, b, hI, cI):
        h, hL, cL = lltm_seq_forward(x, W, b, hI, cI, seq_len, forward)[:3]
        return float(np.sum(dLdh * h) + np.sum(dLdhL * hL) + np.sum(dLdcL * cL))

    fd = central_diff_grad(loss, (x, W, b, hI, cI), FD_EPS)
    grads = lltm_seq_backward(x, W, b, hI, cI, dLdh, dLdhL, dLdcL, seq_len, forward)
    for name, g, f in zip(SEQ_NAMES, grads, fd):
        assert np.max(np.abs(f)) > 1e-3, name
        assert_close(g, f, FD_TOL, name)


def test_reference_sequence_masks_and_direction():
    """The sequence rule, spelled out: padded outputs are 0, a row of length 0 keeps its initial
    state, and reverse runs each row's valid prefix from its last index down to 0."""
    sL, bS, n_in, S = 4, 3, 2, 3
    x, W, b, hI, cI = make_fd_problem(30, sL, bS, n_in, S)[:5]
    seq_len = np.array([4, 0, 2])
    h, hL, cL = lltm_seq_forward(x, W, b, hI, cI, seq_len, False)[:3]
    assert np.all(h[:, 1] == 0) and np.all(h[2:, 2] == 0)
    np.testing.assert_array_equal(hL[1], hI[1])
    np.testing.assert_array_equal(cL[1], cI[1])
    # row 2 reversed: time index 1 first, then 0, whose output is the final state
    h1, c1 = lltm_cell_forward(x[1, 2:], W, b, hI[2:], cI[2:])[:2]
    h0, c0 = lltm_cell_forward(x[0, 2:], W, b, h1, c1)[:2]
    np.testing.assert_allclose(h[1, 2], h1[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(h[0, 2], h0[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(cL[2], c0[0], rtol=0, atol=1e-15)
