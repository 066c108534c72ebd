"""The input projection in chunks of time steps (cells/_time_loop.pyx, projection_chunk_steps) and
the forward split by batch rows: at batch sizes where a chunk holds fewer steps than the
sequence (here 3 of 7: chunks of 3, 3 and 1), the GRU (both variants, its two-phase step
included) and the LSTM (peepholes, projection) against their float64 references, forward and
reverse, with and without seq_len, inference and training (forward with its workspace, then the
backward), on 1 and 2 threads. The batch sizes follow from the chunks' size, half a core's L2 as
read from the machine (170 and 227 rows where L2 is 1 MiB). On 2 threads these batches also
run both passes with the batch rows split between the threads (_time_loop.splits_rows; every
family at the smallest batches that split: tests/test_rows_split.py).

The other tests run shapes small enough that one chunk holds every step."""
import numpy as np
import pytest

import cells
from cells import _time_loop
from gru_reference import (
    F64_TOL, assert_close, gru_masked_backward, gru_masked_forward, make_seq_problem,
)
from lstm_reference import lstm_time_loop_backward, lstm_time_loop_forward, make_lstm_problem

sL, nIn, nOut = 7, 6, 32
LENGTHS = [7, 0, 3, 6, 1]   # repeated over the batch: full, empty, inside and across chunks


def _seq_len(bS, with_lengths):
    return np.resize(LENGTHS, bS).astype(np.int64) if with_lengths else None


def _batch_with_chunks_of_3(G):
    """A batch size whose steps of gx (float64) make chunks of 3 time steps."""
    bS = _time_loop.PROJECTION_CHUNK_BYTES // (3 * 8 * G)
    assert _time_loop.PROJECTION_CHUNK_BYTES == _time_loop.L2_BYTES // 2
    assert _time_loop.projection_chunk_steps(sL, bS, G, 8, False) == 3
    return bS


@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "seq_len"])
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("lbr", [False, True], ids=["reset_before", "linear_before_reset"])
def test_gru_projected_in_chunks(with_lengths, forward, n_threads, lbr):
    bS = _batch_with_chunks_of_3(3 * nOut)
    x, hI, Wx, Wh, b, dLdh, dLdhL = make_seq_problem(np.random.default_rng(31), sL, bS, nIn,
                                                     nOut, two_biases=True)
    seq_len = _seq_len(bS, with_lengths)
    lengths = np.full(bS, sL) if seq_len is None else seq_len
    h_ref, hL_ref = gru_masked_forward(x, hI, Wx, Wh, b, lengths, forward, lbr)
    h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=seq_len,
                              forward=forward, return_workspace=True, n_threads=n_threads)
    assert_close(h, h_ref, F64_TOL, "h", np.float64)
    h_only = cells.gruTimeLoop(x, hI, Wx, Wh, b, linear_before_reset=lbr, seq_len=seq_len,
                               forward=forward, n_threads=n_threads)
    assert_close(h_only, h_ref, F64_TOL, "h (inference)", np.float64)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, dLdhLast=dLdhL,
                                linear_before_reset=lbr, seq_len=seq_len, forward=forward,
                                workspace=ws, n_threads=n_threads)
    ref = gru_masked_backward(x, hI, Wx, Wh, b, lengths, dLdh, dLdhL, forward, lbr)
    for name, g, r in zip(("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"), grads, ref):
        assert_close(g, r, F64_TOL, name, np.float64)


@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "seq_len"])
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("n_proj", [None, 8], ids=["plain", "projected"])
def test_lstm_projected_in_chunks(with_lengths, forward, n_threads, n_proj):
    bS = _batch_with_chunks_of_3(4 * nOut)
    p = make_lstm_problem(np.random.default_rng(32), sL, bS, nIn, nOut, n_proj=n_proj)
    seq_len = _seq_len(bS, with_lengths)
    weights = (p["x"], p["Wx"], p["Wr"], p["b"], p["hI"], p["cI"])
    h_ref, hL_ref, cL_ref = lstm_time_loop_forward(*weights, p["Wp"], seq_len,
                                                   forward=forward, Wproj=p["Wproj"])
    kwargs = dict(Wp=p["Wp"], Wproj=p["Wproj"], seq_len=seq_len, forward=forward,
                  n_threads=n_threads)
    h, hL, cL = cells.lstmLayerTimeLoop(*weights, **kwargs)
    for name, got, expected in (("h", h, h_ref), ("hL", hL, hL_ref), ("cL", cL, cL_ref)):
        assert_close(got, expected, F64_TOL, name, np.float64)
    *_, ws = cells.lstmLayerTimeLoop(*weights, return_workspace=True, **kwargs)
    grads = cells.lstmLayerTimeLoopBp(*weights, p["dLdh"], dLdhL=p["dLdhL"], dLdcL=p["dLdcL"],
                                      workspace=ws, **kwargs)
    ref = lstm_time_loop_backward(*weights, p["dLdh"], p["dLdhL"], p["dLdcL"], p["Wp"],
                                  seq_len, forward=forward, Wproj=p["Wproj"])
    names = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp", "dLdWproj")
    for name, g, r in zip(names, grads, ref):
        assert_close(g, r, F64_TOL, name, np.float64)
