"""Every result of several arrays is a NamedTuple: still a tuple in the documented order, with
the names the function's docstring gives, of a class cells exports."""
import re

import numpy as np
import pytest

import cells

sL, bS, nIn, nOut = 3, 2, 4, 3
rng = np.random.default_rng(7)


def r(*shape):
    return 0.5 * rng.standard_normal(shape)


x3, x2, h, c = r(sL, bS, nIn), r(bS, nIn), r(bS, nOut), r(bS, nOut)
dh3, dh2 = r(sL, bS, nOut), r(bS, nOut)
gru_w = r(nIn, 3 * nOut), r(nOut, 3 * nOut), r(2, 3 * nOut)
block_w = r(nIn + nOut, 2 * nOut), r(nIn + nOut, nOut), r(2 * nOut), r(nOut)
lstm_w = r(nIn, 4 * nOut), r(nOut, 4 * nOut), r(4 * nOut)
lltm_w = r(3 * nOut, nOut + nIn), r(3 * nOut)


def lltm_backward():
    new_h, new_cell, i, o, n, X, z = cells.lltm_forward(x2, *lltm_w, h, c)
    return cells.lltm_backward(dh2, r(bS, nOut), new_cell, i, o, n, X, z, lltm_w[0])


# (function whose docstring names the fields, a call returning its result)
CASES = {
    "gruCell": (cells.gruCell, lambda: cells.gruCell(x2, h, *gru_w)),
    "gruCellBp": (cells.gruCellBp, lambda: cells.gruCellBp(x2, h, *gru_w, dh2)),
    "gruTimeLoop-ws": (cells.gruTimeLoop,
                       lambda: cells.gruTimeLoop(x3, h, *gru_w, return_workspace=True)),
    "gruTimeLoopBp": (cells.gruTimeLoopBp, lambda: cells.gruTimeLoopBp(x3, h, *gru_w, dh3)),
    "gruBlockCell": (cells.gruBlockCell, lambda: cells.gruBlockCell(x2, h, *block_w)),
    "gruBlockCellBp": (cells.gruBlockCellBp,
                       lambda: cells.gruBlockCellBp(x2, h, *block_w, dh2, None, dh2, dh2)),
    "lstmLayerCell": (cells.lstmLayerCell, lambda: cells.lstmLayerCell(x2, *lstm_w, h, c)),
    "lstmLayerCellBp": (cells.lstmLayerCellBp,
                        lambda: cells.lstmLayerCellBp(x2, *lstm_w, h, c, dh2, None)),
    "lstmLayerTimeLoop": (cells.lstmLayerTimeLoop,
                          lambda: cells.lstmLayerTimeLoop(x3, *lstm_w, h, c)),
    "lstmLayerTimeLoop-ws": (cells.lstmLayerTimeLoop,
                             lambda: cells.lstmLayerTimeLoop(x3, *lstm_w, h, c,
                                                             return_workspace=True)),
    "lstmLayerTimeLoopBp": (cells.lstmLayerTimeLoopBp,
                            lambda: cells.lstmLayerTimeLoopBp(x3, *lstm_w, h, c, dh3)),
    "lltm_forward": (cells.lltm_forward, lambda: cells.lltm_forward(x2, *lltm_w, h, c)),
    "lltm_backward": (cells.lltm_backward, lltm_backward),
    "lltmTimeLoop": (cells.lltmTimeLoop, lambda: cells.lltmTimeLoop(x3, *lltm_w, h, c)),
    "lltmTimeLoop-ws": (cells.lltmTimeLoop,
                        lambda: cells.lltmTimeLoop(x3, *lltm_w, h, c, return_workspace=True)),
    "lltmTimeLoopBp": (cells.lltmTimeLoopBp, lambda: cells.lltmTimeLoopBp(x3, *lltm_w, h, c, dh3)),
}


def documented_fields(doc, class_name):
    """The fields the docstring's (numpydoc) Returns section lists for ClassName: the entry is the
    class's name on its own line with ``(name, name, ...)`` at the start of the line below."""
    returns = doc.split("Returns\n")[1].split("Raises\n")[0]
    match = re.search(rf"^\s*{class_name}\n\s+``\(([^)]*)\)``", returns, re.M)
    assert match, f"the docstring's Returns section does not list {class_name}'s fields"
    return tuple(name.strip() for name in match.group(1).split(","))


@pytest.mark.parametrize("case", CASES)
def test_result_is_the_documented_named_tuple(case):
    function, call = CASES[case]
    result = call()
    kind = type(result)
    assert isinstance(result, tuple)
    assert getattr(cells, kind.__name__) is kind and kind.__name__ in cells.__all__
    assert kind._fields == documented_fields(function.__doc__, kind.__name__)
    *unpacked, = result
    assert len(unpacked) == len(kind._fields)
    for k, (name, a) in enumerate(zip(kind._fields, unpacked)):
        assert getattr(result, name) is a and result[k] is a


def test_cell_and_time_loop_backward_share_their_class():
    assert type(CASES["gruCellBp"][1]()) is type(CASES["gruTimeLoopBp"][1]()) is cells.GruGrads
    assert (type(CASES["lstmLayerCellBp"][1]()) is type(CASES["lstmLayerTimeLoopBp"][1]())
            is cells.LstmGrads)
