"""A child forked after a threaded call (multiprocessing's default start method on Linux) gets
correct results instead of hanging in OpenMP's lost thread pool (cells/_threads.py): it runs on
one thread. Each child is bounded by a timeout and killed if it hangs."""
import multiprocessing
import sys

import numpy as np
import pytest

import cells
from cells import _threads

pytestmark = pytest.mark.skipif(sys.platform != "linux" or "fork" not in
                                multiprocessing.get_all_start_methods(),
                                reason="fork is the start method under test")

rng = np.random.default_rng(21)
x, hI = rng.normal(size=(6, 4, 5)), rng.normal(size=(4, 8))
Wx, Wh, b = rng.normal(0, 0.5, (5, 24)), rng.normal(0, 0.5, (8, 24)), rng.normal(size=24)
dLdh = rng.normal(size=(6, 4, 8))
TIMEOUT_S = 60


def _run(n_threads):
    h = cells.gruTimeLoop(x, hI, Wx, Wh, b, n_threads=n_threads)
    grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, n_threads=n_threads)
    return [h, *grads]


def _child(queue):
    dims = (*x.shape, hI.shape[1])
    queue.put((_threads.resolve_n_threads(None, dims), _threads.resolve_n_threads(2, dims),
               _run(None), _run(2)))


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
    return result


def test_forked_child_after_a_threaded_call():
    parent = _run(2)   # starts OpenMP's threads in this process
    default_threads, two_threads, by_default, by_two = _in_forked_child()
    assert (default_threads, two_threads) == (1, 1)
    for child in (by_default, by_two):
        for a, b_ in zip(child, parent):
            np.testing.assert_allclose(a, b_, rtol=1e-13, atol=1e-13)
