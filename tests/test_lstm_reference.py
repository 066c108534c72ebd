"""Prove the float64 NumPy LSTM reference (lstm_reference.py) before anything is compared to it.

Every analytic gradient of the reference is checked against central finite differences of the
reference's own forward: the cell and the sequence, with and without peepholes and clipping,
with seq_len masks, forward and reverse. The forward is checked against torch and ONNX Runtime
in test_lstm_cross_frameworks.py, and by an element-by-element loop here.
"""
import numpy as np
import pytest

from gru_reference import FD_EPS, FD_TOL, assert_close, central_diff_grad, sigmoid
from lstm_reference import (
    CLIP_MARGIN, lstm_cell_backward, lstm_cell_forward, lstm_time_loop_backward,
    lstm_time_loop_forward, make_lstm_problem, pick_cell_clip,
)

INPUTS = ("x", "Wx", "Wr", "b", "hI", "cI", "Wp")


def _cell_problem(seed, bS, n_in, n_out, peepholes):
    p = make_lstm_problem(np.random.default_rng(seed), 1, bS, n_in, n_out, peepholes)
    p["x"], p["dLdh"] = p["x"][0], p["dLdh"][0]
    return p


def _clip_of(p, clipping, seq_len=None, forward=True):
    return pick_cell_clip(p, seq_len, forward) if clipping else 0.0


@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "peep"])
@pytest.mark.parametrize("clipping", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("bS,n_in,n_out", [(3, 4, 5), (1, 2, 3), (4, 3, 2)])
def test_reference_cell_backward_vs_finite_differences(peepholes, clipping, bS, n_in, n_out):
    p = _cell_problem(7000 + bS * 10 + n_in + n_out, bS, n_in, n_out, peepholes)
    seq = {k: (v[None] if k == "x" else v) for k, v in p.items()}
    clip = _clip_of(seq, clipping)
    names = [n for n in INPUTS if p[n] is not None]

    def loss(*arrays):
        a = dict(p, **dict(zip(names, arrays)))
        h, c = lstm_cell_forward(a["x"], a["Wx"], a["Wr"], a["b"], a["hI"], a["cI"], a["Wp"],
                                 clip)
        return float(np.sum(p["dLdh"] * h) + np.sum(p["dLdcL"] * c))

    fd = central_diff_grad(loss, [p[n] for n in names], FD_EPS)
    ana = lstm_cell_backward(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], p["dLdh"],
                             p["dLdcL"], p["Wp"], clip)
    for name, f in zip(names, fd):
        a = ana[INPUTS.index(name)]
        assert np.max(np.abs(f)) > 1e-3, f"{name}: degenerate test (gradient ~0)"
        assert_close(a, f, FD_TOL, name)
    if clipping:
        c_raw = lstm_cell_forward(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], p["Wp"],
                                  clip, return_cache=True)[2]["c_raw"]
        assert np.any(np.abs(c_raw) > clip + CLIP_MARGIN)


SEQ_CASES = [
    # (sL, bS, nIn, nOut, seq_len)
    (4, 3, 3, 2, None),
    (5, 4, 2, 3, [5, 0, 2, 1]),
    (3, 2, 4, 2, [3, 2]),
]


@pytest.mark.parametrize("peepholes", [False, True], ids=["plain", "peep"])
@pytest.mark.parametrize("clipping", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("forward", [True, False], ids=["fwd", "rev"])
@pytest.mark.parametrize("sL,bS,n_in,n_out,seq_len", SEQ_CASES)
def test_reference_sequence_backward_vs_finite_differences(peepholes, clipping, forward, sL, bS,
                                                           n_in, n_out, seq_len):
    p = make_lstm_problem(np.random.default_rng(7100 + 13 * sL + bS + n_in), sL, bS, n_in,
                          n_out, peepholes)
    lengths = None if seq_len is None else np.array(seq_len)
    clip = _clip_of(p, clipping, lengths, forward)
    names = [n for n in INPUTS if p[n] is not None]

    def loss(*arrays):
        a = dict(p, **dict(zip(names, arrays)))
        h, hL, cL = lstm_time_loop_forward(a["x"], a["Wx"], a["Wr"], a["b"], a["hI"], a["cI"],
                                           a["Wp"], lengths, clip, forward)
        return float(np.sum(p["dLdh"] * h) + np.sum(p["dLdhL"] * hL) + np.sum(p["dLdcL"] * cL))

    fd = central_diff_grad(loss, [p[n] for n in names], FD_EPS)
    ana = lstm_time_loop_backward(p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], p["dLdh"],
                                  p["dLdhL"], p["dLdcL"], p["Wp"], lengths, clip, forward)
    for name, f in zip(names, fd):
        assert np.max(np.abs(f)) > 1e-3, f"{name}: degenerate test (gradient ~0)"
        assert_close(ana[INPUTS.index(name)], f, FD_TOL, name)


def test_reference_masks_follow_the_rule():
    """Padded outputs are 0; the final state of a row is its state after its last valid step
    (the initial state for length 0); reverse runs each row's valid prefix backwards."""
    p = make_lstm_problem(np.random.default_rng(7200), 4, 3, 2, 3)
    lengths = np.array([4, 0, 2])
    args = (p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"], p["Wp"])
    h, hL, cL = lstm_time_loop_forward(*args, lengths)
    assert np.all(h[:, 1] == 0) and np.all(h[2:, 2] == 0)
    assert_close(hL[1], p["hI"][1], 0.0)
    assert_close(cL[1], p["cI"][1], 0.0)
    h_row2, hL2, _ = lstm_time_loop_forward(p["x"][:2, 2:], p["Wx"], p["Wr"], p["b"],
                                            p["hI"][2:], p["cI"][2:], p["Wp"])
    assert_close(h[:2, 2:], h_row2, 1e-15)
    assert_close(hL[2:], hL2, 1e-15)
    hr, hLr, _ = lstm_time_loop_forward(*args, lengths, forward=False)
    h_rev, hL_rev, _ = lstm_time_loop_forward(p["x"][1::-1, 2:], p["Wx"], p["Wr"], p["b"],
                                              p["hI"][2:], p["cI"][2:], p["Wp"])
    assert_close(hr[:2, 2:], h_rev[::-1], 1e-15)
    assert_close(hLr[2:], hL_rev, 1e-15)
    assert np.all(hr[2:, 2] == 0)


def test_reference_cell_forward_by_elementwise_loops():
    """A second forward, one scalar at a time (no matrix products, no block slicing)."""
    p = _cell_problem(7300, 2, 3, 3, True)
    clip = 0.4
    x, Wx, Wr, b, hI, cI, Wp = (p[n] for n in INPUTS)
    bS, n_in = x.shape
    H = hI.shape[1]
    h_ref, c_ref = lstm_cell_forward(x, Wx, Wr, b, hI, cI, Wp, clip)
    for r in range(bS):
        for j in range(H):
            z = [b[k * H + j] + sum(x[r, m] * Wx[m, k * H + j] for m in range(n_in))
                 + sum(hI[r, m] * Wr[m, k * H + j] for m in range(H)) for k in range(4)]
            i = sigmoid(z[0] + Wp[j] * cI[r, j])
            f = sigmoid(z[1] + Wp[H + j] * cI[r, j])
            c = min(max(f * cI[r, j] + i * np.tanh(z[2]), -clip), clip)
            o = sigmoid(z[3] + Wp[2 * H + j] * c)
            assert abs(c_ref[r, j] - c) < 1e-14
            assert abs(h_ref[r, j] - o * np.tanh(c)) < 1e-14
    assert np.any(np.abs(c_ref) == clip)  # the case exercises the clip
