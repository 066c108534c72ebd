"""A time loop's workspace is consumed by its backward pass (GRU, LSTM, LLTM alike).

The backward writes each step's gradients over the gates (and the GRU's hc) it has just read,
so that a training step needs no memory beyond the workspace; it leaves those buffers read-only
and a second backward on the same workspace is refused, never silently wrong.
"""
import numpy as np
import pytest

import cells


def _gru(rng, sL, bS, nIn, nOut):
    args = (rng.standard_normal((sL, bS, nIn)), rng.standard_normal((bS, nOut)),
            rng.standard_normal((nIn, 3 * nOut)), rng.standard_normal((nOut, 3 * nOut)),
            rng.standard_normal((2, 3 * nOut)))
    return args, ("gates", "hc")


def _lstm(rng, sL, bS, nIn, nOut):
    args = (rng.standard_normal((sL, bS, nIn)), rng.standard_normal((nIn, 4 * nOut)),
            rng.standard_normal((nOut, 4 * nOut)), rng.standard_normal(4 * nOut),
            rng.standard_normal((bS, nOut)), rng.standard_normal((bS, nOut)))
    return args, ("gates",)


def _lltm(rng, sL, bS, nIn, nOut):
    args = (rng.standard_normal((sL, bS, nIn)), rng.standard_normal((3 * nOut, nOut + nIn)),
            rng.standard_normal(3 * nOut), rng.standard_normal((bS, nOut)),
            rng.standard_normal((bS, nOut)))
    return args, ("gates",)


FAMILIES = {
    "gru": (_gru, cells.gruTimeLoop, cells.gruTimeLoopBp, {"linear_before_reset": True}),
    "gru_rb": (_gru, cells.gruTimeLoop, cells.gruTimeLoopBp, {"linear_before_reset": False}),
    "lstm": (_lstm, cells.lstmLayerTimeLoop, cells.lstmLayerTimeLoopBp, {}),
    "lltm": (_lltm, cells.lltmTimeLoop, cells.lltmTimeLoopBp, {}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seq_len,forward", [(None, True), (np.array([4, 0, 2]), False)])
def test_backward_consumes_the_workspace(family, seq_len, forward):
    make, loop, loop_bp, opts = FAMILIES[family]
    rng = np.random.default_rng(7)
    args, consumed = make(rng, 4, 3, 5, 6)
    dLdh = rng.standard_normal((4, 3, 6))
    opts = dict(opts, seq_len=seq_len, forward=forward)
    out = loop(*args, return_workspace=True, **opts)
    ws = out[-1]
    h = out[0].copy()
    before = {name: getattr(ws, name) for name in consumed if getattr(ws, name) is not None}
    assert all(a.flags.writeable for a in before.values())

    grads = loop_bp(*args, dLdh, workspace=ws, **opts)
    expected = loop_bp(*args, dLdh, **opts)   # recomputes the forward pass: nothing consumed
    for g, e in zip(grads, expected):
        if g is not None:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ws.h, h)     # the outputs are only read
    assert all(not a.flags.writeable for a in before.values())
    with pytest.raises(ValueError, match=r"workspace\.gates is read-only: this workspace was "
                                         r"used by .*TimeLoopBp already"):
        loop_bp(*args, dLdh, workspace=ws, **opts)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_workspace_of_other_options_is_refused(family):
    """A workspace records seq_len and forward; a backward with other ones (which would read
    the wrong steps' gates) is a ValueError naming the option, not a wrong gradient."""
    make, loop, loop_bp, opts = FAMILIES[family]
    rng = np.random.default_rng(8)
    args, _ = make(rng, 4, 3, 5, 6)
    dLdh = rng.standard_normal((4, 3, 6))
    lengths = np.array([4, 1, 3])
    for made, now, option in (({}, {"seq_len": lengths}, "seq_len"),
                              ({"seq_len": lengths}, {"seq_len": lengths[::-1].copy()}, "seq_len"),
                              ({}, {"forward": False}, "forward")):
        ws = loop(*args, return_workspace=True, **opts, **made)[-1]
        assert ws.seq_len is None if "seq_len" not in made else np.array_equal(ws.seq_len, lengths)
        with pytest.raises(ValueError, match=f"workspace: it was made with {option}="):
            loop_bp(*args, dLdh, workspace=ws, **opts, **now)

