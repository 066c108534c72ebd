"""The activations of include/cells/common.h (e^x, σ, tanh, elu in float and double, which every
family's gate math runs on) against libm in long double, in C (tests/c/test_activations.c):
e^x within 4 ulps relative, σ, tanh and elu within 4 ulps of 1 absolute (their documented
bounds), over their whole ranges, and finite beyond the clamps.

Compiled with the flags setup.py gives the extensions; skipped where no C compiler is found."""
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-O3", "-fno-wrapv", "-fno-trapping-math"]   # setup.py's EXTRA_COMPILE_ARGS


def test_activations_against_libm(tmp_path):
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    exe = tmp_path / "test_activations"
    subprocess.run([*cc, *FLAGS, "-I", str(ROOT / "include"),
                    str(ROOT / "tests/c/test_activations.c"), "-o", str(exe), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\n0 failures" in run.stdout, run.stdout
