"""cells.convert's Keras converters against keras.layers.GRU (reset_after True and False) and
keras.layers.LSTM, Keras 3 on the torch backend (skipped when keras is not installed).

from_keras: a Keras layer with random weights; its get_weights(), converted, run in cells must
give the layer's outputs and final state. to_keras: random cells weights (a GRU bias [2, 3H]:
kept with reset_after=True, folded with reset_after=False), set into a layer, must give
cells' outputs.

Tolerances. float32: both sides err by a few float32 ulps per step, F32_FWD_TOL = 1e-5 (as
test_cross_frameworks.py). float64: Keras's default CPU path for reset_after=True and for the
LSTM is float64 throughout (measured ~2e-16), so F64_TOL; its generic cell for reset_after=False
runs its matmuls in float32 even for float64 weights (measured 8e-8),
so that case is held to F32_FWD_TOL.
"""
import os

import numpy as np
import pytest

import cells
from cells import convert
from gru_reference import F32_FWD_TOL, F64_TOL, assert_close

pytest.importorskip("torch")
os.environ["KERAS_BACKEND"] = "torch"  # read when keras is first imported
keras = pytest.importorskip("keras")
if keras.backend.backend() != "torch":
    pytest.skip("keras was imported with another backend", allow_module_level=True)

# Keras 3.15's torch backend calls np.array(tensor) in a way NumPy 2 deprecates; not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")

KINDS = ["gru_reset_after", "gru_reset_before", "lstm"]


def _tol(kind, dtype):
    if dtype == np.float32 or kind == "gru_reset_before":
        return F32_FWD_TOL
    return F64_TOL


def _layer(kind, H, dtype):
    options = dict(return_sequences=True, return_state=True, dtype=np.dtype(dtype).name)
    if kind == "lstm":
        return keras.layers.LSTM(H, **options)
    return keras.layers.GRU(H, reset_after=kind == "gru_reset_after", **options)


def _keras_run(layer, x, h0, c0):
    """layer on time-major x [sL, bS, nIn] from h0 (c0); returns (h [sL, bS, H], final h)."""
    states = [h0] if isinstance(layer, keras.layers.GRU) else [h0, c0]
    out, h_last, *_ = layer(x.transpose(1, 0, 2), initial_state=states)
    return keras.ops.convert_to_numpy(out).transpose(1, 0, 2), keras.ops.convert_to_numpy(h_last)


def _cells_run(kind, weights, x, h0, c0):
    """cells on the cells-layout `weights`; returns h [sL, bS, H]."""
    if kind == "lstm":
        return cells.lstmLayerTimeLoop(x, *weights, h0, c0)[0]
    return cells.gruTimeLoop(x, h0, *weights, linear_before_reset=kind == "gru_reset_after")


def _problem(seed, sL, bS, n_in, H, dtype):
    rng = np.random.default_rng(seed)
    return rng, tuple(a.astype(dtype) for a in (rng.normal(0.0, 1.0, (sL, bS, n_in)),
                                                rng.uniform(-0.9, 0.9, (bS, H)),
                                                rng.uniform(-1.5, 1.5, (bS, H))))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("kind", KINDS)
def test_from_keras_matches_keras(kind, dtype):
    sL, bS, n_in, H = 5, 3, 4, 3
    rng, (x, h0, c0) = _problem(9000 + KINDS.index(kind), sL, bS, n_in, H, dtype)
    layer = _layer(kind, H, dtype)
    layer.build((bS, sL, n_in))
    keras_weights = [rng.normal(0.0, 0.5, w.shape).astype(dtype) for w in layer.get_weights()]
    layer.set_weights(keras_weights)
    h_keras, h_last = _keras_run(layer, x, h0, c0)

    if kind == "lstm":
        weights = convert.lstm_from_keras(*keras_weights)
    else:
        weights = convert.gru_from_keras(*keras_weights, reset_after=kind == "gru_reset_after")
    h = _cells_run(kind, weights, x, h0, c0)
    assert_close(h, h_keras, _tol(kind, dtype), "h", dtype)
    assert_close(h[-1], h_last, _tol(kind, dtype), "final h", dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("kind", KINDS)
def test_to_keras_matches_cells(kind, dtype):
    sL, bS, n_in, H = 4, 2, 5, 3
    rng, (x, h0, c0) = _problem(9100 + KINDS.index(kind), sL, bS, n_in, H, dtype)
    n = 4 if kind == "lstm" else 3
    bias_shape = (n * H,) if kind == "lstm" else (2, 3 * H)
    weights = tuple(rng.normal(0.0, 0.5, s).astype(dtype)
                    for s in ((n_in, n * H), (H, n * H), bias_shape))
    if kind == "lstm":
        keras_weights = convert.lstm_to_keras(*weights)
    else:
        lbr = kind == "gru_reset_after"
        keras_weights = convert.gru_to_keras(*weights, linear_before_reset=lbr)
        assert keras_weights[2].shape == ((2, 3 * H) if lbr else (3 * H,))
    layer = _layer(kind, H, dtype)
    layer.build((bS, sL, n_in))
    layer.set_weights(keras_weights)
    h_keras, _ = _keras_run(layer, x, h0, c0)
    assert_close(_cells_run(kind, weights, x, h0, c0), h_keras, _tol(kind, dtype), "h", dtype)
