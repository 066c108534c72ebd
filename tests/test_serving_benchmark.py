"""benchmarks/serving.py --lowp --quick, the smoke run of the low-precision benchmark: every
contender (cells' float32, int8 and bfloat16 nets, ONNX Runtime's DynamicQuantizeLSTM, torch's
dynamically quantized LSTM and GRU, the NumPy bfloat16 emulation) builds and lands in the tables
and the JSON, cells' nets within their tolerance of the float64 reference, the peers' errors
measured. The timings themselves are not checked."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def serving(monkeypatch):
    """benchmarks/serving.py as a module (a script, not a package), with its directory on
    sys.path for its own imports (harness, peak, numpy_cells)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("serving", BENCHMARKS / "serving.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lowp_quick_run_measures_every_contender(serving, monkeypatch, tmp_path, capsys):
    def no_peak(*args, **kwargs):   # the FMA peak compiles and runs a C loop: not checked here
        raise RuntimeError("skipped by the test")

    monkeypatch.setattr(serving.peak, "fma_peak", no_peak)
    out = tmp_path / "lowp.json"
    assert serving.main(["--lowp", "--quick", "--rounds", "1", "--json", str(out)]) == 0
    report = capsys.readouterr().out
    results = json.loads(out.read_text())

    accuracy = {(r["family"], r["contender"]): r for r in results["accuracy"]}
    for family in ("lstm", "gru"):
        for name in serving.LOWP_NETS:
            assert 0 < accuracy[family, name]["max"] < serving.LOWP_TOLERANCE
        # the peers' errors are measured (how large depends on the CPU), never held to it
        for name in ("torch qint8", "bf16 rounding"):
            assert 0 < accuracy[family, name]["max"] < np.inf
    assert ("lstm", "ORT-DQ") in accuracy and ("gru", "ORT-DQ") not in accuracy
    assert 0 < accuracy["lstm", "ORT-DQ"]["max"] < np.inf
    # torch qint8 is quantized (float32 would be within 1e-6), cells float32 is float32.
    assert accuracy["lstm", "torch qint8"]["max"] > 1e-3
    assert accuracy["lstm", "cells float32"]["max"] < 1e-5

    timed = {(r["B"], r["threads"], r["contender"]) for r in results["rows"]}
    assert {(1, 1, name) for name in serving.SPEED_COLUMNS} <= timed
    assert {(8, 2, name) for name in serving.LOWP_NETS} <= timed
    assert {t["target"] for t in results["targets"]} == {
        "int8, one step H=128, vs ORT-DQ"}
    assert len(results["accuracy_targets"]) == 5   # 3 for the LSTM, 2 for the GRU (no ORT-DQ)
    assert "### The issue's targets: speed" in report and "| cells bf16 |" in report
