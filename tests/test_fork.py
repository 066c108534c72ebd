"""A child forked after a threaded call (multiprocessing's default start method on Linux) runs
its calls on the threads it asks for, with the parent's results: it takes them from cells' own
team, which starts its workers anew in the child (include/cells/team.h), also when another
thread of the parent was in a threaded call at the fork. (The parent's threads come from
OpenMP's pool, which a forked child would wait for forever.) Every child is bounded by a
timeout and killed if it hangs."""
import multiprocessing
import os
import sys
import threading

import numpy as np
import pytest

import cells

pytestmark = pytest.mark.skipif(sys.platform != "linux" or "fork" not in
                                multiprocessing.get_all_start_methods(),
                                reason="fork is the start method under test")

rng = np.random.default_rng(21)
nIn, nOut = 5, 32   # 2 * MIN_UNITS_PER_THREAD: n_threads=None may run on 2 threads
x, hI = rng.normal(size=(6, 4, nIn)), rng.normal(size=(4, nOut))
Wx, Wh = rng.normal(0, 0.5, (nIn, 3 * nOut)), rng.normal(0, 0.5, (nOut, 3 * nOut))
b, dLdh = rng.normal(size=3 * nOut), rng.normal(size=(6, 4, nOut))
TIMEOUT_S = 30


def _run(n_threads):
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, n_threads=n_threads)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, n_threads=n_threads)
    return [h, *grads]


def _team_workers():
    """The threads of this process named as cells' team workers are (include/cells/team.h)."""
    names = (open(f"/proc/self/task/{tid}/comm").read().strip()
             for tid in os.listdir("/proc/self/task"))
    return sum(name == "cells-team" for name in names)


def _child(queue):
    """In the child: the results by default and on 3 threads, and the team's workers at the
    start and after the 3-thread call."""
    at_start = _team_workers()
    by_default = _run(None)
    by_three = _run(3)
    queue.put((by_default, by_three, at_start, _team_workers()))


def _in_forked_child():
    """What _child computes, in a forked child; fails (instead of hanging) after TIMEOUT_S."""
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_child, args=(queue,))
    child.start()
    try:
        result = queue.get(timeout=TIMEOUT_S)
    except Exception:
        child.kill()
        pytest.fail(f"the forked child gave no result within {TIMEOUT_S} s (hung?)")
    child.join(TIMEOUT_S)
    assert child.exitcode == 0
    return result


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
    """The child resets the team whatever point of a call the parent's other thread was at:
    every child runs on its threads. (The other thread's calls run 3000 steps, so most forks
    meet one.)"""
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
