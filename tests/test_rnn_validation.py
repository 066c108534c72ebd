"""Bad input to the vanilla-RNN functions is rejected with ValueError (shapes, values) / TypeError
(types), naming the argument and, for shape errors, quoting the given shape as Python prints
the tuple."""
import re

import numpy as np
import pytest

import cells

bS, N_IN, H, SL = 3, 5, 4, 2
FNS = ["rnnCell", "rnnCellBp", "rnnTimeLoop", "rnnTimeLoopBp"]


def _seq(fn):
    return fn.startswith("rnnTimeLoop")


def _args(seq, dtype=np.float64):
    rng = np.random.default_rng(0)
    return dict(
        x=rng.normal(size=(SL, bS, N_IN) if seq else (bS, N_IN)).astype(dtype),
        hI=rng.normal(size=(bS, H)).astype(dtype),
        Wx=rng.normal(size=(N_IN, H)).astype(dtype),
        Wh=rng.normal(size=(H, H)).astype(dtype),
        b=rng.normal(size=(2, H)).astype(dtype),
    )


def _call(fn, a, dtype=np.float64, **kw):
    """Call fn with the arrays positionally (API order) and the upstream gradient it needs."""
    f = getattr(cells, fn)
    if fn == "rnnCellBp":
        return f(*a.values(), np.ones((bS, H), dtype), **kw)
    if fn == "rnnTimeLoopBp":
        return f(*a.values(), np.ones((SL, bS, H), dtype), **kw)
    return f(*a.values(), **kw)


def _names(msg, name):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", msg) is not None


def _check(excinfo, candidates):
    """The message names one of the candidate arguments, with that argument's shape (when one is
    given)."""
    msg = str(excinfo.value)
    for name, shape in candidates:
        if _names(msg, name) and (shape is None or str(tuple(shape)) in msg):
            return
    raise AssertionError(f"message {msg!r} does not name any of {candidates}")


@pytest.mark.parametrize("fn", FNS)
def test_valid_calls_work(fn):
    """Every failure below is caused by the one change it makes."""
    for activation in ("tanh", "relu"):
        for b in (np.ones(H), np.ones((2, H))):
            _call(fn, dict(_args(_seq(fn)), b=b), activation=activation)
        _call(fn, _args(_seq(fn), np.float32), np.float32, activation=activation)


SHAPE_CASES = [
    # (argument, new shape (the x shapes are for the cell; a time step is prepended for
    # sequences), arguments the message may blame)
    ("x", (N_IN,), ["x"]),                          # rank
    ("x", (1, 1, bS, N_IN), ["x"]),
    ("x", (bS, N_IN + 1), ["x", "Wx"]),             # nIn mismatch
    ("Wx", (N_IN + 1, H), ["Wx", "x"]),
    ("Wx", (N_IN, H + 1), ["Wx", "Wh", "hI"]),
    ("Wx", (N_IN * H,), ["Wx"]),
    ("Wh", (H, H + 1), ["Wh"]),
    ("Wh", (H + 1, H), ["Wh", "hI"]),
    ("Wh", (H, H, 1), ["Wh"]),
    ("Wh", (H,), ["Wh"]),
    ("b", (H + 1,), ["b"]),
    ("b", (3, H), ["b"]),
    ("b", (2, H + 1), ["b"]),
    ("b", (2, 2, H), ["b"]),
    ("b", (), ["b"]),
    ("hI", (bS - 1, H), ["hI", "x"]),               # batch mismatch
    ("hI", (bS, H + 1), ["hI", "Wh", "Wx"]),        # nOut mismatch
    ("hI", (H,), ["hI"]),
    ("hI", (1, bS, H), ["hI"]),
]


@pytest.mark.parametrize("name,shape,blame", SHAPE_CASES)
@pytest.mark.parametrize("fn", FNS)
def test_shape_errors(fn, name, shape, blame):
    a = _args(_seq(fn))
    if name == "x" and _seq(fn):
        shape = (SL,) + shape
    a[name] = np.zeros(shape)
    with pytest.raises(ValueError) as ei:
        _call(fn, a)
    _check(ei, [(n, a[n].shape) for n in blame])


@pytest.mark.parametrize("shape", [(bS, H + 1), (bS + 1, H), (H,), (1, bS, H)])
def test_cell_bp_upstream_shape(shape):
    with pytest.raises(ValueError) as ei:
        cells.rnnCellBp(*_args(False).values(), np.ones(shape))
    _check(ei, [("dLdh", shape)])


@pytest.mark.parametrize("name,shape", [
    ("dLdh", (SL + 1, bS, H)), ("dLdh", (SL, bS, H + 1)), ("dLdh", (bS, H)),
    ("dLdhLast", (bS, H + 1)), ("dLdhLast", (1, bS, H)), ("dLdhLast", (bS + 1, H)),
])
def test_time_loop_bp_upstream_shapes(name, shape):
    grads = {"dLdh": None, "dLdhLast": None, name: np.ones(shape)}
    with pytest.raises(ValueError) as ei:
        cells.rnnTimeLoopBp(*_args(True).values(), grads["dLdh"], dLdhLast=grads["dLdhLast"])
    _check(ei, [(name, shape)])


@pytest.mark.parametrize("name", ["x", "hI", "Wx", "Wh", "b"])
@pytest.mark.parametrize("fn", FNS)
def test_dtype_errors(fn, name):
    """An integer array, a float32 array among float64 ones, a list, None: TypeError naming the
    argument. Nothing is converted."""
    base = _args(_seq(fn))
    for bad in (base[name].astype(np.int64), base[name].astype(np.float32),
                base[name].astype(np.float16), base[name].tolist(), None):
        with pytest.raises(TypeError) as ei:
            _call(fn, dict(base, **{name: bad}))
        _check(ei, [(name, None)])


@pytest.mark.parametrize("fn", ["rnnCellBp", "rnnTimeLoopBp"])
def test_upstream_gradient_dtype_errors(fn):
    a = _args(_seq(fn))
    shape = (SL, bS, H) if _seq(fn) else (bS, H)
    for bad in (np.ones(shape, np.float32), np.ones(shape, int), np.ones(shape).tolist()):
        with pytest.raises(TypeError) as ei:
            getattr(cells, fn)(*a.values(), bad)
        _check(ei, [("dLdh", None)])
    if fn == "rnnTimeLoopBp":
        with pytest.raises(TypeError) as ei:
            cells.rnnTimeLoopBp(*a.values(), None, dLdhLast=np.ones((bS, H), np.float32))
        _check(ei, [("dLdhLast", None)])


@pytest.mark.parametrize("bad", ["sigmoid", "Tanh", "RELU", "", None, 1])
@pytest.mark.parametrize("fn", FNS)
def test_bad_activation(fn, bad):
    with pytest.raises(ValueError) as ei:
        _call(fn, _args(_seq(fn)), activation=bad)
    assert _names(str(ei.value), "activation") and repr(bad) in str(ei.value)


@pytest.mark.parametrize("bad, error, match", [
    (np.array([1, 2]), ValueError, r"seq_len.*\(2,\)"),
    (np.array([1, 2, 3]), ValueError, r"seq_len.*\[0, sL=2\].*3"),
    (np.array([1, -1, 2]), ValueError, r"seq_len.*-1"),
    (np.array([1.0, 2.0, 2.0]), TypeError, r"seq_len.*float64"),
    ([1, 2, 2], TypeError, r"seq_len.*list"),
])
@pytest.mark.parametrize("fn", ["rnnTimeLoop", "rnnTimeLoopBp"])
def test_bad_seq_len(fn, bad, error, match):
    with pytest.raises(error, match=match):
        _call(fn, _args(True), seq_len=bad)


@pytest.mark.parametrize("option", ["forward", "return_workspace"])
def test_bad_flags(option):
    with pytest.raises(TypeError, match=option):
        _call("rnnTimeLoop", _args(True), **{option: "yes"})
    if option == "forward":
        with pytest.raises(TypeError, match=option):
            _call("rnnTimeLoopBp", _args(True), forward=1)


def test_workspace_of_another_kind_is_a_type_error():
    a = _args(True)
    gru_ws = cells.gruTimeLoop(a["x"], a["hI"], np.zeros((N_IN, 3 * H)), np.zeros((H, 3 * H)),
                               np.zeros(3 * H), return_workspace=True)[1]
    for bad in (gru_ws, (a["x"],), "ws"):
        with pytest.raises(TypeError, match="workspace"):
            _call("rnnTimeLoopBp", a, workspace=bad)
