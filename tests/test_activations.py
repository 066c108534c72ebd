"""The activations of include/cells/common.h (e^x, σ, tanh, elu in float and double, which every
family's gate math runs on) against libm in long double, in C (tests/c/test_activations.c):
e^x within 4 ulps relative, σ, tanh and elu within 4 ulps of 1 absolute (their documented
bounds), over their whole ranges, and finite beyond the clamps.

Compiled with the flags setup.py gives the extensions; skipped where no C compiler is found."""
from c_programs import run_c_test


def test_activations_against_libm(tmp_path):
    run = run_c_test("test_activations", tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\n0 failures" in run.stdout, run.stdout
