"""The low-precision kernels of prepared nets (include/cells/lowp.h), in C
(tests/c/test_lowp.c): the int8 quantization of weights and activations and the bfloat16
rounding against their formulas, the packed layouts (padding included), and the products of
every instruction set the CPU runs bit for bit against scalar references (int8 exact; bfloat16
against the model of vdpbf16ps, itself checked against the instruction where the CPU has it),
for M 0..7 and 16, partial panels, runs of panels alone, a bias and accumulation into C.

Compiled with the flags setup.py gives the extensions; skipped where no C compiler is found."""
from c_programs import run_c_test


def test_lowp_kernels(tmp_path):
    run = run_c_test("test_lowp", tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 failures" in run.stdout, run.stdout
