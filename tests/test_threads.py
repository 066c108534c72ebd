"""How many threads a call runs on (cells/_threads.py): n_threads as given, or for None every
available thread but no more than leave each MIN_UNITS_PER_THREAD hidden units."""
import pytest

from cells import _threads

MIN = _threads.MIN_UNITS_PER_THREAD


def dims(nOut):
    return (10, 4, 3, nOut)


@pytest.mark.parametrize("nOut", [1, MIN - 1, MIN, 2 * MIN - 1, 2 * MIN, 3 * MIN, 64 * MIN])
def test_the_default_leaves_each_thread_enough_units(nOut):
    expected = max(1, min(_threads.max_threads(), nOut // MIN))
    assert _threads.resolve_n_threads(None, dims(nOut)) == expected


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_an_explicit_count_is_kept_whatever_the_units(n_threads):
    if not _threads.HAS_OPENMP:
        pytest.skip("built without OpenMP: every call runs on one thread")
    assert _threads.resolve_n_threads(n_threads, dims(1)) == n_threads
