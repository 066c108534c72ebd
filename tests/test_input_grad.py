"""input_grad=False on the LSTM's projected backward pass (tests/test_families.py runs every
declared family's without it): dL/dx is not computed (None), and every other gradient is exactly
the one of the full pass (the same arithmetic, one product fewer)."""
import numpy as np
import pytest

import cells

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


sL, bS, nIn, nOut = 4, 3, 5, 6
rng = np.random.default_rng(11)


def r(*shape):
    return 0.5 * rng.standard_normal(shape)


x, h0, c0, dLdh = r(sL, bS, nIn), r(bS, nOut), r(bS, nOut), r(sL, bS, nOut)
SEQ = dict(seq_len=np.array([4, 1, 3]), forward=False)
# Every declared family's backward runs without input_grad in tests/test_families.py; here the
# option that its shapes do not declare, the LSTM's projection.
BACKWARDS = {
    "lstm_projected": lambda **kw: cells.lstmLayerTimeLoopBp(
        x, r(nIn, 4 * nOut), r(2, 4 * nOut), r(4 * nOut), h0[:, :2], c0, dLdh[..., :2],
        Wproj=r(nOut, 2), **SEQ, **kw),
}


@pytest.mark.parametrize("family", BACKWARDS)
def test_without_input_grad(family):
    state = rng.bit_generator.state
    full = BACKWARDS[family]()
    rng.bit_generator.state = state   # the same random weights again
    partial = BACKWARDS[family](input_grad=False)
    assert type(partial) is type(full)
    assert full.dLdx.shape == x.shape and partial.dLdx is None
    for name, a, b in zip(full._fields[1:], full[1:], partial[1:]):
        if a is None:
            assert b is None, name
        else:
            np.testing.assert_array_equal(b, a, err_msg=name)


def test_input_grad_must_be_a_bool():
    with pytest.raises(TypeError, match="input_grad"):
        BACKWARDS["lstm_projected"](input_grad="no")
