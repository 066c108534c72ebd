"""The shape checks that cells._validate.arguments builds from a family's declaration
(cells/_families/), for the faces that use it: every state and weight of a wrong shape is a
ValueError naming it, its expected shape as a tuple and in the dimensions' names, and the
shape given. The names are written out here, from the API's documented shapes, not read from
the declarations."""
import re

import numpy as np
import pytest

import cells
from cells._families import FAMILIES, Dims

DIMS = Dims(sL=3, bS=2, nIn=4, nOut=5)

# Each face's states and weights, as its docstring spells their shapes.
SHAPES = {
    "gru": {"hI": "[bS, nOut]", "Wx": "[nIn, 3*nOut]", "Wh": "[nOut, 3*nOut]",
            "b": "[2, 3*nOut]"},
    "rnn": {"hI": "[bS, nOut]", "Wx": "[nIn, nOut]", "Wh": "[nOut, nOut]", "b": "[2, nOut]"},
    "layer_norm_lstm": {"hI": "[bS, nOut]", "cI": "[bS, nOut]", "Wx": "[nIn, 4*nOut]",
                        "Wh": "[nOut, 4*nOut]", "b": "[4*nOut]", "gamma": "[2, 4*nOut]",
                        "gamma_h": "[nOut]", "beta_h": "[nOut]"},
    "layer_norm_gru": {"hI": "[bS, nOut]", "Wx": "[nIn, 3*nOut]", "Wh": "[nOut, 3*nOut]",
                       "b": "[3*nOut]", "bh": "[3*nOut]", "gamma": "[2, 3*nOut]"},
    "indrnn": {"hI": "[bS, nOut]", "Wx": "[nIn, nOut]", "u": "[nOut]", "b": "[nOut]"},
}
# A bias whose first dimension may be left out: its rows are summands.
ROWS = {"gru": "b", "rnn": "b"}
CASES = [(family, name) for family, shapes in SHAPES.items() for name in shapes]


def size(expression):
    """A size of SHAPES at DIMS: "3*nOut" -> 15."""
    factor, _, name = expression.rpartition("*")
    return int(factor or 1) * (int(name) if name.isdigit() else getattr(DIMS, name))


def expected_shape(meaning):
    return tuple(size(s) for s in meaning.strip("[]").split(", "))


def call(family, **changed):
    """The family's time loop on random arrays of DIMS, `changed` replacing some."""
    declared = FAMILIES[family]
    rng = np.random.default_rng(7)
    arrays = {name: changed.get(name, rng.standard_normal(shape))
              for name, shape in declared.shapes(DIMS).items()}
    options = next(iter(declared.variants.values()))[1]
    return getattr(cells, declared.time_loop)(*arrays.values(), **options)


@pytest.mark.parametrize("family", SHAPES)
def test_the_checked_faces_run_their_declared_shapes(family):
    h = call(family)
    assert (h[0] if isinstance(h, tuple) else h).shape == (DIMS.sL, DIMS.bS, DIMS.nOut)


@pytest.mark.parametrize("family, name", CASES)
def test_a_wrong_shape_names_the_argument_and_its_expected_shape(family, name):
    meaning = SHAPES[family][name]
    expected = expected_shape(meaning)
    # One size off: the batch rows of a state (its columns give nOut for the first), the last
    # dimension of a weight.
    given = (expected[0] + 1,) + expected[1:] if name in ("hI", "cI") else expected[:-1] + (
        expected[-1] + 1,)
    if name == ROWS.get(family):
        message = (f"{name}: expected shape {expected[1:]} = [{meaning[4:]} or {expected} = "
                   f"{meaning} (rows bx, bh), got {given}")
    else:
        origin = " (bS from x)" if name == "hI" else ""
        message = f"{name}: expected shape {expected} = {meaning}{origin}, got {given}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(family, **{name: np.zeros(given)})


@pytest.mark.parametrize("family", sorted(ROWS))
def test_a_bias_of_one_row_is_accepted(family):
    b = ROWS[family]
    G = expected_shape(SHAPES[family][b])[1:]
    call(family, **{b: np.zeros(G)})
