"""The L2 size the kernels and the time loop size their blocks by (include/cells/caches.h), read
from the machine: the C library's answer (sysconf) where it has one, else Linux's sysfs listing
of CPU 0's caches, else the default. The header's sysfs reader is checked against this test's
own parsing of sysfs, the two sources against each other where both answer, the extension's
value against the rule, and the sizes derived from it (cells/_time_loop.pyx) against theirs."""
from pathlib import Path

import pytest
from c_programs import run_c_test

from cells import _time_loop

DEFAULT_L2 = 1024 * 1024   # caches.h's CELLS_L2_DEFAULT_BYTES
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def l2_from_sysfs():
    """CPU 0's level-2 data or unified cache from sysfs, in bytes; None where it is not listed."""
    for index in sorted(CACHES.glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip()
                                 for name in ("level", "type", "size"))
        except OSError:
            continue
        if level == "2" and kind != "Instruction":
            units = {"K": 1024, "M": 1024 ** 2}
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return None


@pytest.fixture(scope="module")
def read(tmp_path_factory):
    """{"libc", "sysfs", "l2": bytes} as tests/c/test_caches.c prints them."""
    run = run_c_test("test_caches", tmp_path_factory.mktemp("caches"), timeout=30)
    assert run.returncode == 0, run.stderr
    return {name: int(value) for name, value in (line.split() for line in run.stdout.split("\n")
                                                  if line)}


def test_the_header_reads_sysfs(read):
    assert read["sysfs"] == (l2_from_sysfs() or 0)


def test_the_sources_agree(read):
    if read["libc"] <= 0 or not read["sysfs"]:
        pytest.skip("the C library or sysfs does not say")
    assert read["libc"] == read["sysfs"]


def test_the_l2_size_is_the_machines(read):
    expected = read["libc"] if read["libc"] > 0 else read["sysfs"] or DEFAULT_L2
    assert read["l2"] == expected
    assert _time_loop.L2_BYTES == expected
    assert 64 * 1024 <= expected <= 64 * 1024 ** 2


def test_the_sizes_derived_from_it():
    assert _time_loop.TN_C_BYTES == _time_loop.L2_BYTES // 2
    assert _time_loop.PROJECTION_CHUNK_BYTES == _time_loop.L2_BYTES // 2
    assert _time_loop.ROW_SPLIT_WEIGHT_BYTES == _time_loop.L2_BYTES


def test_python_m_cells_names_it():
    from cells.__main__ import describe_machine
    assert f"L2 {_time_loop.L2_BYTES // 1024} KiB a core" in describe_machine()
