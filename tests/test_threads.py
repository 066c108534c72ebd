"""How many threads a call runs on (cells/_threads.py): n_threads as given (at most the team's
MAX_THREADS), or for None as many as a step's work gains from (time_loop_threads), at most the
available threads (OMP_NUM_THREADS when it is set, else the cores)."""

import numpy as np
import pytest

import cells
from cells import _cpus, _threads, _time_loop

MIN = _threads.MIN_UNITS_PER_THREAD
WORK = _threads.TIME_LOOP_WORK_PER_THREAD


@pytest.mark.parametrize("work, expected", [(1, 1), (2 * WORK - 1, 1), (2 * WORK, 2),
                                            (3 * WORK - 1, 2), (3 * WORK, 3), (64 * WORK, 64)])
def test_threads_for_work_gives_each_thread_its_share(work, expected):
    assert _threads.threads_for_work(work, WORK, lambda: 256) == expected


def test_threads_for_work_stays_under_the_ceiling_and_asks_it_only_for_two_threads():
    asked = []

    def ceiling():
        asked.append(True)
        return 3

    assert _threads.threads_for_work(2 * WORK - 1, WORK, ceiling) == 1
    assert not asked
    assert _threads.threads_for_work(100 * WORK, WORK, ceiling) == 3


@pytest.mark.parametrize("bS, nOut, gates, inputs, expected", [
    (1, 128, 3, 256, 1),               # GRU B=1 I=H=128: 98304 multiply-adds a step
    (1, 128, 4, 256, 2),               # LSTM B=1 I=H=128: 131072, two threads' worth
    (1, 256, 1, 128, 1),               # IndRNN B=1 I=128 H=256 (no recurrent product)
    (64, 256, 4, 512, 256 // MIN),     # LSTM B=64 I=H=256: as many as leave MIN units each
    (4096, 2 * MIN - 1, 4, 64, 1),     # fewer than 2·MIN units: one thread, whatever the work
])
def test_the_time_loop_default_follows_the_work_and_the_units(bS, nOut, gates, inputs,
                                                              expected):
    assert _threads.time_loop_threads(bS, nOut, gates, inputs, lambda: 256) == expected


def test_the_time_loop_default_stays_under_max_threads():
    assert _threads.time_loop_threads(64, 1024, 4, 2048) == _threads.max_threads()


@pytest.mark.parametrize("family, bS, nIn, nOut, expected", [
    ("gru", 1, 128, 128, 1),   # 3·128·256 = 98304 multiply-adds a step: one thread
    ("gru", 4, 128, 128, 6),   # 4·98304: six threads' worth
    ("indrnn", 8, 64, 128, 1),  # 8·128·64 = 65536 (no recurrent product): one thread
])
def test_a_time_loop_without_n_threads_runs_on_the_default(monkeypatch, family, bS, nIn, nOut,
                                                          expected):
    """Both passes of a call with n_threads=None run on time_loop_threads' count (the ceiling:
    OMP_NUM_THREADS=8)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    seen = []
    for name in ("forward", "backward"):
        run = getattr(_time_loop, name)
        monkeypatch.setattr(_time_loop, name,
                            lambda *a, run=run, **k: seen.append(k["n_threads"]) or run(*a, **k))
    rng = np.random.default_rng(3)
    x, hI = rng.normal(size=(3, bS, nIn)), rng.normal(size=(bS, nOut))
    if family == "gru":
        Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
        args = (x, hI, Wx, Wh, rng.normal(size=3 * nOut))
        _, workspace = cells.gruTimeLoop(*args, return_workspace=True)
        cells.gruTimeLoopBp(*args, rng.normal(size=(3, bS, nOut)), workspace=workspace)
    else:
        args = (x, hI, rng.normal(size=(nIn, nOut)), rng.uniform(-1, 1, nOut),
                rng.normal(size=nOut))
        _, workspace = cells.indRnnTimeLoop(*args, return_workspace=True)
        cells.indRnnTimeLoopBp(*args, rng.normal(size=(3, bS, nOut)), workspace=workspace)
    assert seen == [expected, expected]


@pytest.mark.parametrize("n_threads", [None, 1, 2, 3, _threads.MAX_THREADS])
def test_an_explicit_count_is_kept(n_threads):
    assert _threads.check_n_threads(n_threads) == n_threads


def test_more_threads_than_the_team_can_have_is_an_error():
    too_many = _threads.MAX_THREADS + 1
    with pytest.raises(ValueError, match=rf"n_threads: expected None or an int in \[1, "
                                         rf"{_threads.MAX_THREADS}\], got {too_many}"):
        _threads.check_n_threads(too_many)


@pytest.mark.parametrize("value, expected", [("3", 3), ("2,1", 2), (" 5 ", 5), ("100000", None),
                                             ("0", "cores"), ("x", "cores"), ("", "cores")])
def test_omp_num_threads_sets_the_default_when_it_is_a_positive_int(monkeypatch, value,
                                                                    expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    cores = min(cells.cpu_count(), _cpus.physical_cores())
    expected = {None: _threads.MAX_THREADS, "cores": min(cores, _threads.MAX_THREADS)}.get(
        expected, expected)
    assert _threads.max_threads() == expected


def test_numpy_calls_run_on_the_team_and_torch_operators_on_openmp(monkeypatch):
    """A time loop called from NumPy runs on cells' team (openmp=False); one called by a
    cells.torch operator, forward and backward, on OpenMP's pool (torch's own)."""
    torch = pytest.importorskip("torch")
    import cells.torch as ct
    seen = []
    for name in ("forward", "backward"):
        run = getattr(_time_loop, name)
        monkeypatch.setattr(_time_loop, name, lambda *a, run=run, name=name, **k:
                            seen.append((name, k["openmp"])) or run(*a, **k))
    rng = np.random.default_rng(4)
    x, hI = rng.normal(size=(3, 2, 4)), rng.normal(size=(2, 5))
    Wx, Wh, b = rng.normal(size=(4, 15)), rng.normal(size=(5, 15)), rng.normal(size=15)
    _, workspace = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True)
    cells.gruTimeLoopBp(x, hI, Wx, Wh, b, np.ones((3, 2, 5)), workspace=workspace)
    assert seen == [("forward", False), ("backward", False)]
    seen.clear()
    out, _ = ct.GRU(4, 5)(torch.randn(3, 2, 4, requires_grad=True))
    out.sum().backward()
    assert seen == [("forward", True), ("backward", True)]
    assert not _threads.openmp_pool()


WRITTEN = {
    "forward": ("gx", "gh", "hs", "cs", "gates", "c", "aux", "m", "ms", "h", "hL", "cL"),
    "backward": ("d", "daux", "dzone", "ms", "dh_step", "dh_steps", "aux", "dLdx", "dLdhI",
                 "dLdcI", "dLdWx", "dLdWh", "dLdW", "dLdb", "dLdP", "part_sums", "dLdWproj"),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_array_the_loop_writes_starts_on_a_cache_line(monkeypatch, dtype):
    """The CPU backend's buffers start on a cache line, so that the threads' blocks of whole
    lines (unit_align) share none: every array the loop writes, forward and backward, of an
    LSTM with a projection (the most buffers)."""
    starts = {}
    for name in WRITTEN:
        run = getattr(_time_loop, name)

        def record(*a, run=run, name=name, **k):
            starts.update({(name, n): k[n].ctypes.data % _time_loop.CACHE_LINE
                           for n in WRITTEN[name] if k.get(n) is not None})
            return run(*a, **k)
        monkeypatch.setattr(_time_loop, name, record)
    rng = np.random.default_rng(5)
    sL, bS, nIn, nOut, nProj = 3, 5, 7, 9, 6
    x = rng.normal(size=(sL, bS, nIn)).astype(dtype)
    Wx = rng.normal(size=(nIn, 4 * nOut)).astype(dtype)
    Wh = rng.normal(size=(nProj, 4 * nOut)).astype(dtype)
    b = rng.normal(size=4 * nOut).astype(dtype)
    Wproj = rng.normal(size=(nOut, nProj)).astype(dtype)
    hI, cI = rng.normal(size=(bS, nProj)).astype(dtype), rng.normal(size=(bS, nOut)).astype(dtype)
    *_, workspace = cells.lstmLayerTimeLoop(x, Wx, Wh, b, hI, cI, Wproj=Wproj, n_threads=2,
                                            return_workspace=True)
    cells.lstmLayerTimeLoopBp(x, Wx, Wh, b, hI, cI, np.ones((sL, bS, nProj), dtype),
                              Wproj=Wproj, workspace=workspace, n_threads=2)
    assert len(starts) >= 15
    assert {k: v for k, v in starts.items() if v} == {}


def test_a_cache_line_aligned_array_of_no_elements():
    a = _time_loop.line_aligned_empty((0, 3), np.float32)
    assert a.shape == (0, 3) and a.dtype == np.float32
    assert _time_loop.line_aligned_empty(4, np.float64).shape == (4,)
