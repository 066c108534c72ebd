"""The packed-panel gemm of include/cells/panel.h, which every time loop's per-step products
run on, tested in C against a long-double triple loop (tests/c/test_panel.c: both dtypes, both
layouts of B, every register blocking this CPU runs, NaN around every operand so that any read
out of bounds shows, sentinels around C so that any write out of bounds shows).

The test program is compiled with the flags setup.py gives the extensions; it is skipped where
no C compiler is found."""
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-O3", "-fno-wrapv", "-fno-trapping-math"]   # setup.py's EXTRA_COMPILE_ARGS


def test_panel_gemm_against_a_reference(tmp_path):
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    exe = tmp_path / "test_panel"
    subprocess.run([*cc, *FLAGS, "-I", str(ROOT / "include"), str(ROOT / "tests/c/test_panel.c"),
                    "-o", str(exe), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout[-3000:]
