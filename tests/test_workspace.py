"""A time loop's workspace is consumed by its backward pass (every declared family alike).

The backward writes each step's gradients over the gates (and the GRU's hc) it has just read,
so that a training step needs no memory beyond the workspace; it leaves those buffers read-only
and a second backward on the same workspace is refused, never silently wrong.
"""
import numpy as np
import pytest

import cells
from cells import _families


def make(family, rng, dims):
    """Random arguments of a declared family (cells/_families/) and its consumed buffers."""
    args = tuple(rng.standard_normal(a.shape(dims)) for a in family.arguments)
    return args, family.consumed


# Every declared family and variant: (its declaration, time loop, backward, options).
FAMILIES = {f"{name}-{variant}": (family, getattr(cells, family.time_loop),
                                  getattr(cells, family.time_loop_bp), options)
            for name, family in _families.FAMILIES.items()
            for variant, (_, options) in family.variants.items()}
DIMS = _families.Dims(sL=4, bS=3, nIn=5, nOut=6)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seq_len,forward", [(None, True), (np.array([4, 0, 2]), False)])
def test_backward_consumes_the_workspace(family, seq_len, forward):
    declared, loop, loop_bp, opts = FAMILIES[family]
    rng = np.random.default_rng(7)
    args, consumed = make(declared, rng, DIMS)
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
    declared, loop, loop_bp, opts = FAMILIES[family]
    rng = np.random.default_rng(8)
    args, _ = make(declared, rng, DIMS)
    dLdh = rng.standard_normal((4, 3, 6))
    lengths = np.array([4, 1, 3])
    for made, now, option in (({}, {"seq_len": lengths}, "seq_len"),
                              ({"seq_len": lengths}, {"seq_len": lengths[::-1].copy()}, "seq_len"),
                              ({}, {"forward": False}, "forward")):
        ws = loop(*args, return_workspace=True, **opts, **made)[-1]
        assert ws.seq_len is None if "seq_len" not in made else np.array_equal(ws.seq_len, lengths)
        with pytest.raises(ValueError, match=f"workspace: it was made with {option}="):
            loop_bp(*args, dLdh, workspace=ws, **opts, **now)

