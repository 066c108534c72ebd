import os
import sys

import numpy as np
import pytest

# Make the helper module tests/gru_reference.py importable as `gru_reference`.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=[False, True], ids=["reset_before", "lbr"])
def lbr(request):
    """linear_before_reset."""
    return request.param


@pytest.fixture(params=[False, True], ids=["b1", "b2"])
def two_biases(request):
    """False: b [3nOut] (input-side only); True: b [2, 3nOut]."""
    return request.param


@pytest.fixture(params=[np.float64, np.float32], ids=["f64", "f32"])
def dtype(request):
    return np.dtype(request.param)
