"""The instruction-set switch (cells/_isa.py, include/cells/isa.h): CELLS_ISA read at import,
checked against the CPU with a named error, reported by cells.instruction_set() and
`python -m cells`; and what the paths promise each other. A prepared net gives the same bits
on the AVX-512 and AVX2 paths, every family but the LayerNorm ones (whose moments are summed in
vectors of each path's width), for float32, float64, int8 and bfloat16 weights; the baseline
path, without FMA, rounds otherwise. (The families' values on every path against their
references: the test files that use conftest.py's each_instruction_set.)"""
import os
import subprocess
import sys

import numpy as np
import pytest
from test_prepared import CASES, make_case, nIn, random_state

import cells
from cells import _isa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# haste's families (tests/test_haste_families.py has their arguments; it needs torch)
HASTE_FAMILIES = ("layer_norm_lstm", "layer_norm_gru", "indrnn")


def run_python(code, isa=None):
    """`code` run by a fresh interpreter (cells imported anew), CELLS_ISA set to `isa` or
    unset."""
    env = {k: v for k, v in os.environ.items() if k != "CELLS_ISA"}
    if isa is not None:
        env["CELLS_ISA"] = isa
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_default_is_the_best_the_cpu_runs():
    run = run_python("import cells; print(cells.instruction_set())")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [_isa.available()[0]]
    assert _isa.available()[-1] == "generic"


@pytest.mark.parametrize("isa", _isa.available())
def test_cells_isa_chooses_the_path(isa):
    run = run_python("import cells; print(cells.instruction_set())", isa)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [isa]


def test_a_path_the_cpu_cannot_run_is_a_named_error():
    run = run_python("import cells", "avx1024")
    assert run.returncode != 0
    assert "ValueError: CELLS_ISA: expected one of 'avx512', 'avx2', 'generic', got 'avx1024'" \
        in run.stderr
    missing = [name for name in _isa.PATHS if name not in _isa.available()]
    for name in missing:   # on a CPU without AVX-512 (or AVX2)
        run = run_python("import cells", name)
        assert f"ValueError: CELLS_ISA='{name}': this CPU has no {_isa.NEEDS[name]}" in run.stderr
    with pytest.raises(ValueError, match="isa: expected one of"):
        with _isa.forced("AVX2"):
            pass


def test_python_m_cells_names_the_path():
    from cells.__main__ import describe_machine
    assert f"instruction set: {cells.instruction_set()}" in describe_machine()


def test_forced_restores_the_path():
    before = cells.instruction_set()
    with _isa.forced("generic"):
        assert cells.instruction_set() == "generic"
    assert cells.instruction_set() == before


def outputs_on_each_path(net, x, state):
    """{path: (h, *state)} of one call of `net` on every path this CPU runs."""
    outputs = {}
    for isa in _isa.available():
        with _isa.forced(isa):
            h, after = net(x, state)
        outputs[isa] = (h, *after)
    return outputs


@pytest.mark.skipif("avx2" not in _isa.available()[1:], reason="needs an AVX-512 CPU")
@pytest.mark.parametrize("weights", ["float64", "float32", "int8", "bfloat16"])
@pytest.mark.parametrize("case", CASES)
def test_a_prepared_net_gives_the_same_bits_on_avx512_and_avx2(case, weights):
    dtype = np.float64 if weights == "float64" else np.float32
    net = make_case(case, dtype, weights=weights if weights in ("int8", "bfloat16") else None)[0]
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 20, nIn)).astype(dtype)
    outputs = outputs_on_each_path(net, x, random_state(net, 20, rng))
    for a, b in zip(outputs["avx512"], outputs["avx2"]):
        assert np.array_equal(a, b)
    # The baseline path, float weights: the same values to the dtype's rounding (no FMA: other
    # bits). With int8 or bfloat16 weights a last-bit difference in h can move the next step's
    # rounding of it by a step of bfloat16 or of the row's int8 scale: those are held to their
    # model's reference on every path instead (test_prepared_lowp.py).
    if weights in ("float64", "float32"):
        for a, b in zip(outputs["avx512"], outputs["generic"]):
            np.testing.assert_allclose(b, a, rtol=0,
                                       atol=1e-13 if dtype == np.float64 else 5e-6)


@pytest.mark.parametrize("weights", [None, "int8", "bfloat16"])
@pytest.mark.parametrize("family", HASTE_FAMILIES)
def test_haste_families_agree_on_every_path(family, weights):
    """IndRNN gives the same bits on AVX-512 and AVX2; with float32 weights, every path the
    same values to float32 rounding (the LayerNorm families' moments are sums in vectors of
    each path's width; the baseline has no FMA)."""
    haste = pytest.importorskip("test_haste_families")
    assert set(haste.PREPARE) == set(HASTE_FAMILIES)
    a = haste.draw(family, np.float32, seed=4, nOut=40)
    prepare, names = haste.PREPARE[family]
    net = prepare(*(a[n] for n in names), weights=weights)
    outputs = outputs_on_each_path(net, a["x"], net.State(*(a[n] for n in ("hI", "cI")
                                                             if n in a)))
    best = outputs[_isa.available()[0]]
    for isa, got in outputs.items():
        for g, b in zip(got, best):
            if family == "indrnn" and isa == "avx2":
                assert np.array_equal(g, b)
            if weights is None:   # low precision: as in the test above
                np.testing.assert_allclose(g, b, rtol=0, atol=5e-6)
