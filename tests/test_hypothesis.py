"""Property test over shapes (including empty dims), variants, bias layouts and dtypes: every
kernel against the finite-difference-proven reference."""
import numpy as np
import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cells  # noqa: E402
from gru_reference import (
    F32_CELL_GRAD_TOL, F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, assert_close,
    gru_block_cell_backward, gru_block_cell_forward, gru_cell_backward, gru_cell_forward,
    gru_time_loop_backward, gru_time_loop_forward, make_block_problem, make_seq_problem, round32,
)

NAMES5 = ("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sL=st.integers(0, 4), bS=st.integers(0, 4), n_in=st.integers(0, 5), n_out=st.integers(1, 6),
    lbr=st.booleans(), two_biases=st.booleans(),
    dtype=st.sampled_from([np.float64, np.float32]),
    give_dLdh=st.booleans(), give_last=st.booleans(), use_ws=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_all_kernels_vs_reference(sL, bS, n_in, n_out, lbr, two_biases, dtype, give_dLdh,
                                  give_last, use_ws, seed):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    arrays = make_seq_problem(rng, sL, bS, n_in, n_out, two_biases)
    block_in, block_ups = make_block_problem(rng, bS, n_in, n_out)
    x1 = rng.normal(0.0, 1.0, (bS, n_in))
    g1 = rng.normal(0.0, 1.0, (bS, n_out))
    if dtype == np.float32:
        arrays, block_in, block_ups = round32(arrays), round32(block_in), round32(block_ups)
        x1, g1 = round32((x1, g1))
    x, hI, Wx, Wh, b, dLdh, dLdhLast = arrays
    f64 = dtype == np.float64
    fwd_tol = F64_TOL if f64 else F32_FWD_TOL

    # sequence
    d = dLdh if give_dLdh else None
    dl = dLdhLast if give_last else None
    h_ref, _ = gru_time_loop_forward(x, hI, Wx, Wh, b, lbr)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, return_workspace=True)
    assert_close(h, h_ref, fwd_tol, "h", dtype)
    kw = {"workspace": ws} if use_ws else {}
    if dl is not None:
        kw["dLdhLast"] = dl
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, d, linear_before_reset=lbr, **kw)
    ref = gru_time_loop_backward(x, hI, Wx, Wh, b, d, dl, lbr)
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, F64_TOL if f64 else F32_SEQ_GRAD_TOL, name, dtype)

    # single cell
    gates_ref, hc_ref = gru_cell_forward(x1, hI, Wx, Wh, b, lbr)
    gates, hc = cells.gruCell(x1, hI, Wx, Wh, b, linear_before_reset=lbr)
    assert_close(gates, gates_ref, fwd_tol, "gates", dtype)
    assert_close(hc, hc_ref, fwd_tol, "h", dtype)
    grads = cells.gruCellBp(x1, hI, Wx, Wh, b, g1, linear_before_reset=lbr)
    ref = gru_cell_backward(x1, hI, Wx, Wh, b, g1, lbr)
    for name, g, r in zip(NAMES5, grads, ref):
        assert_close(g, r, F64_TOL if f64 else F32_CELL_GRAD_TOL, name, dtype)

    # block cell
    outs = cells.gruBlockCell(*block_in)
    for name, o, r in zip("rucH", outs, gru_block_cell_forward(*block_in)):
        assert_close(o, r, fwd_tol, name, dtype)
    sel = tuple(u if (give_dLdh or k == 3) else None for k, u in enumerate(block_ups))
    grads = cells.gruBlockCellBp(*block_in, *sel)
    for name, g, r in zip(("dx", "dhLast", "dWru", "dWc", "dbru", "dbc"), grads,
                          gru_block_cell_backward(*block_in, *sel)):
        assert_close(g, r, F64_TOL if f64 else F32_CELL_GRAD_TOL, name, dtype)
