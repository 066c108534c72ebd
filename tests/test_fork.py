"""A child forked after a threaded call (multiprocessing's default start method on Linux) runs
its calls on the threads it asks for, with the parent's results: it takes them from cells' own
team, which retires its workers before a fork and starts them anew in the child
(include/cells/team.h). A fork made while
another thread of the parent is in a call waits until that call has returned, so that the
child inherits nothing the call held. Every child is bounded by a timeout and killed if it
hangs."""
import multiprocessing
import os
import sys
import threading
import time

import numpy as np
import pytest

import cells
from cells import _time_loop

pytestmark = pytest.mark.skipif(sys.platform != "linux" or "fork" not in
                                multiprocessing.get_all_start_methods(),
                                reason="fork is the start method under test")

rng = np.random.default_rng(21)
# Work for two threads by the default's rule (cells._threads.time_loop_threads: 4·3·32·352
# multiply-adds a step): n_threads=None may run on 2 threads.
nIn, nOut = 320, 32
x, hI = rng.normal(size=(6, 4, nIn)), rng.normal(size=(4, nOut))
Wx, Wh = rng.normal(0, 0.5, (nIn, 3 * nOut)), rng.normal(0, 0.5, (nOut, 3 * nOut))
b, dLdh = rng.normal(size=3 * nOut), rng.normal(size=(6, 4, nOut))
TIMEOUT_S = 30


def _run(n_threads):
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, n_threads=n_threads)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, n_threads=n_threads)
    return [h, *grads]


def _team_workers(expected=0):
    """The threads of this process named as cells' team workers are (include/cells/team.h),
    once they are `expected` or after TIMEOUT_S: a call returns without waiting for workers
    that have not joined it, and a new worker names itself when it first runs."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        names = (open(f"/proc/self/task/{tid}/comm").read().strip()
                 for tid in os.listdir("/proc/self/task"))
        count = sum(name == "cells-team" for name in names)
        if count == expected or time.monotonic() > deadline:
            return count
        time.sleep(0.001)


def _child(queue):
    """In the child: the results by default and on 3 threads, and the team's workers at the
    start and after the 3-thread call."""
    at_start = _team_workers()
    by_default = _run(None)
    by_three = _run(3)
    queue.put((by_default, by_three, at_start, _team_workers(2)))


def _start_child(target=_child, args=()):
    """A forked child running target(queue, *args), and the queue it puts its result on."""
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=target, args=(queue, *args))
    child.start()
    return child, queue


def _result(child, queue):
    """What the child put on the queue; fails (instead of hanging) after TIMEOUT_S."""
    try:
        result = queue.get(timeout=TIMEOUT_S)
    except Exception:
        child.kill()
        pytest.fail(f"the forked child gave no result within {TIMEOUT_S} s (hung?)")
    child.join(TIMEOUT_S)
    assert child.exitcode == 0
    return result


def _in_forked_child():
    """What _child computes, in a forked child."""
    return _result(*_start_child())


def _assert_same(results, expected):
    """Equal up to float64 rounding: another thread count splits the units differently."""
    for a, e in zip(results, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-13, atol=1e-13)


def test_a_forked_child_starts_threads_of_its_own_after_a_threaded_call():
    parent = _run(2)   # starts the parent's threads
    by_default, by_three, at_start, after = _in_forked_child()
    _assert_same(by_default, parent)
    _assert_same(by_three, parent)
    assert (at_start, after) == (0, 2)   # the child's own: 3 parts need 2 workers


def test_a_fork_while_another_thread_runs_a_threaded_call():
    """Forks while the parent's other thread keeps making threaded calls (3000 steps each, so
    most forks meet one in flight and wait for it): every child runs on its threads, and the
    parent's calls are right."""
    parent = _run(2)
    x_long = rng.normal(size=(3000, 4, nIn))
    expected_long = cells.gruTimeLoop(x_long, hI, Wx, Wh, b, n_threads=2)
    stop = threading.Event()
    wrong = []

    def calls():
        while not stop.is_set():
            if not np.array_equal(cells.gruTimeLoop(x_long, hI, Wx, Wh, b, n_threads=2),
                                  expected_long):
                wrong.append("a call in the parent gave other results")

    caller = threading.Thread(target=calls)
    caller.start()
    try:
        for _ in range(5):
            by_default, by_three, at_start, after = _in_forked_child()
            _assert_same(by_default, parent)
            _assert_same(by_three, parent)
            assert (at_start, after) == (0, 2)
    finally:
        stop.set()
        caller.join(TIMEOUT_S)
    assert not wrong


def _child_after_a_call(queue, h, expected):
    """In the child: whether its copy of the other thread's output h was whole (no NaN left)
    and equal to `expected`, the results on 1 and on 2 threads, and the team's workers at the
    start and after the 2-thread call."""
    whole, equal = not np.isnan(h).any(), np.array_equal(h, expected)
    at_start = _team_workers()
    by_one, by_two = _run(1), _run(2)
    queue.put((whole, equal, by_one, by_two, at_start, _team_workers(1)))


def test_a_fork_waits_for_the_call_in_flight(monkeypatch):
    """The parent forks once another thread's 2-thread call has written its first steps and
    not its last: the fork returns only after that call has returned. Deterministic: the
    call's output h starts as NaN and the kernel writes every step, so h is whole in the
    parent when the fork returns, and in the child's copy of memory, only if the fork waited.
    The child then computes right on 1 and 2 threads of its own. (_time_loop.forward is wrapped
    to show the test the call's h.)"""
    sL, bS, nIn_long, nOut_long = 2000, 8, 8, 128
    x_long, hI_long = rng.normal(size=(sL, bS, nIn_long)), rng.normal(size=(bS, nOut_long))
    Wx_long = rng.normal(0, 0.5, (nIn_long, 3 * nOut_long))
    Wh_long = rng.normal(0, 0.5 / np.sqrt(nOut_long), (nOut_long, 3 * nOut_long))
    b_long = rng.normal(size=3 * nOut_long)

    def long_call():
        return cells.gruTimeLoop(x_long, hI_long, Wx_long, Wh_long, b_long, n_threads=2)

    parent, expected = _run(2), long_call()
    forward, outputs, got = _time_loop.forward, [], []

    def forward_showing_h(*args, **kwargs):
        if threading.current_thread() is caller:
            kwargs["h"].fill(np.nan)
            outputs.append(kwargs["h"])
        return forward(*args, **kwargs)

    monkeypatch.setattr(_time_loop, "forward", forward_showing_h)
    caller = threading.Thread(target=lambda: got.append(long_call()))
    caller.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not outputs or np.isnan(outputs[0][10]).any():   # until step 10 is written
            assert time.monotonic() < deadline, "the call wrote no step 10"
            time.sleep(0.0002)
        h = outputs[0]
        assert np.isnan(h[-1]).all(), "the call ended before the fork: make it longer"
        child, queue = _start_child(_child_after_a_call, (h, expected))
        whole_at_fork = not np.isnan(h).any()
        whole, equal, by_one, by_two, at_start, after = _result(child, queue)
    finally:
        caller.join(TIMEOUT_S)
    assert whole_at_fork, "the fork returned before the call in flight had returned"
    assert whole, "the child's copy of the call's output was not whole"
    assert equal, "the child's copy of the call's output was not the call's result"
    np.testing.assert_array_equal(got[0], expected)
    _assert_same(by_one, parent)
    _assert_same(by_two, parent)
    assert (at_start, after) == (0, 1)   # the child's own: 2 parts need 1 worker
