"""The packed-panel gemm of include/cells/panel.h, which every time loop's per-step products
run on, tested in C against a long-double triple loop (tests/c/test_panel.c: both dtypes, both
layouts of B, every register blocking this CPU runs, NaN around every operand so that any read
out of bounds shows, sentinels around C so that any write out of bounds shows).

The test program is compiled with the flags setup.py gives the extensions; it is skipped where
no C compiler is found."""
from c_programs import run_c_test


def test_panel_gemm_against_a_reference(tmp_path):
    run = run_c_test("test_panel", tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout[-3000:]
