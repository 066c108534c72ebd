"""Prepared nets (cells.gru.prepare, cells.lstm.prepare, cells.rnn.prepare, cells.lltm.prepare):
the values of an independent float64 reference and of the family's time loop; the documented
guarantee, bit for bit, for every kind of weights (float32, float64, int8, bfloat16): one answer
whatever the split of a sequence into calls, the rows beside a row and the thread count; their
ownership of the weights, pickling, threads, a forked child, `out=`, and bad input. (The values
of int8 and bfloat16 nets: test_prepared_lowp.py.)

The shapes put several panels of the packed weights in every net (nOut = 70: 2 panels of 64
floats, 3 of 32 doubles), so that 2 and 3 threads split the units differently from 1 (and
bS = 20 on 2 threads splits the rows instead: splits_rows)."""
import doctest
import multiprocessing
import pickle
import sys
import threading

import numpy as np
import pytest
from gru_reference import F64_TOL, gru_masked_forward
from lltm_reference import lltm_seq_forward
from lstm_reference import lstm_time_loop_forward
from rnn_reference import rnn_seq_forward

import cells

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


nIn, nOut, nProj, sL, bS = 13, 70, 40, 9, 20
# float32 net vs float64 reference on the same float32 inputs: each pre-activation is a dot of
# nIn + nOut = 83 terms of size <= ~0.5 (|x| ~ 1, weights ~ 0.1, states <= 1): worst-case
# rounding ~83 · 6e-8 · 0.5 ~ 2.5e-6, carried through 9 contractive steps; the gates and the
# state are bounded by 1 (the cell state by ~sL). 2e-5 absolute leaves a 5-10x margin and is
# far below any wrong term.
F32_TOL = 2e-5
TOL = {np.dtype(np.float32): F32_TOL, np.dtype(np.float64): F64_TOL}

CASES = ["gru_reset_before", "gru_linear_before_reset", "lstm", "lstm_peepholes_clip",
         "lstm_projected", "rnn_tanh", "rnn_relu", "lltm"]


@pytest.fixture(params=["float64", "float32", "int8", "bfloat16"])
def kind(request):
    """(dtype, weights) of a net: a dtype's own weights, or float32 ones packed as int8 or
    bfloat16."""
    if request.param in ("int8", "bfloat16"):
        return np.dtype(np.float32), request.param
    return np.dtype(request.param), None


def case_parameters(case, dtype, seed=0):
    """The weights and options of a case, drawn from `seed`: a dict of its family's prepare
    arguments (by their names)."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.1):
        return (rng.normal(size=shape) * scale).astype(dtype)

    if case.startswith("gru"):
        return dict(Wx=r(nIn, 3 * nOut), Wh=r(nOut, 3 * nOut), b=r(2, 3 * nOut, scale=0.5),
                    linear_before_reset=case.endswith("linear_before_reset"))
    if case.startswith("lstm"):
        projected, peep = case == "lstm_projected", case == "lstm_peepholes_clip"
        nState = nProj if projected else nOut
        return dict(Wx=r(nIn, 4 * nOut), Wr=r(nState, 4 * nOut), b=r(4 * nOut, scale=0.5),
                    Wp=r(3 * nOut, scale=0.5) if peep else None,
                    Wproj=r(nOut, nProj, scale=0.2) if projected else None,
                    cell_clip=0.3 if peep else 0.0)
    if case.startswith("rnn"):
        return dict(Wx=r(nIn, nOut), Wh=r(nOut, nOut), b=r(nOut, scale=0.5),
                    activation=case[4:])
    return dict(W=r(3 * nOut, nOut + nIn), b=r(3 * nOut, scale=0.5))


# Each family's prepare, by a case's first word.
PREPARE = {"gru": cells.gru.prepare, "lstm": cells.lstm.prepare, "rnn": cells.rnn.prepare,
           "lltm": cells.lltm.prepare}


def prepare_case(case, params, weights=None):
    """The net of a case from its parameters (case_parameters), on `weights` (prepare's)."""
    return PREPARE[case.split("_")[0]](**params, weights=weights)


def make_case(case, dtype, seed=0, weights=None):
    """(net, weights, reference, time_loop) of a case: `reference(x, state, seq_len)` returns
    the float64 (h, hL, cL or None) of the family's reference on the net's own (dtype-rounded)
    weights, `time_loop(x, state, seq_len)` the (h, hL or None) of the family's time loop. With
    `weights` ("int8", "bfloat16") the net packs them so (and the two others do not apply)."""
    p = case_parameters(case, dtype, seed)
    net = prepare_case(case, p, weights)
    if case.startswith("gru"):
        Wx, Wh, b, lbr = p["Wx"], p["Wh"], p["b"], p["linear_before_reset"]

        def reference(x, state, lengths):
            h, hL = gru_masked_forward(x, state.h, Wx, Wh, b, _lengths(lengths, x), True, lbr)
            return h, hL, None

        def time_loop(x, state, lengths):
            return cells.gruTimeLoop(x, state.h, Wx, Wh, b, linear_before_reset=lbr,
                                     seq_len=lengths), None
        return net, (Wx, Wh, b), reference, time_loop
    if case.startswith("lstm"):
        Wx, Wr, b, Wp, Wproj, clip = (p[k] for k in ("Wx", "Wr", "b", "Wp", "Wproj",
                                                     "cell_clip"))

        def reference(x, state, lengths):
            return lstm_time_loop_forward(x, Wx, Wr, b, state.h, state.c, Wp, lengths, clip,
                                          Wproj=Wproj)

        def time_loop(x, state, lengths):
            return cells.lstmLayerTimeLoop(x, Wx, Wr, b, state.h, state.c, Wp=Wp, Wproj=Wproj,
                                           seq_len=lengths, cell_clip=clip)[:2]
        return net, (Wx, Wr, b), reference, time_loop
    if case.startswith("rnn"):
        Wx, Wh, b, act = p["Wx"], p["Wh"], p["b"], p["activation"]

        def reference(x, state, lengths):
            h, hL, _ = rnn_seq_forward(x, state.h, Wx, Wh, b, act, lengths)
            return h, hL, None

        def time_loop(x, state, lengths):
            return cells.rnnTimeLoop(x, state.h, Wx, Wh, b, activation=act,
                                     seq_len=lengths), None
        return net, (Wx, Wh, b), reference, time_loop
    W, b = p["W"], p["b"]

    def reference(x, state, lengths):
        return lltm_seq_forward(x, W, b, state.h, state.c, lengths)[:3]

    def time_loop(x, state, lengths):
        return cells.lltmTimeLoop(x, W, b, state.h, state.c, seq_len=lengths)[:2]
    return net, (W, b), reference, time_loop


def _lengths(lengths, x):
    return np.full(x.shape[1], x.shape[0]) if lengths is None else lengths


def random_state(net, rows, rng):
    """A random non-zero state of `rows` rows: h in (-1, 1), c in (-2, 2)."""
    widths = (net.nState, net.nOut)[:len(net.State._fields)]
    return net.State(*[rng.uniform(-1, 1, (rows, n)).astype(net.dtype) * (1 + k)
                       for k, n in enumerate(widths)])


def inputs(net, rng, steps=sL, rows=bS):
    return rng.normal(size=(steps, rows, net.nIn)).astype(net.dtype)


def assert_same_bits(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{what}: bits differ"


def assert_same_result(result, expected, what):
    assert_same_bits(result[0], expected[0], f"{what}: h")
    assert type(result[1]) is type(expected[1]), what
    for name, a, e in zip(result[1]._fields, result[1], expected[1]):
        assert_same_bits(a, e, f"{what}: state.{name}")


def chunked(net, x, state, chunk, n_threads, seq_len=None):
    """The net over x in calls of `chunk` steps (a 2-d x per call for chunk 1), the state
    carried; seq_len is split into each chunk's share."""
    outputs = []
    for t0 in range(0, x.shape[0], chunk):
        part = x[t0:t0 + chunk]
        lengths = None if seq_len is None else np.clip(seq_len - t0, 0, part.shape[0])
        if chunk == 1:
            h, state = net(part[0], state, seq_len=lengths, n_threads=n_threads)
            h = h[None]
        else:
            h, state = net(part, state, seq_len=lengths, n_threads=n_threads)
        outputs.append(h)
    return np.concatenate(outputs), state


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_values_match_an_independent_reference(case, dtype):
    net, _, reference, _ = make_case(case, dtype)
    rng = np.random.default_rng(1)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    seq_len = rng.integers(0, sL + 1, bS)
    seq_len[:2] = sL, 0
    for lengths in (None, seq_len):
        h, after = net(x, state, seq_len=lengths)
        want_h, want_hL, want_cL = reference(x, state, lengths)
        tol = TOL[dtype]
        assert h.dtype == dtype and np.abs(h - want_h).max() <= tol, case
        assert np.abs(after.h - want_hL).max() <= tol
        if want_cL is not None:
            assert np.abs(after.c - want_cL).max() <= tol * sL   # c grows by up to 1 a step
        if lengths is not None:
            assert not h[sL - 1, 1].any()   # a row of length 0: outputs 0, state unchanged
            assert_same_bits(after.h[1], state.h[1], "a row of length 0 keeps its state")


@pytest.mark.parametrize("case", CASES)
def test_values_match_the_time_loop(case, dtype):
    """To the precision of the dtype: the time loop's products sum in other orders."""
    net, _, _, time_loop = make_case(case, dtype)
    rng = np.random.default_rng(2)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    lengths = rng.integers(0, sL + 1, bS)
    h, after = net(x, state, seq_len=lengths)
    want = time_loop(x, state, lengths)
    tol = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}[dtype]
    np.testing.assert_allclose(h, want[0], rtol=0, atol=tol * sL)
    if want[1] is not None:
        np.testing.assert_allclose(after.h, want[1], rtol=0, atol=tol * sL)


# ---------------------------------------------------------------------------------------------
# One answer, however it is asked
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_the_same_bits_for_any_chunks_and_threads(case, kind):
    """A whole sequence in one call on 1 thread, against every chunk size 1 .. sL on 1, 2 and 3
    threads (with seq_len too: rows that end inside a chunk)."""
    net, *_ = make_case(case, kind[0], weights=kind[1])
    rng = np.random.default_rng(3)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    seq_len = rng.integers(0, sL + 1, bS)
    for lengths in (None, seq_len):
        whole = net(x, state, seq_len=lengths, n_threads=1)
        for n_threads in (1, 2, 3):
            for chunk in range(1, sL + 1):
                assert_same_result(chunked(net, x, state, chunk, n_threads, lengths), whole,
                                   f"{case} chunks of {chunk} on {n_threads} threads")


@pytest.mark.parametrize("case", CASES)
def test_calls_together_give_each_calls_bits(monkeypatch, case, kind):
    """Two nets' calls at once (call_together: a bidirectional layer's directions, each on a
    group of the threads), against each net called alone on 1 thread: the same bits, with
    seq_len and states, on 2 to 16 threads in all (on 2 cores: oversubscribed), bS = 20 (the
    rows split on 2 threads a call) and 3 (the units)."""
    from cells import _prepared, _time_loop
    together = []
    run_calls = _time_loop.run_calls
    monkeypatch.setattr(_time_loop, "run_calls",
                        lambda calls, threads: (together.append(threads),
                                                run_calls(calls, threads)))
    nets = [make_case(case, kind[0], seed=seed, weights=kind[1])[0] for seed in (1, 2)]
    rng = np.random.default_rng(11)
    for rows in (bS, 3):
        xs = [inputs(net, rng, rows=rows) for net in nets]
        states = [random_state(net, rows, rng) for net in nets]
        seq_len = rng.integers(0, sL + 1, rows)
        alone = [net(x, state, seq_len=seq_len, n_threads=1)
                 for net, x, state in zip(nets, xs, states)]
        for total in (2, 3, 4, 16):
            results = _prepared.call_together(list(zip(nets, xs, states)), seq_len,
                                              lambda: total)
            for result, expected in zip(results, alone):
                assert_same_result(result, expected, f"{case}, {rows} rows, {total} threads")
        # Groups of 2 and 3 threads, which these small calls do not take by themselves.
        for threads in (2, 3):
            checked = [net._weights.arguments(net, x, state, seq_len, None)
                       for net, x, state in zip(nets, xs, states)]
            run_calls([(net._weights, arguments[:-1]) for net, arguments in zip(nets, checked)],
                      threads)
            for arguments, expected in zip(checked, alone):
                assert_same_result(arguments[-1], expected,
                                   f"{case}, {rows} rows, groups of {threads}")
    assert len(together) == 8


def test_calls_together_run_one_after_the_other_where_a_threads_weights_outgrow_its_l2(
        monkeypatch):
    from cells import _prepared, _time_loop
    monkeypatch.setattr(_time_loop, "run_calls", None)   # not called
    net, *_ = make_case("lstm", np.dtype(np.float32))
    monkeypatch.setattr(_time_loop, "L2_BYTES", net._weights.step_nbytes // 2 - 1)
    rng = np.random.default_rng(12)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    results = _prepared.call_together([(net, x, state), (net, x[::-1], state)], None,
                                      lambda: 2)
    assert_same_result(results[0], net(x, state, n_threads=1), "forward")
    assert_same_result(results[1], net(x[::-1], state, n_threads=1), "reversed")


@pytest.mark.parametrize("case", CASES)
def test_a_row_alone_and_in_any_batch_gives_the_same_bits(case, kind):
    net, *_ = make_case(case, kind[0], weights=kind[1])
    rng = np.random.default_rng(4)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    whole = net(x, state, n_threads=2)   # bS = 20 on 2 threads: the rows split
    for rows in ([0], [7], [19], [3, 4, 5], [1, 18], list(range(5, 19))):
        part = net(x[:, rows], net.State(*[a[rows] for a in state]), n_threads=3)
        assert_same_bits(part.h, whole.h[:, rows], f"{case} rows {rows}")
        for a, e in zip(part.state, whole.state):
            assert_same_bits(a, e[rows], f"{case} rows {rows}: state")


def test_torch_layout_weights_give_the_same_bits_as_c_ordered_ones(dtype):
    """Wx and Wh F-ordered (a torch module's weight_ih.T, weight_hh.T) are read without a
    copy of the caller's, and packed into the same panels."""
    net, (Wx, Wh, b), *_ = make_case("gru_linear_before_reset", dtype)
    f_net = cells.gru.prepare(np.asfortranarray(Wx), np.asfortranarray(Wh), b,
                              linear_before_reset=True)
    rng = np.random.default_rng(5)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    assert_same_result(f_net(x, state), net(x, state), "F-ordered weights")


# ---------------------------------------------------------------------------------------------
# The net: its weights, options, memory, pickling
# ---------------------------------------------------------------------------------------------

def test_the_net_owns_its_weights():
    net, (Wx, Wh, b), *_ = make_case("gru_linear_before_reset", np.float32)
    rng = np.random.default_rng(6)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    before = net(x, state)
    for a in (Wx, Wh, b):
        a[...] = np.nan
    assert_same_result(net(x, state), before, "after the caller's arrays changed")


def test_attributes_report_the_net():
    net, *_ = make_case("lstm_projected", np.float32)
    assert (net.family, net.nIn, net.nOut, net.nState, net.dtype) == ("lstm", nIn, nOut, nProj,
                                                                       np.float32)
    assert net.State is cells.LstmState and net.State is cells.lstm.LstmState
    # packed: op(Wx) and op(Wr) in panels of 64 floats per gate block, Wproj, and b
    panels = -(-nOut // 64) * 64
    packed = 4 * panels * (nIn + nProj) + nOut * 64 + 4 * nOut
    assert net.nbytes == packed * 4
    assert net.options["cell_clip"] == 0.0 and net.options["n_threads"] is None
    assert "family='lstm'" in repr(net)


@pytest.mark.parametrize("case", CASES)
def test_a_pickled_net_gives_the_same_bits(case, kind):
    net, *_ = make_case(case, kind[0], weights=kind[1])
    rng = np.random.default_rng(7)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    loaded = pickle.loads(pickle.dumps(net))
    assert ((loaded.family, loaded.weights, loaded.nbytes, loaded.options)
            == (net.family, net.weights, net.nbytes, net.options))
    assert_same_result(loaded(x, state), net(x, state), f"{case} pickled")


# ---------------------------------------------------------------------------------------------
# Servers: Python threads, a forked child, reused outputs
# ---------------------------------------------------------------------------------------------

def test_threads_calling_one_net_at_once_get_the_serial_results():
    net, *_ = make_case("lstm", np.float32)
    rng = np.random.default_rng(8)
    streams = [(inputs(net, rng, steps=30, rows=2), random_state(net, 2, rng)) for _ in range(4)]
    serial = [chunked(net, x, state, 1, 1) for x, state in streams]
    results, barrier = [None] * 4, threading.Barrier(4)

    def serve(k):
        barrier.wait()
        x, state = streams[k]
        results[k] = chunked(net, x, state, 1, 2 if k % 2 else 1)

    threads = [threading.Thread(target=serve, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k in range(4):
        assert_same_result(results[k], serial[k], f"stream {k}")


def _child_call(queue, net, x, state):
    queue.put([np.asarray(a) for a in (net(x, state, n_threads=1)[0],
                                       net(x, state, n_threads=2)[0])])


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_net_made_in_the_parent_works_in_a_forked_child():
    net, *_ = make_case("gru_linear_before_reset", np.float64)
    rng = np.random.default_rng(9)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    parent = net(x, state, n_threads=2)[0]
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_child_call, args=(queue, net, x, state))
    child.start()
    try:
        one, two = queue.get(timeout=30)
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert_same_bits(one, parent, "child, 1 thread")
    assert_same_bits(two, parent, "child, 2 threads")


def test_out_reuses_the_callers_arrays_and_may_be_the_state_passed_in(dtype):
    net, *_ = make_case("lstm", dtype)
    rng = np.random.default_rng(10)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    expected = chunked(net, x, state, 1, 1)
    h = np.empty((bS, net.nState), dtype)
    carried = net.State(*[a.copy() for a in state])
    outputs = []
    for t in range(sL):
        result = net(x[t], carried, out=(h, carried))   # the state updated in place
        assert result.h is h and result.state is carried
        outputs.append(h.copy())
    assert_same_result((np.stack(outputs), carried), expected, "out= in place")


def test_empty_batches_and_chunks_give_empty_results():
    net, *_ = make_case("lstm_projected", np.float32)
    rng = np.random.default_rng(11)
    h, state = net(np.zeros((3, 0, nIn), np.float32))
    assert h.shape == (3, 0, nProj) and state.h.shape == (0, nProj) and state.c.shape == (0, nOut)
    start = random_state(net, 2, rng)
    h, state = net(np.zeros((0, 2, nIn), np.float32), start)
    assert h.shape == (0, 2, nProj)
    assert_same_bits(state.h, start.h, "no steps: the state stays")
    assert_same_bits(state.c, start.c, "no steps: the cell state stays")


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

def test_bad_calls_are_named_errors():
    net, *_ = make_case("lstm", np.float32)
    x = np.zeros((2, 3, nIn), np.float32)
    good = random_state(net, 3, np.random.default_rng(12))
    gru, *_ = make_case("gru_reset_before", np.float32)
    cases = [
        (TypeError, "x: expected a numpy.ndarray", lambda: net(x.tolist())),
        (TypeError, "x: expected dtype float32", lambda: net(x.astype(np.float64))),
        (ValueError, "x: expected a 3-d array", lambda: net(x[0, 0])),
        (ValueError, "x: expected 13 inputs", lambda: net(x[..., :5])),
        (TypeError, "state: expected a LstmState", lambda: net(x, tuple(good))),
        (ValueError, "from another family's net", lambda: net(x, cells.GruState(good.h))),
        (ValueError, "from another family's net", lambda: gru(x, good)),
        (TypeError, "state.c: expected dtype float32",
         lambda: net(x, good._replace(c=good.c.astype(np.float64)))),
        (ValueError, r"state.h: expected shape \(3, 70\)",
         lambda: net(x, net.State(good.h[:2], good.c[:2]))),
        (TypeError, "state.h: expected a numpy.ndarray", lambda: net(x, good._replace(h=1.0))),
        (ValueError, "seq_len: expected values in", lambda: net(x, seq_len=np.array([3, 0, 1]))),
        (TypeError, "out: expected None or", lambda: net(x, out=np.zeros(3))),
        (ValueError, "out.h: expected a writeable C-contiguous array of shape",
         lambda: net(x, out=(np.zeros((2, 3, 7), np.float32), good))),
        (TypeError, "n_threads", lambda: net(x, n_threads=1.5)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


def test_bad_weights_are_named_errors_at_prepare():
    f32 = np.zeros((4, 6), np.float32)
    cases = [
        (TypeError, "Wh: expected dtype float32", lambda: cells.gru.prepare(
            f32, np.zeros((2, 6)), np.zeros(6, np.float32))),
        (ValueError, r"Wh: expected shape \(2, 6\)", lambda: cells.gru.prepare(
            f32, np.zeros((2, 5), np.float32), np.zeros(6, np.float32))),
        (ValueError, "weights: expected None", lambda: cells.gru.prepare(
            f32, np.zeros((2, 6), np.float32), np.zeros(6, np.float32), weights="int4")),
        (ValueError, "activation", lambda: cells.rnn.prepare(
            f32[:, :2], np.zeros((2, 2), np.float32), np.zeros(2, np.float32),
            activation="gelu")),
        (ValueError, "W: expected shape", lambda: cells.lltm.prepare(
            np.zeros((5, 4)), np.zeros(5))),
        (ValueError, "at least 1", lambda: cells.rnn.prepare(
            np.zeros((0, 2)), np.zeros((2, 2)), np.zeros(2))),
        (TypeError, "Wr: expected a numpy.ndarray", lambda: cells.lstm.prepare(
            np.zeros((3, 8)), [[0.0] * 8] * 2, None)),
        (ValueError, "n_threads", lambda: cells.lstm.prepare(
            np.zeros((3, 8)), np.zeros((2, 8)), None, n_threads=0)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("prepare", [cells.gru.prepare, cells.lstm.prepare, cells.rnn.prepare,
                                     cells.lltm.prepare], ids=["gru", "lstm", "rnn", "lltm"])
def test_the_docstring_examples_run(prepare):
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    for test in finder.find(prepare, globs={}):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_the_common_calls_copy_no_array(monkeypatch):
    """x and the state as a server passes them (C-contiguous, the net's dtype), with or without
    out=, n_threads or seq_len, are read where they are; a Fortran-ordered x or state is
    copied (PreparedWeights.arguments)."""
    net, *_ = make_case("lstm", np.float32)
    rng = np.random.default_rng(13)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    result = net(x, state)
    copied, ascontiguousarray = [], np.ascontiguousarray

    def recording(a, *args, **kwargs):
        if np.ndim(a) >= 2:   # not seq_len, which the checks make int64
            copied.append(np.shape(a))
        return ascontiguousarray(a, *args, **kwargs)
    monkeypatch.setattr(np, "ascontiguousarray", recording)
    net(x, state)
    net(x[0], state)
    net(x, None)
    net(x, state, out=result)
    net(x, state, n_threads=2)
    net(x, state, seq_len=np.full(bS, sL))
    assert copied == []
    net(np.asfortranarray(x), state)
    net(x, net.State(np.asfortranarray(state.h), state.c))
    assert copied == [x.shape, state.h.shape]


def test_copied_inputs_give_the_same_bits(dtype):
    """A non-C-contiguous x or state (copied by the checks) and a C-contiguous one."""
    net, *_ = make_case("gru_reset_before", dtype)
    rng = np.random.default_rng(14)
    x, state = inputs(net, rng), random_state(net, bS, rng)
    strided = net.State(np.asfortranarray(state.h))
    assert_same_result(net(np.asfortranarray(x), strided), net(x, state), "copied inputs")
