"""How many threads a call runs on (cells/_threads.py): n_threads as given (at most the team's
MAX_THREADS), or for None every available thread (OMP_NUM_THREADS when it is set, else the
cores), but no more than leave each MIN_UNITS_PER_THREAD hidden units."""

import pytest

import cells
from cells import _cpus, _threads

MIN = _threads.MIN_UNITS_PER_THREAD


def dims(nOut):
    return (10, 4, 3, nOut)


@pytest.mark.parametrize("nOut", [1, MIN - 1, MIN, 2 * MIN - 1, 2 * MIN, 3 * MIN, 64 * MIN])
def test_the_default_leaves_each_thread_enough_units(nOut):
    expected = max(1, min(_threads.max_threads(), nOut // MIN))
    assert _threads.resolve_n_threads(None, dims(nOut)) == expected


@pytest.mark.parametrize("n_threads", [1, 2, 3, _threads.MAX_THREADS])
def test_an_explicit_count_is_kept_whatever_the_units(n_threads):
    assert _threads.resolve_n_threads(n_threads, dims(1)) == n_threads


def test_more_threads_than_the_team_can_have_is_an_error():
    too_many = _threads.MAX_THREADS + 1
    with pytest.raises(ValueError, match=rf"n_threads: expected None or an int in \[1, "
                                         rf"{_threads.MAX_THREADS}\], got {too_many}"):
        _threads.resolve_n_threads(_threads.MAX_THREADS + 1, dims(1))


@pytest.mark.parametrize("value, expected", [("3", 3), ("2,1", 2), (" 5 ", 5), ("100000", None),
                                             ("0", "cores"), ("x", "cores"), ("", "cores")])
def test_omp_num_threads_sets_the_default_when_it_is_a_positive_int(monkeypatch, value,
                                                                    expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    cores = min(cells.cpu_count(), _cpus.physical_cores())
    expected = {None: _threads.MAX_THREADS, "cores": min(cores, _threads.MAX_THREADS)}.get(
        expected, expected)
    assert _threads.max_threads() == expected
