"""The packed-panel gemm of include/cells/panel.h, which every time loop's per-step products
run on, and its gemm_tn, which every backward's weight gradients run on, tested in C against a
long-double triple loop (tests/c/test_panel.c: both dtypes, both layouts of B, every register
blocking this CPU runs, NaN around every operand so that any read out of bounds that reaches C
shows, sentinels around C so that any write out of bounds shows).

The test program is compiled with the flags setup.py gives the extensions; it is skipped where
no C compiler is found. A second build runs under AddressSanitizer with every buffer at its
exact size: it sees a read out of bounds whose value never reaches C (gemm_tn reads B in place:
a vector load past B's last column would be one)."""
from c_programs import run_c_test


def test_panel_gemm_against_a_reference(tmp_path):
    run = run_c_test("test_panel", tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout[-3000:]


def test_panel_gemm_reads_nothing_outside_its_operands(tmp_path, monkeypatch):
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=0")
    run = run_c_test("test_panel", tmp_path, timeout=300,
                     extra_flags=("-O1", "-g", "-fsanitize=address,undefined",
                                  "-fno-sanitize-recover=all", "-DGUARD=0"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout[-3000:]
